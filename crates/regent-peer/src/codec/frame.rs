//! Frames: the version and the limits of the header, the shared [`Secret`]
//! that authenticates every frame, the [`Envelope`] a message travels in,
//! and [`encode`], [`frame_len`] and [`decode`] between envelopes and
//! bytes. The layout is in the [module docs](super).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::wire::{DecodeError, Reader, Wire};
use crate::epoch::NodeId;

/// The version this crate writes and reads.
pub const VERSION: u8 = 1;

/// The largest value of the length prefix accepted: 64 KiB.
pub const MAX_FRAME_LEN: usize = 64 * 1024;

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 16;

pub(super) const TAG_LEN: usize = 32;
pub(super) const HEADER_LEN: usize = 1 + 1 + 1 + 8 + 8 + 8;

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

    pub(super) fn mac(&self) -> Hmac<Sha256> {
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
