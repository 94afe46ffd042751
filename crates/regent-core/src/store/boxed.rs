//! A store chosen at run time: [`BoxStore`] wraps any [`LeaseStore`] behind
//! one type, so the CLI can pick a backend from a URL.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::{Acquire, AcquireRequest, HandOff, LeaderStream, LeaseStore, Renewal, StoreInfo};
use crate::error::StoreError;
use crate::types::{Candidacy, ElectionName, HolderId, LeaderInfo, Lease, Metadata};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The object-safe twin of [`LeaseStore`], implemented for every
/// `LeaseStore`. Use [`BoxStore`] rather than this trait directly.
pub trait DynLeaseStore: Send + Sync + 'static {
    /// See [`LeaseStore::info`].
    fn info(&self) -> StoreInfo;
    /// See [`LeaseStore::try_acquire`].
    fn try_acquire<'a>(
        &'a self,
        req: &'a AcquireRequest,
        queued: Option<&'a Lease>,
    ) -> BoxFuture<'a, Result<Acquire, StoreError>>;
    /// See [`LeaseStore::renew`].
    fn renew<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Renewal, StoreError>>;
    /// See [`LeaseStore::release`].
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`LeaseStore::update_metadata`].
    fn update_metadata<'a>(
        &'a self,
        lease: &'a Lease,
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, Result<Renewal, StoreError>>;
    /// See [`LeaseStore::current_leader`].
    fn current_leader<'a>(
        &'a self,
        election: &'a ElectionName,
    ) -> BoxFuture<'a, Result<Option<LeaderInfo>, StoreError>>;
    /// See [`LeaseStore::candidates`].
    fn candidates<'a>(
        &'a self,
        election: &'a ElectionName,
    ) -> BoxFuture<'a, Result<Option<Vec<Candidacy>>, StoreError>>;
    /// See [`LeaseStore::enroll`].
    fn enroll<'a>(&'a self, req: &'a AcquireRequest) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`LeaseStore::withdraw`].
    fn withdraw<'a>(
        &'a self,
        election: &'a ElectionName,
        holder: &'a HolderId,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`LeaseStore::release_to`].
    fn release_to<'a>(
        &'a self,
        lease: &'a Lease,
        successor: &'a HolderId,
        window: Duration,
    ) -> BoxFuture<'a, Result<HandOff, StoreError>>;
    /// See [`LeaseStore::watch`].
    fn watch<'a>(
        &'a self,
        election: &'a ElectionName,
    ) -> BoxFuture<'a, Result<LeaderStream, StoreError>>;
}

impl<S: LeaseStore> DynLeaseStore for S {
    fn info(&self) -> StoreInfo {
        LeaseStore::info(self)
    }
    fn try_acquire<'a>(
        &'a self,
        req: &'a AcquireRequest,
        queued: Option<&'a Lease>,
    ) -> BoxFuture<'a, Result<Acquire, StoreError>> {
        Box::pin(LeaseStore::try_acquire(self, req, queued))
    }
    fn renew<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<Renewal, StoreError>> {
        Box::pin(LeaseStore::renew(self, lease))
    }
    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(LeaseStore::release(self, lease))
    }
    fn update_metadata<'a>(
        &'a self,
        lease: &'a Lease,
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, Result<Renewal, StoreError>> {
        Box::pin(LeaseStore::update_metadata(self, lease, metadata))
    }
    fn current_leader<'a>(
        &'a self,
        election: &'a ElectionName,
    ) -> BoxFuture<'a, Result<Option<LeaderInfo>, StoreError>> {
        Box::pin(LeaseStore::current_leader(self, election))
    }
    fn candidates<'a>(
        &'a self,
        election: &'a ElectionName,
    ) -> BoxFuture<'a, Result<Option<Vec<Candidacy>>, StoreError>> {
        Box::pin(LeaseStore::candidates(self, election))
    }
    fn enroll<'a>(&'a self, req: &'a AcquireRequest) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(LeaseStore::enroll(self, req))
    }
    fn withdraw<'a>(
        &'a self,
        election: &'a ElectionName,
        holder: &'a HolderId,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(LeaseStore::withdraw(self, election, holder))
    }
    fn release_to<'a>(
        &'a self,
        lease: &'a Lease,
        successor: &'a HolderId,
        window: Duration,
    ) -> BoxFuture<'a, Result<HandOff, StoreError>> {
        Box::pin(LeaseStore::release_to(self, lease, successor, window))
    }
    fn watch<'a>(
        &'a self,
        election: &'a ElectionName,
    ) -> BoxFuture<'a, Result<LeaderStream, StoreError>> {
        Box::pin(LeaseStore::watch(self, election))
    }
}

/// Any store, chosen at run time. Cheap to clone.
#[derive(Clone)]
pub struct BoxStore(Arc<dyn DynLeaseStore>);

impl BoxStore {
    /// Boxes a store.
    pub fn new(store: impl LeaseStore) -> Self {
        Self(Arc::new(store))
    }
}

impl std::fmt::Debug for BoxStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("BoxStore")
            .field(&self.0.info().name)
            .finish()
    }
}

impl LeaseStore for BoxStore {
    fn info(&self) -> StoreInfo {
        self.0.info()
    }
    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        self.0.try_acquire(req, queued).await
    }
    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        self.0.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.0.release(lease).await
    }
    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        self.0.update_metadata(lease, metadata).await
    }
    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.0.current_leader(election).await
    }
    async fn candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Option<Vec<Candidacy>>, StoreError> {
        self.0.candidates(election).await
    }
    async fn enroll(&self, req: &AcquireRequest) -> Result<(), StoreError> {
        self.0.enroll(req).await
    }
    async fn withdraw(&self, election: &ElectionName, holder: &HolderId) -> Result<(), StoreError> {
        self.0.withdraw(election, holder).await
    }
    async fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        self.0.release_to(lease, successor, window).await
    }
    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        self.0.watch(election).await
    }
}
