//! The wire format: versioned, length-prefixed frames authenticated with
//! HMAC-SHA256 under a shared secret.
//!
//! ```text
//! offset  size  field
//!      0     4  length of everything after this field (big-endian u32)
//!      4     1  version (1)
//!      5     1  algorithm (1 lowest-ID, 2 Bully, 3 Ring)
//!      6     1  message kind (below)
//!      7     8  from: the sender's id
//!     15     8  to: the receiver's id
//!     23     8  seq: the sender's wall clock in microseconds since the
//!               Unix epoch, strictly increasing per sender
//!     31     …  body: the kind's fields, big-endian
//!    end-32 32  HMAC-SHA256 over bytes 4..end-32
//! ```
//!
//! | kind | lowest-ID (1) | Bully (2)   | Ring (3)    | body                 |
//! |-----:|---------------|-------------|-------------|----------------------|
//! |    1 | HEARTBEAT     | ELECTION    | ELECTION    | the message's fields |
//! |    2 |               | ANSWER      | COORDINATOR | the message's fields |
//! |    3 |               | COORDINATOR | ACK         | the message's fields |
//! |    4 |               | HEARTBEAT   | HEARTBEAT   | the message's fields |
//! |    5 |               | STALE       | STALE       | the message's fields |
//! |  255 | GOODBYE       | GOODBYE     | GOODBYE     | empty                |
//!
//! Kind 255, GOODBYE ([`GOODBYE_KIND`]), is the transport's, not an
//! algorithm's: "I am leaving" ([`Payload::Goodbye`]), sent by a node that
//! shuts down gracefully; the receiving driver turns it into
//! [`Input::Left`](crate::Input::Left). It is framed and authenticated
//! like every message, under the sender's algorithm byte. The transport
//! encodes [`Envelope`]`<`[`Payload`]`<M>>`; a decoder for the bare
//! algorithm message `M` refuses a GOODBYE as an unknown kind.
//!
//! The tag covers the header, so a frame cannot be turned into another
//! kind, another algorithm, or redirected to another node; it is checked
//! (in constant time) before the body is parsed. A node without the secret
//! can therefore neither announce a leader nor push an epoch, nor say that
//! another member left. `seq` is authenticated here and checked by the
//! receiving transport (`net::ReplayGuard`): a frame is accepted only if
//! its `seq` is above the last one accepted from that sender and within
//! `net::MAX_CLOCK_SKEW` of the receiver's clock, so a recorded frame
//! replayed later is refused.
//!
//! [`decode`] never panics, whatever the bytes: every malformed, oversized,
//! truncated or forged frame is a [`DecodeError`]. A stream reader reads
//! the 4-byte prefix, asks [`frame_len`] whether to read on, then reads
//! that many bytes.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::epoch::{Epoch, NodeId};
use crate::ring::ElectionId;
use crate::{bully, lowest_id, ring};

/// The version this crate writes and reads.
pub const VERSION: u8 = 1;

/// The largest value of the length prefix accepted: 64 KiB.
pub const MAX_FRAME_LEN: usize = 64 * 1024;

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 16;

/// The message kind of the transport's GOODBYE ([`Payload::Goodbye`]).
/// No algorithm may use it.
pub const GOODBYE_KIND: u8 = 255;

const TAG_LEN: usize = 32;
const HEADER_LEN: usize = 1 + 1 + 1 + 8 + 8 + 8;
/// The largest number of ids a Ring ELECTION can carry on the wire.
const MAX_IDS: usize = (MAX_FRAME_LEN - HEADER_LEN - TAG_LEN - 8 * 5 - 2) / 8;

/// The shared secret every member of a group holds. Its `Debug` does not
/// show it.
#[derive(Clone)]
pub struct Secret(Box<[u8]>);

