//! Three Consul servers and client agents forming one datacenter.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::super::EngineError;
use super::super::process::{self, LOG_TAIL_LINES, POLL};
use super::agent::{Consul, ConsulRole, Membership, Ports};
use super::{START_TIMEOUT, STOP_TIMEOUT};

/// Three Consul servers and client agents on `127.0.0.1` forming one
/// datacenter, stopped when dropped.
///
/// Servers are numbered from 0 and named `s0`, `s1`, `s2`; client agents
/// are numbered from 0 and named `a0`, `a1`, … A candidate talks only to
/// its own client agent ([`ConsulCluster::agent`], whose
/// [`Engine::store_url`](super::super::Engine::store_url) is its URL), as
/// Consul's clients do.
///
/// Faults go through the members: [`ConsulCluster::server_mut`] or
/// [`ConsulCluster::agent_mut`], then [`Consul::kill`] (SIGKILL),
/// [`Consul::pause`] (SIGSTOP), [`Consul::resume`], [`Consul::stop`]
/// (SIGINT: shuts down without leaving, so the others see it fail),
/// [`Consul::leave`] (leaves the cluster, then exits) or [`Consul::restart`]
/// (same ports and data dir, waits until the member is ready).
/// [`ConsulCluster::leader_server`] says which server is Raft leader, and
/// [`ConsulCluster::wait_for_leader`] waits until the servers have one
/// again.
#[derive(Debug)]
pub struct ConsulCluster {
    servers: Vec<Consul>,
    agents: Vec<Consul>,
}

impl ConsulCluster {
    /// The number of servers: three, so that one can fail.
    pub const SERVERS: usize = 3;

