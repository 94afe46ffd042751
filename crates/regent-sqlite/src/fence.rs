//! Fencing a SQLite resource: the check of a term's fencing token and the
//! record of it, inside the caller's own transaction.
//!
//! A lease alone cannot stop a leader that was paused past its lease (GC,
//! SIGSTOP, swapping) from writing after its successor has. The resource
//! must refuse it: it remembers the largest [`FencingToken`] it has seen
//! and refuses smaller ones. For data in a SQLite database, that memory is
//! one row per resource in a table beside the data, and the check is one
//! statement in the transaction that writes the data:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("app.db");
//! use regent_core::FencingToken;
//! use regent_sqlite::fence;
//! use regent_sqlite::rusqlite::{Connection, TransactionBehavior};
//!
//! let mut conn = Connection::open(&path)?; // the application's database
//! conn.busy_timeout(std::time::Duration::from_secs(5))?;
//! conn.execute_batch("CREATE TABLE IF NOT EXISTS invoices (id INTEGER PRIMARY KEY, total INTEGER)")?;
//! # let token = FencingToken::new(7);
//! // let token = leadership.token();
//! let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
//! fence::check_and_record(&tx, "invoices", token)?; // refused: `?` rolls back
//! tx.execute("INSERT INTO invoices (total) VALUES (?1)", [1200])?;
//! tx.commit()?; // the check and the write, together
//! # let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
//! # let e = fence::check_and_record(&tx, "invoices", FencingToken::new(6)).unwrap_err();
//! # assert!(matches!(e, fence::FenceError::Stale { .. }), "{e}");
//! # Ok(()) }
//! ```
//!
//! # The guarantee
//!
//! Once a transaction that passed [`check_and_record`] with token `t` has
//! committed, no transaction that checks a smaller token for the same
//! resource commits: its check fails with [`FenceError::Stale`]. A write
//! is protected only when it is **in the same transaction as the check,
//! and that transaction commits**: a write in another transaction, or one
//! that commits although the check failed, is not fenced at all.
//!
//! * **The statement**: one upsert, `INSERT … ON CONFLICT (resource) DO
//!   UPDATE SET token = excluded.token WHERE token <= excluded.token
//!   RETURNING token`. A row back means the token is at least the largest
//!   recorded, and is now recorded; no row back means a larger one was
//!   recorded: the row is then read once more, for the error to name it.
//!   (`RETURNING` needs SQLite 3.35; the bundled SQLite is newer.)
//! * **An equal token passes**: a term writes many times.
//! * **`BEGIN IMMEDIATE`** (rusqlite's
//!   [`TransactionBehavior::Immediate`](rusqlite::TransactionBehavior)):
//!   SQLite has one writer at a time, and an immediate transaction takes
//!   the write lock at its start, so the check, the protected writes and
//!   the commit run with no other writer between them, and two terms'
//!   transactions are serialised: the later one sees the earlier's token.
//!   A deferred transaction (the default) is no less safe — SQLite never
//!   lets a transaction write from an outdated snapshot — but it may fail
//!   with `SQLITE_BUSY` where an immediate one would have waited. Give the
//!   connection a busy timeout either way.
//! * **Check first**, then write: the check fails before any work is done,
//!   and the order is the same in every transaction. The order within a
//!   transaction does not change the guarantee, the commit does.
//! * **A refused check changes nothing**: the caller's transaction is left
//!   as it was, to roll back (dropping a rusqlite `Transaction` does).
//! * **Not in a transaction**, the check would commit by itself and the
//!   write after it would be unprotected: it is refused
//!   ([`FenceError::NotInTransaction`]). A `Transaction`, a `Savepoint`
//!   and a connection after a plain `BEGIN` all pass.
//!
//! # Why an error, and not a value
//!
//! regent's expected outcomes ("someone else leads") are values. A stale
//! token is one too, for the leader: its term is over. Here it is an
//! error all the same, so that `?` leaves the transaction before the
//! protected write, and a caller cannot commit after a refusal by
//! forgetting to look at a returned value.
//!
//! # The table
//!
//! [`DEFAULT_TABLE`] (`regent_fence`) in the connection's main database,
//! made on first use (in the caller's transaction, committed or rolled
//! back with it) or up front by [`create_table`]:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS regent_fence (
//!     resource TEXT PRIMARY KEY NOT NULL,
//!     token    INTEGER NOT NULL          -- the largest token recorded
//! );
//! ```
//!
//! Put it in the database of the data it fences (not in regent's store
//! file): the check must commit with the data. Another name, for a second
//! set of fences or to keep a naming rule, is [`Fence::builder`]'s.
//!
//! A *resource* is what one election's leader writes: a table, a set of
//! rows, a job. Its row compares the tokens of one election on one store
//! only: tokens of different elections are unrelated numbers. After
//! moving an election to another store, whose tokens may be smaller,
//! delete its fence rows (with the old leader stopped).
//!
//! # Tokens
//!
//! SQLite's `INTEGER` is a signed 64-bit integer, as in the store's own
//! tables: a token above `i64::MAX` is refused
//! ([`FenceError::TokenOutOfRange`]), never wrapped into a negative
//! number that every later token would pass.

