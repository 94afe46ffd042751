//! Quorum mode: a node leads only while a majority of the configured
//! members has granted it a lease, and steps down on its own clock when
//! the grants stop.
//!
//! [`Quorum`] wraps any of the algorithms. The algorithm inside still
//! decides *who* should lead, exactly as alone; the wrapper decides
//! *whether* that node may act as leader now. With it, a partition cannot
//! give two leaders at the same time: the side without a majority has a
//! candidate at most, never a leader, and a leader cut off from the
//! majority stops leading by its own clock before the other side can
//! start.
//!
//! # The protocol (a Raft-style leader lease)
//!
//! * **Ask.** While the inner algorithm leads in term `E`, the node sends
//!   ASK `{E, id}` to every other member every `heartbeat_interval`, and at
//!   once when the term begins. It remembers the instant it *sent* each
//!   ask.
//! * **Grant, and the promise.** A member that gets an ASK from node `L`
//!   and has promised no other node answers GRANT `{E, id, lease}` and
//!   promises `L` — that life of `L`, named by the ask's incarnation: a
//!   restarted `L` is another asker. It grants no *other* asker for its
//!   configured
//!   [`Config::lease`], measured on its own clock **from when it grants**
//!   (never before it got the ask). Renewals by `L` extend the promise. A
//!   member that has promised another node keeps the ask (the newest
//!   term's, if several nodes ask) and grants it the moment that promise
//!   runs out, if that is within a heartbeat interval of the ask;
//!   otherwise it stays silent. A node
//!   counts itself as a member: its own ask is granted locally under the
//!   same rule, so a node that has promised another cannot count itself
//!   until that promise ends, and a leader's promise to itself outlives its
//!   lease.
//! * **The lease.** A grant of `lease` from member `m` for an ask sent at
//!   `t` lets the leader count on `m` until
//!   `t + lease × (1 − clock_drift) − lease_margin` on its own clock
//!   ([`Config::leader_lease`] for its own lease). Keeping the latest such
//!   end per member, itself included, the leader's lease runs until the
//!   majority-th latest: a majority of the configured members
//!   (`members / 2 + 1`) each stand behind it.
//! * **Leadership.** [`Machine::leadership`] is the inner algorithm's
//!   token only while the inner algorithm leads *and* the lease runs at the
//!   last `now` handled. [`Machine::next_deadline`] includes the end of the
//!   lease, so a driver is woken to step down exactly then, and
//!   [`Machine::lease_until`] says when that is, for a driver that must
//!   stop acting even if it is not called in time. The leader view
//!   ([`Machine::leader`], [`Output::LeaderChanged`]) is the inner
//!   algorithm's, except that this node never names itself without a
//!   valid lease.
//!
//! # Why two nodes never hold a lease at the same instant
//!
//! Suppose `A` holds a lease at instant `x`, and so does `B ≠ A` (another
//! node, or another life of the same node: promises bind a life). Each
//! lease stands on a majority of the same configured membership, each
//! member of which gave it a grant that counts until past `x`; so some
//! member `m` (possibly `A` or `B`) gave both such grants, and both before
//! `x`, since a lease counts a grant only once it has arrived. Say `m`
//! granted `A` first, at `g`, for an ask `A` sent at `t ≤ g`, promising
//! `d`. Then `m` granted `B` only once its own clock had measured `d` from
//! `g` (the promise to `A`, perhaps extended since, had to run out), and
//! before `x`. `A` counts on that grant only until its own clock has
//! measured `d × (1 − clock_drift) − lease_margin` from `t`; and by the
//! drift bound, when `m`'s clock has measured `d` from `g ≥ t`, `A`'s has
//! measured at least `d × (1 − clock_drift)` from `t`. So the grant no
//! longer counted for `A` when `m` granted `B`, before `x`: a
//! contradiction. The same holds with `A` and `B` swapped.
//!
//! The argument rests on these, and nothing else:
//!
//! * **Bounded drift**: over any stretch of time, a member's clock
//!   measures at least `1 − clock_drift` of what another's measures.
//!   Clocks are monotonic (`tokio::time::Instant`), never wall clocks.
//! * **Promises survive a restart**: a node that starts knows nothing of
//!   the promises of its previous life, so it grants nothing, not even to
//!   itself, for `lease` after it starts; by then every promise it made
//!   before has run out. (A machine is created when its node starts. A
//!   node restarted with a *shorter* lease than its previous life's must
//!   stay down for the difference.)
//! * **Asks are not mistaken across lives**: a grant names its ask by the
//!   asker's incarnation and a counter ([`AskId`]), so a grant sent to a
//!   node's previous life cannot be credited to a later ask of the new
//!   life — provided each start of a node has its own
//!   [`incarnation`](crate::ConfigBuilder::incarnation), as a random `u64`
//!   gives. With the same incarnation at every start, a grant delayed
//!   across a restart could lend the new life a lease that the member no
//!   longer promises.
//! * **Every member is configured with the same membership.** The leases
//!   may differ (a rolling change): each grant says how long it promises.
//!
//! A GOODBYE ([`Input::Left`]) carries no incarnation: it ends the promise
//! to whichever life of its sender was promised. A life sends it only once
//! it has stopped acting as leader, so that is right unless a crashed life
//! (which said nothing) is followed by a new one that leaves again within
//! a lease of the crash: then the promise to the crashed life ends early,
//! and what bounds that life's command is its shim, which stops it as soon
//! as the crashed process dies (SIGTERM, then SIGKILL after the grace),
//! not the lease.
//!
//! It does not rest on message delays, loss, duplication, order, the inner
//! algorithm, or the epochs: a stale or copied ask only makes a member
//! promise, and a grant is only ever credited to the send instant of the
//! ask it answers.
//!
//! # What a lease does not do
//!
//! A lease bounds *when* a node may act as leader; it does not stop what
//! the leader started from landing later (a write in flight, a request
//! queued in a socket). A process paused past [`Machine::lease_until`]
//! (GC, SIGSTOP) resumes believing it leads until it handles its next
//! input: the driver must check `lease_until` against its clock before it
//! acts, and the resource should still check the fencing token. Quorum
//! mode makes two leaders at once impossible; fencing makes a late write
//! of an old leader harmless.
//!
//! # Cost
//!
//! * **Messages**: `n − 1` ASKs and up to `n − 1` GRANTs per
//!   `heartbeat_interval` from the leader, on top of the algorithm's own.
//! * **Failover.** A new leader needs grants from a majority, and a member
//!   that promised the old leader grants only once that promise has run
//!   out, `lease` after the old leader's last ask reached it. So after a
//!   leader stops (crash, partition, pause) at `c`, its successor leads at
//!   the latest at `max(c + F, c + d + lease / (1 − clock_drift)) +
//!   heartbeat_interval + 2d`, where `F` is the inner algorithm's failover
//!   and `d` the longest message delay: a member grants a deferred ask
//!   the moment its promise ends, and the heartbeat interval covers an ask
//!   that missed that moment. In the worst case that is about
//!   `failure_timeout + lease`; because `lease ≤ failure_timeout`
//!   (validated), the wait for the promises mostly runs during the
//!   failure detection instead, and costs little more than a round trip.
//!   A member that has just started grants nothing for `lease`, so a group
//!   that restarts wholesale waits that long. After a partition heals, a
//!   node that led on the minority side keeps asking until the inner
//!   algorithm demotes it, and members may promise it meanwhile: add a
//!   `lease` to the inner algorithm's agreement time. The tests
//!   `tests/quorum_*.rs` measure these.
//! * **Availability**: a node leads only with a majority up and connected
//!   to it; a group of `n` survives `⌈n / 2⌉ − 1` failures, and a group of
//!   two none.
//!
//! # Wire
//!
//! [`Message`] travels through [`codec`](crate::codec) under its own
//! algorithm byte, the inner algorithm's with the high bit set (`0x81`
//! lowest-ID, `0x82` Bully, `0x83` Ring), so a quorum-mode node and a
//! plain one refuse each other's frames. The inner messages keep their
//! kinds, which must stay below `0x80`; ASK is `0x81` with the epoch, the
//! incarnation and the counter, and GRANT `0x82` with those and the lease
//! in nanoseconds, all `u64` big-endian.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use regent_core::FencingToken;
use tokio::time::Instant;

