//! [`ZkStore`]: the store contract over ZooKeeper's ephemeral sequential
//! nodes, with one session for every election of the store. The
//! [`LeaseStore`] operations, built on our node (`node.rs`), the session
//! (`session.rs`) and the watch (`watch.rs`); the ttl limits.

use std::time::Duration;

use regent_core::store::HandOff;
use regent_core::{
    Acquire, AcquireRequest, Candidacy, ElectionName, ErrorKind, ExpirySlack, HolderId, LeaderInfo,
    LeaderStream, Lease, LeaseStore, MAX_TTL, Metadata, Renewal, SafetyClass, StoreError,
    StoreInfo, StoreStyle, TtlGrant, WatchMode,
};
use tokio::time::Instant;
use zookeeper_client as zk;

// `target.rs` takes these from here.
pub(crate) use crate::builder::DEFAULT_CALL_TIMEOUT;
pub(crate) use crate::client::ZkStore;

use crate::error::{is_bad_version, is_no_node, is_node_exists};
use crate::node::{handle, parse_handle};
use crate::record::{encode_metadata, is_candidate, token_of};

/// The shortest ttl the store asks a server for. A server grants session
/// timeouts of 2 to 20 ticks (`tickTime`, 2 s by default, so 4 to 40 s);
/// the granted timeout is what [`Lease::ttl`] reports.
pub const MIN_TTL: Duration = Duration::from_millis(100);

/// How much later than its timeout ZooKeeper may expire a dead holder's
/// session: the server files every session's expiry in buckets of one
/// tick and expires a bucket when it ends, so up to a tick late, and a tick
/// is at most half the session timeout (which is at least two ticks);
/// then the close goes through the ensemble's atomic broadcast.
pub const EXPIRY_SLACK: ExpirySlack = ExpirySlack::new(Duration::from_millis(500), 50);

