//! The timing rules of a lease, validated once, and `explain()`. The
//! timeline and the rules are documented on [`Timing`], where rustdoc
//! shows them.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ConfigError;
use crate::limits::{MAX_TTL, MIN_TTL};
use crate::store::{StoreInfo, WatchMode};

/// A lease's timing, validated. Build it through
/// [`CandidateBuilder`](crate::CandidateBuilder), or [`Timing::new`] plus
/// the fields and [`Timing::validate`]; [`Candidate::explain`] turns it
/// into worst cases and a safety budget, in numbers.
///
/// # The timeline of a lease
///
/// With the last successful acquire or renewal *sent* at `t0` (monotonic
/// clock):
///
/// ```text
/// t0 + renew_every       next renewal attempt (a failed one is retried
///                        every renew_every/4: Explanation::renew_retry_every)
/// t0 + renew_deadline    still not renewed: step down. The cancellation token
///                        fires; the leader task has `grace` to stop.
/// t0 + renew_deadline + grace
///                        the task is stopped (or abandoned)
/// t0 + ttl*(1-drift) - margin
///                        local lease deadline: past it the guard refuses to
///                        vouch for leadership whatever the network says
/// t0 + ttl               the earliest the store can hand the lease on
/// t0 + ttl + slack(ttl)  the latest the store frees a dead holder's lease
///                        (its ExpirySlack)
/// ```
///
/// A follower, meanwhile, tries to acquire whenever the store's watch shows
/// the leader changed or gone, and every [`retry_every`](Self::retry_every)
/// in any case.
///
/// # The rules
///
/// Checked by [`Timing::validate`] (and so by
/// [`CandidateBuilder::build`](crate::CandidateBuilder::build)); the error
/// names the rule broken:
///
/// * `ttl*(1-drift) - margin > renew_deadline`: the leader steps down before
///   its local lease deadline;
/// * `renew_deadline > 1.2 * renew_every`: room to retry a failed renewal;
/// * `renew_deadline + grace <= ttl*(1-drift) - margin`: the task is stopped
///   before the lease can pass on.
///
/// `ttl` here is the ttl the lease really has. When a store grants less
/// than asked ([`TtlGrant::Negotiated`](crate::store::TtlGrant::Negotiated)),
/// [`Timing::for_granted`] gives the timing of that lease: the granted ttl,
/// everything else as configured, checked against the same rules. The
/// store's own limits ([`ExpirySlack`](crate::store::ExpirySlack), its ttl
/// range) are in its [`StoreInfo`].
///
/// [`Candidate::explain`]: crate::Candidate::explain
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// The lease's time to live on the store.
    pub ttl: Duration,
    /// How often the leader renews (a failed renewal is retried sooner:
    /// see [`Explanation::renew_retry_every`]).
    pub renew_every: Duration,
    /// How long after its last successful renewal was sent the leader steps
    /// down if it has not renewed since.
    pub renew_deadline: Duration,
    /// How long the leader task gets to stop after leadership ends.
    pub grace: Duration,
    /// The fraction by which the local clock may run slower than the
    /// store's (default 0.01).
    pub drift: f64,
    /// A fixed safety margin subtracted from the local deadline (default
    /// 5 ms).
    pub margin: Duration,
    /// How often a follower tries to acquire even when its watch reports no
    /// change (default: `renew_every`; a candidate whose retry interval was
    /// not set retries at the ttl instead while someone leads and the watch
    /// of a store that notifies is open: see
    /// [`CandidateBuilder::retry_every`](crate::CandidateBuilder::retry_every)). A follower's retry only: the
    /// leader's renewal retry is [`Explanation::renew_retry_every`].
    pub retry_every: Duration,
}

impl Timing {
    /// Defaults derived from `ttl`: renew every `ttl/5`, step down after
    /// `3*ttl/5` without renewal, 1 % drift, 5 ms margin (at most 1 % of
    /// the ttl), and the [default grace](Self::default_grace).
    pub fn new(ttl: Duration) -> Self {
        let renew_every = ttl / 5;
        let mut t = Self {
            ttl,
            renew_every,
            renew_deadline: ttl * 3 / 5,
            grace: Duration::ZERO,
            drift: 0.01,
            margin: Duration::from_millis(5).min(ttl / 100),
            retry_every: renew_every,
        };
        t.grace = t.default_grace();
        t
    }

