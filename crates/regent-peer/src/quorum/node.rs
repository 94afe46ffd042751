//! One node in quorum mode ([`Quorum`]): the promises it makes as a
//! member, the asks it sends and the grants it counts as a leader, and the
//! lease that gates the inner algorithm's leadership, as a [`Machine`].

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use regent_core::FencingToken;
use tokio::time::Instant;

use super::message::{AskId, Message};
use crate::config::{self, Config};
use crate::epoch::{Epoch, Leader, NodeId};
use crate::machine::{Input, Machine, Output, after};

/// What this node, as a member, has promised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Promise {
    /// The life of a node promised: its id and incarnation (a restarted
    /// node is another asker until the promise to its previous life runs
    /// out); `None` for the wait after a start, which binds against every
    /// node, this one included.
    to: Option<(NodeId, u64)>,
    /// No other node is granted before this instant.
    until: Instant,
}

/// An ask refused for a promise to another node, to be granted the moment
/// that promise runs out, if that comes within a heartbeat interval of the
/// ask (later, the asker has asked again or stopped asking).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Deferred {
    from: NodeId,
    epoch: Epoch,
    id: AskId,
    /// Dropped from this instant.
    until: Instant,
}

/// How many of the latest asks of the current term a grant is credited
/// to: over six seconds at the default heartbeat interval, far longer than
/// a grant that can still extend the lease takes to come back.
const MAX_ASKS: usize = 64;

/// One node of any algorithm in quorum mode. See the [module docs](super).
#[derive(Debug)]
pub struct Quorum<M: Machine> {
    inner: M,
    me: NodeId,
    others: Vec<NodeId>,
    majority: usize,
    heartbeat_interval: Duration,
    lease: Duration,
    clock_drift: f64,
    lease_margin: Duration,
    incarnation: u64,
    /// The latest `now` handled.
    now: Instant,
    promise: Promise,
    deferred: Option<Deferred>,
    /// The term the inner algorithm leads in, if it leads.
    term: Option<Epoch>,
    next_ask: Instant,
    next_number: u64,
    /// This term's latest asks, by number ascending, with when they were
    /// sent.
    asks: VecDeque<(u64, Instant)>,
    /// For each member that granted in this term, the latest end of the
    /// lease its grants give: an ask's send instant plus the leader's part
    /// of the promise ([`config::leader_lease`]).
    granted: BTreeMap<NodeId, Instant>,
    /// Invariant: a majority of the members each promised, in this term,
    /// for longer than this node's clock can measure until `lease_until`;
    /// `None` before the first majority of the term.
    lease_until: Option<Instant>,
    /// The view last reported.
    view: Option<Leader>,
}

impl<M: Machine> Quorum<M> {
    /// Wraps `inner`, started at `now` with `config` (the same
    /// configuration, so the same node and membership). The node grants
    /// nothing, not even to itself, until `now + lease`: promises of a
    /// previous life of this node may still run until then.
    ///
    /// Each start of a node must have its own
    /// [`incarnation`](crate::ConfigBuilder::incarnation): see the
    /// [module docs](super).
    pub fn new(config: Config, now: Instant, inner: M) -> Self {
        let me = config.id();
        if config.incarnation() == 0 {
            tracing::warn!(node = %me, "quorum mode with incarnation 0: give every start of a node its own incarnation (a random number), or a grant to a previous life could be credited to this one");
        }
        Self {
            inner,
            me,
            others: config.others().collect(),
            majority: config.members().len() / 2 + 1,
            heartbeat_interval: config.heartbeat_interval(),
            lease: config.lease(),
            clock_drift: config.clock_drift(),
            lease_margin: config.lease_margin(),
            incarnation: config.incarnation(),
            now,
            promise: Promise {
                to: None,
                until: after(now, config.lease()),
            },
            deferred: None,
            term: None,
            next_ask: now,
            next_number: 0,
            asks: VecDeque::new(),
            granted: BTreeMap::new(),
            lease_until: None,
            view: None,
        }
    }

    /// The wrapped algorithm.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// How many members, this node included, must grant for a lease:
    /// `members / 2 + 1`.
    pub fn majority(&self) -> usize {
        self.majority
    }

    /// Whether the lease runs at the latest `now` handled.
    fn lease_valid(&self) -> bool {
        self.lease_until.is_some_and(|u| self.now < u)
    }

