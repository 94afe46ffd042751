//! One ZooKeeper server: [`ZooKeeper`], standalone or an ensemble's
//! member, its settings ([`ZooKeeperBuilder`]), what `srvr` says of it,
//! and the JVM's command lines (the server's and the command-line
//! client's).

use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::process::{self, EngineProcess, Program};
use super::super::timeouts::START_TIMEOUT;
use super::classpath::zookeeper_classpath;
use super::wire;

/// The `tickTime` of every server the kit starts unless
/// [`ZooKeeperBuilder::tick_time`] says otherwise: session timeouts from
/// 200 ms.
pub const DEFAULT_TICK_TIME: Duration = Duration::from_millis(100);

/// The kit's `maxSessionTimeout` unless set: a minute, so that a test
/// asking a ttl of 10 s gets it (see the [module docs](super)).
pub const DEFAULT_MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(60);

/// The four-letter words the servers answer (`4lw.commands.whitelist`).
pub const FOUR_LETTER_WORDS: &[&str] = &["srvr", "ruok", "stat", "mntr", "cons", "dump"];

/// Bound on each four-letter word (asked again and again while a server
/// starts, so short).
const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

/// Bound on each step of the kit's own client (a shared server's chroot,
/// an operator's node): a tenth of a second on a quiet host, but a loaded
/// one (a full test suite on 2 cores) stalled the JVM past half a second,
/// and the test that wanted its chroot failed.
const NODE_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The variable naming the `java` to run instead of the one on `PATH`.
pub(super) const JAVA_VAR: &str = "REGENT_JAVA_BIN";

const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
const CLI_MAIN: &str = "org.apache.zookeeper.ZooKeeperMain";

/// How long a follower may lag or take to sync with a new leader.
const INIT_LIMIT: Duration = Duration::from_secs(5);
/// How long a follower and its leader may hear nothing from each other.
const SYNC_LIMIT: Duration = Duration::from_secs(1);

/// One ZooKeeper server on `127.0.0.1`, stopped when dropped: standalone
/// ([`ZooKeeper::start`]), or a member of a [`ZooKeeperEnsemble`].
///
/// [`ZooKeeperEnsemble`]: super::ZooKeeperEnsemble
#[derive(Debug)]
pub struct ZooKeeper {
    client_port: u16,
    settings: ZooKeeperBuilder,
    /// `None` for a standalone server.
    member: Option<Member>,
    pub(super) classpath: String,
    /// The JVM, in a temporary directory holding `zoo.cfg`, `data/` and
    /// `zookeeper.log`; stopped and removed on drop.
    pub(super) process: EngineProcess,
}

/// What a member of an ensemble knows of it.
#[derive(Debug, Clone)]
pub(super) struct Member {
    /// Its `myid`, from 1.
    pub(super) id: usize,
    /// Every member's quorum and election ports, member `N` at `N - 1`.
    pub(super) servers: Vec<(u16, u16)>,
}

/// What the four-letter word `srvr` says a server is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ZooKeeperMode {
    /// A server of its own, serving.
    Standalone,
    /// The leader of an ensemble with a quorum.
    Leader,
    /// A follower of an ensemble's leader.
    Follower,
    /// An observer of an ensemble (the kit starts none).
    Observer,
}

impl fmt::Display for ZooKeeperMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Standalone => "standalone",
            Self::Leader => "leader",
            Self::Follower => "follower",
            Self::Observer => "observer",
        })
    }
}

/// The settings of the servers the kit starts: [`ZooKeeper::builder`],
/// setters, then [`ZooKeeperBuilder::start`] or
/// [`ZooKeeperBuilder::start_ensemble`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct ZooKeeperBuilder {
    tick_time: Duration,
    max_session_timeout: Option<Duration>,
}

impl Default for ZooKeeperBuilder {
    fn default() -> Self {
        Self {
            tick_time: DEFAULT_TICK_TIME,
            max_session_timeout: Some(DEFAULT_MAX_SESSION_TIMEOUT),
        }
    }
}

impl ZooKeeperBuilder {
    /// ZooKeeper's `tickTime` (default [`DEFAULT_TICK_TIME`]), in whole
    /// milliseconds (at least 1): the server grants session timeouts of
    /// 2 to 20 ticks unless [`max_session_timeout`](Self::max_session_timeout)
    /// raises the upper bound.
    pub fn tick_time(mut self, tick_time: Duration) -> Self {
        self.tick_time = tick_time.max(Duration::from_millis(1));
        self
    }

