//! regent's store conformance suite against a real SQLite file.

mod common;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use regent_core::ElectionName;
use regent_core::testing::{Harness, run};
use regent_sqlite::SqliteStore;
use rusqlite::Connection;
use tempfile::TempDir;

use common::{HandRow, raw};

struct SqliteHarness {
    _dir: TempDir,
    path: PathBuf,
    locked_path: PathBuf,
    /// Holds `BEGIN EXCLUSIVE` on `locked_path` for the whole test. A mutex
    /// only because `Connection` is not `Sync`.
    _locker: Mutex<Connection>,
}

impl SqliteHarness {
    async fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("regent.db");
        let locked_path = dir.path().join("locked.db");
        // Create the locked file's schema first, then take its write lock
        // and keep it: every write to it then waits out the busy timeout.
        drop(
            SqliteStore::open(&locked_path)
                .await
                .expect("create the file to lock"),
        );
        let locker = raw(&locked_path);
        locker
            .execute_batch("BEGIN EXCLUSIVE")
            .expect("take the write lock");
        Self {
            _dir: dir,
            path,
            locked_path,
            _locker: Mutex::new(locker),
        }
    }
}

impl Harness for SqliteHarness {
    type Store = SqliteStore;

    async fn store(&self) -> SqliteStore {
        SqliteStore::open(&self.path).await.expect("open the store")
    }

    async fn unreachable_store(&self) -> SqliteStore {
        SqliteStore::builder(&self.locked_path)
            .busy_timeout(Duration::from_millis(100))
            .open()
            .await
            .expect("a locked file still opens: its schema is read without the write lock")
    }

    fn ttl(&self) -> Duration {
        Duration::from_millis(500)
    }

    async fn delete_records(&self, election: &ElectionName) {
        raw(&self.path)
            .execute(
                "DELETE FROM regent_lease WHERE election = ?1",
                [election.as_str()],
            )
            .expect("delete the lease row");
    }

    async fn put_garbage(&self, election: &ElectionName) {
        let mut row = HandRow::live(election.as_str(), "x", 1, Duration::from_secs(60));
        row.holder = "not a holder id".to_owned().into();
        row.metadata = "[1, 2, 3]".to_owned().into();
        row.write(&raw(&self.path));
    }

    /// The store takes over a term it won for a caller who never heard
    /// of it (same holder, its own incarnation, a token it never handed
    /// out).
    fn checks_retried_acquire_after_a_lost_answer(&self) -> bool {
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_store_conforms() {
    run(&SqliteHarness::new().await).await;
}
