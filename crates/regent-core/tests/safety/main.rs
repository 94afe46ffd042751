//! One hundred candidates on one election, on paused time: at no instant do
//! two of them believe they lead, and fencing tokens strictly increase.
//! First with leaders that come and go gracefully (then there is exactly one
//! leader at every instant), then under injected faults: partitions, failed
//! calls, slow requests and slow replies. Seeded: a failure prints the seed;
//! `REGENT_SEED=N` replays it.

use std::time::Duration;

use regent_core::memory::MemoryStore;
use regent_core::{
    CampaignError, CancellationToken, Candidate, ElectionName, HolderId, LeaseStore, StoreStyle,
};
use regent_testkit::History;
use tokio::time::{Instant, sleep};

const CANDIDATES: usize = 100;

fn seed() -> u64 {
    std::env::var("REGENT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..))
}

fn holder(i: usize) -> HolderId {
    HolderId::new(format!("c{i:03}")).unwrap()
}

/// Each candidate campaigns, leads for a random while (or until its
/// leadership ends), records its belief, resigns or drops the guard, and
/// campaigns again.
fn spawn_candidates(
    store: &MemoryStore,
    history: &History,
    stop: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..CANDIDATES)
        .map(|i| {
            let cand =
                Candidate::builder(store.clone(), ElectionName::new("jobs").unwrap(), holder(i))
                    .ttl(Duration::from_secs(10))
                    .shutdown_token(stop.child_token())
                    .build()
                    .unwrap();
            let history = history.clone();
            tokio::spawn(async move {
                loop {
                    let l = match cand.campaign().await {
                        Ok(l) => l,
                        Err(CampaignError::Shutdown) => return,
                        Err(e) => panic!("campaign of {i} failed: {e}"),
                    };
                    history.begin_leadership(&l);
                    let hold = Duration::from_millis(fastrand::u64(0..20_000));
                    tokio::select! {
                        () = l.cancellation().cancelled_owned() => {}
                        () = sleep(hold) => {}
                    }
                    history.end_leadership(&l);
                    if fastrand::bool() {
                        let _ = l.resign().await;
                    } else {
                        drop(l);
                    }
                }
            })
        })
        .collect()
}

/// Random fault episodes for `duration`, each 0–20 s long and undone at
/// its end: cut off the current leader (the case that tests stepping down),
/// cut off a random candidate, fail the next 1–5 calls, or slow requests (up
/// to 4 s) and replies (up to 8 s).
async fn inject_faults(store: &MemoryStore, duration: Duration) {
    let election = ElectionName::new("jobs").unwrap();
    let end = Instant::now() + duration;
    while Instant::now() < end {
        let episode = Duration::from_millis(fastrand::u64(0..20_000));
        let mut cut = None;
        match fastrand::u8(0..10) {
            0..=3 => {
                if let Ok(Some(leader)) = store.current_leader(&election).await {
                    cut = Some(leader.holder);
                }
            }
            4..=5 => cut = Some(holder(fastrand::usize(0..CANDIDATES))),
            6 => store.fail_next(fastrand::u32(1..=5)),
            _ => {
                store.set_request_delay(Duration::from_millis(fastrand::u64(0..4_000)));
                store.set_reply_delay(Duration::from_millis(fastrand::u64(0..8_000)));
            }
        }
        if let Some(h) = &cut {
            store.partition(h);
        }
        sleep(episode).await;
        if let Some(h) = &cut {
            store.heal(h);
        }
        store.set_request_delay(Duration::ZERO);
        store.set_reply_delay(Duration::ZERO);
    }
}

async fn hundred_candidates(style: StoreStyle) {
    let seed = seed();
    fastrand::seed(seed);
    let store = MemoryStore::new(style);
    let history = History::new();
    let stop = CancellationToken::new();
    let start = Instant::now();
    let handles = spawn_candidates(&store, &history, &stop);

    // Phase 1: no faults.
    sleep(Duration::from_secs(120)).await;
    let calm_end = Instant::now();
    // Phase 2: faults.
    inject_faults(&store, Duration::from_secs(240)).await;
    // Phase 3: calm again, to see the election recover.
    sleep(Duration::from_secs(30)).await;
    let recovered_at = Instant::now();
    stop.cancel();
    for h in handles {
        h.await.unwrap();
    }

    let summary = match history.check() {
        Ok(s) => s,
        Err(v) => panic!("seed {seed}: {v}"),
    };
    let intervals = history.intervals();
    let first = intervals.first().expect("someone led").start;
    assert_eq!(
        first, start,
        "seed {seed}: the first leader is elected at once"
    );
    // Without faults, leadership passes without a gap: exactly one believed
    // leader at every instant.
    let mut t = first;
    while t < calm_end {
        let n = history.leaders_at(t).len();
        assert_eq!(n, 1, "seed {seed}: {n} leaders at +{:?}", t - start);
        t += Duration::from_millis(50);
    }
    assert!(
        !history
            .leaders_at(recovered_at - Duration::from_millis(1))
            .is_empty(),
        "seed {seed}: no leader after the faults stopped"
    );
    assert!(
        summary.terms > 20,
        "seed {seed}: only {} terms",
        summary.terms
    );
    assert!(
        summary.holders > 10,
        "seed {seed}: only {} holders led",
        summary.holders
    );
}

#[tokio::test(start_paused = true)]
async fn hundred_candidates_race_store_never_two_leaders() {
    hundred_candidates(StoreStyle::Race).await;
}

#[tokio::test(start_paused = true)]
async fn hundred_candidates_queue_store_never_two_leaders() {
    hundred_candidates(StoreStyle::Queue).await;
}
