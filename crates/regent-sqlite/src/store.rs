//! [`SqliteStore`] and its builder: the async half, which runs every
//! database call on tokio's blocking pool.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use regent_core::store::{ExpirySlack, poll_watch};
use regent_core::{
    Acquire, AcquireRequest, ElectionName, ErrorKind, LeaderInfo, LeaderStream, Lease, LeaseStore,
    MAX_TTL, Metadata, Renewal, SafetyClass, StoreError, StoreInfo, StoreStyle, WatchMode,
};
use rusqlite::Connection;

use crate::clock::{BOOT_ID_PATH, read_boot_id};
use crate::db::{self, Site};

/// The shortest ttl the store accepts: 10 ms. See the crate docs.
pub const MIN_TTL: Duration = Duration::from_millis(10);

/// How long a call waits for another connection's write lock before it
/// fails as [`ErrorKind::Unavailable`], unless set: 5 s.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often [`watch`](LeaseStore::watch) reads the lease row, unless set:
/// 100 ms.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A lease store in one SQLite file, shared by the processes of one host.
/// See the [crate docs](crate) for the clock, the schema and what can go
/// wrong.
///
/// Cheap to clone: clones share one connection. Stores opened separately
/// (in one process or many) each have their own connection and see the same
/// leases through the file.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// Not `Sync`: every use locks it on a blocking thread, never across an
    /// await.
    conn: Mutex<Connection>,
    site: Site,
    busy_timeout: Duration,
    poll_interval: Duration,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.site.path)
            .field("busy_timeout", &self.inner.busy_timeout)
            .field("poll_interval", &self.inner.poll_interval)
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
}

impl SqliteStoreBuilder {
    /// How long a call waits for another connection's lock before failing
    /// with [`ErrorKind::Unavailable`] (default [`DEFAULT_BUSY_TIMEOUT`]).
    /// Keep it below the candidates' renew deadline, or a renewal stuck
    /// behind a lock outlives the leadership it was meant to extend. Zero
    /// fails at once on contention.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// How often [`watch`](LeaseStore::watch) reads the lease row (default
    /// [`DEFAULT_POLL_INTERVAL`]): a follower sees a change at most this
    /// late. Each read is one short read transaction.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Opens the store: creates the file and the schema if missing, checks
    /// them otherwise, and sets the connection up (WAL, `synchronous=FULL`,
    /// the busy timeout).
    ///
    /// # Errors
    ///
    /// * [`ErrorKind::Config`]: a zero poll interval; the file cannot be
    ///   opened or created (a missing directory, a directory in its place,
    ///   no permission); the database has tables but not regent's schema,
    ///   or another schema version; the boot id is unreadable (not Linux).
    /// * [`ErrorKind::Corrupt`]: the file is not a SQLite database, or is
    ///   damaged.
    /// * [`ErrorKind::Unavailable`]: the schema had to be created but
    ///   another connection held the write lock past the busy timeout.
    ///
    /// Each names the path and the cause.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped open finishes on the blocking pool and its
    /// connection is closed.
    pub async fn open(self) -> Result<SqliteStore, StoreError> {
        if self.poll_interval.is_zero() {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "sqlite store '{}': the poll interval must be greater than zero",
                    self.path.display()
                ),
            ));
        }
        let path = self.path.clone();
        let opened = tokio::task::spawn_blocking(move || {
            let boot_id = read_boot_id(Path::new(BOOT_ID_PATH))?;
            let conn = db::open(&self.path, self.busy_timeout)?;
            Ok::<_, StoreError>(SqliteStore {
                inner: Arc::new(Inner {
                    conn: Mutex::new(conn),
                    site: Site {
                        path: self.path,
                        boot_id,
                    },
                    busy_timeout: self.busy_timeout,
                    poll_interval: self.poll_interval,
                }),
            })
        })
        .await
        .map_err(|e| {
            StoreError::unavailable(format!("sqlite store '{}': open", path.display()))
                .with_source(e)
        })??;
        tracing::debug!(path = %path.display(), "opened sqlite store");
        Ok(opened)
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
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.site.path
    }

    /// Runs `op` with the connection on tokio's blocking pool.
    async fn call<T: Send + 'static>(
        &self,
        what: impl FnOnce() -> String,
        op: impl FnOnce(&mut Connection, &Site) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            // A panic while the lock was held left no transaction open:
            // rusqlite rolls back when a transaction is dropped.
            let mut conn = inner.conn.lock().unwrap_or_else(PoisonError::into_inner);
            op(&mut conn, &inner.site)
        })
        .await
        .map_err(|e| StoreError::unavailable(what()).with_source(e))?
    }

    fn context(&self, op: &str, election: &ElectionName) -> String {
        format!(
            "sqlite store '{}': {op} election '{election}'",
            self.inner.site.path.display()
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

impl LeaseStore for SqliteStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "sqlite",
            StoreStyle::Race,
            WatchMode::Poll(self.inner.poll_interval),
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
        let r = req.clone();
        let outcome = self
            .call(
                || self.context("acquire", &req.election),
                move |conn, site| db::acquire(conn, site, &r, ttl_ms),
            )
            .await?;
        match &outcome {
            Acquire::Won(lease) => tracing::debug!(
                election = %req.election, holder = %req.holder, token = %lease.token,
                "sqlite: acquired"
            ),
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
            || self.context("read the leader of", election),
            move |conn, site| db::leader(conn, site, &e),
        )
        .await
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        // SQLite has no notifications across processes: poll. The first
        // read starts the watch, so a file that cannot be read fails here.
        // No task runs between polls: dropping the stream leaves nothing
        // behind but a read in flight on the blocking pool, which finishes
        // within the busy timeout.
        poll_watch(self.clone(), election.clone(), self.inner.poll_interval).await
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
}
