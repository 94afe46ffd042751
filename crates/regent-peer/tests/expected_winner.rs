//! Invariant: the leader the nodes agree on once the faults end is the one
//! the algorithm promises: the highest live id for Bully and Ring, the
//! lowest for lowest-ID. Every node is up after healing, so that is the
//! highest (lowest) configured id.

use std::time::Duration;

use regent_peer::sim::{Scenario, for_each_seed};
use regent_peer::{Bully, Config, LowestId, Machine, NodeId, Ring};
use tokio::time::Instant;

const CHAOS: Duration = Duration::from_secs(5);
const MEAN_GAP: Duration = Duration::from_millis(200);
/// Longer than any agreement bound in `agreement_after_heal.rs`, plus a
/// hold.
const SETTLE: Duration = Duration::from_secs(3);

fn run<M: Machine + 'static>(
    test: &str,
    new: fn(Config, Instant) -> M,
    expected: fn(&[NodeId]) -> NodeId,
) {
    for_each_seed(test, |seed| {
        let sc = Scenario::random(seed);
        let mut sim = sc.sim(seed, new);
        sim.chaos(CHAOS, MEAN_GAP, sc.delays);
        sim.calm(sc.delays);
        let settled = sim.settle(SETTLE).expect("the nodes agree");
        assert_eq!(settled.leader.id, expected(&sc.ids), "ids {:?}", sc.ids);
    });
}

fn highest(ids: &[NodeId]) -> NodeId {
    *ids.iter().max().expect("members")
}

fn lowest(ids: &[NodeId]) -> NodeId {
    *ids.iter().min().expect("members")
}

#[test]
fn lowest_id_elects_the_lowest() {
    run("expected_winner -- lowest_id", LowestId::new, lowest);
}

#[test]
fn bully_elects_the_highest() {
    run("expected_winner -- bully", Bully::new, highest);
}

#[test]
fn ring_elects_the_highest() {
    run("expected_winner -- ring", Ring::new, highest);
}
