//! The [`Leadership`] guard: proof of leadership, with its fencing token,
//! kept alive by a renewal task until it ends.

use std::fmt;
use std::sync::Arc;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{ErrorKind, StoreError};
use crate::events::{EndReason, Ended, TermEvent, TermEvents};
use crate::handover::{HandOverError, HandOverReason};
use crate::status::Status;
use crate::store::Renewal;
use crate::timing::Timing;
use crate::types::{ElectionName, FencingToken, HolderId, LeaderInfo, Lease, Metadata};

/// Why new metadata was not published ([`Leadership::proclaim`]).
///
/// `Display` includes the store's error; `source` continues with the store
/// client's, as for [`CampaignError`](crate::CampaignError).
#[derive(Debug)]
#[non_exhaustive]
pub enum ProclaimError {
    /// Leadership has ended (or the store said the lease is lost, which
    /// ended it).
    NotLeader(NotLeader),
    /// The store failed or did not answer in time; leadership goes on, and
    /// the record shows the old metadata or the new.
    Store(StoreError),
}

impl From<NotLeader> for ProclaimError {
    fn from(e: NotLeader) -> Self {
        ProclaimError::NotLeader(e)
    }
}

impl fmt::Display for ProclaimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProclaimError::NotLeader(e) => write!(f, "cannot publish metadata: {e}"),
            ProclaimError::Store(e) => write!(f, "publishing metadata failed: {e}"),
        }
    }
}

impl std::error::Error for ProclaimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProclaimError::NotLeader(_) => None,
            ProclaimError::Store(e) => std::error::Error::source(e),
        }
    }
}

/// The leadership is over; an operation that needs it was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not the leader: leadership ended ({reason})")]
pub struct NotLeader {
    /// Why it ended.
    pub reason: EndReason,
}

/// The timing state of a leadership, published on a watch channel
/// ([`Leadership::lease_state`]). A dead-man's switch outside the process can
/// stop the leader's work at `deadline` if no newer state arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseState {
    /// The local lease deadline: the last confirmed renewal's send instant
    /// plus `ttl*(1-drift) - margin`.
    pub deadline: Instant,
    /// When the leader steps down unless a renewal succeeds first.
    pub step_down_at: Instant,
    /// Set once leadership has ended.
    pub ended: Option<Ended>,
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// Sends a metadata update of this term's record to the store.
type Update = Box<dyn Fn(Metadata) -> BoxFuture<Result<Renewal, StoreError>> + Send + Sync>;

/// Chooses (and records with the keeper) the candidate to hand over to.
type Choose =
    Box<dyn Fn(Option<HolderId>) -> BoxFuture<Result<HolderId, HandOverError>> + Send + Sync>;

struct Shared {
    lease: Lease,
    /// This leader as elected.
    info: LeaderInfo,
    /// The metadata published now (`proclaim` changes it).
    metadata: std::sync::Mutex<Metadata>,
    update: Update,
    choose: Choose,
    status: Arc<watch::Sender<Status>>,
    timing: Timing,
    cancel: CancellationToken,
    state: watch::Sender<LeaseState>,
    events: TermEvents,
}

/// Proof of leadership of one election, for one term.
///
/// It carries the term's [`FencingToken`]: pass it to every resource the
/// leader writes. While the guard lives, a task renews the lease; leadership
/// ends when the store reports the lease lost, when the renew deadline passes
/// without a renewal, on [`resign`](Self::resign), on drop, or when the
/// candidate shuts down. At that instant the [cancellation
/// token](Self::cancellation) fires. The lease is released (unless it was
/// lost) once the guard is dropped or resigned — the sign that the work has
/// stopped — so a successor can start at once, but never before the work
/// has stopped. A guard still held at the local lease deadline is not
/// released at all: the lease then expires by its ttl.
///
/// The guard has no `is_leader() -> bool`: [`check`](Self::check) answers
/// with the token or with why leadership ended. (A candidate's
/// [`Status::is_leader`](crate::Status::is_leader) is a snapshot for
/// display and health endpoints; it proves nothing.)
pub struct Leadership {
    shared: Arc<Shared>,
    /// Asks the renewal task to end leadership with a reason.
    stop: Option<oneshot::Sender<EndReason>>,
    /// Dropped when the holder's work has stopped: only then may the lease
    /// be released, or a successor could start while our work still runs.
    work_stopped: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), StoreError>>>,
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.shared.lease.election)
            .field("holder", &self.shared.lease.holder)
            .field("token", &self.shared.lease.token)
            .field("state", &*self.shared.state.borrow())
            .finish()
    }
}

