//! PostgreSQL 15 on `127.0.0.1`: a server of its own ([`Postgres`]), a
//! PgBouncer in front of one in transaction pooling mode ([`PgBouncer`];
//! the two as one engine, [`PostgresBehindPgBouncer`]), and a primary with
//! a streaming standby that a test can promote ([`PostgresPair`]).
//!
//! # A server
//!
//! [`Postgres::start`] makes a new cluster in a temporary directory of its
//! own (`initdb -D DIR/data -U postgres --auth=trust --no-sync
//! --encoding=UTF8 --locale=C`), adds the kit's settings to its
//! `postgresql.conf`, and runs the postmaster as a child of the test,
//! `postgres -D DIR/data -p PORT -k DIR`, on a free port. It is ready when
//! it lets the superuser in over TCP (a start-up message answered by
//! "authentication ok" and "ready for query"); the kit then creates the
//! database [`DATABASE`]. The store URL is
//! `postgres://postgres@127.0.0.1:PORT/regent` ([`Postgres::store_url`]):
//! the superuser `postgres`, no password (every local connection is
//! trusted). The directory holds the data directory `data/`, the Unix
//! socket (`.s.PGSQL.PORT`, for libpq's `host=DIR`) and `postgres.log`,
//! the output of initdb and of every run of the server (the last lines are
//! quoted in startup errors). If the port was taken between the kit
//! finding it free and the server binding it, the kit starts again on a
//! new one.
//!
//! | setting | value | why |
//! |---|---|---|
//! | `listen_addresses` | `127.0.0.1` | nothing on other interfaces |
//! | `fsync` | `off` | no flush to disk per commit: an acknowledged commit is in the OS's page cache (the WAL is written at every commit, `synchronous_commit` stays on) and survives a kill of the server, not a power loss |
//! | `shared_buffers` | 32 MB | several servers on a small machine |
//! | `log_checkpoints` | `off` | a quiet log |
//! | `log_line_prefix` | `%m [%p] %q%u@%d ` | who did what, in the log |
//!
//! Everything else is PostgreSQL 15's default: `wal_level = replica`,
//! `max_wal_senders = 10` and initdb's `host replication all 127.0.0.1/32
//! trust` make every server a primary a standby can stream from;
//! `max_connections = 100`.
//!
//! Measured on two cores: initdb takes about 1 s, the server lets the
//! superuser in about 0.06 s after launch, `CREATE DATABASE` takes about
//! 0.25 s: [`Postgres::start`] returns after about 1.5 s. A restart after
//! a kill (crash recovery) is ready after about 0.06 s.
//!
//! ## Faults
//!
//! A server is a postmaster and its children (backends, checkpointer, WAL
//! writer, …), and the faults hit them all:
//!
//! * [`Postgres::pause`] stops the postmaster (SIGSTOP), so that it forks
//!   no new backend, then every child: the server keeps its sockets and
//!   its clients' connections and answers nothing; a new connection is
//!   accepted by the kernel and then hears nothing. A stopped postmaster
//!   alone would not do: its backends would go on answering.
//!   [`Postgres::resume`] lets them all go on (SIGCONT).
//! * [`Postgres::kill`] stops the postmaster, then SIGKILLs every child and
//!   the postmaster, as a crash would, and returns once they are gone (the
//!   children of a postmaster killed alone linger a moment, holding shared
//!   memory a new postmaster refuses to share). [`Postgres::restart`] then
//!   recovers from the crash: every acknowledged commit is there.
//! * [`Postgres::stop`] (and dropping) is PostgreSQL's fast shutdown
//!   (SIGINT to the postmaster: open transactions roll back, clients are
//!   disconnected, a checkpoint is written), then SIGKILL to all of them
//!   after [`STOP_TIMEOUT`](super::STOP_TIMEOUT).
//! * [`Postgres::terminate_backends`] ends every client's connection to
//!   the database, as an operator running `pg_terminate_backend` would.
//!
//! [`Postgres::psql`] runs SQL as the superuser through PostgreSQL's own
//! client, bounded in time (a paused server never answers).
//!
//! # PgBouncer
//!
//! [`PgBouncer::start`] runs `pgbouncer DIR/pgbouncer.ini` in the
//! foreground (its PID is the kit's child) on a free port, in front of a
//! server's port, and waits until its admin console (database `pgbouncer`)
//! lets the superuser in. Its store URL is
//! `postgres://postgres@127.0.0.1:PGBOUNCER_PORT/regent`. The
//! `pgbouncer.ini`:
//!
//! | setting | value | why |
//! |---|---|---|
//! | `[databases] *` | `host=127.0.0.1 port=SERVER_PORT` | every database of the server, by its own name |
//! | `listen_addr`, `listen_port` | `127.0.0.1`, a free port | |
//! | `unix_socket_dir` | empty | no Unix socket: the clients use TCP |
//! | `auth_type`, `auth_file` | `trust`, `userlist.txt` | no password; the user `postgres` must still be in the file, and is the only one |
//! | `admin_users` | `postgres` | the console: `SHOW POOLS`, `RECONNECT`, … ([`PgBouncer::console`]) |
//! | `pool_mode` | `transaction` | a server connection per transaction: no session state across transactions, no named prepared statements (PgBouncer 1.18 has no support for them in this mode), no `LISTEN` |
//! | `max_client_conn`, `default_pool_size` | 500, 20 | |
//! | `server_login_retry` | 1 s | after a server restart, connect again within a second (default 15 s) |
//! | `ignore_startup_parameters` | `extra_float_digits` | some clients send it |
//! | `log_connections`, `log_disconnections` | 0 | a quiet log |
//!
//! Its log (`pgbouncer.log`) is its standard error. [`PgBouncer::stop`] is
//! SIGTERM, PgBouncer 1.18's immediate shutdown; [`PgBouncer::restart`]
//! comes back on the same port. PgBouncer is ready about 0.015 s after
//! launch.
//!
//! # A primary with a streaming standby
//!
//! [`PostgresPair::start`] starts a primary, takes a base backup of it
//! (`pg_basebackup -R -X stream --checkpoint=fast`: the standby's
//! `standby.signal` and `primary_conninfo` are written by it), starts the
//! standby on a free port and waits until it has replayed everything the
//! primary had written. Replication is asynchronous (PostgreSQL's
//! default): a commit on the primary does not wait for the standby, so the
//! standby may miss the last ones when the primary dies.
//! [`PostgresPair::disconnect_standby`] makes that certain: the standby
//! stops receiving, and what the primary commits afterwards is lost on a
//! failover. [`PostgresPair::promote_after_killing_primary`] kills the
//! primary ([`Postgres::kill`]) and promotes the standby (`pg_ctl promote
//! --wait`); [`Postgres::is_in_recovery`] tells a standby from a primary.
//! Measured on two cores: a pair is ready about 2.6 s after the call; a
//! promotion returns about 0.12 s after the primary's kill.
//!
//! # The user
//!
//! initdb, postgres, pg_ctl and pgbouncer refuse to run as root. When the
//! tests run as root, the kit runs them as the system user `postgres`
//! (which Debian's postgresql-common creates) and hands that user the
//! engine's temporary directory; otherwise as the tests' own user.
//! `psql` runs as the tests' user.
//!
//! # Programs
//!
//! PostgreSQL's (`initdb`, `postgres`, `pg_ctl`, `pg_basebackup`,
//! `psql`) from Debian's [`DEFAULT_BINDIR`], `/usr/lib/postgresql/15/bin`,
//! else from `PATH`, or all from the directory in `REGENT_POSTGRES_BINDIR`
//! ([`BINDIR_VAR`]); `pgbouncer` from `PATH`, else Debian's
//! `/usr/sbin/pgbouncer`, or the path in `REGENT_PGBOUNCER_BIN`
//! ([`PGBOUNCER_VAR`]). All are installed by `scripts/install-engines`;
//! a missing one is [`EngineError::NotInstalled`] (or
//! [`EngineError::NotInstalledAt`]) naming that script. Variables `PG*` of
//! the test's environment are passed to none of them (libpq, psql and the
//! server read them as settings).
//!
//! ```no_run
//! use regent_testkit::engines::{Engine, PgBouncer, Postgres, PostgresPair};
//!
//! let pg = Postgres::start()?;
//! assert!(pg.store_url().starts_with("postgres://postgres@127.0.0.1:"));
//! pg.psql("create table t (id int primary key)")?;
//!
//! let pgbouncer = PgBouncer::start(&pg)?;
//! pgbouncer.psql("insert into t values (1)")?;
//! assert_eq!(pg.psql("select count(*) from t")?, "1");
//!
//! let mut pair = PostgresPair::start()?;
//! pair.promote_after_killing_primary()?;
//! assert!(!pair.standby().is_in_recovery()?);
//! // Dropping each stops its processes by PID and removes its directory.
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```
//!
//! [`EngineError::NotInstalled`]: super::EngineError::NotInstalled
//! [`EngineError::NotInstalledAt`]: super::EngineError::NotInstalledAt

use std::time::Duration;

mod family;
mod pair;
mod pgbouncer;
mod programs;
mod psql;
mod server;
mod wire;

pub use pair::PostgresPair;
pub use pgbouncer::{PgBouncer, PostgresBehindPgBouncer};
pub use programs::{BINDIR_VAR, DEFAULT_BINDIR, PGBOUNCER_VAR};
pub use psql::QUERY_TIMEOUT;
pub use server::Postgres;

/// The database the kit creates on every server for the tests, and the
/// one its store URLs name.
pub const DATABASE: &str = "regent";

/// The superuser the kit's clusters are made with (`initdb -U`) and its
/// store URLs name; trusted without a password.
pub const SUPERUSER: &str = "postgres";

/// The PostgreSQL store's shortest ttl (`regent_postgres::MIN_TTL`).
const MIN_TTL: Duration = Duration::from_millis(100);

/// The PostgreSQL store's poll interval
/// (`regent_postgres::DEFAULT_POLL_INTERVAL`).
const WATCH_DELAY: Duration = Duration::from_millis(500);
