//! [`Layered`]: one decorator for wrapping a [`LeaseStore`]. A
//! [`StoreLayer`] sees every call on its way to the store and back: it can
//! count it, delay it, fail it, lose its answer, or change what one
//! operation does, and leaves the rest to the store. Test layers (count,
//! delay, fail) are in `testing` (feature `testing`); `regent-monitor`
//! counts and times a store's requests for its metrics with one.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use crate::error::StoreError;
use crate::store::{
    Acquire, AcquireRequest, HandOff, LeaderStream, LeaseStore, Renewal, StoreInfo,
};
use crate::types::{Candidacy, ElectionName, HolderId, LeaderInfo, Lease, Metadata};

/// Which call of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CallKind {
    /// [`LeaseStore::try_acquire`].
    TryAcquire,
    /// [`LeaseStore::renew`].
    Renew,
    /// [`LeaseStore::release`].
    Release,
    /// [`LeaseStore::update_metadata`].
    UpdateMetadata,
    /// [`LeaseStore::current_leader`].
    CurrentLeader,
    /// [`LeaseStore::candidates`].
    Candidates,
    /// [`LeaseStore::watch`]: opening the watch (each item it delivers
    /// passes [`StoreLayer::watch_item`]).
    Watch,
    /// [`LeaseStore::enroll`].
    Enroll,
    /// [`LeaseStore::withdraw`].
    Withdraw,
    /// [`LeaseStore::release_to`].
    ReleaseTo,
}

impl CallKind {
    /// Every kind, in the order of the trait's methods.
    pub const ALL: [CallKind; 10] = [
        CallKind::TryAcquire,
        CallKind::Renew,
        CallKind::Release,
        CallKind::UpdateMetadata,
        CallKind::CurrentLeader,
        CallKind::Candidates,
        CallKind::Watch,
        CallKind::Enroll,
        CallKind::Withdraw,
        CallKind::ReleaseTo,
    ];

    /// The method's name: `try_acquire`, `renew`, …
    pub fn name(self) -> &'static str {
        match self {
            CallKind::TryAcquire => "try_acquire",
            CallKind::Renew => "renew",
            CallKind::Release => "release",
            CallKind::UpdateMetadata => "update_metadata",
            CallKind::CurrentLeader => "current_leader",
            CallKind::Candidates => "candidates",
            CallKind::Watch => "watch",
            CallKind::Enroll => "enroll",
            CallKind::Withdraw => "withdraw",
            CallKind::ReleaseTo => "release_to",
        }
    }

    /// Its place in [`ALL`](Self::ALL), for per-kind tables.
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for CallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One call as [`StoreLayer::around`] sees it: its kind, its election and,
/// for the calls a holder makes on its own record (acquire, renew,
/// release, metadata update), the holder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Call<'a> {
    /// Which call.
    pub kind: CallKind,
    /// The election it is about.
    pub election: &'a ElectionName,
    /// Whose call it is; `None` for reads and watches.
    pub holder: Option<&'a HolderId>,
}

impl<'a> Call<'a> {
    /// A call of `kind` about `election`, by `holder` if it is a holder's.
    pub fn new(kind: CallKind, election: &'a ElectionName, holder: Option<&'a HolderId>) -> Self {
        Self {
            kind,
            election,
            holder,
        }
    }
}

