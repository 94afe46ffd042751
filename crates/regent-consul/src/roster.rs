//! The roster of an election's candidates and the lease kept for a
//! successor (contract items 10 and 11; see the crate docs, "Roster and
//! hand-over"): roster entries as keys locked by sessions of their own,
//! which Consul deletes with the session, and a released key locked by a
//! reservation session until the successor takes it.

use std::collections::HashMap;
use std::sync::PoisonError;
use std::time::Duration;

use regent_core::{
    AcquireRequest, Candidacy, ElectionName, HandOff, HolderId, Lease, LeaseStore, StoreError,
};
use reqwest::Method;
use serde_json::json;
use tokio::time::Instant;

use crate::client::{ConsulStore, TxnOutcome};
use crate::record::{KvEntry, RECORD_FLAGS, base64, decode_roster, encode_reserved, encode_roster};
use crate::session::{MAX_TTL, MIN_TTL, go_duration};

/// The KV flags of a roster entry: as [`RECORD_FLAGS`], another format
/// number. An entry with other flags is not listed.
pub const ROSTER_FLAGS: u64 = 0x7265_6765_6e74_0101;

/// The name of a roster entry's session (followed by its key).
const ROSTER_SESSION: &str = "regent roster";

/// The name of a reservation's session (followed by the election's key).
const RESERVATION_SESSION: &str = "regent reservation";

use crate::enrolled::Enrolled;

impl ConsulStore {
    /// The keys under which `election`'s roster lives:
    /// `PREFIX~roster/ELECTION/`, apart from every election's key (no
    /// election name holds a `~`) and outside the tree of the election's
    /// own key, which the renewals of shared sessions read.
    pub fn roster_prefix(&self, election: &ElectionName) -> String {
        format!("{}~roster/{election}/", self.inner.prefix)
    }

    /// The key of `holder`'s entry on `election`'s roster: the
    /// [roster prefix](Self::roster_prefix), then the holder id with every
    /// byte other than ASCII letters, digits, `-`, `_` and `.` (and a
    /// final `.`) written `~XX` in hex.
    pub fn roster_key(&self, election: &ElectionName, holder: &HolderId) -> String {
        format!("{}{}", self.roster_prefix(election), holder.to_segment())
    }

    fn enrollments(&self) -> std::sync::MutexGuard<'_, HashMap<String, Enrolled>> {
        self.inner
            .roster
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Contract item 10: the entry's session renewed (or made), and the
    /// entry written when its metadata changed, when this store has not
    /// written it under that session yet, or a ttl ago.
    pub(crate) async fn enroll_entry(&self, req: &AcquireRequest) -> Result<(), StoreError> {
        let what = || format!("enroll '{}' in election '{}'", req.holder, req.election);
        self.check_ttl(req.ttl, &what)?;
        let key = self.roster_key(&req.election, &req.holder);
        let value = encode_roster(&req.holder, &req.metadata);
        let cached = self.enrollments().get(&key).map(|e| {
            let current = e.value == value && e.written.is_some_and(|w| w.elapsed() < e.ttl);
            (e.session.clone(), e.ttl, current)
        });
        // The session this store made for the entry, renewed: from its
        // renewal on, Consul keeps it (and so the key) a ttl at least.
        let mut session = None;
        let mut stale = None;
        if let Some((id, ttl, current)) = cached {
            if ttl == req.ttl {
                let url = self.url(&["session", "renew", &id], &[]);
                let answer = self
                    .call(Method::PUT, url, None, &[404], Duration::ZERO, &what)
                    .await?;
                if answer.status != 404 {
                    if current {
                        return Ok(());
                    }
                    session = Some(id);
                }
            } else {
                stale = Some(id);
            }
        }
        let session = match session {
            Some(id) => id,
            None => {
                let id = self
                    .create_session_with(
                        json!({
                            "Name": format!("{ROSTER_SESSION}: {key}"),
                            "TTL": go_duration(req.ttl),
                            // The key goes with the session; and no delay
                            // before the next session of the entry takes it.
                            "LockDelay": "0s",
                            "Behavior": "delete",
                            "Checks": [],
                        }),
                        &what,
                    )
                    .await?;
                self.enrollments().insert(
                    key.clone(),
                    Enrolled {
                        session: id.clone(),
                        ttl: req.ttl,
                        value: Vec::new(),
                        written: None,
                    },
                );
                id
            }
        };
        let sent = Instant::now();
        self.put_entry(&key, &session, &value, &what).await?;
        if let Some(e) = self
            .enrollments()
            .get_mut(&key)
            .filter(|e| e.session == session)
        {
            e.value = value;
            e.written = Some(sent);
        }
        if let Some(old) = stale {
            // A session of this store for another ttl: it holds nothing now.
            self.destroy_later(old, Duration::ZERO);
        }
        Ok(())
    }

