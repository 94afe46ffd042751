//! The store contract: what every backend (SQLite, etcd, Consul, Azure Blob,
//! ZooKeeper, the in-memory store) must do, and nothing more.
//!
//! # Two styles of store
//!
//! * **Race** stores (SQLite, Consul, Azure Blob, Redis, PostgreSQL) keep one
//!   record per election. [`LeaseStore::try_acquire`] is an atomic
//!   compare-and-set that wins only if the record is free or expired.
//!   `queued` in [`Acquire::Held`] is always `None`.
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
//! 5. `current_leader` reads who leads; `watch` streams changes, including
//!    "no leader". Stores with notifications use them; others poll, and say
//!    so in [`StoreInfo::watch`].
//! 6. Errors are classified by [`ErrorKind`](crate::ErrorKind): transient
//!    (retry with backoff) or permanent.
//! 7. Garbage in the store (a foreign value on our key, a malformed record) is
//!    [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) or "held by someone
//!    else", never a panic and never a silent takeover.
//!
//! # Timing
//!
//! A store must never grant less time than asked: a [`Lease`] returned by a
//! `Won` acquire or a `Renewed` renewal stays valid on the store's clock for
//! at least `ttl` after the instant the request was *sent*. (The store
//! applies the request after it was sent, so any server-side TTL started
//! when the request is applied satisfies this.) A store that cannot honour a
//! requested TTL (too short, too long) returns
//! [`ErrorKind::Config`](crate::ErrorKind::Config) and never rounds down.
//! On a queue store, a `Won` result must have refreshed the record's TTL
//! within the same call, so that the holder's deadline can be measured from
//! that call.
//!
//! The conformance suite (`regent_core::testing`, feature `testing`) checks
//! all of this against a real engine.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;

use crate::error::StoreError;
use crate::types::{ElectionName, HolderId, LeaderInfo, Lease, Metadata};

mod boxed;
pub mod memory;

pub use boxed::{BoxStore, DynLeaseStore};

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

/// The outcome of [`LeaseStore::renew`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// The record is ours for `ttl` more from the instant the call was sent.
    Renewed,
    /// The record is gone, expired, or belongs to someone else.
    Lost,
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

/// How much a backend can be trusted (ARCHITECTURE §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SafetyClass {
    /// Replicated by consensus (etcd, Consul, ZooKeeper): survives the loss
    /// of a minority of servers.
    Consensus,
    /// One durable node (SQLite, PostgreSQL, Redis with AOF): a single point
    /// of failure, but never two leaders while it lives.
    SingleNode,
    /// Process memory only: for tests.
    Ephemeral,
    /// Timing only (peer algorithms without quorum): a partition can elect
    /// two leaders; fencing tokens are the only protection.
    TimingOnly,
}

/// Facts about a store that the core and the CLI need.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// How much later than `ttl` the store may expire a dead holder's lease
    /// (Consul: up to another ttl). Followers wait this much more.
    pub expiry_slack: Duration,
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
