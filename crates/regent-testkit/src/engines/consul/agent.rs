//! One Consul agent: [`Consul`], a dev agent or a cluster's member, with
//! its figures and health checks, and [`ConsulBuilder`], which starts a
//! secured dev agent.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;
use rustix::process::Signal;

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::http::{self, Response as HttpResponse};
use super::super::process::{self, EngineProcess, Program};
use super::super::timeouts::{START_TIMEOUT, STOP_TIMEOUT};
use super::secured::{self, ConsulAcl, ConsulTls, ConsulTlsFiles, Security};
use super::timeouts::API_TIMEOUT;

/// `-retry-interval` of every cluster agent: how soon an agent tries
/// `-retry-join` again when no server listened yet.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(200);

/// The shortest session TTL Consul accepts.
pub const MIN_TTL: Duration = Duration::from_secs(10);

/// Bound on each step of [`Consul::leave`]'s request, which Consul
/// answers once the leave has spread (about 4 s).
const LEAVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bound on each readiness or status request.
const STATUS_TIMEOUT: Duration = Duration::from_millis(500);

/// The datacenter of the dev agent: Consul's default.
const DEV_DATACENTER: &str = "dc1";

/// What kind of agent a [`Consul`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsulRole {
    /// `consul agent -dev`: a lone server with its store in memory.
    Dev,
    /// A server of a [`ConsulCluster`](super::ConsulCluster): a Raft voter
    /// holding the data.
    Server,
    /// A client agent of a [`ConsulCluster`](super::ConsulCluster): no data
    /// of its own; it forwards to the servers.
    Client,
}

impl fmt::Display for ConsulRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Dev => "dev agent",
            Self::Server => "server",
            Self::Client => "client agent",
        })
    }
}

/// The ports an agent binds; DNS and gRPC stay off, and HTTPS unless the
/// agent is [secured with TLS](super#secured-dev-agents).
#[derive(Debug, Clone, Copy)]
pub(super) struct Ports {
    http: u16,
    pub(super) serf_lan: u16,
    serf_wan: u16,
    server: u16,
    https: Option<u16>,
}

impl Ports {
    /// How many free ports one agent takes (without HTTPS).
    pub(super) const PER_AGENT: usize = 4;

    /// Ports from [`Self::PER_AGENT`] free ports.
    pub(super) fn from_free(ports: &[u16]) -> Self {
        Self {
            http: ports[0],
            serf_lan: ports[1],
            serf_wan: ports[2],
            server: ports[3],
            https: None,
        }
    }

    /// The `-hcl` setting them.
    fn hcl(&self) -> String {
        let https = self.https.map_or(-1, i32::from);
        format!(
            "ports {{ http = {}, serf_lan = {}, serf_wan = {}, server = {}, \
             dns = -1, grpc = -1, https = {https} }}",
            self.http, self.serf_lan, self.serf_wan, self.server
        )
    }
}

/// Where a cluster agent belongs: its datacenter, how many servers bootstrap
/// it, and the serf LAN ports it joins.
#[derive(Debug, Clone)]
pub(super) struct Membership {
    pub(super) datacenter: String,
    pub(super) servers: usize,
    pub(super) retry_join: Vec<u16>,
}

/// Starts a secured dev agent: [`Consul::builder`], setters, then
/// [`ConsulBuilder::start`]. See [Secured dev
/// agents](super#secured-dev-agents).
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct ConsulBuilder {
    tls: Option<ConsulTls>,
    acl: Option<String>,
}

