//! The bounds every ttl keeps, whatever the store: the timing rules
//! ([`Timing`](crate::Timing)) and the store contract
//! ([`StoreInfo`](crate::StoreInfo)) both hold ttls to them, so they live
//! here, below both.

use std::time::Duration;

/// The longest ttl accepted.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// The shortest ttl accepted (whatever the store allows): below it the
/// defaults derived from the ttl would round to nothing.
pub const MIN_TTL: Duration = Duration::from_millis(1);
