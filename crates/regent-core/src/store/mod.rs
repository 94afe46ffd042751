//! The store contract: what every backend (SQLite, etcd, Consul, Azure Blob,
//! ZooKeeper, the in-memory store) must do, and nothing more.
//!
//! # Two styles of store
//!
//! * **Race** stores (SQLite, Consul, Azure Blob, PostgreSQL; the planned
//!   Redis store would be too) keep one record per election.
//!   [`LeaseStore::try_acquire`] is an atomic compare-and-set that wins only
//!   if the record is free or expired. `queued` in [`Acquire::Held`] is
//!   always `None`.
//! * **Queue** stores (etcd's election recipe, ZooKeeper) keep one record per
//!   candidate, ordered by the store (create revision, sequence number). The
//!   first live record leads. A candidate that is not first stays queued: the
//!   store returns its record in [`Acquire::Held::queued`], the candidate keeps
//!   it alive with [`LeaseStore::renew`] and passes it back to the next
//!   `try_acquire`, which wins once everything before it is gone. Failover
//!   passes to the next in line without a thundering herd.
//!
//! The [`Candidate`](crate::Candidate) drives both styles with one loop.
//!
//! # The contract
//!
//! 1. `try_acquire` wins only if no live lease stands before ours. Someone
//!    else leading is the value [`Acquire::Held`], carrying that leader when
//!    the store knows it.
//! 2. A won [`Lease`] carries election, holder, token, ttl and the store's
//!    handle. Its token is strictly greater than every token the store has
//!    issued for that election before: across holders, restarts of the store
//!    and deletion of the record.
//! 3. `renew` extends only the caller's own record (same holder, same token);
//!    if the record is gone or belongs to someone else it returns
//!    [`Renewal::Lost`].
//! 4. `release` frees only the caller's own record; releasing a record that
//!    is already gone, or releasing twice, succeeds and changes nothing.
//!    The [`Lease`] alone says which record: a store connected afresh
//!    (another process, such as the supervisor that gives a crashed
//!    holder's lease back) releases it just the same.
//! 5. `current_leader` reads who leads; `watch` streams changes, including
//!    "no leader". Stores with notifications use them; others poll, and say
//!    so in [`StoreInfo::watch`].
//! 6. Errors are classified by [`ErrorKind`](crate::ErrorKind): transient
//!    (retry with backoff) or permanent.
//! 7. Garbage in the store (a foreign value on our key, a malformed record) is
//!    [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) or "held by someone
//!    else", never a panic and never a silent takeover.
//! 8. `update_metadata` replaces the metadata of the caller's own live
//!    record (same holder, same token) in one atomic step, and nothing
//!    else: the token, the holder and the store's handle stay as they are,
//!    so the term goes on. It never moves the record's expiry earlier; a
//!    store may extend it as a side effect, but the caller counts on no
//!    such thing: its deadline stays where its last confirmed acquire or
//!    renewal put it. A record that is gone, expired or someone else's is
//!    [`Renewal::Lost`] and is left as it is. Once it answers
//!    [`Renewal::Renewed`], `current_leader` reports the new metadata with
//!    the same token, and a watch yields a new item with the changed
//!    [`LeaderInfo`] (a polling watch within its interval). Metadata the
//!    store cannot hold is [`ErrorKind::Config`](crate::ErrorKind::Config),
//!    refused before anything is written; garbage where the record should
//!    be is treated as `renew` treats it (item 7). An update whose answer
//!    never came (dropped, timed out) leaves the old or the new metadata
//!    and must not cost the lease: the next `renew` still succeeds.
//! 9. `candidates` lists a queue store's line as it stands: every live
//!    record's holder and metadata in line order, so the leader first,
//!    each holder as often as it has records, shown as `current_leader`
//!    shows a leader. A race store lists its roster (item 10), in holder
//!    order, or answers `None` when it keeps none. The list proves
//!    nothing about who leads: it is for display, and for a leader
//!    choosing whom to hand over to.
//! 10. `enroll` (race stores) puts the holder of an [`AcquireRequest`] on
//!     the election's roster with the request's metadata, or refreshes its
//!     entry: `candidates` lists it until `ttl` after the call was sent
//!     (the store's clock; later is allowed, by the store's expiry slack),
//!     unless `withdraw` takes it off first. The roster is apart from the
//!     lease: enrolling never wins, holds or changes a term. A queue store
//!     needs no roster (its line is one) and keeps the default, which does
//!     nothing.
//! 11. `release_to` gives the caller's own lease to a named successor
//!     ([`HandOff`]): a race store frees the record reserved for the
//!     successor until `window` after the call was sent, so that until then
//!     an acquire by anyone else is `Held` with no leader, and the
//!     successor's acquire wins as from a free record (a greater token,
//!     contract item 2); a queue store frees the caller's record and takes
//!     out of line, in the same atomic step, the records of regent's
//!     candidates that stand between it and the successor's (they queue
//!     again at the back with their next acquire or renewal), so that the
//!     successor is next. Either way only the caller's own record is given
//!     up (item 4), and when the store cannot do it (a record that is not
//!     regent's stands before the successor, the successor is not in line)
//!     it releases as `release` does and answers [`HandOff::Released`]. The
//!     default does that always.
//!
//! # Timing
//!
//! A store must never grant less time than asked, unless it says it
//! negotiates ([`TtlGrant::Negotiated`]): a [`Lease`] returned by a `Won`
//! acquire or a `Renewed` renewal stays valid on the store's clock for at
//! least `ttl` after the instant the request was *sent*. (The store applies
//! the request after it was sent, so any server-side TTL started when the
//! request is applied satisfies this.) A store that cannot honour a
//! requested TTL (outside [`StoreInfo::min_ttl`]`..=`[`StoreInfo::max_ttl`])
//! returns [`ErrorKind::Config`](crate::ErrorKind::Config) and never rounds
//! down. A `Renewed` renewal of a lease guarantees at least that lease's
//! own [`Lease::ttl`] (what the store granted, for a negotiating store)
//! from the instant the renewal was sent. On a queue store, a `Won` result must have refreshed the record's
//! TTL within the same call, so that the holder's deadline can be measured
//! from that call.
//!
//! ## The granted ttl
//!
//! [`Lease::ttl`] is the ttl the store actually granted. Rounding up (etcd
//! grants whole seconds, SQLite whole milliseconds) is granting *more*,
//! which is always allowed and changes nothing: the holder keeps measuring
//! its deadlines from the ttl it asked for. A store that negotiates
//! (ZooKeeper's session timeout is clamped by the server) may grant *less*;
//! it says so with [`TtlGrant::Negotiated`], and the
//! [`Candidate`](crate::Candidate) then measures the holder's local deadline
//! from the granted ttl ([`Timing::for_granted`](crate::Timing::for_granted)).
//! The renew interval and the renew deadline stay as configured; if the
//! timing rules no longer hold with the granted ttl (the leader could not
//! step down, or stop its task, before the shorter lease runs out), the
//! candidate gives the lease back at once and its campaign fails with a
//! [`ErrorKind::Config`](crate::ErrorKind::Config) error that names the
//! granted ttl and, as its source, the [`ConfigError`](crate::ConfigError)
//! of the rule broken. Refusing is safer than silently shortening the
//! renew deadline behind the operator's back: the fix is a shorter ttl, or
//! a server that grants the one asked.
//!
//! ## Expiry slack
//!
//! A store may free a dead holder's lease later than its ttl; never
//! earlier. How much later is its [`ExpirySlack`]: a fixed part (etcd's
//! lessor checks every 500 ms: 1 s) plus a part proportional to the ttl
//! (Consul invalidates a session up to twice its TTL: one more ttl). A
//! follower, `explain()` and the conformance suite wait `ttl + slack(ttl)`
//! for a crashed leader's lease to go.
//!
//! # Stores without notifications
//!
//! A store that cannot push changes implements [`LeaseStore::watch`] with
//! [`poll_watch`], which polls [`LeaseStore::current_leader`] and emits
//! only changes, and reports [`WatchMode::Poll`] in its [`StoreInfo`].
//!
//! The conformance suite (`regent_core::testing`, feature `testing`) checks
//! all of this against a real engine.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;

