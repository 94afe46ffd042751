//! [`Supervisor`] and what its leader task gets. What a user needs to know
//! is on [`Supervisor`] and [`Restart`] (private modules' docs do not reach
//! rustdoc).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt as _;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::backoff::Backoff;
use crate::election::Election;
use crate::error::{BoxError, CampaignError, ConfigError};
use crate::events::EndReason;
use crate::leadership::{LeaseState, ProclaimError};
use crate::types::{FencingToken, LeaderInfo, Metadata};

/// When the supervisor campaigns again after a term ends.
///
/// The policy is **per instance**, not per fleet: each process's
/// [`Supervisor`] applies it to its own terms, and nothing about it is
/// shared through the store. A task that returns `Ok` under
/// [`OnFailure`](Self::OnFailure) ends *that* instance's supervision and
/// resigns the lease; the next instance to lead runs the task again. With
/// three instances a one-shot job then runs three times, once per
/// instance; [`Never`](Self::Never) gives the same count.
///
/// For "one instance runs this job, once, across the fleet", the job's
/// completion must live where every instance sees it: record it in the
/// resource the job works on, under the term's fencing token, and have the
/// task check that record first and return at once when the job is done.
/// A stale leader's late "done" is then refused by the token check like any
/// other write. The facade's example `one_shot_job`
/// (`crates/regent/examples/one_shot_job.rs`) shows the pattern with
/// `OnFailure`: every instance exits once the job is done, by whichever
/// instance did it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Restart {
    /// After every term, however it ended (until shutdown).
    #[default]
    Always,
    /// After a term whose task failed or whose leadership ended first
    /// (lost, deadline passed, unhealthy); a task that returns `Ok` ends
    /// this instance's supervision.
    OnFailure,
    /// Never: this instance's supervision ends with its first term.
    Never,
}

/// What the leader task gets: its fencing token, a cancellation token that
/// fires when leadership ends, and a heartbeat for the health watchdog.
#[derive(Debug, Clone)]
pub struct LeaderContext {
    info: LeaderInfo,
    cancel: CancellationToken,
    heartbeat: Heartbeat,
    lease: watch::Receiver<LeaseState>,
    herald: crate::leadership::Herald,
}

impl LeaderContext {
    /// The fencing token of this term: pass it with every write.
    pub fn token(&self) -> FencingToken {
        self.info.token
    }

    /// This leader as followers see it.
    pub fn info(&self) -> &LeaderInfo {
        &self.info
    }

    /// Fires when leadership ends; the task must then stop within `grace`.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Completes when leadership ends.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// The heartbeat to call while making progress.
    pub fn heartbeat(&self) -> &Heartbeat {
        &self.heartbeat
    }

    /// The lease's timing state (local deadline), updated on renewals.
    pub fn lease_state(&self) -> watch::Receiver<LeaseState> {
        self.lease.clone()
    }

    /// Publishes new metadata for this term without ending it; see
    /// [`Leadership::proclaim`](crate::Leadership::proclaim).
    ///
    /// # Errors
    ///
    /// As [`Leadership::proclaim`](crate::Leadership::proclaim).
    pub async fn proclaim(&self, metadata: Metadata) -> Result<(), ProclaimError> {
        self.herald.proclaim(metadata).await
    }

    /// The metadata this leader publishes now.
    pub fn metadata(&self) -> Metadata {
        self.herald.metadata()
    }
}

/// A leader task's sign of life. With a health timeout set, a task that does
/// not [`beat`](Self::beat) for that long makes its leader step down.
#[derive(Debug, Clone)]
pub struct Heartbeat(std::sync::Arc<watch::Sender<Instant>>);

impl Heartbeat {
    fn new() -> Self {
        Self(std::sync::Arc::new(watch::Sender::new(Instant::now())))
    }

    /// Reports progress now.
    pub fn beat(&self) {
        self.0.send_replace(Instant::now());
    }

    fn last(&self) -> Instant {
        *self.0.borrow()
    }
}

/// How one leadership term ended.
#[derive(Debug)]
#[non_exhaustive]
pub enum TermOutcome {
    /// The task returned `Ok`; the lease was resigned.
    TaskSucceeded,
    /// The task returned an error; the lease was resigned.
    TaskFailed(BoxError),
    /// Leadership ended first (lost, deadline, shutdown, unhealthy task); the
    /// task was cancelled.
    LeadershipEnded(EndReason),
    /// The task panicked; the supervisor caught the panic (see
    /// [Panics](Supervisor#panics)), the term's cancellation token fired and
    /// the lease was resigned at once, unless leadership had already ended
    /// ([`TaskPanic::ended_first`]). A failure for the [`Restart`] policy.
    TaskPanicked(TaskPanic),
}

