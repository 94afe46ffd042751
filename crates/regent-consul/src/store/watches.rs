//! One blocking query per watched election and store, shared by every
//! watch of that election through the store and its clones (see the
//! crate docs, "Watches").
//!
//! An agent serves at most `limits.http_max_conns_per_client` (200 by
//! default) connections from one address, and a blocking query holds one
//! for up to [`WATCH_WAIT`]: a process whose 1,000 candidates each watched
//! an election on their own never settled (the agent reset the
//! connections past its limit). Shared, they cost one connection per
//! election.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use regent_core::{ElectionName, ErrorKind, LeaderInfo, LeaderStream, StoreError};
use reqwest::Method;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{ConsulStore, WATCH_MIN_INTERVAL, WATCH_WAIT, next_index};

/// The watches of one store: the election's key to its shared poll.
pub(super) type Watches = Arc<Mutex<HashMap<String, Weak<Watched>>>>;

/// What the poll of one election has seen.
#[derive(Clone)]
enum Seen {
    /// Nothing yet: the first read has not answered.
    Pending,
    Leader(Option<LeaderInfo>),
    /// The poll failed and ended: the error, as text with its causes.
    Failed(ErrorKind, String),
}

/// One election's poll, shared by its watches; the poll ends when the
/// last watch is dropped.
pub(super) struct Watched {
    seen: watch::Receiver<Seen>,
    key: String,
    watches: Weak<Mutex<HashMap<String, Weak<Watched>>>>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(watches) = self.watches.upgrade() {
            let mut map = watches
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Ours unless a new poll took the key since.
            if map.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
                map.remove(&self.key);
            }
        }
    }
}

impl ConsulStore {
    /// A watch of `election`: the leader now, then every change, from the
    /// poll of the election this store already runs, or a new one.
    pub(super) async fn watch_stream(
        &self,
        election: &ElectionName,
    ) -> Result<LeaderStream, StoreError> {
        let watched = self.watched(election);
        let mut seen = watched.seen.clone();
        let first = loop {
            match &*seen.borrow_and_update() {
                Seen::Pending => {}
                Seen::Leader(l) => break l.clone(),
                Seen::Failed(kind, text) => return Err(StoreError::new(*kind, text.clone())),
            }
            if seen.changed().await.is_err() {
                return Err(ended(election));
            }
        };
        struct State {
            /// Held, not read: the poll runs while a watch holds it.
            _watched: Arc<Watched>,
            seen: watch::Receiver<Seen>,
            election: ElectionName,
            first: bool,
            last: Option<LeaderInfo>,
            done: bool,
        }
        let state = State {
            _watched: watched,
            seen,
            election: election.clone(),
            first: true,
            last: first,
            done: false,
        };
        let stream = futures_util::stream::unfold(state, |mut s| async move {
            if s.done {
                return None;
            }
            if s.first {
                s.first = false;
                let item = Ok(s.last.clone());
                return Some((item, s));
            }
            loop {
                if s.seen.changed().await.is_err() {
                    s.done = true;
                    let e = ended(&s.election);
                    return Some((Err(e), s));
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
                }
            }
        });
        Ok(Box::pin(stream))
    }

    /// The poll of `election`: the running one, unless it failed or ended,
    /// else a new one.
    fn watched(&self, election: &ElectionName) -> Arc<Watched> {
        let key = self.election_key(election);
        let mut map = self
            .inner
            .watches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(w) = map.get(&key).and_then(Weak::upgrade)
            && !matches!(*w.seen.borrow(), Seen::Failed(..))
            && w.seen.has_changed().is_ok()
        {
            return w;
        }
        let (tx, seen) = watch::channel(Seen::Pending);
        let watched = Arc::new(Watched {
            seen,
            key: key.clone(),
            watches: Arc::downgrade(&self.inner.watches),
        });
        map.insert(key.clone(), Arc::downgrade(&watched));
        tokio::spawn(poll(self.clone(), election.clone(), key, tx));
        watched
    }
}

/// The error of a watch whose poll ended without a word.
fn ended(election: &ElectionName) -> StoreError {
    StoreError::unavailable(format!("watch election '{election}': the watch ended"))
}

/// Polls `key` with blocking queries and publishes each change of its
/// leader to `tx`, until every watch of it is dropped or a query fails.
async fn poll(store: ConsulStore, election: ElectionName, key: String, tx: watch::Sender<Seen>) {
    let what = || format!("watch election '{election}'");
    let failed = |e: &StoreError| Seen::Failed(e.kind(), regent_core::report(e).to_string());
    let read = tokio::select! {
        read = store.read_key(&key, &what) => read,
        () = tx.closed() => return,
    };
    let first = read.and_then(|(entry, index)| {
        store
            .leader_of(entry.as_ref(), &key, &what())
            .map(|l| (l, index))
    });
    let (mut last, index) = match first {
        Ok(first) => first,
        Err(e) => {
            tx.send_replace(failed(&e));
            return;
        }
    };
    tx.send_replace(Seen::Leader(last.clone()));
    let mut index = next_index(0, index.unwrap_or(0));
    let mut last_start: Option<Instant> = None;
    let wait = format!("{}s", WATCH_WAIT.as_secs());
    loop {
        if let Some(t) = last_start {
            tokio::select! {
                () = tokio::time::sleep_until(t + WATCH_MIN_INTERVAL) => {}
                () = tx.closed() => return,
            }
        }
        last_start = Some(Instant::now());
        let at = index.to_string();
        let url = store.url(&["kv", &key], &[("index", &at), ("wait", &wait)]);
        let call = store.call(
            Method::GET,
            url,
            None,
            &[404],
            WATCH_WAIT + WATCH_WAIT / 16,
            &what,
        );
        let answer = tokio::select! {
            answer = call => answer,
            () = tx.closed() => return,
        };
        let leader = answer.and_then(|answer| {
            index = next_index(index, answer.index.unwrap_or(0));
            store
                .entry_of(&key, &answer, &what)
                .and_then(|e| store.leader_of(e.as_ref(), &key, &what()))
        });
        match leader {
            Ok(l) if l != last => {
                last = l.clone();
                tx.send_replace(Seen::Leader(l));
            }
            Ok(_) => {}
            Err(e) => {
                tx.send_replace(failed(&e));
                return;
            }
        }
    }
}
