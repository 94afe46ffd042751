//! The connection to ZooKeeper: the [`ZkStore`] handle, the session its
//! elections share (opened, or opened again, on demand), and what every
//! call goes through (the call timeout, errors that name the operation,
//! the election and the servers, the ACLs of the nodes it makes).

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regent_core::store::SharedAttempt;
use regent_core::store::shared_watch::SharedWatches;
use regent_core::{ElectionName, StoreError};
use tokio::sync::Notify;
use zookeeper_client as zk;

use crate::error::zk_error;
use crate::record::meta_path;
use crate::session::{Session, lock, reap, run_rounds};

/// An election store on a ZooKeeper ensemble. See the [crate docs](crate).
///
/// Cloning is cheap; clones share one session.
#[derive(Clone)]
pub struct ZkStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// `host:port,host:port`, without the chroot.
    pub(crate) servers: String,
    /// The chroot: `""`, or a path without a trailing `/`.
    pub(crate) root: String,
    /// Digest credentials: `user:password`.
    pub(crate) digest: Option<String>,
    pub(crate) call_timeout: Duration,
    pub(crate) session_timeout: Duration,
    /// The open session. Held only to read or replace it, never across an
    /// await.
    pub(crate) session: Mutex<Option<Arc<Session>>>,
    /// The attempt to open a session, in a task of its own (see
    /// [`SharedAttempt`]: a caller's future that held the session's lock
    /// across the connect, as this store's did, wedged every other call
    /// when it was left unpolled — as a candidate leaves its watch).
    pub(crate) connecting: SharedAttempt<Arc<Session>>,
    /// The watches of the elections watched through this store.
    pub(crate) watches: SharedWatches,
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

impl ZkStore {
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
    pub(crate) fn meta_path(&self, election: &ElectionName, name: &str) -> String {
        meta_path(&self.election_path(election), name)
    }

    /// The session this store's elections share now, if one is open: its
    /// id and the timeout the server granted.
    pub async fn session_info(&self) -> Option<(i64, Duration)> {
        self.current().map(|s| (s.id, s.granted))
    }

    pub(crate) fn what(&self, op: &str, election: &ElectionName) -> String {
        format!(
            "{op} election '{election}' at {} on ZooKeeper {}",
            self.election_path(election),
            self.inner.servers
        )
    }

    pub(crate) fn acls(&self) -> zk::Acls<'static> {
        if self.inner.digest.is_some() {
            zk::Acls::creator_all()
        } else {
            zk::Acls::anyone_all()
        }
    }

    /// One call, bounded by the call timeout.
    pub(crate) async fn call<T>(
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
    ///
    /// One attempt to open a session runs at a time, shared: a caller
    /// whose ttl the attempt it joined did not ask starts the next one, and
    /// after three rounds any live session serves (its granted timeout is
    /// what a lease reports).
    pub(crate) async fn session(&self, ttl: Option<Duration>) -> Result<Arc<Session>, StoreError> {
        let asked = ttl.unwrap_or(self.inner.session_timeout);
        let what = format!("connect to ZooKeeper {}", self.inner.servers);
        let mut session = None;
        for round in 0..3 {
            let fits = |s: &Session| {
                round == 2 || ttl.is_none_or(|t| s.used.load(Ordering::Acquire) || s.asked == t)
            };
            let store = self.clone();
            let s = self
                .inner
                .connecting
                .join(
                    || self.current().filter(|s| fits(s)),
                    self.inner.call_timeout + Duration::from_secs(1),
                    &what,
                    || async move { store.open_session(asked).await },
                )
                .await?;
            if fits(&s) {
                return Ok(s);
            }
            session = Some(s);
        }
        Ok(session.expect("three rounds ran"))
    }

    /// The open session, if it is alive.
    fn current(&self) -> Option<Arc<Session>> {
        lock(&self.inner.session)
            .as_ref()
            .filter(|s| s.is_alive())
            .cloned()
    }

    /// Opens a session asking `asked`, and makes it the store's.
    async fn open_session(&self, asked: Duration) -> Result<Arc<Session>, StoreError> {
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
        *lock(&self.inner.session) = Some(session.clone());
        Ok(session)
    }

    /// The open session, if `id` is it and it is alive.
    pub(crate) async fn session_of(&self, id: i64) -> Option<Arc<Session>> {
        self.current().filter(|s| s.id == id)
    }

    /// Creates the election's node (and its parents) if missing.
    pub(crate) async fn ensure_path(&self, s: &Session, path: &str) -> Result<(), StoreError> {
        let acls = self.acls();
        let options = zk::CreateMode::Persistent.with_acls(acls);
        let what = || format!("create {path} on ZooKeeper {}", self.inner.servers);
        self.call(what, s.client.mkdir(path, &options)).await
    }
}
