//! Many elections on one store (issue 12): a bounded number of threads,
//! group commits that keep each request's outcome its own, writes that
//! wait for each other no longer than their ttl allows, a connection
//! thread that ends with the last clone, and the shared poll of watches.

mod common;

use std::future::{Future, poll_fn};
use std::path::Path;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::future::join_all;
use regent_core::{
    Acquire, Candidate, ErrorKind, FencingToken, HolderId, LeaderStream, Lease, LeaseHandle,
    LeaseStore, Renewal, StoreError,
};
use regent_sqlite::SqliteStore;
use rusqlite::types::Value;

use common::{HandRow, election, holder, raw, req};

const TTL: Duration = Duration::from_secs(60);

/// The number of threads of this process, as the kernel counts them.
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads line")
}

async fn win(store: &SqliteStore, e: &str, who: &str) -> Lease {
    match store.try_acquire(&req(&election(e), who, TTL), None).await {
        Ok(Acquire::Won(lease)) => lease,
        other => panic!("{who} should win {e}: {other:?}"),
    }
}

fn expires_at(path: &Path, e: &str) -> i64 {
    raw(path)
        .query_row(
            "SELECT expires_at_ns FROM regent_lease WHERE election = ?1",
            [e],
            |r| r.get(0),
        )
        .expect("the row is there")
}

/// Waits until `f` holds, for at most `within`.
async fn eventually(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Issue 12: every call ran on tokio's blocking pool, and each renewal
/// waited there for the one connection's mutex, so that the pool grew a
/// thread per election renewing at once (515 threads for 1,000
/// elections). Now one connection thread serves the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_12_many_elections_on_one_store_use_a_bounded_number_of_threads() {
    const ELECTIONS: usize = 500;
    const MAX_THREADS: usize = 32;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path().join("regent.db"))
        .await
        .expect("open");
    // Renewals every 400 ms; a leader steps down 1.2 s after its last one.
    let ttl = Duration::from_secs(2);
    let candidates: Vec<_> = (0..ELECTIONS)
        .map(|i| {
            Candidate::builder(
                store.clone(),
                election(&format!("many-{i}")),
                HolderId::new("many").expect("a holder id"),
            )
            .ttl(ttl)
            .build()
            .expect("valid timing")
        })
        .collect();
    let campaigns = candidates.iter().map(|c| {
        let c = c.clone();
        tokio::spawn(async move { c.campaign().await })
    });
    let mut most = threads();
    let mut leaderships = Vec::new();
    for campaign in campaigns.collect::<Vec<_>>() {
        leaderships.push(campaign.await.expect("join").expect("each wins its own"));
        most = most.max(threads());
    }
    // Renew for well past the ttl: every leader renews several times, all
    // in the same instants, since they won together.
    let end = Instant::now() + ttl + ttl / 2;
    while Instant::now() < end {
        most = most.max(threads());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        most < MAX_THREADS,
        "{ELECTIONS} elections on one store ran {most} threads"
    );
    let lost: Vec<_> = leaderships
        .iter()
        .filter_map(|l| l.check().err().map(|e| (l.election().clone(), e.reason)))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {ELECTIONS} leaders lost their elections, such as {:?}",
        lost.len(),
        &lost[..lost.len().min(3)]
    );
    drop(leaderships);
    for c in &candidates {
        c.shutdown().await;
    }
}

/// Polls `call` once. A store call sends its request to the connection
/// thread before it first waits, so the request is then in the thread's
/// channel.
async fn send<F: Future>(mut call: Pin<&mut F>) {
    poll_fn(|cx| {
        assert!(
            call.as_mut().poll(cx).is_pending(),
            "answered while the write lock is held"
        );
        Poll::Ready(())
    })
    .await;
}