    /// The grace these settings give by default: 2 s, or three quarters of
    /// the time between the renew deadline and the local lease deadline
    /// when that is shorter, so that a quarter of it always remains as a
    /// safety budget (at a ttl of 2 s: grace 0.58 s, budget 0.19 s).
    pub fn default_grace(&self) -> Duration {
        let room = self.usable().saturating_sub(self.renew_deadline);
        Duration::from_secs(2).min(room * 3 / 4)
    }

    /// Checks every rule; the error names the rule broken.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_ttl(self.ttl)?;
        for (what, d) in [
            ("renew interval", self.renew_every),
            ("renew deadline", self.renew_deadline),
            ("retry interval", self.retry_every),
        ] {
            if d.is_zero() {
                return Err(ConfigError::Zero { what });
            }
        }
        check_drift(self.drift)?;
        if self.retry_every > MAX_TTL {
            return Err(ConfigError::TooLong {
                what: "retry interval",
                value: self.retry_every,
                max: MAX_TTL,
            });
        }
        let usable = self.usable();
        if self.renew_deadline >= usable {
            return Err(ConfigError::DeadlineNotBelowTtl {
                renew_deadline: self.renew_deadline,
                ttl: self.ttl,
                usable,
            });
        }
        // renew_deadline > 1.2 * renew_every, in integers (no overflow for
        // a huge interval: the deadline is below a day here).
        if self.renew_deadline.saturating_mul(5) <= self.renew_every.saturating_mul(6) {
            return Err(ConfigError::IntervalNotBelowDeadline {
                renew_deadline: self.renew_deadline,
                renew_every: self.renew_every,
            });
        }
        if self.renew_deadline.saturating_add(self.grace) > usable {
            return Err(ConfigError::GraceTooLong {
                grace: self.grace,
                renew_deadline: self.renew_deadline,
                usable,
            });
        }
        Ok(())
    }

    /// `ttl * (1 - drift) - margin`: how long after sending a request the
    /// holder may still count on the lease.
    pub fn usable(&self) -> Duration {
        usable(self.ttl, self.drift, self.margin)
    }

    /// The local lease deadline for a lease acquired or renewed by a request
    /// sent at `sent_at`.
    pub fn local_deadline(&self, sent_at: Instant) -> Instant {
        sent_at + self.usable()
    }

    /// The step-down instant for a lease acquired or renewed by a request
    /// sent at `sent_at`.
    pub fn step_down_at(&self, sent_at: Instant) -> Instant {
        sent_at + self.renew_deadline
    }

    /// These settings with the ttl lowered to `granted` if the store granted
    /// less than [`ttl`](Self::ttl); unchanged if it granted as much or more
    /// (a longer lease changes nothing for safety, and the holder keeps
    /// renewing as configured). Not validated; see
    /// [`for_granted`](Self::for_granted).
    #[must_use]
    pub fn with_granted_ttl(&self, granted: Duration) -> Self {
        Self {
            ttl: self.ttl.min(granted),
            ..*self
        }
    }

    /// The timing of a lease the store granted for `granted`: as
    /// [`with_granted_ttl`](Self::with_granted_ttl), checked against every
    /// rule when the ttl was lowered.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of the first rule the granted ttl breaks; its
    /// `ttl` is the granted one.
    pub fn for_granted(&self, granted: Duration) -> Result<Self, ConfigError> {
        let t = self.with_granted_ttl(granted);
        if t.ttl < self.ttl {
            t.validate()?;
        }
        Ok(t)
    }

    /// The numbers behind these settings on `store`.
    pub fn explain(&self, store: &StoreInfo) -> Explanation {
        let detect = match store.watch {
            WatchMode::Notify => Duration::ZERO,
            WatchMode::Poll(every) => every,
        }
        .min(self.retry_every);
        let expiry_slack = store.expiry_slack_for(self.ttl);
        Explanation {
            store: store.name,
            timing: *self,
            crash_failover: self.ttl.saturating_add(expiry_slack) + detect,
            expiry_slack,
            detect,
            renew_attempts: attempts(self.renew_deadline, self.renew_every),
            renew_retry_every: (self.renew_every / 4).max(Duration::from_millis(1)),
            safety_budget: self
                .usable()
                .saturating_sub(self.renew_deadline + self.grace),
            store_margin: self.ttl.saturating_sub(self.usable()),
        }
    }
}

