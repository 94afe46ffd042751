//! Fencing a PostgreSQL resource: the check of a term's fencing token and
//! the record of it, inside the caller's own transaction.
//!
//! A lease alone cannot stop a leader that was paused past its lease (GC,
//! SIGSTOP, a slow network) from writing after its successor has. The
//! resource must refuse it: it remembers the largest [`FencingToken`] it
//! has seen and refuses smaller ones. For data in a PostgreSQL database,
//! that memory is one row per resource in a table beside the data, and the
//! check is one statement in the transaction that writes the data:
//!
//! ```no_run
//! # async fn run(token: regent_core::FencingToken) -> Result<(), Box<dyn std::error::Error>> {
//! use regent_postgres::fence;
//! use regent_postgres::tokio_postgres::{self, NoTls};
//!
//! let (mut client, connection) =
//!     tokio_postgres::connect("postgres://app@db.internal/app", NoTls).await?;
//! tokio::spawn(connection);
//! fence::create_table(&client).await?; // once, or an administrator's SQL
//!
//! // let token = leadership.token();
//! let tx = client.transaction().await?;
//! fence::check_and_record(&tx, "invoices", token).await?; // refused: `?` rolls back
//! tx.execute("INSERT INTO invoices (total) VALUES (1200)", &[]).await?;
//! tx.commit().await?; // the check and the write, together
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
//! that commits although the check failed, is not fenced at all. A refused
//! check does not abort the transaction in PostgreSQL's eyes (it is an
//! answer, not an SQL error): *do not commit it*; `?` drops the
//! transaction, which rolls it back.
//!
//! The check takes a [`Transaction`], not a client: in autocommit the
//! check would commit by itself, before the write it guards.
//!
//! * **The statement**: one upsert, `INSERT … ON CONFLICT (resource) DO
//!   UPDATE SET token = excluded.token WHERE f.token <= excluded.token
//!   RETURNING token`. A row back means the token is at least the largest
//!   recorded, and is now recorded; no row back means a larger one was
//!   recorded: the row is then read once more, for the error to name it.
//! * **An equal token passes**: a term writes many times.
//! * **READ COMMITTED is enough** (PostgreSQL's default). The upsert does
//!   not judge the row by its snapshot: it locks the row's latest version,
//!   waiting for a transaction that holds it to end, and evaluates its
//!   `WHERE` on that version; it keeps the lock until its own transaction
//!   ends, whether it updated the row or not. So two transactions that
//!   check one resource are serialised at the check: the second waits for
//!   the first to commit or roll back, then compares with what it
//!   committed. An older term's transaction that checked first commits
//!   first (its writes come before the newer term's); one that checks
//!   after a newer token committed is refused. REPEATABLE READ and
//!   SERIALIZABLE are safe too: where the row changed after the
//!   transaction's snapshot, the check fails with a serialization failure
//!   (SQLSTATE `40001`, [`FenceError::Sql`]) instead; run the transaction
//!   again, and a stale token then gets [`FenceError::Stale`].
//! * **Check first**, then write: the row lock then orders the terms'
//!   transactions before they touch the data, and a stale one does no
//!   work. (Writing first is no less safe, the commit decides, but two
//!   terms could deadlock on the data's rows and the fence row, and
//!   PostgreSQL would abort one.)
//! * **The lock is held to the commit**: a newer term's check waits for
//!   an older term's open transaction. Keep fenced transactions short, or
//!   bound the wait with `SET LOCAL lock_timeout` (a check that times out
//!   is [`FenceError::Sql`], SQLSTATE `55P03`).
//!
//! # Poolers
//!
//! The statements are sent as the unnamed statement with their
//! parameters' types (`query_typed`: nothing prepared by name), and the
//! row lock belongs to the transaction, not the session: the check works
//! through PgBouncer in transaction pooling mode as it does directly, as
//! the store does. Statement pooling has no transactions of more than one
//! statement, so nothing to fence.
//!
//! # The table
//!
//! [`DEFAULT_TABLE`] (`regent_fence`) in the schema [`DEFAULT_SCHEMA`]
//! (`public`), as the store's tables; another schema or name is
//! [`Fence::builder`]'s. [`create_table`] makes it if it is missing (call
//! it once, outside a transaction: at start-up, or in a migration), or an
//! administrator runs:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS regent_fence (
//!     resource text PRIMARY KEY,
//!     token    bigint NOT NULL       -- the largest token recorded
//! );
//! -- the least a role needs to check tokens:
//! GRANT USAGE ON SCHEMA public TO app;
//! GRANT SELECT, INSERT, UPDATE ON regent_fence TO app;
//! ```
//!
//! `INSERT` and `UPDATE` for the upsert, `SELECT` for its `WHERE` and
//! `RETURNING` and the read of the newest token; no `DELETE`. Creating the
//! table needs `CREATE` on the schema. The check does not create it: a
//! `CREATE TABLE` that fails (no privilege, another process creating it
//! at the same moment) would abort the caller's transaction.
//!
//! Put the table in the database of the data it fences (it need not be
//! the store's): the check must commit with the data. A *resource* is what
//! one election's leader writes: a table, a set of rows, a job. Its row
//! compares the tokens of one election on one store only: tokens of
//! different elections are unrelated numbers. After moving an election to
//! another store, whose tokens may be smaller, delete its fence rows (with
//! the old leader stopped).
//!
//! # Tokens
//!
//! `bigint` is a signed 64-bit integer, as in the store's own tables: a
//! token above `i64::MAX` is refused ([`FenceError::TokenOutOfRange`]),
//! never wrapped into a negative number that every later token would
//! pass.

