//! Invariant: no two different nodes ever claim leadership in the same
//! epoch, whatever the faults: crashes, restarts, partitions, loss,
//! duplication, delay and reordering. Every claim of every node after every
//! step of the simulation is recorded and checked.

use std::time::Duration;

use regent_peer::sim::{Scenario, for_each_seed};
use regent_peer::{Bully, Config, LowestId, Machine, Ring};
use tokio::time::Instant;

const CHAOS: Duration = Duration::from_secs(6);
const MEAN_GAP: Duration = Duration::from_millis(200);

fn run<M: Machine + 'static>(test: &str, new: fn(Config, Instant) -> M) {
    for_each_seed(test, |seed| {
        let sc = Scenario::random(seed);
        let mut sim = sc.sim(seed, new);
        sim.chaos(CHAOS, MEAN_GAP, sc.delays);
        assert!(!sim.claims().is_empty(), "nobody ever led");
        assert_eq!(sim.conflicts(), &[], "two leaders in one epoch");
    });
}

#[test]
fn lowest_id() {
    run("at_most_one_leader_per_epoch -- lowest_id", LowestId::new);
}

#[test]
fn bully() {
    run("at_most_one_leader_per_epoch -- bully", Bully::new);
}

#[test]
fn ring() {
    run("at_most_one_leader_per_epoch -- ring", Ring::new);
}
