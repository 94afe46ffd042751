//! A node without the group's secret cannot become or announce leader: a
//! rogue Bully node with the highest id and the wrong secret has every
//! frame refused, leads only in its own eyes, and the good nodes keep
//! their leader and term.

mod common;

use std::collections::BTreeMap;

use common::{
    Algorithm, Timing, agreed_leader, bind, counters_until, first_leader, init_tracing, options,
    record_views, secret, start,
};
use regent_peer::NodeId;
use regent_peer::codec::Secret;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rogue_with_the_wrong_secret_never_becomes_anyones_leader() {
    init_tracing();
    let members = [1, 2, 3];
    let (mut listeners, addrs) = bind(&members);
    let mut good = BTreeMap::new();
    for id in [1, 2] {
        let listener = listeners.remove(&NodeId(id)).expect("bound");
        let opts = options(listener, &addrs, secret());
        good.insert(
            NodeId(id),
            start(Algorithm::Bully, id, &members, Timing::FAST, opts).await,
        );
    }
    let recorders: Vec<_> = good.values().map(record_views).collect();
    let wrong = Secret::new(*b"not the group's secret at all").expect("long enough");
    let rogue_listener = listeners.remove(&NodeId(3)).expect("bound");
    let rogue = start(
        Algorithm::Bully,
        3,
        &members,
        Timing::FAST,
        options(rogue_listener, &addrs, wrong),
    )
    .await;

    let term = first_leader(&good, NodeId(2), Timing::FAST).await;
    let mut rogue_view = rogue.view();
    common::view_until("the rogue to claim", &mut rogue_view, |v| {
        v.leading.is_some()
    })
    .await;
    // Its claims keep coming, and keep being refused.
    for node in good.values() {
        let refused = counters_until("rogue frames to be refused", node, |c| {
            c.unauthenticated >= 5
        })
        .await;
        assert_eq!(refused.replayed + refused.misaddressed, 0);
    }
    let rogue_refused = rogue.counters().borrow().unauthenticated;
    assert!(
        rogue_refused > 0,
        "the rogue refuses the group's frames too"
    );
    assert_eq!(agreed_leader(&good, NodeId(2)).await, term, "the same term");

    rogue.abort().await;
    for node in good.into_values() {
        node.abort().await;
    }
    for recorder in recorders {
        let views = recorder.await.expect("recorder");
        assert!(
            views
                .iter()
                .all(|v| v.leader.is_none_or(|l| l.id != NodeId(3))),
            "a good node followed the rogue: {views:?}"
        );
    }
}
