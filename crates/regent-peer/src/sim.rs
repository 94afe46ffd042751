//! A deterministic network simulator for the state machines (feature
//! `testing`).
//!
//! [`Sim`] drives a group of [`Machine`]s in one thread with simulated
//! time and a seeded [`fastrand::Rng`]: the same seed gives the same run,
//! event for event. The network loses, duplicates, delays and so reorders
//! messages at the rates of its [`Network`]; nodes can be crashed (their
//! state is lost), restarted (a fresh machine), partitioned, and paused
//! (as SIGSTOP or a long GC pause: the node handles nothing, its messages
//! wait for it, and it resumes with its state). Instants are one base
//! instant plus simulated offsets: the machines never see the real clock
//! move. Each node's clock may run slower than simulated time by up to a
//! drift bound ([`Sim::drift_clocks`]), so the machines see their own
//! instants, never the simulator's.
//!
//! The simulator records every stretch of simulated time in which a node
//! held leadership ([`Sim::tenures`]): from the instant its
//! [`Machine::leadership`] became `Some` until it became `None`, or the
//! node crashed, or its [`Machine::lease_until`] passed, whichever came
//! first. The last is what makes a paused leader's stale belief harmless,
//! and what quorum mode promises.
//!
//! [`for_each_seed`] runs a check over a fixed seed set plus random ones
//! and names the seed of a failure; `REGENT_PEER_SEED=N` replays one seed,
//! `REGENT_PEER_SEEDS=N` sets how many random seeds to draw (default
//! 1,000).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::time::Duration;

use fastrand::Rng;
use tokio::time::Instant;

use crate::config::{Config, ConfigBuilder};
use crate::epoch::{Epoch, Leader, NodeId};
use crate::machine::{Input, Machine, Output, PeerMessage};
use crate::quorum::Quorum;

/// How the simulated network treats each message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Network {
    /// The probability that a message is lost.
    pub loss: f64,
    /// The probability that a message is delivered twice (each copy with its
    /// own delay).
    pub duplicate: f64,
    /// The shortest delay.
    pub min_delay: Duration,
    /// The longest delay; delays are uniform between the two, so messages
    /// overtake each other.
    pub max_delay: Duration,
}

impl Network {
    /// No loss, no duplication, delays uniform in `min_delay..=max_delay`.
    pub const fn reliable(min_delay: Duration, max_delay: Duration) -> Self {
        Self {
            loss: 0.0,
            duplicate: 0.0,
            min_delay,
            max_delay,
        }
    }
}

/// Messages sent by the machines, by kind ([`PeerMessage::kind`]). A send
/// counts once whatever the network does to it (lost, duplicated, or to a
/// crashed node).
pub type Counts = BTreeMap<&'static str, u64>;

/// One stretch of simulated time in which one node held leadership: see
/// [`Sim::tenures`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tenure {
    /// The leader.
    pub node: NodeId,
    /// Its term.
    pub epoch: Epoch,
    /// When it began, since the start.
    pub from: Duration,
    /// When it ended (exclusive), since the start.
    pub to: Duration,
}

impl Tenure {
    /// Whether the two share an instant. A tenure covers `from..to`, or
    /// the instant `from` alone if it ended where it began (a node that
    /// crashed at the instant it became leader led at that instant).
    pub fn overlaps(&self, other: &Tenure) -> bool {
        self.from < other.end() && other.from < self.end()
    }

    fn end(&self) -> Duration {
        self.to.max(self.from + Duration::from_nanos(1))
    }
}

/// Faults [`Sim::chaos`] draws beyond its default ones: see
/// [`Sim::set_extra_faults`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtraFaults {
    /// Pause a random live node, or one that leads, for up to this long
    /// (uniform from zero); `None`: no pauses.
    pub max_pause: Option<Duration>,
    /// Cut off a node that leads, alone or with as many others as still
    /// leaves the rest a majority.
    pub isolate_leaders: bool,
}

/// A tenure still running, in simulated instants.
#[derive(Clone, Copy, Debug)]
struct OpenTenure {
    epoch: Epoch,
    from: Instant,
    /// The end of the node's lease, as of its latest handle; `None` for a
    /// machine whose leadership has no lease.
    lease_until: Option<Instant>,
}

/// Two nodes claimed leadership in the same epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The epoch claimed twice.
    pub epoch: Epoch,
    /// The first claimant.
    pub first: NodeId,
    /// The second.
    pub second: NodeId,
    /// When the second claim was seen, since the start.
    pub at: Duration,
}

struct Flight<M> {
    at: Instant,
    seq: u64,
    from: NodeId,
    to: usize,
    message: M,
}

