//! [`SharedAttempt`]: a store's connection attempt, one at a time, in a
//! task of its own that every caller waiting for it shares.
//!
//! Why: a store that made its connection in the caller's future, under the
//! store's lock, could be wedged for good by one caller. A candidate keeps
//! its watch stream unpolled while it acquires; a watch whose read had
//! begun connecting again then held the lock, never to be polled, and
//! every later call of the store waited behind it (found by the PostgreSQL
//! store's fault tests; the ZooKeeper store had the same shape). Here the
//! attempt runs in a spawned task, bounded, and callers only wait for its
//! outcome: a caller dropped or left unpolled holds nothing.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{ErrorKind, StoreError};

/// A store's connection attempt, one at a time, in a task of its own that
/// every caller waiting for it shares.
///
/// Why: a store that made its connection in the caller's future, under
/// the store's lock, could be wedged for good by one caller — a candidate
/// keeps its watch stream unpolled while it acquires, and a watch whose
/// read had begun connecting again then held the lock. Here the attempt
/// runs in a spawned task, bounded, and callers only wait for its outcome:
/// a caller dropped or left unpolled holds nothing.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), regent_core::StoreError> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use regent_core::store::SharedAttempt;
///
/// let connecting: Arc<SharedAttempt<Arc<String>>> = Arc::new(SharedAttempt::new());
/// let connection = connecting
///     .join(|| None, Duration::from_secs(10), "connect to db:5432", || async {
///         Ok(Arc::new("a connection".to_owned())) // the store's own connect
///     })
///     .await?;
/// assert_eq!(*connection, "a connection");
/// # Ok(()) }
/// ```
pub struct SharedAttempt<T> {
    running: Mutex<Option<Outcome<T>>>,
}

/// An attempt's outcome: `None` while it runs.
type Outcome<T> = watch::Receiver<Option<Result<T, Failure>>>;

impl<T> std::fmt::Debug for SharedAttempt<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedAttempt").finish_non_exhaustive()
    }
}

impl<T> Default for SharedAttempt<T> {
    fn default() -> Self {
        Self {
            running: Mutex::new(None),
        }
    }
}

impl<T: Clone + Send + Sync + 'static> SharedAttempt<T> {
    /// No attempt yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// What `ready` has (checked under the attempt's lock, so that an
    /// attempt that has just ended is not repeated), or the outcome of the
    /// attempt running, or of `attempt()` started now in a task of its own
    /// and given `bound` in all. `what` names the attempt in its errors
    /// (`connect to ZooKeeper 127.0.0.1:2181`).
    ///
    /// Every caller waiting for one attempt gets its outcome; a failure
    /// keeps its kind and its words with their causes.
    ///
    /// # Errors
    ///
    /// The attempt's error; [`ErrorKind::Unavailable`] when it took longer
    /// than `bound` or its task ended without an answer.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, when an attempt is to start.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the call leaves the attempt running for the
    /// others, and its outcome where `ready` finds it if the attempt puts
    /// it there.
    pub async fn join<F>(
        &self,
        ready: impl FnOnce() -> Option<T>,
        bound: Duration,
        what: &str,
        attempt: impl FnOnce() -> F,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let mut outcome = {
            let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(ready) = ready() {
                return Ok(ready);
            }
            match running.as_ref() {
                Some(outcome) if outcome.borrow().is_none() => outcome.clone(),
                _ => {
                    let (done, outcome) = watch::channel(None);
                    let work = attempt();
                    let named = what.to_owned();
                    tokio::spawn(async move {
                        let result = match tokio::time::timeout(bound, work).await {
                            Ok(r) => r,
                            Err(_) => Err(StoreError::unavailable(format!(
                                "{named}: no answer within {bound:?}"
                            ))),
                        };
                        done.send_replace(Some(result.map_err(|e| Failure::of(&e))));
                    });
                    *running = Some(outcome.clone());
                    outcome
                }
            }
        };
        let ended = match outcome.wait_for(Option::is_some).await {
            Ok(ended) => ended.clone(),
            Err(_) => None,
        };
        match ended {
            Some(Ok(v)) => Ok(v),
            Some(Err(f)) => Err(StoreError::new(f.kind, f.text)),
            None => Err(StoreError::unavailable(format!(
                "{what}: the attempt ended without an answer"
            ))),
        }
    }
}

/// A failed attempt, as every caller that waited for it reports it: its
/// kind, and its words with their causes (the error itself is one
/// caller's).
#[derive(Clone, Debug)]
struct Failure {
    kind: ErrorKind,
    text: String,
}

impl Failure {
    fn of(e: &StoreError) -> Self {
        let full = crate::report(e).to_string();
        let prefix = format!("{}: ", e.kind());
        Self {
            kind: e.kind(),
            text: full.strip_prefix(&prefix).unwrap_or(&full).to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Callers waiting together share one attempt; a caller left unpolled
    /// mid-attempt holds nothing: another caller gets the outcome.
    #[tokio::test(start_paused = true)]
    async fn one_attempt_for_all_and_a_parked_caller_blocks_nobody() {
        let shared = Arc::new(SharedAttempt::<u32>::new());
        let started = Arc::new(AtomicUsize::new(0));
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let count = started.clone();
        let mut parked = Box::pin(shared.join(
            || None,
            Duration::from_secs(10),
            "connect",
            || {
                count.fetch_add(1, Ordering::SeqCst);
                async move {
                    let _ = wait.await;
                    Ok(7)
                }
            },
        ));
        // Polled into the attempt, then left there.
        assert!(futures_util::poll!(parked.as_mut()).is_pending());
        let other = {
            let shared = shared.clone();
            let count = started.clone();
            tokio::spawn(async move {
                shared
                    .join(
                        || None,
                        Duration::from_secs(10),
                        "connect",
                        || {
                            count.fetch_add(1, Ordering::SeqCst);
                            async { Ok(8) }
                        },
                    )
                    .await
            })
        };
        tokio::task::yield_now().await;
        go.send(()).unwrap();
        assert_eq!(other.await.unwrap().unwrap(), 7);
        assert_eq!(started.load(Ordering::SeqCst), 1);
        assert_eq!(parked.await.unwrap(), 7);
    }

    /// An attempt past its bound is unavailable, named; the next call
    /// starts a new one. A failure reaches every caller with its kind.
    #[tokio::test(start_paused = true)]
    async fn a_bound_and_failures() {
        let shared = SharedAttempt::<u32>::new();
        let err = shared
            .join(
                || None,
                Duration::from_secs(1),
                "connect to x",
                std::future::pending,
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert!(
            err.to_string()
                .contains("connect to x: no answer within 1s"),
            "{err}"
        );
        let err = shared
            .join(
                || None,
                Duration::from_secs(1),
                "connect to x",
                || async { Err(StoreError::new(ErrorKind::Auth, "refused")) },
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Auth);
        assert!(err.to_string().contains("refused"), "{err}");
        assert_eq!(
            shared
                .join(|| Some(3), Duration::from_secs(1), "x", || async { Ok(4) })
                .await
                .unwrap(),
            3
        );
    }
}
