//! The algorithms' messages on the wire: the [`Wire`] forms of
//! lowest-ID's, Bully's and Ring's messages (kinds and bodies, as in the
//! table of the [module docs](super)).

use super::frame::{HEADER_LEN, MAX_FRAME_LEN, TAG_LEN};
use super::wire::{DecodeError, Reader, Wire, put, unknown_kind};
use crate::epoch::Epoch;
use crate::ring::ElectionId;
use crate::{bully, lowest_id, ring};

/// The largest number of ids a Ring ELECTION can carry on the wire.
pub(super) const MAX_IDS: usize = (MAX_FRAME_LEN - HEADER_LEN - TAG_LEN - 8 * 5 - 2) / 8;

impl Wire for lowest_id::Message {
    const ALGORITHM: u8 = 1;

    fn encode_body(&self, out: &mut Vec<u8>) -> u8 {
        match self {
            lowest_id::Message::Heartbeat { epoch, leading } => {
                put(out, epoch.get());
                out.push(u8::from(*leading));
                1
            }
        }
    }

    fn decode_body(kind: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        match kind {
            1 => {
                let epoch = r.epoch()?;
                let leading = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => {
                        return Err(DecodeError::Malformed {
                            what: "leading is not 0 or 1",
                        });
                    }
                };
                Ok(lowest_id::Message::Heartbeat { epoch, leading })
            }
            _ => Err(unknown_kind()),
        }
    }
}

impl Wire for bully::Message {
    const ALGORITHM: u8 = 2;

    fn encode_body(&self, out: &mut Vec<u8>) -> u8 {
        let (kind, epoch) = match self {
            bully::Message::Election { epoch } => (1, epoch),
            bully::Message::Answer { epoch } => (2, epoch),
            bully::Message::Coordinator { epoch } => (3, epoch),
            bully::Message::Heartbeat { epoch } => (4, epoch),
            bully::Message::Stale { epoch } => (5, epoch),
        };
        put(out, epoch.get());
        kind
    }

    fn decode_body(kind: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let make: fn(Epoch) -> Self = match kind {
            1 => |epoch| bully::Message::Election { epoch },
            2 => |epoch| bully::Message::Answer { epoch },
            3 => |epoch| bully::Message::Coordinator { epoch },
            4 => |epoch| bully::Message::Heartbeat { epoch },
            5 => |epoch| bully::Message::Stale { epoch },
            _ => return Err(unknown_kind()),
        };
        Ok(make(r.epoch()?))
    }
}

impl Wire for ring::Message {
    const ALGORITHM: u8 = 3;

    fn encode_body(&self, out: &mut Vec<u8>) -> u8 {
        match self {
            ring::Message::Election {
                initiator,
                election,
                epoch,
                ids,
                hop,
            } => {
                put(out, initiator.get());
                put(out, election.incarnation);
                put(out, election.number);
                put(out, epoch.get());
                put(out, *hop);
                // More ids than fit make the frame too large: encode
                // reports it.
                let count = u16::try_from(ids.len()).unwrap_or(u16::MAX);
                out.extend_from_slice(&count.to_be_bytes());
                for id in ids {
                    put(out, id.get());
                }
                1
            }
            ring::Message::Coordinator {
                initiator,
                leader,
                epoch,
                hop,
            } => {
                put(out, initiator.get());
                put(out, leader.get());
                put(out, epoch.get());
                put(out, *hop);
                2
            }
            ring::Message::Ack { hop } => {
                put(out, *hop);
                3
            }
            ring::Message::Heartbeat { epoch } => {
                put(out, epoch.get());
                4
            }
            ring::Message::Stale { epoch } => {
                put(out, epoch.get());
                5
            }
        }
    }

    fn decode_body(kind: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(match kind {
            1 => {
                let initiator = r.id()?;
                let election = ElectionId {
                    incarnation: r.u64()?,
                    number: r.u64()?,
                };
                let epoch = r.epoch()?;
                let hop = r.u64()?;
                let count = usize::from(r.u16()?);
                if count > MAX_IDS || count * 8 > r.0.len() {
                    return Err(DecodeError::Malformed {
                        what: "more ids announced than the body holds",
                    });
                }
                let ids = (0..count).map(|_| r.id()).collect::<Result<_, _>>()?;
                ring::Message::Election {
                    initiator,
                    election,
                    epoch,
                    ids,
                    hop,
                }
            }
            2 => ring::Message::Coordinator {
                initiator: r.id()?,
                leader: r.id()?,
                epoch: r.epoch()?,
                hop: r.u64()?,
            },
            3 => ring::Message::Ack { hop: r.u64()? },
            4 => ring::Message::Heartbeat { epoch: r.epoch()? },
            5 => ring::Message::Stale { epoch: r.epoch()? },
            _ => return Err(unknown_kind()),
        })
    }
}
