//! Bound: a Ring group whose leader crashes agrees on the next one within
//! the failure timeout and a few ack timeouts, in every delivery order,
//! even right after a start and a hand-over.
//!
//! The scenario of `regent peer`'s end-to-end test: five members start a
//! few milliseconds apart, 5 leads and leaves (a GOODBYE), 4 leads, and
//! 4 is killed (no GOODBYE) a few milliseconds later; 3 must lead, and 1,
//! 2 and 3 agree on it, within `failure_timeout + 3 x ack_timeout` of the
//! kill (1.6 s at heartbeat 100 ms, failure timeout 1 s, ack timeout
//! 200 ms: the crash is detected a failure timeout after the last word
//! from 4, and the ELECTION and COORDINATOR skip 4 once each).
//!
//! The network is a small model of the TCP transport on loopback rather
//! than `sim::Sim`, which has neither a GOODBYE nor a refused connection:
//! each link delivers in order after 0-3 ms; a frame for a member that is
//! not listening (not started yet, or dead) is refused and dropped, and its
//! link then waits 50 ms before connecting again, holding what is sent
//! meanwhile (the transport's reconnect backoff).
//!
//! Regression test: a member's first ELECTION, refused by a successor that
//! had not started, was skipped on along the ring an ack timeout later,
//! after the group had elected 5 and then 4. The followers of 4 it reached
//! took it for a new election: they dropped their leader and their failure
//! timer to wait for its COORDINATOR, which never came (its initiator no
//! longer ran it). When 4 was killed no member was following it any more,
//! and the group failed over only when those election timeouts (2 s) ran
//! out: 2.2-2.3 s after the kill instead of 1.2 s, in about one run in
//! four of the end-to-end test, and in most seeds here.

use std::collections::BTreeMap;
use std::time::Duration;

use fastrand::Rng;
use regent_peer::ring::Message;
use regent_peer::sim::for_each_seed;
use regent_peer::{Config, Epoch, Input, Leader, Machine, NodeId, Output, Ring};
use tokio::time::Instant;

const MEMBERS: [u64; 5] = [1, 2, 3, 4, 5];
const HEARTBEAT: Duration = Duration::from_millis(100);
const FAILURE: Duration = Duration::from_secs(1);
const MAX_DELAY_US: u64 = 3_000;
const BACKOFF: Duration = Duration::from_millis(50);
/// A GOODBYE reaches each member 0-5 ms after the leaver sends it, each on
/// its own connection, so in any order relative to the ring's messages.
const MAX_GOODBYE_DELAY_US: u64 = 5_000;
/// The start instants of the end-to-end run that showed the bug, in ms.
const RECORDED_STARTS: [f64; 5] = [0.0, 8.5, 6.5, 15.0, 16.6];

struct Delivery {
    at: Duration,
    seq: u64,
    to: NodeId,
    input: Input<Message>,
}

/// Five Ring machines on a model of loopback TCP; times are offsets from
/// `base`.
struct Group {
    base: Instant,
    now: Duration,
    rng: Rng,
    nodes: BTreeMap<NodeId, Ring>,
    /// When each member starts listening.
    starts: BTreeMap<NodeId, Duration>,
    in_flight: Vec<Delivery>,
    seq: u64,
    /// The last delivery on each link, which the next may not precede.
    last_delivery: BTreeMap<(NodeId, NodeId), Duration>,
    /// Until when each link waits before connecting again.
    backoff: BTreeMap<(NodeId, NodeId), Duration>,
    /// Who led in each epoch.
    claims: BTreeMap<Epoch, NodeId>,
    max_epochs: BTreeMap<NodeId, Epoch>,
}

