//! Opening the database file: the connection's settings (WAL, `synchronous
//! = FULL`, the busy timeout) and regent's schema, created in a new file
//! and checked in an existing one. The SQL of the operations on the
//! schema's rows is [`crate::db`]'s.

use std::path::Path;
use std::time::Duration;

use regent_core::{ErrorKind, StoreError};
use rusqlite::types::Value;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::error::db_error;

/// The version of the schema this build writes and reads.
pub(crate) const SCHEMA_VERSION: i64 = 1;

/// The schema. `regent_fencing` is apart from `regent_lease` so that the
/// counter outlives the lease row: release, expiry and deletion of the row
/// never reset it.
const SCHEMA: &str = "
CREATE TABLE regent_meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
CREATE TABLE regent_fencing (
    election   TEXT PRIMARY KEY NOT NULL,
    last_token INTEGER NOT NULL
);
CREATE TABLE regent_lease (
    election      TEXT PRIMARY KEY NOT NULL,
    holder        TEXT NOT NULL,
    token         INTEGER NOT NULL,
    expires_at_ns INTEGER NOT NULL,
    ttl_ms        INTEGER NOT NULL,
    boot_id       TEXT NOT NULL,
    metadata      TEXT NOT NULL,
    won_by        TEXT
);
";

/// The column of the store that won a term (its incarnation and the
/// term's token, see `claims`), added to schema version 1 after it first
/// shipped: in a new file's table, and added on opening a file of an
/// earlier build. NULL in the rows an earlier build wrote, which never
/// match; an earlier build ignores it.
const WON_BY: &str = "ALTER TABLE regent_lease ADD COLUMN won_by TEXT";

/// The tables of the roster and of leases kept for a successor (contract
/// items 10 and 11), added to schema version 1 after it first shipped:
/// created with the schema in a new file, and on opening a file of an
/// earlier build (an older build ignores them).
const ROSTER: &str = "
CREATE TABLE IF NOT EXISTS regent_roster (
    election      TEXT NOT NULL,
    holder        TEXT NOT NULL,
    expires_at_ns INTEGER NOT NULL,
    boot_id       TEXT NOT NULL,
    metadata      TEXT NOT NULL,
    PRIMARY KEY (election, holder)
);
CREATE TABLE IF NOT EXISTS regent_reserved (
    election TEXT PRIMARY KEY NOT NULL,
    holder   TEXT NOT NULL,
    until_ns INTEGER NOT NULL,
    boot_id  TEXT NOT NULL
);
";

/// Opens (creating if missing) the database file, sets the connection up
/// and makes sure it holds regent's schema.
pub(crate) fn open(path: &Path, busy_timeout: Duration) -> Result<Connection, StoreError> {
    let at = |what: &str| format!("sqlite store '{}': {what}", path.display());
    let open_error = |what: &str, e: rusqlite::Error| match e.sqlite_error_code() {
        Some(ErrorCode::CannotOpen) => StoreError::new(
            ErrorKind::Config,
            at(&format!("{what}: {}", why_cannot_open(path))),
        )
        .with_source(e),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::corrupt(at(
            &format!("{what}: the file is not a SQLite database, or it is damaged"),
        ))
        .with_source(e),
        _ => db_error(at(what), e),
    };
    // No URI interpretation: the path is a path. No SQLite-level mutex:
    // only the store's connection thread ever uses the connection.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| open_error("open", e))?;
    // SQLite counts the busy timeout in an int of milliseconds (rusqlite
    // panics beyond it); the builder allows at most a day.
    let busy_timeout = busy_timeout.min(Duration::from_millis(i32::MAX as u64));
    conn.busy_timeout(busy_timeout)
        .map_err(|e| open_error("set the busy timeout", e))?;
    // Switching a new file to WAL takes an exclusive lock, and SQLite
    // answers SQLITE_BUSY at once (without its busy handler) while another
    // process is switching or creating the schema: retry within the busy
    // timeout, as any other wait for the file.
    let give_up = crate::clock::later(std::time::Instant::now(), busy_timeout);
    let mode: String = loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
            Ok(mode) => break mode,
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) && std::time::Instant::now() < give_up =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(open_error("switch to WAL journal mode", e)),
        }
    };
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::new(
            ErrorKind::Config,
            at(&format!(
                "the database stays in journal mode '{mode}' instead of WAL (is it on a file system without shared memory, or read-only?)"
            )),
        ));
    }
    // FULL: every commit is fsynced before it returns. A token bump lost to
    // a power cut could hand out that token again.
    conn.execute_batch("PRAGMA synchronous = FULL")
        .map_err(|e| open_error("set synchronous = FULL", e))?;
    // Every statement of the operations and of the batches, prepared once.
    conn.set_prepared_statement_cache_capacity(32);
    ensure_schema(&mut conn, path).map_err(|e| match e {
        SchemaError::Db(what, e) => open_error(what, e),
        SchemaError::Foreign(what) => StoreError::new(ErrorKind::Config, at(&what)),
    })?;
    Ok(conn)
}