use std::sync::LazyLock;

use regent_core::FencingToken;
use rusqlite::{Connection, OptionalExtension as _};

/// The fence table's name unless [`FenceBuilder::table`] says otherwise.
pub const DEFAULT_TABLE: &str = "regent_fence";

/// The fence of [`DEFAULT_TABLE`], for the module's functions.
static DEFAULT: LazyLock<Fence> = LazyLock::new(|| Fence::in_table(DEFAULT_TABLE));

/// Checks `token` against the largest token recorded for `resource` in
/// [`DEFAULT_TABLE`] and records it, in the transaction `conn` is in: see
/// [`Fence::check_and_record`].
///
/// # Errors
///
/// As [`Fence::check_and_record`]: [`FenceError::Stale`] when a larger
/// token was recorded.
pub fn check_and_record(
    conn: &Connection,
    resource: &str,
    token: FencingToken,
) -> Result<(), FenceError> {
    DEFAULT.check_and_record(conn, resource, token)
}

/// Creates [`DEFAULT_TABLE`] if it is missing: see [`Fence::create_table`].
///
/// # Errors
///
/// [`FenceError::Sql`] when SQLite refuses.
pub fn create_table(conn: &Connection) -> Result<(), FenceError> {
    DEFAULT.create_table(conn)
}

/// A fence table: where the largest token of each resource is recorded.
/// [`Fence::default`] is [`DEFAULT_TABLE`]'s, which the module's functions
/// use.
#[derive(Clone, Debug)]
pub struct Fence {
    table: String,
    sql: Statements,
}

/// The statements on one table, made once.
#[derive(Clone, Debug)]
struct Statements {
    create: String,
    upsert: String,
    newest: String,
}

/// Settings of a [`Fence`]: [`Fence::builder`].
#[derive(Clone, Debug)]
pub struct FenceBuilder {
    table: String,
}

impl FenceBuilder {
    /// The table's name (default [`DEFAULT_TABLE`]): a plain identifier
    /// (ASCII letters, digits and `_`, not starting with a digit, at most
    /// 63 bytes, not starting with SQLite's reserved `sqlite_`).
    #[must_use]
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// The fence.
    ///
    /// # Errors
    ///
    /// [`FenceError::InvalidTable`] when the name breaks the rule of
    /// [`table`](Self::table).
    pub fn build(self) -> Result<Fence, FenceError> {
        if !is_identifier(&self.table) {
            return Err(FenceError::InvalidTable { table: self.table });
        }
        Ok(Fence::in_table(&self.table))
    }
}

impl Default for Fence {
    fn default() -> Self {
        DEFAULT.clone()
    }
}

impl Fence {
    /// Settings for a fence table other than [`DEFAULT_TABLE`].
    pub fn builder() -> FenceBuilder {
        FenceBuilder {
            table: DEFAULT_TABLE.to_owned(),
        }
    }

