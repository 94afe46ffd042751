//! etcd 3.4 on `127.0.0.1`: one member ([`Etcd`]) or a cluster of several
//! ([`EtcdCluster`]), plus `etcdctl` pointed at them.
//!
//! Every member gets two free ports (client and peer) and its own temporary
//! directory holding its data dir and its log (`etcd.log`, zap JSON lines;
//! the last lines are quoted in startup errors). Members run with
//! `--heartbeat-interval=10 --election-timeout=100` (see
//! [`HEARTBEAT_INTERVAL`] and [`ELECTION_TIMEOUT`]), so a cluster elects a
//! Raft leader within a few hundred milliseconds of losing one, and the
//! minimum lease TTL drops well below etcd's default of about 2 s.
//!
//! A member is ready when `GET /health` on its client port answers
//! `"health":"true"`, which etcd only does once the cluster has a leader and
//! serves a quorum read. The members of a cluster are launched one after the
//! other, each once the previous one answers on its peer port (launched
//! together they often stall 1–2 s asking each other whether they were
//! bootstrapped already). If a port was taken between the kit finding it
//! free and etcd binding it, the kit starts again on new ports.
//!
//! Programs: `etcd` and `etcdctl` from `PATH` (installed by
//! `scripts/install-engines`), or the paths in `REGENT_ETCD_BIN` and
//! `REGENT_ETCDCTL_BIN`. Variables `ETCD_*` of the test's environment are not
//! passed to etcd (etcd reads them as flags), nor `ETCDCTL_*` to etcdctl,
//! which always gets `ETCDCTL_API=3`.
//!
//! ```no_run
//! use regent_testkit::engines::Etcd;
//!
//! let etcd = Etcd::start()?;
//! let put = etcd.etcdctl(["put", "greeting", "hello"]);
//! assert!(put.status.success());
//! // Dropping `etcd` stops the process (SIGTERM, then SIGKILL) and removes
//! // its data dir.
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```
//!
//! # Secured members
//!
//! [`Etcd::builder`] starts a single member with TLS on its client port
//! ([`EtcdTls`]), etcd's authentication ([`EtcdBuilder::auth`]), or both.
//! Peers still talk plain HTTP.
//!
//! * **TLS**: the kit makes a test CA, a server certificate for
//!   `127.0.0.1` and `localhost`, a client certificate and an unrelated
//!   second CA and client certificate for negative tests, all in the
//!   member's temporary directory ([`Etcd::tls_files`]). The client port
//!   then speaks only TLS: [`Etcd::client_url`] is `https://…`, while
//!   [`Etcd::endpoint`] stays `127.0.0.1:PORT` (a client given TLS options
//!   adds the scheme).
//! * **Authentication**: once the member is healthy, the kit creates the
//!   user, a role granting read and write on the whole keyspace when the
//!   user is not `root` (etcd needs a `root` user before `auth enable`; the
//!   kit gives it a random password then), and runs `etcdctl auth enable`.
//!   [`Etcd::credentials`] returns the user and password.
//!
//! A secured member also listens on a third port, plain HTTP, for etcd's
//! `/health` and `/metrics` (`--listen-metrics-urls`): [`Etcd::is_healthy`]
//! and [`Etcd::is_leader`] ask there, needing neither certificates nor a
//! password. [`Etcd::etcdctl`] and the other etcdctl helpers pass the
//! member's CA, client certificate and credentials by themselves, so tests
//! that drive etcdctl work unchanged on a secured member.
//!
//! ```no_run
//! use regent_testkit::engines::{Etcd, EtcdTls};
//!
//! let etcd = Etcd::builder()
//!     .tls(EtcdTls::ClientCert)
//!     .auth("regent", "s3cret")
//!     .start()?;
//! let files = etcd.tls_files().expect("a TLS member");
//! let ca_pem = std::fs::read(files.ca_cert()).expect("the CA is there");
//! assert_eq!(etcd.credentials(), Some(("regent", "s3cret")));
//! assert!(etcd.etcdctl(["put", "greeting", "hello"]).status.success());
//! # let _ = ca_pem;
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```

use std::collections::hash_map::RandomState;
use std::ffi::OsStr;
use std::fmt;
use std::fs::OpenOptions;
use std::hash::{BuildHasher as _, Hasher as _};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::Signal;
use tempfile::TempDir;

use super::EngineError;
use super::http;
use super::process::{self, POLL, Program};

mod tls;

pub use tls::EtcdTlsFiles;

/// etcd's `--heartbeat-interval` for every member the kit starts.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(10);

/// etcd's `--election-timeout` for every member the kit starts: a follower
/// that hears no heartbeat for this long campaigns to become Raft leader.
pub const ELECTION_TIMEOUT: Duration = Duration::from_millis(100);

/// How long starting (or restarting) waits for the members to be healthy.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);

/// How long stopping waits after SIGTERM before it sends SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Bound on each health or status request.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

/// Starts on fresh ports after a port collision, at most this many times.
const START_ATTEMPTS: usize = 5;

const LOG_TAIL_LINES: usize = 20;

/// One etcd member on `127.0.0.1`, stopped when dropped.
///
/// [`Etcd::start`] starts a single-member cluster; [`EtcdCluster`] holds
/// several members that know each other.
#[derive(Debug)]
pub struct Etcd {
    name: String,
    client_port: u16,
    peer_port: u16,
    initial_cluster: String,
    cluster_token: String,
    etcd: Program,
    etcdctl: Program,
    /// Holds `data/` and `etcd.log`; removed after the process is stopped
    /// (`Drop` stops it before the fields drop).
    dir: TempDir,
    /// `None` once the kit stopped or killed the process (and reaped it).
    child: Option<Child>,
    security: Security,
}

/// How a member is secured; the default is not at all.
#[derive(Default)]
struct Security {
    tls: Option<(EtcdTls, EtcdTlsFiles)>,
    /// The user and password etcdctl and clients log in with, once
    /// authentication is enabled.
    credentials: Option<(String, String)>,
    /// The port of `--listen-metrics-urls` (plain HTTP `/health` and
    /// `/metrics`) of a secured member.
    metrics_port: Option<u16>,
}

impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Security")
            .field("tls", &self.tls)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("metrics_port", &self.metrics_port)
            .finish()
    }
}

/// TLS on the client port of a member started by [`EtcdBuilder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EtcdTls {
    /// The member presents a server certificate signed by the test CA
    /// (`--cert-file`, `--key-file`); clients need not present one.
    Server,
    /// As [`EtcdTls::Server`], and every client must present a certificate
    /// signed by the test CA (`--client-cert-auth --trusted-ca-file`).
    ClientCert,
}

