//! One Redis server: [`Redis`], configured by [`RedisBuilder`], run as a
//! child process of the test with a configuration file of its own.

use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::fs;
use std::hash::{BuildHasher as _, Hasher as _};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::process::{self, EngineProcess, Program};
use super::super::timeouts::START_TIMEOUT;
use super::{ENV_PREFIX, SERVER_VAR, cli, resp};
use crate::pki::TlsFiles;

/// Bound on each readiness or health question (asked again and again while
/// a server starts, so short).
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

/// The configuration file in the server's directory.
const CONF: &str = "redis.conf";

/// The directory of the test PKI, in the server's directory.
const TLS_DIR: &str = "tls";

/// The certificates and keys of a server with TLS, from
/// [`Redis::tls_files`]: the kit's generic test PKI, with Redis's
/// `tls-ca-cert-file` the test CA and `tls-cert-file`/`tls-key-file` the
/// server's certificate and key (valid for `127.0.0.1` and `localhost`).
pub type RedisTlsFiles = TlsFiles;

/// TLS on a second port of a server started with [`RedisBuilder::tls`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisTls {
    /// The server presents a certificate signed by the test CA
    /// (`tls-cert-file`, `tls-key-file`); clients need not present one
    /// (`tls-auth-clients no`).
    Server,
    /// As [`RedisTls::Server`], and every client of the TLS port must
    /// present a certificate signed by the test CA (`tls-auth-clients
    /// yes`, Redis's own default).
    ClientCert,
}

/// What a server keeps on disk, and so what survives a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RedisPersistence {
    /// Nothing (`save ""`, `appendonly no`): every restart, after a stop
    /// as after a kill, starts empty.
    #[default]
    None,
    /// An append-only file synced at every write (`appendonly yes`,
    /// `appendfsync always`): a restart, even after a kill, has every
    /// write the server acknowledged.
    AppendAlways,
}

/// How to start a [`Redis`]: [`Redis::builder`], chained settings, then
/// [`RedisBuilder::start`].
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct RedisBuilder {
    persistence: RedisPersistence,
    user: Option<(String, String)>,
    tls: Option<RedisTls>,
    /// The primary's port, for a replica of a
    /// [`RedisSentinels`](super::RedisSentinels) group.
    replica_of: Option<u16>,
}

impl RedisBuilder {
    /// What the server keeps on disk; [`RedisPersistence::None`] by
    /// default.
    pub fn persistence(mut self, persistence: RedisPersistence) -> Self {
        self.persistence = persistence;
        self
    }

    /// Adds an ACL user `name` with `password` and every right
    /// (`user NAME on >PASSWORD ~* &* +@all`), and gives the user
    /// `default` a random password (`requirepass`): a client must then
    /// authenticate, as `name` (or as `default` with a password nobody
    /// knows). The store URL carries no credentials; the tests pass them
    /// to their clients themselves ([`Redis::credentials`]), and
    /// [`Redis::cli`] and the kit's health checks log in as `name`.
    pub fn user(mut self, name: &str, password: &str) -> Self {
        self.user = Some((name.to_owned(), password.to_owned()));
        self
    }

    /// Listens with TLS as well, on a second port of its own
    /// ([`Redis::tls_port`]), with certificates the kit makes in the
    /// server's directory ([`Redis::tls_files`]); `tls` says whether the
    /// TLS port requires client certificates. The plain port stays: the
    /// kit's readiness and health checks and [`Redis::cli`] use it.
    /// Default: no TLS port.
    pub fn tls(mut self, tls: RedisTls) -> Self {
        self.tls = Some(tls);
        self
    }

    pub(super) fn replica_of(mut self, primary_port: u16) -> Self {
        self.replica_of = Some(primary_port);
        self
    }

