//! [`CandidateBuilder`]: a candidate's settings, checked against the
//! timing rules and the store's ttl range before it is built; a rule
//! broken by a default derived from the ttl names the settings to change.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Candidate, Core};
use crate::error::ConfigError;
use crate::limits::MAX_TTL;
use crate::status::Status;
use crate::store::{AcquireRequest, LeaseStore, WatchMode};
use crate::timing::Timing;
use crate::types::{ElectionName, HolderId, Metadata};

/// The default lease ttl.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// How long a leader sees a candidate of higher priority present before it
/// hands over to it, unless [`CandidateBuilder::settle`] says otherwise.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(10);

/// Builds a [`Candidate`]; `build()` checks the timing rules.
#[must_use]
pub struct CandidateBuilder<S> {
    store: S,
    election: ElectionName,
    holder: HolderId,
    metadata: Metadata,
    ttl: Duration,
    renew_every: Option<Duration>,
    renew_deadline: Option<Duration>,
    grace: Option<Duration>,
    drift: Option<f64>,
    margin: Option<Duration>,
    retry_every: Option<Duration>,
    give_up_after: Option<Duration>,
    shutdown: Option<CancellationToken>,
    priority: Option<i32>,
    settle: Option<Duration>,
    hand_overs: Option<bool>,
}

impl<S: LeaseStore> Candidate<S> {
    /// Starts building a candidate for `election`, identified as `holder`,
    /// on `store`.
    pub fn builder(store: S, election: ElectionName, holder: HolderId) -> CandidateBuilder<S> {
        CandidateBuilder {
            store,
            election,
            holder,
            metadata: Metadata::new(),
            ttl: DEFAULT_TTL,
            renew_every: None,
            renew_deadline: None,
            grace: None,
            drift: None,
            margin: None,
            retry_every: None,
            give_up_after: None,
            shutdown: None,
            priority: None,
            settle: None,
            hand_overs: None,
        }
    }
}

impl<S: LeaseStore> CandidateBuilder<S> {
    /// The lease's time to live on the store (default 10 s). The other
    /// durations default to fractions of it; see [`Timing::new`].
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How often the leader renews (default `ttl/5`).
    pub fn renew_every(mut self, every: Duration) -> Self {
        self.renew_every = Some(every);
        self
    }

