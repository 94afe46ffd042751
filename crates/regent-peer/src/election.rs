//! A peer node as a [`regent_core::Election`]: the same [`Leadership`]
//! guard, [`Supervisor`](regent_core::Supervisor), status and `regent`'s
//! child supervision as a lease candidate, with no store.
//!
//! [`PeerElection::start`] runs a node of the group (the algorithm's
//! machine under the [`net`] driver). A campaign waits until
//! the node's view says that it leads, and returns a guard built with
//! [`Leadership::kept_by`]; the guard's term is kept by the view:
//!
//! * **Timing-only** (no quorum): while the node still leads with the
//!   term's token, the term is confirmed every heartbeat interval, and the
//!   guard's deadline is measured from that confirmation as a lease's is
//!   from a renewal, with the failure timeout as its ttl: a process frozen
//!   past it has its deadline pass (and `regent`'s dead-man's switch stop
//!   its command) about when the other members take it for dead.
//! * **Quorum mode** ([`PeerSpec::quorum`]): the guard's deadline is the
//!   majority's lease ([`View::lease_until`]), and the work is told to
//!   stop its grace before it, so it has stopped before any other member
//!   can lead.
//! * The term ends with [`EndReason::Lost`] the moment the view names
//!   another leader or another epoch.
//! * A term given back (resign, a finished task, shutdown) makes the node
//!   **leave** the group with a GOODBYE, so that the others elect a
//!   successor at once; the next campaign starts a fresh node (a new
//!   incarnation) that joins the group again. Under Bully and lowest-ID
//!   the id decides: a node that rejoins takes the lead back if its id
//!   wins.
//!
//! The status follows the view: `Follower` with the leader the node sees
//! (its id as the holder, the epoch's token, no metadata), `Leader` while
//! a guard lives, `Stopped` after shutdown.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use regent_core::{
    CampaignError, CancellationToken, ElectionName, EndReason, ErrorKind, Explanation,
    FencingToken, HolderId, LeaderInfo, Leadership, Lease, LeaseHandle, Metadata, Renewal,
    SafetyClass, Status, StoreError, StoreInfo, StoreStyle, TaskTracker, TermEvent, TermEvents,
    TermKeeper, TermStart, TermState, Timing, WatchMode,
};
use tokio::sync::watch;
use tokio::time::{Instant, sleep, sleep_until};

pub use crate::algorithm::Algorithm;
use crate::bully::Bully;
use crate::codec::Secret;
use crate::config::Config;
use crate::epoch::{Leader, NodeId};
use crate::lowest_id::LowestId;
use crate::net::{self, Counters, Listen, Node, NodeOptions, View};
use crate::quorum::Quorum;
use crate::ring::Ring;

/// What a [`PeerElection`] runs: the group, this member, the secret.
#[derive(Debug)]
pub struct PeerSpec {
    /// The election's name, as the guard and the status show it.
    pub election: ElectionName,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// This node's configuration (its id, the membership, the timings).
    /// Its incarnation is replaced by a fresh one at every start.
    pub config: Config,
    /// Where every member listens, this one included.
    pub addresses: BTreeMap<NodeId, SocketAddr>,
    /// Where this node listens: an address, or a listener already bound.
    pub listen: Listen,
    /// The group's shared secret.
    pub secret: Secret,
    /// Quorum mode: lead only while a majority of the members vouch for
    /// this node's lease ([`Quorum`]); every member must
    /// agree on it.
    pub quorum: bool,
    /// The time the leader's work gets between cancellation and the end of
    /// its term's guard (`None`: the default of a lease with the failure
    /// timeout as ttl).
    pub grace: Option<Duration>,
}

/// One member of a peer group, as an [`Election`](regent_core::Election).
/// Cheap to clone: clones share the node.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_core::{BoxError, ElectionName, Supervisor};
/// use regent_peer::codec::Secret;
/// use regent_peer::election::{Algorithm, PeerElection, PeerSpec};
/// use regent_peer::{Config, NodeId};
///
/// let addresses = [
///     (NodeId(1), "10.0.0.1:7400".parse()?),
///     (NodeId(2), "10.0.0.2:7400".parse()?),
///     (NodeId(3), "10.0.0.3:7400".parse()?),
/// ];
/// let me = NodeId(2);
/// let election = PeerElection::start(PeerSpec {
///     election: ElectionName::new("billing")?,
///     algorithm: Algorithm::Bully,
///     config: Config::builder(me, addresses.iter().map(|(id, _)| *id)).build()?,
///     addresses: addresses.into_iter().collect(),
///     listen: "0.0.0.0:7400".parse::<std::net::SocketAddr>()?.into(),
///     secret: Secret::new(std::fs::read("/etc/billing/peer-secret")?)?,
///     quorum: false,
///     grace: None,
/// })
/// .await?;
/// Supervisor::new(election)
///     .run(|leader| async move {
///         // work with leader.token() until leader.cancelled() fires
///         leader.cancelled().await;
///         Ok::<_, BoxError>(())
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PeerElection {
    inner: Arc<Inner>,
}