    /// Starts the server on a free port of `127.0.0.1` (two with
    /// [`RedisBuilder::tls`]), in a new temporary directory, and waits
    /// until it answers `PING`.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_REDIS_SERVER_BIN`), naming `scripts/install-engines`,
    /// when `redis-server` is missing; [`EngineError::Exited`] or
    /// [`EngineError::NotReady`], quoting its log, when it did not answer
    /// within [`START_TIMEOUT`]; [`EngineError::Io`] when its directory or
    /// configuration could not be written; [`EngineError::Pki`] when the
    /// certificates could not be made.
    pub fn start(self) -> Result<Redis, EngineError> {
        let process = EngineProcess::new(program())?;
        fs::create_dir(process.data_dir()).map_err(|source| EngineError::Io {
            action: "create a Redis server's data directory",
            source,
        })?;
        let default_password = self.user.as_ref().map(|_| random_password());
        let tls = match self.tls {
            Some(mode) => Some(TlsListener {
                mode,
                port: 0,
                files: RedisTlsFiles::generate(&process.dir().join(TLS_DIR))?,
            }),
            None => None,
        };
        let mut redis = Redis {
            port: 0,
            tls,
            settings: self,
            default_password,
            process,
        };
        process::retry_on_port_collision(|| {
            // Both ports new on every attempt: either may be the one taken
            // (the server exits when it cannot bind one).
            let ports = process::free_ports(1 + usize::from(redis.tls.is_some()))?;
            redis.port = ports[0];
            if let Some(tls) = &mut redis.tls {
                tls.port = ports[1];
            }
            redis.write_conf()?;
            redis.spawn()?;
            // On an error the server is stopped when `redis` drops.
            redis.wait_ready(Instant::now() + START_TIMEOUT)
        })?;
        Ok(redis)
    }
}

/// `redis-server`, from `PATH` or the path in `REGENT_REDIS_SERVER_BIN`.
fn program() -> Program {
    Program::from_env("redis-server", SERVER_VAR).running("redis")
}

/// One `redis-server` on `127.0.0.1`, a free port and a temporary directory
/// of its own, stopped by its PID when dropped. See the
/// [module docs](super).
#[derive(Debug)]
pub struct Redis {
    port: u16,
    /// The TLS port and its certificates, with [`RedisBuilder::tls`].
    tls: Option<TlsListener>,
    settings: RedisBuilder,
    /// The password of the user `default` when the builder added a user.
    default_password: Option<String>,
    /// The server, in a temporary directory holding `redis.conf`, `data/`
    /// and `redis.log`; stopped and removed on drop.
    process: EngineProcess,
}

/// The TLS port of a server with [`RedisBuilder::tls`].
#[derive(Debug)]
struct TlsListener {
    mode: RedisTls,
    port: u16,
    /// In `DIR/tls`.
    files: RedisTlsFiles,
}

impl Redis {
    /// How to start a server with settings other than the defaults.
    pub fn builder() -> RedisBuilder {
        RedisBuilder::default()
    }

    /// Starts a server with the defaults: [`Redis::builder`] then
    /// [`RedisBuilder::start`].
    ///
    /// # Errors
    ///
    /// As [`RedisBuilder::start`].
    pub fn start() -> Result<Self, EngineError> {
        Self::builder().start()
    }

    /// The plain (RESP without TLS) port, on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's address, `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `redis://127.0.0.1:PORT`, the plain port, without credentials even
    /// for a server with a user ([`Redis::credentials`]); the TLS port's
    /// URL is [`Redis::tls_store_url`].
    pub fn store_url(&self) -> String {
        format!("redis://{}", self.addr())
    }

    /// Whether the TLS port requires client certificates; `None` for a
    /// server without [`RedisBuilder::tls`].
    pub fn tls(&self) -> Option<RedisTls> {
        self.tls.as_ref().map(|tls| tls.mode)
    }

    /// The TLS port (`tls-port`), on `127.0.0.1`, of a server with
    /// [`RedisBuilder::tls`].
    pub fn tls_port(&self) -> Option<u16> {
        self.tls.as_ref().map(|tls| tls.port)
    }

