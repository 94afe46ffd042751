//! The builder never panics, whatever the numbers (issue 12: a NaN clock
//! drift panicked inside `build()`), and its errors name the caller's
//! settings.

use std::time::Duration;

use proptest::prelude::*;
use regent_core::memory::MemoryStore;
use regent_core::{
    Candidate, CandidateBuilder, ConfigError, ElectionName, HolderId, MAX_TTL, Supervisor,
};

fn builder() -> CandidateBuilder<MemoryStore> {
    Candidate::builder(
        MemoryStore::race(),
        ElectionName::new("jobs").unwrap(),
        HolderId::new("a").unwrap(),
    )
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Durations from zero through the ordinary to the absurd.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::from_nanos(1)),
        Just(Duration::MAX),
        Just(MAX_TTL),
        Just(MAX_TTL + Duration::from_nanos(1)),
        (0u64..=u64::MAX, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        (0u64..100_000_000_000).prop_map(Duration::from_nanos),
        (0u64..200_000).prop_map(Duration::from_millis),
    ]
}

fn drift() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
        Just(f64::MAX),
        any::<f64>(),
        0.0..0.2f64,
    ]
}

#[derive(Debug, Clone)]
struct Settings {
    ttl: Option<Duration>,
    renew_every: Option<Duration>,
    renew_deadline: Option<Duration>,
    grace: Option<Duration>,
    drift: Option<f64>,
    margin: Option<Duration>,
    retry_every: Option<Duration>,
    give_up_after: Option<Duration>,
    health_timeout: Option<Duration>,
}

fn settings() -> impl Strategy<Value = Settings> {
    (
        (
            proptest::option::of(duration()),
            proptest::option::of(duration()),
            proptest::option::of(duration()),
            proptest::option::of(duration()),
            proptest::option::of(drift()),
        ),
        (
            proptest::option::of(duration()),
            proptest::option::of(duration()),
            proptest::option::of(duration()),
            proptest::option::of(duration()),
        ),
    )
        .prop_map(
            |(
                (ttl, renew_every, renew_deadline, grace, drift),
                (margin, retry_every, give_up_after, health_timeout),
            )| Settings {
                ttl,
                renew_every,
                renew_deadline,
                grace,
                drift,
                margin,
                retry_every,
                give_up_after,
                health_timeout,
            },
        )
}

fn apply(s: &Settings) -> CandidateBuilder<MemoryStore> {
    let mut b = builder();
    if let Some(v) = s.ttl {
        b = b.ttl(v);
    }
    if let Some(v) = s.renew_every {
        b = b.renew_every(v);
    }
    if let Some(v) = s.renew_deadline {
        b = b.renew_deadline(v);
    }
    if let Some(v) = s.grace {
        b = b.grace(v);
    }
    if let Some(v) = s.drift {
        b = b.clock_drift(v);
    }
    if let Some(v) = s.margin {
        b = b.margin(v);
    }
    if let Some(v) = s.retry_every {
        b = b.retry_every(v);
    }
    if let Some(v) = s.give_up_after {
        b = b.give_up_after(v);
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    /// No input panics; what builds satisfies every rule, and everything
    /// computed from it (explain, deadlines) is computed without panicking.
    #[test]
    fn no_setting_panics_the_builder(s in settings()) {
        match apply(&s).build() {
            Ok(c) => {
                let t = *c.timing();
                prop_assert_eq!(t.validate(), Ok(()));
                prop_assert!(t.ttl <= MAX_TTL && !t.ttl.is_zero());
                prop_assert!(t.retry_every <= MAX_TTL);
                let e = c.explain();
                let _ = e.to_string();
                let now = tokio::time::Instant::now();
                let _ = (t.local_deadline(now), t.step_down_at(now));
                if let Some(h) = s.health_timeout {
                    match Supervisor::new(c).health_timeout(h) {
                        Ok(_) => prop_assert!(!h.is_zero() && h <= MAX_TTL),
                        Err(e) => prop_assert!(!e.to_string().is_empty()),
                    }
                }
            }
            Err(e) => {
                let text = e.to_string();
                prop_assert!(!text.is_empty());
                let _ = e.rule();
            }
        }
    }
}

#[test]
fn a_nan_clock_drift_is_a_config_error() {
    for d in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.5, 0.11] {
        let e = builder().clock_drift(d).build().unwrap_err();
        assert!(
            matches!(e, ConfigError::DriftOutOfRange { .. }),
            "{d}: {e:?}"
        );
        assert!(e.to_string().contains("clock drift"), "{e}");
    }
}

