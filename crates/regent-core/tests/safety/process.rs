//! A candidate's process that can be paused: what a pause of the whole
//! process (SIGSTOP, a long GC, a swapped-out VM) does to its traffic.
//!
//! Every call of a [`Process`] store (a store seen through the process's
//! [`Frozen`] layer) waits for the process to run before it leaves and
//! again before its answer is taken in, and every item of a watch waits
//! the same way before it is delivered. A request already on
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

use regent_core::testing::{Call, Layered, StoreLayer};
use regent_core::{ElectionName, LeaderInfo, StoreError};
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
pub(crate) type Process<S> = Layered<S, Frozen>;

impl StoreLayer for Frozen {
    async fn around<T: Send>(
        &self,
        _: Call<'_>,
        call: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> Result<T, StoreError> {
        running(self).await;
        let answer = call.await;
        running(self).await;
        answer
    }

    async fn watch_item(
        &self,
        _: &ElectionName,
        item: Result<Option<LeaderInfo>, StoreError>,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        running(self).await;
        item
    }
}
