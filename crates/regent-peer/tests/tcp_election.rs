//! Over real TCP on 127.0.0.1, three nodes of each algorithm elect the
//! expected leader, and every node's view names it in the same term.

mod common;

use common::{Algorithm, Timing, first_leader, group, init_tracing};
use regent_peer::NodeId;

async fn elects(algorithm: Algorithm, expected: u64) {
    init_tracing();
    let nodes = group(algorithm, &[1, 2, 3], Timing::FAST).await;
    let term = first_leader(&nodes, NodeId(expected), Timing::FAST).await;
    assert_eq!(term.id, NodeId(expected));
    let leader = nodes[&NodeId(expected)].view().borrow().leading;
    assert_eq!(
        leader,
        Some(term.token()),
        "the leader holds its term's token"
    );
    for (id, node) in &nodes {
        if *id != NodeId(expected) {
            assert_eq!(node.view().borrow().leading, None, "{id:?} does not lead");
        }
    }
    for node in nodes.into_values() {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowest_id_elects_the_lowest_and_every_view_agrees() {
    elects(Algorithm::LowestId, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bully_elects_the_highest_and_every_view_agrees() {
    elects(Algorithm::Bully, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ring_elects_the_highest_and_every_view_agrees() {
    elects(Algorithm::Ring, 3).await;
}
