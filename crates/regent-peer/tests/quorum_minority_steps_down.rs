//! Scenario (quorum mode, deterministic): a leader cut off with a minority
//! stops leading by its own clock, within a lease of its last majority
//! grant, though its algorithm still believes it leads; the majority side
//! has a candidate long before, but it leads only once the promises the
//! old leader held have run out. No instant has two leaders.
//!
//! Five members, Bully inside, a reliable network with a fixed 5 ms delay.
//! Member 4 detects failures fast (failure timeout and lease 200 ms), the
//! others slowly (600 ms), so that the majority side's candidate is ready
//! well before the old promises end, and the wait is visible. The old
//! leader's clock runs 5 % slow, the drift bound, so its lease lasts as
//! long in true time as the argument allows.

use std::time::Duration;

use regent_peer::sim::{Network, Sim, Tenure};
use regent_peer::{Bully, Config, Machine, NodeId, Quorum};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);
const DELAY: Duration = Duration::from_millis(5);
const SLOW: Duration = Duration::from_millis(600);
const FAST: Duration = Duration::from_millis(200);
const DRIFT: f64 = 0.05;

fn node(id: NodeId, now: Instant) -> Quorum<Bully> {
    let timeout = if id == NodeId(4) { FAST } else { SLOW };
    let config = Config::builder(id, (1..=5).map(NodeId))
        .heartbeat_interval(50 * MS)
        .failure_timeout(timeout)
        .lease(timeout)
        .answer_timeout(30 * MS)
        .coordinator_timeout(300 * MS)
        .clock_drift(DRIFT)
        .lease_margin(MS)
        .incarnation(id.get())
        .build()
        .expect("valid");
    Quorum::new(config.clone(), now, Bully::new(config, now))
}

fn last_tenure(sim: &Sim<Quorum<Bully>>, id: u64) -> Option<Tenure> {
    sim.tenures().into_iter().rfind(|t| t.node == NodeId(id))
}

#[test]
fn a_minority_leader_steps_down_by_its_own_clock_and_the_majority_waits_for_its_promises() {
    let ids: Vec<NodeId> = (1..=5).map(NodeId).collect();
    let mut sim = Sim::new(7, &ids, Network::reliable(DELAY, DELAY), node);
    sim.set_clock_rate(NodeId(5), 1.0 - DRIFT);
    let settled = sim.settle(Duration::from_secs(3)).expect("a leader");
    assert_eq!(settled.leader.id, NodeId(5));
    let before = last_tenure(&sim, 5).expect("node 5 leads");

    let cut = sim.elapsed();
    sim.partition(&[vec![NodeId(5), NodeId(1)], ids[1..4].to_vec()]);
    let mut candidate_at = None;
    while sim.elapsed() < cut + Duration::from_secs(2) {
        sim.run_for(MS);
        let inner_leads = sim
            .node(NodeId(4))
            .and_then(|n| n.inner().leadership())
            .is_some();
        if inner_leads && candidate_at.is_none() {
            candidate_at = Some(sim.elapsed() - cut);
        }
    }

    assert_eq!(sim.overlaps(), [], "two leaders at once");
    let old = last_tenure(&sim, 5).expect("node 5 led");
    assert_eq!(old.from, before.from, "one unbroken tenure until the cut");
    let stepped_down = old.to - cut;
    let new = last_tenure(&sim, 4).expect("node 4 leads");
    let took_over = new.from - cut;
    let candidate_at = candidate_at.expect("node 4's algorithm leads");
    eprintln!(
        "after the cut: node 4 a candidate at {candidate_at:?}, node 5 stepped down at \
         {stepped_down:?}, node 4 leads at {took_over:?}"
    );

    // Node 5's last majority grant was for an ask sent before the cut: it
    // stops within a lease of it, on its slow clock, and not much earlier
    // (asks go out every 50 ms of its clock).
    assert!(stepped_down <= SLOW, "{stepped_down:?}");
    assert!(stepped_down >= SLOW - 60 * MS, "{stepped_down:?}");
    // Still the leader for its algorithm, which cannot tell: the lease
    // alone took the leadership away.
    let five = sim.node(NodeId(5)).expect("up");
    assert!(five.inner().leadership().is_some());
    assert_eq!(five.leadership(), None);
    assert_eq!(five.lease_until(), None);
    assert_ne!(five.leader().map(|l| l.id), Some(NodeId(5)));
    // The majority had a candidate after node 4's failure timeout and an
    // ANSWER timeout, long before node 5's lease ended ...
    assert!(
        candidate_at <= FAST + 30 * MS + 2 * DELAY,
        "{candidate_at:?}"
    );
    // ... and it led only once nodes 2 and 3 had kept their promises to
    // node 5 (600 ms from its last ask each got, sent at most one 50 ms
    // interval of its clock before the cut), at once when they ran out.
    assert!(new.from > old.to);
    assert!(took_over >= SLOW - 60 * MS, "{took_over:?}");
    assert!(took_over <= SLOW + 2 * DELAY + MS, "{took_over:?}");
    let four = sim.node(NodeId(4)).expect("up");
    assert!(four.leadership().is_some());
    for id in [2, 3, 4] {
        let view = sim.node(NodeId(id)).and_then(|n| n.leader());
        assert_eq!(view.map(|l| l.id), Some(NodeId(4)), "node {id}");
    }
}
