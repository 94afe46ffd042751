//! Priorities and hand-overs on the memory store, in paused time: the
//! issue's scenario (priorities 1, 2, 3: 3 leads; it goes: 2 leads; it
//! comes back: it leads again after the settle time; a request moves the
//! lead to 1, and priorities do not take it back), on both store styles,
//! with the store's record log checked for overlapping terms and tokens
//! that go back.

use std::time::Duration;

use regent_core::handover::{HandOverError, HandOverReason, HandOverRequest, request};
use regent_core::memory::MemoryStore;
use regent_core::{
    BoxError, Candidate, ElectionName, EndReason, HolderId, LeaseStore, Supervisor, TermEvent,
};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

const TTL: Duration = Duration::from_secs(2);
const SETTLE: Duration = Duration::from_secs(3);

fn id(s: &str) -> HolderId {
    HolderId::new(s).unwrap()
}

struct Running {
    stop: CancellationToken,
    task: JoinHandle<()>,
    events: tokio::sync::broadcast::Receiver<TermEvent>,
}

fn start(store: &MemoryStore, election: &ElectionName, name: &str, priority: i32) -> Running {
    let candidate = Candidate::builder(store.clone(), election.clone(), id(name))
        .ttl(TTL)
        .priority(priority)
        .settle(SETTLE)
        .build()
        .unwrap();
    let events = candidate.events();
    let stop = CancellationToken::new();
    let until = stop.clone();
    let task = tokio::spawn(async move {
        let _ = Supervisor::new(candidate)
            .run_until(until.cancelled_owned(), |leader| async move {
                leader.cancelled().await;
                Ok::<_, BoxError>(())
            })
            .await;
    });
    Running { stop, task, events }
}

async fn leader_of(store: &MemoryStore, election: &ElectionName) -> Option<String> {
    store
        .current_leader(election)
        .await
        .unwrap()
        .map(|l| l.holder.to_string())
}

/// Waits (paused time) until `who` leads, at most `within`; how long it took.
async fn until_leads(
    store: &MemoryStore,
    election: &ElectionName,
    who: &str,
    within: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        if leader_of(store, election).await.as_deref() == Some(who) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{who} did not lead within {within:?}; {:?} leads",
            leader_of(store, election).await
        );
        sleep(Duration::from_millis(10)).await;
    }
}

/// No two records of the election ever led at once, and tokens grew. A
/// record leads from its creation or the end of every record before it,
/// whichever is later (a queue store's line), until its end.
fn check_log(store: &MemoryStore, election: &ElectionName) {
    let log = store.record_log(election);
    for pair in log.windows(2) {
        assert!(pair[1].token > pair[0].token, "{log:?}");
    }
    let mut spans = Vec::new();
    let mut before_ended: Option<Instant> = None;
    for r in &log {
        let end = r.end.as_ref().expect("every record ended").at;
        let from = before_ended.map_or(r.created, |b| b.max(r.created));
        if from < end {
            spans.push((from, end));
        }
        before_ended = Some(before_ended.map_or(end, |b| b.max(end)));
    }
    for pair in spans.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "terms overlap: {pair:?}");
    }
}