impl Leadership {
    /// A guard for a term that `keeper` keeps: the seam through which an
    /// election that is not a lease store (a peer group, say) gives its
    /// leaders the same guard, [`Supervisor`](crate::Supervisor), status
    /// and child supervision as a [`Candidate`](crate::Candidate)'s.
    ///
    /// Publishes [`Status::Leader`] on `start.status` now, and spawns on
    /// `tracker` the task that holds the term with
    /// [`TermKeeper::hold`] until it or the guard ends it, publishes the
    /// end (`Follower` with no leader, or `Stopped` on shutdown), waits for
    /// the holder's work to stop (at most until the local deadline) and
    /// then calls [`TermKeeper::release`] unless the term was lost.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use regent_core::{
    ///     CancellationToken, ElectionName, EndReason, FencingToken, HolderId, LeaderInfo, Lease,
    ///     LeaseHandle, Leadership, Metadata, Renewal, Status, StoreError, TaskTracker, TermEvents,
    ///     TermKeeper, TermStart, TermState, Timing,
    /// };
    /// use tokio::time::Instant;
    ///
    /// /// A term that lasts until the process is told otherwise.
    /// struct Forever;
    /// impl TermKeeper for Forever {
    ///     async fn hold(&self, term: &TermState) -> EndReason {
    ///         loop {
    ///             term.confirm(Instant::now());
    ///             tokio::time::sleep(term.timing().renew_every).await;
    ///         }
    ///     }
    ///     async fn release(&self) -> Result<(), StoreError> { Ok(()) }
    ///     async fn update_metadata(&self, _: &Metadata) -> Result<Renewal, StoreError> {
    ///         Ok(Renewal::Renewed)
    ///     }
    /// }
    ///
    /// let (election, holder) = (ElectionName::new("jobs")?, HolderId::new("a")?);
    /// let timing = Timing::new(std::time::Duration::from_secs(10));
    /// let token = FencingToken::new(7);
    /// let status = Arc::new(tokio::sync::watch::channel(Status::Starting).0);
    /// let tracker = TaskTracker::new();
    /// let leadership = Leadership::kept_by(
    ///     Forever,
    ///     TermStart {
    ///         lease: Lease {
    ///             election,
    ///             holder: holder.clone(),
    ///             token,
    ///             ttl: timing.ttl,
    ///             handle: LeaseHandle::new("forever"),
    ///         },
    ///         info: LeaderInfo { holder, token, metadata: Metadata::default() },
    ///         timing,
    ///         confirmed_at: Instant::now(),
    ///         status: status.clone(),
    ///         shutdown: CancellationToken::new(),
    ///         events: TermEvents::new(),
    ///     },
    ///     &tracker,
    /// );
    /// assert_eq!(leadership.check()?, token);
    /// assert!(matches!(*status.borrow(), Status::Leader { .. }));
    /// leadership.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn kept_by<K: TermKeeper>(keeper: K, start: TermStart, tracker: &TaskTracker) -> Self {
        let TermStart {
            lease,
            info,
            timing,
            confirmed_at,
            status,
            shutdown,
            events,
        } = start;
        let (state, _) = watch::channel(LeaseState {
            deadline: timing.local_deadline(confirmed_at),
            step_down_at: timing.step_down_at(confirmed_at),
            ended: None,
        });
        let keeper = Arc::new(keeper);
        let update: Update = {
            let keeper = keeper.clone();
            Box::new(move |metadata: Metadata| {
                let keeper = keeper.clone();
                Box::pin(async move { keeper.update_metadata(&metadata).await })
            })
        };
        let choose: Choose = {
            let keeper = keeper.clone();
            Box::new(move |to: Option<HolderId>| {
                let keeper = keeper.clone();
                Box::pin(async move { keeper.choose_successor(to.as_ref()).await })
            })
        };
        let shared = Arc::new(Shared {
            metadata: std::sync::Mutex::new(info.metadata.clone()),
            update,
            choose,
            status: status.clone(),
            lease,
            info,
            timing,
            cancel: CancellationToken::new(),
            state,
            events,
        });
        let (stop_tx, stop_rx) = oneshot::channel();
        let (work_stopped, work_stopped_rx) = oneshot::channel();
        crate::status::publish(
            &status,
            Status::Leader {
                leader: shared.info.clone(),
            },
        );
        {
            let state = *shared.state.borrow();
            shared.events.send(TermEvent::Won {
                leader: shared.info.clone(),
                at: Instant::now(),
                deadline: state.deadline,
                step_down_at: state.step_down_at,
            });
        }
        tracing::info!(
            election = %shared.lease.election,
            holder = %shared.lease.holder,
            token = shared.lease.token.get(),
            "elected leader"
        );
        let task = tracker.spawn(keep(
            keeper,
            shared.clone(),
            stop_rx,
            work_stopped_rx,
            shutdown,
            status,
        ));
        Self {
            shared,
            stop: Some(stop_tx),
            work_stopped: Some(work_stopped),
            task: Some(task),
        }
    }

    /// The fencing token of this term.
    pub fn token(&self) -> FencingToken {
        self.shared.lease.token
    }

    /// The election.
    pub fn election(&self) -> &ElectionName {
        &self.shared.lease.election
    }

    /// This holder.
    pub fn holder(&self) -> &HolderId {
        &self.shared.lease.holder
    }

    /// This leader as followers saw it when it was elected; see
    /// [`metadata`](Self::metadata) for what it publishes now.
    pub fn info(&self) -> &LeaderInfo {
        &self.shared.info
    }

    /// The metadata this leader publishes now: what it was elected with,
    /// or what it last [proclaimed](Self::proclaim).
    pub fn metadata(&self) -> Metadata {
        self.shared.current_metadata()
    }

    /// Publishes new metadata for this term without ending it (etcd's
    /// `Proclaim`): followers' [`Observer`](crate::Observer)s, their status
    /// and `regent watch` see the change; the token stays.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use regent_core::{Candidate, ElectionName, HolderId, Metadata, memory::MemoryStore};
    ///
    /// let candidate = Candidate::builder(MemoryStore::race(), ElectionName::new("db-primary")?, HolderId::new("host-a")?)
    ///     .metadata(Metadata::from_pairs([("state", "warming up")])?)
    ///     .build()?;
    /// let leadership = candidate.campaign().await?;
    /// leadership
    ///     .proclaim(Metadata::from_pairs([("state", "serving"), ("addr", "10.0.0.7:5432")])?)
    ///     .await?;
    /// assert_eq!(leadership.metadata().get("state"), Some("serving"));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ProclaimError::NotLeader`] if leadership has ended, or the store
    /// says the lease is lost (leadership then ends with
    /// [`EndReason::Lost`]); [`ProclaimError::Store`] if the store failed,
    /// or did not answer before the renew deadline (by which the leader
    /// steps down unless a renewal succeeded meanwhile): leadership is left
    /// to the renewals, and the record shows the old metadata or the new.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: a dropped call leaves the old metadata or the
    /// new, and costs no lease.
    pub async fn proclaim(&self, metadata: Metadata) -> Result<(), ProclaimError> {
        proclaim(&self.shared, metadata).await
    }

    /// A handle that proclaims for this term from elsewhere (the
    /// supervisor's leader task).
    pub(crate) fn herald(&self) -> Herald {
        Herald(self.shared.clone())
    }

    /// The lease record.
    pub fn lease(&self) -> &Lease {
        &self.shared.lease
    }

    /// The timing this term runs on: the candidate's, with the ttl lowered
    /// to what the store granted if that was less (see
    /// [`Timing::for_granted`]). [`lease`](Self::lease)`().ttl` is the ttl
    /// the store granted.
    pub fn timing(&self) -> &Timing {
        &self.shared.timing
    }

    /// A token that is cancelled the instant leadership ends. Cancelling the
    /// returned token yourself does not end leadership; use
    /// [`resign`](Self::resign).
    pub fn cancellation(&self) -> CancellationToken {
        self.shared.cancel.child_token()
    }

    /// The current local lease deadline.
    pub fn deadline(&self) -> Instant {
        self.shared.state.borrow().deadline
    }

    /// The timing state, updated on every renewal and at the end.
    pub fn lease_state(&self) -> watch::Receiver<LeaseState> {
        self.shared.state.subscribe()
    }

    /// Whether leadership has ended, and how.
    pub fn ended(&self) -> Option<Ended> {
        self.shared.state.borrow().ended
    }

    /// The token if this is still the leader now: not ended and before the
    /// local lease deadline.
    ///
    /// # Errors
    ///
    /// [`NotLeader`] with the reason leadership ended.
    pub fn check(&self) -> Result<FencingToken, NotLeader> {
        let state = *self.shared.state.borrow();
        if let Some(ended) = state.ended {
            return Err(NotLeader {
                reason: ended.reason,
            });
        }
        if Instant::now() >= state.deadline {
            return Err(NotLeader {
                reason: EndReason::DeadlinePassed,
            });
        }
        Ok(self.token())
    }

    /// Waits until leadership ends.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn until_ended(&self) -> Ended {
        let mut rx = self.shared.state.subscribe();
        match rx.wait_for(|s| s.ended.is_some()).await {
            Ok(s) => s.ended.expect("waited for it"),
            // The renewal task holds the sender's Arc only as long as we do.
            Err(_) => unreachable!("the guard owns the state sender"),
        }
    }

    /// Ends leadership with `reason` now: the cancellation token fires and
    /// the status and [`TermEvent::Ended`] say why, but the lease record is
    /// kept until the guard is dropped or [resigned](Self::resign), so that
    /// the work can stop first. The first end stands: a later `resign`
    /// releases without changing the reason. For a front end that watches
    /// its work itself: `regent run` ends a term with
    /// [`EndReason::Unhealthy`] when its command stops heart-beating.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use regent_core::{Candidate, ElectionName, EndReason, HolderId, memory::MemoryStore};
    ///
    /// let candidate = Candidate::builder(MemoryStore::race(), ElectionName::new("jobs")?, HolderId::new("a")?)
    ///     .build()?;
    /// let mut leadership = candidate.campaign().await?;
    /// leadership.end(EndReason::Unhealthy);
    /// assert!(leadership.cancellation().is_cancelled());
    /// // ... stop the work, then give the lease back:
    /// leadership.resign().await?;
    /// # Ok(()) }
    /// ```
    pub fn end(&mut self, reason: EndReason) {
        mark_ended(&self.shared, reason);
        if let Some(stop) = self.stop.take() {
            // The task may have ended already; then the send fails harmlessly.
            let _ = stop.send(reason);
        }
    }

    /// Ends leadership (if it has not ended) with `reason` and waits for the
    /// renewal task to stop and release the lease.
    pub(crate) async fn finish(mut self, reason: EndReason) -> Result<(), StoreError> {
        self.end(reason);
        self.work_stopped.take();
        match self.task.take() {
            Some(task) => task.await.unwrap_or_else(|join| {
                Err(StoreError::new(
                    ErrorKind::Protocol,
                    format!("renewal task failed: {join}"),
                ))
            }),
            None => Ok(()),
        }
    }

    /// Gives up leadership now and releases the lease, so that a follower
    /// can take over at once instead of waiting out the ttl.
    ///
    /// # Errors
    ///
    /// The store's error if the release failed; the lease then expires by
    /// its ttl. Leadership has ended either way.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in effect: leadership has ended (the cancellation token
    /// has fired) once this is first polled, and the release completes in
    /// the background.
    pub async fn resign(self) -> Result<(), StoreError> {
        self.finish(EndReason::Resigned).await
    }

    /// Hands this term to another candidate: `to`, or the next (the one
    /// of highest priority) when `None` — as [`handover::request`](crate::handover::request)
    /// asks a leader from outside. On success the term has ended with
    /// [`EndReason::HandedOver`] (the cancellation token fired, as for
    /// [`end`](Self::end)); once this guard is dropped or
    /// [`resign`](Self::resign)ed — the work has stopped — the lease goes
    /// to the successor ([`LeaseStore::release_to`](crate::LeaseStore::release_to)).
    /// On error nothing changed and the term goes on.
    ///
    /// ```
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use regent_core::{Candidate, ElectionName, HolderId, memory::MemoryStore};
    ///
    /// let store = MemoryStore::race();
    /// let jobs = ElectionName::new("jobs")?;
    /// let a = Candidate::builder(store.clone(), jobs.clone(), HolderId::new("a")?).build()?;
    /// let mut leadership = a.campaign().await?;
    /// // Nobody else stands: nothing to hand over to, and a still leads.
    /// assert!(leadership.hand_over(None).await.is_err());
    /// assert!(leadership.check().is_ok());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`HandOverError::NoSuchCandidate`] when `to` does not stand (or
    /// nobody else does), [`HandOverError::Store`] when the candidates
    /// could not be read, [`HandOverError::Unsupported`] for a term that
    /// cannot be handed over (a peer group's), and
    /// [`HandOverError::Refused`] once the term has ended.
    pub async fn hand_over(&mut self, to: Option<&HolderId>) -> Result<HolderId, HandOverError> {
        if let Some(ended) = self.ended() {
            return Err(HandOverError::Refused {
                election: self.election().clone(),
                leader: self.holder().clone(),
                why: format!("the term has ended ({})", ended.reason),
            });
        }
        let successor = (self.shared.choose)(to.cloned()).await?;
        self.end(EndReason::HandedOver(HandOverReason::Requested));
        Ok(successor)
    }
}

