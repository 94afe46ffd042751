//! regent's lease election engine: the types, the store contract, the
//! [`Candidate`] that campaigns, the [`Leadership`] guard that proves
//! leadership, the [`Supervisor`] that runs work only on the leader, and the
//! [`Observer`] for instances that only watch. No network client lives here:
//! stores are separate crates implementing [`LeaseStore`].
//!
//! # Safety model
//!
//! * **The store's clock decides.** A lease expires by the store's TTL (the
//!   server's clock wherever the store has one). regent never compares
//!   wall-clock timestamps across hosts.
//! * **The holder measures from the instant it sent the request.** After an
//!   acquire or renewal sent at `t0` (monotonic clock) and confirmed by the
//!   store, the holder counts on the lease until its *local deadline*
//!   `t0 + ttl*(1-drift) - margin` (defaults: 1 % drift, 5 ms margin), never
//!   from when the reply arrived. The store started its TTL no earlier than
//!   `t0`, so the local deadline falls before the store's expiry even when a
//!   reply is slow. (Chubby does this; etcd's Go client measures from the
//!   reply, which is unsafe under delay.)
//! * **The leader steps down on its own clock.** If no renewal succeeds by
//!   `t0 + renew_deadline`, leadership ends: the cancellation token fires
//!   and the leader task gets `grace` to stop. The timing rules below make
//!   this strictly earlier than the store could hand the lease on.
//! * **A hung leader gives up.** With a health timeout, a
//!   [`Supervisor`] whose task stops beating its [`Heartbeat`] resigns the
//!   lease instead of renewing it forever.
//! * **Fencing tokens.** Every term carries a [`FencingToken`], strictly
//!   greater than every token issued before for that election — across
//!   holders, store restarts and deletion of the lease record. No lease
//!   system can guarantee mutual exclusion by time alone: a process can be
//!   paused (GC, SIGSTOP, swapping) or its writes delayed in the network
//!   past its lease. The resource the leader writes must remember the largest
//!   token it has seen and reject smaller ones; then a stale leader's writes
//!   are refused. regent makes the token the only proof of leadership: the
//!   [`Leadership`] guard has no `is_leader() -> bool`, and
//!   [`Leadership::check`] answers with the token or with why the term
//!   ended. [`Status::is_leader`] exists for display and health endpoints:
//!   a snapshot of what the candidate last published, which proves
//!   nothing.
//!
//! # Timing rules
//!
//! Checked when a candidate is built ([`CandidateBuilder::build`]); the error
//! names the rule:
//!
//! * `ttl * (1 - drift) - margin > renew_deadline` — step down before the
//!   local deadline;
//! * `renew_deadline > 1.2 * renew_every` — room to retry a failed renewal;
//! * `renew_deadline + grace <= ttl * (1 - drift) - margin` — the task is
//!   stopped before the lease can pass on;
//! * `ttl` lies within the store's range ([`StoreInfo::min_ttl`] ..=
//!   [`StoreInfo::max_ttl`]), and is at most a day.
//!
//! Defaults derive from `ttl` (10 s): renew every `ttl/5`, step down after
//! `3*ttl/5`, grace 2 s (less at short ttls: [`Timing::default_grace`]);
//! a follower's retry ([`Timing::retry_every`]) defaults to the renew
//! interval (the ttl while someone leads and the watch of a store that
//! notifies is open).
//! [`Timing`] draws the timeline of a lease; [`Candidate::explain`] turns
//! settings into worst-case failover and safety-budget numbers.
//!
//! # Running work on the leader
//!
//! [`Supervisor`] runs a task only while leading, cancels it when
//! leadership ends, hands the lease over when it finishes, and campaigns
//! again by its [`Restart`] policy (per instance, not per fleet);
//! [`Supervisor::run_until`] stops it on a signal and releases the lease.
//!
//! # Fencing contract
//!
//! A store must issue tokens that grow strictly per election, forever: a
//! counter bumped in the acquire's transaction, in a table of its own so
//! that deleting the lease row keeps it (SQLite), the leader key's create
//! revision (etcd), the key's modify index at acquisition (Consul), a
//! counter in the blob's metadata that also grows with the service's clock
//! (Azure Blob), the node's czxid (ZooKeeper), a counter in the process
//! (the memory store). A resource accepts a write with token `t` only if
//! `t >=` the largest token it has accepted.
//!
//! # Stores
//!
//! The contract is in [`store`]; [`memory::MemoryStore`] implements it in
//! process memory with fault injection, for tests. The stores built are
//! separate crates: `regent-sqlite`, `regent-etcd`, `regent-consul`,
//! `regent-azblob`, `regent-zookeeper` and `regent-postgres` (a Redis
//! store is planned). Every store crate runs the conformance suite
//! (`testing`, feature `testing`) against its real engine. [`Layered`]
//! wraps a store with a [`StoreLayer`] that sees every call: the test
//! layers count, slow, fail or flaw calls, and `regent-monitor` counts and
//! times a service's store requests for its metrics.
//!
//! # Feature `serde`
//!
//! `Serialize` and `Deserialize` for the values a service shows or sends:
//! [`ElectionName`] and [`HolderId`] as strings (checked again on the way
//! in), [`FencingToken`] as its number, [`Metadata`] as an object of
//! strings, [`LeaderInfo`], and [`Status`] tagged by its state
//! (`{"state":"leader","leader":{"holder":"web-1","token":7,"metadata":{}}}`).