/// The ttl alone: not zero, not under [`MIN_TTL`], not over [`MAX_TTL`].
pub(crate) fn check_ttl(ttl: Duration) -> Result<(), ConfigError> {
    if ttl.is_zero() {
        return Err(ConfigError::Zero { what: "ttl" });
    }
    if ttl > MAX_TTL {
        return Err(ConfigError::TtlTooLong { ttl });
    }
    if ttl < MIN_TTL {
        return Err(ConfigError::TtlTooShort { ttl, min: MIN_TTL });
    }
    Ok(())
}

/// The clock drift alone: a fraction in `[0, 0.1]` (NaN is not).
pub(crate) fn check_drift(drift: f64) -> Result<(), ConfigError> {
    if (0.0..=0.1).contains(&drift) {
        Ok(())
    } else {
        Err(ConfigError::DriftOutOfRange { drift })
    }
}

fn usable(ttl: Duration, drift: f64, margin: Duration) -> Duration {
    // A drift that is not a number counts as the worst: nothing usable.
    let drift = if drift.is_nan() {
        1.0
    } else {
        drift.clamp(0.0, 1.0)
    };
    ttl.min(MAX_TTL).mul_f64(1.0 - drift).saturating_sub(margin)
}

/// Attempts at `every`, then every `every/4`, strictly before `deadline`.
fn attempts(deadline: Duration, every: Duration) -> u32 {
    let retry = (every / 4).max(Duration::from_millis(1));
    if every >= deadline {
        return 0;
    }
    let after_first = (deadline - every).as_nanos().saturating_sub(1) / retry.as_nanos();
    u32::try_from(1 + after_first).unwrap_or(u32::MAX)
}