    /// Writes the entry `key` locked by `session`; an entry locked by an
    /// earlier session of the same holder (another store's, before it
    /// lapses) is moved to ours in one transaction.
    async fn put_entry(
        &self,
        key: &str,
        session: &str,
        value: &[u8],
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<(), StoreError> {
        let encoded = base64(value);
        let lock = json!({"KV": {"Verb": "lock", "Key": key, "Value": encoded,
                                 "Flags": ROSTER_FLAGS, "Session": session}});
        for _ in 0..3 {
            if let TxnOutcome::Applied(_) = self.txn(json!([lock.clone()]), what).await? {
                return Ok(());
            }
            // Locked by another session, or a retried transaction applied
            // the first time: look.
            let (entry, _) = self.read_key(key, what).await?;
            let Some(entry) = entry else { continue };
            if entry.holder_session() == Some(session)
                && entry.value_bytes().is_ok_and(|v| v == value)
            {
                return Ok(());
            }
            if let Some(other) = entry.holder_session().filter(|s| *s != session) {
                let ops = json!([
                    {"KV": {"Verb": "check-index", "Key": key, "Index": entry.modify_index}},
                    {"KV": {"Verb": "unlock", "Key": key,
                            "Value": entry.value.clone().unwrap_or_default(),
                            "Flags": entry.flags, "Session": other}},
                    lock.clone(),
                ]);
                if let TxnOutcome::Applied(_) = self.txn(ops, what).await? {
                    // The other session holds nothing now: it lapses by
                    // its TTL (another process may still renew it).
                    return Ok(());
                }
            }
        }
        Err(StoreError::unavailable(format!(
            "{}: the roster entry '{key}' changed each time it was written",
            what()
        )))
    }

    /// Contract item 10: the entry's session ended (Consul deletes the key
    /// with it), whichever store made it; a key left unlocked deleted.
    pub(crate) async fn withdraw_entry(
        &self,
        election: &ElectionName,
        holder: &HolderId,
    ) -> Result<(), StoreError> {
        let what = || format!("withdraw '{holder}' from election '{election}'");
        let key = self.roster_key(election, holder);
        let cached = self.enrollments().remove(&key);
        if let Some(e) = cached {
            self.destroy_session(&e.session, &what).await?;
        }
        let (entry, _) = self.read_key(&key, &what).await?;
        let Some(entry) = entry.filter(|e| e.flags == ROSTER_FLAGS) else {
            // Gone, or not an entry regent wrote: nothing of ours to take.
            return Ok(());
        };
        match entry.holder_session() {
            Some(session) => self.destroy_session(session, &what).await,
            None => {
                let ops = json!([{"KV": {"Verb": "delete-cas", "Key": key,
                                         "Index": entry.modify_index}}]);
                // Changed meanwhile: enrolled again, which stands.
                self.txn(ops, &what).await.map(|_| ())
            }
        }
    }

    /// Contract items 9 and 10: one read of the roster's keys; the entries
    /// a live session locks, in holder order. A key that is not a roster
    /// entry regent wrote is skipped.
    pub(crate) async fn roster(
        &self,
        election: &ElectionName,
    ) -> Result<Vec<Candidacy>, StoreError> {
        let what = || format!("read the roster of election '{election}'");
        let prefix = self.roster_prefix(election);
        let url = self.url(&["kv", &prefix], &[("recurse", ""), ("consistent", "")]);
        let answer = self
            .call(Method::GET, url, None, &[404], Duration::ZERO, &what)
            .await?;
        if answer.status == 404 {
            return Ok(Vec::new());
        }
        let entries: Option<Vec<KvEntry>> = answer.json(&what())?;
        let mut list: Vec<Candidacy> = entries
            .unwrap_or_default()
            .iter()
            .filter_map(|e| match self.roster_entry(election, e) {
                Ok(c) => c,
                Err(why) => {
                    tracing::debug!(
                        key = %regent_core::target::printable(&e.key), why,
                        "consul: skipped a roster key that is not regent's"
                    );
                    None
                }
            })
            .collect();
        list.sort_by(|a, b| a.holder.cmp(&b.holder));
        Ok(list)
    }

    /// The candidate a roster key shows: `None` when no session locks it
    /// (its session ended just now), an error when it is not regent's.
    fn roster_entry(
        &self,
        election: &ElectionName,
        e: &KvEntry,
    ) -> Result<Option<Candidacy>, String> {
        if e.holder_session().is_none() {
            return Ok(None);
        }
        if e.flags != ROSTER_FLAGS {
            return Err(format!("it has flags {:#x}", e.flags));
        }
        let (holder, metadata) = decode_roster(&e.value_bytes()?)?;
        if e.key != self.roster_key(election, &holder) {
            return Err(format!("its value names holder '{holder}'"));
        }
        Ok(Some(Candidacy::new(holder, metadata)))
    }

    /// Contract item 11: the key moved from the lease's session to a
    /// reservation session in one transaction, its value the last record
    /// kept for `successor`; the reservation session ends after the window
    /// (or by its TTL, if this process is gone by then).
    pub(crate) async fn release_reserved(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        let what = || {
            format!(
                "release election '{}' by '{}' to '{successor}'",
                lease.election, lease.holder
            )
        };
        if window.is_zero() || window > MAX_TTL {
            // Nothing to keep, or longer than a session of Consul's lasts.
            self.release(lease).await?;
            return Ok(HandOff::Released);
        }
        let key = self.election_key(&lease.election);
        let session = lease.handle.as_str();
        self.forget_proof(session);
        let (entry, _) = self.read_key(&key, &what).await?;
        let entry = match entry {
            Some(e) if e.is_held_by(session, &lease.holder, lease.token) => e,
            // Locked by this session but not the record of this lease: not
            // ours to touch.
            Some(e) if e.holder_session() == Some(session) => return Ok(HandOff::Released),
            _ => {
                self.after_release(session, lease, &what).await?;
                return Ok(HandOff::Released);
            }
        };
        let record = entry
            .record()
            .map_err(|why| self.corrupt(&what(), &key, why))?;
        let reservation = self
            .create_session_with(
                json!({
                    "Name": format!("{RESERVATION_SESSION}: {key}"),
                    // Consul's shortest TTL if the window is shorter: the
                    // store ends the session after the window itself.
                    "TTL": go_duration(window.max(MIN_TTL)),
                    "LockDelay": "0s",
                    "Behavior": "release",
                    "Checks": [],
                }),
                &what,
            )
            .await?;
        let value = base64(&encode_reserved(
            &record.holder,
            &record.metadata,
            successor,
        ));
        let ops = json!([
            {"KV": {"Verb": "check-index", "Key": key, "Index": entry.modify_index}},
            {"KV": {"Verb": "unlock", "Key": key, "Value": entry.value.clone().unwrap_or_default(),
                    "Flags": RECORD_FLAGS, "Session": session}},
            {"KV": {"Verb": "lock", "Key": key, "Value": value, "Flags": RECORD_FLAGS,
                    "Session": reservation}},
        ]);
        match self.txn(ops, &what).await {
            Ok(TxnOutcome::Applied(_)) => {
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                    %successor, ?window, "consul: released, kept for the successor"
                );
                self.destroy_later(reservation, window);
                self.after_release(session, lease, &what).await?;
                Ok(HandOff::ToSuccessor)
            }
            Ok(TxnOutcome::RolledBack) => {
                // The key changed since it was read: release as `release`
                // does, which frees only what is still ours.
                let _ = self.destroy_session(&reservation, &what).await;
                self.release(lease).await?;
                Ok(HandOff::Released)
            }
            Err(e) => {
                // Applied or not: without its reservation session the key
                // is free (no lock delay), as after a release.
                let _ = self.destroy_session(&reservation, &what).await;
                Err(e)
            }
        }
    }

    /// Ends `session` after `delay`, from a task of its own; a failure is
    /// only logged (the session ends by its TTL).
    pub(crate) fn destroy_later(&self, session: String, delay: Duration) {
        let store = self.clone();
        tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let what = || format!("end session {session}");
            if let Err(e) = store.destroy_session(&session, &what).await {
                tracing::debug!(error = %e, "consul: ending a session failed; it ends by its TTL");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_make_plain_key_segments() {
        let h = |s: &str| HolderId::new(s).unwrap().to_segment();
        assert_eq!(h("node-1.example_2"), "node-1.example_2");
        assert_eq!(h("a/b"), "a~2Fb");
        assert_eq!(h("."), "~2E");
        assert_eq!(h(".."), ".~2E");
        assert_eq!(h("x."), "x~2E");
        assert_eq!(h("~%?#"), "~7E~25~3F~23");
        let store = ConsulStore::builder("127.0.0.1:8500").build().unwrap();
        let e = ElectionName::new("jobs").unwrap();
        assert_eq!(store.roster_prefix(&e), "regent/~roster/jobs/");
        assert_eq!(
            store.roster_key(&e, &HolderId::new("n/1").unwrap()),
            "regent/~roster/jobs/n~2F1"
        );
    }
}
