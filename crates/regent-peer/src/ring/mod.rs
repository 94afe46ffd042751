//! Ring: the ELECTION collects the live members on a trip round the ring;
//! the highest collected id leads; a COORDINATOR goes round to say so.
//!
//! The ring is the membership in ascending order; a node's successor is the
//! next higher id, the highest wrapping to the lowest.
//!
//! * A node that suspects the leader (no HEARTBEAT for `failure_timeout`),
//!   or has just started, *initiates*: it sends ELECTION (its id, an
//!   [`ElectionId`], its max epoch, and the list `[itself]`) to its
//!   successor.
//! * A node that gets an ELECTION appends its id, raises the epoch to its
//!   own max epoch, and passes it on, once: a copy of an election it has
//!   passed on within `election_timeout` is dropped (network duplicates,
//!   and the forks of ring repair when an ACK is merely late, would
//!   otherwise multiply at every hop). Following Chang and Roberts, a node
//!   that is itself initiating swallows the ELECTION of a lower initiator:
//!   its own election will cover the ring, so with several initiators only
//!   the highest one's goes all the way round.
//! * Passing an ELECTION on makes a node a *participant*: it drops its
//!   leader and waits up to `election_timeout` for the COORDINATOR instead
//!   of initiating. Not so the leader, nor a follower whose leader's term
//!   is newer than the ELECTION's epoch: nobody it had passed knew of that
//!   term, so it is an election the term has superseded (a member's first
//!   ELECTION, refused by a successor not yet started and skipped on an
//!   ack timeout later, after the group elected without it), which may
//!   never come back to a node that still runs it, or one from a member
//!   that has yet to hear of the term. Such a node passes it on (a
//!   COORDINATOR from it is newer than the term, and adopted) but keeps
//!   its leader and its failure timer, so that a crash of the leader is
//!   still detected a failure timeout after its last HEARTBEAT.
//! * When its ELECTION comes back, the initiator takes the highest id in
//!   the list as leader, opens the leader's term ([`Epoch::next_for`] with
//!   the *leader's* rank, above the highest epoch the trip collected) and
//!   sends COORDINATOR round the ring. Each node adopts the leader and
//!   passes it on; a node that already has that term stops it, so it makes
//!   one trip.
//! * **Ring repair.** Every ELECTION and COORDINATOR hop is acknowledged
//!   with ACK. A node whose successor does not ACK within `ack_timeout`
//!   sends the message to the next member instead, and so on round the
//!   ring; when every other member has been skipped the message comes back
//!   to the sender itself, which then handles it as if it had gone round
//!   (an initiator alone elects itself). Skips are not remembered: the
//!   next message tries the immediate successor again, so a restarted node
//!   is back in the ring at once.
//! * A member that says it is leaving ([`Input::Left`]) is dead at once:
//!   a follower of it initiates an election now, a hop waiting for its ACK
//!   moves on to the next member now, and ring messages skip it until it
//!   is heard from again (any message from it, or an ELECTION it
//!   initiated). A leader's graceful shutdown therefore costs one trip
//!   round the ring, not a failure timeout.
//! * The leader sends HEARTBEAT with its term to every other member each
//!   `heartbeat_interval`. A COORDINATOR or HEARTBEAT older than the
//!   receiver's max epoch is dropped (a stale HEARTBEAT is answered with
//!   STALE); a leader that learns of a newer epoch, and a node that learns
//!   of a leader lower than itself (it was not collected), start an
//!   election.
//! * A node that forwarded an ELECTION, or initiated one, and gets no
//!   COORDINATOR within `election_timeout` initiates again.
//!
//! Messages per election with one initiator on a ring of n live members:
//! n ELECTION hops and n COORDINATOR hops (2n), each acknowledged (2n
//! ACKs), plus one unacknowledged attempt per dead member on the way, per
//! message.
//!
//! [`Epoch::next_for`]: crate::Epoch::next_for
//! [`Input::Left`]: crate::Input::Left

mod hop;
mod message;
mod node;

pub use message::{ElectionId, Message};
pub use node::Ring;
