//! [`ZkStore`]: the store contract over ZooKeeper's ephemeral sequential
//! nodes, with one session for every election of the store.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use regent_core::store::shared::ROUNDS_PER_TTL;
use regent_core::store::shared_watch::SharedWatches;
use regent_core::{
    Acquire, AcquireRequest, ElectionName, ErrorKind, ExpirySlack, FencingToken, HolderId,
    LeaderInfo, LeaderStream, Lease, LeaseHandle, LeaseStore, MAX_TTL, Metadata, Renewal,
    SafetyClass, StoreError, StoreInfo, StoreStyle, TtlGrant, WatchMode,
};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::error::zk_error;
use crate::record::{
    decode_metadata, encode, encode_metadata, is_candidate, is_protected_by, is_regent_name,
    leader_of, new_guid, node_prefix, sort_children, token_of,
};

/// The shortest ttl the store asks a server for. A server grants session
/// timeouts of 2 to 20 ticks (`tickTime`, 2 s by default, so 4 to 40 s);
/// the granted timeout is what [`Lease::ttl`] reports.
pub const MIN_TTL: Duration = Duration::from_millis(100);

/// How long one call may take before it fails as
/// [`Unavailable`](regent_core::ErrorKind::Unavailable), unless set with
/// [`ZkStoreBuilder::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The session timeout asked for a session opened before any election
/// asks for a ttl (by [`ZkStoreBuilder::connect`], or to read who leads),
/// unless set with [`ZkStoreBuilder::session_timeout`].
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// How much later than its timeout ZooKeeper may expire a dead holder's
/// session: the server files every session's expiry in buckets of one
/// tick and expires a bucket when it ends, so up to a tick late, and a tick
/// is at most half the session timeout (which is at least two ticks);
/// then the close goes through the ensemble's atomic broadcast.
pub const EXPIRY_SLACK: ExpirySlack = ExpirySlack::new(Duration::from_millis(500), 50);

/// An election store on a ZooKeeper ensemble. See the [crate docs](crate).
///
/// Cloning is cheap; clones share one session.
#[derive(Clone)]
pub struct ZkStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// `host:port,host:port`, without the chroot.
    servers: String,
    /// The chroot: `""`, or a path without a trailing `/`.
    root: String,
    /// Digest credentials: `user:password`.
    digest: Option<String>,
    call_timeout: Duration,
    session_timeout: Duration,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    /// The watches of the elections watched through this store.
    watches: SharedWatches,
}

/// One ZooKeeper session and what this store did with it.
struct Session {
    client: zk::Client,
    id: i64,
    asked: Duration,
    granted: Duration,
    /// A node was created on it: it stays until it expires.
    used: AtomicBool,
    /// The nodes this session made (or may have made: a create whose
    /// answer never came), each with the instant its lease lapses unless
    /// renewed. Never held across an await; a request sent while it is
    /// held is ordered against the reaper's deletes.
    records: Mutex<Vec<Record>>,
    /// Wakes the reaper when a record is added.
    wake: Arc<Notify>,
    /// Renewals waiting for the next round (see [`run_rounds`]).
    waiting: Mutex<Vec<Waiting>>,
    /// Wakes the rounds' task when a renewal joins.
    round_wake: Arc<Notify>,
    /// The reaper and the rounds' task: they end with the session.
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// A renewal waiting for its session's next round.
struct Waiting {
    dir: String,
    name: String,
    lease: Lease,
    /// Whether the node is still the lease's (`false`: lost).
    answer: oneshot::Sender<Result<bool, RoundError>>,
}

/// A node of ours and its lease.
#[derive(Clone, Debug)]
struct Record {
    dir: String,
    /// Its protection GUID.
    guid: String,
    /// Its name; `None` while the create's answer has not come.
    name: Option<String>,
    holder: HolderId,
    token: Option<FencingToken>,
    /// The lease lapses here unless renewed: the send instant of the last
    /// create, acquire or renewal, plus the granted ttl.
    until: Instant,
    /// An acquire returned it to its caller. Until then (an acquire given
    /// up on after its create was sent) the holder's next acquire takes it
    /// rather than queueing a second place.
    delivered: bool,
    /// The length of its data: a round's read answers it.
    size: usize,
    /// Its lease lapsed and the reaper's delete failed: only the reaper
    /// touches it (it is tried again), never a renewal.
    lapsed: bool,
}

impl Record {
    fn is(&self, dir: &str, name: &str, lease: &Lease) -> bool {
        !self.lapsed
            && self.dir == dir
            && self.name.as_deref() == Some(name)
            && self.holder == lease.holder
            && self.token == Some(lease.token)
    }
}

impl Session {
    fn is_alive(&self) -> bool {
        !matches!(
            self.client.state(),
            zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
        )
    }

    fn records(&self) -> std::sync::MutexGuard<'_, Vec<Record>> {
        lock(&self.records)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let tasks = self
            .tasks
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for task in tasks.drain(..) {
            task.abort();
        }
    }
}

