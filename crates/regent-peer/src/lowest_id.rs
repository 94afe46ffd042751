//! Lowest id among the live members, by heartbeat membership.
//!
//! Every node sends a HEARTBEAT to every other member each
//! `heartbeat_interval`. A member is live while its last heartbeat is less
//! than `failure_timeout` old; a node counts itself live once it has run
//! for `failure_timeout` (time to have heard from every live member, so a
//! starting node does not claim leadership over a lower node it has not yet
//! heard). The lowest live id leads. There is no election message: the new
//! leader opens a term ([`Epoch::next_for`]) and sends a heartbeat at once,
//! which tells the others. A heartbeat carries the sender's max epoch and
//! whether it leads; one from an older epoch than the receiver's is
//! ignored. A leader that learns of an epoch newer than its term opens a new
//! term, so the lowest node's term ends up the newest.

use std::collections::BTreeMap;

use regent_core::FencingToken;
use tokio::time::Instant;

use crate::config::Config;
use crate::epoch::{Epoch, Leader, NodeId};
use crate::machine::{Input, Machine, Outbox, Output, PeerMessage, after};

/// The lowest-ID algorithm's one message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// "I am alive", with the sender's max epoch and whether it leads in
    /// it (then `epoch` is its term and carries its rank).
    Heartbeat {
        /// The sender's max epoch.
        epoch: Epoch,
        /// Whether the sender leads in `epoch`.
        leading: bool,
    },
}

