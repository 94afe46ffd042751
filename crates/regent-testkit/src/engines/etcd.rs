//! etcd 3.4 on `127.0.0.1`: one member ([`Etcd`]) or a cluster of several
//! ([`EtcdCluster`]), plus `etcdctl` pointed at them.
//!
//! Every member gets two free ports (client and peer) and its own temporary
//! directory holding its data dir and its log (`etcd.log`, zap JSON lines;
//! the last lines are quoted in startup errors). A member is an [`Engine`]:
//! its store URL is `etcd://127.0.0.1:PORT` (`etcds://` with TLS). Members run with
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
//!   member's temporary directory ([`Etcd::tls_files`], made by
//!   [`crate::pki`]). The client port
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

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;

use super::http;
use super::process::{self, EngineProcess, Program};
use super::{Engine, EngineError, Signaled};

pub use super::{START_TIMEOUT, STOP_TIMEOUT};

mod cluster;
mod etcdctl;

pub use cluster::EtcdCluster;
use cluster::Status;

/// The certificates and keys of a member with TLS, from
/// [`Etcd::tls_files`]: the kit's generic test PKI, with etcd's
/// `--trusted-ca-file` the test CA and `--cert-file`/`--key-file` the
/// server's certificate and key.
pub type EtcdTlsFiles = crate::pki::TlsFiles;

/// etcd's `--heartbeat-interval` for every member the kit starts.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(10);

/// etcd's `--election-timeout` for every member the kit starts: a follower
/// that hears no heartbeat for this long campaigns to become Raft leader.
pub const ELECTION_TIMEOUT: Duration = Duration::from_millis(100);

/// Bound on each health or status request.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

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
    etcdctl: Program,
    security: Security,
    /// etcd itself, in a temporary directory holding `data/`, `etcd.log`
    /// and `tls/`; stopped and removed on drop.
    process: EngineProcess,
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

    /// The member's Prometheus metrics (`GET /metrics` on the client
    /// port), such as `grpc_server_msg_received_total`: every request the
    /// member took, by gRPC method.
    ///
    /// # Errors
    ///
    /// On a member with TLS (plain HTTP only), or when the member could not
    /// be reached or did not answer in time.
    pub fn metrics(&self) -> std::io::Result<String> {
        if self.security.tls.is_some() {
            return Err(std::io::Error::other(
                "metrics are read over plain HTTP; this member has TLS",
            ));
        }
        let response = http::get(self.client_addr(), "/metrics", Duration::from_secs(5))?;
        if response.status != 200 {
            return Err(std::io::Error::other(format!(
                "GET /metrics: {}",
                response.status
            )));
        }
        Ok(response.body)
    }

    /// The peer URL, `http://127.0.0.1:PORT`, where members talk Raft.
    pub fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    /// The PID of the running process, or `None` once the kit has stopped or
    /// killed it.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the kit started the process and has not stopped or killed it
    /// since. (A process that died on its own still counts until the kit
    /// notices; [`Etcd::is_healthy`] asks the process itself.)
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// The data dir (`--data-dir`); it survives [`Etcd::stop`] and
    /// [`Etcd::kill`] and is removed on drop.
    pub fn data_dir(&self) -> PathBuf {
        self.process.data_dir()
    }

    /// etcd's log: standard output and error of every run of this member.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// Whether `GET /health` answers `"health":"true"` now (on the metrics
    /// port of a secured member).
    pub fn is_healthy(&self) -> bool {
        is_healthy_at(self.health_addr())
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
        self.process.stop();
    }

    /// Kills the process at once (SIGKILL to its PID), as a crash would,
    /// and reaps it. Does nothing if it is not running.
    pub fn kill(&mut self) {
        self.process.kill();
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

    fn new(
        name: String,
        ports: (u16, u16),
        initial_cluster: String,
        cluster_token: String,
        secured: Option<(u16, Option<EtcdTls>)>,
    ) -> Result<Self, EngineError> {
        let process = EngineProcess::new(Program::from_env("etcd", "REGENT_ETCD_BIN"))?;
        let mut security = Security::default();
        if let Some((metrics_port, tls)) = secured {
            security.metrics_port = Some(metrics_port);
            if let Some(mode) = tls {
                let files = EtcdTlsFiles::generate(&process.dir().join("tls"))?;
                security.tls = Some((mode, files));
            }
        }
        Ok(Self {
            name,
            client_port: ports.0,
            peer_port: ports.1,
            initial_cluster,
            cluster_token,
            etcdctl: Program::from_env("etcdctl", "REGENT_ETCDCTL_BIN"),
            security,
            process,
        })
    }

    /// etcd's command line for this member; everything else of starting
    /// it is [`EngineProcess`]'s.
    fn spawn(&mut self) -> Result<(), EngineError> {
        let client_url = self.client_url();
        let peer_url = self.peer_url();
        let mut command = self.process.program().command("ETCD_");
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
        self.process.spawn(command)
    }

    /// Polls `/health` until it answers healthy, the process exits, or
    /// `deadline` passes.
    fn wait_healthy(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let (addr, instance) = (self.health_addr(), self.instance());
        self.process
            .wait_ready(deadline, &instance, || is_healthy_at(addr))
    }

    /// Polls the peer port until etcd answers there (it does once it has
    /// bootstrapped), the process exits, or `deadline` passes.
    fn wait_serving_peers(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let peer_addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.peer_port));
        let instance = self.instance();
        self.process.wait_ready(deadline, &instance, || {
            http::get(peer_addr, "/version", REQUEST_TIMEOUT).is_ok()
        })
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
}