use crate::error::StoreError;
use crate::limits::MAX_TTL;
use crate::types::{Candidacy, ElectionName, HolderId, LeaderInfo, Lease, Metadata};

mod attempt;
mod boxed;
mod check;
mod claims;
mod incarnation;
pub mod memory;
mod poll;
pub mod shared;
pub mod shared_watch;

pub use attempt::SharedAttempt;
pub use boxed::{BoxStore, DynLeaseStore};
pub use check::check;
pub use claims::{Attempt, Claims, Probe, Reclaim, won_by};
pub use incarnation::incarnation;
pub use poll::{poll_watch, poll_watch_woken};

/// A stream of the leader of one election, as the store sees it: `None` is
/// "no leader". The first item is the state when the watch started; then one
/// item per change (a store may repeat a state; consumers dedupe). A
/// transient error may be followed by more items; when the stream ends the
/// consumer opens a new watch.
pub type LeaderStream = Pin<Box<dyn Stream<Item = Result<Option<LeaderInfo>, StoreError>> + Send>>;

/// One attempt to take an election's lease.
#[derive(Clone, Debug)]
pub struct AcquireRequest {
    /// The election.
    pub election: ElectionName,
    /// Who asks.
    pub holder: HolderId,
    /// The lease's time to live.
    pub ttl: Duration,
    /// What the holder publishes while it leads.
    pub metadata: Metadata,
}