    /// The TLS port's address, `127.0.0.1:PORT`, of a server with
    /// [`RedisBuilder::tls`].
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_port()
            .map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    }

    /// `rediss://127.0.0.1:PORT`, the TLS port, of a server with
    /// [`RedisBuilder::tls`]; without credentials, as
    /// [`Redis::store_url`]. A client must trust the test CA
    /// ([`TlsFiles::ca_cert`]) and, with [`RedisTls::ClientCert`], present
    /// the client certificate ([`TlsFiles::client_cert`] and
    /// [`TlsFiles::client_key`]).
    pub fn tls_store_url(&self) -> Option<String> {
        self.tls_addr().map(|addr| format!("rediss://{addr}"))
    }

    /// The certificates and keys of a server with [`RedisBuilder::tls`],
    /// in its directory.
    pub fn tls_files(&self) -> Option<&RedisTlsFiles> {
        self.tls.as_ref().map(|tls| &tls.files)
    }

    /// The user and password [`RedisBuilder::user`] added, if any.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.settings
            .user
            .as_ref()
            .map(|(user, password)| (user.as_str(), password.as_str()))
    }

    /// What the server keeps on disk.
    pub fn persistence(&self) -> RedisPersistence {
        self.settings.persistence
    }

    /// Runs `redis-cli -e -h 127.0.0.1 -p PORT [--user U --pass P
    /// --no-auth-warning] ARGS…` (logged in as the builder's user, if any)
    /// and returns its standard output, trimmed: raw, one line per value of
    /// an array, as redis-cli prints to a pipe. It is killed after
    /// [`CLI_TIMEOUT`](super::CLI_TIMEOUT).
    ///
    /// # Errors
    ///
    /// [`EngineError::Setup`] naming the command and quoting what
    /// redis-cli printed when it fails: the server did not answer, or
    /// answered with an error (`-e`); [`EngineError::Io`] of kind
    /// `TimedOut` when it did not finish in time (a paused server);
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_REDIS_CLI_BIN`) when redis-cli is missing.
    pub fn cli(&self, args: &[&str]) -> Result<String, EngineError> {
        cli::run(self.addr(), self.credentials(), args, &self.instance())
    }

    /// The PID while the server runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the server answers `PING` now (logged in as the builder's
    /// user, if any): not while it is paused, stopped, or still loading
    /// its append-only file.
    pub fn is_healthy(&self) -> bool {
        resp::pings(self.addr(), self.credentials(), REQUEST_TIMEOUT)
    }

    /// The last `lines` lines of `redis.log` (the output of every run).
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// Kills the server (SIGKILL) and reaps it: what it had not written to
    /// disk is lost.
    pub fn kill(&mut self) -> Signaled {
        self.process.kill()
    }

    /// Pauses the server (SIGSTOP): it keeps its port and its clients'
    /// connections and answers nothing.
    pub fn pause(&mut self) -> Signaled {
        self.process.pause()
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&mut self) -> Signaled {
        self.process.resume()
    }

    /// Stops the server by its PID: SIGTERM (without save points nothing is
    /// saved), then SIGKILL after [`STOP_TIMEOUT`](super::super::STOP_TIMEOUT).
    /// Returns once it is reaped; its directory stays.
    pub fn stop(&mut self) -> Signaled {
        self.process.stop()
    }

    /// Stops the server if it runs, starts it again on the same ports,
    /// directory and configuration file, and waits until it answers `PING`
    /// (after loading its append-only file, with
    /// [`RedisPersistence::AppendAlways`]).
    ///
    /// # Errors
    ///
    /// As [`RedisBuilder::start`]; a port taken meanwhile is an error here.
    pub fn restart(&mut self) -> Result<(), EngineError> {
        self.process.stop();
        self.spawn()?;
        self.wait_ready(Instant::now() + START_TIMEOUT)
    }

    /// `redis on 127.0.0.1:PORT`, for errors.
    pub(super) fn instance(&self) -> String {
        format!("redis on {}", self.addr())
    }

    /// Writes `redis.conf`. The file is the server's from then on: a
    /// restart reads it again, and a Sentinel's `CONFIG REWRITE` after a
    /// failover (a promoted replica's `replicaof` gone) is kept.
    fn write_conf(&self) -> Result<(), EngineError> {
        let mut conf = String::from("# regent-testkit\n");
        let mut set = |line: &str| {
            conf.push_str(line);
            conf.push('\n');
        };
        set("bind 127.0.0.1");
        set(&format!("port {}", self.port));
        set(&format!(
            "dir {}",
            quote(&self.process.data_dir().to_string_lossy())
        ));
        set("daemonize no");
        set("logfile \"\"");
        set("save \"\"");
        match self.settings.persistence {
            RedisPersistence::None => set("appendonly no"),
            RedisPersistence::AppendAlways => {
                set("appendonly yes");
                set("appendfsync always");
            }
        }
        set("notify-keyspace-events KEA");
        // A new replica's full sync at once, not after the default 5 s
        // wait for more replicas.
        set("repl-diskless-sync-delay 0");
        if let Some(primary) = self.settings.replica_of {
            set(&format!("replicaof 127.0.0.1 {primary}"));
        }
        if let Some(tls) = &self.tls {
            let file = |path: &std::path::Path| quote(&path.to_string_lossy());
            set(&format!("tls-port {}", tls.port));
            set(&format!("tls-cert-file {}", file(tls.files.server_cert())));
            set(&format!("tls-key-file {}", file(tls.files.server_key())));
            set(&format!("tls-ca-cert-file {}", file(tls.files.ca_cert())));
            set(match tls.mode {
                RedisTls::Server => "tls-auth-clients no",
                RedisTls::ClientCert => "tls-auth-clients yes",
            });
        }
        if let (Some((user, password)), Some(default)) =
            (&self.settings.user, &self.default_password)
        {
            set(&format!("requirepass {}", quote(default)));
            set(&format!(
                "user {} on {} ~* &* +@all",
                quote(user),
                quote(&format!(">{password}"))
            ));
        }
        fs::write(self.process.dir().join(CONF), conf).map_err(|source| EngineError::Io {
            action: "write a Redis server's redis.conf",
            source,
        })
    }

    fn spawn(&mut self) -> Result<(), EngineError> {
        let mut command = self.process.program().command(ENV_PREFIX);
        command
            .current_dir(self.process.dir())
            .arg(self.process.dir().join(CONF));
        self.process.spawn(command)
    }

    fn wait_ready(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let (addr, instance) = (self.addr(), self.instance());
        let auth = self.settings.user.clone();
        self.process.wait_ready(deadline, &instance, || {
            let auth = auth.as_ref().map(|(u, p)| (u.as_str(), p.as_str()));
            resp::pings(addr, auth, REQUEST_TIMEOUT)
        })
    }

    /// [`EngineError::Exited`] if the server has exited on its own, for
    /// waits that watch several processes.
    pub(super) fn check_not_exited(&mut self) -> Result<(), EngineError> {
        let instance = self.instance();
        self.process.check_not_exited(&instance)
    }
}

/// A string as `redis.conf` reads it: in double quotes, with `\` and `"`
/// escaped and anything not printable ASCII as `\xHH`.
pub(super) fn quote(text: &str) -> String {
    let mut quoted = String::from("\"");
    for byte in text.bytes() {
        match byte {
            b'\\' | b'"' => {
                quoted.push('\\');
                quoted.push(char::from(byte));
            }
            0x20..=0x7e => quoted.push(char::from(byte)),
            _ => {
                let _ = write!(quoted, "\\x{byte:02x}");
            }
        }
    }
    quoted.push('"');
    quoted
}

