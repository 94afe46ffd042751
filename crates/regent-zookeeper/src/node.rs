//! Our own node in an election's line: made (or found again by its
//! protection GUID when a create's answer was lost), checked and renewed
//! by an acquire with a place, renewed in the session's rounds, and named
//! by the lease's handle.

use std::sync::atomic::Ordering;

use regent_core::{AcquireRequest, ElectionName, ErrorKind, Lease, LeaseHandle, StoreError};
use tokio::sync::oneshot;
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::client::ZkStore;
use crate::error::{is_no_node, zk_error};
use crate::record::{encode, is_protected_by, new_guid, node_prefix, sort_children, token_of};
use crate::session::{Record, RoundError, Session, Waiting, lock};

/// A handle: the session id in hex, `/`, the node's name.
pub(crate) fn handle(session: i64, name: &str) -> LeaseHandle {
    LeaseHandle::new(format!("{session:x}/{name}"))
}

pub(crate) fn parse_handle(handle: &LeaseHandle) -> Option<(i64, &str)> {
    let (sid, name) = handle.as_str().split_once('/')?;
    Some((i64::from_str_radix(sid, 16).ok()?, name))
}

impl ZkStore {
    /// Our node for `req`: found again by its protection GUID if an
    /// earlier create's answer was lost, else created. Returns its name and
    /// czxid; its lease runs from this call's send.
    pub(crate) async fn create_node(
        &self,
        s: &Session,
        req: &AcquireRequest,
        dir: &str,
    ) -> Result<(String, i64), StoreError> {
        let what = || self.what("campaign in", &req.election);
        let data = encode(&req.holder, &req.metadata);
        // A place an acquire of this holder made but never returned.
        let earlier = s
            .records()
            .iter()
            .find(|r| r.dir == dir && r.holder == req.holder && !r.delivered && !r.lapsed)
            .map(|r| (r.guid.clone(), r.name.clone()));
        if let Some((guid, Some(name))) = &earlier {
            let path = format!("{dir}/{name}");
            let sent = Instant::now();
            let stat = self.call(what, s.client.check_stat(&path)).await?;
            let mut records = s.records();
            match stat.filter(|st| st.ephemeral_owner == s.id) {
                Some(st) => {
                    if let Some(r) = records.iter_mut().find(|r| r.dir == dir && r.guid == *guid) {
                        r.until = sent + s.granted;
                    }
                    return Ok((name.clone(), st.czxid));
                }
                None => records.retain(|r| !(r.dir == dir && r.guid == *guid)),
            }
        }
        let earlier = earlier.and_then(|(guid, name)| name.is_none().then_some(guid));
        if let Some(guid) = &earlier {
            let sent = Instant::now();
            if let Some((name, czxid)) = self.find_protected(s, dir, guid, &req.election).await? {
                let mut records = s.records();
                records.retain(|r| !(r.dir == dir && r.guid == *guid));
                records.push(Record {
                    dir: dir.to_owned(),
                    guid: guid.clone(),
                    name: Some(name.clone()),
                    holder: req.holder.clone(),
                    token: Some(token_of(czxid)),
                    until: sent + s.granted,
                    delivered: false,
                    size: data.len(),
                    lapsed: false,
                });
                return Ok((name, czxid));
            }
        }
        // Reuse the GUID of a create that may still land: should it, the
        // two share it, and the next look finds the one to keep.
        let guid = earlier.unwrap_or_else(new_guid);
        let prefix = format!("{dir}/{}", node_prefix(&guid));
        let acls = self.acls();
        let options = zk::CreateMode::EphemeralSequential.with_acls(acls);
        for attempt in 0..2 {
            let sent = Instant::now();
            let created = {
                let mut records = s.records();
                records.retain(|r| !(r.dir == dir && r.guid == guid));
                records.push(Record {
                    dir: dir.to_owned(),
                    guid: guid.clone(),
                    name: None,
                    holder: req.holder.clone(),
                    token: None,
                    until: sent + s.granted,
                    delivered: false,
                    size: data.len(),
                    lapsed: false,
                });
                s.client.create(&prefix, &data, &options)
            };
            s.used.store(true, Ordering::Release);
            s.wake.notify_one();
            let forget = || {
                s.records().retain(|r| !(r.dir == dir && r.guid == guid));
            };
            match tokio::time::timeout(self.inner.call_timeout, created).await {
                Ok(Ok((stat, sequence))) => {
                    let name = format!("{}{sequence}", node_prefix(&guid));
                    if let Some(r) = s
                        .records()
                        .iter_mut()
                        .find(|r| r.dir == dir && r.guid == guid)
                    {
                        r.name = Some(name.clone());
                        r.token = Some(token_of(stat.czxid));
                    }
                    return Ok((name, stat.czxid));
                }
                Ok(Err(zk::Error::NoNode)) if attempt == 0 => {
                    forget();
                    self.ensure_path(s, dir).await?;
                }
                // The create may have been applied: its record stays, and
                // the next acquire looks for its node first (the reaper
                // deletes it if none does within the ttl).
                Ok(Err(e @ (zk::Error::ConnectionLoss | zk::Error::Timeout))) => {
                    return Err(zk_error(what(), e));
                }
                Ok(Err(e)) => {
                    forget();
                    return Err(zk_error(what(), e));
                }
                Err(_) => {
                    return Err(StoreError::unavailable(format!(
                        "{}: no answer within {:?}",
                        what(),
                        self.inner.call_timeout
                    )));
                }
            }
        }
        Err(StoreError::new(
            ErrorKind::Protocol,
            format!("{}: the election's node vanished as it was made", what()),
        ))
    }