impl ConsulBuilder {
    /// Serves the HTTP API over HTTPS as well, on a port of its own
    /// (default: plain HTTP only).
    pub fn tls(mut self, tls: ConsulTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Enables ACLs with `default_policy = "deny"` (default: off), and
    /// makes the tokens of [`ConsulAcl`]: one that may run elections under
    /// the keys starting with `key_prefix` (such as `regent-tls/`), and one
    /// that may only read them.
    pub fn acl(mut self, key_prefix: impl Into<String>) -> Self {
        self.acl = Some(key_prefix.into());
        self
    }

    /// Starts the dev agent on free ports, waits until it is ready, then
    /// creates the ACL policies and tokens if asked.
    ///
    /// # Errors
    ///
    /// As [`Consul::start`]; [`EngineError::Pki`] when the certificates
    /// could not be made; [`EngineError::Io`] when random token ids could
    /// not be read from `/dev/urandom` or the agent refused to create a
    /// policy or a token (the agent is stopped then).
    pub fn start(self) -> Result<Consul, EngineError> {
        process::retry_on_port_collision(|| {
            let https = usize::from(self.tls.is_some());
            let free = process::free_ports(Ports::PER_AGENT + https)?;
            let mut ports = Ports::from_free(&free);
            if self.tls.is_some() {
                ports.https = Some(free[Ports::PER_AGENT]);
            }
            let mut consul = Consul::new("dev".to_owned(), ConsulRole::Dev, ports, None)?;
            consul.security = Security::new(consul.process.dir(), self.tls, self.acl.clone())?;
            consul.spawn()?;
            consul.wait_healthy(Instant::now() + START_TIMEOUT)?;
            consul.security.set_up_acl(consul.http_addr())?;
            Ok(consul)
        })
    }
}

/// One Consul agent on `127.0.0.1`, stopped when dropped: a dev agent
/// ([`Consul::start`]) or a member of a [`ConsulCluster`].
///
/// [`ConsulCluster`]: super::ConsulCluster
#[derive(Debug)]
pub struct Consul {
    node: String,
    role: ConsulRole,
    ports: Ports,
    /// `None` for the dev agent.
    membership: Option<Membership>,
    /// TLS and ACLs of a dev agent from [`Consul::builder`]; none
    /// otherwise.
    security: secured::Security,
    /// Consul itself, in a temporary directory holding `data/` and
    /// `consul.log`; stopped (SIGINT) and removed on drop.
    pub(super) process: EngineProcess,
}

impl Consul {
    /// Starts a dev agent (`consul agent -dev`, node `dev`) on free ports
    /// and waits until it is ready: it leads and its node is registered.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_CONSUL_BIN`) when there is no consul to run: the
    /// message names `scripts/install-engines`. [`EngineError::Exited`] or
    /// [`EngineError::NotReady`] when the agent did not become ready within
    /// [`START_TIMEOUT`], quoting its log; [`EngineError::Io`] or
    /// [`EngineError::Spawn`] when setting up failed.
    pub fn start() -> Result<Self, EngineError> {
        process::retry_on_port_collision(|| {
            let ports = Ports::from_free(&process::free_ports(Ports::PER_AGENT)?);
            let mut consul = Self::new("dev".to_owned(), ConsulRole::Dev, ports, None)?;
            consul.spawn()?;
            consul.wait_healthy(Instant::now() + START_TIMEOUT)?;
            Ok(consul)
        })
    }

    /// Starts building a secured dev agent: HTTPS, ACLs or both (see
    /// [Secured dev agents](super#secured-dev-agents)). With no setter
    /// called it starts a dev agent as [`Consul::start`] does.
    pub fn builder() -> ConsulBuilder {
        ConsulBuilder::default()
    }

    /// The TLS mode of the HTTPS port, `None` without one.
    pub fn tls(&self) -> Option<ConsulTls> {
        self.security.tls.as_ref().map(|(mode, _)| *mode)
    }

    /// The certificates and keys of an agent with TLS.
    pub fn tls_files(&self) -> Option<&ConsulTlsFiles> {
        self.security.tls.as_ref().map(|(_, files)| files)
    }

    /// The ACL tokens of an agent with ACLs.
    pub fn acl(&self) -> Option<&ConsulAcl> {
        self.security.acl.as_ref()
    }

    /// The HTTPS address of an agent with TLS, as `127.0.0.1:PORT`: the
    /// one clients under test talk to (its store URL is
    /// `consuls://` this).
    pub fn https_address(&self) -> Option<String> {
        self.https_addr().map(|addr| addr.to_string())
    }

