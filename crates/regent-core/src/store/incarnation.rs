//! A store instance's own random identity.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};

/// 128 random bits in hex: the identity of one store instance, which a
/// store writes beside every term it wins, so that its next acquire can
/// tell a term of its own whose answer never came (it may take that one
/// over) from a term another process wrote under the same holder id (it
/// must never: that may be an older incarnation still leading). See
/// `retried_acquire_after_a_lost_answer_wins` in the conformance suite.
///
/// Each [`RandomState`] is keyed from the OS's randomness (once per
/// thread, then stepped), so two calls, in one process or in two, give
/// different values.
///
/// ```
/// let a = regent_core::store::incarnation();
/// let b = regent_core::store::incarnation();
/// assert_eq!(a.len(), 32);
/// assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
/// assert_ne!(a, b);
/// ```
pub fn incarnation() -> String {
    let draw = || {
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    };
    format!("{:016x}{:016x}", draw(), draw())
}
