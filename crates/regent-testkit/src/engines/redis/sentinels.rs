//! A primary, a replica and three Sentinels watching them:
//! [`RedisSentinels`].

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::thread;
use std::time::{Duration, Instant};

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::process::{self, EngineProcess, LOG_TAIL_LINES, Program};
use super::super::timeouts::START_TIMEOUT;
use super::resp::{self, Connection, Reply};
use super::server::{REQUEST_TIMEOUT, quote};
use super::{DOWN_AFTER, ENV_PREFIX, FAILOVER_TIMEOUT, MASTER_NAME, QUORUM, Redis, SENTINEL_VAR};

/// How often the kit asks the Sentinels while it waits for them.
const POLL: Duration = Duration::from_millis(50);

/// The Sentinels of a group.
const SENTINELS: usize = 3;

/// The configuration file in a Sentinel's directory (Sentinel rewrites it).
const CONF: &str = "sentinel.conf";

/// A primary, one replica of it and three Sentinels (quorum 2,
/// `down-after-milliseconds` 1000, `failover-timeout` 5000), each on a
/// free port of `127.0.0.1` in a temporary directory of its own, all
/// stopped by their PIDs when dropped. See the
/// [module docs](super#a-primary-a-replica-and-three-sentinels).
///
/// As an [`Engine`] it is the current primary: [`Engine::pid`],
/// [`Engine::kill`], [`Engine::pause`], [`Engine::resume`],
/// [`Engine::stop`] and [`Engine::restart`] act on it.
#[derive(Debug)]
pub struct RedisSentinels {
    // Declared first: the Sentinels stop before the servers they watch.
    sentinels: Vec<Sentinel>,
    /// The two servers: `servers[primary]` is the primary as the kit last
    /// saw it, the other the replica.
    servers: [Redis; 2],
    primary: usize,
}

/// One `redis-sentinel`.
#[derive(Debug)]
struct Sentinel {
    port: u16,
    process: EngineProcess,
}

impl Sentinel {
    fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    fn instance(&self) -> String {
        format!("redis-sentinel on {}", self.addr())
    }

    /// Starts a Sentinel monitoring the primary on `primary_port`, on a
    /// free port, and waits until it answers `PING`.
    fn start(primary_port: u16) -> Result<Self, EngineError> {
        let process = EngineProcess::new(Program::from_env("redis-sentinel", SENTINEL_VAR))?;
        let mut sentinel = Self { port: 0, process };
        process::retry_on_port_collision(|| {
            sentinel.port = process::free_ports(1)?[0];
            sentinel.write_conf(primary_port)?;
            let mut command = sentinel.process.program().command(ENV_PREFIX);
            command
                .current_dir(sentinel.process.dir())
                .arg(sentinel.process.dir().join(CONF));
            sentinel.process.spawn(command)?;
            let (addr, instance) = (sentinel.addr(), sentinel.instance());
            sentinel
                .process
                .wait_ready(Instant::now() + START_TIMEOUT, &instance, || {
                    resp::pings(addr, None, REQUEST_TIMEOUT)
                })
        })?;
        Ok(sentinel)
    }

    /// Writes a new `sentinel.conf`, which the Sentinel then rewrites (its
    /// id, the replicas and Sentinels it learnt of, a failover's new
    /// primary).
    fn write_conf(&self, primary_port: u16) -> Result<(), EngineError> {
        let conf = format!(
            "# regent-testkit\n\
             bind 127.0.0.1\n\
             port {port}\n\
             daemonize no\n\
             logfile \"\"\n\
             dir {dir}\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} {QUORUM}\n\
             sentinel down-after-milliseconds {MASTER_NAME} {down_after}\n\
             sentinel failover-timeout {MASTER_NAME} {failover_timeout}\n",
            port = self.port,
            dir = quote(&self.process.dir().to_string_lossy()),
            down_after = DOWN_AFTER.as_millis(),
            failover_timeout = FAILOVER_TIMEOUT.as_millis(),
        );
        fs::write(self.process.dir().join(CONF), conf).map_err(|source| EngineError::Io {
            action: "write a Sentinel's sentinel.conf",
            source,
        })
    }

