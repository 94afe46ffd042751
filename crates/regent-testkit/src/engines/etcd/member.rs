//! One etcd member: [`Etcd`], secured or not ([`EtcdBuilder`]), and the
//! start of the members of a cluster.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::http;
use super::super::process::{self, EngineProcess, Program};
use super::super::timeouts::START_TIMEOUT;
use super::status::Status;

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
///
/// [`EtcdCluster`]: super::EtcdCluster
#[derive(Debug)]
pub struct Etcd {
    name: String,
    client_port: u16,
    peer_port: u16,
    initial_cluster: String,
    cluster_token: String,
    pub(super) etcdctl: Program,
    pub(super) security: Security,
    /// etcd itself, in a temporary directory holding `data/`, `etcd.log`
    /// and `tls/`; stopped and removed on drop.
    pub(super) process: EngineProcess,
}

/// How a member is secured; the default is not at all.
#[derive(Default)]
pub(super) struct Security {
    pub(super) tls: Option<(EtcdTls, EtcdTlsFiles)>,
    /// The user and password etcdctl and clients log in with, once
    /// authentication is enabled.
    pub(super) credentials: Option<(String, String)>,
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
/// [`EtcdBuilder::start`]. See [Secured members](super#secured-members).
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
    ///
    /// [`STOP_TIMEOUT`]: super::STOP_TIMEOUT
    /// [`EtcdCluster`]: super::EtcdCluster
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

    pub(super) fn status(&self) -> Option<Status> {
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

    pub(super) fn instance(&self) -> String {
        format!("etcd member {} (client {})", self.name, self.endpoint())
    }
}

/// A member as one of the [engines](super::super): for a member of an
/// [`EtcdCluster`], [`Engine::restart`] waits for a quorum as
/// [`Etcd::restart`] does.
///
/// [`EtcdCluster`]: super::EtcdCluster
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
pub(super) fn start_members(
    n: usize,
    builder: Option<&EtcdBuilder>,
) -> Result<Vec<Etcd>, EngineError> {
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
