//! `release_to` on a real ZooKeeper: regent's candidates between the
//! leader and the successor are taken out of line (and queue again behind
//! it), a Curator `LeaderLatch` participant between them is never deleted
//! and makes the hand-over a plain release. The tests share the process's
//! one server, each under a chroot of its own.

mod common;

use std::future::Future;
use std::time::Duration;

use regent_core::store::HandOff;
use regent_core::{Acquire, ElectionName, LeaseStore, Renewal};
use regent_testkit::engines::SharedZooKeeper;
use regent_zookeeper::ZkStore;
use zookeeper_client as zk;

use regent_testkit::fixtures::{acquire_request as req, holder, line, queue, win};

/// Long enough that no place lapses unrenewed while a test runs: no step
/// waits on time.
const TTL: Duration = Duration::from_secs(20);

/// Runs `test` on a share of the process's server (taken on the test's
/// own thread, which names its chroot).
fn with_share<F: Future<Output = ()>>(test: impl FnOnce(SharedZooKeeper) -> F) {
    let share = SharedZooKeeper::get()
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper for this test: {e}"));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(test(share));
}

async fn store(share: &SharedZooKeeper) -> ZkStore {
    common::store_builder(share.address(), share.chroot())
        .session_timeout(TTL)
        .connect()
        .await
        .expect("connect the store")
}

fn election(name: &str) -> ElectionName {
    ElectionName::new(name).expect("a valid election name")
}

#[test]
fn a_curator_participant_between_makes_release_to_a_plain_release_and_stays() {
    with_share(|share| async move {
        let one = store(&share).await;
        let two = store(&share).await;
        let e = election("handoff-curator");
        let a = win(&one, &e, "a", TTL).await;
        let (_b, _) = queue(&two, &e, "b", TTL, None).await;
        // What Curator's LeaderLatch makes: an ephemeral sequential node
        // of its own session, protected by a random (version 4) UUID,
        // holding its participant id, a valid holder id, bare.
        let raw = common::raw(share.address()).await;
        let latch = one.election_path(&e);
        let (_, sequence) = raw
            .create(
                &format!("{latch}/_c_2f3a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b-latch-"),
                b"curator-1",
                &zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all()),
            )
            .await
            .expect("create the participant's node");
        let curator = format!("{latch}/_c_2f3a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b-latch-{sequence}");
        let (_d, _) = queue(&one, &e, "d", TTL, None).await;
        assert_eq!(line(&one, &e).await, ["a", "b", "curator-1", "d"]);

        let passed = one.release_to(&a, &holder("d"), TTL).await.unwrap();
        assert_eq!(passed, HandOff::Released);
        assert_eq!(
            line(&one, &e).await,
            ["b", "curator-1", "d"],
            "a released as `release` does, nobody else taken out"
        );
        let (data, _) = raw
            .get_data(&curator)
            .await
            .expect("the participant's node is still there");
        assert_eq!(data, b"curator-1");
    });
}

#[test]
fn candidates_taken_out_of_line_queue_again_behind_the_successor() {
    with_share(|share| async move {
        // a and d in one process, b and c in another.
        let one = store(&share).await;
        let two = store(&share).await;
        let e = election("handoff-requeue");
        let a = win(&one, &e, "a", TTL).await;
        let (b, _) = queue(&two, &e, "b", TTL, None).await;
        let (c, _) = queue(&two, &e, "c", TTL, None).await;
        let (d, _) = queue(&one, &e, "d", TTL, None).await;
        let passed = one.release_to(&a, &holder("d"), TTL).await.unwrap();
        assert_eq!(passed, HandOff::ToSuccessor);
        assert_eq!(line(&one, &e).await, ["d"]);
        let leader = one.current_leader(&e).await.unwrap().expect("d leads");
        assert_eq!(leader.holder.as_str(), "d");
        assert_eq!(leader.token, d.token);

        // b renews first: its place is lost. Then it acquires with that
        // place, as a caller that ignored the loss would: a new node at
        // the back.
        assert_eq!(two.renew(&b).await.unwrap(), Renewal::Lost);
        let (b_again, told) = queue(&two, &e, "b", TTL, Some(&b)).await;
        assert_eq!(told, "d");
        assert!(b_again.token > d.token, "b queues behind d");
        // c acquires with its old place at once: a new node at the back.
        let (c_again, told) = queue(&two, &e, "c", TTL, Some(&c)).await;
        assert_eq!(told, "d");
        assert!(c_again.token > b_again.token, "c queues behind b");
        assert_eq!(line(&one, &e).await, ["d", "b", "c"]);
        assert_eq!(two.renew(&b_again).await.unwrap(), Renewal::Renewed);
        assert_eq!(two.renew(&c_again).await.unwrap(), Renewal::Renewed);

        // d wins with its place, a term after a's.
        let Acquire::Won(d_lease) = one.try_acquire(&req(&e, "d", TTL), Some(&d)).await.unwrap()
        else {
            panic!("d should win with its place")
        };
        assert!(d_lease.token > a.token);
        // Giving what is no longer ours gives nothing.
        assert_eq!(
            one.release_to(&a, &holder("c"), TTL).await.unwrap(),
            HandOff::Released
        );
        assert_eq!(line(&one, &e).await, ["d", "b", "c"]);

        // A Curator participant may be the successor: made next, and kept.
        let raw = common::raw(share.address()).await;
        let latch = one.election_path(&e);
        raw.create(
            &format!("{latch}/_c_0b7e1a2c-3d4f-4a5b-8c6d-7e8f9a0b1c2d-latch-"),
            b"curator-2",
            &zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .expect("create the participant's node");
        assert_eq!(
            one.release_to(&d_lease, &holder("curator-2"), TTL)
                .await
                .unwrap(),
            HandOff::ToSuccessor
        );
        assert_eq!(line(&one, &e).await, ["curator-2"]);
        assert_eq!(two.renew(&b_again).await.unwrap(), Renewal::Lost);
        assert_eq!(two.renew(&c_again).await.unwrap(), Renewal::Lost);
    });
}
