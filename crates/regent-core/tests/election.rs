//! Campaigning, leadership and failover on paused time with the memory
//! store: timing of expiry and failover, stepping down on the local clock,
//! graceful hand-over, status, configuration errors.

mod common;

use std::time::Duration;

use common::{candidate, id, jobs, secs, spawn_follower};
use regent_core::memory::MemoryStore;
use regent_core::testing::{CallKind, Latency, Layered};
use regent_core::{
    CampaignError, Candidate, ConfigError, EndReason, ErrorKind, LeaseStore, Metadata, Observer,
    Status,
};
use tokio::time::{Instant, sleep};

#[tokio::test(start_paused = true)]
async fn crash_failover_waits_for_store_expiry_and_no_longer() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let b = candidate(&store, "b");
    let retry = b.timing().retry_every;
    let la = a.campaign().await.unwrap();
    let follower = spawn_follower(b);
    sleep(secs(5)).await;
    // A "crashes": it can no longer reach the store.
    store.partition(&id("a"));
    let expires = store.leader_expires_at(&jobs()).unwrap();
    let (won_at, lb) = follower.await.unwrap();
    assert!(
        won_at >= expires,
        "b won at {won_at:?} before a's lease expired at {expires:?}"
    );
    assert!(
        won_at <= expires + retry,
        "b won {:?} after expiry; the watch should make it immediate",
        won_at - expires
    );
    assert!(lb.token() > la.token());
    let ended = la.ended().expect("a stepped down");
    assert_eq!(ended.reason, EndReason::DeadlinePassed);
    assert!(ended.at < won_at);
}

/// An idle follower of a store that notifies retries at the ttl while its
/// watch is open, not at the renew interval: the watch tells it of every
/// change (expiry included), and at the renew interval the retries were
/// most of a queue store's idle load. A retry interval that is set holds.
#[tokio::test(start_paused = true)]
async fn an_idle_follower_with_an_open_watch_retries_at_the_ttl() {
    async fn acquires_in_100_s(b: Candidate<MemoryStore>, store: &MemoryStore) -> u64 {
        let a = candidate(store, "a");
        let la = a.campaign().await.unwrap();
        let before = store.stats().acquires;
        let follower = tokio::spawn(async move { b.campaign().await });
        sleep(secs(100)).await;
        let acquires = store.stats().acquires - before;
        follower.abort();
        la.resign().await.unwrap();
        acquires
    }
    let store = MemoryStore::race();
    let by_default = acquires_in_100_s(candidate(&store, "b"), &store).await;
    // Every 5–10 s (the ttl, jittered), and the first acquire.
    assert!((10..=21).contains(&by_default), "{by_default} acquires");
    let store = MemoryStore::race();
    let set = Candidate::builder(store.clone(), jobs(), id("b"))
        .ttl(secs(10))
        .retry_every(secs(2))
        .build()
        .unwrap();
    let with_retry_set = acquires_in_100_s(set, &store).await;
    // Every 1–2 s.
    assert!(with_retry_set >= 50, "{with_retry_set} acquires");
}

#[tokio::test(start_paused = true)]
async fn failing_renewals_step_down_before_the_store_can_hand_over() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let la = a.campaign().await.unwrap();
    let cancel = la.cancellation();
    sleep(secs(3)).await; // one renewal, sent at +2 s
    let state = *la.lease_state().borrow();
    store.partition(&id("a"));
    cancel.cancelled().await;
    let ended = la.ended().unwrap();
    assert_eq!(ended.reason, EndReason::DeadlinePassed);
    assert_eq!(
        ended.at, state.step_down_at,
        "steps down exactly at the renew deadline"
    );
    let expires = store.leader_expires_at(&jobs()).unwrap();
    let grace = a.timing().grace;
    assert!(
        ended.at + grace <= state.deadline && state.deadline < expires,
        "step down {:?} + grace {grace:?} <= local deadline {:?} < store expiry {:?}",
        ended.at,
        state.deadline,
        expires
    );
    assert!(la.check().is_err());
}