    /// How long after its last successful renewal was sent the leader steps
    /// down if it could not renew since (default `3*ttl/5`).
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = Some(deadline);
        self
    }

    /// How long the leader task gets to stop once leadership ends (default
    /// 2 s, or less if that does not fit before the lease deadline).
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }

    /// The fraction by which this host's clock may run slower than the
    /// store's (default 0.01, at most 0.1).
    pub fn clock_drift(mut self, drift: f64) -> Self {
        self.drift = Some(drift);
        self
    }

    /// A fixed margin subtracted from the local lease deadline (default
    /// 5 ms).
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// How often a follower retries acquiring even when its watch reports
    /// nothing. A safety net for watches that miss an event. Default: the
    /// renew interval, and the ttl while someone leads and the watch of a
    /// store that notifies ([`WatchMode::Notify`](WatchMode::Notify):
    /// etcd, Consul, ZooKeeper) is open, since such a watch tells of the
    /// term's end, an expiry included; setting it applies it in every case.
    /// With no leader and an acquire that failed all the same (Consul's lock
    /// delay) the renew interval holds: nothing in the store announces the
    /// moment an acquire can succeed.
    pub fn retry_every(mut self, every: Duration) -> Self {
        self.retry_every = Some(every);
        self
    }

    /// What the leader publishes about itself.
    pub fn metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// This candidate's priority (default: none published, which counts
    /// as 0): among the candidates present, one of the highest leads. A
    /// leader that sees a candidate of strictly higher priority present
    /// for the [settle time](Self::settle) hands its term over to it (see
    /// [`handover`](crate::handover)). Published in the metadata under
    /// [`PRIORITY_KEY`](crate::handover::PRIORITY_KEY).
    ///
    /// ```
    /// use std::time::Duration;
    /// use regent_core::{Candidate, ElectionName, HolderId, memory::MemoryStore};
    ///
    /// let candidate = Candidate::builder(
    ///     MemoryStore::race(),
    ///     ElectionName::new("jobs")?,
    ///     HolderId::new("zone-a-1")?,
    /// )
    /// .priority(10)
    /// .settle(Duration::from_secs(30))
    /// .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }

    /// How long a leader must see a candidate of higher priority present
    /// before it hands over to it (default [`DEFAULT_SETTLE`]): long
    /// enough that a candidate in a crash loop, or one still warming up,
    /// is not handed a term it drops.
    pub fn settle(mut self, settle: Duration) -> Self {
        self.settle = Some(settle);
        self
    }

    /// Whether this candidate takes part in hand-overs (default: yes once
    /// it has a [priority](Self::priority), else no): on a race store it
    /// enrolls on the roster while it campaigns (one write per renew
    /// interval), and as leader it reads the candidates and the hand-over
    /// requests at each renewal (two reads) and hands over to a preferred
    /// candidate or on request. Off, it does none of that, and its terms
    /// are neither preempted nor handed over on request
    /// ([`request`](crate::handover::request) waits for it in vain).
    ///
    /// Off by default without a priority, so that a process leading many
    /// elections keeps their renewals' cost (one shared lease's rounds on
    /// etcd, Consul and ZooKeeper) and adds no read per election;
    /// `regent run` turns it on.
    ///
    /// ```
    /// use regent_core::{Candidate, ElectionName, HolderId, memory::MemoryStore};
    ///
    /// // Answers `regent handover` without a priority of its own.
    /// let candidate = Candidate::builder(
    ///     MemoryStore::race(),
    ///     ElectionName::new("jobs")?,
    ///     HolderId::new("web-1")?,
    /// )
    /// .hand_overs(true)
    /// .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hand_overs(mut self, on: bool) -> Self {
        self.hand_overs = Some(on);
        self
    }

    /// Give up campaigning with [`CampaignError::Unavailable`](crate::CampaignError::Unavailable) once the store
    /// has failed every call for this long (default: never give up).
    pub fn give_up_after(mut self, after: Duration) -> Self {
        self.give_up_after = Some(after);
        self
    }

    /// Shut the candidate down when `token` is cancelled (default: a token
    /// of its own; see [`Candidate::shutdown`]).
    pub fn shutdown_token(mut self, token: CancellationToken) -> Self {
        self.shutdown = Some(token);
        self
    }

    /// Checks the timing rules, and that the ttl lies in the store's range
    /// ([`StoreInfo::min_ttl`](crate::StoreInfo::min_ttl) to
    /// [`StoreInfo::max_ttl`](crate::StoreInfo::max_ttl), capped at a day),
    /// and builds the candidate.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the rule broken;
    /// [`ConfigError::TtlBelowStoreMinimum`] and
    /// [`ConfigError::TtlAboveStoreMaximum`] name the store's range.
    pub fn build(self) -> Result<Candidate<S>, ConfigError> {
        let timing = self.timing()?;
        let info = self.store.info();
        let (min, max) = (info.min_ttl, info.effective_max_ttl());
        if timing.ttl < min {
            return Err(ConfigError::TtlBelowStoreMinimum {
                ttl: timing.ttl,
                min,
                max,
                store: info.name,
            });
        }
        if timing.ttl > max {
            return Err(ConfigError::TtlAboveStoreMaximum {
                ttl: timing.ttl,
                min,
                max,
                store: info.name,
            });
        }
        if self.give_up_after.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::Zero {
                what: "give-up window",
            });
        }
        if self.settle.is_some_and(|d| d > MAX_TTL) {
            return Err(ConfigError::TooLong {
                what: "settle time",
                value: self.settle.unwrap_or_default(),
                max: MAX_TTL,
            });
        }
        let metadata = match self.priority {
            Some(p) => self
                .metadata
                .with(crate::handover::PRIORITY_KEY, p.to_string())
                .map_err(|_| ConfigError::MetadataTooLong {
                    len: self
                        .metadata
                        .iter()
                        .map(|(k, v)| k.len() + v.len())
                        .sum::<usize>()
                        + crate::handover::PRIORITY_KEY.len()
                        + p.to_string().len(),
                    max: crate::types::MAX_METADATA_LEN,
                })?,
            None => self.metadata,
        };
        Ok(Candidate {
            core: Arc::new(Core {
                store: Arc::new(self.store),
                req: AcquireRequest {
                    election: self.election,
                    holder: self.holder,
                    ttl: timing.ttl,
                    metadata,
                },
                choosing: super::Choosing {
                    on: self.hand_overs.unwrap_or(self.priority.is_some()),
                    priority: self.priority.unwrap_or(0),
                    settle: self.settle.unwrap_or(DEFAULT_SETTLE),
                },
                watched_retry: match (self.retry_every, info.watch) {
                    (None, WatchMode::Notify) => timing.ttl.max(timing.retry_every),
                    _ => timing.retry_every,
                },
                timing,
                give_up_after: self.give_up_after,
                shutdown: self.shutdown.unwrap_or_default(),
                tracker: TaskTracker::new(),
                campaigns: TaskTracker::new(),
                status: Arc::new(watch::Sender::new(Status::Starting)),
                events: crate::events::TermEvents::new(),
                hand_over: Arc::default(),
            }),
        })
    }

    /// The timing these settings give, checked. Each setting is checked
    /// on its own first (zero, NaN, out of range, longer than a day), so
    /// that nothing is derived from a bad value; a rule then broken by a
    /// value derived from the ttl names the settings to change
    /// ([`ConfigError::Settings`]).
    fn timing(&self) -> Result<Timing, ConfigError> {
        crate::timing::check_ttl(self.ttl)?;
        if let Some(drift) = self.drift {
            crate::timing::check_drift(drift)?;
        }
        for (what, value) in [
            ("renew interval", self.renew_every),
            ("renew deadline", self.renew_deadline),
            ("retry interval", self.retry_every),
        ] {
            if value.is_some_and(|v| v.is_zero()) {
                return Err(ConfigError::Zero { what });
            }
        }
        for (what, value) in [
            ("renew interval", self.renew_every),
            ("renew deadline", self.renew_deadline),
            ("retry interval", self.retry_every),
            ("grace", self.grace),
            ("margin", self.margin),
        ] {
            if let Some(value) = value.filter(|v| *v > MAX_TTL) {
                return Err(ConfigError::TooLong {
                    what,
                    value,
                    max: MAX_TTL,
                });
            }
        }
        let mut timing = Timing::new(self.ttl);
        if let Some(d) = self.drift {
            timing.drift = d;
        }
        if let Some(m) = self.margin {
            timing.margin = m;
        }
        if let Some(e) = self.renew_every {
            timing.renew_every = e;
            timing.retry_every = e;
        }
        if let Some(d) = self.renew_deadline {
            timing.renew_deadline = d;
        }
        if let Some(r) = self.retry_every {
            timing.retry_every = r;
        }
        timing.grace = self.grace.unwrap_or_else(|| timing.default_grace());
        timing.validate().map_err(|rule| self.name_settings(rule))?;
        Ok(timing)
    }

    /// Wraps a broken rule that involves a value the caller did not set
    /// (a default derived from the ttl) with which settings to change.
    fn name_settings(&self, rule: ConfigError) -> ConfigError {
        let ttl = self.ttl;
        let deadline_default = self.renew_deadline.is_none();
        let every_default = self.renew_every.is_none();
        let message = match &rule {
            ConfigError::DeadlineNotBelowTtl {
                renew_deadline,
                usable,
                ..
            } if deadline_default => format!(
                "{rule}; the renew deadline is its default, 3/5 of the ttl ({renew_deadline:?}): set a renew_deadline below {usable:?}, or lower margin or clock_drift"
            ),
            ConfigError::IntervalNotBelowDeadline {
                renew_deadline,
                renew_every,
            } if deadline_default || every_default => {
                let every_below = *renew_deadline * 5 / 6;
                let deadline_above = renew_every.saturating_mul(6) / 5;
                if deadline_default && every_default {
                    // Not reachable from ttl alone, but say something true.
                    format!(
                        "{rule}; both are derived from ttl {ttl:?}: set renew_every and renew_deadline"
                    )
                } else if deadline_default {
                    // A longer deadline helps only if one can fit.
                    let usable = Timing {
                        ttl,
                        drift: self.drift.unwrap_or(0.01),
                        margin: self.margin.unwrap_or(Timing::new(ttl).margin),
                        ..Timing::new(ttl)
                    }
                    .usable();
                    let or_deadline = if deadline_above < usable {
                        format!(
                            ", or set renew_deadline above {deadline_above:?} (and below {usable:?})"
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        "{rule}; renew_every {renew_every:?} is too long for ttl {ttl:?}, whose default renew deadline is 3/5 of it ({renew_deadline:?}): set renew_every below {every_below:?}{or_deadline}"
                    )
                } else {
                    format!(
                        "{rule}; renew_deadline {renew_deadline:?} is too short for the default renew interval, ttl/5 ({renew_every:?}): set renew_deadline above {deadline_above:?}, or set renew_every below {every_below:?}"
                    )
                }
            }
            ConfigError::GraceTooLong {
                renew_deadline,
                usable,
                ..
            } if deadline_default => format!(
                "{rule}; with the default renew deadline, 3/5 of the ttl ({renew_deadline:?}), grace can be at most {:?}: set a shorter grace (the default fits), a shorter renew_deadline, or a longer ttl than {ttl:?}",
                usable.saturating_sub(*renew_deadline)
            ),
            _ => return rule,
        };
        ConfigError::Settings {
            message,
            rule: Box::new(rule),
        }
    }
}