use crate::codec::{DecodeError, Reader, Wire};
use crate::config::{self, Config, MAX_DURATION};
use crate::epoch::{Epoch, Leader, NodeId};
use crate::machine::{Input, Machine, Output, PeerMessage, after};

/// Names one lease request of one node: the node's incarnation
/// ([`ConfigBuilder::incarnation`](crate::ConfigBuilder::incarnation)) and
/// its count of requests in that incarnation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AskId {
    /// The asker's incarnation.
    pub incarnation: u64,
    /// The asker's count of requests since it started.
    pub number: u64,
}

/// A message of a node in quorum mode: the inner algorithm's, or the
/// lease's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message<M> {
    /// A message of the inner algorithm, unchanged.
    Inner(M),
    /// "Grant me the lease": from a node whose inner algorithm leads, to
    /// every other member, each heartbeat interval.
    Ask {
        /// The asker's term.
        epoch: Epoch,
        /// Which request this is, echoed in the GRANT.
        id: AskId,
    },
    /// "Granted: I promise no other node for `lease` from when I got your
    /// ask": the answer to an ASK.
    Grant {
        /// The term of the ask.
        epoch: Epoch,
        /// The ask granted.
        id: AskId,
        /// How long the promise lasts on the granter's clock: its
        /// configured [`Config::lease`]. At most
        /// [`MAX_DURATION`] on the wire.
        lease: Duration,
    },
}

