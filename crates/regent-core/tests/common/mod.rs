//! Fixtures the paused-time tests of the election and the supervisor share:
//! one election, candidates with a 10 s ttl, and followers that campaign in
//! the background.

use std::time::Duration;

use regent_core::memory::MemoryStore;
use regent_core::{Candidate, ElectionName, HolderId, Leadership};
use tokio::time::Instant;

pub(crate) fn jobs() -> ElectionName {
    ElectionName::new("jobs").unwrap()
}

pub(crate) fn id(s: &str) -> HolderId {
    HolderId::new(s).unwrap()
}

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// ttl 10 s, renew every 2 s, step down after 6 s, grace 2 s.
pub(crate) fn candidate(store: &MemoryStore, who: &str) -> Candidate<MemoryStore> {
    Candidate::builder(store.clone(), jobs(), id(who))
        .ttl(secs(10))
        .build()
        .unwrap()
}

/// Campaigns in the background; yields when it won and the leadership.
pub(crate) fn spawn_follower(
    c: Candidate<MemoryStore>,
) -> tokio::task::JoinHandle<(Instant, Leadership)> {
    tokio::spawn(async move {
        let l = c.campaign().await.unwrap();
        (Instant::now(), l)
    })
}
