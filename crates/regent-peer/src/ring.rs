//! Ring: the ELECTION collects the live members on a trip round the ring;
//! the highest collected id leads; a COORDINATOR goes round to say so.
//!
//! The ring is the membership in ascending order; a node's successor is the
//! next higher id, the highest wrapping to the lowest.
//!
//! * A node that suspects the leader (no HEARTBEAT for `failure_timeout`),
//!   or has just started, *initiates*: it sends ELECTION (its id, an
//!   [`ElectionId`], its max epoch, and the list `[itself]`) to its
//!   successor.
//! * A node that gets an ELECTION appends its id, raises the epoch to its
//!   own max epoch, and passes it on, once: a copy of an election it has
//!   passed on within `election_timeout` is dropped (network duplicates,
//!   and the forks of ring repair when an ACK is merely late, would
//!   otherwise multiply at every hop). Following Chang and Roberts, a node
//!   that is itself initiating swallows the ELECTION of a lower initiator:
//!   its own election will cover the ring, so with several initiators only
//!   the highest one's goes all the way round.
//! * Passing an ELECTION on makes a node a *participant*: it drops its
//!   leader and waits up to `election_timeout` for the COORDINATOR instead
//!   of initiating. Not so the leader, nor a follower whose leader's term
//!   is newer than the ELECTION's epoch: nobody it had passed knew of that
//!   term, so it is an election the term has superseded (a member's first
//!   ELECTION, refused by a successor not yet started and skipped on an
//!   ack timeout later, after the group elected without it), which may
//!   never come back to a node that still runs it, or one from a member
//!   that has yet to hear of the term. Such a node passes it on (a
//!   COORDINATOR from it is newer than the term, and adopted) but keeps
//!   its leader and its failure timer, so that a crash of the leader is
//!   still detected a failure timeout after its last HEARTBEAT.
//! * When its ELECTION comes back, the initiator takes the highest id in
//!   the list as leader, opens the leader's term ([`Epoch::next_for`] with
//!   the *leader's* rank, above the highest epoch the trip collected) and
//!   sends COORDINATOR round the ring. Each node adopts the leader and
//!   passes it on; a node that already has that term stops it, so it makes
//!   one trip.
//! * **Ring repair.** Every ELECTION and COORDINATOR hop is acknowledged
//!   with ACK. A node whose successor does not ACK within `ack_timeout`
//!   sends the message to the next member instead, and so on round the
//!   ring; when every other member has been skipped the message comes back
//!   to the sender itself, which then handles it as if it had gone round
//!   (an initiator alone elects itself). Skips are not remembered: the
//!   next message tries the immediate successor again, so a restarted node
//!   is back in the ring at once.
//! * A member that says it is leaving ([`Input::Left`]) is dead at once:
//!   a follower of it initiates an election now, a hop waiting for its ACK
//!   moves on to the next member now, and ring messages skip it until it
//!   is heard from again (any message from it, or an ELECTION it
//!   initiated). A leader's graceful shutdown therefore costs one trip
//!   round the ring, not a failure timeout.
//! * The leader sends HEARTBEAT with its term to every other member each
//!   `heartbeat_interval`. A COORDINATOR or HEARTBEAT older than the
//!   receiver's max epoch is dropped (a stale HEARTBEAT is answered with
//!   STALE); a leader that learns of a newer epoch, and a node that learns
//!   of a leader lower than itself (it was not collected), start an
//!   election.
//! * A node that forwarded an ELECTION, or initiated one, and gets no
//!   COORDINATOR within `election_timeout` initiates again.
//!
//! Messages per election with one initiator on a ring of n live members:
//! n ELECTION hops and n COORDINATOR hops (2n), each acknowledged (2n
//! ACKs), plus one unacknowledged attempt per dead member on the way, per
//! message.

use std::collections::BTreeSet;

use regent_core::FencingToken;
use tokio::time::Instant;

use crate::config::Config;
use crate::epoch::{Epoch, Leader, NodeId};
use crate::machine::{Input, Machine, Outbox, Output, PeerMessage, after};

