//! An in-process store with fault injection, for testing the core and code
//! built on it. **Not** for production: it lives in one process's memory
//! ([`SafetyClass::Ephemeral`]).
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::{
    Acquire, AcquireRequest, ExpirySlack, LeaderStream, LeaseStore, Renewal, SafetyClass,
    StoreInfo, StoreStyle, TtlGrant, WatchMode,
};
use crate::error::{ErrorKind, StoreError};
use crate::limits::MAX_TTL;
use crate::types::{
    ElectionName, FencingToken, HolderId, LeaderInfo, Lease, LeaseHandle, Metadata,
};

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

#[derive(Debug, Default)]
struct State {
    elections: HashMap<ElectionName, Election>,
    expiry_held: bool,
    /// When expiry was last let go after a hold: a record whose time passed
    /// during the hold expired then.
    expiry_freed_at: Option<Instant>,
    /// How much faster the store's clock runs than tokio's (0.01: 1 %).
    clock_drift: f64,
    stats: CallStats,
}

impl State {
    /// The election's records with those whose time has passed removed
    /// (and logged as expired), unless expiry is held; and whether any
    /// went.
    fn purged(&mut self, election: &ElectionName, now: Instant) -> (Option<&mut Election>, bool) {
        let (held, freed_at) = (self.expiry_held, self.expiry_freed_at);
        match self.elections.get_mut(election) {
            Some(e) => {
                let changed = !held && e.purge(now, freed_at);
                (Some(e), changed)
            }
            None => (None, false),
        }
    }
}

/// When a record granted `life` (store time) at `now` expires on tokio's
/// clock, with the store's clock `drift` faster.
fn expiry(now: Instant, life: Duration, drift: f64) -> Instant {
    if drift == 0.0 {
        now + life
    } else {
        now + life.div_f64(1.0 + drift)
    }
}

#[derive(Debug, Default)]
struct Election {
    /// The last token issued. Never reset, so tokens grow across release,
    /// expiry and deletion of records.
    counter: u64,
    /// Live records by token. Race style: at most one. Queue style: the
    /// first leads.
    records: BTreeMap<u64, Record>,
    garbage: bool,
    /// Every record created, in token order (so by creation).
    log: Vec<RecordLife>,
}

#[derive(Debug, Clone)]
struct Record {
    holder: HolderId,
    /// The ttl granted.
    ttl: Duration,
    /// The ttl plus the expiry slack: how long after an acquire or renewal
    /// the record really lives.
    life: Duration,
    expires_at: Instant,
    metadata: Metadata,
}

#[derive(Debug)]
struct Faults {
    request_delay: Duration,
    reply_delay: Duration,
    fail_next: u32,
    lose_next: u32,
    lost_reply: LostReply,
    partitioned: HashSet<HolderId>,
    min_ttl: Duration,
    max_ttl: Duration,
    granted_ttl: Option<Duration>,
    expiry_slack: ExpirySlack,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            request_delay: Duration::ZERO,
            reply_delay: Duration::ZERO,
            fail_next: 0,
            lose_next: 0,
            lost_reply: LostReply::Fail,
            partitioned: HashSet::new(),
            min_ttl: Duration::from_millis(1),
            max_ttl: MAX_TTL,
            granted_ttl: None,
            expiry_slack: ExpirySlack::NONE,
        }
    }
}

/// How many calls of each kind the store was asked (failed ones included).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallStats {
    /// `try_acquire` calls.
    pub acquires: u64,
    /// `renew` calls.
    pub renews: u64,
    /// `release` calls.
    pub releases: u64,
    /// `update_metadata` calls.
    pub metadata_updates: u64,
}

/// What becomes of an answer the store loses
/// ([`MemoryStore::lose_next_replies`]). Either way the call took effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReply {
    /// The call fails as unavailable, as when the connection breaks after
    /// the store committed it.
    Fail,
    /// The call never answers, as when the answer is dropped on the way:
    /// only the caller's own timeout ends it.
    Hang,
}

