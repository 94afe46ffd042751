//! A leader that leaves gracefully (GOODBYE) is succeeded well before the
//! failure timeout: the peers take it for dead at once. The failure
//! timeout is long (5 s), so the bound tests the mechanism, not speed.

mod common;

use std::time::Duration;

use common::{Algorithm, Timing, agreed_leader, first_leader, group, init_tracing, view_until};
use regent_peer::NodeId;
use tokio::time::Instant;

const TIMING: Timing = Timing {
    heartbeat: Duration::from_millis(50),
    failure: Duration::from_secs(5),
};

async fn leader_leaves(algorithm: Algorithm, leader: u64, successor: u64) {
    init_tracing();
    let mut nodes = group(algorithm, &[1, 2, 3], TIMING).await;
    let first = first_leader(&nodes, NodeId(leader), TIMING).await;

    let leaving = nodes.remove(&NodeId(leader)).expect("started");
    let mut leaver_view = leaving.view();
    let mut successor_view = nodes[&NodeId(successor)].view();
    let t0 = Instant::now();
    let left = tokio::spawn(leaving.leave());
    let led = view_until("the successor to lead", &mut successor_view, |v| {
        v.leading.is_some()
    })
    .await;
    let took = t0.elapsed();
    assert!(
        leaver_view.borrow_and_update().stopped,
        "the leaver showed it leads nothing before its successor led"
    );
    let term = agreed_leader(&nodes, NodeId(successor)).await;
    let agreed = t0.elapsed();
    eprintln!("{algorithm:?}: successor leads {took:?} after leave(), all agree after {agreed:?}");
    assert_eq!(led.leader, Some(term));
    assert!(term.epoch > first.epoch, "a new term");
    assert!(
        agreed < TIMING.failure / 5,
        "took {agreed:?}: the failure timeout ({:?}) must not be what elected the successor",
        TIMING.failure
    );
    left.await.expect("leave completes");
    assert!(leaver_view.borrow().stopped);
    assert_eq!(leaver_view.borrow().leading, None);
    for node in nodes.into_values() {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowest_id_leader_that_leaves_is_succeeded_well_before_the_failure_timeout() {
    leader_leaves(Algorithm::LowestId, 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bully_leader_that_leaves_is_succeeded_well_before_the_failure_timeout() {
    leader_leaves(Algorithm::Bully, 3, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ring_leader_that_leaves_is_succeeded_well_before_the_failure_timeout() {
    leader_leaves(Algorithm::Ring, 3, 2).await;
}
