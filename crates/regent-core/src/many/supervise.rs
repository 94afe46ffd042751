//! [`SupervisorSet`]: a [`Supervisor`] per election, run, stopped and
//! reported on as one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::error::{ElectionFailure, SetConfigError, SetFailed};
use crate::candidate::Candidate;
use crate::candidate::builder::CandidateBuilder;
use crate::election::Election;
use crate::error::{BoxError, CampaignError};
use crate::store::LeaseStore;
use crate::supervisor::{LeaderContext, Restart, Supervisor, SupervisorExit};
use crate::types::{ElectionName, HolderId};

/// Which elections of a set lead now, shared by their supervisors' tasks.
type Leading = Arc<watch::Sender<BTreeSet<ElectionName>>>;

/// A [`Supervisor`] per election, run as one: one call campaigns for every
/// election, runs the leader task on each term of each (the task is told
/// which election), stops them all on one signal and reports every
/// election that failed by its name. See the [module docs](crate::many)
/// for why it works as it does.
///
/// Build it from a store, a holder id and the elections' names with
/// [`builder`](Self::builder), or from supervisors you built yourself
/// (per-election policies, or elections that are not lease candidates)
/// with [`new`](Self::new).
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_core::memory::MemoryStore;
/// use regent_core::{BoxError, ElectionName, HolderId, SupervisorSet};
///
/// let shards = [ElectionName::new("orders-eu")?, ElectionName::new("orders-us")?];
/// let set = SupervisorSet::builder(MemoryStore::race(), HolderId::new("host-a")?, shards).build()?;
/// # let signal = tokio::time::sleep(std::time::Duration::from_secs(30)); // regent::shutdown_signal()
/// let exits = set
///     .run_until(signal, |shard, leader| async move {
///         // work on `shard` with leader.token() until leader.cancelled() fires
///         # let _ = shard;
///         leader.cancelled().await;
///         Ok::<_, BoxError>(())
///     })
///     .await?; // the elections that failed, by name
/// assert_eq!(exits.len(), 2);
/// # Ok(()) }
/// ```
pub struct SupervisorSet<C> {
    members: BTreeMap<ElectionName, Arc<Supervisor<C>>>,
    shutdown: CancellationToken,
    leading: Leading,
    /// Whether a [`run_until`](Self::run_until) runs: two at once would
    /// campaign twice per candidate.
    running: AtomicBool,
}

impl<C> fmt::Debug for SupervisorSet<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SupervisorSet")
            .field("elections", &self.members.keys().collect::<Vec<_>>())
            .field("leading", &*self.leading.borrow())
            .field("stopped", &self.shutdown.is_cancelled())
            .finish()
    }
}

/// Builds a [`SupervisorSet`] of lease candidates: one
/// [`CandidateBuilder`] per election, the same holder id and store for all.
#[must_use]
pub struct SupervisorSetBuilder<S> {
    candidates: Vec<(ElectionName, CandidateBuilder<S>)>,
    duplicate: Option<ElectionName>,
    restart: Restart,
    health_timeout: Option<Duration>,
}

impl<S: LeaseStore + Clone> SupervisorSet<Candidate<S>> {
    /// Starts building a set that campaigns for each of `elections` as
    /// `holder` on `store` (clones of it: a store's clones share its
    /// connection). Candidates have the default settings until
    /// [`configure`](SupervisorSetBuilder::configure)d; supervisors restart
    /// [`Always`](Restart::Always), with no health timeout.
    pub fn builder(
        store: S,
        holder: HolderId,
        elections: impl IntoIterator<Item = ElectionName>,
    ) -> SupervisorSetBuilder<S> {
        let mut seen = BTreeSet::new();
        let mut duplicate = None;
        let mut candidates = Vec::new();
        for election in elections {
            if seen.insert(election.clone()) {
                let builder = Candidate::builder(store.clone(), election.clone(), holder.clone());
                candidates.push((election, builder));
            } else {
                duplicate.get_or_insert(election);
            }
        }
        SupervisorSetBuilder {
            candidates,
            duplicate,
            restart: Restart::Always,
            health_timeout: None,
        }
    }
}

impl<S: LeaseStore> SupervisorSetBuilder<S> {
    /// Applies `f` to each election's [`CandidateBuilder`], now: the ttl
    /// and the other timing settings, metadata, `give_up_after`. `f` gets
    /// the election too, for settings that differ per election (metadata
    /// naming the shard's endpoint, say).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use regent_core::memory::MemoryStore;
    /// use regent_core::{ElectionName, HolderId, SupervisorSet};
    ///
    /// let set = SupervisorSet::builder(MemoryStore::race(), HolderId::new("a")?, [ElectionName::new("jobs")?])
    ///     .configure(|_election, candidate| candidate.ttl(Duration::from_secs(3)))
    ///     .build()?;
    /// # let _ = set;
    /// # Ok(()) }
    /// ```
    pub fn configure(
        mut self,
        mut f: impl FnMut(&ElectionName, CandidateBuilder<S>) -> CandidateBuilder<S>,
    ) -> Self {
        self.candidates = self
            .candidates
            .into_iter()
            .map(|(election, builder)| {
                let builder = f(&election, builder);
                (election, builder)
            })
            .collect();
        self
    }