impl Shared {
    fn current_metadata(&self) -> Metadata {
        self.metadata
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Proclaims new metadata for one term: what [`Leadership::proclaim`] and
/// the supervisor's [`LeaderContext`](crate::LeaderContext) share.
#[derive(Clone)]
pub(crate) struct Herald(Arc<Shared>);

impl fmt::Debug for Herald {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Herald").field(&self.0.lease.token).finish()
    }
}

impl Herald {
    pub(crate) async fn proclaim(&self, metadata: Metadata) -> Result<(), ProclaimError> {
        proclaim(&self.0, metadata).await
    }

    pub(crate) fn metadata(&self) -> Metadata {
        self.0.current_metadata()
    }
}

/// A user's new metadata, with regent's own keys (`regent.`…: the
/// priority, a hand-over's answer) kept from the current metadata unless
/// given.
async fn proclaim(shared: &Shared, metadata: Metadata) -> Result<(), ProclaimError> {
    let mut merged = metadata;
    for (k, v) in shared.current_metadata().iter() {
        if k.starts_with(REGENT_KEYS) && merged.get(k).is_none() {
            merged = merged.with(k, v).map_err(|e| {
                ProclaimError::Store(StoreError::new(ErrorKind::Config, e.to_string()))
            })?;
        }
    }
    set_metadata(shared, merged).await
}

/// The prefix of the metadata keys regent sets itself.
const REGENT_KEYS: &str = "regent.";

async fn set_metadata(shared: &Shared, metadata: Metadata) -> Result<(), ProclaimError> {
    let lease = &shared.lease;
    let leading = |shared: &Shared| -> Result<Instant, NotLeader> {
        let state = *shared.state.borrow();
        if let Some(ended) = state.ended {
            return Err(NotLeader {
                reason: ended.reason,
            });
        }
        if Instant::now() >= state.deadline {
            return Err(NotLeader {
                reason: EndReason::DeadlinePassed,
            });
        }
        Ok(state.deadline)
    };
    leading(shared)?;
    // Past the renew deadline the leader steps down whatever the update
    // does: no point waiting longer.
    let step_down_at = shared.state.borrow().step_down_at;
    match tokio::time::timeout_at(step_down_at, (shared.update)(metadata.clone())).await {
        Ok(Ok(Renewal::Renewed)) => {
            *shared
                .metadata
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = metadata.clone();
            let leader = LeaderInfo {
                metadata,
                ..shared.info.clone()
            };
            // Checked under the status channel's lock: the renewal task
            // publishes the end only after marking it, so a term that ended
            // meanwhile is never shown as leading again.
            shared.status.send_if_modified(|status| {
                let new = Status::Leader { leader };
                if shared.state.borrow().ended.is_some() || *status == new {
                    return false;
                }
                *status = new;
                true
            });
            leading(shared)?;
            tracing::info!(
                election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                "proclaimed new metadata"
            );
            Ok(())
        }
        Ok(Ok(Renewal::Lost)) => {
            let ended = mark_ended(shared, EndReason::Lost);
            Err(NotLeader {
                reason: ended.reason,
            }
            .into())
        }
        Ok(Err(e)) => Err(ProclaimError::Store(e)),
        Err(_) => Err(ProclaimError::Store(StoreError::unavailable(format!(
            "metadata update of election '{}' got no answer before the renew deadline",
            lease.election
        )))),
    }
}

/// Marks the end of leadership, once: publishes it and fires the
/// cancellation token. Returns the end that stands (the first one).
fn mark_ended(shared: &Shared, reason: EndReason) -> Ended {
    let mut ended = Ended {
        reason,
        at: Instant::now(),
    };
    shared.state.send_if_modified(|s| match s.ended {
        Some(first) => {
            ended = first;
            false
        }
        None => {
            s.ended = Some(ended);
            true
        }
    });
    shared.cancel.cancel();
    ended
}

/// How a [`Leadership`] guard's term starts; see [`Leadership::kept_by`].
#[derive(Debug)]
pub struct TermStart {
    /// The term's record: election, holder, fencing token and the ttl
    /// granted.
    pub lease: Lease,
    /// This leader as followers see it.
    pub info: LeaderInfo,
    /// The timing the term runs on; its local deadline and step-down
    /// instant are measured from `confirmed_at` until
    /// [`TermState::confirm`] moves them.
    pub timing: Timing,
    /// When the term was last confirmed: for a lease, when the request that
    /// won it was sent.
    pub confirmed_at: Instant,
    /// Where the guard publishes `Leader` now and the end later.
    pub status: Arc<watch::Sender<Status>>,
    /// Where the guard publishes the term's events (won, confirmed, ended).
    pub events: TermEvents,
    /// Ends the term with [`EndReason::Shutdown`] when cancelled.
    pub shutdown: CancellationToken,
}

/// What keeps one term alive behind a [`Leadership`] guard: a lease
/// store's renewals for a [`Candidate`](crate::Candidate), a peer group's
/// view for a peer node. See [`Leadership::kept_by`].
///
/// The guard's task calls [`hold`](Self::hold) once, and drops it the
/// moment the guard ends the term (resign, drop, shutdown, unhealthy); then,
/// once the holder's work has stopped, [`release`](Self::release) once,
/// unless `hold` returned [`EndReason::Lost`].
pub trait TermKeeper: Send + Sync + 'static {
    /// Keeps the term until it ends on the keeper's side, and says why
    /// ([`EndReason::Lost`], [`EndReason::DeadlinePassed`],
    /// [`EndReason::StoreFailed`]). Every confirmation of the term moves
    /// the guard's deadline with [`TermState::confirm`] or
    /// [`TermState::extend_to`]; the keeper must return
    /// [`EndReason::DeadlinePassed`] by [`TermState::step_down_at`] unless a
    /// confirmation moved it. Must be cancel safe: it is dropped when the
    /// guard ends the term first.
    fn hold(&self, term: &TermState) -> impl Future<Output = EndReason> + Send;

