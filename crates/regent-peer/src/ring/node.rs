//! One node running Ring ([`Ring`]): its role (follower, initiator,
//! participant or leader), the elections and coordinators it sends round
//! the ring and repairs, its heartbeats and timers, as a [`Machine`].

use std::collections::BTreeSet;

use regent_core::FencingToken;
use tokio::time::Instant;

use super::hop::{Body, Pending};
use super::message::{ElectionId, Message};
use crate::config::Config;
use crate::epoch::{Epoch, Leader, NodeId};
use crate::machine::{Input, Machine, Outbox, Output, after};

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

/// One node running Ring. See the [module docs](super).
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
mod tests;
