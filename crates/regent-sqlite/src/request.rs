//! A request to the connection thread: a closure on the connection,
//! whether it reads or writes, when it is due (how long it may wait for
//! others to join its batch), and its answer: the closure's result, or
//! why the batch gave it none. The thread that runs requests is
//! [`crate::conn`]'s; the transactions they run in, [`crate::batch`]'s.

use std::error::Error as StdError;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use regent_core::{ErrorKind, StoreError};
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::db::Site;
use crate::error::classify;

/// A request may wait in the thread's hands for others to join it at most
/// this share of its lease's ttl: see [`longest_wait`].
pub(crate) const WAIT_SHARE: u32 = 20;

/// The longest a request of a lease of `ttl` waits for the requests that
/// join it: the commit interval, but at most `ttl / WAIT_SHARE`.
///
/// Why a twentieth: with the candidates' defaults (a renewal every ttl/5,
/// a step-down 3·ttl/5 after the last renewal sent) a renewal has 2·ttl/5
/// from its send to the step-down, eight twentieths. A renewal cycle can
/// wait twice (an answer that comes late delays the next send; the next
/// renewal waits again): two twentieths, a quarter of that budget. The
/// other three quarters are left for the commits themselves (an fsync
/// each), a failed renewal's retry (ttl/20 later) and a loaded host. An
/// acquire also waits twice (its read, then its write): ttl/10, against a
/// campaign's attempt bound of 3·ttl/5. At the default ttl of 10 s the
/// share is 500 ms, so the default commit interval of 50 ms decides; it
/// starts to shorten the wait below a ttl of one second (20 × 50 ms).
/// Commits per second then stay bounded by `WAIT_SHARE / ttl` of the
/// shortest ttl in use, however many elections there are.
pub(crate) fn longest_wait(ttl: Duration, commit_interval: Duration) -> Duration {
    (ttl / WAIT_SHARE).min(commit_interval)
}

/// A source error shared by the answers of every request of a batch.
type SharedError = Arc<dyn StdError + Send + Sync>;

/// Why a request got no answer of its own.
#[derive(Clone)]
pub(crate) enum Failure {
    /// The batch's transaction failed as a whole: `why` says how.
    Batch {
        kind: ErrorKind,
        why: &'static str,
        source: Option<SharedError>,
    },
    /// The request's closure panicked; its work was rolled back.
    Panicked,
    /// The thread recovered from a panic (a bug) while the request was in
    /// hand, before it could answer; the transaction was rolled back.
    Recovered,
}

impl Failure {
    pub(crate) fn db(why: &'static str, e: rusqlite::Error) -> Self {
        Failure::Batch {
            kind: classify(&e),
            why,
            source: Some(Arc::new(e)),
        }
    }

    /// The error a caller gets: its own context (the operation, the
    /// election, the path), then what happened to the batch.
    pub(crate) fn into_error(self, context: String) -> StoreError {
        match self {
            Failure::Batch { kind, why, source } => {
                let e = StoreError::new(kind, format!("{context}: {why}"));
                match source {
                    Some(source) => e.with_source(source),
                    None => e,
                }
            }
            Failure::Panicked => StoreError::unavailable(format!(
                "{context}: the request panicked on the store's connection thread"
            )),
            Failure::Recovered => StoreError::unavailable(format!(
                "{context}: the store's connection thread recovered from a panic before it answered"
            )),
        }
    }
}

/// What a request's caller receives.
pub(crate) type Answer<T> = Result<Result<T, StoreError>, Failure>;

/// Whether a request reads or writes, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Only reads: runs in a read transaction, never waits for the write
    /// lock.
    Read,
    /// Changes rows in one statement at most, as its last step: runs in
    /// the batch's write transaction as it is (a savepoint would cost more
    /// than the statement). Should it fail after it changed rows all the
    /// same, the whole batch is rolled back and fails.
    WriteOne,
    /// Changes rows in several statements: runs in the batch's write
    /// transaction inside a savepoint of its own.
    Write,
}

/// One request: a closure on the connection and the caller's answer.
pub(crate) trait Request: Send {
    fn access(&self) -> Access;
    /// When a write should be committed at the latest: its send, plus its
    /// [`longest_wait`].
    fn due(&self) -> Instant;
    /// The caller has stopped waiting (its future was dropped).
    fn abandoned(&self) -> bool;
    /// Runs the closure and keeps its result for [`Request::answer`].
    fn run(&mut self, conn: &Connection, site: &Site) -> Ran;
    /// The error the closure returned, if it returned one.
    fn take_error(&mut self) -> Option<StoreError>;
    /// Sends the kept result.
    fn answer(self: Box<Self>);
    /// Sends `failure` instead of the kept result.
    fn fail(self: Box<Self>, failure: Failure);
}

/// How a request's closure ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ran {
    Ok,
    Failed,
    Panicked,
}

/// A [`Request`] made of a closure returning `T`.
pub(crate) struct Pending<T, F> {
    access: Access,
    due: Instant,
    op: Option<F>,
    result: Option<Answer<T>>,
    reply: oneshot::Sender<Answer<T>>,
}

impl<T, F> Pending<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection, &Site) -> Result<T, StoreError> + Send + 'static,
{
    /// A request due at `due` (see [`Request::due`]), and the receiver of
    /// its answer.
    pub(crate) fn request(
        access: Access,
        due: Instant,
        op: F,
    ) -> (Box<dyn Request>, oneshot::Receiver<Answer<T>>) {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            access,
            due,
            op: Some(op),
            result: None,
            reply,
        };
        (Box::new(pending), answer)
    }
}

impl<T, F> Request for Pending<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection, &Site) -> Result<T, StoreError> + Send + 'static,
{
    fn access(&self) -> Access {
        self.access
    }

    fn due(&self) -> Instant {
        self.due
    }

    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }

    fn run(&mut self, conn: &Connection, site: &Site) -> Ran {
        let Some(op) = self.op.take() else {
            return Ran::Failed;
        };
        let (result, ran) = match catch_unwind(AssertUnwindSafe(|| op(conn, site))) {
            Ok(Ok(v)) => (Ok(Ok(v)), Ran::Ok),
            Ok(Err(e)) => (Ok(Err(e)), Ran::Failed),
            Err(_) => (Err(Failure::Panicked), Ran::Panicked),
        };
        self.result = Some(result);
        ran
    }

    fn take_error(&mut self) -> Option<StoreError> {
        match self.result.take() {
            Some(Ok(Err(e))) => Some(e),
            other => {
                self.result = other;
                None
            }
        }
    }

    fn answer(self: Box<Self>) {
        let Pending { result, reply, .. } = *self;
        // A request that never ran was abandoned: nobody waits for it.
        if let Some(result) = result {
            let _ = reply.send(result);
        }
    }

    fn fail(self: Box<Self>, failure: Failure) {
        let _ = self.reply.send(Err(failure));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait bound: the commit interval at the default ttl, a twentieth
    /// of the ttl below 20 intervals, down to the store's minimum ttl.
    #[test]
    fn a_request_waits_at_most_a_twentieth_of_its_ttl() {
        let interval = Duration::from_millis(50);
        let wait = |ms| longest_wait(Duration::from_millis(ms), interval);
        assert_eq!(wait(10_000), interval);
        assert_eq!(wait(1_000), interval);
        assert_eq!(wait(100), Duration::from_millis(5));
        assert_eq!(wait(10), Duration::from_micros(500));
        assert_eq!(
            longest_wait(Duration::from_millis(100), Duration::ZERO),
            Duration::ZERO
        );
    }
}