    /// ZooKeeper's `maxSessionTimeout` (default
    /// [`DEFAULT_MAX_SESSION_TIMEOUT`]), in whole milliseconds: the longest
    /// session timeout the server grants.
    pub fn max_session_timeout(mut self, timeout: Duration) -> Self {
        self.max_session_timeout = Some(timeout);
        self
    }

    /// Starts a standalone server with these settings on a free port and
    /// waits until it serves.
    ///
    /// # Errors
    ///
    /// As [`ZooKeeper::start`].
    pub fn start(self) -> Result<ZooKeeper, EngineError> {
        let classpath = zookeeper_classpath()?;
        process::retry_on_port_collision(|| {
            let port = process::free_ports(1)?[0];
            let mut zk = ZooKeeper::new(port, self, None, classpath.clone())?;
            zk.spawn()?;
            // On an error `zk` drops: the JVM is stopped.
            zk.wait_healthy(Instant::now() + START_TIMEOUT)?;
            Ok(zk)
        })
    }
    fn tick_ms(&self) -> u128 {
        self.tick_time.as_millis().max(1)
    }

    /// `limit` in ticks, rounded up, at least 2.
    fn ticks(&self, limit: Duration) -> u128 {
        limit.as_millis().div_ceil(self.tick_ms()).max(2)
    }

    fn granted_min_session_timeout(&self) -> Duration {
        tick_duration(self.tick_ms() * 2)
    }

    fn granted_max_session_timeout(&self) -> Duration {
        self.max_session_timeout
            .unwrap_or_else(|| tick_duration(self.tick_ms() * 20))
    }
}

fn tick_duration(ms: u128) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

