//! [`StoreCalls`]: every request a store gets, by operation and outcome,
//! with its latency — counted by wrapping the store ([`Instrumented`]: the
//! core's decorator, `Layered`, with this as its layer).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use regent_core::{
    Call, CallKind, ElectionName, ErrorKind, Layered, LeaderInfo, LeaseStore, StoreError,
    StoreLayer,
};
use tokio::time::Instant;

/// One kind of store request: one of the store's calls, or an answer on
/// an open watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Operation {
    /// A call of the store (`try_acquire`, `renew`, `release`,
    /// `update_metadata`, `current_leader`, `candidates`, `watch`: a watch
    /// opened).
    Call(CallKind),
    /// One answer on an open watch (an update, or the error that broke it);
    /// counted, not timed.
    WatchUpdate,
}

impl Operation {
    /// The label value: the call's name (`try_acquire`, `renew`…), or
    /// `watch_update`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Call(kind) => kind.name(),
            Operation::WatchUpdate => "watch_update",
        }
    }
}

/// How a store request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Outcome {
    /// The store answered (a lost lease or someone else leading is an
    /// answer, not a failure).
    Ok,
    /// The store failed with this kind of error.
    Error(ErrorKind),
    /// The caller stopped waiting before the answer (a timeout, a shutdown).
    Abandoned,
}

impl Outcome {
    /// The label value: `ok`, `unavailable`, `auth`, `config`, `corrupt`,
    /// `protocol`, `abandoned`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error(ErrorKind::Unavailable) => "unavailable",
            Outcome::Error(ErrorKind::Auth) => "auth",
            Outcome::Error(ErrorKind::Config) => "config",
            Outcome::Error(ErrorKind::Corrupt) => "corrupt",
            Outcome::Error(ErrorKind::Protocol) => "protocol",
            Outcome::Error(_) => "error",
            Outcome::Abandoned => "abandoned",
        }
    }

    fn of<T>(r: &Result<T, StoreError>) -> Self {
        match r {
            Ok(_) => Outcome::Ok,
            Err(e) => Outcome::Error(e.kind()),
        }
    }
}

/// How long a request the caller stopped waiting for must have gone
/// unanswered to count as a failure of the store: a request cut short at
/// once (a term that ended, a shutdown) says nothing about the store, one
/// that waited this long for an answer does.
pub const UNANSWERED: Duration = Duration::from_secs(1);

/// The upper bounds of the latency histogram's buckets, in seconds: from
/// an embedded store's millisecond to a store that hangs past a renew
/// deadline.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A latency histogram: counts per bucket (not cumulative), the sum and
/// the count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Latency {
    /// Observations per bucket of [`LATENCY_BUCKETS`], then one for
    /// everything longer.
    pub buckets: [u64; LATENCY_BUCKETS.len() + 1],
    /// The sum of all observations, in seconds.
    pub sum: f64,
    /// The number of observations.
    pub count: u64,
}

impl Latency {
    fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[i] += 1;
        self.sum += s;
        self.count += 1;
    }

    /// `(upper bound, count in that bucket)` pairs, the last bound
    /// `f64::MAX` (`+Inf`): what `prometheus_client`'s encoder takes (it
    /// sums them into the cumulative counts of the exposition).
    pub fn per_bucket(&self) -> Vec<(f64, u64)> {
        LATENCY_BUCKETS
            .iter()
            .copied()
            .chain([f64::MAX])
            .zip(self.buckets)
            .collect()
    }
}

/// What the store's requests looked like, as counted so far.
#[derive(Clone, Debug, Default)]
pub struct CallsSnapshot {
    /// Requests by operation and outcome.
    pub counts: std::collections::BTreeMap<(Operation, Outcome), u64>,
    /// Latency by operation (answered requests only: an abandoned one has
    /// no answer to time).
    pub latency: std::collections::BTreeMap<Operation, Latency>,
    /// When the store last answered anything (monotonic clock).
    pub last_ok: Option<Instant>,
    /// Since when every request has failed, or gone unanswered for at
    /// least [`UNANSWERED`] (`None`: the last one that ended was answered).
    pub failing_since: Option<Instant>,
    /// When the last of those failures was.
    pub last_failure: Option<Instant>,
    /// The last failure, as the store described it.
    pub last_error: Option<String>,
}

