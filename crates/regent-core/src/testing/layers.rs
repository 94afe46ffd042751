//! Ready-made [`StoreLayer`]s: [`Counting`] counts every call and watch
//! item, [`Latency`] delays calls on their way out and back, [`Faults`]
//! fails calls or loses their answers. They do for any store what the
//! memory store does for itself ([`MemoryStore::stats`],
//! [`set_request_delay`], [`fail_next`], [`lose_next_replies`],
//! [`partition`]).
//!
//! [`MemoryStore::stats`]: crate::memory::MemoryStore::stats
//! [`set_request_delay`]: crate::memory::MemoryStore::set_request_delay
//! [`fail_next`]: crate::memory::MemoryStore::fail_next
//! [`lose_next_replies`]: crate::memory::MemoryStore::lose_next_replies
//! [`partition`]: crate::memory::MemoryStore::partition

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::error::StoreError;
use crate::layer::{Call, CallKind, StoreLayer};
use crate::store::memory::LostReply;
use crate::types::{ElectionName, HolderId, LeaderInfo};

/// Counts the calls made through it, by kind, and the items its watches
/// delivered. A call counts when it starts (when its future is first
/// polled), failed or not.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use regent_core::memory::{LostReply, MemoryStore};
/// use regent_core::testing::{CallKind, Counting, Faults, Latency, Layered};
/// use regent_core::{AcquireRequest, ElectionName, HolderId, LeaseStore, Metadata};
///
/// // A store whose acquires take 300 ms to arrive, seen through a fault
/// // injector, with every call counted as the caller makes it.
/// let slow = Latency::new().request(CallKind::TryAcquire, Duration::from_millis(300));
/// let faulty = Layered::new(Layered::new(MemoryStore::race(), slow), Faults::new());
/// let store = Layered::new(faulty, Counting::new());
///
/// let election = ElectionName::new("jobs")?;
/// let req = AcquireRequest {
///     election: election.clone(),
///     holder: HolderId::new("a")?,
///     ttl: Duration::from_secs(10),
///     metadata: Metadata::new(),
/// };
/// // The store applies the acquire, but its answer is lost on the way back.
/// store.inner().layer().lose_next_replies(1, LostReply::Fail);
/// let sent = tokio::time::Instant::now();
/// assert!(store.try_acquire(&req, None).await.unwrap_err().is_transient());
/// assert_eq!(sent.elapsed(), Duration::from_millis(300));
/// let leader = store.current_leader(&election).await?.expect("the acquire won");
/// assert_eq!(leader.holder.as_str(), "a");
///
/// let counts = store.layer().counts();
/// assert_eq!((counts.try_acquire, counts.current_leader), (1, 1));
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct Counting {
    calls: [AtomicU64; CallKind::ALL.len()],
    watch_items: AtomicU64,
}

/// A snapshot of a [`Counting`] layer's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallCounts {
    /// `try_acquire` calls.
    pub try_acquire: u64,
    /// `renew` calls.
    pub renew: u64,
    /// `release` calls.
    pub release: u64,
    /// `update_metadata` calls.
    pub update_metadata: u64,
    /// `current_leader` calls.
    pub current_leader: u64,
    /// `candidates` calls.
    pub candidates: u64,
    /// Watches opened (or tried).
    pub watch: u64,
    /// `enroll` calls.
    pub enroll: u64,
    /// `withdraw` calls.
    pub withdraw: u64,
    /// `release_to` calls.
    pub release_to: u64,
    /// Items the watches delivered: states, changes and errors.
    pub watch_items: u64,
}

impl CallCounts {
    /// The calls of `kind`.
    pub fn of(&self, kind: CallKind) -> u64 {
        match kind {
            CallKind::TryAcquire => self.try_acquire,
            CallKind::Renew => self.renew,
            CallKind::Release => self.release,
            CallKind::UpdateMetadata => self.update_metadata,
            CallKind::CurrentLeader => self.current_leader,
            CallKind::Candidates => self.candidates,
            CallKind::Watch => self.watch,
            CallKind::Enroll => self.enroll,
            CallKind::Withdraw => self.withdraw,
            CallKind::ReleaseTo => self.release_to,
        }
    }