    /// The node of this session protected by `guid` under `dir`, with its
    /// czxid; a second one (a create retried after its first landed late)
    /// is deleted.
    async fn find_protected(
        &self,
        s: &Session,
        dir: &str,
        guid: &str,
        election: &ElectionName,
    ) -> Result<Option<(String, i64)>, StoreError> {
        let children = match self
            .call(
                || self.what("look for our node in", election),
                s.client.list_children(dir),
            )
            .await
        {
            Ok(c) => c,
            Err(e) if is_no_node(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut mine: Vec<String> = children
            .into_iter()
            .filter(|c| is_protected_by(c, guid))
            .collect();
        sort_children(&mut mine);
        let mut found = None;
        for name in mine {
            let path = format!("{dir}/{name}");
            let stat = self
                .call(
                    || self.what("look for our node in", election),
                    s.client.check_stat(&path),
                )
                .await?;
            let Some(stat) = stat.filter(|st| st.ephemeral_owner == s.id) else {
                continue;
            };
            if found.is_none() {
                found = Some((name, stat.czxid));
            } else {
                tracing::info!(election = %election, node = %path, "zookeeper: deleting a duplicate of our node (a create answered late)");
                let _ = self
                    .call(
                        || self.what("delete a duplicate node in", election),
                        s.client.delete(&path, None),
                    )
                    .await;
            }
        }
        Ok(found)
    }

    /// Renews our node named in `lease`, if it is still ours and its lease
    /// has not lapsed: its lease runs again from this call's send. Returns
    /// its name and czxid, or `None` (lost: gone, lapsed, or not ours).
    pub(crate) async fn refresh(
        &self,
        s: &Session,
        lease: &Lease,
        dir: &str,
    ) -> Result<Option<(String, i64)>, StoreError> {
        let Some((sid, name)) = parse_handle(&lease.handle) else {
            return Ok(None);
        };
        if sid != s.id {
            return Ok(None);
        }
        let path = format!("{dir}/{name}");
        let sent = Instant::now();
        let check = {
            let mut records = s.records();
            let Some(r) = records.iter_mut().find(|r| r.is(dir, name, lease)) else {
                return Ok(None);
            };
            // A lapsed lease is never revived: the reaper deletes its node.
            if r.until <= sent {
                return Ok(None);
            }
            r.until = sent + s.granted;
            // Sent now, before the reaper can send a delete for it.
            s.client.check_stat(&path)
        };
        let stat = self
            .call(|| self.what("renew in", &lease.election), check)
            .await?;
        match stat.filter(|st| st.ephemeral_owner == s.id && token_of(st.czxid) == lease.token) {
            Some(st) => Ok(Some((name.to_owned(), st.czxid))),
            None => {
                s.records().retain(|r| !r.is(dir, name, lease));
                Ok(None)
            }
        }
    }

    /// Renews `lease`'s node `dir/name` of session `s` in the session's
    /// next round (see [`run_rounds`](crate::session::run_rounds)): whether
    /// it is still ours, its lease then running from the round's send. A
    /// lapsed lease is never revived.
    pub(crate) async fn renew_in_round(
        &self,
        s: &Session,
        lease: &Lease,
        dir: String,
        name: &str,
    ) -> Result<bool, StoreError> {
        let (answer, answered) = oneshot::channel();
        lock(&s.waiting).push(Waiting {
            dir,
            name: name.to_owned(),
            lease: lease.clone(),
            answer,
        });
        s.round_wake.notify_one();
        let what = || self.what("renew in", &lease.election);
        match answered.await {
            Ok(Ok(held)) => Ok(held),
            Ok(Err(RoundError::Zk(e @ zk::Error::Unimplemented))) => Err(zk_error(
                format!(
                    "{}: the server does not implement multiRead (ZooKeeper 3.6 or later is \
                     needed)",
                    what()
                ),
                e,
            )),
            Ok(Err(RoundError::Zk(e))) => Err(zk_error(what(), e)),
            Ok(Err(RoundError::NoAnswer)) => Err(StoreError::unavailable(format!(
                "{}: no answer within {:?}",
                what(),
                self.inner.call_timeout
            ))),
            Ok(Err(RoundError::Garbled(why))) => Err(StoreError::new(
                ErrorKind::Protocol,
                format!("{}: {why}", what()),
            )),
            // The session's task ended with the session.
            Err(_) => Ok(false),
        }
    }
}