/// What a [`Layered`] store does around or instead of its store's calls.
///
/// Every method has a default that passes the call on: override
/// [`around`](Self::around) to do the same thing around every call
/// (count, delay, fail, lose the answer), [`watch_item`](Self::watch_item)
/// for each item a watch delivers, and an operation's own method to change
/// what that one does (a flawed store for the suite to catch). An
/// operation's method that is overridden calls `around` only if it does so
/// itself.
///
/// A layer is shared by every clone of its [`Layered`] store and the
/// watches they opened: state it keeps (counts, faults to inject) is one
/// for all of them.
pub trait StoreLayer: Send + Sync + 'static {
    /// Runs one call: `inner` is the store's (or the operation's override's)
    /// future, not yet polled. The default runs it as it is. A layer may
    /// wait before polling it (latency on the way out), answer without
    /// polling it (the call never reached the store), or change or withhold
    /// its answer after it completed (the store applied the call, its
    /// caller hears otherwise).
    fn around<T: Send>(
        &self,
        call: Call<'_>,
        inner: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        let _ = call;
        inner
    }

    /// Each item a watch of `election` opened through the layer delivers,
    /// on its way to the watcher. The default passes it on.
    fn watch_item(
        &self,
        election: &ElectionName,
        item: Result<Option<LeaderInfo>, StoreError>,
    ) -> impl Future<Output = Result<Option<LeaderInfo>, StoreError>> + Send {
        let _ = election;
        std::future::ready(item)
    }

    /// The store's [`StoreInfo`], as the layered store reports it.
    fn info<S: LeaseStore>(&self, store: &S) -> StoreInfo {
        store.info()
    }

    /// [`LeaseStore::try_acquire`]; by default the store's, through
    /// [`around`](Self::around).
    fn try_acquire<S: LeaseStore>(
        &self,
        store: &S,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> impl Future<Output = Result<Acquire, StoreError>> + Send {
        let call = Call::new(CallKind::TryAcquire, &req.election, Some(&req.holder));
        self.around(call, store.try_acquire(req, queued))
    }

    /// [`LeaseStore::renew`]; by default the store's, through
    /// [`around`](Self::around).
    fn renew<S: LeaseStore>(
        &self,
        store: &S,
        lease: &Lease,
    ) -> impl Future<Output = Result<Renewal, StoreError>> + Send {
        let call = Call::new(CallKind::Renew, &lease.election, Some(&lease.holder));
        self.around(call, store.renew(lease))
    }

    /// [`LeaseStore::release`]; by default the store's, through
    /// [`around`](Self::around).
    fn release<S: LeaseStore>(
        &self,
        store: &S,
        lease: &Lease,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let call = Call::new(CallKind::Release, &lease.election, Some(&lease.holder));
        self.around(call, store.release(lease))
    }

    /// [`LeaseStore::update_metadata`]; by default the store's, through
    /// [`around`](Self::around).
    fn update_metadata<S: LeaseStore>(
        &self,
        store: &S,
        lease: &Lease,
        metadata: &Metadata,
    ) -> impl Future<Output = Result<Renewal, StoreError>> + Send {
        let call = Call::new(
            CallKind::UpdateMetadata,
            &lease.election,
            Some(&lease.holder),
        );
        self.around(call, store.update_metadata(lease, metadata))
    }

    /// [`LeaseStore::current_leader`]; by default the store's, through
    /// [`around`](Self::around).
    fn current_leader<S: LeaseStore>(
        &self,
        store: &S,
        election: &ElectionName,
    ) -> impl Future<Output = Result<Option<LeaderInfo>, StoreError>> + Send {
        let call = Call::new(CallKind::CurrentLeader, election, None);
        self.around(call, store.current_leader(election))
    }

    /// [`LeaseStore::candidates`]; by default the store's, through
    /// [`around`](Self::around).
    fn candidates<S: LeaseStore>(
        &self,
        store: &S,
        election: &ElectionName,
    ) -> impl Future<Output = Result<Option<Vec<Candidacy>>, StoreError>> + Send {
        let call = Call::new(CallKind::Candidates, election, None);
        self.around(call, store.candidates(election))
    }

    /// [`LeaseStore::enroll`]; by default the store's, through
    /// [`around`](Self::around).
    fn enroll<S: LeaseStore>(
        &self,
        store: &S,
        req: &AcquireRequest,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let call = Call::new(CallKind::Enroll, &req.election, Some(&req.holder));
        self.around(call, store.enroll(req))
    }

    /// [`LeaseStore::withdraw`]; by default the store's, through
    /// [`around`](Self::around).
    fn withdraw<'a, S: LeaseStore>(
        &'a self,
        store: &'a S,
        election: &'a ElectionName,
        holder: &'a HolderId,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let call = Call::new(CallKind::Withdraw, election, Some(holder));
        self.around(call, store.withdraw(election, holder))
    }

    /// [`LeaseStore::release_to`]; by default the store's, through
    /// [`around`](Self::around). A layer that overrides
    /// [`release`](Self::release) to learn of a lease's end overrides this
    /// too: either gives the lease up.
    fn release_to<S: LeaseStore>(
        &self,
        store: &S,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> impl Future<Output = Result<HandOff, StoreError>> + Send {
        let call = Call::new(CallKind::ReleaseTo, &lease.election, Some(&lease.holder));
        self.around(call, store.release_to(lease, successor, window))
    }

    /// [`LeaseStore::watch`]: opens the watch; by default the store's,
    /// through [`around`](Self::around). Whatever stream it returns, each
    /// item then passes [`watch_item`](Self::watch_item).
    fn watch<S: LeaseStore>(
        &self,
        store: &S,
        election: &ElectionName,
    ) -> impl Future<Output = Result<LeaderStream, StoreError>> + Send {
        let call = Call::new(CallKind::Watch, election, None);
        self.around(call, store.watch(election))
    }
}