impl<M> PartialEq for Flight<M> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<M> Eq for Flight<M> {}
impl<M> PartialOrd for Flight<M> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<M> Ord for Flight<M> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

type Factory<M> = Box<dyn FnMut(NodeId, Instant) -> M>;

/// A simulated group of nodes running one algorithm. See the
/// [module docs](self).
pub struct Sim<M: Machine> {
    rng: Rng,
    start: Instant,
    now: Instant,
    ids: Vec<NodeId>,
    nodes: Vec<Option<M>>,
    factory: Factory<M>,
    queue: BinaryHeap<Reverse<Flight<M::Message>>>,
    seq: u64,
    group: Vec<u32>,
    net: Network,
    counts: Counts,
    claims: BTreeMap<Epoch, NodeId>,
    conflicts: Vec<Conflict>,
    /// Each node's latest claim since it (re)started.
    last_claim: Vec<Option<Epoch>>,
    regressions: Vec<Regression>,
    trace: bool,
    /// Each node's clock rate against simulated time (1.0: exact).
    rates: Vec<f64>,
    /// Paused nodes, with when they resume.
    paused: Vec<Option<Instant>>,
    /// Messages that reached a paused node, in order of arrival.
    backlog: Vec<Vec<(NodeId, M::Message)>>,
    extra: ExtraFaults,
    tenures: Vec<Tenure>,
    open: Vec<Option<OpenTenure>>,
}

/// A node claimed a smaller epoch than it had claimed before, without a
/// restart in between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regression {
    /// The node.
    pub node: NodeId,
    /// Its earlier claim.
    pub before: Epoch,
    /// Its later, smaller claim.
    pub after: Epoch,
    /// When, since the start.
    pub at: Duration,
}

/// A step limit per simulated second per node, far above any sane run: a
/// machine past it is in a busy loop.
const STEPS_PER_NODE_SECOND: u64 = 200_000;

/// Messages in flight per node beyond which the run is a message storm
/// (a sane run has a few dozen in all).
const MAX_IN_FLIGHT_PER_NODE: usize = 2_000;

impl<M: Machine> Sim<M> {
    /// A group of `ids`, each started at time zero by `factory(id, now)`
    /// (also used to restart a crashed node), on `network`. Set
    /// `REGENT_PEER_TRACE=1` to print every delivery, timer and fault to
    /// stderr.
    pub fn new(
        seed: u64,
        ids: &[NodeId],
        network: Network,
        mut factory: impl FnMut(NodeId, Instant) -> M + 'static,
    ) -> Self {
        let start = Instant::now();
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        let nodes = ids.iter().map(|&id| Some(factory(id, start))).collect();
        let n = ids.len();
        Self {
            rng: Rng::with_seed(seed),
            start,
            now: start,
            group: vec![0; n],
            ids,
            nodes,
            factory: Box::new(factory),
            queue: BinaryHeap::new(),
            seq: 0,
            net: network,
            counts: Counts::new(),
            claims: BTreeMap::new(),
            conflicts: Vec::new(),
            last_claim: vec![None; n],
            regressions: Vec::new(),
            trace: std::env::var_os("REGENT_PEER_TRACE").is_some(),
            rates: vec![1.0; n],
            paused: vec![None; n],
            backlog: (0..n).map(|_| Vec::new()).collect(),
            extra: ExtraFaults::default(),
            tenures: Vec::new(),
            open: vec![None; n],
        }
    }

    /// Makes each node's clock run at its own rate, either exact or
    /// `1 − max_drift` times simulated time, at random: over any stretch,
    /// one node's clock measures at least `1 − max_drift` of what another's
    /// measures, the bound [`Config::clock_drift`] states, and the two ends
    /// of the bound are where a lease is tightest. Crashes keep a node's
    /// rate (it is the machine's clock).
    ///
    /// # Panics
    ///
    /// Once the simulation has run, or if `max_drift` is not in `0..1`.
    pub fn drift_clocks(&mut self, max_drift: f64) {
        assert!(
            self.now == self.start,
            "clocks drift from the start or not at all"
        );
        assert!((0.0..1.0).contains(&max_drift), "a drift below 1");
        for rate in &mut self.rates {
            *rate = if self.rng.bool() {
                1.0
            } else {
                1.0 - max_drift
            };
        }
    }

    /// Makes `id`'s clock run at `rate` times simulated time (for
    /// scenarios that need a given node fast or slow).
    ///
    /// # Panics
    ///
    /// Once the simulation has run, or if `rate` is not in `0.5..=2`.
    pub fn set_clock_rate(&mut self, id: NodeId, rate: f64) {
        assert!(
            self.now == self.start,
            "clocks drift from the start or not at all"
        );
        assert!((0.5..=2.0).contains(&rate), "a rate within a factor of two");
        if let Some(i) = self.index(id) {
            self.rates[i] = rate;
        }
    }

