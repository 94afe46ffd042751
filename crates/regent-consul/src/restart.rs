//! The restart shortcut, the store's side: whether the key is locked
//! under this holder's own id by a session whose process is proven gone,
//! and taking that session over with a new lock (so a new, larger fencing
//! token). The proofs themselves, lock files named after sessions, are
//! [`crate::proof`]'s. See the crate docs, "The restart shortcut".

use std::time::Duration;

use regent_core::{AcquireRequest, StoreError};
use reqwest::Method;
use serde_json::json;

use crate::client::{ConsulStore, TxnOutcome};
use crate::proof::{Gone, is_session_id};
use crate::record::{KvEntry, RECORD_FLAGS, base64, encode};
use crate::session::go_duration;

impl ConsulStore {
    /// The restart shortcut's test: the key is locked under `req`'s holder
    /// id by a session whose proof shows its process gone (see
    /// [`ConsulStoreBuilder::restart_proofs`](crate::ConsulStoreBuilder::restart_proofs)).
    /// The proof stays locked by the answer until the caller has taken the
    /// session over.
    pub(crate) fn previous_self_gone(
        &self,
        entry: Option<&KvEntry>,
        req: &AcquireRequest,
        key: &str,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Option<Gone>, StoreError> {
        let (Some(proofs), Some(entry)) = (&self.inner.proofs, entry) else {
            return Ok(None);
        };
        let Some(session) = entry.holder_session().filter(|s| is_session_id(s)) else {
            return Ok(None);
        };
        let ours = self
            .leader_of(Some(entry), key, &what())?
            .is_some_and(|l| l.holder == req.holder);
        Ok(if ours {
            proofs.prove_gone(session)
        } else {
            None
        })
    }

    /// Takes over `session`, which holds `key` as `entry` under `req`'s
    /// holder id and whose process is proven gone: if Consul still knows it
    /// with the TTL and lock delay this store would give `req`'s lease,
    /// renews it and locks the key again under it (a transaction checking
    /// the key is still `entry`). The lock's new `ModifyIndex` is the new
    /// term's token, above the old term's. `None` when any step finds
    /// things otherwise.
    pub(crate) async fn adopt(
        &self,
        key: &str,
        entry: &KvEntry,
        session: &str,
        req: &AcquireRequest,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Option<u64>, StoreError> {
        let info = self
            .session_info(session, &[("consistent", "")], what)
            .await?;
        let Some(info) = info else {
            return Ok(None);
        };
        let delay_ns = u64::try_from(self.lock_delay(req.ttl).as_nanos()).unwrap_or(u64::MAX);
        if info.ttl != go_duration(self.session_ttl(req.ttl)) || info.lock_delay != delay_ns {
            return Ok(None);
        }
        let url = self.url(&["session", "renew", session], &[]);
        let renewed = self
            .call(Method::PUT, url, None, &[404], Duration::ZERO, what)
            .await?;
        if renewed.status == 404 {
            return Ok(None);
        }
        let value = base64(&encode(&req.holder, &req.metadata));
        // Unlock and lock again in one transaction: a lock by the holding
        // session with the same value changes nothing (the index stays),
        // while an unlock and a new lock are a new acquisition at a new
        // Raft index; nobody else can take the key in between, and an
        // explicit unlock has no lock delay.
        let ops = json!([
            {"KV": {"Verb": "check-index", "Key": key, "Index": entry.modify_index}},
            {"KV": {"Verb": "unlock", "Key": key, "Value": value, "Flags": RECORD_FLAGS, "Session": session}},
            {"KV": {"Verb": "lock", "Key": key, "Value": value, "Flags": RECORD_FLAGS, "Session": session}},
        ]);
        Ok(match self.txn(ops, what).await? {
            TxnOutcome::Applied(entries) => entries
                .into_iter()
                .rev()
                .find(|e| e.key == key && e.holder_session() == Some(session))
                .map(|e| e.modify_index)
                .filter(|&t| t > entry.modify_index),
            TxnOutcome::RolledBack => None,
        })
    }

    /// Ends this process's restart proof of `session`, if it has one.
    pub(crate) fn forget_proof(&self, session: &str) {
        if let Some(proofs) = &self.inner.proofs {
            proofs.forget(session);
        }
    }
}