    /// `table` is a checked identifier: quoting it is enough.
    fn in_table(table: &str) -> Self {
        let quoted = format!("\"{table}\"");
        Self {
            table: table.to_owned(),
            sql: Statements {
                create: format!(
                    "CREATE TABLE IF NOT EXISTS {quoted} (
                         resource TEXT PRIMARY KEY NOT NULL,
                         token    INTEGER NOT NULL
                     )"
                ),
                // The WHERE reads the row as it stands under the write
                // lock the transaction holds: no row back, no update.
                upsert: format!(
                    "INSERT INTO {quoted} (resource, token) VALUES (?1, ?2)
                     ON CONFLICT (resource) DO UPDATE SET token = excluded.token
                     WHERE token <= excluded.token
                     RETURNING token"
                ),
                newest: format!("SELECT token FROM {quoted} WHERE resource = ?1 AND token >= 0"),
            },
        }
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table if it is missing. Optional:
    /// [`check_and_record`](Self::check_and_record) does it too.
    ///
    /// # Errors
    ///
    /// [`FenceError::Sql`] when SQLite refuses (a read-only database, a
    /// lock held past the busy timeout).
    pub fn create_table(&self, conn: &Connection) -> Result<(), FenceError> {
        conn.prepare_cached(&self.sql.create)
            .and_then(|mut s| s.execute([]))
            .map(|_| ())
            .map_err(|e| self.sql_error(e))
    }

    /// Checks `token` against the largest token recorded for `resource`,
    /// and records it: passes if it is at least as large, and then the
    /// transaction `conn` is in holds the new record, to commit with the
    /// protected writes. Creates the table if it is missing, in that
    /// transaction too.
    ///
    /// Call it in the transaction that writes the resource, before the
    /// writes, and commit only if it passed; `conn` is the connection, a
    /// `Transaction` or a `Savepoint` (both deref to it). See the [module
    /// docs](self) for what that guarantees.
    ///
    /// # Errors
    ///
    /// * [`FenceError::Stale`]: a larger token was recorded (a newer term
    ///   has written); nothing changed. Roll back: this term is over.
    /// * [`FenceError::NotInTransaction`]: `conn` is in autocommit mode.
    /// * [`FenceError::TokenOutOfRange`]: `token` is above `i64::MAX`.
    /// * [`FenceError::Sql`]: SQLite failed (`SQLITE_BUSY` past the busy
    ///   timeout, a read-only database, a table of another shape).
    pub fn check_and_record(
        &self,
        conn: &Connection,
        resource: &str,
        token: FencingToken,
    ) -> Result<(), FenceError> {
        if conn.is_autocommit() {
            return Err(FenceError::NotInTransaction {
                resource: resource.to_owned(),
            });
        }
        let Ok(value) = i64::try_from(token.get()) else {
            return Err(FenceError::TokenOutOfRange {
                resource: resource.to_owned(),
                token,
            });
        };
        self.create_table(conn)?;
        let recorded = conn
            .prepare_cached(&self.sql.upsert)
            .and_then(|mut s| {
                s.query_row((resource, value), |r| r.get::<_, i64>(0))
                    .optional()
            })
            .map_err(|e| self.sql_error(e))?;
        if recorded.is_some() {
            return Ok(());
        }
        // The upsert found a row with a larger token and left it; the
        // transaction's lock keeps it there. Were it gone, refuse all the
        // same: a check that did not pass never passes.
        let newest = self.newest(conn, resource)?.unwrap_or(token);
        tracing::debug!(
            resource,
            %token,
            %newest,
            table = %self.table,
            "fencing check refused a stale token"
        );
        Err(FenceError::Stale {
            resource: resource.to_owned(),
            token,
            newest,
        })
    }

    /// The largest token recorded for `resource`, if any, as `conn` sees
    /// it (in its transaction, if it is in one). For reports and tests:
    /// a check needs no read before it. A negative number (written by
    /// hand) refuses no token, and reads as `None`.
    ///
    /// # Errors
    ///
    /// [`FenceError::Sql`] when SQLite fails, the table is missing
    /// included, or the row holds something other than an integer.
    pub fn newest(
        &self,
        conn: &Connection,
        resource: &str,
    ) -> Result<Option<FencingToken>, FenceError> {
        // The WHERE leaves out a negative value an operator wrote: it
        // refuses no token, as if nothing were recorded.
        conn.prepare_cached(&self.sql.newest)
            .and_then(|mut s| s.query_row([resource], |r| r.get::<_, i64>(0)).optional())
            .map(|v| v.map(|v| FencingToken::new(v.unsigned_abs())))
            .map_err(|e| self.sql_error(e))
    }