    /// The rate of `id`'s clock against simulated time.
    pub fn clock_rate(&self, id: NodeId) -> Option<f64> {
        self.index(id).map(|i| self.rates[i])
    }

    /// Node `i`'s clock at simulated instant `t`.
    fn local(&self, i: usize, t: Instant) -> Instant {
        let rate = self.rates[i];
        if rate == 1.0 {
            return t;
        }
        self.start + scale(t - self.start, rate)
    }

    /// The first simulated instant at which node `i`'s clock reads `local`
    /// or later.
    fn real(&self, i: usize, local: Instant) -> Instant {
        let rate = self.rates[i];
        if rate == 1.0 || local <= self.start {
            return local;
        }
        // Rounding aside, the inverse of `local`; then step to the first
        // nanosecond that reaches it.
        let guess = self.start + scale(local - self.start, 1.0 / rate);
        let mut t = guess.checked_sub(Duration::from_nanos(2)).unwrap_or(guess);
        while self.local(i, t) < local {
            t += Duration::from_nanos(1);
        }
        t
    }

    /// The simulated time since the start.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// The current simulated instant.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The members, ascending.
    pub fn ids(&self) -> &[NodeId] {
        &self.ids
    }

    /// The simulator's random numbers (for test scenarios that should
    /// replay with the seed).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// The network now in force.
    pub fn network(&self) -> Network {
        self.net
    }

    /// Changes the network for messages sent from now on.
    pub fn set_network(&mut self, network: Network) {
        self.net = network;
    }

    /// The node `id`, unless it is crashed.
    pub fn node(&self, id: NodeId) -> Option<&M> {
        self.index(id).and_then(|i| self.nodes[i].as_ref())
    }

    /// The ids of the nodes that are up.
    pub fn live(&self) -> Vec<NodeId> {
        self.ids
            .iter()
            .zip(&self.nodes)
            .filter(|(_, n)| n.is_some())
            .map(|(&id, _)| id)
            .collect()
    }

    /// The ids of the crashed nodes.
    pub fn crashed(&self) -> Vec<NodeId> {
        self.ids
            .iter()
            .zip(&self.nodes)
            .filter(|(_, n)| n.is_none())
            .map(|(&id, _)| id)
            .collect()
    }

    /// Every live node's view of the leader.
    pub fn views(&self) -> Vec<(NodeId, Option<Leader>)> {
        self.ids
            .iter()
            .zip(&self.nodes)
            .filter_map(|(&id, n)| n.as_ref().map(|n| (id, n.leader())))
            .collect()
    }

    /// The live nodes that claim leadership, with their epochs.
    pub fn leaders(&self) -> Vec<(NodeId, Epoch)> {
        self.ids
            .iter()
            .zip(&self.nodes)
            .filter_map(|(&id, n)| {
                let token = n.as_ref()?.leadership()?;
                Some((id, Epoch::from_raw(token.get())))
            })
            .collect()
    }

    /// The leader every live node agrees on, if they all name the same one
    /// and it is live and alone in claiming leadership, in that term.
    pub fn agreed_leader(&self) -> Option<Leader> {
        let views = self.views();
        let first = views.first()?.1?;
        if views.iter().any(|&(_, v)| v != Some(first)) {
            return None;
        }
        (self.leaders() == [(first.id, first.epoch)]).then_some(first)
    }

    /// Every claim of leadership seen so far: the epoch and its claimant.
    pub fn claims(&self) -> &BTreeMap<Epoch, NodeId> {
        &self.claims
    }

    /// Epochs claimed by two different nodes (the safety invariant says
    /// none).
    pub fn conflicts(&self) -> &[Conflict] {
        &self.conflicts
    }

    /// Claims smaller than the same node's earlier claim since it started
    /// (the fencing invariant says none).
    pub fn regressions(&self) -> &[Regression] {
        &self.regressions
    }

    /// Messages sent since the start or the last [`reset_counts`](Self::reset_counts).
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Starts counting messages from zero.
    pub fn reset_counts(&mut self) {
        self.counts.clear();
    }