    /// The master's address this Sentinel names
    /// (`SENTINEL get-master-addr-by-name`), if it answers and knows one.
    fn master_addr(&self) -> Option<SocketAddr> {
        let reply = Connection::open(self.addr(), REQUEST_TIMEOUT)
            .and_then(|mut c| c.call(&["SENTINEL", "get-master-addr-by-name", MASTER_NAME]))
            .ok()?;
        match reply.items()? {
            [ip, port] => format!("{}:{}", ip.text()?, port.text()?).parse().ok(),
            _ => None,
        }
    }

    /// `SENTINEL master NAME` as `(field, value)` pairs, if it answers.
    fn master_state(&self) -> Option<Vec<(String, String)>> {
        let reply = Connection::open(self.addr(), REQUEST_TIMEOUT)
            .and_then(|mut c| c.call(&["SENTINEL", "master", MASTER_NAME]))
            .ok()?;
        reply
            .items()?
            .chunks(2)
            .map(|pair| match pair {
                [field, value] => Some((field.text()?, value.text()?)),
                _ => None,
            })
            .collect()
    }

    /// Whether this Sentinel sees the primary up at `primary`, its replica
    /// and the two other Sentinels: what a failover needs.
    fn knows_the_group(&self, primary: SocketAddr) -> bool {
        let Some(state) = self.master_state() else {
            return false;
        };
        let field = |name: &str| {
            state
                .iter()
                .find(|(f, _)| f == name)
                .map(|(_, v)| v.as_str())
        };
        let other_sentinels = (SENTINELS - 1).to_string();
        field("flags") == Some("master")
            && field("port") == Some(&primary.port().to_string())
            && field("num-slaves") == Some("1")
            && field("num-other-sentinels") == Some(other_sentinels.as_str())
    }
}

/// What `ROLE` says the server at `addr` is: `master`, `slave`, … and, for
/// a replica, its replication link's state (`connected` once synced).
fn role(addr: SocketAddr) -> Option<(String, Option<String>)> {
    let reply = Connection::open(addr, REQUEST_TIMEOUT)
        .and_then(|mut c| c.call(&["ROLE"]))
        .ok()?;
    let items = reply.items()?;
    let role = items.first()?.text()?;
    let link = items.get(3).and_then(Reply::text);
    Some((role, link))
}

impl RedisSentinels {
    /// Starts a primary, a replica of it, and three Sentinels monitoring
    /// the primary as [`master_name`](Self::master_name), and waits until
    /// the replica is in sync and every Sentinel knows the replica and the
    /// two other Sentinels (Sentinels find each other through the primary
    /// every 2 s): a failover can start at once.
    ///
    /// # Errors
    ///
    /// As [`RedisBuilder::start`](super::RedisBuilder::start), for
    /// `redis-server` and `redis-sentinel` (`REGENT_REDIS_SENTINEL_BIN`);
    /// [`EngineError::NotReady`] when the replica did not sync or the
    /// Sentinels did not find each other within [`START_TIMEOUT`].
    pub fn start() -> Result<Self, EngineError> {
        let primary = Redis::start()?;
        let replica = Redis::builder().replica_of(primary.port()).start()?;
        let deadline = Instant::now() + START_TIMEOUT;
        let mut group = Self {
            sentinels: Vec::new(),
            servers: [primary, replica],
            primary: 0,
        };
        let replica_addr = group.replica().addr();
        group.wait(deadline, "the replica's initial sync", |_| {
            role(replica_addr)
                .is_some_and(|(role, link)| role == "slave" && link.as_deref() == Some("connected"))
        })?;
        for _ in 0..SENTINELS {
            let sentinel = Sentinel::start(group.primary().port())?;
            group.sentinels.push(sentinel);
        }
        let primary_addr = group.primary().addr();
        group.wait(deadline, "the Sentinels finding each other", |group| {
            group
                .sentinels
                .iter()
                .all(|s| s.knows_the_group(primary_addr))
        })?;
        Ok(group)
    }

