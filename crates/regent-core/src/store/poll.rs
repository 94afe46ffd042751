//! [`poll_watch`]: [`LeaseStore::watch`] for stores that cannot push
//! changes.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt as _};

use super::{LeaderStream, LeaseStore};
use crate::error::{ErrorKind, StoreError};
use crate::types::{ElectionName, LeaderInfo};

/// A watch for stores without notifications: reads
/// [`LeaseStore::current_leader`] every `interval` and emits only changes.
///
/// The stream follows the [`LeaderStream`] contract:
///
/// * the first item is the state read when the watch starts (that first
///   read happens in this call, so a store that cannot be read fails here);
/// * then one item per change, `None` ("no leader") included; a state read
///   again unchanged is not emitted;
/// * an error is emitted as it comes; a transient one is followed by the
///   next state read, emitted even if it equals the state before the error
///   (the consumer may have acted on the error); a permanent one ends the
///   stream.
///
/// The next read starts `interval` after the previous one ended, so a slow
/// store is never asked twice at once. After a leader is gone ("no
/// leader" emitted), the next interval is read in eighths, until a leader
/// shows: a release is usually followed by a new leader's win within a
/// candidate's own poll, and an observer would otherwise learn of it up
/// to a whole interval after the candidate did (measured on Azure Blob:
/// 11 of 30 hand-overs spent a full second at "no leader"). It costs at
/// most seven reads per hand-over. A store using this reports
/// [`WatchMode::Poll`](super::WatchMode::Poll)`(interval)` in its
/// [`StoreInfo`](super::StoreInfo).
///
/// It takes the store itself (a clone, which for every store is a cheap
/// handle on a shared connection) rather than a closure that reads the
/// leader: the watch then reads through exactly the `current_leader` the
/// candidate uses, with the same error classification and the same
/// treatment of garbage, and a store's `watch` is one line:
///
/// ```
/// # use std::time::Duration;
/// # use regent_core::{ElectionName, LeaderStream, StoreError, memory::MemoryStore};
/// # async fn watch(store: &MemoryStore, election: &ElectionName) -> Result<LeaderStream, StoreError> {
/// regent_core::store::poll_watch(store.clone(), election.clone(), Duration::from_millis(100)).await
/// # }
/// ```
///
/// No task runs between polls: the stream is driven only by its consumer,
/// and dropping it stops the watch, leaving nothing behind (a read in
/// flight is dropped with it).
///
/// # Errors
///
/// The error of the first read; [`ErrorKind::Config`] if `interval` is
/// zero.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn poll_watch<S>(
    store: S,
    election: ElectionName,
    interval: Duration,
) -> Result<LeaderStream, StoreError>
where
    S: LeaseStore + Clone,
{
    poll_watch_woken(store, election, interval, futures_util::stream::empty()).await
}

/// [`poll_watch`] that also reads at once whenever `wake` yields: for a
/// store whose server can say "this election changed" (PostgreSQL's
/// `NOTIFY`) but not how, or not reliably. Every item of `wake` is one read
/// (several pending ones are not merged: yield once per change); when
/// `wake` ends, the watch polls on alone.
///
/// ```
/// # use std::time::Duration;
/// # use regent_core::{ElectionName, LeaderStream, StoreError, memory::MemoryStore};
/// # async fn watch(store: &MemoryStore, election: &ElectionName) -> Result<LeaderStream, StoreError> {
/// let (bell, rung) = tokio::sync::mpsc::unbounded_channel::<()>();
/// let rung = futures_util::stream::unfold(rung, |mut r| async { r.recv().await.map(|()| ((), r)) });
/// let w = regent_core::store::poll_watch_woken(store.clone(), election.clone(), Duration::from_secs(1), rung).await?;
/// bell.send(()).ok(); // the next read is now, not in a second
/// # Ok(w) }
/// ```
///
/// # Errors
///
/// As [`poll_watch`].
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn poll_watch_woken<S, W>(
    store: S,
    election: ElectionName,
    interval: Duration,
    wake: W,
) -> Result<LeaderStream, StoreError>
where
    S: LeaseStore + Clone,
    W: Stream<Item = ()> + Send + 'static,
{
    if interval.is_zero() {
        return Err(StoreError::new(
            ErrorKind::Config,
            format!(
                "{} store: the poll interval of the watch on election '{election}' must be greater than zero",
                store.info().name
            ),
        ));
    }
    let first = store.current_leader(&election).await?;
    let state = Poll {
        store,
        election,
        interval,
        wake: Some(Box::pin(wake)),
        first: Some(first),
        last: None,
        soon: 0,
        done: false,
    };
    Ok(Box::pin(futures_util::stream::unfold(state, Poll::next)))
}

