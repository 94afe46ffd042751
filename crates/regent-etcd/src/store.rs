//! [`EtcdStore`]: the store contract over etcd v3. The [`LeaseStore`]
//! operations, built on the campaign (`campaign.rs`), the shared leases
//! (`session.rs`) and the watch (`watch.rs`); the ttl limits.

use std::time::Duration;

use tokio::time::Instant;

use etcd_client::{Compare, CompareOp, KeyValue, PutOptions, Txn, TxnOp};
use regent_core::store::HandOff;
use regent_core::store::shared::Forgot;
use regent_core::{
    Acquire, AcquireRequest, Candidacy, ElectionName, ErrorKind, HolderId, LeaderInfo,
    LeaderStream, Lease, LeaseStore, MAX_TTL, Metadata, Renewal, SafetyClass, StoreError,
    StoreInfo, StoreStyle, WatchMode,
};

// `target.rs` takes these from here.
pub(crate) use crate::builder::{DEFAULT_REQUEST_TIMEOUT, EtcdStoreBuilder};
pub(crate) use crate::client::EtcdStore;
#[cfg(feature = "tls")]
pub(crate) use crate::pem::{PemLabel, pem_labels};

use crate::campaign::{Expected, Still};
use crate::client::Undelivered;
use crate::record::{candidate_key, decode, encode, holder_bounds, parse_lease_hex};

/// The shortest ttl the store honours: etcd grants leases in whole seconds.
///
/// etcd itself raises a shorter lease to its own minimum,
/// `ceil(1.5 × election timeout)` (2 s with the default 1 s election
/// timeout, 1 s with `--election-timeout` ≤ 666 ms); the granted, longer ttl
/// is what [`Lease::ttl`] then reports.
pub const MIN_TTL: Duration = Duration::from_secs(1);

/// How much later than its ttl etcd may delete a dead holder's key: its
/// lessor looks for expired leases every 500 ms and revokes them through
/// Raft. (A change of etcd's Raft leader restarts every lease's full ttl,
/// plus an election timeout; that is not bounded here: see the crate docs.)
pub const EXPIRY_SLACK: Duration = Duration::from_secs(1);

/// The compares that find `key` still this term's: its create revision
/// is our token, its lease ours, its value our holder's (a compare cannot
/// look into a value, but every value regent writes for a holder lies
/// between two bounds).
pub(crate) fn own_compares(key: &str, token: i64, id: i64, lease: &Lease) -> Vec<Compare> {
    let (low, high) = holder_bounds(&lease.holder);
    vec![
        Compare::create_revision(key, CompareOp::Equal, token),
        Compare::lease(key, CompareOp::Equal, id),
        Compare::value(key, CompareOp::Greater, low),
        Compare::value(key, CompareOp::Less, high),
    ]
}

impl EtcdStore {
    /// After a transaction that deleted `lease`'s key (`deleted`) or found
    /// it not ours: the key is forgotten by its session, and a lease left
    /// without keys is revoked in the background, without making the
    /// caller wait for a second write.
    pub(crate) fn released(&self, lease: &Lease, id: i64, deleted: bool) {
        let forgot =
            self.sessions
                .forget(&id, &lease.election, Some(lease.token), Some(&lease.holder));
        match forgot {
            Forgot::Emptied => self.revoke_in_background(id, &lease.election),
            Forgot::Kept => {}
            // A lease of another process: revoked only once it carries no
            // key. If our key was not there (deleted from outside), the
            // lease may live on without a key; it expires by its ttl.
            Forgot::Unknown if deleted => {
                self.revoke_if_keyless_in_background(id, &lease.election);
            }
            Forgot::Unknown => {}
        }
    }

