//! Test support (feature `testing`): the store conformance suite, and
//! [`Layered`], the one decorator for wrapping a store in tests.
//!
//! # The conformance suite
//!
//! One entry point, [`run`], that every store crate calls with a
//! [`Harness`] for its real engine. It checks items 1–9 of the store
//! contract ([`crate::store`]).
//!
//! ```no_run
//! # async fn demo() {
//! use regent_core::testing::{run, MemoryHarness};
//! run(&MemoryHarness::race()).await; // panics listing every failed check
//! # }
//! ```
//!
//! The checks wait out real ttls with `tokio::time::sleep`, so they run
//! fast on paused time (memory store) and in a few ttls on a real engine:
//! choose [`Harness::ttl`] as short as the engine allows. To be sure a lease
//! has expired they wait `ttl` plus the store's
//! [expiry slack](crate::store::ExpirySlack) for that ttl
//! ([`StoreInfo::expiry_slack_for`](crate::StoreInfo::expiry_slack_for)),
//! plus a little.
//!
//! Besides the contract's items, the suite checks the store's
//! [`StoreInfo`](crate::StoreInfo): a ttl outside `min_ttl..=max_ttl` (and
//! zero) is refused with [`ErrorKind::Config`](crate::ErrorKind::Config),
//! never rounded; the ttls at both ends are honoured; and a granted
//! [`Lease::ttl`](crate::Lease::ttl) is never below the ttl asked unless the
//! store declares [`crate::store::TtlGrant::Negotiated`].
//!
//! # Opt-in checks
//!
//! A check of more than the contract asks yet, which stores are to pass
//! once fixed, runs only for a harness that opts in, so that it does not
//! fail the stores that do not pass it yet; [`run_opt_in_checks`] runs it
//! whatever the harness says, to try a store. The one so far is for race
//! stores: an acquire retried after its first one's answer was lost wins
//! a new term rather than being held by the lost call's record
//! ([`Harness::checks_retried_acquire_after_a_lost_answer`]).
//!
//! # Wrapping a store
//!
//! [`Layered`] puts a [`StoreLayer`] between a store and its caller: to
//! count its calls ([`Counting`]), slow them ([`Latency`]), fail them or
//! lose their answers ([`Faults`]), or flaw one operation for the suite to
//! catch (a layer of one's own). The crate's own unit tests use it too: the
//! module is there under `cfg(test)` without the feature.

mod candidates;
mod contract;
mod handover;
mod harness;
mod layers;
mod queue;
mod race;
mod roster;
mod ttl_range;

use std::fmt;

/// The decorator seam, at the crate root since production layers use it
/// too (`regent-monitor` counts a store's requests with one); named here
/// as well, beside the ready-made test layers.
pub use crate::layer::{Call, CallKind, Layered, StoreLayer};
use crate::store::{LeaseStore, StoreStyle};
use candidates::candidates_list_the_line_in_order;
use contract::{
    acquire_wins_only_when_free, concurrent_acquires_have_one_winner,
    expired_lease_is_not_revived_by_renew, garbage_is_never_taken_over, lease_lasts_the_full_ttl,
    release_frees_only_own_lease, release_through_another_connection_frees_the_election,
    renew_after_loss_reports_lost, renew_extends_own_lease,
    token_grows_across_release_expiry_and_deletion, unreachable_store_is_transient,
    update_metadata_is_seen_and_keeps_the_term, watch_sees_acquire_release_and_expiry,
    won_lease_carries_its_fields,
};
use handover::finished_task_hands_over_to_a_waiting_follower;
use harness::ctx;
pub use harness::{Harness, MemoryHarness};
pub use layers::{CallCounts, Counting, Faults, Latency};
use queue::{
    queue_passes_to_next_in_line, queue_win_restarts_the_ttl, retried_acquire_queues_once,
};
use race::retried_acquire_after_a_lost_answer_wins;
use roster::{release_to_gives_the_lease_to_the_successor, roster_lists_the_enrolled};
use ttl_range::{
    ttl_at_the_ends_of_the_store_range_is_honoured, ttl_outside_the_store_range_is_refused,
};

