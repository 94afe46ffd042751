//! Issue 25 on SQLite: a leader task that panics ends its term like any
//! other failure; the lease is given back at once (not left to expire) and
//! the process runs on.

mod common;

use regent_core::Candidate;
use regent_sqlite::SqliteStore;
use regent_testkit::supervisor::{PANIC_TTL, panicking_leader_hands_over};

use common::{election, holder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_leader_task_hands_over_within_a_third_of_its_ttl() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let e = election("issue-25-panic");
    let mut candidates = Vec::new();
    for who in ["a", "b"] {
        // One store each, as two processes would have.
        let store = SqliteStore::open(&path).await.expect("open");
        let candidate = Candidate::builder(store, e.clone(), holder(who))
            .ttl(PANIC_TTL)
            .build()
            .expect("valid timing");
        candidates.push(candidate);
    }
    let b = candidates.pop().expect("b");
    let a = candidates.pop().expect("a");
    panicking_leader_hands_over(a, b).await;
}
