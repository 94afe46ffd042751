//! Bully (Garcia-Molina, 1982): the highest live id wins.
//!
//! * A node that suspects the leader (no HEARTBEAT for `failure_timeout`),
//!   or has just started, sends ELECTION to every higher member and waits
//!   `answer_timeout`. A node with no higher member skips the wait.
//! * A node that gets ELECTION from a lower member sends ANSWER and starts
//!   an election of its own, unless one is running. (A leader instead
//!   sends its COORDINATOR again to the asker.)
//! * A candidate that gets no ANSWER in time opens a term
//!   ([`Epoch::next_for`]) and sends COORDINATOR to every lower member;
//!   one that got an ANSWER waits `coordinator_timeout` for the COORDINATOR
//!   and starts over if none comes.
//! * A node that learns of a leader lower than itself (a COORDINATOR or a
//!   HEARTBEAT) starts an election: a recovering higher node bullies its
//!   way back.
//! * The leader sends HEARTBEAT with its term to every other member each
//!   `heartbeat_interval`.
//! * A COORDINATOR or HEARTBEAT from an epoch older than the receiver's max
//!   epoch is ignored, and answered with STALE carrying the newer epoch. A
//!   leader whose term is older than an epoch it has seen starts a new
//!   election, so a restarted node that forgot the epoch catches up in one
//!   round trip.
//! * A member that says it is leaving ([`Input::Left`]) is dead at once:
//!   a follower of it holds an election now, and elections leave it out
//!   (no ELECTION to it, no ANSWER awaited from it) until it is heard from
//!   again. A leader's graceful shutdown therefore costs one round trip,
//!   not a failure timeout.
//! * A node that has just started and has seen no epoch yet does not
//!   claim a term before `failure_timeout` has passed: in a live group the
//!   leader's heartbeats, or the ANSWERs, tell it the group's epoch first,
//!   so a recovering highest node bullies with a term above the current
//!   one instead of a stale one. (The first election of a group that starts
//!   cold takes that long.)
//!
//! Messages per election, not counting heartbeats (n configured members,
//! the leader among them dead): in the best case the highest live node
//! notices first, sends one ELECTION to the dead leader and n−2
//! COORDINATORs; in the worst case the lowest node notices first:
//! n(n−1)/2 ELECTIONs, (n−1)(n−2)/2 ANSWERs and n−2 COORDINATORs.

use std::collections::BTreeSet;

use regent_core::FencingToken;
use tokio::time::Instant;

use crate::config::Config;
use crate::epoch::{Epoch, Leader, NodeId};
use crate::machine::{Input, Machine, Outbox, Output, PeerMessage, after};

/// Bully's messages. Every one carries an epoch, so epochs spread with any
/// traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// "I am holding an election": to every higher member.
    Election {
        /// The sender's max epoch.
        epoch: Epoch,
    },
    /// "I am alive and higher: leave it to me": to the sender of an
    /// ELECTION.
    Answer {
        /// The sender's max epoch.
        epoch: Epoch,
    },
    /// "I lead in this term": from a new leader to every lower member.
    Coordinator {
        /// The leader's term (it carries the leader's rank).
        epoch: Epoch,
    },
    /// "I still lead": from the leader to every other member.
    Heartbeat {
        /// The leader's term.
        epoch: Epoch,
    },
    /// "Your term is older than what I have seen": the answer to a stale
    /// COORDINATOR or HEARTBEAT.
    Stale {
        /// The receiver's max epoch.
        epoch: Epoch,
    },
}

