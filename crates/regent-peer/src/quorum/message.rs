//! Quorum mode's messages ([`Message`]): the inner algorithm's, wrapped,
//! and the lease's ASK and GRANT, with the [`AskId`] that names one ask of
//! one life of a node.

use std::time::Duration;

use crate::epoch::Epoch;
use crate::machine::PeerMessage;

/// Names one lease request of one node: the node's incarnation
/// ([`ConfigBuilder::incarnation`](crate::ConfigBuilder::incarnation)) and
/// its count of requests in that incarnation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AskId {
    /// The asker's incarnation.
    pub incarnation: u64,
    /// The asker's count of requests since it started.
    pub number: u64,
}

/// A message of a node in quorum mode: the inner algorithm's, or the
/// lease's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message<M> {
    /// A message of the inner algorithm, unchanged.
    Inner(M),
    /// "Grant me the lease": from a node whose inner algorithm leads, to
    /// every other member, each heartbeat interval.
    Ask {
        /// The asker's term.
        epoch: Epoch,
        /// Which request this is, echoed in the GRANT.
        id: AskId,
    },
    /// "Granted: I promise no other node for `lease` from when I got your
    /// ask": the answer to an ASK.
    Grant {
        /// The term of the ask.
        epoch: Epoch,
        /// The ask granted.
        id: AskId,
        /// How long the promise lasts on the granter's clock: its
        /// configured [`Config::lease`](crate::Config::lease). At most
        /// [`MAX_DURATION`](crate::MAX_DURATION) on the wire.
        lease: Duration,
    },
}

impl<M: PeerMessage> PeerMessage for Message<M> {
    fn kind(&self) -> &'static str {
        match self {
            Message::Inner(m) => m.kind(),
            Message::Ask { .. } => "ASK",
            Message::Grant { .. } => "GRANT",
        }
    }
}
