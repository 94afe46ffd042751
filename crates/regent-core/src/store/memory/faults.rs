//! What the memory store is told to do wrong: delays, failed and lost
//! calls, partitions, and the limits it poses with.

use std::collections::HashSet;
use std::time::Duration;

use crate::limits::MAX_TTL;
use crate::store::ExpirySlack;
use crate::types::HolderId;

#[derive(Debug)]
pub(super) struct Faults {
    pub(super) request_delay: Duration,
    pub(super) reply_delay: Duration,
    pub(super) fail_next: u32,
    pub(super) lose_next: u32,
    pub(super) lost_reply: LostReply,
    pub(super) partitioned: HashSet<HolderId>,
    pub(super) min_ttl: Duration,
    pub(super) max_ttl: Duration,
    pub(super) granted_ttl: Option<Duration>,
    pub(super) expiry_slack: ExpirySlack,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            request_delay: Duration::ZERO,
            reply_delay: Duration::ZERO,
            fail_next: 0,
            lose_next: 0,
            lost_reply: LostReply::Fail,
            partitioned: HashSet::new(),
            min_ttl: Duration::from_millis(1),
            max_ttl: MAX_TTL,
            granted_ttl: None,
            expiry_slack: ExpirySlack::NONE,
        }
    }
}

/// What becomes of an answer the store loses
/// ([`MemoryStore::lose_next_replies`](super::MemoryStore::lose_next_replies)). Either way the call took effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReply {
    /// The call fails as unavailable, as when the connection breaks after
    /// the store committed it.
    Fail,
    /// The call never answers, as when the answer is dropped on the way:
    /// only the caller's own timeout ends it.
    Hang,
}
