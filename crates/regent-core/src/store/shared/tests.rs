use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;

fn e(name: &str) -> ElectionName {
    ElectionName::new(name).unwrap()
}

fn h(name: &str) -> HolderId {
    HolderId::new(name).unwrap()
}

fn t(n: u64) -> FencingToken {
    FencingToken::new(n)
}

const TTL: Duration = Duration::from_secs(2);

/// A store in memory: it counts keep-alives, holds what it is told, and
/// can lose its session or refuse to drop a record.
#[derive(Clone, Default)]
struct Fake(Arc<FakeInner>);

#[derive(Default)]
struct FakeInner {
    sessions: SharedSessions<Fake>,
    keep_alives: AtomicUsize,
    gone: AtomicBool,
    refuse_drops: AtomicBool,
    dropped: Mutex<Vec<ElectionName>>,
    ended: AtomicUsize,
    /// Elections whose record is gone from the store.
    deleted: Mutex<HashSet<ElectionName>>,
}

impl SessionBackend for Fake {
    type Id = u64;

    async fn keep_alive(&self, _: &u64) -> Result<bool, StoreError> {
        self.0.keep_alives.fetch_add(1, Ordering::SeqCst);
        Ok(!self.0.gone.load(Ordering::SeqCst))
    }

    async fn held(&self, _: &u64, keys: &[SessionKey]) -> Result<Vec<bool>, StoreError> {
        let deleted = self.0.deleted.lock().unwrap();
        Ok(keys
            .iter()
            .map(|k| !deleted.contains(&k.election))
            .collect())
    }

    async fn drop_key(&self, _: &u64, key: &SessionKey) -> Result<(), StoreError> {
        if self.0.refuse_drops.load(Ordering::SeqCst) {
            return Err(StoreError::unavailable("the store is away"));
        }
        self.0.dropped.lock().unwrap().push(key.election.clone());
        self.0.deleted.lock().unwrap().insert(key.election.clone());
        Ok(())
    }

    fn end(&self, _: &u64) {
        self.0.ended.fetch_add(1, Ordering::SeqCst);
    }

    fn sessions(&self) -> &SharedSessions<Self> {
        &self.0.sessions
    }
}

impl Fake {
    /// Session 7 with elections `names`, each placed with token i+1.
    fn with(names: &[&str]) -> Self {
        let f = Self::default();
        let now = Instant::now();
        let s = f.sessions();
        s.open(&f, 7, TTL, TTL, &e(names[0]), &h("x"), now);
        for n in &names[1..] {
            assert_eq!(s.reserve(&e(n), &h("x"), TTL, now), Some((7, TTL)));
        }
        for (i, n) in names.iter().enumerate() {
            s.placed(&7, &e(n), &h("x"), t(i as u64 + 1), now);
        }
        f
    }

    async fn renew(&self, name: &str, token: u64) -> Result<Renewal, StoreError> {
        let round = self
            .sessions()
            .join(&7, &e(name), &h("x"), t(token))
            .expect("on the session");
        round.await.expect("answered")
    }

    fn keep_alives(&self) -> usize {
        self.0.keep_alives.load(Ordering::SeqCst)
    }
}