/// The outcome of [`LeaseStore::try_acquire`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// We lead: the lease is ours until `ttl` after the call was sent,
    /// unless renewed.
    Won(Lease),
    /// Someone else leads, or (queue stores) records stand before ours.
    Held {
        /// The leader, when the store knows one. `None` on a queue store
        /// whose head record is ahead of us but not yet readable.
        leader: Option<LeaderInfo>,
        /// Queue stores: our place in line, to keep alive with
        /// [`LeaseStore::renew`] and pass to the next `try_acquire`.
        /// Race stores: always `None`.
        queued: Option<Lease>,
    },
}

/// The outcome of [`LeaseStore::renew`] and [`LeaseStore::update_metadata`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// From `renew`: the record is ours for `ttl` more from the instant the
    /// call was sent. From `update_metadata`: the record is ours and shows
    /// the new metadata; its expiry was not moved earlier, and the
    /// caller's deadline stays where its last renewal put it.
    Renewed,
    /// The record is gone, expired, or belongs to someone else.
    Lost,
}

/// What [`LeaseStore::release_to`] did with the caller's lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandOff {
    /// Freed for the successor alone (a race store's reservation, or a
    /// queue store's line with the successor next).
    ToSuccessor,
    /// Freed for anyone, as [`LeaseStore::release`] frees it: the store
    /// cannot pass a lease to a chosen holder, or could not this time.
    Released,
}

/// Which of the two styles of store this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreStyle {
    /// One record per election, won by compare-and-set.
    Race,
    /// One record per candidate, led by the first in the store's order.
    Queue,
}

/// How [`LeaseStore::watch`] learns of changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchMode {
    /// The store pushes changes (etcd watch, blocking queries, ZooKeeper
    /// watches).
    Notify,
    /// The store is polled at this interval; a change is seen at most this
    /// late.
    Poll(Duration),
}

/// How much a backend can be trusted (`docs/architecture.md` §1, "Safety model").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SafetyClass {
    /// Replicated by consensus (etcd, Consul, ZooKeeper, Azure Blob):
    /// survives the loss of a minority of servers.
    Consensus,
    /// One node decides (SQLite, PostgreSQL, Redis): a single point of
    /// failure, but never two leaders while it lives, its terms as
    /// durable as its persistence. With asynchronous replicas (a
    /// PostgreSQL standby, Redis replicas behind Sentinel) a promotion
    /// can lose the last writes and with them a term: two leaders can then
    /// overlap, and only the fencing token (which outgrows the promotion
    /// on both) protects the resource.
    SingleNode,
    /// Process memory only: for tests.
    Ephemeral,
    /// Timing only (peer algorithms without quorum): a partition can elect
    /// two leaders; fencing tokens are the only protection.
    TimingOnly,
    /// A majority of peers vouch for the leader's lease (peer algorithms in
    /// quorum mode): never two leaders at once while clocks drift within
    /// the configured bound, but no authority keeps the tokens: across a
    /// restart of the whole group they go on growing only by the members'
    /// wall clocks (see `regent-peer`).
    PeerQuorum,
}