    fn ttl_secs(&self, ttl: Duration) -> Result<i64, StoreError> {
        if ttl < MIN_TTL || ttl > MAX_TTL {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!("etcd store: ttl {ttl:?} is outside {MIN_TTL:?}..={MAX_TTL:?}"),
            ));
        }
        // Whole seconds, rounded up: never less than asked.
        let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        Ok(i64::try_from(secs).expect("at most a day"))
    }

    /// Whether our key exists with our token (create revision), our lease,
    /// and a value that names our holder.
    async fn own_key(&self, lease: &Lease, id: i64, what: &str) -> Result<bool, StoreError> {
        Ok(self.own_record(lease, id, what).await?.is_some())
    }

    /// Our key, if it exists with our token (create revision), our lease,
    /// and a value that names our holder.
    async fn own_record(
        &self,
        lease: &Lease,
        id: i64,
        what: &str,
    ) -> Result<Option<KeyValue>, StoreError> {
        let key = candidate_key(&self.election_prefix(&lease.election), id);
        let mut client = self.client.clone();
        let mut resp = self
            .call(
                &lease.election,
                || format!("{what} election '{}' by '{}'", lease.election, lease.holder),
                client.get(key, None),
            )
            .await?;
        Ok(resp.take_kvs().into_iter().next().filter(|kv| {
            i64::try_from(lease.token.get()).ok() == Some(kv.create_revision())
                && kv.lease() == id
                && decode(kv.value()).is_some_and(|(h, _)| h == lease.holder)
        }))
    }
}