mod backoff;
mod candidate;
mod election;
mod error;
mod events;
pub mod handover;
mod layer;
mod leadership;
mod limits;
pub mod many;
mod observer;
pub mod repeats;
#[cfg(feature = "serde")]
mod serde_impls;
mod status;
pub mod store;
mod supervisor;
pub mod target;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod timing;
mod types;

pub use candidate::Candidate;
pub use candidate::builder::{CandidateBuilder, DEFAULT_SETTLE, DEFAULT_TTL};
pub use election::Election;
pub use error::{
    BoxError, CampaignError, ConfigError, ErrorKind, InvalidName, StoreError, find_cause, report,
};
pub use events::{EndReason, Ended, TermEvent, TermEvents};
pub use layer::{Call, CallKind, Layered, StoreLayer};
pub use leadership::{
    Leadership, LeaseState, NotLeader, ProclaimError, TermKeeper, TermStart, TermState,
};
pub use limits::{MAX_TTL, MIN_TTL};
pub use many::{
    ElectionFailure, LeadersWatch, ObserveError, ObserverSet, SetChanges, SetConfigError,
    SetFailed, SupervisorSet, SupervisorSetBuilder,
};
pub use observer::{LeaderChanges, LeaderWatch, Observer};
pub use status::{Status, publish as publish_status};
pub use store::memory;
pub use store::{
    Acquire, AcquireRequest, BoxStore, DynLeaseStore, ExpirySlack, HandOff, LeaderStream,
    LeaseStore, Renewal, SafetyClass, StoreInfo, StoreStyle, TtlGrant, WatchMode, poll_watch,
};
pub use supervisor::{
    Heartbeat, LeaderContext, Restart, Supervisor, SupervisorExit, TaskPanic, Term, TermOutcome,
};
pub use target::{
    OptionKind, OptionValue, Options, Source, StoreKind, StoreOption, Target, TargetError,
};
pub use timing::{Explanation, Timing};
/// Re-exported so users need not depend on `tokio-util` for the leader
/// task's cancellation.
pub use tokio_util::sync::CancellationToken;
pub use tokio_util::task::TaskTracker;
pub use types::{
    Candidacy, ElectionName, FencingToken, HolderId, LeaderInfo, Lease, LeaseHandle,
    MAX_ELECTION_NAME_LEN, MAX_HOLDER_ID_LEN, MAX_METADATA_LEN, Metadata,
};

#[cfg(test)]
mod send_sync {
    use super::*;

    fn is_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        is_send_sync::<Candidate<memory::MemoryStore>>();
        is_send_sync::<Candidate<BoxStore>>();
        is_send_sync::<Leadership>();
        is_send_sync::<Observer<BoxStore>>();
        is_send_sync::<Supervisor<Candidate<BoxStore>>>();
        is_send_sync::<LeaderContext>();
        is_send_sync::<StoreError>();
        is_send_sync::<CampaignError>();
        is_send_sync::<Status>();
        is_send_sync::<Term>();
        is_send_sync::<TaskPanic>();
    }
}
