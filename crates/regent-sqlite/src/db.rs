//! The blocking half: the SQL of every operation and the validation of
//! every row read back (opening the file and its schema are
//! [`crate::schema`]'s). Everything here runs on the store's
//! connection thread ([`crate::conn`]), inside the transaction of the batch
//! it belongs to: a write inside the batch's `BEGIN IMMEDIATE`, under the
//! write lock; a read inside a read transaction or on its own. The
//! operations neither begin nor end transactions.

use std::time::Duration;

use regent_core::{
    Acquire, AcquireRequest, ElectionName, FencingToken, HolderId, LeaderInfo, Lease, LeaseHandle,
    MAX_TTL, Metadata, Renewal, StoreError,
};
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, OptionalExtension};

use crate::clock::monotonic_now_ns;
use crate::error::db_error;
use regent_core::store::{Reclaim, won_by};

/// What an operation needs besides the connection: where the file is, for
/// error messages, and which boot this process runs in; and what the
/// connection thread does after the batch (ring the wake-up bell).
#[derive(Debug)]
pub(crate) struct Site {
    pub(crate) path: std::path::PathBuf,
    pub(crate) boot_id: String,
    /// The store's incarnation, random, drawn when it opened: written into
    /// every term it wins (`won_by`), so that it can tell a term of its
    /// own whose answer never came from any other (see `claims`).
    pub(crate) incarnation: String,
    /// Set by a release that deleted its row and by an acquire that won:
    /// the connection thread rings the wake-up bell after the batch
    /// commits (see `bell`).
    pub(crate) leader_changed: std::cell::Cell<bool>,
}

impl Site {
    pub(crate) fn new(path: std::path::PathBuf, boot_id: String) -> Self {
        Site {
            path,
            boot_id,
            incarnation: regent_core::store::incarnation(),
            leader_changed: std::cell::Cell::new(false),
        }
    }

    pub(crate) fn context(&self, op: &str, election: &ElectionName) -> String {
        format!(
            "sqlite store '{}': {op} election '{election}'",
            self.path.display()
        )
    }

    fn corrupt(&self, election: &ElectionName, what: impl std::fmt::Display) -> StoreError {
        StoreError::corrupt(format!(
            "sqlite store '{}': the lease row of election '{election}' was not written by regent: {what}",
            self.path.display()
        ))
    }
}

// ---------------------------------------------------------------- rows

/// A lease row that passed validation.
#[derive(Debug)]
struct LeaseRow {
    holder: HolderId,
    token: i64,
    expires_at_ns: i64,
    ttl_ms: i64,
    boot_id: String,
    metadata: Metadata,
}

impl LeaseRow {
    fn leader(&self) -> LeaderInfo {
        LeaderInfo {
            holder: self.holder.clone(),
            token: token_of(self.token),
            metadata: self.metadata.clone(),
        }
    }
}

/// Tokens in the database are positive i64s (checked on read).
fn token_of(t: i64) -> FencingToken {
    FencingToken::new(t.unsigned_abs())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Integer(_) => "an integer",
        Value::Real(_) => "a real",
        Value::Text(_) => "text",
        Value::Blob(_) => "a blob",
    }
}

const MAX_TTL_MS: i64 = MAX_TTL.as_millis() as i64;

/// The lease row of election `?1` and its fencing counter. The counter is
/// a correlated subquery, not a `LEFT JOIN`: SQLite (built with STAT4, as
/// rusqlite's bundled build is) re-prepares the join's statement each time
/// a new election is bound, which cost more than the rest of a renewal.
const READ_ROW: &str = "SELECT holder, token, expires_at_ns, ttl_ms, boot_id, metadata,
        (SELECT f.last_token FROM regent_fencing f WHERE f.election = l.election)
    FROM regent_lease l WHERE l.election = ?1";

