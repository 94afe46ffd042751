//! [`Observer`]: for instances that never campaign but need to know who
//! leads (to forward requests to it, to show it).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::backoff::Backoff;
use crate::error::StoreError;
use crate::store::{LeaderStream, LeaseStore};
use crate::types::{ElectionName, LeaderInfo};

/// Reads and follows the leader of one election without campaigning.
///
/// Three ways to follow, by taste:
///
/// * [`leader_watch`](Self::leader_watch): a `tokio::sync::watch::Receiver`
///   holding the current leader, for code that asks "who leads now?" (to
///   forward requests) and sometimes waits for a change;
/// * [`changes`](Self::changes): every change as a stream (`Unpin`, with
///   an inherent [`next`](LeaderChanges::next), so no extra crate is
///   needed), errors included;
/// * [`on_new_leader`](Self::on_new_leader): a callback per change, as
///   client-go's `OnNewLeader`.
///
/// For a set of elections (shards), [`ObserverSet`](crate::ObserverSet)
/// does the same with one value, every item naming its election.
///
/// # What it names, and when
///
/// The leader the store names, which is not always the leader whose task
/// runs:
///
/// * **Race stores** (SQLite, Consul, Azure Blob, PostgreSQL): the
///   candidate whose acquire won, from the moment the store holds its
///   record — about when that candidate learns it leads, and before its
///   task has started.
/// * **Queue stores** (etcd, ZooKeeper): the first in line as soon as it
///   is first, a moment *before* its candidate has learned it leads (on
///   etcd, 25–50 ms before the tasks of 50 shards ran, in a user's test).
/// * **During a graceful hand-over**, "no leader" between the old
///   leader's release and the new one's win (milliseconds).
/// * **After a crash**, the dead leader until its lease expires (about
///   the ttl) or something gives the lease back (`regent run`'s
///   supervisor, the library's crash guardian).
///
/// It learns of a change when the store tells it: at once on stores that
/// push changes (etcd, Consul, ZooKeeper, PostgreSQL's `LISTEN`), at the
/// next poll on the others; SQLite rings a wake-up bell on every release
/// and won acquire, so observers on the same host learn at once too.
/// What it names is a report, as [`Status::is_leader`](crate::Status::is_leader)
/// is: it proves nothing. The fencing token is what a resource checks.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_core::{ElectionName, Observer, memory::MemoryStore};
///
/// let store = MemoryStore::race();
/// let observer = Observer::new(store.clone(), ElectionName::new("billing")?);
///
/// // Who leads now, kept current in the background.
/// let leader = observer.leader_watch().await?;
/// assert!(leader.borrow().is_none());
///
/// // Every change, one at a time.
/// let mut changes = observer.changes();
/// assert_eq!(changes.next().await.transpose()?, Some(None));
///
/// // A callback per change, until the store fails for good.
/// // (Dropping the handle stops the callbacks.)
/// let callbacks = observer.on_new_leader(|leader| match leader {
///     Some(l) => println!("new leader: {} (token {})", l.holder, l.token),
///     None => println!("no leader"),
/// });
/// # drop(callbacks);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Observer<S> {
    store: Arc<S>,
    election: ElectionName,
    max_backoff: Duration,
}

impl<S> Clone for Observer<S> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            election: self.election.clone(),
            max_backoff: self.max_backoff,
        }
    }
}

struct Follow<S> {
    store: Arc<S>,
    election: ElectionName,
    stream: Option<LeaderStream>,
    last: Option<Option<LeaderInfo>>,
    backoff: Backoff,
    delay: Option<Duration>,
    done: bool,
}

impl<S: LeaseStore> Observer<S> {
    /// An observer of `election` on `store`.
    pub fn new(store: S, election: ElectionName) -> Self {
        Self {
            store: Arc::new(store),
            election,
            max_backoff: Duration::from_secs(5),
        }
    }

    /// The longest wait between attempts to re-open a failed watch (default
    /// 5 s; at least 1 ms: a shorter one is taken as 1 ms).
    #[must_use]
    pub fn max_backoff(mut self, max: Duration) -> Self {
        self.max_backoff = max.max(Duration::from_millis(1));
        self
    }

    /// The election observed.
    pub fn election(&self) -> &ElectionName {
        &self.election
    }

