//! [`ConsulStore`]'s [`LeaseStore`] contract: acquire, renew, update the
//! metadata, release, read the leader and watch, each in terms of the
//! key, its transactions and the sessions that lock it. The HTTP calls
//! are [`crate::client`]'s, sessions [`crate::session`]'s and
//! [`crate::shared`]'s, the restart shortcut [`crate::restart`]'s, the
//! blocking queries [`crate::watch`]'s.

use std::time::Duration;

use regent_core::store::ExpirySlack;
use regent_core::{
    Acquire, AcquireRequest, Candidacy, ElectionName, ErrorKind, FencingToken, HandOff, HolderId,
    LeaderInfo, LeaderStream, Lease, LeaseHandle, LeaseStore, Metadata, Renewal, SafetyClass,
    StoreError, StoreInfo, StoreStyle, WatchMode,
};
use reqwest::Method;
use serde_json::json;

use crate::client::TxnOutcome;
use crate::record::{KvEntry, RECORD_FLAGS, base64, encode, encode_update};
use crate::session::{MIN_TTL, SESSION_TTL_FLOOR, granted_ttl};

// What `target.rs` imports from here.
pub(crate) use crate::builder::{
    ConsulStoreBuilder, DEFAULT_CALL_TIMEOUT, DEFAULT_PREFIX, default_restart_proofs_dir,
    normalize_prefix,
};
pub(crate) use crate::client::ConsulStore;
pub(crate) use crate::session::MAX_TTL;