    fn index(&self, id: NodeId) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }

    /// Every stretch of leadership so far, ordered by node and start; one
    /// still running ends at its node's lease end (for a machine with a
    /// lease: it holds until then whatever happens next) or now.
    pub fn tenures(&self) -> Vec<Tenure> {
        let mut all = self.tenures.clone();
        for (i, open) in self.open.iter().enumerate() {
            if let Some(open) = open {
                all.push(self.tenure(i, open, open.lease_until.unwrap_or(self.now)));
            }
        }
        all.sort_by_key(|t| (t.node, t.from));
        all
    }

    /// Pairs of tenures of two different nodes that share an instant (the
    /// quorum-mode invariant says none).
    pub fn overlaps(&self) -> Vec<(Tenure, Tenure)> {
        let mut all = self.tenures();
        all.sort_by_key(|t| t.from);
        let mut found = Vec::new();
        for (k, later) in all.iter().enumerate() {
            for earlier in &all[..k] {
                if earlier.node != later.node && earlier.overlaps(later) {
                    found.push((*earlier, *later));
                }
            }
        }
        found
    }

    fn tenure(&self, i: usize, open: &OpenTenure, end: Instant) -> Tenure {
        Tenure {
            node: self.ids[i],
            epoch: open.epoch,
            from: open.from - self.start,
            to: end.max(open.from) - self.start,
        }
    }

    /// Ends node `i`'s running tenure at `now`, or at its lease end if
    /// that came first.
    fn close_tenure(&mut self, i: usize) {
        if let Some(open) = self.open[i].take() {
            let end = open.lease_until.map_or(self.now, |u| u.min(self.now));
            let tenure = self.tenure(i, &open, end);
            self.tenures.push(tenure);
        }
    }

    /// Follows node `i`'s leadership after it handled an input.
    fn track_tenure(&mut self, i: usize) {
        let Some(node) = self.nodes[i].as_ref() else {
            self.close_tenure(i);
            return;
        };
        let Some(token) = node.leadership() else {
            self.close_tenure(i);
            return;
        };
        let epoch = Epoch::from_raw(token.get());
        let lease_until = node.lease_until().map(|u| self.real(i, u));
        if let Some(open) = self.open[i] {
            // A new term, or a lease that ran out before this handle
            // renewed it, is a new tenure.
            let lapsed = open.lease_until.is_some_and(|u| u < self.now);
            if open.epoch == epoch && !lapsed {
                self.open[i] = Some(OpenTenure {
                    lease_until,
                    ..open
                });
                return;
            }
            self.close_tenure(i);
        }
        self.open[i] = Some(OpenTenure {
            epoch,
            from: self.now,
            lease_until,
        });
    }

    /// Crashes `id`: its state is gone, messages to it are lost until it
    /// restarts. Crashing a crashed node does nothing.
    pub fn crash(&mut self, id: NodeId) {
        if let Some(i) = self.index(id) {
            self.close_tenure(i);
            self.nodes[i] = None;
            self.last_claim[i] = None;
            self.paused[i] = None;
            self.backlog[i].clear();
            self.note(format_args!("crash {id:?}"));
        }
    }

    /// Pauses a live `id` for `d`: it handles nothing until then, as if
    /// stopped by SIGSTOP; messages that reach it wait, and it handles
    /// them in order when it resumes, then its timers. Pausing a paused
    /// node makes the pause end at the later of the two ends.
    pub fn pause(&mut self, id: NodeId, d: Duration) {
        if let Some(i) = self.index(id)
            && self.nodes[i].is_some()
        {
            let until = self.now + d;
            self.paused[i] = Some(self.paused[i].map_or(until, |u| u.max(until)));
            self.note(format_args!("pause {id:?} for {d:?}"));
        }
    }

    /// The ids of the paused nodes.
    pub fn paused(&self) -> Vec<NodeId> {
        self.ids
            .iter()
            .zip(&self.paused)
            .filter(|(_, p)| p.is_some())
            .map(|(&id, _)| id)
            .collect()
    }

    /// Which faults [`chaos`](Self::chaos) draws beyond its default ones
    /// (by default none).
    pub fn set_extra_faults(&mut self, extra: ExtraFaults) {
        self.extra = extra;
    }

    fn resume(&mut self, i: usize) {
        self.paused[i] = None;
        let id = self.ids[i];
        self.note(format_args!("resume {id:?}"));
        let now = self.local(i, self.now);
        for (from, message) in std::mem::take(&mut self.backlog[i]) {
            let Some(node) = self.nodes[i].as_mut() else {
                return;
            };
            let out = node.handle(now, Input::Receive { from, message });
            self.after_handle(i, out);
        }
    }

    /// Restarts a crashed `id` with fresh state. Restarting a live node does
    /// nothing.
    pub fn restart(&mut self, id: NodeId) {
        if let Some(i) = self.index(id)
            && self.nodes[i].is_none()
        {
            let now = self.local(i, self.now);
            self.nodes[i] = Some((self.factory)(id, now));
            self.note(format_args!("restart {id:?}"));
        }
    }

    /// Splits the network: messages pass only within one of `groups`; a node
    /// in none of them is cut off alone. Messages in flight across the cut
    /// are lost.
    pub fn partition(&mut self, groups: &[Vec<NodeId>]) {
        let mut next = u32::try_from(groups.len()).unwrap_or(u32::MAX);
        for (i, id) in self.ids.iter().enumerate() {
            self.group[i] = match groups.iter().position(|g| g.contains(id)) {
                Some(g) => u32::try_from(g).unwrap_or(0),
                None => {
                    next += 1;
                    next
                }
            };
        }
        self.note(format_args!("partition {groups:?}"));
    }

    /// Joins every partition.
    pub fn heal(&mut self) {
        self.group.fill(0);
        self.note(format_args!("heal"));
    }

    fn note(&mut self, what: std::fmt::Arguments<'_>) {
        let at = self.now - self.start;
        if self.trace {
            eprintln!("{at:>12?} {what}");
        }
    }

    /// Runs for `d` of simulated time.
    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    /// Runs until simulated instant `until`.
    ///
    /// # Panics
    ///
    /// If a machine does not move its deadline past the instant it was
    /// ticked at, the run takes an absurd number of steps, or messages in
    /// flight pile up into a storm: machine bugs the simulation exists to
    /// find.
    pub fn run_until(&mut self, until: Instant) {
        let span = until.saturating_duration_since(self.now);
        let limit = STEPS_PER_NODE_SECOND
            .saturating_mul(self.ids.len() as u64)
            .saturating_mul(span.as_secs() + 1);
        let mut steps = 0u64;
        loop {
            let timer = self
                .nodes
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    let at = match self.paused[i] {
                        Some(resume) => resume,
                        None => self.real(i, n.as_ref()?.next_deadline()),
                    };
                    Some((at.max(self.now), i))
                })
                .min();
            let flight = self.queue.peek().map(|f| f.0.at);
            let next = match (timer, flight) {
                (None, None) => break,
                (Some((t, _)), None) => t,
                (None, Some(f)) => f,
                (Some((t, _)), Some(f)) => t.min(f),
            };
            if next > until {
                break;
            }
            self.now = next;
            steps += 1;
            assert!(
                steps <= limit,
                "simulation took over {limit} steps: a machine is looping"
            );
            if flight == Some(next) {
                let Reverse(f) = self.queue.pop().expect("peeked");
                self.deliver(f);
            } else if let Some((_, i)) = timer {
                if self.paused[i].is_some() {
                    self.resume(i);
                } else {
                    self.tick(i);
                }
            }
        }
        self.now = self.now.max(until);
    }

    fn tick(&mut self, i: usize) {
        let now = self.local(i, self.now);
        let Some(node) = self.nodes[i].as_mut() else {
            return;
        };
        let out = node.handle(now, Input::Tick);
        let deadline = node.next_deadline();
        assert!(
            deadline > now,
            "{:?} was ticked at {:?} (its clock) and still wants a tick at {:?}",
            self.ids[i],
            now - self.start,
            deadline.saturating_duration_since(self.start)
        );
        let id = self.ids[i];
        self.note(format_args!("tick {id:?}"));
        self.after_handle(i, out);
    }

    fn deliver(&mut self, f: Flight<M::Message>) {
        let Some(from) = self.index(f.from) else {
            return;
        };
        if self.group[from] != self.group[f.to] || self.nodes[f.to].is_none() {
            return;
        }
        if self.paused[f.to].is_some() {
            self.backlog[f.to].push((f.from, f.message));
            return;
        }
        let now = self.local(f.to, self.now);
        let Some(node) = self.nodes[f.to].as_mut() else {
            return;
        };
        if self.trace {
            eprintln!(
                "{:>12?} {:?} -> {:?} {:?}",
                self.now - self.start,
                f.from,
                self.ids[f.to],
                f.message
            );
        }
        let out = node.handle(
            now,
            Input::Receive {
                from: f.from,
                message: f.message,
            },
        );
        self.after_handle(f.to, out);
    }

    fn after_handle(&mut self, i: usize, out: Vec<Output<M::Message>>) {
        self.track_tenure(i);
        let id = self.ids[i];
        if let Some(token) = self.nodes[i].as_ref().and_then(|n| n.leadership()) {
            let epoch = Epoch::from_raw(token.get());
            if let Some(before) = self.last_claim[i]
                && epoch < before
            {
                self.regressions.push(Regression {
                    node: id,
                    before,
                    after: epoch,
                    at: self.now - self.start,
                });
            }
            self.last_claim[i] = Some(epoch);
            let first = *self.claims.entry(epoch).or_insert(id);
            if first != id {
                self.conflicts.push(Conflict {
                    epoch,
                    first,
                    second: id,
                    at: self.now - self.start,
                });
            }
        }
        for o in out {
            if let Output::Send { to, message } = o {
                *self.counts.entry(message.kind()).or_default() += 1;
                self.send(i, to, message);
            }
        }
    }

    fn send(&mut self, from: usize, to: NodeId, message: M::Message) {
        let Some(to) = self.index(to) else {
            return;
        };
        if self.group[from] != self.group[to] || self.rng.f64() < self.net.loss {
            return;
        }
        let copies = if self.rng.f64() < self.net.duplicate {
            2
        } else {
            1
        };
        let min = self.net.min_delay.as_nanos();
        let max = self.net.max_delay.as_nanos().max(min);
        assert!(
            self.queue.len() < MAX_IN_FLIGHT_PER_NODE * self.ids.len(),
            "message storm: {} messages in flight at {:?}; sent so far {:?}",
            self.queue.len(),
            self.now - self.start,
            self.counts
        );
        for _ in 0..copies {
            let nanos = u64::try_from(self.rng.u128(min..=max)).unwrap_or(u64::MAX);
            self.seq += 1;
            self.queue.push(Reverse(Flight {
                at: self.now + Duration::from_nanos(nanos),
                seq: self.seq,
                from: self.ids[from],
                to,
                message: message.clone(),
            }));
        }
    }

    /// Random faults for `duration`: about every `mean_gap` one of crash
    /// (a random node, or one that leads), restart, partition (two or three
    /// groups), heal, or a new network (loss up to 30 %, duplication up to
    /// 20 %, delays from `delays.0` up to ten times `delays.1`); and the
    /// [`ExtraFaults`] set, if any.
    pub fn chaos(&mut self, duration: Duration, mean_gap: Duration, delays: (Duration, Duration)) {
        let end = self.now + duration;
        let max_gap = u64::try_from(mean_gap.as_nanos() * 2).unwrap_or(u64::MAX);
        loop {
            let gap = Duration::from_nanos(self.rng.u64(0..=max_gap));
            let at = (self.now + gap).min(end);
            self.run_until(at);
            if self.now >= end {
                break;
            }
            // Without extra faults, the draws of the runs before they existed.
            let faults = if self.extra == ExtraFaults::default() {
                10
            } else {
                14
            };
            let fault = self.rng.u8(0..faults);
            match fault {
                0 | 1 => {
                    let live = self.live();
                    if !live.is_empty() {
                        let id = live[self.rng.usize(..live.len())];
                        self.crash(id);
                    }
                }
                2 => {
                    let leaders = self.leaders();
                    if !leaders.is_empty() {
                        let (id, _) = leaders[self.rng.usize(..leaders.len())];
                        self.crash(id);
                    }
                }
                3..=5 => {
                    let crashed = self.crashed();
                    if !crashed.is_empty() {
                        let id = crashed[self.rng.usize(..crashed.len())];
                        self.restart(id);
                    }
                }
                6 => {
                    let k = self.rng.usize(2..=3);
                    let mut groups = vec![Vec::new(); k];
                    for &id in &self.ids.clone() {
                        groups[self.rng.usize(..k)].push(id);
                    }
                    self.partition(&groups);
                }
                7 => self.heal(),
                12 | 13 if self.extra.isolate_leaders => {
                    let leaders = self.leaders();
                    if !leaders.is_empty() {
                        let (leader, _) = leaders[self.rng.usize(..leaders.len())];
                        let mut minority = vec![leader];
                        if fault == 13 {
                            let mut others: Vec<NodeId> = self
                                .ids
                                .iter()
                                .copied()
                                .filter(|&id| id != leader)
                                .collect();
                            self.rng.shuffle(&mut others);
                            let k = (self.ids.len() - 1) / 2;
                            minority.extend(others.into_iter().take(k));
                        }
                        let rest = self
                            .ids
                            .iter()
                            .copied()
                            .filter(|id| !minority.contains(id))
                            .collect();
                        self.partition(&[minority, rest]);
                    }
                }
                10 | 11 if self.extra.max_pause.is_some() => {
                    let pick = if fault == 11 {
                        self.leaders().into_iter().map(|(id, _)| id).collect()
                    } else {
                        self.live()
                    };
                    if !pick.is_empty() {
                        let id = pick[self.rng.usize(..pick.len())];
                        let max = self.extra.max_pause.unwrap_or_default();
                        let d = Duration::from_nanos(
                            self.rng
                                .u64(..=u64::try_from(max.as_nanos()).unwrap_or(u64::MAX)),
                        );
                        self.pause(id, d);
                    }
                }
                10..=13 => {}
                _ => {
                    let loss = self.rng.f64() * 0.3;
                    let duplicate = self.rng.f64() * 0.2;
                    let max_delay = delays.1 * self.rng.u32(1..=10);
                    self.set_network(Network {
                        loss,
                        duplicate,
                        min_delay: delays.0,
                        max_delay,
                    });
                    self.note(format_args!(
                        "network loss {loss:.2} dup {duplicate:.2} delay up to {max_delay:?}"
                    ));
                }
            }
        }
    }

    /// Ends every fault: heals partitions, resumes every paused node,
    /// restarts every crashed node, and makes the network reliable with
    /// delays within `delays`.
    pub fn calm(&mut self, delays: (Duration, Duration)) {
        self.heal();
        for i in 0..self.ids.len() {
            if self.paused[i].is_some() {
                self.resume(i);
            }
        }
        for id in self.crashed() {
            self.restart(id);
        }
        self.set_network(Network::reliable(delays.0, delays.1));
    }
}