/// Starts a single secured member: [`Etcd::builder`], setters, then
/// [`EtcdBuilder::start`]. See [Secured members](self#secured-members).
#[derive(Clone, Default)]
#[must_use]
pub struct EtcdBuilder {
    tls: Option<EtcdTls>,
    auth: Option<(String, String)>,
}

impl fmt::Debug for EtcdBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdBuilder")
            .field("tls", &self.tls)
            .field("user", &self.auth.as_ref().map(|(user, _)| user))
            .finish()
    }
}

impl EtcdBuilder {
    /// Serves the client port over TLS only (default: plain HTTP).
    pub fn tls(mut self, tls: EtcdTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Enables etcd's authentication with `user` and `password` (default:
    /// off). `root` becomes etcd's root user; any other user gets a role
    /// granting read and write on every key, and `root` a random password.
    pub fn auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.auth = Some((user.into(), password.into()));
        self
    }

    /// Starts the member on free ports, waits until it is healthy, then
    /// enables authentication if asked.
    ///
    /// # Errors
    ///
    /// As [`Etcd::start`]; [`EngineError::Io`] when the certificates could
    /// not be made or written; [`EngineError::Setup`] when an `etcdctl`
    /// step enabling authentication failed (the member is stopped then).
    pub fn start(self) -> Result<Etcd, EngineError> {
        let mut members = start_members(1, Some(&self))?;
        let mut etcd = members.remove(0);
        if let Some((user, password)) = self.auth {
            etcd.enable_auth(user, password)?;
        }
        Ok(etcd)
    }
}

