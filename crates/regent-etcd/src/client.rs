//! The connection to etcd: the [`EtcdStore`] handle and what every request
//! goes through (the request timeout, the errors that name the operation,
//! the election and the endpoints, a keep-alive of a lease), and the leases
//! an acquire granted but never returned.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::Client;
use regent_core::store::shared::SharedSessions;
use regent_core::{ElectionName, StoreError};

use crate::error::{Scope, etcd_error, is_lease_not_found};
use crate::record::{election_prefix, lease_hex};

/// An election store on an etcd v3 cluster. See the [crate docs](crate).
///
/// Cloning is cheap; clones share one connection.
#[derive(Clone)]
pub struct EtcdStore {
    pub(crate) client: Client,
    pub(crate) namespace: Arc<str>,
    pub(crate) endpoints: Arc<str>,
    pub(crate) request_timeout: Duration,
    /// The connection speaks TLS.
    pub(crate) tls: bool,
    /// Leases granted by acquires that never returned them (given up on
    /// after the grant): the holder's next acquire takes its key, if one
    /// was made, rather than queueing a second place.
    pub(crate) undelivered: Arc<Mutex<Vec<Undelivered>>>,
    /// The leases this store's elections share.
    pub(crate) sessions: Arc<SharedSessions<EtcdStore>>,
    /// The reads waiting to be sent together.
    pub(crate) reads: Arc<crate::reads::Reads>,
}

/// A lease an acquire granted and did not return.
#[derive(Clone, Debug)]
pub(crate) struct Undelivered {
    pub(crate) election: ElectionName,
    pub(crate) holder: regent_core::HolderId,
    pub(crate) lease: i64,
    pub(crate) ttl: Duration,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("namespace", &self.namespace)
            .field("request_timeout", &self.request_timeout)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// The key prefix of `election`: every candidate's key starts with it.
    pub fn election_prefix(&self, election: &ElectionName) -> String {
        election_prefix(&self.namespace, election)
    }

    /// A [`StoreError`] for `e`, failing `what` (which names `election`)
    /// at the store's endpoints.
    pub(crate) fn error(
        &self,
        election: &ElectionName,
        what: &str,
        e: etcd_client::Error,
    ) -> StoreError {
        let prefix = self.election_prefix(election);
        let scope = Scope {
            tls: self.tls,
            prefix: Some(&prefix),
        };
        etcd_error(format!("{what} at {}", self.endpoints), e, scope)
    }

    /// Runs one request for `election` with the request timeout; errors
    /// name `what`.
    pub(crate) async fn call<T>(
        &self,
        election: &ElectionName,
        what: impl FnOnce() -> String,
        fut: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.error(election, &what(), e)),
            Err(_) => Err(StoreError::unavailable(format!(
                "{} at {}: no answer within {:?}",
                what(),
                self.endpoints,
                self.request_timeout
            ))),
        }
    }

    /// Runs one request about a lease with the request timeout; errors
    /// name `election`'s prefix when given.
    pub(crate) async fn lease_call<T>(
        &self,
        election: Option<&ElectionName>,
        what: impl FnOnce() -> String,
        fut: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, LeaseCallError> {
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                let lease_not_found = is_lease_not_found(&e);
                let prefix = election.map(|e| self.election_prefix(e));
                let scope = Scope {
                    tls: self.tls,
                    prefix: prefix.as_deref(),
                };
                let error = etcd_error(format!("{} at {}", what(), self.endpoints), e, scope);
                Err(LeaseCallError {
                    error,
                    lease_not_found,
                })
            }
            Err(_) => Err(LeaseCallError {
                error: StoreError::unavailable(format!(
                    "{} at {}: no answer within {:?}",
                    what(),
                    self.endpoints,
                    self.request_timeout
                )),
                lease_not_found: false,
            }),
        }
    }

    /// One keep-alive round trip: `true` if the lease lives (its ttl now
    /// restarts), `false` if etcd no longer knows it. Errors name
    /// `election`'s prefix when given (a lease shared by many elections
    /// has none).
    pub(crate) async fn keep_alive_once(
        &self,
        election: Option<&ElectionName>,
        lease: i64,
        what: &str,
    ) -> Result<bool, StoreError> {
        let mut client = self.client.clone();
        let what = || format!("{what}: keep lease {} alive", lease_hex(lease));
        // etcd-client sends the first keep-alive and awaits its answer
        // inside `lease_keep_alive`; dropping the pair ends the stream.
        match self
            .lease_call(election, what, client.lease_keep_alive(lease))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.lease_not_found => Ok(false),
            Err(e) => Err(e.error),
        }
    }

    pub(crate) fn undelivered(&self) -> std::sync::MutexGuard<'_, Vec<Undelivered>> {
        self.undelivered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A failed lease request, and whether etcd said it no longer knows the
/// lease.
pub(crate) struct LeaseCallError {
    pub(crate) error: StoreError,
    pub(crate) lease_not_found: bool,
}