    /// The name the Sentinels monitor the primary under, `mymaster`.
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// The Sentinels' addresses, `127.0.0.1:PORT` each.
    pub fn sentinel_addrs(&self) -> Vec<SocketAddr> {
        self.sentinels.iter().map(Sentinel::addr).collect()
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster`.
    pub fn store_url(&self) -> String {
        let addrs: Vec<String> = self
            .sentinel_addrs()
            .iter()
            .map(ToString::to_string)
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", addrs.join(","))
    }

    /// The primary as the kit last saw it: the first server until
    /// [`fail_over`](Self::fail_over) (or a fault of the [`Engine`]
    /// methods, which ask the Sentinels first) found another.
    pub fn primary(&self) -> &Redis {
        &self.servers[self.primary]
    }

    /// The other server: the replica, or after a failover the old primary
    /// (down after [`fail_over`](Self::fail_over)).
    pub fn replica(&self) -> &Redis {
        &self.servers[1 - self.primary]
    }

    /// The master's address as the Sentinels name it
    /// (`SENTINEL get-master-addr-by-name mymaster`), from the first that
    /// answers.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotReady`] when no Sentinel names a master.
    pub fn master_addr(&self) -> Result<SocketAddr, EngineError> {
        self.sentinels
            .iter()
            .find_map(Sentinel::master_addr)
            .ok_or_else(|| EngineError::NotReady {
                instance: format!("the Sentinels of {MASTER_NAME}"),
                waited: Duration::ZERO,
                log_tail: self.logs(LOG_TAIL_LINES),
            })
    }

    /// Kills the current primary (SIGKILL), lets a paused replica go on
    /// (after the kill: it must not hear from the primary again), and
    /// waits, up to `within`, until every Sentinel names the replica as
    /// master and the replica says it is one (`ROLE`). Returns its address;
    /// from then on it is [`primary`](Self::primary), and the old primary,
    /// which stays down, is [`replica`](Self::replica).
    ///
    /// Measured on two cores: about 2 to 4 s.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotReady`], quoting every log, when the replica was
    /// not promoted within `within`; [`EngineError::Exited`] when the
    /// replica or a Sentinel exited meanwhile.
    pub fn fail_over(&mut self, within: Duration) -> Result<SocketAddr, EngineError> {
        let started = Instant::now();
        let (old, new) = (self.primary, 1 - self.primary);
        self.servers[old].kill();
        self.servers[new].resume();
        let target = self.servers[new].addr();
        let promoted = |group: &Self| {
            group
                .sentinels
                .iter()
                .all(|s| s.master_addr() == Some(target))
                && role(target).is_some_and(|(role, _)| role == "master")
        };
        self.wait(started + within, "the replica's promotion", promoted)?;
        self.primary = new;
        Ok(target)
    }

    /// Pauses the replica (SIGSTOP) and then cuts its replication link on
    /// the primary (`CLIENT KILL TYPE replica`): what the primary writes
    /// from now on never reaches the replica, not even its socket's buffer,
    /// so a replica promoted by [`fail_over`](Self::fail_over) (which
    /// resumes it) has missed it. Resumed while the primary lives
    /// ([`resume_replica`](Self::resume_replica)), the replica connects
    /// again and catches up.
    pub fn pause_replica(&mut self) -> Signaled {
        let sent = self.servers[1 - self.primary].pause();
        if sent == Signaled::Sent {
            // A primary that does not answer (down, paused) sends the
            // replica nothing anyway.
            let _ = Connection::open(self.primary().addr(), REQUEST_TIMEOUT)
                .and_then(|mut c| c.call(&["CLIENT", "KILL", "TYPE", "replica"]));
        }
        sent
    }

    /// Lets the paused replica go on (SIGCONT).
    pub fn resume_replica(&mut self) -> Signaled {
        self.servers[1 - self.primary].resume()
    }

