//! [`SqliteStore`] and its builder: the async half, which hands every
//! database call to the store's connection thread ([`crate::conn`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;
use regent_core::{
    Acquire, AcquireRequest, Candidacy, ElectionName, ErrorKind, HandOff, HolderId, LeaderInfo,
    LeaderStream, Lease, LeaseStore, MAX_TTL, Metadata, Renewal, SafetyClass, StoreError,
    StoreInfo, StoreStyle, WatchMode,
};
use rusqlite::Connection;
use tokio::sync::{oneshot, watch};

use crate::batch::Stats;
use crate::bell;
use crate::clock::later;
use crate::conn::{self, Message};
use crate::db::{self, Site};
use crate::poll::Polled;
use crate::request::{self, Access, Pending};
use regent_core::store::Claims;

/// The shortest ttl the store accepts: 10 ms. See the crate docs.
pub const MIN_TTL: Duration = Duration::from_millis(10);

/// How long a call waits for another connection's write lock before it
/// fails as [`ErrorKind::Unavailable`], unless set: 5 s.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often [`watch`](LeaseStore::watch) reads the lease row, unless set:
/// 100 ms.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The least time between the starts of two commits, unless set: 50 ms.
/// See [`SqliteStoreBuilder::commit_interval`].
pub const DEFAULT_COMMIT_INTERVAL: Duration = Duration::from_millis(50);

/// The longest busy timeout, poll interval or commit interval the builder
/// accepts: one day, as the longest ttl ([`MAX_TTL`]).
const LONGEST_OPTION: Duration = MAX_TTL;

/// A lease store in one SQLite file, shared by the processes of one host.
/// See the [crate docs](crate) for the clock, the schema and what can go
/// wrong.
///
/// Cheap to clone: clones share one connection, on one thread of its own
/// that runs their calls in group commits (see the [crate docs](crate#one-process-many-elections)).
/// The thread ends when the last clone is dropped. Stores opened
/// separately (in one process or many) each have their own connection and
/// thread, and see the same leases through the file.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The connection thread's channel. Invariant: the thread runs until
    /// every sender is dropped, so dropping the last store clone (and the
    /// last stream of its watches) ends it.
    requests: mpsc::Sender<Message>,
    /// The connection thread, to unpark it for an urgent request.
    thread: std::thread::Thread,
    stats: Arc<Stats>,
    path: PathBuf,
    options: conn::Options,
    /// The wake-up bell's listener, started by the first watch: `None`
    /// inside when the bell cannot be watched (then polls alone serve).
    listener: OnceLock<Option<bell::Listener>>,
    /// Per election and holder, the term last handed to the caller and
    /// the acquires in flight: which of its own terms an acquire may take
    /// over (see `claims`).
    claims: Arc<Claims>,
}

impl Inner {
    /// The bell rang: the connection thread polls its watches now.
    fn wake(&self) {
        if self.requests.send(Message::Bell).is_ok() {
            self.thread.unpark();
        }
    }
}

/// What a store's connection thread has done since it opened: for tests
/// and benches, not a stable API.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupCommitStats {
    /// Group commits that succeeded.
    pub commits: u64,
    /// Writes those commits answered.
    pub writes: u64,
    /// The most writes one commit answered.
    pub largest: u64,
    /// Times the thread waited with writes in hand, for the commit
    /// interval or for more writes to join them.
    pub waits: u64,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .field("busy_timeout", &self.inner.options.busy_timeout)
            .field("poll_interval", &self.inner.options.poll_interval)
            .field("commit_interval", &self.inner.options.commit_interval)
            .finish_non_exhaustive()
    }
}

/// Options for opening a [`SqliteStore`]; see [`SqliteStore::builder`].
#[derive(Clone, Debug)]
#[must_use]
pub struct SqliteStoreBuilder {
    path: PathBuf,
    busy_timeout: Duration,
    poll_interval: Duration,
    commit_interval: Duration,
}

