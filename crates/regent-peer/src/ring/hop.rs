//! One hop of a ring message: the ELECTION or COORDINATOR without its hop
//! number ([`Body`]), and a hop sent and not yet acknowledged
//! ([`Pending`]), which ring repair sends on to the next member when its
//! ACK does not come.

use tokio::time::Instant;

use super::message::{ElectionId, Message};
use crate::epoch::{Epoch, NodeId};

/// A ring message without its hop number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Body {
    Election {
        initiator: NodeId,
        election: ElectionId,
        epoch: Epoch,
        ids: Vec<NodeId>,
    },
    Coordinator {
        initiator: NodeId,
        leader: NodeId,
        epoch: Epoch,
    },
}

impl Body {
    pub(super) fn with_hop(&self, hop: u64) -> Message {
        match self.clone() {
            Body::Election {
                initiator,
                election,
                epoch,
                ids,
            } => Message::Election {
                initiator,
                election,
                epoch,
                ids,
                hop,
            },
            Body::Coordinator {
                initiator,
                leader,
                epoch,
            } => Message::Coordinator {
                initiator,
                leader,
                epoch,
                hop,
            },
        }
    }
}

/// A ring message sent and not yet acknowledged.
#[derive(Clone, Debug)]
pub(super) struct Pending {
    pub(super) hop: u64,
    pub(super) to: NodeId,
    /// How far round the ring `to` is: 1 for the successor.
    pub(super) step: usize,
    pub(super) body: Body,
    pub(super) deadline: Instant,
}
