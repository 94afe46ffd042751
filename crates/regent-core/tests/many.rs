//! Sets of elections (issue 29, item 5, "many elections as one"): a
//! supervisor set leads each election once and gives every lease back when
//! stopped; a second holder's set takes every election over at once after
//! the first stops; one election's failure is reported by its name and
//! stops no other; a leader task's end counts for its election alone; an
//! observer set names each election, sees the hand-overs, and an election
//! whose watch fails for good ends only its own part.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regent_core::memory::{MemoryStore, RecordEndCause};
use regent_core::{
    BoxError, BoxStore, CampaignError, Candidate, ConfigError, ElectionFailure, ElectionName,
    ErrorKind, FencingToken, HolderId, LeaderContext, LeadersWatch, LeaseStore, ObserveError,
    ObserverSet, Restart, SetChanges, SetConfigError, SetFailed, Status, Supervisor,
    SupervisorExit, SupervisorSet, SupervisorSetBuilder, TermOutcome,
};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

const TTL: Duration = Duration::from_secs(10);

fn id(s: &str) -> HolderId {
    HolderId::new(s).unwrap()
}

fn shard(n: usize) -> ElectionName {
    ElectionName::new(format!("shard-{n}")).unwrap()
}

fn shards(n: usize) -> Vec<ElectionName> {
    (0..n).map(shard).collect()
}

fn builder(store: &MemoryStore, holder: &str, n: usize) -> SupervisorSetBuilder<MemoryStore> {
    SupervisorSet::builder(store.clone(), id(holder), shards(n))
        .configure(|_, candidate| candidate.ttl(TTL))
}

/// Each term's token, by election, as the leader tasks saw them.
type Terms = Arc<Mutex<BTreeMap<ElectionName, Vec<FencingToken>>>>;

/// A leader task that records its term and works until leadership ends.
fn recording(
    terms: &Terms,
) -> impl Fn(ElectionName, LeaderContext) -> Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>
+ Send
+ Sync
+ 'static {
    let terms = terms.clone();
    move |election, leader| {
        terms
            .lock()
            .unwrap()
            .entry(election)
            .or_default()
            .push(leader.token());
        Box::pin(async move {
            leader.cancelled().await;
            Ok(())
        })
    }
}

/// Runs `set` in a task of its own until its shutdown token is cancelled.
fn spawn_run(
    set: &Arc<SupervisorSet<Candidate<MemoryStore>>>,
    terms: &Terms,
) -> JoinHandle<Result<BTreeMap<ElectionName, SupervisorExit>, SetFailed>> {
    let (set, task) = (set.clone(), recording(terms));
    tokio::spawn(async move { set.run_until(std::future::pending(), task).await })
}

/// `wait`'s output, or a panic naming `what` if a few ttls (of paused time)
/// pass first: a test that waits for what never comes fails instead of
/// hanging.
async fn within<T>(what: &str, wait: impl Future<Output = T>) -> T {
    match tokio::time::timeout(5 * TTL, wait).await {
        Ok(done) => done,
        Err(_) => panic!("no sign of {what} within {:?}", 5 * TTL),
    }
}

/// Waits until the set leads exactly `elections`.
async fn until_leading(set: &SupervisorSet<Candidate<MemoryStore>>, elections: &[ElectionName]) {
    let want: BTreeSet<ElectionName> = elections.iter().cloned().collect();
    let mut leading = set.leading();
    within(
        &format!("the set leading {want:?}"),
        leading.wait_for(|now| *now == want),
    )
    .await
    .unwrap();
}

/// Waits until `election`'s candidate in `set` publishes a status for which
/// `pick` holds.
async fn until_status(
    set: &SupervisorSet<Candidate<MemoryStore>>,
    election: &ElectionName,
    pick: impl FnMut(&Status) -> bool,
) {
    let mut status = set
        .supervisor(election)
        .expect("in the set")
        .candidate()
        .status();
    within(&format!("a status of {election}"), status.wait_for(pick))
        .await
        .unwrap();
}