impl SqliteStoreBuilder {
    /// How long a call waits for another connection's lock before failing
    /// with [`ErrorKind::Unavailable`] (default [`DEFAULT_BUSY_TIMEOUT`]),
    /// at most one day. Keep it below the candidates' renew deadline, or a
    /// renewal stuck behind a lock outlives the leadership it was meant to
    /// extend. Zero fails at once on contention.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How often [`watch`](LeaseStore::watch) reads the lease rows
    /// (default [`DEFAULT_POLL_INTERVAL`]), more than zero and at most one
    /// day: a follower sees a change at most this late. Each poll is one
    /// short read transaction for every election the store watches.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The least time between the starts of two commits of this store
    /// (default [`DEFAULT_COMMIT_INTERVAL`]), at most one day. Writes
    /// (acquires, renewals, releases, metadata updates) that come meanwhile
    /// wait and share the next commit, and its fsync: with many elections
    /// on one store, this bounds the commits per second, and so the CPU and
    /// the bytes written, whatever the number of elections.
    ///
    /// A write waits for others to join it at most this long, and at most
    /// a twentieth of its lease's ttl, whichever is shorter, before its
    /// commit starts; a read that comes while writes wait waits with them
    /// (an acquire's read, at most a twentieth of its ttl too). One that
    /// comes after a quiet spell does not wait. Calls that make more than one request
    /// wait for each: an acquire that finds no live lease reads, then
    /// writes; a candidate's renewal cycle can wait twice (a late answer
    /// delays the next renewal, which waits again). So at the default
    /// ttl (10 s) the interval decides, and below a ttl of 20 intervals
    /// (1 s by default) the ttl does: short ttls keep their renewals
    /// prompt, at the cost of more commits per second. Zero commits as soon
    /// as the previous commit ended, with whatever writes came during it.
    pub fn commit_interval(mut self, interval: Duration) -> Self {
        self.commit_interval = interval;
        self
    }

    /// Opens the store: starts its connection thread, which creates the
    /// file and the schema if missing, checks them otherwise, and sets the
    /// connection up (WAL, `synchronous=FULL`, the busy timeout).
    ///
    /// # Errors
    ///
    /// * [`ErrorKind::Config`]: a zero poll interval, or a busy timeout,
    ///   poll interval or commit interval longer than one day (each named,
    ///   with the bound); the file cannot be opened or created (a missing
    ///   directory, a directory in its place, no permission); the database has tables but not regent's schema,
    ///   or another schema version; the boot id is unreadable (not Linux).
    /// * [`ErrorKind::Corrupt`]: the file is not a SQLite database, or is
    ///   damaged.
    /// * [`ErrorKind::Unavailable`]: the schema had to be created but
    ///   another connection held the write lock past the busy timeout; the
    ///   connection thread could not be started.
    ///
    /// Each names the path and the cause.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped open finishes on its connection thread, which
    /// then closes the connection and ends.
    pub async fn open(self) -> Result<SqliteStore, StoreError> {
        self.validate()?;
        let (requests, received) = mpsc::channel();
        let (ready, opened) = oneshot::channel();
        let thread_path = self.path.clone();
        let options = conn::Options {
            busy_timeout: self.busy_timeout,
            poll_interval: self.poll_interval,
            commit_interval: self.commit_interval,
        };
        let stats = Arc::new(Stats::default());
        let thread_stats = Arc::clone(&stats);
        let thread = std::thread::Builder::new()
            .name("regent-sqlite".into())
            .spawn(move || conn::run(thread_path, options, thread_stats, ready, received))
            .map_err(|e| {
                StoreError::unavailable(format!(
                    "sqlite store '{}': start the connection thread",
                    self.path.display()
                ))
                .with_source(e)
            })?;
        match opened.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(StoreError::unavailable(format!(
                    "sqlite store '{}': the connection thread ended while opening",
                    self.path.display()
                )));
            }
        }
        let path = self.path;
        tracing::debug!(path = %path.display(), "opened sqlite store");
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                requests,
                thread: thread.thread().clone(),
                stats,
                path,
                options,
                listener: OnceLock::new(),
                claims: Arc::default(),
            }),
        })
    }

    /// Each option within its bounds: durations the connection thread adds
    /// to the clock, and SQLite's busy timeout (an int of milliseconds).
    fn validate(&self) -> Result<(), StoreError> {
        let refuse = |rule: String| {
            Err(StoreError::new(
                ErrorKind::Config,
                format!("sqlite store '{}': {rule}", self.path.display()),
            ))
        };
        if self.poll_interval.is_zero() {
            return refuse("the poll interval must be greater than zero".into());
        }
        for (option, value) in [
            ("busy timeout", self.busy_timeout),
            ("poll interval", self.poll_interval),
            ("commit interval", self.commit_interval),
        ] {
            if value > LONGEST_OPTION {
                return refuse(format!(
                    "the {option} ({value:?}) must be at most one day ({LONGEST_OPTION:?})"
                ));
            }
        }
        Ok(())
    }
}