/// Reads and validates `election`'s lease row and its fencing counter.
fn read_row(
    conn: &Connection,
    site: &Site,
    op: &str,
    election: &ElectionName,
) -> Result<Option<LeaseRow>, StoreError> {
    let raw = read_raw(conn, site, op, election)?;
    raw.map(|raw| validate(site, election, raw)).transpose()
}

/// The columns of `election`'s lease row and its fencing counter, as
/// stored.
fn read_raw(
    conn: &Connection,
    site: &Site,
    op: &str,
    election: &ElectionName,
) -> Result<Option<[Value; 7]>, StoreError> {
    conn.prepare_cached(READ_ROW)
        .and_then(|mut stmt| {
            stmt.query_row([election.as_str()], |r| {
                Ok([
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ])
            })
        })
        .optional()
        .map_err(|e| db_error(site.context(op, election), e))
}

fn validate(site: &Site, election: &ElectionName, raw: [Value; 7]) -> Result<LeaseRow, StoreError> {
    let bad = |what: String| site.corrupt(election, what);
    let [
        holder,
        token,
        expires_at_ns,
        ttl_ms,
        boot_id,
        metadata,
        counter,
    ] = raw;
    let holder = match holder {
        Value::Text(s) => {
            HolderId::new(&s).map_err(|e| bad(format!("holder {s:?} is not a holder id ({e})")))?
        }
        v => return Err(bad(format!("holder is {}, not text", type_name(&v)))),
    };
    let token = match token {
        Value::Integer(t) if t > 0 => t,
        Value::Integer(t) => return Err(bad(format!("token {t} is not positive"))),
        v => return Err(bad(format!("token is {}, not an integer", type_name(&v)))),
    };
    match counter {
        Value::Integer(c) if c >= token => {}
        Value::Integer(c) => {
            return Err(bad(format!(
                "its token {token} is above the election's fencing counter {c}"
            )));
        }
        Value::Null => {
            return Err(bad(format!(
                "its token is {token} but the election has no fencing counter in regent_fencing"
            )));
        }
        v => {
            return Err(bad(format!(
                "the fencing counter is {}, not an integer",
                type_name(&v)
            )));
        }
    }
    let expires_at_ns = match expires_at_ns {
        Value::Integer(e) => e,
        v => {
            return Err(bad(format!(
                "expires_at_ns is {}, not an integer",
                type_name(&v)
            )));
        }
    };
    let ttl_ms = match ttl_ms {
        Value::Integer(t) if (1..=MAX_TTL_MS).contains(&t) => t,
        v => {
            return Err(bad(format!(
                "ttl_ms is {v:?}, not an integer in 1..={MAX_TTL_MS}"
            )));
        }
    };
    let boot_id = match boot_id {
        Value::Text(b) if !b.is_empty() => b,
        v => return Err(bad(format!("boot_id is {v:?}, not a boot id"))),
    };
    let metadata = match metadata {
        Value::Text(m) => Metadata::from_json(&m).map_err(bad)?,
        v => return Err(bad(format!("metadata is {}, not text", type_name(&v)))),
    };
    Ok(LeaseRow {
        holder,
        token,
        expires_at_ns,
        ttl_ms,
        boot_id,
        metadata,
    })
}

/// Whether `row` holds the election at `now`. A row from another boot is
/// dead: its holders died with that boot, and its clock readings mean
/// nothing on this one.
fn is_live(
    site: &Site,
    election: &ElectionName,
    row: &LeaseRow,
    now: i64,
) -> Result<bool, StoreError> {
    if row.boot_id != site.boot_id {
        return Ok(false);
    }
    // Invariant: a row is written at some `t <= now` (same clock, read
    // under the write lock) with `expires_at = t + ttl`, so it can never
    // expire more than its ttl from now. One that does was not written by
    // regent on this host's clock, and would otherwise hold the election
    // for as long as its number says.
    let remaining = i128::from(row.expires_at_ns) - i128::from(now);
    if remaining > i128::from(row.ttl_ms) * 1_000_000 {
        return Err(site.corrupt(
            election,
            format!(
                "it expires {remaining} ns from now, beyond its ttl of {} ms: not written with this host's clock",
                row.ttl_ms
            ),
        ));
    }
    Ok(remaining > 0)
}