/// A write that fails in a group commit fails alone: the others of the
/// batch are answered, each with its own outcome, and are durable; the
/// failed one leaves no trace. The writes did share one commit (the
/// thread's counters say so): committed one by one, they would pass every
/// other check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failing_request_does_not_fail_the_others_of_its_group_commit() {
    const RENEWALS: usize = 40;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let mut leases = Vec::new();
    for i in 0..RENEWALS {
        leases.push(win(&store, &format!("ok-{i}"), "a").await);
    }
    let released = win(&store, "released", "a").await;
    let lost = win(&store, "lost", "a").await;
    store.release(&lost).await.expect("release");
    let taken = win(&store, "lost", "b").await;
    let before: Vec<i64> = (0..RENEWALS)
        .map(|i| expires_at(&path, &format!("ok-{i}")))
        .collect();
    let conn = raw(&path);
    // Garbage under a lease the store believes its own: renewing it fails.
    let mut garbage = HandRow::live("garbage", "owner", 7, TTL);
    garbage.metadata = Value::Text("not json".into());
    garbage.write(&conn);
    let owner = Lease {
        election: election("garbage"),
        holder: holder("owner"),
        token: FencingToken::new(7),
        ttl: TTL,
        handle: LeaseHandle::new("sqlite-7"),
    };
    // A lease row refused by a trigger: the acquire has bumped the
    // election's fencing counter when its second statement fails.
    conn.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON regent_lease WHEN NEW.election = 'refused'
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    )
    .expect("create the trigger");

    // Hold the write lock, so that every write sent meanwhile waits in the
    // connection thread's channel and the next batch takes them all.
    conn.execute_batch("BEGIN IMMEDIATE")
        .expect("take the write lock");
    let stats = store.group_commit_stats();
    let mut first = pin!(store.renew(&leases[0]));
    send(first.as_mut()).await;
    // The first write, alone in its batch, now waits for the lock (should
    // the thread take it later, it joins the others' batch: the same).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut renewals: Vec<_> = leases[1..]
        .iter()
        .map(|l| Box::pin(store.renew(l)))
        .collect();
    for r in &mut renewals {
        send(r.as_mut()).await;
    }
    let mut garbage = pin!(store.renew(&owner));
    send(garbage.as_mut()).await;
    let mut lost = pin!(store.renew(&lost));
    send(lost.as_mut()).await;
    let mut release = pin!(store.release(&released));
    send(release.as_mut()).await;
    // An acquire reads first, then writes: these two write in a batch of
    // their own, after the renewals (the savepoints of one batch are
    // pinned by the unit tests of the connection thread).
    let (refused, fresh) = (
        req(&election("refused"), "b", TTL),
        req(&election("fresh"), "b", TTL),
    );
    let mut refused = pin!(store.try_acquire(&refused, None));
    send(refused.as_mut()).await;
    let mut fresh = pin!(store.try_acquire(&fresh, None));
    send(fresh.as_mut()).await;
    conn.execute_batch("COMMIT").expect("let go of the lock");

    let renewed = |r: Result<Renewal, StoreError>| {
        assert_eq!(r.expect("renew"), Renewal::Renewed);
    };
    renewed(first.await);
    join_all(renewals).await.into_iter().for_each(renewed);
    let e = garbage.await.expect_err("garbage is an error");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("garbage"), "{e}");
    assert_eq!(lost.await.expect("renew"), Renewal::Lost);
    release.await.expect("release");
    let e = refused.await.expect_err("the trigger refuses");
    assert!(!e.is_transient(), "{e}");
    assert!(
        matches!(fresh.await, Ok(Acquire::Won(l)) if l.token.get() == 1),
        "the acquire of a free election wins"
    );
    // One commit for the first renewal, one for the other renewals and the
    // release, one or two for the acquires' writes; and all the writes
    // sent while the lock was held, but the first, in one of them.
    let after = store.group_commit_stats();
    let writes = RENEWALS as u64 + 2 + 1 + 2;
    assert_eq!(
        after.writes - stats.writes,
        writes,
        "{stats:?} -> {after:?}"
    );
    assert!(
        after.commits - stats.commits <= 4,
        "{writes} writes took {} commits",
        after.commits - stats.commits
    );
    assert!(
        after.largest > RENEWALS as u64 + 1,
        "the renewals and the release shared one commit: {after:?}"
    );

    // Committed: read back through another connection.
    for (i, before) in before.iter().enumerate() {
        let after = expires_at(&path, &format!("ok-{i}"));
        assert!(after > *before, "ok-{i} was renewed: {before} -> {after}");
    }
    let rows = |e: &str| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM regent_lease WHERE election = ?1",
            [e],
            |r| r.get(0),
        )
        .expect("count")
    };
    assert_eq!(rows("released"), 0, "the release was committed");
    let leader = |e: &str| {
        conn.query_row(
            "SELECT holder, token FROM regent_lease WHERE election = ?1",
            [e],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
        )
        .expect("a row")
    };
    assert_eq!(leader("lost"), ("b".to_owned(), taken.token.get() as i64));
    let counter: Option<i64> = conn
        .query_row(
            "SELECT last_token FROM regent_fencing WHERE election = 'refused'",
            [],
            |r| r.get(0),
        )
        .ok();
    assert_eq!(
        counter, None,
        "the refused acquire's counter bump was rolled back"
    );
    assert_eq!(rows("refused"), 0);
    assert_eq!(
        store
            .current_leader(&election("fresh"))
            .await
            .expect("read")
            .map(|l| l.holder),
        Some(holder("b"))
    );
}