/// The state of a polling watch between items.
struct Poll<S> {
    store: S,
    election: ElectionName,
    interval: Duration,
    /// What reads before the interval is up; `None` once it ended.
    wake: Option<Pin<Box<dyn Stream<Item = ()> + Send>>>,
    /// The state read when the watch started, not yet emitted.
    first: Option<Option<LeaderInfo>>,
    /// The last state emitted; `None` after an error, so that the state
    /// after an error is emitted again.
    last: Option<Option<LeaderInfo>>,
    /// Reads left at an eighth of the interval, after a leader went (see
    /// [`poll_watch`]).
    soon: u32,
    /// A permanent error was emitted: the stream ends.
    done: bool,
}

type PollItem = Result<Option<LeaderInfo>, StoreError>;

/// The reads at an eighth of the interval after a leader went.
const SOON_READS: u32 = 7;

impl<S: LeaseStore> Poll<S> {
    async fn next(mut self) -> Option<(PollItem, Self)> {
        if let Some(first) = self.first.take() {
            self.last = Some(first.clone());
            return Some((Ok(first), self));
        }
        if self.done {
            return None;
        }
        loop {
            self.pause().await;
            match self.store.current_leader(&self.election).await {
                Ok(leader) if self.last.as_ref() == Some(&leader) => {}
                Ok(leader) => {
                    let went = leader.is_none() && matches!(self.last, Some(Some(_)));
                    self.soon = if went { SOON_READS } else { 0 };
                    self.last = Some(leader.clone());
                    return Some((Ok(leader), self));
                }
                Err(e) => {
                    self.last = None;
                    self.done = !e.is_transient();
                    return Some((Err(e), self));
                }
            }
        }
    }
}