    /// Every supervisor's restart policy ([`Supervisor::restart`]).
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Every supervisor's health timeout ([`Supervisor::health_timeout`]),
    /// checked by [`build`](Self::build).
    pub fn health_timeout(mut self, timeout: Duration) -> Self {
        self.health_timeout = Some(timeout);
        self
    }

    /// Builds every candidate (checking its settings) and its supervisor.
    ///
    /// # Errors
    ///
    /// [`SetConfigError::Duplicate`] for an election given twice;
    /// [`SetConfigError::Candidate`] naming the first election whose
    /// candidate breaks a rule; [`SetConfigError::Supervisor`] for a health
    /// timeout out of range.
    pub fn build(self) -> Result<SupervisorSet<Candidate<S>>, SetConfigError> {
        if let Some(election) = self.duplicate {
            return Err(SetConfigError::Duplicate { election });
        }
        let mut supervisors = Vec::with_capacity(self.candidates.len());
        for (election, builder) in self.candidates {
            let candidate = builder
                .build()
                .map_err(|source| SetConfigError::Candidate { election, source })?;
            let mut supervisor = Supervisor::new(candidate).restart(self.restart);
            if let Some(timeout) = self.health_timeout {
                supervisor = supervisor
                    .health_timeout(timeout)
                    .map_err(SetConfigError::Supervisor)?;
            }
            supervisors.push(supervisor);
        }
        SupervisorSet::new(supervisors)
    }
}

impl<C: Election> SupervisorSet<C> {
    /// A set of `supervisors`, each of its own election (lease candidates or
    /// any other [`Election`]), with their own policies.
    ///
    /// # Errors
    ///
    /// [`SetConfigError::Duplicate`] for two supervisors of one election.
    pub fn new(
        supervisors: impl IntoIterator<Item = Supervisor<C>>,
    ) -> Result<Self, SetConfigError> {
        let mut members = BTreeMap::new();
        for supervisor in supervisors {
            let election = supervisor.candidate().election().clone();
            if members.contains_key(&election) {
                return Err(SetConfigError::Duplicate { election });
            }
            members.insert(election, Arc::new(supervisor));
        }
        Ok(Self {
            members,
            shutdown: CancellationToken::new(),
            leading: Arc::new(watch::Sender::new(BTreeSet::new())),
            running: AtomicBool::new(false),
        })
    }

    /// How many elections the set holds.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the set holds no election.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The elections, in order.
    pub fn elections(&self) -> impl ExactSizeIterator<Item = &ElectionName> {
        self.members.keys()
    }

    /// The supervisor of `election` (its candidate's status, events,
    /// timing), if the set holds it.
    pub fn supervisor(&self, election: &ElectionName) -> Option<&Supervisor<C>> {
        self.members.get(election).map(|s| &**s)
    }

    /// The elections this process leads now, kept current while
    /// [`run_until`](Self::run_until) runs: those whose candidate's
    /// [`status`](Election::status) is [`Leader`](crate::Status::Leader).
    /// Empty before the run and after it. For logs, health and counts: like
    /// [`Status::is_leader`](crate::Status::is_leader) it proves nothing,
    /// the leader task's token does.
    pub fn leading(&self) -> watch::Receiver<BTreeSet<ElectionName>> {
        self.leading.subscribe()
    }

