//! Replayed frames are refused over TCP: a frame recorded long ago
//! (authenticated, but its `seq` outside the clock window) and a fresh
//! frame sent a second time are both refused, and the connection that
//! carried them is dropped. A fresh copy of the refused claim is then
//! accepted: the guard, not the claim, made the difference.

mod common;

use std::time::{Duration, SystemTime};

use common::{
    Algorithm, Timing, agreed_leader, bind, closed_by_node, counters_until, first_leader,
    init_tracing, options, secret, start, view_until,
};
use regent_peer::codec::{self, Envelope, Payload};
use regent_peer::net::SeqClock;
use regent_peer::{Epoch, NodeId, bully};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn frame(seq: u64, message: bully::Message) -> Vec<u8> {
    let envelope = Envelope {
        from: NodeId(4),
        to: NodeId(1),
        seq,
        message: Payload::Message(message),
    };
    codec::encode(&secret(), &envelope).expect("encodes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_and_repeated_frames_are_refused_over_tcp() {
    init_tracing();
    // Member 4 is configured but not running: the frames "from" it are
    // made here with the group's secret, as a recording would be.
    let members = [1, 2, 3, 4];
    let (mut listeners, addrs) = bind(&members);
    drop(listeners.remove(&NodeId(4)));
    let mut nodes = std::collections::BTreeMap::new();
    for id in [1, 2, 3] {
        let listener = listeners.remove(&NodeId(id)).expect("bound");
        let opts = options(listener, &addrs, secret());
        nodes.insert(
            NodeId(id),
            start(Algorithm::Bully, id, &members, Timing::FAST, opts).await,
        );
    }
    let term = first_leader(&nodes, NodeId(3), Timing::FAST).await;
    let target = &nodes[&NodeId(1)];
    let addr = target.local_addr();
    // Member 4's rank is 3: a term above the group's, as only 4 may claim.
    let claim = bully::Message::Coordinator {
        epoch: Epoch::new(term.epoch.round() + 1000, 3).expect("fits"),
    };

    // A claim recorded a minute ago.
    let a_minute_ago = SystemTime::now() - Duration::from_secs(60);
    let recorded = frame(SeqClock::new().next(a_minute_ago), claim.clone());
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&recorded).await.expect("write");
    closed_by_node("the recording's connection to be dropped", &mut s).await;
    counters_until("the recording to be refused", target, |c| {
        c.outside_clock_window == 1
    })
    .await;

    // A fresh, harmless frame, accepted; then the same bytes again.
    let fresh = frame(
        SeqClock::new().next(SystemTime::now()),
        bully::Message::Stale { epoch: Epoch::ZERO },
    );
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&fresh).await.expect("write");
    s.write_all(&fresh).await.expect("write");
    closed_by_node("the replay's connection to be dropped", &mut s).await;
    let counted = counters_until("the replay to be refused", target, |c| c.replayed == 1).await;
    assert_eq!(counted.outside_clock_window, 1);
    assert_eq!(counted.unauthenticated + counted.malformed, 0);

    // Nothing moved: node 1 follows 3 in the same term.
    assert_eq!(agreed_leader(&nodes, NodeId(3)).await, term);

    // Control: the same claim with a fresh seq is accepted and followed.
    let mut view = target.view();
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&frame(SeqClock::new().next(SystemTime::now()), claim))
        .await
        .expect("write");
    view_until("node 1 to follow the fresh claim", &mut view, |v| {
        v.leader.is_some_and(|l| l.id == NodeId(4))
    })
    .await;

    for node in nodes.into_values() {
        node.abort().await;
    }
}
