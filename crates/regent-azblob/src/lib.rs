//! regent's Azure Blob store: leader election on blob leases, the Leader
//! Election pattern's own reference implementation, with the timing,
//! fencing and failure handling regent's safety model asks for.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use regent_core::{Candidate, ElectionName, HolderId};
//! use regent_azblob::{AzblobStore, StorageAccount};
//!
//! // As the SDKs and `az` find the account: UseDevelopmentStorage=true for Azurite.
//! let account = StorageAccount::from_connection_string(
//!     &std::env::var("AZURE_STORAGE_CONNECTION_STRING")?,
//! )?;
//! let store = AzblobStore::builder(account, "leases").build()?;
//! let candidate = Candidate::builder(
//!     store,
//!     ElectionName::new("MyLeaderCoordinatorTask")?,
//!     HolderId::new("node-1")?,
//! )
//! .ttl(Duration::from_secs(15)) // a blob lease lasts 15 to 60 s
//! .build()?;
//! let leadership = candidate.campaign().await?;
//! let token = leadership.token(); // pass it with every write
//! # let _ = token;
//! leadership.resign().await?;
//! # Ok(()) }
//! ```
//!
//! [`AzblobStore`] implements [`regent_core::LeaseStore`] as a *race*
//! store ([`StoreStyle::Race`](regent_core::StoreStyle::Race)): one blob
//! per election, won by the Blob service's lease. It passes regent's store
//! conformance suite against Azurite, Microsoft's storage emulator
//! (`tests/store.rs`); `examples/blob_distributed_mutex.rs` is the
//! reference sample's program in Rust.
//!
//! # The reference sample, mapped
//!
//! The pattern's sample (a .NET `BlobDistributedMutex` on the blob
//! `leases/MyLeaderCoordinatorTask`) in regent's names:
//!
//! | the sample | regent |
//! | --- | --- |
//! | `BlobSettings` (account, container, blob) | a [`StorageAccount`] ([`StorageAccount::from_connection_string`], [`StorageAccount::development`]) and [`AzblobStore::builder`]`(account, "leases")`; the blob is the election's name, or [`AzblobStoreBuilder::blob`]`("MyLeaderCoordinatorTask")` |
//! | `BlobLeaseManager` (acquire, renew, release) | [`AzblobStore`]: [`try_acquire`](regent_core::LeaseStore::try_acquire), [`renew`](regent_core::LeaseStore::renew), [`release`](regent_core::LeaseStore::release), and [`AzblobStore::break_lease`] |
//! | `BlobDistributedMutex` | [`Candidate`](regent_core::Candidate), with a [`Supervisor`](regent_core::Supervisor) over it |
//! | `RunTaskWhenMutexAcquired(token)` | [`Supervisor::run`](regent_core::Supervisor::run): the task gets a [`LeaderContext`](regent_core::LeaderContext) with the term's cancellation and fencing token |
//! | `TryAcquireLeaseOrWait` | the campaign of [`Candidate::campaign`](regent_core::Candidate::campaign): try, then again every `retry_every` |
//! | `KeepRenewingLease` | the candidate's renewal, every `renew_every` (ttl/5), stepping down at `renew_deadline` (3·ttl/5) without a renewal |
//! | `CancelAllWhenAnyCompletes` | the supervisor: a lost lease cancels the task, a finished task resigns the lease; [`Candidate::shutdown`](regent_core::Candidate::shutdown) releases it |
//!
//! What the sample leaves out and regent does not:
//!
//! * **A renewal bounded in time.** Each request is bounded by the store's
//!   call timeout ([`AzblobStoreBuilder::call_timeout`], 5 s), and the
//!   client retries only the service's "busy" answers (408, 429, 5xx)
//!   within it; no SDK retry policy can keep a dead lease alive locally.
//!   The leader steps down on its own clock at its renew deadline, whatever
//!   the requests are doing.
//! * **A lease broken from outside** (`az storage blob lease break`, or
//!   [`AzblobStore::break_lease`]) ends leadership at the next renewal,
//!   within one renew interval: the service refuses to renew a broken
//!   lease. An acquire by someone else while regent leads is refused by the
//!   service.
//! * **A hung task gives the lease up**: the supervisor's health watchdog
//!   ([`Supervisor::health_timeout`](regent_core::Supervisor::health_timeout)).
//! * **The blob holds nothing but the lease record**, and anything else in
//!   it (content, metadata of other names, a malformed record, an infinite
//!   lease) is a [`Corrupt`](regent_core::ErrorKind::Corrupt) error naming
//!   the blob, never a takeover.
//! * **The service unreachable**: the leader steps down by its deadline,
//!   followers keep trying with backoff, and leadership resumes when the
//!   service is back.
//! * **Fencing tokens** that grow across every holder, release, break and
//!   re-creation of the blob ([below](#fencing-tokens)).
//!
//! # The lease record
//!
//! The container is created when missing, and so is the blob: empty, with
//! the metadata `regentrecord=1`. A term is won in three requests:
//!
//! 1. **read** the blob's properties (`HEAD`): its lease state, its ETag,
//!    its metadata. Leased: [`Held`](regent_core::Acquire::Held), by the
//!    holder the metadata names.
//! 2. **acquire** the lease (`PUT ?comp=lease`, action `acquire`, duration
//!    = the ttl rounded up to whole seconds, a lease id of our own),
//!    conditional on the ETag read (`If-Match`), so that a record that
//!    changed meanwhile is never taken.
//! 3. **write the record** under the new lease (`PUT ?comp=metadata` with
//!    `x-ms-lease-id`, `If-Match` the same ETag): `regentholder` = the
//!    holder id, `regenttoken` = the fencing token, `regentmetadata` =
//!    the holder's metadata (base64 of a JSON object, when there is some).
//!    Only once this succeeds does the term begin; if it fails the lease is
//!    given back.
//!
//! **Renew** first reads the blob (the lease must still be held, the record
//! the one this term wrote: same holder, token and ETag), then sends the
//! lease's `renew` with our lease id and `If-Match` that ETag. The read is
//! there because the service renews an expired lease that nobody took
//! since, which would revive a lease the contract says is gone; the
//! `If-Match`, because Azurite 3.35 renews even a lease whose blob was
//! written meanwhile (Azurite issue 2352). A renewal that reaches the
//! service in the milliseconds between the read and the lease running out
//! revives it still: nobody held it meanwhile, and a candidate steps down
//! long before. Refused (409, 412, 404), or a record not ours:
//! [`Renewal::Lost`](regent_core::Renewal::Lost). **Release** reads the
//! blob too, and sends the lease's `release` with our lease id only while
//! the record is this term's; someone else's lease is never touched, and
//! twice is harmless. **Update metadata** (two requests, like a renewal)
//! reads the blob as renew does, then sends Set Blob Metadata with our
//! lease id and `If-Match` the record's ETag: the same record with the new
//! `regentmetadata` (holder and token unchanged, so the term goes on; the
//! lease is not renewed by it). Set Blob Metadata gives the record a new
//! ETag, which later renewals must send: the store keeps it per term (its
//! clones share it), and a renewal, an update and the release of one term
//! run one at a time on a store, so that none sends an ETag another has
//! just replaced. An update whose answer never came (dropped, timed out)
//! may have been applied: the next call that finds the record with this
//! term's holder, token and that update's metadata takes its ETag as the
//! term's. (A term is known by the store that renews it: a lease updated
//! through one store and renewed through another, separately built, is
//! lost at that renewal.) **Watch** reads the blob every
//! [`DEFAULT_POLL_INTERVAL`] ([`WatchMode::Poll`](regent_core::WatchMode::Poll)).
//!
//! Who leads is what the record says while the lease is held. Between a
//! winner's acquire and its record write (a few milliseconds), or while a
//! lease is held by another program (never regent's infinite ones, which
//! are an error), the record still names the term before: a read cannot
//! tell, and [`current_leader`](regent_core::LeaseStore::current_leader)
//! reports that term.
//!
//! # Fencing tokens
//!
//! The counter in the record grows by one per term, but a counter dies
//! with its blob, and a blob can be deleted (once its lease is broken) and
//! made again. So a token is also never below the service's clock at the
//! term's start: `token = max(last + 1, second × 1 000 000)`, `second` the
//! `Date` of the acquire's answer in whole seconds since 1970 (the token is
//! not a timestamp in microseconds: the million leaves room for a million
//! terms in a second, which three requests per term rule out). A new blob's
//! first term waits (up to 3 s) until the service's clock is two seconds
//! past the second the blob was made, so that its first token exceeds every
//! token of the blob before it, all issued no later than that second by a
//! clock that may differ from the one stamping the blob by less than a
//! second. The tokens are large numbers (1 795 341 607 000 000 in November
//! 2026); they only ever grow, as long as the service's clocks agree within
//! a second and never step back by more across a deletion of the blob, and
//! nobody restores the blob from an older copy (a snapshot, an earlier
//! version), which would bring back a smaller counter: the blob is the
//! election's, not data to back up.
//!
//! # Timing
//!
//! A lease lasts 15 to 60 s ([`MIN_TTL`], [`MAX_TTL`]); other ttls are
//! refused when the candidate is built. The service ends a lease on its own
//! clock, the duration after the acquire or renew arrived, so a dead
//! holder's lease is free at most [`EXPIRY_SLACK`] (1 s) after its ttl.
//! With the core's defaults at ttl 15 s the leader renews every 3 s and
//! steps down 9 s after its last successful renewal was sent, 6 s before
//! the lease can pass on.
//!
//! **What a crash costs**: a leader that dies without releasing leaves its
//! lease to run out, which the service frees its duration after the last
//! renewal arrived; a follower takes it at its next try (`retry_every`,
//! the renew interval by default). So the next leader starts at most
//! **the ttl plus one renew interval** after the crash, 18 s at ttl 15 s
//! ([`EXPIRY_SLACK`] is the 1 s more regent's timing allows a service
//! whose clocks differ).
//! A graceful stop releases the lease, and the next leader starts at its
//! next try, within one retry interval. Measured on Azurite: see the
//! README.
//!
//! # Safety class
//!
//! [`SafetyClass::Consensus`](regent_core::SafetyClass::Consensus): Azure
//! Storage keeps every blob, its lease and its metadata in three
//! synchronous replicas and answers with strong consistency; a lease is
//! decided by one partition server's clock, never by comparing clients'
//! clocks. Azurite, the emulator, is one process for development and
//! tests: it loses leases when it restarts (see the test kit's docs).
//!
//! # Why a REST client of its own
//!
//! The maintained Azure SDK for Rust (`azure_storage_blob` 1.x)
//! authenticates by Entra ID token credentials or SAS URLs, not the shared
//! key of connection strings, which is what Azurite and most users'
//! `AZURE_STORAGE_CONNECTION_STRING` hold; the older `azure_storage_blobs`
//! has a shared-key mode but is unmaintained, and both bring their own
//! retry policies, which would have to be disabled. The store needs seven
//! operations (create container, create blob, read properties, lease
//! acquire/renew/release/break, set metadata), so it speaks the REST API
//! (version 2021-12-02) itself over reqwest, with HTTP/1.1 and rustls:
//! Shared Key signing (HMAC-SHA256 with ring) or a SAS token. Keys and
//! tokens never reach a log or a message: the `Authorization` header is
//! marked sensitive, and errors never carry a URL with its query.

mod account;
mod acquire;
mod blob;
mod builder;
mod lease;
mod record;
mod rest;
mod store;
mod target;

pub use account::{
    AccountError, DEVELOPMENT_ACCOUNT, DEVELOPMENT_BLOB_ENDPOINT, DEVELOPMENT_KEY, StorageAccount,
};
pub use acquire::TOKENS_PER_SECOND;
pub use blob::AzblobStore;
pub use builder::{AzblobStoreBuilder, DEFAULT_CALL_TIMEOUT, DEFAULT_POLL_INTERVAL};
pub use lease::{MAX_TTL, MIN_TTL};
pub use store::EXPIRY_SLACK;
pub use target::{AzblobTarget, KIND};