    /// The token that stops every election of the set when cancelled, as
    /// [`run_until`](Self::run_until)'s signal does; a set stopped once
    /// stays stopped.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Runs each election's supervisor ([`Supervisor::run_until`]), each as
    /// a task of its own, until `shutdown` completes (a signal, say) or the
    /// set's [`shutdown_token`](Self::shutdown_token) is cancelled; then
    /// stops them all and returns once every one has stopped: every leader
    /// task has stopped (within its grace) and every lease has been given
    /// back. Also returns when every supervisor has ended on its own
    /// (restart policies that end, failures).
    ///
    /// `task` is called on every term of every election, with the
    /// election's name and the term's [`LeaderContext`]; it runs as
    /// [`Supervisor::run`] runs it (whichever of the task and the lease
    /// ends first ends the other; a panic ends the term, not the process).
    /// An error it returns ends its term and is logged (`warn`, with the
    /// election, holder and token); the restart policy decides what follows.
    ///
    /// An election whose supervision fails does not stop the others: it is
    /// logged (`error`, with the election and holder) when it happens, and
    /// returned by name once all have stopped.
    ///
    /// # Errors
    ///
    /// [`SetFailed`], when at least one election failed: each
    /// [`ElectionFailure`] names its election, and the other elections'
    /// exits are kept. Otherwise every election's [`SupervisorExit`]
    /// (`Shutdown` after the signal).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a dropped call aborts every election's supervisor
    /// and drops its leader task; leases still held are then released in
    /// the background, as when a [`Supervisor::run`] is dropped. Stop with
    /// the signal or the set's shutdown token instead.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, and when another call of this set's
    /// `run_until` is running (each candidate runs one campaign at a time).
    pub async fn run_until<F, Fut, E>(
        &self,
        shutdown: impl Future<Output = ()>,
        task: F,
    ) -> Result<BTreeMap<ElectionName, SupervisorExit>, SetFailed>
    where
        F: Fn(ElectionName, LeaderContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<BoxError> + Send + 'static,
    {
        assert!(
            !self.running.swap(true, Ordering::AcqRel),
            "SupervisorSet::run_until called while another call runs"
        );
        let _running = Running {
            flag: &self.running,
            leading: &self.leading,
        };
        let task = Arc::new(task);
        let mut running = JoinSet::new();
        let mut names = HashMap::new();
        for (election, supervisor) in &self.members {
            let handle = running.spawn(supervise(
                supervisor.clone(),
                self.shutdown.clone(),
                self.leading.clone(),
                task.clone(),
            ));
            names.insert(handle.id(), election.clone());
        }
        tokio::pin!(shutdown);
        let mut signalled = false;
        let mut exits = BTreeMap::new();
        let mut failures = Vec::new();
        loop {
            let joined = tokio::select! {
                () = &mut shutdown, if !signalled => {
                    signalled = true;
                    tracing::info!(
                        elections = self.members.len(),
                        "shutting down: stopping every election's leader task and giving the leases back"
                    );
                    self.shutdown.cancel();
                    continue;
                }
                joined = running.join_next_with_id() => joined,
            };
            let failure = match joined {
                None => break,
                Some(Ok((_, (election, Ok(exit))))) => {
                    exits.insert(election, exit);
                    continue;
                }
                Some(Ok((_, (election, Err(source))))) => {
                    ElectionFailure::Campaign { election, source }
                }
                Some(Err(source)) => ElectionFailure::Aborted {
                    election: names[&source.id()].clone(),
                    source,
                },
            };
            let holder = self.members[failure.election()].candidate().holder();
            tracing::error!(
                election = %failure.election(), %holder, error = %crate::report(&failure),
                "supervising the election failed; the set's other elections go on"
            );
            failures.push(failure);
        }
        if failures.is_empty() {
            Ok(exits)
        } else {
            Err(SetFailed::new(failures, exits))
        }
    }
}

/// One election's part of [`SupervisorSet::run_until`]: its supervisor,
/// stopped by the set's token, with its status mirrored into the set's
/// `leading`.
async fn supervise<C, F, Fut, E>(
    supervisor: Arc<Supervisor<C>>,
    stop: CancellationToken,
    leading: Leading,
    task: Arc<F>,
) -> (ElectionName, Result<SupervisorExit, CampaignError>)
where
    C: Election,
    F: Fn(ElectionName, LeaderContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError> + Send + 'static,
{
    let election = supervisor.candidate().election().clone();
    let mut status = supervisor.candidate().status();
    let holder = supervisor.candidate().holder().clone();
    let named = election.clone();
    // Taken out of `leading` however this ends: returned, panicked, or
    // dropped with its task aborted.
    let _mark = Mark {
        leading: &leading,
        election: &election,
    };
    let run = supervisor.run_until(stop.cancelled_owned(), move |ctx: LeaderContext| {
        let token = ctx.token();
        let work = task(named.clone(), ctx);
        let (election, holder) = (named.clone(), holder.clone());
        async move {
            // The supervisor keeps a task's error for the term's outcome
            // only; in a set of many, say which election's task failed.
            let done = work.await.map_err(Into::into);
            if let Err(e) = &done {
                tracing::warn!(
                    %election, %holder, token = token.get(), error = %crate::report(&**e),
                    "leader task failed; its term ends"
                );
            }
            done
        }
    });
    tokio::pin!(run);
    let result = loop {
        let leads = status.borrow_and_update().is_leader();
        leading.send_if_modified(|set| {
            if leads {
                !set.contains(&election) && set.insert(election.clone())
            } else {
                set.remove(&election)
            }
        });
        tokio::select! {
            result = &mut run => break result,
            changed = status.changed() => {
                if changed.is_err() {
                    break (&mut run).await;
                }
            }
        }
    };
    drop(_mark);
    (election, result)
}

/// Ends a set's run, also a dropped one: nothing is left leading (an
/// aborted task's own [`Mark`] goes only when the runtime drops it), and
/// the set may run again.
struct Running<'a> {
    flag: &'a AtomicBool,
    leading: &'a watch::Sender<BTreeSet<ElectionName>>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.leading.send_if_modified(|set| {
            let had = !set.is_empty();
            set.clear();
            had
        });
        self.flag.store(false, Ordering::Release);
    }
}

/// Takes an election out of its set's `leading` when dropped.
struct Mark<'a> {
    leading: &'a watch::Sender<BTreeSet<ElectionName>>,
    election: &'a ElectionName,
}

impl Drop for Mark<'_> {
    fn drop(&mut self) {
        self.leading
            .send_if_modified(|set| set.remove(self.election));
    }
}