impl<M: PeerMessage> PeerMessage for Message<M> {
    fn kind(&self) -> &'static str {
        match self {
            Message::Inner(m) => m.kind(),
            Message::Ask { .. } => "ASK",
            Message::Grant { .. } => "GRANT",
        }
    }
}

const KIND_ASK: u8 = 0x81;
const KIND_GRANT: u8 = 0x82;
/// Kinds with this bit are the lease's; the inner algorithm's lie below.
const QUORUM_KIND: u8 = 0x80;

impl<M: Wire> Wire for Message<M> {
    const ALGORITHM: u8 = M::ALGORITHM | 0x80;

    fn encode_body(&self, out: &mut Vec<u8>) -> u8 {
        let (kind, epoch, id) = match self {
            Message::Inner(m) => return m.encode_body(out),
            Message::Ask { epoch, id } => (KIND_ASK, epoch, id),
            Message::Grant { epoch, id, .. } => (KIND_GRANT, epoch, id),
        };
        for v in [epoch.get(), id.incarnation, id.number] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        if let Message::Grant { lease, .. } = self {
            // A lease over MAX_DURATION does not decode; it is never sent.
            let nanos = u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX);
            out.extend_from_slice(&nanos.to_be_bytes());
        }
        kind
    }

    fn decode_body(kind: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        if kind & QUORUM_KIND == 0 {
            return M::decode_body(kind, r).map(Message::Inner);
        }
        if kind != KIND_ASK && kind != KIND_GRANT {
            return Err(DecodeError::Malformed {
                what: "unknown message kind",
            });
        }
        let epoch = r.epoch()?;
        let id = AskId {
            incarnation: r.u64()?,
            number: r.u64()?,
        };
        if kind == KIND_ASK {
            return Ok(Message::Ask { epoch, id });
        }
        let lease = Duration::from_nanos(r.u64()?);
        if lease > MAX_DURATION {
            return Err(DecodeError::Malformed {
                what: "a lease longer than the maximum duration",
            });
        }
        Ok(Message::Grant { epoch, id, lease })
    }
}

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

/// One node of any algorithm in quorum mode. See the [module docs](self).
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
    /// [module docs](self).
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
mod tests {
    use super::*;
    use crate::lowest_id;

    /// An inner algorithm that leads in `lead`, if set, and records what
    /// it was given.
    #[derive(Debug)]
    struct Stub {
        id: NodeId,
        lead: Option<Epoch>,
        inputs: Vec<Input<lowest_id::Message>>,
        start: Instant,
    }

    impl Machine for Stub {
        type Message = lowest_id::Message;