/// Deletes the nodes of `session` whose lease lapsed: their candidate
/// stopped renewing (its task hung or was dropped) in a process that lives
/// on, so the session alone would keep them in line for ever. A delete that
/// fails is tried again a second later, until the session ends. Ends with
/// the session.
async fn reap(session: Weak<Session>, wake: Arc<Notify>) {
    /// How long the reaper waits for one answer, and then before it tries
    /// a failed delete again.
    const PATIENCE: Duration = Duration::from_secs(1);
    loop {
        let next = {
            let Some(s) = session.upgrade() else { return };
            let now = Instant::now();
            let (expired, deletes) = {
                let mut records = s.records();
                let (expired, live): (Vec<Record>, Vec<Record>) =
                    records.drain(..).partition(|r| r.until <= now);
                *records = live;
                // Sent while the records are locked: a renewal sent after
                // finds its record gone, one sent before is applied first.
                let deletes: Vec<_> = expired
                    .iter()
                    .filter_map(|r| {
                        let name = r.name.as_ref()?;
                        let path = format!("{}/{name}", r.dir);
                        tracing::info!(node = %path, holder = %r.holder, "zookeeper: a lease lapsed unrenewed; deleting its node");
                        // Its proclaimed metadata, if any: best effort (it
                        // is ephemeral, and read only for a live node).
                        drop(s.client.delete(&meta_path(&r.dir, name), None));
                        Some((r.clone(), s.client.delete(&path, None)))
                    })
                    .collect();
                (expired, deletes)
            };
            let mut failed = Vec::new();
            for (r, delete) in deletes {
                match tokio::time::timeout(PATIENCE * 5, delete).await {
                    Ok(Ok(()) | Err(zk::Error::NoNode)) => {}
                    _ => failed.push(r),
                }
            }
            for r in expired.into_iter().filter(|r| r.name.is_none()) {
                if !delete_protected(&s, &r.dir, &r.guid, PATIENCE * 5).await {
                    failed.push(r);
                }
            }
            let mut records = s.records();
            if s.is_alive() {
                for mut r in failed {
                    r.lapsed = true;
                    r.until = now + PATIENCE;
                    records.push(r);
                }
            }
            records
                .iter()
                .map(|r| r.until)
                .min()
                .unwrap_or(now + Duration::from_secs(3600))
        };
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = wake.notified() => {}
        }
    }
}

/// Deletes the node of session `s` protected by `guid` under `dir`, if a
/// create whose answer never came made one; whether that is done.
async fn delete_protected(s: &Session, dir: &str, guid: &str, patience: Duration) -> bool {
    let children = match tokio::time::timeout(patience, s.client.list_children(dir)).await {
        Ok(Ok(children)) => children,
        Ok(Err(zk::Error::NoNode)) => return true,
        _ => return false,
    };
    let mut done = true;
    for c in children.iter().filter(|c| is_protected_by(c, guid)) {
        let path = format!("{dir}/{c}");
        match tokio::time::timeout(patience, s.client.check_stat(&path)).await {
            Ok(Ok(Some(st))) if st.ephemeral_owner == s.id => {
                match tokio::time::timeout(patience, s.client.delete(&path, None)).await {
                    Ok(Ok(()) | Err(zk::Error::NoNode)) => {}
                    _ => done = false,
                }
            }
            Ok(Ok(_)) => {}
            _ => done = false,
        }
    }
    done
}

/// The most one round's read asks for: its answer stays well under
/// ZooKeeper's default `jute.maxbuffer` (1 MiB), which servers and clients
/// hold the packets they read to.
const ROUND_BYTES: usize = 512 * 1024;

/// What one node's read adds to an answer besides the node's data: its
/// stat (68 bytes), the op's header and the data's length.
const READ_OVERHEAD: usize = 96;

/// Renews the session's nodes in rounds, so that a process holding many
/// elections sends the server O(1) requests per ttl instead of one per
/// renewal: a renewal waits for the next round, and a round is one read
/// (ZooKeeper's `multiRead`; more than one only past [`ROUND_BYTES`]) of
/// the nodes of every renewal waiting. Rounds are at least
/// `granted / ROUNDS_PER_TTL` apart, so a renewal waits at most that long
/// for its round; the first after a quiet spell goes at once. Ends with
/// the session.
async fn run_rounds(session: Weak<Session>, wake: Arc<Notify>, call_timeout: Duration) {
    let mut last: Option<Instant> = None;
    loop {
        wake.notified().await;
        if let Some(last) = last {
            let Some(spacing) = session.upgrade().map(|s| s.granted / ROUNDS_PER_TTL) else {
                return;
            };
            tokio::time::sleep_until(last + spacing).await;
        }
        let Some(s) = session.upgrade() else { return };
        // Each round in a task of its own, so that a slow answer does not
        // hold back the next round; this one waits only for the send.
        let (sent_at, sent) = oneshot::channel();
        tokio::spawn(async move { s.round(call_timeout, sent_at).await });
        if let Ok(Some(sent)) = sent.await {
            last = Some(sent);
        }
    }
}

/// What one read of a round got: its results, ZooKeeper's error, or
/// nothing within the call timeout.
type ReadAnswer = Result<Result<Vec<zk::MultiReadResult>, zk::Error>, tokio::time::error::Elapsed>;

/// Why a round could not tell a renewal whether its node stands.
enum RoundError {
    Zk(zk::Error),
    NoAnswer,
    Garbled(String),
}

