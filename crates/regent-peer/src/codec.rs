//! The wire format: versioned, length-prefixed frames authenticated with
//! HMAC-SHA256 under a shared secret.
//!
//! ```text
//! offset  size  field
//!      0     4  length of everything after this field (big-endian u32)
//!      4     1  version (1)
//!      5     1  algorithm (1 lowest-ID, 2 Bully, 3 Ring, | 0x80 in quorum
//!               mode; 0 the view query)
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
//! # The view query (algorithm 0)
//!
//! Frames with algorithm byte 0 ([`CONTROL_ALGORITHM`], [`Control`]) are
//! the transport's view query, which every node reads whatever algorithm
//! it runs, so that a querier need not know it. They are framed and
//! authenticated like every other frame: only a holder of the secret can
//! ask, and only the node can answer.
//!
//! | kind | name  | body |
//! |-----:|-------|------|
//! |    1 | QUERY | `wait`: u32, milliseconds |
//! |    2 | VIEW  | below |
//!
//! A QUERY is from [`NodeId::ANY`] (a querier is no member) to the node's
//! id, or to [`NodeId::ANY`] for whichever node answers; its `seq` is the
//! querier's wall clock, as for every frame. A VIEW is from the node to
//! [`NodeId::ANY`], and its body:
//!
//! ```text
//! size  field
//!    8  query_seq: the seq of the QUERY answered
//!    8  node: the answering node's id
//!    1  algorithm: 1 lowest-ID, 2 Bully, 3 Ring; | 0x80 in quorum mode
//!    1  flags: 1 leader, 2 leading, 4 lease, 8 stopped (others zero)
//!    8  leader id      (zero without flag 1)
//!    8  leader epoch   (zero without flag 1)
//!    8  fencing token of the term this node leads (zero without flag 2)
//!    8  lease remaining, microseconds (zero without flag 4)
//!    4  members: how many the group has
//!    1  length of the election name (1-128)
//!    …  the election name (the characters of an `ElectionName`)
//! ```
//!
//! [`decode`] never panics, whatever the bytes: every malformed, oversized,
//! truncated or forged frame is a [`DecodeError`]. A stream reader reads
//! the 4-byte prefix, asks [`frame_len`] whether to read on, then reads
//! that many bytes.

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use regent_core::{ElectionName, FencingToken};
use sha2::Sha256;

use crate::algorithm::Algorithm;
use crate::epoch::{Epoch, Leader, NodeId};
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

/// The algorithm byte of the transport's view query ([`Control`]): no
/// algorithm uses it, and every node reads it.
pub const CONTROL_ALGORITHM: u8 = 0;

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

/// A frame of the transport's view query, under the algorithm byte
/// [`CONTROL_ALGORITHM`] (see the module docs for the layout).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Control {
    /// QUERY (kind 1): "send me your view". The node answers each with
    /// one VIEW on the same connection.
    Query {
        /// Answer once the view differs from the last one sent on this
        /// connection, or after `wait`, whichever comes first; the first
        /// query of a connection, and a zero `wait`, are answered at once.
        /// Whole milliseconds on the wire, at most `u32::MAX`; the node
        /// caps it (`net::MAX_QUERY_WAIT`, 30 s).
        wait: Duration,
    },
    /// VIEW (kind 2): the answer to one QUERY.
    View {
        /// The `seq` of the QUERY this answers: a querier takes no other
        /// (so a recorded answer cannot be passed off as a fresh one).
        query_seq: u64,
        /// The node's view.
        view: PeerView,
    },
}

/// A node's view of its group, as it answers a view query: who leads as
/// it sees it, whether it leads, and what it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerView {
    /// The answering node's id.
    pub node: NodeId,
    /// The name of the election the group runs (`regent peer --election`).
    pub election: ElectionName,
    /// The algorithm the group elects with.
    pub algorithm: Algorithm,
    /// Whether the group runs in quorum mode ([`Quorum`](crate::Quorum)).
    pub quorum: bool,
    /// How many members the group has, this node included.
    pub members: u32,
    /// The leader as this node sees it, with the epoch of its term; `None`
    /// while it knows of none.
    pub leader: Option<Leader>,
    /// The fencing token of the term this node leads, if it leads.
    pub leading: Option<FencingToken>,
    /// In quorum mode, while this node leads: how long its lease had to run
    /// when it answered (to microseconds).
    pub lease_remaining: Option<Duration>,
    /// The node is stopping: it leads nothing and knows no leader.
    pub stopped: bool,
}

impl PeerView {
    /// The view of a running node that knows no leader: not in quorum
    /// mode, no members counted; set the public fields for the rest.
    pub fn new(node: NodeId, election: ElectionName, algorithm: Algorithm) -> Self {
        Self {
            node,
            election,
            algorithm,
            quorum: false,
            members: 0,
            leader: None,
            leading: None,
            lease_remaining: None,
            stopped: false,
        }
    }
}

