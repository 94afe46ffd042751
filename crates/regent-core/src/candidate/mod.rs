//! [`Candidate`]: campaigns for an election until it wins, following the
//! current leader through the store's watch while it waits. Its settings
//! are checked in [`builder`]; once it wins, a lease keeper (`keeper.rs`)
//! renews the lease behind the [`Leadership`] guard.

pub(crate) mod builder;
mod keeper;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::backoff::{Backoff, jitter};
use crate::error::{CampaignError, ErrorKind, StoreError};
use crate::events::{TermEvent, TermEvents};
use crate::leadership::{Leadership, TermStart};
use crate::status::Status;
use crate::store::{Acquire, AcquireRequest, LeaderStream, LeaseStore, Renewal};
use crate::timing::{Explanation, Timing};
use crate::types::{ElectionName, HolderId, LeaderInfo, Lease};
pub(crate) use keeper::{Choosing, sleep_until_some};
use keeper::{HandOver, LeaseKeeper};

/// One instance's bid for leadership of one election. Cheap to clone; clones
/// share the shutdown token, status channel and tasks.
///
/// ```
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_core::{Candidate, ElectionName, HolderId, memory::MemoryStore};
/// use std::time::Duration;
///
/// let candidate = Candidate::builder(
///     MemoryStore::race(),
///     ElectionName::new("billing-scheduler")?,
///     HolderId::new("host-a")?,
/// )
/// .ttl(Duration::from_secs(10))
/// .build()?;
/// let leadership = candidate.campaign().await?;
/// let token = leadership.token(); // pass it with every write
/// # let _ = token;
/// leadership.resign().await?;
/// # Ok(()) }
/// ```
pub struct Candidate<S> {
    core: Arc<Core<S>>,
}

impl<S> Clone for Candidate<S> {
    fn clone(&self) -> Self {
        Self {
            core: self.core.clone(),
        }
    }
}

impl<S> fmt::Debug for Candidate<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Candidate")
            .field("election", &self.core.req.election)
            .field("holder", &self.core.req.holder)
            .field("timing", &self.core.timing)
            .finish()
    }
}

/// A campaign's roster entry on a race store: refreshed by a task every
/// renew interval while the campaign runs, withdrawn when it leaves
/// without leading (dropped: the task stops).
struct Enrollment {
    stop: CancellationToken,
    won: Arc<AtomicBool>,
}

impl Enrollment {
    fn won(&self) {
        self.won.store(true, Ordering::Release);
    }
}

impl Drop for Enrollment {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What a candidate, its campaigns and its terms share.
struct Core<S> {
    store: Arc<S>,
    req: AcquireRequest,
    /// How it takes part in hand-overs.
    choosing: Choosing,
    timing: Timing,
    /// How often a follower retries while the store's watch is open, the
    /// store notifies ([`WatchMode::Notify`](crate::WatchMode::Notify)) and
    /// someone leads: the ttl, unless [`CandidateBuilder::retry_every`](crate::CandidateBuilder::retry_every) was
    /// set. The watch tells of the term's end then, and a retry is only a
    /// safety net; at the renew interval the idle followers' retries were
    /// most of a queue store's load (two requests each, every 2 s at the
    /// default ttl, per follower).
    watched_retry: Duration,
    give_up_after: Option<Duration>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    /// Campaigns running (each holds a token while its future lives), so
    /// that `shutdown` can wait for them to give back their places.
    campaigns: TaskTracker,
    status: Arc<watch::Sender<Status>>,
    /// Where the terms' events go ([`Candidate::events`]).
    events: TermEvents,
    /// Until when this candidate leaves a term it gave back to a follower
    /// that is waiting (see [`Candidate::campaign`]).
    hand_over: Arc<HandOver>,
}

/// Our place in line on a queue store, and when it was last kept alive.
struct Queued {
    lease: Lease,
    basis: Instant,
    next_renew: Instant,
}

/// A campaign's place in line, given back to the store when the campaign
/// leaves without leading — also when its future is dropped — so that the
/// line does not wait a ttl for a candidate that is gone.
struct QueueSlot<S: LeaseStore> {
    core: Arc<Core<S>>,
    queued: Option<Queued>,
}

impl<S: LeaseStore> std::ops::Deref for QueueSlot<S> {
    type Target = Option<Queued>;
    fn deref(&self) -> &Option<Queued> {
        &self.queued
    }
}

impl<S: LeaseStore> std::ops::DerefMut for QueueSlot<S> {
    fn deref_mut(&mut self) -> &mut Option<Queued> {
        &mut self.queued
    }
}

impl<S: LeaseStore> Drop for QueueSlot<S> {
    fn drop(&mut self) {
        if let Some(q) = self.queued.take() {
            let store = self.core.store.clone();
            let bound = self.core.timing.renew_deadline;
            spawn_tracked(&self.core, async move {
                let _ = timeout(bound, store.release(&q.lease)).await;
            });
        }
    }
}

/// An acquire in flight. Dropped before its answer was taken (timeout,
/// shutdown, or the campaign's future dropped), it is abandoned: whatever
/// it still wins is given back.
struct PendingAcquire<'a, S: LeaseStore> {
    candidate: &'a Candidate<S>,
    call: Option<tokio::task::JoinHandle<Result<Acquire, StoreError>>>,
    place: Option<Lease>,
}