impl PeerMessage for Message {
    fn kind(&self) -> &'static str {
        match self {
            Message::Election { .. } => "ELECTION",
            Message::Answer { .. } => "ANSWER",
            Message::Coordinator { .. } => "COORDINATOR",
            Message::Heartbeat { .. } => "HEARTBEAT",
            Message::Stale { .. } => "STALE",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Following `leader` (or nobody yet); elect at `deadline` unless a
    /// heartbeat comes first.
    Follower {
        leader: Option<Leader>,
        deadline: Instant,
    },
    /// Sent ELECTION to the higher members; lead at `deadline` unless one
    /// answers.
    Electing { deadline: Instant },
    /// A higher member answered; start over at `deadline` unless its
    /// COORDINATOR comes.
    AwaitingCoordinator { deadline: Instant },
    /// Would lead, but has just started and knows no epoch: lead at
    /// `deadline`, or as soon as a message tells it an epoch.
    Warming { deadline: Instant },
    /// Leading in `term`.
    Leading {
        term: Epoch,
        next_heartbeat: Instant,
    },
}

/// One node running Bully. See the [module docs](self).
#[derive(Debug)]
pub struct Bully {
    config: Config,
    rank: u16,
    max_epoch: Epoch,
    role: Role,
    /// Started plus `failure_timeout`: until then a node that knows no
    /// epoch does not claim one.
    warm_until: Instant,
    /// Members that said they were leaving and have not been heard from
    /// since: elections leave them out.
    departed: BTreeSet<NodeId>,
}

impl Bully {
    /// A node started at `now`. Its first deadline is `now`: tick it and it
    /// holds an election (a recovering node bullies).
    pub fn new(config: Config, now: Instant) -> Self {
        Self {
            rank: config.rank(),
            warm_until: after(now, config.failure_timeout()),
            config,
            max_epoch: Epoch::ZERO,
            role: Role::Follower {
                leader: None,
                deadline: now,
            },
            departed: BTreeSet::new(),
        }
    }

    /// The largest epoch this node has seen.
    pub fn max_epoch(&self) -> Epoch {
        self.max_epoch
    }

    fn me(&self) -> NodeId {
        self.config.id()
    }

    fn observe(&mut self, epoch: Epoch) {
        self.max_epoch = self.max_epoch.max(epoch);
    }

    fn view(&self) -> Option<Leader> {
        match self.role {
            Role::Follower { leader, .. } => leader,
            Role::Leading { term, .. } => Some(Leader {
                id: self.me(),
                epoch: term,
            }),
            Role::Electing { .. } | Role::AwaitingCoordinator { .. } | Role::Warming { .. } => None,
        }
    }

    /// The higher members not known to have left.
    fn live_higher(&self) -> Vec<NodeId> {
        let me = self.me();
        self.config
            .others()
            .filter(|m| *m > me && !self.departed.contains(m))
            .collect()
    }

    fn start_election(&mut self, now: Instant, out: &mut Outbox<Message>) {
        let me = self.me();
        let higher = self.live_higher();
        if higher.is_empty() {
            self.become_leader(now, out);
            return;
        }
        tracing::debug!(node = %me, epoch = %self.max_epoch, "bully: holding an election");
        for to in higher {
            out.send(
                to,
                Message::Election {
                    epoch: self.max_epoch,
                },
            );
        }
        self.role = Role::Electing {
            deadline: after(now, self.config.answer_timeout()),
        };
    }

    fn become_leader(&mut self, now: Instant, out: &mut Outbox<Message>) {
        let me = self.me();
        if !self.max_epoch.is_term() && now < self.warm_until {
            // Just started and no message yet: a live group's heartbeats
            // would tell us its epoch before this, so wait rather than
            // claim a term below the group's.
            self.role = Role::Warming {
                deadline: self.warm_until,
            };
            return;
        }
        let Some(term) = self
            .max_epoch
            .next_at_least(self.rank, self.config.round_floor(now))
        else {
            tracing::warn!(node = %me, "bully: epochs exhausted; cannot lead");
            self.role = Role::Follower {
                leader: None,
                deadline: after(now, self.config.failure_timeout()),
            };
            return;
        };
        self.max_epoch = term;
        self.role = Role::Leading {
            term,
            next_heartbeat: after(now, self.config.heartbeat_interval()),
        };
        tracing::info!(node = %me, token = term.get(), "bully: leading");
        let lower: Vec<NodeId> = self.config.others().filter(|&m| m < me).collect();
        for to in lower {
            out.send(to, Message::Coordinator { epoch: term });
        }
    }

    fn receive(&mut self, now: Instant, from: NodeId, message: Message, out: &mut Outbox<Message>) {
        let me = self.me();
        if from == me || !self.config.is_member(from) {
            return;
        }
        self.departed.remove(&from);
        match message {
            Message::Election { epoch } => {
                self.observe(epoch);
                if from > me {
                    // Only lower members ask us; a higher one means the
                    // memberships differ. Nothing sensible to do.
                    return;
                }
                out.send(
                    from,
                    Message::Answer {
                        epoch: self.max_epoch,
                    },
                );
                match self.role {
                    Role::Leading { term, .. } => {
                        if term == self.max_epoch {
                            out.send(from, Message::Coordinator { epoch: term });
                        }
                        // Otherwise `handle` starts a new election.
                    }
                    Role::Electing { .. }
                    | Role::AwaitingCoordinator { .. }
                    | Role::Warming { .. } => {}
                    Role::Follower { .. } => self.start_election(now, out),
                }
            }
            Message::Answer { epoch } => {
                self.observe(epoch);
                if from > me && matches!(self.role, Role::Electing { .. } | Role::Warming { .. }) {
                    self.role = Role::AwaitingCoordinator {
                        deadline: after(now, self.config.coordinator_timeout()),
                    };
                }
            }
            Message::Coordinator { epoch } | Message::Heartbeat { epoch } => {
                self.on_claim(now, from, epoch, out);
            }
            Message::Stale { epoch } => self.observe(epoch),
        }
    }

