//! What every message type that travels in a frame shares: the [`Wire`]
//! trait it implements, the [`Reader`] its body is parsed with, the
//! [`DecodeError`] that says why bytes are not an acceptable frame, and
//! the helpers the bodies are written and read with.

use crate::epoch::{Epoch, NodeId};

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
    /// The length prefix is over [`MAX_FRAME_LEN`](crate::codec::MAX_FRAME_LEN).
    #[error("frame of {len} bytes is over the maximum of {max}")]
    Oversized {
        /// The length announced.
        len: usize,
        /// [`MAX_FRAME_LEN`](crate::codec::MAX_FRAME_LEN).
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
    /// [`GOODBYE_KIND`](crate::codec::GOODBYE_KIND).
    fn encode_body(&self, out: &mut Vec<u8>) -> u8;

    /// Parses the body of kind `kind`.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Malformed`] for an unknown kind or a bad field.
    fn decode_body(kind: u8, body: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

/// Reads big-endian fields from a body, never past its end.
#[derive(Debug)]
pub struct Reader<'a>(pub(super) &'a [u8]);

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

    pub(super) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }

    pub(super) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.take()?))
    }

    pub(super) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take()?))
    }

    pub(super) fn bytes(&mut self, n: usize) -> Result<&[u8], DecodeError> {
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

    pub(super) fn id(&mut self) -> Result<NodeId, DecodeError> {
        Ok(NodeId(self.u64()?))
    }
}

pub(super) fn put(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(super) fn unknown_kind() -> DecodeError {
    DecodeError::Malformed {
        what: "unknown message kind",
    }
}
