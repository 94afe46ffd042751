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

use std::ffi::OsStr;
use std::fs::OpenOptions;
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
        let mut members = start_members(1)?;
        Ok(members.remove(0))
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

    /// The client URL, `http://127.0.0.1:PORT`.
    pub fn client_url(&self) -> String {
        format!("http://{}", self.client_addr())
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

    /// Whether `GET /health` answers `"health":"true"` now.
    pub fn is_healthy(&self) -> bool {
        http::get(self.client_addr(), "/health", REQUEST_TIMEOUT)
            .is_ok_and(|r| r.status == 200 && r.body.contains(r#""health":"true""#))
    }

    /// Whether this member is the Raft leader of its cluster now.
    pub fn is_leader(&self) -> bool {
        self.status().is_some_and(|s| s.is_leader())
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
    pub fn etcdctl_command(&self) -> Command {
        etcdctl_command(&self.etcdctl, &self.endpoints())
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

    fn new(
        name: String,
        ports: (u16, u16),
        initial_cluster: String,
        cluster_token: String,
    ) -> Result<Self, EngineError> {
        let dir = tempfile::Builder::new()
            .prefix("regent-etcd-")
            .tempdir()
            .map_err(|source| EngineError::Io {
                action: "create a temporary directory for etcd",
                source,
            })?;
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
            .arg("--logger=zap")
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
            members: start_members(n)?,
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
            if let Some(mut child) = member.child.take() {
                if !process::wait_until(&mut child, deadline) {
                    process::kill(&mut child);
                }
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
/// collision.
fn start_members(n: usize) -> Result<Vec<Etcd>, EngineError> {
    static CLUSTERS: AtomicU64 = AtomicU64::new(0);
    let mut attempt = 1;
    loop {
        let token = format!(
            "regent-{}-{}",
            std::process::id(),
            CLUSTERS.fetch_add(1, Ordering::Relaxed)
        );
        let ports = process::free_ports(2 * n)?;
        let names: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        let initial_cluster = names
            .iter()
            .zip(ports.chunks(2))
            .map(|(name, p)| format!("{name}=http://127.0.0.1:{}", p[1]))
            .collect::<Vec<_>>()
            .join(",");
        let mut members = names
            .into_iter()
            .zip(ports.chunks(2))
            .map(|(name, p)| Etcd::new(name, (p[0], p[1]), initial_cluster.clone(), token.clone()))
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
