//! Three ZooKeeper servers forming one ensemble.

use std::ffi::OsStr;
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use super::super::EngineError;
use super::super::process::{self, LOG_TAIL_LINES, POLL};
use super::classpath::zookeeper_classpath;
use super::server::{Member, ZooKeeper, ZooKeeperBuilder, ZooKeeperMode, cli_command, run_cli};
use super::{START_TIMEOUT, STOP_TIMEOUT};

/// Three ZooKeeper servers on `127.0.0.1` forming one ensemble, stopped
/// when dropped.
///
/// Members are numbered from 0 in the order of
/// [`ZooKeeperEnsemble::connect_string`]; member `i` is `server.{i+1}`
/// (its `myid`). Each has its own client, quorum and election ports and
/// its own temporary directory; every `zoo.cfg` lists the three as
/// `server.N=127.0.0.1:QUORUM:ELECTION`. (`standaloneEnabled` and dynamic
/// reconfiguration stay at their defaults: with three servers listed, each
/// runs as a quorum peer.)
///
/// Faults go through the members: [`ZooKeeperEnsemble::kill`],
/// [`ZooKeeperEnsemble::stop`] and [`ZooKeeperEnsemble::restart`] by index,
/// or [`ZooKeeperEnsemble::member_mut`] and the member's own methods
/// ([`ZooKeeper::pause`], …). [`ZooKeeperEnsemble::leader_index`] says
/// which member leads, and [`ZooKeeperEnsemble::wait_for_leader`] waits
/// until one does again. A follower notices a killed leader at once (its
/// connection breaks) and a paused one after `syncLimit` (1 s); the two
/// left elect a new leader (measured: 0.4–0.6 s after a kill), and every
/// session's timeout starts again under it. A restarted member rejoins as
/// a follower in about 0.4 s. The ensemble is ready about 1.3 s after
/// launch.
///
/// The ensemble is not an [`Engine`](super::super::Engine) itself (as
/// [`EtcdCluster`](super::super::EtcdCluster) is not): its members are,
/// and [`ZooKeeperEnsemble::store_url`] names all three.
///
/// ```no_run
/// use regent_testkit::engines::ZooKeeperEnsemble;
///
/// let mut ensemble = ZooKeeperEnsemble::start()?;
/// let leader = ensemble.leader_index().expect("a leader");
/// ensemble.kill(leader);
/// let new = ensemble.wait_for_leader(std::time::Duration::from_secs(5))?;
/// assert_ne!(new, leader);
/// ensemble.restart(leader)?; // rejoins as a follower
/// # Ok::<(), regent_testkit::engines::EngineError>(())
/// ```
#[derive(Debug)]
pub struct ZooKeeperEnsemble {
    members: Vec<ZooKeeper>,
}

impl ZooKeeperEnsemble {
    /// The number of servers: three, so that one can fail.
    pub const SIZE: usize = 3;

    /// Starts [`ZooKeeperEnsemble::SIZE`] servers with the default settings
    /// ([`DEFAULT_TICK_TIME`](super::DEFAULT_TICK_TIME)), all launched at
    /// once, and waits until one leads and the others follow it.
    ///
    /// # Errors
    ///
    /// As [`ZooKeeper::start`] (whose bound, [`START_TIMEOUT`], applies to
    /// the whole ensemble); [`EngineError::NoLeader`] if every member
    /// serves but they do not agree on one leader in time.
    pub fn start() -> Result<Self, EngineError> {
        Self::start_with(ZooKeeper::builder())
    }