    /// Whether this node may grant `to` (a node's id and incarnation) at
    /// `now` under its promise.
    fn may_grant(&self, to: (NodeId, u64), now: Instant) -> bool {
        self.promise.to == Some(to) || now >= self.promise.until
    }

    /// Grants `to` (a node's id and incarnation) if the promise allows:
    /// the promise then binds to `to` until at least `now + lease`.
    fn try_grant(&mut self, to: (NodeId, u64), now: Instant) -> bool {
        if !self.may_grant(to, now) {
            return false;
        }
        let until = after(now, self.lease);
        self.promise = if self.promise.to == Some(to) {
            Promise {
                to: Some(to),
                until: self.promise.until.max(until),
            }
        } else {
            Promise {
                to: Some(to),
                until,
            }
        };
        true
    }

    fn on_ask(
        &mut self,
        now: Instant,
        from: NodeId,
        epoch: Epoch,
        id: AskId,
    ) -> Option<Output<Message<M::Message>>> {
        if from == self.me || self.others.binary_search(&from).is_err() {
            return None;
        }
        if self.try_grant((from, id.incarnation), now) {
            tracing::debug!(node = %self.me, to = %from, token = epoch.get(), "quorum: granted the lease");
            Some(Output::Send {
                to: from,
                message: Message::Grant {
                    epoch,
                    id,
                    lease: self.lease,
                },
            })
        } else {
            tracing::debug!(node = %self.me, asker = %from, promised = ?self.promise.to, "quorum: deferred the lease, promised elsewhere");
            self.defer(now, from, epoch, id);
            None
        }
    }

    /// Keeps a refused ask to grant when the promise runs out; of two
    /// askers, the newer term's.
    fn defer(&mut self, now: Instant, from: NodeId, epoch: Epoch, id: AskId) {
        if self
            .deferred
            .is_none_or(|d| now >= d.until || epoch >= d.epoch)
        {
            self.deferred = Some(Deferred {
                from,
                epoch,
                id,
                until: after(now, self.heartbeat_interval),
            });
        }
    }

    /// Grants the deferred ask if the promise that blocked it has run out.
    /// Safe as any grant: the promise starts now, after the ask was sent.
    fn grant_deferred(&mut self, now: Instant, out: &mut Vec<Output<Message<M::Message>>>) {
        let Some(d) = self.deferred else {
            return;
        };
        if now >= d.until {
            self.deferred = None;
            return;
        }
        if !self.try_grant((d.from, d.id.incarnation), now) {
            return;
        }
        self.deferred = None;
        if d.from != self.me {
            tracing::debug!(node = %self.me, to = %d.from, token = d.epoch.get(), "quorum: granted a deferred lease");
            out.push(Output::Send {
                to: d.from,
                message: Message::Grant {
                    epoch: d.epoch,
                    id: d.id,
                    lease: self.lease,
                },
            });
        } else if self.term == Some(d.epoch)
            && let Some(&(_, sent)) = self.asks.iter().find(|&&(n, _)| n == d.id.number)
        {
            self.credit(self.me, sent, self.lease);
        }
    }

    fn on_grant(&mut self, from: NodeId, epoch: Epoch, id: AskId, lease: Duration) {
        if from == self.me
            || self.others.binary_search(&from).is_err()
            || self.term != Some(epoch)
            || id.incarnation != self.incarnation
        {
            return;
        }
        let Some(&(_, sent)) = self.asks.iter().find(|&&(n, _)| n == id.number) else {
            return;
        };
        self.credit(from, sent, lease);
    }

    /// `member` promised for `lease` from when it got an ask sent at
    /// `sent`: extend the lease if a majority now stands behind a later
    /// end.
    fn credit(&mut self, member: NodeId, sent: Instant, lease: Duration) {
        let end = after(
            sent,
            config::leader_lease(lease, self.clock_drift, self.lease_margin),
        );
        let latest = self.granted.entry(member).or_insert(end);
        *latest = (*latest).max(end);
        if self.granted.len() < self.majority {
            return;
        }
        let mut ends: Vec<Instant> = self.granted.values().copied().collect();
        ends.sort_unstable_by(|a, b| b.cmp(a));
        // Each of the `majority` members with the latest ends promised for
        // longer than this node can measure until the majority-th of them.
        let until = ends[self.majority - 1];
        if self.lease_until.is_none_or(|u| u < until) {
            self.lease_until = Some(until);
        }
    }