/// A failed check.
#[derive(Debug)]
pub struct Failure {
    check: &'static str,
    message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.check, self.message)
    }
}

/// Runs every check against the harness's engine and panics listing every
/// failure, each named by its check.
///
/// # Panics
///
/// When any check fails.
pub async fn run<H: Harness>(h: &H) {
    let failures = run_checks(h).await;
    if !failures.is_empty() {
        let list: Vec<String> = failures.iter().map(ToString::to_string).collect();
        panic!(
            "{} store conformance check(s) failed:\n  {}",
            list.len(),
            list.join("\n  ")
        );
    }
}

/// Runs every check and returns the failures (empty when the store
/// conforms): the opt-in checks too when the harness opts in (see
/// [`run_opt_in_checks`]).
pub async fn run_checks<H: Harness>(h: &H) -> Vec<Failure> {
    let mut failures = Vec::new();
    macro_rules! check {
        ($name:ident) => {
            let name = stringify!($name);
            // Boxed too: a connect future inline per check made the
            // suite's future grow with every check, as above.
            let ctx = Box::pin(ctx(h, name)).await;
            // Boxed: each check's future lives on the heap, so that the
            // suite's own future does not grow with every check (a real
            // store's futures are large; unoptimised builds copy them on
            // the stack, and the test thread's 2 MiB overflowed).
            if let Err(message) = Box::pin($name(&ctx)).await {
                failures.push(Failure {
                    check: name,
                    message,
                });
            }
        };
    }
    check!(acquire_wins_only_when_free);
    check!(won_lease_carries_its_fields);
    check!(token_grows_across_release_expiry_and_deletion);
    check!(renew_extends_own_lease);
    check!(renew_after_loss_reports_lost);
    check!(lease_lasts_the_full_ttl);
    check!(expired_lease_is_not_revived_by_renew);
    check!(release_frees_only_own_lease);
    check!(release_through_another_connection_frees_the_election);
    check!(concurrent_acquires_have_one_winner);
    check!(watch_sees_acquire_release_and_expiry);
    check!(update_metadata_is_seen_and_keeps_the_term);
    check!(candidates_list_the_line_in_order);
    check!(roster_lists_the_enrolled);
    check!(release_to_gives_the_lease_to_the_successor);
    check!(garbage_is_never_taken_over);
    check!(unreachable_store_is_transient);
    check!(ttl_outside_the_store_range_is_refused);
    check!(ttl_at_the_ends_of_the_store_range_is_honoured);
    check!(finished_task_hands_over_to_a_waiting_follower);
    let style = ctx(h, "style").await.store.info().style;
    if style == StoreStyle::Queue {
        check!(queue_passes_to_next_in_line);
        check!(queue_win_restarts_the_ttl);
        check!(retried_acquire_queues_once);
    }
    if h.checks_retried_acquire_after_a_lost_answer() {
        failures.extend(Box::pin(opt_in_checks(h, style)).await);
    }
    failures
}

/// Runs the opt-in checks that fit the store's style, whether or not the
/// harness opts in, and returns their failures: to try a store before its
/// harness opts in (then [`run`] holds it to them).
///
/// The one opt-in check so far is for race stores,
/// `retried_acquire_after_a_lost_answer_wins` (see
/// [`Harness::checks_retried_acquire_after_a_lost_answer`]); on a queue
/// store this runs nothing (its analogue, `retried_acquire_queues_once`, is
/// in [`run`] already).
pub async fn run_opt_in_checks<H: Harness>(h: &H) -> Vec<Failure> {
    let style = ctx(h, "style").await.store.info().style;
    opt_in_checks(h, style).await
}

async fn opt_in_checks<H: Harness>(h: &H, style: StoreStyle) -> Vec<Failure> {
    let mut failures = Vec::new();
    if style == StoreStyle::Race {
        // As `run_checks` runs each check: boxed.
        let name = stringify!(retried_acquire_after_a_lost_answer_wins);
        let ctx = Box::pin(ctx(h, name)).await;
        if let Err(message) = Box::pin(retried_acquire_after_a_lost_answer_wins(&ctx)).await {
            failures.push(Failure {
                check: name,
                message,
            });
        }
    }
    failures
}