    /// Gives the term back so that a successor can start at once; called
    /// once the holder's work has stopped, within the timing's renew
    /// deadline.
    fn release(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Publishes new metadata for this term without ending it
    /// ([`Leadership::proclaim`]).
    fn update_metadata(
        &self,
        metadata: &Metadata,
    ) -> impl Future<Output = Result<Renewal, StoreError>> + Send;

    /// Chooses the candidate to hand the term to ([`Leadership::hand_over`]):
    /// `to`, or the next; the keeper remembers it for the
    /// [`release`](Self::release) that follows. The default refuses: a
    /// term that cannot be handed over.
    fn choose_successor(
        &self,
        to: Option<&HolderId>,
    ) -> impl Future<Output = Result<HolderId, HandOverError>> + Send {
        let _ = to;
        async { Err(HandOverError::Unsupported) }
    }
}

/// The term as its [`TermKeeper`] sees it: the record, the timing, and the
/// way to move the guard's deadline.
pub struct TermState {
    shared: Arc<Shared>,
}

impl fmt::Debug for TermState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TermState")
            .field("lease", &self.shared.lease)
            .field("state", &*self.shared.state.borrow())
            .finish()
    }
}

impl TermState {
    /// The term's record.
    pub fn lease(&self) -> &Lease {
        &self.shared.lease
    }