const KIND_QUERY: u8 = 1;
const KIND_VIEW: u8 = 2;
const FLAG_LEADER: u8 = 1;
const FLAG_LEADING: u8 = 2;
const FLAG_LEASE: u8 = 4;
const FLAG_STOPPED: u8 = 8;

impl Wire for Control {
    const ALGORITHM: u8 = CONTROL_ALGORITHM;

    fn encode_body(&self, out: &mut Vec<u8>) -> u8 {
        match self {
            Control::Query { wait } => {
                let ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX);
                out.extend_from_slice(&ms.to_be_bytes());
                KIND_QUERY
            }
            Control::View { query_seq, view } => {
                put(out, *query_seq);
                put(out, view.node.get());
                out.push(view.algorithm.wire(view.quorum));
                let flags = [
                    (view.leader.is_some(), FLAG_LEADER),
                    (view.leading.is_some(), FLAG_LEADING),
                    (view.lease_remaining.is_some(), FLAG_LEASE),
                    (view.stopped, FLAG_STOPPED),
                ]
                .iter()
                .filter(|(set, _)| *set)
                .fold(0, |flags, (_, bit)| flags | bit);
                out.push(flags);
                let (id, epoch) = view.leader.map_or((0, 0), |l| (l.id.get(), l.epoch.get()));
                put(out, id);
                put(out, epoch);
                put(out, view.leading.map_or(0, FencingToken::get));
                let lease = view
                    .lease_remaining
                    .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
                put(out, lease);
                out.extend_from_slice(&view.members.to_be_bytes());
                // An ElectionName is at most 128 bytes: the length fits.
                let name = view.election.as_str().as_bytes();
                out.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
                out.extend_from_slice(name);
                KIND_VIEW
            }
        }
    }

    fn decode_body(kind: u8, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let malformed = |what| DecodeError::Malformed { what };
        match kind {
            KIND_QUERY => Ok(Control::Query {
                wait: Duration::from_millis(u64::from(r.u32()?)),
            }),
            KIND_VIEW => {
                let query_seq = r.u64()?;
                let node = r.id()?;
                let (algorithm, quorum) =
                    Algorithm::from_wire(r.u8()?).ok_or_else(|| malformed("unknown algorithm"))?;
                let flags = r.u8()?;
                if flags & !(FLAG_LEADER | FLAG_LEADING | FLAG_LEASE | FLAG_STOPPED) != 0 {
                    return Err(malformed("unknown view flags"));
                }
                // A field whose flag is not set must be zero, so that one
                // view has one encoding.
                let field = |r: &mut Reader<'_>, flag: u8| -> Result<Option<u64>, DecodeError> {
                    let v = r.u64()?;
                    match (flags & flag != 0, v) {
                        (true, v) => Ok(Some(v)),
                        (false, 0) => Ok(None),
                        (false, _) => Err(malformed("a view field set without its flag")),
                    }
                };
                let leader_id = field(r, FLAG_LEADER)?;
                let leader_epoch = field(r, FLAG_LEADER)?;
                let leading = field(r, FLAG_LEADING)?.map(FencingToken::new);
                let lease_remaining = field(r, FLAG_LEASE)?.map(Duration::from_micros);
                let leader = leader_id.zip(leader_epoch).map(|(id, epoch)| Leader {
                    id: NodeId(id),
                    epoch: Epoch::from_raw(epoch),
                });
                let members = r.u32()?;
                let len = usize::from(r.u8()?);
                let name = r.bytes(len)?;
                let election = std::str::from_utf8(name)
                    .ok()
                    .and_then(|n| ElectionName::new(n).ok())
                    .ok_or_else(|| malformed("the election name is not a valid one"))?;
                Ok(Control::View {
                    query_seq,
                    view: PeerView {
                        node,
                        election,
                        algorithm,
                        quorum,
                        members,
                        leader,
                        leading,
                        lease_remaining,
                        stopped: flags & FLAG_STOPPED != 0,
                    },
                })
            }
            _ => Err(unknown_kind()),
        }
    }
}