impl Session {
    /// One round: sends the reads of the nodes of the renewals waiting,
    /// tells `sent_at` when (`None`: none waited), and answers each
    /// renewal when the reads' answers come. The send instant is taken
    /// after the renewals were taken: each was called before it.
    async fn round(&self, call_timeout: Duration, sent_at: oneshot::Sender<Option<Instant>>) {
        let batch = std::mem::take(&mut *lock(&self.waiting));
        if batch.is_empty() {
            let _ = sent_at.send(None);
            return;
        }
        let sent = Instant::now();
        let mut reads = Vec::new();
        {
            // Sent while the records are locked, as a single renewal's read
            // is: the reaper's deletes are ordered against it.
            let mut records = self.records();
            // Looked up once a round, not once a renewal: a session may
            // carry thousands of records.
            let found: Vec<Option<usize>> = {
                let index: HashMap<(&str, &str), usize> = records
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| !r.lapsed)
                    .filter_map(|(i, r)| Some(((r.dir.as_str(), r.name.as_deref()?), i)))
                    .collect();
                batch
                    .iter()
                    .map(|w| {
                        index
                            .get(&(w.dir.as_str(), w.name.as_str()))
                            .copied()
                            .filter(|&i| records[i].is(&w.dir, &w.name, &w.lease))
                    })
                    .collect()
            };
            let mut reader = self.client.new_multi_reader();
            let mut chunk: Vec<Waiting> = Vec::new();
            let (mut asked, mut answered) = (0, 0);
            for (w, i) in batch.into_iter().zip(found) {
                // Its caller gave up (a timeout): no renewal for nobody.
                if w.answer.is_closed() {
                    continue;
                }
                let Some(r) = i.map(|i| &mut records[i]) else {
                    let _ = w.answer.send(Ok(false));
                    continue;
                };
                // A lapsed lease is never revived: the reaper deletes its
                // node.
                if r.until <= sent {
                    let _ = w.answer.send(Ok(false));
                    continue;
                }
                let path = format!("{}/{}", w.dir, w.name);
                let (ask, answer) = (path.len() + READ_OVERHEAD, r.size + READ_OVERHEAD);
                if !chunk.is_empty()
                    && (asked + ask > ROUND_BYTES || answered + answer > ROUND_BYTES)
                {
                    reads.push((std::mem::take(&mut chunk), reader.commit()));
                    reader = self.client.new_multi_reader();
                    (asked, answered) = (0, 0);
                }
                if let Err(e) = reader.add_get_data(&path) {
                    let _ = w.answer.send(Err(RoundError::Zk(e)));
                    continue;
                }
                r.until = sent + self.granted;
                asked += ask;
                answered += answer;
                chunk.push(w);
            }
            if !chunk.is_empty() {
                reads.push((chunk, reader.commit()));
            }
        }
        let _ = sent_at.send(Some(sent));
        let answers =
            futures_util::future::join_all(reads.into_iter().map(|(chunk, read)| async move {
                (chunk, tokio::time::timeout(call_timeout, read).await)
            }))
            .await;
        self.answer(answers);
    }

    /// Answers each renewal of a round by its read's result, and forgets
    /// the records found lost.
    fn answer(&self, answers: Vec<(Vec<Waiting>, ReadAnswer)>) {
        let mut lost = Vec::new();
        for (chunk, answer) in answers {
            let results = match answer {
                Ok(Ok(results)) if results.len() == chunk.len() => results,
                Ok(Ok(results)) => {
                    let why = format!(
                        "ZooKeeper answered a read of {} nodes with {} results",
                        chunk.len(),
                        results.len()
                    );
                    for w in chunk {
                        let _ = w.answer.send(Err(RoundError::Garbled(why.clone())));
                    }
                    continue;
                }
                Ok(Err(e)) => {
                    for w in chunk {
                        let _ = w.answer.send(Err(RoundError::Zk(e.clone())));
                    }
                    continue;
                }
                Err(_) => {
                    for w in chunk {
                        let _ = w.answer.send(Err(RoundError::NoAnswer));
                    }
                    continue;
                }
            };
            for (w, result) in chunk.into_iter().zip(results) {
                let answer = match result {
                    zk::MultiReadResult::Data { stat, .. }
                        if stat.ephemeral_owner == self.id
                            && token_of(stat.czxid) == w.lease.token =>
                    {
                        Ok(true)
                    }
                    zk::MultiReadResult::Data { .. }
                    | zk::MultiReadResult::Error {
                        err: zk::Error::NoNode,
                    } => Ok(false),
                    zk::MultiReadResult::Error { err } => Err(RoundError::Zk(err)),
                    other => Err(RoundError::Garbled(format!(
                        "ZooKeeper answered a read of a node with {other:?}"
                    ))),
                };
                if matches!(answer, Ok(false)) {
                    lost.push((w.dir.clone(), w.name.clone(), w.lease.clone()));
                }
                let _ = w.answer.send(answer);
            }
        }
        if !lost.is_empty() {
            self.records()
                .retain(|r| !lost.iter().any(|(dir, name, lease)| r.is(dir, name, lease)));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl fmt::Debug for ZkStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkStore")
            .field("servers", &self.inner.servers)
            .field("root", &self.inner.root)
            .field("digest", &self.inner.digest.is_some())
            .field("call_timeout", &self.inner.call_timeout)
            .finish_non_exhaustive()
    }
}

/// Builds a [`ZkStore`]: [`ZkStore::builder`], setters, then
/// [`connect`](Self::connect).
#[derive(Clone)]
#[must_use]
pub struct ZkStoreBuilder {
    servers: String,
    root: String,
    digest: Option<String>,
    call_timeout: Duration,
    session_timeout: Duration,
}

impl fmt::Debug for ZkStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkStoreBuilder")
            .field("servers", &self.servers)
            .field("root", &self.root)
            .field("digest", &self.digest.as_ref().map(|d| d.split(':').next()))
            .field("call_timeout", &self.call_timeout)
            .field("session_timeout", &self.session_timeout)
            .finish()
    }
}

impl ZkStoreBuilder {
    /// The path every election lives under (ZooKeeper's chroot; default:
    /// none, so election `jobs` is the node `/jobs`). It is created, with
    /// its parents, when the first candidate campaigns.
    pub fn chroot(mut self, path: impl Into<String>) -> Self {
        self.root = path.into().trim_end_matches('/').to_owned();
        self
    }

    /// Authenticates with ZooKeeper's `digest` scheme as `user` with
    /// `password`; the nodes regent creates are then readable and writable
    /// by that user only (`creator_all`), not by anyone.
    pub fn digest(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.digest = Some(format!("{}:{}", user.into(), password.into()));
        self
    }

    /// How long one call may take (default [`DEFAULT_CALL_TIMEOUT`]). Keep
    /// it below the renew deadline.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The session timeout to ask for while no election has asked for a
    /// ttl (default [`DEFAULT_SESSION_TIMEOUT`]).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Checks the settings and opens a session.
    ///
    /// # Errors
    ///
    /// [`Config`](regent_core::ErrorKind::Config) for no servers or a bad
    /// chroot; [`Unavailable`](regent_core::ErrorKind::Unavailable) when no
    /// server answers within the call timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a session opened meanwhile is closed when dropped.
    pub async fn connect(self) -> Result<ZkStore, StoreError> {
        let store = self.build()?;
        store.session(None).await?;
        Ok(store)
    }

