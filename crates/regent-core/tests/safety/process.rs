//! A candidate's process that can be paused: what a pause of the whole
//! process (SIGSTOP, a long GC, a swapped-out VM) does to its traffic.
//!
//! Every call of a [`Process`] store waits for the process to run before
//! it leaves and again before its answer is taken in, and every item of a
//! watch waits the same way before it is delivered. A request already on
//! its way when the pause begins is applied by the store meanwhile; one
//! made during the pause leaves at the resume. The application's own loop
//! reads the same flag ([`Frozen`]) and stops too.
//!
//! What it cannot hold: the core's timers. tokio runs every task of a
//! runtime alike, and the core spawns its renewal task itself, so a paused
//! candidate's renewal task still wakes at its renew deadline and steps
//! down on time. A real pause would leave even that undone until the
//! resume; then the guard's own clock check ([`Leadership::check`], the
//! local lease deadline) is what refuses — the simulation checks that the
//! application asks it at the resume before it acts again.
//!
//! [`Leadership::check`]: regent_core::Leadership::check

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;
use regent_core::{
    Acquire, AcquireRequest, ElectionName, LeaderInfo, LeaderStream, Lease, LeaseStore, Metadata,
    Renewal, StoreError, StoreInfo,
};
use tokio::sync::Notify;

/// Whether one process is paused, as everything in it sees it. Its
/// waiters wake in the order they began to wait (a `tokio::sync::watch`
/// channel would draw the order from tokio's unseeded generator).
#[derive(Clone, Debug, Default)]
pub(crate) struct Frozen(Arc<(AtomicBool, Notify)>);

impl Frozen {
    /// Pauses or resumes the process.
    pub(crate) fn set(&self, paused: bool) {
        self.0.0.store(paused, Ordering::SeqCst);
        self.0.1.notify_waiters();
    }

    async fn until(&self, paused: bool) {
        loop {
            let changed = self.0.1.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.0.0.load(Ordering::SeqCst) == paused {
                return;
            }
            changed.await;
        }
    }
}

/// Returns once the process runs.
pub(crate) async fn running(frozen: &Frozen) {
    frozen.until(false).await;
}

/// Returns once the process is paused.
pub(crate) async fn paused(frozen: &Frozen) {
    frozen.until(true).await;
}

/// A store as one process reaches it: every call and watch item waits for
/// the process to run, on the way out and on the way in.
#[derive(Clone, Debug)]
pub(crate) struct Process<S> {
    pub(crate) store: S,
    pub(crate) frozen: Frozen,
}

impl<S: LeaseStore> Process<S> {
    async fn call<T>(&self, call: impl Future<Output = T>) -> T {
        running(&self.frozen).await;
        let answer = call.await;
        running(&self.frozen).await;
        answer
    }
}

impl<S: LeaseStore> LeaseStore for Process<S> {
    fn info(&self) -> StoreInfo {
        self.store.info()
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        self.call(self.store.try_acquire(req, queued)).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        self.call(self.store.renew(lease)).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.call(self.store.release(lease)).await
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        self.call(self.store.update_metadata(lease, metadata)).await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.call(self.store.current_leader(election)).await
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let stream = self.call(self.store.watch(election)).await?;
        let frozen = self.frozen.clone();
        Ok(Box::pin(stream.then(move |item| {
            let frozen = frozen.clone();
            async move {
                running(&frozen).await;
                item
            }
        })))
    }
}
