//! Watches: a poll of the leader at the store's interval, woken at once
//! by the messages the store's own scripts publish on the election's
//! channel (every acquire, release, hand-over and metadata update), so
//! that a graceful hand-over takes a round trip or two, not an interval.
//!
//! Plain `SUBSCRIBE`, no keyspace notifications: nothing to set on the
//! server. A lease that *expires* publishes nothing (Redis would say so
//! only through keyspace notifications, off by default and lossy): the
//! poll sees it. Each watch has a subscriber connection of its own to the
//! master the store talks to; when it cannot be made, or breaks (a
//! failover), the watch polls until it is made again. Messages only ever
//! hasten a read; every decision is still a script's.

use std::time::Duration;

use futures_util::StreamExt as _;
use regent_core::{ElectionName, LeaderStream, StoreError};

use crate::error::classify;
use crate::store::RedisStore;

/// How long a broken subscriber connection waits before it is made again.
const RESUBSCRIBE: Duration = Duration::from_secs(1);

/// How long a new watch waits for its subscription before it reads its
/// first state (a message published before the `SUBSCRIBE` is lost; the
/// poll still sees the change, later).
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(1);

type Messages = std::pin::Pin<Box<dyn futures_util::Stream<Item = redis::Msg> + Send>>;

/// A subscription to `channel` on the store's master.
async fn subscribe(store: &RedisStore, channel: &str) -> Result<Messages, StoreError> {
    let what = || format!("{}: subscribe to {channel}", store.describe());
    let client = store.master_client().await?;
    let mut pubsub = client
        .get_async_pubsub()
        .await
        .map_err(|e| classify(what(), e))?;
    pubsub
        .subscribe(channel)
        .await
        .map_err(|e| classify(what(), e))?;
    Ok(Box::pin(pubsub.into_on_message()))
}

async fn subscribe_soon(store: &RedisStore, channel: &str) -> Option<Messages> {
    match tokio::time::timeout(SUBSCRIBE_WAIT, subscribe(store, channel)).await {
        Ok(Ok(m)) => Some(m),
        Ok(Err(e)) => {
            tracing::debug!(%channel, error = %e, "cannot subscribe; the watch polls");
            None
        }
        Err(_) => {
            tracing::debug!(%channel, "subscribing takes too long; the watch polls");
            None
        }
    }
}

struct Bell {
    store: RedisStore,
    channel: String,
    messages: Option<Messages>,
}

impl RedisStore {
    /// A watch of `election`: [`LeaseStore::watch`](regent_core::LeaseStore::watch).
    pub(crate) async fn leader_stream(
        &self,
        election: &ElectionName,
        interval: Duration,
    ) -> Result<LeaderStream, StoreError> {
        watch(self, election, interval).await
    }
}

/// A watch of `election`.
async fn watch(
    store: &RedisStore,
    election: &ElectionName,
    interval: Duration,
) -> Result<LeaderStream, StoreError> {
    let channel = store.channel(election);
    // Subscribed before the first read: a change right after it wakes us.
    let messages = subscribe_soon(store, &channel).await;
    let bell = Bell {
        store: store.clone(),
        channel,
        messages,
    };
    let rung = futures_util::stream::unfold(bell, |mut bell| async move {
        loop {
            if let Some(messages) = &mut bell.messages {
                if messages.next().await.is_none() {
                    // The connection ended: a message may have been lost
                    // with it, so read now.
                    bell.messages = None;
                }
                return Some(((), bell));
            }
            tokio::time::sleep(RESUBSCRIBE).await;
            if let Some(m) = subscribe_soon(&bell.store, &bell.channel).await {
                bell.messages = Some(m);
                // What changed while no one listened: read once.
                return Some(((), bell));
            }
        }
    });
    regent_core::store::poll_watch_woken(store.clone(), election.clone(), interval, rung).await
}