impl Secret {
    /// Wraps a secret.
    ///
    /// # Errors
    ///
    /// [`SecretTooShort`] below [`MIN_SECRET_LEN`] bytes.
    pub fn new(bytes: impl Into<Box<[u8]>>) -> Result<Self, SecretTooShort> {
        let bytes = bytes.into();
        if bytes.len() < MIN_SECRET_LEN {
            return Err(SecretTooShort {
                len: bytes.len(),
                min: MIN_SECRET_LEN,
            });
        }
        Ok(Self(bytes))
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length: this cannot fail.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// A secret shorter than [`MIN_SECRET_LEN`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shared secret has {len} bytes; at least {min} are needed")]
pub struct SecretTooShort {
    /// Its length.
    pub len: usize,
    /// [`MIN_SECRET_LEN`].
    pub min: usize,
}

/// A message with its addressing, as it travels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope<M> {
    /// The sender.
    pub from: NodeId,
    /// The receiver.
    pub to: NodeId,
    /// The sender's sequence number: its wall clock in microseconds since
    /// the Unix epoch, kept strictly increasing (see the module docs).
    pub seq: u64,
    /// The message.
    pub message: M,
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The frame would exceed [`MAX_FRAME_LEN`] (a Ring ELECTION with
    /// thousands of ids).
    #[error("the frame would be {len} bytes, over the maximum of {max}")]
    TooLarge {
        /// The length it would have.
        len: usize,
        /// [`MAX_FRAME_LEN`].
        max: usize,
    },
}

/// Why bytes are not an acceptable frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer bytes than the frame needs.
    #[error("truncated frame: {len} bytes, {needed} needed")]
    Truncated {
        /// The bytes there are.
        len: usize,
        /// The bytes needed.
        needed: usize,
    },
    /// The length prefix is over [`MAX_FRAME_LEN`].
    #[error("frame of {len} bytes is over the maximum of {max}")]
    Oversized {
        /// The length announced.
        len: usize,
        /// [`MAX_FRAME_LEN`].
        max: usize,
    },
    /// The length prefix is too small for a header and a tag.
    #[error("frame of {len} bytes is too short for a header and a tag")]
    Undersized {
        /// The length announced.
        len: usize,
    },
    /// More bytes than the length prefix announced.
    #[error("{extra} bytes after the frame")]
    Trailing {
        /// How many.
        extra: usize,
    },
    /// The tag does not match: a forged or corrupted frame, or another
    /// secret.
    #[error("the frame is not authenticated by the shared secret")]
    Unauthenticated,
    /// A version this crate does not read.
    #[error("unknown frame version {found}")]
    Version {
        /// The version found.
        found: u8,
    },
    /// A frame for another algorithm.
    #[error("a frame for algorithm {found}, expected {expected}")]
    Algorithm {
        /// The algorithm found.
        found: u8,
        /// The algorithm expected.
        expected: u8,
    },
    /// An authenticated frame whose body does not parse: a peer with the
    /// secret and a bug, or another version of this crate.
    #[error("malformed message: {what}")]
    Malformed {
        /// What is wrong.
        what: &'static str,
    },
}

/// A message type with a wire form.
pub trait Wire: Sized {
    /// The algorithm's byte in the header.
    const ALGORITHM: u8;

    /// The kind byte and the body. An algorithm's message must not use
    /// [`GOODBYE_KIND`].
    fn encode_body(&self, out: &mut Vec<u8>) -> u8;

    /// Parses the body of kind `kind`.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Malformed`] for an unknown kind or a bad field.
    fn decode_body(kind: u8, body: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

/// What the transport carries: an algorithm's message, or its own
/// GOODBYE.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Payload<M> {
    /// A message of the algorithm.
    Message(M),
    /// "I am leaving": the sender shuts down gracefully (kind
    /// [`GOODBYE_KIND`], empty body).
    Goodbye,
}

impl<M: Wire> Wire for Payload<M> {
    const ALGORITHM: u8 = M::ALGORITHM;

    fn encode_body(&self, out: &mut Vec<u8>) -> u8 {
        match self {
            Payload::Message(message) => message.encode_body(out),
            Payload::Goodbye => GOODBYE_KIND,
        }
    }

