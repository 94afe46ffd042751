//! The leases this store's elections share ([`SharedSessions`]), as etcd
//! sees them: a session is a lease, its records the keys attached to it.
//! Finding (or granting) a lease with room for an acquire, noting the key
//! an acquire placed on it, the rounds' keep-alive and key listing, the
//! deletion of a key its holder stopped renewing, and revoking a lease
//! that carries no key any more.

use std::time::Duration;

use tokio::time::Instant;

use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use regent_core::store::shared::{SessionBackend, SessionKey, SharedSessions};
use regent_core::{Acquire, AcquireRequest, ElectionName, StoreError};

use crate::client::EtcdStore;
use crate::error::is_lease_not_found;
use crate::record::{candidate_key, lease_hex};

impl EtcdStore {
    /// Records in its session the key an acquire answered with.
    pub(crate) fn note_placed(
        &self,
        id: i64,
        req: &AcquireRequest,
        acquired: &Acquire,
        sent: Instant,
    ) {
        let lease = match acquired {
            Acquire::Won(lease)
            | Acquire::Held {
                queued: Some(lease),
                ..
            } => lease,
            Acquire::Held { queued: None, .. } => return,
        };
        self.sessions
            .placed(&id, &req.election, &req.holder, lease.token, sent);
    }

    /// A session of `ttl_secs` with room for `req.election`, whose lease
    /// was kept alive (or granted) at the instant returned: a shared one
    /// when there is one, else a lease granted now.
    pub(crate) async fn session_for(
        &self,
        req: &AcquireRequest,
        ttl_secs: i64,
    ) -> Result<(i64, Duration, Instant), StoreError> {
        let group = Duration::from_secs(u64::try_from(ttl_secs).unwrap_or(0));
        let grant = || async {
            let mut client = self.client.clone();
            let granted = self
                .call(
                    &req.election,
                    || format!("acquire election '{}': grant a lease", req.election),
                    client.lease_grant(ttl_secs, None),
                )
                .await?;
            let ttl = Duration::from_secs(u64::try_from(granted.ttl().max(ttl_secs)).unwrap_or(0));
            Ok((granted.id(), ttl))
        };
        let keep_alive = |id| self.keep_alive_once(Some(&req.election), id, "acquire");
        self.sessions
            .session_for(
                self,
                &req.election,
                &req.holder,
                group,
                self.request_timeout,
                grant,
                keep_alive,
            )
            .await
    }

    /// Revokes lease `id`, whose keys are all gone, without making the
    /// caller wait. Should the process exit first, or the revoke fail, the
    /// lease, with no key left, expires by its ttl.
    pub(crate) fn revoke_in_background(&self, id: i64, election: &ElectionName) {
        self.revoke_later(id, Some(election), false);
    }

    /// Revokes lease `id` in the background if no key is attached to it
    /// any more: a lease this store did not grant may carry the keys of
    /// other elections of the process that did.
    pub(crate) fn revoke_if_keyless_in_background(&self, id: i64, election: &ElectionName) {
        self.revoke_later(id, Some(election), true);
    }

    fn revoke_later(&self, id: i64, election: Option<&ElectionName>, if_keyless: bool) {
        let mut client = self.client.clone();
        let bound = self.request_timeout;
        let election = election.cloned();
        tokio::spawn(async move {
            let r = tokio::time::timeout(bound, async {
                if if_keyless {
                    let options = etcd_client::LeaseTimeToLiveOptions::new().with_keys();
                    let r = client.lease_time_to_live(id, Some(options)).await?;
                    if r.ttl() < 0 || !r.keys().is_empty() {
                        return Ok(());
                    }
                }
                client.lease_revoke(id).await.map(drop)
            })
            .await;
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) if is_lease_not_found(&e) => {}
                Ok(Err(e)) => {
                    tracing::debug!(?election, error = %e, "etcd: revoking a released lease failed");
                }
                Err(_) => {
                    tracing::debug!(?election, "etcd: revoking a released lease: no answer");
                }
            }
        });
    }
}

/// The store's shared leases ([`SharedSessions`]): a session is a lease,
/// its records the keys attached to it.
impl SessionBackend for EtcdStore {
    type Id = i64;

    async fn keep_alive(&self, id: &i64) -> Result<bool, StoreError> {
        self.keep_alive_once(None, *id, "renew").await
    }

    async fn held(&self, id: &i64, keys: &[SessionKey]) -> Result<Vec<bool>, StoreError> {
        let mut client = self.client.clone();
        let id = *id;
        let options = etcd_client::LeaseTimeToLiveOptions::new().with_keys();
        let what = || format!("renew: list the keys of lease {}", lease_hex(id));
        let r = self
            .lease_call(None, what, client.lease_time_to_live(id, Some(options)))
            .await
            .map_err(|e| e.error)?;
        // etcd says the remaining ttl in whole seconds, rounded down: 0 is
        // a lease alive for less than a second; -1 one gone.
        let attached: std::collections::HashSet<&[u8]> = if r.ttl() >= 0 {
            r.keys().iter().map(Vec::as_slice).collect()
        } else {
            std::collections::HashSet::new()
        };
        Ok(keys
            .iter()
            .map(|k| {
                let key = candidate_key(&self.election_prefix(&k.election), id);
                attached.contains(key.as_bytes())
            })
            .collect())
    }

    async fn drop_key(&self, id: &i64, key: &SessionKey) -> Result<(), StoreError> {
        let id = *id;
        let name = candidate_key(&self.election_prefix(&key.election), id);
        let mut when = vec![Compare::lease(name.clone(), CompareOp::Equal, id)];
        if let Some(token) = key.token.and_then(|t| i64::try_from(t.get()).ok()) {
            when.push(Compare::create_revision(
                name.clone(),
                CompareOp::Equal,
                token,
            ));
        }
        let txn = Txn::new().when(when).and_then([TxnOp::delete(name, None)]);
        let what = || {
            format!(
                "delete the key of election '{}' by '{}', not renewed within its ttl",
                key.election, key.holder
            )
        };
        let mut client = self.client.clone();
        self.call(&key.election, what, client.txn(txn))
            .await
            .map(drop)
    }

    fn end(&self, id: &i64) {
        self.revoke_later(*id, None, false);
    }

    fn sessions(&self) -> &SharedSessions<Self> {
        &self.sessions
    }
}