    /// The HTTPS address of an agent with TLS.
    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.ports
            .https
            .map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    }

    /// The node name (`-node`): `dev`, or `s0`, `a1`, … in a cluster.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// What kind of agent this is.
    pub fn role(&self) -> ConsulRole {
        self.role
    }

    /// The datacenter: `dc1` for the dev agent, one of its own for each
    /// cluster.
    pub fn datacenter(&self) -> &str {
        self.membership
            .as_ref()
            .map_or(DEV_DATACENTER, |m| m.datacenter.as_str())
    }

    /// The HTTP address as `127.0.0.1:PORT`, the form `CONSUL_HTTP_ADDR`
    /// and Consul's clients take. On an agent with TLS this plain HTTP port
    /// is the kit's own (its health checks, [`Consul::http_get`],
    /// [`Consul::consul_command`]); clients under test take
    /// [`Consul::https_address`].
    pub fn address(&self) -> String {
        self.http_addr().to_string()
    }

    /// The HTTP address of the agent's API.
    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.ports.http))
    }

    /// The server RPC address, as `/v1/status/leader` names the leader
    /// (a client agent binds no such port).
    pub fn server_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.ports.server))
    }

    /// The serf LAN address, which other agents join.
    pub fn serf_lan_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.ports.serf_lan))
    }

    /// The PID of the running process, or `None` once the kit has stopped or
    /// killed it.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the kit started the process and has not stopped or killed it
    /// since. (A process that died on its own still counts until the kit
    /// notices; [`Consul::is_healthy`] asks the agent itself.)
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// The data dir (`-data-dir`) of a cluster member; it survives
    /// [`Consul::stop`] and [`Consul::kill`] and is removed on drop. The dev
    /// agent keeps its store in memory and writes nothing there.
    pub fn data_dir(&self) -> PathBuf {
        self.process.data_dir()
    }

    /// Consul's log: standard output and error of every run of this agent.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// Whether the agent is ready now: it knows a Raft leader and its own
    /// node is registered with `serfHealth` passing. A paused or stopped
    /// agent is not.
    pub fn is_healthy(&self) -> bool {
        self.leader().is_some() && self.node_is_passing()
    }

    /// Whether this agent is a server that believes it is the Raft leader
    /// now (a deposed leader may believe so for a moment;
    /// [`ConsulCluster::leader_server`] asks for a quorum).
    ///
    /// [`ConsulCluster::leader_server`]: super::ConsulCluster::leader_server
    pub fn is_leader(&self) -> bool {
        self.role != ConsulRole::Client && self.leader() == Some(self.server_addr().to_string())
    }

    /// The server RPC address (`127.0.0.1:PORT`) this agent names as the
    /// Raft leader (`GET /v1/status/leader`), or `None` if it names none or
    /// does not answer within half a second.
    pub fn leader(&self) -> Option<String> {
        leader_at(self.http_addr())
    }

    /// `GET PATH` on this agent's HTTP API, such as `/v1/kv/k` or
    /// `/v1/session/info/ID`, every step bounded by [`API_TIMEOUT`]. On an
    /// agent with ACLs the request carries the master token (`?token=`).
    ///
    /// # Errors
    ///
    /// When the request could not be sent or the response not read; an
    /// HTTP error status is a response.
    pub fn http_get(&self, path: &str) -> io::Result<HttpResponse> {
        http::get(self.http_addr(), &self.authorized(path), API_TIMEOUT)
    }

    /// `PUT PATH` on this agent's HTTP API, with `body` (JSON, or a KV
    /// value) if given, such as `/v1/session/create` or
    /// `/v1/kv/k?acquire=ID`; every step bounded by [`API_TIMEOUT`]. On an
    /// agent with ACLs the request carries the master token (`?token=`).
    ///
    /// # Errors
    ///
    /// As [`Consul::http_get`].
    pub fn http_put(&self, path: &str, body: Option<&str>) -> io::Result<HttpResponse> {
        http::put(self.http_addr(), &self.authorized(path), body, API_TIMEOUT)
    }

    /// A `Command` for the `consul` CLI pointed at this agent
    /// (`CONSUL_HTTP_ADDR`, the plain HTTP port); add the arguments and run
    /// or spawn it, for example `consul kv get K` or `consul lock PREFIX
    /// CHILD…`. On an agent with ACLs it gets the master token
    /// (`CONSUL_HTTP_TOKEN`).
    pub fn consul_command(&self) -> Command {
        let mut command = self.process.program().command("CONSUL_");
        command.env("CONSUL_HTTP_ADDR", self.address());
        if let Some(token) = self.security.master_token() {
            command.env("CONSUL_HTTP_TOKEN", token);
        }
        command
    }

    /// Stops the agent gracefully: SIGINT to its PID, then SIGKILL if it
    /// has not exited after [`STOP_TIMEOUT`]. Returns once it is reaped
    /// (about half a second); the data dir stays until drop. The agent
    /// does not leave the cluster: to the others it has failed (see
    /// [`Consul::leave`]).
    pub fn stop(&mut self) -> Signaled {
        self.process.stop()
    }

    /// Leaves the cluster and exits: `PUT /v1/agent/leave` (the agent tells
    /// the others it is going, and the servers deregister its node, which
    /// ends the sessions of the node at once), then waits until the process
    /// has exited, SIGKILL after [`STOP_TIMEOUT`], and reaps it. Takes
    /// about 4 s. Does nothing if the agent is not running.
    ///
    /// # Errors
    ///
    /// When the agent did not answer the leave request with 200 (it is
    /// stopped then all the same).
    pub fn leave(&mut self) -> io::Result<()> {
        if !self.is_running() {
            return Ok(());
        }
        let left = http::put(self.http_addr(), "/v1/agent/leave", None, LEAVE_TIMEOUT);
        match left {
            Ok(response) if response.status == 200 => {
                self.process.finish_stop(Instant::now() + STOP_TIMEOUT);
                Ok(())
            }
            other => {
                self.process.stop();
                Err(match other {
                    Ok(response) => io::Error::other(format!(
                        "{}: leave answered {}: {}",
                        self.instance(),
                        response.status,
                        response.body
                    )),
                    Err(err) => err,
                })
            }
        }
    }

    /// Kills the agent at once (SIGKILL to its PID), as a crash would, and
    /// reaps it.
    pub fn kill(&mut self) -> Signaled {
        self.process.kill()
    }

    /// Pauses the agent (SIGSTOP): it keeps its sockets but answers
    /// nothing, neither HTTP nor gossip nor Raft, as a hung agent would.
    pub fn pause(&mut self) -> Signaled {
        self.process.pause()
    }

    /// Lets a paused agent go on (SIGCONT).
    pub fn resume(&mut self) -> Signaled {
        self.process.resume()
    }

    /// Stops the agent if it runs, starts it again on the same ports (and,
    /// in a cluster, the same data dir), and waits until it is ready: for a
    /// cluster member, until it has rejoined and the leader has marked its
    /// node passing again. A dev agent comes back empty (see [the
    /// module](super#the-dev-agent)) but for its ACL policies and tokens,
    /// which the kit creates again with the same secrets.
    ///
    /// # Errors
    ///
    /// As [`Consul::start`]; a port taken meanwhile is an error here, since
    /// the other agents know this one by its ports. A server is ready only
    /// with a quorum, so restart servers one at a time while the others run.
    pub fn restart(&mut self) -> Result<(), EngineError> {
        self.stop();
        self.spawn()?;
        self.wait_healthy(Instant::now() + START_TIMEOUT)?;
        self.security.set_up_acl(self.http_addr())
    }

    pub(super) fn new(
        node: String,
        role: ConsulRole,
        ports: Ports,
        membership: Option<Membership>,
    ) -> Result<Self, EngineError> {
        let process = EngineProcess::new(Program::from_env("consul", "REGENT_CONSUL_BIN"))?
            .with_stop_signal(Signal::INT);
        Ok(Self {
            node,
            role,
            ports,
            membership,
            security: secured::Security::default(),
            process,
        })
    }

    /// Consul's command line for this agent; everything else of starting
    /// it is [`EngineProcess`]'s.
    pub(super) fn spawn(&mut self) -> Result<(), EngineError> {
        let mut command = self.process.program().command("CONSUL_");
        command.current_dir(self.process.dir()).arg("agent");
        match &self.membership {
            None => {
                command.arg("-dev");
            }
            Some(membership) => {
                if self.role == ConsulRole::Server {
                    command
                        .arg("-server")
                        .arg(format!("-bootstrap-expect={}", membership.servers))
                        .arg("-hcl=performance { raft_multiplier = 1 }");
                }
                command
                    // Servers skip it by default, client agents do not.
                    .arg("-hcl=skip_leave_on_interrupt = true")
                    .arg(format!("-datacenter={}", membership.datacenter))
                    .arg(format!("-data-dir={}", self.process.data_dir().display()))
                    .arg(format!("-retry-interval={}ms", RETRY_INTERVAL.as_millis()))
                    .args(
                        membership
                            .retry_join
                            .iter()
                            .map(|port| format!("-retry-join=127.0.0.1:{port}")),
                    );
            }
        }
        command
            .arg(format!("-node={}", self.node))
            .args([
                "-bind=127.0.0.1",
                "-client=127.0.0.1",
                "-advertise=127.0.0.1",
            ])
            .arg("-hcl=disable_update_check = true")
            .arg(format!("-hcl={}", self.ports.hcl()))
            .args(self.security.args());
        self.process.spawn(command)
    }

    /// Polls [`Consul::is_healthy`] until it says yes, the process exits, or
    /// `deadline` passes.
    fn wait_healthy(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let (instance, addr, node) = (self.instance(), self.http_addr(), self.node.clone());
        let token = self.security.master_token().map(str::to_owned);
        self.process.wait_ready(deadline, &instance, || {
            leader_at(addr).is_some() && node_is_passing_at(addr, &node, token.as_deref())
        })
    }

    /// [`EngineError::Exited`] if the process exited on its own.
    pub(super) fn check_not_exited(&mut self) -> Result<(), EngineError> {
        let instance = self.instance();
        self.process.check_not_exited(&instance)
    }

    fn node_is_passing(&self) -> bool {
        node_is_passing_at(self.http_addr(), &self.node, self.security.master_token())
    }

    /// `path` with the master token of an agent with ACLs.
    fn authorized(&self, path: &str) -> String {
        secured::with_token(path, self.security.master_token())
    }

    pub(super) fn instance(&self) -> String {
        format!(
            "consul {} {} (http {})",
            self.role,
            self.node,
            self.address()
        )
    }
}

