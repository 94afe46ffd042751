//! Invariant: once the faults end (partitions healed, every node up, the
//! network reliable), all live nodes agree on one leader within a bound, and
//! keep agreeing.
//!
//! The bound is `failure_timeout` (every node detects a dead or stale
//! leader, and a restarted lowest-ID node warms up) + the longest election
//! the algorithm's own timeouts allow + the time for the result to reach
//! everyone:
//!
//! * lowest-ID: no election; two heartbeat intervals;
//! * Bully: `answer_timeout + coordinator_timeout`; two heartbeat
//!   intervals;
//! * Ring: `election_timeout` (an election lost before the healing is
//!   started again); two trips round the ring, ELECTION and COORDINATOR, at
//!   the network's longest delay (`2 x n x max_delay`).
//!
//! In the scenario (heartbeat 100 ms, failure timeout 400 ms, answer 60 ms,
//! coordinator 300 ms, ack 50 ms, delays 1-20 ms after healing and up to
//! 200 ms before it, 3 to 7 members): lowest-ID 600 ms, Bully 960 ms,
//! Ring 0.82-1.38 s. Agreement must then hold for two more failure
//! timeouts.

use std::time::Duration;

use regent_peer::sim::{Scenario, for_each_seed};
use regent_peer::{Bully, Config, LowestId, Machine, Ring};
use tokio::time::Instant;

const CHAOS: Duration = Duration::from_secs(5);
const MEAN_GAP: Duration = Duration::from_millis(200);

fn run<M: Machine + 'static>(
    test: &str,
    new: fn(Config, Instant) -> M,
    election_and_spread: fn(&Scenario) -> Duration,
) {
    let mut slowest = Duration::ZERO;
    for_each_seed(test, |seed| {
        let sc = Scenario::random(seed);
        let bound = sc.failure_timeout + election_and_spread(&sc);
        let mut sim = sc.sim(seed, new);
        sim.chaos(CHAOS, MEAN_GAP, sc.delays);
        sim.calm(sc.delays);
        let Some(settled) = sim.settle(bound + 2 * sc.failure_timeout) else {
            panic!(
                "no agreement after healing: views {:?}, leaders {:?}",
                sim.views(),
                sim.leaders()
            );
        };
        slowest = slowest.max(settled.took);
        assert!(
            settled.took <= bound,
            "agreement on {:?} took {:?}, over the bound of {bound:?}",
            settled.leader,
            settled.took
        );
    });
    eprintln!("{test}: slowest agreement after healing: {slowest:?}");
}

#[test]
fn lowest_id() {
    run("agreement_after_heal -- lowest_id", LowestId::new, |sc| {
        2 * sc.heartbeat_interval
    });
}

#[test]
fn bully() {
    run("agreement_after_heal -- bully", Bully::new, |sc| {
        sc.answer_timeout + sc.coordinator_timeout + 2 * sc.heartbeat_interval
    });
}

#[test]
fn ring() {
    run("agreement_after_heal -- ring", Ring::new, |sc| {
        let n = u32::try_from(sc.ids.len()).expect("a few members");
        let election_timeout = sc.config(sc.ids[0]).build().unwrap().election_timeout();
        election_timeout + 2 * n * sc.delays.1
    });
}
