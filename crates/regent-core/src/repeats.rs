//! Failures that repeat are logged once per cause per interval, with a
//! count, not once per attempt: a store that is down for a minute under 50
//! candidates is a handful of warnings, not thousands of lines of the same
//! transport error.
//!
//! The cause is the innermost error's words (the client library's: the
//! same for every election of a store that cannot be reached); the count
//! covers every candidate and observer of the process. What is held back
//! is still logged at debug level. A front end that retries a store itself
//! (the CLI while it opens one) asks [`warn_now`] too, so that its
//! warnings join the same count:
//!
//! ```
//! use regent_core::{ErrorKind, StoreError};
//!
//! let e = StoreError::new(ErrorKind::Unavailable, "connection refused");
//! match regent_core::repeats::warn_now(&e) {
//!     Some(0) => tracing::warn!(error = %e, "store unavailable; retrying"),
//!     Some(n) => tracing::warn!(error = %e, "store unavailable; retrying ({n} more since the last warning)"),
//!     None => tracing::debug!(error = %e, "store unavailable; retrying"),
//! }
//! ```

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::StoreError;

/// At most one warning per cause in this long.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// Causes seen in the last interval, and how often each was held back.
pub(crate) struct Repeats {
    every: Duration,
    seen: Mutex<HashMap<String, Seen>>,
}

struct Seen {
    logged_at: Instant,
    held_back: u64,
}

/// The process's.
static PROCESS: LazyLock<Repeats> = LazyLock::new(|| Repeats::new(INTERVAL));

/// Whether to warn of `e` now: `Some(n)` with the number of failures of
/// the same cause (the innermost error's words and the kind), anywhere in
/// the process, held back since the last warning; `None` to hold it back
/// (log it at debug level). At most one `Some` per cause per [`INTERVAL`].
pub fn warn_now(e: &StoreError) -> Option<u64> {
    PROCESS.note(&cause(e))
}

/// A transient failure of an observer's watch of `election`, logged as
/// [`warn_now`] says.
pub(crate) fn log_watch_failure(election: &crate::ElectionName, e: &StoreError) {
    match warn_now(e) {
        Some(0) => {
            tracing::warn!(%election, error = %crate::report(e), "watching the leader failed; retrying");
        }
        Some(held_back) => tracing::warn!(
            %election, error = %crate::report(e), held_back,
            "watching the leader failed; retrying (and {held_back} times more of this cause, in this process, since the last warning)"
        ),
        None => {
            tracing::debug!(%election, error = %crate::report(e), "watching the leader failed; retrying");
        }
    }
}

/// The innermost error's words; the error's own if it has no source.
fn cause(e: &StoreError) -> String {
    let mut inner: &dyn std::error::Error = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    format!("{:?}: {inner}", e.kind())
}

impl Repeats {
    pub(crate) fn new(every: Duration) -> Self {
        Self {
            every,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Notes a failure of `cause`; see [`warn_now`].
    pub(crate) fn note(&self, cause: &str) -> Option<u64> {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() > 1_000 {
            // Causes not seen for a while are forgotten.
            seen.retain(|_, s| now.saturating_duration_since(s.logged_at) < self.every * 6);
        }
        match seen.get_mut(cause) {
            Some(s) if now.saturating_duration_since(s.logged_at) < self.every => {
                s.held_back += 1;
                None
            }
            Some(s) => {
                let held_back = s.held_back;
                *s = Seen {
                    logged_at: now,
                    held_back: 0,
                };
                Some(held_back)
            }
            None => {
                seen.insert(
                    cause.to_owned(),
                    Seen {
                        logged_at: now,
                        held_back: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[tokio::test(start_paused = true)]
    async fn once_per_cause_per_interval_with_a_count() {
        let r = Repeats::new(INTERVAL);
        assert_eq!(r.note("refused"), Some(0), "the first is logged");
        for _ in 0..49 {
            assert_eq!(r.note("refused"), None);
        }
        assert_eq!(r.note("timed out"), Some(0), "another cause at once");
        tokio::time::advance(INTERVAL).await;
        assert_eq!(r.note("refused"), Some(49), "then with the count");
        assert_eq!(r.note("refused"), None);
    }

    #[test]
    fn the_cause_is_the_innermost_error_whatever_the_election() {
        let e = |election: &str| {
            StoreError::unavailable(format!("acquire election '{election}'"))
                .with_source(std::io::Error::other("connection refused"))
        };
        assert_eq!(cause(&e("a")), cause(&e("b")));
        assert_ne!(
            cause(&StoreError::new(ErrorKind::Auth, "x")),
            cause(&StoreError::new(ErrorKind::Auth, "y"))
        );
    }
}