/// A member as one of the [engines](super): for a member of an
/// [`EtcdCluster`], [`Engine::restart`] waits for a quorum as
/// [`Etcd::restart`] does.
impl Engine for Etcd {
    /// As [`Etcd::start`].
    fn start() -> Result<Self, EngineError> {
        Etcd::start()
    }

    fn kind(&self) -> &'static str {
        "etcd"
    }

    /// etcd's leader revokes an expired lease on its next check: up to a
    /// second late (`regent_etcd::EXPIRY_SLACK`).
    fn expiry_slack(&self) -> ExpirySlack {
        ExpirySlack::fixed(Duration::from_secs(1))
    }

    /// `etcd://127.0.0.1:PORT`, or `etcds://127.0.0.1:PORT` for a member
    /// with TLS (its certificates and credentials are for the caller to
    /// pass as options).
    fn store_url(&self) -> String {
        let scheme = if self.security.tls.is_some() {
            "etcds"
        } else {
            "etcd"
        };
        format!("{scheme}://{}", self.endpoint())
    }

    fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    fn is_healthy(&self) -> bool {
        Etcd::is_healthy(self)
    }

    fn kill(&mut self) -> Signaled {
        self.process.kill()
    }

    fn pause(&mut self) -> Signaled {
        self.process.pause()
    }

    fn resume(&mut self) -> Signaled {
        self.process.resume()
    }

    /// As [`Etcd::stop`].
    fn stop(&mut self) -> Signaled {
        self.process.stop()
    }

    fn restart(&mut self) -> Result<(), EngineError> {
        Etcd::restart(self)
    }

    fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}

/// Starts `n` members that form one cluster, on fresh ports after a port
/// collision. Members of a `builder` get a metrics port as well.
fn start_members(n: usize, builder: Option<&EtcdBuilder>) -> Result<Vec<Etcd>, EngineError> {
    static CLUSTERS: AtomicU64 = AtomicU64::new(0);
    process::retry_on_port_collision(|| {
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
        members.iter_mut().try_for_each(|member| {
            member.spawn()?;
            if n > 1 {
                member.wait_serving_peers(deadline)?;
            }
            Ok::<_, EngineError>(())
        })?;
        members
            .iter_mut()
            .try_for_each(|member| member.wait_healthy(deadline))?;
        // On an error `members` drops: the ones that started are stopped.
        Ok(members)
    })
}

/// Whether `GET /health` on `addr` answers `"health":"true"` now.
fn is_healthy_at(addr: SocketAddr) -> bool {
    http::get(addr, "/health", REQUEST_TIMEOUT)
        .is_ok_and(|r| r.status == 200 && r.body.contains(r#""health":"true""#))
}