    fn decode_body(kind: u8, body: &mut Reader<'_>) -> Result<Self, DecodeError> {
        // A GOODBYE with a body is refused by `decode` (bytes after it).
        match kind {
            GOODBYE_KIND => Ok(Payload::Goodbye),
            _ => M::decode_body(kind, body).map(Payload::Message),
        }
    }
}

/// Encodes `envelope` into a frame, length prefix included.
///
/// # Errors
///
/// [`EncodeError::TooLarge`] past [`MAX_FRAME_LEN`].
pub fn encode<M: Wire>(secret: &Secret, envelope: &Envelope<M>) -> Result<Vec<u8>, EncodeError> {
    let mut out = vec![0u8; 4];
    out.push(VERSION);
    out.push(M::ALGORITHM);
    out.push(0);
    out.extend_from_slice(&envelope.from.get().to_be_bytes());
    out.extend_from_slice(&envelope.to.get().to_be_bytes());
    out.extend_from_slice(&envelope.seq.to_be_bytes());
    out[6] = envelope.message.encode_body(&mut out);
    let len = out.len() - 4 + TAG_LEN;
    if len > MAX_FRAME_LEN {
        return Err(EncodeError::TooLarge {
            len,
            max: MAX_FRAME_LEN,
        });
    }
    let mut mac = secret.mac();
    mac.update(&out[4..]);
    out.extend_from_slice(&mac.finalize().into_bytes());
    let prefix = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    out[..4].copy_from_slice(&prefix);
    Ok(out)
}

/// The length a frame announces in its 4-byte prefix: how many bytes to
/// read after it.
///
/// # Errors
///
/// [`DecodeError::Oversized`] or [`DecodeError::Undersized`]: close the
/// connection instead of reading on.
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, DecodeError> {
    let len = usize::try_from(u32::from_be_bytes(prefix)).unwrap_or(usize::MAX);
    if len > MAX_FRAME_LEN {
        return Err(DecodeError::Oversized {
            len,
            max: MAX_FRAME_LEN,
        });
    }
    if len < HEADER_LEN + TAG_LEN {
        return Err(DecodeError::Undersized { len });
    }
    Ok(len)
}

/// Decodes one whole frame, length prefix included.
///
/// # Errors
///
/// A [`DecodeError`] for anything but a well-formed frame of this version
/// and algorithm authenticated by `secret`. Never panics.
pub fn decode<M: Wire>(secret: &Secret, frame: &[u8]) -> Result<Envelope<M>, DecodeError> {
    let Some((prefix, rest)) = frame.split_first_chunk::<4>() else {
        return Err(DecodeError::Truncated {
            len: frame.len(),
            needed: 4,
        });
    };
    let len = frame_len(*prefix)?;
    if rest.len() < len {
        return Err(DecodeError::Truncated {
            len: frame.len(),
            needed: 4 + len,
        });
    }
    if rest.len() > len {
        return Err(DecodeError::Trailing {
            extra: rest.len() - len,
        });
    }
    let (signed, tag) = rest.split_at(len - TAG_LEN);
    let mut mac = secret.mac();
    mac.update(signed);
    mac.verify_slice(tag)
        .map_err(|_| DecodeError::Unauthenticated)?;
    let mut r = Reader(signed);
    let version = r.u8()?;
    if version != VERSION {
        return Err(DecodeError::Version { found: version });
    }
    let algorithm = r.u8()?;
    if algorithm != M::ALGORITHM {
        return Err(DecodeError::Algorithm {
            found: algorithm,
            expected: M::ALGORITHM,
        });
    }
    let kind = r.u8()?;
    let from = NodeId(r.u64()?);
    let to = NodeId(r.u64()?);
    let seq = r.u64()?;
    let message = M::decode_body(kind, &mut r)?;
    if !r.0.is_empty() {
        return Err(DecodeError::Malformed {
            what: "bytes after the body",
        });
    }
    Ok(Envelope {
        from,
        to,
        seq,
        message,
    })
}

/// Reads big-endian fields from a body, never past its end.
#[derive(Debug)]
pub struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let Some((head, rest)) = self.0.split_first_chunk::<N>() else {
            return Err(DecodeError::Malformed {
                what: "body ends early",
            });
        };
        self.0 = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.take()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.take()?))
    }

    pub(crate) fn epoch(&mut self) -> Result<Epoch, DecodeError> {
        Ok(Epoch::from_raw(self.u64()?))
    }

    fn id(&mut self) -> Result<NodeId, DecodeError> {
        Ok(NodeId(self.u64()?))
    }
}

