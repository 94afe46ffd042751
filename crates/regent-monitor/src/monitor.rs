//! [`Monitor`]: one election as one process sees it, kept current by a
//! background task that follows the election's status and term events (a
//! campaigning instance) or the store's watch (an observer).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use futures_core::Stream;
use futures_util::StreamExt as _;
use regent_core::{
    Candidacy, Election, ElectionName, EndReason, HolderId, LeaderInfo, LeaseStore, Observer,
    Status, TermEvent,
};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

use crate::calls::StoreCalls;
use crate::health::{Health, HealthInputs, OwnTerm};
use crate::timeline::{TermRecord, Timeline, wall};

/// One election as this process sees it: who leads, this instance's own
/// terms (won, ended and why, the lease left), the timeline of terms, the
/// store's requests, and whether this instance is healthy.
///
/// Built with [`follow`](Self::follow) for an instance that campaigns (a
/// [`Candidate`](regent_core::Candidate), a peer node: anything that
/// implements [`Election`]), or [`observe`](Self::observe) for a process
/// that only watches. A background task keeps it current while a clone of
/// it lives. Nothing it does can change leadership: it only reads.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_core::{Candidate, ElectionName, HolderId, memory::MemoryStore};
/// use regent_monitor::{Monitor, StoreCalls};
///
/// let calls = StoreCalls::new();
/// let store = calls.instrument(MemoryStore::race());
/// let candidate = Candidate::builder(store, ElectionName::new("jobs")?, HolderId::new("a")?)
///     .build()?;
/// // Before the first campaign, so that it sees the first term.
/// let monitor = Monitor::follow(&candidate).with_store_calls(calls);
/// let leadership = candidate.campaign().await?;
/// monitor.settled().await;
/// let seen = monitor.snapshot();
/// assert_eq!(seen.leader.map(|l| l.token), Some(leadership.token()));
/// assert_eq!(seen.terms_won, 1);
/// assert!(monitor.health().live.is_ok());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Monitor {
    pub(crate) shared: Arc<Shared>,
    _task: Arc<AbortOnDropHandle<()>>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) election: ElectionName,
    pub(crate) holder: Option<HolderId>,
    pub(crate) state: Mutex<State>,
    /// Asks the task to answer once it has taken in everything published
    /// ([`Monitor::settled`]).
    pings: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

type Pings = mpsc::UnboundedReceiver<oneshot::Sender<()>>;

/// What the task keeps.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) timeline: Timeline,
    pub(crate) started: bool,
    pub(crate) stopped: bool,
    /// The token of this instance's term while its status says it leads:
    /// what the leader gauges show.
    pub(crate) status_leader: Option<regent_core::FencingToken>,
    /// The term's lease, as its events told it (not known for a term won
    /// before the monitor began).
    pub(crate) leading: Option<OwnTerm>,
    pub(crate) terms_won: u64,
    pub(crate) step_downs: BTreeMap<StepDown, u64>,
    pub(crate) calls: Option<StoreCalls>,
    /// How long the store may fail before this instance is unhealthy.
    pub(crate) unreachable_after: Duration,
    pub(crate) health_timeout: Option<Duration>,
    pub(crate) last_beat: Option<Instant>,
    /// The last term ended because its work stopped heart-beating, at.
    pub(crate) unhealthy_end: Option<SystemTime>,
    pub(crate) command: CommandStats,
    pub(crate) group: Option<GroupView>,
    pub(crate) last_error: Option<String>,
    pub(crate) candidates: Option<Vec<Candidacy>>,
}

impl State {
    /// This instance's term, while its status says it leads and its events
    /// told its lease.
    fn own_term(&self) -> Option<OwnTerm> {
        self.leading.filter(|t| Some(t.token) == self.status_leader)
    }
}

/// Why one of this instance's terms ended, as the metrics count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum StepDown {
    /// The store said the lease is gone or another holds it.
    Lost,
    /// No renewal succeeded before the renew deadline.
    Deadline,
    /// The leader's work stopped heart-beating.
    Health,
    /// The instance shut down.
    Shutdown,
    /// The store failed with a permanent error while renewing.
    StoreError,
    /// The term was given back (the work finished, or the guard was
    /// resigned or dropped).
    Released,
    /// The term was handed to another candidate (a preferred one, or on
    /// request).
    HandedOver,
}

impl StepDown {
    /// Every reason, in the order the metrics list them.
    pub const ALL: [StepDown; 7] = [
        StepDown::Lost,
        StepDown::Deadline,
        StepDown::Health,
        StepDown::Shutdown,
        StepDown::StoreError,
        StepDown::Released,
        StepDown::HandedOver,
    ];