    fn sql_error(&self, source: rusqlite::Error) -> FenceError {
        FenceError::Sql {
            table: self.table.clone(),
            source,
        }
    }
}

/// Why a fencing check did not pass, or a fence could not be made.
#[derive(Debug)]
#[non_exhaustive]
pub enum FenceError {
    /// A larger token than `token` is recorded for `resource`: a newer
    /// term has written. Nothing changed; roll the transaction back.
    #[non_exhaustive]
    Stale {
        /// The resource checked.
        resource: String,
        /// The token refused.
        token: FencingToken,
        /// The largest token recorded for it.
        newest: FencingToken,
    },
    /// The connection is not in a transaction: the check would commit by
    /// itself, and the write after it would not be fenced.
    #[non_exhaustive]
    NotInTransaction {
        /// The resource checked.
        resource: String,
    },
    /// The token is above `i64::MAX`, the largest SQLite's `INTEGER`
    /// holds.
    #[non_exhaustive]
    TokenOutOfRange {
        /// The resource checked.
        resource: String,
        /// The token refused.
        token: FencingToken,
    },
    /// The table's name is not a plain identifier
    /// ([`FenceBuilder::table`]).
    #[non_exhaustive]
    InvalidTable {
        /// The name given.
        table: String,
    },
    /// SQLite failed: the source says how.
    #[non_exhaustive]
    Sql {
        /// The fence table.
        table: String,
        /// rusqlite's error.
        source: rusqlite::Error,
    },
}

impl FenceError {
    /// Whether a newer term has written ([`FenceError::Stale`]).
    pub fn is_stale(&self) -> bool {
        matches!(self, Self::Stale { .. })
    }
}

impl std::fmt::Display for FenceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stale {
                resource,
                token,
                newest,
            } => write!(
                f,
                "fencing token {token} is stale for resource {resource:?}: a newer term has \
                 written with token {newest}; roll the transaction back"
            ),
            Self::NotInTransaction { resource } => write!(
                f,
                "fencing check of resource {resource:?} outside a transaction: the write it \
                 guards must be in the check's transaction (BEGIN IMMEDIATE)"
            ),
            Self::TokenOutOfRange { resource, token } => write!(
                f,
                "fencing token {token} for resource {resource:?} is above {}, the largest \
                 SQLite's INTEGER holds",
                i64::MAX
            ),
            Self::InvalidTable { table } => write!(
                f,
                "fence table name {table:?} is not a plain identifier (ASCII letters, digits \
                 and _, not starting with a digit or sqlite_, at most 63 bytes)"
            ),
            Self::Sql { table, source } => {
                write!(f, "fence table {table:?}: ")?;
                f.write_str(match source.sqlite_error_code() {
                    Some(
                        rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked,
                    ) => {
                        "another connection held the write lock past the busy timeout, or a \
                         deferred transaction read before another's commit: roll back and run \
                         the transaction again (BEGIN IMMEDIATE, with a busy timeout, waits \
                         instead)"
                    }
                    Some(rusqlite::ErrorCode::ReadOnly) => "the database is read-only",
                    _ => "SQLite failed",
                })
            }
        }
    }
}

impl std::error::Error for FenceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Sql { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && !s.to_ascii_lowercase().starts_with("sqlite_")
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_plain_identifiers() {
        for good in ["regent_fence", "_x", "Fence2", &"a".repeat(63)] {
            assert!(is_identifier(good), "{good}");
        }
        for bad in [
            "",
            "2x",
            "a-b",
            "a\"b",
            "main.t",
            "sqlite_master",
            "SQLITE_x",
            &"a".repeat(64),
        ] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }
}
