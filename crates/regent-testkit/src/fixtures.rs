//! Small constructors every store crate's tests need, so that each does not
//! write its own.

use std::time::Duration;

use regent_core::{Acquire, AcquireRequest, ElectionName, HolderId, Lease, LeaseStore, Metadata};

/// A holder id from a test's literal.
///
/// # Panics
///
/// If `name` is not a valid [`HolderId`].
pub fn holder(name: &str) -> HolderId {
    HolderId::new(name).expect("valid holder id")
}

/// An acquire request by `who` on `election`, publishing `who=<who>` as
/// metadata so that tests can check it is read back.
///
/// # Panics
///
/// If `who` is not a valid [`HolderId`].
pub fn acquire_request(election: &ElectionName, who: &str, ttl: Duration) -> AcquireRequest {
    AcquireRequest {
        election: election.clone(),
        holder: holder(who),
        ttl,
        metadata: Metadata::from_pairs([("who", who)]).expect("small metadata"),
    }
}

/// Waits up to `within` until one of `channels` holds a value that is
/// `wanted` (candidates' status channels, say); returns that channel's
/// index and the value.
///
/// # Panics
///
/// With `what` when `within` passes first, or when a sender is dropped.
pub async fn first_watched<T: Clone>(
    channels: impl IntoIterator<Item = tokio::sync::watch::Receiver<T>>,
    within: Duration,
    what: &str,
    wanted: impl Fn(&T) -> bool,
) -> (usize, T) {
    let wanted = &wanted;
    let waits = channels.into_iter().enumerate().map(|(i, mut rx)| {
        Box::pin(async move {
            let value = rx.wait_for(|v| wanted(v)).await.expect("the sender lives");
            (i, value.clone())
        })
    });
    let (first, _, _) = tokio::time::timeout(within, futures_util::future::select_all(waits))
        .await
        .unwrap_or_else(|_| panic!("not within {within:?}: {what}"));
    first
}

/// `who`'s acquire of `election` at `ttl`, which must win.
///
/// # Panics
///
/// If the store fails or someone else leads.
pub async fn win<S: LeaseStore>(
    store: &S,
    election: &ElectionName,
    who: &str,
    ttl: Duration,
) -> Lease {
    match store
        .try_acquire(&acquire_request(election, who, ttl), None)
        .await
        .expect("acquire")
    {
        Acquire::Won(l) => l,
        other => panic!("{who} should win {election}, got {other:?}"),
    }
}

/// Queues `who` on a queue store (with its old place, if any): its place,
/// and the leader it was told.
///
/// # Panics
///
/// If the store fails, or `who` is not queued behind a known leader.
pub async fn queue<S: LeaseStore>(
    store: &S,
    election: &ElectionName,
    who: &str,
    ttl: Duration,
    place: Option<&Lease>,
) -> (Lease, String) {
    match store
        .try_acquire(&acquire_request(election, who, ttl), place)
        .await
        .expect("acquire")
    {
        Acquire::Held {
            leader: Some(l),
            queued: Some(q),
        } => (q, l.holder.as_str().to_owned()),
        other => panic!("{who} should queue in {election}, got {other:?}"),
    }
}

/// The holders a queue store lists in line, in order.
///
/// # Panics
///
/// If the store fails or lists no line.
pub async fn line<S: LeaseStore>(store: &S, election: &ElectionName) -> Vec<String> {
    store
        .candidates(election)
        .await
        .expect("candidates")
        .expect("a queue store lists its line")
        .into_iter()
        .map(|c| c.holder.as_str().to_owned())
        .collect()
}