// ---------------------------------------------------------------- the shared poll

/// A lease row as the shared poll of the watches keeps it between polls:
/// as stored, and validated.
#[derive(Debug)]
pub(crate) struct Seen {
    raw: [Value; 7],
    row: LeaseRow,
}

/// The column of `expires_at_ns` in a raw row: the only one a renewal
/// changes.
const EXPIRES_AT: usize = 2;

/// Every lease row, with its election first, then the columns of
/// [`READ_ROW`].
const SCAN_ROWS: &str = "SELECT election, holder, token, expires_at_ns, ttl_ms, boot_id, metadata,
        (SELECT f.last_token FROM regent_fencing f WHERE f.election = l.election)
    FROM regent_lease l";

/// Calls `each` with the election and the row of every lease row, for the
/// shared poll: one statement for all, where one per election would cost
/// a lookup each. Returns the number of rows.
pub(crate) fn scan_rows(
    conn: &Connection,
    mut each: impl FnMut(&str, &rusqlite::Row<'_>),
) -> rusqlite::Result<usize> {
    let mut stmt = conn.prepare_cached(SCAN_ROWS)?;
    let mut rows = stmt.query([])?;
    let mut n = 0;
    while let Some(row) = rows.next()? {
        n += 1;
        // A name that is not text is no election anyone can watch.
        if let ValueRef::Text(name) = row.get_ref(0)?
            && let Ok(name) = std::str::from_utf8(name)
        {
            each(name, row);
        }
    }
    Ok(n)
}

/// Reads `election`'s row again for the shared poll: see [`refresh`].
pub(crate) fn read_again(
    conn: &Connection,
    site: &Site,
    election: &ElectionName,
    before: Option<Seen>,
) -> Result<Option<Seen>, StoreError> {
    let err = |e| db_error(site.context("watch", election), e);
    let mut stmt = conn.prepare_cached(READ_ROW).map_err(err)?;
    let mut rows = stmt.query([election.as_str()]).map_err(err)?;
    match rows.next().map_err(err)? {
        None => Ok(None),
        Some(row) => refresh(site, election, row, 0, before).map(Some),
    }
}

/// The row `row` holds from its column `at` on (the columns of
/// [`READ_ROW`]), as the shared poll keeps it. A row that differs from
/// `before` in its expiry alone is neither copied nor validated again: a
/// renewal costs the poll no allocation and no JSON parsing.
pub(crate) fn refresh(
    site: &Site,
    election: &ElectionName,
    row: &rusqlite::Row<'_>,
    at: usize,
    before: Option<Seen>,
) -> Result<Seen, StoreError> {
    let err = |e| db_error(site.context("watch", election), e);
    if let Some(mut seen) = before {
        let mut expires_at_ns = None;
        let mut same = true;
        for (i, kept) in seen.raw.iter().enumerate() {
            let now = row.get_ref(at + i).map_err(err)?;
            if i == EXPIRES_AT
                && let ValueRef::Integer(e) = now
            {
                expires_at_ns = Some(e);
                continue;
            }
            if !same_value(now, kept) {
                same = false;
                break;
            }
        }
        if same && let Some(e) = expires_at_ns {
            seen.row.expires_at_ns = e;
            seen.raw[EXPIRES_AT] = Value::Integer(e);
            return Ok(seen);
        }
    }
    let get = |i: usize| row.get::<_, Value>(at + i).map_err(err);
    let raw = [
        get(0)?,
        get(1)?,
        get(2)?,
        get(3)?,
        get(4)?,
        get(5)?,
        get(6)?,
    ];
    let row = validate(site, election, raw.clone())?;
    Ok(Seen { raw, row })
}

fn same_value(now: ValueRef<'_>, kept: &Value) -> bool {
    match (now, kept) {
        (ValueRef::Null, Value::Null) => true,
        (ValueRef::Integer(a), Value::Integer(b)) => a == *b,
        (ValueRef::Real(a), Value::Real(b)) => a.to_bits() == b.to_bits(),
        (ValueRef::Text(a), Value::Text(b)) => a == b.as_bytes(),
        (ValueRef::Blob(a), Value::Blob(b)) => a == b.as_slice(),
        _ => false,
    }
}

impl Seen {
    /// Whether the row holds its election at `now` (the clock read after
    /// the row), as [`leader`] judges it.
    pub(crate) fn live_at(
        &self,
        site: &Site,
        election: &ElectionName,
        now: i64,
    ) -> Result<bool, StoreError> {
        is_live(site, election, &self.row, now)
    }

    /// Whether `info` is this row's leader.
    pub(crate) fn is_leader(&self, info: &LeaderInfo) -> bool {
        info.token == token_of(self.row.token)
            && info.holder == self.row.holder
            && info.metadata == self.row.metadata
    }

    /// This row's leader.
    pub(crate) fn leader(&self) -> LeaderInfo {
        self.row.leader()
    }
}

/// The read transaction's view of the database: changes whenever another
/// connection has committed since the last read. (Our own commits leave it
/// as it is.)
pub(crate) fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))
}

