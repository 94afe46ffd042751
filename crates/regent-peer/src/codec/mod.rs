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
//!
//! [`NodeId::ANY`]: crate::NodeId::ANY

mod control;
mod frame;
mod messages;
mod payload;
#[cfg(test)]
mod tests;
pub(crate) mod wire;

pub use control::{CONTROL_ALGORITHM, Control, PeerView};
pub use frame::{
    EncodeError, Envelope, MAX_FRAME_LEN, MIN_SECRET_LEN, Secret, SecretTooShort, VERSION,
    algorithm_of, decode, encode, frame_len,
};
pub use payload::{GOODBYE_KIND, Payload};
pub use wire::{DecodeError, Reader, Wire};
