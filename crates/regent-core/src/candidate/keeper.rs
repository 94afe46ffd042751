//! The lease store's side of a term: [`LeaseKeeper`], the
//! [`TermKeeper`] that renews a won lease behind the [`Leadership`](crate::Leadership)
//! guard, and [`HandOver`], the pause after a term given back that leaves
//! the next one to a waiting follower. The guard knows only the
//! [`TermKeeper`] trait; what is particular to a lease lives here, beside
//! the candidate that wins it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

use crate::error::StoreError;
use crate::events::EndReason;
use crate::leadership::{TermKeeper, TermState};
use crate::store::{LeaseStore, Renewal, StoreInfo, StoreStyle, WatchMode};
use crate::timing::Timing;
use crate::types::{Lease, Metadata};

/// After a term this candidate gave back, the instant before which its
/// next campaign does not try to win, so that a waiting follower gets the
/// term. Race stores only: on a queue store a new campaign queues behind
/// those already waiting anyway.
#[derive(Debug, Default)]
pub(super) struct HandOver(std::sync::Mutex<Option<Instant>>);

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
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(until);
    }

    pub(super) fn take(&self) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// A lease store's [`TermKeeper`]: renewals at `renew_every`, retries of
/// transient failures, a release that leaves the term to a waiting
/// follower.
pub(super) struct LeaseKeeper<S> {
    pub(super) store: Arc<S>,
    pub(super) lease: Lease,
    pub(super) timing: Timing,
    /// When the request that won the lease was sent.
    pub(super) won_at: Instant,
    /// The candidate's hand-over pause, set when the lease is given back.
    pub(super) hand_over: Arc<HandOver>,
}

impl<S: LeaseStore> TermKeeper for LeaseKeeper<S> {
    async fn hold(&self, term: &TermState) -> EndReason {
        let t = *term.timing();
        let lease = &self.lease;
        let retry_delay = (t.renew_every / 4).max(Duration::from_millis(1));
        let mut next_attempt = self.won_at + t.renew_every;
        loop {
            // Invariant: every path that keeps leadership passes through
            // `confirm`, so we never believe in a lease past the renew
            // deadline of the last confirmed renewal.
            let step_down = term.step_down_at();
            tokio::select! {
                biased;
                () = sleep_until(step_down) => return EndReason::DeadlinePassed,
                () = sleep_until(next_attempt) => {}
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
        self.store.release(&self.lease).await?;
        self.hand_over.released(&self.store.info(), &self.timing);
        Ok(())
    }

    async fn update_metadata(&self, metadata: &Metadata) -> Result<Renewal, StoreError> {
        self.store.update_metadata(&self.lease, metadata).await
    }
}