/// How much later than its ttl a store may free a dead holder's lease:
/// `fixed + ttl × ttl_percent / 100`, and at least `floor`. See
/// [`ExpirySlack::for_ttl`].
///
/// The proportional part is a whole percentage rather than a float so that
/// [`StoreInfo`] stays `Eq` and the slack is exact (Consul: 100 %).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ExpirySlack {
    /// The part that does not depend on the ttl (etcd: 1 s).
    pub fixed: Duration,
    /// The part proportional to the ttl, in percent of it (Consul: 100).
    pub ttl_percent: u32,
    /// The least slack whatever the ttl (Consul: 20 s, two of its shortest
    /// session TTLs).
    pub floor: Duration,
}

impl ExpirySlack {
    /// No slack: the lease is free exactly `ttl` after its last renewal
    /// (SQLite, the memory store).
    pub const NONE: Self = Self::new(Duration::ZERO, 0);

    /// `fixed + ttl × ttl_percent / 100`.
    pub const fn new(fixed: Duration, ttl_percent: u32) -> Self {
        Self {
            fixed,
            ttl_percent,
            floor: Duration::ZERO,
        }
    }

    /// This slack, but never less than `floor`.
    #[must_use]
    pub const fn at_least(mut self, floor: Duration) -> Self {
        self.floor = floor;
        self
    }

    /// A slack that does not depend on the ttl.
    pub const fn fixed(fixed: Duration) -> Self {
        Self::new(fixed, 0)
    }

    /// A slack of `ttl_percent` percent of the ttl (Consul: 100, since it
    /// invalidates a session up to twice its TTL).
    pub const fn proportional(ttl_percent: u32) -> Self {
        Self::new(Duration::ZERO, ttl_percent)
    }

    /// The slack for a lease of `ttl`. Saturates instead of overflowing.
    pub fn for_ttl(&self, ttl: Duration) -> Duration {
        let proportional = ttl
            .checked_mul(self.ttl_percent)
            .map_or(Duration::MAX, |d| d / 100);
        self.fixed.saturating_add(proportional).max(self.floor)
    }
}

/// Whether a store grants the ttl asked, or may grant less. See
/// [the granted ttl](self#the-granted-ttl).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TtlGrant {
    /// [`Lease::ttl`] is never below the ttl asked; it may be more (etcd
    /// rounds up to whole seconds). The conformance suite checks this.
    #[default]
    AtLeastAsked,
    /// The store negotiates the ttl and may grant less than asked
    /// (ZooKeeper's session timeout); [`Lease::ttl`] says what it granted,
    /// and the candidate measures its deadlines from it.
    Negotiated,
}

/// Facts about a store that the core and the CLI need.
///
/// Build it with [`StoreInfo::new`] and the `with_` setters; the struct is
/// `#[non_exhaustive]` so that facts a future store needs can be added
/// without breaking the others.
///
/// ```
/// use std::time::Duration;
/// use regent_core::store::{ExpirySlack, SafetyClass, StoreInfo, StoreStyle, WatchMode};
///
/// // Azure Blob leases last 15 to 60 s.
/// let info = StoreInfo::new("azblob", StoreStyle::Race, WatchMode::Poll(Duration::from_secs(1)), SafetyClass::Consensus)
///     .with_ttl_range(Duration::from_secs(15), Duration::from_secs(60))
///     .with_expiry_slack(ExpirySlack::fixed(Duration::from_secs(1)));
/// assert!(info.ttl_in_range(Duration::from_secs(30)));
/// assert!(!info.ttl_in_range(Duration::from_secs(120)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreInfo {
    /// A short name for logs and `explain()` ("sqlite", "etcd").
    pub name: &'static str,
    /// Race or queue.
    pub style: StoreStyle,
    /// How watch works.
    pub watch: WatchMode,
    /// The safety class.
    pub safety: SafetyClass,
    /// The shortest ttl the store honours.
    pub min_ttl: Duration,
    /// The longest ttl the store honours. The core caps it at
    /// [`MAX_TTL`] (one day) whatever the store says.
    pub max_ttl: Duration,
    /// How much later than `ttl` the store may free a dead holder's lease.
    /// Followers wait this much more.
    pub expiry_slack: ExpirySlack,
    /// Whether the granted [`Lease::ttl`] can be below the ttl asked.
    pub ttl_grant: TtlGrant,
}

