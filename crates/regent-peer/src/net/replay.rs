//! Sequence numbers that refuse replays: the sender stamps, the receiver
//! checks. Both are pure (the wall clock is an argument), so they are
//! tested without a clock or a socket.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::codec::Envelope;
use crate::epoch::NodeId;

/// How far apart the members' wall clocks may be: a frame is accepted only
/// if its `seq` (the sender's clock when it sent it) is within this of the
/// receiver's clock, either way.
///
/// **Members' wall clocks must agree within it** (NTP or the like keeps
/// them within milliseconds). A node whose clock is off by more has every
/// frame refused, and the refusals are logged and counted. The window is
/// also how long a recorded frame stays replayable to a receiver that has
/// just restarted and so remembers no `seq` (see [`ReplayGuard`]).
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(30);

/// Microseconds since the Unix epoch; 0 before it, `u64::MAX` past the
/// year 586,000.
fn micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Stamps a node's outgoing frames: `seq` is its wall clock in
/// microseconds since the Unix epoch, raised to one above the last `seq`
/// whenever the clock has not moved on (or went back), so every `seq` a
/// node sends while it runs is above the previous one, to every receiver.
///
/// A restarted node starts again from its clock: as long as its clock did
/// not go back across the restart, its first `seq` is above its last one.
#[derive(Debug, Default, Clone)]
pub struct SeqClock {
    last: u64,
}

impl SeqClock {
    /// A clock that has stamped nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The `seq` for a frame sent at `now`: `max(last + 1, now)`.
    pub fn next(&mut self, now: SystemTime) -> u64 {
        self.last = self.last.saturating_add(1).max(micros(now));
        self.last
    }
}

/// Why a receiver refused an authenticated frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The frame is addressed to another node.
    #[error("the frame is for node {to}, not this one")]
    Misaddressed {
        /// The receiver it names.
        to: NodeId,
    },
    /// The sender is not another configured member.
    #[error("the frame is from {from}, which is not another member")]
    NotAMember {
        /// The sender it names.
        from: NodeId,
    },
    /// `seq` is not above the last one accepted from the sender: a replay
    /// (or a frame overtaken by a later one).
    #[error("seq {seq} from {from} is not above {last}, the last accepted: a replay")]
    Replayed {
        /// The sender.
        from: NodeId,
        /// The frame's `seq`.
        seq: u64,
        /// The last `seq` accepted from the sender.
        last: u64,
    },
    /// `seq` is further behind this node's clock than [`MAX_CLOCK_SKEW`]:
    /// a recorded frame replayed later, or a sender whose clock is behind.
    #[error("seq from {from} is {behind:?} behind this node's clock, more than the allowed skew")]
    TooOld {
        /// The sender.
        from: NodeId,
        /// How far behind.
        behind: Duration,
    },
    /// `seq` is further ahead of this node's clock than
    /// [`MAX_CLOCK_SKEW`]: a sender whose clock is ahead.
    #[error("seq from {from} is {ahead:?} ahead of this node's clock, more than the allowed skew")]
    TooNew {
        /// The sender.
        from: NodeId,
        /// How far ahead.
        ahead: Duration,
    },
}

/// A receiver's check of every authenticated frame before its message
/// reaches the machine.
///
/// A frame from sender S is accepted only if
///
/// 1. it is addressed to this node,
/// 2. S is another configured member,
/// 3. its `seq` is within [`MAX_CLOCK_SKEW`] of this node's wall clock,
///    and
/// 4. its `seq` is above the last `seq` accepted from S;
///
/// then its `seq` becomes S's last. Rule 4 refuses a frame replayed while
/// the receiver runs; rule 3 refuses one replayed later than the window,
/// even to a receiver that restarted and forgot every `seq`. What remains:
/// a receiver that restarted less than [`MAX_CLOCK_SKEW`] ago may accept,
/// once, a frame recorded within the window before it, if nothing newer
/// from that sender has reached it yet. Such a frame is a genuine message
/// of the group, some seconds old; the algorithms tolerate delay.
///
/// The secret is shared, so the check trusts what every holder of the
/// secret says: any of them can write `from`. It keeps out those without
/// the secret and recordings, not a member gone bad.
#[derive(Debug, Clone)]
pub struct ReplayGuard {
    me: NodeId,
    /// Every other member, with the last `seq` accepted from it.
    last: BTreeMap<NodeId, Option<u64>>,
}