/// A Consul agent as one of the [engines](super::super). For the dev agent,
/// [`Engine::restart`] comes back with an empty store (see [the
/// module](super#the-dev-agent)); a cluster member keeps its data.
impl Engine for Consul {
    /// As [`Consul::start`]: a dev agent.
    fn start() -> Result<Self, EngineError> {
        Consul::start()
    }

    fn kind(&self) -> &'static str {
        "consul"
    }

    /// Consul's session TTL floor: 10 s.
    fn min_ttl(&self) -> Duration {
        MIN_TTL
    }

    /// What regent's Consul store declares with its default lock delay
    /// (the ttl): sessions of `max(10 s, ttl/2)`, which Consul ends one to
    /// two of them after the last renewal, then the ttl's lock delay.
    fn expiry_slack(&self) -> ExpirySlack {
        ExpirySlack::proportional(100).at_least(MIN_TTL * 2)
    }

    /// `consul://127.0.0.1:PORT`, this agent's HTTP API, or
    /// `consuls://127.0.0.1:PORT`, its HTTPS port, for an agent with TLS
    /// (its certificates and token are for the caller to pass as options).
    fn store_url(&self) -> String {
        match self.https_address() {
            Some(https) => format!("consuls://{https}"),
            None => format!("consul://{}", self.address()),
        }
    }

    fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    fn is_healthy(&self) -> bool {
        Consul::is_healthy(self)
    }

    fn kill(&mut self) -> Signaled {
        Consul::kill(self)
    }

    fn pause(&mut self) -> Signaled {
        Consul::pause(self)
    }

    fn resume(&mut self) -> Signaled {
        Consul::resume(self)
    }

    /// As [`Consul::stop`]: SIGINT, then SIGKILL after a bound.
    fn stop(&mut self) -> Signaled {
        Consul::stop(self)
    }

    fn restart(&mut self) -> Result<(), EngineError> {
        Consul::restart(self)
    }

    fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}