    /// `from` said it is leaving: take it for dead now.
    fn left(&mut self, now: Instant, from: NodeId, out: &mut Outbox<Message>) {
        let me = self.me();
        if from == me || !self.config.is_member(from) {
            return;
        }
        self.departed.insert(from);
        match self.role {
            Role::Follower {
                leader: Some(leader),
                ..
            } if leader.id == from => {
                tracing::info!(node = %me, leader = %from, token = leader.epoch.get(), "bully: the leader left; holding an election");
                self.start_election(now, out);
            }
            // The COORDINATOR we wait for may have been its: ask again.
            Role::AwaitingCoordinator { .. } if from > me => self.start_election(now, out),
            // No ANSWER will come from it; if none can come at all, the
            // wait is over.
            Role::Electing { .. } if from > me && self.live_higher().is_empty() => {
                self.role = Role::Electing { deadline: now };
            }
            _ => tracing::debug!(node = %me, member = %from, "bully: a member left"),
        }
    }

    /// `from` says it leads in `epoch`.
    fn on_claim(&mut self, now: Instant, from: NodeId, epoch: Epoch, out: &mut Outbox<Message>) {
        let me = self.me();
        if !epoch.is_term() || Some(epoch.rank()) != self.config.rank_of(from) {
            tracing::debug!(node = %me, from = %from, epoch = %epoch, "bully: dropped a claim whose term is not the sender's");
            return;
        }
        if epoch < self.max_epoch {
            out.send(
                from,
                Message::Stale {
                    epoch: self.max_epoch,
                },
            );
            return;
        }
        self.max_epoch = epoch;
        let claim = Leader { id: from, epoch };
        if from > me {
            if self.view() != Some(claim) {
                tracing::info!(node = %me, leader = %from, token = epoch.get(), "bully: following");
            }
            self.role = Role::Follower {
                leader: Some(claim),
                deadline: after(now, self.config.failure_timeout()),
            };
        } else if !matches!(
            self.role,
            Role::Electing { .. } | Role::AwaitingCoordinator { .. }
        ) {
            // A lower member leads while we are live: bully it.
            self.start_election(now, out);
        }
    }

    fn run_timers(&mut self, now: Instant, out: &mut Outbox<Message>) {
        match self.role {
            Role::Follower { deadline, .. } | Role::AwaitingCoordinator { deadline }
                if now >= deadline =>
            {
                self.start_election(now, out);
            }
            Role::Electing { deadline } | Role::Warming { deadline } if now >= deadline => {
                self.become_leader(now, out);
            }
            Role::Leading {
                term,
                next_heartbeat,
            } if now >= next_heartbeat => {
                for to in self.config.others() {
                    out.send(to, Message::Heartbeat { epoch: term });
                }
                self.role = Role::Leading {
                    term,
                    next_heartbeat: after(now, self.config.heartbeat_interval()),
                };
            }
            _ => {}
        }
    }
}

impl Machine for Bully {
    type Message = Message;

    fn handle(&mut self, now: Instant, input: Input<Message>) -> Vec<Output<Message>> {
        let before = self.view();
        let mut out = Outbox::new();
        match input {
            Input::Receive { from, message } => self.receive(now, from, message, &mut out),
            Input::Left { from } => self.left(now, from, &mut out),
            Input::Tick => {}
        }
        // Invariant: a leader's term is the newest epoch it knows. A newer
        // one means another node claimed since: hold an election, which a
        // still-highest node wins at once with a newer term.
        if let Role::Leading { term, .. } = self.role
            && term < self.max_epoch
        {
            tracing::info!(node = %self.me(), token = term.get(), newer = %self.max_epoch, "bully: a newer epoch exists; re-electing");
            self.start_election(now, &mut out);
        }
        if matches!(self.role, Role::Warming { .. }) && self.max_epoch.is_term() {
            self.become_leader(now, &mut out);
        }
        self.run_timers(now, &mut out);
        out.finish(before, self.view())
    }

