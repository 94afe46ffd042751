//! [`ObserverSet`]: the leaders of a set of elections followed as one,
//! each item naming its election.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_core::Stream;
use futures_util::StreamExt as _;
use futures_util::stream::SelectAll;
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

use super::error::ObserveError;
use crate::error::StoreError;
use crate::observer::{LeaderChanges, Observer};
use crate::store::LeaseStore;
use crate::types::{ElectionName, LeaderInfo};

/// Follows the leaders of a set of elections without campaigning: an
/// [`Observer`] per election, merged, every item naming its election.
///
/// The same three ways to follow as an [`Observer`], plus one read:
///
/// * [`leader_watch`](Self::leader_watch): a map of the current leaders,
///   kept current in the background, for code that asks "who leads shard 7
///   now?" (to forward a request to it);
/// * [`changes`](Self::changes): every change of every election as one
///   stream of `(election, change)`, errors included;
/// * [`on_new_leader`](Self::on_new_leader): a callback per change, told
///   the election first;
/// * [`current`](Self::current): one read of every election's leader.
///
/// Each election is followed as [`Observer::changes`] follows one: its
/// leader first, then every change, repeats left out, a transient error
/// yielded and the watch re-opened after a backoff, a permanent error
/// yielded and that election's watch ended. An election's permanent error
/// ends only its own part: the others go on.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_core::memory::MemoryStore;
/// use regent_core::{ElectionName, ObserverSet};
///
/// let shards = [ElectionName::new("shard-0")?, ElectionName::new("shard-1")?];
/// let observers = ObserverSet::new(MemoryStore::race(), shards.clone());
///
/// // Who leads each shard now, kept current: what a router reads.
/// let leaders = observers.leader_watch().await?;
/// assert_eq!(leaders.borrow().get(&shards[1]), Some(&None)); // nobody yet
///
/// // Every change, naming its election.
/// let mut changes = observers.changes();
/// let (shard, leader) = changes.next().await.expect("watched");
/// assert!(shards.contains(&shard) && leader?.is_none());
///
/// // A callback per change (dropping the handle stops it).
/// let callbacks = observers.on_new_leader(|shard, leader| match leader {
///     Some(l) => println!("{shard}: {} (token {})", l.holder, l.token),
///     None => println!("{shard}: no leader"),
/// });
/// # drop(callbacks);
/// # Ok(()) }
/// ```
pub struct ObserverSet<S> {
    /// One per election, in election order.
    observers: Vec<Observer<S>>,
}

impl<S> Clone for ObserverSet<S> {
    fn clone(&self) -> Self {
        Self {
            observers: self.observers.clone(),
        }
    }
}

