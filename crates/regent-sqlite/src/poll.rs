//! The shared poll of the store's watches, which the connection thread
//! runs between batches: every election watched is read in one read
//! transaction per poll interval, and its state published on one `watch`
//! channel that all its streams share. The streams themselves are
//! [`crate::store`]'s.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use regent_core::{ElectionName, LeaderInfo};
use rusqlite::Connection;
use tokio::sync::watch;

use crate::batch::exec;
use crate::clock::{later, monotonic_now_ns};
use crate::db::{self, Seen, Site};

/// What the shared poll publishes for one election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Polled {
    /// Not polled yet.
    Unread,
    /// Who leads: `None` is no leader.
    Leader(Option<LeaderInfo>),
    /// The election's row, or the poll as a whole, failed to read. The
    /// streams read the election again through `current_leader`, which
    /// reports the error with its cause.
    Failed,
}

/// The shared poll: every election the store's streams watch, however
/// many, is read in one read transaction per poll interval, and its state
/// published on one `watch` channel that all its streams share.
///
/// A poll reads rows only if something may have changed them: another
/// connection committed (`PRAGMA data_version` moved), this connection
/// wrote, or the election is newly watched. Otherwise it only judges the
/// rows it kept against the clock, which is how expiry is seen. Rows are
/// read one lookup each for a few elections, and in one scan of the table
/// for many (more than [`SCAN_ABOVE`], and at least a quarter of the
/// table). A row read again that differs only in its expiry (a renewal)
/// is neither copied nor validated again.
pub(crate) struct Watches {
    interval: Duration,
    /// By the election's name, which the scan reads.
    elections: HashMap<Box<str>, Watched>,
    /// The rows the last scan saw.
    table_rows: usize,
    /// When the next poll is due; `None` while nothing is watched.
    pub(crate) next: Option<Instant>,
    /// `PRAGMA data_version` at the last poll; `None` when the rows kept
    /// cannot be trusted (nothing read yet, or the last poll failed).
    data_version: Option<i64>,
    /// This connection changed rows since the last poll.
    pub(crate) wrote: bool,
}

/// Above this many elections watched, the poll may scan the table rather
/// than look each row up.
const SCAN_ABOVE: usize = 32;

struct Watched {
    election: ElectionName,
    state: watch::Sender<Polled>,
    /// The row as last read: `Ok(None)` when there was none.
    seen: Result<Option<Seen>, ()>,
    /// Newly watched, or a stream joined since the last poll: read the row
    /// and notify every stream, changed or not (a new stream's first state
    /// was read apart from the poll, and may differ from the channel's).
    fresh: bool,
    /// Seen by the scan in progress.
    found: bool,
}

impl Watches {
    pub(crate) fn new(interval: Duration) -> Self {
        Watches {
            interval,
            elections: HashMap::new(),
            table_rows: 0,
            next: None,
            data_version: None,
            wrote: false,
        }
    }

    pub(crate) fn add(&mut self, election: ElectionName) -> watch::Receiver<Polled> {
        if self.next.is_none() {
            self.next = Some(later(Instant::now(), self.interval));
        }
        let name: Box<str> = election.as_str().into();
        let watched = self.elections.entry(name).or_insert_with(|| Watched {
            election,
            state: watch::Sender::new(Polled::Unread),
            seen: Err(()),
            fresh: true,
            found: false,
        });
        watched.fresh = true;
        watched.state.subscribe()
    }

    /// The next poll runs at once (if anything is watched).
    pub(crate) fn poll_now(&mut self) {
        if self.next.is_some() {
            self.next = Some(Instant::now());
        }
    }

    pub(crate) fn poll(&mut self, conn: &Connection, site: &Site) {
        self.elections.retain(|_, w| !w.state.is_closed());
        if self.elections.is_empty() {
            self.next = None;
            self.data_version = None;
            return;
        }
        let wrote = std::mem::take(&mut self.wrote);
        let read = self.read(conn, site, wrote);
        if !conn.is_autocommit() {
            // Nothing was written: ending the transaction cannot lose anything.
            if exec(conn, "COMMIT").is_err() {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
        // Read after the rows: a row written after the clock was read would
        // look as if it expired beyond its ttl.
        let now = monotonic_now_ns();
        for w in self.elections.values_mut() {
            let election = &w.election;
            let polled = match (&read, &w.seen) {
                (Err(()), _) | (_, Err(())) => Polled::Failed,
                (Ok(()), Ok(None)) => Polled::Leader(None),
                (Ok(()), Ok(Some(seen))) => match seen.live_at(site, election, now) {
                    Ok(true) => {
                        // Unchanged: nothing to clone or send.
                        if !w.fresh
                            && matches!(&*w.state.borrow(), Polled::Leader(Some(l)) if seen.is_leader(l))
                        {
                            continue;
                        }
                        Polled::Leader(Some(seen.leader()))
                    }
                    Ok(false) => Polled::Leader(None),
                    Err(_) => Polled::Failed,
                },
            };
            let fresh = std::mem::take(&mut w.fresh);
            w.state.send_if_modified(|current| {
                let changed = fresh || *current != polled;
                *current = polled;
                changed
            });
        }
        self.next = Some(later(Instant::now(), self.interval));
    }

    /// Reads again the rows that may have changed, in one read
    /// transaction left open for the caller to end. `Err` when the
    /// transaction or its view could not be read at all.
    fn read(&mut self, conn: &Connection, site: &Site, wrote: bool) -> Result<(), ()> {
        let version = exec(conn, "BEGIN").and_then(|()| db::data_version(conn));
        let version = match version {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(path = %site.path.display(), error = %e, "sqlite store: the poll of the watches failed");
                self.data_version = None;
                return Err(());
            }
        };
        let all = wrote || self.data_version != Some(version);
        self.data_version = Some(version);
        let many = self.elections.len();
        if all && many > SCAN_ABOVE && many * 4 >= self.table_rows {
            return self.scan(conn, site);
        }
        for w in self.elections.values_mut() {
            if !all && !w.fresh && w.seen.is_ok() {
                continue;
            }
            let before = std::mem::replace(&mut w.seen, Err(())).ok().flatten();
            w.seen = db::read_again(conn, site, &w.election, before).map_err(drop);
        }
        Ok(())
    }

    /// Reads every row of the table, keeping those watched.
    fn scan(&mut self, conn: &Connection, site: &Site) -> Result<(), ()> {
        // Invariant: after a scan, `found` is set exactly on the elections
        // it saw; the others have no row.
        for w in self.elections.values_mut() {
            w.found = false;
        }
        let scanned = db::scan_rows(conn, |name, row| {
            if let Some(w) = self.elections.get_mut(name) {
                let before = std::mem::replace(&mut w.seen, Err(())).ok().flatten();
                w.seen = db::refresh(site, &w.election, row, 1, before)
                    .map(Some)
                    .map_err(drop);
                w.found = true;
            }
        });
        match scanned {
            Ok(rows) => {
                self.table_rows = rows;
                for w in self.elections.values_mut() {
                    if !w.found {
                        w.seen = Ok(None);
                    }
                }
                Ok(())
            }
            Err(e) => {
                tracing::debug!(path = %site.path.display(), error = %e, "sqlite store: the poll of the watches failed");
                self.data_version = None;
                Err(())
            }
        }
    }
}
