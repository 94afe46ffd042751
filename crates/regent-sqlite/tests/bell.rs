//! The wake-up bell: a release by one store (another process, as far as
//! the file can tell) reaches the watches of another store at once, not at
//! its next poll. The stores here poll once an hour, so a watch that sees
//! the release within the test's patience saw it through the bell.

mod common;

use std::time::Duration;

use futures_util::StreamExt;
use regent_core::{Acquire, LeaseStore};
use regent_sqlite::SqliteStore;

use common::{election, holder, req};

/// Bounds every wait: far below the stores' poll interval.
const PATIENCE: Duration = Duration::from_secs(10);
const HOUR: Duration = Duration::from_secs(3600);

async fn slow_poll(path: &std::path::Path) -> SqliteStore {
    SqliteStore::builder(path)
        .poll_interval(HOUR)
        .open()
        .await
        .expect("open")
}

/// `a`'s lease on the free election `e`, for an hour.
async fn win(store: &SqliteStore, e: &regent_core::ElectionName) -> regent_core::Lease {
    let Acquire::Won(lease) = store
        .try_acquire(&req(e, "a", HOUR), None)
        .await
        .expect("acquire")
    else {
        panic!("a free election is won");
    };
    lease
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_watches_of_other_stores_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let (leader, follower, other) = (
        slow_poll(&path).await,
        slow_poll(&path).await,
        slow_poll(&path).await,
    );
    let e = election("bell");
    let lease = win(&leader, &e).await;
    // Two watches on two stores: each store's own bell thread wakes it.
    let mut follow = follower.watch(&e).await.expect("watch");
    let mut third = other.watch(&e).await.expect("watch");
    for stream in [&mut follow, &mut third] {
        let first = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("the first state comes at once");
        assert!(
            matches!(&first, Some(Ok(Some(l))) if l.holder == holder("a")),
            "{first:?}"
        );
    }
    leader.release(&lease).await.expect("release");
    for stream in [&mut follow, &mut third] {
        let next = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("the release is seen long before the next poll");
        assert!(matches!(next, Some(Ok(None))), "{next:?}");
    }
    // The bell lies beside the database, one byte long.
    let bell = dir.path().join("regent.db-wake");
    assert_eq!(std::fs::metadata(&bell).expect("the bell exists").len(), 1);
}

/// Regression: only a release rang the bell, so an observer on another
/// store named a new leader at its next poll (up to 100 ms by default),
/// while the candidates had taken over at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_win_wakes_the_watches_of_other_stores_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let (candidate, observer) = (slow_poll(&path).await, slow_poll(&path).await);
    let e = election("bell-win");
    let mut watch = observer.watch(&e).await.expect("watch");
    let first = tokio::time::timeout(PATIENCE, watch.next())
        .await
        .expect("the first state comes at once");
    assert!(matches!(first, Some(Ok(None))), "{first:?}");
    win(&candidate, &e).await;
    let next = tokio::time::timeout(PATIENCE, watch.next())
        .await
        .expect("the win is seen long before the next poll");
    assert!(
        matches!(&next, Some(Ok(Some(l))) if l.holder == holder("a")),
        "{next:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_bell_the_watch_still_polls() {
    // The bell deleted under a running watch: the store goes on by polling.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let fast = |p| async move {
        SqliteStore::builder(p)
            .poll_interval(Duration::from_millis(20))
            .open()
            .await
            .expect("open")
    };
    let (leader, follower) = (fast(path.clone()).await, fast(path.clone()).await);
    let e = election("no-bell");
    let lease = win(&leader, &e).await;
    let mut follow = follower.watch(&e).await.expect("watch");
    let _first = follow.next().await;
    std::fs::remove_file(dir.path().join("regent.db-wake")).expect("remove the bell");
    leader.release(&lease).await.expect("release");
    let next = tokio::time::timeout(PATIENCE, follow.next())
        .await
        .expect("the poll sees the release");
    assert!(matches!(next, Some(Ok(None))), "{next:?}");
}
