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
//! The token fences writes only where the resource checks it. For data in
//! a SQLite database, [`fence::check_and_record`] is that check: one
//! statement in the transaction that writes the data, refusing a token
//! smaller than the largest it has recorded.
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
//! [`watch`](regent_core::LeaseStore::watch) polls: the store reads the
//! lease rows every [`DEFAULT_POLL_INTERVAL`] (100 ms; see
//! [`SqliteStoreBuilder::poll_interval`]) and each stream yields its
//! leader whenever it changes, including "no leader" when a lease expires
//! with no one calling.
//! [`StoreInfo::watch`](regent_core::StoreInfo::watch) says
//! [`WatchMode::Poll`](regent_core::WatchMode::Poll) with the interval.
//!
//! A release, or a new leader's win, does not wait for the poll: beside
//! the database `PATH` the store keeps a one-byte file, `PATH-wake`, the
//! **wake-up bell**. A commit that released or won a lease writes to it, and every store that watches
//! anything on this file (in this process or another) watches the bell
//! with inotify, on a thread of its own (`regent-sqlite-bell`, started by
//! the first watch), and polls at once when it rings. So a graceful
//! hand-over costs the release's commit, a wake-up, and the follower's
//! acquire, not a poll interval, and an observer names the new leader as
//! soon as it has won. Only releases and wins ring: renewals would wake
//! every watching process on every commit. A lease that expires (its
//! holder died) is still seen by the poll. The bell is a hint: where it
//! cannot be created, written or watched, the store logs it at debug level
//! and polls as before.
//!
//! One poll serves every stream of a store (and its clones), however many
//! elections they watch: one read transaction per interval, on the store's
//! connection thread. It reads rows only when something may have changed
//! them (`PRAGMA data_version` says another connection committed, or this
//! one wrote); otherwise it judges the rows it holds against the clock,
//! which is how it sees a lease expire. A few elections are read one
//! lookup each, many in one scan of the table; a row that changed only its
//! expiry (a renewal) is neither copied nor validated again. Streams of
//! one election share its state. A stream runs no task of its own:
//! dropping it stops nothing but itself, and the poll forgets an election
//! no stream watches any more. When the poll finds a row it cannot read
//! (garbage), the stream reads it again through
//! [`current_leader`](regent_core::LeaseStore::current_leader) and yields
//! that error; a permanent one ends the stream, as
//! [`poll_watch`](regent_core::store::poll_watch) would.
//!
//! # One process, many elections
//!
//! A store and its clones share one connection, used by one thread of the
//! store's own (named `regent-sqlite`), fed by a channel. The thread runs
//! the calls in batches:
//!
//! * **Writes** (acquire, renew, release, update metadata) are
//!   *group-committed*: every write waiting runs in one `BEGIN IMMEDIATE`
//!   transaction, then one `COMMIT`, one fsync for all of them. A write is
//!   answered only once that commit succeeded, so a renewal or an acquire
//!   is never reported before it is durable; if the transaction cannot
//!   begin (another process holds the write lock past the busy timeout) or
//!   commit, every write of the batch gets that error, classified as
//!   before. A write
//!   that fails alone (garbage in its row) leaves the others' work in
//!   place: an acquire, which writes two statements, runs in a savepoint of
//!   its own; a renewal, a release or a metadata update writes one
//!   statement, which SQLite undoes itself if it fails.
//! * **The commit interval** ([`SqliteStoreBuilder::commit_interval`],
//!   default [`DEFAULT_COMMIT_INTERVAL`], 50 ms): after a few commits in a
//!   row, the next one starts no sooner than this after the one before;
//!   the writes that come meanwhile share it. Without it, renewals that
//!   come one at a time (as they do once elections have run for a while)
//!   would each have their own commit, and cost nearly what they did
//!   before. One that comes after a quiet spell does not wait, and neither
//!   does one after commits that wrote nothing.
//! * **The wait is bounded by the lease's ttl**: a write waits for others
//!   to join it at most the commit interval, and at most a twentieth of
//!   its lease's ttl, whichever is shorter; the batch commits when its most
//!   urgent write may wait no longer. A candidate renews every ttl/5 and
//!   steps down 3·ttl/5 after its last renewal sent, and one renewal cycle
//!   can wait twice (a late answer delays the next renewal, which waits
//!   again): two twentieths are a quarter of the 2·ttl/5 between a
//!   renewal and the step-down, the rest left for the commits themselves
//!   and a retry. An acquire that finds no live lease waits twice too (its
//!   read, then its write). At the default ttl (10 s) a twentieth is
//!   500 ms, so the commit interval decides; below a ttl of 20 intervals
//!   (1 s by default) the ttl does. Short ttls thus keep prompt renewals
//!   (at 100 ms, a write waits at most 5 ms), at the cost of more commits:
//!   up to 20 a ttl of the shortest ttl in use, for all its elections
//!   together.
//! * **Reads** (`current_leader`, and the read with which every acquire
//!   begins) run together in one read transaction and never wait for the
//!   write lock; a read that comes while writes wait for their commit
//!   waits with them, at most the commit interval (an acquire's read, at
//!   most a twentieth of its ttl too). An acquire that finds a live lease
//!   answers [`Held`](regent_core::Acquire::Held) from that read: a
//!   follower's retry takes no write lock and no commit.
//!
//! So a process holds a fixed number of threads whatever its number of
//! elections (the store's thread, the wake-up bell's once something is
//! watched, and the runtime's), and its commits per
//! second are bounded by the commit interval (and, for ttls under 20
//! intervals, by the shortest ttl), not by its elections.
//! `synchronous = FULL` stays: group commit makes durability cheap
//! instead of giving it up.
//!
//! The thread ends when the last clone of the store (and the last stream
//! of its watches) is dropped, after the batch in hand, and closes the
//! connection. A call whose closure panics gets an
//! [`Unavailable`](regent_core::ErrorKind::Unavailable) error, its work is
//! rolled back, and the thread serves on. Should the thread itself die (a
//! bug, logged as it happens), every call fails with
//! [`Protocol`](regent_core::ErrorKind::Protocol), a permanent error: the
//! thread is not restarted, so candidates stop rather than retry a store
//! that can no longer answer; open the store again.
//!
//! Why this design, and not another:
//!
//! * *The blocking pool with a mutex on one connection*, as this store had
//!   before (issue 12): every call waiting for the mutex held a blocking
//!   thread, so 1,000 elections grew tokio's pool to 515 threads, and
//!   every renewal was a commit of its own, an fsync each.
//! * *A pool of connections*: SQLite has one writer at a time, so the
//!   connections would queue on the file's write lock (in the busy
//!   handler's sleeps), and still fsync once per call.
//! * *`synchronous = NORMAL`*: cheap commits, but a power cut could lose a
//!   fencing token's bump, and the next acquire would issue that token
//!   again.
//! * *Renewing many elections in one call*: the store contract renews one
//!   lease per call; group commit gets the same saving without changing
//!   it.
//!
//! ## What one process can hold
//!
//! Measured with this crate's scale bench of the time (`cargo bench -p
//! regent-sqlite --bench scale`), now the scale case of the benchmark
//! harness (`crates/regent-bench`, not published): `scripts/bench --stores
//! sqlite,memory --cases scale --elections 1000,10000 --window 30s
//! --sqlite-dir DIR`, with `--spread` for the rows started spread over a
//! renewal interval and `--followers` for the followers' rows. On a 2-core
//! virtual machine shared with other work, an ext4 disk, a tokio runtime
//! of 2 workers, every election at the default ttl of 10 s (a renewal
//! every 2 s per election), the store's defaults, 30 s windows. At that
//! ttl a write may wait up to the whole commit interval (a twentieth of
//! the ttl is 500 ms), which is what keeps the commits to about 20 a
//! second.
//! CPU is the whole process's; threads are all of them (the main thread,
//! the 2 workers, the store's thread), measured before the wake-up bell,
//! whose thread followers now add (one per store, whatever the number of
//! elections).
//!
//! | elections | how | CPU, % of a core | RSS | threads | written to disk |
//! | --- | --- | --- | --- | --- | --- |
//! | 1,000 leaders | started together | 0.9 % | 12 MiB | 4 | 80 KiB/s |
//! | 10,000 leaders | started together | 6 % | 41 MiB | 4 | 1.1 MiB/s |
//! | 1,000 leaders | started spread over a renewal interval | 3.6 % | 11 MiB | 4 | 200 KiB/s |
//! | 10,000 leaders | started spread over a renewal interval | 9 % | 39 MiB | 4 | 650 KiB/s |
//! | 1,000 followers | of another process's leaders | 9 % | 11 MiB | 4 | none |
//! | 10,000 followers | of another process's leaders | 25 % | 56 MiB | 4 | none |
//!
//! Before (issue 12), 1,000 leaders started together took 11 to 15 % of a
//! core, 515 threads, and wrote 3.8 MiB/s; spread, 18 % and 4 MiB/s.
//! 10,000 could not be held: started together, their campaigns took 31 s
//! and most leaders then missed their renew deadline; spread, they took
//! 67 % of a core and 28 MiB/s, and a third of them lost their elections.
//!
//! Of the CPU above, the candidates themselves (their tasks and timers,
//! measured on regent's in-memory store, then `--memory`, now the store
//! `memory`) take 1.8 % for 10,000 leaders started together and 4.8 %
//! spread. Followers cost more than leaders: each tries to acquire once
//! per renewal interval, and the watch's poll reads every row each 100 ms
//! while another process renews them.
//!
//! So one process holds 10,000 elections on one store, as leaders, in
//! under 10 % of a core, with 4 threads and about 40 MiB. What costs is
//! renewals per second: a longer ttl lowers it all in proportion, and a
//! longer commit interval lowers the bytes written. Not measured here:
//! ttls under a second. There a write waits a twentieth of its ttl at
//! most, not the commit interval, so commits come more often (up to 20 a
//! ttl, 200 a second at 100 ms, shared by all the elections at that ttl),
//! and each costs its fsync.
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
//!     metadata      TEXT NOT NULL,       -- a JSON object of strings
//!     won_by        TEXT                 -- 'INCARNATION/TOKEN': the store that
//!                                        -- won this term; NULL: an earlier build
//! );
//! CREATE TABLE regent_roster (             -- candidates enrolled
//!     election      TEXT NOT NULL,
//!     holder        TEXT NOT NULL,
//!     expires_at_ns INTEGER NOT NULL,    -- as regent_lease's
//!     boot_id       TEXT NOT NULL,
//!     metadata      TEXT NOT NULL,       -- the candidate's (its priority)
//!     PRIMARY KEY (election, holder)
//! );
//! CREATE TABLE regent_reserved (           -- leases kept for a successor
//!     election TEXT PRIMARY KEY NOT NULL,
//!     holder   TEXT NOT NULL,            -- the successor
//!     until_ns INTEGER NOT NULL,         -- CLOCK_MONOTONIC, nanoseconds
//!     boot_id  TEXT NOT NULL
//! );
//! ```
//!
//! The last two tables came with priorities and hand-overs
//! ([`regent_core::handover`]), and `regent_lease.won_by` with the taking
//! back of terms won unanswered (below); opening a file an earlier build
//! wrote adds them, in place, and the schema version stays 1. An earlier
//! build ignores them and goes on working on the file: its rows have no
//! `won_by`, and its acquire over one of ours leaves `won_by` naming the
//! token it replaced, so neither matches a term of ours.
//!
//! * **Acquire**: read the row; if it is live (same boot id,
//!   `expires_at_ns` after now, with now read after the row), the answer
//!   is [`Acquire::Held`](regent_core::Acquire::Held) with that leader —
//!   even when the live row is the caller's own, unless it is a term won
//!   unanswered (next item). Otherwise, in the group commit's `BEGIN
//!   IMMEDIATE` transaction (in a savepoint of its own), read it again
//!   under the write lock (now read inside the transaction) and judge it
//!   the same way; if it is still not live, bump
//!   `regent_fencing.last_token` and write the row, `won_by` included:
//!   the new term's token is the bumped counter.
//! * **A term won unanswered is taken back at once.** An acquire given
//!   up on by its caller (a timeout, a dropped future) once its write has
//!   started still commits: a term its caller never hears of (one given
//!   up before is dropped unrun).
//!   Each store draws a random incarnation (128 bits) when it opens, and
//!   writes it with the term's token into every row it wins (`won_by`);
//!   it remembers, per election and holder, the token of the term it last
//!   handed to its caller (in the poll that returns it). Its next acquire
//!   for that holder takes such a row over, live as it is, in the same
//!   transaction and with a new, greater token — unless the row holds
//!   the term last handed out, or another acquire of that holder through
//!   this store is in flight (its answer may be on its way). Without that
//!   the caller followed itself until the term ran out: a ttl with nobody
//!   leading. A row of the same holder id that another store wrote
//!   (another process, perhaps an older incarnation of the service, still
//!   leading) or an earlier build wrote is never taken.
//! * **Renew** (one statement in the group commit's `BEGIN IMMEDIATE`
//!   transaction): extend the row by its `ttl_ms` from now, only if holder
//!   *and* token match and the row is live. An expired row of ours is
//!   [`Renewal::Lost`](regent_core::Renewal::Lost), never revived.
//! * **Update metadata** (one statement in the group commit's transaction,
//!   the cost of a renewal): replace the row's `metadata` only if holder
//!   *and* token match and the row is live; token, holder and
//!   `expires_at_ns` stay, so the term goes on and the update does not
//!   renew. Otherwise [`Renewal::Lost`](regent_core::Renewal::Lost).
//!   Watches see the new metadata at their next poll.
//! * **Release** (one statement in the group commit's transaction): delete
//!   the row only if holder and token match. Idempotent.
//! * **Enroll** (one statement in the group commit's transaction): upsert
//!   the candidate's `regent_roster` row, live for the ttl; a candidate
//!   that takes part in hand-overs enrolls once per renew interval while
//!   it campaigns. **Candidates**: one read of the live rows, in holder
//!   order.
//! * **Release to a successor** (in a savepoint of the group commit's
//!   transaction): delete the row as a release does and write
//!   `regent_reserved` naming the successor until the window passes; an
//!   acquire by anyone else, under the write lock, finds it and is
//!   [`Acquire::Held`](regent_core::Acquire::Held) with no leader; the
//!   successor's acquire deletes it as it wins.
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
//! before the acquire returns (group commits included: see
//! [one process, many elections](#one-process-many-elections)). With `NORMAL`, a power cut could lose the
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
//! commit (an fsync: milliseconds, tens or hundreds of them when a busy
//! disk stalls) and than the busy timeout, or leases expire before their
//! answers arrive. The commit interval does not set a floor: a write waits
//! at most a twentieth of its ttl for others. Seconds are usual.
//! Expiry has no slack ([`StoreInfo::expiry_slack`](regent_core::StoreInfo::expiry_slack)
//! is zero): a dead holder's lease is free exactly `ttl` after its last
//! renewal.
//!
//! # Errors
//!
//! Every [`StoreError`](regent_core::StoreError) names the operation, the
//! election and the path, and carries the rusqlite error as its source.
//! When a whole group commit failed, the error says so after the
//! operation ("the write transaction did not begin", "the group commit
//! failed"), and every write of the batch carries the same source.
//!
//! | kind | when |
//! | --- | --- |
//! | [`Unavailable`](regent_core::ErrorKind::Unavailable) (transient) | another connection held the lock past the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`); I/O errors, a full disk; the store's connection thread could not start, or a call panicked on it |
//! | [`Config`](regent_core::ErrorKind::Config) | the file cannot be opened or created (missing directory, a directory in its place, no permission, read-only); a database that is not regent's, or of another schema version; regent's tables dropped; a ttl out of range; a zero poll interval, or a busy timeout, poll interval or commit interval over a day; no boot id |
//! | [`Auth`](regent_core::ErrorKind::Auth) | an SQLite authorizer refused a statement |
//! | [`Corrupt`](regent_core::ErrorKind::Corrupt) | the file is not a database or is damaged (`SQLITE_NOTADB`, `SQLITE_CORRUPT`); a lease row regent did not write |
//! | [`Protocol`](regent_core::ErrorKind::Protocol) | the store's connection thread died; anything else: a bug |
//!
//! A lease row regent did not write — a holder that is not a
//! [`HolderId`](regent_core::HolderId), metadata that is not a JSON object
//! of strings, a token that is not positive or is above the election's
//! fencing counter, a missing counter, an expiry further away than its ttl —
//! is reported as `Corrupt`, naming the election and what is wrong. It is
//! never taken over, and never a panic: an operator deletes the row to free
//! the election.

mod batch;
mod bell;
mod clock;
mod conn;
mod db;
mod error;
pub mod fence;
mod poll;
mod request;
mod roster;
mod schema;
mod store;
mod target;

/// The SQLite driver this crate is built with, for [`fence`]'s
/// connections: one version of rusqlite and of SQLite in the program.
pub use rusqlite;
#[doc(hidden)]
pub use store::GroupCommitStats;
pub use store::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_COMMIT_INTERVAL, DEFAULT_POLL_INTERVAL, MIN_TTL, SqliteStore,
    SqliteStoreBuilder,
};
pub use target::{KIND, SqliteTarget};

/// The schema version this build writes, and the only one it opens.
pub const SCHEMA_VERSION: i64 = schema::SCHEMA_VERSION;