impl ZooKeeper {
    /// Starts a standalone server with the default settings
    /// ([`DEFAULT_TICK_TIME`]) on a free port and waits until it serves
    /// (`srvr` says `Mode: standalone`).
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_JAVA_BIN`) when there is no `java`, and
    /// [`EngineError::JarNotFound`] when a jar of ZooKeeper's classpath is
    /// missing: both name `scripts/install-engines`. [`EngineError::Exited`]
    /// or [`EngineError::NotReady`] when the server did not serve within
    /// [`START_TIMEOUT`], quoting its log; [`EngineError::Io`] or
    /// [`EngineError::Spawn`] when setting up failed.
    pub fn start() -> Result<Self, EngineError> {
        Self::builder().start()
    }

    /// Starts building a server (or an ensemble) with other settings.
    pub fn builder() -> ZooKeeperBuilder {
        ZooKeeperBuilder::default()
    }

    /// The client address as `127.0.0.1:PORT`: the connect string of this
    /// server alone.
    pub fn address(&self) -> String {
        self.client_addr().to_string()
    }

    /// The client address.
    pub fn client_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.client_port))
    }

    /// The `myid` of an ensemble's member (1, 2, 3); `None` for a
    /// standalone server.
    pub fn server_id(&self) -> Option<usize> {
        self.member.as_ref().map(|m| m.id)
    }

    /// The server's `tickTime`.
    pub fn tick_time(&self) -> Duration {
        tick_duration(self.settings.tick_ms())
    }

    /// The shortest session timeout the server grants: 2 ticks.
    pub fn min_session_timeout(&self) -> Duration {
        self.settings.granted_min_session_timeout()
    }

    /// The longest session timeout the server grants: 20 ticks unless
    /// [`ZooKeeperBuilder::max_session_timeout`] set it.
    pub fn max_session_timeout(&self) -> Duration {
        self.settings.granted_max_session_timeout()
    }

    /// The PID of the running JVM, or `None` once the kit has stopped or
    /// killed it.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the kit started the process and has not stopped or killed it
    /// since. (A process that died on its own still counts until the kit
    /// notices; [`ZooKeeper::is_healthy`] asks the server itself.)
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// The data dir (`dataDir`: snapshots, transaction logs and, for a
    /// member, `myid`); it survives [`ZooKeeper::stop`] and
    /// [`ZooKeeper::kill`] and is removed on drop.
    pub fn data_dir(&self) -> PathBuf {
        self.process.data_dir()
    }

    /// The server's `zoo.cfg`.
    pub fn config_path(&self) -> PathBuf {
        self.process.dir().join("zoo.cfg")
    }

    /// ZooKeeper's log: standard output and error of every run of this
    /// server.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// Sends the four-letter word `word` to the client port and returns the
    /// answer, each step bounded by half a second. The server answers the
    /// words of [`FOUR_LETTER_WORDS`]: `srvr` (mode, zxid, node count),
    /// `mntr` (`zk_znode_count`, `zk_ephemerals_count`, … one per line),
    /// `dump` (on a standalone server or an ensemble's leader: the sessions
    /// with their ephemeral nodes), `cons` (connections and their
    /// sessions), `stat`, `ruok`; any other with a line saying it is not
    /// executed.
    ///
    /// # Errors
    ///
    /// When the server could not be reached or did not answer in time.
    pub fn four_letter_word(&self, word: &str) -> io::Result<String> {
        wire::four_letter_word(self.client_addr(), word, REQUEST_TIMEOUT)
    }

    /// What `srvr` says the server is doing now; `None` when it does not
    /// answer or does not serve (an ensemble's member without a quorum).
    pub fn mode(&self) -> Option<ZooKeeperMode> {
        self.status().map(|s| s.mode)
    }

    /// Whether the server serves now: `srvr` answers with a mode. A paused
    /// or stopped server does not, nor a member without a quorum.
    pub fn is_healthy(&self) -> bool {
        self.status().is_some()
    }

    /// Creates the persistent node `path` holding `data`, open to all,
    /// through a session of the kit's own (opened and closed for this
    /// call; no Java). `Ok(false)` if the node exists already. On an
    /// ensemble's member the write goes through the leader.
    ///
    /// # Errors
    ///
    /// When the server could not be reached, does not serve, or refused
    /// the node (its parent does not exist, say).
    pub fn create_node(&self, path: &str, data: &[u8]) -> io::Result<bool> {
        let mut session = wire::Session::open(self.client_addr(), NODE_REQUEST_TIMEOUT)?;
        let created = session.create(path, data)?;
        session.close()?;
        Ok(created)
    }

    /// The data of the node `path`, or `None` if there is none, through a
    /// session of the kit's own (opened and closed for this call).
    ///
    /// # Errors
    ///
    /// When the server could not be reached or does not serve.
    pub fn node_data(&self, path: &str) -> io::Result<Option<Vec<u8>>> {
        let mut session = wire::Session::open(self.client_addr(), NODE_REQUEST_TIMEOUT)?;
        let data = session.get_data(path)?;
        session.close()?;
        Ok(data)
    }

    /// A `Command` for ZooKeeper's own command-line client
    /// (`org.apache.zookeeper.ZooKeeperMain -server 127.0.0.1:PORT`, on
    /// ZooKeeper's classpath, logging warnings only); add one command's
    /// words (`create /x y`, `get /x`, `ls /`) and run it: it runs that
    /// command and exits, with status 1 when it failed. It prints what it
    /// read on standard output, and what it did (`Created /x`) and its
    /// errors (`Node already exists: /x`) on standard error. Starting a
    /// JVM costs about half a second; [`ZooKeeper::create_node`] is
    /// faster.
    pub fn cli_command(&self) -> Command {
        cli_command(self.process.program(), &self.classpath, &self.address())
    }

    /// Runs the command-line client with `args` against this server and
    /// returns its output, successful or not.
    ///
    /// # Errors
    ///
    /// As [`ZooKeeper::start`] when `java` is missing; [`EngineError::Spawn`]
    /// when it could not be run.
    pub fn cli<I, S>(&self, args: I) -> Result<Output, EngineError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run_cli(self.process.program(), self.cli_command(), args)
    }

    /// Stops the server: SIGTERM to the JVM's PID, then SIGKILL if it has
    /// not exited after [`STOP_TIMEOUT`]. Returns once it is reaped (the
    /// JVM exits at once). The data dir stays until drop.
    ///
    /// [`STOP_TIMEOUT`]: super::STOP_TIMEOUT
    pub fn stop(&mut self) -> Signaled {
        self.process.stop()
    }

    /// Kills the server at once (SIGKILL to its PID), as a crash would, and
    /// reaps it.
    pub fn kill(&mut self) -> Signaled {
        self.process.kill()
    }

    /// Pauses the server (SIGSTOP): it keeps its sockets but answers
    /// nothing, neither clients nor its ensemble, as a hung server would.
    pub fn pause(&mut self) -> Signaled {
        self.process.pause()
    }

    /// Lets a paused server go on (SIGCONT).
    pub fn resume(&mut self) -> Signaled {
        self.process.resume()
    }

    /// Stops the server if it runs, starts it again on the same ports,
    /// `zoo.cfg` and data dir, and waits until it serves (for an
    /// ensemble's member: until it has rejoined a leader, or leads).
    ///
    /// # Errors
    ///
    /// As [`ZooKeeper::start`]; a port taken meanwhile is an error here,
    /// since clients (and the other members) know the server by its ports.
    /// A member serves only with a quorum, so restart members one at a
    /// time while the others run.
    pub fn restart(&mut self) -> Result<(), EngineError> {
        self.stop();
        self.spawn()?;
        self.wait_healthy(Instant::now() + START_TIMEOUT)
    }

    pub(super) fn new(
        client_port: u16,
        settings: ZooKeeperBuilder,
        member: Option<Member>,
        classpath: String,
    ) -> Result<Self, EngineError> {
        let process = EngineProcess::new(Program::from_env("java", JAVA_VAR).running("zookeeper"))?;
        let zk = Self {
            client_port,
            settings,
            member,
            classpath,
            process,
        };
        let io = |action| move |source| EngineError::Io { action, source };
        fs::create_dir_all(zk.data_dir()).map_err(io("create ZooKeeper's data dir"))?;
        if let Some(member) = &zk.member {
            fs::write(zk.data_dir().join("myid"), format!("{}\n", member.id))
                .map_err(io("write ZooKeeper's myid"))?;
        }
        fs::write(zk.config_path(), zk.config()).map_err(io("write ZooKeeper's zoo.cfg"))?;
        Ok(zk)
    }

    /// The `zoo.cfg` of this server.
    fn config(&self) -> String {
        let settings = &self.settings;
        let mut lines = vec![
            format!("tickTime={}", settings.tick_ms()),
            format!("dataDir={}", self.data_dir().display()),
            format!("clientPort={}", self.client_port),
            "clientPortAddress=127.0.0.1".to_owned(),
            "admin.enableServer=false".to_owned(),
            format!("4lw.commands.whitelist={}", FOUR_LETTER_WORDS.join(",")),
            "forceSync=no".to_owned(),
        ];
        if let Some(max) = settings.max_session_timeout {
            lines.push(format!("maxSessionTimeout={}", max.as_millis()));
        }
        if let Some(member) = &self.member {
            lines.push(format!("initLimit={}", settings.ticks(INIT_LIMIT)));
            lines.push(format!("syncLimit={}", settings.ticks(SYNC_LIMIT)));
            for (i, (quorum, election)) in member.servers.iter().enumerate() {
                lines.push(format!("server.{}=127.0.0.1:{quorum}:{election}", i + 1));
            }
        }
        lines.push(String::new());
        lines.join("\n")
    }

    /// The JVM's command line for this server; everything else of starting
    /// it is [`EngineProcess`]'s.
    pub(super) fn spawn(&mut self) -> Result<(), EngineError> {
        let main = if self.member.is_some() {
            QUORUM_MAIN
        } else {
            STANDALONE_MAIN
        };
        let mut command = java_command(self.process.program());
        command
            // The watchman of a shared server knows it by its cwd.
            .current_dir(self.process.dir())
            .args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:-UsePerfData"])
            .arg("-XX:+ExitOnOutOfMemoryError")
            .arg("-Dorg.slf4j.simpleLogger.showDateTime=true")
            .arg("-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")
            .arg("-cp")
            .arg(&self.classpath)
            .arg(main)
            .arg(self.config_path());
        self.process.spawn(command)
    }

    /// Polls `srvr` until the server serves, the process exits, or
    /// `deadline` passes.
    fn wait_healthy(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let (addr, instance) = (self.client_addr(), self.instance());
        self.process
            .wait_ready(deadline, &instance, || status_at(addr).is_some())
    }

    /// [`EngineError::Exited`] if the process exited on its own.
    pub(super) fn check_not_exited(&mut self) -> Result<(), EngineError> {
        let instance = self.instance();
        self.process.check_not_exited(&instance)
    }

    pub(super) fn status(&self) -> Option<Status> {
        status_at(self.client_addr())
    }

    pub(super) fn instance(&self) -> String {
        match &self.member {
            Some(member) => format!("zookeeper server.{} (client {})", member.id, self.address()),
            None => format!("zookeeper (client {})", self.address()),
        }
    }
}

/// A server as one of the [engines](super::super): standalone, or one
/// member of an ensemble (whose store URL names only that member; the
/// ensemble's names all, [`ZooKeeperEnsemble::store_url`]).
///
/// [`ZooKeeperEnsemble::store_url`]: super::ZooKeeperEnsemble::store_url
impl Engine for ZooKeeper {
    /// As [`ZooKeeper::start`].
    fn start() -> Result<Self, EngineError> {
        ZooKeeper::start()
    }

    fn kind(&self) -> &'static str {
        "zk"
    }

    /// `zk://127.0.0.1:PORT`.
    fn store_url(&self) -> String {
        format!("zk://{}", self.address())
    }

    fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    fn is_healthy(&self) -> bool {
        ZooKeeper::is_healthy(self)
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

    /// As [`ZooKeeper::stop`].
    fn stop(&mut self) -> Signaled {
        self.process.stop()
    }

    fn restart(&mut self) -> Result<(), EngineError> {
        ZooKeeper::restart(self)
    }

    fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// The shortest session timeout the server grants: `2 × tickTime`
    /// (200 ms).
    fn min_ttl(&self) -> Duration {
        self.min_session_timeout()
    }

    /// `2 × tickTime + 300 ms` (500 ms): see [Timing of the
    /// store](super#timing-of-the-store).
    fn expiry_slack(&self) -> ExpirySlack {
        expiry_slack(self.tick_time())
    }
}

/// `2 × tickTime + 300 ms`: see [Timing of the store](super#timing-of-the-store).
pub(super) fn expiry_slack(tick_time: Duration) -> ExpirySlack {
    ExpirySlack::fixed(tick_time * 2 + Duration::from_millis(300))
}

/// What the kit reads of `srvr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Status {
    pub(super) mode: ZooKeeperMode,
    /// The last transaction id the server saw; its high 32 bits are the
    /// epoch of the leader that made it.
    zxid: u64,
}

impl Status {
    fn parse(srvr: &str) -> Option<Self> {
        let field = |name: &str| {
            srvr.lines()
                .find_map(|line| line.strip_prefix(name))
                .map(str::trim)
        };
        let mode = match field("Mode:")? {
            "standalone" => ZooKeeperMode::Standalone,
            "leader" => ZooKeeperMode::Leader,
            "follower" => ZooKeeperMode::Follower,
            "observer" => ZooKeeperMode::Observer,
            _ => return None,
        };
        let zxid = field("Zxid:")
            .and_then(|z| z.strip_prefix("0x"))
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .unwrap_or(0);
        Some(Self { mode, zxid })
    }