impl Etcd {
    /// Starts a single-member etcd on free ports and waits until it is
    /// healthy.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_ETCD_BIN`) when there is no etcd to run: the message
    /// names `scripts/install-engines`. [`EngineError::Exited`] or
    /// [`EngineError::NotReady`] when etcd did not become healthy within
    /// [`START_TIMEOUT`], quoting its log; [`EngineError::Io`] or
    /// [`EngineError::Spawn`] when setting up failed.
    pub fn start() -> Result<Self, EngineError> {
        let mut members = start_members(1, None)?;
        Ok(members.remove(0))
    }

    /// Starts building a secured single member: TLS, authentication or
    /// both. With no setter called it starts a member as [`Etcd::start`]
    /// does, plus a metrics port.
    pub fn builder() -> EtcdBuilder {
        EtcdBuilder::default()
    }

    /// The TLS mode of the client port, `None` for plain HTTP.
    pub fn tls(&self) -> Option<EtcdTls> {
        self.security.tls.as_ref().map(|(mode, _)| *mode)
    }

    /// The certificates and keys of a member with TLS.
    pub fn tls_files(&self) -> Option<&EtcdTlsFiles> {
        self.security.tls.as_ref().map(|(_, files)| files)
    }

    /// The user and password of a member with authentication enabled.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.security
            .credentials
            .as_ref()
            .map(|(user, password)| (user.as_str(), password.as_str()))
    }

    /// The member's name (`--name`), such as `m0`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client endpoint as `127.0.0.1:PORT`, the form etcd clients and
    /// `etcdctl --endpoints` take.
    pub fn endpoint(&self) -> String {
        self.client_addr().to_string()
    }

    /// The client endpoints of this member: one, `127.0.0.1:PORT`.
    pub fn endpoints(&self) -> Vec<String> {
        vec![self.endpoint()]
    }

    /// The client URL: `http://127.0.0.1:PORT`, or `https://127.0.0.1:PORT`
    /// for a member with TLS.
    pub fn client_url(&self) -> String {
        let scheme = if self.security.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.client_addr())
    }

    /// The client address.
    pub fn client_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.client_port))
    }

    /// The peer URL, `http://127.0.0.1:PORT`, where members talk Raft.
    pub fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    /// The PID of the running process, or `None` once the kit has stopped or
    /// killed it.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the kit started the process and has not stopped or killed it
    /// since. (A process that died on its own still counts until the kit
    /// notices; [`Etcd::is_healthy`] asks the process itself.)
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The data dir (`--data-dir`); it survives [`Etcd::stop`] and
    /// [`Etcd::kill`] and is removed on drop.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// etcd's log: standard output and error of every run of this member.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// Whether `GET /health` answers `"health":"true"` now (on the metrics
    /// port of a secured member).
    pub fn is_healthy(&self) -> bool {
        http::get(self.health_addr(), "/health", REQUEST_TIMEOUT)
            .is_ok_and(|r| r.status == 200 && r.body.contains(r#""health":"true""#))
    }

    /// Whether this member is the Raft leader of its cluster now.
    pub fn is_leader(&self) -> bool {
        match self.metrics_addr() {
            Some(addr) => http::get(addr, "/metrics", REQUEST_TIMEOUT).is_ok_and(|r| {
                r.status == 200 && r.body.lines().any(|l| l == "etcd_server_is_leader 1")
            }),
            None => self.status().is_some_and(|s| s.is_leader()),
        }
    }

    /// Stops the process: SIGTERM to its PID, then SIGKILL if it has not
    /// exited after [`STOP_TIMEOUT`]. Returns once it is reaped. Does nothing
    /// if it is not running. The data dir stays until drop.
    ///
    /// A cluster's Raft leader first hands leadership to a follower; if the
    /// followers are already gone it keeps trying until SIGKILL. (Dropping an
    /// [`EtcdCluster`] stops its leader last, after it stepped down.)
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            process::signal(&mut child, Signal::TERM);
            if !process::wait_until(&mut child, Instant::now() + STOP_TIMEOUT) {
                process::kill(&mut child);
            }
        }
    }

    /// Kills the process at once (SIGKILL to its PID), as a crash would,
    /// and reaps it. Does nothing if it is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            process::kill(&mut child);
        }
    }

    /// Stops the process if it runs, starts it again on the same ports with
    /// the same data dir, and waits until it is healthy (for a cluster
    /// member: until it has rejoined a cluster with a leader).
    ///
    /// # Errors
    ///
    /// As [`Etcd::start`]; a port taken meanwhile is an error here, since a
    /// member's peer URL cannot change. A cluster member is healthy only
    /// with a quorum, so restart members one at a time while the others run.
    pub fn restart(&mut self) -> Result<(), EngineError> {
        self.stop();
        self.spawn()?;
        self.wait_healthy(Instant::now() + START_TIMEOUT)
    }

    /// A `Command` for `etcdctl` with `ETCDCTL_API=3` and
    /// `--endpoints=` this member; add the arguments and run or spawn it
    /// (for example `etcdctl elect NAME VALUE`, which holds until SIGINT).
    ///
    /// On a secured member it also carries `--cacert`, `--cert` and `--key`
    /// (the test CA and client certificate) and `--user`
    /// ([`Etcd::credentials`]), and the endpoint is [`Etcd::client_url`].
    pub fn etcdctl_command(&self) -> Command {
        let mut command = self.etcdctl_command_without_credentials();
        if let Some((user, password)) = &self.security.credentials {
            command.arg(format!("--user={user}:{password}"));
        }
        command
    }

    /// Runs `etcdctl ARGS` against this member and returns its output,
    /// successful or not.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_ETCDCTL_BIN`) when there is no etcdctl;
    /// [`EngineError::Spawn`] when it could not be run.
    pub fn try_etcdctl<I, S>(&self, args: I) -> Result<Output, EngineError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run_etcdctl(&self.etcdctl, self.etcdctl_command(), args)
    }

    /// Runs `etcdctl ARGS` against this member and returns its output,
    /// successful or not.
    ///
    /// # Panics
    ///
    /// If etcdctl cannot be run, with [`Etcd::try_etcdctl`]'s error (which
    /// names `scripts/install-engines` when etcdctl is missing).
    pub fn etcdctl<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.try_etcdctl(args).unwrap_or_else(|err| panic!("{err}"))
    }

    /// As [`Etcd::etcdctl_command`] without `--user`.
    fn etcdctl_command_without_credentials(&self) -> Command {
        match &self.security.tls {
            None => etcdctl_command(&self.etcdctl, &self.endpoints()),
            Some((_, files)) => {
                let mut command = etcdctl_command(&self.etcdctl, &[self.client_url()]);
                command
                    .arg(format!("--cacert={}", files.ca_cert().display()))
                    .arg(format!("--cert={}", files.client_cert().display()))
                    .arg(format!("--key={}", files.client_key().display()));
                command
            }
        }
    }

    /// Creates the users and role and runs `auth enable`; from then on the
    /// etcdctl helpers log in as `user`.
    fn enable_auth(&mut self, user: String, password: String) -> Result<(), EngineError> {
        let root_password = if user == "root" {
            password.clone()
        } else {
            random_password()
        };
        // The arguments of each step, and a new user's password, which is
        // kept out of error messages.
        let mut steps: Vec<(Vec<&str>, Option<&str>)> =
            vec![(vec!["user", "add", "root"], Some(&root_password))];
        if user != "root" {
            steps.extend([
                (vec!["user", "add", &user], Some(password.as_str())),
                (vec!["role", "add", AUTH_ROLE], None),
                // Every key from the empty one on: the whole keyspace.
                (
                    vec![
                        "role",
                        "grant-permission",
                        AUTH_ROLE,
                        "readwrite",
                        "--from-key",
                        "",
                    ],
                    None,
                ),
                (vec!["user", "grant-role", &user, AUTH_ROLE], None),
            ]);
        }
        steps.push((vec!["auth", "enable"], None));
        for (args, new_password) in steps {
            let mut command = self.etcdctl_command_without_credentials();
            command.args(&args);
            if let Some(new_password) = new_password {
                command.arg(format!("--new-user-password={new_password}"));
            }
            let output = run_etcdctl(&self.etcdctl, command, None::<&str>)?;
            if !output.status.success() {
                return Err(EngineError::Setup {
                    instance: self.instance(),
                    step: format!("etcdctl {}", args.join(" ")),
                    status: output.status,
                    output: format!(
                        "{}{}",
                        String::from_utf8_lossy(&output.stdout),
                        String::from_utf8_lossy(&output.stderr)
                    ),
                });
            }
        }
        self.security.credentials = Some((user, password));
        Ok(())
    }

    fn new(
        name: String,
        ports: (u16, u16),
        initial_cluster: String,
        cluster_token: String,
        secured: Option<(u16, Option<EtcdTls>)>,
    ) -> Result<Self, EngineError> {
        let dir = tempfile::Builder::new()
            .prefix("regent-etcd-")
            .tempdir()
            .map_err(|source| EngineError::Io {
                action: "create a temporary directory for etcd",
                source,
            })?;
        let mut security = Security::default();
        if let Some((metrics_port, tls)) = secured {
            security.metrics_port = Some(metrics_port);
            if let Some(mode) = tls {
                security.tls = Some((mode, EtcdTlsFiles::generate(&dir.path().join("tls"))?));
            }
        }
        Ok(Self {
            name,
            client_port: ports.0,
            peer_port: ports.1,
            initial_cluster,
            cluster_token,
            etcd: Program::from_env("etcd", "REGENT_ETCD_BIN"),
            etcdctl: Program::from_env("etcdctl", "REGENT_ETCDCTL_BIN"),
            dir,
            child: None,
            security,
        })
    }

    fn spawn(&mut self) -> Result<(), EngineError> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|source| EngineError::Io {
                action: "open etcd's log file",
                source,
            })?;
        let log_err = log.try_clone().map_err(|source| EngineError::Io {
            action: "open etcd's log file",
            source,
        })?;
        let client_url = self.client_url();
        let peer_url = self.peer_url();
        let mut command = Command::new(self.etcd.command_name());
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("ETCD_") {
                command.env_remove(key);
            }
        }
        command
            .arg(format!("--name={}", self.name))
            .arg(format!("--data-dir={}", self.data_dir().display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster={}", self.initial_cluster))
            .arg(format!("--initial-cluster-token={}", self.cluster_token))
            .arg("--initial-cluster-state=new")
            .arg(format!(
                "--heartbeat-interval={}",
                HEARTBEAT_INTERVAL.as_millis()
            ))
            .arg(format!(
                "--election-timeout={}",
                ELECTION_TIMEOUT.as_millis()
            ))
            .arg("--logger=zap");
        if let Some(port) = self.security.metrics_port {
            command.arg(format!("--listen-metrics-urls=http://127.0.0.1:{port}"));
        }
        if let Some((mode, files)) = &self.security.tls {
            command
                .arg(format!("--cert-file={}", files.server_cert().display()))
                .arg(format!("--key-file={}", files.server_key().display()));
            if *mode == EtcdTls::ClientCert {
                command
                    .arg("--client-cert-auth")
                    .arg(format!("--trusted-ca-file={}", files.ca_cert().display()));
            }
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let child = command
            .spawn()
            .map_err(|source| self.etcd.spawn_error(source))?;
        self.child = Some(child);
        Ok(())
    }

    /// Polls `/health` until it answers healthy, the process exits, or
    /// `deadline` passes.
    fn wait_healthy(&mut self, deadline: Instant) -> Result<(), EngineError> {
        self.wait_until(deadline, Self::is_healthy)
    }

    /// Polls the peer port until etcd answers there (it does once it has
    /// bootstrapped), the process exits, or `deadline` passes.
    fn wait_serving_peers(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let peer_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.peer_port));
        self.wait_until(deadline, |_| {
            http::get(peer_addr, "/version", REQUEST_TIMEOUT).is_ok()
        })
    }

    fn wait_until(
        &mut self,
        deadline: Instant,
        ready: impl Fn(&Self) -> bool,
    ) -> Result<(), EngineError> {
        let started = Instant::now();
        loop {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.child = None;
                return Err(EngineError::Exited {
                    instance: self.instance(),
                    status,
                    log_tail: self.log_tail(),
                });
            }
            if ready(self) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(EngineError::NotReady {
                    instance: self.instance(),
                    waited: started.elapsed(),
                    log_tail: self.log_tail(),
                });
            }
            thread::sleep(POLL);
        }
    }

    /// Where `/health` is served: the metrics port of a secured member,
    /// else the client port.
    fn health_addr(&self) -> SocketAddr {
        self.metrics_addr().unwrap_or_else(|| self.client_addr())
    }

    fn metrics_addr(&self) -> Option<SocketAddr> {
        self.security
            .metrics_port
            .map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    }

    fn status(&self) -> Option<Status> {
        let response = http::post_json(
            self.client_addr(),
            "/v3/maintenance/status",
            "{}",
            REQUEST_TIMEOUT,
        )
        .ok()?;
        if response.status != 200 {
            return None;
        }
        Status::parse(&response.body)
    }

    fn instance(&self) -> String {
        format!("etcd member {} (client {})", self.name, self.endpoint())
    }

    fn log_tail(&self) -> String {
        process::log_tail(&self.log_path(), LOG_TAIL_LINES)
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Several etcd members on `127.0.0.1` forming one cluster, stopped when
/// dropped.
///
/// Members are numbered from 0 in the order of [`EtcdCluster::endpoints`]
/// and named `m0`, `m1`, …
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Etcd>,
}