impl PeerMessage for Message {
    fn kind(&self) -> &'static str {
        match self {
            Message::Heartbeat { .. } => "HEARTBEAT",
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Heard {
    at: Instant,
    epoch: Epoch,
    leading: bool,
}

/// One node running lowest-ID. See the [module docs](self).
#[derive(Debug)]
pub struct LowestId {
    config: Config,
    rank: u16,
    /// Until this instant the node does not count itself live; `None` once
    /// passed.
    warming_until: Option<Instant>,
    max_epoch: Epoch,
    term: Option<Epoch>,
    /// Members heard from within the failure timeout (expired entries are
    /// pruned on every call).
    heard: BTreeMap<NodeId, Heard>,
    next_heartbeat: Instant,
    view: Option<Leader>,
}

impl LowestId {
    /// A node started at `now`. Its first deadline is `now`: tick it.
    pub fn new(config: Config, now: Instant) -> Self {
        Self {
            rank: config.rank(),
            warming_until: Some(after(now, config.failure_timeout())),
            config,
            max_epoch: Epoch::ZERO,
            term: None,
            heard: BTreeMap::new(),
            next_heartbeat: now,
            view: None,
        }
    }

    /// The largest epoch this node has seen.
    pub fn max_epoch(&self) -> Epoch {
        self.max_epoch
    }

    fn receive(&mut self, now: Instant, from: NodeId, message: Message) {
        let Message::Heartbeat { epoch, leading } = message;
        if from == self.config.id() || !self.config.is_member(from) {
            return;
        }
        if leading && (!epoch.is_term() || Some(epoch.rank()) != self.config.rank_of(from)) {
            // A term must carry its leader's rank: forged or misconfigured.
            tracing::debug!(node = %self.config.id(), from = %from, epoch = %epoch, "dropped a heartbeat whose term is not the sender's");
            return;
        }
        if epoch < self.max_epoch {
            return;
        }
        self.max_epoch = epoch;
        self.heard.insert(
            from,
            Heard {
                at: now,
                epoch,
                leading,
            },
        );
    }

    /// `from` left: forget it now rather than when its last heartbeat
    /// expires. Its next heartbeat, if it comes back, counts as usual.
    fn left(&mut self, from: NodeId) {
        if self.heard.remove(&from).is_some() {
            tracing::debug!(node = %self.config.id(), member = %from, "lowest-id: a member left");
        }
    }

    fn broadcast(&mut self, now: Instant, out: &mut Outbox<Message>) {
        let message = Message::Heartbeat {
            epoch: self.max_epoch,
            leading: self.term.is_some(),
        };
        for to in self.config.others() {
            out.send(to, message.clone());
        }
        self.next_heartbeat = after(now, self.config.heartbeat_interval());
    }

    fn recompute(&mut self, now: Instant, out: &mut Outbox<Message>) {
        let timeout = self.config.failure_timeout();
        self.heard.retain(|_, h| now < after(h.at, timeout));
        if self.warming_until.is_some_and(|t| now >= t) {
            self.warming_until = None;
        }
        let me = self.config.id();
        let lowest_other = self.heard.keys().next().copied();
        match lowest_other {
            Some(other) if other < me => {
                if let Some(term) = self.term.take() {
                    tracing::info!(node = %me, token = term.get(), leader = %other, "lowest-id: a lower member is live; stepping down");
                }
                let h = self.heard[&other];
                self.view = h.leading.then_some(Leader {
                    id: other,
                    epoch: h.epoch,
                });
            }
            _ if self.warming_until.is_some() => {
                self.view = None;
            }
            _ => {
                if self.term.is_none_or(|t| t < self.max_epoch) {
                    // Invariant: a term is always the node's max epoch, so a
                    // leader that has seen a newer epoch opens a new term.
                    match self
                        .max_epoch
                        .next_at_least(self.rank, self.config.round_floor(now))
                    {
                        Some(term) => {
                            self.term = Some(term);
                            self.max_epoch = term;
                            tracing::info!(node = %me, token = term.get(), "lowest-id: leading");
                            self.broadcast(now, out);
                        }
                        None => {
                            if self.term.take().is_some() {
                                tracing::warn!(node = %me, "lowest-id: epochs exhausted; cannot lead");
                            }
                        }
                    }
                }
                self.view = self.term.map(|epoch| Leader { id: me, epoch });
            }
        }
    }
}

impl Machine for LowestId {
    type Message = Message;

    fn handle(&mut self, now: Instant, input: Input<Message>) -> Vec<Output<Message>> {
        let before = self.view;
        let mut out = Outbox::new();
        match input {
            Input::Receive { from, message } => self.receive(now, from, message),
            Input::Left { from } => self.left(from),
            Input::Tick => {}
        }
        self.recompute(now, &mut out);
        if now >= self.next_heartbeat {
            self.broadcast(now, &mut out);
        }
        out.finish(before, self.view)
    }

    fn next_deadline(&self) -> Instant {
        let timeout = self.config.failure_timeout();
        let expiries = self.heard.values().map(|h| after(h.at, timeout));
        expiries
            .chain(self.warming_until)
            .fold(self.next_heartbeat, Instant::min)
    }

    fn id(&self) -> NodeId {
        self.config.id()
    }

    fn leader(&self) -> Option<Leader> {
        self.view
    }

    fn leadership(&self) -> Option<FencingToken> {
        self.term.map(Epoch::token)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn node(id: u64, now: Instant) -> LowestId {
        let c = Config::builder(NodeId(id), [1, 2, 3].map(NodeId))
            .build()
            .unwrap();
        LowestId::new(c, now)
    }

    #[test]
    fn a_leader_that_leaves_is_succeeded_at_once() {
        let t0 = Instant::now();
        let mut n = node(2, t0);
        let _ = n.handle(t0, Input::Tick);
        let warm = t0 + Config::DEFAULT_FAILURE_TIMEOUT;
        let e1 = Epoch::new(1, 0).unwrap();
        let _ = n.handle(warm, hb(e1, true));
        assert_eq!(n.leader().map(|l| l.id), Some(NodeId(1)));
        let t = warm + Duration::from_millis(10);
        // Neither a stranger nor the node itself can make it forget 1.
        for from in [NodeId(9), NodeId(2)] {
            assert_eq!(n.handle(t, Input::Left { from }), []);
            assert_eq!(n.leader().map(|l| l.id), Some(NodeId(1)));
        }
        let out = n.handle(t, Input::Left { from: NodeId(1) });
        let term = n.leader().unwrap();
        assert_eq!(
            term.id,
            NodeId(2),
            "led at once, not a failure timeout later"
        );
        assert!(term.epoch > e1);
        assert_eq!(n.leadership(), Some(term.token()));
        let told: Vec<_> = out
            .iter()
            .filter_map(|o| match o {
                Output::Send {
                    to,
                    message: Message::Heartbeat { leading: true, .. },
                } => Some(*to),
                _ => None,
            })
            .collect();
        assert_eq!(told, [NodeId(1), NodeId(3)], "the new term is announced");
        // Node 1 comes back: its heartbeat counts again.
        let e3 = term.epoch.next_for(0).unwrap();
        let _ = n.handle(t, hb(e3, true));
        assert_eq!(n.leader().map(|l| l.id), Some(NodeId(1)));
    }

    fn hb(epoch: Epoch, leading: bool) -> Input<Message> {
        Input::Receive {
            from: NodeId(1),
            message: Message::Heartbeat { epoch, leading },
        }
    }

    #[test]
    fn leads_alone_after_warming_up_then_yields_to_a_lower_leader() {
        let t0 = Instant::now();
        let mut n = node(2, t0);
        let out = n.handle(t0, Input::Tick);
        assert_eq!(out.len(), 2, "first heartbeat to both others");
        assert_eq!(n.leadership(), None, "warming up");
        let t1 = n.next_deadline();
        assert!(t1 > t0);
        let t = t0 + Config::DEFAULT_FAILURE_TIMEOUT;
        let _ = n.handle(t, Input::Tick);
        let term = n.leader().unwrap().epoch;
        assert_eq!(n.leader().unwrap().id, NodeId(2));
        assert_eq!(n.leadership(), Some(term.token()));
        // Node 1 leads in a newer epoch.
        let e1 = term.next_for(0).unwrap();
        let out = n.handle(t, hb(e1, true));
        assert_eq!(n.leadership(), None);
        assert_eq!(
            n.leader(),
            Some(Leader {
                id: NodeId(1),
                epoch: e1
            })
        );
        assert!(out.contains(&Output::LeaderChanged(n.leader())));
        // Node 1 goes quiet: node 2 leads again, in a newer epoch.
        let later = t + Config::DEFAULT_FAILURE_TIMEOUT;
        let _ = n.handle(later, Input::Tick);
        let again = n.leader().unwrap();
        assert_eq!(again.id, NodeId(2));
        assert!(again.epoch > e1);
    }

    #[test]
    fn ignores_old_epochs_and_forged_terms() {
        let t0 = Instant::now();
        let mut n = node(2, t0);
        let e5 = Epoch::new(5, 0).unwrap();
        let _ = n.handle(t0, hb(e5, true));
        assert_eq!(n.max_epoch(), e5);
        let _ = n.handle(
            t0 + Duration::from_millis(10),
            hb(Epoch::new(4, 0).unwrap(), true),
        );
        assert_eq!(n.leader().unwrap().epoch, e5, "older epoch ignored");
        // A term carrying node 3's rank, sent by node 1: dropped.
        let _ = n.handle(t0, hb(Epoch::new(9, 2).unwrap(), true));
        assert_eq!(n.max_epoch(), e5);
    }
}
