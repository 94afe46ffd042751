//! [`ZkStoreBuilder`]: the store's settings (servers, chroot, digest
//! credentials, call and session timeouts) and `build` and `connect`,
//! which check them and make a [`ZkStore`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use regent_core::store::shared_watch::SharedWatches;
use regent_core::{ErrorKind, StoreError};

use crate::client::{Inner, ZkStore};

/// How long one call may take before it fails as
/// [`Unavailable`](regent_core::ErrorKind::Unavailable), unless set with
/// [`ZkStoreBuilder::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The session timeout asked for a session opened before any election
/// asks for a ttl (by [`ZkStoreBuilder::connect`], or to read who leads),
/// unless set with [`ZkStoreBuilder::session_timeout`].
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

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
                session: std::sync::Mutex::new(None),
                connecting: regent_core::store::SharedAttempt::new(),
                watches: SharedWatches::default(),
            }),
        };
        Ok(store)
    }
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
}