/// A leader task's panic, caught by the [`Supervisor`]: what ended the term
/// ([`TermOutcome::TaskPanicked`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskPanic {
    message: String,
    ended_first: Option<EndReason>,
}

impl TaskPanic {
    fn new(payload: &(dyn Any + Send), ended_first: Option<EndReason>) -> Self {
        let message = if let Some(s) = payload.downcast_ref::<&'static str>() {
            (*s).to_owned()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_owned()
        };
        Self {
            message,
            ended_first,
        }
    }

    /// The panic's message (what `panic!` was given), or `non-string panic
    /// payload` when the payload was neither a `&str` nor a `String`.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Why leadership had already ended when the task panicked (the task
    /// was in its grace after cancellation); `None` when the task panicked
    /// while leading.
    pub fn ended_first(&self) -> Option<EndReason> {
        self.ended_first
    }
}

impl fmt::Display for TaskPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ended_first {
            None => write!(f, "leader task panicked: {}", self.message),
            Some(reason) => write!(
                f,
                "leader task panicked in its grace after leadership ended ({reason}): {}",
                self.message
            ),
        }
    }
}

impl std::error::Error for TaskPanic {}

/// One leadership term.
#[derive(Debug)]
pub struct Term {
    /// The term's fencing token.
    pub token: FencingToken,
    /// How it ended.
    pub outcome: TermOutcome,
    /// Whether the task stopped (returned or panicked) within `grace` after
    /// cancellation (always true when the task ended first).
    pub stopped_in_grace: bool,
}

impl Term {
    fn is_failure(&self) -> bool {
        !matches!(self.outcome, TermOutcome::TaskSucceeded)
    }

    /// Why leadership ended before the task did, if it did.
    fn ended_first(&self) -> Option<EndReason> {
        match &self.outcome {
            TermOutcome::LeadershipEnded(reason) => Some(*reason),
            TermOutcome::TaskPanicked(panic) => panic.ended_first,
            _ => None,
        }
    }
}

/// Why [`Supervisor::run`] returned.
#[derive(Debug)]
#[non_exhaustive]
pub enum SupervisorExit {
    /// The candidate was shut down.
    Shutdown,
    /// The restart policy ended supervision after this term.
    Finished(Term),
}