// ---------------------------------------------------------------- operations

/// The whole milliseconds to store for `ttl`, rounded up: a store never
/// grants less than asked.
pub(crate) fn ttl_ms(ttl: Duration) -> i64 {
    let ms = ttl.as_nanos().div_ceil(1_000_000);
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Reads the clock, then `election`'s row. Called under the write lock:
/// every writer reads the clock after the one before it committed, so
/// expiry decisions follow commit order.
fn clock_and_row(
    conn: &Connection,
    site: &Site,
    op: &str,
    election: &ElectionName,
) -> Result<(i64, Option<LeaseRow>), StoreError> {
    let now = monotonic_now_ns();
    let row = read_row(conn, site, op, election)?;
    Ok((now, row))
}

/// Whether `row`, live, is one the caller's acquire may take over: a term
/// this store won for the caller by a request whose answer never came
/// (see [`regent_core::store::Claims`]). Same holder, this store's `won_by` for the
/// row's token, not the term last handed out, and no other acquire of the
/// holder through this store in flight. A term of the same holder id
/// written by another store (another process, perhaps an older
/// incarnation still leading) or by an older build (no `won_by`, or one
/// naming another token), and the term handed out, are never taken.
fn reclaimable(
    conn: &Connection,
    site: &Site,
    op: &str,
    req: &AcquireRequest,
    row: &LeaseRow,
    reclaim: Reclaim,
) -> Result<bool, StoreError> {
    if row.holder != req.holder || !reclaim.alone || reclaim.handed_out == Some(token_of(row.token))
    {
        return Ok(false);
    }
    // `won_by` is read apart from the row (the watches' poll has no use
    // for it): the token and holder in the condition tie it to the term
    // judged, should another snapshot hold another.
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM regent_lease
             WHERE election = ?1 AND holder = ?2 AND token = ?3 AND won_by = ?4)",
    )
    .and_then(|mut stmt| {
        stmt.query_row(
            (
                req.election.as_str(),
                req.holder.as_str(),
                row.token,
                won_by(&site.incarnation, row.token),
            ),
            |r| r.get(0),
        )
    })
    .map_err(|e| db_error(site.context(op, &req.election), e))
}