impl EtcdCluster {
    /// Starts `n` members that know each other (one `--initial-cluster`
    /// listing all) and waits until every one is healthy.
    ///
    /// # Errors
    ///
    /// As [`Etcd::start`].
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn start(n: usize) -> Result<Self, EngineError> {
        assert!(n > 0, "an etcd cluster needs at least one member");
        Ok(Self {
            members: start_members(n, None)?,
        })
    }

    /// The number of members, running or not.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false: a cluster has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The client endpoints (`127.0.0.1:PORT`) of all members, running or
    /// not, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Etcd::endpoint).collect()
    }

    /// The client endpoints of the members the kit has not stopped or
    /// killed.
    pub fn running_endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.is_running())
            .map(Etcd::endpoint)
            .collect()
    }

    /// Member `i`.
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn member(&self, i: usize) -> &Etcd {
        &self.members[i]
    }

    /// Member `i`, to stop or restart it.
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn member_mut(&mut self, i: usize) -> &mut Etcd {
        &mut self.members[i]
    }

    /// All members, in order.
    pub fn members(&self) -> &[Etcd] {
        &self.members
    }

    /// Kills member `i` at once (SIGKILL to its PID), as a crash would.
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// Stops member `i` gracefully; see [`Etcd::stop`].
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn stop(&mut self, i: usize) {
        self.members[i].stop();
    }

    /// Restarts member `i` with its data dir and waits until it is healthy;
    /// see [`Etcd::restart`].
    ///
    /// # Errors
    ///
    /// As [`Etcd::restart`].
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn restart(&mut self, i: usize) -> Result<(), EngineError> {
        self.members[i].restart()
    }

    /// The running member that is Raft leader now, if any member says it is.
    ///
    /// Asks every running member for its status (`POST
    /// /v3/maintenance/status`). Right after a leader change two members may
    /// each believe they lead; the one with the higher Raft term wins.
    pub fn leader_index(&self) -> Option<usize> {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.is_running())
            .filter_map(|(i, m)| {
                m.status()
                    .filter(Status::is_leader)
                    .map(|s| (s.raft_term, i))
            })
            .max()
            .map(|(_, i)| i)
    }

    /// Waits up to `timeout` for [`EtcdCluster::leader_index`] to name a
    /// leader.
    ///
    /// # Errors
    ///
    /// [`EngineError::NoLeader`] if none did in time.
    pub fn wait_for_leader(&self, timeout: Duration) -> Result<usize, EngineError> {
        let started = Instant::now();
        loop {
            if let Some(i) = self.leader_index() {
                return Ok(i);
            }
            if started.elapsed() >= timeout {
                return Err(EngineError::NoLeader {
                    engine: "etcd",
                    waited: started.elapsed(),
                });
            }
            thread::sleep(POLL);
        }
    }

    /// A `Command` for `etcdctl` with `ETCDCTL_API=3` and `--endpoints=`
    /// the running members; add the arguments and run or spawn it.
    pub fn etcdctl_command(&self) -> Command {
        etcdctl_command(&self.members[0].etcdctl, &self.running_endpoints())
    }

    /// Runs `etcdctl ARGS` against the running members and returns its
    /// output, successful or not.
    ///
    /// # Errors
    ///
    /// As [`Etcd::try_etcdctl`].
    pub fn try_etcdctl<I, S>(&self, args: I) -> Result<Output, EngineError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run_etcdctl(&self.members[0].etcdctl, self.etcdctl_command(), args)
    }

    /// Runs `etcdctl ARGS` against the running members and returns its
    /// output, successful or not.
    ///
    /// # Panics
    ///
    /// As [`Etcd::etcdctl`].
    pub fn etcdctl<I, S>(&self, args: I) -> Output
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.try_etcdctl(args).unwrap_or_else(|err| panic!("{err}"))
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        // A leader that stops hands leadership to a follower first and waits
        // up to etcd's request timeout (5 s) for it, even when the followers
        // are already gone. So: stop the followers together, wait until the
        // lone leader has stepped down for lack of a quorum (etcd's check
        // quorum, after an election timeout), then stop it.
        let deadline = Instant::now() + STOP_TIMEOUT;
        let leader = self.leader_index();
        for (i, member) in self.members.iter_mut().enumerate() {
            if let (true, Some(child)) = (Some(i) != leader, member.child.as_mut()) {
                process::signal(child, Signal::TERM);
            }
        }
        for (i, member) in self.members.iter_mut().enumerate() {
            if Some(i) == leader {
                continue;
            }
            if let Some(mut child) = member.child.take()
                && !process::wait_until(&mut child, deadline)
            {
                process::kill(&mut child);
            }
        }
        if let Some(leader) = leader.map(|i| &mut self.members[i]) {
            let step_down = Instant::now() + 10 * ELECTION_TIMEOUT;
            while leader.is_leader() && Instant::now() < step_down {
                thread::sleep(POLL);
            }
            leader.stop();
        }
    }
}

