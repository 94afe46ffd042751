//! The lease store's side of a term: [`LeaseKeeper`], the
//! [`TermKeeper`] that renews a won lease behind the [`Leadership`](crate::Leadership)
//! guard, and [`HandOver`], the pause after a term given back that leaves
//! the next one to a waiting follower. The guard knows only the
//! [`TermKeeper`] trait; what is particular to a lease lives here, beside
//! the candidate that wins it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::StoreError;
use crate::events::EndReason;
use crate::handover::{
    ANSWERED_KEY, HandOverError, HandOverReason, LEAVING_KEY, Preference, REFUSED_KEY, Request,
    request_election, successor_for,
};
use crate::leadership::{TermKeeper, TermState};
use crate::store::{HandOff, LeaseStore, Renewal, StoreInfo, StoreStyle, WatchMode};
use crate::timing::Timing;
use crate::types::{HolderId, LeaderInfo, Lease, Metadata};

/// How a candidate takes part in hand-overs ([`handover`](crate::handover)).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Choosing {
    /// Whether it does at all.
    pub(crate) on: bool,
    /// Its priority (0 when it publishes none).
    pub(crate) priority: i32,
    /// How long a leader sees a candidate of higher priority before it
    /// hands over to it.
    pub(crate) settle: Duration,
}

/// Sleeps until `at`, or for ever.
pub(crate) async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// After a term this candidate gave back, the instant before which its
/// next campaign does not try to win, so that a waiting follower gets the
/// term. Race stores only: on a queue store a new campaign queues behind
/// those already waiting anyway.
#[derive(Debug, Default)]
pub(super) struct HandOver {
    until: std::sync::Mutex<Option<Instant>>,
}

/// What a follower needs beyond noticing a release to win the term: one
/// acquire, with room for a loaded machine. At least this, and a tenth of
/// the ttl up to [`HAND_OVER_ALLOWANCE_MAX`]: the pause ends as soon as the
/// watch shows another holder, so only a lone candidate waits it out.
const HAND_OVER_ALLOWANCE: Duration = Duration::from_millis(250);

/// The most [`HAND_OVER_ALLOWANCE`] grows to with a long ttl.
const HAND_OVER_ALLOWANCE_MAX: Duration = Duration::from_secs(2);

impl HandOver {
    /// Our lease was given back now: stay out for as long as a follower
    /// needs to notice (the store's poll interval, or its own retry) and
    /// win.
    pub(super) fn released(&self, info: &StoreInfo, timing: &Timing) {
        if info.style != StoreStyle::Race {
            return;
        }
        let notice = match info.watch {
            WatchMode::Notify => Duration::ZERO,
            WatchMode::Poll(every) => every.min(timing.retry_every),
        };
        let allowance = (timing.ttl / 10).clamp(HAND_OVER_ALLOWANCE, HAND_OVER_ALLOWANCE_MAX);
        let until = Instant::now() + notice + allowance.min(timing.ttl);
        *lock(&self.until) = Some(until);
    }

    pub(super) fn take(&self) -> Option<Instant> {
        lock(&self.until).take()
    }
}

/// How long a lease given to a successor stays reserved for it: what a
/// follower needs to notice the release (the store's poll interval, else
/// at once), or at worst its own retry, and one acquire.
pub(super) fn reservation_window(info: &StoreInfo, timing: &Timing) -> Duration {
    let notice = match info.watch {
        WatchMode::Notify => Duration::ZERO,
        WatchMode::Poll(every) => every.min(timing.retry_every),
    };
    let allowance = (timing.ttl / 10).clamp(HAND_OVER_ALLOWANCE, HAND_OVER_ALLOWANCE_MAX);
    notice + timing.retry_every.min(timing.ttl) + allowance
}

/// A lease store's [`TermKeeper`]: renewals at `renew_every`, retries of
/// transient failures, a release that leaves the term to a waiting
/// follower; and, when the candidate takes part in hand-overs, a look at
/// the requests and the candidates after each renewal.
pub(super) struct LeaseKeeper<S> {
    pub(super) store: Arc<S>,
    pub(super) lease: Lease,
    pub(super) timing: Timing,
    /// When the request that won the lease was sent.
    pub(super) won_at: Instant,
    /// The candidate's hand-over pause, set when the lease is given back.
    pub(super) hand_over: Arc<HandOver>,
    /// How the candidate takes part in hand-overs.
    pub(super) choosing: Choosing,
    /// The term's hand-over state.
    pub(super) handing: Handing,
}

