//! One watch of an election per store, shared by every watcher of it in
//! the process: [`SharedWatches`].
//!
//! Every candidate and observer of an election watches its leader. When a
//! process runs many of them on one store (a crowd of candidates, a
//! dashboard and its workers), each watch would cost the engine a watch of
//! its own: a Consul blocking query holds one of the 200 connections an
//! agent serves a client, and every ZooKeeper watcher of an election
//! lists all its candidates again at every change, so 1,000 watchers cost
//! the server a million names per change. [`SharedWatches`] runs one
//! store watch per election (opened by the first watcher, ended with the
//! last) and hands each watcher its own [`LeaderStream`] of it.
//!
//! Each watcher's stream keeps the contract: its first item is the leader
//! the shared watch last saw (its own first read, if it is new), then one
//! item per change after that; an error ends it, and so the shared watch,
//! so that the next watcher opens a new one. A watcher that falls behind
//! sees the latest leader, not every one in between.
//!
//! ```
//! use futures_util::StreamExt;
//! use regent_core::store::shared_watch::SharedWatches;
//! use regent_core::store::{LeaseStore, memory::MemoryStore};
//! use regent_core::{ElectionName, StoreStyle};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MemoryStore::new(StoreStyle::Race);
//! let watches = SharedWatches::default();
//! let jobs = ElectionName::new("jobs")?;
//! // The first watcher opens the store's watch; the second shares it.
//! let open = |store: MemoryStore, e: ElectionName| async move { store.watch(&e).await };
//! let mut a = watches.watch(&jobs, open(store.clone(), jobs.clone())).await?;
//! let mut b = watches.watch(&jobs, open(store.clone(), jobs.clone())).await?;
//! assert_eq!(a.next().await.transpose()?, Some(None), "no leader yet");
//! assert_eq!(b.next().await.transpose()?, Some(None));
//! assert_eq!(watches.watched(), 1, "one watch of the store for both");
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use futures_util::StreamExt;
use tokio::sync::watch;

use super::LeaderStream;
use crate::error::{ErrorKind, StoreError};
use crate::types::{ElectionName, LeaderInfo};

/// The shared watches of one store: one per election watched.
#[derive(Clone, Default)]
pub struct SharedWatches {
    map: Arc<Mutex<Map>>,
}

type Map = HashMap<ElectionName, Weak<Shared>>;

impl std::fmt::Debug for SharedWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let watched = self
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("SharedWatches")
            .field("watched", &watched)
            .finish()
    }
}

/// What the shared watch of one election has seen.
#[derive(Clone)]
enum Seen {
    /// Nothing yet: its first item has not come.
    Pending,
    Leader(Option<LeaderInfo>),
    /// It failed, and ended: the error, as text with its causes.
    Failed(ErrorKind, String),
    /// It ended without an error.
    Ended,
}

/// One election's shared watch; its task ends when the last watcher's
/// stream is dropped.
struct Shared {
    seen: watch::Receiver<Seen>,
    election: ElectionName,
    map: Weak<Mutex<Map>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(map) = self.map.upgrade() {
            let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
            // Ours, unless a new watch took the election since.
            if map
                .get(&self.election)
                .is_some_and(|w| w.strong_count() == 0)
            {
                map.remove(&self.election);
            }
        }
    }
}

impl SharedWatches {
    /// A stream of `election`'s leader, from the shared watch of it, or
    /// from a new one that `open` (the store's own watch) starts. `open`
    /// is dropped unused when a shared watch runs already.
    ///
    /// # Errors
    ///
    /// The error that ended the shared watch before it saw a first item
    /// (`open`'s, say).
    pub async fn watch<F>(
        &self,
        election: &ElectionName,
        open: F,
    ) -> Result<LeaderStream, StoreError>
    where
        F: Future<Output = Result<LeaderStream, StoreError>> + Send + 'static,
    {
        let shared = self.shared(election, open);
        let mut seen = shared.seen.clone();
        let first = loop {
            match &*seen.borrow_and_update() {
                Seen::Pending => {}
                Seen::Leader(l) => break l.clone(),
                Seen::Failed(kind, text) => return Err(StoreError::new(*kind, text.clone())),
                Seen::Ended => return Err(ended(election)),
            }
            if seen.changed().await.is_err() {
                return Err(ended(election));
            }
        };
        struct State {
            /// Held, not read: the shared watch runs while a watcher holds it.
            _shared: Arc<Shared>,
            seen: watch::Receiver<Seen>,
            last: Option<LeaderInfo>,
            done: bool,
        }
        let state = State {
            _shared: shared,
            seen,
            last: first.clone(),
            done: false,
        };
        let changes = futures_util::stream::unfold(state, |mut s| async move {
            while !s.done {
                if s.seen.changed().await.is_err() {
                    return None;
                }
                let seen = s.seen.borrow_and_update().clone();
                match seen {
                    Seen::Pending => {}
                    Seen::Leader(l) if l != s.last => {
                        s.last = l.clone();
                        return Some((Ok(l), s));
                    }
                    Seen::Leader(_) => {}
                    Seen::Failed(kind, text) => {
                        s.done = true;
                        return Some((Err(StoreError::new(kind, text)), s));
                    }
                    Seen::Ended => return None,
                }
            }
            None
        });
        let stream = futures_util::stream::iter([Ok(first)]).chain(changes);
        Ok(Box::pin(stream))
    }

    /// The number of elections with a shared watch running.
    pub fn watched(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
    }

    /// The shared watch of `election`: the running one, unless it failed
    /// or ended, else a new one of `open`.
    fn shared<F>(&self, election: &ElectionName, open: F) -> Arc<Shared>
    where
        F: Future<Output = Result<LeaderStream, StoreError>> + Send + 'static,
    {
        // Declared before the guard, so dropped after it: dropping the
        // last handle of a failed watch locks the map (`Shared`'s drop).
        let running: Option<Arc<Shared>>;
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        running = map.get(election).and_then(Weak::upgrade);
        if let Some(s) = &running
            && !matches!(*s.seen.borrow(), Seen::Failed(..) | Seen::Ended)
            && s.seen.has_changed().is_ok()
        {
            return s.clone();
        }
        let (tx, seen) = watch::channel(Seen::Pending);
        let shared = Arc::new(Shared {
            seen,
            election: election.clone(),
            map: Arc::downgrade(&self.map),
        });
        map.insert(election.clone(), Arc::downgrade(&shared));
        tokio::spawn(run(open, tx));
        shared
    }
}

/// The error of a watch that ended before its first item.
fn ended(election: &ElectionName) -> StoreError {
    StoreError::unavailable(format!("watch election '{election}': the watch ended"))
}

/// Drives the store's watch `open` and publishes what it sees, until it
/// ends or fails, or every watcher is gone.
async fn run<F>(open: F, tx: watch::Sender<Seen>)
where
    F: Future<Output = Result<LeaderStream, StoreError>> + Send + 'static,
{
    let failed = |e: &StoreError| Seen::Failed(e.kind(), crate::report(e).to_string());
    let opened = tokio::select! {
        opened = open => opened,
        () = tx.closed() => return,
    };
    let mut stream = match opened {
        Ok(stream) => stream,
        Err(e) => {
            tx.send_replace(failed(&e));
            return;
        }
    };
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            () = tx.closed() => return,
        };
        match next {
            Some(Ok(leader)) => {
                tx.send_replace(Seen::Leader(leader));
            }
            Some(Err(e)) => {
                tx.send_replace(failed(&e));
                return;
            }
            None => {
                tx.send_replace(Seen::Ended);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
