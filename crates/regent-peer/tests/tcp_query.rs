//! The view query over TCP: any holder of the secret asks a running node
//! for its view and gets the leader and its token, from every member; a
//! query with another secret, a stale or repeated one, one for another
//! node, are dropped unanswered and counted; a querier that never reads is
//! dropped without stalling the node; queriers have places of their own;
//! a watch sees a new leader as soon as its node does.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use common::{
    Algorithm, PATIENCE, Timing, agreed_leader, bind, closed_by_node, config, counters_until,
    first_leader, group, init_tracing, secret, within, within_for,
};
use regent_core::ElectionName;
use regent_peer::codec::{self, Control, Envelope, Payload, Secret};
use regent_peer::net::{self, NodeOptions, QueryError, SeqClock};
use regent_peer::{Bully, NodeId, Quorum, bully};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

/// How long a querier waits for an answer in these tests.
const ANSWER: Duration = Duration::from_secs(2);

fn query_frame(to: NodeId, seq: u64, wait: Duration) -> Vec<u8> {
    let query = Envelope {
        from: NodeId::ANY,
        to,
        seq,
        message: Control::Query { wait },
    };
    codec::encode(&secret(), &query).expect("encodes")
}

/// Reads one frame off `stream` and decodes it as the answer to a query.
async fn read_answer(stream: &mut TcpStream) -> Envelope<Control> {
    within("an answer", async {
        let mut prefix = [0u8; 4];
        stream.read_exact(&mut prefix).await.expect("a prefix");
        let len = codec::frame_len(prefix).expect("a good prefix");
        let mut frame = vec![0u8; 4 + len];
        frame[..4].copy_from_slice(&prefix);
        stream.read_exact(&mut frame[4..]).await.expect("a frame");
        codec::decode(&secret(), &frame).expect("an authenticated answer")
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_answers_with_the_leader_and_its_token() {
    init_tracing();
    let nodes = group(Algorithm::Bully, &[1, 2, 3], Timing::FAST).await;
    let term = first_leader(&nodes, NodeId(3), Timing::FAST).await;
    for (&id, node) in &nodes {
        let addr = node.local_addr();
        let view = net::query(addr, None, &secret(), ANSWER)
            .await
            .unwrap_or_else(|e| panic!("node {id} at {addr}: {e}"));
        assert_eq!(view.node, id);
        assert_eq!(view.leader, Some(term), "node {id}");
        assert_eq!(view.leader.map(|l| l.token()), Some(term.token()));
        assert_eq!(
            view.leading,
            (id == NodeId(3)).then(|| term.token()),
            "only the leader leads"
        );
        assert_eq!(view.election.as_str(), NodeOptions::DEFAULT_ELECTION);
        assert_eq!(view.algorithm, regent_peer::Algorithm::Bully);
        assert!(!view.quorum && !view.stopped);
        assert_eq!(view.members, 3);
        assert_eq!(view.lease_remaining, None, "no lease outside quorum mode");
        // Naming the node expected there works too.
        let named = net::query(addr, Some(id), &secret(), ANSWER)
            .await
            .expect("answered");
        assert_eq!(named.leader, Some(term));
        counters_until("two queries to be counted", node, |c| {
            c.queries_answered == 2
        })
        .await;
    }
    // A query for another node than the one at the address goes
    // unanswered, and the node counts it.
    let addr = nodes[&NodeId(1)].local_addr();
    let wrong = net::query(addr, Some(NodeId(2)), &secret(), ANSWER).await;
    assert!(
        matches!(wrong, Err(QueryError::NoAnswer { addr: a, .. }) if a == addr),
        "{wrong:?}"
    );
    counters_until("the misaddressed query", &nodes[&NodeId(1)], |c| {
        c.misaddressed == 1
    })
    .await;
    for node in nodes.into_values() {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_with_another_secret_gets_no_answer_and_is_counted() {
    init_tracing();
    let nodes = group(Algorithm::Bully, &[1, 2, 3], Timing::FAST).await;
    first_leader(&nodes, NodeId(3), Timing::FAST).await;
    let node = &nodes[&NodeId(2)];
    let wrong = Secret::new(*b"not the group's secret at all").expect("long enough");
    let asked = Instant::now();
    let answer = net::query(node.local_addr(), None, &wrong, ANSWER).await;
    let err = answer.expect_err("no answer without the secret");
    assert!(matches!(err, QueryError::NoAnswer { .. }), "{err:?}");
    assert!(
        err.to_string().contains("is the secret the group's?"),
        "{err}"
    );
    // The node drops the connection at once; the querier need not wait.
    assert!(asked.elapsed() < ANSWER, "took {:?}", asked.elapsed());
    let counted = counters_until("the query to be refused", node, |c| c.unauthenticated == 1).await;
    assert_eq!(counted.queries_answered, 0);
    for node in nodes.into_values() {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_repeated_and_misaddressed_queries_are_refused() {
    init_tracing();
    let nodes = group(Algorithm::Bully, &[1, 2, 3], Timing::FAST).await;
    let term = first_leader(&nodes, NodeId(3), Timing::FAST).await;
    let node = &nodes[&NodeId(1)];
    let addr = node.local_addr();

    // Recorded a minute ago.
    let a_minute_ago = SeqClock::new().next(SystemTime::now() - Duration::from_secs(60));
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&query_frame(NodeId(1), a_minute_ago, Duration::ZERO))
        .await
        .expect("write");
    closed_by_node("the stale query's connection to be dropped", &mut s).await;
    counters_until("the stale query", node, |c| c.outside_clock_window == 1).await;

    // A fresh query is answered; the same bytes again are not.
    let seq = SeqClock::new().next(SystemTime::now());
    let fresh = query_frame(NodeId::ANY, seq, Duration::ZERO);
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&fresh).await.expect("write");
    let answer = read_answer(&mut s).await;
    match answer.message {
        Control::View { query_seq, view } => {
            assert_eq!(query_seq, seq);
            assert_eq!(view.leader, Some(term));
        }
        other => panic!("not a view: {other:?}"),
    }
    assert_eq!((answer.from, answer.to), (NodeId(1), NodeId::ANY));
    s.write_all(&fresh).await.expect("write");
    closed_by_node("the repeated query's connection to be dropped", &mut s).await;
    counters_until("the repeated query", node, |c| c.replayed == 1).await;

    // For another node.
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let seq = SeqClock::new().next(SystemTime::now());
    s.write_all(&query_frame(NodeId(2), seq, Duration::ZERO))
        .await
        .expect("write");
    closed_by_node("the misaddressed query's connection to be dropped", &mut s).await;
    counters_until("the misaddressed query", node, |c| c.misaddressed == 1).await;

    // A querier's connection carries queries only.
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut clock = SeqClock::new();
    s.write_all(&query_frame(
        NodeId(1),
        clock.next(SystemTime::now()),
        Duration::ZERO,
    ))
    .await
    .expect("write");
    read_answer(&mut s).await;
    let member_frame = Envelope {
        from: NodeId(2),
        to: NodeId(1),
        seq: clock.next(SystemTime::now()),
        message: Payload::Message(bully::Message::Stale { epoch: term.epoch }),
    };
    s.write_all(&codec::encode(&secret(), &member_frame).expect("encodes"))
        .await
        .expect("write");
    closed_by_node("the mixed connection to be dropped", &mut s).await;
    let counted = counters_until("the mixed connection", node, |c| c.misaddressed == 2).await;
    assert_eq!(counted.queries_answered, 2);
    assert_eq!(counted.unauthenticated + counted.malformed, 0);

    assert_eq!(
        agreed_leader(&nodes, NodeId(3)).await,
        term,
        "nothing moved"
    );
    for node in nodes.into_values() {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_querier_that_does_not_read_is_dropped_and_does_not_stall_the_node() {
    init_tracing();
    let mut nodes = group(Algorithm::Bully, &[1, 2, 3], Timing::FAST).await;
    first_leader(&nodes, NodeId(3), Timing::FAST).await;
    let addr = nodes[&NodeId(1)].local_addr();

    // A querier with a small receive buffer that sends queries as fast as
    // it can and never reads an answer.
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    let flood = socket.connect(addr).await.expect("connect");
    let flooding = Instant::now();
    let flooder = tokio::spawn(async move {
        let mut flood = flood;
        let mut clock = SeqClock::new();
        let mut sent = 0u32;
        // Bounded in count and time; ends when the node drops it.
        while sent < 200_000 && flooding.elapsed() < Duration::from_secs(30) {
            let frame = query_frame(NodeId(1), clock.next(SystemTime::now()), Duration::ZERO);
            match tokio::time::timeout(Duration::from_secs(1), flood.write_all(&frame)).await {
                Ok(Ok(())) => sent += 1,
                Ok(Err(_)) => break,
                Err(_) => {} // the node reads at its pace: try again
            }
        }
        sent
    });

    // Meanwhile the node answers others, and the election goes on.
    let view = net::query(addr, None, &secret(), ANSWER)
        .await
        .expect("answered while flooded");
    assert_eq!(view.leader.map(|l| l.id), Some(NodeId(3)));
    let leader = nodes.remove(&NodeId(3)).expect("3 runs");
    leader.abort().await;
    let term = agreed_leader(&nodes, NodeId(2)).await;
    let view = net::query(addr, None, &secret(), ANSWER)
        .await
        .expect("answered while flooded");
    assert_eq!(view.leader, Some(term));

    let dropped = within_for(
        Duration::from_secs(30),
        "the flooder to be dropped",
        async {
            let mut rx = nodes[&NodeId(1)].counters();
            *rx.wait_for(|c| c.queriers_dropped == 1)
                .await
                .expect("the node runs")
        },
    )
    .await;
    let took = flooding.elapsed();
    let sent = within("the flooder to end", flooder)
        .await
        .expect("flooder");
    eprintln!(
        "a querier that never reads: dropped after {took:?}, {sent} queries sent, {} answered",
        dropped.queries_answered
    );
    for node in nodes.into_values() {
        node.abort().await;
    }
}

/// Options with a cap of one querier.
fn options_with_one_querier(
    listener: std::net::TcpListener,
    addrs: &BTreeMap<NodeId, SocketAddr>,
) -> NodeOptions {
    NodeOptions::builder(listener, addrs.clone(), secret())
        .io_timeout(Duration::from_millis(300))
        .idle_timeout(Duration::from_secs(3))
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(200))
        .max_queriers(1)
        .election(ElectionName::new("billing").expect("valid"))
        .build()
        .expect("valid options")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_the_new_leader_and_queriers_have_places_of_their_own() {
    init_tracing();
    let members = [1, 2, 3];
    let (mut listeners, addrs) = bind(&members);
    let mut nodes = BTreeMap::new();
    for id in members {
        let listener = listeners.remove(&NodeId(id)).expect("bound");
        let opts = options_with_one_querier(listener, &addrs);
        nodes.insert(
            NodeId(id),
            common::start(Algorithm::Bully, id, &members, Timing::FAST, opts).await,
        );
    }
    let term = first_leader(&nodes, NodeId(3), Timing::FAST).await;
    let addr = nodes[&NodeId(1)].local_addr();
    let mut watch = net::watch_view(addr, Some(NodeId(1)), secret(), ANSWER);
    let first = within("the first view", watch.next())
        .await
        .expect("a view");
    assert_eq!(first.leader, Some(term));
    assert_eq!(first.election.as_str(), "billing");

    // The watch's query is held by the node, and holds its only place.
    let next = tokio::spawn(async move {
        let view = watch.next().await;
        (view, Instant::now())
    });
    let refused = net::query(addr, None, &secret(), ANSWER).await;
    assert!(
        matches!(refused, Err(QueryError::NoAnswer { .. })),
        "{refused:?}"
    );
    counters_until(
        "the second querier to be refused",
        &nodes[&NodeId(1)],
        |c| c.connections_refused == 1,
    )
    .await;

    // The members' connections are not queriers': the election goes on.
    let leader = nodes.remove(&NodeId(3)).expect("3 runs");
    let left = Instant::now();
    leader.leave().await;
    let term = agreed_leader(&nodes, NodeId(2)).await;
    let seen_by_node = Instant::now();
    let (view, at) = within("the watch to see a change", next)
        .await
        .expect("the watch task");
    let mut view = view.expect("a view");
    // It may first see the group without a leader.
    let mut watch_at = at;
    if view.leader != Some(term) {
        let addr = nodes[&NodeId(1)].local_addr();
        let mut watch = net::watch_view(addr, None, secret(), ANSWER);
        view = within("the new leader", async {
            loop {
                let v = watch.next().await.expect("a view");
                if v.leader == Some(term) {
                    return v;
                }
            }
        })
        .await;
        watch_at = Instant::now();
    }
    assert_eq!(view.leader, Some(term));
    eprintln!(
        "watch: leader left, new term agreed after {:?}, seen by the watch after {:?}",
        seen_by_node - left,
        watch_at.saturating_duration_since(left)
    );
    assert!(watch_at.saturating_duration_since(left) < PATIENCE);
    for node in nodes.into_values() {
        node.abort().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_quorum_mode_the_leader_reports_its_lease() {
    init_tracing();
    let members = [1, 2, 3];
    let (mut listeners, addrs) = bind(&members);
    let mut nodes = BTreeMap::new();
    for id in members {
        let listener = listeners.remove(&NodeId(id)).expect("bound");
        let opts = common::options(listener, &addrs, secret());
        let c = config(id, &members, Timing::FAST);
        let now = Instant::now();
        let machine = Quorum::new(c.clone(), now, Bully::new(c, now));
        nodes.insert(
            NodeId(id),
            net::start(machine, opts).await.expect("node starts"),
        );
    }
    let mut view = nodes[&NodeId(3)].view();
    common::view_until("3 to lead with a lease", &mut view, |v| {
        v.lease_until.is_some()
    })
    .await;
    let lease = config(3, &members, Timing::FAST).lease();
    let leader = net::query(nodes[&NodeId(3)].local_addr(), None, &secret(), ANSWER)
        .await
        .expect("answered");
    assert!(leader.quorum);
    assert!(leader.leading.is_some());
    let remaining = leader.lease_remaining.expect("the leader's lease");
    assert!(remaining <= lease, "{remaining:?} > {lease:?}");
    let follower = net::query(nodes[&NodeId(1)].local_addr(), None, &secret(), ANSWER)
        .await
        .expect("answered");
    assert!(follower.quorum);
    assert_eq!(follower.lease_remaining, None);
    assert_eq!(follower.leading, None);
    for node in nodes.into_values() {
        node.abort().await;
    }
}