    /// Every call, of every kind (the watches' items are not calls).
    pub fn calls(&self) -> u64 {
        CallKind::ALL.iter().map(|k| self.of(*k)).sum()
    }
}

impl Counting {
    /// Nothing counted yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counts now.
    pub fn counts(&self) -> CallCounts {
        let get = |kind: CallKind| self.calls[kind.index()].load(Ordering::Relaxed);
        CallCounts {
            try_acquire: get(CallKind::TryAcquire),
            renew: get(CallKind::Renew),
            release: get(CallKind::Release),
            update_metadata: get(CallKind::UpdateMetadata),
            current_leader: get(CallKind::CurrentLeader),
            candidates: get(CallKind::Candidates),
            watch: get(CallKind::Watch),
            enroll: get(CallKind::Enroll),
            withdraw: get(CallKind::Withdraw),
            release_to: get(CallKind::ReleaseTo),
            watch_items: self.watch_items.load(Ordering::Relaxed),
        }
    }
}

impl StoreLayer for Counting {
    async fn around<T: Send>(
        &self,
        call: Call<'_>,
        inner: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> Result<T, StoreError> {
        self.calls[call.kind.index()].fetch_add(1, Ordering::Relaxed);
        inner.await
    }

    async fn watch_item(
        &self,
        _: &ElectionName,
        item: Result<Option<LeaderInfo>, StoreError>,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.watch_items.fetch_add(1, Ordering::Relaxed);
        item
    }
}

/// Delays calls: a request delay before the call reaches the store, a
/// reply delay after the store answered, each set per [`CallKind`]
/// (default none). Watch items are not delayed.
///
/// ```
/// use std::time::Duration;
/// use regent_core::testing::{CallKind, Latency};
///
/// // Acquires arrive 700 ms late; renewals take 5 s to answer.
/// let slow = Latency::new()
///     .request(CallKind::TryAcquire, Duration::from_millis(700))
///     .reply(CallKind::Renew, Duration::from_secs(5));
/// # let _ = slow;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Latency {
    request: [Duration; CallKind::ALL.len()],
    reply: [Duration; CallKind::ALL.len()],
}

impl Latency {
    /// No delay.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call of every kind waits `request` before it leaves and
    /// `reply` after the store answered.
    pub fn every_call(request: Duration, reply: Duration) -> Self {
        Self {
            request: [request; CallKind::ALL.len()],
            reply: [reply; CallKind::ALL.len()],
        }
    }

    /// Calls of `kind` wait `delay` before they reach the store.
    #[must_use]
    pub fn request(mut self, kind: CallKind, delay: Duration) -> Self {
        self.request[kind.index()] = delay;
        self
    }

    /// Answers to calls of `kind` come back `delay` after the store gave
    /// them.
    #[must_use]
    pub fn reply(mut self, kind: CallKind, delay: Duration) -> Self {
        self.reply[kind.index()] = delay;
        self
    }
}

impl StoreLayer for Latency {
    async fn around<T: Send>(
        &self,
        call: Call<'_>,
        inner: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> Result<T, StoreError> {
        let (request, reply) = (
            self.request[call.kind.index()],
            self.reply[call.kind.index()],
        );
        if !request.is_zero() {
            tokio::time::sleep(request).await;
        }
        let answer = inner.await;
        if !reply.is_zero() {
            tokio::time::sleep(reply).await;
        }
        answer
    }
}

/// Fails calls before they reach the store, or loses the answers of calls
/// the store applied: a real store's outage and lost replies, on demand.
/// Set from the test while the store is in use (through
/// [`Layered::layer`](super::Layered::layer)).
#[derive(Debug, Default)]
pub struct Faults {
    plan: Mutex<Plan>,
}

#[derive(Debug, Default)]
struct Plan {
    fail_next: u32,
    lose_next: u32,
    lost_reply: Option<LostReply>,
    partitioned: HashSet<HolderId>,
}

impl Faults {
    /// No fault planned.
    pub fn new() -> Self {
        Self::default()
    }