/// A term's hand-over state.
#[derive(Debug, Default)]
pub(super) struct Handing {
    /// The candidate the term goes to, once chosen.
    successor: std::sync::Mutex<Option<HolderId>>,
    /// Since when each candidate of higher priority has been seen.
    preference: std::sync::Mutex<Preference>,
    /// The term began from a request: priorities do not preempt it.
    pinned: AtomicBool,
}

impl<S: LeaseStore> LeaseKeeper<S> {
    /// Chooses `successor` and says so in the term's metadata (one write,
    /// for watchers; the hand-over does not wait on it beyond its bound).
    async fn hand_to(
        &self,
        term: &TermState,
        successor: HolderId,
        why: HandOverReason,
    ) -> EndReason {
        let leaving = format!("{} {successor}", why.as_str());
        let bound = self.timing.renew_every / 2;
        let _ = tokio::time::timeout(bound, term.publish(LEAVING_KEY, Some(leaving))).await;
        self.choose(successor, why)
    }

    fn choose(&self, successor: HolderId, why: HandOverReason) -> EndReason {
        tracing::info!(
            election = %self.lease.election, holder = %self.lease.holder, token = self.lease.token.get(),
            successor = %successor, reason = why.as_str(), "handing the term over"
        );
        *lock(&self.handing.successor) = Some(successor);
        EndReason::HandedOver(why)
    }

