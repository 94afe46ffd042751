//! The judge of a run: the leaders' beliefs against the store's record log.
//!
//! A record *leads* over an interval of the store's time (tokio's clock,
//! with the store's drift already in its expiry instants): on a race store
//! from its creation to its end; on a queue store from when every record
//! with a smaller token has ended, to its end. The checks, in order:
//!
//! 1. every candidate task ran to the stop (none failed or panicked);
//! 2. the beliefs pass [`History::check`]: well formed, no two overlap,
//!    fencing tokens grow strictly in order of start;
//! 3. every belief lies within the time its record led: the store had
//!    issued that token to that holder, and neither expired nor released
//!    nor handed the lease on before the leader stopped acting as one;
//! 4. at most one leader believed it led at any instant while its lease
//!    was valid by the store's clock — here counting a paused process's
//!    belief until it noticed the end, cut to the time its record led;
//! 5. every record a release ended was released by its own holder;
//! 6. leadership recovered: someone led in the last stretch of the calm
//!    after the faults (a ttl plus the store's expiry slack).

use std::fmt;

use regent_core::memory::{RecordEndCause, RecordLife};
use regent_core::{FencingToken, HolderId, StoreStyle};
use regent_testkit::History;
use tokio::time::Instant;

use crate::sim::{Belief, Outcome};

/// A record's life as the checks need it.
#[derive(Clone, Debug)]
pub(crate) struct Life {
    pub(crate) holder: HolderId,
    pub(crate) token: FencingToken,
    pub(crate) created: Instant,
    pub(crate) end: Option<Instant>,
    /// Who asked, if a release ended it.
    pub(crate) released_by: Option<HolderId>,
}

impl From<&RecordLife> for Life {
    fn from(l: &RecordLife) -> Self {
        Life {
            holder: l.holder.clone(),
            token: l.token,
            created: l.created,
            end: l.end.as_ref().map(|e| e.at),
            released_by: l.end.as_ref().and_then(|e| match &e.cause {
                RecordEndCause::Released { by } => Some(by.clone()),
                _ => None,
            }),
        }
    }
}

/// When a record led: from `from` (included) to `until` (excluded), or
/// to the end of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lead {
    pub(crate) from: Instant,
    pub(crate) until: Option<Instant>,
}

/// What one run gives the checks.
#[derive(Debug)]
pub(crate) struct Case<'a> {
    pub(crate) style: StoreStyle,
    /// Instants are shown as the time since it.
    pub(crate) start: Instant,
    pub(crate) beliefs: &'a [Belief],
    /// In token order.
    pub(crate) lives: Vec<Life>,
    pub(crate) failures: &'a [String],
    /// Someone must have led at some instant in it.
    pub(crate) recovery: Option<(Instant, Instant)>,
}

/// Which check failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Failed,
    Unsafe,
    BeyondLease,
    TwoLiveLeaders,
    ReleasedByAnother,
    NoRecovery,
}

/// A failed check and what broke it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Violation {
    pub(crate) kind: Kind,
    pub(crate) message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Checks a run (see the module docs).
pub(crate) fn check(outcome: &Outcome) -> Result<(), Violation> {
    let plan = &outcome.plan;
    let window = plan.ttl + plan.slack.for_ttl(plan.ttl);
    judge(&Case {
        style: plan.style,
        start: outcome.start,
        beliefs: &outcome.beliefs,
        lives: outcome.log.iter().map(Life::from).collect(),
        failures: &outcome.failures,
        recovery: Some((outcome.stop - window, outcome.stop)),
    })
}

/// When each record of `lives` (in token order) led, if it did.
pub(crate) fn leads(style: StoreStyle, lives: &[Life]) -> Vec<Option<Lead>> {
    // Queue store: a record leads once every record before it in line has
    // ended; while one of them lives, it waits.
    let mut ahead_ended: Option<Instant> = None;
    let mut ahead_lives = false;
    lives
        .iter()
        .map(|l| {
            let lead = match style {
                StoreStyle::Queue if ahead_lives => None,
                StoreStyle::Queue => {
                    let from = ahead_ended.map_or(l.created, |at| at.max(l.created));
                    match l.end {
                        Some(end) if end <= from => None,
                        until => Some(Lead { from, until }),
                    }
                }
                _ => Some(Lead {
                    from: l.created,
                    until: l.end,
                }),
            };
            match l.end {
                Some(end) => ahead_ended = Some(ahead_ended.map_or(end, |at| at.max(end))),
                None => ahead_lives = true,
            }
            lead
        })
        .collect()
}

