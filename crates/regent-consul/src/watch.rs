//! Watching an election: a `?consistent` read of its key, then blocking
//! queries on it by Consul's rules (the index, the wait, the rate limit).
//! The store runs one such watch per election and shares it among every
//! watch of that election (`SharedWatches`, in [`crate::store`]).

use std::time::Duration;

use regent_core::{ElectionName, LeaderInfo, LeaderStream, StoreError};
use reqwest::Method;
use tokio::time::Instant;

use crate::client::ConsulStore;

/// How long one blocking query of
/// [`ConsulStore::watch`](ConsulStore#method.watch) waits for a change
/// (`?wait=`). Consul adds up to 1/16 of it as jitter.
pub const WATCH_WAIT: Duration = Duration::from_secs(30);

/// The shortest time between the starts of two blocking queries of one
/// watch: Consul's documentation asks clients to rate-limit the loop.
pub const WATCH_MIN_INTERVAL: Duration = Duration::from_millis(100);

impl ConsulStore {
    /// The store's own watch of `election`: a `?consistent` read of its
    /// key, then blocking queries on it, at most one per
    /// [`WATCH_MIN_INTERVAL`].
    pub(crate) async fn watch_stream(
        &self,
        election: &ElectionName,
    ) -> Result<LeaderStream, StoreError> {
        let key = self.election_key(election);
        let what = || format!("watch election '{election}'");
        let (entry, index) = self.read_key(&key, &what).await?;
        let first = self.leader_of(entry.as_ref(), &key, &what())?;
        struct State {
            store: ConsulStore,
            election: ElectionName,
            key: String,
            index: u64,
            last: Option<LeaderInfo>,
            first: bool,
            last_start: Option<Instant>,
            done: bool,
        }
        let state = State {
            store: self.clone(),
            election: election.clone(),
            key,
            index: next_index(0, index.unwrap_or(0)),
            last: first,
            first: true,
            last_start: None,
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
                if let Some(t) = s.last_start {
                    tokio::time::sleep_until(t + WATCH_MIN_INTERVAL).await;
                }
                s.last_start = Some(Instant::now());
                let what = || format!("watch election '{}'", s.election);
                let wait = format!("{}s", WATCH_WAIT.as_secs());
                let index = s.index.to_string();
                let url = s
                    .store
                    .url(&["kv", &s.key], &[("index", &index), ("wait", &wait)]);
                let answer = s
                    .store
                    .call(
                        Method::GET,
                        url,
                        None,
                        &[404],
                        WATCH_WAIT + WATCH_WAIT / 16,
                        &what,
                    )
                    .await;
                let answer = match answer {
                    Ok(a) => a,
                    Err(e) => {
                        s.done = true;
                        return Some((Err(e), s));
                    }
                };
                s.index = next_index(s.index, answer.index.unwrap_or(0));
                let leader = s
                    .store
                    .entry_of(&s.key, &answer, &what)
                    .and_then(|e| s.store.leader_of(e.as_ref(), &s.key, &what()));
                match leader {
                    Err(e) => {
                        s.done = true;
                        return Some((Err(e), s));
                    }
                    Ok(l) if l != s.last => {
                        s.last = l.clone();
                        return Some((Ok(l), s));
                    }
                    Ok(_) => continue,
                }
            }
        });
        Ok(Box::pin(stream))
    }
}

/// The index of the next blocking query after one that answered `new`
/// when asked with `prev`, by Consul's rules: reset when it goes
/// backwards (a snapshot restore, another server's view), and never 0
/// (which would not block).
pub(crate) fn next_index(prev: u64, new: u64) -> u64 {
    let next = if new < prev { 0 } else { new };
    next.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_query_index_rules() {
        assert_eq!(next_index(0, 0), 1, "never 0");
        assert_eq!(next_index(5, 9), 9);
        assert_eq!(next_index(9, 9), 9);
        assert_eq!(next_index(9, 5), 1, "backwards: reset");
    }
}
