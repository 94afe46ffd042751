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
//! book's page on this store (`docs/stores/azblob.md`).
//!
//! # Roster and hand-over
//!
//! A candidate that takes part in choosing the leader (priorities,
//! `regent handover`) enrolls on its election's *roster* at every renew
//! interval ([`enroll`](regent_core::LeaseStore::enroll)); the leader
//! reads the roster ([`candidates`](regent_core::LeaseStore::candidates))
//! and gives its lease to the one it chose
//! ([`release_to`](regent_core::LeaseStore::release_to)).
//!
//! **Where the entries live.** One empty blob per candidate beside the
//! election's, in the same container: the election's blob name, then
//! `~roster/`, then the holder id ([`AzblobStore::roster_blob`]: election
//! `jobs`, holder `node-1` is `jobs~roster/node-1`; bytes other than ASCII
//! letters, digits, `-`, `_` and `.`, and a final `.`, are written `~` and
//! two hex digits). No election name holds a `~`, so no election's blob is
//! among them. The entry is the blob's metadata: `regentroster=1`,
//! `regentholder`, `regentttl` (the ttl in milliseconds) and, when there
//! is some, `regentmetadata` (as in the lease record).
//!
//! **Expiry on the service's clock.** Enrolling writes the blob again
//! (Put Blob), which the service stamps with its own clock
//! (`Last-Modified`). `candidates` is one List Blobs of the roster's
//! prefix with metadata (one per 5,000 entries), and lists an entry while
//! the listing's `Date` is before its `Last-Modified` plus its ttl plus a
//! second: both stamps are the service's, in whole seconds, cut down, so
//! the second keeps an entry listed at least a ttl after its enroll was
//! sent, and lets it go at most a second later (the store's
//! [`EXPIRY_SLACK`]). The client's clock is never read. A blob there that
//! is not an entry regent wrote (content, other metadata, a ttl that is
//! no number, an entry naming another holder than its blob) is skipped,
//! not an error: the roster is for display and for choosing a successor,
//! and proves nothing. Listed in holder order.
//!
//! **What enrolling costs**: one request (Put Blob) per candidate per
//! renew interval, whatever the metadata. [`withdraw`](regent_core::LeaseStore::withdraw)
//! deletes the entry's blob, then lists the roster and deletes the
//! entries whose time has passed (candidates that crashed or stopped while
//! leading), each only as listed (`If-Match` its ETag), so that one
//! enrolled again meanwhile stays: two requests, and one per such entry.
//!
//! **The lease kept for a successor.** `release_to` reads the blob as
//! `release` does and, only while the lease is still this term's, writes
//! the record again under the lease (Set Blob Metadata with our lease id,
//! `If-Match` the term's ETag): the same holder, token and metadata, and
//! `regentreservedfor` = the successor, `regentreserveduntil` = the end
//! of the window on the service's clock, in milliseconds since 1970 (the
//! read's `Date`, a second for its whole-second stamp, and the window).
//! Then it releases the lease: three requests. An acquire reads the blob
//! as always; a free blob kept for another holder, while the read's `Date`
//! is before the end of the window, is [`Held`](regent_core::Acquire::Held)
//! with no leader (and `current_leader` shows none, the lease being
//! free). Otherwise the acquire goes on as from a free blob, `If-Match`
//! the ETag it read, so that a reservation written in between makes the
//! service refuse it. The successor's record, written by its acquire,
//! replaces the whole record and so clears the reservation; its token is
//! greater, as always. A reservation its successor never takes lapses by
//! the service's clock, at most a second (and a request) after the window.
//! A window of zero, or no room for the two names beside the holder's
//! metadata, is a plain release,
//! [`HandOff::Released`](regent_core::store::HandOff::Released). A regent
//! from before hand-overs reads a record with a reservation as
//! [`Corrupt`](regent_core::ErrorKind::Corrupt) (metadata of other names).
//!
//! With [`AzblobStoreBuilder::blob`] (one blob for every election of the
//! store) the hand-over requests (`NAME~handover`) are the blob's name
//! and `~handover`, never the election's blob itself.
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
//! retry policies, which would have to be disabled. The store needs a few
//! operations (create container, create, delete and list blobs, read
//! properties, lease acquire/renew/release/break, set metadata), so it
//! speaks the REST API (version 2021-12-02) itself over reqwest, with
//! HTTP/1.1 and rustls:
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
mod roster;
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