    /// The label value: `lost`, `deadline`, `health`, `shutdown`,
    /// `store_error`, `released`, `handed_over`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepDown::Lost => "lost",
            StepDown::Deadline => "deadline",
            StepDown::Health => "health",
            StepDown::Shutdown => "shutdown",
            StepDown::StoreError => "store_error",
            StepDown::Released => "released",
            StepDown::HandedOver => "handed_over",
        }
    }

    /// How the core's reason is counted.
    pub fn of(reason: EndReason) -> Self {
        match reason {
            EndReason::Lost => StepDown::Lost,
            EndReason::DeadlinePassed => StepDown::Deadline,
            EndReason::Unhealthy => StepDown::Health,
            EndReason::Shutdown => StepDown::Shutdown,
            EndReason::StoreFailed(_) => StepDown::StoreError,
            EndReason::HandedOver(_) => StepDown::HandedOver,
            _ => StepDown::Released,
        }
    }
}

/// What the leader's command did (`regent run`), as the metrics count it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandStats {
    /// Times the command was started.
    pub starts: u64,
    /// Exits by how: an exit code (`"0"`, `"1"`…) or a signal's name
    /// (`"SIGKILL"`).
    pub exits: BTreeMap<String, u64>,
}

/// A peer group as one member sees it (`regent peer`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupView {
    /// The members configured, this one included.
    pub members: u64,
    /// The leader's member id as this member sees it.
    pub leader: Option<u64>,
    /// The epoch (term number) of that leader's term.
    pub epoch: Option<u64>,
    /// Counters of the member's transport, by name (`frames_accepted`…).
    pub counters: Vec<(&'static str, u64)>,
}

impl GroupView {
    /// A view of `members` members with no leader known yet.
    pub fn new(members: u64) -> Self {
        Self {
            members,
            ..Self::default()
        }
    }
}

/// A copy of what a [`Monitor`] knows now.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Snapshot {
    /// The election.
    pub election: ElectionName,
    /// This instance's id (`None` for an observer).
    pub holder: Option<HolderId>,
    /// The leader as seen now.
    pub leader: Option<LeaderInfo>,
    /// Whether this instance leads (as it last published: for display).
    pub leading: bool,
    /// When the leader's term was first seen here.
    pub leader_since: Option<SystemTime>,
    /// The local lease time left of this instance's term, while it leads.
    pub lease_left: Option<Duration>,
    /// Terms this instance won.
    pub terms_won: u64,
    /// Terms seen begin (this instance's and others').
    pub leader_changes: u64,
    /// This instance's terms that ended, by reason.
    pub step_downs: BTreeMap<StepDown, u64>,
    /// The leaderless gap before the last term that began, as seen here.
    pub last_gap: Option<Duration>,
    /// The terms seen, oldest first (at most [`MAX_TERMS`](crate::MAX_TERMS)).
    pub terms: Vec<TermRecord>,
    /// The candidates, where the store lists them: a queue store's line,
    /// leader first; a race store's roster.
    pub candidates: Option<Vec<Candidacy>>,
    /// What the leader's command did.
    pub command: CommandStats,
    /// The peer group as this member sees it.
    pub group: Option<GroupView>,
    /// The last error following the election, while it is not resolved.
    pub error: Option<String>,
}