/// The life of one record on the store, from [`MemoryStore::record_log`].
///
/// On a race store a record leads from its creation to its end; on a
/// queue store it waits in line until every record with a smaller token
/// has ended, and leads from then to its end. Instants are tokio's clock;
/// a record's expiry already follows the store's clock
/// ([`MemoryStore::set_clock_drift`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordLife {
    /// Whose record.
    pub holder: HolderId,
    /// Its token.
    pub token: FencingToken,
    /// When the store created it.
    pub created: Instant,
    /// When and how it ended; `None` while it lives.
    pub end: Option<RecordEnd>,
}

/// When and how a record ended ([`RecordLife::end`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordEnd {
    /// The first instant at which the store no longer held the record: its
    /// expiry instant (the lease is free from then, whenever the store
    /// noticed), or the instant of the release or deletion.
    pub at: Instant,
    /// How.
    pub cause: RecordEndCause,
}

/// How a record ended ([`RecordEnd::cause`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordEndCause {
    /// Its time passed without a renewal.
    Expired,
    /// A release freed it.
    Released {
        /// Who asked: the holder whose lease the release named (the store
        /// frees only a caller's own record: contract item 4).
        by: HolderId,
    },
    /// [`MemoryStore::delete_records`] or [`MemoryStore::put_garbage`]
    /// removed it.
    Deleted,
}

impl Election {
    /// Removes the records whose time has passed at `now` and logs their
    /// end; `freed_at` is when a hold of expiry last ended. Whether any
    /// went.
    fn purge(&mut self, now: Instant, freed_at: Option<Instant>) -> bool {
        let expired: Vec<u64> = self
            .records
            .iter()
            .filter(|(_, r)| r.expires_at <= now)
            .map(|(token, _)| *token)
            .collect();
        for token in &expired {
            let r = self.records.remove(token).expect("just seen");
            // A record whose time passed while expiry was held went when
            // the hold ended.
            let at = freed_at.map_or(r.expires_at, |f| f.max(r.expires_at));
            self.log_end(*token, at, RecordEndCause::Expired);
        }
        !expired.is_empty()
    }

    /// Adds a record under the next token and logs it; returns the token.
    fn insert(&mut self, record: Record, now: Instant) -> u64 {
        self.counter += 1;
        self.log.push(RecordLife {
            holder: record.holder.clone(),
            token: FencingToken::new(self.counter),
            created: now,
            end: None,
        });
        self.records.insert(self.counter, record);
        self.counter
    }

    /// Removes every record, logging each as `cause` at `now`.
    fn clear(&mut self, now: Instant) {
        for token in std::mem::take(&mut self.records).into_keys() {
            self.log_end(token, now, RecordEndCause::Deleted);
        }
    }

    fn log_end(&mut self, token: u64, at: Instant, cause: RecordEndCause) {
        // The log is in token order: tokens are issued in order of creation.
        if let Ok(i) = self.log.binary_search_by_key(&token, |l| l.token.get())
            && self.log[i].end.is_none()
        {
            self.log[i].end = Some(RecordEnd { at, cause });
        }
    }

    fn leader(&self) -> Option<LeaderInfo> {
        self.records.iter().next().map(|(token, r)| LeaderInfo {
            holder: r.holder.clone(),
            token: FencingToken::new(*token),
            metadata: r.metadata.clone(),
        })
    }

    fn next_expiry(&self) -> Option<Instant> {
        self.records.values().map(|r| r.expires_at).min()
    }
}

