//! Quorum mode's messages on the wire: the inner algorithm's kinds
//! unchanged under the algorithm byte with the high bit set, ASK and GRANT
//! above them (see "Wire" in the [module docs](super)).

use std::time::Duration;

use super::message::{AskId, Message};
use crate::codec::wire::{DecodeError, Reader, Wire};
use crate::config::MAX_DURATION;

const KIND_ASK: u8 = 0x81;
const KIND_GRANT: u8 = 0x82;
/// Kinds with this bit are the lease's; the inner algorithm's lie below.
const QUORUM_KIND: u8 = 0x80;

impl<M: Wire> Wire for Message<M> {
    const ALGORITHM: u8 = M::ALGORITHM | 0x80;

    fn encode_body(&self, out: &mut Vec<u8>) -> u8 {
        let (kind, epoch, id) = match self {
            Message::Inner(m) => return m.encode_body(out),
            Message::Ask { epoch, id } => (KIND_ASK, epoch, id),
            Message::Grant { epoch, id, .. } => (KIND_GRANT, epoch, id),
        };
        for v in [epoch.get(), id.incarnation, id.number] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        if let Message::Grant { lease, .. } = self {
            // A lease over MAX_DURATION does not decode; it is never sent.
            let nanos = u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX);
            out.extend_from_slice(&nanos.to_be_bytes());
        }
        kind
    }

    fn decode_body(kind: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        if kind & QUORUM_KIND == 0 {
            return M::decode_body(kind, r).map(Message::Inner);
        }
        if kind != KIND_ASK && kind != KIND_GRANT {
            return Err(DecodeError::Malformed {
                what: "unknown message kind",
            });
        }
        let epoch = r.epoch()?;
        let id = AskId {
            incarnation: r.u64()?,
            number: r.u64()?,
        };
        if kind == KIND_ASK {
            return Ok(Message::Ask { epoch, id });
        }
        let lease = Duration::from_nanos(r.u64()?);
        if lease > MAX_DURATION {
            return Err(DecodeError::Malformed {
                what: "a lease longer than the maximum duration",
            });
        }
        Ok(Message::Grant { epoch, id, lease })
    }
}
