//! The transport's view query, under algorithm byte 0
//! ([`CONTROL_ALGORITHM`]): the [`Control`] frames QUERY and VIEW, the
//! [`PeerView`] a VIEW carries, and their bodies on the wire.

use std::time::Duration;

use regent_core::{ElectionName, FencingToken};

use super::wire::{DecodeError, Reader, Wire, put, unknown_kind};
use crate::algorithm::Algorithm;
use crate::epoch::{Epoch, Leader, NodeId};

/// The algorithm byte of the transport's view query ([`Control`]): no
/// algorithm uses it, and every node reads it.
pub const CONTROL_ALGORITHM: u8 = 0;

/// A frame of the transport's view query, under the algorithm byte
/// [`CONTROL_ALGORITHM`] (see the module docs for the layout).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Control {
    /// QUERY (kind 1): "send me your view". The node answers each with
    /// one VIEW on the same connection.
    Query {
        /// Answer once the view differs from the last one sent on this
        /// connection, or after `wait`, whichever comes first; the first
        /// query of a connection, and a zero `wait`, are answered at once.
        /// Whole milliseconds on the wire, at most `u32::MAX`; the node
        /// caps it (`net::MAX_QUERY_WAIT`, 30 s).
        wait: Duration,
    },
    /// VIEW (kind 2): the answer to one QUERY.
    View {
        /// The `seq` of the QUERY this answers: a querier takes no other
        /// (so a recorded answer cannot be passed off as a fresh one).
        query_seq: u64,
        /// The node's view.
        view: PeerView,
    },
}

/// A node's view of its group, as it answers a view query: who leads as
/// it sees it, whether it leads, and what it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerView {
    /// The answering node's id.
    pub node: NodeId,
    /// The name of the election the group runs (`regent peer --election`).
    pub election: ElectionName,
    /// The algorithm the group elects with.
    pub algorithm: Algorithm,
    /// Whether the group runs in quorum mode ([`Quorum`](crate::Quorum)).
    pub quorum: bool,
    /// How many members the group has, this node included.
    pub members: u32,
    /// The leader as this node sees it, with the epoch of its term; `None`
    /// while it knows of none.
    pub leader: Option<Leader>,
    /// The fencing token of the term this node leads, if it leads.
    pub leading: Option<FencingToken>,
    /// In quorum mode, while this node leads: how long its lease had to run
    /// when it answered (to microseconds).
    pub lease_remaining: Option<Duration>,
    /// The node is stopping: it leads nothing and knows no leader.
    pub stopped: bool,
}

impl PeerView {
    /// The view of a running node that knows no leader: not in quorum
    /// mode, no members counted; set the public fields for the rest.
    pub fn new(node: NodeId, election: ElectionName, algorithm: Algorithm) -> Self {
        Self {
            node,
            election,
            algorithm,
            quorum: false,
            members: 0,
            leader: None,
            leading: None,
            lease_remaining: None,
            stopped: false,
        }
    }
}

pub(super) const KIND_QUERY: u8 = 1;
pub(super) const KIND_VIEW: u8 = 2;
const FLAG_LEADER: u8 = 1;
const FLAG_LEADING: u8 = 2;
const FLAG_LEASE: u8 = 4;
const FLAG_STOPPED: u8 = 8;

impl Wire for Control {
    const ALGORITHM: u8 = CONTROL_ALGORITHM;

    fn encode_body(&self, out: &mut Vec<u8>) -> u8 {
        match self {
            Control::Query { wait } => {
                let ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX);
                out.extend_from_slice(&ms.to_be_bytes());
                KIND_QUERY
            }
            Control::View { query_seq, view } => {
                put(out, *query_seq);
                put(out, view.node.get());
                out.push(view.algorithm.wire(view.quorum));
                let flags = [
                    (view.leader.is_some(), FLAG_LEADER),
                    (view.leading.is_some(), FLAG_LEADING),
                    (view.lease_remaining.is_some(), FLAG_LEASE),
                    (view.stopped, FLAG_STOPPED),
                ]
                .iter()
                .filter(|(set, _)| *set)
                .fold(0, |flags, (_, bit)| flags | bit);
                out.push(flags);
                let (id, epoch) = view.leader.map_or((0, 0), |l| (l.id.get(), l.epoch.get()));
                put(out, id);
                put(out, epoch);
                put(out, view.leading.map_or(0, FencingToken::get));
                let lease = view
                    .lease_remaining
                    .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
                put(out, lease);
                out.extend_from_slice(&view.members.to_be_bytes());
                // An ElectionName is at most 128 bytes: the length fits.
                let name = view.election.as_str().as_bytes();
                out.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
                out.extend_from_slice(name);
                KIND_VIEW
            }
        }
    }

    fn decode_body(kind: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let malformed = |what| DecodeError::Malformed { what };
        match kind {
            KIND_QUERY => Ok(Control::Query {
                wait: Duration::from_millis(u64::from(r.u32()?)),
            }),
            KIND_VIEW => {
                let query_seq = r.u64()?;
                let node = r.id()?;
                let (algorithm, quorum) =
                    Algorithm::from_wire(r.u8()?).ok_or_else(|| malformed("unknown algorithm"))?;
                let flags = r.u8()?;
                if flags & !(FLAG_LEADER | FLAG_LEADING | FLAG_LEASE | FLAG_STOPPED) != 0 {
                    return Err(malformed("unknown view flags"));
                }
                // A field whose flag is not set must be zero, so that one
                // view has one encoding.
                let field = |r: &mut Reader<'_>, flag: u8| -> Result<Option<u64>, DecodeError> {
                    let v = r.u64()?;
                    match (flags & flag != 0, v) {
                        (true, v) => Ok(Some(v)),
                        (false, 0) => Ok(None),
                        (false, _) => Err(malformed("a view field set without its flag")),
                    }
                };
                let leader_id = field(r, FLAG_LEADER)?;
                let leader_epoch = field(r, FLAG_LEADER)?;
                let leading = field(r, FLAG_LEADING)?.map(FencingToken::new);
                let lease_remaining = field(r, FLAG_LEASE)?.map(Duration::from_micros);
                let leader = leader_id.zip(leader_epoch).map(|(id, epoch)| Leader {
                    id: NodeId(id),
                    epoch: Epoch::from_raw(epoch),
                });
                let members = r.u32()?;
                let len = usize::from(r.u8()?);
                let name = r.bytes(len)?;
                let election = std::str::from_utf8(name)
                    .ok()
                    .and_then(|n| ElectionName::new(n).ok())
                    .ok_or_else(|| malformed("the election name is not a valid one"))?;
                Ok(Control::View {
                    query_seq,
                    view: PeerView {
                        node,
                        election,
                        algorithm,
                        quorum,
                        members,
                        leader,
                        leading,
                        lease_remaining,
                        stopped: flags & FLAG_STOPPED != 0,
                    },
                })
            }
            _ => Err(unknown_kind()),
        }
    }
}
