//! regent's embedded default store: the leases of any number of elections in
//! one SQLite file, shared by the processes of **one host**.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("regent.db");
//! use std::time::Duration;
//! use regent_core::{Candidate, ElectionName, HolderId};
//! use regent_sqlite::SqliteStore;
//!
//! let store = SqliteStore::open(&path).await?; // e.g. /var/lib/app/regent.db
//! let candidate = Candidate::builder(
//!     store,
//!     ElectionName::new("report-scheduler")?,
//!     HolderId::new(format!("pid-{}", std::process::id()))?,
//! )
//! .ttl(Duration::from_secs(5))
//! .build()?;
//! let leadership = candidate.campaign().await?;
//! let token = leadership.token(); // pass it with every write
//! # let _ = token;
//! leadership.resign().await?;
//! # Ok(()) }
//! ```
//!
//! [`SqliteStore`] implements [`regent_core::LeaseStore`] as a *race* store
//! ([`StoreStyle::Race`](regent_core::StoreStyle::Race)): one row per
//! election, taken by a compare-and-set in a `BEGIN IMMEDIATE` transaction.
//! It passes regent's store conformance suite.
//!
//! # Safety class
//!
//! [`SafetyClass::SingleNode`](regent_core::SafetyClass::SingleNode): one
//! durable file on one disk. It never elects two leaders while the file and
//! the host's clock behave, but it is a single point of failure, and it
//! elects only among processes of the host that holds the file.
//!
//! **Do not share the file across hosts** (NFS, SMB, a cluster file system,
//! a volume mounted by two machines). Lease expiry is measured on the
//! host's own monotonic clock, which means nothing on another host; and
//! SQLite's locking and WAL shared memory are not reliable over network file
//! systems. Containers on one host may share the file through a bind mount:
//! they share the kernel, its clock and its boot id (unless they run in
//! separate *time namespaces*, as CRIU restores do, which shift
//! `CLOCK_MONOTONIC`: don't).
//!
//! # The clock
//!
//! A lease row stores its expiry as nanoseconds on `CLOCK_MONOTONIC`, read
//! with `rustix::time::clock_gettime` inside the transaction that writes or
//! judges the row. Why this clock:
//!
//! * **One clock for every process on the host.** Every process reads the
//!   same `CLOCK_MONOTONIC`, so "has this lease expired?" has one answer,
//!   whoever asks. There is no drift between holder and store: the clock is
//!   the same clock.
//! * **Immune to wall-clock jumps.** NTP steps, an operator's `date -s` or
//!   a leap second never move it, so they cannot expire a lease early or
//!   keep a dead one alive. (Wall-clock time is never used.)
//! * **It is the holder's clock.** On Linux `std::time::Instant`, and so
//!   `tokio::time::Instant` on which regent's holders measure their local
//!   deadline, *is* `CLOCK_MONOTONIC` (a unit test pins this). A holder
//!   reads `t0` before it sends an acquire or renewal; the store reads its
//!   `now` later, under the write lock, and sets `expires_at = now + ttl`.
//!   So the holder's deadline `t0 + ttl·(1 − drift) − margin` always comes
//!   strictly before the store's expiry, on one clock, with the configured
//!   drift and margin as pure extra safety.
//! * **Not `CLOCK_BOOTTIME`.** That clock advances while the machine is
//!   suspended; `CLOCK_MONOTONIC` does not. Had the store used BOOTTIME,
//!   after a suspend it would expire a lease whose holder (on MONOTONIC)
//!   still believes it has time left: two leaders. With MONOTONIC both sides
//!   stop together, and after resume the holder and the store agree again.
//!
//! # The boot id
//!
//! `CLOCK_MONOTONIC` restarts from zero at boot, so an expiry written before
//! a reboot cannot be compared with a reading after it. Each row stores the
//! boot id it was written under (`/proc/sys/kernel/random/boot_id`, read
//! once when the store opens). A row written under another boot id is
//! expired, whatever its expiry says: all its holders died with that boot.
//! The store therefore needs Linux; elsewhere [`SqliteStore::open`] fails
//! with [`ErrorKind::Config`](regent_core::ErrorKind::Config).
//!
//! # Watch
//!
//! SQLite has no notifications across processes, so
//! [`watch`](regent_core::LeaseStore::watch) polls: it reads the lease row
//! every [`DEFAULT_POLL_INTERVAL`] (100 ms; see
//! [`SqliteStoreBuilder::poll_interval`]) and yields the leader whenever it
//! changes, including "no leader" when a lease expires with no one calling.
//! [`StoreInfo::watch`](regent_core::StoreInfo::watch) says
//! [`WatchMode::Poll`](regent_core::WatchMode::Poll) with the interval. The
//! stream runs no task of its own: dropping it stops the polling.
//!
//! # Schema
//!
//! ```sql
//! CREATE TABLE regent_meta (
//!     key   TEXT PRIMARY KEY NOT NULL,   -- 'schema_version'
//!     value TEXT NOT NULL                -- '1'
//! );
//! CREATE TABLE regent_fencing (
//!     election   TEXT PRIMARY KEY NOT NULL,
//!     last_token INTEGER NOT NULL        -- the last fencing token issued
//! );
//! CREATE TABLE regent_lease (
//!     election      TEXT PRIMARY KEY NOT NULL,
//!     holder        TEXT NOT NULL,       -- a HolderId
//!     token         INTEGER NOT NULL,    -- this term's fencing token, >= 1
//!     expires_at_ns INTEGER NOT NULL,    -- CLOCK_MONOTONIC, nanoseconds
//!     ttl_ms        INTEGER NOT NULL,    -- renewals extend by this much
//!     boot_id       TEXT NOT NULL,       -- the boot expires_at_ns belongs to
//!     metadata      TEXT NOT NULL        -- a JSON object of strings
//! );
//! ```
//!
//! * **Acquire** (`BEGIN IMMEDIATE`): read the row; if it is live (same boot
//!   id, `expires_at_ns` after now, with now read inside the transaction),
//!   the answer is [`Acquire::Held`](regent_core::Acquire::Held) with that
//!   leader — even when the live row is the caller's own. Otherwise bump
//!   `regent_fencing.last_token` and write the row: the new term's token is
//!   the bumped counter.
//! * **Renew** (`BEGIN IMMEDIATE`): extend the row by its `ttl_ms` from now,
//!   only if holder *and* token match and the row is live. An expired row
//!   of ours is [`Renewal::Lost`](regent_core::Renewal::Lost), never revived.
//! * **Update metadata** (one `BEGIN IMMEDIATE` transaction, the cost of a
//!   renewal): replace the row's `metadata` only if holder *and* token match
//!   and the row is live; token, holder and `expires_at_ns` stay, so the
//!   term goes on and the update does not renew. Otherwise
//!   [`Renewal::Lost`](regent_core::Renewal::Lost). Watches see the new
//!   metadata at their next poll.
//! * **Release**: delete the row only if holder and token match. Idempotent.
//!
//! The fencing counter lives in its own table so that tokens keep growing
//! across release, expiry and deletion of the lease row.
//!
//! # What survives what
//!
//! | event | leases | fencing tokens |
//! | --- | --- | --- |
//! | a holder process dies | its lease expires after its ttl | keep growing |
//! | the lease row is deleted by hand | the election is free at once | keep growing |
//! | the host reboots | every lease is expired (boot id) | keep growing |
//! | power loss | every lease is expired (boot id) | keep growing: commits are fsynced |
//! | **the file is deleted or replaced** | gone | **reset: tokens start again at 1** |
//! | a `regent_fencing` row is deleted | an existing lease row becomes [`Corrupt`](regent_core::ErrorKind::Corrupt) | reset for that election |
//!
//! Deleting the database file (or its `regent_fencing` rows) restarts the
//! tokens: a resource that remembers a token from before would then refuse
//! every new leader. Delete the file only together with the state of the
//! resources it fences.
//!
//! Durability: the connection runs in WAL journal mode with
//! `synchronous = FULL`, so a committed token bump has reached the disk
//! before the acquire returns. With `NORMAL`, a power cut could lose the
//! last commits, and the next acquire would issue a token that a resource
//! may already have seen. WAL keeps `<file>-wal` and `<file>-shm` beside
//! the file: its directory must be writable.
//!
//! # Ttl
//!
//! The store honours ttls from [`MIN_TTL`] (10 ms) to
//! [`regent_core::MAX_TTL`] (one day), and refuses others with
//! [`ErrorKind::Config`](regent_core::ErrorKind::Config); it never rounds
//! down. A ttl is stored in whole milliseconds, rounded up, and the granted
//! [`Lease::ttl`](regent_core::Lease::ttl) says so. The minimum is low
//! because the clock is exact; a useful ttl is still far longer than a
//! commit (an fsync: milliseconds, more on a busy disk) and than the busy
//! timeout, or leases expire before their answers arrive. Seconds are usual.
//! Expiry has no slack ([`StoreInfo::expiry_slack`](regent_core::StoreInfo::expiry_slack)
//! is zero): a dead holder's lease is free exactly `ttl` after its last
//! renewal.
//!
//! # Errors
//!
//! Every [`StoreError`](regent_core::StoreError) names the operation, the
//! election and the path, and carries the rusqlite error as its source.
//!
//! | kind | when |
//! | --- | --- |
//! | [`Unavailable`](regent_core::ErrorKind::Unavailable) (transient) | another connection held the lock past the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`); I/O errors, a full disk; a blocking task that failed |
//! | [`Config`](regent_core::ErrorKind::Config) | the file cannot be opened or created (missing directory, a directory in its place, no permission, read-only); a database that is not regent's, or of another schema version; regent's tables dropped; a ttl out of range; no boot id |
//! | [`Auth`](regent_core::ErrorKind::Auth) | an SQLite authorizer refused a statement |
//! | [`Corrupt`](regent_core::ErrorKind::Corrupt) | the file is not a database or is damaged (`SQLITE_NOTADB`, `SQLITE_CORRUPT`); a lease row regent did not write |
//! | [`Protocol`](regent_core::ErrorKind::Protocol) | anything else: a bug |
//!
//! A lease row regent did not write — a holder that is not a
//! [`HolderId`](regent_core::HolderId), metadata that is not a JSON object
//! of strings, a token that is not positive or is above the election's
//! fencing counter, a missing counter, an expiry further away than its ttl —
//! is reported as `Corrupt`, naming the election and what is wrong. It is
//! never taken over, and never a panic: an operator deletes the row to free
//! the election.

mod clock;
mod db;
mod error;
mod store;
mod target;

pub use store::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_POLL_INTERVAL, MIN_TTL, SqliteStore, SqliteStoreBuilder,
};
pub use target::{KIND, SqliteTarget};

/// The schema version this build writes, and the only one it opens.
pub const SCHEMA_VERSION: i64 = db::SCHEMA_VERSION;
