//! regent's PostgreSQL store: elections on the database a team already
//! runs. A race store: one row per election in `regent_leases`, won by
//! the first candidate to find it free, and kept by renewing it.
//!
//! # Safety model
//!
//! * **The server's clock decides.** Every statement that grants, renews
//!   or reads a lease compares with `clock_timestamp()` inside the
//!   statement; the clients' clocks are never compared. The holder times
//!   its lease from the instant it sent the request, as on every store.
//! * **Fencing tokens only grow**: a won lease's token is the larger of the
//!   election's counter (`regent_tokens`) plus one and the server's clock
//!   in microseconds since the epoch, both read in the acquiring
//!   statement. The counter keeps them growing across releases, deleted
//!   rows and restarts, and a clock set back. The clock keeps them growing
//!   where the counter cannot: a deleted `regent_tokens`, and a failover
//!   to an asynchronous standby that missed the last commits — its counter
//!   is older, but its clock has moved past every token those lost
//!   commits issued (each was its server's clock at the time, and a
//!   promotion takes longer than the clocks of two hosts kept by NTP
//!   disagree). This is the Azure Blob store's answer too: a counter
//!   alone would issue a lost token again.
//! * **Nothing relies on session state**: every operation is one statement
//!   in autocommit, sent as the unnamed statement with its parameters'
//!   types (`query_typed`: one round trip, no prepared statement left on
//!   the server connection), and no advisory lock. So the store works
//!   through PgBouncer in transaction pooling mode as it does directly, and
//!   a pool that recycles connections cannot end a term.
//! * **A term won unanswered is taken back at once.** An acquire whose
//!   answer never came (the caller gave up on it: a timeout, a dropped
//!   future; the server ran the statement all the same) can win a term
//!   its caller never hears of. Each store draws a random incarnation and
//!   writes it, with the term's token, into every term it wins
//!   (`incarnation`); its next acquire for the same holder takes such a
//!   term over in the same one statement, with a greater token, unless it
//!   is the term this store last handed to its caller. Without that the
//!   caller followed itself until the term ran out: a ttl with nobody
//!   leading. A term of the same holder id written by another process
//!   (perhaps an older incarnation of the service, still leading), or by
//!   a build before the column (it leaves `incarnation` empty, or naming
//!   an older term), is never taken.
//! * A single server is [`SafetyClass::SingleNode`](regent_core::SafetyClass):
//!   durable with `synchronous_commit` on. With an asynchronous standby, a
//!   promotion can lose the last commits — a term may be granted twice —
//!   and only the fencing token then protects the resource.
//! * The token protects a resource only where the resource checks it.
//!   For data in a PostgreSQL database, [`fence::check_and_record`] is
//!   that check: one statement in the transaction that writes the data,
//!   refusing a token smaller than the largest it has recorded.
//!
//! # Poolers
//!
//! * **Direct connections, or PgBouncer in session mode**: everything
//!   works, wake-ups included.
//! * **PgBouncer in transaction mode** (the usual setting): the store's
//!   statements work unchanged (one statement per transaction, nothing
//!   prepared by name, no session state). A `LISTEN` cannot: give watches a
//!   connection straight to the database
//!   ([`PostgresStoreBuilder::listen_on`], `--postgres-listen-url`), or
//!   turn it off, and a release wakes followers at their next poll
//!   (500 ms by default) rather than at once.
//! * **Statement mode** is not tested: use transaction mode.
//!
//! # TLS
//!
//! As libpq's `sslmode`, by rustls (ring): `prefer`, the default, speaks
//! TLS when the server offers it; `require` insists; neither checks the
//! server, as in libpq. `verify-ca` checks the server's certificate
//! against the root certificate, and `verify-full` its name too: only
//! they keep a machine in the middle out. A client certificate is shown
//! to servers that ask for one. In URLs: `sslmode`, `sslrootcert` (or
//! `system`), `sslcert`, `sslkey` and their `PGSSL…` variables
//! ([`KIND`]); in code: [`PostgresStoreBuilder::tls`] with a [`Tls`]. A
//! certificate that does not pass, or a server with no TLS when it is
//! required, is a `Config` error (never retried); a server that refuses
//! the client's certificate is `Auth`.
//!
//! # What a crash costs
//!
//! A holder killed without releasing holds its row until it expires by
//! the server's clock: a follower takes over after the ttl, plus its retry
//! (the renew interval) at the most. A graceful stop releases the row and
//! notifies: a follower that listens takes over in a few round trips.
//!
//! # Schema
//!
//! The tables are created on first use when the role may; otherwise an
//! administrator runs (in the schema the store is given, `public` by
//! default):
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS regent_leases (
//!     election   text PRIMARY KEY,
//!     holder     text NOT NULL,
//!     token      bigint NOT NULL,
//!     expires_at timestamptz NOT NULL,
//!     ttl_ms     bigint NOT NULL,
//!     metadata   text NOT NULL DEFAULT '{}',
//!     incarnation text  -- INCARNATION/TOKEN: the store that won the term
//! );
//! CREATE TABLE IF NOT EXISTS regent_tokens (
//!     election text PRIMARY KEY,
//!     last     bigint NOT NULL
//! );
//! CREATE TABLE IF NOT EXISTS regent_roster (
//!     election   text NOT NULL,
//!     holder     text NOT NULL,
//!     expires_at timestamptz NOT NULL,
//!     metadata   text NOT NULL DEFAULT '{}',
//!     PRIMARY KEY (election, holder)
//! );
//! CREATE TABLE IF NOT EXISTS regent_reserved (
//!     election text PRIMARY KEY,
//!     holder   text NOT NULL,
//!     until    timestamptz NOT NULL
//! );
//! GRANT SELECT, INSERT, UPDATE, DELETE
//!     ON regent_leases, regent_tokens, regent_roster, regent_reserved TO app;
//! ```
//!
//! `regent_roster` and `regent_reserved` came with priorities and
//! hand-overs: a schema an administrator made for an earlier build needs
//! the last two statements (and the grant) before this build connects.
//!
//! `incarnation` came with taking back a term won unanswered. A store
//! adds it to a `regent_leases` of an earlier build when it first
//! connects, if its role owns the table; otherwise it says so, and the
//! owner runs, once:
//!
//! ```sql
//! ALTER TABLE regent_leases ADD COLUMN IF NOT EXISTS incarnation text;
//! ```
//!
//! Rows stay as they were (a row with no incarnation is never taken
//! over), and earlier builds go on working beside this one: they name
//! their columns. The `ALTER TABLE` waits for the table's lock, and every
//! statement on the table waits behind it meanwhile: the store's waits at
//! most 100 ms (`lock_timeout`), a few times, then gives up, transient
//! (another transaction held the table: a long one, a dump), and the next
//! connection tries again.
//!
//! # Roster and hand-over
//!
//! Candidates enroll in `regent_roster` (contract item 10): one upsert
//! per candidate per renew interval, timed by the server's clock like the
//! leases; `candidates` is one indexed read. A lease handed to a chosen
//! successor (contract item 11) is one statement: the lease row deleted
//! and a `regent_reserved` row naming the successor until the window
//! passes, by the server's clock; the acquire statement of anyone else
//! finds it and is held off, the successor's clears it as it wins. Both
//! work through PgBouncer's transaction pooling as the rest does.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use regent_core::{Candidate, ElectionName, HolderId};
//! use regent_postgres::PostgresStore;
//!
//! let store = PostgresStore::connect("postgres://app@db.internal/app").await?;
//! let candidate = Candidate::builder(store, ElectionName::new("billing")?, HolderId::new("web-1")?)
//!     .build()?;
//! let leadership = candidate.campaign().await?;
//! // ... write with leadership.token() ...
//! leadership.resign().await?;
//! # Ok(()) }
//! ```

mod error;
pub mod fence;
mod record;
mod sql;
mod store;
mod target;
mod tls;
mod watch;

pub use store::{
    DEFAULT_POLL_INTERVAL, DEFAULT_SCHEMA, MIN_TTL, PostgresStore, PostgresStoreBuilder,
};
pub use target::{KIND, PostgresTarget};
pub use tls::Tls;
/// The client this crate is built with, for [`fence`]'s transactions: one
/// version of tokio-postgres in the program.
pub use tokio_postgres;
/// The client's connection settings ([`PostgresStore::builder`]).
pub use tokio_postgres::Config;
/// Whether a connection speaks TLS ([`Config::ssl_mode`]); how it checks
/// the server is [`Tls`].
pub use tokio_postgres::config::SslMode;