impl<S: LeaseStore> Drop for PendingAcquire<'_, S> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            self.candidate.abandon(call, self.place.take());
        }
    }
}

/// Starts the term of a lease won by a request sent at `sent_at`: the
/// guard, kept by a [`LeaseKeeper`] on `timing` (the candidate's, with the
/// ttl the store granted when that was less: [`Timing::for_granted`]).
fn lead<S: LeaseStore>(
    core: &Core<S>,
    lease: Lease,
    info: LeaderInfo,
    sent_at: Instant,
    timing: Timing,
) -> Leadership {
    let keeper = LeaseKeeper {
        store: core.store.clone(),
        lease: lease.clone(),
        timing,
        won_at: sent_at,
        hand_over: core.hand_over.clone(),
        choosing: core.choosing,
        handing: keeper::Handing::default(),
    };
    Leadership::kept_by(
        keeper,
        TermStart {
            lease,
            info,
            timing,
            confirmed_at: sent_at,
            status: core.status.clone(),
            shutdown: core.shutdown.child_token(),
            events: core.events.clone(),
        },
        &core.tracker,
    )
}

/// Spawns `task` on the candidate's tracker (which `shutdown` waits for),
/// if a runtime is there to run it; without one (a runtime shutting down)
/// the lease it would have released expires by itself.
fn spawn_tracked<S>(core: &Core<S>, task: impl Future<Output = ()> + Send + 'static) {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        core.tracker.spawn_on(task, &handle);
    }
}

enum Wake {
    Retry,
    Shutdown,
}

fn timed_out(what: &str, election: &ElectionName, after: Duration) -> StoreError {
    StoreError::unavailable(format!(
        "{what} for election '{election}' got no answer within {after:?}"
    ))
}

impl<S: LeaseStore> Candidate<S> {
    /// Publishes `Stopped` (once).
    pub(crate) fn stopped(&self) {
        crate::status::publish(&self.core.status, Status::Stopped);
    }

    /// The validated timing.
    pub fn timing(&self) -> &Timing {
        &self.core.timing
    }

    /// The election.
    pub fn election(&self) -> &ElectionName {
        &self.core.req.election
    }

    /// This candidate's holder id.
    pub fn holder(&self) -> &HolderId {
        &self.core.req.holder
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.core.store
    }

    /// Worst-case failover and safety budget of this candidate's settings on
    /// its store, in numbers.
    pub fn explain(&self) -> Explanation {
        self.core.timing.explain(&self.core.store.info())
    }

    /// The candidate's status, published on every change and only then:
    /// `Starting`, then `Follower`/`Leader` as they change (a new leader, new
    /// metadata), and `Stopped` once, after [`shutdown`](Self::shutdown) or
    /// when a [`Supervisor`](crate::Supervisor)'s run ends by its restart
    /// policy.
    pub fn status(&self) -> watch::Receiver<Status> {
        self.core.status.subscribe()
    }

    /// The events of this candidate's terms from now on: won, confirmed,
    /// ended and why ([`TermEvent`]).
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<TermEvent> {
        self.core.events.subscribe()
    }