#[tokio::test(start_paused = true)]
async fn renewal_answered_after_the_deadline_steps_down_although_the_store_said_ok() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let start = Instant::now();
    let la = a.campaign().await.unwrap();
    // The store applies every renewal at once but its answers take 8 s.
    store.set_reply_delay(secs(8));
    la.cancellation().cancelled().await;
    let ended = la.ended().unwrap();
    assert_eq!(ended.reason, EndReason::DeadlinePassed);
    assert_eq!(
        ended.at - start,
        secs(6),
        "acquired at 0, step-down deadline 6 s"
    );
    // The store did renew (at +2 s, so until +12 s): a still holds it there.
    assert_eq!(
        store.leader_expires_at(&jobs()).map(|e| e - start),
        Some(secs(12))
    );
    assert_eq!(
        la.check().unwrap_err().reason,
        EndReason::DeadlinePassed,
        "the guard no longer vouches for leadership"
    );
}

#[tokio::test(start_paused = true)]
async fn deadline_is_measured_from_when_the_renewal_was_sent() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let start = Instant::now();
    let la = a.campaign().await.unwrap();
    store.set_request_delay(secs(1));
    let mut states = la.lease_state();
    states.changed().await.unwrap(); // first renewal: sent at +2 s, applied at +3 s
    let state = *states.borrow();
    assert_eq!(Instant::now() - start, secs(3));
    assert_eq!(state.deadline, start + secs(2) + a.timing().usable());
    assert_eq!(state.step_down_at, start + secs(8));
    let expires = store.leader_expires_at(&jobs()).unwrap();
    assert_eq!(expires, start + secs(13));
    assert!(state.deadline < expires);
    // And it acts on it: cut off now, it steps down 6 s after the send.
    store.partition(&id("a"));
    let ended = la.until_ended().await;
    assert_eq!(ended.reason, EndReason::DeadlinePassed);
    assert_eq!(ended.at, start + secs(8));
}

#[tokio::test(start_paused = true)]
async fn resign_hands_over_without_waiting_for_the_ttl() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let b = candidate(&store, "b");
    let la = a.campaign().await.unwrap();
    let follower = spawn_follower(b);
    sleep(secs(7)).await;
    let resigned_at = Instant::now();
    la.resign().await.unwrap();
    let (won_at, lb) = follower.await.unwrap();
    assert!(
        won_at - resigned_at < Duration::from_millis(100),
        "b took {:?} after the resign",
        won_at - resigned_at
    );
    assert!(lb.token().get() > 1);
}

/// Regression (CI on Azurite under load): the candidate that gave a term
/// back waited a fixed 250 ms, and won again before a follower whose
/// acquire was slower than that. Now it waits until the watch shows the
/// follower leading, for up to a tenth of the ttl.
#[tokio::test(start_paused = true)]
async fn a_term_given_back_goes_to_a_follower_whose_acquire_is_slow() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let slow = Layered::new(
        store.clone(),
        Latency::new().request(CallKind::TryAcquire, Duration::from_millis(700)),
    );
    // b retries only when the watch shows a change (or after 4–8 s), so
    // no acquire of b's is in flight when a resigns.
    let b = Candidate::builder(slow, jobs(), id("b"))
        .ttl(secs(10))
        .retry_every(secs(8))
        .build()
        .unwrap();
    let la = a.campaign().await.unwrap();
    let follower = tokio::spawn(async move {
        let l = b.campaign().await.unwrap();
        (Instant::now(), l)
    });
    sleep(secs(2)).await;
    la.resign().await.unwrap();
    let resigned_at = Instant::now();
    let again = tokio::spawn({
        let a = a.clone();
        async move { a.campaign().await.unwrap() }
    });
    let (won_at, lb) = tokio::time::timeout(secs(30), follower)
        .await
        .expect("b never led: a won its term back")
        .unwrap();
    assert!(won_at - resigned_at < secs(1), "{:?}", won_at - resigned_at);
    // a follows b now; it leads only once b gives the term back.
    sleep(secs(5)).await;
    assert!(!again.is_finished(), "a won while b led");
    assert_eq!(
        a.status().borrow().leader().map(|l| l.holder.clone()),
        Some(id("b"))
    );
    let token_b = lb.token();
    lb.resign().await.unwrap();
    let la = again.await.unwrap();
    assert!(la.token() > token_b);
}

