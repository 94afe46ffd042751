//! An in-process store with fault injection, for testing the core and code
//! built on it. **Not** for production: it lives in one process's memory
//! ([`SafetyClass::Ephemeral`](crate::SafetyClass::Ephemeral)).
//!
//! It runs on tokio's clock, so tests on paused time
//! (`#[tokio::test(start_paused = true)]`) see leases expire the instant time
//! reaches them. It draws nothing at random and wakes its watches in the
//! order they began to wait, so a seeded simulation on a current-thread
//! runtime replays exactly. It behaves as either style of store
//! ([`StoreStyle::Race`] or [`StoreStyle::Queue`]), so the core is proven
//! against both before any real store exists.
//!
//! Faults it can inject:
//! * a delay before each request is applied and before each reply returns
//!   ([`MemoryStore::set_request_delay`], [`MemoryStore::set_reply_delay`]);
//! * failing the next N calls as unavailable ([`MemoryStore::fail_next`]);
//! * losing the answers of the next N calls it applies: the call took
//!   effect but its caller hears an error, or nothing at all
//!   ([`MemoryStore::lose_next_replies`]);
//! * partitioning one holder: its acquire, renew, metadata update and
//!   release fail ([`MemoryStore::partition`]);
//! * holding expiry: no lease expires while held
//!   ([`MemoryStore::hold_expiry`]);
//! * a clock that runs faster or slower than its callers': leases expire
//!   sooner or later than their ttl by tokio's clock
//!   ([`MemoryStore::set_clock_drift`]);
//! * deleting an election's records from outside
//!   ([`MemoryStore::delete_records`]) and writing garbage on its key
//!   ([`MemoryStore::put_garbage`]).
//!
//! And it can pose as stores with other limits:
//! * a narrower ttl range, as Azure Blob's 15–60 s
//!   ([`MemoryStore::set_ttl_range`]);
//! * a negotiated ttl, as ZooKeeper's session timeout: every acquire is
//!   granted a set ttl whatever it asked ([`MemoryStore::set_granted_ttl`]);
//! * a late expiry, as Consul's sessions
//!   ([`MemoryStore::set_expiry_slack`]).
//!
//! And it keeps a log of every record it created: when, for whom, with
//! which token, and when and how it went — expired, released (by whom) or
//! deleted ([`MemoryStore::record_log`]). A test judges leaders' beliefs
//! against it: by the store's own clock, whose lease was valid when. The log
//! grows by one entry per term or place in line: a store for tests.

mod contract;
mod faults;
mod state;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::StoreError;
use crate::store::{ExpirySlack, StoreStyle};
use crate::types::{ElectionName, HolderId};
use faults::Faults;
pub use faults::LostReply;
use state::State;
pub use state::{CallStats, RecordEnd, RecordEndCause, RecordLife};

/// An in-memory lease store; clones share one state. See the
/// [module docs](self).
#[derive(Clone, Debug)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    style: StoreStyle,
    state: Mutex<State>,
    faults: Mutex<Faults>,
    /// Wakes every watch on every change of any election, in the order
    /// they began to wait (a `tokio::sync::watch` channel would wake them
    /// in an order drawn from tokio's own random generator, which no seed
    /// reaches: a seeded simulation must not depend on it).
    changed: Notify,
}

impl MemoryStore {
    /// A new, empty store of the given style.
    pub fn new(style: StoreStyle) -> Self {
        Self {
            inner: Arc::new(Inner {
                style,
                state: Mutex::new(State::default()),
                faults: Mutex::new(Faults::default()),
                changed: Notify::new(),
            }),
        }
    }

    /// A race-style store: one record per election, won by compare-and-set.
    pub fn race() -> Self {
        Self::new(StoreStyle::Race)
    }

    /// A queue-style store: one record per candidate, the first leads.
    pub fn queue() -> Self {
        Self::new(StoreStyle::Queue)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held (a failed assertion in a test)
        // leaves the state consistent: every mutation is a single step.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn faults(&self) -> MutexGuard<'_, Faults> {
        self.inner.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.inner.changed.notify_waiters();
    }

    /// Delays every request by `delay` before the store applies it.
    pub fn set_request_delay(&self, delay: Duration) {
        self.faults().request_delay = delay;
    }

    /// Delays every reply by `delay` after the store applied the request: a
    /// renewal then succeeds on the store but its answer arrives late.
    pub fn set_reply_delay(&self, delay: Duration) {
        self.faults().reply_delay = delay;
    }