use std::sync::LazyLock;
use std::time::Duration;

use regent_core::FencingToken;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{GenericClient, Transaction};

use crate::store::{DEFAULT_SCHEMA, is_identifier};

/// The fence table's name unless [`FenceBuilder::table`] says otherwise.
pub const DEFAULT_TABLE: &str = "regent_fence";

/// The fence of [`DEFAULT_TABLE`] in [`DEFAULT_SCHEMA`], for the module's
/// functions.
static DEFAULT: LazyLock<Fence> = LazyLock::new(|| Fence::at(DEFAULT_SCHEMA, DEFAULT_TABLE));

/// Checks `token` against the largest token recorded for `resource` in
/// [`DEFAULT_TABLE`] and records it, in the transaction `tx`: see
/// [`Fence::check_and_record`].
///
/// # Errors
///
/// As [`Fence::check_and_record`]: [`FenceError::Stale`] when a larger
/// token was recorded.
///
/// # Cancel safety
///
/// As [`Fence::check_and_record`]: a cancelled check has not passed.
pub async fn check_and_record(
    tx: &Transaction<'_>,
    resource: &str,
    token: FencingToken,
) -> Result<(), FenceError> {
    DEFAULT.check_and_record(tx, resource, token).await
}

/// Creates [`DEFAULT_TABLE`] if it is missing: see [`Fence::create_table`].
///
/// # Errors
///
/// [`FenceError::Sql`] when PostgreSQL refuses and the table is not there.
///
/// # Cancel safety
///
/// Cancel safe: `CREATE TABLE IF NOT EXISTS` may be called again.
pub async fn create_table(client: &impl GenericClient) -> Result<(), FenceError> {
    DEFAULT.create_table(client).await
}

/// A fence table: where the largest token of each resource is recorded.
/// [`Fence::default`] is [`DEFAULT_TABLE`] in [`DEFAULT_SCHEMA`], which
/// the module's functions use.
#[derive(Clone, Debug)]
pub struct Fence {
    /// `"schema"."table"`.
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
    schema: String,
    table: String,
}

impl FenceBuilder {
    /// The table's schema (default [`DEFAULT_SCHEMA`], `public`), as the
    /// store's [`schema`](crate::PostgresStoreBuilder::schema): a plain
    /// identifier (ASCII letters, digits and `_`, not starting with a
    /// digit, at most 63 bytes), quoted, so case matters.
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The table's name (default [`DEFAULT_TABLE`]): a plain identifier,
    /// as the schema.
    #[must_use]
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// The fence.
    ///
    /// # Errors
    ///
    /// [`FenceError::InvalidName`] when the schema or the table breaks the
    /// rule of [`schema`](Self::schema).
    pub fn build(self) -> Result<Fence, FenceError> {
        for (what, name) in [("schema", &self.schema), ("table", &self.table)] {
            if !is_identifier(name) {
                return Err(FenceError::InvalidName {
                    what,
                    name: name.clone(),
                });
            }
        }
        Ok(Fence::at(&self.schema, &self.table))
    }
}