/// Worst cases and safety budget of a [`Timing`] on one store, in numbers.
/// `Display` renders them as sentences.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The store's name.
    pub store: &'static str,
    /// The settings explained.
    pub timing: Timing,
    /// Worst case from a leader's crash to a follower winning, not counting
    /// round trips: `ttl + expiry slack + detection delay`.
    pub crash_failover: Duration,
    /// How much later than the ttl the store may free a crashed leader's
    /// lease of this ttl ([`StoreInfo::expiry_slack_for`]).
    pub expiry_slack: Duration,
    /// How late a follower sees a change: zero for notifying stores, the
    /// poll interval (capped at `retry_every`) otherwise.
    pub detect: Duration,
    /// Renewal attempts before the leader steps down, when every attempt
    /// fails at once: the first at `renew_every`, then one every
    /// [`renew_retry_every`](Self::renew_retry_every).
    pub renew_attempts: u32,
    /// How soon the leader retries a failed renewal: `renew_every / 4`.
    /// (Not the follower's [`Timing::retry_every`].)
    pub renew_retry_every: Duration,
    /// Time between the leader task's latest stop and the local lease
    /// deadline: `ttl*(1-drift) - margin - renew_deadline - grace`.
    pub safety_budget: Duration,
    /// Time between the local lease deadline and the earliest hand-over on
    /// the store's clock (drift and margin).
    pub store_margin: Duration,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.timing;
        writeln!(
            f,
            "store {}: lease ttl {:?}, renewed every {:?}",
            self.store, t.ttl, t.renew_every
        )?;
        writeln!(
            f,
            "- a leader that cannot renew retries the renewal every {:?} and steps down {:?} after its last successful renewal was sent, after {} attempts; its task then has {:?} to stop",
            self.renew_retry_every, t.renew_deadline, self.renew_attempts, t.grace
        )?;
        if self.safety_budget.is_zero() {
            writeln!(
                f,
                "- safety budget: none. A task that uses all of its grace is stopped just at the local lease deadline, {:?} before the store can hand the lease on (clock drift {:.1}% + margin {:?}); only that margin and the fencing token protect the resource then. Shorten grace or renew_deadline to leave a budget",
                self.store_margin,
                t.drift * 100.0,
                t.margin
            )?;
        } else {
            writeln!(
                f,
                "- safety budget: the task is stopped at least {:?} before the local lease deadline, which is {:?} before the store can hand the lease on (clock drift {:.1}% + margin {:?})",
                self.safety_budget,
                self.store_margin,
                t.drift * 100.0,
                t.margin
            )?;
        }
        writeln!(
            f,
            "- worst-case failover after a leader crash: {:?} (ttl {:?} + store expiry slack {:?} + detection {:?}) plus a few round trips; milliseconds where something outlives the leader to give its lease back (`regent run`'s supervisor, the library's crash guardian)",
            self.crash_failover, t.ttl, self.expiry_slack, self.detect
        )?;
        write!(
            f,
            "- failover after a graceful resign: detection {:?} plus a few round trips; no ttl to wait",
            self.detect
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ExpirySlack, SafetyClass, StoreStyle};

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn defaults_are_valid_for_many_ttls() {
        for ms in [10, 100, 1000, 10_000, 60_000, 3_600_000] {
            let t = Timing::new(Duration::from_millis(ms));
            assert_eq!(t.validate(), Ok(()), "ttl {ms} ms: {t:?}");
        }
    }

    /// Regression (issue 12): at short ttls the default grace filled the
    /// whole gap and `explain()` printed a safety budget of 0.
    #[test]
    fn default_grace_leaves_a_budget_at_every_ttl() {
        let info = StoreInfo::new(
            "test",
            StoreStyle::Race,
            WatchMode::Notify,
            SafetyClass::SingleNode,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL);
        for ms in [1, 2, 10, 100, 1000, 2000, 5000, 10_000, 15_000, 60_000] {
            let t = Timing::new(Duration::from_millis(ms));
            assert_eq!(t.validate(), Ok(()), "ttl {ms} ms");
            let e = t.explain(&info);
            assert!(
                e.safety_budget > Duration::ZERO,
                "ttl {ms} ms: budget {:?}",
                e.safety_budget
            );
            assert!(
                !e.to_string().contains("safety budget: none"),
                "ttl {ms} ms"
            );
        }
        let t = Timing::new(secs(10.0));
        assert_eq!(t.grace, secs(2.0), "the default stays 2 s where it fits");
        let t = Timing::new(secs(2.0));
        assert!(t.grace < secs(0.6) && t.grace > secs(0.5), "{t:?}");
    }

    #[test]
    fn a_zero_budget_is_said_plainly() {
        let mut t = Timing::new(secs(2.0));
        t.grace = t.usable() - t.renew_deadline;
        assert_eq!(t.validate(), Ok(()));
        let info = StoreInfo::new(
            "test",
            StoreStyle::Race,
            WatchMode::Notify,
            SafetyClass::SingleNode,
        );
        let text = t.explain(&info).to_string();
        assert!(text.contains("safety budget: none"), "{text}");
        assert!(
            text.contains("only that margin and the fencing token"),
            "{text}"
        );
    }

    #[test]
    fn huge_and_odd_values_are_refused_without_panicking() {
        let base = Timing::new(secs(10.0));
        for t in [
            Timing {
                renew_every: Duration::MAX,
                ..base
            },
            Timing {
                grace: Duration::MAX,
                ..base
            },
            Timing {
                retry_every: Duration::MAX,
                ..base
            },
            Timing {
                margin: Duration::MAX,
                ..base
            },
            Timing {
                drift: f64::NAN,
                ..base
            },
            Timing {
                drift: f64::INFINITY,
                ..base
            },
            Timing {
                drift: -0.01,
                ..base
            },
            Timing {
                ttl: Duration::from_nanos(1),
                ..base
            },
        ] {
            assert!(t.validate().is_err(), "{t:?}");
        }
    }

    #[test]
    fn each_rule_is_named() {
        let base = Timing::new(secs(10.0));
        let cases: Vec<(Timing, &str)> = vec![
            (
                Timing {
                    ttl: Duration::ZERO,
                    ..base
                },
                "ttl must be greater than zero",
            ),
            (
                Timing {
                    renew_deadline: secs(10.0),
                    ..base
                },
                "must be shorter than ttl",
            ),
            (
                Timing {
                    renew_every: secs(5.0),
                    ..base
                },
                "must exceed 1.2 x renew interval",
            ),
            (
                Timing {
                    grace: secs(5.0),
                    ..base
                },
                "grace",
            ),
            (Timing { drift: 0.5, ..base }, "clock drift"),
            (
                Timing {
                    ttl: secs(100_000.0),
                    ..base
                },
                "maximum of one day",
            ),
        ];
        for (t, needle) in cases {
            let err = t.validate().expect_err(needle).to_string();
            assert!(err.contains(needle), "{err:?} should name {needle:?}");
        }
    }

    #[test]
    fn deadline_is_measured_from_send_with_drift_and_margin() {
        let t = Timing::new(secs(10.0));
        let sent = Instant::now();
        assert_eq!(
            t.local_deadline(sent) - sent,
            secs(9.9) - Duration::from_millis(5)
        );
        assert_eq!(t.step_down_at(sent) - sent, secs(6.0));
    }

    #[test]
    fn explain_gives_numbers() {
        let t = Timing::new(secs(10.0));
        let info = StoreInfo::new(
            "test",
            StoreStyle::Race,
            WatchMode::Poll(Duration::from_millis(250)),
            SafetyClass::SingleNode,
        )
        .with_ttl_range(Duration::from_secs(1), MAX_TTL);
        let e = t.explain(&info);
        assert_eq!(e.crash_failover, secs(10.25));
        // At 2 s, then every 0.5 s strictly before 6 s: 2, 2.5, ... 5.5.
        assert_eq!(e.renew_attempts, 8);
        assert_eq!(e.safety_budget, t.usable() - secs(8.0));
        let text = e.to_string();
        assert!(text.contains("worst-case failover"), "{text}");
        assert!(text.contains("safety budget"), "{text}");
    }

    #[test]
    fn explain_adds_the_ttl_dependent_expiry_slack() {
        let t = Timing::new(secs(10.0));
        // Consul: a session is invalidated up to twice its ttl.
        let consul = StoreInfo::new(
            "consul",
            StoreStyle::Race,
            WatchMode::Notify,
            SafetyClass::Consensus,
        )
        .with_expiry_slack(ExpirySlack::proportional(100));
        let e = t.explain(&consul);
        assert_eq!(e.expiry_slack, secs(10.0));
        assert_eq!(e.crash_failover, secs(20.0));
        let text = e.to_string();
        assert!(
            text.contains("failover after a leader crash: 20s"),
            "{text}"
        );
        assert!(text.contains("store expiry slack 10s"), "{text}");

        // Fixed plus proportional, and it follows the ttl.
        let both = consul.with_expiry_slack(ExpirySlack::new(secs(1.0), 50));
        assert_eq!(t.explain(&both).crash_failover, secs(16.0));
        let t4 = Timing::new(secs(4.0));
        assert_eq!(t4.explain(&both).expiry_slack, secs(3.0));
    }

    #[test]
    fn expiry_slack_saturates() {
        let huge = ExpirySlack::new(Duration::MAX, u32::MAX);
        assert_eq!(huge.for_ttl(secs(10.0)), Duration::MAX);
        assert_eq!(ExpirySlack::NONE.for_ttl(secs(10.0)), Duration::ZERO);
    }

    #[test]
    fn a_longer_grant_changes_nothing() {
        let t = Timing::new(secs(10.0));
        assert_eq!(t.for_granted(secs(11.0)), Ok(t));
        assert_eq!(t.for_granted(secs(10.0)), Ok(t));
    }

    #[test]
    fn a_shorter_grant_moves_the_local_deadline_but_not_the_step_down() {
        let t = Timing::new(secs(10.0));
        // 6 s renew deadline + 2 s grace still fit in 9 s less drift.
        let g = t.for_granted(secs(9.0)).expect("the rules hold");
        let sent = Instant::now();
        assert_eq!(g.ttl, secs(9.0));
        assert_eq!(
            g.local_deadline(sent) - sent,
            secs(9.0).mul_f64(0.99) - Duration::from_millis(5)
        );
        assert_eq!(g.step_down_at(sent), t.step_down_at(sent));
        assert_eq!(g.renew_every, t.renew_every);
    }

    #[test]
    fn a_shorter_grant_that_breaks_a_rule_is_refused_naming_it() {
        let t = Timing::new(secs(10.0));
        // 6 s renew deadline + 2 s grace do not fit in 7 s less drift.
        let err = t.for_granted(secs(7.0)).unwrap_err();
        assert!(matches!(err, ConfigError::GraceTooLong { .. }), "{err:?}");
        // 6 s renew deadline does not fit in 5 s.
        let err = t.for_granted(secs(5.0)).unwrap_err();
        assert!(
            matches!(err, ConfigError::DeadlineNotBelowTtl { ttl, .. } if ttl == secs(5.0)),
            "{err:?}"
        );
        assert!(matches!(
            t.for_granted(Duration::ZERO),
            Err(ConfigError::Zero { what: "ttl" })
        ));
    }
}