impl StoreInfo {
    /// Facts about a store with the widest ttl range (1 ms to
    /// [`MAX_TTL`]), no expiry slack, and leases never
    /// shorter than asked. Narrow them with the `with_` setters.
    pub const fn new(
        name: &'static str,
        style: StoreStyle,
        watch: WatchMode,
        safety: SafetyClass,
    ) -> Self {
        Self {
            name,
            style,
            watch,
            safety,
            min_ttl: Duration::from_millis(1),
            max_ttl: MAX_TTL,
            expiry_slack: ExpirySlack::NONE,
            ttl_grant: TtlGrant::AtLeastAsked,
        }
    }

    /// The ttls the store honours, both ends included.
    #[must_use]
    pub const fn with_ttl_range(mut self, min: Duration, max: Duration) -> Self {
        self.min_ttl = min;
        self.max_ttl = max;
        self
    }

    /// How much later than the ttl the store may free a dead holder's
    /// lease.
    #[must_use]
    pub const fn with_expiry_slack(mut self, slack: ExpirySlack) -> Self {
        self.expiry_slack = slack;
        self
    }

    /// Whether the store may grant a shorter ttl than asked.
    #[must_use]
    pub const fn with_ttl_grant(mut self, grant: TtlGrant) -> Self {
        self.ttl_grant = grant;
        self
    }

    /// The longest ttl the core lets a candidate ask of this store:
    /// [`max_ttl`](Self::max_ttl), capped at [`MAX_TTL`].
    pub fn effective_max_ttl(&self) -> Duration {
        self.max_ttl.min(MAX_TTL)
    }

    /// Whether `ttl` lies in `min_ttl..=effective_max_ttl()`.
    pub fn ttl_in_range(&self, ttl: Duration) -> bool {
        ttl >= self.min_ttl && ttl <= self.effective_max_ttl()
    }

    /// How much later than `ttl` this store may free a dead holder's lease
    /// of that ttl.
    pub fn expiry_slack_for(&self, ttl: Duration) -> Duration {
        self.expiry_slack.for_ttl(ttl)
    }
}