/// Starts `n` members that form one cluster, on fresh ports after a port
/// collision. Members of a `builder` get a metrics port as well.
fn start_members(n: usize, builder: Option<&EtcdBuilder>) -> Result<Vec<Etcd>, EngineError> {
    static CLUSTERS: AtomicU64 = AtomicU64::new(0);
    let mut attempt = 1;
    loop {
        let token = format!(
            "regent-{}-{}",
            std::process::id(),
            CLUSTERS.fetch_add(1, Ordering::Relaxed)
        );
        // Client, peer, and for a secured member metrics.
        let per_member = if builder.is_some() { 3 } else { 2 };
        let ports = process::free_ports(per_member * n)?;
        let names: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        let initial_cluster = names
            .iter()
            .zip(ports.chunks(per_member))
            .map(|(name, p)| format!("{name}=http://127.0.0.1:{}", p[1]))
            .collect::<Vec<_>>()
            .join(",");
        let mut members = names
            .into_iter()
            .zip(ports.chunks(per_member))
            .map(|(name, p)| {
                let secured = builder.map(|b| (p[2], b.tls));
                Etcd::new(
                    name,
                    (p[0], p[1]),
                    initial_cluster.clone(),
                    token.clone(),
                    secured,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let deadline = Instant::now() + START_TIMEOUT;
        // One after the other: a new member first asks its peers whether it
        // was bootstrapped already, waiting up to 1 s for each peer that has
        // bound its port but does not answer yet. Started together, members
        // would often wait 1–2 s for each other; started in turn, each peer
        // either answers or refuses the connection at once.
        let started = members
            .iter_mut()
            .try_for_each(|member| {
                member.spawn()?;
                if n > 1 {
                    member.wait_serving_peers(deadline)?;
                }
                Ok(())
            })
            .and_then(|()| {
                members
                    .iter_mut()
                    .try_for_each(|member| member.wait_healthy(deadline))
            });
        match started {
            Ok(()) => return Ok(members),
            Err(err) if attempt < START_ATTEMPTS && is_port_collision(&err) => attempt += 1,
            Err(err) => return Err(err),
        }
        // `members` drops here: the ones that started are stopped.
    }
}

/// The role the kit grants a user other than `root`: read and write on every
/// key.
const AUTH_ROLE: &str = "regent-readwrite";

/// A password nobody needs to know (for `root` when the test logs in as
/// another user).
fn random_password() -> String {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!(
        "{:016x}{:016x}",
        hasher.finish(),
        RandomState::new().build_hasher().finish()
    )
}

fn is_port_collision(err: &EngineError) -> bool {
    matches!(err, EngineError::Exited { log_tail, .. } if log_tail.contains("address already in use"))
}

fn etcdctl_command(etcdctl: &Program, endpoints: &[String]) -> Command {
    let mut command = Command::new(etcdctl.command_name());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ETCDCTL_") {
            command.env_remove(key);
        }
    }
    command
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", endpoints.join(",")))
        .stdin(Stdio::null());
    command
}

fn run_etcdctl<I, S>(
    etcdctl: &Program,
    mut command: Command,
    args: I,
) -> Result<Output, EngineError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    command
        .args(args)
        .output()
        .map_err(|source| etcdctl.spawn_error(source))
}

