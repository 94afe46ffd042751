//! `regent run`'s settings: its flags, the environment and the store's
//! options resolved and checked once, before any connection.

use std::time::Duration;

use regent_core::{Candidate, CandidateBuilder, ConfigError, ElectionName, HolderId, LeaseStore};

use crate::cli::{ChildArgs, RunArgs, default_id};
use crate::error::CliError;
use crate::store;

/// Everything `regent run` needs, checked: usage errors come before any
/// connection (a dead store must not delay them).
pub(crate) struct RunConfig {
    pub(crate) election: ElectionName,
    pub(crate) target: store::Target,
    pub(crate) holder: Holder,
    pub(crate) timing: TimingFlags,
    /// The bound of every store call: the renew interval (see
    /// `store::open`), which a ttl raised to the store's minimum only
    /// lengthens.
    pub(crate) call_timeout: Duration,
    /// How long to retry a store that cannot be reached yet
    /// (`REGENT_START_RETRY`).
    pub(crate) start_window: Duration,
    pub(crate) child: ChildArgs,
    /// `--http`, bound before the first campaign.
    pub(crate) endpoint: Option<crate::http::Endpoint>,
}

/// This instance's id: `--id`, or a default the store may replace by its
/// own convention (Consul: the agent's node name).
pub(crate) enum Holder {
    Given(HolderId),
    /// `HOSTNAME-PID`, unless the store names this instance.
    Default(HolderId),
}

impl Holder {
    /// Whether the store may name this instance.
    pub(crate) fn is_default(&self) -> bool {
        matches!(self, Self::Default(_))
    }

    /// The id, with the store's name for this instance where it gave one.
    pub(crate) fn or_named(self, named: Option<HolderId>) -> HolderId {
        match self {
            Self::Given(id) => id,
            Self::Default(id) => named.unwrap_or(id),
        }
    }
}

impl RunConfig {
    /// Checks every flag and variable and reads every file the store's
    /// options name.
    pub(crate) fn resolve(args: RunArgs) -> Result<Self, CliError> {
        let election = store::election(&args.store)?;
        let target = store::target(&args.store)?;
        let holder = match &args.id {
            Some(id) => {
                Holder::Given(HolderId::new(id).map_err(|e| CliError::usage(format!("--id: {e}")))?)
            }
            None => Holder::Default(
                HolderId::new(default_id()).map_err(|e| CliError::usage(format!("--id: {e}")))?,
            ),
        };
        super::child::check(&args.child)?;
        let timing = TimingFlags {
            ttl: args.ttl,
            renew_every: args.renew_every,
            renew_deadline: args.renew_deadline,
            grace: args.child.grace,
            priority: args.priority,
            settle: args.settle,
        };
        if args.settle.is_some_and(|d| d.is_zero()) {
            return Err(CliError::usage("--settle must be greater than zero"));
        }
        let call_timeout = timing.check(&election, &holder)?;
        let start_window = store::start_retry()?;
        let endpoint = super::endpoint(&args.http)?;
        Ok(Self {
            election,
            target,
            holder,
            timing,
            call_timeout,
            start_window,
            child: args.child,
            endpoint,
        })
    }
}

/// `--ttl`'s default, unless the store's minimum ttl is longer.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// The timing flags as given.
pub(crate) struct TimingFlags {
    ttl: Option<Duration>,
    renew_every: Option<Duration>,
    renew_deadline: Option<Duration>,
    grace: Option<Duration>,
    /// `--priority` and `--settle`: how the candidate is chosen.
    priority: Option<i32>,
    settle: Option<Duration>,
}

impl TimingFlags {
    /// Checks the timing before touching the store; returns the bound of
    /// a store call. Without --ttl the ttl is the store's to raise, which
    /// only an open store tells: a rule the default 10 s breaks is then
    /// judged once the store is open, since a longer ttl may keep it.
    fn check(&self, election: &ElectionName, holder: &Holder) -> Result<Duration, CliError> {
        let (Holder::Given(id) | Holder::Default(id)) = holder;
        let checked = self
            .apply(
                Candidate::builder(
                    regent_core::memory::MemoryStore::race(),
                    election.clone(),
                    id.clone(),
                ),
                self.ttl.unwrap_or(DEFAULT_TTL),
            )
            .build();
        match checked {
            Ok(c) => Ok(c.timing().renew_every),
            Err(e) if self.ttl.is_some() || !depends_on_the_ttl(&e) => {
                Err(self.error(&e, DEFAULT_TTL))
            }
            Err(_) => Ok(self.renew_every.unwrap_or(DEFAULT_TTL / 5)),
        }
    }

    /// The ttl: `--ttl`, else [`DEFAULT_TTL`] raised to the store's
    /// minimum (Azure Blob's leases: 15 s), so that `regent run` works on
    /// every store without the flag.
    pub(crate) fn ttl_for(&self, store_min: Duration) -> Duration {
        self.ttl.unwrap_or_else(|| DEFAULT_TTL.max(store_min))
    }

