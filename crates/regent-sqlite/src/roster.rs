//! The roster of candidates and the lease given to a successor (contract
//! items 10 and 11), in two tables of their own: `regent_roster`, one row
//! per enrolled candidate, and `regent_reserved`, at most one row per
//! election naming the successor a released lease is kept for. Both are
//! timed as the lease rows are: on this host's monotonic clock, and dead
//! when written in another boot.

use regent_core::{Candidacy, ElectionName, HolderId, Lease, StoreError};
use rusqlite::Connection;
use rusqlite::types::Value;

use crate::clock::monotonic_now_ns;
use crate::db::Site;
use crate::error::db_error;

/// Garbage in the roster's tables: regent did not write it.
fn garbage(site: &Site, election: &ElectionName, what: impl std::fmt::Display) -> StoreError {
    StoreError::corrupt(format!(
        "sqlite store '{}': the roster of election '{election}' holds a row regent did not write: {what}",
        site.path.display()
    ))
}

/// `enroll`: the candidate's row, expiring `ttl_ms` from now.
pub(crate) fn enroll(
    conn: &Connection,
    site: &Site,
    election: &ElectionName,
    holder: &HolderId,
    metadata: &regent_core::Metadata,
    ttl_ms: i64,
) -> Result<(), StoreError> {
    let now = monotonic_now_ns();
    let expires_at_ns = now.saturating_add(ttl_ms.saturating_mul(1_000_000));
    conn.prepare_cached(
        "INSERT INTO regent_roster (election, holder, expires_at_ns, boot_id, metadata)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (election, holder) DO UPDATE SET
             expires_at_ns = excluded.expires_at_ns, boot_id = excluded.boot_id,
             metadata = excluded.metadata",
    )
    .and_then(|mut stmt| {
        stmt.execute((
            election.as_str(),
            holder.as_str(),
            expires_at_ns,
            site.boot_id.as_str(),
            metadata.to_json(),
        ))
    })
    .map_err(|e| db_error(site.context("enroll in", election), e))?;
    Ok(())
}

/// `withdraw`: the candidate's row gone, and the rows of the election that
/// lapsed with it (the roster does not grow with candidates long gone).
pub(crate) fn withdraw(
    conn: &Connection,
    site: &Site,
    election: &ElectionName,
    holder: &HolderId,
) -> Result<(), StoreError> {
    let now = monotonic_now_ns();
    conn.prepare_cached(
        "DELETE FROM regent_roster WHERE election = ?1
             AND (holder = ?2 OR boot_id <> ?3 OR expires_at_ns <= ?4)",
    )
    .and_then(|mut stmt| {
        stmt.execute((
            election.as_str(),
            holder.as_str(),
            site.boot_id.as_str(),
            now,
        ))
    })
    .map_err(|e| db_error(site.context("withdraw from", election), e))?;
    Ok(())
}

/// `candidates`: the live rows, in holder order. A row whose metadata is
/// not regent's JSON is garbage: an error, as a lease row's would be.
pub(crate) fn candidates(
    conn: &Connection,
    site: &Site,
    election: &ElectionName,
) -> Result<Vec<Candidacy>, StoreError> {
    const OP: &str = "list the candidates of";
    let err = |e| db_error(site.context(OP, election), e);
    let mut stmt = conn
        .prepare_cached(
            "SELECT holder, metadata FROM regent_roster
             WHERE election = ?1 AND boot_id = ?2 AND expires_at_ns > ?3
             ORDER BY holder",
        )
        .map_err(err)?;
    // Read after the statement is prepared, just before it runs: a row
    // written after this reading would only look longer-lived.
    let now = monotonic_now_ns();
    let rows = stmt
        .query_map((election.as_str(), site.boot_id.as_str(), now), |r| {
            Ok((r.get::<_, Value>(0)?, r.get::<_, Value>(1)?))
        })
        .map_err(err)?;
    let mut list = Vec::new();
    for row in rows {
        let (holder, metadata) = row.map_err(err)?;
        let (Value::Text(holder), Value::Text(metadata)) = (holder, metadata) else {
            return Err(garbage(
                site,
                election,
                "a roster row holds values that are not text",
            ));
        };
        let holder = HolderId::new(&holder).map_err(|e| {
            garbage(
                site,
                election,
                format!("a roster row's holder is not valid: {e}"),
            )
        })?;
        let metadata = regent_core::Metadata::from_json(&metadata)
            .map_err(|why| garbage(site, election, format!("roster row of '{holder}': {why}")))?;
        list.push(Candidacy::new(holder, metadata));
    }
    Ok(list)
}

/// `release_to`: deletes the lease row if it is ours (as `release`) and
/// keeps the election for `successor` until `window_ms` from now. Whether
/// a row was ours to give.
pub(crate) fn release_to(
    conn: &Connection,
    site: &Site,
    lease: &Lease,
    successor: &HolderId,
    window_ms: i64,
) -> Result<bool, StoreError> {
    if !crate::db::release(conn, site, lease)? {
        return Ok(false);
    }
    let until = monotonic_now_ns().saturating_add(window_ms.saturating_mul(1_000_000));
    conn.prepare_cached(
        "INSERT INTO regent_reserved (election, holder, until_ns, boot_id) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (election) DO UPDATE SET
             holder = excluded.holder, until_ns = excluded.until_ns, boot_id = excluded.boot_id",
    )
    .and_then(|mut stmt| {
        stmt.execute((
            lease.election.as_str(),
            successor.as_str(),
            until,
            site.boot_id.as_str(),
        ))
    })
    .map_err(|e| db_error(site.context("release", &lease.election), e))?;
    Ok(true)
}