/// The part of `/v3/maintenance/status` the kit reads. The JSON gateway
/// writes 64-bit integers as strings and leaves out zero values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Status {
    member_id: u64,
    leader: u64,
    raft_term: u64,
}

impl Status {
    fn parse(body: &str) -> Option<Self> {
        let json: serde_json::Value = serde_json::from_str(body).ok()?;
        let number = |value: Option<&serde_json::Value>| match value {
            None => Some(0),
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            Some(value) => value.as_u64(),
        };
        Some(Self {
            member_id: number(json.get("header").and_then(|h| h.get("member_id")))?,
            leader: number(json.get("leader"))?,
            raft_term: number(json.get("raftTerm"))?,
        })
    }

    fn is_leader(&self) -> bool {
        self.leader != 0 && self.leader == self.member_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_gateway_status() {
        let body = r#"{"header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"1","raft_term":"2"},"version":"3.4.23","dbSize":"20480","leader":"13668033151171901709","raftIndex":"5","raftTerm":"2"}"#;
        let status = Status::parse(body).unwrap();
        assert_eq!(status.member_id, 13_668_033_151_171_901_709);
        assert_eq!(status.raft_term, 2);
        assert!(status.is_leader());
    }

    #[test]
    fn a_member_without_leader_is_not_leader() {
        let status = Status::parse(r#"{"header":{"member_id":"7"},"raftTerm":"3"}"#).unwrap();
        assert_eq!(status.leader, 0);
        assert!(!status.is_leader());
    }

    #[test]
    fn only_an_exit_on_a_taken_port_is_a_collision() {
        let exited = |log_tail: &str| EngineError::Exited {
            instance: "etcd member m0".into(),
            status: Command::new("false").status().unwrap(),
            log_tail: log_tail.into(),
        };
        assert!(is_port_collision(&exited(
            r#"{"level":"fatal","msg":"listen tcp 127.0.0.1:2380: bind: address already in use"}"#
        )));
        assert!(!is_port_collision(&exited(
            "member m0 has already been bootstrapped"
        )));
    }
}
