//! A monitor's view of real terms on the in-memory store, in paused time:
//! the metrics flip with leadership, the health check fails by its rules,
//! and the exposition is valid OpenMetrics text.

use std::time::Duration;

use prometheus_client::registry::Registry;
use regent_core::memory::MemoryStore;
use regent_core::{CallKind, Candidate, ElectionName, EndReason, HolderId, LeaseStore};
use regent_monitor::{Instrumented, Metrics, Monitor, Operation, Outcome, StepDown, StoreCalls};
use tokio::time::sleep;

fn jobs() -> ElectionName {
    ElectionName::new("jobs").unwrap()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A candidate (ttl 10 s: renew every 2 s, step down after 6 s) on its own
/// counted view of `store`, and its monitor.
fn instance(
    store: &MemoryStore,
    who: &str,
) -> (Candidate<Instrumented<MemoryStore>>, Monitor, StoreCalls) {
    let calls = StoreCalls::new();
    let candidate = Candidate::builder(
        calls.instrument(store.clone()),
        jobs(),
        HolderId::new(who).unwrap(),
    )
    .ttl(secs(10))
    .build()
    .unwrap();
    let monitor = Monitor::follow(&candidate).with_store_calls(calls.clone());
    (candidate, monitor, calls)
}

fn exposition(metrics: &Metrics) -> String {
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(start_paused = true)]
async fn the_status_metric_flips_to_the_next_leader_and_the_old_one_counts_why() {
    let store = MemoryStore::race();
    let (a, ma, _) = instance(&store, "a");
    let (b, mb, _) = instance(&store, "b");
    let (ma_metrics, mb_metrics) = (Metrics::new(), Metrics::new());
    ma_metrics.add(&ma);
    mb_metrics.add(&mb);
    let la = a.campaign().await.unwrap();
    let follower = tokio::spawn(async move { b.campaign().await });
    sleep(secs(1)).await;
    ma.settled().await;
    mb.settled().await;
    let status = r#"leader_election_master_status{name="jobs"}"#;
    assert_eq!(value(&exposition(&ma_metrics), status), Some(1.0));
    assert_eq!(value(&exposition(&mb_metrics), status), Some(0.0));
    let text = exposition(&ma_metrics);
    assert!(
        value(&text, r#"regent_lease_remaining_seconds{election="jobs"}"#).unwrap() > 5.0,
        "{text}"
    );

    // a cannot reach the store: it steps down at its renew deadline, and
    // b takes over once the lease has expired.
    store.partition(&HolderId::new("a").unwrap());
    assert_eq!(la.until_ended().await.reason, EndReason::DeadlinePassed);
    let lb = follower.await.unwrap().unwrap();
    ma.settled().await;
    mb.settled().await;
    let (ta, tb) = (exposition(&ma_metrics), exposition(&mb_metrics));
    assert_eq!(value(&ta, status), Some(0.0), "{ta}");
    assert_eq!(value(&tb, status), Some(1.0), "{tb}");
    assert_eq!(
        value(
            &ta,
            r#"regent_step_downs_total{election="jobs",reason="deadline"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&tb, r#"regent_terms_won_total{election="jobs"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&tb, r#"regent_fencing_token{election="jobs"}"#),
        Some(lb.token().get() as f64)
    );
    // The gap b saw before its term: known (it saw a's term), at most
    // the ttl (zero when the memory store's watch went from a straight to
    // b, with no "no leader" between).
    let gap = value(&tb, r#"regent_leaderless_gap_seconds{election="jobs"}"#).unwrap();
    assert!((0.0..=10.0).contains(&gap), "{tb}");
    let seen = mb.snapshot();
    assert_eq!(seen.terms.len(), 2, "{:?}", seen.terms);
    assert_eq!(seen.terms[1].holder.as_str(), "b");
    assert!(seen.terms[1].own && !seen.terms[0].own);
    let a_terms = ma.snapshot().terms;
    assert_eq!(a_terms[0].end.as_deref(), Some("renew deadline passed"));
}

#[tokio::test(start_paused = true)]
async fn the_health_check_fails_when_the_work_stops_beating_until_a_new_term() {
    let store = MemoryStore::race();
    let (a, ma, _) = instance(&store, "a");
    let ma = ma.with_health_timeout(secs(3));
    let mut la = a.campaign().await.unwrap();
    ma.settled().await;
    assert!(ma.health().live.is_ok(), "{:?}", ma.health());
    sleep(secs(2)).await;
    ma.beat();
    sleep(secs(2)).await;
    assert!(
        ma.health().live.is_ok(),
        "beaten 2 s ago: {:?}",
        ma.health()
    );
    sleep(secs(2)).await;
    let why = ma.health().live.unwrap_err();
    assert!(
        why.contains("has not beaten for 4.0s (health timeout 3.0s)"),
        "{why}"
    );
    // The front end steps down for it (as `regent run` does): still
    // unhealthy, now for the term that ended so.
    la.end(EndReason::Unhealthy);
    la.resign().await.unwrap();
    ma.settled().await;
    let why = ma.health().live.unwrap_err();
    assert!(why.contains("stopped beating; no term since"), "{why}");
    assert_eq!(ma.snapshot().step_downs.get(&StepDown::Health), Some(&1));
    // A new term clears it.
    let _la = a.campaign().await.unwrap();
    ma.settled().await;
    assert!(ma.health().live.is_ok(), "{:?}", ma.health());
}

#[tokio::test(start_paused = true)]
async fn the_health_check_fails_once_the_store_is_unreachable_past_the_renew_deadline() {
    let store = MemoryStore::race();
    let (a, _ma, _) = instance(&store, "a");
    let (b, mb, calls) = instance(&store, "b");
    let _la = a.campaign().await.unwrap();
    let _follower = tokio::spawn(async move { b.campaign().await });
    sleep(secs(1)).await;
    mb.settled().await;
    assert_eq!(mb.health().ready, Ok("following".to_owned()));
    store.fail_next(u32::MAX);
    // b's requests fail from now on (it retries every ttl while its watch
    // is open); within the renew deadline (6 s) that is not yet a failure
    // of b.
    sleep(secs(5)).await;
    assert!(mb.health().live.is_ok(), "{:?}", mb.health());
    sleep(secs(20)).await;
    let why = mb.health().live.unwrap_err();
    assert!(why.starts_with("the store has not answered for"), "{why}");
    assert!(why.contains("(limit 6.0s)"), "{why}");
    let counts = calls.snapshot().counts;
    assert!(
        counts.iter().any(|((_, outcome), n)| *outcome
            == Outcome::Error(regent_core::ErrorKind::Unavailable)
            && *n > 0),
        "{counts:?}"
    );
    store.fail_next(0);
    let _ = mb; // the follower keeps running until the test ends
}

#[tokio::test(start_paused = true)]
async fn a_call_the_caller_stops_waiting_for_is_counted_abandoned() {
    let store = MemoryStore::race();
    store.set_request_delay(secs(5));
    let calls = StoreCalls::new();
    let counted = calls.instrument(store);
    let _ = tokio::time::timeout(secs(1), counted.current_leader(&jobs())).await;
    let seen = calls.snapshot();
    assert_eq!(
        seen.counts
            .get(&(Operation::Call(CallKind::CurrentLeader), Outcome::Abandoned)),
        Some(&1)
    );
    assert!(seen.failing_since.is_some());
    assert!(seen.latency.is_empty(), "no answer, no latency");
}

#[tokio::test(start_paused = true)]
async fn the_exposition_is_openmetrics_with_help_type_and_histogram_buckets() {
    let store = MemoryStore::race();
    let (a, ma, _) = instance(&store, "a");
    let metrics = Metrics::new();
    metrics.add(&ma);
    let _la = a.campaign().await.unwrap();
    sleep(secs(5)).await;
    ma.settled().await;
    let text = exposition(&metrics);
    assert!(text.ends_with("# EOF\n"), "{text}");
    for family in [
        "leader_election_master_status gauge",
        "regent_terms_won counter",
        "regent_step_downs counter",
        "regent_store_requests counter",
        "regent_store_request_duration_seconds histogram",
        "regent_lease_remaining_seconds gauge",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family}\n")),
            "{family}: {text}"
        );
    }
    // Renewals were timed: the +Inf bucket counts them all.
    let renews = value(
        &text,
        r#"regent_store_requests_total{operation="renew",outcome="ok"}"#,
    )
    .unwrap();
    assert!(renews >= 2.0, "{text}");
    assert_eq!(
        value(
            &text,
            r#"regent_store_request_duration_seconds_bucket{le="+Inf",operation="renew"}"#
        ),
        Some(renews),
        "{text}"
    );
    // Every step-down reason is listed, at zero until it happens.
    for reason in StepDown::ALL {
        let series = format!(
            r#"regent_step_downs_total{{election="jobs",reason="{}"}}"#,
            reason.as_str()
        );
        assert_eq!(value(&text, &series), Some(0.0), "{series}: {text}");
    }
}

/// Regression: the leader gauges followed the term events only, so a
/// monitor that began after a term was won said "not leading", and one
/// that missed an end kept saying "leading". The status decides them.
#[tokio::test(start_paused = true)]
async fn the_leader_gauge_follows_the_status_also_for_a_term_won_before_the_monitor() {
    let store = MemoryStore::race();
    let (a, _, _) = instance(&store, "a");
    let la = a.campaign().await.unwrap();
    let late = Monitor::follow(&a);
    late.settled().await;
    let seen = late.snapshot();
    assert!(seen.leading, "{seen:?}");
    assert_eq!(seen.lease_left, None, "its lease was never told");
    assert!(late.health().live.is_ok(), "{:?}", late.health());
    la.resign().await.unwrap();
    late.settled().await;
    assert!(!late.snapshot().leading);
    assert_eq!(late.snapshot().terms.len(), 1);
}

/// A request cut short at once (a term's end, a shutdown) is counted but
/// is no sign of a failing store; one that waited a second or more is.
#[tokio::test(start_paused = true)]
async fn only_a_request_that_waited_counts_as_a_store_failure() {
    let store = MemoryStore::race();
    store.set_request_delay(secs(5));
    let calls = StoreCalls::new();
    let counted = calls.instrument(store);
    let _ = tokio::time::timeout(Duration::from_millis(100), counted.current_leader(&jobs())).await;
    let seen = calls.snapshot();
    assert_eq!(
        seen.counts
            .get(&(Operation::Call(CallKind::CurrentLeader), Outcome::Abandoned)),
        Some(&1)
    );
    assert_eq!(seen.failing_since, None);
    let _ = tokio::time::timeout(regent_monitor::UNANSWERED, counted.current_leader(&jobs())).await;
    assert!(calls.snapshot().failing_since.is_some());
}
