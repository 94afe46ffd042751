//! Which algorithm a group elects with, and its byte on the wire.

use std::fmt;

use crate::codec::wire::Wire;
use crate::{bully, lowest_id, ring};

/// The algorithm a group elects with; every member must use the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// [`LowestId`](crate::LowestId): the lowest live id leads.
    LowestId,
    /// [`Bully`](crate::Bully): the highest live id wins.
    Bully,
    /// [`Ring`](crate::Ring): an election goes round the ring; the highest
    /// live id leads.
    Ring,
}

/// The bit a quorum-mode node sets in its algorithm byte
/// ([`Quorum`](crate::Quorum)'s messages travel under it).
const QUORUM_BIT: u8 = 0x80;

impl Algorithm {
    /// The name `regent peer --algorithm` takes.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::LowestId => "lowest-id",
            Algorithm::Bully => "bully",
            Algorithm::Ring => "ring",
        }
    }

    /// The algorithm byte of a node's frames: the algorithm's, with the
    /// high bit set in quorum mode.
    pub(crate) fn wire(self, quorum: bool) -> u8 {
        let byte = match self {
            Algorithm::LowestId => lowest_id::Message::ALGORITHM,
            Algorithm::Bully => bully::Message::ALGORITHM,
            Algorithm::Ring => ring::Message::ALGORITHM,
        };
        if quorum { byte | QUORUM_BIT } else { byte }
    }

    /// The algorithm and the quorum mode an algorithm byte names, if it
    /// names one.
    pub(crate) fn from_wire(byte: u8) -> Option<(Self, bool)> {
        let quorum = byte & QUORUM_BIT != 0;
        let algorithm = match byte & !QUORUM_BIT {
            b if b == lowest_id::Message::ALGORITHM => Algorithm::LowestId,
            b if b == bully::Message::ALGORITHM => Algorithm::Bully,
            b if b == ring::Message::ALGORITHM => Algorithm::Ring,
            _ => return None,
        };
        Some((algorithm, quorum))
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quorum;

    #[test]
    fn the_wire_byte_is_the_messages_and_round_trips() {
        for a in [Algorithm::LowestId, Algorithm::Bully, Algorithm::Ring] {
            for q in [false, true] {
                assert_eq!(Algorithm::from_wire(a.wire(q)), Some((a, q)));
            }
        }
        assert_eq!(
            Algorithm::Bully.wire(true),
            quorum::Message::<bully::Message>::ALGORITHM
        );
        assert_eq!(
            Algorithm::Ring.wire(true),
            quorum::Message::<ring::Message>::ALGORITHM
        );
        assert_eq!(Algorithm::from_wire(0), None);
        assert_eq!(Algorithm::from_wire(0x84), None);
    }
}
