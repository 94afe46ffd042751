//! Messages per election against the textbook bounds, measured on a
//! reliable network with a fixed 5 ms delay, for 3 to 8 configured members.
//!
//! What is counted: every `Output::Send` a state machine emits after the
//! leader is crashed, by kind; one message is one destination (a broadcast
//! to k members is k messages), counted when sent, so a send to the dead
//! leader counts. Heartbeats are counted apart and left out of the
//! election's total. The group first settles with the highest (Bully,
//! Ring) or lowest (lowest-ID) id leading; then the leader is crashed, and
//! one chosen node has a shorter failure timeout than the others, so that
//! it alone notices first: the textbook's "one initiator".
//!
//! With n configured members (the crashed leader among them):
//!
//! | algorithm, case | ELECTION | ANSWER | COORDINATOR | ACK |
//! |---|---|---|---|---|
//! | Bully, best: the highest live node notices | 1 (to the dead leader) | 0 | n−2 | – |
//! | Bully, worst: the lowest node notices | n(n−1)/2 | (n−1)(n−2)/2 | n−2 | – |
//! | Ring, one initiator, m = n−1 live | m + 1 | – | m + 1 | 2m |
//! | lowest-ID | 0 | – | – | – |
//!
//! Bully's best case is the textbook's n−2 COORDINATORs plus the one
//! ELECTION the highest live node still sends to the dead leader before it
//! may announce; its worst case totals (n−1)² + n − 2, which is O(n²). Ring
//! is the textbook 2m hops among the m live members (m ELECTION, m
//! COORDINATOR) plus one unacknowledged attempt per message at the dead
//! member the ring skips, and an ACK per hop.

use std::time::Duration;

use regent_peer::sim::{Network, Sim};
use regent_peer::{Bully, Config, LowestId, Machine, NodeId, Ring};
use tokio::time::Instant;

const DELAY: Duration = Duration::from_millis(5);
const INTERVAL: Duration = Duration::from_millis(50);
const SLOW_TIMEOUT: Duration = Duration::from_millis(600);
const FAST_TIMEOUT: Duration = Duration::from_millis(200);

fn config(ids: &[NodeId], id: NodeId, fast: NodeId) -> Config {
    Config::builder(id, ids.iter().copied())
        .heartbeat_interval(INTERVAL)
        .failure_timeout(if id == fast {
            FAST_TIMEOUT
        } else {
            SLOW_TIMEOUT
        })
        .answer_timeout(Duration::from_millis(20))
        .coordinator_timeout(Duration::from_millis(200))
        .ack_timeout(Duration::from_millis(20))
        .build()
        .expect("valid")
}

/// Settles the group, crashes `leader`, and counts the messages until
/// every live node agrees again. Returns the counts (heartbeats apart) and
/// the failover time.
fn failover<M: Machine + 'static>(
    n: u64,
    fast: u64,
    leader: u64,
    new: fn(Config, Instant) -> M,
) -> (u64, u64, u64, u64, u64, Duration) {
    let ids: Vec<NodeId> = (1..=n).map(NodeId).collect();
    let members = ids.clone();
    let mut sim = Sim::new(0, &ids, Network::reliable(DELAY, DELAY), move |id, now| {
        new(config(&members, id, NodeId(fast)), now)
    });
    let first = sim.settle(Duration::from_secs(3)).expect("settles");
    assert_eq!(first.leader.id, NodeId(leader), "n = {n}");
    sim.reset_counts();
    sim.crash(NodeId(leader));
    let settled = sim.settle(Duration::from_secs(3)).expect("settles again");
    let c = sim.counts();
    let get = |k: &str| c.get(k).copied().unwrap_or(0);
    assert_eq!(get("STALE"), 0, "no stale epochs in a clean failover");
    let others: u64 = c
        .iter()
        .filter(|(k, _)| {
            ![
                "ELECTION",
                "ANSWER",
                "COORDINATOR",
                "ACK",
                "HEARTBEAT",
                "STALE",
            ]
            .contains(k)
        })
        .map(|(_, v)| v)
        .sum();
    assert_eq!(others, 0, "unexpected kinds: {c:?}");
    (
        get("ELECTION"),
        get("ANSWER"),
        get("COORDINATOR"),
        get("ACK"),
        get("HEARTBEAT"),
        settled.took,
    )
}

#[test]
fn bully_best_case_is_one_election_and_n_minus_2_coordinators() {
    for n in 3..=8u64 {
        let (election, answer, coordinator, _, _, took) = failover(n, n - 1, n, Bully::new);
        eprintln!(
            "bully best  n={n}: ELECTION {election} ANSWER {answer} COORDINATOR {coordinator} (failover {took:?})"
        );
        assert_eq!((election, answer, coordinator), (1, 0, n - 2), "n = {n}");
    }
}

#[test]
fn bully_worst_case_is_quadratic() {
    for n in 3..=8u64 {
        let (election, answer, coordinator, _, _, took) = failover(n, 1, n, Bully::new);
        let total = election + answer + coordinator;
        eprintln!(
            "bully worst n={n}: ELECTION {election} ANSWER {answer} COORDINATOR {coordinator} total {total} (failover {took:?})"
        );
        assert_eq!(election, n * (n - 1) / 2, "n = {n}");
        assert_eq!(answer, (n - 1) * (n - 2) / 2, "n = {n}");
        assert_eq!(coordinator, n - 2, "n = {n}");
        assert_eq!(total, (n - 1) * (n - 1) + n - 2);
        assert!(total <= n * n, "O(n^2): {total} > {n}^2");
    }
}

#[test]
fn ring_with_one_initiator_is_2n_hops_plus_acks() {
    for n in 3..=8u64 {
        // Any node can be the initiator; the one after the dead leader
        // makes the ELECTION skip the dead node last.
        for fast in 1..n {
            let (election, _, coordinator, ack, _, took) = failover(n, fast, n, Ring::new);
            let m = n - 1;
            if fast == 1 {
                eprintln!(
                    "ring        n={n}: ELECTION {election} COORDINATOR {coordinator} ACK {ack}, live m={m} (failover {took:?})"
                );
            }
            assert_eq!(election, m + 1, "n = {n}, initiator {fast}");
            assert_eq!(coordinator, m + 1, "n = {n}, initiator {fast}");
            assert_eq!(ack, 2 * m, "n = {n}, initiator {fast}");
        }
    }
}

#[test]
fn lowest_id_fails_over_with_heartbeats_alone() {
    for n in 3..=8u64 {
        let (election, answer, coordinator, ack, _, took) = failover(n, 2, 1, LowestId::new);
        eprintln!("lowest-id   n={n}: heartbeats only (failover {took:?})");
        assert_eq!(election + answer + coordinator + ack, 0);
    }
}
