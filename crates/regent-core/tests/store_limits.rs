//! What a store declares about its ttls, and what the core does with it, on
//! paused time with the memory store posing as other stores: a narrow ttl
//! range (Azure Blob's 15–60 s) refused at build, a negotiated ttl
//! (ZooKeeper's session timeout) that the holder's deadlines follow, and a
//! ttl-dependent expiry slack (Consul) that failover waits for.

mod common;

use std::error::Error as _;
use std::time::Duration;

use common::{candidate, id, jobs, secs, spawn_follower};
use regent_core::memory::MemoryStore;
use regent_core::store::{ExpirySlack, TtlGrant};
use regent_core::{
    CampaignError, Candidate, ConfigError, ErrorKind, LeaseStore, MAX_TTL, StoreStyle,
};
use tokio::time::{Instant, sleep};

fn build_with_ttl(
    store: &MemoryStore,
    ttl: Duration,
) -> Result<Candidate<MemoryStore>, ConfigError> {
    Candidate::builder(store.clone(), jobs(), id("a"))
        .ttl(ttl)
        .build()
}

/// Azure Blob leases last 15 to 60 s: a 2-minute ttl fails at build, with
/// an error naming the store's range, not at the first acquire.
#[test]
fn ttl_above_the_store_maximum_is_refused_at_build_naming_the_range() {
    let store = MemoryStore::race();
    store.set_ttl_range(secs(15), secs(60));
    let err = build_with_ttl(&store, secs(120)).unwrap_err();
    assert_eq!(
        err,
        ConfigError::TtlAboveStoreMaximum {
            ttl: secs(120),
            min: secs(15),
            max: secs(60),
            store: "memory",
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains("120s") && msg.contains("15s") && msg.contains("60s"),
        "{msg}"
    );

    let err = build_with_ttl(&store, secs(10)).unwrap_err();
    assert_eq!(
        err,
        ConfigError::TtlBelowStoreMinimum {
            ttl: secs(10),
            min: secs(15),
            max: secs(60),
            store: "memory",
        }
    );
    assert!(err.to_string().contains("15s to 60s"), "{err}");

    for ttl in [secs(15), secs(30), secs(60)] {
        build_with_ttl(&store, ttl).unwrap_or_else(|e| panic!("ttl {ttl:?}: {e}"));
    }
}

/// A store that claims more than a day is capped at [`MAX_TTL`].
#[test]
fn a_day_stays_the_cap_when_a_store_declares_more() {
    let store = MemoryStore::race();
    store.set_ttl_range(secs(1), MAX_TTL * 2);
    assert!(matches!(
        build_with_ttl(&store, MAX_TTL + secs(1)),
        Err(ConfigError::TtlTooLong { .. })
    ));
    build_with_ttl(&store, MAX_TTL).expect("a day is allowed");
    assert_eq!(store.info().effective_max_ttl(), MAX_TTL);
}

/// Regression (granted ttl): a store that grants 9 s where 10 s were asked
/// frees the lease 9 s after the acquire; a local deadline measured from
/// the asked ttl (9.895 s) would have let the holder believe in its lease
/// after the store could hand it on.
#[tokio::test(start_paused = true)]
async fn a_shorter_granted_ttl_moves_the_local_deadline() {
    for store in [MemoryStore::race(), MemoryStore::queue()] {
        let style = store.info().style;
        store.set_granted_ttl(Some(secs(9)));
        assert_eq!(store.info().ttl_grant, TtlGrant::Negotiated);
        let a = build_with_ttl(&store, secs(10)).unwrap();
        let start = Instant::now();
        let l = a.campaign().await.unwrap();
        let usable_9s = secs(9).mul_f64(0.99) - Duration::from_millis(5);
        assert_eq!(l.lease().ttl, secs(9), "{style:?}");
        assert_eq!(l.timing().ttl, secs(9), "{style:?}");
        assert_eq!(l.deadline(), start + usable_9s, "{style:?}");
        assert!(
            l.deadline() < store.leader_expires_at(&jobs()).unwrap(),
            "{style:?}: the local deadline must fall before the store's expiry"
        );
        // The renew interval and the step-down stay as configured.
        assert_eq!(l.lease_state().borrow().step_down_at, start + secs(6));
        sleep(secs(2) + Duration::from_millis(1)).await;
        let state = *l.lease_state().borrow();
        assert_eq!(state.deadline, start + secs(2) + usable_9s, "{style:?}");
        assert!(state.deadline < store.leader_expires_at(&jobs()).unwrap());
        l.resign().await.unwrap();
        a.shutdown().await;
    }
}

/// A granted ttl too short for the timing rules is not led with: the lease
/// is given back at once and the campaign fails as a configuration error
/// naming the granted ttl.
#[tokio::test(start_paused = true)]
async fn a_granted_ttl_too_short_for_the_rules_is_refused() {
    for store in [MemoryStore::race(), MemoryStore::queue()] {
        let style = store.info().style;
        store.set_granted_ttl(Some(secs(5)));
        let a = build_with_ttl(&store, secs(10)).unwrap();
        let err = match a.campaign().await {
            Err(CampaignError::Store(e)) => e,
            other => panic!("{style:?}: expected a store error, got {other:?}"),
        };
        assert_eq!(err.kind(), ErrorKind::Config, "{style:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("granted") && msg.contains("5s") && msg.contains("10s"),
            "{msg}"
        );
        let rule = err
            .source()
            .and_then(|s| s.downcast_ref::<ConfigError>())
            .expect("the rule broken as the source");
        assert!(
            matches!(rule, ConfigError::DeadlineNotBelowTtl { ttl, .. } if *ttl == secs(5)),
            "{rule:?}"
        );
        // Given back: the election is free at once, not after 5 s.
        assert_eq!(
            store.current_leader(&jobs()).await.unwrap(),
            None,
            "{style:?}"
        );
        a.shutdown().await;
    }
}

/// Granting more than asked (etcd rounds up to whole seconds) changes
/// nothing: the holder measures from the ttl it asked for.
#[tokio::test(start_paused = true)]
async fn a_longer_granted_ttl_changes_nothing() {
    let store = MemoryStore::race();
    store.set_granted_ttl(Some(secs(20)));
    let a = build_with_ttl(&store, secs(10)).unwrap();
    let start = Instant::now();
    let l = a.campaign().await.unwrap();
    assert_eq!(l.lease().ttl, secs(20));
    assert_eq!(l.timing(), a.timing());
    assert_eq!(l.deadline(), start + a.timing().usable());
    l.resign().await.unwrap();
}

/// Consul frees a dead holder's session up to one more ttl late: a crashed
/// leader's lease goes after `ttl + 1×ttl`, which `explain()` reports and a
/// follower waits for.
#[tokio::test(start_paused = true)]
async fn failover_waits_for_the_ttl_dependent_expiry_slack() {
    let store = MemoryStore::race();
    store.set_expiry_slack(ExpirySlack::proportional(100));
    let a = candidate(&store, "a");
    let b = candidate(&store, "b");
    let e = b.explain();
    assert_eq!(e.expiry_slack, secs(10));
    assert_eq!(e.crash_failover, secs(20));

    let la = a.campaign().await.unwrap();
    let follower = spawn_follower(b.clone());
    // A "crashes" at once: it can no longer reach the store.
    store.partition(&id("a"));
    let crashed_at = Instant::now();
    let (won_at, lb) = follower.await.unwrap();
    let took = won_at - crashed_at;
    assert!(
        took >= secs(20) && took <= secs(20) + b.timing().retry_every,
        "b won {took:?} after the crash"
    );
    assert!(lb.token() > la.token());
    drop(la);
    lb.resign().await.unwrap();
}

#[test]
fn memory_store_style_is_kept_by_the_limit_knobs() {
    let store = MemoryStore::queue();
    store.set_ttl_range(secs(1), secs(60));
    store.set_expiry_slack(ExpirySlack::fixed(secs(1)));
    let info = store.info();
    assert_eq!(info.style, StoreStyle::Queue);
    assert_eq!((info.min_ttl, info.max_ttl), (secs(1), secs(60)));
    assert_eq!(info.expiry_slack_for(secs(10)), secs(1));
    assert_eq!(info.ttl_grant, TtlGrant::AtLeastAsked);
}

/// A slack with a floor (Consul's: `max(20 s, ttl)`) is the larger of the
/// floor and its linear part, saturating.
#[test]
fn an_expiry_slack_with_a_floor_is_never_below_it() {
    let slack = ExpirySlack::proportional(100).at_least(secs(20));
    assert_eq!(slack.for_ttl(secs(10)), secs(20));
    assert_eq!(slack.for_ttl(secs(20)), secs(20));
    assert_eq!(slack.for_ttl(secs(60)), secs(60));
    assert_eq!(ExpirySlack::fixed(secs(1)).for_ttl(secs(10)), secs(1));
    assert_eq!(
        ExpirySlack::proportional(100)
            .at_least(secs(20))
            .for_ttl(Duration::MAX),
        Duration::MAX
    );
}