impl Group {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::with_seed(seed);
        let base = Instant::now();
        // Half the seeds start in the recorded order, give or take a
        // millisecond; the others in any order, over 20 ms.
        let recorded = seed.is_multiple_of(2);
        let mut starts = BTreeMap::new();
        let mut nodes = BTreeMap::new();
        for (i, id) in MEMBERS.into_iter().enumerate() {
            let start = if recorded {
                Duration::from_secs_f64(RECORDED_STARTS[i] / 1e3)
                    + Duration::from_micros(rng.u64(0..1_000))
            } else {
                Duration::from_micros(rng.u64(0..20_000))
            };
            let config = Config::builder(NodeId(id), MEMBERS.map(NodeId))
                .heartbeat_interval(HEARTBEAT)
                .failure_timeout(FAILURE)
                .build()
                .expect("a valid configuration");
            starts.insert(NodeId(id), start);
            nodes.insert(NodeId(id), Ring::new(config, base + start));
        }
        Self {
            base,
            now: Duration::ZERO,
            rng,
            nodes,
            starts,
            in_flight: Vec::new(),
            seq: 0,
            last_delivery: BTreeMap::new(),
            backoff: BTreeMap::new(),
            claims: BTreeMap::new(),
            max_epochs: BTreeMap::new(),
        }
    }

    fn listening(&self, id: NodeId, at: Duration) -> bool {
        self.nodes.contains_key(&id) && self.starts[&id] <= at
    }

    fn send(&mut self, from: NodeId, to: NodeId, input: Input<Message>) {
        self.send_within(from, to, input, MAX_DELAY_US);
    }

    fn send_within(&mut self, from: NodeId, to: NodeId, input: Input<Message>, max_delay_us: u64) {
        let link = (from, to);
        let sent = self
            .backoff
            .get(&link)
            .map_or(self.now, |&b| b.max(self.now));
        if !self.listening(to, sent) {
            self.backoff.insert(link, sent + BACKOFF);
            return;
        }
        let delay = Duration::from_micros(self.rng.u64(0..=max_delay_us));
        let at = (sent + delay).max(self.last_delivery.get(&link).copied().unwrap_or_default());
        self.last_delivery.insert(link, at);
        self.seq += 1;
        self.in_flight.push(Delivery {
            at,
            seq: self.seq,
            to,
            input,
        });
    }

    fn feed(&mut self, id: NodeId, input: Input<Message>) {
        let now = self.base + self.now;
        let Some(node) = self.nodes.get_mut(&id) else {
            return; // Lost with the process.
        };
        let outputs = node.handle(now, input);
        let max_epoch = node.max_epoch();
        let claim = node.leadership().and(node.leader());
        let seen = self.max_epochs.entry(id).or_insert(Epoch::ZERO);
        assert!(max_epoch >= *seen, "{id}'s max epoch went back");
        *seen = max_epoch;
        if let Some(Leader { id: leader, epoch }) = claim {
            let first = *self.claims.entry(epoch).or_insert(leader);
            assert_eq!(first, leader, "two leaders in {epoch}");
        }
        for output in outputs {
            if let Output::Send { to, message } = output {
                self.send(id, to, Input::Receive { from: id, message });
            }
        }
    }

    /// Delivers and ticks, in time order, up to `until`.
    fn run_until(&mut self, until: Duration) {
        loop {
            let delivery = self
                .in_flight
                .iter()
                .enumerate()
                .min_by_key(|(_, d)| (d.at, d.seq))
                .map(|(i, d)| (d.at, i));
            let tick = self
                .nodes
                .iter()
                .map(|(&id, n)| (n.next_deadline() - self.base, id))
                .min();
            match (delivery, tick) {
                (Some((at, i)), tick) if at <= until && tick.is_none_or(|(t, _)| at <= t) => {
                    self.now = self.now.max(at);
                    let d = self.in_flight.swap_remove(i);
                    self.feed(d.to, d.input);
                }
                (_, Some((t, id))) if t <= until => {
                    self.now = self.now.max(t);
                    self.feed(id, Input::Tick);
                }
                _ => {
                    self.now = until;
                    return;
                }
            }
        }
    }

    /// Runs in 1 ms steps until `done`, for at most `limit`.
    fn run_until_cond(&mut self, limit: Duration, what: &str, done: impl Fn(&Self) -> bool) {
        let end = self.now + limit;
        while !done(self) {
            assert!(self.now < end, "{what}: not within {limit:?}");
            let next = self.now + Duration::from_millis(1);
            self.run_until(next);
        }
    }

    fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    fn leads(&self, id: u64) -> Option<Epoch> {
        let node = self.nodes.get(&NodeId(id))?;
        node.leadership().and(node.leader()).map(|l| l.epoch)
    }

    /// Member `id` leaves: its machine stops, and a GOODBYE follows what it
    /// sent on each link.
    fn leave(&mut self, id: u64) {
        let from = NodeId(id);
        self.nodes.remove(&from);
        for to in MEMBERS.map(NodeId) {
            if to != from {
                self.send_within(from, to, Input::Left { from }, MAX_GOODBYE_DELAY_US);
            }
        }
    }

    /// kill -9: no GOODBYE; what it had sent is still delivered.
    fn kill(&mut self, id: u64) {
        self.nodes.remove(&NodeId(id));
    }
}