fn lease_of(election: &ElectionName, token: u64, r: &Record) -> Lease {
    Lease {
        election: election.clone(),
        holder: r.holder.clone(),
        token: FencingToken::new(token),
        ttl: r.ttl,
        handle: LeaseHandle::new(format!("mem-{token}")),
    }
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

    /// Fails the next `n` calls (of any kind) as unavailable.
    pub fn fail_next(&self, n: u32) {
        self.faults().fail_next = n;
    }

    /// Loses the answers of the next `n` calls (of any kind) that the
    /// store applies: each takes effect — an acquire may win, a renewal
    /// extends the lease, a release frees it — but its caller gets no
    /// answer, as `lost` says. A call that fails before it is applied
    /// ([`fail_next`](Self::fail_next), [`partition`](Self::partition)) or
    /// is refused ([`ErrorKind::Config`], garbage) is not counted.
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
    /// with [`ErrorKind::Config`], and [`info`](LeaseStore::info) reports
    /// the range (default 1 ms to [`MAX_TTL`]).
    pub fn set_ttl_range(&self, min: Duration, max: Duration) {
        let mut f = self.faults();
        f.min_ttl = min;
        f.max_ttl = max;
    }

    /// With `Some(ttl)`, grants every acquire `ttl`, whatever it asked (a
    /// ttl in range is still required), as a store that negotiates does:
    /// the lease lives that long and [`Lease::ttl`] says so.
    /// [`info`](LeaseStore::info) then reports [`TtlGrant::Negotiated`].
    /// `None` grants what is asked again (the default).
    pub fn set_granted_ttl(&self, ttl: Option<Duration>) {
        self.faults().granted_ttl = ttl;
    }

    /// Frees a dead holder's lease `slack` after its ttl instead of at once,
    /// for leases acquired from now on, and reports it in
    /// [`info`](LeaseStore::info) (default [`ExpirySlack::NONE`]).
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
            if f.fail_next > 0 {
                f.fail_next -= 1;
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

fn corrupt(election: &ElectionName) -> StoreError {
    StoreError::corrupt(format!(
        "memory store: the record of election '{election}' was not written by regent"
    ))
}

impl LeaseStore for MemoryStore {
    fn info(&self) -> StoreInfo {
        let f = self.faults();
        StoreInfo::new(
            "memory",
            self.inner.style,
            WatchMode::Notify,
            SafetyClass::Ephemeral,
        )
        .with_ttl_range(f.min_ttl, f.max_ttl)
        .with_expiry_slack(f.expiry_slack)
        .with_ttl_grant(if f.granted_ttl.is_some() {
            TtlGrant::Negotiated
        } else {
            TtlGrant::AtLeastAsked
        })
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let style = self.inner.style;
        let (min_ttl, max_ttl, granted, slack) = {
            let f = self.faults();
            (f.min_ttl, f.max_ttl, f.granted_ttl, f.expiry_slack)
        };
        self.call(Some(&req.holder), "acquire", |state, now| {
            if req.ttl < min_ttl || req.ttl > max_ttl {
                return Err(StoreError::new(
                    ErrorKind::Config,
                    format!(
                        "memory store: ttl {:?} of election '{}' is outside the {min_ttl:?}..={max_ttl:?} it honours",
                        req.ttl, req.election
                    ),
                ));
            }
            let (held, freed_at, drift) =
                (state.expiry_held, state.expiry_freed_at, state.clock_drift);
            let e = state.elections.entry(req.election.clone()).or_default();
            let mut changed = !held && e.purge(now, freed_at);
            if e.garbage {
                return Err(corrupt(&req.election));
            }
            let ttl = granted.unwrap_or(req.ttl);
            let life = ttl.saturating_add(slack.for_ttl(ttl));
            let record = Record {
                holder: req.holder.clone(),
                ttl,
                life,
                expires_at: expiry(now, life, drift),
                metadata: req.metadata.clone(),
            };
            match style {
                StoreStyle::Queue => {
                    let ours = queued
                        .filter(|q| q.election == req.election && q.holder == req.holder)
                        .and_then(|q| {
                            let r = e.records.get_mut(&q.token.get())?;
                            (r.holder == q.holder).then_some((q.token.get(), r))
                        });
                    let token = match ours {
                        Some((token, r)) => {
                            // Refresh: a Won answer must restart the TTL.
                            r.expires_at = expiry(now, r.life, drift);
                            r.metadata = req.metadata.clone();
                            token
                        }
                        None => {
                            changed = true;
                            e.insert(record, now)
                        }
                    };
                    let lease = lease_of(&req.election, token, &e.records[&token]);
                    let head = *e.records.keys().next().expect("just inserted");
                    if head == token {
                        Ok((Acquire::Won(lease), changed))
                    } else {
                        Ok((
                            Acquire::Held {
                                leader: e.leader(),
                                queued: Some(lease),
                            },
                            changed,
                        ))
                    }
                }
                _ => {
                    if let Some(leader) = e.leader() {
                        return Ok((
                            Acquire::Held {
                                leader: Some(leader),
                                queued: None,
                            },
                            changed,
                        ));
                    }
                    let lease = lease_of(&req.election, e.counter + 1, &record);
                    e.insert(record, now);
                    Ok((Acquire::Won(lease), true))
                }
            }
        })
        .await
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        self.call(Some(&lease.holder), "renew", |state, now| {
            let drift = state.clock_drift;
            let (Some(e), changed) = state.purged(&lease.election, now) else {
                return Ok((Renewal::Lost, false));
            };
            if e.garbage {
                return Err(corrupt(&lease.election));
            }
            match e.records.get_mut(&lease.token.get()) {
                Some(r) if r.holder == lease.holder => {
                    r.expires_at = expiry(now, r.life, drift);
                    Ok((Renewal::Renewed, changed))
                }
                _ => Ok((Renewal::Lost, changed)),
            }
        })
        .await
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        self.call(Some(&lease.holder), "update metadata", |state, now| {
            let (Some(e), changed) = state.purged(&lease.election, now) else {
                return Ok((Renewal::Lost, false));
            };
            if e.garbage {
                return Err(corrupt(&lease.election));
            }
            match e.records.get_mut(&lease.token.get()) {
                // The expiry stays: an update is not a renewal.
                Some(r) if r.holder == lease.holder => {
                    let updated = r.metadata != *metadata;
                    r.metadata = metadata.clone();
                    Ok((Renewal::Renewed, changed || updated))
                }
                _ => Ok((Renewal::Lost, changed)),
            }
        })
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.call(Some(&lease.holder), "release", |state, now| {
            let (Some(e), mut changed) = state.purged(&lease.election, now) else {
                return Ok(((), false));
            };
            let token = lease.token.get();
            if e.records
                .get(&token)
                .is_some_and(|r| r.holder == lease.holder)
            {
                e.records.remove(&token);
                let by = lease.holder.clone();
                e.log_end(token, now, RecordEndCause::Released { by });
                changed = true;
            }
            Ok(((), changed))
        })
        .await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.call(None, "read", |state, now| {
            let (Some(e), changed) = state.purged(election, now) else {
                return Ok((None, false));
            };
            if e.garbage {
                return Err(corrupt(election));
            }
            Ok((e.leader(), changed))
        })
        .await
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        // Opening a watch is a call like any other: it can fail.
        self.call(None, "watch", |_, _| Ok(((), false))).await?;
        let store = self.clone();
        let election = election.clone();
        let stream = futures_util::stream::unfold(
            (store, election, None::<Option<LeaderInfo>>),
            |(store, election, last)| async move {
                loop {
                    let news = {
                        // Registered before the state is read: a change made
                        // after the read wakes it.
                        let changed = store.inner.changed.notified();
                        tokio::pin!(changed);
                        changed.as_mut().enable();
                        let (now_leader, next_expiry) = {
                            let mut state = store.state();
                            let held = state.expiry_held;
                            match state.purged(&election, Instant::now()).0 {
                                None => (Ok(None), None),
                                Some(e) if e.garbage => (Err(corrupt(&election)), None),
                                Some(e) => (Ok(e.leader()), e.next_expiry().filter(|_| !held)),
                            }
                        };
                        match now_leader {
                            Ok(leader) if last.as_ref() == Some(&leader) => {
                                let expiry = async {
                                    match next_expiry {
                                        Some(at) => tokio::time::sleep_until(at).await,
                                        None => std::future::pending().await,
                                    }
                                };
                                // Either way the state is read again.
                                tokio::select! {
                                    biased;
                                    () = changed => {}
                                    () = expiry => {}
                                }
                                None
                            }
                            news => Some(news),
                        }
                    };
                    match news {
                        None => {}
                        Some(Err(e)) => return Some((Err(e), (store, election, last))),
                        Some(Ok(leader)) => {
                            let item = Ok(leader.clone());
                            return Some((item, (store, election, Some(leader))));
                        }
                    }
                }
            },
        );
        Ok(Box::pin(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    fn req(holder: &str) -> AcquireRequest {
        AcquireRequest {
            election: ElectionName::new("e").unwrap(),
            holder: HolderId::new(holder).unwrap(),
            ttl: Duration::from_secs(10),
            metadata: Metadata::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn race_expiry_follows_tokio_clock() {
        let s = MemoryStore::race();
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        assert!(matches!(
            s.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Held { leader: Some(l), queued: None } if l.holder.as_str() == "a"
        ));
        tokio::time::sleep(Duration::from_secs(10)).await;
        let Acquire::Won(b) = s.try_acquire(&req("b"), None).await.unwrap() else {
            panic!("b must win after a expired")
        };
        assert!(b.token > a.token);
        assert_eq!(s.renew(&a).await.unwrap(), Renewal::Lost);
    }

    #[tokio::test(start_paused = true)]
    async fn queue_passes_to_next_in_line() {
        let s = MemoryStore::queue();
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!()
        };
        let Acquire::Held {
            queued: Some(qb), ..
        } = s.try_acquire(&req("b"), None).await.unwrap()
        else {
            panic!()
        };
        s.release(&a).await.unwrap();
        let Acquire::Won(b) = s.try_acquire(&req("b"), Some(&qb)).await.unwrap() else {
            panic!("b is first in line")
        };
        assert_eq!(b.token, qb.token);
        assert!(b.token > a.token);
    }

    #[tokio::test(start_paused = true)]
    async fn watch_sees_expiry_without_any_call() {
        let s = MemoryStore::race();
        let e = ElectionName::new("e").unwrap();
        let mut w = s.watch(&e).await.unwrap();
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        s.try_acquire(&req("a"), None).await.unwrap();
        assert!(w.next().await.unwrap().unwrap().is_some());
        let start = Instant::now();
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn update_metadata_keeps_the_term_and_its_expiry() {
        let s = MemoryStore::race();
        let e = ElectionName::new("e").unwrap();
        let mut w = s.watch(&e).await.unwrap();
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        let first = w.next().await.unwrap().unwrap().unwrap();
        let expires_at = s.leader_expires_at(&e);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let m = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        assert_eq!(s.update_metadata(&a, &m).await.unwrap(), Renewal::Renewed);
        let seen = w.next().await.unwrap().unwrap().unwrap();
        assert_eq!((seen.token, &seen.metadata), (first.token, &m));
        assert_eq!(s.leader_expires_at(&e), expires_at, "not a renewal");
        assert_eq!(s.stats().metadata_updates, 1);

        s.partition(&a.holder);
        assert!(s.update_metadata(&a, &m).await.unwrap_err().is_transient());
        s.heal(&a.holder);
        tokio::time::sleep(Duration::from_secs(7)).await;
        assert_eq!(s.update_metadata(&a, &m).await.unwrap(), Renewal::Lost);

        s.put_garbage(&e);
        let err = s.update_metadata(&a, &m).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
    }

    #[tokio::test(start_paused = true)]
    async fn faults_fail_and_partition() {
        let s = MemoryStore::race();
        s.fail_next(1);
        assert!(
            s.try_acquire(&req("a"), None)
                .await
                .unwrap_err()
                .is_transient()
        );
        s.partition(&HolderId::new("a").unwrap());
        assert!(s.try_acquire(&req("a"), None).await.is_err());
        assert!(matches!(
            s.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Won(_)
        ));
        s.heal(&HolderId::new("a").unwrap());
        assert!(matches!(
            s.try_acquire(&req("a"), None).await.unwrap(),
            Acquire::Held { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_reply_fails_or_hangs_but_the_call_took_effect() {
        let s = MemoryStore::race();
        let e = ElectionName::new("e").unwrap();
        s.lose_next_replies(1, LostReply::Fail);
        let err = s.try_acquire(&req("a"), None).await.unwrap_err();
        assert!(err.is_transient(), "{err}");
        let a = s
            .current_leader(&e)
            .await
            .unwrap()
            .expect("the acquire won");
        assert_eq!(a.holder.as_str(), "a");

        let lease = lease_of(
            &e,
            a.token.get(),
            &s.state().elections[&e].records[&a.token.get()],
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        s.lose_next_replies(1, LostReply::Hang);
        let hung = tokio::time::timeout(Duration::from_secs(60), s.renew(&lease)).await;
        assert!(hung.is_err(), "a hung reply never answers");
        // The renewal was applied 5 s in: the lease lived until 15 s.
        let renewed_at = Instant::now() - Duration::from_secs(60);
        assert_eq!(
            s.leader_expires_at(&e),
            Some(renewed_at + Duration::from_secs(10))
        );
        let log = s.record_log(&e);
        assert_eq!(
            log[0].end.as_ref().map(|end| end.at),
            Some(renewed_at + Duration::from_secs(10))
        );
        // Counted: the next call answers.
        assert!(matches!(
            s.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Won(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn failed_and_refused_calls_do_not_use_up_lost_replies() {
        let s = MemoryStore::race();
        s.set_ttl_range(Duration::from_secs(1), Duration::from_secs(10));
        s.lose_next_replies(1, LostReply::Fail);
        s.fail_next(1);
        assert!(s.try_acquire(&req("a"), None).await.is_err());
        let long = AcquireRequest {
            ttl: Duration::from_secs(11),
            ..req("a")
        };
        let refused = s.try_acquire(&long, None).await.unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::Config);
        assert!(s.try_acquire(&req("a"), None).await.is_err(), "lost");
        assert!(matches!(
            s.try_acquire(&req("a"), None).await.unwrap(),
            Acquire::Held { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fast_store_clock_expires_leases_early_by_tokio_clock() {
        let s = MemoryStore::race();
        let e = ElectionName::new("e").unwrap();
        s.set_clock_drift(1.0);
        let start = Instant::now();
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        assert_eq!(
            a.ttl,
            Duration::from_secs(10),
            "the ttl granted is the store's"
        );
        assert_eq!(
            s.leader_expires_at(&e),
            Some(start + Duration::from_secs(5))
        );
        tokio::time::sleep(Duration::from_secs(4)).await;
        s.set_clock_drift(-0.5);
        assert_eq!(s.renew(&a).await.unwrap(), Renewal::Renewed);
        assert_eq!(
            s.leader_expires_at(&e),
            Some(start + Duration::from_secs(4 + 20))
        );
    }

    #[test]
    #[should_panic(expected = "clock drift -1 must be finite and above -1")]
    fn a_clock_that_stands_still_is_refused() {
        MemoryStore::race().set_clock_drift(-1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_record_log_tells_each_record_s_life() {
        let s = MemoryStore::queue();
        let e = ElectionName::new("e").unwrap();
        let t0 = Instant::now();
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        let Acquire::Held {
            queued: Some(b), ..
        } = s.try_acquire(&req("b"), None).await.unwrap()
        else {
            panic!("b queues")
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        s.try_acquire(&req("c"), None).await.unwrap();
        // b's release of a's record frees nothing.
        s.release(&Lease {
            holder: b.holder.clone(),
            ..a.clone()
        })
        .await
        .unwrap();
        s.release(&a).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        s.delete_records(&e);
        let log = s.record_log(&e);
        let lives: Vec<_> = log
            .iter()
            .map(|l| {
                let end = l.end.as_ref().expect("all ended");
                (
                    l.holder.as_str(),
                    l.token.get(),
                    l.created - t0,
                    end.at - t0,
                    end.cause.clone(),
                )
            })
            .collect();
        let secs = Duration::from_secs;
        assert_eq!(
            lives,
            [
                (
                    "a",
                    1,
                    secs(0),
                    secs(1),
                    RecordEndCause::Released {
                        by: a.holder.clone()
                    }
                ),
                ("b", 2, secs(0), secs(3), RecordEndCause::Deleted),
                ("c", 3, secs(1), secs(3), RecordEndCause::Deleted),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_record_log_dates_an_expiry_at_its_instant_not_when_noticed() {
        let s = MemoryStore::race();
        let e = ElectionName::new("e").unwrap();
        let t0 = Instant::now();
        s.try_acquire(&req("a"), None).await.unwrap();
        tokio::time::sleep(Duration::from_secs(25)).await;
        s.try_acquire(&req("b"), None).await.unwrap();
        s.hold_expiry(true);
        tokio::time::sleep(Duration::from_secs(30)).await;
        s.hold_expiry(false);
        let log = s.record_log(&e);
        let ends: Vec<_> = log
            .iter()
            .map(|l| l.end.as_ref().map(|end| (end.at - t0, end.cause.clone())))
            .collect();
        assert_eq!(
            ends,
            [
                Some((Duration::from_secs(10), RecordEndCause::Expired)),
                // Its time passed during the hold: it went when the hold ended.
                Some((Duration::from_secs(55), RecordEndCause::Expired)),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn held_expiry_keeps_leases_alive() {
        let s = MemoryStore::race();
        s.try_acquire(&req("a"), None).await.unwrap();
        s.hold_expiry(true);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(matches!(
            s.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Held { .. }
        ));
        s.hold_expiry(false);
        assert!(matches!(
            s.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Won(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_outside_the_range_is_refused_as_config() {
        let s = MemoryStore::race();
        s.set_ttl_range(Duration::from_secs(15), Duration::from_secs(60));
        assert_eq!(
            s.info().min_ttl..=s.info().max_ttl,
            Duration::from_secs(15)..=Duration::from_secs(60)
        );
        for secs in [0, 14, 61] {
            let r = AcquireRequest {
                ttl: Duration::from_secs(secs),
                ..req("a")
            };
            let err = s.try_acquire(&r, None).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config, "{secs} s: {err}");
        }
        let e = ElectionName::new("e").unwrap();
        assert_eq!(s.current_leader(&e).await.unwrap(), None);
        let r = AcquireRequest {
            ttl: Duration::from_secs(15),
            ..req("a")
        };
        assert!(matches!(
            s.try_acquire(&r, None).await.unwrap(),
            Acquire::Won(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_granted_ttl_is_what_the_lease_lives_and_says() {
        let s = MemoryStore::race();
        s.set_granted_ttl(Some(Duration::from_secs(4)));
        assert_eq!(s.info().ttl_grant, TtlGrant::Negotiated);
        let start = Instant::now();
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        assert_eq!(a.ttl, Duration::from_secs(4));
        let e = ElectionName::new("e").unwrap();
        assert_eq!(
            s.leader_expires_at(&e),
            Some(start + Duration::from_secs(4))
        );
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(s.renew(&a).await.unwrap(), Renewal::Lost);
        s.set_granted_ttl(None);
        assert_eq!(s.info().ttl_grant, TtlGrant::AtLeastAsked);
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_slack_delays_expiry_by_the_ttl_dependent_amount() {
        let s = MemoryStore::race();
        s.set_expiry_slack(ExpirySlack::new(Duration::from_secs(1), 50));
        assert_eq!(
            s.info().expiry_slack_for(Duration::from_secs(10)),
            Duration::from_secs(6)
        );
        let e = ElectionName::new("e").unwrap();
        let mut w = s.watch(&e).await.unwrap();
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        assert_eq!(a.ttl, Duration::from_secs(10), "the slack is not granted");
        let start = Instant::now();
        assert!(w.next().await.unwrap().unwrap().is_some());
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        assert_eq!(start.elapsed(), Duration::from_secs(16));
    }
}