impl ReplayGuard {
    /// The guard of node `me` in a group of `members` (`me` among them or
    /// not: it is never accepted as a sender).
    pub fn new(me: NodeId, members: impl IntoIterator<Item = NodeId>) -> Self {
        let last = members
            .into_iter()
            .filter(|&m| m != me)
            .map(|m| (m, None))
            .collect();
        Self { me, last }
    }

    /// Checks the header of an authenticated `envelope` received at `now`
    /// (this node's wall clock), and on success remembers its `seq`.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] naming the rule broken; then nothing is remembered.
    pub fn check<M>(&mut self, envelope: &Envelope<M>, now: SystemTime) -> Result<(), Refusal> {
        let (from, seq) = (envelope.from, envelope.seq);
        if envelope.to != self.me {
            return Err(Refusal::Misaddressed { to: envelope.to });
        }
        let Some(last) = self.last.get_mut(&from) else {
            return Err(Refusal::NotAMember { from });
        };
        in_window(from, seq, now)?;
        if let Some(last) = *last
            && seq <= last
        {
            return Err(Refusal::Replayed { from, seq, last });
        }
        *last = Some(seq);
        Ok(())
    }

    /// Checks the header of an authenticated view query
    /// ([`Control::Query`](crate::codec::Control::Query)) received at `now`
    /// on a connection whose last accepted query had `seq` `last`. A
    /// querier is no member, so rule 2 does not apply, and its `seq` is
    /// checked against the connection's last query rather than a sender's:
    /// the query must be addressed to this node or to [`NodeId::ANY`],
    /// within [`MAX_CLOCK_SKEW`] of this node's clock, and above `last`.
    /// A recorded query replayed on a new connection within the window is
    /// answered once more: it costs an answer, and tells nothing a member's
    /// frames do not.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] naming the rule broken.
    pub fn check_query<M>(
        &self,
        envelope: &Envelope<M>,
        last: Option<u64>,
        now: SystemTime,
    ) -> Result<(), Refusal> {
        let (from, seq) = (envelope.from, envelope.seq);
        if envelope.to != self.me && envelope.to != NodeId::ANY {
            return Err(Refusal::Misaddressed { to: envelope.to });
        }
        in_window(from, seq, now)?;
        if let Some(last) = last
            && seq <= last
        {
            return Err(Refusal::Replayed { from, seq, last });
        }
        Ok(())
    }
}

