//! Giving the lease to a chosen candidate ([`LeaseStore::release_to`]):
//! the line read (the children, then the nodes from ours to the
//! successor's), then one `multi` that deletes our node and the nodes of
//! regent's candidates standing between it and the successor's, each at
//! the version read, and checks the successor's node still stands. A
//! Curator `LeaderLatch` participant's node is never deleted: one between
//! us and the successor makes the hand-over a plain release.
//!
//! [`LeaseStore::release_to`]: regent_core::LeaseStore::release_to

use std::sync::Arc;

use regent_core::store::HandOff;
use regent_core::{HolderId, Lease, LeaseStore, StoreError};
use zookeeper_client as zk;

use crate::client::ZkStore;
use crate::error::{is_no_node, zk_error};
use crate::node::parse_handle;
use crate::record::{candidacy_of, decode, token_of, written_by_regent};
use crate::session::Session;

/// How many nodes the hand-over reads at once (one round trip each).
const READ_BATCH: usize = 64;

/// The most nodes one hand-over takes out of line: a `multi` of them stays
/// well within ZooKeeper's request limit (`jute.maxbuffer`, 1 MiB by
/// default). More is a plain release.
pub(crate) const MAX_TAKEN: usize = 1000;

/// A node of the line as the hand-over read it.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) data: Vec<u8>,
    pub(crate) version: i32,
    pub(crate) czxid: i64,
    pub(crate) owner: i64,
}

/// What a hand-over does: the nodes to take out of line with ours, as
/// read, and the successor's node.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    pub(crate) ours: &'a Node,
    pub(crate) between: Vec<&'a Node>,
    pub(crate) successor: &'a Node,
}

/// Why a hand-over is a plain release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cannot {
    /// Our node is not in the line as this term's.
    NotOurs,
    /// No node of the successor's stands behind ours.
    NoSuccessor,
    /// A node regent did not make stands between ours and the successor's.
    Foreign,
    /// More than [`MAX_TAKEN`] nodes stand between.
    TooMany,
    /// The line moved between the read and the `multi`: a node between
    /// changed or went, or the successor's did, or our own.
    Moved,
}

/// The hand-over of `lease` (whose node is of session `sid`) to
/// `successor`, on `line`: our node first, then the nodes behind it as
/// read, in line order (nodes gone before their read left out). The
/// successor's node is the first behind ours whose holder, as
/// `candidates` shows it, is the successor (a Curator participant's too:
/// it is not deleted, it is the one made next).
pub(crate) fn plan<'a>(
    line: &'a [Node],
    sid: i64,
    lease: &Lease,
    successor: &HolderId,
) -> Result<Plan<'a>, Cannot> {
    let (ours, behind) = line.split_first().ok_or(Cannot::NotOurs)?;
    if ours.owner != sid
        || token_of(ours.czxid) != lease.token
        || decode(&ours.data).is_none_or(|(h, _)| h != lease.holder)
    {
        return Err(Cannot::NotOurs);
    }
    let mut between = Vec::new();
    for n in behind {
        if candidacy_of(&n.name, &n.data).holder == *successor {
            if between.len() > MAX_TAKEN {
                return Err(Cannot::TooMany);
            }
            return Ok(Plan {
                ours,
                between,
                successor: n,
            });
        }
        if !written_by_regent(&n.name, &n.data) {
            return Err(Cannot::Foreign);
        }
        between.push(n);
    }
    Err(Cannot::NoSuccessor)
}