/// How agreement went after faults ended: see [`Sim::settle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    /// The leader all nodes agreed on at the end.
    pub leader: Leader,
    /// How long after the call agreement began (and then held).
    pub took: Duration,
}

impl<M: Machine> Sim<M> {
    /// Runs for `window`, sampling every 5 ms whether every live node names
    /// the same leader ([`agreed_leader`](Self::agreed_leader)); returns
    /// that leader and when the agreement that lasted to the end began, or
    /// `None` if the nodes did not agree at the end.
    pub fn settle(&mut self, window: Duration) -> Option<Settled> {
        const SAMPLE: Duration = Duration::from_millis(5);
        let begin = self.now;
        let end = begin + window;
        let mut since: Option<Settled> = None;
        while self.now < end {
            self.run_until((self.now + SAMPLE).min(end));
            since = match (self.agreed_leader(), since) {
                (None, _) => None,
                (Some(l), Some(s)) if l == s.leader => Some(s),
                (Some(leader), _) => Some(Settled {
                    leader,
                    took: self.now - begin,
                }),
            };
        }
        since
    }
}

/// `d × factor`, to the nanosecond (exact for the durations of a
/// simulation, far below 2^53 ns).
fn scale(d: Duration, factor: f64) -> Duration {
    let nanos = d.as_nanos() as f64 * factor;
    Duration::from_nanos(nanos.round() as u64)
}