/// A lease store. See the [module docs](self) for the contract every
/// implementation must satisfy.
///
/// All methods are single attempts: no retries inside. Retrying, backoff and
/// deadlines belong to the [`Candidate`](crate::Candidate).
pub trait LeaseStore: Send + Sync + 'static {
    /// Facts about this store.
    fn info(&self) -> StoreInfo;

    /// Tries once to take the election's lease for `req.holder`.
    ///
    /// `queued` is the caller's place in line from an earlier `Held` answer
    /// (queue stores only; race stores ignore it). If that record has
    /// expired in the meantime, a queue store creates a new one.
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`]. Someone else leading is not an error.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if the future is dropped the request may have won
    /// anyway. The record then expires after `ttl`; a queue store's record
    /// stays in line until then.
    fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> impl Future<Output = Result<Acquire, StoreError>> + Send;

    /// Extends the caller's own record by its ttl, from the instant this call
    /// is sent.
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`]. A lost lease is `Ok(Renewal::Lost)`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: a dropped renewal either extended the lease or
    /// did not; the caller's deadline is measured from its last *confirmed*
    /// renewal, so either is safe.
    fn renew(&self, lease: &Lease) -> impl Future<Output = Result<Renewal, StoreError>> + Send;

    /// Frees the caller's own record. Idempotent.
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`]; the record then expires by its ttl.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: the record is released or expires by its ttl.
    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Replaces the metadata of the caller's own live record (same holder,
    /// same token) with `metadata`, keeping its token, holder, handle and
    /// expiry: the term goes on, and followers' `current_leader` and
    /// `watch` show the new metadata (contract item 8). On a queue store
    /// the record may be a place in line; it then leads with this
    /// metadata.
    ///
    /// The update does not renew: the caller's deadline stays where its
    /// last confirmed acquire or renewal put it, whatever a store does to
    /// the record's expiry on the side (it never moves it earlier).
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`]: [`ErrorKind::Config`](crate::ErrorKind::Config)
    /// for metadata the store cannot hold (nothing is written then). A
    /// record that is gone, expired or someone else's is
    /// `Ok(Renewal::Lost)`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if the future is dropped the record may show the
    /// old metadata or the new. Either way the lease is unaffected (the
    /// next `renew` works as before), and calling again with the same
    /// metadata is harmless.
    fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> impl Future<Output = Result<Renewal, StoreError>> + Send;

    /// Reads who leads `election` now.
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    fn current_leader(
        &self,
        election: &ElectionName,
    ) -> impl Future<Output = Result<Option<LeaderInfo>, StoreError>> + Send;

    /// Reads the candidates of `election` (contract item 9): on a queue
    /// store its line, the leader first (empty when nobody stands in
    /// line); on a race store that keeps a roster, the holders enrolled
    /// ([`enroll`](Self::enroll)) in holder order, the leader among them
    /// when it enrolled; `None` on a store that keeps neither.
    ///
    /// Read-only: by the time the answer arrives the line may have moved,
    /// so it proves nothing about who leads. A store lists the records it
    /// can tell are live; one that a queue store removes with its session
    /// or lease (etcd, ZooKeeper) is listed until the store removes it. A
    /// record the store cannot parse is shown as `current_leader` would
    /// show it at the head, or the call fails as `current_leader` does
    /// (contract item 7).
    ///
    /// The default answers `None`; a queue store and a store with a roster
    /// override it, and so does every store that wraps another (it
    /// forwards the call, or the list is hidden).
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    fn candidates(
        &self,
        election: &ElectionName,
    ) -> impl Future<Output = Result<Option<Vec<Candidacy>>, StoreError>> + Send {
        let _ = election;
        async { Ok(None) }
    }

    /// Puts `req.holder` on the roster of `req.election` with
    /// `req.metadata`, or refreshes its entry, for `req.ttl` from the
    /// instant this call is sent (contract item 10). Race stores keep a
    /// roster; the default, for a queue store (whose line is its roster)
    /// or a store without one, does nothing.
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`]; the entry then lapses by its last ttl.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: the entry is refreshed or lapses by its ttl.
    fn enroll(&self, req: &AcquireRequest) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = req;
        async { Ok(()) }
    }

    /// Takes `holder` off the roster of `election` (contract item 10).
    /// Idempotent; the default does nothing.
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`]; the entry then lapses by its ttl.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: the entry is gone or lapses by its ttl.
    fn withdraw(
        &self,
        election: &ElectionName,
        holder: &HolderId,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (election, holder);
        async { Ok(()) }
    }

    /// Gives the caller's own lease to `successor` (contract item 11): on
    /// a race store the record is freed reserved for `successor` until
    /// `window` after this call is sent; on a queue store the candidates
    /// of regent's standing between the caller and `successor` are taken
    /// out of line with the caller's record, in one atomic step. Where the
    /// store cannot, it releases as [`release`](Self::release) does and
    /// answers [`HandOff::Released`]; the default always does that.
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`]; the record then expires by its ttl.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: the record is freed (reserved or not) or
    /// expires by its ttl.
    fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> impl Future<Output = Result<HandOff, StoreError>> + Send {
        let _ = (successor, window);
        async move {
            self.release(lease).await?;
            Ok(HandOff::Released)
        }
    }

    /// Starts watching who leads `election`.
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`] when the watch cannot be started.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe; dropping the returned stream stops the watch.
    fn watch(
        &self,
        election: &ElectionName,
    ) -> impl Future<Output = Result<LeaderStream, StoreError>> + Send;
}
