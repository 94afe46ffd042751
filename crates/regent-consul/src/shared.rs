//! Sessions shared by many elections: the store's side of
//! [`SharedSessions`] (see the crate docs, "One session for many
//! elections"): which session an acquire locks its key with, the rounds
//! that renew a session and read its keys, and when a session ends.

use std::time::Duration;

use regent_core::store::shared::{Forgot, SessionBackend, SessionKey, SharedSessions};
use regent_core::{AcquireRequest, StoreError};
use reqwest::Method;
use serde_json::json;
use tokio::time::Instant;

use crate::client::{ConsulStore, TxnOutcome, TxnResults};
use crate::record::{KvEntry, RECORD_FLAGS};
use crate::session::granted_ttl;

/// The name of a session that elections share (the key's name, for a
/// session of one term).
const SHARED_NAME: &str = "regent: elections of one process";

impl ConsulStore {
    /// Whether this store shares sessions: not with restart proofs, whose
    /// proof is the lock of a file named after one term's session.
    pub(crate) fn shares_sessions(&self) -> bool {
        self.inner.proofs.is_none()
    }

    /// A session for `req`'s lock, renewed (or created) at the instant
    /// returned, and whether it is shared: a shared one with room when
    /// this store shares sessions, else one created now.
    pub(crate) async fn session_for(
        &self,
        req: &AcquireRequest,
        key: &str,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<(String, Instant, bool), StoreError> {
        if !self.shares_sessions() {
            let sent = Instant::now();
            return Ok((self.create_session(key, req.ttl, what).await?, sent, false));
        }
        let grant = || async {
            let id = self.create_session(SHARED_NAME, req.ttl, what).await?;
            Ok((id, granted_ttl(req.ttl)))
        };
        let keep_alive = |id: String| async move { self.keep_alive(&id).await };
        let (id, _, sent) = self
            .inner
            .sessions
            .session_for(
                self,
                &req.election,
                &req.holder,
                req.ttl,
                self.inner.call_timeout,
                grant,
                keep_alive,
            )
            .await?;
        Ok((id, sent, true))
    }

    /// An acquire did not take `session` after all: a session of its own
    /// is destroyed; a shared one forgets the place, and is destroyed when
    /// that was its last.
    pub(crate) fn give_back(&self, session: &str, req: &AcquireRequest, shared: bool) {
        let emptied = !shared
            || self.inner.sessions.forget(
                &session.to_owned(),
                &req.election,
                None,
                Some(&req.holder),
            ) == Forgot::Emptied;
        if emptied {
            self.end(&session.to_owned());
        }
    }

    /// Ends `session` once a release freed its key: a shared session of
    /// this store when that was its last key; one this store does not
    /// know only when it is a session of one term (not another process's
    /// shared session, which its process ends, or its TTL).
    pub(crate) async fn after_release(
        &self,
        session: &str,
        lease: &regent_core::Lease,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<(), StoreError> {
        let id = session.to_owned();
        match self.inner.sessions.forget(
            &id,
            &lease.election,
            Some(lease.token),
            Some(&lease.holder),
        ) {
            Forgot::Emptied => self.destroy_session(session, what).await,
            Forgot::Kept => Ok(()),
            Forgot::Unknown if self.is_shared(session, what).await? => Ok(()),
            Forgot::Unknown => self.destroy_session(session, what).await,
        }
    }

    /// Whether `session` is one that elections share: told by its name,
    /// one request (`false` for a session Consul no longer knows).
    pub(crate) async fn is_shared(
        &self,
        session: &str,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<bool, StoreError> {
        let info = self.session_info(session, &[], what).await?;
        Ok(info.is_some_and(|s| s.name == SHARED_NAME))
    }
}

/// The most operations Consul takes in one transaction.
const TXN_OPS: usize = 64;

/// The store's shared sessions ([`SharedSessions`]): a session is a
/// Consul session, its records the keys it locks.
impl SessionBackend for ConsulStore {
    type Id = String;

    async fn keep_alive(&self, id: &String) -> Result<bool, StoreError> {
        let what = || format!("renew session {id}");
        let url = self.url(&["session", "renew", id], &[]);
        let answer = self
            .call(Method::PUT, url, None, &[404], Duration::ZERO, &what)
            .await?;
        Ok(answer.status != 404)
    }

    /// The waiting keys read in read-only transactions of up to 64
    /// `get-tree` operations (Consul's limit per transaction; a `get-tree`
    /// of a missing key is no error, unlike a `get`), `?consistent`: a
    /// request per 64 renewals waiting, never a read of other keys. (A
    /// read of the tree under the keys' common prefix read every
    /// session's keys at each round of each: at 10,000 elections, half
    /// their leaders lost their terms.)
    async fn held(&self, id: &String, keys: &[SessionKey]) -> Result<Vec<bool>, StoreError> {
        let names: Vec<String> = keys
            .iter()
            .map(|k| self.election_key(&k.election))
            .collect();
        let what = || format!("renew: read the keys of session {id}");
        // The transactions at once: a round's answer waits for the last.
        let reads = names.chunks(TXN_OPS).map(|chunk| {
            let ops: Vec<serde_json::Value> = chunk
                .iter()
                .map(|k| json!({"KV": {"Verb": "get-tree", "Key": k}}))
                .collect();
            let url = self.url(&["txn"], &[("consistent", "")]);
            let what = &what;
            async move {
                let answer = self
                    .call(
                        Method::PUT,
                        url,
                        Some(serde_json::Value::Array(ops).to_string().into_bytes()),
                        &[],
                        Duration::ZERO,
                        what,
                    )
                    .await?;
                answer.json::<TxnResults>(&what())
            }
        });
        let mut entries: std::collections::HashMap<String, KvEntry> =
            std::collections::HashMap::new();
        for results in futures_util::future::try_join_all(reads).await? {
            for kv in results
                .results
                .unwrap_or_default()
                .into_iter()
                .filter_map(|r| r.kv)
            {
                entries.insert(kv.key.clone(), kv);
            }
        }
        Ok(keys
            .iter()
            .zip(&names)
            .map(|(k, name)| {
                entries.get(name).is_some_and(|e| {
                    k.token
                        .is_some_and(|token| e.is_held_by(id, &k.holder, token))
                })
            })
            .collect())
    }

    /// Unlocks the key if `id` still locks it for the holder (and term),
    /// leaving its value: an explicit unlock has no lock delay.
    async fn drop_key(&self, id: &String, key: &SessionKey) -> Result<(), StoreError> {
        let what = || {
            format!(
                "unlock election '{}' by '{}', not renewed within its ttl",
                key.election, key.holder
            )
        };
        let name = self.election_key(&key.election);
        let (entry, _) = self.read_key(&name, &what).await?;
        let Some(e) = entry else {
            return Ok(());
        };
        let ours = match key.token {
            Some(token) => e.is_held_by(id, &key.holder, token),
            None => e.holder_session() == Some(id.as_str()),
        };
        if !ours {
            return Ok(());
        }
        let ops = json!([
            {"KV": {"Verb": "check-index", "Key": name, "Index": e.modify_index}},
            {"KV": {"Verb": "unlock", "Key": name, "Value": e.value.clone().unwrap_or_default(),
                    "Flags": RECORD_FLAGS, "Session": id}},
        ]);
        match self.txn(ops, &what).await? {
            TxnOutcome::Applied(_) => Ok(()),
            // The key changed since it was read: look again next time.
            TxnOutcome::RolledBack => Err(StoreError::unavailable(format!(
                "{}: the key changed while it was being unlocked",
                what()
            ))),
        }
    }

    fn end(&self, id: &String) {
        let store = self.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let what = || format!("end the shared session {id}");
            if let Err(e) = store.destroy_session(&id, &what).await {
                tracing::debug!(error = %e, "consul: ending a shared session failed; it expires by its TTL");
            }
        });
    }

    fn sessions(&self) -> &SharedSessions<Self> {
        &self.inner.sessions
    }
}