/// A random group and timing for simulations: 3 to 7 members with random
/// distinct ids, and timings scaled for a network with delays of 1 to
/// 20 ms.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The members.
    pub ids: Vec<NodeId>,
    /// Heartbeat interval.
    pub heartbeat_interval: Duration,
    /// Failure timeout.
    pub failure_timeout: Duration,
    /// Bully's answer timeout.
    pub answer_timeout: Duration,
    /// Bully's coordinator timeout.
    pub coordinator_timeout: Duration,
    /// Ring's ack timeout.
    pub ack_timeout: Duration,
    /// Quorum mode's lease.
    pub lease: Duration,
    /// Quorum mode's bound on clock drift (and the simulated clocks' in
    /// [`Scenario::quorum_sim`]).
    pub clock_drift: f64,
    /// Quorum mode's lease margin.
    pub lease_margin: Duration,
    /// The network's delays.
    pub delays: (Duration, Duration),
}

impl Scenario {
    /// The scenario of `seed` (drawn from its own generator, so the
    /// simulation's random numbers stay independent).
    pub fn random(seed: u64) -> Self {
        let mut rng = Rng::with_seed(seed ^ 0x5eed_5ce7_a710);
        let n = rng.usize(3..=7);
        let mut ids: Vec<NodeId> = Vec::new();
        while ids.len() < n {
            let id = NodeId(rng.u64(1..=1000));
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        let ms = Duration::from_millis;
        Self {
            ids,
            heartbeat_interval: ms(100),
            failure_timeout: ms(400),
            answer_timeout: ms(60),
            coordinator_timeout: ms(300),
            ack_timeout: ms(50),
            lease: ms(400),
            clock_drift: 0.2,
            lease_margin: ms(1),
            delays: (ms(1), ms(20)),
        }
    }

    /// The configuration of member `id`, before `build`.
    pub fn config(&self, id: NodeId) -> ConfigBuilder {
        Config::builder(id, self.ids.iter().copied())
            .heartbeat_interval(self.heartbeat_interval)
            .failure_timeout(self.failure_timeout)
            .answer_timeout(self.answer_timeout)
            .coordinator_timeout(self.coordinator_timeout)
            .ack_timeout(self.ack_timeout)
            .lease(self.lease)
            .clock_drift(self.clock_drift)
            .lease_margin(self.lease_margin)
    }

    /// The configuration of one start of member `id` at `now` on its clock:
    /// a random incarnation, and a wall clock read at the start
    /// ([`ConfigBuilder::wall_clock`]) that is [`WALL_CLOCK_ORIGIN`] at
    /// the simulation's start, and off by up to two seconds either way,
    /// drawn anew at every start, as hosts' clocks are.
    fn start_config(&self, id: NodeId, now: Instant, starts: &mut Starts) -> Config {
        let origin = *starts.origin.get_or_insert(now);
        let since =
            u64::try_from(now.saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX);
        let wall = (WALL_CLOCK_ORIGIN + since).saturating_add_signed(starts.rng.i64(-2000..=2000));
        self.config(id)
            .incarnation(starts.rng.u64(..))
            .wall_clock(wall, now)
            .build()
            .expect("valid scenario")
    }

    /// A simulation of this scenario with the algorithm `new` makes, on a
    /// reliable network. Every start of a node gets a random incarnation
    /// and a wall clock: [`WALL_CLOCK_ORIGIN`] at the simulation's start,
    /// off by up to two seconds either way, drawn anew at every start.
    ///
    /// # Panics
    ///
    /// If the scenario's configuration is invalid (it never is).
    pub fn sim<M: Machine + 'static>(&self, seed: u64, new: fn(Config, Instant) -> M) -> Sim<M> {
        let this = self.clone();
        let mut starts = Starts::new(seed);
        Sim::new(
            seed,
            &self.ids,
            Network::reliable(self.delays.0, self.delays.1),
            move |id, now| new(this.start_config(id, now, &mut starts), now),
        )
    }

