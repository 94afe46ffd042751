//! Invariant (quorum mode): when the leader stops (it crashes, is cut off
//! alone, or is paused for two leases), another node holds a lease within
//! a bound, on a reliable network.
//!
//! The bound, from the fault at `c`: the algorithm's own failover `F` (the
//! failure timeout and the longest election its timeouts allow, as in
//! `agreement_after_heal.rs`), or the promises the old leader holds
//! running out (`d + lease / (1 − clock_drift)`, `d` the longest delay),
//! whichever is later; then a heartbeat interval for an ask that missed
//! the end of the promises, and two delays for the grants to come back:
//! `max(F, d + lease / (1 − clock_drift)) + heartbeat_interval + 2d`.
//! As `lease ≤ failure_timeout`, `F` is mostly the later.
//!
//! For comparison, the failover of the algorithm alone after a crash is
//! measured too (printed, not checked: `agreement_after_heal.rs` bounds
//! it).

use std::time::Duration;

use regent_peer::sim::{Scenario, Sim, for_each_seed};
use regent_peer::{Bully, Config, LowestId, Machine, NodeId, Ring};
use tokio::time::Instant;

/// Long enough for every scenario to elect its first leader.
const SETTLE: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Crash,
    Isolate,
    Pause,
}

/// Lets the group elect, applies `fault` to the leader at a random instant,
/// runs for `within`, and returns how long after the fault another node's
/// leadership began, if it did.
fn failover<M: Machine>(sim: &mut Sim<M>, fault: Fault, within: Duration) -> Option<Duration> {
    sim.run_for(SETTLE);
    let first = sim.agreed_leader().expect("a leader").id;
    let wait = Duration::from_micros(sim.rng().u64(0..200_000));
    sim.run_for(wait);
    let at = sim.elapsed();
    let others: Vec<NodeId> = sim
        .ids()
        .iter()
        .copied()
        .filter(|&id| id != first)
        .collect();
    match fault {
        Fault::Crash => sim.crash(first),
        Fault::Isolate => sim.partition(&[others]),
        Fault::Pause => sim.pause(first, within),
    }
    sim.run_for(within);
    sim.tenures()
        .iter()
        .filter(|t| t.node != first && t.from >= at)
        .map(|t| t.from - at)
        .min()
}

fn run<M: Machine + 'static>(
    test: &str,
    new: fn(Config, Instant) -> M,
    election_and_spread: fn(&Scenario) -> Duration,
) {
    let mut slowest = [Duration::ZERO; 3];
    let mut plain = Duration::ZERO;
    for_each_seed(test, |seed| {
        let sc = Scenario::random(seed);
        let d = sc.delays.1;
        let algorithm = sc.failure_timeout + election_and_spread(&sc);
        let promises = d + sc.lease.div_f64(1.0 - sc.clock_drift);
        let bound = algorithm.max(promises) + sc.heartbeat_interval + 2 * d;
        let fault = [Fault::Crash, Fault::Isolate, Fault::Pause][(seed % 3) as usize];
        let mut sim = sc.quorum_sim(seed, new);
        let took = failover(&mut sim, fault, bound + sc.failure_timeout)
            .unwrap_or_else(|| panic!("no new leader after {fault:?} of the leader"));
        assert!(
            took <= bound,
            "{fault:?}: a new leader after {took:?}, over the bound of {bound:?}"
        );
        assert_eq!(sim.overlaps(), [], "two leaders at once");
        let slot = &mut slowest[fault as usize];
        *slot = (*slot).max(took);
        if fault == Fault::Crash {
            let mut alone = sc.sim(seed, new);
            let took = failover(&mut alone, fault, bound).expect("the algorithm alone fails over");
            plain = plain.max(took);
        }
    });
    eprintln!(
        "{test}: slowest failover in quorum mode after a crash {:?}, a cut {:?}, a pause {:?}; \
         the algorithm alone after a crash {plain:?}",
        slowest[0], slowest[1], slowest[2]
    );
}

#[test]
fn lowest_id() {
    run("quorum_failover_bound -- lowest_id", LowestId::new, |sc| {
        2 * sc.heartbeat_interval
    });
}

#[test]
fn bully() {
    run("quorum_failover_bound -- bully", Bully::new, |sc| {
        sc.answer_timeout + sc.coordinator_timeout + 2 * sc.heartbeat_interval
    });
}

#[test]
fn ring() {
    run("quorum_failover_bound -- ring", Ring::new, |sc| {
        let n = u32::try_from(sc.ids.len()).expect("a few members");
        let election_timeout = sc.config(sc.ids[0]).build().unwrap().election_timeout();
        election_timeout + 2 * n * sc.delays.1
    });
}