/// Regression (issue 25, found by the kill -9 sweep on Consul): a
/// follower that lost the race for a released term to a term so short
/// that it began and ended while the follower's acquire was under way
/// never heard of that term's end. Its watch had told it "no leader"
/// last, the acquire answered "c leads", and the watch, which tells only
/// changes from what it told last, had nothing to tell when c's term
/// ended: the follower slept until its retry, a ttl (10 s here), then
/// 5 s of jitter at best. Now it opens its watch anew and leads at once.
#[tokio::test(start_paused = true)]
async fn a_follower_hears_of_the_end_of_a_term_shorter_than_its_acquire() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let slow = Layered::new(
        store.clone(),
        Latency::new()
            .request(CallKind::TryAcquire, Duration::from_millis(700))
            .reply(CallKind::TryAcquire, Duration::from_millis(700)),
    );
    let b = Candidate::builder(slow, jobs(), id("b"))
        .ttl(secs(10))
        .build()
        .unwrap();
    let c = candidate(&store, "c");
    let la = a.campaign().await.unwrap();
    let b = tokio::spawn(async move {
        let l = b.campaign().await.unwrap();
        (Instant::now(), l)
    });
    let c = spawn_follower(c);
    // Both follow a.
    sleep(secs(2)).await;
    la.resign().await.unwrap();
    let resigned_at = Instant::now();
    // c, whose acquire is quick, leads at once; b's acquire reaches the
    // store 700 ms later (c leads), and its answer comes back 700 ms after
    // that, when c's short term has already ended.
    let (c_at, lc) = c.await.unwrap();
    assert!(c_at - resigned_at < Duration::from_millis(100));
    sleep_until_after(resigned_at, Duration::from_millis(1000)).await;
    let token_c = lc.token();
    lc.resign().await.unwrap();
    let (b_at, lb) = tokio::time::timeout(secs(30), b)
        .await
        .expect("b never led")
        .unwrap();
    let took = b_at - resigned_at;
    assert!(
        took < secs(4),
        "b led {took:?} after a resigned: it slept through the end of c's term"
    );
    assert!(lb.token() > token_c);
}

async fn sleep_until_after(start: Instant, d: Duration) {
    tokio::time::sleep_until(start + d).await;
}

/// A lone candidate that gave its term back leads again after the pause:
/// a tenth of the ttl (1 s at ttl 10 s) on a store that notifies.
#[tokio::test(start_paused = true)]
async fn a_lone_candidate_leads_again_after_the_hand_over_pause() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    a.campaign().await.unwrap().resign().await.unwrap();
    let resigned_at = Instant::now();
    let la = a.campaign().await.unwrap();
    let paused = Instant::now() - resigned_at;
    assert!(
        paused >= secs(1) && paused < Duration::from_millis(1100),
        "{paused:?}"
    );
    assert_eq!(la.token().get(), 2);
}

mod lock_delay {
    //! A store whose acquires are refused until an instant, with no leader
    //! to show and nothing for the watch to tell when the refusal ends (a
    //! Consul key in its lock delay after a dead holder's session). (A store
    //! whose acquires answer late, a follower on a loaded machine, is the
    //! memory store with a [`Latency`](regent_core::testing::Latency) layer.)
    use std::sync::atomic::{AtomicU32, Ordering};

    use regent_core::testing::StoreLayer;
    use regent_core::{Acquire, AcquireRequest, Lease, LeaseStore, StoreError};
    use tokio::time::Instant;

    pub(crate) struct Refusing {
        /// Every acquire before this instant is refused.
        until: Instant,
        /// Acquires refused.
        refused: AtomicU32,
    }

    impl Refusing {
        pub(crate) fn until(until: Instant) -> Self {
            Self {
                until,
                refused: AtomicU32::new(0),
            }
        }

        pub(crate) fn refused(&self) -> u32 {
            self.refused.load(Ordering::Relaxed)
        }
    }

    impl StoreLayer for Refusing {
        async fn try_acquire<S: LeaseStore>(
            &self,
            store: &S,
            req: &AcquireRequest,
            queued: Option<&Lease>,
        ) -> Result<Acquire, StoreError> {
            if Instant::now() < self.until {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return Ok(Acquire::Held {
                    leader: None,
                    queued: None,
                });
            }
            store.try_acquire(req, queued).await
        }
    }
}

