//! Helpers shared by the integration tests: a raw connection to tamper with
//! the file behind regent's back, and the host's clock and boot id.

#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use regent_core::ElectionName;
use rusqlite::Connection;
use rusqlite::types::Value;

/// A plain connection to the store's file, as an operator's `sqlite3`
/// would open it.
pub(crate) fn raw(path: &Path) -> Connection {
    let conn = Connection::open(path).expect("open the database file");
    conn.busy_timeout(Duration::from_secs(5))
        .expect("set a busy timeout");
    conn
}

/// `CLOCK_MONOTONIC` in nanoseconds, the store's clock.
pub(crate) fn mono_ns() -> i64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// This boot's id, as the store reads it.
pub(crate) fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .expect("linux has a boot id")
        .trim()
        .to_owned()
}

pub(crate) fn election(name: &str) -> ElectionName {
    ElectionName::new(name).expect("valid election name")
}

#[allow(unused_imports, reason = "each test binary uses its own subset")]
pub(crate) use regent_testkit::fixtures::{acquire_request as req, holder};

/// A lease row written by hand, column by column; any column may hold a
/// value regent would never write.
#[derive(Clone, Debug)]
pub(crate) struct HandRow {
    pub(crate) election: String,
    pub(crate) holder: Value,
    pub(crate) token: Value,
    /// The election's fencing counter; `None` deletes it.
    pub(crate) counter: Option<i64>,
    pub(crate) expires_at_ns: Value,
    pub(crate) ttl_ms: Value,
    pub(crate) boot_id: Value,
    pub(crate) metadata: Value,
}

impl HandRow {
    /// A well-formed row of this boot that holds `election` for `ttl` from
    /// now, with `token` and the counter at `token`.
    pub(crate) fn live(election: &str, holder: &str, token: i64, ttl: Duration) -> Self {
        let ttl_ms = i64::try_from(ttl.as_millis()).expect("short ttl");
        Self {
            election: election.to_owned(),
            holder: Value::Text(holder.to_owned()),
            token: Value::Integer(token),
            counter: Some(token),
            expires_at_ns: Value::Integer(mono_ns() + ttl_ms * 1_000_000),
            ttl_ms: Value::Integer(ttl_ms),
            boot_id: Value::Text(boot_id()),
            metadata: Value::Text(r#"{"who":"hand"}"#.to_owned()),
        }
    }

    /// Writes the row and its counter, replacing what was there.
    pub(crate) fn write(&self, conn: &Connection) {
        conn.execute(
            "INSERT OR REPLACE INTO regent_lease
             (election, holder, token, expires_at_ns, ttl_ms, boot_id, metadata)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            rusqlite::params![
                self.election,
                self.holder,
                self.token,
                self.expires_at_ns,
                self.ttl_ms,
                self.boot_id,
                self.metadata
            ],
        )
        .expect("write a lease row by hand");
        conn.execute(
            "DELETE FROM regent_fencing WHERE election = ?1",
            [&self.election],
        )
        .expect("clear the fencing counter");
        if let Some(c) = self.counter {
            conn.execute(
                "INSERT INTO regent_fencing (election, last_token) VALUES (?1, ?2)",
                rusqlite::params![self.election, c],
            )
            .expect("write the fencing counter by hand");
        }
    }
}