/// Runs a leader task only while leading: the Leader Election pattern's
/// "run a task when the mutex is acquired".
///
/// A supervisor campaigns with its [`Candidate`](crate::Candidate). Each time it wins it
/// starts a *term*: it calls the task with a [`LeaderContext`] (the term's
/// fencing token, a cancellation token, a [`Heartbeat`]) and makes whichever
/// ends first, the task or the lease, end the other:
///
/// * **The lease ends first** (lost, not renewed by the renew deadline, the
///   candidate shut down, the health watchdog below): the context's
///   cancellation token fires, [`LeaderContext::cancelled`] completes, and
///   the task has [`Timing::grace`](crate::Timing::grace) to return; then
///   it is dropped. The lease is released only after the task has stopped
///   or been dropped, never while it may still write.
/// * **The task ends first** (`Ok`, `Err`, or a panic: see
///   [Panics](#panics)): the lease is resigned at once. This candidate's
///   next campaign first leaves the election to the followers that are
///   waiting, so a finished task hands over to one of them instead of
///   winning again ([`Candidate::campaign`](crate::Candidate::campaign)
///   says for how long).
///
/// With a [health timeout](Self::health_timeout), a task that stops calling
/// [`Heartbeat::beat`] for that long makes its leader step down instead of
/// renewing the lease for ever.
///
/// After each term the [`Restart`] policy (per instance) decides whether
/// to campaign again; [`run`](Self::run) returns how supervision ended
/// ([`SupervisorExit`]). Stop a service with [`run_until`](Self::run_until)
/// and a signal (the facade's `regent::shutdown_signal()`): the lease is
/// then given back and a follower leads at once, not a ttl later.
///
/// ```
/// # use std::time::Duration;
/// # use regent_core::{BoxError, Candidate, ElectionName, HolderId, Restart, Supervisor, SupervisorExit, memory::MemoryStore};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let candidate = Candidate::builder(
///     MemoryStore::race(),
///     ElectionName::new("billing")?,
///     HolderId::new("host-a")?,
/// )
/// .build()?;
/// let exit = Supervisor::new(candidate)
///     .restart(Restart::Never)
///     .run(|leader| async move {
///         let token = leader.token(); // pass it with every write
///         tokio::select! {
///             () = leader.cancelled() => {} // leadership ended: stop now
///             () = tokio::time::sleep(Duration::from_secs(1)) => {} // the work
///         }
///         # let _ = token;
///         Ok::<_, BoxError>(())
///     })
///     .await?;
/// assert!(matches!(exit, SupervisorExit::Finished(_)));
/// # Ok(()) }
/// ```
///
/// # Panics
///
/// The task is not spawned: the supervisor calls it and polls its future
/// inline, on the task that awaits [`run`](Self::run) (which is why the
/// task needs neither `Send` nor `'static`). A panic in the task (in the
/// call, while it leads, in its grace after cancellation, or when it is
/// dropped) does not unwind into the caller: the supervisor catches it at
/// the poll boundary, as tokio does for a spawned task, and the term ends
/// like a failed one:
///
/// * the context's cancellation token fires and the lease is resigned at
///   once, so a follower leads a few round trips later, not a ttl later
///   (if leadership had already ended, the lease goes as that end allows);
/// * the term's outcome is [`TermOutcome::TaskPanicked`], carrying the
///   panic's message, and an `error` event with the election, holder and
///   token is logged (the panic hook runs first, as for any panic: the
///   default one prints the message to stderr);
/// * the [`Restart`] policy counts it as a failure: `Always` and
///   `OnFailure` campaign again after the failure backoff, `Never` returns
///   [`SupervisorExit::Finished`] with that term.
///
/// The process, and everything else in it, runs on. Rust's own limits
/// remain: with `panic = "abort"` in the build profile nothing can be
/// caught, the process dies and the lease expires by its ttl; a panic in a
/// `Drop` while the task's state unwinds from a first panic aborts the
/// process.
///
/// Do not wrap the work in `tokio::spawn` to isolate its panics: the
/// supervisor does that already, and a spawned task is cut off from the
/// term (dropping its `JoinHandle` does not stop it), so it would go on
/// writing after leadership ended and the lease went to another leader. If
/// you spawn work anyway, abort it when the context is cancelled and wait
/// for it before returning:
///
/// ```
/// # use std::time::Duration;
/// # use regent_core::{BoxError, Candidate, ElectionName, HolderId, Restart, Supervisor, memory::MemoryStore};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let candidate = Candidate::builder(MemoryStore::race(), ElectionName::new("billing")?, HolderId::new("a")?).build()?;
/// Supervisor::new(candidate)
///     .restart(Restart::Never)
///     .run(|leader| async move {
///         let token = leader.token();
///         let mut work = tokio::spawn(async move {
///             # let _ = token;
///             tokio::time::sleep(Duration::from_secs(1)).await; // the work, with `token`
///         });
///         tokio::select! {
///             () = leader.cancelled() => {
///                 // Leadership ended: the work must stop before the lease goes.
///                 work.abort();
///                 let _ = (&mut work).await;
///                 Ok(())
///             }
///             // A panic in the work comes back as a `JoinError`: a failed term.
///             done = &mut work => done.map_err(BoxError::from),
///         }
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Supervisor<C> {
    candidate: C,
    restart: Restart,
    health_timeout: Option<Duration>,
}

impl<C: Election> Supervisor<C> {
    /// A supervisor over `candidate` (a lease [`Candidate`](crate::Candidate), or any other
    /// [`Election`]), restarting always, with no watchdog.
    pub fn new(candidate: C) -> Self {
        Self {
            candidate,
            restart: Restart::Always,
            health_timeout: None,
        }
    }