impl Monitor {
    fn start(
        election: ElectionName,
        holder: Option<HolderId>,
        unreachable_after: Duration,
        task: impl FnOnce(Arc<Shared>, Pings) -> tokio::task::JoinHandle<()>,
    ) -> Self {
        let (pings, pinged) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            election,
            holder,
            state: Mutex::new(State {
                unreachable_after,
                ..State::default()
            }),
            pings,
        });
        let task = task(shared.clone(), pinged);
        Self {
            shared,
            _task: Arc::new(AbortOnDropHandle::new(task)),
        }
    }

    /// Follows `election`, an instance that campaigns: its status and the
    /// events of its terms. Create it before the first campaign, or the
    /// events of a term already won are missed (the status still shows
    /// it). The store counts as unreachable once every request has failed
    /// for the election's renew deadline.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn follow<E: Election>(election: &E) -> Self {
        let mut status = election.status();
        let mut events = election.events();
        Self::start(
            election.election().clone(),
            Some(election.holder().clone()),
            election.timing().renew_deadline,
            move |shared, mut pings| {
                tokio::spawn(async move {
                    let (mut open, mut events_open) = (true, true);
                    let mut acks = Vec::new();
                    loop {
                        // Events first: the status after them (a term's
                        // end is published as an event, then as status).
                        while let Ok(e) = events.try_recv() {
                            shared.apply_event(e);
                        }
                        shared.apply_status(&status.borrow_and_update().clone());
                        for ack in acks.drain(..) {
                            let _: Result<(), ()> = oneshot::Sender::send(ack, ());
                        }
                        tokio::select! {
                            r = status.changed(), if open => open = r.is_ok(),
                            e = events.recv(), if events_open => match e {
                                Ok(e) => shared.apply_event(e),
                                Err(RecvError::Lagged(_)) => {}
                                Err(RecvError::Closed) => events_open = false,
                            },
                            Some(ack) = pings.recv() => acks.push(ack),
                            else => return,
                        }
                        if !open && !events_open {
                            // The election is gone: nothing more will come.
                            return;
                        }
                    }
                })
            },
        )
    }

    /// Follows `observer`'s election from outside, without campaigning (a
    /// dashboard). The store counts as unreachable once every request has
    /// failed for 10 s ([`unreachable_after`](Self::unreachable_after)).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn observe<S: LeaseStore>(observer: Observer<S>) -> Self {
        let election = observer.election().clone();
        let changes = observer
            .changes()
            .map(|r| r.map_err(|e| regent_core::report(&e).to_string()));
        Self::observe_changes(election, changes)
    }

    /// Follows `election` from outside through `changes`: the leader now,
    /// then every change (`None`: nobody leads), or an error, which is
    /// shown until the next change; the stream's end stops the monitor. For
    /// a source that is not a store (a peer group's member, say); see
    /// [`observe`](Self::observe).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn observe_changes<St, E>(election: ElectionName, changes: St) -> Self
    where
        St: Stream<Item = Result<Option<LeaderInfo>, E>> + Send + 'static,
        E: std::fmt::Display,
    {
        Self::start(
            election,
            None,
            Duration::from_secs(10),
            move |shared, mut pings| {
                tokio::spawn(async move {
                    let mut changes = std::pin::pin!(changes);
                    loop {
                        let item = tokio::select! {
                            biased;
                            item = changes.next() => item,
                            Some(ack) = pings.recv() => {
                                let _: Result<(), ()> = ack.send(());
                                continue;
                            }
                        };
                        match item {
                            Some(Ok(leader)) => {
                                let mut s = shared.lock();
                                s.started = true;
                                s.last_error = None;
                                s.timeline.leader(leader.as_ref(), false, Instant::now());
                            }
                            Some(Err(e)) => {
                                shared.lock().last_error = Some(e.to_string());
                            }
                            None => {
                                shared.lock().stopped = true;
                                return;
                            }
                        }
                    }
                })
            },
        )
    }

    /// Counts the store's requests from `calls` (the store the election
    /// runs on, wrapped with [`StoreCalls::instrument`]): the metrics show
    /// them, and the health check fails when the store stops answering.
    #[must_use]
    pub fn with_store_calls(self, calls: StoreCalls) -> Self {
        self.shared.lock().calls = Some(calls);
        self
    }

    /// How long every store request may fail before the health check
    /// fails (default: the renew deadline, or 10 s for an observer).
    #[must_use]
    pub fn unreachable_after(self, after: Duration) -> Self {
        self.shared.lock().unreachable_after = after;
        self
    }

    /// The leader's work beats ([`beat`](Self::beat)) at least this often
    /// while this instance leads; the health check fails when it does not.
    #[must_use]
    pub fn with_health_timeout(self, timeout: Duration) -> Self {
        self.shared.lock().health_timeout = Some(timeout);
        self
    }

    /// The leader's work is alive (a heartbeat).
    pub fn beat(&self) {
        self.shared.lock().last_beat = Some(Instant::now());
    }

    /// The leader's command was started.
    pub fn command_started(&self) {
        self.shared.lock().command.starts += 1;
    }

    /// The leader's command exited on its own: with `code`, or as `other`
    /// says (the signal that ended it, `SIGKILL`; or `cannot start`).
    pub fn command_exited(&self, code: Option<i32>, other: Option<&str>) {
        let how = match (code, other) {
            (Some(c), _) => c.to_string(),
            (None, Some(s)) => s.to_owned(),
            (None, None) => "unknown".to_owned(),
        };
        *self.shared.lock().command.exits.entry(how).or_default() += 1;
    }

    /// The peer group as this member sees it now.
    pub fn set_group(&self, view: GroupView) {
        self.shared.lock().group = Some(view);
    }

    /// The candidates now, where the store lists them.
    pub fn set_candidates(&self, candidates: Option<Vec<Candidacy>>) {
        self.shared.lock().candidates = candidates;
    }

    /// The election.
    pub fn election(&self) -> &ElectionName {
        &self.shared.election
    }

    /// Waits until the background task has taken in everything published
    /// so far (for tests, and for an answer that must include a change
    /// just made).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn settled(&self) {
        let (ack, acked) = oneshot::channel();
        if self.shared.pings.send(ack).is_ok() {
            // The task ended (its election is gone): nothing more to take in.
            let _ = acked.await;
        }
    }

    /// What this monitor knows now.
    pub fn snapshot(&self) -> Snapshot {
        let s = self.shared.lock();
        let now = Instant::now();
        let leader = s.timeline.leader.clone();
        Snapshot {
            election: self.shared.election.clone(),
            holder: self.shared.holder.clone(),
            leading: s.status_leader.is_some(),
            leader_since: leader.as_ref().and_then(|l| {
                s.timeline
                    .terms
                    .back()
                    .filter(|t| t.token == l.token && t.to.is_none())
                    .map(|t| t.from)
            }),
            leader,
            lease_left: s
                .own_term()
                .map(|t| t.deadline.saturating_duration_since(now)),
            terms_won: s.terms_won,
            leader_changes: s.timeline.changes,
            step_downs: s.step_downs.clone(),
            last_gap: s.timeline.last_gap,
            terms: s.timeline.terms.iter().cloned().collect(),
            candidates: s.candidates.clone(),
            command: s.command.clone(),
            group: s.group.clone(),
            error: s.last_error.clone(),
        }
    }

    /// Whether this instance does what it should, now: see [`Health`].
    pub fn health(&self) -> Health {
        let s = self.shared.lock();
        Health::of(&HealthInputs {
            observer: self.shared.holder.is_none(),
            started: s.started,
            stopped: s.stopped,
            leading: s.own_term(),
            calls: s.calls.as_ref().map(StoreCalls::snapshot),
            unreachable_after: s.unreachable_after,
            health_timeout: s.health_timeout,
            last_beat: s.last_beat,
            unhealthy_end: s.unhealthy_end,
            follow_error: s.last_error.clone(),
            now: Instant::now(),
        })
    }
}