/// Ring's messages.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// An election on its way round, collecting ids.
    Election {
        /// The node that started it.
        initiator: NodeId,
        /// Which of the initiator's elections this is.
        election: ElectionId,
        /// The highest max epoch of the nodes it has passed.
        epoch: Epoch,
        /// The ids collected so far, the initiator first.
        ids: Vec<NodeId>,
        /// The sender's number for this hop, echoed in the ACK.
        hop: u64,
    },
    /// The result on its way round.
    Coordinator {
        /// The node that started the election.
        initiator: NodeId,
        /// The new leader: the highest id collected.
        leader: NodeId,
        /// The leader's term (it carries the leader's rank).
        epoch: Epoch,
        /// The sender's number for this hop, echoed in the ACK.
        hop: u64,
    },
    /// "I got hop `hop`": to the sender of an ELECTION or COORDINATOR.
    Ack {
        /// The hop acknowledged.
        hop: u64,
    },
    /// "I still lead": from the leader to every other member.
    Heartbeat {
        /// The leader's term.
        epoch: Epoch,
    },
    /// "Your term is older than what I have seen": the answer to a stale
    /// HEARTBEAT.
    Stale {
        /// The receiver's max epoch.
        epoch: Epoch,
    },
}

impl PeerMessage for Message {
    fn kind(&self) -> &'static str {
        match self {
            Message::Election { .. } => "ELECTION",
            Message::Coordinator { .. } => "COORDINATOR",
            Message::Ack { .. } => "ACK",
            Message::Heartbeat { .. } => "HEARTBEAT",
            Message::Stale { .. } => "STALE",
        }
    }
}

/// Names one election of one initiator: the initiator's incarnation
/// ([`ConfigBuilder::incarnation`](crate::ConfigBuilder::incarnation)) and
/// its count of elections in that incarnation. The incarnation keeps a
/// restarted node's new elections apart from the copies of its earlier ones
/// that other nodes still remember.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ElectionId {
    /// The initiator's incarnation.
    pub incarnation: u64,
    /// The initiator's count of elections since it started.
    pub number: u64,
}

/// A ring message without its hop number.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Body {
    Election {
        initiator: NodeId,
        election: ElectionId,
        epoch: Epoch,
        ids: Vec<NodeId>,
    },
    Coordinator {
        initiator: NodeId,
        leader: NodeId,
        epoch: Epoch,
    },
}

impl Body {
    fn with_hop(&self, hop: u64) -> Message {
        match self.clone() {
            Body::Election {
                initiator,
                election,
                epoch,
                ids,
            } => Message::Election {
                initiator,
                election,
                epoch,
                ids,
                hop,
            },
            Body::Coordinator {
                initiator,
                leader,
                epoch,
            } => Message::Coordinator {
                initiator,
                leader,
                epoch,
                hop,
            },
        }
    }
}

/// A ring message sent and not yet acknowledged.
#[derive(Clone, Debug)]
struct Pending {
    hop: u64,
    to: NodeId,
    /// How far round the ring `to` is: 1 for the successor.
    step: usize,
    body: Body,
    deadline: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Following `leader` (or nobody yet); initiate at `deadline` unless a
    /// heartbeat comes first.
    Follower {
        leader: Option<Leader>,
        deadline: Instant,
    },
    /// Initiated election `election`; initiate again at `deadline` unless
    /// a COORDINATOR comes first.
    Electing {
        election: ElectionId,
        deadline: Instant,
    },
    /// Passed on another node's ELECTION; initiate at `deadline` unless a
    /// COORDINATOR comes first.
    Participant { deadline: Instant },
    /// Leading in `term`.
    Leading {
        term: Epoch,
        next_heartbeat: Instant,
    },
}

/// One node running Ring. See the [module docs](self).
#[derive(Debug)]
pub struct Ring {
    config: Config,
    rank: u16,
    max_epoch: Epoch,
    /// The newest term adopted (as leader or follower). A COORDINATOR is
    /// acted on, and passed on, only if it is newer: copies of one die at
    /// the first node that has it.
    adopted: Epoch,
    role: Role,
    next_election: u64,
    next_hop: u64,
    pending: Vec<Pending>,
    /// Elections passed on within the last `election_timeout`, and when:
    /// later copies (duplicates, or forks of a hop whose ACK came late) are
    /// dropped, so one election costs at most one forward per node.
    forwarded: Vec<(NodeId, ElectionId, Instant)>,
    /// Members that said they were leaving and have not been heard from
    /// since: ring messages skip them.
    departed: BTreeSet<NodeId>,
}

