//! What the transport carries: an algorithm's message or the transport's
//! own GOODBYE ([`Payload`], [`GOODBYE_KIND`]).

use super::wire::{DecodeError, Reader, Wire};

/// The message kind of the transport's GOODBYE ([`Payload::Goodbye`]).
/// No algorithm may use it.
pub const GOODBYE_KIND: u8 = 255;

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