    /// One look at the requests and the candidates: the reason to end the
    /// term with, when it is to be handed over.
    async fn look(&self, term: &TermState) -> Option<EndReason> {
        let lease = &self.lease;
        match self
            .store
            .current_leader(&request_election(&lease.election))
            .await
        {
            Ok(Some(asked)) => {
                if let Some(req) = Request::parse(&asked) {
                    if req.from == lease.token {
                        return self.answer(term, &asked, req).await;
                    }
                    if req.from < lease.token
                        && req.to.as_ref().is_none_or(|to| *to == lease.holder)
                        && !self.handing.pinned.swap(true, Ordering::AcqRel)
                    {
                        // This term began from that request: say so, and
                        // let no priority preempt it.
                        tracing::info!(
                            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                            requester = %asked.holder, "the term began from a hand-over request; priorities do not preempt it"
                        );
                        let _ = term
                            .publish(ANSWERED_KEY, Some(req.from.get().to_string()))
                            .await;
                    }
                }
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(
                election = %lease.election, error = %crate::report(&e), "reading the hand-over requests failed"
            ),
        }
        if self.handing.pinned.load(Ordering::Acquire) {
            return None;
        }
        match self.store.candidates(&lease.election).await {
            Ok(Some(list)) => {
                let chosen = lock(&self.handing.preference).look(
                    &list,
                    &lease.holder,
                    self.choosing.priority,
                    self.choosing.settle,
                    Instant::now(),
                );
                match chosen {
                    Some(s) => Some(self.hand_to(term, s, HandOverReason::Preferred).await),
                    None => None,
                }
            }
            Ok(None) => None,
            Err(e) => {
                tracing::debug!(
                    election = %lease.election, error = %crate::report(&e), "reading the candidates failed"
                );
                None
            }
        }
    }

    /// Acts on a request to end this term: hands over, or says why not.
    async fn answer(
        &self,
        term: &TermState,
        asked: &LeaderInfo,
        req: Request,
    ) -> Option<EndReason> {
        let lease = &self.lease;
        let chosen = match self.store.candidates(&lease.election).await {
            Ok(Some(list)) => successor_for(&list, &lease.holder, req.to.as_ref()),
            Ok(None) => req.to.clone().ok_or_else(|| {
                "this store lists no candidates: name the one to hand over to".to_owned()
            }),
            Err(e) => {
                tracing::debug!(
                    election = %lease.election, error = %crate::report(&e), "reading the candidates failed"
                );
                return None;
            }
        };
        match chosen {
            Ok(successor) => Some(
                self.hand_to(term, successor, HandOverReason::Requested)
                    .await,
            ),
            Err(why) => {
                tracing::warn!(
                    election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                    requester = %asked.holder, %why, "cannot hand over as asked"
                );
                let refusal = format!("{} {} {why}", lease.token.get(), asked.holder);
                let _ = term.publish(REFUSED_KEY, Some(refusal)).await;
                None
            }
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<S: LeaseStore> TermKeeper for LeaseKeeper<S> {
    async fn hold(&self, term: &TermState) -> EndReason {
        let t = *term.timing();
        let lease = &self.lease;
        let retry_delay = (t.renew_every / 4).max(Duration::from_millis(1));
        let mut next_attempt = self.won_at + t.renew_every;
        // The first look at once: a term that began from a request says so.
        let mut look_at = self.choosing.on.then_some(self.won_at);
        loop {
            // Invariant: every path that keeps leadership passes through
            // `confirm`, so we never believe in a lease past the renew
            // deadline of the last confirmed renewal.
            let step_down = term.step_down_at();
            tokio::select! {
                biased;
                () = sleep_until(step_down) => return EndReason::DeadlinePassed,
                () = sleep_until(next_attempt) => {}
                () = sleep_until_some(look_at) => {
                    look_at = None;
                    // A look never holds up a renewal.
                    tokio::select! {
                        biased;
                        () = sleep_until(step_down) => return EndReason::DeadlinePassed,
                        () = sleep_until(next_attempt) => {}
                        looked = self.look(term) => if let Some(reason) = looked {
                            return reason;
                        },
                    }
                    continue;
                }
            }
            let sent = Instant::now();
            let result = tokio::select! {
                biased;
                () = sleep_until(step_down) => return EndReason::DeadlinePassed,
                r = self.store.renew(lease) => r,
            };
            match result {
                Ok(Renewal::Renewed) => {
                    // The store started its ttl no earlier than `sent`.
                    term.confirm(sent);
                    next_attempt = sent + t.renew_every;
                    if self.choosing.on {
                        look_at = Some(Instant::now());
                    }
                    tracing::debug!(
                        election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                        "renewed"
                    );
                }
                Ok(Renewal::Lost) => return EndReason::Lost,
                Err(e) if e.is_transient() => {
                    tracing::warn!(
                        election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                        error = %crate::report(&e), "renewal failed; retrying"
                    );
                    next_attempt = Instant::now() + retry_delay;
                }
                Err(e) => {
                    tracing::warn!(
                        election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                        error = %crate::report(&e), "renewal failed permanently"
                    );
                    return EndReason::StoreFailed(e.kind());
                }
            }
        }
    }

    async fn release(&self) -> Result<(), StoreError> {
        let successor = lock(&self.handing.successor).clone();
        let info = self.store.info();
        match successor {
            Some(successor) => {
                let window = reservation_window(&info, &self.timing);
                let passed = self
                    .store
                    .release_to(&self.lease, &successor, window)
                    .await?;
                let lease = &self.lease;
                match passed {
                    HandOff::ToSuccessor => tracing::info!(
                        election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                        %successor, ?window, "lease given to the successor"
                    ),
                    _ => tracing::info!(
                        election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                        %successor, "the store could not pass the lease to the successor alone (a record not regent's before it, or none of its own); released to anyone"
                    ),
                }
            }
            None => self.store.release(&self.lease).await?,
        }
        self.hand_over.released(&info, &self.timing);
        Ok(())
    }

    async fn update_metadata(&self, metadata: &Metadata) -> Result<Renewal, StoreError> {
        self.store.update_metadata(&self.lease, metadata).await
    }

    async fn choose_successor(&self, to: Option<&HolderId>) -> Result<HolderId, HandOverError> {
        let lease = &self.lease;
        let list = self.store.candidates(&lease.election).await?;
        let chosen = match &list {
            Some(list) => successor_for(list, &lease.holder, to),
            None => to.cloned().ok_or_else(|| {
                "this store lists no candidates: name the one to hand over to".to_owned()
            }),
        };
        match chosen {
            Ok(successor) => {
                self.choose(successor.clone(), HandOverReason::Requested);
                Ok(successor)
            }
            Err(why) => Err(HandOverError::NoSuchCandidate {
                election: lease.election.clone(),
                why,
                listed: list.map_or_else(
                    || "not listed by this store".to_owned(),
                    |l| {
                        let names: Vec<_> = l.iter().map(|c| c.holder.to_string()).collect();
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    },
                ),
            }),
        }
    }
}