    /// The restart policy.
    #[must_use]
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Step down when the task has not beaten its heartbeat for `timeout`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Zero`] for a zero timeout, [`ConfigError::TooLong`]
    /// for one over a day ([`MAX_TTL`](crate::MAX_TTL)).
    pub fn health_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        if timeout.is_zero() {
            return Err(ConfigError::Zero {
                what: "health timeout",
            });
        }
        if timeout > crate::MAX_TTL {
            return Err(ConfigError::TooLong {
                what: "health timeout",
                value: timeout,
                max: crate::MAX_TTL,
            });
        }
        self.health_timeout = Some(timeout);
        Ok(self)
    }

    /// The candidate.
    pub fn candidate(&self) -> &C {
        &self.candidate
    }

    /// Campaigns and runs `task` on every term, by the restart policy, until
    /// the candidate shuts down.
    ///
    /// # Panics
    ///
    /// Not from the task: `task` runs inline, on the task that awaits this
    /// call, and a panic in it is caught and ends its term
    /// ([`TermOutcome::TaskPanicked`]; see [Panics](Supervisor#panics)).
    /// Built with `panic = "abort"`, the process dies instead.
    ///
    /// # Errors
    ///
    /// A [`CampaignError`] other than shutdown ends supervision.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a dropped run drops the task and its leadership (the
    /// lease is then released in the background). Use
    /// [`Candidate::shutdown`](crate::Candidate::shutdown) to stop.
    pub async fn run<F, Fut, E>(&self, mut task: F) -> Result<SupervisorExit, CampaignError>
    where
        F: FnMut(LeaderContext) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Into<BoxError>,
    {
        let timing = *self.candidate.timing();
        // Failed terms that end quickly must not make a hot loop of
        // acquire, fail, release.
        let mut backoff = Backoff::new(
            (timing.retry_every / 20).max(Duration::from_millis(1)),
            timing.ttl,
        );
        loop {
            let term = match self.candidate.campaign().await {
                Ok(leadership) => {
                    let started = Instant::now();
                    let term = self.run_term(leadership, &mut task).await;
                    if started.elapsed() >= timing.ttl {
                        backoff.reset();
                    }
                    term
                }
                Err(CampaignError::Shutdown) => return Ok(SupervisorExit::Shutdown),
                Err(e) => return Err(e),
            };
            if term.ended_first() == Some(EndReason::Shutdown)
                || self.candidate.shutdown_token().is_cancelled()
            {
                return Ok(SupervisorExit::Shutdown);
            }
            let again = match self.restart {
                Restart::Always => true,
                Restart::OnFailure => term.is_failure(),
                Restart::Never => false,
            };
            if !again {
                self.candidate.finished();
                return Ok(SupervisorExit::Finished(term));
            }
            if term.is_failure() {
                let delay = backoff.next_delay();
                tracing::debug!(?delay, "term failed; campaigning again after a backoff");
                tokio::select! {
                    () = self.candidate.shutdown_token().cancelled_owned() => return Ok(SupervisorExit::Shutdown),
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }

    /// [`run`](Self::run) until `shutdown` completes (a signal, say), then
    /// shut down gracefully: the leader's task is cancelled and gets its
    /// grace, the lease is given back at once so that a follower takes over
    /// without waiting out the ttl, and this returns
    /// [`SupervisorExit::Shutdown`] once the release is done. Also returns
    /// when `run` would (a restart policy that ends, a permanent error); the
    /// candidate is shut down in every case.
    ///
    /// With the facade's `regent::shutdown_signal()` (SIGINT or SIGTERM) a
    /// service's graceful stop is one line:
    ///
    /// ```
    /// # use regent_core::{BoxError, Candidate, ElectionName, HolderId, Supervisor, memory::MemoryStore};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let candidate = Candidate::builder(MemoryStore::race(), ElectionName::new("billing")?, HolderId::new("a")?).build()?;
    /// # let signal = tokio::time::sleep(std::time::Duration::from_secs(30)); // regent::shutdown_signal()
    /// Supervisor::new(candidate)
    ///     .run_until(signal, |leader| async move {
    ///         // work with leader.token() until leader.cancelled() fires
    ///         leader.cancelled().await;
    ///         Ok::<_, BoxError>(())
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Panics
    ///
    /// As [`run`](Self::run): a panic in the task ends its term and does
    /// not reach the caller.
    ///
    /// # Errors
    ///
    /// As [`run`](Self::run).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, as [`run`](Self::run): a dropped call drops the
    /// task; the lease is then released in the background.
    pub async fn run_until<F, Fut, E>(
        &self,
        shutdown: impl Future<Output = ()>,
        task: F,
    ) -> Result<SupervisorExit, CampaignError>
    where
        F: FnMut(LeaderContext) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Into<BoxError>,
    {
        let run = self.run(task);
        tokio::pin!(run, shutdown);
        let result = tokio::select! {
            r = &mut run => r,
            () = &mut shutdown => {
                tracing::info!(
                    election = %self.candidate.election(), holder = %self.candidate.holder(),
                    "shutting down: stopping the leader's task and giving the lease back"
                );
                self.candidate.shutdown_token().cancel();
                run.await
            }
        };
        self.candidate.shutdown().await;
        result
    }