impl<S> Poll<S> {
    /// Until the interval is up, or `wake` yields.
    async fn pause(&mut self) {
        let pause = if self.soon > 0 {
            self.soon -= 1;
            self.interval / (SOON_READS + 1)
        } else {
            self.interval
        };
        let tick = tokio::time::sleep(pause);
        tokio::pin!(tick);
        if let Some(wake) = &mut self.wake {
            tokio::select! {
                () = &mut tick => return,
                rung = wake.next() => match rung {
                    Some(()) => return,
                    None => self.wake = None,
                },
            }
        }
        tick.await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures_util::StreamExt;
    use tokio::time::Instant;

    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::{Acquire, AcquireRequest};
    use crate::testing::{Counting, Layered};
    use crate::types::{HolderId, Lease, Metadata};

    const EVERY: Duration = Duration::from_millis(100);

    fn election() -> ElectionName {
        ElectionName::new("e").unwrap()
    }

    fn req(holder: &str, ttl: Duration) -> AcquireRequest {
        AcquireRequest {
            election: election(),
            holder: HolderId::new(holder).unwrap(),
            ttl,
            metadata: Metadata::new(),
        }
    }

    async fn win(store: &MemoryStore, holder: &str, ttl: Duration) -> Lease {
        match store.try_acquire(&req(holder, ttl), None).await.unwrap() {
            Acquire::Won(lease) => lease,
            other => panic!("{holder} should have won: {other:?}"),
        }
    }

    fn holder_of(item: PollItem) -> Option<String> {
        item.expect("a state, not an error")
            .map(|l| l.holder.as_str().to_owned())
    }

    /// Nothing more is emitted for `span`.
    async fn quiet(w: &mut LeaderStream, span: Duration) {
        if let Ok(item) = tokio::time::timeout(span, w.next()).await {
            panic!("expected no item for {span:?}, got {item:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn emits_the_first_state_then_only_changes_including_no_leader() {
        let store = MemoryStore::race();
        let mut w = poll_watch(store.clone(), election(), EVERY).await.unwrap();
        assert_eq!(holder_of(w.next().await.unwrap()), None, "first state");
        quiet(&mut w, EVERY * 10).await;

        let a = win(&store, "a", Duration::from_secs(60)).await;
        let seen_at = Instant::now();
        assert_eq!(holder_of(w.next().await.unwrap()).as_deref(), Some("a"));
        assert!(seen_at.elapsed() <= EVERY, "seen within one interval");
        quiet(&mut w, EVERY * 10).await;

        store.release(&a).await.unwrap();
        assert_eq!(holder_of(w.next().await.unwrap()), None, "no leader");
        quiet(&mut w, EVERY * 10).await;
    }

    /// Once the leader is gone, the next leader is seen soon after it
    /// wins, not at the next full interval; then the reads are back at the
    /// interval.
    #[tokio::test(start_paused = true)]
    async fn after_no_leader_the_next_leader_is_seen_soon() {
        let store = Layered::new(MemoryStore::race(), Counting::default());
        let every = Duration::from_secs(1);
        let a = match store
            .try_acquire(&req("a", Duration::from_secs(60)), None)
            .await
            .unwrap()
        {
            Acquire::Won(lease) => lease,
            other => panic!("{other:?}"),
        };
        let mut w = poll_watch(store.clone(), election(), every).await.unwrap();
        assert_eq!(holder_of(w.next().await.unwrap()).as_deref(), Some("a"));
        store.release(&a).await.unwrap();
        assert_eq!(holder_of(w.next().await.unwrap()), None);
        tokio::time::sleep(Duration::from_millis(300)).await;
        store
            .try_acquire(&req("b", Duration::from_secs(60)), None)
            .await
            .unwrap();
        let won = Instant::now();
        assert_eq!(holder_of(w.next().await.unwrap()).as_deref(), Some("b"));
        let lag = won.elapsed();
        assert!(lag <= every / 8, "b seen {lag:?} after its win");
        // A leader again: back to one read per interval.
        let reads = store.layer().counts().current_leader;
        quiet(&mut w, every * 5).await;
        let more = store.layer().counts().current_leader - reads;
        assert!(more <= 5, "{more} reads in five intervals");
    }

    #[tokio::test(start_paused = true)]
    async fn sees_expiry_without_any_call() {
        let store = MemoryStore::race();
        let ttl = Duration::from_secs(2);
        win(&store, "a", ttl).await;
        let start = Instant::now();
        let mut w = poll_watch(store.clone(), election(), EVERY).await.unwrap();
        assert_eq!(holder_of(w.next().await.unwrap()).as_deref(), Some("a"));
        assert_eq!(holder_of(w.next().await.unwrap()), None);
        let after = start.elapsed();
        assert!(
            after >= ttl && after <= ttl + EVERY,
            "expiry seen after {after:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_error_is_followed_by_the_state_again() {
        let store = MemoryStore::race();
        win(&store, "a", Duration::from_secs(60)).await;
        let mut w = poll_watch(store.clone(), election(), EVERY).await.unwrap();
        assert_eq!(holder_of(w.next().await.unwrap()).as_deref(), Some("a"));
        store.fail_next(1);
        let err = w.next().await.unwrap().expect_err("the injected failure");
        assert!(err.is_transient(), "{err}");
        // Unchanged, but emitted again: the consumer may have acted on the
        // error.
        assert_eq!(holder_of(w.next().await.unwrap()).as_deref(), Some("a"));
        quiet(&mut w, EVERY * 10).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_error_ends_the_stream() {
        let store = MemoryStore::race();
        let mut w = poll_watch(store.clone(), election(), EVERY).await.unwrap();
        assert_eq!(holder_of(w.next().await.unwrap()), None);
        store.put_garbage(&election());
        let err = w.next().await.unwrap().expect_err("garbage");
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert!(w.next().await.is_none(), "the stream ends");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_first_read_fails_the_call() {
        let store = MemoryStore::race();
        store.put_garbage(&election());
        let err = poll_watch(store, election(), EVERY).await.err().unwrap();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_reads_at_once_and_an_ended_one_leaves_the_poll() {
        let store = MemoryStore::race();
        let (bell, rung) = tokio::sync::mpsc::unbounded_channel::<()>();
        let rung =
            futures_util::stream::unfold(rung, |mut r| async { r.recv().await.map(|()| ((), r)) });
        let long = Duration::from_secs(3600);
        let mut w = poll_watch_woken(store.clone(), election(), long, rung)
            .await
            .unwrap();
        assert_eq!(holder_of(w.next().await.unwrap()), None);
        win(&store, "a", Duration::from_secs(60)).await;
        let start = Instant::now();
        bell.send(()).unwrap();
        assert_eq!(holder_of(w.next().await.unwrap()).as_deref(), Some("a"));
        assert_eq!(start.elapsed(), Duration::ZERO, "read at the wake-up");
        // The bell gone, the interval alone wakes the watch.
        drop(bell);
        store.delete_records(&election());
        let start = Instant::now();
        assert_eq!(holder_of(w.next().await.unwrap()), None);
        assert_eq!(start.elapsed(), long);
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_interval_is_refused() {
        let err = poll_watch(MemoryStore::race(), election(), Duration::ZERO)
            .await
            .err()
            .unwrap();
        assert_eq!(err.kind(), ErrorKind::Config);
        assert!(err.to_string().contains("poll interval"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn reads_once_per_interval_and_dropping_the_stream_stops_reading() {
        // Clones share the count, so the test sees whether anything still
        // reads.
        let store = Layered::new(MemoryStore::race(), Counting::new());
        let reads = || store.layer().counts().current_leader;
        let mut w = poll_watch(store.clone(), election(), EVERY).await.unwrap();
        assert_eq!(reads(), 1, "the first read");
        assert_eq!(holder_of(w.next().await.unwrap()), None);
        quiet(&mut w, EVERY * 10 + EVERY / 2).await;
        assert_eq!(reads(), 11, "one read per interval");

        drop(w);
        assert_eq!(
            Arc::strong_count(store.layer()),
            1,
            "nothing holds the store after the stream is dropped"
        );
        tokio::time::sleep(EVERY * 10).await;
        assert_eq!(reads(), 11, "no read after drop");
    }
}
