//! Terms won unanswered: an acquire whose caller gave up on it (a
//! timeout, a dropped future) after its write committed wins a term its
//! caller never hears of. The store's next acquire for that holder takes
//! it over, with a greater token; nothing else takes it, and nothing else
//! is taken: not a term another store wrote under the same holder id, not
//! one an older build wrote over ours, not the term handed out. And a file
//! of the build before, without the column that tells them apart, opens
//! and works.

mod common;

use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use regent_core::{Acquire, AcquireRequest, LeaseStore, Renewal};
use regent_sqlite::SqliteStore;
use rusqlite::{Connection, OptionalExtension};

use common::{HandRow, election, holder, mono_ns, raw, req};

const TTL: Duration = Duration::from_secs(60);

/// The token of `election`'s row, if `who` holds it.
fn row_token(conn: &Connection, election: &str, who: &str) -> Option<i64> {
    conn.query_row(
        "SELECT token FROM regent_lease WHERE election = ?1 AND holder = ?2",
        [election, who],
        |r| r.get(0),
    )
    .optional()
    .expect("read the lease row")
}

/// Sends `store`'s acquire of `req`, polling it by hand, and drops it
/// once its term shows in the file, before its answer is taken: a term
/// won for a caller who never hears of it. The call is polled only while
/// the term has not shown, so its answer is never read; `None` when the
/// answer came all the same (the commit fell between the look at the
/// file and the poll), the won term released: try again.
async fn win_unanswered(store: &SqliteStore, path: &Path, req: &AcquireRequest) -> Option<i64> {
    let conn = raw(path);
    let mut call = pin!(store.try_acquire(req, None));
    let mut cx = Context::from_waker(Waker::noop());
    let start = Instant::now();
    loop {
        if let Some(token) = row_token(&conn, req.election.as_str(), req.holder.as_str()) {
            return Some(token);
        }
        match call.as_mut().poll(&mut cx) {
            Poll::Pending => {}
            Poll::Ready(Ok(Acquire::Won(lease))) => {
                store.release(&lease).await.expect("release");
                return None;
            }
            Poll::Ready(got) => panic!("a free election: {got:?}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the acquire's term never showed"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A term won unanswered in a fresh election of `store`'s: the election,
/// and the term's token.
async fn orphan(store: &SqliteStore, path: &Path, name: &str, who: &str) -> (String, i64) {
    for attempt in 0..20 {
        let name = format!("{name}-{attempt}");
        if let Some(token) = win_unanswered(store, path, &req(&election(&name), who, TTL)).await {
            return (name, token);
        }
    }
    panic!("20 acquires were all answered before their terms showed");
}

/// The conformance check `retried_acquire_after_a_lost_answer_wins` found
/// it: the retried acquire was `Held` by the caller itself, the term its
/// lost call had won, and the election had no leader for a ttl. Now the
/// store that won it takes it over at once, with a greater token; another
/// store (another process, perhaps an older incarnation still leading)
/// under the same holder id does not; and the term handed out is never
/// taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_won_unanswered_is_taken_over_by_its_own_store_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let other = SqliteStore::open(&path).await.expect("open another store");
    let (name, lost) = orphan(&store, &path, "unanswered", "a").await;
    let e = election(&name);
    let a = req(&e, "a", TTL);

    let shown = other
        .current_leader(&e)
        .await
        .expect("read")
        .expect("a term");
    assert_eq!(
        (shown.holder.as_str(), shown.token.get()),
        ("a", lost.unsigned_abs())
    );
    match other.try_acquire(&a, None).await.expect("acquire") {
        Acquire::Held {
            leader: Some(l), ..
        } => assert_eq!(l.token, shown.token, "{l:?}"),
        got => panic!("another store took a's term over: {got:?}"),
    }

    let Acquire::Won(lease) = store.try_acquire(&a, None).await.expect("acquire") else {
        panic!("a's store did not take its own term over");
    };
    assert!(lease.token > shown.token, "{lease:?} after {shown:?}");
    assert_eq!(store.renew(&lease).await.expect("renew"), Renewal::Renewed);
    let now = other
        .current_leader(&e)
        .await
        .expect("read")
        .expect("a term");
    assert_eq!((now.holder, now.token), (holder("a"), lease.token));
    // The term handed out is never taken again: a leads with it.
    match store.try_acquire(&a, None).await.expect("acquire") {
        Acquire::Held {
            leader: Some(l), ..
        } => assert_eq!(l.token, lease.token, "{l:?}"),
        got => panic!("a's store took over the term it handed out: {got:?}"),
    }
    // The term the unanswered acquire won is over.
    let stale = regent_core::Lease {
        token: shown.token,
        ..lease.clone()
    };
    assert_eq!(store.renew(&stale).await.expect("renew"), Renewal::Lost);
    store.release(&lease).await.expect("release");
}

/// An older build's acquire over a row of ours overwrites every column
/// it knows and leaves `won_by` as it was: were the store's incarnation
/// all it held, the store would take over that build's live term, of the
/// same holder id. It holds the token too, which no longer matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_an_older_build_wrote_over_a_row_of_ours_is_never_taken() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let (name, lost) = orphan(&store, &path, "older-build", "a").await;
    let conn = raw(&path);
    // The older build's acquire, word for word (once the row had expired).
    let token = lost + 1;
    conn.execute(
        "UPDATE regent_fencing SET last_token = ?2 WHERE election = ?1",
        rusqlite::params![name, token],
    )
    .expect("bump the counter");
    conn.execute(
        "INSERT INTO regent_lease (election, holder, token, expires_at_ns, ttl_ms, boot_id, metadata)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (election) DO UPDATE SET
             holder = excluded.holder, token = excluded.token,
             expires_at_ns = excluded.expires_at_ns, ttl_ms = excluded.ttl_ms,
             boot_id = excluded.boot_id, metadata = excluded.metadata",
        rusqlite::params![
            name,
            "a",
            token,
            mono_ns() + 60_000_000_000,
            60_000,
            common::boot_id(),
            "{}"
        ],
    )
    .expect("an older build's acquire");
    let won_by: String = conn
        .query_row(
            "SELECT won_by FROM regent_lease WHERE election = ?1",
            [&name],
            |r| r.get(0),
        )
        .expect("the row");
    assert!(won_by.ends_with(&format!("/{lost}")), "{won_by}");

    match store
        .try_acquire(&req(&election(&name), "a", TTL), None)
        .await
        .expect("acquire")
    {
        Acquire::Held {
            leader: Some(l), ..
        } => assert_eq!(l.token.get(), token.unsigned_abs(), "{l:?}"),
        got => panic!("the store took over the older build's term: {got:?}"),
    }
}

/// Several acquires of one holder through one store at once: one term,
/// one winner. None takes over the term another of them won, whose
/// answer is on its way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_of_one_holder_through_one_store_have_one_winner() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path().join("regent.db"))
        .await
        .expect("open");
    for round in 0..10 {
        let e = election(&format!("together-{round}"));
        let a = req(&e, "a", TTL);
        let got = futures_util::future::join_all((0..8).map(|_| store.try_acquire(&a, None))).await;
        let won: Vec<_> = got
            .into_iter()
            .filter_map(|g| match g.expect("acquire") {
                Acquire::Won(lease) => Some(lease),
                Acquire::Held { .. } => None,
            })
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        store.release(&won[0]).await.expect("release");
    }
}

/// The schema of the build before: version 1 with the roster's tables,
/// without `regent_lease.won_by`.
const SCHEMA_BEFORE: &str = "
CREATE TABLE regent_meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
CREATE TABLE regent_fencing (election TEXT PRIMARY KEY NOT NULL, last_token INTEGER NOT NULL);
CREATE TABLE regent_lease (
    election TEXT PRIMARY KEY NOT NULL, holder TEXT NOT NULL, token INTEGER NOT NULL,
    expires_at_ns INTEGER NOT NULL, ttl_ms INTEGER NOT NULL, boot_id TEXT NOT NULL,
    metadata TEXT NOT NULL
);
CREATE TABLE regent_roster (
    election TEXT NOT NULL, holder TEXT NOT NULL, expires_at_ns INTEGER NOT NULL,
    boot_id TEXT NOT NULL, metadata TEXT NOT NULL, PRIMARY KEY (election, holder)
);
CREATE TABLE regent_reserved (
    election TEXT PRIMARY KEY NOT NULL, holder TEXT NOT NULL, until_ns INTEGER NOT NULL,
    boot_id TEXT NOT NULL
);
INSERT INTO regent_meta (key, value) VALUES ('schema_version', '1');
";

fn has_won_by(conn: &Connection) -> bool {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('regent_lease') WHERE name = 'won_by')",
        [],
        |r| r.get(0),
    )
    .expect("read the table's columns")
}