fn assert_all_shutdown(exits: &BTreeMap<ElectionName, SupervisorExit>, elections: &[ElectionName]) {
    assert_eq!(
        exits.keys().cloned().collect::<Vec<_>>(),
        elections.to_vec(),
        "{exits:?}"
    );
    for exit in exits.values() {
        assert!(matches!(exit, SupervisorExit::Shutdown), "{exits:?}");
    }
}

/// Every record of `election` the store created, as (holder, how it ended).
fn records(store: &MemoryStore, election: &ElectionName) -> Vec<(String, Option<RecordEndCause>)> {
    store
        .record_log(election)
        .into_iter()
        .map(|r| (r.holder.to_string(), r.end.map(|e| e.cause)))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn every_election_is_led_once_and_stopping_gives_every_lease_back() {
    let store = MemoryStore::race();
    let elections = shards(5);
    let set = Arc::new(builder(&store, "a", 5).build().unwrap());
    assert_eq!(set.len(), 5);
    assert!(set.leading().borrow().is_empty());
    let terms = Terms::default();
    let run = spawn_run(&set, &terms);
    until_leading(&set, &elections).await;
    for election in &elections {
        let leader = store.current_leader(election).await.unwrap();
        assert_eq!(leader.map(|l| l.holder), Some(id("a")), "{election}");
    }
    // Some terms' worth of time: every lease is renewed, none led twice.
    sleep(3 * TTL).await;
    {
        let terms = terms.lock().unwrap();
        assert_eq!(terms.keys().cloned().collect::<Vec<_>>(), elections);
        assert!(terms.values().all(|t| t.len() == 1), "{terms:?}");
    }

    set.shutdown_token().cancel();
    let exits = within("the set to stop", run).await.unwrap().unwrap();
    assert_all_shutdown(&exits, &elections);
    assert!(set.leading().borrow().is_empty());
    for election in &elections {
        assert_eq!(
            records(&store, election),
            vec![(
                "a".to_owned(),
                Some(RecordEndCause::Released { by: id("a") })
            )],
            "{election}"
        );
        let supervisor = set.supervisor(election).unwrap();
        assert_eq!(*supervisor.candidate().status().borrow(), Status::Stopped);
    }
}

#[tokio::test(start_paused = true)]
async fn the_signal_stops_the_set_and_returns_once_every_lease_is_back() {
    let store = MemoryStore::queue();
    let elections = shards(3);
    let set = builder(&store, "a", 3).build().unwrap();
    let terms = Terms::default();
    let signal = sleep(TTL);
    let exits = within("the set to stop", set.run_until(signal, recording(&terms)))
        .await
        .unwrap();
    assert_all_shutdown(&exits, &elections);
    for election in &elections {
        assert_eq!(terms.lock().unwrap()[election].len(), 1);
        let log = records(&store, election);
        assert_eq!(log.len(), 1, "{log:?}");
        assert_eq!(log[0].1, Some(RecordEndCause::Released { by: id("a") }));
    }
}

#[tokio::test(start_paused = true)]
async fn a_second_holders_set_takes_every_election_over_once_the_first_stops() {
    let store = MemoryStore::race();
    let elections = shards(4);
    let a = Arc::new(builder(&store, "a", 4).build().unwrap());
    let b = Arc::new(builder(&store, "b", 4).build().unwrap());
    let (a_terms, b_terms) = (Terms::default(), Terms::default());
    let a_run = spawn_run(&a, &a_terms);
    until_leading(&a, &elections).await;
    let b_run = spawn_run(&b, &b_terms);
    for election in &elections {
        until_status(
            &b,
            election,
            |s| matches!(s, Status::Follower { leader: Some(l) } if l.holder == id("a")),
        )
        .await;
    }
    assert!(b.leading().borrow().is_empty());

    let stopped = Instant::now();
    a.shutdown_token().cancel();
    until_leading(&b, &elections).await;
    assert!(
        stopped.elapsed() < TTL / 10,
        "b led everything {:?} after a stopped: a graceful stop must not wait for the ttl",
        stopped.elapsed()
    );
    assert_all_shutdown(
        &within("the set to stop", a_run).await.unwrap().unwrap(),
        &elections,
    );
    assert!(a.leading().borrow().is_empty());
    {
        let (a_terms, b_terms) = (a_terms.lock().unwrap(), b_terms.lock().unwrap());
        for election in &elections {
            assert!(b_terms[election][0] > a_terms[election][0], "{election}");
        }
    }
    b.shutdown_token().cancel();
    assert_all_shutdown(
        &within("the set to stop", b_run).await.unwrap().unwrap(),
        &elections,
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_election_is_reported_by_name_and_stops_no_other() {
    let store = MemoryStore::race();
    let elections = shards(5);
    // shard-1 fails before it is ever led; shard-3 once it leads.
    store.put_garbage(&shard(1));
    let set = Arc::new(builder(&store, "a", 5).build().unwrap());
    let terms = Terms::default();
    let run = spawn_run(&set, &terms);
    let others: Vec<ElectionName> = elections
        .iter()
        .filter(|e| **e != shard(1))
        .cloned()
        .collect();
    until_leading(&set, &others).await;
    until_status(&set, &shard(1), |s| *s == Status::Stopped).await;

    store.put_garbage(&shard(3));
    until_status(&set, &shard(3), |s| *s == Status::Stopped).await;
    let rest = [shard(0), shard(2), shard(4)];
    until_leading(&set, &rest).await;
    // The others lead on, in their first terms.
    sleep(3 * TTL).await;
    assert_eq!(
        *set.leading().borrow(),
        rest.iter().cloned().collect::<BTreeSet<_>>()
    );
    for election in &rest {
        assert_eq!(terms.lock().unwrap()[election].len(), 1, "{election}");
    }

    set.shutdown_token().cancel();
    let failed = within("the set to stop", run).await.unwrap().unwrap_err();
    let named: Vec<&ElectionName> = failed.failures().iter().map(|f| f.election()).collect();
    assert_eq!(named, [&shard(1), &shard(3)]);
    for failure in failed.failures() {
        assert!(
            matches!(
                failure,
                ElectionFailure::Campaign { source: CampaignError::Store(e), .. }
                    if e.kind() == ErrorKind::Corrupt
            ),
            "{failure:?}"
        );
    }
    assert_all_shutdown(failed.exits(), &rest);
    let text = failed.to_string();
    assert!(
        text.starts_with(
            "2 of 5 elections failed: election 'shard-1': campaign failed: unexpected data in the store"
        ),
        "{text}"
    );
    assert!(
        text.contains("; election 'shard-3': campaign failed"),
        "{text}"
    );
    assert!(set.leading().borrow().is_empty());
}

/// A leader task's end is its election's term outcome: with `Never`, the
/// election whose task returned (`Ok` or `Err`) ends its supervision, named
/// in the exits; the others lead on, and the set is no failure.
#[tokio::test(start_paused = true)]
async fn a_leader_tasks_end_counts_for_its_election_alone() {
    let store = MemoryStore::race();
    let elections = shards(3);
    let set = Arc::new(
        builder(&store, "a", 3)
            .restart(Restart::Never)
            .build()
            .unwrap(),
    );
    let (s0, s1) = (shard(0), shard(1));
    let run = {
        let set = set.clone();
        tokio::spawn(async move {
            set.run_until(std::future::pending(), move |election, leader| {
                let (s0, s1) = (s0.clone(), s1.clone());
                async move {
                    if election == s0 {
                        return Ok(());
                    }
                    if election == s1 {
                        return Err::<(), BoxError>("boom".into());
                    }
                    leader.cancelled().await;
                    Ok(())
                }
            })
            .await
        })
    };
    until_status(&set, &shard(0), |s| *s == Status::Stopped).await;
    until_status(&set, &shard(1), |s| *s == Status::Stopped).await;
    until_leading(&set, &[shard(2)]).await;
    set.shutdown_token().cancel();
    let exits = within("the set to stop", run).await.unwrap().unwrap();
    assert_eq!(exits.keys().cloned().collect::<Vec<_>>(), elections);
    assert!(
        matches!(&exits[&shard(0)], SupervisorExit::Finished(t) if matches!(t.outcome, TermOutcome::TaskSucceeded)),
        "{exits:?}"
    );
    assert!(
        matches!(&exits[&shard(1)], SupervisorExit::Finished(t) if matches!(&t.outcome, TermOutcome::TaskFailed(e) if e.to_string() == "boom")),
        "{exits:?}"
    );
    assert!(
        matches!(exits[&shard(2)], SupervisorExit::Shutdown),
        "{exits:?}"
    );
}

/// Collects `changes` until `done` holds of what it has told; returns the
/// items.
async fn collect_until(
    changes: &mut SetChanges,
    mut done: impl FnMut(&BTreeMap<ElectionName, Option<regent_core::LeaderInfo>>) -> bool,
) -> Vec<(ElectionName, Option<String>)> {
    let mut items = Vec::new();
    while !done(changes.leaders()) {
        let (election, change) = within("a change", changes.next())
            .await
            .expect("still watched");
        let leader = change.expect("no store error");
        items.push((election, leader.map(|l| l.holder.to_string())));
    }
    items
}

fn all_led_by(
    holder: &str,
    n: usize,
) -> impl Fn(&BTreeMap<ElectionName, Option<regent_core::LeaderInfo>>) -> bool {
    let holder = id(holder);
    move |leaders| {
        leaders.len() == n
            && leaders
                .values()
                .all(|l| l.as_ref().is_some_and(|l| l.holder == holder))
    }
}

async fn until_map(watch: &mut LeadersWatch, holder: &str, n: usize) {
    let done = all_led_by(holder, n);
    within(
        &format!("{holder} leading all"),
        watch.wait_for(|m| done(m)),
    )
    .await
    .unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_observer_set_names_each_election_and_sees_the_hand_overs() {
    let store = MemoryStore::race();
    let elections = shards(3);
    let observers = ObserverSet::new(store.clone(), elections.clone());
    assert_eq!(observers.len(), 3);
    let mut changes = observers.changes();
    let mut watch = observers.leader_watch().await.unwrap();
    assert_eq!(
        watch.current(),
        elections.iter().map(|e| (e.clone(), None)).collect()
    );
    let (told, mut callbacks) = tokio::sync::mpsc::unbounded_channel();
    let handle = observers.on_new_leader(move |election, leader| {
        let _ = told.send((election.clone(), leader.map(|l| l.holder.to_string())));
    });

    // The leader now of each, naming each.
    let first = collect_until(&mut changes, |l| l.len() == 3).await;
    let named: BTreeSet<ElectionName> = first.iter().map(|(e, _)| e.clone()).collect();
    assert_eq!(named, elections.iter().cloned().collect());
    assert!(first.iter().all(|(_, l)| l.is_none()), "{first:?}");

    let a = Arc::new(builder(&store, "a", 3).build().unwrap());
    let a_run = spawn_run(&a, &Terms::default());
    let led = collect_until(&mut changes, all_led_by("a", 3)).await;
    for election in &elections {
        assert!(
            led.contains(&(election.clone(), Some("a".to_owned()))),
            "{led:?}"
        );
    }
    until_map(&mut watch, "a", 3).await;
    assert_eq!(watch.leader(&shard(2)).map(|l| l.holder), Some(id("a")));

    let b = Arc::new(builder(&store, "b", 3).build().unwrap());
    let b_run = spawn_run(&b, &Terms::default());
    for election in &elections {
        until_status(&b, election, |s| {
            matches!(s, Status::Follower { leader: Some(_) })
        })
        .await;
    }
    a.shutdown_token().cancel();
    let handed = collect_until(&mut changes, all_led_by("b", 3)).await;
    for election in &elections {
        assert!(
            handed.contains(&(election.clone(), Some("b".to_owned()))),
            "{handed:?}"
        );
    }
    until_map(&mut watch, "b", 3).await;
    let current = observers.current().await;
    assert_eq!(current.len(), 3);
    for leader in current.values() {
        assert_eq!(
            leader.as_ref().unwrap().as_ref().map(|l| l.holder.clone()),
            Some(id("b"))
        );
    }

    // The callback was told the same story, election by election.
    let mut last: BTreeMap<ElectionName, Vec<Option<String>>> = BTreeMap::new();
    while last.len() < 3
        || !last
            .values()
            .all(|h| h.last() == Some(&Some("b".to_owned())))
    {
        let (election, holder) = within("a callback", callbacks.recv()).await.unwrap();
        last.entry(election).or_default().push(holder);
    }
    for (election, told) in &last {
        assert_eq!(told.first(), Some(&None), "{election}: {told:?}");
        assert!(told.contains(&Some("a".to_owned())), "{election}: {told:?}");
    }
    drop(handle);

    within("the set to stop", a_run).await.unwrap().unwrap();
    b.shutdown_token().cancel();
    within("the set to stop", b_run).await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_election_whose_watch_fails_for_good_ends_only_its_part() {
    let store = MemoryStore::race();
    let elections = shards(3);
    store.put_garbage(&shard(1));
    let observers = ObserverSet::new(store.clone(), elections.clone());

    // A map kept current cannot start without every election's answer.
    let err: ObserveError = observers.leader_watch().await.unwrap_err();
    assert_eq!(err.election(), &shard(1));
    assert_eq!(err.store_error().kind(), ErrorKind::Corrupt);
    assert!(
        err.to_string()
            .starts_with("election 'shard-1': unexpected data in the store"),
        "{err}"
    );

    let mut changes = observers.changes();
    let mut failed = None;
    while changes.leaders().len() < 2 || failed.is_none() {
        let (election, change) = within("a change", changes.next()).await.unwrap();
        match change {
            Ok(None) => assert_ne!(election, shard(1)),
            Err(e) => {
                assert_eq!(election, shard(1));
                assert!(!e.is_transient());
                failed = Some(election);
            }
            Ok(Some(l)) => panic!("{election}: {l:?}"),
        }
    }
    assert!(!changes.leaders().contains_key(&shard(1)));

    let ended = observers.on_new_leader(|_, _| {});
    // The others are still followed: a new leader of shard-2 is told.
    let c = Candidate::builder(store.clone(), shard(2), id("c"))
        .ttl(TTL)
        .build()
        .unwrap();
    let term = c.campaign().await.unwrap();
    let (election, change) = within("a change", changes.next()).await.unwrap();
    assert_eq!(election, shard(2));
    assert_eq!(change.unwrap().map(|l| l.holder), Some(id("c")));
    term.resign().await.unwrap();

    // Once every election's watch has failed for good, the stream and the
    // callbacks end, the callbacks' task with every error, by name.
    store.put_garbage(&shard(0));
    store.put_garbage(&shard(2));
    while within("the end", changes.next()).await.is_some() {}
    assert!(changes.leaders().is_empty());
    let errors = within("the callbacks' end", ended).await.unwrap();
    let named: BTreeSet<&ElectionName> = errors.iter().map(ObserveError::election).collect();
    assert_eq!(named, elections.iter().collect());
}

#[tokio::test(start_paused = true)]
async fn empty_sets_end_at_once() {
    let store = MemoryStore::race();
    let set = SupervisorSet::builder(store.clone(), id("a"), [])
        .build()
        .unwrap();
    assert!(set.is_empty());
    let exits = set
        .run_until(std::future::pending(), |_, _| async {
            Ok::<_, BoxError>(())
        })
        .await
        .unwrap();
    assert!(exits.is_empty());
    let observers = ObserverSet::new(store, []);
    assert!(observers.changes().next().await.is_none());
    assert!(observers.leader_watch().await.unwrap().current().is_empty());
    assert!(observers.current().await.is_empty());
}

#[test]
fn a_set_refuses_an_election_given_twice_and_names_a_candidate_that_breaks_a_rule() {
    let store = MemoryStore::race();
    let twice = SupervisorSet::builder(store.clone(), id("a"), [shard(0), shard(1), shard(0)])
        .build()
        .unwrap_err();
    assert_eq!(twice, SetConfigError::Duplicate { election: shard(0) });
    assert_eq!(twice.to_string(), "election 'shard-0' is given twice");

    let supervisor = |n| {
        Supervisor::new(
            Candidate::builder(store.clone(), shard(n), id("a"))
                .build()
                .unwrap(),
        )
    };
    let twice = SupervisorSet::new([supervisor(0), supervisor(0)]).unwrap_err();
    assert_eq!(twice, SetConfigError::Duplicate { election: shard(0) });
    assert_eq!(
        SupervisorSet::new([supervisor(0), supervisor(1)])
            .unwrap()
            .len(),
        2
    );

    let bad = SupervisorSet::builder(store.clone(), id("a"), shards(3))
        .configure(|election, candidate| {
            if *election == shard(2) {
                candidate.renew_every(Duration::from_secs(60))
            } else {
                candidate
            }
        })
        .build()
        .unwrap_err();
    assert!(
        matches!(&bad, SetConfigError::Candidate { election, source }
            if *election == shard(2)
                && matches!(source.rule(), ConfigError::IntervalNotBelowDeadline { .. })),
        "{bad:?}"
    );
    assert!(bad.to_string().starts_with("election 'shard-2': "), "{bad}");

    let zero = SupervisorSet::builder(store, id("a"), shards(1))
        .health_timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(
        matches!(zero, SetConfigError::Supervisor(ConfigError::Zero { .. })),
        "{zero:?}"
    );
}

#[test]
fn public_types_are_send_and_sync() {
    fn is_send_sync<T: Send + Sync>() {}
    fn is_send<T: Send>() {}
    is_send_sync::<SupervisorSet<Candidate<BoxStore>>>();
    is_send_sync::<ObserverSet<BoxStore>>();
    is_send_sync::<LeadersWatch>();
    is_send_sync::<SetFailed>();
    is_send_sync::<ElectionFailure>();
    is_send_sync::<ObserveError>();
    is_send_sync::<SetConfigError>();
    is_send::<SetChanges>();
}

/// `Debug` output, for the record: elections by name.
#[test]
fn sets_show_their_elections() {
    let store = MemoryStore::race();
    let set = SupervisorSet::builder(store.clone(), id("a"), shards(2))
        .build()
        .unwrap();
    let shown = format!("{set:?}");
    assert!(
        shown.contains("shard-0") && shown.contains("shard-1"),
        "{shown}"
    );
    let observers = ObserverSet::new(store, shards(2));
    assert_eq!(
        format!("{observers:?}"),
        r#"ObserverSet { elections: ["shard-0", "shard-1"] }"#
    );
    fn debug<T: Debug>(_: &T) {}
    debug(&observers.changes());
}

/// A dropped run aborts every election's supervisor: nothing is left
/// marked as leading, the leases go back in the background, and the set
/// may run again.
#[tokio::test(start_paused = true)]
async fn a_dropped_run_leaves_nothing_leading_and_may_run_again() {
    let store = MemoryStore::race();
    let elections = shards(3);
    let set = builder(&store, "a", 3).build().unwrap();
    let terms = Terms::default();
    {
        let run = set.run_until(std::future::pending(), recording(&terms));
        tokio::select! {
            () = until_leading(&set, &elections) => {}
            r = run => panic!("the set stopped: {r:?}"),
        }
    }
    assert!(set.leading().borrow().is_empty());
    for election in &elections {
        within("the dropped term's lease to go back", async {
            while store.current_leader(election).await.unwrap().is_some() {
                sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }

    let again = set.run_until(std::future::pending(), recording(&terms));
    tokio::select! {
        () = until_leading(&set, &elections) => {}
        r = again => panic!("the set stopped: {r:?}"),
    }
    assert!(terms.lock().unwrap().values().all(|t| t.len() == 2));
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "run_until called while another call runs")]
async fn a_set_runs_once_at_a_time() {
    let store = MemoryStore::race();
    let set = Arc::new(builder(&store, "a", 2).build().unwrap());
    let _run = spawn_run(&set, &Terms::default());
    until_leading(&set, &shards(2)).await;
    let _ = set
        .run_until(std::future::pending(), recording(&Terms::default()))
        .await;
}