/// The algorithm byte of a whole frame (length prefix included), read
/// without authenticating it: a receiver that reads more than one
/// [`Wire`] type (a node: its algorithm's frames and the view query) picks
/// the decoder with it, and the decoder then authenticates everything.
/// `None` for a frame too short to have one.
pub fn algorithm_of(frame: &[u8]) -> Option<u8> {
    frame.get(5).copied()
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

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take()?))
    }

    fn bytes(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if n > self.0.len() {
            return Err(DecodeError::Malformed {
                what: "body ends early",
            });
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
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

    fn view() -> PeerView {
        let mut view = PeerView::new(
            NodeId(2),
            ElectionName::new("billing").unwrap(),
            Algorithm::Bully,
        );
        view.quorum = true;
        view.members = 3;
        view.leader = Some(Leader {
            id: NodeId(2),
            epoch: Epoch::new(4, 1).unwrap(),
        });
        view.leading = Some(Epoch::new(4, 1).unwrap().token());
        view.lease_remaining = Some(Duration::from_micros(1_234_567));
        view
    }

    #[test]
    fn a_query_and_its_view_round_trip_under_the_control_algorithm() {
        let query = Envelope {
            from: NodeId::ANY,
            to: NodeId::ANY,
            seq: 1_700_000_000_000_000,
            message: Control::Query {
                wait: Duration::from_millis(5_000),
            },
        };
        let frame = encode(&secret(), &query).unwrap();
        assert_eq!(frame.len(), 4 + HEADER_LEN + 4 + TAG_LEN);
        assert_eq!((frame[5], frame[6]), (CONTROL_ALGORITHM, KIND_QUERY));
        assert_eq!(algorithm_of(&frame), Some(CONTROL_ALGORITHM));
        assert_eq!(decode(&secret(), &frame), Ok(query));
        // No algorithm's decoder takes it, nor the transport's payload.
        assert!(matches!(
            decode::<Payload<bully::Message>>(&secret(), &frame),
            Err(DecodeError::Algorithm { .. })
        ));

        let answer = Envelope {
            from: NodeId(2),
            to: NodeId::ANY,
            seq: 1_700_000_000_000_001,
            message: Control::View {
                query_seq: 1_700_000_000_000_000,
                view: view(),
            },
        };
        let frame = encode(&secret(), &answer).unwrap();
        let body = 8 + 8 + 1 + 1 + 4 * 8 + 4 + 1 + "billing".len();
        assert_eq!(frame.len(), 4 + HEADER_LEN + body + TAG_LEN);
        assert_eq!(frame[6], KIND_VIEW);
        let at = 4 + HEADER_LEN + 16;
        assert_eq!((frame[at], frame[at + 1]), (0x82, 1 | 2 | 4));
        assert_eq!(decode(&secret(), &frame), Ok(answer.clone()));
        let other = Secret::new(*b"fedcba9876543210").unwrap();
        assert_eq!(
            decode::<Control>(&other, &frame),
            Err(DecodeError::Unauthenticated)
        );

        // A view with nothing set: every optional field is zero.
        let bare = Envelope {
            message: Control::View {
                query_seq: 7,
                view: PeerView::new(NodeId(1), ElectionName::new("p").unwrap(), Algorithm::Ring),
            },
            ..answer
        };
        let frame = encode(&secret(), &bare).unwrap();
        assert_eq!(frame[at + 1], 0);
        assert_eq!(decode(&secret(), &frame), Ok(bare));
    }

    /// Signs `body` as a VIEW (or `kind`) frame, as a peer with the secret
    /// and a bug would.
    fn signed(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; 4];
        out.extend_from_slice(&[VERSION, CONTROL_ALGORITHM, kind]);
        out.extend_from_slice(&[0; 24]);
        out.extend_from_slice(body);
        let mut mac = secret().mac();
        mac.update(&out[4..]);
        out.extend_from_slice(&mac.finalize().into_bytes());
        let len = u32::try_from(out.len() - 4).unwrap();
        out[..4].copy_from_slice(&len.to_be_bytes());
        out
    }

    #[test]
    fn a_view_that_breaks_a_rule_is_malformed() {
        let good = {
            let mut out = Vec::new();
            Control::View {
                query_seq: 1,
                view: view(),
            }
            .encode_body(&mut out);
            out
        };
        assert!(decode::<Control>(&secret(), &signed(KIND_VIEW, &good)).is_ok());
        let malformed = |body: &[u8], what: &str| {
            assert_eq!(
                decode::<Control>(&secret(), &signed(KIND_VIEW, body)),
                Err(DecodeError::Malformed {
                    what: match what {
                        "algorithm" => "unknown algorithm",
                        "flags" => "unknown view flags",
                        "field" => "a view field set without its flag",
                        "name" => "the election name is not a valid one",
                        "short" => "body ends early",
                        _ => "bytes after the body",
                    }
                }),
                "{what}"
            );
        };
        let mut b = good.clone();
        b[16] = 4;
        malformed(&b, "algorithm");
        let mut b = good.clone();
        b[17] |= 16;
        malformed(&b, "flags");
        let mut b = good.clone();
        b[17] &= !4; // lease flag off, lease field still set
        malformed(&b, "field");
        let mut b = good.clone();
        let name_at = good.len() - "billing".len();
        b[name_at] = b'-';
        malformed(&b, "name");
        let mut b = good.clone();
        b[name_at - 1] = 0;
        b.truncate(name_at);
        malformed(&b, "name");
        malformed(&good[..good.len() - 1], "short");
        let mut b = good.clone();
        b.push(0);
        malformed(&b, "trailing");
        assert!(matches!(
            decode::<Control>(&secret(), &signed(3, &[])),
            Err(DecodeError::Malformed { .. })
        ));
        assert!(matches!(
            decode::<Control>(&secret(), &signed(KIND_QUERY, &[0, 0])),
            Err(DecodeError::Malformed { .. })
        ));
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