    /// Fails the next `n` calls (of any kind) as unavailable. The roster's
    /// calls ([`enroll`](crate::store::LeaseStore::enroll), [`withdraw`](crate::store::LeaseStore::withdraw)) fail too while any
    /// are pending, without counting against `n`: they run beside a
    /// candidate's own calls, which `n` is meant for.
    pub fn fail_next(&self, n: u32) {
        self.faults().fail_next = n;
    }

    /// Loses the answers of the next `n` calls (of any kind) that the
    /// store applies: each takes effect — an acquire may win, a renewal
    /// extends the lease, a release frees it — but its caller gets no
    /// answer, as `lost` says. A call that fails before it is applied
    /// ([`fail_next`](Self::fail_next), [`partition`](Self::partition)) or
    /// is refused ([`ErrorKind::Config`](crate::ErrorKind::Config), garbage) is not counted.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use regent_core::memory::{LostReply, MemoryStore};
    /// use regent_core::{AcquireRequest, ElectionName, HolderId, LeaseStore, Metadata};
    ///
    /// let store = MemoryStore::race();
    /// let election = ElectionName::new("jobs")?;
    /// let req = AcquireRequest {
    ///     election: election.clone(),
    ///     holder: HolderId::new("a")?,
    ///     ttl: Duration::from_secs(10),
    ///     metadata: Metadata::new(),
    /// };
    /// store.lose_next_replies(1, LostReply::Fail);
    /// // The caller hears of a failure, but the acquire won.
    /// assert!(store.try_acquire(&req, None).await.unwrap_err().is_transient());
    /// let leader = store.current_leader(&election).await?.expect("a won");
    /// assert_eq!(leader.holder.as_str(), "a");
    /// # Ok(()) }
    /// ```
    pub fn lose_next_replies(&self, n: u32, lost: LostReply) {
        let mut f = self.faults();
        f.lose_next = n;
        f.lost_reply = lost;
    }

    /// Cuts `holder` off: its acquire, renew, metadata update and release
    /// fail as unavailable until [`heal`](Self::heal).
    pub fn partition(&self, holder: &HolderId) {
        self.faults().partitioned.insert(holder.clone());
    }

    /// Ends a [`partition`](Self::partition) of `holder`.
    pub fn heal(&self, holder: &HolderId) {
        self.faults().partitioned.remove(holder);
    }

    /// While `held`, no lease expires. When released, every lease whose
    /// time has passed expires at once.
    pub fn hold_expiry(&self, held: bool) {
        let mut state = self.state();
        if state.expiry_held && !held {
            state.expiry_freed_at = Some(Instant::now());
        }
        state.expiry_held = held;
        drop(state);
        self.bump();
    }

    /// Deletes every record of `election`, as an operator would by hand.
    /// Tokens keep growing afterwards.
    pub fn delete_records(&self, election: &ElectionName) {
        let mut state = self.state();
        if let Some(e) = state.elections.get_mut(election) {
            e.clear(Instant::now());
            e.garbage = false;
        }
        drop(state);
        self.bump();
    }

    /// Replaces `election`'s records with a value regent did not write.
    pub fn put_garbage(&self, election: &ElectionName) {
        let mut state = self.state();
        let e = state.elections.entry(election.clone()).or_default();
        e.clear(Instant::now());
        e.garbage = true;
        drop(state);
        self.bump();
    }

    /// Honours only ttls in `min..=max` from now on: others are refused
    /// with [`ErrorKind::Config`](crate::ErrorKind::Config), and [`info`](crate::LeaseStore::info) reports
    /// the range (default 1 ms to [`MAX_TTL`](crate::MAX_TTL)).
    pub fn set_ttl_range(&self, min: Duration, max: Duration) {
        let mut f = self.faults();
        f.min_ttl = min;
        f.max_ttl = max;
    }

    /// With `Some(ttl)`, grants every acquire `ttl`, whatever it asked (a
    /// ttl in range is still required), as a store that negotiates does:
    /// the lease lives that long and [`Lease::ttl`](crate::Lease::ttl) says so.
    /// [`info`](crate::LeaseStore::info) then reports
    /// [`TtlGrant::Negotiated`](crate::TtlGrant::Negotiated).
    /// `None` grants what is asked again (the default).
    pub fn set_granted_ttl(&self, ttl: Option<Duration>) {
        self.faults().granted_ttl = ttl;
    }

    /// Frees a dead holder's lease `slack` after its ttl instead of at once,
    /// for leases acquired from now on, and reports it in
    /// [`info`](crate::LeaseStore::info) (default [`ExpirySlack::NONE`]).
    pub fn set_expiry_slack(&self, slack: ExpirySlack) {
        self.faults().expiry_slack = slack;
    }

