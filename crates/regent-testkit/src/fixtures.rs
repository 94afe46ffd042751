//! Small constructors every store crate's tests need, so that each does not
//! write its own.

use std::time::Duration;

use regent_core::{AcquireRequest, ElectionName, HolderId, Metadata};

/// A holder id from a test's literal.
///
/// # Panics
///
/// If `name` is not a valid [`HolderId`].
pub fn holder(name: &str) -> HolderId {
    HolderId::new(name).expect("valid holder id")
}

/// An acquire request by `who` on `election`, publishing `who=<who>` as
/// metadata so that tests can check it is read back.
///
/// # Panics
///
/// If `who` is not a valid [`HolderId`].
pub fn acquire_request(election: &ElectionName, who: &str, ttl: Duration) -> AcquireRequest {
    AcquireRequest {
        election: election.clone(),
        holder: holder(who),
        ttl,
        metadata: Metadata::from_pairs([("who", who)]).expect("small metadata"),
    }
}
