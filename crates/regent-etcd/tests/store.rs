//! The etcd store's own behaviour against a real etcd: ttls, leadership
//! ending from outside (revoke, delete, etcd unreachable), a queued place
//! whose lease expired (etcd#19597), foreign candidates and watch.

mod common;

use std::time::Duration;

use futures_util::StreamExt;
use regent_core::{
    Acquire, Candidate, EndReason, ErrorKind, LeaseStore, Renewal, SafetyClass, StoreStyle,
    WatchMode,
};
use regent_etcd::EtcdStore;

use common::{holder, req};

const TTL: Duration = Duration::from_secs(2);

fn candidate(
    store: EtcdStore,
    election: &regent_core::ElectionName,
    who: &str,
) -> Candidate<EtcdStore> {
    Candidate::builder(store, election.clone(), holder(who))
        .ttl(TTL)
        .renew_every(Duration::from_millis(400))
        .renew_deadline(Duration::from_millis(1500))
        .grace(Duration::from_millis(100))
        .build()
        .expect("valid timing")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_and_ttl_rules() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let info = store.info();
    assert_eq!(info.name, "etcd");
    assert_eq!(info.style, StoreStyle::Queue);
    assert_eq!(info.watch, WatchMode::Notify);
    assert_eq!(info.safety, SafetyClass::Consensus);
    assert_eq!(info.min_ttl, Duration::from_secs(1));

    let e = common::election("ttl");
    let err = store
        .try_acquire(&req(&e, "a", Duration::from_millis(500)), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    let err = store
        .try_acquire(&req(&e, "a", Duration::from_secs(2 * 86_400)), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");

    // Whole seconds, rounded up, never down.
    let Acquire::Won(a) = store
        .try_acquire(&req(&e, "a", Duration::from_millis(1500)), None)
        .await
        .unwrap()
    else {
        panic!("a wins an empty election")
    };
    assert_eq!(a.ttl, Duration::from_secs(2));
    store.release(&a).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_revoked_from_outside_is_lost() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let e = common::election("revoke");
    let c = candidate(store.clone(), &e, "a");
    let leadership = c.campaign().await.expect("a wins");
    let handle = leadership.lease().handle.as_str().to_owned();

    let out = etcd.etcdctl(["lease", "revoke", &handle]);
    assert!(out.status.success(), "etcdctl lease revoke: {out:?}");
    let ended = tokio::time::timeout(Duration::from_secs(3), leadership.until_ended())
        .await
        .expect("leadership ends within a renew interval or two");
    assert_eq!(ended.reason, EndReason::Lost);
    assert_eq!(store.current_leader(&e).await.unwrap(), None);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_key_is_lost() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let e = common::election("delete");
    let c = candidate(store.clone(), &e, "a");
    let leadership = c.campaign().await.expect("a wins");

    let out = etcd.etcdctl(["del", "--prefix", &format!("{e}/")]);
    assert!(out.status.success(), "etcdctl del: {out:?}");
    let ended = tokio::time::timeout(Duration::from_secs(3), leadership.until_ended())
        .await
        .expect("leadership ends within a renew interval or two");
    assert_eq!(ended.reason, EndReason::Lost);
    // The lease outlived its key: a plain renewal says lost too.
    assert_eq!(
        store.renew(leadership.lease()).await.unwrap(),
        Renewal::Lost
    );
    c.shutdown().await;
}

/// etcd#19597: a campaign waiting in line whose lease expired must not wait
/// forever on a key that is gone; it queues again with a new lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_place_whose_lease_expired_queues_again_regression_etcd_19597() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let e = common::election("requeue");
    let Acquire::Won(a) = store
        .try_acquire(&req(&e, "a", Duration::from_secs(10)), None)
        .await
        .unwrap()
    else {
        panic!("a wins")
    };
    let Acquire::Held {
        queued: Some(old), ..
    } = store
        .try_acquire(&req(&e, "b", Duration::from_secs(1)), None)
        .await
        .unwrap()
    else {
        panic!("b queues")
    };
    // b's place expires unrenewed.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert_eq!(store.renew(&old).await.unwrap(), Renewal::Lost);
    let Acquire::Held {
        leader: Some(l),
        queued: Some(new),
    } = store
        .try_acquire(&req(&e, "b", Duration::from_secs(1)), Some(&old))
        .await
        .unwrap()
    else {
        panic!("b queues again behind a")
    };
    assert_eq!(l.holder.as_str(), "a");
    assert_ne!(new.handle, old.handle, "a new lease");
    assert!(new.token > old.token);
    store.release(&a).await.unwrap();
    let Acquire::Won(b) = store
        .try_acquire(&req(&e, "b", Duration::from_secs(1)), Some(&new))
        .await
        .unwrap()
    else {
        panic!("b wins with its new place")
    };
    assert_eq!(b.token, new.token);
    store.release(&b).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_metadata_is_proclaimed_on_the_queued_key() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let e = common::election("proclaim");
    let Acquire::Won(a) = store.try_acquire(&req(&e, "a", TTL), None).await.unwrap() else {
        panic!("a wins")
    };
    let mut r = req(&e, "a", TTL);
    r.metadata = regent_core::Metadata::from_pairs([("addr", "10.0.0.9:80")]).unwrap();
    let Acquire::Won(again) = store.try_acquire(&r, Some(&a)).await.unwrap() else {
        panic!("a still leads with its place")
    };
    assert_eq!(again.token, a.token);
    let leader = store.current_leader(&e).await.unwrap().unwrap();
    assert_eq!(leader.metadata.get("addr"), Some("10.0.0.9:80"));
    store.release(&a).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_candidates_lead_and_watch_follows_the_head() {
    /// The watch's next item, within a bound: a missing item fails the
    /// test rather than hanging it.
    async fn next(
        w: &mut regent_core::LeaderStream,
    ) -> Option<Result<Option<regent_core::LeaderInfo>, regent_core::StoreError>> {
        tokio::time::timeout(Duration::from_secs(10), w.next())
            .await
            .expect("a watch item within 10 s")
    }

    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let e = common::election("foreign");
    let mut w = store.watch(&e).await.unwrap();
    assert_eq!(
        next(&mut w).await.unwrap().unwrap(),
        None,
        "first item: no leader"
    );

    // A foreign key with a value that is no holder id, and no lease.
    let out = etcd.etcdctl(["put", &format!("{e}/ffff"), "my host"]);
    assert!(out.status.success(), "{out:?}");
    let l = next(&mut w)
        .await
        .unwrap()
        .unwrap()
        .expect("the foreign key leads");
    assert_eq!(l.holder.as_str(), "my_host");
    assert_eq!(l.metadata.get("etcd.value"), Some("my host"));
    let l2 = store.current_leader(&e).await.unwrap().unwrap();
    assert_eq!(l, l2);

    let Acquire::Held {
        leader,
        queued: Some(q),
    } = store.try_acquire(&req(&e, "a", TTL), None).await.unwrap()
    else {
        panic!("a queues behind the foreign key")
    };
    assert_eq!(leader, Some(l.clone()));
    assert!(q.token > l.token);
    // a's queuing changes nothing at the head: the watch says nothing of
    // it (each queuing cost every watcher a read before), and its next
    // item is the head's deletion below.

    let out = etcd.etcdctl(["del", &format!("{e}/ffff")]);
    assert!(out.status.success(), "{out:?}");
    let head = next(&mut w)
        .await
        .unwrap()
        .unwrap()
        .expect("a is the head now");
    assert_eq!(head.holder.as_str(), "a");
    let Acquire::Won(a) = store
        .try_acquire(&req(&e, "a", TTL), Some(&q))
        .await
        .unwrap()
    else {
        panic!("a wins")
    };
    store.release(&a).await.unwrap();
    assert_eq!(
        next(&mut w).await.unwrap().unwrap(),
        None,
        "no leader after release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_etcd_is_transient_and_ends_leadership_by_deadline() {
    let mut etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let e = common::election("unreachable");
    let c = candidate(store.clone(), &e, "a");
    let leadership = c.campaign().await.expect("a wins");
    let won_at = tokio::time::Instant::now();

    tokio::task::block_in_place(|| etcd.stop());
    let ended = tokio::time::timeout(Duration::from_secs(5), leadership.until_ended())
        .await
        .expect("leadership ends at the renew deadline");
    assert!(
        matches!(ended.reason, EndReason::DeadlinePassed | EndReason::Lost),
        "{:?}",
        ended.reason
    );
    // Strictly before the store could have handed the lease on.
    assert!(won_at.elapsed() < TTL + Duration::from_millis(500));
    let err = store.current_leader(&e).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_takes_over_when_a_dead_leaders_lease_expires() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let e = common::election("failover");
    // A leader that never renews: a crashed process.
    let Acquire::Won(dead) = store
        .try_acquire(&req(&e, "dead", TTL), None)
        .await
        .unwrap()
    else {
        panic!("dead wins an empty election")
    };
    let start = tokio::time::Instant::now();
    let c = candidate(store.clone(), &e, "b");
    let leadership = tokio::time::timeout(TTL * 3, c.campaign())
        .await
        .expect("b takes over after the dead leader's ttl")
        .expect("campaign");
    let waited = start.elapsed();
    assert!(leadership.token() > dead.token);
    assert!(
        waited <= TTL + regent_etcd::EXPIRY_SLACK + Duration::from_millis(500),
        "takeover took {waited:?}"
    );
    assert!(
        waited >= TTL - Duration::from_millis(100),
        "took over a live lease after {waited:?}"
    );
    leadership.resign().await.unwrap();
    c.shutdown().await;
}

/// Many elections of one process share one lease (issue 15, item 3): a
/// renewal of each is one round of its session, which finds its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elections_of_one_store_share_one_lease_and_renew_together() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let ttl = Duration::from_secs(1);
    let elections: Vec<_> = (0..20)
        .map(|i| common::election(&format!("shared-{i}")))
        .collect();
    let mut leases = Vec::new();
    for e in &elections {
        let Acquire::Won(l) = store.try_acquire(&req(e, "a", ttl), None).await.unwrap() else {
            panic!("a wins {e}")
        };
        leases.push(l);
    }
    let handles: std::collections::BTreeSet<_> = leases
        .iter()
        .map(|l| l.handle.as_str().to_owned())
        .collect();
    assert_eq!(handles.len(), 1, "one lease for all: {handles:?}");
    let out = etcd.etcdctl(["lease", "list"]);
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(listed.contains("found 1 leases"), "{listed}");

    // Half a ttl later: etcd says the remaining ttl in whole seconds, so
    // a live lease then shows 0 (regression: taken for one gone).
    tokio::time::sleep(ttl / 2).await;
    let renewals = futures_util::future::join_all(leases.iter().map(|l| store.renew(l))).await;
    for (l, r) in leases.iter().zip(renewals) {
        assert_eq!(r.unwrap(), Renewal::Renewed, "{}", l.election);
    }
    // One released: the lease stays for the others.
    store.release(&leases[0]).await.unwrap();
    assert_eq!(store.current_leader(&elections[0]).await.unwrap(), None);
    assert_eq!(store.renew(&leases[0]).await.unwrap(), Renewal::Lost);
    assert_eq!(store.renew(&leases[1]).await.unwrap(), Renewal::Renewed);
    // One deleted from outside: lost at its next renewal, the others not.
    let out = etcd.etcdctl(["del", "--prefix", &format!("{}/", elections[2])]);
    assert!(out.status.success(), "etcdctl del: {out:?}");
    assert_eq!(store.renew(&leases[2]).await.unwrap(), Renewal::Lost);
    assert_eq!(store.renew(&leases[3]).await.unwrap(), Renewal::Renewed);
    for l in &leases[1..] {
        store.release(l).await.unwrap();
    }
}

/// A shared lease must not keep alive the key of an election whose holder
/// stopped renewing while others renew: the session deletes it when a
/// lease of its own would have expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrenewed_key_on_a_shared_lease_goes_at_its_ttl() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let ttl = Duration::from_secs(1);
    let idle = common::election("shared-idle");
    let busy = common::election("shared-busy");
    let Acquire::Won(i) = store
        .try_acquire(&req(&idle, "a", ttl), None)
        .await
        .unwrap()
    else {
        panic!("a wins {idle}")
    };
    let Acquire::Won(b) = store
        .try_acquire(&req(&busy, "a", ttl), None)
        .await
        .unwrap()
    else {
        panic!("a wins {busy}")
    };
    assert_eq!(i.handle, b.handle, "one lease");
    // Only `busy` renews, three times a ttl, for three ttls.
    let start = tokio::time::Instant::now();
    let mut idle_gone = None;
    while start.elapsed() < 3 * ttl {
        tokio::time::sleep(ttl / 3).await;
        assert_eq!(store.renew(&b).await.unwrap(), Renewal::Renewed);
        if idle_gone.is_none() && store.current_leader(&idle).await.unwrap().is_none() {
            idle_gone = Some(start.elapsed());
        }
    }
    let gone = idle_gone.expect("the idle election's key went");
    assert!(gone >= ttl, "gone after {gone:?}, before its ttl");
    assert_eq!(store.renew(&i).await.unwrap(), Renewal::Lost);
    assert!(store.current_leader(&busy).await.unwrap().is_some());
    store.release(&b).await.unwrap();
}

/// `connect` does not wait for the cluster; `check` tells within its bound
/// that nothing answers on a closed port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_opens_and_check_says_so_within_its_bound() {
    let port = regent_testkit::ports::free_ports(1).expect("a free port")[0];
    let store = EtcdStore::connect([format!("http://127.0.0.1:{port}")])
        .await
        .expect("connect does not wait for the cluster");
    let e = regent_core::store::check(&store, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
}

/// The requests etcd has received so far (its gRPC messages).
fn etcd_requests(etcd: &regent_testkit::engines::Etcd) -> f64 {
    etcd.metrics()
        .expect("etcd's metrics")
        .lines()
        .filter(|l| l.starts_with("grpc_server_msg_received_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The leaders and candidates of many elections read at one moment (as a
/// process's leaders look at theirs after one renewal round of their
/// shared lease) cost etcd a few requests, not one each, and each read
/// answers for its own election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_made_together_are_sent_together_and_each_answers_its_election() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let elections: Vec<_> = (0..100)
        .map(|i| common::election(&format!("together-{i}")))
        .collect();
    for (i, e) in elections.iter().enumerate() {
        let won = store
            .try_acquire(&req(e, &format!("h{i}"), Duration::from_secs(30)), None)
            .await
            .unwrap();
        assert!(matches!(won, Acquire::Won(_)), "{won:?}");
    }
    let before = etcd_requests(&etcd);
    let leaders = futures_util::future::join_all(elections.iter().map(|e| store.current_leader(e)));
    let lists = futures_util::future::join_all(elections.iter().map(|e| store.candidates(e)));
    let (leaders, lists) = tokio::join!(leaders, lists);
    let after = etcd_requests(&etcd);
    for (i, (leader, list)) in leaders.into_iter().zip(lists).enumerate() {
        let leader = leader.unwrap().expect("a leader");
        assert_eq!(leader.holder, holder(&format!("h{i}")));
        let list = list.unwrap().expect("a list");
        assert_eq!(list.len(), 1, "{list:?}");
        assert_eq!(list[0].holder, holder(&format!("h{i}")));
    }
    // 200 reads; sent one by one they were 200 requests.
    assert!(after - before <= 10.0, "{} requests", after - before);
    // A read alone is answered too.
    assert_eq!(
        store
            .current_leader(&elections[7])
            .await
            .unwrap()
            .unwrap()
            .holder,
        holder("h7")
    );
}