impl Ring {
    /// A node started at `now`. Its first deadline is `now`: tick it and it
    /// initiates an election.
    pub fn new(config: Config, now: Instant) -> Self {
        Self {
            rank: config.rank(),
            config,
            max_epoch: Epoch::ZERO,
            adopted: Epoch::ZERO,
            role: Role::Follower {
                leader: None,
                deadline: now,
            },
            next_election: 0,
            next_hop: 0,
            pending: Vec::new(),
            forwarded: Vec::new(),
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

    fn view(&self) -> Option<Leader> {
        match self.role {
            Role::Follower { leader, .. } => leader,
            Role::Leading { term, .. } => Some(Leader {
                id: self.me(),
                epoch: term,
            }),
            Role::Electing { .. } | Role::Participant { .. } => None,
        }
    }

    /// The member `step` places after this node round the ring.
    fn successor(&self, step: usize) -> NodeId {
        let members = self.config.members();
        members[(usize::from(self.rank) + step) % members.len()]
    }

    /// The first step round the ring, from `step` on, whose member has not
    /// left; `None` when every other member from there on has.
    fn live_step(&self, step: usize) -> Option<usize> {
        (step..self.config.members().len()).find(|&s| !self.departed.contains(&self.successor(s)))
    }

    fn send_along(&mut self, now: Instant, body: Body, out: &mut Outbox<Message>) {
        match self.live_step(1) {
            Some(step) => {
                let to = self.successor(step);
                self.send_hop(now, to, step, body, out);
            }
            // Alone, or every other member has left: it is back with us.
            None => self.deliver(now, None, body, out),
        }
    }

    fn send_hop(
        &mut self,
        now: Instant,
        to: NodeId,
        step: usize,
        body: Body,
        out: &mut Outbox<Message>,
    ) {
        let hop = self.next_hop;
        self.next_hop = self.next_hop.wrapping_add(1);
        out.send(to, body.with_hop(hop));
        self.pending.push(Pending {
            hop,
            to,
            step,
            body,
            deadline: after(now, self.config.ack_timeout()),
        });
    }

    fn start_election(&mut self, now: Instant, out: &mut Outbox<Message>) {
        let me = self.me();
        let election = ElectionId {
            incarnation: self.config.incarnation(),
            number: self.next_election,
        };
        self.next_election = self.next_election.wrapping_add(1);
        tracing::debug!(node = %me, election = election.number, epoch = %self.max_epoch, "ring: initiating an election");
        self.role = Role::Electing {
            election,
            deadline: after(now, self.config.election_timeout()),
        };
        let body = Body::Election {
            initiator: me,
            election,
            epoch: self.max_epoch,
            ids: vec![me],
        };
        self.send_along(now, body, out);
    }

    fn adopt(&mut self, now: Instant, leader: Leader) {
        let me = self.me();
        if self.view() != Some(leader) {
            tracing::info!(node = %me, leader = %leader.id, token = leader.epoch.get(), "ring: new leader");
        }
        self.adopted = self.adopted.max(leader.epoch);
        self.role = if leader.id == me {
            Role::Leading {
                term: leader.epoch,
                next_heartbeat: after(now, self.config.heartbeat_interval()),
            }
        } else {
            Role::Follower {
                leader: Some(leader),
                deadline: after(now, self.config.failure_timeout()),
            }
        };
    }

    /// Handles a ring message; `from` is `None` when it came back to this
    /// node because every other member was skipped.
    fn deliver(
        &mut self,
        now: Instant,
        from: Option<NodeId>,
        body: Body,
        out: &mut Outbox<Message>,
    ) {
        match body {
            Body::Election {
                initiator,
                election,
                epoch,
                ids,
            } => self.on_election(now, initiator, election, epoch, ids, out),
            Body::Coordinator {
                initiator,
                leader,
                epoch,
            } => self.on_coordinator(now, from, initiator, leader, epoch, out),
        }
    }

    fn on_election(
        &mut self,
        now: Instant,
        initiator: NodeId,
        election: ElectionId,
        epoch: Epoch,
        mut ids: Vec<NodeId>,
        out: &mut Outbox<Message>,
    ) {
        let me = self.me();
        if !self.valid_ids(initiator, &ids) {
            tracing::debug!(node = %me, initiator = %initiator, "ring: dropped a malformed ELECTION");
            return;
        }
        self.max_epoch = self.max_epoch.max(epoch);
        if initiator == me {
            if matches!(self.role, Role::Electing { election: e, .. } if e == election) {
                self.complete(now, &ids, out);
            }
            return;
        }
        if ids.contains(&me) {
            // Went round without finding its initiator: the initiator is
            // gone; its election times out elsewhere.
            return;
        }
        let timeout = self.config.election_timeout();
        self.forwarded
            .retain(|&(_, _, at)| now < after(at, timeout));
        if self
            .forwarded
            .iter()
            .any(|&(i, e, _)| i == initiator && e == election)
        {
            return;
        }
        match self.role {
            Role::Electing { .. } if initiator < me => return,
            Role::Leading { .. } => {}
            // Older than the term followed: superseded, or from a member
            // yet to hear of the term (module docs). Pass it on, as the
            // leader does, keeping the leader and the failure timer: it may
            // never end, and waiting for it would hide the leader's crash
            // for an election timeout.
            Role::Follower {
                leader: Some(leader),
                ..
            } if epoch < leader.epoch => {}
            Role::Follower { .. } | Role::Participant { .. } | Role::Electing { .. } => {
                self.role = Role::Participant {
                    deadline: after(now, self.config.election_timeout()),
                };
            }
        }
        self.forwarded.push((initiator, election, now));
        ids.push(me);
        let body = Body::Election {
            initiator,
            election,
            epoch: self.max_epoch,
            ids,
        };
        self.send_along(now, body, out);
    }

    /// The collected ids: members, no repeats, the initiator first.
    fn valid_ids(&self, initiator: NodeId, ids: &[NodeId]) -> bool {
        if ids.first() != Some(&initiator) || ids.len() > self.config.members().len() {
            return false;
        }
        if !ids.iter().all(|&id| self.config.is_member(id)) {
            return false;
        }
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.windows(2).all(|w| w[0] != w[1])
    }

    /// Forgets the unacknowledged ELECTION hops that can no longer elect,
    /// so that neither an ack timeout nor a departure sends them on: this
    /// node's own elections other than the one it runs (only that one is
    /// completed when it comes back), and elections older than a term
    /// adopted here (that term's COORDINATOR goes round to their
    /// initiators, which then no longer run them).
    ///
    /// Sent on, such an ELECTION is worse than useless: a higher
    /// initiator's ELECTION makes a lower initiator a participant, giving
    /// up its own election, and then dies at an initiator that no longer
    /// runs it, so every node waits an election timeout.
    fn drop_dead_elections(&mut self) {
        let me = self.me();
        let running = match self.role {
            Role::Electing { election, .. } => Some(election),
            _ => None,
        };
        let adopted = self.adopted;
        self.pending.retain(|p| match p.body {
            Body::Election {
                initiator,
                election,
                epoch,
                ..
            } => epoch >= adopted && (initiator != me || running == Some(election)),
            Body::Coordinator { .. } => true,
        });
    }

    /// This node's election came back with `ids`.
    fn complete(&mut self, now: Instant, ids: &[NodeId], out: &mut Outbox<Message>) {
        let me = self.me();
        let winner = ids.iter().copied().max().unwrap_or(me);
        let rank = self.config.rank_of(winner).unwrap_or(self.rank);
        let Some(term) = self
            .max_epoch
            .next_at_least(rank, self.config.round_floor(now))
        else {
            tracing::warn!(node = %me, "ring: epochs exhausted; cannot elect");
            self.role = Role::Follower {
                leader: None,
                deadline: after(now, self.config.failure_timeout()),
            };
            return;
        };
        self.max_epoch = term;
        self.adopt(
            now,
            Leader {
                id: winner,
                epoch: term,
            },
        );
        let body = Body::Coordinator {
            initiator: me,
            leader: winner,
            epoch: term,
        };
        self.send_along(now, body, out);
    }

    fn on_coordinator(
        &mut self,
        now: Instant,
        from: Option<NodeId>,
        initiator: NodeId,
        leader: NodeId,
        epoch: Epoch,
        out: &mut Outbox<Message>,
    ) {
        let me = self.me();
        if !epoch.is_term()
            || Some(epoch.rank()) != self.config.rank_of(leader)
            || !self.config.is_member(initiator)
        {
            tracing::debug!(node = %me, ?from, leader = %leader, epoch = %epoch, "ring: dropped a malformed COORDINATOR");
            return;
        }
        let claim = Leader { id: leader, epoch };
        if epoch <= self.adopted || epoch < self.max_epoch {
            // Already here (it has been round, or is a copy), or overtaken
            // by a newer term: stop it.
            return;
        }
        self.max_epoch = epoch;
        self.adopt(now, claim);
        let body = Body::Coordinator {
            initiator,
            leader,
            epoch,
        };
        self.send_along(now, body, out);
        if leader < me {
            // A term that left us out: we were cut off or restarting.
            self.start_election(now, out);
        }
    }

    fn on_heartbeat(
        &mut self,
        now: Instant,
        from: NodeId,
        epoch: Epoch,
        out: &mut Outbox<Message>,
    ) {
        let me = self.me();
        if !epoch.is_term() || Some(epoch.rank()) != self.config.rank_of(from) {
            tracing::debug!(node = %me, from = %from, epoch = %epoch, "ring: dropped a heartbeat whose term is not the sender's");
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
        let claim = Leader { id: from, epoch };
        if self.view() == Some(claim) {
            self.adopt(now, claim);
            return;
        }
        self.max_epoch = epoch;
        if from > me {
            self.adopt(now, claim);
        } else if matches!(self.role, Role::Follower { .. } | Role::Leading { .. }) {
            // A lower member leads while we are live: we were not collected.
            self.start_election(now, out);
        }
    }

    /// `from` said it is leaving: take it for dead now.
    fn left(&mut self, now: Instant, from: NodeId, out: &mut Outbox<Message>) {
        let me = self.me();
        if from == me || !self.config.is_member(from) {
            return;
        }
        self.departed.insert(from);
        // Its ACKs will not come: `run_timers` moves these hops on now.
        for p in self.pending.iter_mut().filter(|p| p.to == from) {
            p.deadline = now;
        }
        match self.role {
            Role::Follower {
                leader: Some(leader),
                ..
            } if leader.id == from => {
                tracing::info!(node = %me, leader = %from, token = leader.epoch.get(), "ring: the leader left; initiating an election");
                self.start_election(now, out);
            }
            _ => tracing::debug!(node = %me, member = %from, "ring: a member left"),
        }
    }

    fn receive(&mut self, now: Instant, from: NodeId, message: Message, out: &mut Outbox<Message>) {
        if from == self.me() || !self.config.is_member(from) {
            return;
        }
        self.departed.remove(&from);
        if let Message::Election { initiator, .. } = &message {
            // A restarted member initiates at once: its ELECTION is how its
            // predecessor learns that it is back.
            self.departed.remove(initiator);
        }
        match message {
            Message::Election {
                initiator,
                election,
                epoch,
                ids,
                hop,
            } => {
                out.send(from, Message::Ack { hop });
                let body = Body::Election {
                    initiator,
                    election,
                    epoch,
                    ids,
                };
                self.deliver(now, Some(from), body, out);
            }
            Message::Coordinator {
                initiator,
                leader,
                epoch,
                hop,
            } => {
                out.send(from, Message::Ack { hop });
                let body = Body::Coordinator {
                    initiator,
                    leader,
                    epoch,
                };
                self.deliver(now, Some(from), body, out);
            }
            Message::Ack { hop } => self.pending.retain(|p| !(p.hop == hop && p.to == from)),
            Message::Heartbeat { epoch } => self.on_heartbeat(now, from, epoch, out),
            Message::Stale { epoch } => self.max_epoch = self.max_epoch.max(epoch),
        }
    }

    fn run_timers(&mut self, now: Instant, out: &mut Outbox<Message>) {
        let (due, waiting): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| now >= p.deadline);
        self.pending = waiting;
        for p in due {
            match self.live_step(p.step + 1) {
                Some(step) => {
                    let to = self.successor(step);
                    tracing::debug!(node = %self.me(), skipped = %p.to, to = %to, "ring: no ACK; skipping a successor");
                    self.send_hop(now, to, step, p.body, out);
                }
                // Every other member skipped: it is back with us.
                None => self.deliver(now, None, p.body, out),
            }
        }
        match self.role {
            Role::Follower { deadline, .. }
            | Role::Electing { deadline, .. }
            | Role::Participant { deadline }
                if now >= deadline =>
            {
                self.start_election(now, out);
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

impl Machine for Ring {
    type Message = Message;

    fn handle(&mut self, now: Instant, input: Input<Message>) -> Vec<Output<Message>> {
        let before = self.view();
        let mut out = Outbox::new();
        match input {
            Input::Receive { from, message } => self.receive(now, from, message, &mut out),
            Input::Left { from } => self.left(now, from, &mut out),
            Input::Tick => {}
        }
        // Invariant: a leader's term is the newest epoch it knows; a newer
        // one means a term it was not part of, so the ring must elect again
        // for the highest live id to lead.
        if let Role::Leading { term, .. } = self.role
            && term < self.max_epoch
        {
            tracing::info!(node = %self.me(), token = term.get(), newer = %self.max_epoch, "ring: a newer epoch exists; re-electing");
            self.start_election(now, &mut out);
        }
        self.drop_dead_elections();
        self.run_timers(now, &mut out);
        out.finish(before, self.view())
    }

    fn next_deadline(&self) -> Instant {
        let role = match self.role {
            Role::Follower { deadline, .. }
            | Role::Electing { deadline, .. }
            | Role::Participant { deadline } => deadline,
            Role::Leading { next_heartbeat, .. } => next_heartbeat,
        };
        self.pending
            .iter()
            .map(|p| p.deadline)
            .fold(role, Instant::min)
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

    fn node(id: u64, now: Instant) -> Ring {
        let c = Config::builder(NodeId(id), [1, 2, 3].map(NodeId))
            .build()
            .unwrap();
        Ring::new(c, now)
    }

    fn only_send(out: Vec<Output<Message>>) -> (NodeId, Message) {
        let mut sends: Vec<_> = out
            .into_iter()
            .filter_map(|o| match o {
                Output::Send { to, message } => Some((to, message)),
                Output::LeaderChanged(_) => None,
            })
            .collect();
        assert_eq!(sends.len(), 1, "{sends:?}");
        sends.remove(0)
    }

    #[test]
    fn an_election_goes_round_and_the_highest_leads() {
        let t = Instant::now();
        let mut nodes: Vec<Ring> = (1..=3).map(|i| node(i, t)).collect();
        let (to, mut msg) = only_send(nodes[0].handle(t, Input::Tick));
        assert_eq!(to, NodeId(2));
        let mut from = NodeId(1);
        let mut to = to;
        // Drive the ELECTION and COORDINATOR round, dropping ACKs.
        for _ in 0..6 {
            let out = nodes[(to.get() - 1) as usize].handle(
                t,
                Input::Receive {
                    from,
                    message: msg.clone(),
                },
            );
            let next: Vec<_> = out
                .into_iter()
                .filter_map(|o| match o {
                    Output::Send { to, message } if message.kind() != "ACK" => Some((to, message)),
                    _ => None,
                })
                .collect();
            if next.is_empty() {
                break;
            }
            from = to;
            (to, msg) = next[0].clone();
        }
        for n in &nodes {
            assert_eq!(n.leader().map(|l| l.id), Some(NodeId(3)), "{n:?}");
        }
        assert!(nodes[2].leadership().is_some());
    }

    #[test]
    fn a_leader_that_leaves_is_succeeded_without_waiting_for_timeouts() {
        let t = Instant::now();
        let mut n = node(2, t);
        let e3 = Epoch::new(1, 2).unwrap();
        let _ = n.handle(
            t,
            Input::Receive {
                from: NodeId(3),
                message: Message::Heartbeat { epoch: e3 },
            },
        );
        assert_eq!(n.leader().map(|l| l.id), Some(NodeId(3)));
        let soon = t + Duration::from_millis(1);
        assert_eq!(n.handle(soon, Input::Left { from: NodeId(9) }), []);
        // Its successor, 3, has left: the ELECTION goes straight to 1.
        let (to, election) = only_send(n.handle(soon, Input::Left { from: NodeId(3) }));
        assert_eq!(to, NodeId(1));
        let Message::Election {
            initiator,
            election,
            epoch,
            ..
        } = election
        else {
            panic!("{election:?}")
        };
        // Back from 1 with both ids: 2 leads, and tells 1 (not 3).
        let back = Message::Election {
            initiator,
            election,
            epoch,
            ids: vec![NodeId(2), NodeId(1)],
            hop: 0,
        };
        let out = n.handle(
            soon,
            Input::Receive {
                from: NodeId(1),
                message: back,
            },
        );
        let term = n.leader().unwrap();
        assert_eq!(term.id, NodeId(2));
        assert!(term.epoch > e3);
        assert!(n.leadership().is_some());
        assert!(out.iter().any(|o| matches!(
            o,
            Output::Send {
                to: NodeId(1),
                message: Message::Coordinator { .. }
            }
        )));
    }

    /// Regression: a follower took an ELECTION older than its leader's
    /// term (a startup election still being skipped along the ring, whose
    /// initiator no longer ran it) for a new election, dropped its leader
    /// and its failure timer and waited the election timeout for a
    /// COORDINATOR that never came. When the leader then crashed, the
    /// group failed over an election timeout (2 s by default) after the
    /// stale ELECTION instead of a failure timeout after the crash.
    #[test]
    fn an_election_older_than_the_term_passes_a_follower_that_keeps_its_leader() {
        let t = Instant::now();
        let mut n = node(1, t);
        let e3 = Epoch::new(1, 2).unwrap();
        let _ = n.handle(
            t,
            Input::Receive {
                from: NodeId(3),
                message: Message::Heartbeat { epoch: e3 },
            },
        );
        let failure = t + Config::DEFAULT_FAILURE_TIMEOUT;
        assert_eq!(n.next_deadline(), failure);
        // 2's first ELECTION, from before 3's term, skipped on to 1 (its
        // hop to 3 was refused).
        let soon = t + Duration::from_millis(80);
        let out = n.handle(
            soon,
            Input::Receive {
                from: NodeId(2),
                message: Message::Election {
                    initiator: NodeId(2),
                    election: ElectionId {
                        incarnation: 0,
                        number: 0,
                    },
                    epoch: Epoch::ZERO,
                    ids: vec![NodeId(2)],
                    hop: 0,
                },
            },
        );
        // Passed on, with the epoch raised, and acknowledged.
        assert!(out.iter().any(|o| matches!(
            o,
            Output::Send {
                to: NodeId(2),
                message: Message::Election { epoch, ids, .. }
            } if *epoch == e3 && ids == &[NodeId(2), NodeId(1)]
        )));
        assert!(out.iter().any(|o| matches!(
            o,
            Output::Send {
                message: Message::Ack { hop: 0 },
                ..
            }
        )));
        // The leader and the failure timer are kept.
        assert!(!out.iter().any(|o| matches!(o, Output::LeaderChanged(_))));
        assert_eq!(
            n.leader(),
            Some(Leader {
                id: NodeId(3),
                epoch: e3
            })
        );
        assert!(
            matches!(n.role, Role::Follower { deadline, .. } if deadline == failure),
            "{:?}",
            n.role
        );
        // 2 acknowledges the hop (and drops the ELECTION: it no longer runs
        // it). 3 crashes: 1 initiates a failure timeout after its last
        // HEARTBEAT, not an election timeout after the stale ELECTION.
        let Some(Output::Send {
            message: Message::Election { hop, .. },
            ..
        }) = out.iter().find(|o| {
            matches!(
                o,
                Output::Send {
                    message: Message::Election { .. },
                    ..
                }
            )
        })
        else {
            unreachable!("checked above")
        };
        let acked = n.handle(
            soon,
            Input::Receive {
                from: NodeId(2),
                message: Message::Ack { hop: *hop },
            },
        );
        assert_eq!(acked, []);
        assert_eq!(n.next_deadline(), failure);
        let (to, election) = only_send(n.handle(failure, Input::Tick));
        assert_eq!(to, NodeId(2));
        assert!(
            matches!(election, Message::Election { initiator: NodeId(1), epoch, .. } if epoch == e3)
        );
        assert_eq!(n.leader(), None);

        // An ELECTION that knows the term (its initiator suspects the
        // leader too) makes a follower a participant, as before: it waits
        // for that election rather than starting one of its own.
        let mut m = node(1, t);
        let _ = m.handle(
            t,
            Input::Receive {
                from: NodeId(3),
                message: Message::Heartbeat { epoch: e3 },
            },
        );
        let later = t + Duration::from_millis(990);
        let _ = m.handle(
            later,
            Input::Receive {
                from: NodeId(2),
                message: Message::Election {
                    initiator: NodeId(2),
                    election: ElectionId {
                        incarnation: 0,
                        number: 1,
                    },
                    epoch: e3,
                    ids: vec![NodeId(2)],
                    hop: 1,
                },
            },
        );
        assert_eq!(m.leader(), None);
        let wait = later + m.config.election_timeout();
        assert!(
            matches!(m.role, Role::Participant { deadline } if deadline == wait),
            "no election of its own at the failure timeout: {:?}",
            m.role
        );
    }

    /// Regression: an ELECTION the node no longer runs, still waiting for
    /// an ACK from a successor that refused it at startup, was sent on when
    /// that successor (since elected) left, and made the initiator of the
    /// real election give it up. It is forgotten once a term is adopted.
    #[test]
    fn a_leaders_goodbye_does_not_send_on_an_election_the_term_superseded() {
        let t = Instant::now();
        let mut n = node(2, t);
        // 2's first ELECTION, to 3, gets no ACK (3 has not started).
        let (to, _) = only_send(n.handle(t, Input::Tick));
        assert_eq!(to, NodeId(3));
        // 3 starts and leads; its HEARTBEAT comes before the ack timeout.
        let e3 = Epoch::new(1, 2).unwrap();
        let soon = t + Duration::from_millis(50);
        let _ = n.handle(
            soon,
            Input::Receive {
                from: NodeId(3),
                message: Message::Heartbeat { epoch: e3 },
            },
        );
        assert_eq!(n.leader().map(|l| l.id), Some(NodeId(3)));
        assert!(n.pending.is_empty(), "{:?}", n.pending);
        // 3 leaves: 2 sends one ELECTION, its new one, on to 1.
        let out = n.handle(soon, Input::Left { from: NodeId(3) });
        let (to, election) = only_send(out);
        assert_eq!(to, NodeId(1));
        assert!(
            matches!(
                election,
                Message::Election { election: ElectionId { number: 1, .. }, epoch, .. } if epoch == e3
            ),
            "{election:?}"
        );
    }

    #[test]
    fn a_hop_to_a_member_that_leaves_moves_on_at_once() {
        let t = Instant::now();
        let mut n = node(3, t);
        let (to, _) = only_send(n.handle(t, Input::Tick));
        assert_eq!(to, NodeId(1), "3's successor wraps to 1");
        let soon = t + Duration::from_millis(1);
        assert!(soon < t + Config::DEFAULT_ACK_TIMEOUT);
        let (to, _) = only_send(n.handle(soon, Input::Left { from: NodeId(1) }));
        assert_eq!(to, NodeId(2), "not after the ack timeout");
        // 1 comes back with an ELECTION of its own: it is in the ring again.
        let _ = n.handle(
            soon,
            Input::Receive {
                from: NodeId(2),
                message: Message::Election {
                    initiator: NodeId(1),
                    election: ElectionId {
                        incarnation: 1,
                        number: 0,
                    },
                    epoch: Epoch::ZERO,
                    ids: vec![NodeId(1), NodeId(2)],
                    hop: 0,
                },
            },
        );
        assert!(!n.departed.contains(&NodeId(1)));
    }

    #[test]
    fn a_dead_successor_is_skipped_and_a_lone_node_elects_itself() {
        let t = Instant::now();
        let mut n = node(1, t);
        let (to, _) = only_send(n.handle(t, Input::Tick));
        assert_eq!(to, NodeId(2));
        let t1 = n.next_deadline();
        assert_eq!(t1, t + Config::DEFAULT_ACK_TIMEOUT);
        let (to, _) = only_send(n.handle(t1, Input::Tick));
        assert_eq!(to, NodeId(3), "skipped 2");
        let t2 = n.next_deadline();
        let out = n.handle(t2, Input::Tick);
        // Back with node 1: it elects itself and sends the COORDINATOR.
        assert_eq!(n.leader().map(|l| l.id), Some(NodeId(1)));
        assert!(out.iter().any(|o| matches!(
            o,
            Output::Send {
                message: Message::Coordinator { .. },
                ..
            }
        )));
    }
}
