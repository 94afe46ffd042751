//! The memory store's own tests: its contract, its faults, its record log.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::Instant;

use super::state::lease_of;
use super::*;
use crate::error::ErrorKind;
use crate::store::{Acquire, AcquireRequest, LeaseStore, Renewal, TtlGrant};
use crate::types::{Lease, Metadata};

fn req(holder: &str) -> AcquireRequest {
    AcquireRequest {
        election: ElectionName::new("e").unwrap(),
        holder: HolderId::new(holder).unwrap(),
        ttl: Duration::from_secs(10),
        metadata: Metadata::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn race_expiry_follows_tokio_clock() {
    let s = MemoryStore::race();
    let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
        panic!("a must win an empty election")
    };
    assert!(matches!(
        s.try_acquire(&req("b"), None).await.unwrap(),
        Acquire::Held { leader: Some(l), queued: None } if l.holder.as_str() == "a"
    ));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let Acquire::Won(b) = s.try_acquire(&req("b"), None).await.unwrap() else {
        panic!("b must win after a expired")
    };
    assert!(b.token > a.token);
    assert_eq!(s.renew(&a).await.unwrap(), Renewal::Lost);
}

#[tokio::test(start_paused = true)]
async fn queue_passes_to_next_in_line() {
    let s = MemoryStore::queue();
    let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
        panic!()
    };
    let Acquire::Held {
        queued: Some(qb), ..
    } = s.try_acquire(&req("b"), None).await.unwrap()
    else {
        panic!()
    };
    s.release(&a).await.unwrap();
    let Acquire::Won(b) = s.try_acquire(&req("b"), Some(&qb)).await.unwrap() else {
        panic!("b is first in line")
    };
    assert_eq!(b.token, qb.token);
    assert!(b.token > a.token);
}

