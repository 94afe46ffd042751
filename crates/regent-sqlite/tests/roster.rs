//! The roster and the lease kept for a successor on SQLite, beyond the
//! conformance suite: a file written before the roster existed gains its
//! tables on open; garbage in the roster is a clear error, never a panic
//! nor a candidate.

mod common;

use std::time::Duration;

use regent_core::{ErrorKind, HandOff, LeaseStore};
use regent_sqlite::SqliteStore;

use common::{election, holder, raw, req};

const TTL: Duration = Duration::from_secs(5);

/// The schema of the first builds: version 1 without the roster's tables.
const OLD_SCHEMA: &str = "
CREATE TABLE regent_meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
CREATE TABLE regent_fencing (election TEXT PRIMARY KEY NOT NULL, last_token INTEGER NOT NULL);
CREATE TABLE regent_lease (
    election TEXT PRIMARY KEY NOT NULL, holder TEXT NOT NULL, token INTEGER NOT NULL,
    expires_at_ns INTEGER NOT NULL, ttl_ms INTEGER NOT NULL, boot_id TEXT NOT NULL,
    metadata TEXT NOT NULL
);
INSERT INTO regent_meta (key, value) VALUES ('schema_version', '1');
INSERT INTO regent_fencing (election, last_token) VALUES ('jobs', 41);
";

#[tokio::test]
async fn a_file_of_an_earlier_build_gains_the_roster_on_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    raw(&path).execute_batch(OLD_SCHEMA).expect("an old file");
    let store = SqliteStore::open(&path).await.expect("open");
    let jobs = election("jobs");
    store.enroll(&req(&jobs, "b", TTL)).await.expect("enroll");
    let listed = store
        .candidates(&jobs)
        .await
        .expect("list")
        .expect("a roster");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].holder.as_str(), "b");
    // The old counter goes on: the next token is above it.
    let regent_core::Acquire::Won(a) = store
        .try_acquire(&req(&jobs, "a", TTL), None)
        .await
        .unwrap()
    else {
        panic!("a free election");
    };
    assert_eq!(a.token.get(), 42);
    assert_eq!(
        store.release_to(&a, &holder("b"), TTL).await.unwrap(),
        HandOff::ToSuccessor
    );
}

#[tokio::test]
async fn garbage_in_the_roster_is_corrupt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let jobs = election("jobs");
    store.enroll(&req(&jobs, "b", TTL)).await.expect("enroll");
    raw(&path)
        .execute("UPDATE regent_roster SET metadata = '[1, 2]'", [])
        .expect("garbage");
    let e = store.candidates(&jobs).await.expect_err("garbage");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("roster"), "{e}");
    raw(&path)
        .execute("UPDATE regent_roster SET holder = X'00ff'", [])
        .expect("garbage");
    let e = store.candidates(&jobs).await.expect_err("garbage");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
}

#[tokio::test]
async fn garbage_in_a_reservation_is_corrupt_and_never_a_takeover() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let jobs = election("jobs");
    raw(&path)
        .execute(
            "INSERT INTO regent_reserved (election, holder, until_ns, boot_id) VALUES ('jobs', 'x', 'soon', 'b')",
            [],
        )
        .expect("garbage");
    let e = store
        .try_acquire(&req(&jobs, "a", TTL), None)
        .await
        .expect_err("garbage");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert_eq!(store.current_leader(&jobs).await.unwrap(), None);
}