impl Shared {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn apply_status(&self, status: &Status) {
        let now = Instant::now();
        let mut s = self.lock();
        match status {
            Status::Leader { leader } => {
                s.started = true;
                s.stopped = false;
                s.status_leader = Some(leader.token);
                if s.leading.is_some_and(|t| t.token != leader.token) {
                    s.leading = None;
                }
                s.timeline.leader(Some(leader), true, now);
                return;
            }
            Status::Follower { leader } => {
                s.started = true;
                s.stopped = false;
                s.timeline.leader(leader.as_ref(), false, now);
            }
            Status::Stopped => s.stopped = true,
            _ => {}
        }
        // Whatever the events said (one may be missed, or still on its
        // way), a status that is not `Leader` means no term of ours runs.
        s.status_leader = None;
        s.leading = None;
    }

    fn apply_event(&self, event: TermEvent) {
        let mut s = self.lock();
        match event {
            TermEvent::Won {
                leader,
                at,
                deadline,
                step_down_at,
            } => {
                s.terms_won += 1;
                s.started = true;
                s.unhealthy_end = None;
                // The work of a new term has not had time to beat yet.
                s.last_beat = Some(at);
                s.leading = Some(OwnTerm {
                    token: leader.token,
                    confirmed_at: at,
                    deadline,
                    step_down_at,
                });
                s.timeline.leader(Some(&leader), true, at);
            }
            TermEvent::Confirmed {
                token,
                at,
                deadline,
                step_down_at,
            } => {
                if let Some(t) = s.leading.as_mut().filter(|t| t.token == token) {
                    t.confirmed_at = at;
                    t.deadline = deadline;
                    t.step_down_at = step_down_at;
                }
            }
            TermEvent::Ended { leader, ended } => {
                *s.step_downs.entry(StepDown::of(ended.reason)).or_default() += 1;
                if s.leading.is_some_and(|t| t.token == leader.token) {
                    s.leading = None;
                }
                if ended.reason == EndReason::Unhealthy {
                    s.unhealthy_end = Some(wall(ended.at));
                }
                s.timeline.own_end(leader.token, ended.reason, ended.at);
            }
            _ => {}
        }
    }
}