/// A file of the build before gains `won_by` when it opens; its rows keep
/// their terms, and a live one of the caller's own holder id is never
/// taken over (it has no `won_by`: it may be that build's, leading). New
/// terms go on from its counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_of_the_build_before_gains_won_by_and_its_terms_are_never_taken() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let conn = raw(&path);
    conn.execute_batch(SCHEMA_BEFORE).expect("an old file");
    HandRow::live("jobs", "a", 41, TTL).write(&conn);
    assert!(!has_won_by(&conn));

    let store = SqliteStore::open(&path).await.expect("open");
    assert!(has_won_by(&conn), "the column was added");
    let jobs = election("jobs");
    let leader = store.current_leader(&jobs).await.expect("read").expect("a");
    assert_eq!((leader.holder.as_str(), leader.token.get()), ("a", 41));
    for who in ["a", "b"] {
        match store.try_acquire(&req(&jobs, who, TTL), None).await {
            Ok(Acquire::Held {
                leader: Some(l), ..
            }) => assert_eq!(l.token.get(), 41, "{who}: {l:?}"),
            got => panic!("{who} took over a term of the build before: {got:?}"),
        }
    }

    // Its term ends (deleted here, as expired): the next goes on from 41.
    conn.execute("DELETE FROM regent_lease", [])
        .expect("delete");
    let Acquire::Won(lease) = store
        .try_acquire(&req(&jobs, "a", TTL), None)
        .await
        .expect("acquire")
    else {
        panic!("a free election");
    };
    assert_eq!(lease.token.get(), 42);
    // Opened again (the schema is in place now), the file works.
    drop(store);
    let store = SqliteStore::open(&path).await.expect("open again");
    assert_eq!(store.renew(&lease).await.expect("renew"), Renewal::Renewed);
    store.release(&lease).await.expect("release");
    // And the build before still writes its rows into it, column by column.
    HandRow::live("jobs", "c", 43, TTL).write(&conn);
    let leader = store.current_leader(&jobs).await.expect("read").expect("c");
    assert_eq!((leader.holder.as_str(), leader.token.get()), ("c", 43));
}