    async fn run_term<F, Fut, E>(&self, mut leadership: crate::Leadership, task: &mut F) -> Term
    where
        F: FnMut(LeaderContext) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Into<BoxError>,
    {
        let grace = self.candidate.timing().grace;
        let heartbeat = Heartbeat::new();
        let ctx = LeaderContext {
            info: leadership.info().clone(),
            cancel: leadership.cancellation(),
            heartbeat: heartbeat.clone(),
            lease: leadership.lease_state(),
            herald: leadership.herald(),
        };
        let token = ctx.token();
        // The task runs inline, on the caller's task; its panics are caught
        // here, at the poll boundary, as tokio catches a spawned task's.
        // The call is inside the future so that a panic of the call itself
        // is caught too. Boxed so that it can be dropped before the lease
        // is released.
        let mut fut = Box::pin(AssertUnwindSafe(async move { task(ctx).await }).catch_unwind());
        let caught = |payload: &(dyn Any + Send), leadership: &crate::Leadership| {
            TermOutcome::TaskPanicked(TaskPanic::new(
                payload,
                leadership.ended().map(|ended| ended.reason),
            ))
        };
        enum First<E> {
            Task(Result<(), E>),
            Panicked(TermOutcome),
            Lease(EndReason),
            EndedWithTask(EndReason),
            Unhealthy,
        }
        // Biased: a task that returns because leadership ended (its token
        // fired) must count as "leadership ended", not as a finished task.
        let first = tokio::select! {
            biased;
            ended = leadership.until_ended() => First::Lease(ended.reason),
            () = watchdog(&heartbeat, self.health_timeout) => First::Unhealthy,
            r = &mut fut => match (r, leadership.ended()) {
                (Err(payload), _) => First::Panicked(caught(&*payload, &leadership)),
                (Ok(_), Some(ended)) => First::EndedWithTask(ended.reason),
                (Ok(r), None) => First::Task(r),
            },
        };
        let (mut outcome, stopped_in_grace) = match first {
            First::Task(r) => {
                let outcome = match r {
                    Ok(()) => TermOutcome::TaskSucceeded,
                    Err(e) => TermOutcome::TaskFailed(e.into()),
                };
                (outcome, true)
            }
            First::Panicked(outcome) => (outcome, true),
            First::Lease(reason) => (TermOutcome::LeadershipEnded(reason), false),
            First::EndedWithTask(reason) => (TermOutcome::LeadershipEnded(reason), true),
            First::Unhealthy => {
                tracing::warn!(
                    election = %leadership.election(), holder = %leadership.holder(),
                    token = token.get(), "leader task silent past the health timeout; stepping down"
                );
                leadership.end(EndReason::Unhealthy);
                (TermOutcome::LeadershipEnded(EndReason::Unhealthy), false)
            }
        };
        let stopped_in_grace = stopped_in_grace
            || match tokio::time::timeout(grace, &mut fut).await {
                Ok(Ok(_)) => true,
                Ok(Err(payload)) => {
                    outcome = caught(&*payload, &leadership);
                    true
                }
                Err(_) => {
                    tracing::warn!(
                        election = %leadership.election(), holder = %leadership.holder(),
                        token = token.get(), ?grace, "leader task did not stop within grace; dropping it"
                    );
                    false
                }
            };
        // Only now, with the task stopped or dropped, may the lease go. A
        // panic in the task's drop (not during an unwind: that aborts) is
        // caught too, as tokio catches it when it drops an aborted task.
        if let Err(payload) = std::panic::catch_unwind(AssertUnwindSafe(move || drop(fut)))
            && !matches!(outcome, TermOutcome::TaskPanicked(_))
        {
            outcome = caught(&*payload, &leadership);
        }
        if let TermOutcome::TaskPanicked(panic) = &outcome {
            tracing::error!(
                election = %leadership.election(), holder = %leadership.holder(),
                token = token.get(), panic = %panic.message(), ended_first = ?panic.ended_first(),
                "leader task panicked; ending its term"
            );
        }
        let term = Term {
            token,
            outcome,
            stopped_in_grace,
        };
        if let Err(e) = leadership
            .finish(term.ended_first().unwrap_or(EndReason::Resigned))
            .await
        {
            tracing::warn!(token = token.get(), error = %crate::report(&e), "release failed; the lease expires by its ttl");
        }
        term
    }
}

/// Completes when the heartbeat has been silent for `timeout`; never without
/// a timeout.
async fn watchdog(heartbeat: &Heartbeat, timeout: Option<Duration>) {
    let Some(timeout) = timeout else {
        return std::future::pending().await;
    };
    loop {
        let last = heartbeat.last();
        sleep_until(last + timeout).await;
        if heartbeat.last() == last {
            return;
        }
    }
}