/// A password nobody needs to know (the user `default`'s, when the tests
/// log in as another).
fn random_password() -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!(
        "{:016x}{:016x}",
        hasher.finish(),
        RandomState::new().build_hasher().finish()
    )
}

/// A server as one of the [engines](super::super), of kind `redis`.
impl Engine for Redis {
    /// As [`Redis::start`].
    fn start() -> Result<Self, EngineError> {
        Redis::start()
    }

    fn kind(&self) -> &'static str {
        "redis"
    }

    /// As [`Redis::store_url`].
    fn store_url(&self) -> String {
        Redis::store_url(self)
    }

    fn pid(&self) -> Option<u32> {
        Redis::pid(self)
    }

    /// As [`Redis::is_healthy`]: `PING`.
    fn is_healthy(&self) -> bool {
        Redis::is_healthy(self)
    }

    fn kill(&mut self) -> Signaled {
        Redis::kill(self)
    }

    fn pause(&mut self) -> Signaled {
        Redis::pause(self)
    }

    fn resume(&mut self) -> Signaled {
        Redis::resume(self)
    }

    fn stop(&mut self) -> Signaled {
        Redis::stop(self)
    }

    /// As [`Redis::restart`]: with [`RedisPersistence::None`] the data is
    /// gone afterwards, with [`RedisPersistence::AppendAlways`] it is kept.
    fn restart(&mut self) -> Result<(), EngineError> {
        Redis::restart(self)
    }

    fn log_tail(&self, lines: usize) -> String {
        Redis::log_tail(self, lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `redis-cli --tls -e PING` on the TLS port, trusting the test CA and
    /// presenting `identity` (a certificate and its key) if any.
    fn ping_over_tls(
        redis: &Redis,
        identity: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Result<String, EngineError> {
        let program = cli::program();
        let mut command = program.command(ENV_PREFIX);
        command
            .args(["--tls", "-e", "-h", "127.0.0.1", "-p"])
            .arg(redis.tls_port().expect("a TLS port").to_string())
            .arg("--cacert")
            .arg(redis.tls_files().expect("TLS files").ca_cert());
        if let Some((cert, key)) = identity {
            command.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        command.arg("PING");
        process::run_client(
            command,
            "redis-cli --tls PING".to_owned(),
            cli::CLI_TIMEOUT,
            &redis.instance(),
            |source| program.spawn_error(source),
        )
        .map(|out| out.trim().to_owned())
    }

    #[test]
    fn a_tls_server_keeps_its_plain_port_and_requires_client_certificates_if_asked() {
        let mut redis = Redis::builder().tls(RedisTls::ClientCert).start().unwrap();
        assert_eq!(redis.tls(), Some(RedisTls::ClientCert));
        let port = redis.tls_port().unwrap();
        assert_ne!(port, redis.port());
        assert_eq!(
            redis.tls_store_url().unwrap(),
            format!("rediss://127.0.0.1:{port}")
        );
        let files = redis.tls_files().unwrap().clone();
        assert!(files.ca_cert().starts_with(redis.process.dir()));
        let trusted = Some((files.client_cert(), files.client_key()));
        let untrusted = Some((files.other_client_cert(), files.other_client_key()));

        assert!(redis.is_healthy());
        assert_eq!(redis.cli(&["PING"]).unwrap(), "PONG");
        assert_eq!(ping_over_tls(&redis, trusted).unwrap(), "PONG");
        assert!(ping_over_tls(&redis, None).is_err());
        assert!(ping_over_tls(&redis, untrusted).is_err());

        // A restart keeps both ports and the certificates.
        redis.restart().unwrap();
        assert_eq!(redis.tls_port(), Some(port));
        assert_eq!(ping_over_tls(&redis, trusted).unwrap(), "PONG");
    }

    #[test]
    fn a_tls_server_without_client_certificates_lets_any_client_in() {
        let redis = Redis::builder().tls(RedisTls::Server).start().unwrap();
        assert_eq!(redis.tls(), Some(RedisTls::Server));
        assert_eq!(ping_over_tls(&redis, None).unwrap(), "PONG");
        let plain = Redis::start().unwrap();
        assert_eq!(
            (plain.tls(), plain.tls_port(), plain.tls_store_url()),
            (None, None, None)
        );
        assert!(plain.tls_files().is_none());
    }

    #[test]
    fn quoted_strings_escape_what_redis_conf_would_split_on() {
        assert_eq!(quote("plain"), r#""plain""#);
        assert_eq!(quote(r#">a "b" \c"#), r#"">a \"b\" \\c""#);
        assert_eq!(quote("é\n"), r#""\xc3\xa9\x0a""#);
    }
}
