//! Scenario (quorum mode, deterministic): a member that restarts has
//! forgotten what it promised, so it grants nothing, not even to itself,
//! for a lease after it starts. Otherwise a restart would free a member
//! that the old leader still counts on, and two nodes would lead at once.
//!
//! Three members, Bully inside, a reliable network with a fixed 5 ms
//! delay. Member 2 detects failures fast (failure timeout and lease
//! 200 ms), members 1 and 3 slowly (600 ms). Node 3 leads; the network
//! cuts it off; node 2 is soon a candidate but needs node 1, which
//! promised node 3 for 600 ms. Node 1 crashes and restarts 100 ms after
//! the cut: node 3 still counts on its grant then, so node 2 must wait for
//! node 1's whole wait after its start.

use std::time::Duration;

use regent_peer::sim::{Network, Sim, Tenure};
use regent_peer::{Bully, Config, NodeId, Quorum};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);
const DELAY: Duration = Duration::from_millis(5);
const SLOW: Duration = Duration::from_millis(600);
const FAST: Duration = Duration::from_millis(200);

fn node(id: NodeId, now: Instant, incarnation: u64) -> Quorum<Bully> {
    let timeout = if id == NodeId(2) { FAST } else { SLOW };
    let config = Config::builder(id, (1..=3).map(NodeId))
        .heartbeat_interval(50 * MS)
        .failure_timeout(timeout)
        .lease(timeout)
        .answer_timeout(30 * MS)
        .coordinator_timeout(300 * MS)
        .lease_margin(MS)
        .incarnation(incarnation)
        .build()
        .expect("valid");
    Quorum::new(config.clone(), now, Bully::new(config, now))
}

fn last_tenure(sim: &Sim<Quorum<Bully>>, id: u64) -> Option<Tenure> {
    sim.tenures().into_iter().rfind(|t| t.node == NodeId(id))
}

#[test]
fn a_restarted_member_grants_nothing_for_a_lease() {
    let ids: Vec<NodeId> = (1..=3).map(NodeId).collect();
    // A new incarnation at every start, as a driver must give.
    let mut starts = 0;
    let mut sim = Sim::new(3, &ids, Network::reliable(DELAY, DELAY), move |id, now| {
        starts += 1;
        node(id, now, starts)
    });
    let settled = sim.settle(Duration::from_secs(3)).expect("a leader");
    assert_eq!(settled.leader.id, NodeId(3));

    let cut = sim.elapsed();
    sim.partition(&[vec![NodeId(3)], vec![NodeId(1), NodeId(2)]]);
    sim.run_for(100 * MS);
    let three = last_tenure(&sim, 3).expect("node 3 led");
    assert!(
        three.to > sim.elapsed(),
        "node 3 still counts on node 1's grant"
    );
    sim.crash(NodeId(1));
    sim.restart(NodeId(1));
    let restarted = sim.elapsed();
    sim.run_for(Duration::from_secs(2));

    assert_eq!(sim.overlaps(), [], "two leaders at once");
    let old = last_tenure(&sim, 3).expect("node 3 led");
    let new = last_tenure(&sim, 2).expect("node 2 leads");
    eprintln!(
        "after the cut: node 3 stepped down at {:?}, node 1 restarted at {:?}, node 2 leads at {:?}",
        old.to - cut,
        restarted - cut,
        new.from - cut
    );
    assert!(old.to - cut <= SLOW);
    // Node 2's own promise to node 3 ended 200 ms after the cut; node 1's
    // wait ends 600 ms after its restart, and it grants the waiting ask at
    // once.
    assert!(new.from >= restarted + SLOW, "{:?}", new.from - restarted);
    assert!(new.from <= restarted + SLOW + 2 * DELAY + MS);
}
