//! [`Observer`]: for instances that never campaign but need to know who
//! leads (to forward requests to it, to show it).

use std::sync::Arc;
use std::time::Duration;

use futures_core::Stream;
use futures_util::StreamExt;

use crate::backoff::Backoff;
use crate::error::StoreError;
use crate::store::{LeaderStream, LeaseStore};
use crate::types::{ElectionName, LeaderInfo};

/// Reads and follows the leader of one election without campaigning.
#[derive(Debug)]
pub struct Observer<S> {
    store: Arc<S>,
    election: ElectionName,
    max_backoff: Duration,
}

impl<S> Clone for Observer<S> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            election: self.election.clone(),
            max_backoff: self.max_backoff,
        }
    }
}

struct Follow<S> {
    store: Arc<S>,
    election: ElectionName,
    stream: Option<LeaderStream>,
    last: Option<Option<LeaderInfo>>,
    backoff: Backoff,
    delay: Option<Duration>,
    done: bool,
}

impl<S: LeaseStore> Observer<S> {
    /// An observer of `election` on `store`.
    pub fn new(store: S, election: ElectionName) -> Self {
        Self {
            store: Arc::new(store),
            election,
            max_backoff: Duration::from_secs(5),
        }
    }

    /// The longest wait between attempts to re-open a failed watch (default
    /// 5 s).
    #[must_use]
    pub fn max_backoff(mut self, max: Duration) -> Self {
        self.max_backoff = max.max(Duration::from_millis(1));
        self
    }

    /// The election observed.
    pub fn election(&self) -> &ElectionName {
        &self.election
    }

    /// Who leads now (`None`: nobody).
    ///
    /// # Errors
    ///
    /// The store's error, classified.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn current(&self) -> Result<Option<LeaderInfo>, StoreError> {
        self.store.current_leader(&self.election).await
    }

    /// The leader now, then every change, `None` meaning "no leader".
    /// Repeats are filtered out. A watch that fails with a transient error
    /// yields that error and is re-opened after a backoff; a permanent error
    /// is yielded and ends the stream.
    pub fn changes(
        &self,
    ) -> impl Stream<Item = Result<Option<LeaderInfo>, StoreError>> + Send + 'static {
        let state = Follow {
            store: self.store.clone(),
            election: self.election.clone(),
            stream: None,
            last: None,
            backoff: Backoff::new(Duration::from_millis(50), self.max_backoff),
            delay: None,
            done: false,
        };
        futures_util::stream::unfold(state, |mut st| async move {
            loop {
                if st.done {
                    return None;
                }
                if let Some(d) = st.delay.take() {
                    tokio::time::sleep(d).await;
                }
                let stream = match st.stream.as_mut() {
                    Some(s) => s,
                    None => match st.store.watch(&st.election).await {
                        Ok(s) => st.stream.insert(s),
                        Err(e) => {
                            st.fail(&e);
                            return Some((Err(e), st));
                        }
                    },
                };
                match stream.next().await {
                    Some(Ok(leader)) => {
                        st.backoff.reset();
                        if st.last.as_ref() != Some(&leader) {
                            st.last = Some(leader.clone());
                            return Some((Ok(leader), st));
                        }
                    }
                    Some(Err(e)) => {
                        st.stream = None;
                        st.fail(&e);
                        return Some((Err(e), st));
                    }
                    None => {
                        // The store closed the watch; re-open, but not in a
                        // hot loop if it keeps doing so.
                        st.stream = None;
                        st.delay = Some(st.backoff.next_delay());
                    }
                }
            }
        })
    }
}

impl<S> Follow<S> {
    fn fail(&mut self, e: &StoreError) {
        if e.is_transient() {
            self.delay = Some(self.backoff.next_delay());
        } else {
            self.done = true;
        }
    }
}