    /// Publishes `key` (reserved to regent) set to `value`, or removed, in
    /// the term's metadata, unless it already reads so.
    pub(crate) async fn publish(
        &self,
        key: &str,
        value: Option<String>,
    ) -> Result<(), ProclaimError> {
        let now = self.shared.current_metadata();
        if now.get(key) == value.as_deref() {
            return Ok(());
        }
        let next = match value {
            Some(v) => now.with(key, v).map_err(|e| {
                ProclaimError::Store(StoreError::new(ErrorKind::Config, e.to_string()))
            })?,
            None => now.without(key),
        };
        set_metadata(&self.shared, next).await
    }

    /// The timing the term runs on.
    pub fn timing(&self) -> &Timing {
        &self.shared.timing
    }

    /// When the keeper must end the term unless it is confirmed first.
    pub fn step_down_at(&self) -> Instant {
        self.shared.state.borrow().step_down_at
    }

    /// The term was confirmed by a request sent at `basis` (a renewal):
    /// the local deadline and the step-down instant move to
    /// [`Timing::local_deadline`] and [`Timing::step_down_at`] of `basis`.
    pub fn confirm(&self, basis: Instant) {
        let t = self.shared.timing;
        self.shared.state.send_modify(|s| {
            s.deadline = t.local_deadline(basis);
            s.step_down_at = t.step_down_at(basis);
        });
        self.confirmed();
    }

