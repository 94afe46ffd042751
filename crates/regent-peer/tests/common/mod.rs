//! A group of real nodes on 127.0.0.1 for the TCP tests: listeners bound
//! to port 0 first, so that every node knows every address before any
//! starts; waits on view and counter changes, never on sleeps.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use regent_peer::codec::Secret;
use regent_peer::net::{self, Counters, Node, NodeOptions, View};
use regent_peer::{Bully, Config, Leader, LowestId, NodeId, Ring};
use tokio::sync::watch;
use tokio::time::{Instant, timeout};

/// How long any wait for an event may take before the test fails: far
/// above what the events need, far below the test's budget.
pub const PATIENCE: Duration = Duration::from_secs(5);

pub const SECRET: &[u8] = b"regent-peer tcp test secret";

pub fn secret() -> Secret {
    Secret::new(SECRET).expect("long enough")
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    LowestId,
    Bully,
    Ring,
}

/// The machines' timings: short heartbeats, and a failure timeout the test
/// chooses.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub heartbeat: Duration,
    pub failure: Duration,
}

impl Timing {
    pub const FAST: Timing = Timing {
        heartbeat: Duration::from_millis(50),
        failure: Duration::from_millis(300),
    };
}

pub fn config(id: u64, members: &[u64], timing: Timing) -> Config {
    Config::builder(NodeId(id), members.iter().copied().map(NodeId))
        .heartbeat_interval(timing.heartbeat)
        .failure_timeout(timing.failure)
        .answer_timeout(Duration::from_millis(100))
        .coordinator_timeout(Duration::from_millis(300))
        .ack_timeout(Duration::from_millis(100))
        .build()
        .expect("valid config")
}

/// Transport settings with short timeouts.
pub fn options(
    listener: std::net::TcpListener,
    addrs: &BTreeMap<NodeId, SocketAddr>,
    secret: Secret,
) -> NodeOptions {
    NodeOptions::builder(listener, addrs.clone(), secret)
        .io_timeout(Duration::from_millis(300))
        .idle_timeout(Duration::from_secs(3))
        .reconnect_backoff(Duration::from_millis(20), Duration::from_millis(200))
        .build()
        .expect("valid options")
}

pub fn bind(
    ids: &[u64],
) -> (
    BTreeMap<NodeId, std::net::TcpListener>,
    BTreeMap<NodeId, SocketAddr>,
) {
    let mut listeners = BTreeMap::new();
    let mut addrs = BTreeMap::new();
    for &id in ids {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        addrs.insert(NodeId(id), l.local_addr().expect("local addr"));
        listeners.insert(NodeId(id), l);
    }
    (listeners, addrs)
}

pub async fn start(
    algorithm: Algorithm,
    id: u64,
    members: &[u64],
    timing: Timing,
    options: NodeOptions,
) -> Node {
    let config = config(id, members, timing);
    let now = Instant::now();
    let started = match algorithm {
        Algorithm::LowestId => net::start(LowestId::new(config, now), options).await,
        Algorithm::Bully => net::start(Bully::new(config, now), options).await,
        Algorithm::Ring => net::start(Ring::new(config, now), options).await,
    };
    started.expect("node starts")
}

/// Starts every member of `members` (all with the test secret).
pub async fn group(
    algorithm: Algorithm,
    members: &[u64],
    timing: Timing,
) -> BTreeMap<NodeId, Node> {
    let (mut listeners, addrs) = bind(members);
    let mut nodes = BTreeMap::new();
    for &id in members {
        let listener = listeners.remove(&NodeId(id)).expect("bound");
        let node = start(
            algorithm,
            id,
            members,
            timing,
            options(listener, &addrs, secret()),
        )
        .await;
        nodes.insert(NodeId(id), node);
    }
    nodes
}

/// Fails the test if `what` does not happen within [`PATIENCE`].
pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    within_for(PATIENCE, what, f).await
}

/// Fails the test if `what` does not happen within `patience`.
pub async fn within_for<T>(patience: Duration, what: &str, f: impl Future<Output = T>) -> T {
    match timeout(patience, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {patience:?} waiting for {what}"),
    }
}

/// Waits until the view of `rx` satisfies `pred`; returns it.
pub async fn view_until(
    what: &str,
    rx: &mut watch::Receiver<View>,
    mut pred: impl FnMut(&View) -> bool,
) -> View {
    within(what, async {
        *rx.wait_for(|v| pred(v))
            .await
            .unwrap_or_else(|_| panic!("the node stopped while waiting for {what}"))
    })
    .await
}

/// Waits until the counters of `node` satisfy `pred`; returns them.
pub async fn counters_until(
    what: &str,
    node: &Node,
    mut pred: impl FnMut(&Counters) -> bool,
) -> Counters {
    let mut rx = node.counters();
    within(what, async {
        *rx.wait_for(|c| pred(c))
            .await
            .unwrap_or_else(|_| panic!("the node stopped while waiting for {what}"))
    })
    .await
}

/// Waits until `expected` leads and every node in `nodes` names it, in the
/// same term; returns that term.
pub async fn agreed_leader(nodes: &BTreeMap<NodeId, Node>, expected: NodeId) -> Leader {
    agreed_leader_within(PATIENCE, nodes, expected).await
}

/// The first election of a group: lowest-ID and Bully wait a failure
/// timeout before a first claim, so the patience covers it.
pub async fn first_leader(
    nodes: &BTreeMap<NodeId, Node>,
    expected: NodeId,
    timing: Timing,
) -> Leader {
    agreed_leader_within(PATIENCE + timing.failure, nodes, expected).await
}

/// [`agreed_leader`], with the patience given.
pub async fn agreed_leader_within(
    patience: Duration,
    nodes: &BTreeMap<NodeId, Node>,
    expected: NodeId,
) -> Leader {
    within_for(
        patience,
        &format!("every node to follow {expected:?}"),
        async {
            let mut leader_rx = nodes[&expected].view();
            'again: loop {
                let view = *leader_rx
                    .wait_for(|v| v.leading.is_some())
                    .await
                    .expect("the expected leader runs");
                let term = view.leader.expect("a leader names itself");
                for node in nodes.values() {
                    let mut rx = node.view();
                    // A newer term elsewhere means the group has moved on:
                    // start over from the leader's view.
                    let seen = *rx
                        .wait_for(|v| v.leader.is_some_and(|l| l.epoch >= term.epoch))
                        .await
                        .expect("the node runs");
                    if seen.leader != Some(term) {
                        let _ = leader_rx.changed().await;
                        continue 'again;
                    }
                }
                if leader_rx.borrow().leader == Some(term) {
                    return term;
                }
            }
        },
    )
    .await
}

/// Waits until the node at the other end closes `stream` (anything it
/// sends is ignored; a node never sends on an inbound connection).
pub async fn closed_by_node(what: &str, stream: &mut tokio::net::TcpStream) {
    use tokio::io::AsyncReadExt;
    within(what, async {
        let mut buf = [0u8; 64];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
}

/// Records every view `node` publishes until it stops.
pub fn record_views(node: &Node) -> tokio::task::JoinHandle<Vec<View>> {
    let mut rx = node.view();
    tokio::spawn(async move {
        let mut seen = vec![*rx.borrow_and_update()];
        while rx.changed().await.is_ok() {
            seen.push(*rx.borrow_and_update());
        }
        seen
    })
}
