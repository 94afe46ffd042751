//! One PostgreSQL server: [`Postgres`], made by `initdb` (or, for a
//! standby, by `pg_basebackup` from its primary) and run as a child
//! process of the test.

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;
use rustix::process::Signal;

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::process::{self, EngineProcess, LOG_TAIL_LINES, Program};
use super::super::timeouts::{START_TIMEOUT, STOP_TIMEOUT};
use super::family::Family;
use super::programs::{BINDIR_VAR, Programs, RunAs};
use super::psql::{self, QUERY_TIMEOUT};
use super::{DATABASE, SUPERUSER, wire};
use crate::pki::TlsFiles;

/// Bound on each readiness or health question (asked again and again
/// while a server starts, so short).
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

/// What the kit adds to every server's `postgresql.conf` (a standby copies
/// them from its primary). See the [module docs](super).
const SETTINGS: &[(&str, &str)] = &[
    ("listen_addresses", "'127.0.0.1'"),
    ("fsync", "off"),
    ("shared_buffers", "'32MB'"),
    ("log_checkpoints", "off"),
    ("log_line_prefix", "'%m [%p] %q%u@%d '"),
];

/// One PostgreSQL 15 server on `127.0.0.1`, stopped when dropped: a
/// primary of its own ([`Postgres::start`]), or either server of a
/// [`PostgresPair`](super::PostgresPair).
#[derive(Debug)]
pub struct Postgres {
    port: u16,
    programs: Programs,
    run_as: RunAs,
    /// Whether the kit stopped the server's processes (SIGSTOP) and has
    /// not let them go on since.
    paused: bool,
    /// The postmaster, in a temporary directory holding `data/`, the Unix
    /// socket and `postgres.log`; stopped and removed on drop.
    process: EngineProcess,
}