/// With no leader to watch and an acquire refused all the same (Consul's
/// lock delay), a follower retries at the renew interval, not at the ttl
/// it waits while someone leads: nothing in the store announces the end
/// of the delay (regression: the ttl-long retry added 5 to 10 s to a
/// Consul crash failover).
#[tokio::test(start_paused = true)]
async fn with_no_leader_and_an_acquire_refused_a_follower_retries_at_the_renew_interval() {
    let store = MemoryStore::race();
    let delay_ends = Instant::now() + secs(15);
    let delayed = Layered::new(store, lock_delay::Refusing::until(delay_ends));
    let refusing = delayed.layer().clone();
    let b = Candidate::builder(delayed, jobs(), id("b"))
        .ttl(secs(10))
        .build()
        .unwrap();
    let retry = b.timing().retry_every;
    let lb = b.campaign().await.unwrap();
    let waited = Instant::now() - delay_ends;
    assert!(waited <= retry, "won {waited:?} after the delay ended");
    // Every 1–2 s for 15 s; at the ttl (every 5–10 s) it was 2 or 3.
    let refused = refusing.refused();
    assert!(refused >= 8, "{refused} acquires refused in 15 s");
    drop(lb);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_guard_releases_the_lease() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let la = a.campaign().await.unwrap();
    drop(la);
    let b = candidate(&store, "b");
    let start = Instant::now();
    let lb = b.campaign().await.unwrap();
    assert!(Instant::now() - start < Duration::from_millis(100));
    assert_eq!(lb.token().get(), 2);
    assert_eq!(store.stats().releases, 1);
}

#[tokio::test(start_paused = true)]
async fn shutdown_releases_and_stops() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let status = a.status();
    let la = a.campaign().await.unwrap();
    assert!(status.borrow().is_leader());
    let cancel = la.cancellation();
    let guard = tokio::spawn(async move {
        // The work stops on cancellation and drops its guard.
        la.cancellation().cancelled().await;
        la.ended().unwrap().reason
    });
    a.shutdown().await;
    assert!(cancel.is_cancelled());
    assert_eq!(guard.await.unwrap(), EndReason::Shutdown);
    assert_eq!(*status.borrow(), Status::Stopped);
    assert_eq!(store.current_leader(&jobs()).await.unwrap(), None);
    assert!(matches!(a.campaign().await, Err(CampaignError::Shutdown)));
}

#[tokio::test(start_paused = true)]
async fn follower_status_names_the_leader() {
    let store = MemoryStore::race();
    let a = Candidate::builder(store.clone(), jobs(), id("a"))
        .metadata(Metadata::from_pairs([("addr", "10.0.0.1:8080")]).unwrap())
        .build()
        .unwrap();
    let b = candidate(&store, "b");
    let mut status = b.status();
    assert_eq!(*status.borrow(), Status::Starting);
    let la = a.campaign().await.unwrap();
    let follower = tokio::spawn({
        let b = b.clone();
        async move { b.campaign().await }
    });
    let seen = status
        .wait_for(|s| matches!(s, Status::Follower { leader: Some(_) }))
        .await
        .unwrap()
        .clone();
    let leader = seen.leader().unwrap();
    assert_eq!(leader.holder, id("a"));
    assert_eq!(leader.token, la.token());
    assert_eq!(leader.metadata.get("addr"), Some("10.0.0.1:8080"));
    la.resign().await.unwrap();
    let lb = follower.await.unwrap().unwrap();
    assert_eq!(status.borrow().leader().unwrap().token, lb.token());
    assert!(status.borrow().is_leader());
}

