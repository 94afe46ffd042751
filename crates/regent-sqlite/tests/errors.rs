//! Files that cannot serve as a store, and a locked database: each is a
//! clear error of its documented kind, never a panic.

mod common;

use std::error::Error as _;
use std::time::Duration;

use regent_core::{ErrorKind, LeaseStore, StoreError};
use regent_sqlite::SqliteStore;

use common::{election, raw, req};

const TTL: Duration = Duration::from_secs(5);

async fn open_err(path: &std::path::Path) -> StoreError {
    SqliteStore::open(path)
        .await
        .expect_err("the path cannot hold a store")
}

fn assert_names(e: &StoreError, path: &std::path::Path, cause: &str) {
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()),
        "the error should name the path: {msg}"
    );
    assert!(msg.contains(cause), "the error should say {cause:?}: {msg}");
}

#[tokio::test]
async fn a_missing_directory_is_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("no-such-dir").join("regent.db");
    let e = open_err(&path).await;
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert_names(&e, &path, "does not exist");
    assert!(e.source().is_some(), "the rusqlite error is kept");
}

#[tokio::test]
async fn a_directory_in_place_of_the_file_is_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = open_err(dir.path()).await;
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert_names(&e, dir.path(), "directory");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_corrupt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let noise: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&path, noise).expect("write noise");
    let e = open_err(&path).await;
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert_names(&e, &path, "not a SQLite database");
    assert!(e.source().is_some(), "the rusqlite error is kept");
}

#[tokio::test]
async fn another_applications_database_is_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("app.db");
    raw(&path)
        .execute_batch("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        .expect("create a foreign table");
    let e = open_err(&path).await;
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert_names(&e, &path, "not a regent store");
    // And the foreign file is left as it was.
    let tables: i64 = raw(&path)
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .expect("count tables");
    assert_eq!(tables, 1);
}

#[tokio::test]
async fn another_schema_version_is_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    drop(SqliteStore::open(&path).await.expect("create"));
    raw(&path)
        .execute(
            "UPDATE regent_meta SET value = '99' WHERE key = 'schema_version'",
            [],
        )
        .expect("pretend a newer regent wrote the file");
    let e = open_err(&path).await;
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert_names(&e, &path, "version 99");
}

#[tokio::test]
async fn a_zero_poll_interval_is_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = SqliteStore::builder(dir.path().join("regent.db"))
        .poll_interval(Duration::ZERO)
        .open()
        .await
        .expect_err("zero poll interval");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(e.to_string().contains("poll interval"), "{e}");
}

/// `commit_interval(Duration::MAX)` opened fine, then panicked the
/// connection thread at the first write; `poll_interval(Duration::MAX)` at
/// the first watch; a huge busy timeout while opening. Every later call
/// failed as `Unavailable`, forever. Now `open` refuses each, naming the
/// option and the bound.
#[tokio::test]
async fn intervals_and_timeouts_beyond_a_day_are_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let day = Duration::from_secs(86_400);
    let builders = [
        (
            "busy timeout",
            SqliteStore::builder(&path).busy_timeout(Duration::MAX),
        ),
        (
            "poll interval",
            SqliteStore::builder(&path).poll_interval(Duration::MAX),
        ),
        (
            "commit interval",
            SqliteStore::builder(&path).commit_interval(Duration::MAX),
        ),
        (
            "commit interval",
            SqliteStore::builder(&path).commit_interval(day + Duration::from_nanos(1)),
        ),
    ];
    for (option, builder) in builders {
        let e = builder.open().await.expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        assert_names(&e, &path, option);
        assert!(e.to_string().contains("at most one day"), "{e}");
    }
    assert!(!path.exists(), "refused before the file is created");
}

/// At their bound (a day) every option works: nothing the connection
/// thread adds to the clock overflows, and every call is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intervals_and_timeouts_of_a_day_work() {
    let dir = tempfile::tempdir().expect("temp dir");
    let day = Duration::from_secs(86_400);
    let store = SqliteStore::builder(dir.path().join("regent.db"))
        .busy_timeout(day)
        .poll_interval(day)
        .commit_interval(day)
        .open()
        .await
        .expect("open");
    let e = election("a-day");
    let lease = match store.try_acquire(&req(&e, "a", TTL), None).await {
        Ok(regent_core::Acquire::Won(lease)) => lease,
        other => panic!("wins: {other:?}"),
    };
    let mut watch = store.watch(&e).await.expect("watch");
    let first = futures_util::StreamExt::next(&mut watch).await;
    assert!(matches!(first, Some(Ok(Some(_)))), "{first:?}");
    for _ in 0..8 {
        // Past the burst the commit interval (a day) gives way to the
        // renewal's own bound, a twentieth of its ttl.
        let renewed = tokio::time::timeout(TTL, store.renew(&lease))
            .await
            .expect("answered within the ttl")
            .expect("renew");
        assert_eq!(renewed, regent_core::Renewal::Renewed);
    }
    store.release(&lease).await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_database_is_unavailable_for_writes_until_the_lock_goes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::builder(&path)
        .busy_timeout(Duration::from_millis(100))
        .open()
        .await
        .expect("open");
    let e = election("e");
    let locker = raw(&path);
    locker
        .execute_batch("BEGIN EXCLUSIVE")
        .expect("take the write lock");

    let err = tokio::time::timeout(
        Duration::from_secs(10),
        store.try_acquire(&req(&e, "a", TTL), None),
    )
    .await
    .expect("the busy timeout bounds the wait")
    .expect_err("the write lock is held");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.is_transient());
    let msg = err.to_string();
    assert!(
        msg.contains("acquire") && msg.contains("'e'") && msg.contains(&path.display().to_string()),
        "the error names the operation, the election and the path: {msg}"
    );
    let source = err
        .source()
        .expect("the rusqlite error is kept")
        .to_string();
    assert!(source.contains("locked"), "{source}");
    // In WAL mode, readers do not wait for the writer.
    assert_eq!(store.current_leader(&e).await.expect("read"), None);

    locker.execute_batch("COMMIT").expect("let go");
    assert!(matches!(
        store.try_acquire(&req(&e, "a", TTL), None).await,
        Ok(regent_core::Acquire::Won(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_file_locked_before_regent_created_its_schema_is_unavailable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let locker = raw(&path);
    locker
        .execute_batch("BEGIN EXCLUSIVE")
        .expect("lock the empty file");
    let err = SqliteStore::builder(&path)
        .busy_timeout(Duration::from_millis(100))
        .open()
        .await
        .expect_err("the schema cannot be created");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_names(&err, &path, "");
    locker.execute_batch("ROLLBACK").expect("let go");
    SqliteStore::open(&path)
        .await
        .expect("opens once the lock is gone");
}