    /// A simulation of this scenario with the algorithm `new` makes in
    /// quorum mode ([`Quorum`]), on a reliable network, with each node's
    /// clock drifting within the scenario's `clock_drift`
    /// ([`Sim::drift_clocks`]). Every start of a node gets a random
    /// incarnation and a wall clock, as in [`Scenario::sim`].
    ///
    /// # Panics
    ///
    /// If the scenario's configuration is invalid (it never is).
    pub fn quorum_sim<M: Machine + 'static>(
        &self,
        seed: u64,
        new: fn(Config, Instant) -> M,
    ) -> Sim<Quorum<M>> {
        let this = self.clone();
        let mut starts = Starts::new(seed);
        let mut sim = Sim::new(
            seed,
            &self.ids,
            Network::reliable(self.delays.0, self.delays.1),
            move |id, now| {
                let config = this.start_config(id, now, &mut starts);
                Quorum::new(config.clone(), now, new(config, now))
            },
        );
        sim.drift_clocks(self.clock_drift);
        sim
    }
}

/// The wall clock, in milliseconds since the Unix epoch, when a
/// [`Scenario`]'s simulation starts (2026-11-26).
pub const WALL_CLOCK_ORIGIN: u64 = 1_795_000_000_000;

/// What a scenario draws at each start of a node.
struct Starts {
    rng: Rng,
    /// The first start's instant: the simulation's start.
    origin: Option<Instant>,
}