    /// Polls `done` every [`POLL`] until it holds, failing when `deadline`
    /// passes ([`EngineError::NotReady`] naming `what`) or a process of the
    /// group exits ([`EngineError::Exited`]); the killed primary of a
    /// failover is not watched.
    fn wait(
        &mut self,
        deadline: Instant,
        what: &str,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<(), EngineError> {
        let started = Instant::now();
        loop {
            for sentinel in &mut self.sentinels {
                let instance = sentinel.instance();
                sentinel.process.check_not_exited(&instance)?;
            }
            for server in &mut self.servers {
                if server.pid().is_some() {
                    server.check_not_exited()?;
                }
            }
            if done(self) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(EngineError::NotReady {
                    instance: format!("Redis with Sentinels ({what})"),
                    waited: started.elapsed(),
                    log_tail: self.logs(LOG_TAIL_LINES),
                });
            }
            thread::sleep(POLL);
        }
    }

    /// Makes the server the Sentinels name the kit's primary, when they
    /// name one of the two.
    fn follow_the_sentinels(&mut self) {
        if let Ok(master) = self.master_addr()
            && let Some(i) = self.servers.iter().position(|s| s.addr() == master)
        {
            self.primary = i;
        }
    }

    /// The last `lines` lines of every log, each under a heading naming
    /// the process.
    fn logs(&self, lines: usize) -> String {
        let mut all = String::new();
        for (i, server) in self.servers.iter().enumerate() {
            let role = if i == self.primary {
                "primary"
            } else {
                "replica"
            };
            all.push_str(&format!(
                "== {role}, {} ==\n{}\n",
                server.instance(),
                server.log_tail(lines)
            ));
        }
        for sentinel in &self.sentinels {
            all.push_str(&format!(
                "== {} ==\n{}\n",
                sentinel.instance(),
                sentinel.process.log_tail(lines)
            ));
        }
        all
    }
}

/// The group as one of the [engines](super::super), of kind
/// `redis-sentinel`: its faults hit the current primary.
impl Engine for RedisSentinels {
    /// As [`RedisSentinels::start`].
    fn start() -> Result<Self, EngineError> {
        RedisSentinels::start()
    }

    fn kind(&self) -> &'static str {
        "redis-sentinel"
    }

    /// As [`RedisSentinels::store_url`].
    fn store_url(&self) -> String {
        RedisSentinels::store_url(self)
    }

    /// The primary's, as the kit last saw it ([`RedisSentinels::primary`]).
    fn pid(&self) -> Option<u32> {
        self.primary().pid()
    }

    /// Whether the server the Sentinels name as master answers `PING`.
    fn is_healthy(&self) -> bool {
        self.master_addr()
            .is_ok_and(|master| resp::pings(master, None, REQUEST_TIMEOUT))
    }

    /// Kills the primary the Sentinels name (SIGKILL); they fail over to
    /// the replica after about 1 s ([`DOWN_AFTER`](super::DOWN_AFTER)).
    fn kill(&mut self) -> Signaled {
        self.follow_the_sentinels();
        self.servers[self.primary].kill()
    }

    /// Pauses the primary the Sentinels name (SIGSTOP); they fail over to
    /// the replica if it stays paused past
    /// [`DOWN_AFTER`](super::DOWN_AFTER).
    fn pause(&mut self) -> Signaled {
        self.follow_the_sentinels();
        self.servers[self.primary].pause()
    }

    /// Lets the primary the kit paused go on (SIGCONT); after a failover
    /// the Sentinels make it a replica of the new primary.
    fn resume(&mut self) -> Signaled {
        self.servers[self.primary].resume()
    }

    /// Stops the primary the Sentinels name (SIGTERM).
    fn stop(&mut self) -> Signaled {
        self.follow_the_sentinels();
        self.servers[self.primary].stop()
    }

    /// Restarts the primary the kit last killed, paused or stopped, on its
    /// port and configuration file. After a failover it comes back as a
    /// primary of its own until the Sentinels make it a replica of the new
    /// one, on their own schedule (Sentinel waits about 8 s before it
    /// converts a server that came back).
    fn restart(&mut self) -> Result<(), EngineError> {
        self.servers[self.primary].restart()
    }

    /// The last `lines` lines of the primary's, the replica's and every
    /// Sentinel's log.
    fn log_tail(&self, lines: usize) -> String {
        self.logs(lines)
    }
}