    fn plan(&self) -> MutexGuard<'_, Plan> {
        // Every change of the plan is one step: a panic cannot leave it
        // half made.
        self.plan
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fails the next `n` calls (of any kind) as unavailable, before they
    /// reach the store.
    pub fn fail_next(&self, n: u32) {
        self.plan().fail_next = n;
    }

    /// Loses the answers of the next `n` calls that the store answered
    /// with success: each took effect, but its caller hears an error or
    /// nothing, as `lost` says. A call that failed is not counted.
    pub fn lose_next_replies(&self, n: u32, lost: LostReply) {
        let mut plan = self.plan();
        plan.lose_next = n;
        plan.lost_reply = Some(lost);
    }

    /// Cuts `holder` off: its acquire, renew, metadata update and release
    /// fail as unavailable, before they reach the store, until
    /// [`heal`](Self::heal).
    pub fn partition(&self, holder: &HolderId) {
        self.plan().partitioned.insert(holder.clone());
    }

    /// Ends a [`partition`](Self::partition) of `holder`.
    pub fn heal(&self, holder: &HolderId) {
        self.plan().partitioned.remove(holder);
    }
}

impl StoreLayer for Faults {
    async fn around<T: Send>(
        &self,
        call: Call<'_>,
        inner: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> Result<T, StoreError> {
        let fail = {
            let mut plan = self.plan();
            let mut fail = call.holder.is_some_and(|h| plan.partitioned.contains(h));
            if plan.fail_next > 0 {
                plan.fail_next -= 1;
                fail = true;
            }
            fail
        };
        if fail {
            return Err(StoreError::unavailable(format!(
                "injected failure of {} for election '{}'",
                call.kind, call.election
            )));
        }
        let answer = inner.await?;
        let lost = {
            let mut plan = self.plan();
            (plan.lose_next > 0).then(|| {
                plan.lose_next -= 1;
                plan.lost_reply.unwrap_or(LostReply::Fail)
            })
        };
        match lost {
            None => Ok(answer),
            Some(LostReply::Hang) => std::future::pending().await,
            Some(LostReply::Fail) => Err(StoreError::unavailable(format!(
                "injected loss of the answer to {} for election '{}' (the store applied it)",
                call.kind, call.election
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::StreamExt;
    use tokio::time::Instant;

    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::{Acquire, AcquireRequest, LeaseStore, Renewal};
    use crate::testing::Layered;
    use crate::types::{HolderId, Lease, Metadata};

    fn jobs() -> ElectionName {
        ElectionName::new("jobs").unwrap()
    }

    fn req(holder: &str) -> AcquireRequest {
        AcquireRequest {
            election: jobs(),
            holder: HolderId::new(holder).unwrap(),
            ttl: Duration::from_secs(10),
            metadata: Metadata::new(),
        }
    }

    async fn win<S: LeaseStore>(store: &S, holder: &str) -> Lease {
        match store.try_acquire(&req(holder), None).await.unwrap() {
            Acquire::Won(lease) => lease,
            other => panic!("{holder} should have won: {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn counting_counts_each_call_by_kind_and_each_watch_item() {
        let store = Layered::new(MemoryStore::race(), Counting::new());
        let mut w = store.watch(&jobs()).await.unwrap();
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        let a = win(&store, "a").await;
        assert!(w.next().await.unwrap().unwrap().is_some());
        store.renew(&a).await.unwrap();
        store.update_metadata(&a, &Metadata::new()).await.unwrap();
        store.current_leader(&jobs()).await.unwrap();
        store.candidates(&jobs()).await.unwrap();
        store.release(&a).await.unwrap();
        let req = AcquireRequest {
            election: jobs(),
            holder: HolderId::new("b").unwrap(),
            ttl: Duration::from_secs(2),
            metadata: Metadata::new(),
        };
        store.enroll(&req).await.unwrap();
        store.withdraw(&req.election, &req.holder).await.unwrap();
        let b = win(&store, "b").await;
        store
            .release_to(&b, &req.holder, Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(
            store.layer().counts(),
            CallCounts {
                try_acquire: 2,
                renew: 1,
                release: 1,
                update_metadata: 1,
                current_leader: 1,
                candidates: 1,
                watch: 1,
                enroll: 1,
                withdraw: 1,
                release_to: 1,
                watch_items: 2,
            }
        );
        assert_eq!(store.layer().counts().calls(), 11);
    }

    #[tokio::test(start_paused = true)]
    async fn latency_delays_the_kinds_set_on_the_way_out_and_back() {
        let slow = Latency::new()
            .request(CallKind::TryAcquire, Duration::from_millis(300))
            .reply(CallKind::TryAcquire, Duration::from_millis(200))
            .reply(CallKind::Renew, Duration::from_secs(1));
        let store = Layered::new(MemoryStore::race(), slow);
        let sent = Instant::now();
        let a = win(&store, "a").await;
        assert_eq!(sent.elapsed(), Duration::from_millis(500));
        // The store applied the acquire on the way: 300 ms after the send.
        let expires = store.inner().leader_expires_at(&jobs()).unwrap();
        assert_eq!(expires - sent, Duration::from_millis(10_300));
        let sent = Instant::now();
        store.renew(&a).await.unwrap();
        assert_eq!(sent.elapsed(), Duration::from_secs(1));
        let sent = Instant::now();
        store.release(&a).await.unwrap();
        assert_eq!(sent.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_call_never_reaches_the_store() {
        let store = Layered::new(MemoryStore::race(), Faults::new());
        store.layer().fail_next(2);
        for _ in 0..2 {
            let err = store.try_acquire(&req("a"), None).await.unwrap_err();
            assert!(err.is_transient(), "{err}");
        }
        assert_eq!(store.inner().stats().acquires, 0);
        win(&store, "a").await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_partition_fails_only_the_holder_s_own_calls() {
        let store = Layered::new(MemoryStore::race(), Faults::new());
        let a = win(&store, "a").await;
        store.layer().partition(&a.holder);
        assert!(store.renew(&a).await.unwrap_err().is_transient());
        assert!(store.release(&a).await.unwrap_err().is_transient());
        // Reads and other holders get through.
        assert!(store.current_leader(&jobs()).await.unwrap().is_some());
        assert!(matches!(
            store.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Held { .. }
        ));
        store.layer().heal(&a.holder);
        assert_eq!(store.renew(&a).await.unwrap(), Renewal::Renewed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_reply_fails_or_hangs_but_the_call_took_effect() {
        let store = Layered::new(MemoryStore::race(), Faults::new());
        store.layer().lose_next_replies(1, LostReply::Fail);
        assert!(
            store
                .try_acquire(&req("a"), None)
                .await
                .unwrap_err()
                .is_transient()
        );
        let leader = store.current_leader(&jobs()).await.unwrap().unwrap();
        assert_eq!(leader.holder.as_str(), "a");

        store.inner().delete_records(&jobs());
        store.layer().lose_next_replies(1, LostReply::Hang);
        let hung =
            tokio::time::timeout(Duration::from_secs(1), store.try_acquire(&req("b"), None)).await;
        assert!(hung.is_err(), "a hung answer never comes: {hung:?}");
        let leader = store.current_leader(&jobs()).await.unwrap().unwrap();
        assert_eq!(leader.holder.as_str(), "b");
    }

    #[tokio::test(start_paused = true)]
    async fn failed_calls_do_not_use_up_lost_replies() {
        let store = Layered::new(MemoryStore::race(), Faults::new());
        store.layer().lose_next_replies(1, LostReply::Fail);
        store.inner().put_garbage(&jobs());
        assert!(
            !store
                .try_acquire(&req("a"), None)
                .await
                .unwrap_err()
                .is_transient()
        );
        store.inner().delete_records(&jobs());
        // The first call the store applies loses its answer.
        assert!(
            store
                .try_acquire(&req("a"), None)
                .await
                .unwrap_err()
                .is_transient()
        );
        let leader = store.current_leader(&jobs()).await.unwrap().unwrap();
        assert_eq!(leader.holder.as_str(), "a");
    }
}