        fn handle(
            &mut self,
            _now: Instant,
            input: Input<Self::Message>,
        ) -> Vec<Output<Self::Message>> {
            self.inputs.push(input);
            Vec::new()
        }

        fn next_deadline(&self) -> Instant {
            self.start + Duration::from_secs(3600)
        }

        fn id(&self) -> NodeId {
            self.id
        }

        fn leader(&self) -> Option<Leader> {
            self.lead.map(|epoch| Leader { id: self.id, epoch })
        }

        fn leadership(&self) -> Option<FencingToken> {
            self.lead.map(Epoch::token)
        }
    }

    const MS: Duration = Duration::from_millis(1);
    const INCARNATION: u64 = 77;

    fn config(id: u64) -> Config {
        Config::builder(NodeId(id), [1, 2, 3].map(NodeId))
            .heartbeat_interval(100 * MS)
            .failure_timeout(400 * MS)
            .lease(400 * MS)
            .clock_drift(0.05)
            .lease_margin(MS)
            .incarnation(INCARNATION)
            .build()
            .unwrap()
    }

    fn node(id: u64, lead: Option<Epoch>, t0: Instant) -> Quorum<Stub> {
        let stub = Stub {
            id: NodeId(id),
            lead,
            inputs: Vec::new(),
            start: t0,
        };
        Quorum::new(config(id), t0, stub)
    }

    fn term() -> Epoch {
        Epoch::new(4, 0).unwrap()
    }

    fn rx(from: u64, message: Message<lowest_id::Message>) -> Input<Message<lowest_id::Message>> {
        Input::Receive {
            from: NodeId(from),
            message,
        }
    }

    /// The asks in `out`, by receiver.
    fn asks(out: &[Output<Message<lowest_id::Message>>]) -> Vec<(u64, AskId)> {
        out.iter()
            .filter_map(|o| match o {
                Output::Send {
                    to,
                    message: Message::Ask { id, .. },
                } => Some((to.get(), *id)),
                _ => None,
            })
            .collect()
    }

    fn grants(out: &[Output<Message<lowest_id::Message>>]) -> Vec<u64> {
        out.iter()
            .filter_map(|o| match o {
                Output::Send {
                    to,
                    message: Message::Grant { .. },
                } => Some(to.get()),
                _ => None,
            })
            .collect()
    }

    fn ask(from: u64, number: u64) -> Input<Message<lowest_id::Message>> {
        rx(
            from,
            Message::Ask {
                epoch: term(),
                id: AskId {
                    incarnation: 1,
                    number,
                },
            },
        )
    }

    fn grant(from: u64, id: AskId) -> Input<Message<lowest_id::Message>> {
        rx(
            from,
            Message::Grant {
                epoch: term(),
                id,
                lease: 400 * MS,
            },
        )
    }

    /// A leader past its start wait, with a lease from one grant of the ask
    /// it sent at the returned instant.
    fn leading(t0: Instant) -> (Quorum<Stub>, Instant) {
        let mut n = node(1, Some(term()), t0);
        let _ = n.handle(t0, Input::Tick);
        let sent = t0 + 400 * MS;
        let out = n.handle(sent, Input::Tick);
        let (_, id) = asks(&out)[0];
        let _ = n.handle(sent + 10 * MS, grant(2, id));
        (n, sent)
    }