/// Counts the requests a store gets. Cheap to clone: every clone counts
/// into the same numbers. Wrap the store with [`instrument`](Self::instrument)
/// and hand the [`Monitor`](crate::Monitor) a clone
/// ([`Monitor::with_store_calls`](crate::Monitor::with_store_calls)).
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_core::{CallKind, ElectionName, LeaseStore, memory::MemoryStore};
/// use regent_monitor::{Operation, Outcome, StoreCalls};
///
/// let calls = StoreCalls::new();
/// let store = calls.instrument(MemoryStore::race());
/// store.current_leader(&ElectionName::new("jobs")?).await?;
/// let seen = calls.snapshot();
/// assert_eq!(seen.counts[&(Operation::Call(CallKind::CurrentLeader), Outcome::Ok)], 1);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct StoreCalls {
    inner: Arc<Mutex<CallsSnapshot>>,
}

impl StoreCalls {
    /// Nothing counted yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// `store`, with every request counted here.
    pub fn instrument<S: LeaseStore>(&self, store: S) -> Instrumented<S> {
        Layered::new(store, self.clone())
    }

    /// Whether `other` counts into the same numbers (a clone of this).
    pub fn same(&self, other: &StoreCalls) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The numbers so far.
    pub fn snapshot(&self) -> CallsSnapshot {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CallsSnapshot> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(
        &self,
        op: Operation,
        outcome: Outcome,
        took: Option<Duration>,
        error: Option<&StoreError>,
    ) {
        let now = Instant::now();
        let mut s = self.lock();
        *s.counts.entry((op, outcome)).or_default() += 1;
        if let Some(took) = took {
            s.latency.entry(op).or_default().observe(took);
        }
        match outcome {
            Outcome::Ok => {
                s.last_ok = Some(now);
                s.failing_since = None;
            }
            Outcome::Error(_) | Outcome::Abandoned => {
                s.failing_since.get_or_insert(now);
                s.last_failure = Some(now);
                s.last_error = Some(match error {
                    Some(e) => regent_core::report(e).to_string(),
                    None => format!("a {} request got no answer in time", op.as_str()),
                });
            }
        }
    }

    /// A call of `op` its caller stopped waiting for after `waited`:
    /// counted; a failure of the store only if it waited [`UNANSWERED`] or
    /// more (cut short at once, it says nothing about the store). Not
    /// timed: there was no answer.
    fn abandoned(&self, op: Operation, waited: Duration) {
        if waited >= UNANSWERED {
            self.record(op, Outcome::Abandoned, None, None);
        } else {
            *self
                .lock()
                .counts
                .entry((op, Outcome::Abandoned))
                .or_default() += 1;
        }
    }

    /// Runs `call`, recording its outcome and latency; a call dropped
    /// before it ended is recorded as abandoned.
    async fn time<T>(
        &self,
        op: Operation,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        struct Pending<'a> {
            calls: &'a StoreCalls,
            op: Operation,
            sent: Instant,
            done: bool,
        }
        impl Drop for Pending<'_> {
            fn drop(&mut self) {
                if !self.done {
                    self.calls.abandoned(self.op, self.sent.elapsed());
                }
            }
        }
        let sent = Instant::now();
        let mut pending = Pending {
            calls: self,
            op,
            sent,
            done: false,
        };
        let r = call.await;
        pending.done = true;
        self.record(op, Outcome::of(&r), Some(sent.elapsed()), r.as_ref().err());
        r
    }
}

/// A store whose every request is counted in a [`StoreCalls`]
/// ([`StoreCalls::instrument`]). It answers exactly as the store it wraps.
pub type Instrumented<S> = Layered<S, StoreCalls>;

impl StoreLayer for StoreCalls {
    fn around<T: Send>(
        &self,
        call: Call<'_>,
        inner: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        self.time(Operation::Call(call.kind), inner)
    }

    fn watch_item(
        &self,
        _election: &ElectionName,
        item: Result<Option<LeaderInfo>, StoreError>,
    ) -> impl Future<Output = Result<Option<LeaderInfo>, StoreError>> + Send {
        self.record(
            Operation::WatchUpdate,
            Outcome::of(&item),
            None,
            item.as_ref().err(),
        );
        std::future::ready(item)
    }
}
