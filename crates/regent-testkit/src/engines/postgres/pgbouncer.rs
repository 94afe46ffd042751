//! PgBouncer in front of a server: [`PgBouncer`], and the two as one
//! engine, [`PostgresBehindPgBouncer`].

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::process::{self, EngineProcess, Program};
use super::super::timeouts::START_TIMEOUT;
use super::programs::{PGBOUNCER_VAR, RunAs, pgbouncer_program};
use super::psql::{self, QUERY_TIMEOUT};
use super::{DATABASE, Postgres, SUPERUSER, wire};

/// Bound on each readiness or health question.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

/// PgBouncer's own database: its admin console.
const CONSOLE: &str = "pgbouncer";

/// PgBouncer 1.18 on `127.0.0.1` in front of a [`Postgres`], in
/// transaction pooling mode, stopped when dropped. See the
/// [module docs](super#pgbouncer) for its settings.
#[derive(Debug)]
pub struct PgBouncer {
    port: u16,
    server_port: u16,
    run_as: RunAs,
    psql: PathBuf,
    /// pgbouncer, in a temporary directory holding `pgbouncer.ini`,
    /// `userlist.txt` and `pgbouncer.log`; stopped and removed on drop.
    process: EngineProcess,
}

impl PgBouncer {
    /// Starts a PgBouncer in front of `server` on a free port, in the
    /// foreground (its PID is the kit's child), and waits until its admin
    /// console lets the superuser in. It holds no reference to `server`:
    /// it keeps pointing at its port across the server's restarts, and
    /// outlives it if dropped later.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_PGBOUNCER_BIN`) when there is no pgbouncer, naming
    /// `scripts/install-engines`; [`EngineError::Exited`] or
    /// [`EngineError::NotReady`] when it did not serve within
    /// [`START_TIMEOUT`], quoting its log.
    pub fn start(server: &Postgres) -> Result<Self, EngineError> {
        let program = pgbouncer_program()?;
        let run_as = server.run_as();
        let process = EngineProcess::new(Program::from_env("pgbouncer", PGBOUNCER_VAR))?;
        run_as.own(process.dir())?;
        let mut pgbouncer = Self {
            port: 0,
            server_port: server.port(),
            run_as,
            psql: server.psql_program().to_owned(),
            process,
        };
        // With `auth_type = trust` a user must still be in the auth file.
        pgbouncer.write("userlist.txt", &format!("\"{SUPERUSER}\" \"\"\n"))?;
        process::retry_on_port_collision(|| {
            pgbouncer.port = process::free_ports(1)?[0];
            pgbouncer.write("pgbouncer.ini", &pgbouncer.ini())?;
            pgbouncer.spawn(&program)?;
            pgbouncer.wait_ready(Instant::now() + START_TIMEOUT)
        })?;
        Ok(pgbouncer)
    }

    /// The port, on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// PgBouncer's address, `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The port of the server it pools connections to.
    pub fn server_port(&self) -> u16 {
        self.server_port
    }

    /// `postgres://postgres@127.0.0.1:PORT/regent`, through PgBouncer to
    /// the server's database [`DATABASE`].
    pub fn store_url(&self) -> String {
        self.url(DATABASE)
    }