impl ZkStore {
    /// Releases a lease of a session this store does not hold: another
    /// process's, which died (regent's supervisor gives a crashed regent's
    /// lease back by its ticket, from a process of its own). Its node goes
    /// only if it is exactly the lease's: the node of that name, still
    /// owned by the lease's session, created at the lease's token (the
    /// czxid), and deleted at the version read, so that nothing but that
    /// node is touched. Its metadata node goes first, as in a release by
    /// the session itself.
    async fn release_elsewhere(
        &self,
        lease: &Lease,
        sid: i64,
        name: &str,
    ) -> Result<(), StoreError> {
        let s = self.session(None).await?;
        let dir = self.election_path(&lease.election);
        let path = format!("{dir}/{name}");
        let what = || self.what("release", &lease.election);
        let stat = self.call(what, s.client.check_stat(&path)).await?;
        let Some(stat) =
            stat.filter(|st| st.ephemeral_owner == sid && token_of(st.czxid) == lease.token)
        else {
            // Gone already, or not this lease's.
            return Ok(());
        };
        let meta = self.meta_path(&lease.election, name);
        match self.call(what, s.client.delete(&meta, None)).await {
            Ok(()) => {}
            Err(e) if is_no_node(&e) => {}
            Err(e) => return Err(e),
        }
        match self
            .call(what, s.client.delete(&path, Some(stat.version)))
            .await
        {
            Ok(()) => {
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, token = %lease.token,
                    session = format_args!("{sid:x}"), "zookeeper: released another session's lease"
                );
                Ok(())
            }
            // Gone meanwhile (its session expired), or changed: not ours
            // to delete any more.
            Err(e) if is_no_node(&e) || is_bad_version(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl LeaseStore for ZkStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "zookeeper",
            StoreStyle::Queue,
            WatchMode::Notify,
            SafetyClass::Consensus,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL)
        .with_expiry_slack(EXPIRY_SLACK)
        .with_ttl_grant(TtlGrant::Negotiated)
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        if req.ttl < MIN_TTL || req.ttl > MAX_TTL {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "{}: a ttl of {:?} is outside what this store asks a server for ({MIN_TTL:?} \
                     to {MAX_TTL:?})",
                    self.what("campaign in", &req.election),
                    req.ttl
                ),
            ));
        }
        let s = self.session(Some(req.ttl)).await?;
        let dir = self.election_path(&req.election);
        let mine = match queued {
            Some(q) => self.refresh(&s, q, &dir).await?,
            None => None,
        };
        let (name, czxid) = match mine {
            Some(m) => m,
            None => self.create_node(&s, req, &dir).await?,
        };
        let lease = Lease {
            election: req.election.clone(),
            holder: req.holder.clone(),
            token: token_of(czxid),
            ttl: s.granted,
            handle: handle(s.id, &name),
        };
        // Our create was applied on the server we read from, and with it
        // every earlier one: no node that stood before ours is missing
        // from this list (one that left since may still show).
        let children = self.children(&s.client, &req.election, &dir).await?;
        if let Some(foreign) = children.iter().find(|c| !is_candidate(c)) {
            // Never lead past something we cannot place in the line.
            let _ = self.release(&lease).await;
            return Err(StoreError::corrupt(format!(
                "{}: the node {dir}/{foreign} is no candidate's (its name does not end in a \
                 sequence number); remove it",
                self.what("campaign in", &req.election)
            )));
        }
        let leader = self
            .first_readable(&s.client, &req.election, &dir, &children, Some(&name))
            .await?;
        if !children.contains(&name) {
            // Deleted behind our back (an operator), or lapsed: queue anew.
            s.records().retain(|r| !r.is(&dir, &name, &lease));
            return Ok(Acquire::Held {
                leader,
                queued: None,
            });
        }
        // Nothing awaits after this: the caller gets the lease.
        if let Some(r) = s.records().iter_mut().find(|r| r.is(&dir, &name, &lease)) {
            r.delivered = true;
        }
        match leader {
            None => Ok(Acquire::Won(lease)),
            Some(leader) => Ok(Acquire::Held {
                leader: Some(leader),
                queued: Some(lease),
            }),
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let Some((sid, name)) = parse_handle(&lease.handle) else {
            return Ok(Renewal::Lost);
        };
        let Some(s) = self.session_of(sid).await else {
            return Ok(Renewal::Lost);
        };
        let dir = self.election_path(&lease.election);
        match self.renew_in_round(&s, lease, dir, name).await {
            Ok(true) => Ok(Renewal::Renewed),
            Ok(false) => Ok(Renewal::Lost),
            // The session ended: ZooKeeper deleted its nodes.
            Err(_) if !s.is_alive() => Ok(Renewal::Lost),
            Err(e) => Err(e),
        }
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let Some((sid, name)) = parse_handle(&lease.handle) else {
            return Ok(Renewal::Lost);
        };
        let Some(s) = self.session_of(sid).await else {
            return Ok(Renewal::Lost);
        };
        let dir = self.election_path(&lease.election);
        let path = format!("{dir}/{name}");
        let what = || self.what("publish metadata in", &lease.election);
        let now = Instant::now();
        let check = {
            let records = s.records();
            if !records
                .iter()
                .any(|r| r.is(&dir, name, lease) && r.until > now)
            {
                return Ok(Renewal::Lost);
            }
            s.client.check_stat(&path)
        };
        match self.call(what, check).await {
            Ok(Some(st)) if st.ephemeral_owner == s.id && token_of(st.czxid) == lease.token => {}
            Ok(_) => {
                s.records().retain(|r| !r.is(&dir, name, lease));
                return Ok(Renewal::Lost);
            }
            Err(_) if !s.is_alive() => return Ok(Renewal::Lost),
            Err(e) => return Err(e),
        }
        // The node's own data stays as created: the metadata goes beside
        // the election (see `meta_path`), ephemeral as the node.
        let meta = self.meta_path(&lease.election, name);
        let data = encode_metadata(metadata);
        let options = zk::CreateMode::Ephemeral.with_acls(self.acls());
        for _ in 0..3 {
            match self.call(what, s.client.set_data(&meta, &data, None)).await {
                Ok(_) => return Ok(Renewal::Renewed),
                Err(e) if is_no_node(&e) => {}
                Err(_) if !s.is_alive() => return Ok(Renewal::Lost),
                Err(e) => return Err(e),
            }
            match self
                .call(what, s.client.create(&meta, &data, &options))
                .await
            {
                Ok(_) => return Ok(Renewal::Renewed),
                // Made meanwhile: set it.
                Err(e) if is_node_exists(&e) => {}
                Err(e) if is_no_node(&e) => {
                    let parent = meta.rsplit_once('/').map_or("", |(p, _)| p);
                    self.ensure_path(&s, parent).await?;
                }
                Err(_) if !s.is_alive() => return Ok(Renewal::Lost),
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::new(
            ErrorKind::Protocol,
            format!("{}: the metadata node {meta} came and went", what()),
        ))
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let Some((sid, name)) = parse_handle(&lease.handle) else {
            return Ok(());
        };
        let Some(s) = self.session_of(sid).await else {
            return self.release_elsewhere(lease, sid, name).await;
        };
        let dir = self.election_path(&lease.election);
        let path = format!("{dir}/{name}");
        let delete = {
            let mut records = s.records();
            let before = records.len();
            records.retain(|r| !r.is(&dir, name, lease));
            if records.len() == before {
                // Not ours (another holder or token), or already gone.
                return Ok(());
            }
            // The metadata first: a follower that sees the node gone reads
            // no stale metadata for it. Best effort: it is ephemeral too.
            drop(
                s.client
                    .delete(&self.meta_path(&lease.election, name), None),
            );
            s.client.delete(&path, None)
        };
        match self
            .call(|| self.what("release", &lease.election), delete)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if is_no_node(&e) => Ok(()),
            Err(_) if !s.is_alive() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Frees our node; when it cannot be given to `successor` (a node
    /// regent did not make stands before it, it is not behind us, our node
    /// is not ours any more), releases it as `release` does: see
    /// `handoff.rs`.
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
        let s = self.session(None).await?;
        let dir = self.election_path(election);
        let children = self.children(&s.client, election, &dir).await?;
        self.first_readable(&s.client, election, &dir, &children, None)
            .await
    }

    async fn candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Option<Vec<Candidacy>>, StoreError> {
        Ok(Some(self.read_candidates(election).await?))
    }

    /// One ZooKeeper watch per election and store, shared by every watch
    /// of it: each watcher's own would list every candidate again at every
    /// change.
    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let (store, e) = (self.clone(), election.clone());
        let open = async move { store.watch_stream(&e).await };
        self.inner.watches.watch(election, open).await
    }
}