#[tokio::test(start_paused = true)]
async fn transient_errors_are_retried_with_backoff() {
    let store = MemoryStore::race();
    store.fail_next(6);
    let a = candidate(&store, "a");
    let start = Instant::now();
    let la = a.campaign().await.unwrap();
    assert_eq!(store.stats().acquires, 7, "6 failures, then a win");
    let waited = Instant::now() - start;
    assert!(
        waited > Duration::ZERO && waited < secs(10),
        "waited {waited:?}"
    );
    la.resign().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_dead_store_makes_the_campaign_give_up_when_asked() {
    let store = MemoryStore::race();
    store.fail_next(u32::MAX);
    let a = Candidate::builder(store.clone(), jobs(), id("a"))
        .give_up_after(secs(5))
        .build()
        .unwrap();
    let start = Instant::now();
    match a.campaign().await {
        Err(CampaignError::Unavailable { waited, last }) => {
            assert!(waited >= secs(5));
            assert!(Instant::now() - start < secs(8));
            assert!(last.is_transient());
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn garbage_in_the_store_is_a_permanent_error() {
    let store = MemoryStore::race();
    store.put_garbage(&jobs());
    let a = candidate(&store, "a");
    match a.campaign().await {
        Err(CampaignError::Store(e)) => assert_eq!(e.kind(), ErrorKind::Corrupt),
        other => panic!("expected a Corrupt store error, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn deleted_record_ends_leadership_as_lost() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let la = a.campaign().await.unwrap();
    store.delete_records(&jobs());
    let ended = la.until_ended().await;
    assert_eq!(ended.reason, EndReason::Lost);
    let lb = candidate(&store, "b").campaign().await.unwrap();
    assert!(lb.token() > la.token());
}

#[tokio::test(start_paused = true)]
async fn queued_follower_keeps_its_place_through_a_long_term() {
    let store = MemoryStore::queue();
    let a = candidate(&store, "a");
    let la = a.campaign().await.unwrap();
    let b = candidate(&store, "b");
    let fb = tokio::spawn(async move { b.campaign().await.unwrap() });
    sleep(secs(1)).await;
    let c = candidate(&store, "c");
    let fc = tokio::spawn(async move { c.campaign().await.unwrap() });
    // Six ttls: b's and c's queued records must be kept alive meanwhile.
    sleep(secs(60)).await;
    assert!(la.check().is_ok());
    la.resign().await.unwrap();
    let lb = fb.await.unwrap();
    assert_eq!(lb.token().get(), 2, "b keeps the place it queued at");
    assert!(!fc.is_finished());
    lb.resign().await.unwrap();
    let lc = fc.await.unwrap();
    assert_eq!(lc.token().get(), 3);
}

/// On a queue store a failover costs one acquire, the new head's: the
/// followers behind it learn of the new leader from their watch and keep
/// their places without asking the store again (a herd of 1,000 made
/// 1,000 acquires per failover).
#[tokio::test(start_paused = true)]
async fn a_queue_failover_is_one_acquire_not_one_per_follower() {
    let store = MemoryStore::queue();
    let la = candidate(&store, "a").campaign().await.unwrap();
    let mut followers = Vec::new();
    for i in 0..20 {
        let f = candidate(&store, &format!("f{i}"));
        followers.push(tokio::spawn(async move { f.campaign().await.unwrap() }));
        // In this order in line.
        sleep(Duration::from_millis(10)).await;
    }
    sleep(secs(1)).await;
    let before = store.stats().acquires;
    la.resign().await.unwrap();
    let first = followers.remove(0);
    let l0 = first.await.unwrap();
    sleep(Duration::from_millis(100)).await;
    let acquires = store.stats().acquires - before;
    assert_eq!(acquires, 1, "acquires for one failover with 20 in line");
    assert!(followers.iter().all(|f| !f.is_finished()));
    let token0 = l0.token();
    l0.resign().await.unwrap();
    let l1 = followers.remove(0).await.unwrap();
    assert!(l1.token() > token0);
    for f in followers {
        f.abort();
    }
}

/// The next in line hears of its turn while a renewal of its place is
/// still out: a store may answer renewals in rounds a tenth of the ttl
/// apart (etcd's shared lease, ZooKeeper's multiRead), and a follower that
/// waited for its renewal before it looked at its watch led up to a round
/// late (regression: ZooKeeper's herd failovers took 0.6 to 0.9 s).
#[tokio::test(start_paused = true)]
async fn the_next_in_line_does_not_wait_for_its_renewal_to_lead() {
    let store = MemoryStore::queue();
    let la = candidate(&store, "a").campaign().await.unwrap();
    let slow = Layered::new(
        store.clone(),
        Latency::new().request(CallKind::Renew, secs(5)),
    );
    let b = Candidate::builder(slow, jobs(), id("b"))
        .ttl(secs(10))
        .build()
        .unwrap();
    let renew_every = b.timing().renew_every;
    let fb = tokio::spawn(async move {
        let l = b.campaign().await.unwrap();
        (Instant::now(), l)
    });
    // b queued at once; its first renewal goes out a renew interval later
    // and takes 5 s: resign while it is out.
    sleep(renew_every + secs(2)).await;
    let resigned = Instant::now();
    la.resign().await.unwrap();
    let (won, lb) = fb.await.unwrap();
    assert!(
        won - resigned < Duration::from_millis(50),
        "b led {:?} after the resign",
        won - resigned
    );
    lb.resign().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn observer_follows_changes_including_no_leader() {
    use futures_util::StreamExt;
    let store = MemoryStore::race();
    let observer = Observer::new(store.clone(), jobs());
    let mut changes = Box::pin(observer.changes());
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
    let la = candidate(&store, "a").campaign().await.unwrap();
    let seen = changes.next().await.unwrap().unwrap().unwrap();
    assert_eq!((seen.holder.as_str(), seen.token), ("a", la.token()));
    assert_eq!(observer.current().await.unwrap().unwrap().holder, id("a"));
    la.resign().await.unwrap();
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
    // A crashed leader's expiry is seen too.
    let lb = candidate(&store, "b").campaign().await.unwrap();
    assert_eq!(
        changes.next().await.unwrap().unwrap().unwrap().holder,
        id("b")
    );
    store.partition(&id("b"));
    let expires = store.leader_expires_at(&jobs()).unwrap();
    assert_eq!(changes.next().await.unwrap().unwrap(), None);
    assert_eq!(Instant::now(), expires);
    drop(lb);
}

#[test]
fn config_errors_name_the_rule() {
    let store = MemoryStore::race();
    let build = |f: fn(
        regent_core::CandidateBuilder<MemoryStore>,
    ) -> regent_core::CandidateBuilder<MemoryStore>| {
        f(Candidate::builder(store.clone(), jobs(), id("a")))
            .build()
            .unwrap_err()
    };
    assert!(matches!(
        build(|b| b.ttl(Duration::ZERO)),
        ConfigError::Zero { what: "ttl" }
    ));
    assert!(matches!(
        build(|b| b.ttl(secs(10)).renew_deadline(secs(10))),
        ConfigError::DeadlineNotBelowTtl { .. }
    ));
    assert!(matches!(
        build(|b| b.ttl(secs(10)).renew_every(secs(5))).rule(),
        ConfigError::IntervalNotBelowDeadline { .. }
    ));
    assert!(matches!(
        build(|b| b.ttl(secs(10)).grace(secs(5))).rule(),
        ConfigError::GraceTooLong { .. }
    ));
    assert!(matches!(
        build(|b| b.clock_drift(0.2)),
        ConfigError::DriftOutOfRange { .. }
    ));
    assert!(matches!(
        build(|b| b.ttl(Duration::from_micros(500))),
        ConfigError::TtlTooShort { .. }
    ));
    let msg = build(|b| b.ttl(secs(10)).renew_every(secs(5))).to_string();
    assert!(msg.contains("1.2 x renew interval"), "{msg}");
    assert!(msg.contains("5s"), "{msg}");
}

#[test]
fn explain_states_failover_and_budget() {
    let a = candidate(&MemoryStore::race(), "a");
    let e = a.explain();
    assert_eq!(
        e.crash_failover,
        secs(10),
        "notifying store: ttl, no detection delay"
    );
    assert_eq!(e.renew_attempts, 8);
    let text = e.to_string();
    assert!(text.contains("safety budget"), "{text}");
    assert!(text.contains("graceful resign"), "{text}");
}

/// Regression: an acquire that timed out but won on the store left the
/// candidate following itself until its own orphaned lease expired.
#[tokio::test(start_paused = true)]
async fn timed_out_acquire_that_won_is_given_back() {
    let store = MemoryStore::race();
    // The first acquire is answered after 7 s, beyond the 6 s renew
    // deadline; later calls are answered at once.
    store.set_reply_delay(secs(7));
    let s = store.clone();
    tokio::spawn(async move {
        sleep(Duration::from_millis(1)).await;
        s.set_reply_delay(Duration::ZERO);
    });
    let a = candidate(&store, "a");
    let start = Instant::now();
    let la = a.campaign().await.unwrap();
    let took = Instant::now() - start;
    assert!(
        took < secs(8),
        "won after {took:?}: the orphaned lease was not released"
    );
    assert_eq!(la.token().get(), 2, "the first, abandoned win had token 1");
}

/// Regression: shutting down during an acquire that then won left the lease
/// to expire by its ttl instead of releasing it.
#[tokio::test(start_paused = true)]
async fn shutdown_during_an_acquire_releases_what_it_won() {
    let store = MemoryStore::race();
    store.set_reply_delay(secs(1));
    let a = candidate(&store, "a");
    let campaign = tokio::spawn({
        let a = a.clone();
        async move { a.campaign().await }
    });
    sleep(Duration::from_millis(500)).await;
    a.shutdown().await;
    assert!(matches!(
        campaign.await.unwrap(),
        Err(CampaignError::Shutdown)
    ));
    store.set_reply_delay(Duration::ZERO);
    assert_eq!(store.current_leader(&jobs()).await.unwrap(), None);
    assert_eq!(store.stats().releases, 1);
}

/// Regression: a follower whose campaign future was dropped (a `select!`
/// that took another branch, as `regent run` does on SIGTERM) left its
/// place in line on a queue store. When the leader resigned, that stale
/// place came first, and the next live candidate waited a whole ttl.
#[tokio::test(start_paused = true)]
async fn a_dropped_campaign_gives_back_its_place_in_line() {
    let store = MemoryStore::queue();
    let a = candidate(&store, "a");
    let la = a.campaign().await.unwrap();
    let b = candidate(&store, "b");
    tokio::select! {
        r = b.campaign() => panic!("b cannot lead while a does: {:?}", r.map(|l| l.token())),
        () = sleep(secs(1)) => {}
    }
    let c = candidate(&store, "c");
    let fc = spawn_follower(c);
    sleep(secs(1)).await;
    // b's campaign is gone; shutdown waits for its place to be given back.
    b.shutdown().await;
    assert_eq!(store.stats().releases, 1, "b's place was not given back");
    let resigned = Instant::now();
    la.resign().await.unwrap();
    let (at, lc) = fc.await.unwrap();
    assert!(
        at - resigned < secs(1),
        "c led {:?} after a resigned: it waited for b's stale place",
        at - resigned
    );
    assert_eq!(lc.holder().as_str(), "c");
}

/// Regression: an acquire in flight when its campaign future was dropped
/// won, and the lease was left to expire, so the election had a leader
/// nobody acted for during a ttl.
#[tokio::test(start_paused = true)]
async fn a_dropped_campaign_gives_back_what_its_acquire_in_flight_won() {
    let store = MemoryStore::race();
    store.set_reply_delay(secs(1));
    let a = candidate(&store, "a");
    tokio::select! {
        r = a.campaign() => panic!("the reply is 1 s away: {:?}", r.map(|l| l.token())),
        () = sleep(Duration::from_millis(500)) => {}
    }
    a.shutdown().await;
    store.set_reply_delay(Duration::ZERO);
    assert_eq!(store.current_leader(&jobs()).await.unwrap(), None);
    assert_eq!(store.stats().releases, 1);
}

/// Regression: `shutdown` waited only for background tasks, and a follower
/// running its campaign in another task spawned the release of its place
/// after `shutdown` had returned — often never, when the process then
/// exited: the line waited a ttl for a candidate that was gone.
#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_a_follower_in_another_task_to_give_back_its_place() {
    let store = MemoryStore::queue();
    let a = candidate(&store, "a");
    let _la = a.campaign().await.unwrap();
    let b = candidate(&store, "b");
    let follower = tokio::spawn({
        let b = b.clone();
        async move { b.campaign().await }
    });
    sleep(secs(1)).await;
    b.shutdown().await;
    assert_eq!(
        store.stats().releases,
        1,
        "shutdown returned before b's place was given back"
    );
    assert!(matches!(
        follower.await.unwrap(),
        Err(CampaignError::Shutdown)
    ));
}

/// Regression: on a queue store an acquire from our place that timed out
/// and then won was "given back" by the abandon path — but that place was
/// still ours, and the retry had meanwhile won with it: the release ended
/// the new leadership in the store while its holder still led.
#[tokio::test(start_paused = true)]
async fn an_abandoned_acquire_never_releases_the_place_a_retry_leads_with() {
    let store = MemoryStore::queue();
    let a = candidate(&store, "a");
    let la = a.campaign().await.unwrap();
    let b = candidate(&store, "b");
    let follower = spawn_follower(b);
    sleep(secs(1)).await;
    // b's next acquire from its place is answered after 7 s, beyond its
    // 6 s renew deadline; the retries after it at once.
    store.set_reply_delay(secs(7));
    let s = store.clone();
    tokio::spawn(async move {
        sleep(Duration::from_millis(500)).await;
        s.set_reply_delay(Duration::ZERO);
    });
    // The release applies at once; its answer comes too late (an error).
    let _ = la.resign().await;
    let (_, lb) = follower.await.unwrap();
    // Past the moment the abandoned acquire answers.
    sleep(secs(10)).await;
    assert!(
        lb.ended().is_none(),
        "b's leadership ended: {:?}",
        lb.ended()
    );
    assert_eq!(
        store
            .current_leader(&jobs())
            .await
            .unwrap()
            .map(|l| l.token),
        Some(lb.token()),
        "the store no longer has b's lease while b leads"
    );
}

/// Issue 12: following the leader needed extra crates and pinning. The
/// stream is `Unpin` with an inherent `next`; `leader_watch` holds the
/// current leader; `on_new_leader` calls back on every change.
#[tokio::test(start_paused = true)]
async fn observers_follow_without_pinning_or_extra_crates() {
    let store = MemoryStore::race();
    let observer = Observer::new(store.clone(), jobs());
    fn unpin<T: Unpin>(t: T) -> T {
        t
    }
    let mut changes = unpin(observer.changes());
    assert_eq!(changes.next().await.unwrap().unwrap(), None);

    let mut leader = observer.leader_watch().await.unwrap();
    assert_eq!(*leader.borrow_and_update(), None);
    let (seen, mut calls) = tokio::sync::mpsc::unbounded_channel();
    let callback = observer.on_new_leader(move |l| {
        let _ = seen.send(l.map(|l| l.holder.as_str().to_owned()));
    });

    let a = candidate(&store, "a");
    let la = a.campaign().await.unwrap();
    leader.changed().await.unwrap();
    assert_eq!(leader.borrow().as_ref().unwrap().token, la.token());
    assert_eq!(
        changes.next().await.unwrap().unwrap().unwrap().holder,
        id("a")
    );
    la.resign().await.unwrap();
    leader.changed().await.unwrap();
    assert_eq!(*leader.borrow(), None);
    let mut called = Vec::new();
    for _ in 0..3 {
        called.push(calls.recv().await.unwrap());
    }
    assert_eq!(called, vec![None, Some("a".to_owned()), None]);
    // Dropping the handle stops the callbacks (the sender it holds goes).
    drop(callback);
    assert_eq!(calls.recv().await, None);
}

/// Issue 12: metadata that changes while leading (etcd's Proclaim). The
/// term goes on with its token; observers and the candidate's status see
/// the new metadata; a lost record ends leadership.
#[tokio::test(start_paused = true)]
async fn a_leader_proclaims_new_metadata_without_losing_its_term() {
    let store = MemoryStore::race();
    let a = Candidate::builder(store.clone(), jobs(), id("a"))
        .ttl(secs(10))
        .metadata(Metadata::from_pairs([("state", "starting")]).unwrap())
        .build()
        .unwrap();
    let la = a.campaign().await.unwrap();
    let observer = Observer::new(store.clone(), jobs());
    let mut changes = observer.changes();
    let first = changes.next().await.unwrap().unwrap().unwrap();
    assert_eq!(first.metadata.get("state"), Some("starting"));

    la.proclaim(Metadata::from_pairs([("state", "serving")]).unwrap())
        .await
        .unwrap();
    let next = changes.next().await.unwrap().unwrap().unwrap();
    assert_eq!(next.metadata.get("state"), Some("serving"));
    assert_eq!(next.token, la.token(), "same term");
    assert_eq!(la.metadata().get("state"), Some("serving"));
    assert_eq!(
        a.status().borrow().leader().unwrap().metadata.get("state"),
        Some("serving")
    );
    // Renewals go on; the term outlives several ttls.
    sleep(secs(35)).await;
    assert_eq!(la.check(), Ok(la.token()));
    assert_eq!(
        observer
            .current()
            .await
            .unwrap()
            .unwrap()
            .metadata
            .get("state"),
        Some("serving")
    );

    // The record deleted behind its back: the proclaim finds it lost and
    // leadership ends.
    store.delete_records(&jobs());
    let err = la
        .proclaim(Metadata::from_pairs([("state", "draining")]).unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            regent_core::ProclaimError::NotLeader(regent_core::NotLeader {
                reason: EndReason::Lost
            })
        ),
        "{err:?}"
    );
    assert_eq!(la.ended().unwrap().reason, EndReason::Lost);
    assert!(la.cancellation().is_cancelled());
    // The renewal task saw the end at once: it renews no more, and the
    // status says so without waiting for a renewal to find the loss.
    let renews = store.stats().renews;
    tokio::task::yield_now().await;
    assert_eq!(
        *a.status().borrow(),
        Status::Follower { leader: None },
        "status right after a proclaim found the lease lost"
    );
    sleep(secs(30)).await;
    assert_eq!(store.stats().renews, renews, "renewed after the end");
    let err = la.proclaim(Metadata::new()).await.unwrap_err();
    assert!(err.to_string().contains("lease lost"), "{err}");
}