struct Shown<'a>(&'a Belief, Instant);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Shown(b, start) = *self;
        let t = |at: Option<Instant>| match at {
            Some(at) => format!("+{:?}", at.saturating_duration_since(start)),
            None => "the end".to_owned(),
        };
        write!(
            f,
            "{} with token {} (believed from {}, acted as leader until {}, noticed the end at {})",
            b.holder,
            b.token,
            t(Some(b.start)),
            t(b.end),
            t(b.noticed)
        )
    }
}

fn at(start: Instant, at: Option<Instant>) -> String {
    match at {
        Some(at) => format!("+{:?}", at.saturating_duration_since(start)),
        None => "the end".to_owned(),
    }
}

fn violation(kind: Kind, message: String) -> Result<(), Violation> {
    Err(Violation { kind, message })
}

/// Runs every check on `case`; the first violation found.
pub(crate) fn judge(case: &Case<'_>) -> Result<(), Violation> {
    let start = case.start;
    if !case.failures.is_empty() {
        return violation(
            Kind::Failed,
            format!("candidates failed: {}", case.failures.join("; ")),
        );
    }

    let history = History::new();
    for b in case.beliefs {
        history.begin(&b.holder, b.token, b.start);
        if let Some(end) = b.end {
            history.end(&b.holder, b.token, end);
        }
    }
    if let Err(v) = history.check() {
        return violation(Kind::Unsafe, v.to_string());
    }

    let leads = leads(case.style, &case.lives);
    let lead_of = |b: &Belief| -> Result<Option<Lead>, ()> {
        let i = case
            .lives
            .binary_search_by_key(&b.token, |l| l.token)
            .map_err(|_| ())?;
        if case.lives[i].holder != b.holder {
            return Err(());
        }
        Ok(leads[i])
    };
    let mut live = Vec::new();
    for b in case.beliefs {
        let Ok(lead) = lead_of(b) else {
            return violation(
                Kind::BeyondLease,
                format!(
                    "{} believed it led, but the store never issued it that token",
                    Shown(b, start)
                ),
            );
        };
        let acted = b.end.is_none_or(|end| end > b.start);
        let within = lead.is_some_and(|lead| {
            lead.from <= b.start
                && match (b.end, lead.until) {
                    (_, None) => true,
                    (Some(end), Some(until)) => end <= until,
                    (None, Some(_)) => false,
                }
        });
        if acted && !within {
            let led = match lead {
                Some(lead) => format!(
                    "its record led from {} until {}",
                    at(start, Some(lead.from)),
                    at(start, lead.until)
                ),
                None => "its record never led".to_owned(),
            };
            return violation(
                Kind::BeyondLease,
                format!(
                    "{} acted as leader outside its lease by the store's clock: {led}",
                    Shown(b, start)
                ),
            );
        }
        // The belief, as long as it lasted, cut to when the lease was valid.
        if let Some(lead) = lead {
            let from = lead.from.max(b.start);
            let until = match (b.noticed, lead.until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if until.is_none_or(|until| until > from) {
                live.push((from, until, b));
            }
        }
    }
    live.sort_by_key(|(from, _, b)| (*from, b.token));
    for pair in live.windows(2) {
        let [(_, until, first), (from, _, second)] = pair else {
            unreachable!("windows(2) yields pairs")
        };
        if until.is_none_or(|until| *from < until) {
            return violation(
                Kind::TwoLiveLeaders,
                format!(
                    "two leaders with valid leases at {}: {} and {}",
                    at(start, Some(*from)),
                    Shown(first, start),
                    Shown(second, start)
                ),
            );
        }
    }

    if let Some(l) = case
        .lives
        .iter()
        .find(|l| l.released_by.as_ref().is_some_and(|by| *by != l.holder))
    {
        return violation(
            Kind::ReleasedByAnother,
            format!(
                "the record of {} with token {} was released by {} at {}",
                l.holder,
                l.token,
                l.released_by.as_ref().expect("found so"),
                at(start, l.end)
            ),
        );
    }

    if let Some((from, to)) = case.recovery {
        let led = case.beliefs.iter().any(|b| {
            let end = b.end;
            b.start < to && end.is_none_or(|end| end > from && end > b.start)
        });
        if !led {
            return violation(
                Kind::NoRecovery,
                format!(
                    "no one led between {} and {}, long after the last fault",
                    at(start, Some(from)),
                    at(start, Some(to))
                ),
            );
        }
    }
    Ok(())
}
