//! What a simulation records and reports: messages counted by kind
//! ([`Counts`]), stretches of leadership ([`Tenure`]), epochs claimed twice
//! ([`Conflict`]), claims that went back ([`Regression`]), and how
//! agreement went after the faults ([`Settled`]).

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::epoch::{Epoch, Leader, NodeId};

/// Messages sent by the machines, by kind ([`PeerMessage::kind`](crate::PeerMessage::kind)). A send
/// counts once whatever the network does to it (lost, duplicated, or to a
/// crashed node).
pub type Counts = BTreeMap<&'static str, u64>;

/// One stretch of simulated time in which one node held leadership: see
/// [`Sim::tenures`](crate::sim::Sim::tenures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tenure {
    /// The leader.
    pub node: NodeId,
    /// Its term.
    pub epoch: Epoch,
    /// When it began, since the start.
    pub from: Duration,
    /// When it ended (exclusive), since the start.
    pub to: Duration,
}

impl Tenure {
    /// Whether the two share an instant. A tenure covers `from..to`, or
    /// the instant `from` alone if it ended where it began (a node that
    /// crashed at the instant it became leader led at that instant).
    pub fn overlaps(&self, other: &Tenure) -> bool {
        self.from < other.end() && other.from < self.end()
    }

    fn end(&self) -> Duration {
        self.to.max(self.from + Duration::from_nanos(1))
    }
}

/// A tenure still running, in simulated instants.
#[derive(Clone, Copy, Debug)]
pub(super) struct OpenTenure {
    pub(super) epoch: Epoch,
    pub(super) from: Instant,
    /// The end of the node's lease, as of its latest handle; `None` for a
    /// machine whose leadership has no lease.
    pub(super) lease_until: Option<Instant>,
}

/// Two nodes claimed leadership in the same epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The epoch claimed twice.
    pub epoch: Epoch,
    /// The first claimant.
    pub first: NodeId,
    /// The second.
    pub second: NodeId,
    /// When the second claim was seen, since the start.
    pub at: Duration,
}

/// A node claimed a smaller epoch than it had claimed before, without a
/// restart in between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Regression {
    /// The node.
    pub node: NodeId,
    /// Its earlier claim.
    pub before: Epoch,
    /// Its later, smaller claim.
    pub after: Epoch,
    /// When, since the start.
    pub at: Duration,
}

/// How agreement went after faults ended: see [`Sim::settle`](crate::sim::Sim::settle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    /// The leader all nodes agreed on at the end.
    pub leader: Leader,
    /// How long after the call agreement began (and then held).
    pub took: Duration,
}
