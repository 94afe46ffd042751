//! The one clock every regent process on a host shares: CLOCK_MONOTONIC.
//! tokio's `Instant` reads the same clock on Linux, so an instant can be
//! handed to another process (the shim) as raw nanoseconds.

use std::time::Duration;

use tokio::time::Instant;

pub(crate) use regent_proc::mono_ns;

/// `at` as CLOCK_MONOTONIC nanoseconds.
pub(crate) fn to_mono_ns(at: Instant) -> u64 {
    let now = Instant::now();
    let base = mono_ns();
    if at >= now {
        base.saturating_add(duration_ns(at - now))
    } else {
        base.saturating_sub(duration_ns(now - at))
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
