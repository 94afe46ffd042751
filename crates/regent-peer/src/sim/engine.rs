//! The simulated group ([`Sim`]): its machines, their clocks, the
//! messages in flight, and the event loop that delivers them and ticks the
//! machines in simulated time, checking every claim of leadership as it
//! goes.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

use fastrand::Rng;
use tokio::time::Instant;

use super::conditions::{ExtraFaults, Network};
use super::records::{Conflict, Counts, OpenTenure, Regression, Tenure};
use crate::epoch::{Epoch, NodeId};
use crate::machine::{Input, Machine, Output, PeerMessage};

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
/// [module docs](super).
pub struct Sim<M: Machine> {
    pub(super) rng: Rng,
    start: Instant,
    pub(super) now: Instant,
    pub(super) ids: Vec<NodeId>,
    pub(super) nodes: Vec<Option<M>>,
    pub(super) factory: Factory<M>,
    queue: BinaryHeap<Reverse<Flight<M::Message>>>,
    seq: u64,
    pub(super) group: Vec<u32>,
    net: Network,
    pub(super) counts: Counts,
    pub(super) claims: BTreeMap<Epoch, NodeId>,
    pub(super) conflicts: Vec<Conflict>,
    /// Each node's latest claim since it (re)started.
    pub(super) last_claim: Vec<Option<Epoch>>,
    pub(super) regressions: Vec<Regression>,
    trace: bool,
    /// Each node's clock rate against simulated time (1.0: exact).
    rates: Vec<f64>,
    /// Paused nodes, with when they resume.
    pub(super) paused: Vec<Option<Instant>>,
    /// Messages that reached a paused node, in order of arrival.
    pub(super) backlog: Vec<Vec<(NodeId, M::Message)>>,
    pub(super) extra: ExtraFaults,
    pub(super) tenures: Vec<Tenure>,
    pub(super) open: Vec<Option<OpenTenure>>,
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
    /// measures, the bound [`Config::clock_drift`](crate::Config::clock_drift) states, and the two ends
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
    pub(super) fn local(&self, i: usize, t: Instant) -> Instant {
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

    pub(super) fn index(&self, id: NodeId) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }

    pub(super) fn tenure(&self, i: usize, open: &OpenTenure, end: Instant) -> Tenure {
        Tenure {
            node: self.ids[i],
            epoch: open.epoch,
            from: open.from - self.start,
            to: end.max(open.from) - self.start,
        }
    }

    /// Ends node `i`'s running tenure at `now`, or at its lease end if
    /// that came first.
    pub(super) fn close_tenure(&mut self, i: usize) {
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

    pub(super) fn resume(&mut self, i: usize) {
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

    pub(super) fn note(&mut self, what: std::fmt::Arguments<'_>) {
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
}

/// `d × factor`, to the nanosecond (exact for the durations of a
/// simulation, far below 2^53 ns).
fn scale(d: Duration, factor: f64) -> Duration {
    let nanos = d.as_nanos() as f64 * factor;
    Duration::from_nanos(nanos.round() as u64)
}