/// Names the likely cause of SQLITE_CANTOPEN, which SQLite itself does not.
fn why_cannot_open(path: &Path) -> String {
    if path.is_dir() {
        return "the path is a directory, not a file".into();
    }
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) if !dir.is_dir() => {
            format!("its directory '{}' does not exist", dir.display())
        }
        _ => "cannot open or create the file, or its -wal and -shm files beside it (check the permissions of the file and its directory)".into(),
    }
}

enum SchemaError {
    Db(&'static str, rusqlite::Error),
    Foreign(String),
}

enum SchemaState {
    /// Regent's schema; `roster`: with the roster's tables; `won_by`:
    /// with `regent_lease.won_by`.
    Current {
        roster: bool,
        won_by: bool,
    },
    Empty,
}

fn ensure_schema(conn: &mut Connection, path: &Path) -> Result<(), SchemaError> {
    // Most opens find the schema in place: check with a read, so that a
    // store opens while another connection holds the write lock.
    if let SchemaState::Current {
        roster: true,
        won_by: true,
    } = schema_state(conn)?
    {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| SchemaError::Db("create the schema", e))?;
    // Another process may have created it, or added what it lacked, while
    // we waited for the lock.
    match schema_state(&tx)? {
        SchemaState::Empty => {
            tx.execute_batch(SCHEMA)
                .map_err(|e| SchemaError::Db("create the schema", e))?;
            tx.execute_batch(ROSTER)
                .map_err(|e| SchemaError::Db("create the schema", e))?;
            tx.execute(
                "INSERT INTO regent_meta (key, value) VALUES ('schema_version', ?1)",
                [SCHEMA_VERSION.to_string()],
            )
            .map_err(|e| SchemaError::Db("create the schema", e))?;
            tracing::info!(path = %path.display(), "created the regent schema");
        }
        SchemaState::Current { roster, won_by } => {
            if !roster {
                tx.execute_batch(ROSTER)
                    .map_err(|e| SchemaError::Db("add the roster's tables", e))?;
                tracing::info!(path = %path.display(), "added the roster's tables to the regent schema");
            }
            if !won_by {
                tx.execute_batch(WON_BY)
                    .map_err(|e| SchemaError::Db("add the column regent_lease.won_by", e))?;
                tracing::info!(path = %path.display(), "added the column won_by to the regent schema's lease table");
            }
        }
    }
    tx.commit()
        .map_err(|e| SchemaError::Db("create the schema", e))
}

fn schema_state(conn: &Connection) -> Result<SchemaState, SchemaError> {
    let db = |e| SchemaError::Db("read the schema", e);
    let mut stmt = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
        )
        .map_err(db)?;
    let tables = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(db)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(db)?;
    if tables.is_empty() {
        return Ok(SchemaState::Empty);
    }
    if !tables.iter().any(|t| t == "regent_meta") {
        return Err(SchemaError::Foreign(format!(
            "the database has tables ({}) but not regent's schema: it is not a regent store",
            tables.join(", ")
        )));
    }
    let version: Option<Value> = conn
        .query_row(
            "SELECT value FROM regent_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(db)?;
    let version = match version {
        Some(Value::Text(v)) => v.parse::<i64>().ok(),
        Some(Value::Integer(v)) => Some(v),
        _ => None,
    };
    match version {
        Some(SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(SchemaError::Foreign(format!(
                "the database holds regent schema version {v}; this build reads version {SCHEMA_VERSION}"
            )));
        }
        None => {
            return Err(SchemaError::Foreign(
                "regent_meta holds no valid schema_version: not a regent store, or a damaged one"
                    .into(),
            ));
        }
    }
    for table in ["regent_fencing", "regent_lease"] {
        if !tables.iter().any(|t| t == table) {
            return Err(SchemaError::Foreign(format!(
                "regent schema version {SCHEMA_VERSION} without its table {table}: it was dropped"
            )));
        }
    }
    let roster = ["regent_roster", "regent_reserved"]
        .iter()
        .all(|t| tables.iter().any(|have| have == t));
    let won_by = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('regent_lease') WHERE name = 'won_by')",
            [],
            |r| r.get(0),
        )
        .map_err(db)?;
    Ok(SchemaState::Current { roster, won_by })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A huge busy timeout panicked the opening thread: rusqlite's
    /// conversion to SQLite's int of milliseconds, then `Instant::now() +
    /// busy_timeout` in the retry loop below. The builder refuses such
    /// timeouts; `open` itself does not panic on them either.
    #[test]
    fn a_huge_busy_timeout_does_not_panic_the_open() {
        let dir = tempfile::tempdir().expect("temp dir");
        open(&dir.path().join("regent.db"), Duration::MAX).expect("open");
    }
}