struct Inner {
    election: ElectionName,
    holder: HolderId,
    algorithm: Algorithm,
    config: Config,
    addresses: BTreeMap<NodeId, SocketAddr>,
    secret: Secret,
    quorum: bool,
    timing: Timing,
    /// Where the next start binds: the address the first node got.
    rebind: SocketAddr,
    node: Mutex<Option<Node>>,
    /// The running node's view; replaced at every start.
    view: Mutex<watch::Receiver<View>>,
    status: Arc<watch::Sender<Status>>,
    events: TermEvents,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    /// The token of a term that ran past its step-down deadline: the node
    /// could not confirm it in time (regent frozen or starved), so its
    /// view of the group may be as old as that, and the term is over
    /// whatever the view still says.
    overdue: Mutex<Option<FencingToken>>,
}

impl fmt::Debug for PeerElection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerElection")
            .field("election", &self.inner.election)
            .field("id", &self.inner.config.id())
            .field("algorithm", &self.inner.algorithm)
            .finish_non_exhaustive()
    }
}

/// Why a [`PeerElection`] could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The timing rules of a guard do not hold for these settings (a
    /// failure timeout too short for the grace, say).
    #[error("peer timing: {0}")]
    Timing(#[from] regent_core::ConfigError),
    /// The transport's options are refused (a member listed twice).
    #[error("peer transport: {0}")]
    Options(#[from] net::OptionsError),
    /// This node's id has no address in the membership.
    #[error("member {0} has no address")]
    NoAddress(NodeId),
    /// The listener could not be bound.
    #[error("cannot listen: {0}")]
    Listen(#[from] std::io::Error),
}

/// The lease-shaped timing of a peer term: the failure timeout is the ttl,
/// the heartbeat interval the renew interval.
fn timing_of(config: &Config, grace: Option<Duration>) -> Result<Timing, regent_core::ConfigError> {
    let mut t = Timing::new(config.failure_timeout());
    t.renew_every = config.heartbeat_interval();
    t.retry_every = config.heartbeat_interval();
    if let Some(grace) = grace {
        t.grace = grace;
    }
    t.validate()?;
    Ok(t)
}

impl PeerElection {
    /// Starts this member's node: binds, and begins talking to the group.
    ///
    /// # Errors
    ///
    /// [`StartError`]: timings a guard cannot run on, refused transport
    /// options, or a listener that cannot be bound.
    pub async fn start(spec: PeerSpec) -> Result<Self, StartError> {
        let PeerSpec {
            election,
            algorithm,
            config,
            addresses,
            listen,
            secret,
            quorum,
            grace,
        } = spec;
        let timing = timing_of(&config, grace)?;
        let me = config.id();
        if !addresses.contains_key(&me) {
            return Err(StartError::NoAddress(me));
        }
        let holder = HolderId::new(me.get().to_string())
            .unwrap_or_else(|_| unreachable!("a number is a valid holder id"));
        let node = start_node(
            &election, algorithm, quorum, &config, &addresses, listen, &secret,
        )
        .await?;
        let rebind = node.local_addr();
        let view = node.view();
        let (status, _) = watch::channel(Status::Starting);
        let inner = Arc::new(Inner {
            election,
            holder,
            algorithm,
            config,
            addresses,
            secret,
            quorum,
            timing,
            rebind,
            node: Mutex::new(Some(node)),
            view: Mutex::new(view),
            status: Arc::new(status),
            events: TermEvents::new(),
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
            overdue: Mutex::new(None),
        });
        inner.tracker.spawn(mirror(Arc::downgrade(&inner)));
        Ok(Self { inner })
    }

    /// The address this node listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.rebind
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.inner.algorithm
    }

    /// The node's view of the group now.
    pub fn view(&self) -> View {
        *self.inner.current_view().borrow()
    }

    /// What the running node's transport has done since it started (all
    /// zero while no node runs, between a term given back and the next
    /// campaign).
    pub fn counters(&self) -> Counters {
        lock(&self.inner.node)
            .as_ref()
            .map(|n| *n.counters().borrow())
            .unwrap_or_default()
    }

    /// Starts a fresh node if the last one left (after a term was given
    /// back).
    async fn ensure_node(&self) -> Result<watch::Receiver<View>, CampaignError> {
        let inner = &self.inner;
        if lock(&inner.node).is_some() {
            return Ok(inner.current_view());
        }
        let node = start_node(
            &inner.election,
            inner.algorithm,
            inner.quorum,
            &inner.config,
            &inner.addresses,
            Listen::Addr(inner.rebind),
            &inner.secret,
        )
        .await
        .map_err(|e| {
            CampaignError::Store(StoreError::new(
                ErrorKind::Unavailable,
                format!("peer node {} cannot start again: {e}", inner.config.id()),
            ))
        })?;
        let view = node.view();
        *lock(&inner.view) = view.clone();
        *lock(&inner.node) = Some(node);
        Ok(view)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inner {
    fn current_view(&self) -> watch::Receiver<View> {
        lock(&self.view).clone()
    }

    /// Takes the node out and leaves the group with it.
    async fn leave(&self) {
        let node = lock(&self.node).take();
        if let Some(node) = node {
            node.leave().await;
        }
    }
}

async fn start_node(
    election: &ElectionName,
    algorithm: Algorithm,
    quorum: bool,
    config: &Config,
    addresses: &BTreeMap<NodeId, SocketAddr>,
    listen: Listen,
    secret: &Secret,
) -> Result<Node, StartError> {
    // A fresh incarnation at every start: Ring names its elections with
    // it, so a restarted node's elections are never taken for old ones.
    let since_unix = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let incarnation = u64::try_from(since_unix.as_micros()).unwrap_or(u64::MAX);
    // The wall clock floors the rounds of the terms this node claims, so
    // that tokens go on growing across a restart of the whole group.
    let unix_ms = u64::try_from(since_unix.as_millis()).unwrap_or(u64::MAX);
    let config = config
        .clone()
        .with_incarnation(incarnation)
        .with_wall_clock(unix_ms, Instant::now());
    let options = NodeOptions::builder(
        listen,
        addresses.iter().map(|(id, addr)| (*id, *addr)),
        secret.clone(),
    )
    .election(election.clone())
    .build()?;
    let now = Instant::now();
    let c = config.clone();
    Ok(match (algorithm, quorum) {
        (Algorithm::LowestId, false) => net::start(LowestId::new(config, now), options).await?,
        (Algorithm::Bully, false) => net::start(Bully::new(config, now), options).await?,
        (Algorithm::Ring, false) => net::start(Ring::new(config, now), options).await?,
        (Algorithm::LowestId, true) => {
            net::start(Quorum::new(c, now, LowestId::new(config, now)), options).await?
        }
        (Algorithm::Bully, true) => {
            net::start(Quorum::new(c, now, Bully::new(config, now)), options).await?
        }
        (Algorithm::Ring, true) => {
            net::start(Quorum::new(c, now, Ring::new(config, now)), options).await?
        }
    })
}

/// A leader as the core shows it: the node id as the holder, the epoch's
/// token, no metadata.
fn leader_info(leader: Leader) -> LeaderInfo {
    LeaderInfo {
        holder: HolderId::new(leader.id.get().to_string())
            .unwrap_or_else(|_| unreachable!("a number is a valid holder id")),
        token: leader.token(),
        metadata: Metadata::default(),
    }
}

/// Publishes the view as the status while this node does not lead (a
/// guard publishes `Leader` itself). Holds the election only weakly: when
/// the last handle is dropped, the node stops with it, its view's sender
/// goes, and this ends.
async fn mirror(inner: std::sync::Weak<Inner>) {
    loop {
        let Some((mut view, shutdown, status, retry)) = inner.upgrade().map(|i| {
            (
                i.current_view(),
                i.shutdown.clone(),
                i.status.clone(),
                i.timing.retry_every,
            )
        }) else {
            return;
        };
        loop {
            let v = *view.borrow_and_update();
            if shutdown.is_cancelled() {
                return;
            }
            if v.leading.is_none() && !v.stopped {
                regent_core::publish_status(
                    &status,
                    Status::Follower {
                        leader: v.leader.map(leader_info),
                    },
                );
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                r = view.changed() => if r.is_err() { break },
            }
        }
        // The node stopped (left after a term, or dropped with the last
        // handle): wait for the next one, if there is one.
        drop(view);
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = sleep(retry) => {}
        }
    }
}

impl regent_core::Election for PeerElection {
    async fn campaign(&self) -> Result<Leadership, CampaignError> {
        let inner = &self.inner;
        if inner.shutdown.is_cancelled() {
            return Err(CampaignError::Shutdown);
        }
        let mut view = self.ensure_node().await?;
        let overdue = lock(&inner.overdue).take();
        if overdue.is_some() && view.borrow().leading == overdue {
            // The last term ran past its deadline and this node's view
            // still names it: the view is stale (the node could not run
            // either), and the group may have moved on. Leave and join
            // again as a newcomer: the group's leader of now, or a new
            // election, decides. (Taken as a term again, it ran CMD with
            // the old token after a newer term began.) The old term's
            // work is gone by now: a campaign follows the end of a term.
            tracing::info!(
                election = %inner.election, token = %overdue.map_or(0, |t| t.get()),
                "peer: the last term ran past its deadline; joining the group again"
            );
            inner.leave().await;
            view = self.ensure_node().await?;
        }
        let (token, confirmed_at) = loop {
            let now = *view.borrow_and_update();
            let lease_live = !inner.quorum || now.lease_until.is_some_and(|u| u > Instant::now());
            if let Some(token) = now.leading.filter(|_| lease_live) {
                break (token, Instant::now());
            }
            tokio::select! {
                biased;
                () = inner.shutdown.cancelled() => return Err(CampaignError::Shutdown),
                r = view.changed() => if r.is_err() {
                    return Err(CampaignError::Store(StoreError::new(
                        ErrorKind::Unavailable,
                        format!("peer node {} stopped", inner.config.id()),
                    )));
                },
            }
        };
        let info = LeaderInfo {
            holder: inner.holder.clone(),
            token,
            metadata: Metadata::default(),
        };
        let lease = Lease {
            election: inner.election.clone(),
            holder: inner.holder.clone(),
            token,
            ttl: inner.timing.ttl,
            handle: LeaseHandle::new(format!("peer:{}:{}", inner.algorithm, inner.config.id())),
        };
        Ok(Leadership::kept_by(
            PeerKeeper {
                inner: inner.clone(),
                view,
                token,
            },
            TermStart {
                lease,
                info,
                timing: inner.timing,
                confirmed_at,
                status: inner.status.clone(),
                shutdown: inner.shutdown.child_token(),
                events: inner.events.clone(),
            },
            &inner.tracker,
        ))
    }

    async fn shutdown(&self) {
        let inner = &self.inner;
        inner.shutdown.cancel();
        inner.tracker.close();
        inner.tracker.wait().await;
        inner.leave().await;
        regent_core::publish_status(&inner.status, Status::Stopped);
    }

    fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    fn status(&self) -> watch::Receiver<Status> {
        self.inner.status.subscribe()
    }

    fn events(&self) -> tokio::sync::broadcast::Receiver<TermEvent> {
        self.inner.events.subscribe()
    }

    fn finished(&self) {
        regent_core::publish_status(&self.inner.status, Status::Stopped);
    }

    fn timing(&self) -> &Timing {
        &self.inner.timing
    }

    fn election(&self) -> &ElectionName {
        &self.inner.election
    }

    fn holder(&self) -> &HolderId {
        &self.inner.holder
    }

    fn safety(&self) -> SafetyClass {
        self.inner.safety()
    }

    fn explain(&self) -> Explanation {
        self.inner.timing.explain(&StoreInfo::new(
            "peer",
            StoreStyle::Race,
            WatchMode::Notify,
            self.inner.safety(),
        ))
    }
}

impl Inner {
    fn safety(&self) -> SafetyClass {
        if self.quorum {
            SafetyClass::PeerQuorum
        } else {
            SafetyClass::TimingOnly
        }
    }
}

/// Keeps a peer term: confirmed while the view still says this node leads
/// with the term's token.
struct PeerKeeper {
    inner: Arc<Inner>,
    view: watch::Receiver<View>,
    token: FencingToken,
}

impl TermKeeper for PeerKeeper {
    async fn hold(&self, term: &TermState) -> EndReason {
        let mut view = self.view.clone();
        let every = term.timing().renew_every;
        loop {
            let v = *view.borrow_and_update();
            if v.stopped || v.leading != Some(self.token) {
                return EndReason::Lost;
            }
            match (self.inner.quorum, v.lease_until) {
                // Exclusive until the majority's lease runs out; the work
                // is told to stop a grace before.
                (true, Some(until)) => term.extend_to(until),
                (true, None) => return EndReason::Lost,
                (false, _) => term.confirm(Instant::now()),
            }
            let step_down = term.step_down_at();
            tokio::select! {
                biased;
                () = sleep_until(step_down) => {
                    *lock(&self.inner.overdue) = Some(self.token);
                    return EndReason::DeadlinePassed;
                }
                r = view.changed() => if r.is_err() { return EndReason::Lost },
                () = sleep(every) => {}
            }
        }
    }

    async fn release(&self) -> Result<(), StoreError> {
        self.inner.leave().await;
        Ok(())
    }

    async fn update_metadata(&self, _: &Metadata) -> Result<Renewal, StoreError> {
        Err(StoreError::new(
            ErrorKind::Config,
            "a peer group does not carry metadata",
        ))
    }
}
