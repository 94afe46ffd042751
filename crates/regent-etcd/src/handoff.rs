//! Giving the lease to a chosen candidate ([`LeaseStore::release_to`]):
//! one read of the line, then one transaction that deletes our key and the
//! keys of regent's candidates standing between it and the successor's, so
//! that the successor's key is next. A foreign key (`etcdctl elect`, Go's
//! `concurrency.Election`) is never deleted: one between us and the
//! successor makes the hand-over a plain release.
//!
//! [`LeaseStore::release_to`]: regent_core::LeaseStore::release_to

use etcd_client::{Compare, CompareOp, KeyValue, Txn, TxnOp};
use regent_core::store::HandOff;
use regent_core::{HolderId, Lease, LeaseStore, StoreError};

use crate::client::EtcdStore;
use crate::error::is_too_many_ops;
use crate::record::{candidate_key, decode, leader_of, parse_lease_hex};
use crate::store::own_compares;

/// The most keys one hand-over takes out of line. etcd refuses a
/// transaction with more compares, or more operations, than its
/// `--max-txn-ops` (128 by default); with our key's four compares and the
/// successor's one, 120 keys between stay within the default. More is a
/// plain release (and so is a server whose limit is lower: its refusal).
pub(crate) const MAX_TAKEN: usize = 120;

/// One key of the line, as the hand-over reads it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Key<'a> {
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
    pub(crate) lease: i64,
    pub(crate) create_revision: i64,
    pub(crate) mod_revision: i64,
}

impl<'a> Key<'a> {
    fn of(kv: &'a KeyValue) -> Self {
        Self {
            key: kv.key(),
            value: kv.value(),
            lease: kv.lease(),
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
        }
    }
}

/// What a hand-over does: the keys to take out of line with ours, as read,
/// and the successor's key.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    pub(crate) between: Vec<Key<'a>>,
    pub(crate) successor: Key<'a>,
}

/// Why a hand-over is a plain release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cannot {
    /// Our key is not in the line as this term's.
    NotOurs,
    /// No key of the successor's stands behind ours.
    NoSuccessor,
    /// A key regent did not write stands between ours and the successor's.
    Foreign,
    /// More than [`MAX_TAKEN`] keys stand between.
    TooMany,
}

/// The hand-over of `lease` (our key `key`, token `token`, etcd lease `id`)
/// to `successor`, on `line` (every key, in create-revision order): our
/// key, then the keys behind it up to the successor's first, all regent's.
/// The successor's key is the first behind ours whose holder, as
/// `candidates` shows it, is the successor (a foreign candidate's derived
/// holder too: it is not deleted, it is the one made next).
pub(crate) fn plan<'a>(
    line: &[Key<'a>],
    key: &[u8],
    token: i64,
    id: i64,
    lease: &Lease,
    successor: &HolderId,
) -> Result<Plan<'a>, Cannot> {
    let ours = line
        .iter()
        .position(|k| {
            k.key == key
                && k.create_revision == token
                && k.lease == id
                && decode(k.value).is_some_and(|(h, _)| h == lease.holder)
        })
        .ok_or(Cannot::NotOurs)?;
    let mut between = Vec::new();
    for k in &line[ours + 1..] {
        if leader_of(k.key, k.value, k.lease, k.create_revision).holder == *successor {
            return if between.len() > MAX_TAKEN {
                Err(Cannot::TooMany)
            } else {
                Ok(Plan {
                    between,
                    successor: *k,
                })
            };
        }
        if decode(k.value).is_none() {
            return Err(Cannot::Foreign);
        }
        between.push(*k);
    }
    Err(Cannot::NoSuccessor)
}