    /// Starts [`ConsulCluster::SERVERS`] servers and `agents` client
    /// agents, all launched at once, and waits until they are ready: the
    /// servers have elected a leader and every agent's node (servers'
    /// included) is registered with `serfHealth` passing.
    ///
    /// # Errors
    ///
    /// As [`Consul::start`] (whose bound, [`START_TIMEOUT`], applies to the
    /// whole cluster); [`EngineError::NoLeader`] if every member is ready
    /// but the servers do not agree on a leader in time.
    pub fn start(agents: usize) -> Result<Self, EngineError> {
        static CLUSTERS: AtomicU64 = AtomicU64::new(0);
        process::retry_on_port_collision(|| {
            // A datacenter of its own: agents of clusters of parallel tests
            // refuse each other's gossip even if one's port is reused by
            // another.
            let datacenter = format!(
                "regent-{}-{}",
                std::process::id(),
                CLUSTERS.fetch_add(1, Ordering::Relaxed)
            );
            let ports: Vec<Ports> =
                process::free_ports(Ports::PER_AGENT * (Self::SERVERS + agents))?
                    .chunks(Ports::PER_AGENT)
                    .map(Ports::from_free)
                    .collect();
            let (server_ports, agent_ports) = ports.split_at(Self::SERVERS);
            let serf_lan: Vec<u16> = server_ports.iter().map(|p| p.serf_lan).collect();
            let membership = |retry_join: Vec<u16>| Membership {
                datacenter: datacenter.clone(),
                servers: Self::SERVERS,
                retry_join,
            };
            let servers = server_ports
                .iter()
                .enumerate()
                .map(|(i, ports)| {
                    let others = serf_lan
                        .iter()
                        .copied()
                        .filter(|port| *port != ports.serf_lan)
                        .collect();
                    Consul::new(
                        format!("s{i}"),
                        ConsulRole::Server,
                        *ports,
                        Some(membership(others)),
                    )
                })
                .collect::<Result<Vec<_>, _>>()?;
            let agents = agent_ports
                .iter()
                .enumerate()
                .map(|(i, ports)| {
                    Consul::new(
                        format!("a{i}"),
                        ConsulRole::Client,
                        *ports,
                        Some(membership(serf_lan.clone())),
                    )
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut cluster = Self { servers, agents };
            // All at once: `-retry-join` with a short `-retry-interval` lets
            // the agents find each other in whatever order they come up.
            for member in cluster.members_mut() {
                member.spawn()?;
            }
            // On an error `cluster` drops: the agents that started stop.
            cluster.wait_ready(START_TIMEOUT)?;
            Ok(cluster)
        })
    }

    /// The servers, in order.
    pub fn servers(&self) -> &[Consul] {
        &self.servers
    }

    /// The client agents, in order.
    pub fn agents(&self) -> &[Consul] {
        &self.agents
    }

    /// Server `i`.
    ///
    /// # Panics
    ///
    /// If there is no server `i`.
    pub fn server(&self, i: usize) -> &Consul {
        &self.servers[i]
    }

    /// Server `i`, to kill, pause, stop or restart it.
    ///
    /// # Panics
    ///
    /// If there is no server `i`.
    pub fn server_mut(&mut self, i: usize) -> &mut Consul {
        &mut self.servers[i]
    }

    /// Client agent `i`.
    ///
    /// # Panics
    ///
    /// If there is no agent `i`.
    pub fn agent(&self, i: usize) -> &Consul {
        &self.agents[i]
    }

    /// Client agent `i`, to kill, pause, stop or restart it.
    ///
    /// # Panics
    ///
    /// If there is no agent `i`.
    pub fn agent_mut(&mut self, i: usize) -> &mut Consul {
        &mut self.agents[i]
    }

    /// The HTTP addresses (`127.0.0.1:PORT`) of the client agents, in
    /// order: one per candidate.
    pub fn agent_addresses(&self) -> Vec<String> {
        self.agents.iter().map(Consul::address).collect()
    }

    /// The running server that is Raft leader now: the one a quorum of all
    /// servers names as leader (`GET /v1/status/leader` on each running
    /// server). Right after a leader is killed or paused, the others may
    /// still name it until they elect another; a server the kit stopped or
    /// killed is never the answer.
    pub fn leader_server(&self) -> Option<usize> {
        let named: Vec<String> = self
            .servers
            .iter()
            .filter(|s| s.is_running())
            .filter_map(Consul::leader)
            .collect();
        let quorum = Self::SERVERS / 2 + 1;
        self.servers.iter().position(|server| {
            let addr = server.server_addr().to_string();
            server.is_running() && named.iter().filter(|n| **n == addr).count() >= quorum
        })
    }

    /// Waits up to `timeout` for [`ConsulCluster::leader_server`] to name a
    /// leader.
    ///
    /// # Errors
    ///
    /// [`EngineError::NoLeader`] if none did in time.
    pub fn wait_for_leader(&self, timeout: Duration) -> Result<usize, EngineError> {
        let started = Instant::now();
        loop {
            if let Some(i) = self.leader_server() {
                return Ok(i);
            }
            if started.elapsed() >= timeout {
                return Err(EngineError::NoLeader {
                    engine: "consul",
                    waited: started.elapsed(),
                });
            }
            thread::sleep(POLL);
        }
    }

    /// Waits up to `timeout` until every member the kit has not stopped or
    /// killed is ready ([`Consul::is_healthy`]) and a quorum of servers
    /// names a leader. A paused member is not ready: resume it first.
    ///
    /// # Errors
    ///
    /// [`EngineError::Exited`] as soon as a member exits on its own;
    /// [`EngineError::NotReady`] naming the first member not ready in time;
    /// [`EngineError::NoLeader`] if all are ready but no leader is agreed.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<(), EngineError> {
        let started = Instant::now();
        // Members are checked in order; once ready, a member is not asked
        // again, so each poll costs a request or two, not one per member.
        let mut ready = 0;
        loop {
            for member in self.members_mut().filter(|m| m.is_running()) {
                member.check_not_exited()?;
            }
            let running: Vec<&Consul> = self.members().filter(|m| m.is_running()).collect();
            while ready < running.len() && running[ready].is_healthy() {
                ready += 1;
            }
            let late = running.get(ready);
            if late.is_none() && self.leader_server().is_some() {
                return Ok(());
            }
            if started.elapsed() >= timeout {
                return Err(match late {
                    Some(member) => EngineError::NotReady {
                        instance: member.instance(),
                        waited: started.elapsed(),
                        log_tail: member.process.log_tail(LOG_TAIL_LINES),
                    },
                    None => EngineError::NoLeader {
                        engine: "consul",
                        waited: started.elapsed(),
                    },
                });
            }
            thread::sleep(POLL);
        }
    }

    /// Servers, then agents.
    fn members(&self) -> impl Iterator<Item = &Consul> {
        self.servers.iter().chain(&self.agents)
    }

    fn members_mut(&mut self) -> impl Iterator<Item = &mut Consul> {
        self.servers.iter_mut().chain(&mut self.agents)
    }
}

impl Drop for ConsulCluster {
    fn drop(&mut self) {
        // Agents first, then servers: no agent is left talking to servers
        // that are gone. No agent leaves the cluster on SIGINT, so each
        // group stops in about half a second.
        for group in [&mut self.agents, &mut self.servers] {
            let deadline = Instant::now() + STOP_TIMEOUT;
            for member in group.iter_mut() {
                member.process.begin_stop();
            }
            for member in group.iter_mut() {
                member.process.finish_stop(deadline);
            }
        }
    }
}