impl Starts {
    fn new(seed: u64) -> Self {
        Self {
            rng: Rng::with_seed(seed ^ 0x1ca7_2a71_0115),
            origin: None,
        }
    }
}

/// The seeds every simulation test runs, whatever the random draw.
pub const FIXED_SEEDS: [u64; 8] = [0, 1, 2, 3, 42, 1234, 0xdead_beef, u64::MAX];

/// Runs `check` for each seed: [`FIXED_SEEDS`] and `REGENT_PEER_SEEDS`
/// (default 1,000) random ones, or only `REGENT_PEER_SEED` when set. A
/// failing seed is reported with the command that replays it.
///
/// # Panics
///
/// With the failing seed and the replay command, when `check` panics.
pub fn for_each_seed(test: &str, mut check: impl FnMut(u64)) {
    let env = |name: &str| {
        std::env::var(name).ok().map(|v| {
            v.trim()
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        })
    };
    let seeds: Vec<u64> = match env("REGENT_PEER_SEED") {
        Some(seed) => vec![seed],
        None => {
            let count = env("REGENT_PEER_SEEDS").unwrap_or(1000);
            let mut entropy = Rng::new();
            FIXED_SEEDS
                .iter()
                .copied()
                .chain((0..count).map(|_| entropy.u64(..)))
                .collect()
        }
    };
    for seed in seeds {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(seed))) {
            eprintln!(
                "\n{test}: seed {seed} failed; replay with\n  REGENT_PEER_SEED={seed} cargo test -p regent-peer --test {test}\n(REGENT_PEER_TRACE=1 prints the run)\n"
            );
            resume_unwind(panic);
        }
    }
}
