//! Node ids, epochs and the leader as a node sees it.

use std::fmt;

use regent_core::FencingToken;

/// The identity of one member of a peer group: a number unique in the
/// group's membership.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u64);

impl NodeId {
    /// No particular node, in the transport's view query
    /// ([`codec::Control`](crate::codec::Control)): the `from` of every
    /// query (a querier is no member and needs no id) and the `to` of every
    /// answer, and as a query's `to`, "whichever node answers". The view
    /// query is apart from the members' frames, so a member may still have
    /// this id; a query addressed to it is then answered by any node.
    pub const ANY: NodeId = NodeId(u64::MAX);

    /// The raw id.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// The number of low bits of an [`Epoch`] that hold the claimant's rank.
pub const RANK_BITS: u32 = 16;

/// The largest round an epoch can hold: `2^48 - 1`.
pub const MAX_ROUND: u64 = u64::MAX >> RANK_BITS;

/// The epoch of a leadership term: `round << 16 | rank`, where `rank` is the
/// position of the term's leader in the sorted membership and `round` a
/// counter.
///
/// # The rule
///
/// * Every node remembers the largest epoch it has seen in any message
///   (its *max epoch*) and never lowers it while it runs.
/// * A node that claims leadership opens a term with the next epoch that
///   carries its own rank: `(max.round + 1) << 16 | own_rank`
///   ([`Epoch::next_for`]), or, where the node knows the wall clock, with a
///   round of at least the wall clock's tenths of a second since the Unix epoch
///   ([`Epoch::next_at_least`], [`ConfigBuilder::wall_clock`](crate::ConfigBuilder::wall_clock)).
///   That is strictly greater than its max epoch, so
///   the epochs a node claims grow, and every node that adopts it grows its
///   max epoch too.
/// * A node never claims, and never accepts from another node, a term whose
///   rank bits are not the claimant's own. So two different nodes can never
///   lead in the same epoch, whatever the network does: the epoch space is
///   split among the members by its low bits. (A plain counter would not
///   do: two sides of a partition would both pick `max + 1`.)
/// * The fencing token of a term is the epoch itself ([`Epoch::token`]).
///
/// Without persistence a restarted node starts again at epoch zero and
/// learns the group's max epoch from the first message it gets; its own
/// claims before that are stale and every live node ignores them (they
/// answer with their newer epoch). A group restarted whole has no such
/// memory: there the wall clock floor keeps tokens growing (rounds follow
/// the tenths of a second of the claims), as long as the wall clocks do not go
/// back by more than the group was down. Rounds are 48 bits: at one election a
/// millisecond they last 8,900 years; a node whose max epoch has reached
/// [`MAX_ROUND`] can no longer claim a term, and says so in its logs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Epoch(u64);

impl Epoch {
    /// Before any term: no node claims it.
    pub const ZERO: Epoch = Epoch(0);

    /// The epoch of `round` and `rank`, if `round` fits in 48 bits.
    pub const fn new(round: u64, rank: u16) -> Option<Self> {
        if round > MAX_ROUND {
            return None;
        }
        Some(Self(round << RANK_BITS | rank as u64))
    }

    /// An epoch from its raw value (as carried in a message).
    pub const fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The round: the high 48 bits.
    pub const fn round(self) -> u64 {
        self.0 >> RANK_BITS
    }

    /// The rank of the node that claimed this epoch: the low 16 bits.
    pub const fn rank(self) -> u16 {
        // Truncation is the point: the rank is the low 16 bits.
        (self.0 & 0xffff) as u16
    }

    /// The first epoch after `self` that carries `rank`; `None` once the
    /// rounds are exhausted.
    pub const fn next_for(self, rank: u16) -> Option<Self> {
        Self::new(self.round() + 1, rank)
    }

    /// The first epoch after `self` that carries `rank` and whose round is
    /// at least `floor` ([`Config::round_floor`](crate::Config::round_floor):
    /// the wall clock's tenths of a second, so that a group restarted whole goes
    /// on from where its tokens were). A floor past [`MAX_ROUND`]` / 2` (a
    /// wall clock thousands of years ahead) is taken as that, so that a
    /// wrong clock cannot use the rounds up. `None` once the rounds are
    /// exhausted.
    pub fn next_at_least(self, rank: u16, floor: u64) -> Option<Self> {
        let next = self.round().checked_add(1)?;
        Self::new(next.max(floor.min(MAX_ROUND / 2)), rank)
    }

    /// Whether this can be the epoch of a term (round at least one).
    pub const fn is_term(self) -> bool {
        self.round() > 0
    }

    /// The fencing token of the term this epoch opens: the epoch itself.
    /// It grows with the epoch, and no two leaders share one (see the rule
    /// above).
    pub const fn token(self) -> FencingToken {
        FencingToken::new(self.0)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.round(), self.rank())
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}.{}", self.round(), self.rank())
    }
}

/// The leader as one node sees it: who, and in which term.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Leader {
    /// The leader's id.
    pub id: NodeId,
    /// The epoch of its term.
    pub epoch: Epoch,
}

impl Leader {
    /// The fencing token of this term.
    pub const fn token(self) -> FencingToken {
        self.epoch.token()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_epoch_grows_and_carries_the_rank() {
        let e = Epoch::ZERO;
        let a = e.next_for(3).unwrap();
        assert_eq!((a.round(), a.rank()), (1, 3));
        let b = a.next_for(0).unwrap();
        assert!(b > a);
        assert_eq!((b.round(), b.rank()), (2, 0));
        assert!(b.token() > a.token());
        assert!(!Epoch::ZERO.is_term());
        assert!(a.is_term());
    }

    #[test]
    fn the_next_round_is_at_least_the_floor() {
        let e = Epoch::new(5, 1).unwrap();
        assert_eq!(e.next_at_least(2, 0), e.next_for(2));
        assert_eq!(e.next_at_least(2, 6), e.next_for(2));
        let n = e.next_at_least(2, 1_700_000_000_000).unwrap();
        assert_eq!((n.round(), n.rank()), (1_700_000_000_000, 2));
        // A floor below the max epoch changes nothing: epochs only grow.
        let big = Epoch::new(1_800_000_000_000, 0).unwrap();
        assert_eq!(big.next_at_least(3, 1_700_000_000_000), big.next_for(3));
        // An absurd wall clock is capped, leaving half the rounds.
        let capped = Epoch::ZERO.next_at_least(0, u64::MAX).unwrap();
        assert_eq!(capped.round(), MAX_ROUND / 2);
        assert_eq!(Epoch::new(MAX_ROUND, 0).unwrap().next_at_least(0, 9), None);
    }

    #[test]
    fn rounds_run_out_without_overflow() {
        let last = Epoch::new(MAX_ROUND, 7).unwrap();
        assert_eq!(last.next_for(1), None);
        assert_eq!(Epoch::new(MAX_ROUND + 1, 0), None);
        assert_eq!(Epoch::from_raw(u64::MAX).next_for(0), None);
    }
}