    /// The URL of `database` on the server, through PgBouncer, as the
    /// superuser.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://{SUPERUSER}@{}/{database}", self.addr())
    }

    /// The PID while it runs; `None` once the kit stopped or killed it.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the kit started it and has not stopped or killed it since.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Whether its admin console lets the superuser in now (whatever the
    /// server's state).
    pub fn is_healthy(&self) -> bool {
        wire::accepts(self.addr(), SUPERUSER, CONSOLE, REQUEST_TIMEOUT)
    }

    /// Its log: everything it printed, every run.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// Its configuration file.
    pub fn ini_path(&self) -> PathBuf {
        self.process.dir().join("pgbouncer.ini")
    }

    /// Runs `sql` as the superuser on the server's database [`DATABASE`]
    /// through PgBouncer, as [`Postgres::psql`] does directly.
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`].
    pub fn psql(&self, sql: &str) -> Result<String, EngineError> {
        self.psql_within(sql, QUERY_TIMEOUT)
    }

    /// [`PgBouncer::psql`], waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`].
    pub fn psql_within(&self, sql: &str, timeout: Duration) -> Result<String, EngineError> {
        let instance = self.instance();
        psql::run(&self.psql, self.port, DATABASE, sql, timeout, &instance)
    }

    /// Runs a command of PgBouncer's admin console (the database
    /// `pgbouncer`), such as `SHOW POOLS` or `RECONNECT`, and returns what
    /// it printed as [`PgBouncer::psql`] does.
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`].
    pub fn console(&self, command: &str) -> Result<String, EngineError> {
        let instance = self.instance();
        psql::run(
            &self.psql,
            self.port,
            CONSOLE,
            command,
            QUERY_TIMEOUT,
            &instance,
        )
    }

    /// Pauses PgBouncer (SIGSTOP): its clients' connections stay open but
    /// nothing passes.
    pub fn pause(&mut self) -> Signaled {
        self.process.pause()
    }

    /// Lets a paused PgBouncer go on (SIGCONT).
    pub fn resume(&mut self) -> Signaled {
        self.process.resume()
    }

    /// Kills it at once (SIGKILL), as a crash would: every client's and
    /// server connection it held is cut.
    pub fn kill(&mut self) -> Signaled {
        self.process.kill()
    }

    /// Stops it by its PID: SIGTERM (PgBouncer 1.18's immediate shutdown:
    /// clients are disconnected), then SIGKILL after
    /// [`STOP_TIMEOUT`](super::super::STOP_TIMEOUT).
    pub fn stop(&mut self) -> Signaled {
        self.process.stop()
    }

    /// Stops it if it runs and starts it again on the same port and
    /// settings, as an operator restarting the pooler would: its clients
    /// lose their connections and must connect again.
    ///
    /// # Errors
    ///
    /// As [`PgBouncer::start`]; a port taken meanwhile is an error here.
    pub fn restart(&mut self) -> Result<(), EngineError> {
        self.stop();
        let program = pgbouncer_program()?;
        self.spawn(&program)?;
        self.wait_ready(Instant::now() + START_TIMEOUT)
    }

    fn ini(&self) -> String {
        let dir = self.process.dir();
        format!(
            "\
[databases]
* = host=127.0.0.1 port={server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {userlist}
admin_users = {SUPERUSER}
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
server_login_retry = 1
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
",
            server_port = self.server_port,
            port = self.port,
            userlist = dir.join("userlist.txt").display(),
        )
    }

    fn write(&self, name: &str, text: &str) -> Result<(), EngineError> {
        fs::write(self.process.dir().join(name), text).map_err(|source| EngineError::Io {
            action: "write PgBouncer's configuration",
            source,
        })
    }

    /// pgbouncer in the foreground (no `-d`): the PID the kit records is
    /// its own.
    fn spawn(&mut self, program: &Path) -> Result<(), EngineError> {
        let mut command = self.run_as.command(program, self.process.dir());
        command.arg(self.ini_path());
        self.process.spawn(command)
    }

    fn wait_ready(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let (addr, instance) = (self.addr(), self.instance());
        self.process.wait_ready(deadline, &instance, || {
            wire::accepts(addr, SUPERUSER, CONSOLE, REQUEST_TIMEOUT)
        })
    }

    fn instance(&self) -> String {
        format!(
            "pgbouncer on {} (server 127.0.0.1:{})",
            self.addr(),
            self.server_port
        )
    }
}

/// A server with a PgBouncer in front of it in transaction pooling mode,
/// as one engine of kind `postgres`: the store URL goes through the
/// pooler, the faults ([`Engine::kill`], [`Engine::pause`],
/// [`Engine::restart`], …) hit the server, and the pooler stays up
/// throughout (hit it through [`PostgresBehindPgBouncer::pgbouncer_mut`]).
/// Dropped, it stops the pooler, then the server.
#[derive(Debug)]
pub struct PostgresBehindPgBouncer {
    // Declared first: dropped (stopped) before the server.
    pgbouncer: PgBouncer,
    postgres: Postgres,
}

impl PostgresBehindPgBouncer {
    /// Starts a server ([`Postgres::start`]) and a PgBouncer in front of
    /// it ([`PgBouncer::start`]).
    ///
    /// # Errors
    ///
    /// As those two.
    pub fn start() -> Result<Self, EngineError> {
        let postgres = Postgres::start()?;
        let pgbouncer = PgBouncer::start(&postgres)?;
        Ok(Self {
            pgbouncer,
            postgres,
        })
    }

    /// The server.
    pub fn postgres(&self) -> &Postgres {
        &self.postgres
    }

    /// The server, to stop, kill or restart it.
    pub fn postgres_mut(&mut self) -> &mut Postgres {
        &mut self.postgres
    }

    /// The pooler.
    pub fn pgbouncer(&self) -> &PgBouncer {
        &self.pgbouncer
    }

    /// The pooler, to stop, kill or restart it.
    pub fn pgbouncer_mut(&mut self) -> &mut PgBouncer {
        &mut self.pgbouncer
    }
}

impl Engine for PostgresBehindPgBouncer {
    /// As [`PostgresBehindPgBouncer::start`].
    fn start() -> Result<Self, EngineError> {
        PostgresBehindPgBouncer::start()
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    /// PgBouncer's, [`PgBouncer::store_url`].
    fn store_url(&self) -> String {
        self.pgbouncer.store_url()
    }

    /// The server's postmaster.
    fn pid(&self) -> Option<u32> {
        self.postgres.pid()
    }

    /// Whether both the server and the pooler let the superuser in.
    fn is_healthy(&self) -> bool {
        self.postgres.is_healthy() && self.pgbouncer.is_healthy()
    }

    fn kill(&mut self) -> Signaled {
        self.postgres.kill()
    }

    fn pause(&mut self) -> Signaled {
        self.postgres.pause()
    }

    fn resume(&mut self) -> Signaled {
        self.postgres.resume()
    }

    fn stop(&mut self) -> Signaled {
        self.postgres.stop()
    }

    /// Restarts the server; the pooler stays.
    fn restart(&mut self) -> Result<(), EngineError> {
        self.postgres.restart()
    }

    /// The server's log, then the pooler's.
    fn log_tail(&self, lines: usize) -> String {
        format!(
            "postgres:\n{}\npgbouncer:\n{}",
            self.postgres.log_tail(lines),
            self.pgbouncer.log_tail(lines)
        )
    }

    fn min_ttl(&self) -> Duration {
        super::MIN_TTL
    }

    fn expiry_slack(&self) -> ExpirySlack {
        ExpirySlack::NONE
    }

    /// The PostgreSQL store's poll: behind a pooler in transaction mode its
    /// watches cannot `LISTEN`.
    fn watch_delay(&self) -> Duration {
        super::WATCH_DELAY
    }

    /// Watches `LISTEN` on a connection straight to the server, as the
    /// store's docs tell users of a pooler in transaction mode to do.
    fn client_env(&self) -> Vec<(String, String)> {
        vec![(
            "REGENT_POSTGRES_LISTEN_URL".to_owned(),
            self.postgres.store_url(),
        )]
    }
}
