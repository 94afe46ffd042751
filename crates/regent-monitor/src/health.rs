//! [`Health`]: whether an instance does what it should, by rules an
//! operator can read ([`Monitor::health`](crate::Monitor::health)).

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::calls::CallsSnapshot;

/// Whether an instance does what it should, as two checks in the manner of
/// Kubernetes' probes, each `Ok(what it is doing)` or `Err(why not)` in
/// one line.
///
/// **`live`** (served as `/healthz` and `/livez`) fails when, and only
/// when:
///
/// 1. this instance leads and its local lease deadline has passed: no
///    renewal was confirmed in time, yet the term goes on — the renewals or
///    the process are stuck (a healthy leader steps down at its renew
///    deadline, before that). client-go's `HealthzAdaptor` checks the same;
/// 2. this instance leads, a health timeout is set, and the leader's work
///    has not beaten for longer than it;
/// 3. the last term of this instance ended because its work stopped
///    beating, and no term has begun since (a restart is the usual cure
///    for a hung command; a new term clears it);
/// 4. every store request has failed, or gone unanswered for a second or
///    more, for longer than the limit (the renew deadline for an instance
///    that campaigns, 10 s for an observer), and the last such failure is
///    less than three limits old: the store is unreachable, and a follower
///    could not take over if the leader failed. (A request cut short at
///    once, by a term's end or a shutdown, is no failure of the store; and
///    a store nobody has asked for three limits is not judged.)
///
/// **`ready`** (served as `/readyz`) fails on the same, and also before the
/// store's first answer and once the instance has stopped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_core::{Candidate, ElectionName, HolderId, memory::MemoryStore};
/// use regent_monitor::Monitor;
///
/// let candidate = Candidate::builder(MemoryStore::race(), ElectionName::new("jobs")?, HolderId::new("a")?)
///     .build()?;
/// let monitor = Monitor::follow(&candidate);
/// monitor.settled().await;
/// let health = monitor.health();
/// assert!(health.live.is_ok());
/// assert_eq!(health.ready, Err("starting: no answer from the store yet".to_owned()));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// Doing what it should: `/healthz`, `/livez`.
    pub live: Result<String, String>,
    /// Doing it, and able to serve: `/readyz`.
    pub ready: Result<String, String>,
}

/// This instance's term in progress.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnTerm {
    pub(crate) token: regent_core::FencingToken,
    pub(crate) confirmed_at: Instant,
    pub(crate) deadline: Instant,
    pub(crate) step_down_at: Instant,
}

/// What the health rules look at.
pub(crate) struct HealthInputs {
    pub(crate) observer: bool,
    pub(crate) started: bool,
    pub(crate) stopped: bool,
    pub(crate) leading: Option<OwnTerm>,
    pub(crate) calls: Option<CallsSnapshot>,
    pub(crate) unreachable_after: Duration,
    pub(crate) health_timeout: Option<Duration>,
    pub(crate) last_beat: Option<Instant>,
    pub(crate) unhealthy_end: Option<SystemTime>,
    pub(crate) follow_error: Option<String>,
    pub(crate) now: Instant,
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

impl Health {
    pub(crate) fn of(i: &HealthInputs) -> Self {
        let live = Self::live(i);
        let ready = match &live {
            Err(e) => Err(e.clone()),
            Ok(_) if i.stopped => Err("stopped".to_owned()),
            Ok(_) if !i.started => Err("starting: no answer from the store yet".to_owned()),
            Ok(_) => match (&i.follow_error, i.observer) {
                (Some(e), true) => Err(format!("following the leader failed: {e}")),
                _ => live.clone(),
            },
        };
        Health { live, ready }
    }

    fn live(i: &HealthInputs) -> Result<String, String> {
        let now = i.now;
        if let Some(term) = i.leading {
            let since = now.saturating_duration_since(term.confirmed_at);
            if now >= term.deadline {
                return Err(format!(
                    "leading past its local lease deadline: no renewal confirmed for {}; the renewals are stuck",
                    secs(since)
                ));
            }
            if let (Some(timeout), Some(beat)) = (i.health_timeout, i.last_beat) {
                let silent = now.saturating_duration_since(beat);
                if silent > timeout {
                    return Err(format!(
                        "the leader's work has not beaten for {} (health timeout {})",
                        secs(silent),
                        secs(timeout)
                    ));
                }
            }
        } else if let Some(at) = i.unhealthy_end {
            let ago = SystemTime::now().duration_since(at).unwrap_or_default();
            return Err(format!(
                "the last term ended {} ago because the leader's work stopped beating; no term since",
                secs(ago)
            ));
        }
        if let Some(calls) = &i.calls
            && let Some(since) = calls.failing_since
            && calls
                .last_failure
                .is_some_and(|at| now.saturating_duration_since(at) < i.unreachable_after * 3)
        {
            let failing = now.saturating_duration_since(since);
            if failing > i.unreachable_after {
                let mut why = format!(
                    "the store has not answered for {} (limit {})",
                    secs(failing),
                    secs(i.unreachable_after)
                );
                if let Some(e) = &calls.last_error {
                    let _ = write!(why, ": {e}");
                }
                return Err(why);
            }
        }
        Ok(match i.leading {
            Some(term) => format!(
                "leading (token {}); last renewal {} ago",
                term.token,
                secs(now.saturating_duration_since(term.confirmed_at))
            ),
            None if i.observer => "observing".to_owned(),
            None => "following".to_owned(),
        })
    }
}