    /// The candidate on the open store, at `ttl` (see [`Self::ttl_for`]).
    pub(crate) fn candidate<S: LeaseStore>(
        &self,
        store: S,
        election: ElectionName,
        holder: HolderId,
        ttl: Duration,
    ) -> Result<Candidate<S>, CliError> {
        self.apply(Candidate::builder(store, election, holder), ttl)
            .build()
            .map_err(|e| self.error(&e, ttl))
    }

    /// The timing flags applied to a candidate builder, with `ttl`.
    fn apply<S: LeaseStore>(
        &self,
        builder: CandidateBuilder<S>,
        ttl: Duration,
    ) -> CandidateBuilder<S> {
        // The sidecar answers `regent handover` with or without a
        // priority: one election per process, so the two reads per renew
        // interval are cheap (the library's default is off without one).
        let mut builder = builder.ttl(ttl).hand_overs(true);
        if let Some(g) = self.grace {
            builder = builder.grace(g);
        }
        if let Some(d) = self.renew_every {
            builder = builder.renew_every(d);
        }
        if let Some(d) = self.renew_deadline {
            builder = builder.renew_deadline(d);
        }
        if let Some(p) = self.priority {
            builder = builder.priority(p);
        }
        if let Some(s) = self.settle {
            builder = builder.settle(s);
        }
        builder
    }

    /// A broken timing rule as a usage error that starts with the flags
    /// the rule involves, each with its value or "default", so that the
    /// user knows which flag to change even when the other side of the
    /// rule is a default derived from --ttl. `ttl` is the ttl checked:
    /// `--ttl`, or its default.
    fn error(&self, e: &ConfigError, ttl: Duration) -> CliError {
        // The library's own hint names builder methods; the flags say it here.
        let e = e.rule();
        // Debug prints zero as "0ns"; the user typed "0s" or "0ms".
        let show = |d: Duration| {
            if d.is_zero() {
                "0s".to_owned()
            } else {
                format!("{d:?}")
            }
        };
        let ttl = match self.ttl {
            Some(t) => format!("--ttl {}", show(t)),
            None => format!("--ttl (default {})", show(ttl)),
        };
        let flag = |name: &str, given: Option<Duration>, default: &str| match given {
            Some(d) => format!("{name} {}", show(d)),
            None => format!("{name} (default {default})"),
        };
        let every = || flag("--renew-every", self.renew_every, "ttl/5");
        let deadline = || flag("--renew-deadline", self.renew_deadline, "3*ttl/5");
        let flags = match e {
            ConfigError::Zero { what: "ttl" } => ttl,
            ConfigError::Zero {
                what: "renew interval" | "retry interval",
            } => every(),
            ConfigError::Zero {
                what: "renew deadline",
            } => deadline(),
            ConfigError::DeadlineNotBelowTtl { .. } => format!("{}, {ttl}", deadline()),
            ConfigError::IntervalNotBelowDeadline { .. } => format!("{}, {}", every(), deadline()),
            ConfigError::GraceTooLong { .. } => format!(
                "{}, {}, {ttl}",
                flag("--grace", self.grace, "2s or what fits"),
                deadline()
            ),
            ConfigError::TooLong {
                what: "settle time",
                ..
            } => "--settle".to_owned(),
            ConfigError::MetadataTooLong { .. } => "--priority".to_owned(),
            ConfigError::TtlTooLong { .. }
            | ConfigError::TtlTooShort { .. }
            | ConfigError::TtlBelowStoreMinimum { .. }
            | ConfigError::TtlAboveStoreMaximum { .. } => ttl,
            _ => "invalid timing (--ttl, --renew-every, --renew-deadline, --grace)".to_owned(),
        };
        CliError::usage(format!("{flags}: {e}"))
    }
}

/// Whether a longer ttl may mend the broken rule `e` (a renew deadline,
/// interval or grace that does not fit the ttl or its defaults).
fn depends_on_the_ttl(e: &ConfigError) -> bool {
    matches!(
        e,
        ConfigError::DeadlineNotBelowTtl { .. }
            | ConfigError::IntervalNotBelowDeadline { .. }
            | ConfigError::GraceTooLong { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `regent run` defaulted to `--ttl 10s` on every store, so
    /// on Azure Blob (leases of 15 s at least) it refused to start without
    /// the flag.
    #[test]
    fn the_default_ttl_is_raised_to_the_stores_minimum() {
        let s = Duration::from_secs;
        let no_flags = TimingFlags {
            ttl: None,
            renew_every: None,
            renew_deadline: None,
            grace: None,
            priority: None,
            settle: None,
        };
        assert_eq!(no_flags.ttl_for(Duration::ZERO), s(10));
        assert_eq!(no_flags.ttl_for(s(10)), s(10));
        assert_eq!(no_flags.ttl_for(s(15)), s(15));
    }
}