impl LeaseStore for EtcdStore {
    fn info(&self) -> StoreInfo {
        // etcd rounds a ttl up to whole seconds (and to its own minimum):
        // it never grants less than asked.
        StoreInfo::new(
            "etcd",
            StoreStyle::Queue,
            WatchMode::Notify,
            SafetyClass::Consensus,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL)
        .with_expiry_slack(regent_core::store::ExpirySlack::fixed(EXPIRY_SLACK))
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let ttl_secs = self.ttl_secs(req.ttl)?;
        let place = queued
            .filter(|q| q.election == req.election && q.holder == req.holder)
            .and_then(|q| Some((q, parse_lease_hex(q.handle.as_str())?)));
        if let Some((q, id)) = place {
            // Restart the place's ttl (a Won below must hold for a full ttl
            // from this call) while reading the line: a place still as we
            // left it needs no write.
            let prefix = self.election_prefix(&req.election);
            let token = i64::try_from(q.token.get()).ok();
            let sent = Instant::now();
            let (alive, still) = tokio::join!(
                self.keep_alive_once(Some(&req.election), id, "acquire"),
                async {
                    match token {
                        Some(t) => self.still_placed(req, &prefix, id, t).await,
                        None => Ok(Still::Changed),
                    }
                }
            );
            if alive? {
                let still = still?;
                // A key gone from a lease none of our sessions carries is
                // not put back on it: that lease is another process's, or
                // one of ours that a renewal found without its key and
                // that is being revoked (a key put on it now would go with
                // the revoke, under a candidate that believes it holds a
                // full ttl). Such a place queues afresh below.
                if !matches!(still, Still::Gone) || self.sessions.knows(&id) {
                    let acquired = match still {
                        Still::Placed(placed) => self.answer(req, &prefix, id, q.ttl, placed),
                        Still::Changed | Still::Gone => {
                            let expected = token.map_or(Expected::Fresh, Expected::Queued);
                            self.campaign(req, id, q.ttl, expected).await
                        }
                    };
                    if let Ok(a) = &acquired {
                        self.note_placed(id, req, a, sent);
                    }
                    return acquired;
                }
                tracing::debug!(
                    election = %req.election, holder = %req.holder,
                    "etcd: queued key gone from a lease of no session of ours; campaigning with another lease"
                );
            } else {
                self.sessions.end(&id);
                // The lease expired while we waited in line (etcd#19597 is a
                // campaign that waits forever on such a key): queue afresh.
                tracing::debug!(
                    election = %req.election, holder = %req.holder,
                    "etcd: queued lease expired; campaigning with a new lease"
                );
            }
        }
        // A lease an acquire of this holder granted and never returned: its
        // key, if the acquire made one, is our place.
        let lost = {
            let mut undelivered = self.undelivered();
            let at = undelivered
                .iter()
                .position(|u| u.election == req.election && u.holder == req.holder);
            at.map(|i| undelivered.remove(i))
        };
        if let Some(u) = lost {
            let sent = Instant::now();
            match self
                .keep_alive_once(Some(&req.election), u.lease, "acquire")
                .await
            {
                Ok(true) => return self.campaign_delivered(req, u, Expected::Adopt, sent).await,
                Ok(false) => self.sessions.end(&u.lease),
                Err(e) => {
                    self.undelivered().push(u);
                    return Err(e);
                }
            }
        }
        let (id, ttl, sent) = self.session_for(req, ttl_secs).await?;
        let u = Undelivered {
            election: req.election.clone(),
            holder: req.holder.clone(),
            lease: id,
            ttl,
        };
        self.campaign_delivered(req, u, Expected::Fresh, sent).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let Some(id) = parse_lease_hex(lease.handle.as_str()) else {
            return Ok(Renewal::Lost);
        };
        // A key on one of our sessions: the session's next round renews it
        // with all the others.
        let joined = self
            .sessions
            .join(&id, &lease.election, &lease.holder, lease.token);
        if let Some(round) = joined
            && let Ok(answer) = round.await
        {
            tracing::debug!(
                election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                ?answer, "etcd: renewed with its session"
            );
            return answer;
        }
        // Not ours (a lease placed by another process or store): on its
        // own. Check first, so that a renewal of someone else's record
        // never extends it.
        if !self.own_key(lease, id, "renew").await? {
            return Ok(Renewal::Lost);
        }
        if !self
            .keep_alive_once(Some(&lease.election), id, "renew")
            .await?
        {
            return Ok(Renewal::Lost);
        }
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            "etcd: renewed"
        );
        Ok(Renewal::Renewed)
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let Some(id) = parse_lease_hex(lease.handle.as_str()) else {
            return Ok(Renewal::Lost);
        };
        // Read first: the holder is in the value, which a compare cannot
        // look into.
        let Some(mine) = self.own_record(lease, id, "update the metadata of").await? else {
            return Ok(Renewal::Lost);
        };
        let value = encode(&lease.holder, metadata);
        if mine.value() == value.as_slice() {
            return Ok(Renewal::Renewed);
        }
        // Go's Proclaim, guarded by the key exactly as read: put the new
        // value with our lease (which keeps the key's create revision, our
        // token, and its expiry) only if nothing wrote the key since.
        let key = mine.key().to_vec();
        let txn = Txn::new()
            .when([
                Compare::create_revision(key.clone(), CompareOp::Equal, mine.create_revision()),
                Compare::mod_revision(key.clone(), CompareOp::Equal, mine.mod_revision()),
            ])
            .and_then([TxnOp::put(
                key,
                value,
                Some(PutOptions::new().with_lease(id)),
            )]);
        let what = || {
            format!(
                "update the metadata of election '{}' by '{}'",
                lease.election, lease.holder
            )
        };
        let mut client = self.client.clone();
        let resp = self.call(&lease.election, what, client.txn(txn)).await?;
        let outcome = if resp.succeeded() {
            Renewal::Renewed
        } else {
            Renewal::Lost
        };
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            ?outcome, "etcd: update metadata"
        );
        Ok(outcome)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let (Some(id), Ok(token)) = (
            parse_lease_hex(lease.handle.as_str()),
            i64::try_from(lease.token.get()),
        ) else {
            return Ok(());
        };
        // Go's Resign: delete our key if it is still this term's (its create
        // revision is our token, its lease ours, its value our holder's), in
        // one write. The next in line is told by that deletion; revoking the
        // lease, which nothing else uses, comes after, in the background. (A
        // read of the key before the revoke was one more round trip on every
        // hand-over's path.)
        let key = candidate_key(&self.election_prefix(&lease.election), id);
        let txn = Txn::new()
            .when(own_compares(&key, token, id, lease))
            .and_then([TxnOp::delete(key, None)]);
        let what = || {
            format!(
                "release election '{}' by '{}'",
                lease.election, lease.holder
            )
        };
        let mut client = self.client.clone();
        let resp = self.call(&lease.election, what, client.txn(txn)).await?;
        self.released(lease, id, resp.succeeded());
        Ok(())
    }

    /// Frees our key; when it cannot be given to `successor` (a foreign
    /// key stands before it, it is not behind us, our key is not ours any
    /// more), releases it as `release` does: see `handoff.rs`.
    async fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        _window: Duration,
    ) -> Result<HandOff, StoreError> {
        self.hand_over(lease, successor).await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        Ok(self.read_head(election, "read the leader").await?.0)
    }

    async fn candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Option<Vec<Candidacy>>, StoreError> {
        Ok(Some(self.read_candidates(election).await?))
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        self.leader_stream(election).await
    }
}
