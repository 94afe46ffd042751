//! The group commit: the reads of a batch in one read transaction, its
//! writes in one `BEGIN IMMEDIATE` transaction and one `COMMIT` (a write
//! of several statements inside a savepoint of its own), each request
//! answered after its transaction ended; and the counts of what the
//! commits did. When a batch runs is [`crate::conn`]'s to decide.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use regent_core::ErrorKind;
use rusqlite::Connection;

use crate::db::Site;
use crate::request::{Access, Failure, Ran, Request};

/// What the thread has done, counted for tests and benches.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Group commits that succeeded.
    pub(crate) commits: AtomicU64,
    /// Writes those commits answered (each its own outcome).
    pub(crate) writes: AtomicU64,
    /// The most writes one commit answered.
    pub(crate) largest: AtomicU64,
    /// Times the thread waited with writes in hand.
    pub(crate) waits: AtomicU64,
}

/// Executes one statement without arguments, prepared once per connection.
pub(crate) fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Runs `reads` in one read transaction (one snapshot) and answers them,
/// leaving `reads` empty.
pub(crate) fn run_reads(conn: &Connection, site: &Site, reads: &mut Vec<Box<dyn Request>>) {
    reads.retain(|r| !r.abandoned());
    // Alone, a read needs no transaction of its own.
    let grouped = reads.len() > 1;
    if grouped && let Err(e) = exec(conn, "BEGIN") {
        let failure = Failure::db("the read transaction did not begin", e);
        reads.drain(..).for_each(|r| r.fail(failure.clone()));
        return;
    }
    for r in reads.iter_mut() {
        // An error that ends the transaction leaves the reads after it in
        // autocommit mode, each its own snapshot: still right for a read.
        r.run(conn, site);
    }
    if grouped && !conn.is_autocommit() {
        // Nothing was written: ending the transaction cannot lose anything.
        let _ = exec(conn, "COMMIT");
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
    reads.drain(..).for_each(Request::answer);
}

const SAVEPOINT: &str = "SAVEPOINT regent_request";

const RELEASE: &str = "RELEASE regent_request";

const ROLLBACK_TO: &str = "ROLLBACK TO regent_request";

/// Runs `writes` in one write transaction, commits once, then answers
/// them, leaving `writes` empty.
pub(crate) fn run_writes(
    conn: &Connection,
    site: &Site,
    stats: &Stats,
    writes: &mut Vec<Box<dyn Request>>,
) {
    writes.retain(|w| !w.abandoned());
    if writes.is_empty() {
        return;
    }
    let fail_all = |writes: &mut Vec<Box<dyn Request>>, failure: Failure| {
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        writes.drain(..).for_each(|w| w.fail(failure.clone()));
    };
    // Waits up to the busy timeout for another connection's write lock.
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        return fail_all(
            writes,
            Failure::db("the write transaction did not begin", e),
        );
    }
    for i in 0..writes.len() {
        let savepoint = writes[i].access() == Access::Write;
        if savepoint && let Err(e) = exec(conn, SAVEPOINT) {
            return fail_all(writes, Failure::db("a savepoint failed", e));
        }
        let changes = conn.total_changes();
        let ran = writes[i].run(conn, site);
        let lost = conn.is_autocommit();
        let stray = !savepoint && ran != Ran::Ok && conn.total_changes() != changes;
        if lost || stray {
            // Either SQLite rolled the whole transaction back (an I/O
            // error, a full disk, no memory), or a one-statement write
            // failed after it changed rows, which only rolling back the
            // whole batch undoes: every write of the batch fails.
            let why = if lost {
                "its group commit was rolled back after an error"
            } else {
                "its group commit was rolled back after a request failed half-way"
            };
            let failure = match writes[i].take_error() {
                Some(e) => Failure::Batch {
                    kind: e.kind(),
                    why,
                    source: Some(Arc::new(e)),
                },
                None => Failure::Batch {
                    kind: ErrorKind::Unavailable,
                    why,
                    source: None,
                },
            };
            return fail_all(writes, failure);
        }
        if !savepoint {
            continue;
        }
        let ended = match ran {
            Ran::Ok => exec(conn, RELEASE),
            Ran::Failed | Ran::Panicked => {
                exec(conn, ROLLBACK_TO).and_then(|()| exec(conn, RELEASE))
            }
        };
        if let Err(e) = ended {
            return fail_all(writes, Failure::db("a savepoint failed", e));
        }
    }
    // The fsync: every write of the batch is durable when it returns.
    if let Err(e) = exec(conn, "COMMIT") {
        return fail_all(writes, Failure::db("the group commit failed", e));
    }
    let answered = writes.len() as u64;
    stats.commits.fetch_add(1, Ordering::Relaxed);
    stats.writes.fetch_add(answered, Ordering::Relaxed);
    stats.largest.fetch_max(answered, Ordering::Relaxed);
    writes.drain(..).for_each(Request::answer);
}