impl Default for Fence {
    fn default() -> Self {
        DEFAULT.clone()
    }
}

impl Fence {
    /// Settings for a fence table other than [`DEFAULT_TABLE`] in
    /// [`DEFAULT_SCHEMA`].
    pub fn builder() -> FenceBuilder {
        FenceBuilder {
            schema: DEFAULT_SCHEMA.to_owned(),
            table: DEFAULT_TABLE.to_owned(),
        }
    }

    /// `schema` and `table` are checked identifiers: quoting them is
    /// enough.
    fn at(schema: &str, table: &str) -> Self {
        let t = format!("\"{schema}\".\"{table}\"");
        Self {
            sql: Statements {
                create: format!(
                    "CREATE TABLE IF NOT EXISTS {t} (
                         resource text PRIMARY KEY,
                         token    bigint NOT NULL
                     )"
                ),
                // ON CONFLICT DO UPDATE locks the row's latest version and
                // judges the WHERE on it, updated or not: see the module
                // docs.
                upsert: format!(
                    "INSERT INTO {t} AS f (resource, token) VALUES ($1, $2)
                     ON CONFLICT (resource) DO UPDATE SET token = excluded.token
                     WHERE f.token <= excluded.token
                     RETURNING f.token"
                ),
                newest: format!("SELECT token FROM {t} WHERE resource = $1 AND token >= 0"),
            },
            table: t,
        }
    }

    /// The table, schema-qualified and quoted as the statements name it.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table if it is missing. Call it once, on a client
    /// outside a transaction (at start-up, or in a migration); the check
    /// does not create the table.
    ///
    /// A role that may not create it succeeds if it is there already
    /// (an administrator made it), and instances starting together
    /// succeed too: concurrent `CREATE TABLE IF NOT EXISTS` race on the
    /// catalog, and the loser tries again.
    ///
    /// # Errors
    ///
    /// [`FenceError::Sql`] when PostgreSQL refuses and the table is not
    /// there: no `CREATE` privilege on the schema, no such schema, no
    /// server.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: `CREATE TABLE IF NOT EXISTS` may be called again.
    pub async fn create_table(&self, client: &impl GenericClient) -> Result<(), FenceError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            // The simple protocol: no statement is prepared, by name or
            // not.
            let e = match client.batch_execute(&self.sql.create).await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if self.exists(client).await {
                return Ok(());
            }
            let racing = matches!(
                e.code(),
                Some(c) if *c == SqlState::UNIQUE_VIOLATION
                    || *c == SqlState::DUPLICATE_OBJECT
                    || *c == SqlState::DUPLICATE_TABLE
            );
            if !racing || attempt >= 5 {
                return Err(self.sql_error(e));
            }
            tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
        }
    }

    /// Whether the table is there (made by someone else, maybe). An error
    /// (no server, an aborted transaction) is "no": the caller reports its
    /// own.
    async fn exists(&self, client: &impl GenericClient) -> bool {
        client
            .query_typed(
                "SELECT to_regclass($1) IS NOT NULL",
                &[(&self.table, Type::TEXT)],
            )
            .await
            .ok()
            .and_then(|rows| rows.first().and_then(|r| r.try_get::<_, bool>(0).ok()))
            .unwrap_or(false)
    }

    /// Checks `token` against the largest token recorded for `resource`,
    /// and records it: passes if it is at least as large, and then `tx`
    /// holds the new record and the row's lock, to commit with the
    /// protected writes.
    ///
    /// Call it in the transaction that writes the resource, before the
    /// writes, and commit only if it passed. See the [module docs](self)
    /// for what that guarantees. It waits while another transaction that
    /// checked `resource` is open.
    ///
    /// # Errors
    ///
    /// * [`FenceError::Stale`]: a larger token was recorded (a newer term
    ///   has written); nothing changed. Roll back: this term is over.
    /// * [`FenceError::TokenOutOfRange`]: `token` is above `i64::MAX`.
    /// * [`FenceError::Sql`]: PostgreSQL failed; the transaction is
    ///   aborted. The table missing or a privilege lacking (the message
    ///   says which), a serialization failure (REPEATABLE READ or
    ///   SERIALIZABLE: run the transaction again), `lock_timeout`, a lost
    ///   connection.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a check cancelled while its statement is in flight
    /// may have recorded the token, or not, and has not passed. Do not
    /// commit the transaction after it; drop it (it rolls back).
    pub async fn check_and_record(
        &self,
        tx: &Transaction<'_>,
        resource: &str,
        token: FencingToken,
    ) -> Result<(), FenceError> {
        let Ok(value) = i64::try_from(token.get()) else {
            return Err(FenceError::TokenOutOfRange {
                resource: resource.to_owned(),
                token,
            });
        };
        let recorded = tx
            .query_typed(
                &self.sql.upsert,
                &[(&resource, Type::TEXT), (&value, Type::INT8)],
            )
            .await
            .map_err(|e| self.sql_error(e))?;
        if !recorded.is_empty() {
            return Ok(());
        }
        // The upsert found a row with a larger token and left it, locked
        // by this transaction: it is still there. Were it gone, refuse all
        // the same: a check that did not pass never passes.
        let newest = self.newest(tx, resource).await?.unwrap_or(token);
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

    /// The largest token recorded for `resource`, if any, as `client` sees
    /// it now (in its transaction, if it is one). For reports and tests: a
    /// check needs no read before it. A negative number (written by hand)
    /// refuses no token, and reads as `None`.
    ///
    /// # Errors
    ///
    /// [`FenceError::Sql`] when PostgreSQL fails, the table missing
    /// included.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn newest(
        &self,
        client: &impl GenericClient,
        resource: &str,
    ) -> Result<Option<FencingToken>, FenceError> {
        let rows = client
            .query_typed(&self.sql.newest, &[(&resource, Type::TEXT)])
            .await
            .map_err(|e| self.sql_error(e))?;
        rows.first()
            .map(|r| {
                r.try_get::<_, i64>(0)
                    // Not negative: the WHERE says so.
                    .map(|v| FencingToken::new(v.unsigned_abs()))
                    .map_err(|e| self.sql_error(e))
            })
            .transpose()
    }

    fn sql_error(&self, source: tokio_postgres::Error) -> FenceError {
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
    /// The token is above `i64::MAX`, the largest `bigint`.
    #[non_exhaustive]
    TokenOutOfRange {
        /// The resource checked.
        resource: String,
        /// The token refused.
        token: FencingToken,
    },
    /// The schema or the table name is not a plain identifier
    /// ([`FenceBuilder::schema`]).
    #[non_exhaustive]
    InvalidName {
        /// `"schema"` or `"table"`.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// PostgreSQL failed: the source says how, and the message what to do
    /// where it knows.
    #[non_exhaustive]
    Sql {
        /// The fence table, schema-qualified.
        table: String,
        /// tokio-postgres's error.
        source: tokio_postgres::Error,
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
            Self::TokenOutOfRange { resource, token } => write!(
                f,
                "fencing token {token} for resource {resource:?} is above {}, the largest \
                 bigint",
                i64::MAX
            ),
            Self::InvalidName { what, name } => write!(
                f,
                "fence {what} {name:?} is not a plain identifier (ASCII letters, digits and _, \
                 not starting with a digit, at most 63 bytes)"
            ),
            Self::Sql { table, source } => {
                write!(f, "fence table {table}: ")?;
                f.write_str(match source.code() {
                    Some(c) if *c == SqlState::UNDEFINED_TABLE => {
                        "the table is missing: create it once (regent_postgres::fence::create_table, \
                         or the CREATE TABLE in its docs)"
                    }
                    Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => {
                        "the role needs USAGE on the schema and SELECT, INSERT and UPDATE on the \
                         table (and CREATE on the schema to create it)"
                    }
                    Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE => {
                        "a concurrent transaction recorded a token first (REPEATABLE READ or \
                         SERIALIZABLE): roll back, and run the transaction again"
                    }
                    Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => {
                        "another transaction held the resource's fence row past lock_timeout"
                    }
                    Some(c) if *c == SqlState::IN_FAILED_SQL_TRANSACTION => {
                        "the transaction had failed before the check: roll it back"
                    }
                    _ => "PostgreSQL failed",
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
