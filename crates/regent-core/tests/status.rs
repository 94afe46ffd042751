//! `Candidate::status()` publishes changes only (issue 12: a follower
//! published the same `Follower` value on every retry), and `Stopped` once
//! when a supervisor's run ends by its restart policy.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::time::Duration;

use common::{candidate, id, secs};
use regent_core::memory::MemoryStore;
use regent_core::{BoxError, Restart, Status, Supervisor, SupervisorExit};
use tokio::sync::watch;
use tokio::time::sleep;

/// Counts the notifications a status receiver gets, and what they were.
fn record(mut rx: watch::Receiver<Status>) -> tokio::task::JoinHandle<Vec<Status>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while rx.changed().await.is_ok() {
            seen.push(rx.borrow_and_update().clone());
        }
        seen
    })
}

#[tokio::test(start_paused = true)]
async fn a_follower_publishes_its_leader_once_not_on_every_retry() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    // Retrying at the renew interval, as a follower of a store that polls
    // does (with an open watch of a store that notifies, the default is
    // the ttl).
    let b = regent_core::Candidate::builder(store.clone(), common::jobs(), id("b"))
        .ttl(secs(10))
        .retry_every(secs(2))
        .build()
        .unwrap();
    let la = a.campaign().await.unwrap();
    let seen = record(b.status());
    let follower = {
        let b = b.clone();
        tokio::spawn(async move { b.campaign().await })
    };
    // 30 s: b retries every 1–2 s, 15 to 30 times.
    sleep(secs(30)).await;
    assert!(store.stats().acquires >= 10, "{:?}", store.stats());
    la.resign().await.unwrap();
    let lb = follower.await.unwrap().unwrap();
    b.shutdown().await;
    drop(lb);
    drop(b);
    let seen = seen.await.unwrap();
    let leader_a =
        |s: &Status| matches!(s, Status::Follower { leader: Some(l) } if l.holder == id("a"));
    assert_eq!(
        seen.iter().filter(|s| leader_a(s)).count(),
        1,
        "one notification for a leading, not one per retry: {seen:#?}"
    );
    assert_eq!(
        seen.iter().filter(|s| matches!(s, Status::Stopped)).count(),
        1,
        "{seen:#?}"
    );
    for pair in seen.windows(2) {
        assert_ne!(pair[0], pair[1], "a repeat: {seen:#?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_finished_run_is_stopped_published_once() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let seen = record(a.status());
    let exit = Supervisor::new(a.clone())
        .restart(Restart::Never)
        .run(|_leader| async {
            sleep(Duration::from_secs(25)).await;
            Ok::<_, BoxError>(())
        })
        .await
        .unwrap();
    assert!(matches!(exit, SupervisorExit::Finished(_)), "{exit:?}");
    assert_eq!(*a.status().borrow(), Status::Stopped);
    a.shutdown().await;
    drop(a);
    let seen = seen.await.unwrap();
    assert_eq!(
        seen.iter().filter(|s| matches!(s, Status::Stopped)).count(),
        1,
        "{seen:#?}"
    );
    assert_eq!(seen.last(), Some(&Status::Stopped), "{seen:#?}");
    assert!(
        seen.iter().filter(|s| s.is_leader()).count() == 1,
        "renewals publish nothing: {seen:#?}"
    );
}