    /// Who leads now (`None`: nobody).
    ///
    /// # Errors
    ///
    /// The store's error, classified.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn current(&self) -> Result<Option<LeaderInfo>, StoreError> {
        self.store.current_leader(&self.election).await
    }

    /// The leader now, then every change, `None` meaning "no leader".
    /// Repeats are filtered out; a leader that publishes new metadata is a
    /// change. A watch that fails with a transient error yields that error
    /// and is re-opened after a backoff; a permanent error is yielded and
    /// ends the stream.
    pub fn changes(&self) -> LeaderChanges {
        let state = Follow {
            store: self.store.clone(),
            election: self.election.clone(),
            stream: None,
            last: None,
            backoff: Backoff::new(Duration::from_millis(50), self.max_backoff),
            delay: None,
            done: false,
        };
        let stream = futures_util::stream::unfold(state, |mut st| async move {
            loop {
                if st.done {
                    return None;
                }
                if let Some(d) = st.delay.take() {
                    tokio::time::sleep(d).await;
                }
                let stream = match st.stream.as_mut() {
                    Some(s) => s,
                    None => match st.store.watch(&st.election).await {
                        Ok(s) => st.stream.insert(s),
                        Err(e) => {
                            st.fail(&e);
                            return Some((Err(e), st));
                        }
                    },
                };
                match stream.next().await {
                    Some(Ok(leader)) => {
                        st.backoff.reset();
                        if st.last.as_ref() != Some(&leader) {
                            st.last = Some(leader.clone());
                            return Some((Ok(leader), st));
                        }
                    }
                    Some(Err(e)) => {
                        st.stream = None;
                        st.fail(&e);
                        return Some((Err(e), st));
                    }
                    None => {
                        // The store closed the watch; re-open, but not in a
                        // hot loop if it keeps doing so.
                        st.stream = None;
                        st.delay = Some(st.backoff.next_delay());
                    }
                }
            }
        });
        LeaderChanges {
            inner: Box::pin(stream),
        }
    }

    /// The current leader (`None`: nobody), kept up to date by a background
    /// task that lives as long as the returned [`LeaderWatch`] (or a clone
    /// of it). Returns once the first answer is in, so the value is never
    /// a guess. The watch dereferences to a `tokio::sync::watch::Receiver`:
    /// `borrow()` reads, `changed().await` waits.
    ///
    /// Transient store errors are logged and retried (the value then stays
    /// the last one known); a permanent error is logged and ends the task,
    /// after which `changed()` returns an error. Use
    /// [`changes`](Self::changes) to handle errors yourself.
    ///
    /// # Errors
    ///
    /// The store's error if the first read fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is started until the first answer is in.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub async fn leader_watch(&self) -> Result<LeaderWatch, StoreError> {
        let mut changes = self.changes();
        let first = match changes.next().await {
            Some(first) => first?,
            None => unreachable!("the stream ends only after a permanent error"),
        };
        let (tx, rx) = watch::channel(first);
        let election = self.election.clone();
        let task = tokio::spawn(async move {
            loop {
                let item = tokio::select! {
                    () = tx.closed() => return,
                    item = changes.next() => item,
                };
                match item {
                    Some(Ok(leader)) => {
                        tx.send_replace(leader);
                    }
                    Some(Err(e)) if e.is_transient() => {
                        crate::repeats::log_watch_failure(&election, &e);
                    }
                    Some(Err(e)) => {
                        tracing::error!(%election, error = %crate::report(&e), "watching the leader failed for good");
                        return;
                    }
                    None => return,
                }
            }
        });
        Ok(LeaderWatch {
            rx,
            _task: Arc::new(tokio_util::task::AbortOnDropHandle::new(task)),
        })
    }

    /// Calls `on_change` with the leader now and then on every change
    /// (`None`: nobody leads), in a background task: what client-go's
    /// `OnNewLeader` callback is. Transient errors are logged and retried;
    /// the task ends with the permanent error that stops it. The task lives
    /// as long as the returned handle: dropping it stops the callbacks
    /// (await it to learn the error).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn on_new_leader<F>(
        &self,
        mut on_change: F,
    ) -> tokio_util::task::AbortOnDropHandle<StoreError>
    where
        F: FnMut(Option<&LeaderInfo>) + Send + 'static,
    {
        let mut changes = self.changes();
        let election = self.election.clone();
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            loop {
                match changes.next().await {
                    Some(Ok(leader)) => on_change(leader.as_ref()),
                    Some(Err(e)) if e.is_transient() => {
                        crate::repeats::log_watch_failure(&election, &e);
                    }
                    Some(Err(e)) => return e,
                    None => {
                        return StoreError::new(
                            crate::ErrorKind::Protocol,
                            format!("the watch of election '{election}' ended without an error"),
                        );
                    }
                }
            }
        }))
    }
}

/// The current leader of one election ([`Observer::leader_watch`]): a
/// `tokio::sync::watch::Receiver` (through `Deref`), and the background task
/// that keeps it current, which ends when the last clone is dropped.
#[derive(Clone, Debug)]
pub struct LeaderWatch {
    rx: watch::Receiver<Option<LeaderInfo>>,
    _task: Arc<tokio_util::task::AbortOnDropHandle<()>>,
}

impl LeaderWatch {
    /// A copy of the current leader.
    pub fn current(&self) -> Option<LeaderInfo> {
        self.rx.borrow().clone()
    }
}

impl std::ops::Deref for LeaderWatch {
    type Target = watch::Receiver<Option<LeaderInfo>>;
    fn deref(&self) -> &Self::Target {
        &self.rx
    }
}

impl std::ops::DerefMut for LeaderWatch {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.rx
    }
}

/// The leader changes of one election ([`Observer::changes`]): a
/// [`Stream`] that is `Unpin`, with an inherent [`next`](Self::next).
pub struct LeaderChanges {
    inner: Pin<Box<dyn Stream<Item = Result<Option<LeaderInfo>, StoreError>> + Send>>,
}

impl fmt::Debug for LeaderChanges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderChanges").finish_non_exhaustive()
    }
}

impl LeaderChanges {
    /// The next change: `Some(Ok(None))` means nobody leads; `None` means
    /// the stream ended after a permanent error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a change not yet returned is returned by the next call.
    pub async fn next(&mut self) -> Option<Result<Option<LeaderInfo>, StoreError>> {
        futures_util::StreamExt::next(&mut self.inner).await
    }
}

impl Stream for LeaderChanges {
    type Item = Result<Option<LeaderInfo>, StoreError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl<S> Follow<S> {
    fn fail(&mut self, e: &StoreError) {
        if e.is_transient() {
            self.delay = Some(self.backoff.next_delay());
        } else {
            self.done = true;
        }
    }
}