/// Keeps `leases` renewing, one call after another each, until `stop`:
/// more renewals than one per commit interval, so that the interval holds
/// them back and they share commits.
fn renew_without_pause(
    store: &SqliteStore,
    leases: Vec<Lease>,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    leases
        .into_iter()
        .map(|lease| {
            let (store, stop) = (store.clone(), Arc::clone(stop));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let renewed = store.renew(&lease).await.expect("renew");
                    assert_eq!(renewed, Renewal::Renewed);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect()
}

/// The commit interval (50 ms by default) held every write once writes
/// came faster than one per interval, whatever its lease's ttl: a leader
/// at ttl 100 ms (a renewal every 20 ms, a step-down 60 ms after the last
/// one sent) saw renewals wait up to 50 ms, twice in a cycle, and stepped
/// down about ten times a second. Now a write waits at most a twentieth of
/// its ttl, and a short-ttl leader keeps one term while the interval holds
/// the other elections' writes.
///
/// Not at the store's minimum ttl (10 ms): a candidate with the default
/// margin (5 ms) and drift needs a ttl above 12.8 ms, and below about
/// 50 ms a loaded host's scheduling hiccups step leaders down whatever the
/// commit interval, zero included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_ttl_leader_keeps_its_term_while_the_commit_interval_holds_other_writes() {
    const OTHERS: usize = 20;
    // In memory where there is a tmpfs: this pins how long writes wait for
    // each other, not how long an fsync takes, and a shared virtual disk
    // stalls now and then for longer than a 100 ms lease can stand (with
    // any commit interval, zero included).
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temp dir");
    let store = SqliteStore::open(dir.path().join("regent.db"))
        .await
        .expect("open");
    let others = join_all((0..OTHERS).map(|i| {
        let store = store.clone();
        async move { win(&store, &format!("long-{i}"), "other").await }
    }))
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let stream = renew_without_pause(&store, others, &stop);

    // The interval holds the stream's writes: the thread waits with writes
    // in hand, and commits about once per interval, many writes each.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = store.group_commit_stats();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = store.group_commit_stats();
    let (commits, writes) = (after.commits - before.commits, after.writes - before.writes);
    assert!(after.waits - before.waits >= 5, "{before:?} -> {after:?}");
    assert!(
        commits <= 500 / 50 + 4,
        "one commit per 50 ms at most: {commits}"
    );
    assert!(
        writes >= 4 * commits,
        "{writes} writes in {commits} commits"
    );

    let ttl = Duration::from_millis(100);
    let candidate = Candidate::builder(
        store.clone(),
        election("short-leader"),
        HolderId::new("short").expect("a holder id"),
    )
    .ttl(ttl)
    .build()
    .expect("valid timing");
    let leadership = tokio::time::timeout(Duration::from_secs(5), candidate.campaign())
        .await
        .expect("campaign within seconds")
        .expect("wins");
    let token = leadership.token();
    tokio::time::sleep(ttl * 20).await;
    // A step-down ends this leadership for good: still leading is one term.
    assert_eq!(
        leadership.check().map_err(|e| e.reason),
        Ok(token),
        "ttl {ttl:?}: one term for 20 ttls"
    );
    leadership.resign().await.expect("resign");
    candidate.shutdown().await;

    // A short lease's renewal that comes while the thread waits for the
    // interval wakes it: it waits about a twentieth of its ttl (5 ms), not
    // what is left of the interval (25 ms on average).
    let short = match store
        .try_acquire(&req(&election("short"), "short", ttl), None)
        .await
    {
        Ok(Acquire::Won(lease)) => lease,
        other => panic!("wins: {other:?}"),
    };
    let mut took = Vec::new();
    for i in 0..35 {
        // Spread over the interval: 0, 7, 14, ... ms after the last answer.
        tokio::time::sleep(Duration::from_millis(7 * (i % 7))).await;
        let sent = Instant::now();
        let renewed = store.renew(&short).await.expect("renew");
        took.push(sent.elapsed());
        assert_eq!(renewed, Renewal::Renewed);
    }
    took.sort();
    assert!(
        took[took.len() / 2] < Duration::from_millis(10),
        "renewals of a 100 ms lease took {took:?}"
    );
    stop.store(true, Ordering::Relaxed);
    for task in stream {
        task.await.expect("the stream's renewals all succeed");
    }
}

/// The connection thread closes the connection and ends with the last
/// clone of the store, and the last stream of its watches: SQLite deletes
/// the `-wal` file when the last connection to the file closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_ends_with_the_last_clone_and_the_last_watch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let wal = dir.path().join("regent.db-wal");
    let store = SqliteStore::open(&path).await.expect("open");
    let clone = store.clone();
    win(&clone, "e", "a").await;
    assert!(wal.exists(), "a WAL file while the store is open");
    drop(store);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(wal.exists(), "a clone keeps the connection open");
    let watch = clone.watch(&election("e")).await.expect("watch");
    drop(clone);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(wal.exists(), "a watch keeps the connection open");
    drop(watch);
    eventually(Duration::from_secs(10), "the connection closes", || {
        !wal.exists()
    })
    .await;
}