/// The leader `GET /v1/status/leader` on `addr` names now, if any.
fn leader_at(addr: SocketAddr) -> Option<String> {
    let response = http::get(addr, "/v1/status/leader", STATUS_TIMEOUT).ok()?;
    if response.status != 200 {
        return None;
    }
    serde_json::from_str::<String>(&response.body)
        .ok()
        .filter(|leader| !leader.is_empty())
}

/// Whether `GET /v1/health/node/NODE` on `addr` shows the node registered
/// with its `serfHealth` check passing (the check exists only once the
/// leader registered the node). With ACLs, `token` must be one that may
/// read the node (without one the agent hides the check).
fn node_is_passing_at(addr: SocketAddr, node: &str, token: Option<&str>) -> bool {
    let path = secured::with_token(&format!("/v1/health/node/{node}"), token);
    let Ok(response) = http::get(addr, &path, STATUS_TIMEOUT) else {
        return false;
    };
    response.status == 200 && serf_health_passes(&response.body)
}

/// Whether a `/v1/health/node/NODE` body holds a passing `serfHealth` check.
fn serf_health_passes(body: &str) -> bool {
    let Ok(serde_json::Value::Array(checks)) = serde_json::from_str(body) else {
        return false;
    };
    checks.iter().any(|check| {
        check.get("CheckID").and_then(|v| v.as_str()) == Some("serfHealth")
            && check.get("Status").and_then(|v| v.as_str()) == Some("passing")
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn a_node_is_ready_once_serf_health_passes() {
        assert!(!serf_health_passes("[]"), "not registered yet");
        assert!(!serf_health_passes("not json"));
        let check = |status: &str| {
            format!(
                r#"[{{"Node":"a0","CheckID":"serfHealth","Name":"Serf Health Status","Status":"{status}"}}]"#
            )
        };
        assert!(serf_health_passes(&check("passing")));
        assert!(!serf_health_passes(&check("critical")));
    }

    #[test]
    fn ports_leave_dns_grpc_and_https_off() {
        let hcl = Ports::from_free(&[1, 2, 3, 4]).hcl();
        assert_eq!(
            hcl,
            "ports { http = 1, serf_lan = 2, serf_wan = 3, server = 4, \
             dns = -1, grpc = -1, https = -1 }"
        );
    }

    /// `consul ARGS` over the agent's HTTPS port with only the TLS files
    /// and token given here.
    fn consul_over_https(
        consul: &Consul,
        cert: Option<(&Path, &Path)>,
        token: Option<&str>,
        args: &[&str],
    ) -> std::process::Output {
        let files = consul.tls_files().expect("TLS files");
        let mut command = consul.consul_command();
        command
            .env_remove("CONSUL_HTTP_TOKEN")
            .env_remove("CONSUL_HTTP_ADDR")
            .arg(args[0])
            .arg(args[1])
            .arg(format!(
                "-http-addr=https://{}",
                consul.https_address().expect("an HTTPS port")
            ))
            .arg(format!("-ca-file={}", files.ca_cert().display()));
        if let Some((cert, key)) = cert {
            command
                .arg(format!("-client-cert={}", cert.display()))
                .arg(format!("-client-key={}", key.display()));
        }
        if let Some(token) = token {
            command.arg(format!("-token={token}"));
        }
        command.args(&args[2..]).output().expect("run consul")
    }

    #[track_caller]
    fn assert_ok(output: &std::process::Output) -> String {
        assert!(
            output.status.success(),
            "consul failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// What the agent's refusal of a client certificate looks like to
    /// consul: its TLS alert, or under TLS 1.3, when the alert loses the
    /// race with the closing connection, the connection closing.
    const TLS_REFUSED: &[&str] = &[
        "bad certificate",
        "connection reset by peer",
        "broken pipe",
        "EOF",
    ];

    #[track_caller]
    fn assert_refused(output: &std::process::Output, says: &[&str]) {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && says.iter().any(|s| stderr.contains(s)),
            "consul must fail saying one of {says:?}: {stderr}"
        );
    }

    /// Against the real Consul (`scripts/install-engines`): the HTTPS port
    /// serves only clients with a certificate of the test CA, the tokens
    /// grant what their policies say, the kit's helpers carry the master
    /// token, and a restart brings the same tokens back.
    #[test]
    fn a_secured_agent_serves_https_and_its_tokens_grant_their_policies() {
        use crate::engines::Engine as _;

        let mut consul = Consul::builder()
            .tls(ConsulTls::ClientCert)
            .acl("app/")
            .start()
            .unwrap();
        let https = consul.https_address().unwrap();
        assert_eq!(consul.store_url(), format!("consuls://{https}"));
        let files = consul.tls_files().unwrap().clone();
        let acl = consul.acl().unwrap().clone();
        let cert = Some((files.client_cert(), files.client_key()));
        let other_cert = Some((files.other_client_cert(), files.other_client_key()));
        let (token, read_only) = (Some(acl.token()), Some(acl.read_only_token()));

        assert_ok(&consul_over_https(
            &consul,
            cert,
            token,
            &["kv", "put", "app/k", "v"],
        ));
        let get = &["kv", "get", "app/k"];
        assert_eq!(
            assert_ok(&consul_over_https(&consul, cert, read_only, get)),
            "v"
        );
        let denied = &["Unexpected response code: 403"];
        assert_refused(
            &consul_over_https(&consul, cert, read_only, &["kv", "put", "app/k", "w"]),
            denied,
        );
        assert_refused(
            &consul_over_https(&consul, cert, token, &["kv", "put", "other/k", "v"]),
            denied,
        );
        assert_refused(&consul_over_https(&consul, cert, None, get), denied);
        assert_refused(&consul_over_https(&consul, None, token, get), TLS_REFUSED);
        assert_refused(
            &consul_over_https(&consul, other_cert, token, get),
            TLS_REFUSED,
        );
        // The kit's own port and helpers carry the master token.
        let raw = consul.http_get("/v1/kv/app/k?raw").unwrap();
        assert_eq!((raw.status, raw.body.as_str()), (200, "v"));
        let anonymous = http::get(consul.http_addr(), "/v1/kv/app/k?raw", API_TIMEOUT).unwrap();
        assert_eq!(anonymous.status, 403, "{}", anonymous.body);

        consul.restart().unwrap();
        assert!(consul.is_healthy());
        assert_eq!(consul.https_address().unwrap(), https);
        // Empty, but the same tokens grant the same again.
        assert_refused(
            &consul_over_https(&consul, cert, token, get),
            &["No key exists"],
        );
        assert_ok(&consul_over_https(
            &consul,
            cert,
            token,
            &["kv", "put", "app/k", "v2"],
        ));
        assert_refused(
            &consul_over_https(&consul, cert, read_only, &["kv", "put", "app/k", "w"]),
            denied,
        );

        let dir = files.ca_cert().parent().unwrap().to_owned();
        drop(consul);
        assert!(!dir.exists(), "certificates left behind");
    }
}