#[tokio::test(start_paused = true)]
async fn watch_sees_expiry_without_any_call() {
    let s = MemoryStore::race();
    let e = ElectionName::new("e").unwrap();
    let mut w = s.watch(&e).await.unwrap();
    assert_eq!(w.next().await.unwrap().unwrap(), None);
    s.try_acquire(&req("a"), None).await.unwrap();
    assert!(w.next().await.unwrap().unwrap().is_some());
    let start = Instant::now();
    assert_eq!(w.next().await.unwrap().unwrap(), None);
    assert_eq!(start.elapsed(), Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn update_metadata_keeps_the_term_and_its_expiry() {
    let s = MemoryStore::race();
    let e = ElectionName::new("e").unwrap();
    let mut w = s.watch(&e).await.unwrap();
    assert_eq!(w.next().await.unwrap().unwrap(), None);
    let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
        panic!("a must win an empty election")
    };
    let first = w.next().await.unwrap().unwrap().unwrap();
    let expires_at = s.leader_expires_at(&e);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let m = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
    assert_eq!(s.update_metadata(&a, &m).await.unwrap(), Renewal::Renewed);
    let seen = w.next().await.unwrap().unwrap().unwrap();
    assert_eq!((seen.token, &seen.metadata), (first.token, &m));
    assert_eq!(s.leader_expires_at(&e), expires_at, "not a renewal");
    assert_eq!(s.stats().metadata_updates, 1);

    s.partition(&a.holder);
    assert!(s.update_metadata(&a, &m).await.unwrap_err().is_transient());
    s.heal(&a.holder);
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(s.update_metadata(&a, &m).await.unwrap(), Renewal::Lost);

    s.put_garbage(&e);
    let err = s.update_metadata(&a, &m).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
}

#[tokio::test(start_paused = true)]
async fn faults_fail_and_partition() {
    let s = MemoryStore::race();
    s.fail_next(1);
    assert!(
        s.try_acquire(&req("a"), None)
            .await
            .unwrap_err()
            .is_transient()
    );
    s.partition(&HolderId::new("a").unwrap());
    assert!(s.try_acquire(&req("a"), None).await.is_err());
    assert!(matches!(
        s.try_acquire(&req("b"), None).await.unwrap(),
        Acquire::Won(_)
    ));
    s.heal(&HolderId::new("a").unwrap());
    assert!(matches!(
        s.try_acquire(&req("a"), None).await.unwrap(),
        Acquire::Held { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_lost_reply_fails_or_hangs_but_the_call_took_effect() {
    let s = MemoryStore::race();
    let e = ElectionName::new("e").unwrap();
    s.lose_next_replies(1, LostReply::Fail);
    let err = s.try_acquire(&req("a"), None).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    let a = s
        .current_leader(&e)
        .await
        .unwrap()
        .expect("the acquire won");
    assert_eq!(a.holder.as_str(), "a");

    let lease = lease_of(
        &e,
        a.token.get(),
        &s.state().elections[&e].records[&a.token.get()],
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    s.lose_next_replies(1, LostReply::Hang);
    let hung = tokio::time::timeout(Duration::from_secs(60), s.renew(&lease)).await;
    assert!(hung.is_err(), "a hung reply never answers");
    // The renewal was applied 5 s in: the lease lived until 15 s.
    let renewed_at = Instant::now() - Duration::from_secs(60);
    assert_eq!(
        s.leader_expires_at(&e),
        Some(renewed_at + Duration::from_secs(10))
    );
    let log = s.record_log(&e);
    assert_eq!(
        log[0].end.as_ref().map(|end| end.at),
        Some(renewed_at + Duration::from_secs(10))
    );
    // Counted: the next call answers.
    assert!(matches!(
        s.try_acquire(&req("b"), None).await.unwrap(),
        Acquire::Won(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn failed_and_refused_calls_do_not_use_up_lost_replies() {
    let s = MemoryStore::race();
    s.set_ttl_range(Duration::from_secs(1), Duration::from_secs(10));
    s.lose_next_replies(1, LostReply::Fail);
    s.fail_next(1);
    assert!(s.try_acquire(&req("a"), None).await.is_err());
    let long = AcquireRequest {
        ttl: Duration::from_secs(11),
        ..req("a")
    };
    let refused = s.try_acquire(&long, None).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Config);
    assert!(s.try_acquire(&req("a"), None).await.is_err(), "lost");
    assert!(matches!(
        s.try_acquire(&req("a"), None).await.unwrap(),
        Acquire::Held { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_fast_store_clock_expires_leases_early_by_tokio_clock() {
    let s = MemoryStore::race();
    let e = ElectionName::new("e").unwrap();
    s.set_clock_drift(1.0);
    let start = Instant::now();
    let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
        panic!("a must win an empty election")
    };
    assert_eq!(
        a.ttl,
        Duration::from_secs(10),
        "the ttl granted is the store's"
    );
    assert_eq!(
        s.leader_expires_at(&e),
        Some(start + Duration::from_secs(5))
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    s.set_clock_drift(-0.5);
    assert_eq!(s.renew(&a).await.unwrap(), Renewal::Renewed);
    assert_eq!(
        s.leader_expires_at(&e),
        Some(start + Duration::from_secs(4 + 20))
    );
}

#[test]
#[should_panic(expected = "clock drift -1 must be finite and above -1")]
fn a_clock_that_stands_still_is_refused() {
    MemoryStore::race().set_clock_drift(-1.0);
}

#[tokio::test(start_paused = true)]
async fn the_record_log_tells_each_record_s_life() {
    let s = MemoryStore::queue();
    let e = ElectionName::new("e").unwrap();
    let t0 = Instant::now();
    let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
        panic!("a must win an empty election")
    };
    let Acquire::Held {
        queued: Some(b), ..
    } = s.try_acquire(&req("b"), None).await.unwrap()
    else {
        panic!("b queues")
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    s.try_acquire(&req("c"), None).await.unwrap();
    // b's release of a's record frees nothing.
    s.release(&Lease {
        holder: b.holder.clone(),
        ..a.clone()
    })
    .await
    .unwrap();
    s.release(&a).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.delete_records(&e);
    let log = s.record_log(&e);
    let lives: Vec<_> = log
        .iter()
        .map(|l| {
            let end = l.end.as_ref().expect("all ended");
            (
                l.holder.as_str(),
                l.token.get(),
                l.created - t0,
                end.at - t0,
                end.cause.clone(),
            )
        })
        .collect();
    let secs = Duration::from_secs;
    assert_eq!(
        lives,
        [
            (
                "a",
                1,
                secs(0),
                secs(1),
                RecordEndCause::Released {
                    by: a.holder.clone()
                }
            ),
            ("b", 2, secs(0), secs(3), RecordEndCause::Deleted),
            ("c", 3, secs(1), secs(3), RecordEndCause::Deleted),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn the_record_log_dates_an_expiry_at_its_instant_not_when_noticed() {
    let s = MemoryStore::race();
    let e = ElectionName::new("e").unwrap();
    let t0 = Instant::now();
    s.try_acquire(&req("a"), None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(25)).await;
    s.try_acquire(&req("b"), None).await.unwrap();
    s.hold_expiry(true);
    tokio::time::sleep(Duration::from_secs(30)).await;
    s.hold_expiry(false);
    let log = s.record_log(&e);
    let ends: Vec<_> = log
        .iter()
        .map(|l| l.end.as_ref().map(|end| (end.at - t0, end.cause.clone())))
        .collect();
    assert_eq!(
        ends,
        [
            Some((Duration::from_secs(10), RecordEndCause::Expired)),
            // Its time passed during the hold: it went when the hold ended.
            Some((Duration::from_secs(55), RecordEndCause::Expired)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn held_expiry_keeps_leases_alive() {
    let s = MemoryStore::race();
    s.try_acquire(&req("a"), None).await.unwrap();
    s.hold_expiry(true);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(matches!(
        s.try_acquire(&req("b"), None).await.unwrap(),
        Acquire::Held { .. }
    ));
    s.hold_expiry(false);
    assert!(matches!(
        s.try_acquire(&req("b"), None).await.unwrap(),
        Acquire::Won(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn ttl_outside_the_range_is_refused_as_config() {
    let s = MemoryStore::race();
    s.set_ttl_range(Duration::from_secs(15), Duration::from_secs(60));
    assert_eq!(
        s.info().min_ttl..=s.info().max_ttl,
        Duration::from_secs(15)..=Duration::from_secs(60)
    );
    for secs in [0, 14, 61] {
        let r = AcquireRequest {
            ttl: Duration::from_secs(secs),
            ..req("a")
        };
        let err = s.try_acquire(&r, None).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{secs} s: {err}");
    }
    let e = ElectionName::new("e").unwrap();
    assert_eq!(s.current_leader(&e).await.unwrap(), None);
    let r = AcquireRequest {
        ttl: Duration::from_secs(15),
        ..req("a")
    };
    assert!(matches!(
        s.try_acquire(&r, None).await.unwrap(),
        Acquire::Won(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_granted_ttl_is_what_the_lease_lives_and_says() {
    let s = MemoryStore::race();
    s.set_granted_ttl(Some(Duration::from_secs(4)));
    assert_eq!(s.info().ttl_grant, TtlGrant::Negotiated);
    let start = Instant::now();
    let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
        panic!("a must win an empty election")
    };
    assert_eq!(a.ttl, Duration::from_secs(4));
    let e = ElectionName::new("e").unwrap();
    assert_eq!(
        s.leader_expires_at(&e),
        Some(start + Duration::from_secs(4))
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(s.renew(&a).await.unwrap(), Renewal::Lost);
    s.set_granted_ttl(None);
    assert_eq!(s.info().ttl_grant, TtlGrant::AtLeastAsked);
}

#[tokio::test(start_paused = true)]
async fn expiry_slack_delays_expiry_by_the_ttl_dependent_amount() {
    let s = MemoryStore::race();
    s.set_expiry_slack(ExpirySlack::new(Duration::from_secs(1), 50));
    assert_eq!(
        s.info().expiry_slack_for(Duration::from_secs(10)),
        Duration::from_secs(6)
    );
    let e = ElectionName::new("e").unwrap();
    let mut w = s.watch(&e).await.unwrap();
    assert_eq!(w.next().await.unwrap().unwrap(), None);
    let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
        panic!("a must win an empty election")
    };
    assert_eq!(a.ttl, Duration::from_secs(10), "the slack is not granted");
    let start = Instant::now();
    assert!(w.next().await.unwrap().unwrap().is_some());
    assert_eq!(w.next().await.unwrap().unwrap(), None);
    assert_eq!(start.elapsed(), Duration::from_secs(16));
}