    /// Checks the settings and makes the store without contacting a
    /// server: the first call opens the session.
    ///
    /// # Errors
    ///
    /// [`Config`](regent_core::ErrorKind::Config) for no servers or a bad
    /// chroot.
    pub fn build(self) -> Result<ZkStore, StoreError> {
        if self.servers.trim().is_empty() {
            return Err(StoreError::new(ErrorKind::Config, "no ZooKeeper servers"));
        }
        if !self.root.is_empty()
            && (!self.root.starts_with('/')
                || self.root.contains("//")
                || self.root.split('/').any(|p| p == "." || p == ".."))
        {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "the chroot {:?} is not a ZooKeeper path (/a/b: absolute, no empty, . or .. \
                     parts)",
                    self.root
                ),
            ));
        }
        let store = ZkStore {
            inner: Arc::new(Inner {
                servers: self.servers,
                root: self.root,
                digest: self.digest,
                call_timeout: self.call_timeout,
                session_timeout: self.session_timeout,
                session: tokio::sync::Mutex::new(None),
                watches: SharedWatches::default(),
            }),
        };
        Ok(store)
    }
}

/// A handle: the session id in hex, `/`, the node's name.
fn handle(session: i64, name: &str) -> LeaseHandle {
    LeaseHandle::new(format!("{session:x}/{name}"))
}

fn parse_handle(handle: &LeaseHandle) -> Option<(i64, &str)> {
    let (sid, name) = handle.as_str().split_once('/')?;
    Some((i64::from_str_radix(sid, 16).ok()?, name))
}

impl ZkStore {
    /// Starts building a store on the ensemble `servers`
    /// (`host:port,host:port`).
    pub fn builder(servers: impl Into<String>) -> ZkStoreBuilder {
        ZkStoreBuilder {
            servers: servers.into(),
            root: String::new(),
            digest: None,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
        }
    }

    /// The node of `election`: its candidates' nodes are its children
    /// (Curator's latch path).
    pub fn election_path(&self, election: &ElectionName) -> String {
        format!("{}/{election}", self.inner.root)
    }

    /// Where a candidate's proclaimed metadata lives: apart from the
    /// election's node, whose children must change only by being created
    /// or deleted (Curator's `LeaderLatch` watches the node ahead of its
    /// own for its deletion alone, and a data change spends its watch).
    /// `_regent_metadata` cannot be an election's name (those begin with a
    /// letter or a digit).
    fn meta_path(&self, election: &ElectionName, name: &str) -> String {
        meta_path(&self.election_path(election), name)
    }

    /// The session this store's elections share now, if one is open: its
    /// id and the timeout the server granted.
    pub async fn session_info(&self) -> Option<(i64, Duration)> {
        let s = self.inner.session.lock().await;
        s.as_ref()
            .filter(|s| s.is_alive())
            .map(|s| (s.id, s.granted))
    }

    fn what(&self, op: &str, election: &ElectionName) -> String {
        format!(
            "{op} election '{election}' at {} on ZooKeeper {}",
            self.election_path(election),
            self.inner.servers
        )
    }