    #[test]
    fn leads_only_once_a_majority_counting_itself_granted() {
        let t0 = Instant::now();
        let mut n = node(1, Some(term()), t0);
        let out = n.handle(t0, Input::Tick);
        let first = asks(&out);
        assert_eq!(first.iter().map(|a| a.0).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(first[0].1.incarnation, INCARNATION);
        // One grant, and its own promise blocked by the wait after a start:
        // one of three is no majority.
        let out = n.handle(t0 + 10 * MS, grant(2, first[0].1));
        assert_eq!(n.leadership(), None);
        assert_eq!(n.leader(), None, "never names itself without a lease");
        assert_eq!(out, []);
        // Past the wait it counts itself: the next grant makes a majority.
        let sent = t0 + 400 * MS;
        assert_eq!(n.next_deadline(), t0 + 100 * MS, "asks every interval");
        let out = n.handle(sent, Input::Tick);
        let (_, id) = asks(&out)[0];
        assert_eq!(n.leadership(), None);
        let out = n.handle(sent + 10 * MS, grant(3, id));
        assert_eq!(n.leadership(), Some(term().token()));
        let until = sent + config(1).leader_lease();
        assert_eq!(n.lease_until(), Some(until));
        let me = Leader {
            id: NodeId(1),
            epoch: term(),
        };
        assert_eq!(out, [Output::LeaderChanged(Some(me))]);
        // 400 ms x 0.95 - 1 ms, from the send, not the grant.
        assert_eq!(until - sent, 379 * MS);
    }

    #[test]
    fn steps_down_on_its_own_clock_when_the_grants_stop() {
        let t0 = Instant::now();
        let (mut n, sent) = leading(t0);
        let until = n.lease_until().unwrap();
        // Renewal asks go out, nobody answers.
        let mut t = sent;
        let mut last = None;
        while n.next_deadline() < until {
            t = n.next_deadline();
            let out = n.handle(t, Input::Tick);
            assert_eq!(asks(&out).len(), 2, "renews every interval");
            last = Some(asks(&out)[0].1);
            assert!(n.leadership().is_some(), "{:?}", t - sent);
        }
        assert_eq!(t, sent + 300 * MS);
        assert_eq!(n.next_deadline(), until, "wakes the driver at the end");
        let out = n.handle(until, Input::Tick);
        assert_eq!(n.leadership(), None);
        assert_eq!(n.lease_until(), None);
        assert!(out.contains(&Output::LeaderChanged(None)));
        // The inner algorithm still leads: a late grant of the last ask
        // gives the lease back, measured from that ask's send.
        let _ = n.handle(until + MS, grant(3, last.unwrap()));
        assert_eq!(n.lease_until(), Some(t + 379 * MS));
        assert_eq!(n.leadership(), Some(term().token()));
    }

    #[test]
    fn a_grant_extends_the_lease_from_the_send_of_the_ask_it_answers() {
        let t0 = Instant::now();
        let (mut n, sent) = leading(t0);
        let next = sent + 100 * MS;
        let out = n.handle(next, Input::Tick);
        let (_, id) = asks(&out)[0];
        // Granted late, by the other member: still measured from the send.
        let _ = n.handle(next + 250 * MS, grant(3, id));
        assert_eq!(n.lease_until(), Some(next + 379 * MS));
        // A copy of the older grant does not shorten it.
        let old = AskId {
            incarnation: INCARNATION,
            number: 1,
        };
        let _ = n.handle(next + 260 * MS, grant(2, old));
        assert_eq!(n.lease_until(), Some(next + 379 * MS));
    }

    #[test]
    fn a_grant_counts_for_the_promise_its_granter_made() {
        let t0 = Instant::now();
        let mut n = node(1, Some(term()), t0);
        let sent = t0 + 400 * MS;
        let out = n.handle(sent, Input::Tick);
        let (_, id) = asks(&out)[0];
        let granted = |lease| Message::Grant {
            epoch: term(),
            id,
            lease,
        };
        // Itself for 400 ms, node 2 for 200: the second-longest of the
        // two (a majority of three) counts, 200 ms x 0.95 - 1 ms.
        let _ = n.handle(sent + 10 * MS, rx(2, granted(200 * MS)));
        assert_eq!(n.lease_until(), Some(sent + 189 * MS));
        // Node 3 for 600 ms: now its own 400 ms is the second-longest.
        let _ = n.handle(sent + 10 * MS, rx(3, granted(600 * MS)));
        assert_eq!(n.lease_until(), Some(sent + 379 * MS));
    }

    #[test]
    fn grants_of_other_terms_lives_asks_or_nodes_are_not_credited() {
        let t0 = Instant::now();
        let mut n = node(1, Some(term()), t0);
        let _ = n.handle(t0, Input::Tick);
        let sent = t0 + 400 * MS;
        let out = n.handle(sent, Input::Tick);
        let (_, id) = asks(&out)[0];
        let later = sent + 10 * MS;
        let other_life = AskId {
            incarnation: INCARNATION + 1,
            ..id
        };
        let unknown = AskId {
            number: id.number + 100,
            ..id
        };
        let other_term = Message::Grant {
            epoch: Epoch::new(3, 0).unwrap(),
            id,
            lease: 400 * MS,
        };
        for input in [
            grant(2, other_life),
            grant(2, unknown),
            rx(2, other_term),
            grant(1, id),
            grant(9, id),
        ] {
            let _ = n.handle(later, input);
            assert_eq!(n.leadership(), None);
        }
        let _ = n.handle(later, grant(2, id));
        assert!(n.leadership().is_some());
    }

    #[test]
    fn a_member_promises_one_node_for_a_lease_from_the_ask() {
        let t0 = Instant::now();
        let mut m = node(2, None, t0);
        // Just started: grants nobody for a lease.
        assert_eq!(grants(&m.handle(t0, ask(1, 0))), []);
        let t = t0 + 400 * MS;
        assert_eq!(grants(&m.handle(t, ask(1, 1))), [1]);
        // Promised to node 1: node 3 is refused, node 1 renews.
        assert_eq!(grants(&m.handle(t + 100 * MS, ask(3, 0))), []);
        let renewed = t + 300 * MS;
        assert_eq!(grants(&m.handle(renewed, ask(1, 2))), [1]);
        assert_eq!(grants(&m.handle(t + 401 * MS, ask(3, 1))), []);
        assert_eq!(
            grants(&m.handle(renewed + 400 * MS - Duration::from_nanos(1), ask(3, 2))),
            []
        );
        // The promise ran out: node 3 may have it (this ask, and the one
        // deferred a nanosecond ago), and then node 1 may not.
        assert_eq!(grants(&m.handle(renewed + 400 * MS, ask(3, 3))), [3, 3]);
        assert_eq!(grants(&m.handle(renewed + 401 * MS, ask(1, 3))), []);
        // Non-members and itself are never granted.
        assert_eq!(grants(&m.handle(renewed + 900 * MS, ask(9, 0))), []);
        assert_eq!(grants(&m.handle(renewed + 900 * MS, ask(2, 0))), []);
    }

    /// Regression (found by `regent torture --peer ring --quorum`): a
    /// promise bound a node id, so the members granted a killed leader's
    /// restarted life at once (failover in 0.12 s) while its previous
    /// life's lease, and the command that life's shim still runs until
    /// the lease's end, had most of a lease to go. A promise binds one
    /// life of a node: another incarnation waits it out as another node
    /// would.
    #[test]
    fn a_restarted_node_is_not_granted_until_the_promise_to_its_previous_life_runs_out() {
        let t0 = Instant::now();
        let mut m = node(2, None, t0);
        let t = t0 + 400 * MS;
        assert_eq!(grants(&m.handle(t, ask(1, 0))), [1]);
        let restarted = |number| {
            rx(
                1,
                Message::Ask {
                    epoch: Epoch::new(2, 0).unwrap(),
                    id: AskId {
                        incarnation: 2,
                        number,
                    },
                },
            )
        };
        assert_eq!(grants(&m.handle(t + 100 * MS, restarted(0))), []);
        assert_eq!(grants(&m.handle(t + 399 * MS, restarted(1))), []);
        // The promise to the first life ran out: the ask deferred a
        // millisecond ago is granted, then the first life is refused.
        assert_eq!(grants(&m.handle(t + 400 * MS, Input::Tick)), [1]);
        assert_eq!(grants(&m.handle(t + 401 * MS, restarted(2))), [1]);
        assert_eq!(grants(&m.handle(t + 402 * MS, ask(1, 1))), []);
    }

    #[test]
    fn a_goodbye_from_the_node_promised_ends_the_promise() {
        let t0 = Instant::now();
        let mut m = node(2, None, t0);
        let t = t0 + 400 * MS;
        assert_eq!(grants(&m.handle(t, ask(1, 0))), [1]);
        assert_eq!(grants(&m.handle(t + 10 * MS, ask(3, 0))), []);
        // A GOODBYE from another node changes nothing.
        let _ = m.handle(t + 20 * MS, Input::Left { from: NodeId(3) });
        assert_eq!(grants(&m.handle(t + 30 * MS, ask(3, 1))), []);
        // Node 1 left: no need to wait its lease out; the ask deferred
        // meanwhile is granted at once.
        let out = m.handle(t + 40 * MS, Input::Left { from: NodeId(1) });
        assert_eq!(grants(&out), [3]);
        assert_eq!(grants(&m.handle(t + 50 * MS, ask(3, 2))), [3]);
    }

    #[test]
    fn a_refused_ask_is_granted_the_moment_the_promise_runs_out() {
        let t0 = Instant::now();
        let mut m = node(2, None, t0);
        let t = t0 + 400 * MS;
        assert_eq!(grants(&m.handle(t, ask(1, 0))), [1]);
        assert_eq!(grants(&m.handle(t + 350 * MS, ask(3, 0))), []);
        assert_eq!(m.next_deadline(), t + 400 * MS, "wakes when it may grant");
        let out = m.handle(t + 400 * MS, Input::Tick);
        assert_eq!(
            out,
            [Output::Send {
                to: NodeId(3),
                message: Message::Grant {
                    epoch: term(),
                    id: AskId {
                        incarnation: 1,
                        number: 0
                    },
                    lease: 400 * MS,
                }
            }]
        );
        // Now promised to node 3.
        assert_eq!(grants(&m.handle(t + 500 * MS, ask(1, 1))), []);
        // A deferred ask older than a heartbeat interval is dropped: its
        // asker has asked again since, or stopped.
        let mut m = node(2, None, t0);
        let _ = m.handle(t, ask(1, 0));
        let _ = m.handle(t + 200 * MS, ask(3, 0));
        assert_eq!(grants(&m.handle(t + 400 * MS, Input::Tick)), []);
    }

    #[test]
    fn a_node_that_promised_another_counts_itself_once_the_promise_ends() {
        let t0 = Instant::now();
        let mut n = node(1, None, t0);
        let t = t0 + 400 * MS;
        assert_eq!(grants(&n.handle(t, ask(3, 0))), [3]);
        n.inner.lead = Some(term());
        let sent = t + 350 * MS;
        let out = n.handle(sent, Input::Tick);
        let (_, id) = asks(&out)[0];
        // Node 2's grant alone is one of three.
        let _ = n.handle(t + 360 * MS, grant(2, id));
        assert_eq!(n.leadership(), None);
        // Its promise to node 3 ends: it grants its own ask, deferred, and
        // leads on the lease of that ask.
        assert_eq!(n.next_deadline(), t + 400 * MS);
        let _ = n.handle(t + 400 * MS, Input::Tick);
        assert_eq!(n.leadership(), Some(term().token()));
        assert_eq!(n.lease_until(), Some(sent + 379 * MS));
    }

    #[test]
    fn a_new_term_starts_without_a_lease_and_asks_at_once() {
        let t0 = Instant::now();
        let (mut n, sent) = leading(t0);
        assert!(n.leadership().is_some());
        let newer = Epoch::new(9, 0).unwrap();
        n.inner.lead = Some(newer);
        let t = sent + 20 * MS;
        let out = n.handle(t, Input::Tick);
        assert_eq!(n.leadership(), None);
        let new_asks = asks(&out);
        assert_eq!(new_asks.len(), 2);
        assert!(out.contains(&Output::LeaderChanged(None)));
        n.inner.lead = None;
        let _ = n.handle(t, Input::Tick);
        assert_eq!(n.next_deadline(), t0 + Duration::from_secs(3600));
    }

    #[test]
    fn inputs_it_does_not_handle_reach_the_inner_machine_unchanged() {
        let t0 = Instant::now();
        let mut n = node(2, None, t0);
        let hb = lowest_id::Message::Heartbeat {
            epoch: term(),
            leading: true,
        };
        let _ = n.handle(t0, rx(1, Message::Inner(hb.clone())));
        let _ = n.handle(t0, Input::Tick);
        let _ = n.handle(t0, ask(1, 0));
        assert_eq!(
            n.inner().inputs,
            [
                Input::Receive {
                    from: NodeId(1),
                    message: hb
                },
                Input::Tick,
                // A lease message is the wrapper's: the inner machine
                // only gets its timers run.
                Input::Tick,
            ]
        );
    }
}