async fn scenario(store: MemoryStore) {
    let election = ElectionName::new("jobs").unwrap();
    let mut one = start(&store, &election, "one", 1);
    let two = start(&store, &election, "two", 2);
    sleep(Duration::from_millis(50)).await;
    let three = start(&store, &election, "three", 3);
    // Whoever won first, "three" leads once it has been seen for the
    // settle time (and the leader's next look).
    until_leads(&store, &election, "three", SETTLE + TTL).await;

    // It goes: "two" (the higher of the rest) leads, after the hand-over
    // pause or the ttl.
    three.stop.cancel();
    three.task.await.unwrap();
    until_leads(&store, &election, "two", TTL * 2).await;

    // It comes back: it leads again within the settle time and a look.
    let three = start(&store, &election, "three", 3);
    let took = until_leads(&store, &election, "three", SETTLE + TTL).await;
    assert!(
        took >= SETTLE,
        "preempted after {took:?}, before the settle time"
    );

    // An operator moves the lead to "one"; it stays there.
    let asked = HandOverRequest {
        election: election.clone(),
        to: Some(id("one")),
        requester: id("operator"),
        ttl: TTL,
        timeout: TTL * 3,
    };
    let done = request(&store, &asked).await.unwrap();
    assert_eq!(done.from.holder.as_str(), "three");
    assert_eq!(done.to.holder.as_str(), "one");
    assert!(done.to.token > done.from.token);
    assert!(done.answered, "the new leader said it saw the request");
    sleep(SETTLE * 3).await;
    assert_eq!(leader_of(&store, &election).await.as_deref(), Some("one"));

    // Why each handed-over term ended, as its events said.
    let ends = |r: &mut Running| {
        let mut reasons = Vec::new();
        while let Ok(e) = r.events.try_recv() {
            if let TermEvent::Ended { ended, .. } = e {
                reasons.push(ended.reason);
            }
        }
        reasons
    };
    let mut three = three;
    assert_eq!(
        ends(&mut three),
        [EndReason::HandedOver(HandOverReason::Requested)]
    );
    assert!(
        ends(&mut one)
            .iter()
            .all(|r| *r == EndReason::HandedOver(HandOverReason::Preferred)),
        "the first leader, if it was 'one', handed over to 'three' as preferred"
    );

    for r in [one, two, three] {
        r.stop.cancel();
        r.task.await.unwrap();
    }
    check_log(&store, &election);
}

#[tokio::test(start_paused = true)]
async fn priorities_and_requests_on_a_race_store() {
    scenario(MemoryStore::race()).await;
}

#[tokio::test(start_paused = true)]
async fn priorities_and_requests_on_a_queue_store() {
    scenario(MemoryStore::queue()).await;
}