impl<S: LeaseStore> fmt::Debug for ObserverSet<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObserverSet")
            .field(
                "elections",
                &self
                    .observers
                    .iter()
                    .map(|o| o.election())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<S: LeaseStore + Clone> ObserverSet<S> {
    /// Observers of `elections` on `store` (clones of it: a store's clones
    /// share its connection). A name given twice is observed once.
    pub fn new(store: S, elections: impl IntoIterator<Item = ElectionName>) -> Self {
        let elections: BTreeSet<ElectionName> = elections.into_iter().collect();
        Self {
            observers: elections
                .into_iter()
                .map(|election| Observer::new(store.clone(), election))
                .collect(),
        }
    }
}

impl<S: LeaseStore> ObserverSet<S> {
    /// The longest wait between attempts to re-open a failed watch, for
    /// every election ([`Observer::max_backoff`]; default 5 s).
    #[must_use]
    pub fn max_backoff(self, max: Duration) -> Self {
        Self {
            observers: self
                .observers
                .into_iter()
                .map(|o| o.max_backoff(max))
                .collect(),
        }
    }

    /// How many elections the set observes.
    pub fn len(&self) -> usize {
        self.observers.len()
    }

    /// Whether the set observes no election.
    pub fn is_empty(&self) -> bool {
        self.observers.is_empty()
    }

    /// The elections observed, in order.
    pub fn elections(&self) -> impl ExactSizeIterator<Item = &ElectionName> {
        self.observers.iter().map(Observer::election)
    }

    /// Who leads each election now (`None`: nobody), read once, all
    /// elections at the same time; each election's entry is its own read's
    /// answer, so one failed read spoils no other.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn current(&self) -> BTreeMap<ElectionName, Result<Option<LeaderInfo>, StoreError>> {
        let reads = self
            .observers
            .iter()
            .map(|o| async move { (o.election().clone(), o.current().await) });
        futures_util::future::join_all(reads)
            .await
            .into_iter()
            .collect()
    }

    /// Every election's leader now, then every change, as one stream of
    /// `(election, change)`: each election as [`Observer::changes`] follows
    /// it, merged so that a busy election does not starve the others. The
    /// stream ends once every election's watch has ended after a permanent
    /// error (at once for an empty set). [`SetChanges::leaders`] keeps what
    /// it has told.
    pub fn changes(&self) -> SetChanges {
        SetChanges {
            inner: futures_util::stream::select_all(self.observers.iter().map(|o| Named {
                election: o.election().clone(),
                changes: o.changes(),
            })),
            leaders: BTreeMap::new(),
        }
    }

    /// The current leader of each election (`None`: nobody leads it), kept
    /// up to date by a background task that lives as long as the returned
    /// [`LeadersWatch`] (or a clone of it). Returns once every election's
    /// first answer is in, so no value is a guess. The watch dereferences to
    /// a `tokio::sync::watch::Receiver`: `borrow()` reads, `changed().await`
    /// waits for any election's change.
    ///
    /// Transient store errors are logged and retried (the election's entry
    /// stays the last one known); an election whose watch fails for good is
    /// logged and taken out of the map (absent: not known), and the others
    /// are still followed. When none is left the task ends, after which
    /// `changed()` returns an error. Use [`changes`](Self::changes) to
    /// handle errors yourself.
    ///
    /// # Errors
    ///
    /// The first error any election's watch gives before every election has
    /// answered, naming the election.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is started until every first answer is in.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn leader_watch(&self) -> Result<LeadersWatch, ObserveError> {
        let mut changes = self.changes();
        while changes.leaders().len() < self.observers.len() {
            match changes.next().await {
                Some((_, Ok(_))) => {}
                Some((election, Err(e))) => return Err(ObserveError::new(election, e)),
                None => unreachable!("an election's watch ends only after a permanent error"),
            }
        }
        let (tx, rx) = watch::channel(changes.leaders().clone());
        let task = tokio::spawn(async move {
            loop {
                let item = tokio::select! {
                    () = tx.closed() => return,
                    item = changes.next() => item,
                };
                match item {
                    Some((election, Ok(leader))) => {
                        tx.send_modify(|leaders| {
                            leaders.insert(election, leader);
                        });
                    }
                    Some((election, Err(e))) if e.is_transient() => {
                        crate::repeats::log_watch_failure(&election, &e);
                    }
                    Some((election, Err(e))) => {
                        log_ended(&election, &e);
                        tx.send_modify(|leaders| {
                            leaders.remove(&election);
                        });
                    }
                    None => return,
                }
            }
        });
        Ok(LeadersWatch {
            rx,
            _task: Arc::new(AbortOnDropHandle::new(task)),
        })
    }

    /// Calls `on_change` with each election and its leader now, then on
    /// every change (`None`: nobody leads it), in a background task:
    /// [`Observer::on_new_leader`] for a set, told which election changed.
    /// Transient errors are logged and retried; an election whose watch
    /// fails for good is logged and no longer followed, the others are.
    /// The task ends when no election is left, with the errors that ended
    /// them, and lives as long as the returned handle: dropping it stops
    /// the callbacks.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn on_new_leader<F>(&self, mut on_change: F) -> AbortOnDropHandle<Vec<ObserveError>>
    where
        F: FnMut(&ElectionName, Option<&LeaderInfo>) + Send + 'static,
    {
        let mut changes = self.changes();
        AbortOnDropHandle::new(tokio::spawn(async move {
            let mut ended = Vec::new();
            while let Some((election, item)) = changes.next().await {
                match item {
                    Ok(leader) => on_change(&election, leader.as_ref()),
                    Err(e) if e.is_transient() => crate::repeats::log_watch_failure(&election, &e),
                    Err(e) => {
                        log_ended(&election, &e);
                        ended.push(ObserveError::new(election, e));
                    }
                }
            }
            ended
        }))
    }
}