impl ZkStore {
    /// [`LeaseStore::release_to`]: our node handed over as `plan` says, or
    /// released as `release` does.
    pub(crate) async fn hand_over(
        &self,
        lease: &Lease,
        successor: &HolderId,
    ) -> Result<HandOff, StoreError> {
        match self.try_hand_over(lease, successor).await? {
            Ok(taken) => {
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, token = %lease.token,
                    %successor, taken, "zookeeper: handed over"
                );
                Ok(HandOff::ToSuccessor)
            }
            Err(why) => {
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, %successor, ?why,
                    "zookeeper: the lease cannot be handed over; releasing it"
                );
                self.release(lease).await?;
                Ok(HandOff::Released)
            }
        }
    }

    /// The hand-over itself: how many nodes it took out of line with ours,
    /// or why it could not (nothing was deleted then).
    async fn try_hand_over(
        &self,
        lease: &Lease,
        successor: &HolderId,
    ) -> Result<Result<usize, Cannot>, StoreError> {
        let Some((sid, name)) = parse_handle(&lease.handle) else {
            return Ok(Err(Cannot::NotOurs));
        };
        let dir = self.election_path(&lease.election);
        // Our own session's node is ours while this store keeps its record
        // (as `release` checks); another session's (a dead process's, given
        // back by its supervisor) is checked by its node alone.
        let own = self.session_of(sid).await;
        if let Some(s) = &own
            && !s.records().iter().any(|r| r.is(&dir, name, lease))
        {
            return Ok(Err(Cannot::NotOurs));
        }
        let s: Arc<Session> = match &own {
            Some(s) => s.clone(),
            None => self.session(None).await?,
        };
        let what = || self.what("hand over the lease of", &lease.election);
        let children = self.children(&s.client, &lease.election, &dir).await?;
        let Some(at) = children.iter().position(|c| c == name) else {
            return Ok(Err(Cannot::NotOurs));
        };
        // Our node and those behind it, a batch at a time, until the
        // successor's (or a node that ends the look) is read.
        let mut line: Vec<Node> = Vec::new();
        let mut next = at;
        let planned = loop {
            let batch = &children[next..children.len().min(next + READ_BATCH)];
            // The client sends each request as it is made: a batch costs
            // one round trip.
            let reads: Vec<_> = batch
                .iter()
                .map(|c| s.client.get_data(&format!("{dir}/{c}")))
                .collect();
            for (c, read) in batch.iter().zip(reads) {
                match self.call(what, read).await {
                    Ok((data, stat)) => line.push(Node {
                        name: c.clone(),
                        data,
                        version: stat.version,
                        czxid: stat.czxid,
                        owner: stat.ephemeral_owner,
                    }),
                    // Gone already: not in line any more.
                    Err(e) if is_no_node(&e) => {
                        if c == name {
                            return Ok(Err(Cannot::NotOurs));
                        }
                    }
                    Err(_) if own.is_some() && !s.is_alive() => {
                        return Ok(Err(Cannot::NotOurs));
                    }
                    Err(e) => return Err(e),
                }
            }
            next += batch.len();
            match plan(&line, sid, lease, successor) {
                Err(Cannot::NoSuccessor) if next < children.len() => {}
                planned => break planned,
            }
        };
        let plan = match planned {
            Ok(plan) => plan,
            Err(why) => return Ok(Err(why)),
        };
        let path = |n: &Node| format!("{dir}/{}", n.name);
        let mut multi = s.client.new_multi_writer();
        let add = |r: Result<(), zk::Error>| r.map_err(|e| zk_error(what(), e));
        add(multi.add_delete(&path(plan.ours), Some(plan.ours.version)))?;
        for n in &plan.between {
            add(multi.add_delete(&path(n), Some(n.version)))?;
        }
        add(multi.add_check_version(&path(plan.successor), plan.successor.version))?;
        // Our proclaimed metadata first, as `release` does: sent before the
        // multi, so applied before it. Best effort: it is ephemeral too,
        // and a fall back to `release` deletes it again.
        drop(
            s.client
                .delete(&self.meta_path(&lease.election, name), None),
        );
        let committed = tokio::time::timeout(self.inner.call_timeout, multi.commit()).await;
        match committed {
            Ok(Ok(_)) => {}
            // A node changed or went since it was read (or could not be
            // deleted): nothing was applied.
            Ok(Err(zk::MultiWriteError::OperationFailed { .. })) => {
                return Ok(Err(Cannot::Moved));
            }
            Ok(Err(zk::MultiWriteError::RequestFailed { .. }))
                if own.is_some() && !s.is_alive() =>
            {
                // The session ended: ZooKeeper deleted our node with it.
                return Ok(Err(Cannot::NotOurs));
            }
            Ok(Err(zk::MultiWriteError::RequestFailed { source })) => {
                return Err(zk_error(what(), source));
            }
            Err(_) => {
                return Err(StoreError::unavailable(format!(
                    "{}: no answer within {:?}",
                    what(),
                    self.inner.call_timeout
                )));
            }
        }
        if let Some(s) = &own {
            s.records().retain(|r| !r.is(&dir, name, lease));
        }
        // The metadata the candidates taken out of line proclaimed: best
        // effort, as it is ephemeral and read only for a node in line.
        for n in &plan.between {
            drop(
                s.client
                    .delete(&self.meta_path(&lease.election, &n.name), None),
            );
        }
        Ok(Ok(plan.between.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode, new_guid, node_prefix};
    use regent_core::{ElectionName, FencingToken, LeaseHandle, Metadata};

    const SID: i64 = 0x77;

    fn holder(name: &str) -> HolderId {
        HolderId::new(name).unwrap()
    }

    /// regent's node of `who`, created at `czxid`, of session `owner`.
    fn regent(who: &str, czxid: i64, owner: i64) -> Node {
        Node {
            name: format!("{}{czxid:010}", node_prefix(&new_guid())),
            data: encode(&holder(who), &Metadata::new()),
            version: 0,
            czxid,
            owner,
        }
    }

    /// A Curator `LeaderLatch` participant's node.
    fn curator(id: &str, czxid: i64) -> Node {
        Node {
            name: format!("_c_2f3a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b-latch-{czxid:010}"),
            data: id.as_bytes().to_vec(),
            version: 0,
            czxid,
            owner: 0x99,
        }
    }

    fn lease_of(n: &Node, who: &str) -> Lease {
        Lease {
            election: ElectionName::new("e").unwrap(),
            holder: holder(who),
            token: FencingToken::new(u64::try_from(n.czxid).unwrap()),
            ttl: std::time::Duration::from_secs(1),
            handle: LeaseHandle::new(format!("{SID:x}/{}", n.name)),
        }
    }

    #[test]
    fn regent_s_nodes_between_ours_and_the_successors_first_are_taken() {
        let line = [
            regent("a", 10, SID),
            regent("b", 11, 0x55),
            regent("c", 12, SID),
            regent("d", 13, 0x56),
            regent("d", 14, 0x57),
        ];
        let a = lease_of(&line[0], "a");
        let p = plan(&line, SID, &a, &holder("d")).unwrap();
        let taken: Vec<i64> = p.between.iter().map(|n| n.czxid).collect();
        assert_eq!(taken, [11, 12]);
        assert_eq!(p.successor.czxid, 13);
        let p = plan(&line, SID, &a, &holder("b")).unwrap();
        assert!(p.between.is_empty());
        assert_eq!(
            plan(&line, SID, &a, &holder("z")).unwrap_err(),
            Cannot::NoSuccessor
        );
    }

    #[test]
    fn a_curator_participant_between_is_never_taken() {
        // Its id is a valid holder id and its data the bare id, as regent
        // writes a holder without metadata: only its GUID tells.
        let line = [
            regent("a", 10, SID),
            regent("b", 11, 0x55),
            curator("curator-1", 12),
            regent("d", 13, 0x56),
        ];
        let a = lease_of(&line[0], "a");
        assert_eq!(
            plan(&line, SID, &a, &holder("d")).unwrap_err(),
            Cannot::Foreign
        );
        // It may be the successor: made next, and kept.
        let p = plan(&line, SID, &a, &holder("curator-1")).unwrap();
        assert_eq!(p.between.len(), 1);
        assert_eq!(p.successor.czxid, 12);
    }

    #[test]
    fn a_node_not_this_terms_is_not_ours_to_give() {
        let line = [regent("a", 10, SID), regent("b", 11, 0x55)];
        let a = lease_of(&line[0], "a");
        assert_eq!(
            plan(&line, 0x12, &a, &holder("b")).unwrap_err(),
            Cannot::NotOurs
        );
        let mut other = a.clone();
        other.token = FencingToken::new(9);
        assert_eq!(
            plan(&line, SID, &other, &holder("b")).unwrap_err(),
            Cannot::NotOurs
        );
        let z = lease_of(&line[0], "z");
        assert_eq!(
            plan(&line, SID, &z, &holder("b")).unwrap_err(),
            Cannot::NotOurs
        );
        assert_eq!(
            plan(&[], SID, &a, &holder("b")).unwrap_err(),
            Cannot::NotOurs
        );
    }

    #[test]
    fn too_many_nodes_between_is_a_plain_release() {
        let mut line = vec![regent("a", 10, SID)];
        for i in 0..=i64::try_from(MAX_TAKEN).unwrap() {
            line.push(regent("x", 11 + i, 0x55));
        }
        line.push(regent("d", 5000, 0x56));
        let a = lease_of(&line[0], "a");
        assert_eq!(
            plan(&line, SID, &a, &holder("d")).unwrap_err(),
            Cannot::TooMany
        );
        line.remove(1);
        assert_eq!(
            plan(&line, SID, &a, &holder("d")).unwrap().between.len(),
            MAX_TAKEN
        );
    }
}
