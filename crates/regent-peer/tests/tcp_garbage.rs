//! What a stranger sends a node over TCP (garbage, an oversized length
//! prefix, a frame cut short, nothing at all, a flood of connections) is
//! dropped without disturbing the group: the connection is closed and
//! counted, the group keeps its leader in the same term, and the node
//! keeps taking its peers' frames.

mod common;

use std::collections::BTreeMap;

use common::{
    Algorithm, Timing, agreed_leader, closed_by_node, counters_until, first_leader, group,
    init_tracing, secret,
};
use regent_peer::codec::{self, Envelope, Payload};
use regent_peer::net::{Counters, Node, SeqClock};
use regent_peer::{Leader, NodeId, ring};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A Ring group led by 3, and the node attacked: 1, which gets the
/// leader's heartbeats.
async fn setup() -> (BTreeMap<NodeId, Node>, Leader) {
    init_tracing();
    let nodes = group(Algorithm::Ring, &[1, 2, 3], Timing::FAST).await;
    let term = first_leader(&nodes, NodeId(3), Timing::FAST).await;
    (nodes, term)
}

/// The group still has `term`, and node 1 still takes frames after the
/// attack.
async fn undisturbed(nodes: BTreeMap<NodeId, Node>, term: Leader) {
    let target = &nodes[&NodeId(1)];
    let after = target.counters().borrow().frames_accepted;
    counters_until("node 1 to take its peers' frames again", target, |c| {
        c.frames_accepted >= after + 5
    })
    .await;
    assert_eq!(
        agreed_leader(&nodes, NodeId(3)).await,
        term,
        "the same term"
    );
    for node in nodes.into_values() {
        node.abort().await;
    }
}

async fn attack(nodes: &BTreeMap<NodeId, Node>, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(nodes[&NodeId(1)].local_addr())
        .await
        .expect("connect");
    s.write_all(bytes).await.expect("write");
    s
}

async fn counted(nodes: &BTreeMap<NodeId, Node>, what: &str, f: impl FnMut(&Counters) -> bool) {
    counters_until(what, &nodes[&NodeId(1)], f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_dropped_and_the_group_keeps_its_leader() {
    let (nodes, term) = setup().await;
    // A plausible length prefix, then bytes no secret signed.
    let mut garbage = 96u32.to_be_bytes().to_vec();
    let mut rng = fastrand::Rng::with_seed(7);
    garbage.extend((0..96).map(|_| rng.u8(..)));
    let mut s = attack(&nodes, &garbage).await;
    closed_by_node("the garbage's connection to be dropped", &mut s).await;
    counted(&nodes, "the garbage to be refused", |c| {
        c.unauthenticated == 1
    })
    .await;
    undisturbed(nodes, term).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_length_prefix_is_dropped_and_the_group_keeps_its_leader() {
    let (nodes, term) = setup().await;
    let mut s = attack(&nodes, &[0xff, 0xff, 0xff, 0xff, 1, 2, 3]).await;
    closed_by_node("the oversized frame's connection to be dropped", &mut s).await;
    counted(&nodes, "the oversized frame to be refused", |c| {
        c.malformed == 1
    })
    .await;
    undisturbed(nodes, term).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_frame_is_dropped_and_the_group_keeps_its_leader() {
    let (nodes, term) = setup().await;
    // A real frame with the secret, cut short and left hanging.
    let envelope = Envelope {
        from: NodeId(2),
        to: NodeId(1),
        seq: SeqClock::new().next(std::time::SystemTime::now()),
        message: Payload::Message(ring::Message::Ack { hop: 0 }),
    };
    let frame = codec::encode(&secret(), &envelope).expect("encodes");
    let mut s = attack(&nodes, &frame[..frame.len() / 2]).await;
    closed_by_node("the stalled frame's connection to be dropped", &mut s).await;
    counted(&nodes, "the stalled frame to be refused", |c| {
        c.malformed == 1
    })
    .await;
    undisturbed(nodes, term).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_dropped_and_the_group_keeps_its_leader() {
    let (nodes, term) = setup().await;
    let mut s = attack(&nodes, &[]).await;
    closed_by_node("the silent connection to be dropped", &mut s).await;
    counted(&nodes, "the silence to be counted", |c| {
        c.silent_closed == 1
    })
    .await;
    undisturbed(nodes, term).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_connections_past_the_cap_is_refused_and_the_group_keeps_its_leader() {
    let (nodes, term) = setup().await;
    // The default cap is 4 per member: 12 for 3 members.
    let mut flood = Vec::new();
    for _ in 0..16 {
        flood.push(attack(&nodes, &[]).await);
    }
    counted(&nodes, "connections past the cap to be refused", |c| {
        c.connections_refused >= 4
    })
    .await;
    for s in &mut flood {
        closed_by_node("every flood connection to be dropped", s).await;
    }
    undisturbed(nodes, term).await;
}