    pub(super) fn epoch(&self) -> u64 {
        self.zxid >> 32
    }
}

/// What `srvr` on `addr` says now, if the server serves.
fn status_at(addr: SocketAddr) -> Option<Status> {
    let answer = wire::four_letter_word(addr, "srvr", REQUEST_TIMEOUT).ok()?;
    Status::parse(&answer)
}

/// `java` without the JVM's option variables of the test's environment.
fn java_command(java: &Program) -> Command {
    let mut command = java.command("ZOO");
    for var in [
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "CLASSPATH",
    ] {
        command.env_remove(var);
    }
    command
}

/// ZooKeeper's command-line client for the connect string `servers`.
pub(super) fn cli_command(java: &Program, classpath: &str, servers: &str) -> Command {
    let mut command = java_command(java);
    command
        .args(["-XX:+UseSerialGC", "-XX:-UsePerfData"])
        .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
        .arg("-cp")
        .arg(classpath)
        .arg(CLI_MAIN)
        .arg("-server")
        .arg(servers);
    command
}

pub(super) fn run_cli<I, S>(
    java: &Program,
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
        .map_err(|source| java.spawn_error(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_mode_and_epoch_of_srvr() {
        let srvr = "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n\
                    Latency min/avg/max: 0/0.0/0\nReceived: 12\nSent: 11\nConnections: 1\n\
                    Outstanding: 0\nZxid: 0x200000003\nMode: leader\nNode count: 5\n";
        let status = Status::parse(srvr).unwrap();
        assert_eq!(status.mode, ZooKeeperMode::Leader);
        assert_eq!(status.epoch(), 2);
        assert_eq!(
            Status::parse("This ZooKeeper instance is not currently serving requests\n"),
            None
        );
    }

    #[test]
    fn limits_are_whole_ticks_and_session_timeouts_two_to_twenty() {
        let settings = ZooKeeperBuilder::default();
        assert_eq!(settings.ticks(INIT_LIMIT), 50);
        assert_eq!(settings.ticks(SYNC_LIMIT), 10);
        assert_eq!(
            settings.granted_min_session_timeout(),
            Duration::from_millis(200)
        );
        assert_eq!(
            settings.granted_max_session_timeout(),
            DEFAULT_MAX_SESSION_TIMEOUT
        );
        let slow = settings
            .tick_time(Duration::from_secs(2))
            .max_session_timeout(Duration::from_secs(60));
        assert_eq!(slow.ticks(SYNC_LIMIT), 2);
        assert_eq!(slow.ticks(INIT_LIMIT), 3);
        assert_eq!(slow.granted_max_session_timeout(), Duration::from_secs(60));
        assert_eq!(
            ZooKeeperBuilder::default()
                .tick_time(Duration::ZERO)
                .granted_min_session_timeout(),
            Duration::from_millis(2)
        );
    }
}