/// An election's watch failed for good; the set follows the others.
fn log_ended(election: &ElectionName, e: &StoreError) {
    tracing::error!(
        %election, error = %crate::report(e),
        "watching the leader failed for good; the set's other elections are still followed"
    );
}

/// The leader changes of a set of elections ([`ObserverSet::changes`]): a
/// [`Stream`] of `(election, change)` that is `Unpin`, with an inherent
/// [`next`](Self::next).
pub struct SetChanges {
    inner: SelectAll<Named>,
    leaders: BTreeMap<ElectionName, Option<LeaderInfo>>,
}

impl fmt::Debug for SetChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetChanges")
            .field("leaders", &self.leaders)
            .finish_non_exhaustive()
    }
}

impl SetChanges {
    /// The next change: `Some((election, Ok(None)))` means nobody leads
    /// `election`; `None` means every election's watch has ended after a
    /// permanent error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a change not yet returned is returned by the next call.
    pub async fn next(&mut self) -> Option<(ElectionName, Result<Option<LeaderInfo>, StoreError>)> {
        futures_util::StreamExt::next(self).await
    }

    /// The leader of each election as this stream last told it (`None`:
    /// nobody leads it). An election not told yet, or whose watch ended
    /// after a permanent error, is absent; after a transient error the
    /// entry stays the last one told.
    pub fn leaders(&self) -> &BTreeMap<ElectionName, Option<LeaderInfo>> {
        &self.leaders
    }
}

impl Stream for SetChanges {
    type Item = (ElectionName, Result<Option<LeaderInfo>, StoreError>);

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let item = ready!(this.inner.poll_next_unpin(cx));
        if let Some((election, change)) = &item {
            match change {
                Ok(leader) => {
                    this.leaders.insert(election.clone(), leader.clone());
                }
                Err(e) if !e.is_transient() => {
                    this.leaders.remove(election);
                }
                Err(_) => {}
            }
        }
        Poll::Ready(item)
    }
}

/// One election's changes, each item naming it.
struct Named {
    election: ElectionName,
    changes: LeaderChanges,
}

impl Stream for Named {
    type Item = (ElectionName, Result<Option<LeaderInfo>, StoreError>);

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let item = ready!(this.changes.poll_next_unpin(cx));
        Poll::Ready(item.map(|change| (this.election.clone(), change)))
    }
}

/// The current leader of each election of an [`ObserverSet`]
/// ([`ObserverSet::leader_watch`]): a `tokio::sync::watch::Receiver` of a
/// map (through `Deref`), and the background task that keeps it current,
/// which ends when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct LeadersWatch {
    rx: watch::Receiver<BTreeMap<ElectionName, Option<LeaderInfo>>>,
    _task: Arc<AbortOnDropHandle<()>>,
}

impl LeadersWatch {
    /// A copy of the current map.
    pub fn current(&self) -> BTreeMap<ElectionName, Option<LeaderInfo>> {
        self.rx.borrow().clone()
    }

    /// The current leader of `election`: `None` if nobody leads it, or if
    /// it is not known (not in the set, or its watch failed for good).
    pub fn leader(&self, election: &ElectionName) -> Option<LeaderInfo> {
        self.rx.borrow().get(election).cloned().flatten()
    }
}

impl std::ops::Deref for LeadersWatch {
    type Target = watch::Receiver<BTreeMap<ElectionName, Option<LeaderInfo>>>;
    fn deref(&self) -> &Self::Target {
        &self.rx
    }
}

impl std::ops::DerefMut for LeadersWatch {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.rx
    }
}