/// Rule 3: `seq` within [`MAX_CLOCK_SKEW`] of `now`.
fn in_window(from: NodeId, seq: u64, now: SystemTime) -> Result<(), Refusal> {
    let now = micros(now);
    let window = u64::try_from(MAX_CLOCK_SKEW.as_micros()).unwrap_or(u64::MAX);
    if seq < now.saturating_sub(window) {
        return Err(Refusal::TooOld {
            from,
            behind: Duration::from_micros(now - seq),
        });
    }
    if seq > now.saturating_add(window) {
        return Err(Refusal::TooNew {
            from,
            ahead: Duration::from_micros(seq - now),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
    }

    fn env(from: u64, to: u64, seq: u64) -> Envelope<()> {
        Envelope {
            from: NodeId(from),
            to: NodeId(to),
            seq,
            message: (),
        }
    }

    fn guard() -> ReplayGuard {
        ReplayGuard::new(NodeId(1), [1, 2, 3].map(NodeId))
    }

    #[test]
    fn seq_is_the_clock_in_micros_and_always_grows() {
        let mut clock = SeqClock::new();
        let first = clock.next(at(0));
        assert_eq!(first, 1_700_000_000_000_000);
        assert_eq!(clock.next(at(0)), first + 1, "same instant: one more");
        assert_eq!(
            clock.next(at(0) - Duration::from_secs(5)),
            first + 2,
            "clock went back"
        );
        assert_eq!(clock.next(at(1)), first + 1_000_000);
        assert_eq!(SeqClock::new().next(UNIX_EPOCH - Duration::from_secs(1)), 1);
    }

    #[test]
    fn a_fresh_frame_is_accepted_once_and_never_again() {
        let mut g = guard();
        let mut clock = SeqClock::new();
        let a = clock.next(at(0));
        let b = clock.next(at(0));
        assert_eq!(g.check(&env(2, 1, a), at(0)), Ok(()));
        assert_eq!(
            g.check(&env(2, 1, a), at(0)),
            Err(Refusal::Replayed {
                from: NodeId(2),
                seq: a,
                last: a
            })
        );
        assert_eq!(g.check(&env(2, 1, b), at(1)), Ok(()));
        assert!(matches!(
            g.check(&env(2, 1, a), at(1)),
            Err(Refusal::Replayed { .. })
        ));
        // Each sender has its own last seq.
        assert_eq!(g.check(&env(3, 1, a), at(1)), Ok(()));
    }

    #[test]
    fn a_recording_replayed_after_the_window_is_refused_even_by_a_restarted_receiver() {
        let recorded = SeqClock::new().next(at(0));
        let restarted = guard();
        let skew = MAX_CLOCK_SKEW.as_secs();
        assert_eq!(
            restarted.clone().check(&env(2, 1, recorded), at(skew)),
            Ok(()),
            "still within the window: the edge is inclusive"
        );
        assert_eq!(
            restarted.clone().check(&env(2, 1, recorded), at(skew + 1)),
            Err(Refusal::TooOld {
                from: NodeId(2),
                behind: MAX_CLOCK_SKEW + Duration::from_secs(1)
            })
        );
        let ahead = SeqClock::new().next(at(skew + 1));
        assert_eq!(
            guard().check(&env(2, 1, ahead), at(0)),
            Err(Refusal::TooNew {
                from: NodeId(2),
                ahead: MAX_CLOCK_SKEW + Duration::from_secs(1)
            })
        );
    }

    #[test]
    fn a_query_needs_no_membership_but_this_node_a_fresh_seq_and_more_than_the_last() {
        let g = guard();
        let seq = SeqClock::new().next(at(0));
        let query = |to, seq| env(u64::MAX, to, seq);
        assert_eq!(g.check_query(&query(1, seq), None, at(0)), Ok(()));
        assert_eq!(
            g.check_query(&query(u64::MAX, seq), None, at(0)),
            Ok(()),
            "to any node"
        );
        assert_eq!(
            g.check_query(&query(2, seq), None, at(0)),
            Err(Refusal::Misaddressed { to: NodeId(2) })
        );
        assert!(matches!(
            g.check_query(&query(1, seq), Some(seq), at(0)),
            Err(Refusal::Replayed { .. })
        ));
        assert_eq!(g.check_query(&query(1, seq + 1), Some(seq), at(0)), Ok(()));
        let skew = MAX_CLOCK_SKEW.as_secs();
        assert!(matches!(
            g.check_query(&query(1, seq), None, at(skew + 1)),
            Err(Refusal::TooOld { .. })
        ));
        assert!(matches!(
            g.check_query(
                &query(1, seq),
                None,
                at(0) - MAX_CLOCK_SKEW - Duration::from_secs(1)
            ),
            Err(Refusal::TooNew { .. })
        ));
    }

    #[test]
    fn frames_for_another_node_or_from_a_stranger_or_ourselves_are_refused() {
        let mut g = guard();
        let seq = SeqClock::new().next(at(0));
        assert_eq!(
            g.check(&env(2, 3, seq), at(0)),
            Err(Refusal::Misaddressed { to: NodeId(3) })
        );
        assert_eq!(
            g.check(&env(9, 1, seq), at(0)),
            Err(Refusal::NotAMember { from: NodeId(9) })
        );
        assert_eq!(
            g.check(&env(1, 1, seq), at(0)),
            Err(Refusal::NotAMember { from: NodeId(1) })
        );
        // A refusal remembers nothing: the same seq is still good.
        assert_eq!(g.check(&env(2, 1, seq), at(0)), Ok(()));
    }
}