/// The read with which every acquire begins: the leader of the live row,
/// unless there is none or it is one the acquire may take over
/// ([`reclaimable`]); then `None`, and the acquire goes on to
/// [`acquire`], which judges the row again under the write lock.
pub(crate) fn held_by(
    conn: &Connection,
    site: &Site,
    req: &AcquireRequest,
    reclaim: Reclaim,
) -> Result<Option<LeaderInfo>, StoreError> {
    const OP: &str = "acquire";
    let row = read_row(conn, site, OP, &req.election)?;
    // Read after the row, as `leader` does.
    let now = monotonic_now_ns();
    match row {
        Some(row)
            if is_live(site, &req.election, &row, now)?
                && !reclaimable(conn, site, OP, req, &row, reclaim)? =>
        {
            Ok(Some(row.leader()))
        }
        _ => Ok(None),
    }
}

/// `try_acquire`: takes the election if its row is missing, expired or from
/// another boot, or holds a term of the caller's that this store won
/// unanswered ([`reclaimable`]); bumps the fencing counter in the same
/// transaction, so a term taken over is replaced by one with a greater
/// token.
pub(crate) fn acquire(
    conn: &Connection,
    site: &Site,
    req: &AcquireRequest,
    ttl_ms: i64,
    reclaim: Reclaim,
) -> Result<Acquire, StoreError> {
    const OP: &str = "acquire";
    let election = &req.election;
    let err = |e| db_error(site.context(OP, election), e);
    let (now, row) = clock_and_row(conn, site, OP, election)?;
    let mut replaced = None;
    if let Some(row) = row
        && is_live(site, election, &row, now)?
    {
        if !reclaimable(conn, site, OP, req, &row, reclaim)? {
            return Ok(Acquire::Held {
                leader: Some(row.leader()),
                queued: None,
            });
        }
        replaced = Some(row.token);
    }
    // Kept for a successor that has not taken it yet (contract item 11).
    if reserved_for_another(conn, site, election, &req.holder, now)?.is_some() {
        return Ok(Acquire::Held {
            leader: None,
            queued: None,
        });
    }
    clear_reservation(conn, site, election)?;
    let counter: Option<Value> = conn
        .prepare_cached("SELECT last_token FROM regent_fencing WHERE election = ?1")
        .and_then(|mut stmt| stmt.query_row([election.as_str()], |r| r.get(0)))
        .optional()
        .map_err(err)?;
    let last = match counter {
        None => 0,
        Some(Value::Integer(c)) if c >= 0 => c,
        Some(v) => {
            return Err(StoreError::corrupt(format!(
                "sqlite store '{}': the fencing counter of election '{election}' is {v:?}, not a non-negative integer",
                site.path.display()
            )));
        }
    };
    let token = last.checked_add(1).ok_or_else(|| {
        StoreError::corrupt(format!(
            "sqlite store '{}': the fencing counter of election '{election}' is exhausted",
            site.path.display()
        ))
    })?;
    let expires_at_ns = now.saturating_add(ttl_ms.saturating_mul(1_000_000));
    conn.prepare_cached(
        "INSERT INTO regent_fencing (election, last_token) VALUES (?1, ?2)
         ON CONFLICT (election) DO UPDATE SET last_token = excluded.last_token",
    )
    .and_then(|mut stmt| stmt.execute((election.as_str(), token)))
    .map_err(err)?;
    conn.prepare_cached(
        "INSERT INTO regent_lease
             (election, holder, token, expires_at_ns, ttl_ms, boot_id, metadata, won_by)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (election) DO UPDATE SET
             holder = excluded.holder, token = excluded.token,
             expires_at_ns = excluded.expires_at_ns, ttl_ms = excluded.ttl_ms,
             boot_id = excluded.boot_id, metadata = excluded.metadata,
             won_by = excluded.won_by",
    )
    .and_then(|mut stmt| {
        stmt.execute((
            election.as_str(),
            req.holder.as_str(),
            token,
            expires_at_ns,
            ttl_ms,
            site.boot_id.as_str(),
            req.metadata.to_json(),
            won_by(&site.incarnation, token),
        ))
    })
    .map_err(err)?;
    if let Some(replaced) = replaced {
        tracing::debug!(
            election = %election, holder = %req.holder, token, replaced,
            "sqlite: took over a term of this store's own that an earlier acquire won unanswered"
        );
    }
    // Watchers learn the new leader (or the new term) at once, as they
    // learn a release.
    site.leader_changed.set(true);
    Ok(Acquire::Won(Lease {
        election: election.clone(),
        holder: req.holder.clone(),
        token: token_of(token),
        ttl: Duration::from_millis(ttl_ms.unsigned_abs()),
        handle: LeaseHandle::new(format!("sqlite-{token}")),
    }))
}

