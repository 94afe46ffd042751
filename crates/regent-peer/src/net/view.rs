//! What a node publishes: its [`View`] of the group (leader, fencing
//! token, lease, stopped) and its transport's [`Counters`], with [`Stats`],
//! the counters every task of the node bumps.

use regent_core::FencingToken;
use tokio::sync::watch;

use crate::epoch::Leader;
use crate::machine::Machine;

/// A node's view of its group, as published on [`Node::view`](crate::net::Node::view).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct View {
    /// The leader as this node sees it, with the epoch of its term; `None`
    /// while it knows of none, and once the node has stopped.
    pub leader: Option<Leader>,
    /// The fencing token of the term this node leads, if it leads. There
    /// is no `is_leader` flag: leadership is the token.
    pub leading: Option<FencingToken>,
    /// The node has stopped (left, aborted or dropped): it leads nothing
    /// and knows no leader.
    pub stopped: bool,
    /// Until when this node's leadership is exclusive
    /// ([`Machine::lease_until`]): set in quorum mode while it leads with a
    /// majority's lease, `None` otherwise.
    pub lease_until: Option<tokio::time::Instant>,
}

impl View {
    /// The view of a node that has stopped.
    pub(super) const STOPPED: View = View {
        leader: None,
        leading: None,
        stopped: true,
        lease_until: None,
    };

    pub(super) fn of<M: Machine>(machine: &M) -> Self {
        View {
            leader: machine.leader(),
            leading: machine.leadership(),
            stopped: false,
            lease_until: machine.lease_until(),
        }
    }
}

/// What a node's transport has done since it started, as published on
/// [`Node::counters`](crate::net::Node::counters). Every field only grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Counters {
    /// Frames authenticated, accepted by the replay guard and handed to
    /// the driver.
    pub frames_accepted: u64,
    /// Inbound connections dropped for a frame not authenticated by the
    /// shared secret (another secret, forged or corrupted).
    pub unauthenticated: u64,
    /// Inbound connections dropped for a malformed frame: a bad or
    /// oversized length prefix, a frame cut short or not finished within
    /// the io timeout, another version or algorithm, a bad body.
    pub malformed: u64,
    /// Inbound connections dropped for a replayed frame (`seq` not above
    /// the sender's last).
    pub replayed: u64,
    /// Inbound connections dropped for a frame whose `seq` is further than
    /// [`MAX_CLOCK_SKEW`](crate::net::MAX_CLOCK_SKEW) from this node's clock.
    pub outside_clock_window: u64,
    /// Inbound connections dropped for a frame addressed to another node,
    /// from a non-member, or from another sender than the connection's
    /// first frame; for a view query on a member's connection, or anything
    /// but a view query on a querier's.
    pub misaddressed: u64,
    /// Inbound connections closed because they were silent: no first frame
    /// within the io timeout, or nothing for the idle timeout.
    pub silent_closed: u64,
    /// Inbound connections accepted.
    pub connections_accepted: u64,
    /// Inbound connections closed at once because
    /// [`NodeOptions::max_inbound`](crate::net::NodeOptions::max_inbound)
    /// were open, and querier connections closed unanswered because
    /// [`NodeOptions::max_queriers`](crate::net::NodeOptions::max_queriers)
    /// were served.
    pub connections_refused: u64,
    /// Frames written to peers.
    pub frames_sent: u64,
    /// Frames not sent: the queue was full, the peer unreachable, the
    /// frame too old, a write failed, or the member had no address.
    pub frames_dropped: u64,
    /// Failed attempts to connect to a peer.
    pub connect_failures: u64,
    /// View queries answered (one VIEW frame written per query).
    pub queries_answered: u64,
    /// Querier connections dropped because the querier did not read its
    /// answer within the io timeout.
    pub queriers_dropped: u64,
}

/// The counters, shared by every task of a node.
#[derive(Debug)]
pub(super) struct Stats(pub(super) watch::Sender<Counters>);

impl Stats {
    pub(super) fn new() -> Self {
        Self(watch::Sender::new(Counters::default()))
    }

    pub(super) fn bump(&self, f: impl FnOnce(&mut Counters)) {
        self.0.send_modify(f);
    }
}