/// A [`LeaseStore`] that is `store` seen through `layer`: the one
/// decorator for counting a store's calls, slowing them, failing them or
/// flawing one operation, in the core's tests and a store crate's.
///
/// Clones share the layer (and the store, if its clones share their
/// state, as the memory store's do); so do the watches they open.
/// Layers stack: `Layered<Layered<S, A>, B>` runs `B` around `A`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use regent_core::memory::MemoryStore;
/// use regent_core::{Call, ElectionName, Layered, LeaseStore, StoreError, StoreLayer};
///
/// /// Counts the calls that reach the store.
/// #[derive(Default)]
/// struct Calls(AtomicU64);
///
/// impl StoreLayer for Calls {
///     async fn around<T: Send>(
///         &self,
///         _call: Call<'_>,
///         inner: impl Future<Output = Result<T, StoreError>> + Send,
///     ) -> Result<T, StoreError> {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         inner.await
///     }
/// }
///
/// let store = Layered::new(MemoryStore::race(), Calls::default());
/// store.current_leader(&ElectionName::new("jobs")?).await?;
/// assert_eq!(store.layer().0.load(Ordering::Relaxed), 1);
/// # Ok(()) }
/// ```
///
/// The test layers (feature `testing`: `testing::Latency`, `Faults`,
/// `Counting`) stack the same way.
///
/// A layer that flaws one operation overrides its method (this one ignores
/// the holder, which the conformance suite must catch):
///
/// ```
/// use regent_core::StoreLayer;
/// use regent_core::{Lease, LeaseStore, Metadata, Renewal, StoreError};
///
/// struct AnyHolder;
///
/// impl StoreLayer for AnyHolder {
///     async fn update_metadata<S: LeaseStore>(
///         &self,
///         store: &S,
///         lease: &Lease,
///         metadata: &Metadata,
///     ) -> Result<Renewal, StoreError> {
///         match store.current_leader(&lease.election).await? {
///             Some(l) if l.token == lease.token => {
///                 let theirs = Lease { holder: l.holder, ..lease.clone() };
///                 store.update_metadata(&theirs, metadata).await
///             }
///             _ => Ok(Renewal::Lost),
///         }
///     }
/// }
/// ```
pub struct Layered<S, L> {
    store: S,
    layer: Arc<L>,
}

impl<S, L> Layered<S, L> {
    /// `store` seen through `layer`.
    pub fn new(store: S, layer: L) -> Self {
        Self::sharing(store, Arc::new(layer))
    }

    /// `store` seen through a layer that other stores share too (one count
    /// or one fault plan for several connections).
    pub fn sharing(store: S, layer: Arc<L>) -> Self {
        Self { store, layer }
    }

    /// The store underneath.
    pub fn inner(&self) -> &S {
        &self.store
    }

    /// The layer, shared by every clone of this store and the watches
    /// they opened (so `Arc::strong_count` tells whether any is left).
    pub fn layer(&self) -> &Arc<L> {
        &self.layer
    }

    /// The store underneath, without the layer.
    pub fn into_inner(self) -> S {
        self.store
    }
}

impl<S: Clone, L> Clone for Layered<S, L> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            layer: Arc::clone(&self.layer),
        }
    }
}

impl<S: fmt::Debug, L: fmt::Debug> fmt::Debug for Layered<S, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layered")
            .field("store", &self.store)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S: LeaseStore, L: StoreLayer> LeaseStore for Layered<S, L> {
    fn info(&self) -> StoreInfo {
        self.layer.info(&self.store)
    }

    fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> impl Future<Output = Result<Acquire, StoreError>> + Send {
        self.layer.try_acquire(&self.store, req, queued)
    }

    fn renew(&self, lease: &Lease) -> impl Future<Output = Result<Renewal, StoreError>> + Send {
        self.layer.renew(&self.store, lease)
    }

    fn release(&self, lease: &Lease) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.layer.release(&self.store, lease)
    }

    fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> impl Future<Output = Result<Renewal, StoreError>> + Send {
        self.layer.update_metadata(&self.store, lease, metadata)
    }

    fn current_leader(
        &self,
        election: &ElectionName,
    ) -> impl Future<Output = Result<Option<LeaderInfo>, StoreError>> + Send {
        self.layer.current_leader(&self.store, election)
    }

    fn candidates(
        &self,
        election: &ElectionName,
    ) -> impl Future<Output = Result<Option<Vec<Candidacy>>, StoreError>> + Send {
        self.layer.candidates(&self.store, election)
    }

    fn enroll(&self, req: &AcquireRequest) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.layer.enroll(&self.store, req)
    }

    async fn withdraw(&self, election: &ElectionName, holder: &HolderId) -> Result<(), StoreError> {
        self.layer.withdraw(&self.store, election, holder).await
    }

    fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> impl Future<Output = Result<HandOff, StoreError>> + Send {
        self.layer.release_to(&self.store, lease, successor, window)
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let stream = self.layer.watch(&self.store, election).await?;
        // The stream outlives this call: it holds the layer, not `self`.
        let layer = Arc::clone(&self.layer);
        let election = election.clone();
        Ok(Box::pin(stream.then(move |item| {
            let (layer, election) = (Arc::clone(&layer), election.clone());
            async move { layer.watch_item(&election, item).await }
        })))
    }
}