    fn ask(&mut self, now: Instant, term: Epoch, out: &mut Vec<Output<Message<M::Message>>>) {
        let id = AskId {
            incarnation: self.incarnation,
            number: self.next_number,
        };
        self.next_number = self.next_number.wrapping_add(1);
        self.next_ask = after(now, self.heartbeat_interval);
        if self.asks.len() >= MAX_ASKS {
            self.asks.pop_front();
        }
        self.asks.push_back((id.number, now));
        for &to in &self.others {
            out.push(Output::Send {
                to,
                message: Message::Ask { epoch: term, id },
            });
        }
        if self.try_grant((self.me, self.incarnation), now) {
            self.credit(self.me, now, self.lease);
        } else {
            self.defer(now, self.me, term, id);
        }
    }

    /// Follows the inner algorithm's leadership: a new term starts with no
    /// lease and asks at once; a leader asks every heartbeat interval.
    fn follow_inner(&mut self, now: Instant, out: &mut Vec<Output<Message<M::Message>>>) {
        let term = self
            .inner
            .leadership()
            .map(|token| Epoch::from_raw(token.get()));
        if term != self.term {
            self.term = term;
            self.asks.clear();
            self.granted.clear();
            self.lease_until = None;
            self.next_ask = now;
        }
        if let Some(term) = term
            && now >= self.next_ask
        {
            self.ask(now, term, out);
        }
    }

    fn current_view(&self) -> Option<Leader> {
        match self.inner.leader() {
            Some(l) if l.id == self.me => self.lease_valid().then_some(l),
            other => other,
        }
    }
}

impl<M: Machine> Machine for Quorum<M> {
    type Message = Message<M::Message>;

    fn handle(&mut self, now: Instant, input: Input<Self::Message>) -> Vec<Output<Self::Message>> {
        let now = now.max(self.now);
        self.now = now;
        let mut out = Vec::new();
        let forward = match input.into_message() {
            Ok((from, Message::Inner(message))) => Input::Receive { from, message },
            Ok((from, Message::Ask { epoch, id })) => {
                out.extend(self.on_ask(now, from, epoch, id));
                Input::Tick
            }
            Ok((from, Message::Grant { epoch, id, lease })) => {
                self.on_grant(from, epoch, id, lease);
                Input::Tick
            }
            // A member that left (an authenticated GOODBYE, sent only once
            // it stopped acting as leader) needs no promise any more: the
            // next leader need not wait the lease out.
            Err(Input::Left { from }) => {
                if from != self.me && self.promise.to.is_some_and(|(to, _)| to == from) {
                    self.promise.until = self.promise.until.min(now);
                }
                Input::Left { from }
            }
            // Every other input without a message, unchanged.
            Err(other) => other,
        };
        for o in self.inner.handle(now, forward) {
            match o {
                Output::Send { to, message } => out.push(Output::Send {
                    to,
                    message: Message::Inner(message),
                }),
                // Recomputed below: this node's own claim needs the lease.
                Output::LeaderChanged(_) => {}
            }
        }
        self.follow_inner(now, &mut out);
        self.grant_deferred(now, &mut out);
        let view = self.current_view();
        if view != self.view {
            let me = self.me;
            match (self.view, view) {
                (_, Some(l)) if l.id == me => {
                    tracing::info!(node = %me, token = l.epoch.get(), "quorum: leading with a majority's lease");
                }
                (Some(l), _) if l.id == me => {
                    tracing::info!(node = %me, token = l.epoch.get(), "quorum: lease ended; not leading");
                }
                _ => {}
            }
            self.view = view;
            out.push(Output::LeaderChanged(view));
        }
        out
    }

    fn next_deadline(&self) -> Instant {
        let mut deadline = self.inner.next_deadline();
        if self.term.is_some() {
            deadline = deadline.min(self.next_ask);
        }
        if let Some(until) = self.lease_until
            && until > self.now
        {
            deadline = deadline.min(until);
        }
        if let Some(d) = self.deferred
            && self.promise.until > self.now
            && self.promise.until < d.until
        {
            deadline = deadline.min(self.promise.until);
        }
        deadline
    }

    fn id(&self) -> NodeId {
        self.me
    }

    fn leader(&self) -> Option<Leader> {
        self.current_view()
    }

    fn leadership(&self) -> Option<FencingToken> {
        if self.lease_valid() {
            self.inner.leadership()
        } else {
            None
        }
    }

    fn lease_until(&self) -> Option<Instant> {
        self.leadership().and(self.lease_until)
    }
}

#[cfg(test)]
mod tests;