fn put(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn unknown_kind() -> DecodeError {
    DecodeError::Malformed {
        what: "unknown message kind",
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new(*b"0123456789abcdef").unwrap()
    }

    #[test]
    fn a_frame_round_trips_and_its_layout_holds() {
        let env = Envelope {
            from: NodeId(7),
            to: NodeId(9),
            seq: 3,
            message: bully::Message::Coordinator {
                epoch: Epoch::new(2, 1).unwrap(),
            },
        };
        let frame = encode(&secret(), &env).unwrap();
        assert_eq!(frame.len(), 4 + HEADER_LEN + 8 + TAG_LEN);
        assert_eq!(
            frame_len(frame[..4].try_into().unwrap()),
            Ok(frame.len() - 4)
        );
        assert_eq!((frame[4], frame[5], frame[6]), (VERSION, 2, 3));
        assert_eq!(decode::<bully::Message>(&secret(), &frame), Ok(env));
    }

    #[test]
    fn forged_and_misdirected_frames_are_refused() {
        let env = Envelope {
            from: NodeId(1),
            to: NodeId(2),
            seq: 0,
            message: ring::Message::Heartbeat {
                epoch: Epoch::new(1, 0).unwrap(),
            },
        };
        let frame = encode(&secret(), &env).unwrap();
        let other = Secret::new(*b"fedcba9876543210").unwrap();
        assert_eq!(
            decode::<ring::Message>(&other, &frame),
            Err(DecodeError::Unauthenticated)
        );
        let mut redirected = frame.clone();
        redirected[4 + 3 + 8 + 7] ^= 1;
        assert_eq!(
            decode::<ring::Message>(&secret(), &redirected),
            Err(DecodeError::Unauthenticated)
        );
        assert!(matches!(
            decode::<bully::Message>(&secret(), &frame),
            Err(DecodeError::Algorithm { .. })
        ));
        assert!(Secret::new(*b"short").is_err());
        assert_eq!(format!("{:?}", secret()), "Secret(..)");
    }

    #[test]
    fn a_goodbye_is_framed_and_authenticated_like_a_message() {
        let goodbye = Envelope {
            from: NodeId(3),
            to: NodeId(1),
            seq: 1_700_000_000_000_000,
            message: Payload::<bully::Message>::Goodbye,
        };
        let frame = encode(&secret(), &goodbye).unwrap();
        assert_eq!(frame.len(), 4 + HEADER_LEN + TAG_LEN, "empty body");
        assert_eq!((frame[5], frame[6]), (2, GOODBYE_KIND));
        assert_eq!(decode(&secret(), &frame), Ok(goodbye.clone()));
        assert!(matches!(
            decode::<bully::Message>(&secret(), &frame),
            Err(DecodeError::Malformed { .. })
        ));
        assert!(matches!(
            decode::<Payload<ring::Message>>(&secret(), &frame),
            Err(DecodeError::Algorithm { .. })
        ));
        let other = Secret::new(*b"fedcba9876543210").unwrap();
        assert_eq!(
            decode::<Payload<bully::Message>>(&other, &frame),
            Err(DecodeError::Unauthenticated)
        );
        // A wrapped message keeps its kind byte and its body.
        let message = Envelope {
            message: Payload::Message(bully::Message::Heartbeat {
                epoch: Epoch::new(3, 2).unwrap(),
            }),
            ..goodbye
        };
        let frame = encode(&secret(), &message).unwrap();
        assert_eq!(frame[6], 4);
        assert_eq!(decode(&secret(), &frame), Ok(message));
    }

    #[test]
    fn an_oversized_prefix_is_refused_before_reading() {
        assert!(matches!(
            frame_len(u32::MAX.to_be_bytes()),
            Err(DecodeError::Oversized { .. })
        ));
        assert!(matches!(
            frame_len(10u32.to_be_bytes()),
            Err(DecodeError::Undersized { .. })
        ));
        let too_many = ring::Message::Election {
            initiator: NodeId(1),
            election: ElectionId {
                incarnation: 0,
                number: 0,
            },
            epoch: Epoch::ZERO,
            ids: vec![NodeId(1); MAX_IDS + 1],
            hop: 0,
        };
        let env = Envelope {
            from: NodeId(1),
            to: NodeId(2),
            seq: 0,
            message: too_many,
        };
        assert!(matches!(
            encode(&secret(), &env),
            Err(EncodeError::TooLarge { .. })
        ));
    }
}