    fn next_deadline(&self) -> Instant {
        match self.role {
            Role::Follower { deadline, .. }
            | Role::Electing { deadline }
            | Role::AwaitingCoordinator { deadline }
            | Role::Warming { deadline } => deadline,
            Role::Leading { next_heartbeat, .. } => next_heartbeat,
        }
    }

    fn id(&self) -> NodeId {
        self.me()
    }

    fn leader(&self) -> Option<Leader> {
        self.view()
    }

    fn leadership(&self) -> Option<FencingToken> {
        match self.role {
            Role::Leading { term, .. } => Some(term.token()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn node(id: u64, now: Instant) -> Bully {
        let c = Config::builder(NodeId(id), [1, 2, 3].map(NodeId))
            .build()
            .unwrap();
        Bully::new(c, now)
    }

    fn sends(out: &[Output<Message>]) -> Vec<(u64, &'static str)> {
        out.iter()
            .filter_map(|o| match o {
                Output::Send { to, message } => Some((to.get(), message.kind())),
                Output::LeaderChanged(_) => None,
            })
            .collect()
    }

    #[test]
    fn the_highest_node_warms_up_then_leads_and_announces_to_the_lower() {
        let t = Instant::now();
        let mut n = node(3, t);
        let out = n.handle(t, Input::Tick);
        assert_eq!(sends(&out), [], "knows no epoch yet: waits");
        let warm = n.next_deadline();
        assert_eq!(warm, t + Config::DEFAULT_FAILURE_TIMEOUT);
        let out = n.handle(warm, Input::Tick);
        assert_eq!(sends(&out), [(1, "COORDINATOR"), (2, "COORDINATOR")]);
        assert_eq!(n.leader().map(|l| l.id), Some(NodeId(3)));
        assert_eq!(n.leader().unwrap().epoch, Epoch::new(1, 2).unwrap());
        assert!(n.leadership().is_some());
    }

    #[test]
    fn a_recovering_highest_node_bullies_above_the_groups_epoch() {
        let t = Instant::now();
        let mut n = node(3, t);
        let _ = n.handle(t, Input::Tick);
        let current = Epoch::new(41, 1).unwrap();
        let out = n.handle(
            t,
            Input::Receive {
                from: NodeId(2),
                message: Message::Heartbeat { epoch: current },
            },
        );
        assert_eq!(sends(&out), [(1, "COORDINATOR"), (2, "COORDINATOR")]);
        let term = n.leader().unwrap().epoch;
        assert_eq!(term, Epoch::new(42, 2).unwrap());
        assert_eq!(n.leadership(), Some(term.token()));
    }

    #[test]
    fn a_lower_node_asks_and_leads_when_nobody_answers() {
        let t = Instant::now();
        let mut n = node(1, t);
        let out = n.handle(t, Input::Tick);
        assert_eq!(sends(&out), [(2, "ELECTION"), (3, "ELECTION")]);
        assert_eq!(n.leadership(), None);
        let t1 = n.next_deadline();
        assert_eq!(t1, t + Config::DEFAULT_ANSWER_TIMEOUT);
        let _ = n.handle(t1, Input::Tick);
        assert_eq!(n.leadership(), None, "still warming up");
        let t2 = n.next_deadline();
        assert_eq!(t2, t + Config::DEFAULT_FAILURE_TIMEOUT);
        let out = n.handle(t2, Input::Tick);
        assert_eq!(sends(&out), [], "no lower member");
        assert!(n.leadership().is_some());
    }

    #[test]
    fn an_answer_then_a_coordinator_makes_a_follower() {
        let t = Instant::now();
        let mut n = node(1, t);
        let _ = n.handle(t, Input::Tick);
        let rx = |from, message| Input::Receive {
            from: NodeId(from),
            message,
        };
        let _ = n.handle(t, rx(3, Message::Answer { epoch: Epoch::ZERO }));
        let e = Epoch::new(1, 2).unwrap();
        let out = n.handle(t, rx(3, Message::Coordinator { epoch: e }));
        assert_eq!(
            out,
            [Output::LeaderChanged(Some(Leader {
                id: NodeId(3),
                epoch: e
            }))]
        );
        // An older heartbeat is answered with STALE and changes nothing.
        let out = n.handle(
            t,
            rx(
                2,
                Message::Heartbeat {
                    epoch: Epoch::new(0, 1).unwrap(),
                },
            ),
        );
        assert!(out.is_empty(), "round 0 is not a term: dropped");
        let mut n2 = node(2, t);
        let e9 = Epoch::new(9, 2).unwrap();
        let _ = n2.handle(t, rx(3, Message::Coordinator { epoch: e9 }));
        let out = n2.handle(t, rx(3, Message::Heartbeat { epoch: e }));
        assert_eq!(sends(&out), [(3, "STALE")]);
        assert_eq!(n2.leader().unwrap().epoch, e9);
    }

    #[test]
    fn a_leader_that_leaves_is_succeeded_at_once_and_rejoins_when_heard() {
        let t = Instant::now();
        let rx = |from, message| Input::Receive {
            from: NodeId(from),
            message,
        };
        let e3 = Epoch::new(1, 2).unwrap();
        let mut two = node(2, t);
        let mut one = node(1, t);
        for n in [&mut two, &mut one] {
            let _ = n.handle(t, Input::Tick);
            let _ = n.handle(t, rx(3, Message::Coordinator { epoch: e3 }));
            assert_eq!(n.leader().map(|l| l.id), Some(NodeId(3)));
        }
        let soon = t + Duration::from_millis(10);
        assert_eq!(two.handle(soon, Input::Left { from: NodeId(9) }), []);
        assert_eq!(two.leader().map(|l| l.id), Some(NodeId(3)), "not a member");
        // Node 2 has no live higher member: it leads now, not after a
        // failure timeout or an answer timeout.
        let out = two.handle(soon, Input::Left { from: NodeId(3) });
        assert_eq!(sends(&out), [(1, "COORDINATOR")]);
        let term = two.leader().unwrap();
        assert_eq!(term.id, NodeId(2));
        assert!(term.epoch > e3);
        assert_eq!(two.leadership(), Some(term.token()));
        // Node 1 asks node 2 only, and follows its COORDINATOR.
        let out = one.handle(soon, Input::Left { from: NodeId(3) });
        assert_eq!(sends(&out), [(2, "ELECTION")]);
        let _ = one.handle(soon, rx(2, Message::Answer { epoch: term.epoch }));
        let _ = one.handle(soon, rx(2, Message::Coordinator { epoch: term.epoch }));
        assert_eq!(one.leader(), Some(term));
        // Node 3 is back (its STALE shows it alive): elections ask it again.
        let _ = one.handle(soon, rx(3, Message::Stale { epoch: term.epoch }));
        let out = one.handle(soon, Input::Left { from: NodeId(2) });
        assert_eq!(sends(&out), [(3, "ELECTION")]);
    }

    #[test]
    fn a_candidate_whose_last_higher_member_leaves_leads_at_once() {
        let t = Instant::now();
        let mut n = node(2, t);
        // Knows an epoch (so it will not wait to warm up), and asks 3.
        let out = n.handle(
            t,
            Input::Receive {
                from: NodeId(1),
                message: Message::Stale {
                    epoch: Epoch::new(4, 0).unwrap(),
                },
            },
        );
        assert_eq!(sends(&out), [(3, "ELECTION")]);
        let soon = t + Duration::from_millis(1);
        assert!(soon < t + Config::DEFAULT_ANSWER_TIMEOUT);
        let out = n.handle(soon, Input::Left { from: NodeId(3) });
        assert_eq!(sends(&out), [(1, "COORDINATOR")]);
        assert_eq!(n.leader().map(|l| l.id), Some(NodeId(2)));
    }

    #[test]
    fn a_leader_that_hears_of_a_newer_epoch_leads_above_it() {
        let t = Instant::now();
        let mut n = node(3, t);
        let _ = n.handle(t, Input::Tick);
        let _ = n.handle(n.next_deadline(), Input::Tick);
        let first = n.leader().unwrap().epoch;
        let newer = Epoch::new(7, 1).unwrap();
        let out = n.handle(
            t,
            Input::Receive {
                from: NodeId(1),
                message: Message::Stale { epoch: newer },
            },
        );
        let term = n.leader().unwrap().epoch;
        assert!(term > newer && term > first);
        assert_eq!(term.rank(), 2);
        assert_eq!(sends(&out), [(1, "COORDINATOR"), (2, "COORDINATOR")]);
    }
}
