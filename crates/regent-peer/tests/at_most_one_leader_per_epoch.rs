//! Invariant: no two different nodes ever claim leadership in the same
//! epoch, whatever the faults: crashes, restarts, partitions, loss,
//! duplication, delay and reordering. Every claim of every node after every
//! step of the simulation is recorded and checked.
//!
//! That someone led at all is checked after the faults if nobody led
//! during them: chaos alone may leave no node up long enough to lead (seed
//! 8064732056802320130, lowest-ID: the one node up for a failure timeout
//! still heard from lower members until it crashed, and all four were down
//! from 1.7 s to the end).

use std::time::Duration;

use regent_peer::sim::{Scenario, for_each_seed};
use regent_peer::{Bully, Config, LowestId, Machine, Ring};
use tokio::time::Instant;

const CHAOS: Duration = Duration::from_secs(6);
const MEAN_GAP: Duration = Duration::from_millis(200);
/// How long a group in which nobody led during the chaos runs once the
/// faults end, before someone must have led: the slowest agreement
/// `agreement_after_heal.rs` allows (Ring, 1.38 s), with room.
const CALM: Duration = Duration::from_secs(3);

fn run<M: Machine + 'static>(test: &str, new: fn(Config, Instant) -> M) {
    for_each_seed(test, |seed| {
        let sc = Scenario::random(seed);
        let mut sim = sc.sim(seed, new);
        sim.chaos(CHAOS, MEAN_GAP, sc.delays);
        if sim.claims().is_empty() {
            sim.calm(sc.delays);
            sim.run_for(CALM);
        }
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