    /// The token that shuts this candidate down when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.core.shutdown.clone()
    }

    /// Shuts down: a campaign in progress returns
    /// [`CampaignError::Shutdown`], a leadership ends with
    /// [`EndReason::Shutdown`](crate::EndReason::Shutdown) and its lease is
    /// released. Waits for campaigns running in other tasks to end and give
    /// back their places in line (at most a renew deadline), then until
    /// every release has finished: each is bounded by the renew deadline,
    /// and one behind an acquire still in flight by the ttl on top.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: shutdown has begun once this is first polled.
    pub async fn shutdown(&self) {
        self.core.shutdown.cancel();
        // A campaign running in another task sees the cancellation, gives
        // back its place in line (a tracked task) and ends; wait for that
        // first. Bounded, because a campaign future that is alive but not
        // polled (held across this call in the same task) never ends.
        self.core.campaigns.close();
        let _ = timeout(self.core.timing.renew_deadline, self.core.campaigns.wait()).await;
        self.core.tracker.close();
        self.core.tracker.wait().await;
        crate::status::publish(&self.core.status, Status::Stopped);
    }

    /// Campaigns until this candidate leads, then returns the
    /// [`Leadership`] guard.
    ///
    /// After this candidate gave a term back (resigned, dropped its guard, a
    /// [`Supervisor`](crate::Supervisor)'s task finished), its next campaign
    /// first leaves the election to the followers that are waiting: on a
    /// race store it does not try to win until they have had time to notice
    /// the release and win (the store's poll interval, if it polls, plus a
    /// tenth of the ttl, at least 250 ms and at most 2 s), or until the
    /// watch shows that one of them leads; on a queue store it joins the end
    /// of the line. So a finished task hands over, and a lone candidate
    /// leads again after that pause.
    ///
    /// While another instance leads, the candidate follows it through the
    /// store's watch (published on [`status`](Self::status)) and tries again
    /// when the leader changes or goes, and every
    /// [`retry_every`](crate::CandidateBuilder::retry_every) in any case. Transient
    /// store errors are retried with exponential backoff and jitter. Run one
    /// campaign at a time per candidate.
    ///
    /// # Errors
    ///
    /// [`CampaignError::Shutdown`] on shutdown; [`CampaignError::Store`] for
    /// a permanent store error; [`CampaignError::Unavailable`] when
    /// `give_up_after` is set and the store failed for that long.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe as far as the store is concerned: a dropped campaign
    /// gives back its place in line, and whatever an acquire in flight
    /// still wins, in background tasks that [`shutdown`](Self::shutdown)
    /// waits for. (A dropped campaign does not set the status to
    /// [`Stopped`](Status::Stopped); `shutdown` does.)
    pub async fn campaign(&self) -> Result<Leadership, CampaignError> {
        let c = &*self.core;
        let t = c.timing;
        // Dropped last (locals drop in reverse order): after `queued` has
        // spawned its release.
        let _running = c.campaigns.token();
        let mut queued = QueueSlot {
            core: self.core.clone(),
            queued: None,
        };
        let enrollment = self.enroll();
        let mut watch: Option<Watching> = None;
        let mut backoff = Backoff::new(
            (t.retry_every / 20).clamp(Duration::from_millis(1), Duration::from_millis(100)),
            t.retry_every,
        );
        let mut failing_since: Option<Instant> = None;
        if matches!(*c.status.borrow(), Status::Starting | Status::Stopped) {
            crate::status::publish(&c.status, Status::Starting);
        }
        if let Some(until) = c.hand_over.take()
            && Instant::now() < until
        {
            tracing::debug!(
                election = %c.req.election, holder = %c.req.holder,
                wait = ?(until - Instant::now()), "gave a term back; leaving it to a waiting follower first"
            );
            tokio::select! {
                biased;
                () = c.shutdown.cancelled() => {}
                () = sleep_until(until) => {}
                () = self.another_holder_leads() => {}
            }
        }
        let result = 'campaign: loop {
            if c.shutdown.is_cancelled() {
                break Err(CampaignError::Shutdown);
            }
            let sent = Instant::now();
            let place = queued.as_ref().map(|q| q.lease.clone());
            // The call runs as a task so that, when we stop waiting for it
            // (timeout, shutdown), whatever it won can still be given back.
            let mut pending = PendingAcquire {
                candidate: self,
                call: Some(self.spawn_acquire(place.clone())),
                place: place.clone(),
            };
            enum Outcome {
                Done(Result<Acquire, StoreError>),
                TimedOut,
                Shutdown,
            }
            let outcome = tokio::select! {
                biased;
                () = c.shutdown.cancelled() => Outcome::Shutdown,
                r = timeout(
                    t.renew_deadline,
                    pending.call.as_mut().expect("an acquire in flight"),
                ) => match r {
                    Ok(Ok(r)) => Outcome::Done(r),
                    Ok(Err(join)) => Outcome::Done(Err(StoreError::new(
                        ErrorKind::Protocol,
                        format!("acquire task failed: {join}"),
                    ))),
                    Err(_) => Outcome::TimedOut,
                },
            };
            let attempt = match outcome {
                Outcome::Done(r) => {
                    // Answered: nothing to abandon.
                    pending.call = None;
                    r
                }
                Outcome::TimedOut => {
                    drop(pending);
                    Err(timed_out("acquire", &c.req.election, t.renew_deadline))
                }
                Outcome::Shutdown => {
                    drop(pending);
                    break Err(CampaignError::Shutdown);
                }
            };
            match attempt {
                Ok(Acquire::Won(lease)) => {
                    if lease.holder != c.req.holder || lease.election != c.req.election {
                        break Err(CampaignError::Store(StoreError::new(
                            ErrorKind::Protocol,
                            format!(
                                "store '{}' answered an acquire by '{}' with a lease of '{}' on '{}'",
                                c.store.info().name,
                                c.req.holder,
                                lease.holder,
                                lease.election
                            ),
                        )));
                    }
                    // A store that negotiates may grant less than asked:
                    // the holder's deadlines follow the granted ttl, and a
                    // lease too short for the timing rules is not led with.
                    let timing = match t.for_granted(lease.ttl) {
                        Ok(timing) => timing,
                        Err(rule) => {
                            tracing::warn!(
                                election = %c.req.election, holder = %c.req.holder,
                                token = lease.token.get(), asked = ?t.ttl, granted = ?lease.ttl,
                                "won, but the granted ttl is too short for the timing rules; releasing"
                            );
                            let _ = timeout(t.renew_deadline, c.store.release(&lease)).await;
                            *queued = None;
                            break Err(CampaignError::Store(
                                StoreError::new(
                                    ErrorKind::Config,
                                    format!(
                                        "store '{}' granted election '{}' a ttl of {:?} where {:?} was asked, and the timing rules do not hold with it: ask for a ttl the store grants in full",
                                        c.store.info().name,
                                        c.req.election,
                                        lease.ttl,
                                        t.ttl
                                    ),
                                )
                                .with_source(rule),
                            ));
                        }
                    };
                    if timing.ttl < t.ttl {
                        tracing::info!(
                            election = %c.req.election, holder = %c.req.holder,
                            token = lease.token.get(), asked = ?t.ttl, granted = ?lease.ttl,
                            "the store granted a shorter ttl; the local deadline follows it"
                        );
                    }
                    if Instant::now() >= t.step_down_at(sent) {
                        // The answer came too late to lead safely: give the
                        // lease back and try again.
                        tracing::warn!(
                            election = %c.req.election, holder = %c.req.holder,
                            "won, but the answer arrived after the renew deadline; releasing"
                        );
                        let _ = timeout(t.renew_deadline, c.store.release(&lease)).await;
                        *queued = None;
                        continue;
                    }
                    // The place in line, if any, is now the lease we lead
                    // with: not to be given back.
                    *queued = None;
                    // The roster entry lapses by its ttl; a leader needs
                    // none, and withdrawing would cost a write per term.
                    if let Some(e) = &enrollment {
                        e.won();
                    }
                    let info = LeaderInfo {
                        holder: lease.holder.clone(),
                        token: lease.token,
                        metadata: c.req.metadata.clone(),
                    };
                    return Ok(lead(&self.core, lease, info, sent, timing));
                }
                Ok(Acquire::Held {
                    leader,
                    queued: place,
                }) => {
                    failing_since = None;
                    backoff.reset();
                    *queued = match (place, queued.take()) {
                        (None, _) => None,
                        (Some(lease), Some(old)) if old.lease.token == lease.token => {
                            Some(Queued { lease, ..old })
                        }
                        (Some(lease), _) => Some(Queued {
                            lease,
                            basis: sent,
                            next_renew: sent + t.renew_every,
                        }),
                    };
                    tracing::debug!(
                        election = %c.req.election, holder = %c.req.holder,
                        leader = ?leader.as_ref().map(|l| l.holder.as_str()), "following"
                    );
                    crate::status::publish(
                        &c.status,
                        Status::Follower {
                            leader: leader.clone(),
                        },
                    );
                    // A watch tells of changes from what it told last.
                    // An acquire that learned of a leader the watch has
                    // not told (a term that began and may end between two
                    // of its looks) leaves it a step behind: a change back
                    // to what it told last, no leader, it would not tell
                    // again, and this follower would sleep through the
                    // release until its retry (a ttl on a store that
                    // notifies). A new watch starts from now (on a store
                    // that shares one watch per election, at no cost).
                    if watch
                        .as_ref()
                        .is_some_and(|w| w.told.as_ref().is_some_and(|told| *told != leader))
                    {
                        watch = None;
                    }
                    match self.wait_for_change(&mut watch, &leader, &mut queued).await {
                        Wake::Retry => {}
                        Wake::Shutdown => break Err(CampaignError::Shutdown),
                    }
                }
                Err(e) if e.is_transient() => {
                    let since = *failing_since.get_or_insert(sent);
                    if let Some(limit) = c.give_up_after {
                        let waited = Instant::now() - since;
                        if waited >= limit {
                            break Err(CampaignError::Unavailable { waited, last: e });
                        }
                    }
                    let delay = backoff.next_delay();
                    match crate::repeats::warn_now(&e) {
                        Some(0) => tracing::warn!(
                            election = %c.req.election, holder = %c.req.holder,
                            error = %crate::report(&e), retry_in = ?delay, "acquire failed"
                        ),
                        Some(held_back) => tracing::warn!(
                            election = %c.req.election, holder = %c.req.holder,
                            error = %crate::report(&e), retry_in = ?delay, held_back,
                            "acquire failed (and {held_back} times more of this cause, in this process, since the last warning)"
                        ),
                        None => tracing::debug!(
                            election = %c.req.election, holder = %c.req.holder,
                            error = %crate::report(&e), retry_in = ?delay, "acquire failed"
                        ),
                    }
                    // Keep our place in line alive while backing off.
                    let wake = Instant::now() + delay;
                    loop {
                        let renew_at = queued.as_ref().map(|q| q.next_renew);
                        tokio::select! {
                            biased;
                            () = c.shutdown.cancelled() => break 'campaign Err(CampaignError::Shutdown),
                            () = sleep_until(wake) => break,
                            () = sleep_until_some(renew_at) => {
                                self.keep_queued(&mut queued).await;
                            }
                        }
                    }
                }
                Err(e) => break Err(CampaignError::Store(e)),
            }
        };
        // Leaving without leadership: dropping `queued` takes our place out
        // of the line (a tracked task, so that shutdown waits for it).
        drop(queued);
        if matches!(result, Err(CampaignError::Shutdown)) {
            crate::status::publish(&c.status, Status::Stopped);
        }
        result
    }

    /// Starts one acquire as a tracked task, bounded by the ttl (after which
    /// anything it won has expired anyway).
    /// On a race store, when the candidate takes part in hand-overs: its
    /// roster entry while this campaign runs.
    fn enroll(&self) -> Option<Enrollment> {
        let c = &*self.core;
        if !c.choosing.on || c.store.info().style != crate::StoreStyle::Race {
            return None;
        }
        let stop = CancellationToken::new();
        let won = Arc::new(AtomicBool::new(false));
        let (store, req, t) = (c.store.clone(), c.req.clone(), c.timing);
        let (until, shutdown, leading) = (stop.clone(), c.shutdown.clone(), won.clone());
        spawn_tracked(c, async move {
            loop {
                match timeout(t.renew_deadline, store.enroll(&req)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::debug!(
                        election = %req.election, holder = %req.holder,
                        error = %crate::report(&e), "enrolling failed"
                    ),
                    Err(_) => tracing::debug!(
                        election = %req.election, holder = %req.holder, "enrolling timed out"
                    ),
                }
                tokio::select! {
                    biased;
                    () = until.cancelled() => break,
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(t.renew_every) => {}
                }
            }
            if !leading.load(Ordering::Acquire) {
                let _ = timeout(t.renew_deadline, store.withdraw(&req.election, &req.holder)).await;
            }
        });
        Some(Enrollment { stop, won })
    }

    fn spawn_acquire(
        &self,
        queued: Option<Lease>,
    ) -> tokio::task::JoinHandle<Result<Acquire, StoreError>> {
        let c = &*self.core;
        let store = c.store.clone();
        let req = c.req.clone();
        let ttl = c.timing.ttl;
        c.tracker.spawn(async move {
            match timeout(ttl, store.try_acquire(&req, queued.as_ref())).await {
                Ok(r) => r,
                Err(_) => Err(timed_out("acquire", &req.election, ttl)),
            }
        })
    }

    /// Stops waiting for an acquire: if it still wins, or queues a new
    /// place, give that back at once instead of leaving it to expire (and,
    /// meanwhile, following ourselves).
    fn abandon(
        &self,
        call: tokio::task::JoinHandle<Result<Acquire, StoreError>>,
        place: Option<Lease>,
    ) {
        let c = &*self.core;
        let store = c.store.clone();
        let bound = c.timing.renew_deadline;
        spawn_tracked(c, async move {
            // On a queue store a win or a place with our place's token *is*
            // our place, which the campaign still holds (and leads with, or
            // gives back itself): releasing it here could end a leadership
            // a later acquire won with it.
            let ours = |lease: &Lease| place.as_ref().is_some_and(|p| p.token == lease.token);
            let won = match call.await {
                Ok(Ok(Acquire::Won(lease))) if !ours(&lease) => Some(lease),
                Ok(Ok(Acquire::Held {
                    queued: Some(q), ..
                })) if !ours(&q) => Some(q),
                _ => None,
            };
            if let Some(lease) = won {
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                    "releasing what an abandoned acquire won"
                );
                let _ = timeout(bound, store.release(&lease)).await;
            }
        });
    }

    /// Waits until trying again makes sense: the watch shows a different
    /// leader (or none), `retry_every` passed, or our queued place was lost.
    /// Keeps the queued place alive meanwhile. On a queue store, with a
    /// place in line, a new leader other than us is no reason to try: our
    /// place is still behind it.
    async fn wait_for_change(
        &self,
        watch: &mut Option<Watching>,
        known: &Option<LeaderInfo>,
        queued: &mut Option<Queued>,
    ) -> Wake {
        let c = &*self.core;
        let t = c.timing;
        let queue = c.store.info().style == crate::StoreStyle::Queue;
        let mut known = known.clone();
        let start = Instant::now();
        // Polling retries at `retry_every`; an open watch of a store that
        // notifies, at `watched_retry`.
        let polled = start + jitter(t.retry_every);
        let watched = start + jitter(c.watched_retry);
        let mut watch_broken = false;
        loop {
            if watch.is_none() && !watch_broken {
                let opened = tokio::select! {
                    biased;
                    () = c.shutdown.cancelled() => return Wake::Shutdown,
                    r = timeout_at(polled, c.store.watch(&c.req.election)) => r,
                };
                match opened {
                    Ok(Ok(stream)) => *watch = Some(Watching { stream, told: None }),
                    Ok(Err(e)) => {
                        tracing::debug!(election = %c.req.election, error = %e, "watch failed; polling");
                        watch_broken = true;
                    }
                    Err(_) => return Wake::Retry,
                }
            }
            // Only while someone leads: the watch tells of that term's end.
            // With no leader and an acquire that still failed (Consul's
            // lock delay after a dead holder's session) nothing will change
            // in the store when the acquire could succeed, so the retry is
            // what notices.
            let retry_at = if watch.is_some() && known.is_some() {
                watched
            } else {
                polled
            };
            let renew_at = queued.as_ref().map(|q| q.next_renew);
            // The watch before the renewal: when both are ready, the news
            // of a hand-over must not wait for a renewal's round trips (the
            // acquire that follows keeps the place alive anyway).
            tokio::select! {
                biased;
                () = c.shutdown.cancelled() => return Wake::Shutdown,
                item = next_some(watch) => {
                    let in_line = queue && queued.is_some();
                    if self.seen(item, in_line, &mut known, watch, &mut watch_broken) {
                        return Wake::Retry;
                    }
                }
                () = sleep_until_some(renew_at) => {
                    // The renewal races the watch too: a store may answer
                    // renewals in rounds (a tenth of the ttl apart), and
                    // the next in line must not hear of its turn a round
                    // late. A renewal given up for an acquire is harmless:
                    // the acquire renews the place.
                    let in_line = queue;
                    let renewal = self.keep_queued(queued);
                    tokio::pin!(renewal);
                    loop {
                        tokio::select! {
                            biased;
                            () = c.shutdown.cancelled() => return Wake::Shutdown,
                            item = next_some(watch) => {
                                if self.seen(item, in_line, &mut known, watch, &mut watch_broken) {
                                    return Wake::Retry;
                                }
                            }
                            kept = &mut renewal => {
                                if !kept {
                                    return Wake::Retry;
                                }
                                break;
                            }
                        }
                    }
                }
                () = sleep_until(retry_at) => return Wake::Retry,
            }
        }
    }

    /// Takes in one item of the watch; whether it is a reason to try now:
    /// a leader other than `known`, unless we are `in_line` on a queue
    /// store behind another holder (an acquire would only say so again:
    /// with 1,000 candidates in line, 1,000 acquires per failover). An
    /// error or the end of the watch closes it: polling goes on.
    fn seen(
        &self,
        item: Option<Result<Option<LeaderInfo>, StoreError>>,
        in_line: bool,
        known: &mut Option<LeaderInfo>,
        watch: &mut Option<Watching>,
        watch_broken: &mut bool,
    ) -> bool {
        let c = &*self.core;
        match item {
            Some(Ok(leader)) => {
                let changed = leader != *known;
                let behind = in_line && leader.as_ref().is_some_and(|l| l.holder != c.req.holder);
                crate::status::publish(
                    &c.status,
                    Status::Follower {
                        leader: leader.clone(),
                    },
                );
                if changed && !behind {
                    return true;
                }
                *known = leader;
            }
            Some(Err(e)) => {
                tracing::debug!(election = %c.req.election, error = %e, "watch failed; polling");
                *watch = None;
                *watch_broken = true;
            }
            None => {
                *watch = None;
                *watch_broken = true;
            }
        }
        false
    }

    /// Returns once the store's watch shows a holder other than us leading:
    /// the term we gave back has gone to a follower. Never returns if the
    /// watch cannot be opened or ends (the caller's pause then runs out).
    async fn another_holder_leads(&self) {
        let c = &*self.core;
        if let Ok(mut stream) = c.store.watch(&c.req.election).await {
            while let Some(Ok(leader)) = stream.next().await {
                if leader.is_some_and(|l| l.holder != c.req.holder) {
                    return;
                }
            }
        }
        std::future::pending().await
    }

    /// Renews our queued place; false when it is gone (lost, or presumed
    /// expired after failed renewals).
    async fn keep_queued(&self, queued: &mut Option<Queued>) -> bool {
        let c = &*self.core;
        let t = c.timing;
        let Some(q) = queued.as_mut() else {
            return true;
        };
        let sent = Instant::now();
        // A negotiating store may have granted our place less than asked.
        let limit = t.with_granted_ttl(q.lease.ttl).local_deadline(q.basis);
        match timeout_at(limit, c.store.renew(&q.lease)).await {
            Ok(Ok(Renewal::Renewed)) => {
                q.basis = sent;
                q.next_renew = sent + t.renew_every;
                true
            }
            Ok(Ok(Renewal::Lost)) => {
                *queued = None;
                false
            }
            Ok(Err(_)) | Err(_) if Instant::now() < limit => {
                q.next_renew = Instant::now() + (t.renew_every / 4).max(Duration::from_millis(1));
                true
            }
            Ok(Err(_)) | Err(_) => {
                // Presumed expired; the next acquire queues afresh.
                *queued = None;
                false
            }
        }
    }
}

async fn next_some(watch: &mut Option<Watching>) -> Option<Result<Option<LeaderInfo>, StoreError>> {
    match watch {
        Some(w) => {
            let item = w.stream.next().await;
            if let Some(Ok(leader)) = &item {
                w.told = Some(leader.clone());
            }
            item
        }
        None => std::future::pending().await,
    }
}

/// A store's watch of the election, and the leader it told last: what it
/// tells next is a change from that (every store's watch leaves out what
/// would repeat its last item).
struct Watching {
    stream: LeaderStream,
    told: Option<Option<LeaderInfo>>,
}