impl SqliteStore {
    /// Opens the store at `path` with default options; see
    /// [`SqliteStoreBuilder::open`].
    ///
    /// # Errors
    ///
    /// As [`SqliteStoreBuilder::open`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        Self::builder(path).open().await
    }

    /// Starts building a store on the file at `path`.
    pub fn builder(path: impl AsRef<Path>) -> SqliteStoreBuilder {
        SqliteStoreBuilder {
            path: path.as_ref().to_path_buf(),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            poll_interval: DEFAULT_POLL_INTERVAL,
            commit_interval: DEFAULT_COMMIT_INTERVAL,
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// What the store's connection thread has done since the store opened
    /// (shared by its clones). For tests and benches: not a stable API.
    #[doc(hidden)]
    pub fn group_commit_stats(&self) -> GroupCommitStats {
        let stats = &self.inner.stats;
        GroupCommitStats {
            commits: stats.commits.load(Ordering::Relaxed),
            writes: stats.writes.load(Ordering::Relaxed),
            largest: stats.largest.load(Ordering::Relaxed),
            waits: stats.waits.load(Ordering::Relaxed),
        }
    }

    /// Runs `op` with the connection on the store's connection thread,
    /// in the next batch: a write inside the batch's write transaction,
    /// answered once it is committed. `access` must say truly what `op`
    /// does (see [`Access`]). `ttl`, that of the lease the call is for,
    /// bounds how long the request waits for others
    /// ([`request::longest_wait`]).
    async fn call<T: Send + 'static>(
        &self,
        access: Access,
        ttl: Option<Duration>,
        what: impl FnOnce() -> String,
        op: impl FnOnce(&Connection, &Site) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let commit_interval = self.inner.options.commit_interval;
        let wait = ttl.map_or(commit_interval, |ttl| {
            request::longest_wait(ttl, commit_interval)
        });
        let (request, answer) = Pending::request(access, later(Instant::now(), wait), op);
        if self.inner.requests.send(Message::Request(request)).is_err() {
            return Err(thread_died(what()));
        }
        // The thread may be parked for as long as the commit interval,
        // waiting for more writes: one that may not wait that long wakes it.
        if wait < commit_interval {
            self.inner.thread.unpark();
        }
        match answer.await {
            Ok(Ok(answered)) => answered,
            Ok(Err(failure)) => Err(failure.into_error(what())),
            // Dropped without an answer: the thread died (see `conn`).
            Err(_) => Err(thread_died(what())),
        }
    }

    fn context(&self, op: &str, election: &ElectionName) -> String {
        format!(
            "sqlite store '{}': {op} election '{election}'",
            self.inner.path.display()
        )
    }

    fn check_ttl(&self, election: &ElectionName, ttl: Duration) -> Result<i64, StoreError> {
        if ttl < MIN_TTL || ttl > MAX_TTL {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "{}: ttl {ttl:?} is outside the {MIN_TTL:?}..={MAX_TTL:?} the sqlite store honours",
                    self.context("acquire", election)
                ),
            ));
        }
        Ok(db::ttl_ms(ttl))
    }
}

/// The error of every call once the connection thread has died: a bug,
/// logged as it happened, which retrying cannot mend (the thread is not
/// restarted), so permanent.
fn thread_died(context: String) -> StoreError {
    StoreError::new(
        ErrorKind::Protocol,
        format!(
            "{context}: the store's connection thread has died (a bug; see the log); open the store again"
        ),
    )
}

