//! Several etcd members forming one cluster.

use std::ffi::OsStr;
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use super::super::EngineError;
use super::super::process::POLL;
use super::etcdctl::{etcdctl_command, run_etcdctl};
use super::member::{Etcd, start_members};
use super::status::Status;
use super::{ELECTION_TIMEOUT, STOP_TIMEOUT};

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
        let is_follower = |i: &usize| Some(*i) != leader;
        for (_, member) in self
            .members
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| is_follower(i))
        {
            member.process.begin_stop();
        }
        for (_, member) in self
            .members
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| is_follower(i))
        {
            member.process.finish_stop(deadline);
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
