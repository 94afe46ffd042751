//! Taking a place in an election's line: our key put under our lease (or
//! found as we left it) and the head read, in one transaction, then the
//! answer, won or held by the head. A lease granted for an acquire stays
//! listed as undelivered until the acquire returns it.

use std::time::Duration;

use tokio::time::Instant;

use etcd_client::{
    Compare, CompareOp, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget, Txn, TxnOp,
    TxnOpResponse,
};
use regent_core::store::shared::{Forgot, SessionBackend, SessionKey};
use regent_core::{Acquire, AcquireRequest, FencingToken, Lease, LeaseHandle, StoreError};

use crate::client::{EtcdStore, Undelivered};
use crate::error::protocol;
use crate::record::{candidate_key, encode, leader_of, lease_hex};

/// What `place` expects to find at our key.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Expected {
    /// Nothing: a lease just granted.
    Fresh,
    /// The key we queued, with this create revision.
    Queued(i64),
    /// Whatever our lease made (an acquire that never returned).
    Adopt,
}

/// What a read-only look found of a queued place: see
/// [`EtcdStore::still_placed`].
pub(crate) enum Still {
    /// Our key as we left it, and the head.
    Placed(Placed),
    /// Our key is there, but not as we left it (new metadata, another
    /// create revision or lease).
    Changed,
    /// No key: it was deleted (from outside, or taken out of line by a
    /// leader's hand-over) while its lease lives.
    Gone,
}

/// Our own key, as a transaction found it.
pub(crate) struct Placed {
    token: i64,
    head: Option<KeyValue>,
}