impl LeaseStore for SqliteStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "sqlite",
            StoreStyle::Race,
            WatchMode::Poll(self.inner.options.poll_interval),
            SafetyClass::SingleNode,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL)
        // Expiry is decided on the holders' own clock, to the nanosecond.
        // The granted ttl is the one asked, rounded up to whole
        // milliseconds: never less.
        .with_expiry_slack(ExpirySlack::NONE)
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        _queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let ttl_ms = self.check_ttl(&req.election, req.ttl)?;
        let context = || self.context("acquire", &req.election);
        // In flight until it hands a term out, or is dropped: what it may
        // take over is judged on the connection thread, when it runs.
        let attempt = self.inner.claims.begin(&req.election, &req.holder);
        // A read first: while a live lease stands, as it does for every
        // follower's retry, the answer needs no write lock and no commit.
        let (r, probe) = (req.clone(), attempt.probe());
        let live = self
            .call(Access::Read, Some(req.ttl), context, move |conn, site| {
                db::held_by(conn, site, &r, probe.reclaim())
            })
            .await?;
        let outcome = match live {
            Some(leader) => Acquire::Held {
                leader: Some(leader),
                queued: None,
            },
            None => {
                let (r, probe) = (req.clone(), attempt.probe());
                self.call(Access::Write, Some(req.ttl), context, move |conn, site| {
                    db::acquire(conn, site, &r, ttl_ms, probe.reclaim())
                })
                .await?
            }
        };
        match &outcome {
            Acquire::Won(lease) => {
                tracing::debug!(
                    election = %req.election, holder = %req.holder, token = %lease.token,
                    "sqlite: acquired"
                );
                // In the poll that returns it: a caller that gave up
                // before holds no record of it here either, and its next
                // acquire may take the term over.
                attempt.handed_out(lease.token);
            }
            Acquire::Held { leader, .. } => tracing::debug!(
                election = %req.election, holder = %req.holder,
                leader = ?leader.as_ref().map(|l| l.holder.as_str()), "sqlite: held by another"
            ),
        }
        Ok(outcome)
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let l = lease.clone();
        let renewal = self
            .call(
                Access::WriteOne,
                Some(lease.ttl),
                || self.context("renew", &lease.election),
                move |conn, site| db::renew(conn, site, &l),
            )
            .await?;
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = %lease.token,
            outcome = ?renewal, "sqlite: renew"
        );
        Ok(renewal)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let l = lease.clone();
        let deleted = self
            .call(
                Access::WriteOne,
                Some(lease.ttl),
                || self.context("release", &lease.election),
                move |conn, site| db::release(conn, site, &l),
            )
            .await?;
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = %lease.token,
            deleted, "sqlite: release"
        );
        Ok(())
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let (l, m) = (lease.clone(), metadata.clone());
        let outcome = self
            .call(
                Access::WriteOne,
                Some(lease.ttl),
                || self.context("update the metadata of", &lease.election),
                move |conn, site| db::update_metadata(conn, site, &l, &m),
            )
            .await?;
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = %lease.token,
            outcome = ?outcome, "sqlite: update metadata"
        );
        Ok(outcome)
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        let e = election.clone();
        self.call(
            Access::Read,
            None,
            || self.context("read the leader of", election),
            move |conn, site| db::leader(conn, site, "read the leader of", &e),
        )
        .await
    }

    /// The roster: one row per candidate in `regent_roster`, refreshed
    /// by each enroll (a write, batched with the others).
    async fn enroll(&self, req: &AcquireRequest) -> Result<(), StoreError> {
        let ttl_ms = self.check_ttl(&req.election, req.ttl)?;
        let r = req.clone();
        self.call(
            Access::WriteOne,
            Some(req.ttl),
            || self.context("enroll in", &req.election),
            move |conn, site| {
                crate::roster::enroll(conn, site, &r.election, &r.holder, &r.metadata, ttl_ms)
            },
        )
        .await
    }

    async fn withdraw(&self, election: &ElectionName, holder: &HolderId) -> Result<(), StoreError> {
        let (e, h) = (election.clone(), holder.clone());
        self.call(
            Access::WriteOne,
            None,
            || self.context("withdraw from", election),
            move |conn, site| crate::roster::withdraw(conn, site, &e, &h),
        )
        .await
    }

    async fn candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Option<Vec<Candidacy>>, StoreError> {
        let e = election.clone();
        let list = self
            .call(
                Access::Read,
                None,
                || self.context("list the candidates of", election),
                move |conn, site| crate::roster::candidates(conn, site, &e),
            )
            .await?;
        Ok(Some(list))
    }

    /// The row deleted and the election kept for `successor` in
    /// `regent_reserved`, in one transaction; the release rings the
    /// wake-up bell as any release does.
    async fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        let window_ms = crate::db::ttl_ms(window);
        let (l, s) = (lease.clone(), successor.clone());
        let given = self
            .call(
                Access::Write,
                Some(lease.ttl),
                || self.context("release", &lease.election),
                move |conn, site| crate::roster::release_to(conn, site, &l, &s, window_ms),
            )
            .await?;
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = %lease.token,
            %successor, given, "sqlite: release to a successor"
        );
        Ok(if given {
            HandOff::ToSuccessor
        } else {
            HandOff::Released
        })
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        // SQLite has no notifications across processes: poll, once per
        // interval for every election this store watches (the connection
        // thread's shared poll). The first read starts the watch, so a
        // file that cannot be read fails here. No task runs for the
        // stream: dropping it leaves nothing behind, and the shared poll
        // forgets the election once no stream watches it.
        let first = self.current_leader(election).await?;
        let (reply, polled) = oneshot::channel();
        let stopped = || thread_died(self.context("watch", election));
        self.inner
            .requests
            .send(Message::Watch(election.clone(), reply))
            .map_err(|_| stopped())?;
        let polled = polled.await.map_err(|_| stopped())?;
        // A release, by any process, wakes the poll at once.
        self.inner.listener.get_or_init(|| {
            bell::Listener::start(&self.inner.path, Arc::downgrade(&self.inner), Inner::wake)
        });
        let follow = Follow {
            store: self.clone(),
            election: election.clone(),
            polled,
            first: Some(first),
            last: None,
            done: false,
        };
        Ok(Box::pin(futures_util::stream::unfold(follow, Follow::next)))
    }
}