/// How long after 4's crash 3 leads with 1 and 2 following it.
fn failover(seed: u64) -> Duration {
    let mut g = Group::new(seed);
    g.run_until_cond(Duration::from_secs(5), "5 leads", |g| g.leads(5).is_some());
    let first = g.leads(5).expect("5 leads");
    let before_leave = Duration::from_micros(g.rng.u64(40_000..80_000));
    g.run_for(before_leave);
    g.leave(5);
    g.run_until_cond(Duration::from_secs(5), "4 leads after 5 left", |g| {
        g.leads(4).is_some_and(|e| e > first)
    });
    let before_kill = Duration::from_micros(g.rng.u64(0..20_000));
    g.run_for(before_kill);
    g.kill(4);
    let killed = g.now;
    g.run_until_cond(Duration::from_secs(10), "3 leads after 4's crash", |g| {
        g.leads(3).is_some_and(|term| {
            [1, 2].iter().all(|&id| {
                g.nodes[&NodeId(id)].leader()
                    == Some(Leader {
                        id: NodeId(3),
                        epoch: term,
                    })
            })
        })
    });
    g.now - killed
}

#[test]
fn ring_fails_over_within_the_failure_timeout_after_a_start_and_a_hand_over() {
    let bound = FAILURE + 3 * Config::DEFAULT_ACK_TIMEOUT;
    let mut slowest = Duration::ZERO;
    for_each_seed("ring_failover_after_hand_over", |seed| {
        let took = failover(seed);
        slowest = slowest.max(took);
        assert!(took <= bound, "failover took {took:?}, over {bound:?}");
    });
    eprintln!("ring_failover_after_hand_over: slowest failover {slowest:?} (bound {bound:?})");
}

/// How long after 5's GOODBYE 4 leads with 1, 2 and 3 following it.
fn hand_over(seed: u64) -> Duration {
    let mut g = Group::new(seed);
    g.run_until_cond(Duration::from_secs(5), "5 leads", |g| g.leads(5).is_some());
    let first = g.leads(5).expect("5 leads");
    let before_leave = Duration::from_micros(g.rng.u64(40_000..80_000));
    g.run_for(before_leave);
    g.leave(5);
    let left = g.now;
    g.run_until_cond(Duration::from_secs(5), "4 leads after 5 left", |g| {
        g.leads(4).is_some_and(|term| {
            term > first
                && [1, 2, 3].iter().all(|&id| {
                    g.nodes[&NodeId(id)].leader()
                        == Some(Leader {
                            id: NodeId(4),
                            epoch: term,
                        })
                })
        })
    });
    g.now - left
}

/// Regression: 4's first ELECTION, refused by 5 (not started yet), was
/// still waiting for its ACK when 5 led and left. The GOODBYE moved every
/// hop waiting on 5 on at once, this stale one included, and it reached 1
/// just before 1's own election came back: 1, running an election from a
/// lower initiator, gave its own up to take part in 4's, dropped its own
/// ELECTION when it returned, and 4's died at 4, which no longer ran it.
/// Everyone waited an election timeout (2 s) instead of a few
/// milliseconds: about one run in 14 of the end-to-end test, and about one
/// seed in five here. GOODBYEs arrive 0-5 ms apart, ring hops take 0-3 ms.
#[test]
fn ring_hands_over_within_a_few_ack_timeouts_in_every_order() {
    let bound = 3 * Config::DEFAULT_ACK_TIMEOUT;
    let mut slowest = Duration::ZERO;
    for_each_seed("ring_failover_after_hand_over", |seed| {
        let took = hand_over(seed);
        slowest = slowest.max(took);
        assert!(took <= bound, "hand-over took {took:?}, over {bound:?}");
    });
    eprintln!("ring_failover_after_hand_over: slowest hand-over {slowest:?} (bound {bound:?})");
}
