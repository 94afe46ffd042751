//! Invariant: while a node runs, every term it claims has a larger epoch,
//! and so a larger fencing token, than the terms it claimed before, under
//! every fault. (Across a restart without persistence a node forgets its
//! epoch; then only the other nodes' memory keeps its claims growing: see
//! the crate docs.)

use std::time::Duration;

use regent_peer::sim::{Scenario, for_each_seed};
use regent_peer::{Bully, Config, LowestId, Machine, Ring};
use tokio::time::Instant;

const CHAOS: Duration = Duration::from_secs(4);
const MEAN_GAP: Duration = Duration::from_millis(200);

fn run<M: Machine + 'static>(test: &str, new: fn(Config, Instant) -> M) {
    for_each_seed(test, |seed| {
        let sc = Scenario::random(seed);
        let mut sim = sc.sim(seed, new);
        sim.chaos(CHAOS, MEAN_GAP, sc.delays);
        assert_eq!(sim.regressions(), &[], "a node's token went down");
    });
}

#[test]
fn lowest_id() {
    run("tokens_grow -- lowest_id", LowestId::new);
}

#[test]
fn bully() {
    run("tokens_grow -- bully", Bully::new);
}

#[test]
fn ring() {
    run("tokens_grow -- ring", Ring::new);
}