impl Postgres {
    /// Makes a new cluster with `initdb` in a temporary directory, starts
    /// its server on a free port, waits until it lets the superuser in and
    /// creates the database [`DATABASE`].
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_POSTGRES_BINDIR`) when a program of PostgreSQL is
    /// missing, and [`EngineError::Io`] when the tests run as root and there
    /// is no user `postgres` to run it as: all name
    /// `scripts/install-engines`. [`EngineError::Setup`] when initdb or
    /// creating the database failed; [`EngineError::Exited`] or
    /// [`EngineError::NotReady`] when the server did not let the superuser
    /// in within [`START_TIMEOUT`], quoting its log.
    pub fn start() -> Result<Self, EngineError> {
        let mut postgres = Self::new(RunAs::detect()?, Programs::find()?)?;
        let mut initdb = postgres.command(&postgres.programs.initdb);
        initdb
            .arg("-D")
            .arg(postgres.data_dir())
            .args([
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--no-sync",
                "--no-instructions",
            ])
            .args(["--encoding=UTF8", "--locale=C"]);
        postgres.run_step("initdb", initdb)?;
        postgres.add_settings()?;
        postgres.start_on_a_free_port()?;
        postgres.psql_in("postgres", &format!("create database {DATABASE}"))?;
        Ok(postgres)
    }

    /// A standby of `primary`: a base backup of it (`pg_basebackup -R -X
    /// stream`), started on a free port, streaming from it.
    pub(super) fn standby_of(primary: &Self) -> Result<Self, EngineError> {
        let mut standby = Self::new(primary.run_as, primary.programs.clone())?;
        let mut basebackup = standby.command(&standby.programs.pg_basebackup);
        basebackup
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &primary.port.to_string(),
                "-U",
                SUPERUSER,
            ])
            .arg("-D")
            .arg(standby.data_dir())
            .args(["--write-recovery-conf", "--wal-method=stream"])
            .args(["--checkpoint=fast", "--no-sync"]);
        standby.run_step("pg_basebackup", basebackup)?;
        standby.start_on_a_free_port()?;
        Ok(standby)
    }

    fn new(run_as: RunAs, programs: Programs) -> Result<Self, EngineError> {
        let process = EngineProcess::new(Program::from_env("postgres", BINDIR_VAR))?
            // Fast shutdown: SIGTERM would wait for every client to leave.
            .with_stop_signal(Signal::INT);
        run_as.own(process.dir())?;
        Ok(Self {
            port: 0,
            programs,
            run_as,
            paused: false,
            process,
        })
    }

    /// The port, on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's address, `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `postgres://postgres@127.0.0.1:PORT/regent`: the superuser, no
    /// password (trust), the database [`DATABASE`].
    pub fn store_url(&self) -> String {
        self.url(DATABASE)
    }

    /// The URL of `database` on this server, as the superuser.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@{}/{database}", self.addr())
    }

    /// The directory of the server's Unix socket (`-k`), which is also its
    /// temporary directory: libpq's `host` for a connection over the
    /// socket.
    pub fn socket_dir(&self) -> &Path {
        self.process.dir()
    }

    /// The data directory; it survives [`Postgres::stop`] and
    /// [`Postgres::kill`] and is removed on drop.
    pub fn data_dir(&self) -> PathBuf {
        self.process.data_dir()
    }

    /// The log: the output of initdb (or pg_basebackup) and of every run
    /// of the server.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// The postmaster's PID while it runs; `None` once the kit stopped or
    /// killed it.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the kit started the server and has not stopped or killed it
    /// since.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Whether the server lets the superuser in now (a paused, stopped or
    /// starting server does not).
    pub fn is_healthy(&self) -> bool {
        wire::accepts(self.addr(), SUPERUSER, "postgres", REQUEST_TIMEOUT)
    }

    /// Runs `sql` as the superuser on the database [`DATABASE`] with
    /// `psql`, waiting at most [`QUERY_TIMEOUT`], and returns what it
    /// printed: tuples only, unaligned (`|` between fields, a newline
    /// between rows), without the last newline. Several statements
    /// separated by `;` run in one transaction unless they say otherwise.
    ///
    /// # Errors
    ///
    /// [`EngineError::Setup`] with psql's output when a statement failed
    /// (or psql could not connect); [`EngineError::Io`] of kind
    /// [`TimedOut`](std::io::ErrorKind::TimedOut) when there was no answer
    /// in time (psql is killed then).
    pub fn psql(&self, sql: &str) -> Result<String, EngineError> {
        self.psql_within(sql, QUERY_TIMEOUT)
    }

    /// [`Postgres::psql`], waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`].
    pub fn psql_within(&self, sql: &str, timeout: Duration) -> Result<String, EngineError> {
        let instance = self.instance();
        psql::run(
            &self.programs.psql,
            self.port,
            DATABASE,
            sql,
            timeout,
            &instance,
        )
    }

    fn psql_in(&self, database: &str, sql: &str) -> Result<String, EngineError> {
        let instance = self.instance();
        psql::run(
            &self.programs.psql,
            self.port,
            database,
            sql,
            QUERY_TIMEOUT,
            &instance,
        )
    }

    /// Turns TLS on, with the server certificate and key of `files` (for
    /// `127.0.0.1` and `localhost`) and its CA for client certificates,
    /// puts the `pg_hba.conf` lines `hba` before the kit's own (which let
    /// every role in without TLS), and restarts the server.
    ///
    /// ```text
    /// hostnossl all tls_only 127.0.0.1/32 reject
    /// hostssl   all cert_only 127.0.0.1/32 trust clientcert=verify-ca
    /// ```
    ///
    /// # Errors
    ///
    /// [`EngineError::Io`] when a file cannot be copied or written; then
    /// as [`Postgres::restart`].
    pub fn enable_tls(&mut self, files: &TlsFiles, hba: &[&str]) -> Result<(), EngineError> {
        let data = self.data_dir();
        let io = |action: &'static str| move |source| EngineError::Io { action, source };
        for (from, to) in [
            (files.server_cert(), "server.crt"),
            (files.server_key(), "server.key"),
            (files.ca_cert(), "ca.crt"),
        ] {
            let to = data.join(to);
            fs::copy(from, &to).map_err(io("copy a TLS file into a data directory"))?;
            // The server refuses a key that others may read.
            fs::set_permissions(&to, fs::Permissions::from_mode(0o600))
                .map_err(io("make a TLS file private"))?;
            self.run_as.own(&to)?;
        }
        let mut conf = OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .map_err(io("open postgresql.conf"))?;
        conf.write_all(
            b"\n# regent-testkit: TLS\nssl = on\nssl_cert_file = 'server.crt'\n\
              ssl_key_file = 'server.key'\nssl_ca_file = 'ca.crt'\n",
        )
        .map_err(io("turn TLS on in postgresql.conf"))?;
        let hba_path = data.join("pg_hba.conf");
        let old = fs::read_to_string(&hba_path).map_err(io("read pg_hba.conf"))?;
        let mut new = String::from("# regent-testkit: TLS\n");
        for line in hba {
            new.push_str(line);
            new.push('\n');
        }
        new.push_str(&old);
        fs::write(&hba_path, new).map_err(io("write pg_hba.conf"))?;
        self.restart()
    }

    /// Terminates (`pg_terminate_backend`) every client's connection to the
    /// database [`DATABASE`] but the kit's own, as an operator or a
    /// server's idle timeout would; returns how many it terminated.
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`].
    pub fn terminate_backends(&self) -> Result<usize, EngineError> {
        let count = self.psql(&format!(
            "select count(pg_terminate_backend(pid)) from pg_stat_activity \
             where datname = '{DATABASE}' and backend_type = 'client backend' \
             and pid <> pg_backend_pid()"
        ))?;
        Ok(count.trim().parse().unwrap_or(0))
    }

    /// Whether the server is a standby (`pg_is_in_recovery()`): true for a
    /// [`PostgresPair`](super::PostgresPair)'s standby until it is
    /// promoted.
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`].
    pub fn is_in_recovery(&self) -> Result<bool, EngineError> {
        Ok(self.psql("select pg_is_in_recovery()")?.trim() == "t")
    }

    /// Promotes a standby to a primary (`pg_ctl promote -w`) and returns
    /// once it takes writes.
    ///
    /// # Errors
    ///
    /// [`EngineError::Setup`] when pg_ctl failed: the server is not a
    /// standby, is not running, or did not finish its promotion within
    /// [`START_TIMEOUT`].
    pub fn promote(&mut self) -> Result<(), EngineError> {
        let mut promote = self.command(&self.programs.pg_ctl);
        promote
            .args(["promote", "--wait", "--timeout"])
            .arg(START_TIMEOUT.as_secs().to_string())
            .arg("-D")
            .arg(self.data_dir());
        self.run_step("pg_ctl", promote)
    }

    /// Stops every process of the server (SIGSTOP to the postmaster first,
    /// so that it forks no new one, then to each of its children) and
    /// returns once they all are: it keeps its sockets and its clients'
    /// connections but answers nothing, and accepts new connections
    /// without a word, as a hung server would.
    pub fn pause(&mut self) -> Signaled {
        let Some(pid) = self.process.pid() else {
            return Signaled::NotRunning;
        };
        let sent = self.process.pause();
        let family = Family::with_postmaster(pid);
        family.signal(Signal::STOP);
        self.paused = true;
        // A signal is delivered a moment after it is sent: until then a
        // process could still answer.
        family.wait_stopped(Instant::now() + STOP_TIMEOUT);
        sent
    }

    /// Lets a paused server go on (SIGCONT to its children, then to the
    /// postmaster).
    pub fn resume(&mut self) -> Signaled {
        if let Some(pid) = self.process.pid() {
            Family::of(pid).signal(Signal::CONT);
        }
        self.paused = false;
        self.process.resume()
    }

    /// Kills every process of the server at once (SIGKILL; the postmaster
    /// stopped first so that it restarts or forks nothing meanwhile), as a
    /// crash would, and returns once they are gone. The data stays;
    /// [`Postgres::restart`] recovers from the crash.
    pub fn kill(&mut self) -> Signaled {
        let Some(pid) = self.process.pid() else {
            return Signaled::NotRunning;
        };
        self.process.signal(Signal::STOP);
        let family = Family::of(pid);
        family.signal(Signal::KILL);
        let sent = self.process.kill();
        self.after_exit(&family);
        sent
    }

    /// Stops the server by its PID: fast shutdown (SIGINT: open
    /// transactions roll back, clients are disconnected), then SIGKILL to
    /// every process of it if the postmaster has not exited after
    /// [`STOP_TIMEOUT`]. A paused server is resumed first so that it can
    /// act on it. Returns once it is gone; the data stays.
    pub fn stop(&mut self) -> Signaled {
        let Some(pid) = self.process.pid() else {
            return Signaled::NotRunning;
        };
        let family = Family::of(pid);
        if self.paused {
            family.signal(Signal::CONT);
        }
        let sent = self.process.stop();
        self.after_exit(&family);
        sent
    }

    /// Stops the server if it runs (or finishes off what a kill left),
    /// starts it again on the same port and data (after a kill: crash
    /// recovery), and waits until it lets the superuser in.
    ///
    /// # Errors
    ///
    /// As [`Postgres::start`]; a port taken meanwhile is an error here.
    pub fn restart(&mut self) -> Result<(), EngineError> {
        self.stop();
        self.spawn()?;
        self.wait_ready(Instant::now() + START_TIMEOUT)
    }

    /// After the postmaster exited (and was reaped): kills what is left of
    /// its children and waits until they are gone. With every process of
    /// the server gone its lock file is stale; it is removed, since a PID
    /// in it reused by another process of the `postgres` user would keep
    /// the next start from starting.
    fn after_exit(&mut self, family: &Family) {
        family.signal(Signal::KILL);
        let gone = family.wait_gone(Instant::now() + STOP_TIMEOUT);
        self.paused = false;
        if gone {
            let _ = fs::remove_file(self.data_dir().join("postmaster.pid"));
        }
    }

    /// A command for `program` as the server's user, in its directory.
    fn command(&self, program: &Path) -> Command {
        self.run_as.command(program, self.process.dir())
    }

    /// Runs a step (initdb, pg_basebackup, pg_ctl) with its output appended
    /// to the log.
    fn run_step(&self, program: &'static str, mut command: Command) -> Result<(), EngineError> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|source| EngineError::Io {
                action: "open an engine's log file",
                source,
            })?;
        let err = log.try_clone().map_err(|source| EngineError::Io {
            action: "open an engine's log file",
            source,
        })?;
        command.stdout(Stdio::from(log)).stderr(Stdio::from(err));
        let status = command
            .status()
            .map_err(|source| EngineError::Spawn { program, source })?;
        if status.success() {
            return Ok(());
        }
        Err(EngineError::Setup {
            instance: self.instance(),
            step: program.to_owned(),
            status,
            output: self.log_tail(LOG_TAIL_LINES),
        })
    }

    fn add_settings(&self) -> Result<(), EngineError> {
        let mut text = String::from("\n# regent-testkit\n");
        for (name, value) in SETTINGS {
            text.push_str(&format!("{name} = {value}\n"));
        }
        OpenOptions::new()
            .append(true)
            .open(self.data_dir().join("postgresql.conf"))
            .and_then(|mut conf| conf.write_all(text.as_bytes()))
            .map_err(|source| EngineError::Io {
                action: "add the kit's settings to postgresql.conf",
                source,
            })
    }

    fn start_on_a_free_port(&mut self) -> Result<(), EngineError> {
        process::retry_on_port_collision(|| {
            self.port = process::free_ports(1)?[0];
            self.spawn()?;
            // On an error the server is stopped when `self` drops.
            self.wait_ready(Instant::now() + START_TIMEOUT)
        })
    }

    /// The postmaster's command line: the port and the socket's directory;
    /// everything else is in `postgresql.conf`.
    fn spawn(&mut self) -> Result<(), EngineError> {
        let mut command = self.command(&self.programs.postgres);
        command
            .arg("-D")
            .arg(self.data_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.process.dir());
        self.paused = false;
        self.process.spawn(command)
    }

    fn wait_ready(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let (addr, instance) = (self.addr(), self.instance());
        self.process.wait_ready(deadline, &instance, || {
            wire::accepts(addr, SUPERUSER, "postgres", REQUEST_TIMEOUT)
        })
    }

    pub(super) fn run_as(&self) -> RunAs {
        self.run_as
    }

    pub(super) fn psql_program(&self) -> &Path {
        &self.programs.psql
    }

    pub(super) fn instance(&self) -> String {
        format!("postgres on {}", self.addr())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A server as one of the [engines](super::super), of kind `postgres`.
impl Engine for Postgres {
    /// As [`Postgres::start`].
    fn start() -> Result<Self, EngineError> {
        Postgres::start()
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    /// As [`Postgres::store_url`].
    fn store_url(&self) -> String {
        Postgres::store_url(self)
    }

    fn pid(&self) -> Option<u32> {
        Postgres::pid(self)
    }

    fn is_healthy(&self) -> bool {
        Postgres::is_healthy(self)
    }

    /// As [`Postgres::kill`]: every process of the server.
    fn kill(&mut self) -> Signaled {
        Postgres::kill(self)
    }

    /// As [`Postgres::pause`]: every process of the server.
    fn pause(&mut self) -> Signaled {
        Postgres::pause(self)
    }

    fn resume(&mut self) -> Signaled {
        Postgres::resume(self)
    }

    /// As [`Postgres::stop`]: fast shutdown (SIGINT).
    fn stop(&mut self) -> Signaled {
        Postgres::stop(self)
    }

    fn restart(&mut self) -> Result<(), EngineError> {
        Postgres::restart(self)
    }

    fn log_tail(&self, lines: usize) -> String {
        Postgres::log_tail(self, lines)
    }

    /// The PostgreSQL store's shortest ttl, 100 ms (`regent_postgres::MIN_TTL`).
    fn min_ttl(&self) -> Duration {
        super::MIN_TTL
    }

    /// None: the server frees a lease at its expiry by its own clock.
    fn expiry_slack(&self) -> ExpirySlack {
        ExpirySlack::NONE
    }

    /// The PostgreSQL store's poll, 500 ms
    /// (`regent_postgres::DEFAULT_POLL_INTERVAL`): its watches are woken at
    /// once by `NOTIFY` on a direct connection, but poll behind a pooler or
    /// while the listening connection is lost.
    fn watch_delay(&self) -> Duration {
        super::WATCH_DELAY
    }
}