impl LeaseStore for ConsulStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "consul",
            StoreStyle::Race,
            WatchMode::Notify,
            SafetyClass::Consensus,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL)
        // Consul invalidates a session up to twice its TTL after the
        // last renewal, then the lock delay keeps the key from being
        // acquired.
        .with_expiry_slack(match self.inner.lock_delay {
            // Up to two session TTLs (`max(10 s, ttl/2)`) plus the ttl,
            // less the ttl itself.
            None => ExpirySlack::proportional(100).at_least(SESSION_TTL_FLOOR * 2),
            // Up to two session TTLs plus the delay, less the ttl: never
            // more than `ttl + delay`, whichever of 10 s, `ttl - delay` and
            // ttl/2 the session TTL is (see `session_ttl`).
            Some(delay) => ExpirySlack::new(delay, 100),
        })
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        _queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let what = || format!("acquire election '{}' by '{}'", req.election, req.holder);
        self.check_ttl(req.ttl, &what)?;
        let key = self.election_key(&req.election);
        let (mut current, _) = self.read_key(&key, &what).await?;
        if let Some((gone, entry)) = self
            .previous_self_gone(current.as_ref(), req, &key, &what)?
            .zip(current.clone())
        {
            let session = entry.holder_session().unwrap_or_default().to_owned();
            if let Some(token) = self.adopt(&key, &entry, &session, req, &what).await? {
                tracing::info!(
                    election = %req.election, holder = %req.holder, session, token,
                    "consul: the key holds our id under a session whose process is gone \
                     (its restart proof is free); took that session over"
                );
                if let Some(proofs) = &self.inner.proofs {
                    proofs.adopt(gone, &session);
                }
                return Ok(Acquire::Won(Lease {
                    election: req.election.clone(),
                    holder: req.holder.clone(),
                    token: FencingToken::new(token),
                    ttl: granted_ttl(req.ttl),
                    handle: LeaseHandle::new(session),
                }));
            }
            // The session changed, ended or was made otherwise meanwhile:
            // on as usual.
            drop(gone);
            current = self.read_key(&key, &what).await?.0;
        }
        // A key a hand-over keeps for this holder: its reservation
        // session, to unlock in the transaction that locks it for us.
        let mut reservation = None;
        let check = match &current {
            Some(entry) if entry.holder_session().is_some() => {
                let kept_for = entry
                    .reserved_for()
                    .map_err(|why| self.corrupt(&what(), &key, why))?;
                if kept_for.as_ref() != Some(&req.holder) {
                    let leader = self.leader_of(Some(entry), &key, &what())?;
                    return Ok(Acquire::Held {
                        leader,
                        queued: None,
                    });
                }
                reservation = entry
                    .holder_session()
                    .map(|s| (s.to_owned(), entry.clone()));
                json!({"KV": {"Verb": "check-index", "Key": key, "Index": entry.modify_index}})
            }
            Some(entry) => {
                entry
                    .check_ours()
                    .map_err(|why| self.corrupt(&what(), &key, why))?;
                json!({"KV": {"Verb": "check-index", "Key": key, "Index": entry.modify_index}})
            }
            None => json!({"KV": {"Verb": "check-not-exists", "Key": key}}),
        };
        let (session, sent, shared) = self.session_for(req, &key, &what).await?;
        let value = base64(&encode(&req.holder, &req.metadata));
        let mut ops = vec![check];
        if let Some((kept_by, entry)) = &reservation {
            // Unlocked and locked again in one transaction: nobody else
            // can take the key in between, and an explicit unlock has no
            // lock delay.
            ops.push(json!({"KV": {"Verb": "unlock", "Key": key,
                "Value": entry.value.clone().unwrap_or_default(), "Flags": RECORD_FLAGS,
                "Session": kept_by}}));
        }
        ops.push(json!(
            {"KV": {"Verb": "lock", "Key": key, "Value": value, "Flags": RECORD_FLAGS, "Session": session}}
        ));
        let ops = serde_json::Value::Array(ops);
        let outcome = match self.txn(ops, &what).await {
            Ok(o) => o,
            Err(e) => {
                // The lock may have been taken all the same: ending the
                // session frees it (after the lock delay); on a shared
                // session, the lock goes when it is not renewed within
                // the ttl.
                if !shared {
                    let _ = self.destroy_session(&session, &what).await;
                }
                return Err(e);
            }
        };
        let won = match outcome {
            // A check-index answers the key as checked, before the lock:
            // the lock's own result is the last one.
            TxnOutcome::Applied(entries) => entries
                .into_iter()
                .rev()
                .find(|e| e.key == key && e.holder_session() == Some(session.as_str()))
                .map(|e| e.modify_index),
            TxnOutcome::RolledBack => {
                // Someone else was faster, the key changed since we read
                // it, or its lock delay runs. A retried transaction may
                // also have applied the first time: look.
                let (entry, _) = self.read_key(&key, &what).await?;
                match entry {
                    Some(e) if e.holder_session() == Some(session.as_str()) => Some(e.modify_index),
                    other => {
                        self.give_back(&session, req, shared);
                        let leader = self.leader_of(other.as_ref(), &key, &what())?;
                        return Ok(Acquire::Held {
                            leader,
                            queued: None,
                        });
                    }
                }
            }
        };
        let Some(token) = won.filter(|&t| t > 0) else {
            if !shared {
                let _ = self.destroy_session(&session, &what).await;
            }
            return Err(StoreError::new(
                ErrorKind::Protocol,
                format!(
                    "{}: the transaction answered without the key's index",
                    what()
                ),
            ));
        };
        tracing::debug!(
            election = %req.election, holder = %req.holder, token, shared,
            reserved = reservation.is_some(), "consul: acquired"
        );
        if let Some((kept_by, _)) = reservation {
            // The reservation's session holds nothing now.
            self.destroy_later(kept_by, Duration::ZERO);
        }
        if shared {
            self.inner.sessions.placed(
                &session,
                &req.election,
                &req.holder,
                FencingToken::new(token),
                sent,
            );
        }
        if let Some(proofs) = &self.inner.proofs
            && let Err(e) = proofs.hold(&session)
        {
            tracing::warn!(
                election = %req.election, dir = %proofs.dir().display(), error = %e,
                "consul: cannot make the restart proof; a restart of this instance will wait \
                 for the session to expire"
            );
        }
        Ok(Acquire::Won(Lease {
            election: req.election.clone(),
            holder: req.holder.clone(),
            token: FencingToken::new(token),
            ttl: granted_ttl(req.ttl),
            handle: LeaseHandle::new(session),
        }))
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let what = || format!("renew election '{}' by '{}'", lease.election, lease.holder);
        let key = self.election_key(&lease.election);
        let session = lease.handle.as_str();
        // A key on one of our shared sessions: the session's next round
        // renews it with all the others.
        let joined = self.inner.sessions.join(
            &session.to_owned(),
            &lease.election,
            &lease.holder,
            lease.token,
        );
        if let Some(round) = joined
            && let Ok(answer) = round.await
        {
            tracing::debug!(
                election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                ?answer, "consul: renewed with its session"
            );
            return answer;
        }
        // Check first, so that a renewal never extends a session whose
        // key was deleted, overwritten or taken over.
        let (entry, _) = self.read_key(&key, &what).await?;
        if !entry
            .as_ref()
            .is_some_and(|e| e.is_held_by(session, &lease.holder, lease.token))
        {
            if entry.as_ref().and_then(KvEntry::holder_session) != Some(session)
                && !self.is_shared(session, &what).await.unwrap_or(true)
            {
                // The session holds nothing any more: end it.
                let _ = self.destroy_session(session, &what).await;
            }
            self.forget_proof(session);
            return Ok(Renewal::Lost);
        }
        let url = self.url(&["session", "renew", session], &[]);
        let answer = self
            .call(Method::PUT, url, None, &[404], Duration::ZERO, &what)
            .await?;
        if answer.status == 404 {
            self.forget_proof(session);
            return Ok(Renewal::Lost);
        }
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            "consul: renewed"
        );
        Ok(Renewal::Renewed)
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let what = || {
            format!(
                "update the metadata of election '{}' by '{}'",
                lease.election, lease.holder
            )
        };
        let key = self.election_key(&lease.election);
        let session = lease.handle.as_str();
        // The new value carries the term's token: the write moves the
        // key's ModifyIndex, which was the token until now.
        let value = encode_update(&lease.holder, metadata, lease.token);
        let (entry, _) = self.read_key(&key, &what).await?;
        let Some(entry) = entry.filter(|e| e.is_held_by(session, &lease.holder, lease.token))
        else {
            return Ok(Renewal::Lost);
        };
        // A lock by the session that holds the key keeps the lock and sets
        // the value, only on the key exactly as read.
        let ops = json!([
            {"KV": {"Verb": "check-index", "Key": key, "Index": entry.modify_index}},
            {"KV": {"Verb": "lock", "Key": key, "Value": base64(&value), "Flags": RECORD_FLAGS,
                    "Session": session}},
        ]);
        let outcome = match self.txn(ops, &what).await? {
            TxnOutcome::Applied(_) => Renewal::Renewed,
            TxnOutcome::RolledBack => {
                // The key changed since it was read, or a retried
                // transaction applied the first time: look.
                let (entry, _) = self.read_key(&key, &what).await?;
                let updated = entry.is_some_and(|e| {
                    e.is_held_by(session, &lease.holder, lease.token)
                        && e.value_bytes().is_ok_and(|v| v == value)
                });
                if updated {
                    Renewal::Renewed
                } else {
                    Renewal::Lost
                }
            }
        };
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            ?outcome, "consul: update metadata"
        );
        Ok(outcome)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let what = || {
            format!(
                "release election '{}' by '{}'",
                lease.election, lease.holder
            )
        };
        let key = self.election_key(&lease.election);
        let session = lease.handle.as_str();
        // The term is over when its lease is released, whether or not the
        // release gets through: the proof goes now (the term's processes
        // that inherited it, if any are left, keep its lock).
        self.forget_proof(session);
        let (entry, _) = self.read_key(&key, &what).await?;
        match entry {
            Some(e) if e.is_held_by(session, &lease.holder, lease.token) => {
                // Unlock first: a released lock has no lock delay, so a
                // follower takes over at once. The value stays.
                let ops = json!([
                    {"KV": {"Verb": "check-index", "Key": key, "Index": e.modify_index}},
                    {"KV": {"Verb": "unlock", "Key": key, "Value": e.value.clone().unwrap_or_default(),
                            "Flags": RECORD_FLAGS, "Session": session}},
                ]);
                self.txn(ops, &what).await?;
            }
            // Locked by this session but not the record of this lease:
            // not ours to touch.
            Some(e) if e.holder_session() == Some(session) => return Ok(()),
            _ => {}
        }
        self.after_release(session, lease, &what).await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        let what = || format!("read the leader of election '{election}'");
        let key = self.election_key(election);
        let (entry, _) = self.read_key(&key, &what).await?;
        self.leader_of(entry.as_ref(), &key, &what())
    }

    /// The roster: the entries a live session locks, in holder order
    /// (see the crate docs, "Roster and hand-over").
    async fn candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Option<Vec<Candidacy>>, StoreError> {
        self.roster(election).await.map(Some)
    }

    /// A roster entry locked by a session of its own, of TTL the ttl, which
    /// each call renews.
    async fn enroll(&self, req: &AcquireRequest) -> Result<(), StoreError> {
        self.enroll_entry(req).await
    }

    async fn withdraw(&self, election: &ElectionName, holder: &HolderId) -> Result<(), StoreError> {
        self.withdraw_entry(election, holder).await
    }

    /// The key moved to a reservation session in one transaction; the
    /// successor's acquire moves it to its own.
    async fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        self.release_reserved(lease, successor, window).await
    }

    /// One blocking query per election and store, shared by every watch
    /// of it (see the crate docs, "Connections").
    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let (store, e) = (self.clone(), election.clone());
        let open = async move { store.watch_stream(&e).await };
        self.inner.watches.watch(election, open).await
    }
}
