//! `release_to` on a real etcd: regent's candidates between the leader and
//! the successor are taken out of line (and queue again behind it), a
//! foreign candidate (`etcdctl elect`) between them is never deleted and
//! makes the hand-over a plain release.

mod common;

use std::time::Duration;

use etcd_client::{GetOptions, PutOptions, SortOrder, SortTarget};
use regent_core::store::HandOff;
use regent_core::{Acquire, LeaseStore, Renewal};

use common::{holder, req};
use regent_testkit::fixtures::{line, queue, win};

/// Long enough that nothing expires while the test runs: no step waits on
/// time.
const TTL: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_to_takes_regents_candidates_out_of_line_and_never_a_foreign_one() {
    let etcd = common::start_etcd().await;
    // a and d in one process, b and c in others.
    let one = common::store(etcd.endpoints()).await;
    let two = common::store(etcd.endpoints()).await;
    let three = common::store(etcd.endpoints()).await;
    let mut raw = common::raw(&etcd.endpoints()).await;

    // 1. A foreign candidate stands between the leader and the successor:
    // a plain release, and the foreign key stays.
    let e = common::election("handoff-foreign");
    let a = win(&one, &e, "a", TTL).await;
    let (_b, _) = queue(&two, &e, "b", TTL, None).await;
    // What `etcdctl elect NAME etcdctl-host` writes: a key named after its
    // own lease, holding the bare value.
    let foreign_lease = raw.lease_grant(60, None).await.unwrap().id();
    let foreign_key = format!("{e}/{foreign_lease:x}");
    raw.put(
        foreign_key.clone(),
        "etcdctl-host",
        Some(PutOptions::new().with_lease(foreign_lease)),
    )
    .await
    .unwrap();
    let (_d, _) = queue(&one, &e, "d", TTL, None).await;
    assert_eq!(line(&one, &e).await, ["a", "b", "etcdctl-host", "d"]);

    let passed = one.release_to(&a, &holder("d"), TTL).await.unwrap();
    assert_eq!(passed, HandOff::Released);
    assert_eq!(
        line(&one, &e).await,
        ["b", "etcdctl-host", "d"],
        "a released as `release` does, nobody else taken out"
    );
    let kept = raw.get(foreign_key.clone(), None).await.unwrap();
    assert_eq!(
        kept.kvs().first().map(|kv| kv.value()),
        Some(&b"etcdctl-host"[..]),
        "the foreign key is still there"
    );

    // 2. regent's candidates between are taken out in one transaction;
    // each queues again at the back with its next renewal or acquire.
    let e = common::election("handoff-requeue");
    let a = win(&one, &e, "a", TTL).await;
    // b alone on its store: its etcd lease carries its key alone.
    let (b, _) = queue(&three, &e, "b", TTL, None).await;
    let (c, _) = queue(&two, &e, "c", TTL, None).await;
    let (d, _) = queue(&one, &e, "d", TTL, None).await;
    let passed = one.release_to(&a, &holder("d"), TTL).await.unwrap();
    assert_eq!(passed, HandOff::ToSuccessor);
    assert_eq!(line(&one, &e).await, ["d"]);
    let leader = one.current_leader(&e).await.unwrap().expect("d leads");
    assert_eq!(leader.holder.as_str(), "d");
    assert_eq!(leader.token, d.token);

    // b renews first: its place is lost, and its lease, left without a
    // key, is revoked. Then it acquires with that place, as a caller that
    // ignored the loss would: a new key, on another lease, at the back.
    assert_eq!(three.renew(&b).await.unwrap(), Renewal::Lost);
    let (b_again, told) = queue(&three, &e, "b", TTL, Some(&b)).await;
    assert_eq!(told, "d");
    assert!(b_again.token > d.token, "b queues behind d");
    // c acquires with its old place at once: a new key at the back too.
    let (c_again, told) = queue(&two, &e, "c", TTL, Some(&c)).await;
    assert_eq!(told, "d");
    assert!(c_again.token > b_again.token, "c queues behind b");
    assert_eq!(line(&one, &e).await, ["d", "b", "c"]);
    assert_ne!(b_again.handle, b.handle, "b's old lease is being revoked");
    assert_eq!(three.renew(&b_again).await.unwrap(), Renewal::Renewed);
    assert_eq!(two.renew(&c_again).await.unwrap(), Renewal::Renewed);

    // d wins with its place, a term after a's.
    let Acquire::Won(d_lease) = one.try_acquire(&req(&e, "d", TTL), Some(&d)).await.unwrap() else {
        panic!("d should win with its place")
    };
    assert!(d_lease.token > a.token);
    // Giving what is no longer ours gives nothing.
    assert_eq!(
        one.release_to(&a, &holder("c"), TTL).await.unwrap(),
        HandOff::Released
    );
    assert_eq!(line(&one, &e).await, ["d", "b", "c"]);

    // The keys of this election, oldest first, are regent's three.
    let keys = raw
        .get(
            format!("{e}/"),
            Some(
                GetOptions::new()
                    .with_prefix()
                    .with_sort(SortTarget::Create, SortOrder::Ascend),
            ),
        )
        .await
        .unwrap();
    assert_eq!(keys.kvs().len(), 3);
    one.release(&d_lease).await.unwrap();
    three.release(&b_again).await.unwrap();
    two.release(&c_again).await.unwrap();
    assert_eq!(line(&one, &e).await, Vec::<String>::new());
}
