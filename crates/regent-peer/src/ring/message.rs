//! Ring's messages as they travel ([`Message`]), and the [`ElectionId`]
//! that names one election of one initiator.

use crate::epoch::{Epoch, NodeId};
use crate::machine::PeerMessage;

/// Ring's messages.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// An election on its way round, collecting ids.
    Election {
        /// The node that started it.
        initiator: NodeId,
        /// Which of the initiator's elections this is.
        election: ElectionId,
        /// The highest max epoch of the nodes it has passed.
        epoch: Epoch,
        /// The ids collected so far, the initiator first.
        ids: Vec<NodeId>,
        /// The sender's number for this hop, echoed in the ACK.
        hop: u64,
    },
    /// The result on its way round.
    Coordinator {
        /// The node that started the election.
        initiator: NodeId,
        /// The new leader: the highest id collected.
        leader: NodeId,
        /// The leader's term (it carries the leader's rank).
        epoch: Epoch,
        /// The sender's number for this hop, echoed in the ACK.
        hop: u64,
    },
    /// "I got hop `hop`": to the sender of an ELECTION or COORDINATOR.
    Ack {
        /// The hop acknowledged.
        hop: u64,
    },
    /// "I still lead": from the leader to every other member.
    Heartbeat {
        /// The leader's term.
        epoch: Epoch,
    },
    /// "Your term is older than what I have seen": the answer to a stale
    /// HEARTBEAT.
    Stale {
        /// The receiver's max epoch.
        epoch: Epoch,
    },
}

impl PeerMessage for Message {
    fn kind(&self) -> &'static str {
        match self {
            Message::Election { .. } => "ELECTION",
            Message::Coordinator { .. } => "COORDINATOR",
            Message::Ack { .. } => "ACK",
            Message::Heartbeat { .. } => "HEARTBEAT",
            Message::Stale { .. } => "STALE",
        }
    }
}

/// Names one election of one initiator: the initiator's incarnation
/// ([`ConfigBuilder::incarnation`](crate::ConfigBuilder::incarnation)) and
/// its count of elections in that incarnation. The incarnation keeps a
/// restarted node's new elections apart from the copies of its earlier ones
/// that other nodes still remember.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ElectionId {
    /// The initiator's incarnation.
    pub incarnation: u64,
    /// The initiator's count of elections since it started.
    pub number: u64,
}