impl EtcdStore {
    /// [`LeaseStore::release_to`]: the line read once, then one
    /// transaction: *if* our key is still this term's (as `release`
    /// checks), each key between is as read (its mod revision) and the
    /// successor's key is still there (its create revision), *then* delete
    /// our key and the keys between. Anything else is a plain `release`.
    pub(crate) async fn hand_over(
        &self,
        lease: &Lease,
        successor: &HolderId,
    ) -> Result<HandOff, StoreError> {
        let (Some(id), Ok(token)) = (
            parse_lease_hex(lease.handle.as_str()),
            i64::try_from(lease.token.get()),
        ) else {
            // No key of ours can be named by it: nothing to give.
            self.release(lease).await?;
            return Ok(HandOff::Released);
        };
        let (kvs, _) = self
            .read_keys(&lease.election, "hand over the lease", 0, false)
            .await?;
        let line: Vec<Key<'_>> = kvs.iter().map(Key::of).collect();
        let key = candidate_key(&self.election_prefix(&lease.election), id);
        let plan = match plan(&line, key.as_bytes(), token, id, lease, successor) {
            Ok(plan) => plan,
            Err(why) => {
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, %successor, ?why,
                    "etcd: the lease cannot be handed over; releasing it"
                );
                self.release(lease).await?;
                return Ok(HandOff::Released);
            }
        };
        let mut when = own_compares(&key, token, id, lease);
        let mut then = vec![TxnOp::delete(key, None)];
        for k in &plan.between {
            when.push(Compare::mod_revision(
                k.key,
                CompareOp::Equal,
                k.mod_revision,
            ));
            then.push(TxnOp::delete(k.key, None));
        }
        when.push(Compare::create_revision(
            plan.successor.key,
            CompareOp::Equal,
            plan.successor.create_revision,
        ));
        let txn = Txn::new().when(when).and_then(then);
        let what = || {
            format!(
                "hand over election '{}' by '{}' to '{successor}'",
                lease.election, lease.holder
            )
        };
        let mut client = self.client.clone();
        let resp = match self.call(&lease.election, what, client.txn(txn)).await {
            Ok(resp) => resp,
            Err(e) if is_too_many_ops(&e) => {
                // A server whose --max-txn-ops is below ours.
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, error = %e,
                    "etcd: the hand-over's transaction is too big for this server; releasing"
                );
                self.release(lease).await?;
                return Ok(HandOff::Released);
            }
            Err(e) => return Err(e),
        };
        if !resp.succeeded() {
            // Our key is not ours any more, or the line moved since it was
            // read (a key between changed or went, the successor's went).
            tracing::debug!(
                election = %lease.election, holder = %lease.holder, %successor,
                "etcd: the line moved under the hand-over; releasing"
            );
            self.release(lease).await?;
            return Ok(HandOff::Released);
        }
        self.released(lease, id, true);
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            %successor, taken = plan.between.len(), "etcd: handed over"
        );
        Ok(HandOff::ToSuccessor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::encode;
    use regent_core::{ElectionName, FencingToken, LeaseHandle, Metadata};

    fn lease(holder: &str, token: i64, id: i64) -> Lease {
        Lease {
            election: ElectionName::new("e").unwrap(),
            holder: HolderId::new(holder).unwrap(),
            token: FencingToken::new(u64::try_from(token).unwrap()),
            ttl: std::time::Duration::from_secs(1),
            handle: LeaseHandle::new(crate::record::lease_hex(id)),
        }
    }

    struct Owned {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
        revision: i64,
    }

    /// A key of lease `id`, created at `revision`, holding `value`.
    fn owned(id: i64, revision: i64, value: Vec<u8>) -> Owned {
        Owned {
            key: candidate_key("e/", id).into_bytes(),
            value,
            lease: id,
            revision,
        }
    }

    fn regent(id: i64, revision: i64, holder: &str) -> Owned {
        owned(
            id,
            revision,
            encode(&HolderId::new(holder).unwrap(), &Metadata::new()),
        )
    }

    fn keys(owned: &[Owned]) -> Vec<Key<'_>> {
        owned
            .iter()
            .map(|o| Key {
                key: &o.key,
                value: &o.value,
                lease: o.lease,
                create_revision: o.revision,
                mod_revision: o.revision,
            })
            .collect()
    }

    fn holder(name: &str) -> HolderId {
        HolderId::new(name).unwrap()
    }

    #[test]
    fn the_keys_between_ours_and_the_successors_first_are_taken() {
        let line = [
            regent(1, 10, "a"),
            regent(2, 11, "b"),
            regent(3, 12, "c"),
            regent(4, 13, "d"),
            regent(5, 14, "d"),
        ];
        let line = keys(&line);
        let a = lease("a", 10, 1);
        let p = plan(&line, b"e/1", 10, 1, &a, &holder("d")).unwrap();
        let taken: Vec<i64> = p.between.iter().map(|k| k.lease).collect();
        assert_eq!(taken, [2, 3]);
        assert_eq!(p.successor.lease, 4);
        // The next in line already: nothing between.
        let p = plan(&line, b"e/1", 10, 1, &a, &holder("b")).unwrap();
        assert!(p.between.is_empty());
        assert_eq!(p.successor.lease, 2);
    }

    #[test]
    fn a_foreign_key_between_or_no_successor_behind_is_a_plain_release() {
        let line = [
            regent(2, 9, "d"),
            regent(1, 10, "a"),
            regent(3, 11, "b"),
            owned(4, 12, b"etcdctl-host".to_vec()),
            regent(5, 13, "c"),
        ];
        let line = keys(&line);
        let a = lease("a", 10, 1);
        assert_eq!(
            plan(&line, b"e/1", 10, 1, &a, &holder("c")).unwrap_err(),
            Cannot::Foreign
        );
        // d stands before us, not behind.
        let regent_only = [regent(2, 9, "d"), regent(1, 10, "a"), regent(3, 11, "b")];
        let regent_only = keys(&regent_only);
        assert_eq!(
            plan(&regent_only, b"e/1", 10, 1, &a, &holder("d")).unwrap_err(),
            Cannot::NoSuccessor
        );
        // A foreign candidate may be the successor: it is made next, and
        // kept.
        let p = plan(&line, b"e/1", 10, 1, &a, &holder("etcdctl-host")).unwrap();
        assert_eq!(p.between.len(), 1);
        assert_eq!(p.successor.lease, 4);
    }

    #[test]
    fn a_key_not_this_terms_is_not_ours_to_give() {
        let line = [regent(1, 10, "a"), regent(2, 11, "b")];
        let line = keys(&line);
        for (key, token, id, who) in [
            (&b"e/1"[..], 9, 1, "a"),
            (b"e/1", 10, 7, "a"),
            (b"e/1", 10, 1, "z"),
            (b"e/9", 10, 1, "a"),
        ] {
            let l = lease(who, token, id);
            assert_eq!(
                plan(&line, key, token, id, &l, &holder("b")).unwrap_err(),
                Cannot::NotOurs,
                "{token} {id} {who}"
            );
        }
    }

    #[test]
    fn too_many_keys_between_is_a_plain_release() {
        let mut line = vec![regent(1, 10, "a")];
        for i in 0..=i64::try_from(MAX_TAKEN).unwrap() {
            line.push(regent(100 + i, 11 + i, "x"));
        }
        line.push(regent(2, 1000, "d"));
        let line_keys = keys(&line);
        let a = lease("a", 10, 1);
        assert_eq!(
            plan(&line_keys, b"e/1", 10, 1, &a, &holder("d")).unwrap_err(),
            Cannot::TooMany
        );
        line.remove(1);
        let line_keys = keys(&line);
        assert_eq!(
            plan(&line_keys, b"e/1", 10, 1, &a, &holder("d"))
                .unwrap()
                .between
                .len(),
            MAX_TAKEN
        );
    }
}