/// The clock and `lease`'s row, if the row is still ours (same holder and
/// token) and live. An expired row of ours counts as gone: its holder has
/// stepped down by its own clock by now, and a follower may be acting on
/// the expiry, so it is neither revived nor written to.
fn own_live_row(
    conn: &Connection,
    site: &Site,
    op: &str,
    lease: &Lease,
) -> Result<Option<(i64, LeaseRow)>, StoreError> {
    let election = &lease.election;
    let (now, row) = clock_and_row(conn, site, op, election)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let ours = row.holder == lease.holder && token_of(row.token) == lease.token;
    if !ours || !is_live(site, election, &row, now)? {
        return Ok(None);
    }
    Ok(Some((now, row)))
}

/// `renew`: extends the row by its ttl if it is still ours and live.
pub(crate) fn renew(conn: &Connection, site: &Site, lease: &Lease) -> Result<Renewal, StoreError> {
    const OP: &str = "renew";
    let election = &lease.election;
    let err = |e| db_error(site.context(OP, election), e);
    let Some((now, row)) = own_live_row(conn, site, OP, lease)? else {
        return Ok(Renewal::Lost);
    };
    let expires_at_ns = now.saturating_add(row.ttl_ms.saturating_mul(1_000_000));
    conn.prepare_cached(
        "UPDATE regent_lease SET expires_at_ns = ?2 WHERE election = ?1 AND token = ?3",
    )
    .and_then(|mut stmt| stmt.execute((election.as_str(), expires_at_ns, row.token)))
    .map_err(err)?;
    Ok(Renewal::Renewed)
}

/// `update_metadata`: replaces the row's metadata if the row is still ours
/// and live (in the batch's write transaction, as one statement); its
/// token, holder and expiry stay.
pub(crate) fn update_metadata(
    conn: &Connection,
    site: &Site,
    lease: &Lease,
    metadata: &Metadata,
) -> Result<Renewal, StoreError> {
    const OP: &str = "update the metadata of";
    let election = &lease.election;
    let err = |e| db_error(site.context(OP, election), e);
    let Some((_, row)) = own_live_row(conn, site, OP, lease)? else {
        return Ok(Renewal::Lost);
    };
    conn.prepare_cached("UPDATE regent_lease SET metadata = ?2 WHERE election = ?1 AND token = ?3")
        .and_then(|mut stmt| stmt.execute((election.as_str(), metadata.to_json(), row.token)))
        .map_err(err)?;
    Ok(Renewal::Renewed)
}

/// `release`: deletes the row if it is ours (same holder and token).
/// Returns whether a row was deleted.
pub(crate) fn release(conn: &Connection, site: &Site, lease: &Lease) -> Result<bool, StoreError> {
    let Ok(token) = i64::try_from(lease.token.get()) else {
        // No row can hold this token.
        return Ok(false);
    };
    let n = conn
        .prepare_cached(
            "DELETE FROM regent_lease WHERE election = ?1 AND holder = ?2 AND token = ?3",
        )
        .and_then(|mut stmt| stmt.execute((lease.election.as_str(), lease.holder.as_str(), token)))
        .map_err(|e| db_error(site.context("release", &lease.election), e))?;
    if n > 0 {
        site.leader_changed.set(true);
    }
    Ok(n > 0)
}