    fn confirmed(&self) {
        let state = *self.shared.state.borrow();
        self.shared.events.send(TermEvent::Confirmed {
            token: self.shared.lease.token,
            at: Instant::now(),
            deadline: state.deadline,
            step_down_at: state.step_down_at,
        });
    }

    /// The term is exclusively ours until `deadline` (a quorum lease): the
    /// local deadline moves there, and the step-down instant to the grace
    /// before it, so that the work stops before anyone else may lead.
    pub fn extend_to(&self, deadline: Instant) {
        let grace = self.shared.timing.grace;
        self.shared.state.send_modify(|s| {
            s.deadline = deadline;
            s.step_down_at = deadline.checked_sub(grace).unwrap_or(deadline);
        });
        self.confirmed();
    }
}

/// Holds the term with `keeper` until it ends, then publishes the end, fires
/// the cancellation token, waits until the work has stopped and releases.
async fn keep<K: TermKeeper>(
    keeper: Arc<K>,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<EndReason>,
    work_stopped: oneshot::Receiver<()>,
    shutdown: CancellationToken,
    status: Arc<watch::Sender<Status>>,
) -> Result<(), StoreError> {
    let t = shared.timing;
    let lease = &shared.lease;
    let term = TermState {
        shared: shared.clone(),
    };
    let reason = tokio::select! {
        biased;
        r = &mut stop => r.unwrap_or(EndReason::Dropped),
        () = shutdown.cancelled() => EndReason::Shutdown,
        // Ended elsewhere (a proclaim the store answered "lost").
        () = shared.cancel.cancelled() => EndReason::Lost,
        r = keeper.hold(&term) => r,
    };
    let ended = mark_ended(&shared, reason);
    let reason = ended.reason;
    // The status first, then the event: a reader that sees the event sees
    // a status no older than the end.
    crate::status::publish(
        &status,
        if reason == EndReason::Shutdown {
            Status::Stopped
        } else {
            Status::Follower { leader: None }
        },
    );
    shared.events.send(TermEvent::Ended {
        leader: shared.info.clone(),
        ended,
    });
    tracing::info!(
        election = %lease.election, holder = %lease.holder, token = lease.token.get(),
        %reason, "leadership ended"
    );
    if reason == EndReason::Lost {
        return Ok(());
    }
    // Release only once the work has stopped: the guard was dropped or
    // finished. Work still running at the local deadline keeps the record;
    // the store expires it by its ttl, never earlier than that deadline.
    let deadline = shared.state.borrow().deadline;
    if tokio::time::timeout_at(deadline, work_stopped)
        .await
        .is_err()
    {
        tracing::warn!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            "the guard is still held at the lease deadline; not releasing, the lease expires by its ttl"
        );
        return Ok(());
    }
    // Someone else may hold the election by now; release frees only our own
    // record (contract item 4), so trying is always safe.
    match tokio::time::timeout(t.renew_deadline, keeper.release()).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::unavailable(format!(
            "release of election '{}' timed out after {:?}",
            lease.election, t.renew_deadline
        ))),
    }
}