/// One stream of [`SqliteStore::watch`]: the shared poll's states of one
/// election, as the [`LeaderStream`] contract wants them (the same rules
/// as [`regent_core::store::poll_watch`]): the first state, then changes
/// only; an error as it comes, and the state after it even if unchanged;
/// a permanent error ends the stream.
struct Follow {
    /// Keeps the connection thread, and so the shared poll, alive.
    store: SqliteStore,
    election: ElectionName,
    polled: watch::Receiver<Polled>,
    /// The state read when the watch started, not yet emitted.
    first: Option<Option<LeaderInfo>>,
    /// The last state emitted; `None` after an error.
    last: Option<Option<LeaderInfo>>,
    done: bool,
}

type FollowItem = Result<Option<LeaderInfo>, StoreError>;

impl Follow {
    async fn next(mut self) -> Option<(FollowItem, Self)> {
        if let Some(first) = self.first.take() {
            self.last = Some(first.clone());
            return Some((Ok(first), self));
        }
        if self.done {
            return None;
        }
        loop {
            if self.polled.changed().await.is_err() {
                // The thread ended under a stream that keeps it alive: it
                // died, and cannot serve this watch any more.
                self.done = true;
                let e = thread_died(self.store.context("watch", &self.election));
                return Some((Err(e), self));
            }
            let polled = self.polled.borrow_and_update().clone();
            let read = match polled {
                Polled::Unread => continue,
                Polled::Leader(leader) => Ok(leader),
                // Read it again alone: the error, with its cause and kind,
                // is the one `current_leader` reports.
                Polled::Failed => self.store.current_leader(&self.election).await,
            };
            match read {
                Ok(leader) if self.last.as_ref() == Some(&leader) => {}
                Ok(leader) => {
                    self.last = Some(leader.clone());
                    return Some((Ok(leader), self));
                }
                Err(e) => {
                    self.last = None;
                    self.done = !e.is_transient();
                    return Some((Err(e), self));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_send_sync<T: Send + Sync + Clone + 'static>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        is_send_sync::<SqliteStore>();
        is_send_sync::<SqliteStoreBuilder>();
    }

    /// A dead connection thread was reported as `Unavailable`, transient:
    /// a leader retried its renewals until its renew deadline, and a
    /// candidate campaigned against a store that could never answer
    /// again. Now every call fails as `Protocol`, permanent: the leader
    /// steps down for a store failure, and the campaign ends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_connection_thread_is_a_permanent_error() {
        use regent_core::{CampaignError, Candidate, EndReason, HolderId};

        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(dir.path().join("regent.db"))
            .await
            .expect("open");
        let election = ElectionName::new("dies").expect("a name");
        let candidate = |who: &str| {
            Candidate::builder(
                store.clone(),
                election.clone(),
                HolderId::new(who).expect("a holder id"),
            )
            // Renewals every 2 s, a step-down after 6 s.
            .ttl(Duration::from_secs(10))
            .build()
            .expect("valid timing")
        };
        let leader = candidate("leader");
        let leadership = leader.campaign().await.expect("wins");
        let lease = leadership.lease().clone();

        store
            .inner
            .requests
            .send(Message::Die)
            .expect("the thread runs");
        let e = store.renew(&lease).await.expect_err("no thread");
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");
        assert!(e.to_string().contains("died"), "{e}");
        let e = store
            .current_leader(&election)
            .await
            .expect_err("no thread");
        assert!(!e.is_transient(), "{e}");
        let Err(e) = store.watch(&election).await else {
            panic!("a watch of a dead store is an error");
        };
        assert!(!e.is_transient(), "{e}");

        // The leader's next renewal (within 2 s) fails for good: it steps
        // down at once, well before its 6 s deadline.
        let ended = tokio::time::timeout(Duration::from_secs(5), leadership.until_ended())
            .await
            .expect("the leader stops renewing a dead store");
        assert_eq!(ended.reason, EndReason::StoreFailed(ErrorKind::Protocol));
        let campaign = tokio::time::timeout(Duration::from_secs(5), candidate("other").campaign())
            .await
            .expect("a campaign on a dead store ends");
        assert!(
            matches!(&campaign, Err(CampaignError::Store(e)) if e.kind() == ErrorKind::Protocol),
            "{campaign:?}"
        );
    }
}