#[tokio::test(start_paused = true)]
async fn equal_priorities_never_preempt() {
    let store = MemoryStore::race();
    let election = ElectionName::new("jobs").unwrap();
    let a = start(&store, &election, "a", 5);
    until_leads(&store, &election, "a", TTL).await;
    let b = start(&store, &election, "b", 5);
    sleep(SETTLE * 4).await;
    assert_eq!(leader_of(&store, &election).await.as_deref(), Some("a"));
    assert_eq!(store.record_log(&election).len(), 1, "one term only");
    for r in [a, b] {
        r.stop.cancel();
        r.task.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn requests_that_cannot_be_carried_out_say_why_and_change_nothing() {
    let store = MemoryStore::race();
    let election = ElectionName::new("jobs").unwrap();
    let asked = |to: Option<&str>| HandOverRequest {
        election: election.clone(),
        to: to.map(id),
        requester: id("operator"),
        ttl: TTL,
        timeout: TTL * 3,
    };
    assert!(matches!(
        request(&store, &asked(None)).await,
        Err(HandOverError::NoLeader(_))
    ));
    let a = start(&store, &election, "a", 1);
    until_leads(&store, &election, "a", TTL).await;
    sleep(TTL).await;
    match request(&store, &asked(Some("nobody"))).await {
        Err(HandOverError::NoSuchCandidate { why, .. }) => {
            assert!(why.contains("not a candidate"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    match request(&store, &asked(Some("a"))).await {
        Err(HandOverError::NoSuchCandidate { why, .. }) => {
            assert!(why.contains("leads already"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    match request(&store, &asked(None)).await {
        Err(HandOverError::NoSuchCandidate { why, .. }) => {
            assert!(why.contains("no other"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    // A leader that does not take part in hand-overs never answers.
    a.stop.cancel();
    a.task.await.unwrap();
    let deaf = Candidate::builder(store.clone(), election.clone(), id("deaf"))
        .ttl(TTL)
        .hand_overs(false)
        .build()
        .unwrap();
    let leading = deaf.campaign().await.unwrap();
    let b = start(&store, &election, "b", 9);
    sleep(SETTLE * 2).await;
    assert_eq!(
        leader_of(&store, &election).await.as_deref(),
        Some("deaf"),
        "no preemption"
    );
    match request(&store, &asked(Some("b"))).await {
        Err(HandOverError::NotAnswered { leader, .. }) => assert_eq!(leader.as_str(), "deaf"),
        other => panic!("{other:?}"),
    }
    assert_eq!(leader_of(&store, &election).await.as_deref(), Some("deaf"));
    leading.resign().await.unwrap();
    b.stop.cancel();
    b.task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_guard_hands_over_and_a_successor_that_never_comes_frees_the_lease() {
    let store = MemoryStore::race();
    let election = ElectionName::new("jobs").unwrap();
    let a = Candidate::builder(store.clone(), election.clone(), id("a"))
        .ttl(TTL)
        .build()
        .unwrap();
    let mut leading = a.campaign().await.unwrap();
    // "ghost" enrolled once and then went: its entry still stands.
    store
        .enroll(&regent_core::AcquireRequest {
            election: election.clone(),
            holder: id("ghost"),
            ttl: TTL,
            metadata: regent_core::Metadata::new(),
        })
        .await
        .unwrap();
    let to = leading.hand_over(None).await.unwrap();
    assert_eq!(to.as_str(), "ghost");
    assert!(leading.check().is_err(), "the term ended at once");
    drop(leading);
    sleep(Duration::from_millis(10)).await;
    assert_eq!(leader_of(&store, &election).await, None);
    // Nobody else may take it while it is the ghost's...
    let b = Candidate::builder(store.clone(), election.clone(), id("b"))
        .ttl(TTL)
        .build()
        .unwrap();
    let started = Instant::now();
    let b_leads = b.campaign().await.unwrap();
    // ...and once the window passed, anyone may.
    assert!(
        started.elapsed() > Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < TTL * 2, "{:?}", started.elapsed());
    b_leads.resign().await.unwrap();
    check_log(&store, &election);
}

/// A library candidate without a priority takes no part in hand-overs
/// unless asked (`hand_overs(true)`): it does not enroll on a race store's
/// roster, and as leader it reads neither the requests nor the
/// candidates, so that a process leading many elections pays nothing per
/// election for a feature it does not use.
#[tokio::test(start_paused = true)]
async fn without_a_priority_a_candidate_takes_part_only_when_asked() {
    let store = MemoryStore::race();
    let election = ElectionName::new("plain").unwrap();
    let build = |name: &str| Candidate::builder(store.clone(), election.clone(), id(name)).ttl(TTL);
    let leading = build("a").build().unwrap().campaign().await.unwrap();
    let b = build("b").build().unwrap();
    let c = build("c").hand_overs(true).build().unwrap();
    let quiet = tokio::spawn(async move { b.campaign().await.map(|_| ()) });
    let asking = tokio::spawn(async move { c.campaign().await.map(|_| ()) });
    sleep(TTL * 2).await;
    let listed: Vec<String> = store
        .candidates(&election)
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|c| c.holder.to_string())
        .collect();
    assert_eq!(listed, ["c"], "only the candidate that asked enrolled");
    // a does not take part: a request to it goes unanswered.
    let asked = HandOverRequest {
        election: election.clone(),
        to: Some(id("c")),
        requester: id("operator"),
        ttl: TTL,
        timeout: TTL * 3,
    };
    match request(&store, &asked).await {
        Err(HandOverError::NotAnswered { leader, .. }) => assert_eq!(leader.as_str(), "a"),
        other => panic!("{other:?}"),
    }
    leading.resign().await.unwrap();
    quiet.abort();
    asking.abort();
}