    fn acls(&self) -> zk::Acls<'static> {
        if self.inner.digest.is_some() {
            zk::Acls::creator_all()
        } else {
            zk::Acls::anyone_all()
        }
    }

    /// One call, bounded by the call timeout.
    async fn call<T>(
        &self,
        what: impl FnOnce() -> String,
        fut: impl Future<Output = Result<T, zk::Error>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.inner.call_timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(zk_error(what(), e)),
            Err(_) => Err(StoreError::unavailable(format!(
                "{}: no answer within {:?}",
                what(),
                self.inner.call_timeout
            ))),
        }
    }

    /// The session for an election asking `ttl` (`None`: any session will
    /// do). The open session serves it if it is alive and either a node
    /// lives on it already (one session for every election: a later ttl
    /// gets the timeout granted before) or it asked the same; otherwise a
    /// new session asks for `ttl`.
    async fn session(&self, ttl: Option<Duration>) -> Result<Arc<Session>, StoreError> {
        let mut current = self.inner.session.lock().await;
        if let Some(s) = current.as_ref()
            && s.is_alive()
            && ttl.is_none_or(|t| s.used.load(Ordering::Acquire) || s.asked == t)
        {
            return Ok(s.clone());
        }
        let asked = ttl.unwrap_or(self.inner.session_timeout);
        let mut connector = zk::Client::connector().with_session_timeout(asked);
        if let Some(digest) = &self.inner.digest {
            connector = connector.with_auth("digest", digest.as_bytes());
        }
        let servers = self.inner.servers.clone();
        let client = self
            .call(
                || format!("connect to ZooKeeper {servers}"),
                connector.connect(&self.inner.servers),
            )
            .await?;
        let session = Arc::new(Session {
            id: client.session_id().0,
            granted: client.session_timeout(),
            client,
            asked,
            used: AtomicBool::new(false),
            records: Mutex::new(Vec::new()),
            wake: Arc::new(Notify::new()),
            waiting: Mutex::new(Vec::new()),
            round_wake: Arc::new(Notify::new()),
            tasks: Mutex::new(Vec::new()),
        });
        let tasks = [
            tokio::spawn(reap(Arc::downgrade(&session), session.wake.clone())),
            tokio::spawn(run_rounds(
                Arc::downgrade(&session),
                session.round_wake.clone(),
                self.inner.call_timeout,
            )),
        ];
        lock(&session.tasks).extend(tasks);
        tracing::debug!(
            servers = %self.inner.servers, session = format_args!("{:x}", session.id),
            asked = ?asked, granted = ?session.granted, "zookeeper: session opened"
        );
        *current = Some(session.clone());
        Ok(session)
    }

    /// Releases a lease of a session this store does not hold: another
    /// process's, which died (regent's supervisor gives a crashed regent's
    /// lease back by its ticket, from a process of its own). Its node goes
    /// only if it is exactly the lease's: the node of that name, still
    /// owned by the lease's session, created at the lease's token (the
    /// czxid), and deleted at the version read, so that nothing but that
    /// node is touched. Its metadata node goes first, as in a release by
    /// the session itself.
    async fn release_elsewhere(
        &self,
        lease: &Lease,
        sid: i64,
        name: &str,
    ) -> Result<(), StoreError> {
        let s = self.session(None).await?;
        let dir = self.election_path(&lease.election);
        let path = format!("{dir}/{name}");
        let what = || self.what("release", &lease.election);
        let stat = self.call(what, s.client.check_stat(&path)).await?;
        let Some(stat) =
            stat.filter(|st| st.ephemeral_owner == sid && token_of(st.czxid) == lease.token)
        else {
            // Gone already, or not this lease's.
            return Ok(());
        };
        let meta = self.meta_path(&lease.election, name);
        match self.call(what, s.client.delete(&meta, None)).await {
            Ok(()) => {}
            Err(e) if is_no_node(&e) => {}
            Err(e) => return Err(e),
        }
        match self
            .call(what, s.client.delete(&path, Some(stat.version)))
            .await
        {
            Ok(()) => {
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, token = %lease.token,
                    session = format_args!("{sid:x}"), "zookeeper: released another session's lease"
                );
                Ok(())
            }
            // Gone meanwhile (its session expired), or changed: not ours
            // to delete any more.
            Err(e) if is_no_node(&e) || is_bad_version(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The open session, if `id` is it and it is alive.
    async fn session_of(&self, id: i64) -> Option<Arc<Session>> {
        let current = self.inner.session.lock().await;
        current
            .as_ref()
            .filter(|s| s.id == id && s.is_alive())
            .cloned()
    }

    /// Creates the election's node (and its parents) if missing.
    async fn ensure_path(&self, s: &Session, path: &str) -> Result<(), StoreError> {
        let acls = self.acls();
        let options = zk::CreateMode::Persistent.with_acls(acls);
        let what = || format!("create {path} on ZooKeeper {}", self.inner.servers);
        self.call(what, s.client.mkdir(path, &options)).await
    }

    /// Our node for `req`: found again by its protection GUID if an
    /// earlier create's answer was lost, else created. Returns its name and
    /// czxid; its lease runs from this call's send.
    async fn create_node(
        &self,
        s: &Session,
        req: &AcquireRequest,
        dir: &str,
    ) -> Result<(String, i64), StoreError> {
        let what = || self.what("campaign in", &req.election);
        let data = encode(&req.holder, &req.metadata);
        // A place an acquire of this holder made but never returned.
        let earlier = s
            .records()
            .iter()
            .find(|r| r.dir == dir && r.holder == req.holder && !r.delivered && !r.lapsed)
            .map(|r| (r.guid.clone(), r.name.clone()));
        if let Some((guid, Some(name))) = &earlier {
            let path = format!("{dir}/{name}");
            let sent = Instant::now();
            let stat = self.call(what, s.client.check_stat(&path)).await?;
            let mut records = s.records();
            match stat.filter(|st| st.ephemeral_owner == s.id) {
                Some(st) => {
                    if let Some(r) = records.iter_mut().find(|r| r.dir == dir && r.guid == *guid) {
                        r.until = sent + s.granted;
                    }
                    return Ok((name.clone(), st.czxid));
                }
                None => records.retain(|r| !(r.dir == dir && r.guid == *guid)),
            }
        }
        let earlier = earlier.and_then(|(guid, name)| name.is_none().then_some(guid));
        if let Some(guid) = &earlier {
            let sent = Instant::now();
            if let Some((name, czxid)) = self.find_protected(s, dir, guid, &req.election).await? {
                let mut records = s.records();
                records.retain(|r| !(r.dir == dir && r.guid == *guid));
                records.push(Record {
                    dir: dir.to_owned(),
                    guid: guid.clone(),
                    name: Some(name.clone()),
                    holder: req.holder.clone(),
                    token: Some(token_of(czxid)),
                    until: sent + s.granted,
                    delivered: false,
                    size: data.len(),
                    lapsed: false,
                });
                return Ok((name, czxid));
            }
        }
        // Reuse the GUID of a create that may still land: should it, the
        // two share it, and the next look finds the one to keep.
        let guid = earlier.unwrap_or_else(new_guid);
        let prefix = format!("{dir}/{}", node_prefix(&guid));
        let acls = self.acls();
        let options = zk::CreateMode::EphemeralSequential.with_acls(acls);
        for attempt in 0..2 {
            let sent = Instant::now();
            let created = {
                let mut records = s.records();
                records.retain(|r| !(r.dir == dir && r.guid == guid));
                records.push(Record {
                    dir: dir.to_owned(),
                    guid: guid.clone(),
                    name: None,
                    holder: req.holder.clone(),
                    token: None,
                    until: sent + s.granted,
                    delivered: false,
                    size: data.len(),
                    lapsed: false,
                });
                s.client.create(&prefix, &data, &options)
            };
            s.used.store(true, Ordering::Release);
            s.wake.notify_one();
            let forget = || {
                s.records().retain(|r| !(r.dir == dir && r.guid == guid));
            };
            match tokio::time::timeout(self.inner.call_timeout, created).await {
                Ok(Ok((stat, sequence))) => {
                    let name = format!("{}{sequence}", node_prefix(&guid));
                    if let Some(r) = s
                        .records()
                        .iter_mut()
                        .find(|r| r.dir == dir && r.guid == guid)
                    {
                        r.name = Some(name.clone());
                        r.token = Some(token_of(stat.czxid));
                    }
                    return Ok((name, stat.czxid));
                }
                Ok(Err(zk::Error::NoNode)) if attempt == 0 => {
                    forget();
                    self.ensure_path(s, dir).await?;
                }
                // The create may have been applied: its record stays, and
                // the next acquire looks for its node first (the reaper
                // deletes it if none does within the ttl).
                Ok(Err(e @ (zk::Error::ConnectionLoss | zk::Error::Timeout))) => {
                    return Err(zk_error(what(), e));
                }
                Ok(Err(e)) => {
                    forget();
                    return Err(zk_error(what(), e));
                }
                Err(_) => {
                    return Err(StoreError::unavailable(format!(
                        "{}: no answer within {:?}",
                        what(),
                        self.inner.call_timeout
                    )));
                }
            }
        }
        Err(StoreError::new(
            ErrorKind::Protocol,
            format!("{}: the election's node vanished as it was made", what()),
        ))
    }

    /// The node of this session protected by `guid` under `dir`, with its
    /// czxid; a second one (a create retried after its first landed late)
    /// is deleted.
    async fn find_protected(
        &self,
        s: &Session,
        dir: &str,
        guid: &str,
        election: &ElectionName,
    ) -> Result<Option<(String, i64)>, StoreError> {
        let children = match self
            .call(
                || self.what("look for our node in", election),
                s.client.list_children(dir),
            )
            .await
        {
            Ok(c) => c,
            Err(e) if is_no_node(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut mine: Vec<String> = children
            .into_iter()
            .filter(|c| is_protected_by(c, guid))
            .collect();
        sort_children(&mut mine);
        let mut found = None;
        for name in mine {
            let path = format!("{dir}/{name}");
            let stat = self
                .call(
                    || self.what("look for our node in", election),
                    s.client.check_stat(&path),
                )
                .await?;
            let Some(stat) = stat.filter(|st| st.ephemeral_owner == s.id) else {
                continue;
            };
            if found.is_none() {
                found = Some((name, stat.czxid));
            } else {
                tracing::info!(election = %election, node = %path, "zookeeper: deleting a duplicate of our node (a create answered late)");
                let _ = self
                    .call(
                        || self.what("delete a duplicate node in", election),
                        s.client.delete(&path, None),
                    )
                    .await;
            }
        }
        Ok(found)
    }

    /// Renews our node named in `lease`, if it is still ours and its lease
    /// has not lapsed: its lease runs again from this call's send. Returns
    /// its name and czxid, or `None` (lost: gone, lapsed, or not ours).
    async fn refresh(
        &self,
        s: &Session,
        lease: &Lease,
        dir: &str,
    ) -> Result<Option<(String, i64)>, StoreError> {
        let Some((sid, name)) = parse_handle(&lease.handle) else {
            return Ok(None);
        };
        if sid != s.id {
            return Ok(None);
        }
        let path = format!("{dir}/{name}");
        let sent = Instant::now();
        let check = {
            let mut records = s.records();
            let Some(r) = records.iter_mut().find(|r| r.is(dir, name, lease)) else {
                return Ok(None);
            };
            // A lapsed lease is never revived: the reaper deletes its node.
            if r.until <= sent {
                return Ok(None);
            }
            r.until = sent + s.granted;
            // Sent now, before the reaper can send a delete for it.
            s.client.check_stat(&path)
        };
        let stat = self
            .call(|| self.what("renew in", &lease.election), check)
            .await?;
        match stat.filter(|st| st.ephemeral_owner == s.id && token_of(st.czxid) == lease.token) {
            Some(st) => Ok(Some((name.to_owned(), st.czxid))),
            None => {
                s.records().retain(|r| !r.is(dir, name, lease));
                Ok(None)
            }
        }
    }

    /// Renews `lease`'s node `dir/name` of session `s` in the session's
    /// next round (see [`run_rounds`]): whether it is still ours, its lease
    /// then running from the round's send. A lapsed lease is never revived.
    async fn renew_in_round(
        &self,
        s: &Session,
        lease: &Lease,
        dir: String,
        name: &str,
    ) -> Result<bool, StoreError> {
        let (answer, answered) = oneshot::channel();
        lock(&s.waiting).push(Waiting {
            dir,
            name: name.to_owned(),
            lease: lease.clone(),
            answer,
        });
        s.round_wake.notify_one();
        let what = || self.what("renew in", &lease.election);
        match answered.await {
            Ok(Ok(held)) => Ok(held),
            Ok(Err(RoundError::Zk(e @ zk::Error::Unimplemented))) => Err(zk_error(
                format!(
                    "{}: the server does not implement multiRead (ZooKeeper 3.6 or later is \
                     needed)",
                    what()
                ),
                e,
            )),
            Ok(Err(RoundError::Zk(e))) => Err(zk_error(what(), e)),
            Ok(Err(RoundError::NoAnswer)) => Err(StoreError::unavailable(format!(
                "{}: no answer within {:?}",
                what(),
                self.inner.call_timeout
            ))),
            Ok(Err(RoundError::Garbled(why))) => Err(StoreError::new(
                ErrorKind::Protocol,
                format!("{}: {why}", what()),
            )),
            // The session's task ended with the session.
            Err(_) => Ok(false),
        }
    }

    /// The leader among `children` (sorted): the first whose data can be
    /// read. `None` if `stop` (our own node) comes first, or none is left.
    async fn first_readable(
        &self,
        client: &zk::Client,
        election: &ElectionName,
        dir: &str,
        children: &[String],
        stop: Option<&str>,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        for name in children {
            if Some(name.as_str()) == stop {
                return Ok(None);
            }
            let path = format!("{dir}/{name}");
            match self
                .call(
                    || self.what("read the leader of", election),
                    client.get_data(&path),
                )
                .await
            {
                Ok((data, stat)) => {
                    let mut leader = leader_of(name, &data, stat.czxid);
                    if let Some(m) = self.proclaimed(client, election, name).await? {
                        leader.metadata = m;
                    }
                    return Ok(Some(leader));
                }
                Err(e) if is_no_node(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The metadata the candidate of node `name` proclaimed, if it did.
    async fn proclaimed(
        &self,
        client: &zk::Client,
        election: &ElectionName,
        name: &str,
    ) -> Result<Option<Metadata>, StoreError> {
        if !is_regent_name(name) {
            return Ok(None);
        }
        let path = self.meta_path(election, name);
        match self
            .call(
                || self.what("read the leader's metadata in", election),
                client.get_data(&path),
            )
            .await
        {
            Ok((data, _)) => Ok(decode_metadata(&data)),
            Err(e) if is_no_node(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The sorted children of `dir`; none if it does not exist.
    async fn children(
        &self,
        client: &zk::Client,
        election: &ElectionName,
        dir: &str,
    ) -> Result<Vec<String>, StoreError> {
        match self
            .call(
                || self.what("list the candidates of", election),
                client.list_children(dir),
            )
            .await
        {
            Ok(mut c) => {
                sort_children(&mut c);
                Ok(c)
            }
            Err(e) if is_no_node(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

/// The metadata node of node `name` of the election at `dir`
/// (`ROOT/ELECTION`): `ROOT/_regent_metadata/ELECTION/NAME`.
fn meta_path(dir: &str, name: &str) -> String {
    let (root, election) = dir.rsplit_once('/').unwrap_or(("", dir));
    format!("{root}/_regent_metadata/{election}/{name}")
}

fn is_node_exists(e: &StoreError) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<zk::Error>())
        .is_some_and(|z| matches!(z, zk::Error::NodeExists))
}

fn is_no_node(e: &StoreError) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<zk::Error>())
        .is_some_and(|z| matches!(z, zk::Error::NoNode))
}

fn is_bad_version(e: &StoreError) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<zk::Error>())
        .is_some_and(|z| matches!(z, zk::Error::BadVersion))
}

impl LeaseStore for ZkStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "zookeeper",
            StoreStyle::Queue,
            WatchMode::Notify,
            SafetyClass::Consensus,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL)
        .with_expiry_slack(EXPIRY_SLACK)
        .with_ttl_grant(TtlGrant::Negotiated)
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        if req.ttl < MIN_TTL || req.ttl > MAX_TTL {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "{}: a ttl of {:?} is outside what this store asks a server for ({MIN_TTL:?} \
                     to {MAX_TTL:?})",
                    self.what("campaign in", &req.election),
                    req.ttl
                ),
            ));
        }
        let s = self.session(Some(req.ttl)).await?;
        let dir = self.election_path(&req.election);
        let mine = match queued {
            Some(q) => self.refresh(&s, q, &dir).await?,
            None => None,
        };
        let (name, czxid) = match mine {
            Some(m) => m,
            None => self.create_node(&s, req, &dir).await?,
        };
        let lease = Lease {
            election: req.election.clone(),
            holder: req.holder.clone(),
            token: token_of(czxid),
            ttl: s.granted,
            handle: handle(s.id, &name),
        };
        // Our create was applied on the server we read from, and with it
        // every earlier one: no node that stood before ours is missing
        // from this list (one that left since may still show).
        let children = self.children(&s.client, &req.election, &dir).await?;
        if let Some(foreign) = children.iter().find(|c| !is_candidate(c)) {
            // Never lead past something we cannot place in the line.
            let _ = self.release(&lease).await;
            return Err(StoreError::corrupt(format!(
                "{}: the node {dir}/{foreign} is no candidate's (its name does not end in a \
                 sequence number); remove it",
                self.what("campaign in", &req.election)
            )));
        }
        let leader = self
            .first_readable(&s.client, &req.election, &dir, &children, Some(&name))
            .await?;
        if !children.contains(&name) {
            // Deleted behind our back (an operator), or lapsed: queue anew.
            s.records().retain(|r| !r.is(&dir, &name, &lease));
            return Ok(Acquire::Held {
                leader,
                queued: None,
            });
        }
        // Nothing awaits after this: the caller gets the lease.
        if let Some(r) = s.records().iter_mut().find(|r| r.is(&dir, &name, &lease)) {
            r.delivered = true;
        }
        match leader {
            None => Ok(Acquire::Won(lease)),
            Some(leader) => Ok(Acquire::Held {
                leader: Some(leader),
                queued: Some(lease),
            }),
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let Some((sid, name)) = parse_handle(&lease.handle) else {
            return Ok(Renewal::Lost);
        };
        let Some(s) = self.session_of(sid).await else {
            return Ok(Renewal::Lost);
        };
        let dir = self.election_path(&lease.election);
        match self.renew_in_round(&s, lease, dir, name).await {
            Ok(true) => Ok(Renewal::Renewed),
            Ok(false) => Ok(Renewal::Lost),
            // The session ended: ZooKeeper deleted its nodes.
            Err(_) if !s.is_alive() => Ok(Renewal::Lost),
            Err(e) => Err(e),
        }
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let Some((sid, name)) = parse_handle(&lease.handle) else {
            return Ok(Renewal::Lost);
        };
        let Some(s) = self.session_of(sid).await else {
            return Ok(Renewal::Lost);
        };
        let dir = self.election_path(&lease.election);
        let path = format!("{dir}/{name}");
        let what = || self.what("publish metadata in", &lease.election);
        let now = Instant::now();
        let check = {
            let records = s.records();
            if !records
                .iter()
                .any(|r| r.is(&dir, name, lease) && r.until > now)
            {
                return Ok(Renewal::Lost);
            }
            s.client.check_stat(&path)
        };
        match self.call(what, check).await {
            Ok(Some(st)) if st.ephemeral_owner == s.id && token_of(st.czxid) == lease.token => {}
            Ok(_) => {
                s.records().retain(|r| !r.is(&dir, name, lease));
                return Ok(Renewal::Lost);
            }
            Err(_) if !s.is_alive() => return Ok(Renewal::Lost),
            Err(e) => return Err(e),
        }
        // The node's own data stays as created: the metadata goes beside
        // the election (see `meta_path`), ephemeral as the node.
        let meta = self.meta_path(&lease.election, name);
        let data = encode_metadata(metadata);
        let options = zk::CreateMode::Ephemeral.with_acls(self.acls());
        for _ in 0..3 {
            match self.call(what, s.client.set_data(&meta, &data, None)).await {
                Ok(_) => return Ok(Renewal::Renewed),
                Err(e) if is_no_node(&e) => {}
                Err(_) if !s.is_alive() => return Ok(Renewal::Lost),
                Err(e) => return Err(e),
            }
            match self
                .call(what, s.client.create(&meta, &data, &options))
                .await
            {
                Ok(_) => return Ok(Renewal::Renewed),
                // Made meanwhile: set it.
                Err(e) if is_node_exists(&e) => {}
                Err(e) if is_no_node(&e) => {
                    let parent = meta.rsplit_once('/').map_or("", |(p, _)| p);
                    self.ensure_path(&s, parent).await?;
                }
                Err(_) if !s.is_alive() => return Ok(Renewal::Lost),
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::new(
            ErrorKind::Protocol,
            format!("{}: the metadata node {meta} came and went", what()),
        ))
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let Some((sid, name)) = parse_handle(&lease.handle) else {
            return Ok(());
        };
        let Some(s) = self.session_of(sid).await else {
            return self.release_elsewhere(lease, sid, name).await;
        };
        let dir = self.election_path(&lease.election);
        let path = format!("{dir}/{name}");
        let delete = {
            let mut records = s.records();
            let before = records.len();
            records.retain(|r| !r.is(&dir, name, lease));
            if records.len() == before {
                // Not ours (another holder or token), or already gone.
                return Ok(());
            }
            // The metadata first: a follower that sees the node gone reads
            // no stale metadata for it. Best effort: it is ephemeral too.
            drop(
                s.client
                    .delete(&self.meta_path(&lease.election, name), None),
            );
            s.client.delete(&path, None)
        };
        match self
            .call(|| self.what("release", &lease.election), delete)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if is_no_node(&e) => Ok(()),
            Err(_) if !s.is_alive() => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        let s = self.session(None).await?;
        let dir = self.election_path(election);
        let children = self.children(&s.client, election, &dir).await?;
        self.first_readable(&s.client, election, &dir, &children, None)
            .await
    }

    /// One ZooKeeper watch per election and store, shared by every watch
    /// of it: each watcher's own would list every candidate again at every
    /// change.
    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let (store, e) = (self.clone(), election.clone());
        let open = async move { store.watch_stream(&e).await };
        self.inner.watches.watch(election, open).await
    }
}

impl ZkStore {
    /// The store's own watch of `election`: the children and the leader's
    /// node, watched again after each change.
    async fn watch_stream(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let s = self.session(None).await?;
        struct State {
            store: ZkStore,
            client: zk::Client,
            election: ElectionName,
            dir: String,
            /// Completes at the next change after the last item.
            wake: Option<Wake>,
            ended: bool,
        }
        let state = State {
            store: self.clone(),
            client: s.client.clone(),
            dir: self.election_path(election),
            election: election.clone(),
            wake: None,
            ended: false,
        };
        let leaders = futures_util::stream::unfold(state, |mut st| async move {
            if st.ended {
                return None;
            }
            if let Some(wake) = st.wake.take() {
                let event = wake.await;
                if event.event_type == zk::EventType::Session
                    && matches!(
                        event.session_state,
                        zk::SessionState::Expired
                            | zk::SessionState::Closed
                            | zk::SessionState::AuthFailed
                    )
                {
                    // The watches went with the session: the consumer opens
                    // a new watch, on a new session.
                    st.ended = true;
                    let what = st.store.what("watch", &st.election);
                    return Some((
                        Err(StoreError::unavailable(format!(
                            "{what}: the session ended ({:?})",
                            event.session_state
                        ))),
                        st,
                    ));
                }
            }
            match st.store.watch_once(&st.client, &st.election, &st.dir).await {
                Ok((leader, wake)) => {
                    st.wake = Some(wake);
                    Some((Ok(leader), st))
                }
                Err(e) => {
                    st.ended = true;
                    Some((Err(e), st))
                }
            }
        });
        Ok(Box::pin(leaders))
    }
}

/// A wait for the next change a watch was set for.
type Wake = std::pin::Pin<Box<dyn Future<Output = zk::WatchedEvent> + Send>>;

impl ZkStore {
    /// Reads the leader and sets watches on what would change it: the
    /// election's children, and the leader's node (its data: proclaimed
    /// metadata). Returns the leader and a future that completes at the
    /// first change.
    async fn watch_once(
        &self,
        client: &zk::Client,
        election: &ElectionName,
        dir: &str,
    ) -> Result<(Option<LeaderInfo>, Wake), StoreError> {
        loop {
            let listed = self
                .call(
                    || self.what("watch", election),
                    client.get_and_watch_children(dir),
                )
                .await;
            let (mut children, children_watch) = match listed {
                Ok((children, _stat, watcher)) => (children, watcher),
                Err(e) if is_no_node(&e) => {
                    // No election node yet: wait for it to appear.
                    let (_, watcher) = self
                        .call(
                            || self.what("watch", election),
                            client.check_and_watch_stat(dir),
                        )
                        .await?;
                    return Ok((None, Box::pin(async move { watcher.changed().await })));
                }
                Err(e) => return Err(e),
            };
            sort_children(&mut children);
            let Some(first) = children.first() else {
                return Ok((
                    None,
                    Box::pin(async move { children_watch.changed().await }),
                ));
            };
            let path = format!("{dir}/{first}");
            match self
                .call(
                    || self.what("watch the leader of", election),
                    client.get_and_watch_data(&path),
                )
                .await
            {
                Ok((data, stat, data_watch)) => {
                    let mut leader = leader_of(first, &data, stat.czxid);
                    // Metadata it proclaims later: watch where it goes.
                    let meta = self.meta_path(election, first);
                    let (exists, meta_watch) = self
                        .call(
                            || self.what("watch the leader's metadata in", election),
                            client.check_and_watch_stat(&meta),
                        )
                        .await?;
                    if exists.is_some()
                        && let Some(m) = self.proclaimed(client, election, first).await?
                    {
                        leader.metadata = m;
                    }
                    let wake = async move {
                        tokio::select! {
                            e = children_watch.changed() => e,
                            e = data_watch.changed() => e,
                            e = meta_watch.changed() => e,
                        }
                    };
                    return Ok((Some(leader), Box::pin(wake)));
                }
                // The first left between the two reads: read again.
                Err(e) if is_no_node(&e) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}
