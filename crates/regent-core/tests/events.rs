//! Term events (`Election::events`): a term is won once, confirmed at every
//! renewal, and ends once with the reason that stands — what the metrics,
//! the health check and the timeline of `regent-monitor` are built on.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use common::{candidate, id, secs};
use regent_core::memory::MemoryStore;
use regent_core::{EndReason, LeaseStore, TermEvent};
use tokio::sync::broadcast;
use tokio::time::sleep;

fn drain(rx: &mut broadcast::Receiver<TermEvent>) -> Vec<TermEvent> {
    let mut seen = Vec::new();
    while let Ok(e) = rx.try_recv() {
        seen.push(e);
    }
    seen
}

#[tokio::test(start_paused = true)]
async fn a_term_is_won_confirmed_at_each_renewal_and_ended_with_its_reason() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let mut events = a.events();
    let leadership = a.campaign().await.unwrap();
    let token = leadership.token();
    // ttl 10 s, renew every 2 s: about three renewals in 7 s.
    sleep(secs(7)).await;
    leadership.resign().await.unwrap();
    let seen = drain(&mut events);
    assert!(
        matches!(&seen[0], TermEvent::Won { leader, deadline, step_down_at, .. }
            if leader.token == token && leader.holder == id("a") && step_down_at < deadline),
        "{seen:#?}"
    );
    let confirmed = seen
        .iter()
        .filter(|e| matches!(e, TermEvent::Confirmed { .. }))
        .count();
    assert!((2..=4).contains(&confirmed), "{seen:#?}");
    // Every confirmation moves the deadline later.
    let deadlines: Vec<_> = seen
        .iter()
        .filter_map(|e| match e {
            TermEvent::Won { deadline, .. } | TermEvent::Confirmed { deadline, .. } => {
                Some(*deadline)
            }
            _ => None,
        })
        .collect();
    assert!(deadlines.windows(2).all(|w| w[0] < w[1]), "{deadlines:?}");
    assert!(
        matches!(seen.last(), Some(TermEvent::Ended { leader, ended })
            if leader.token == token && ended.reason == EndReason::Resigned),
        "{seen:#?}"
    );
    assert!(seen.iter().all(|e| e.token() == token));
}

#[tokio::test(start_paused = true)]
async fn the_first_end_stands_when_a_front_end_ends_the_term_before_resigning() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let mut events = a.events();
    let mut leadership = a.campaign().await.unwrap();
    leadership.end(EndReason::Unhealthy);
    assert!(leadership.cancellation().is_cancelled());
    // The record stays until the guard is given back: the work stops first.
    assert_eq!(
        store
            .current_leader(&common::jobs())
            .await
            .unwrap()
            .map(|l| l.holder),
        Some(id("a"))
    );
    leadership.resign().await.unwrap();
    let ended: Vec<_> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            TermEvent::Ended { ended, .. } => Some(ended.reason),
            _ => None,
        })
        .collect();
    assert_eq!(ended, [EndReason::Unhealthy]);
    assert_eq!(store.current_leader(&common::jobs()).await.unwrap(), None);
}

#[tokio::test(start_paused = true)]
async fn a_term_that_cannot_renew_ends_with_the_deadline() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let mut events = a.events();
    let leadership = a.campaign().await.unwrap();
    store.partition(&id("a"));
    let ended = leadership.until_ended().await;
    assert_eq!(ended.reason, EndReason::DeadlinePassed);
    // The end is published by the renewal task right after it marks it.
    tokio::task::yield_now().await;
    let seen = drain(&mut events);
    assert!(
        matches!(seen.last(), Some(TermEvent::Ended { ended: e, .. }) if *e == ended),
        "{seen:#?}"
    );
}