    pub(super) fn start_with(settings: ZooKeeperBuilder) -> Result<Self, EngineError> {
        let classpath = zookeeper_classpath()?;
        process::retry_on_port_collision(|| {
            // Client, quorum and election port of each member.
            let ports = process::free_ports(3 * Self::SIZE)?;
            let servers: Vec<(u16, u16)> = ports.chunks(3).map(|p| (p[1], p[2])).collect();
            let members = ports
                .chunks(3)
                .enumerate()
                .map(|(i, p)| {
                    let member = Member {
                        id: i + 1,
                        servers: servers.clone(),
                    };
                    ZooKeeper::new(p[0], settings, Some(member), classpath.clone())
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut ensemble = Self { members };
            // All at once: each keeps trying the others' election ports
            // until a quorum has met.
            for member in &mut ensemble.members {
                member.spawn()?;
            }
            // On an error `ensemble` drops: the members that started stop.
            ensemble.wait_ready(START_TIMEOUT)?;
            Ok(ensemble)
        })
    }

    /// The number of members, running or not: [`ZooKeeperEnsemble::SIZE`].
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always false: an ensemble has members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// All members, in order.
    pub fn members(&self) -> &[ZooKeeper] {
        &self.members
    }

    /// Member `i`.
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn member(&self, i: usize) -> &ZooKeeper {
        &self.members[i]
    }

    /// Member `i`, to pause, stop or restart it.
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn member_mut(&mut self, i: usize) -> &mut ZooKeeper {
        &mut self.members[i]
    }

    /// The connect string of all members, running or not:
    /// `127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`.
    pub fn connect_string(&self) -> String {
        self.members
            .iter()
            .map(ZooKeeper::address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The store URL naming every member:
    /// `zk://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`.
    pub fn store_url(&self) -> String {
        format!("zk://{}", self.connect_string())
    }

    /// Kills member `i` at once (SIGKILL to its PID), as a crash would.
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// Stops member `i`; see [`ZooKeeper::stop`].
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn stop(&mut self, i: usize) {
        self.members[i].stop();
    }

    /// Restarts member `i` with its data dir and waits until it serves
    /// again (as a follower, or as the leader); see [`ZooKeeper::restart`].
    ///
    /// # Errors
    ///
    /// As [`ZooKeeper::restart`].
    ///
    /// # Panics
    ///
    /// If there is no member `i`.
    pub fn restart(&mut self, i: usize) -> Result<(), EngineError> {
        self.members[i].restart()
    }

    /// The running member that leads now, if one says so (`srvr`: `Mode:
    /// leader`). Right after a leader change a deposed leader that was
    /// paused may still say so for a moment; the one whose last zxid has
    /// the higher epoch wins.
    pub fn leader_index(&self) -> Option<usize> {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.is_running())
            .filter_map(|(i, m)| {
                m.status()
                    .filter(|s| s.mode == ZooKeeperMode::Leader)
                    .map(|s| (s.epoch(), i))
            })
            .max()
            .map(|(_, i)| i)
    }

    /// Waits up to `timeout` for [`ZooKeeperEnsemble::leader_index`] to name
    /// a leader.
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
                    engine: "zookeeper",
                    waited: started.elapsed(),
                });
            }
            thread::sleep(POLL);
        }
    }

    /// Waits up to `timeout` until every member the kit has not stopped or
    /// killed serves, exactly one of them as leader and the others as its
    /// followers. A paused member does not serve: resume it first.
    ///
    /// # Errors
    ///
    /// [`EngineError::Exited`] as soon as a member exits on its own;
    /// [`EngineError::NotReady`] naming the first member not serving in
    /// time; [`EngineError::NoLeader`] if all serve but not under one
    /// leader.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<(), EngineError> {
        let started = Instant::now();
        loop {
            for member in self.members.iter_mut().filter(|m| m.is_running()) {
                member.check_not_exited()?;
            }
            let running: Vec<&ZooKeeper> = self.members.iter().filter(|m| m.is_running()).collect();
            let modes: Vec<Option<ZooKeeperMode>> = running.iter().map(|m| m.mode()).collect();
            let late = modes.iter().position(Option::is_none);
            let leaders = modes
                .iter()
                .filter(|m| **m == Some(ZooKeeperMode::Leader))
                .count();
            let followers = modes
                .iter()
                .filter(|m| **m == Some(ZooKeeperMode::Follower))
                .count();
            if late.is_none() && leaders == 1 && leaders + followers == running.len() {
                return Ok(());
            }
            if started.elapsed() >= timeout {
                return Err(match late.map(|i| running[i]) {
                    Some(member) => EngineError::NotReady {
                        instance: member.instance(),
                        waited: started.elapsed(),
                        log_tail: member.process.log_tail(LOG_TAIL_LINES),
                    },
                    None => EngineError::NoLeader {
                        engine: "zookeeper",
                        waited: started.elapsed(),
                    },
                });
            }
            thread::sleep(POLL);
        }
    }

    /// A `Command` for ZooKeeper's command-line client with the connect
    /// string of every member; see [`ZooKeeper::cli_command`].
    pub fn cli_command(&self) -> Command {
        let first = &self.members[0];
        cli_command(
            first.process.program(),
            &first.classpath,
            &self.connect_string(),
        )
    }

    /// Runs the command-line client with `args` against the ensemble and
    /// returns its output, successful or not.
    ///
    /// # Errors
    ///
    /// As [`ZooKeeper::cli`].
    pub fn cli<I, S>(&self, args: I) -> Result<Output, EngineError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run_cli(self.members[0].process.program(), self.cli_command(), args)
    }
}

impl Drop for ZooKeeperEnsemble {
    fn drop(&mut self) {
        // All together: a JVM exits at once on SIGTERM, whatever its peers
        // do.
        let deadline = Instant::now() + STOP_TIMEOUT;
        for member in &mut self.members {
            member.process.begin_stop();
        }
        for member in &mut self.members {
            member.process.finish_stop(deadline);
        }
    }
}

// Beside the ensemble it starts: the server's module knows no ensemble.
impl ZooKeeperBuilder {
    /// Starts an ensemble of [`ZooKeeperEnsemble::SIZE`] servers with these
    /// settings and waits until it has a leader and every other member
    /// follows it.
    ///
    /// # Errors
    ///
    /// As [`ZooKeeperEnsemble::start`].
    pub fn start_ensemble(self) -> Result<ZooKeeperEnsemble, EngineError> {
        ZooKeeperEnsemble::start_with(self)
    }
}