#[tokio::test(start_paused = true)]
async fn elections_share_a_session_but_one_election_never_twice() {
    let f = Fake::with(&["a"]);
    let s = f.sessions();
    let now = Instant::now();
    assert_eq!(s.reserve(&e("b"), &h("x"), TTL, now), Some((7, TTL)));
    // A second candidate of `a` needs a record of its own: another session.
    assert_eq!(s.reserve(&e("a"), &h("y"), TTL, now), None);
    // Another ttl, another session.
    assert_eq!(s.reserve(&e("c"), &h("x"), 2 * TTL, now), None);
    assert_eq!(s.counts(), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn a_full_session_takes_no_more_records() {
    let f = Fake::with(&["e0"]);
    let now = Instant::now();
    for i in 1..MAX_KEYS {
        assert!(
            f.sessions()
                .reserve(&e(&format!("e{i}")), &h("x"), TTL, now)
                .is_some()
        );
    }
    assert_eq!(
        f.sessions().reserve(&e("one-more"), &h("x"), TTL, now),
        None
    );
}

#[tokio::test(start_paused = true)]
async fn only_the_term_placed_joins_a_round() {
    let f = Fake::with(&["a"]);
    let s = f.sessions();
    assert!(s.join(&7, &e("a"), &h("x"), t(2)).is_none(), "another term");
    assert!(
        s.join(&7, &e("a"), &h("y"), t(1)).is_none(),
        "another holder"
    );
    assert!(
        s.join(&8, &e("a"), &h("x"), t(1)).is_none(),
        "another session"
    );
    assert!(
        s.join(&7, &e("b"), &h("x"), t(1)).is_none(),
        "another election"
    );
    assert_eq!(f.renew("a", 1).await.unwrap(), Renewal::Renewed);
}

#[tokio::test(start_paused = true)]
async fn renewals_of_many_elections_are_one_keep_alive() {
    let names: Vec<String> = (0..100).map(|i| format!("e{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let f = Fake::with(&refs);
    let all = names
        .iter()
        .enumerate()
        .map(|(i, n)| f.renew(n, i as u64 + 1));
    for r in futures_util::future::join_all(all).await {
        assert_eq!(r.unwrap(), Renewal::Renewed);
    }
    assert_eq!(f.keep_alives(), 1);
}

#[tokio::test(start_paused = true)]
async fn rounds_are_a_tenth_of_the_ttl_apart() {
    let f = Fake::with(&["a", "b"]);
    let start = Instant::now();
    f.renew("a", 1).await.unwrap();
    assert_eq!(Instant::now(), start, "the first round at once");
    f.renew("b", 2).await.unwrap();
    assert_eq!(Instant::now(), start + TTL / ROUNDS_PER_TTL);
    assert_eq!(f.keep_alives(), 2);
    // Long after the last round, a renewal waits for nothing.
    tokio::time::sleep(TTL / 2).await;
    let before = Instant::now();
    f.renew("a", 1).await.unwrap();
    assert_eq!(Instant::now(), before);
}

#[tokio::test(start_paused = true)]
async fn a_record_not_renewed_is_dropped_when_its_own_lease_would_expire() {
    let f = Fake::with(&["idle", "busy"]);
    let start = Instant::now();
    // Only `busy` renews, every 0.4 s, up to 1.6 s.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(f.renew("busy", 2).await.unwrap(), Renewal::Renewed);
    }
    tokio::time::sleep_until(start + TTL - Duration::from_millis(1)).await;
    assert!(
        f.0.dropped.lock().unwrap().is_empty(),
        "dropped before its ttl"
    );
    // At its ttl, without any renewal to wake the session.
    tokio::time::sleep_until(start + TTL + Duration::from_millis(1)).await;
    assert_eq!(*f.0.dropped.lock().unwrap(), [e("idle")]);
    assert!(f.sessions().join(&7, &e("idle"), &h("x"), t(1)).is_none());
    assert_eq!(f.renew("busy", 2).await.unwrap(), Renewal::Renewed);
    assert_eq!(f.0.ended.load(Ordering::SeqCst), 0, "the session goes on");
}

#[tokio::test(start_paused = true)]
async fn while_a_stale_record_stays_nothing_is_renewed() {
    let f = Fake::with(&["idle", "busy"]);
    f.0.refuse_drops.store(true, Ordering::SeqCst);
    // `busy` renews half a ttl in; `idle` never does.
    tokio::time::sleep(TTL / 2).await;
    assert_eq!(f.renew("busy", 2).await.unwrap(), Renewal::Renewed);
    tokio::time::sleep(TTL / 2 + Duration::from_millis(10)).await;
    // `idle` is past its time and cannot be dropped: `busy`'s renewal
    // fails for want of the drop.
    let before = f.keep_alives();
    let err = f.renew("busy", 2).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert_eq!(
        f.keep_alives(),
        before,
        "no keep-alive while a stale record stays"
    );
    f.0.refuse_drops.store(false, Ordering::SeqCst);
    assert_eq!(f.renew("busy", 2).await.unwrap(), Renewal::Renewed);
    assert_eq!(*f.0.dropped.lock().unwrap(), [e("idle")]);
}

#[tokio::test(start_paused = true)]
async fn a_record_gone_from_the_store_is_lost_and_the_last_one_ends_the_session() {
    let f = Fake::with(&["a", "b"]);
    f.0.deleted.lock().unwrap().insert(e("a"));
    assert_eq!(f.renew("a", 1).await.unwrap(), Renewal::Lost);
    assert_eq!(f.renew("b", 2).await.unwrap(), Renewal::Renewed);
    assert_eq!(f.0.ended.load(Ordering::SeqCst), 0);
    f.0.deleted.lock().unwrap().insert(e("b"));
    assert_eq!(f.renew("b", 2).await.unwrap(), Renewal::Lost);
    assert_eq!(f.0.ended.load(Ordering::SeqCst), 1);
    assert_eq!(f.sessions().counts(), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_session_the_store_lost_loses_every_election() {
    let f = Fake::with(&["a", "b"]);
    f.0.gone.store(true, Ordering::SeqCst);
    let (a, b) = tokio::join!(f.renew("a", 1), f.renew("b", 2));
    assert_eq!(a.unwrap(), Renewal::Lost);
    assert_eq!(b.unwrap(), Renewal::Lost);
    assert!(!f.sessions().knows(&7));
}

#[tokio::test(start_paused = true)]
async fn forgetting_checks_term_and_holder_and_the_last_one_empties() {
    let f = Fake::with(&["a", "b"]);
    let s = f.sessions();
    assert_eq!(s.forget(&7, &e("a"), Some(t(5)), None), Forgot::Kept);
    assert_eq!(
        s.forget(&7, &e("a"), Some(t(1)), Some(&h("y"))),
        Forgot::Kept
    );
    assert_eq!(s.counts(), (1, 2));
    assert_eq!(
        s.forget(&7, &e("a"), Some(t(1)), Some(&h("x"))),
        Forgot::Kept
    );
    assert_eq!(s.forget(&7, &e("b"), None, None), Forgot::Emptied);
    assert_eq!(s.counts(), (0, 0));
    assert_eq!(s.forget(&7, &e("b"), None, None), Forgot::Unknown);
}

#[tokio::test(start_paused = true)]
async fn a_stale_record_an_acquire_renewed_meanwhile_is_not_forgotten() {
    let f = Fake::with(&["a", "b"]);
    let s = f.sessions();
    let t0 = Instant::now();
    let stale = s.stale(&7, t0 + TTL, &HashSet::new());
    let a = stale.iter().find(|k| k.election == e("a")).unwrap();
    s.placed(&7, &e("a"), &h("x"), t(1), t0 + TTL);
    assert_eq!(s.forget_stale(&7, a, t0 + TTL), Forgot::Kept);
    assert_eq!(s.counts(), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn a_session_not_renewed_for_a_ttl_is_given_up_rather_than_dropped_for_ever() {
    let f = Fake::with(&["idle"]);
    f.0.refuse_drops.store(true, Ordering::SeqCst);
    // Nobody renews, and the store refuses the drop: the store has let the
    // session go by itself a ttl after it was granted, and so does the
    // session's task, instead of retrying the drop for ever.
    tokio::time::sleep(TTL + Duration::from_millis(10)).await;
    assert!(!f.sessions().knows(&7));
    assert_eq!(f.0.ended.load(Ordering::SeqCst), 1);
}

/// `session_for`: the first acquire grants a session, the next of
/// another election takes a place on it and keeps it alive, one of the
/// same election gets a session of its own; a session found gone is
/// ended and replaced; a failed keep-alive gives the place back.
#[tokio::test(start_paused = true)]
async fn session_for_grants_once_then_shares_and_gives_back_on_failure() {
    let f = Fake::default();
    let s = f.sessions();
    let grants = AtomicUsize::new(0);
    let grant = || async {
        let n = grants.fetch_add(1, Ordering::SeqCst) as u64;
        Ok((10 + n, TTL))
    };
    let alive = |id: u64| {
        let f = f.clone();
        async move { f.keep_alive(&id).await }
    };
    let first = s
        .session_for(&f, &e("a"), &h("x"), TTL, TTL, grant, alive)
        .await
        .unwrap();
    assert_eq!((first.0, first.1), (10, TTL));
    assert_eq!(f.keep_alives(), 0, "a granted session needs no keep-alive");
    let before = Instant::now();
    let second = s
        .session_for(&f, &e("b"), &h("x"), TTL, TTL, grant, alive)
        .await
        .unwrap();
    assert_eq!(second.0, 10, "shared");
    assert!(second.2 >= before, "its record lives from after the call");
    assert_eq!(f.keep_alives(), 1, "kept alive for the acquire");
    let other = s
        .session_for(&f, &e("a"), &h("y"), TTL, TTL, grant, alive)
        .await
        .unwrap();
    assert_eq!(other.0, 11, "one election never twice on a session");

    // Session 10 gone: ended, and the next acquire that would share it
    // takes session 11 (room for c there).
    f.0.gone.store(true, Ordering::SeqCst);
    let third = s
        .session_for(&f, &e("c"), &h("x"), TTL, TTL, grant, |_| async {
            Ok(false)
        })
        .await
        .unwrap();
    assert_eq!(third.0, 12, "10 and 11 both found gone: a new grant");
    assert!(!s.knows(&10));

    // A keep-alive that fails: the place is given back.
    let failing = |_| async { Err(StoreError::unavailable("the store is away")) };
    let e1 = s
        .session_for(&f, &e("d"), &h("x"), TTL, TTL, grant, failing)
        .await
        .unwrap_err();
    assert!(e1.is_transient());
    assert_eq!(s.counts(), (1, 1), "only session 12, with c");
}
