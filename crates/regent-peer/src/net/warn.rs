//! Rate-limited warnings ([`WarnLimit`]): what peers or strangers send a
//! node is logged at most a few times per window, and the rest counted and
//! reported with the next warning.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How many warnings a node logs per [`WARN_WINDOW`] about what peers (or
/// strangers) send it; the rest are counted and reported with the next.
const WARNINGS_PER_WINDOW: u32 = 5;
const WARN_WINDOW: Duration = Duration::from_secs(10);

/// Rate-limits warnings that a stranger can cause, so a flood of garbage
/// cannot flood the log.
#[derive(Debug, Default)]
pub(super) struct WarnLimit(Mutex<WarnState>);

#[derive(Debug, Default)]
struct WarnState {
    window_start: Option<Instant>,
    in_window: u32,
    suppressed: u64,
}

impl WarnLimit {
    /// `Some(suppressed since the last warning)` if a warning may be
    /// logged now; `None` (and one more suppressed) if not.
    pub(super) fn admit(&self) -> Option<u64> {
        let now = Instant::now();
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if s.window_start
            .is_none_or(|t| now.saturating_duration_since(t) >= WARN_WINDOW)
        {
            s.window_start = Some(now);
            s.in_window = 0;
        }
        if s.in_window < WARNINGS_PER_WINDOW {
            s.in_window += 1;
            Some(std::mem::take(&mut s.suppressed))
        } else {
            s.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[tokio::test(start_paused = true)]
    async fn warnings_are_limited_per_window_and_report_what_they_suppressed() {
        let limit = WarnLimit::default();
        for _ in 0..WARNINGS_PER_WINDOW {
            assert_eq!(limit.admit(), Some(0));
        }
        assert_eq!(limit.admit(), None);
        assert_eq!(limit.admit(), None);
        tokio::time::advance(WARN_WINDOW).await;
        assert_eq!(limit.admit(), Some(2));
        assert_eq!(limit.admit(), Some(0));
    }
}