#[test]
fn absurd_durations_are_config_errors() {
    let e = builder().renew_every(Duration::MAX).build().unwrap_err();
    assert!(
        matches!(
            e,
            ConfigError::TooLong {
                what: "renew interval",
                ..
            }
        ),
        "{e:?}"
    );
    let e = builder().retry_every(Duration::MAX).build().unwrap_err();
    assert!(e.to_string().contains("retry interval"), "{e}");
    let e = builder().grace(Duration::MAX).build().unwrap_err();
    assert!(e.to_string().contains("grace"), "{e}");
    let e = builder().ttl(Duration::MAX).build().unwrap_err();
    assert!(matches!(e, ConfigError::TtlTooLong { .. }), "{e:?}");
    let c = builder().build().unwrap();
    let e = Supervisor::new(c)
        .health_timeout(Duration::MAX)
        .unwrap_err();
    assert!(e.to_string().contains("health timeout"), "{e}");
}

/// Regression (issue 12): ttl 1 ns answered "renew interval must be greater
/// than zero", a setting the caller never gave.
#[test]
fn a_tiny_ttl_is_named_as_the_ttl() {
    let e = builder().ttl(Duration::from_nanos(1)).build().unwrap_err();
    assert!(matches!(e, ConfigError::TtlTooShort { .. }), "{e:?}");
    assert_eq!(e.to_string(), "ttl 1ns is shorter than the minimum of 1ms");
}

/// Regression (issue 12): renew_every >= ttl answered with a message about
/// the renew deadline, which the caller never set.
#[test]
fn a_rule_broken_by_a_default_names_the_settings_to_change() {
    let e = builder()
        .ttl(secs(10))
        .renew_every(secs(10))
        .build()
        .unwrap_err();
    assert!(matches!(e, ConfigError::Settings { .. }), "{e:?}");
    assert!(
        matches!(e.rule(), ConfigError::IntervalNotBelowDeadline { .. }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("renew_every 10s is too long for ttl 10s"),
        "{text}"
    );
    assert!(text.contains("set renew_every below 5s"), "{text}");
    // A deadline above 12 s cannot fit in a 10 s ttl: not offered.
    assert!(!text.contains("renew_deadline above"), "{text}");
    let e = builder()
        .ttl(secs(10))
        .renew_every(secs(6))
        .build()
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("or set renew_deadline above 7.2s (and below"),
        "{text}"
    );

    let e = builder()
        .ttl(secs(10))
        .renew_deadline(secs(2))
        .build()
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("renew_deadline 2s is too short for the default renew interval"),
        "{text}"
    );

    let e = builder().ttl(secs(10)).grace(secs(5)).build().unwrap_err();
    assert!(
        matches!(e.rule(), ConfigError::GraceTooLong { .. }),
        "{e:?}"
    );
    assert!(text_has(&e, "grace can be at most"), "{e}");

    let e = builder().ttl(secs(10)).margin(secs(4)).build().unwrap_err();
    assert!(text_has(&e, "set a renew_deadline below"), "{e}");

    // Both set by the caller: the rule alone names them.
    let e = builder()
        .ttl(secs(10))
        .renew_every(secs(5))
        .renew_deadline(secs(5))
        .build()
        .unwrap_err();
    assert!(
        matches!(e, ConfigError::IntervalNotBelowDeadline { .. }),
        "{e:?}"
    );
}

fn text_has(e: &ConfigError, needle: &str) -> bool {
    e.to_string().contains(needle)
}