/// The watch's next item, within a bound that only guards against a hang.
async fn next_leader(w: &mut LeaderStream) -> Option<HolderId> {
    tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .expect("the watch answers within seconds")
        .expect("an item")
        .expect("a state")
        .map(|l| l.holder)
}

fn stream(watches: &mut [Option<LeaderStream>], i: usize) -> &mut LeaderStream {
    watches[i].as_mut().expect("a stream")
}

/// The shared poll serves many streams: each sees the changes of its own
/// election, whoever made them (this store, another connection) and
/// expiry with no one writing; streams that join an election already
/// watched see it too, and dropped streams stop nothing for the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_of_many_elections_share_one_poll() {
    const ELECTIONS: usize = 50;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::builder(&path)
        .poll_interval(Duration::from_millis(20))
        .open()
        .await
        .expect("open");
    let other = SqliteStore::open(&path).await.expect("open another");
    let mut watches = Vec::new();
    for i in 0..ELECTIONS {
        let mut w = store
            .watch(&election(&format!("w-{i}")))
            .await
            .expect("watch");
        assert_eq!(next_leader(&mut w).await, None);
        watches.push(Some(w));
    }
    // Half are won through this store, half through another connection.
    let mut leases = Vec::new();
    for i in 0..ELECTIONS {
        let on = if i % 2 == 0 { &store } else { &other };
        leases.push(win(on, &format!("w-{i}"), &format!("h{i}")).await);
    }
    for i in 0..ELECTIONS {
        let seen = next_leader(stream(&mut watches, i)).await;
        assert_eq!(seen, Some(holder(&format!("h{i}"))), "w-{i}");
    }
    // A second stream on a watched election starts from its state, and
    // follows it.
    let mut late = store.watch(&election("w-0")).await.expect("watch");
    assert_eq!(next_leader(&mut late).await, Some(holder("h0")));
    watches[1] = None;
    other.release(&leases[0]).await.expect("release");
    assert_eq!(next_leader(stream(&mut watches, 0)).await, None);
    assert_eq!(next_leader(&mut late).await, None);
    // Expiry, with no one writing: a short lease taken by the other
    // connection runs out.
    let short = match other
        .try_acquire(
            &req(&election("w-2"), "short", Duration::from_millis(300)),
            None,
        )
        .await
    {
        Ok(Acquire::Held {
            leader: Some(l), ..
        }) => l.holder,
        other => panic!("w-2 is held by h2: {other:?}"),
    };
    assert_eq!(short, holder("h2"));
    store.release(&leases[2]).await.expect("release");
    assert_eq!(
        next_leader(stream(&mut watches, 2)).await,
        None,
        "w-2 released"
    );
    let won = other
        .try_acquire(
            &req(&election("w-2"), "short", Duration::from_millis(300)),
            None,
        )
        .await
        .expect("acquire");
    assert!(matches!(won, Acquire::Won(_)), "{won:?}");
    assert_eq!(
        next_leader(stream(&mut watches, 2)).await,
        Some(holder("short"))
    );
    assert_eq!(
        next_leader(stream(&mut watches, 2)).await,
        None,
        "w-2 expired"
    );
}
