//! A leader that stops without a word (aborted: no GOODBYE) is succeeded
//! only once the peers' failure timeout has passed.

mod common;

use std::time::Duration;

use common::{Algorithm, Timing, agreed_leader, first_leader, group, init_tracing, view_until};
use regent_peer::NodeId;
use tokio::time::Instant;

const TIMING: Timing = Timing {
    heartbeat: Duration::from_millis(50),
    failure: Duration::from_millis(600),
};

async fn leader_aborted(algorithm: Algorithm, leader: u64, successor: u64) {
    init_tracing();
    let mut nodes = group(algorithm, &[1, 2, 3], TIMING).await;
    let first = first_leader(&nodes, NodeId(leader), TIMING).await;

    let aborted = nodes.remove(&NodeId(leader)).expect("started");
    let mut successor_view = nodes[&NodeId(successor)].view();
    let t0 = Instant::now();
    aborted.abort().await;
    view_until("the successor to lead", &mut successor_view, |v| {
        v.leading.is_some()
    })
    .await;
    let took = t0.elapsed();
    let term = agreed_leader(&nodes, NodeId(successor)).await;
    eprintln!("{algorithm:?}: successor leads {took:?} after abort()");
    assert!(term.epoch > first.epoch);
    // The last heartbeat came at most one interval before the abort.
    assert!(
        took >= TIMING.failure - TIMING.heartbeat,
        "took {took:?}: an aborted leader must be found dead by the failure timeout ({:?})",
        TIMING.failure
    );
    for node in nodes.into_values() {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowest_id_leader_aborted_is_succeeded_after_the_failure_timeout() {
    leader_aborted(Algorithm::LowestId, 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bully_leader_aborted_is_succeeded_after_the_failure_timeout() {
    leader_aborted(Algorithm::Bully, 3, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ring_leader_aborted_is_succeeded_after_the_failure_timeout() {
    leader_aborted(Algorithm::Ring, 3, 2).await;
}