    /// Runs the store's clock `drift` faster than tokio's (0.01: 1 %
    /// faster; negative: slower), for leases acquired or renewed from now
    /// on: a lease granted `ttl` (plus its expiry slack) lives
    /// `ttl / (1 + drift)` by tokio's clock. The core's timing allows for
    /// a store clock up to [`Timing::drift`](crate::Timing::drift) faster
    /// than the holder's (1 % by default); beyond that a leader may
    /// believe in a lease the store has already freed. Default 0.
    ///
    /// # Panics
    ///
    /// If `drift` is not finite or not above -1 (a clock that stands still
    /// or runs backwards).
    pub fn set_clock_drift(&self, drift: f64) {
        assert!(
            drift.is_finite() && drift > -1.0,
            "memory store: clock drift {drift} must be finite and above -1"
        );
        self.state().clock_drift = drift;
    }

    /// Every record the store created for `election`, in token order: who
    /// held it, when it was created, and when and how it ended (see
    /// [`RecordLife`]). With the leaders' own record of their terms, a
    /// test can tell whether anyone believed it led while the store held
    /// its lease no longer, and whether every release was the holder's.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use regent_core::memory::{MemoryStore, RecordEndCause};
    /// use regent_core::{Candidate, ElectionName, HolderId};
    ///
    /// let store = MemoryStore::race();
    /// let election = ElectionName::new("jobs")?;
    /// let a = Candidate::builder(store.clone(), election.clone(), HolderId::new("a")?).build()?;
    /// let leadership = a.campaign().await?;
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// leadership.resign().await?;
    ///
    /// let log = store.record_log(&election);
    /// assert_eq!(log.len(), 1);
    /// let end = log[0].end.as_ref().expect("released");
    /// assert_eq!(end.at - log[0].created, Duration::from_secs(1));
    /// assert!(matches!(&end.cause, RecordEndCause::Released { by } if by.as_str() == "a"));
    /// # Ok(()) }
    /// ```
    pub fn record_log(&self, election: &ElectionName) -> Vec<RecordLife> {
        let now = Instant::now();
        let mut state = self.state();
        // Records whose time has passed unnoticed are logged as expired.
        if state.purged(election, now).1 {
            drop(state);
            self.bump();
            state = self.state();
        }
        state
            .elections
            .get(election)
            .map(|e| e.log.clone())
            .unwrap_or_default()
    }

    /// How many calls the store has served.
    pub fn stats(&self) -> CallStats {
        self.state().stats
    }

    /// The instant `election`'s current leader's record expires on the
    /// store's clock, if there is a leader.
    pub fn leader_expires_at(&self, election: &ElectionName) -> Option<Instant> {
        let state = self.state();
        let e = state.elections.get(election)?;
        e.records.values().next().map(|r| r.expires_at)
    }

    /// Runs one call: request delay, faults, the operation under the lock,
    /// reply delay.
    async fn call<T>(
        &self,
        holder: Option<&HolderId>,
        what: &str,
        op: impl FnOnce(&mut State, Instant) -> Result<(T, bool), StoreError>,
    ) -> Result<T, StoreError> {
        {
            let mut state = self.state();
            match what {
                "acquire" => state.stats.acquires += 1,
                "renew" => state.stats.renews += 1,
                "release" => state.stats.releases += 1,
                "update metadata" => state.stats.metadata_updates += 1,
                _ => {}
            }
        }
        let (request_delay, reply_delay, fail) = {
            let mut f = self.faults();
            let mut fail = holder.is_some_and(|h| f.partitioned.contains(h));
            // The roster's calls run beside a candidate's own: a failure
            // injected for "the next call" is counted against the latter,
            // but while one is pending the store is down for the roster
            // too (else a follower's enrollment would pass for a store
            // that answers).
            if f.fail_next > 0 {
                if !matches!(what, "enroll" | "withdraw") {
                    f.fail_next -= 1;
                }
                fail = true;
            }
            (f.request_delay, f.reply_delay, fail)
        };
        if !request_delay.is_zero() {
            tokio::time::sleep(request_delay).await;
        }
        if fail {
            return Err(StoreError::unavailable(format!(
                "memory store: injected failure of {what}"
            )));
        }
        let (value, changed) = {
            let mut state = self.state();
            op(&mut state, Instant::now())?
        };
        if changed {
            self.bump();
        }
        let lost = {
            let mut f = self.faults();
            (f.lose_next > 0).then(|| {
                f.lose_next -= 1;
                f.lost_reply
            })
        };
        if !reply_delay.is_zero() {
            tokio::time::sleep(reply_delay).await;
        }
        match lost {
            None => Ok(value),
            Some(LostReply::Fail) => Err(StoreError::unavailable(format!(
                "memory store: injected loss of the answer to {what} (the store applied it)"
            ))),
            Some(LostReply::Hang) => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests;