impl EtcdStore {
    fn head_options() -> GetOptions {
        GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1)
    }

    /// Makes sure our key exists under `lease`, then reads the head of the
    /// line, in one transaction. `expected` says what may be there already.
    async fn place(
        &self,
        req: &AcquireRequest,
        prefix: &str,
        lease: i64,
        expected: Expected,
    ) -> Result<Placed, StoreError> {
        let key = candidate_key(prefix, lease);
        let value = encode(&req.holder, &req.metadata);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(
                    key.clone(),
                    value.clone(),
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::get(prefix, Some(Self::head_options())),
            ])
            .or_else([
                TxnOp::get(key.clone(), None),
                TxnOp::get(prefix, Some(Self::head_options())),
            ]);
        let what = || format!("acquire election '{}' by '{}'", req.election, req.holder);
        let mut client = self.client.clone();
        let resp = self.call(&req.election, what, client.txn(txn)).await?;
        let mut ops = resp.op_responses().into_iter();
        let (first, second) = (ops.next(), ops.next());
        let Some(TxnOpResponse::Get(mut head)) = second else {
            return Err(protocol(
                what(),
                "the transaction answered without its range",
            ));
        };
        let head = head.take_kvs().into_iter().next();
        if resp.succeeded() {
            let token = resp.header().map(|h| h.revision()).unwrap_or(0);
            if token <= 0 {
                return Err(protocol(
                    what(),
                    "the transaction answered without a revision",
                ));
            }
            return Ok(Placed { token, head });
        }
        let Some(TxnOpResponse::Get(mut mine)) = first else {
            return Err(protocol(what(), "the transaction answered without our key"));
        };
        let Some(mine) = mine.take_kvs().into_iter().next() else {
            return Err(protocol(what(), "our key neither exists nor was created"));
        };
        let ours = mine.lease() == lease
            && match expected {
                Expected::Fresh => false,
                Expected::Queued(revision) => revision == mine.create_revision(),
                Expected::Adopt => true,
            };
        if !ours {
            return Err(StoreError::corrupt(format!(
                "{}: key '{key}' under our lease {} was not written by this candidate \
                 (create revision {}, lease {})",
                what(),
                lease_hex(lease),
                mine.create_revision(),
                lease_hex(mine.lease())
            )));
        }
        if mine.value() != value.as_slice() {
            // New metadata: proclaim it, as Go's Campaign does, only if the
            // key is still the one we queued.
            let token = mine.create_revision();
            let txn = Txn::new()
                .when([Compare::create_revision(
                    key.clone(),
                    CompareOp::Equal,
                    token,
                )])
                .and_then([TxnOp::put(
                    key.clone(),
                    value,
                    Some(PutOptions::new().with_lease(lease)),
                )]);
            let mut client = self.client.clone();
            self.call(&req.election, what, client.txn(txn)).await?;
        }
        Ok(Placed {
            token: mine.create_revision(),
            head,
        })
    }

    /// A queued place that is still as we left it, read without a write:
    /// our key with its create revision `token`, our lease and our value,
    /// and the head of the line, in one read-only transaction (a
    /// linearizable read, no raft entry and no fsync). When the key is not
    /// exactly ours any more ([`Still::Changed`]) or is gone
    /// ([`Still::Gone`]), `place` decides, with a write.
    ///
    /// This is what a follower does when its watch says that the line
    /// moved, so it is on every graceful hand-over's path: the write
    /// `place` makes costs etcd a raft round and an fsync.
    pub(crate) async fn still_placed(
        &self,
        req: &AcquireRequest,
        prefix: &str,
        lease: i64,
        token: i64,
    ) -> Result<Still, StoreError> {
        let key = candidate_key(prefix, lease);
        let txn = Txn::new().and_then([
            TxnOp::get(key, None),
            TxnOp::get(prefix, Some(Self::head_options())),
        ]);
        let what = || format!("acquire election '{}' by '{}'", req.election, req.holder);
        let mut client = self.client.clone();
        let resp = self.call(&req.election, what, client.txn(txn)).await?;
        let mut ops = resp.op_responses().into_iter();
        let (Some(TxnOpResponse::Get(mut mine)), Some(TxnOpResponse::Get(mut head))) =
            (ops.next(), ops.next())
        else {
            return Err(protocol(
                what(),
                "the transaction answered without its ranges",
            ));
        };
        let value = encode(&req.holder, &req.metadata);
        let Some(mine) = mine.take_kvs().into_iter().next() else {
            return Ok(Still::Gone);
        };
        if mine.lease() == lease && mine.create_revision() == token && mine.value() == value {
            Ok(Still::Placed(Placed {
                token,
                head: head.take_kvs().into_iter().next(),
            }))
        } else {
            Ok(Still::Changed)
        }
    }

    /// Queues (or finds) our key under `lease` and answers won or held.
    pub(crate) async fn campaign(
        &self,
        req: &AcquireRequest,
        lease: i64,
        ttl: Duration,
        expected: Expected,
    ) -> Result<Acquire, StoreError> {
        let prefix = self.election_prefix(&req.election);
        let placed = self.place(req, &prefix, lease, expected).await?;
        self.answer(req, &prefix, lease, ttl, placed)
    }

    /// Won if our key heads the line, else held by the head.
    pub(crate) fn answer(
        &self,
        req: &AcquireRequest,
        prefix: &str,
        lease: i64,
        ttl: Duration,
        placed: Placed,
    ) -> Result<Acquire, StoreError> {
        let mine = Lease {
            election: req.election.clone(),
            holder: req.holder.clone(),
            token: FencingToken::new(u64::try_from(placed.token).unwrap_or(0)),
            ttl,
            handle: LeaseHandle::new(lease_hex(lease)),
        };
        let key = candidate_key(prefix, lease);
        match placed.head {
            Some(head) if head.key() == key.as_bytes() => {
                tracing::debug!(
                    election = %req.election, holder = %req.holder, token = placed.token,
                    "etcd: first in line"
                );
                Ok(Acquire::Won(mine))
            }
            Some(head) => Ok(Acquire::Held {
                leader: Some(leader_of(
                    head.key(),
                    head.value(),
                    head.lease(),
                    head.create_revision(),
                )),
                queued: Some(mine),
            }),
            None => Err(protocol(
                format!("acquire election '{}'", req.election),
                "the election is empty right after our key was written",
            )),
        }
    }

    /// Campaigns with the lease of `u`, kept alive from `sent`, which stays
    /// listed as undelivered until the answer is returned: an acquire given
    /// up on meanwhile leaves it for the holder's next acquire to take.
    pub(crate) async fn campaign_delivered(
        &self,
        req: &AcquireRequest,
        u: Undelivered,
        expected: Expected,
        sent: Instant,
    ) -> Result<Acquire, StoreError> {
        let id = u.lease;
        let ttl = u.ttl;
        self.undelivered().push(u);
        let result = self.campaign(req, id, ttl, expected).await;
        // Nothing awaits after this on success: the caller gets the lease.
        self.undelivered()
            .retain(|u| u.lease != id || u.election != req.election);
        match &result {
            Ok(a) => self.note_placed(id, req, a, sent),
            Err(_) => {
                // Don't leave a key queued that nobody will renew: delete
                // whatever this lease put under our key (other elections
                // may share the lease).
                let ours = SessionKey {
                    election: req.election.clone(),
                    holder: req.holder.clone(),
                    token: None,
                };
                if self.drop_key(&id, &ours).await.is_ok()
                    && self
                        .sessions
                        .forget(&id, &req.election, None, Some(&req.holder))
                        == Forgot::Emptied
                {
                    self.revoke_in_background(id, &req.election);
                }
            }
        }
        result
    }
}