// ------------------------------------------------ leases kept for a successor

/// Whether the election's released lease is kept for another holder than
/// `holder` at `now`: the successor it is kept for.
pub(crate) fn reserved_for_another(
    conn: &Connection,
    site: &Site,
    election: &ElectionName,
    holder: &HolderId,
    now: i64,
) -> Result<Option<String>, StoreError> {
    let row: Option<(Value, Value, Value)> = conn
        .prepare_cached("SELECT holder, until_ns, boot_id FROM regent_reserved WHERE election = ?1")
        .and_then(|mut stmt| {
            OptionalExtension::optional(stmt.query_row([election.as_str()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            }))
        })
        .map_err(|e| db_error(site.context("acquire", election), e))?;
    match row {
        None => Ok(None),
        Some((Value::Text(to), Value::Integer(until), Value::Text(boot))) => {
            let live = boot == site.boot_id && until > now;
            Ok((live && to != holder.as_str()).then_some(to))
        }
        Some(other) => Err(StoreError::corrupt(format!(
            "sqlite store '{}': the reservation row of election '{election}' was not written by regent: {other:?}",
            site.path.display()
        ))),
    }
}

/// A won acquire clears the reservation it was kept under (or a lapsed one).
pub(crate) fn clear_reservation(
    conn: &Connection,
    site: &Site,
    election: &ElectionName,
) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM regent_reserved WHERE election = ?1")
        .and_then(|mut stmt| stmt.execute([election.as_str()]))
        .map_err(|e| db_error(site.context("acquire", election), e))?;
    Ok(())
}

/// `current_leader`: the live row's holder, if any. `op` names the
/// operation in errors.
pub(crate) fn leader(
    conn: &Connection,
    site: &Site,
    op: &str,
    election: &ElectionName,
) -> Result<Option<LeaderInfo>, StoreError> {
    let row = read_row(conn, site, op, election)?;
    // Read after the row: a row written after the clock was read would look
    // as if it expired beyond its ttl.
    let now = monotonic_now_ns();
    match row {
        Some(row) if is_live(site, election, &row, now)? => Ok(Some(row.leader())),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::open;

    #[test]
    fn reading_a_row_does_not_prepare_its_statement_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let conn = open(&dir.path().join("regent.db"), Duration::from_secs(1)).expect("open");
        let site = Site::new(dir.path().join("regent.db"), "b".into());
        for i in 0..10 {
            let e = ElectionName::new(format!("e{i}")).expect("a name");
            assert!(read_row(&conn, &site, "read", &e).expect("read").is_none());
        }
        let stmt = conn.prepare_cached(READ_ROW).expect("cached");
        assert_eq!(stmt.get_status(rusqlite::StatementStatus::RePrepare), 0);
    }

    #[test]
    fn ttl_rounds_up_to_whole_milliseconds() {
        assert_eq!(ttl_ms(Duration::from_millis(10)), 10);
        assert_eq!(ttl_ms(Duration::from_micros(10_001)), 11);
        assert_eq!(ttl_ms(Duration::from_nanos(1)), 1);
    }

    #[test]
    fn metadata_round_trips_through_json() {
        let m = Metadata::from_pairs([("addr", "10.0.0.1:80"), ("q\"uote", "é\n")]).unwrap();
        assert_eq!(Metadata::from_json(&m.to_json()).unwrap(), m);
        assert_eq!(Metadata::from_json("{}").unwrap(), Metadata::new());
    }

    #[test]
    fn metadata_that_is_not_an_object_of_strings_is_refused() {
        for bad in [
            "",
            "[]",
            "\"x\"",
            "{\"a\":1}",
            "{\"a\":null}",
            "{\"a\":{}}",
            "{",
        ] {
            assert!(Metadata::from_json(bad).is_err(), "{bad:?}");
        }
    }
}
