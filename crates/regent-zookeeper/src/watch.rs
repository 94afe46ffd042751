//! Reading who leads an election and watching it: the candidates' nodes
//! in line order, the first one whose data can be read (with the metadata
//! it proclaimed), the whole line for display, and the store's own watch
//! of an election, set again after each change.

use std::collections::HashSet;
use std::future::Future;

use regent_core::{Candidacy, ElectionName, LeaderInfo, LeaderStream, Metadata, StoreError};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::client::ZkStore;
use crate::error::is_no_node;
use crate::record::{candidacy_of, decode_metadata, is_regent_name, leader_of, sort_children};

/// How many candidates' nodes [`ZkStore::read_candidates`] reads at once.
const READ_BATCH: usize = 64;

impl ZkStore {
    /// The leader among `children` (sorted): the first whose data can be
    /// read. `None` if `stop` (our own node) comes first, or none is left.
    pub(crate) async fn first_readable(
        &self,
        client: &zk::Client,
        election: &ElectionName,
        dir: &str,
        children: &[String],
        stop: Option<&str>,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        for name in children {
            if Some(name.as_str()) == stop {
                return Ok(None);
            }
            let path = format!("{dir}/{name}");
            match self
                .call(
                    || self.what("read the leader of", election),
                    client.get_data(&path),
                )
                .await
            {
                Ok((data, stat)) => {
                    let mut leader = leader_of(name, &data, stat.czxid);
                    if let Some(m) = self.proclaimed(client, election, name).await? {
                        leader.metadata = m;
                    }
                    return Ok(Some(leader));
                }
                Err(e) if is_no_node(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The metadata the candidate of node `name` proclaimed, if it did.
    async fn proclaimed(
        &self,
        client: &zk::Client,
        election: &ElectionName,
        name: &str,
    ) -> Result<Option<Metadata>, StoreError> {
        if !is_regent_name(name) {
            return Ok(None);
        }
        let path = self.meta_path(election, name);
        match self
            .call(
                || self.what("read the leader's metadata in", election),
                client.get_data(&path),
            )
            .await
        {
            Ok((data, _)) => Ok(decode_metadata(&data)),
            Err(e) if is_no_node(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every candidate of `election` in line order, each holder shown as
    /// [`first_readable`](Self::first_readable) would show it at the head
    /// (the children `current_leader` reads, sorted as `LeaderLatch`
    /// sorts them). A node that goes between the list and its read is
    /// left out, and so is a node of this store's session whose lease
    /// lapsed (the reaper deletes it).
    pub(crate) async fn read_candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Vec<Candidacy>, StoreError> {
        let s = self.session(None).await?;
        let dir = self.election_path(election);
        let children = self.children(&s.client, election, &dir).await?;
        let now = Instant::now();
        let lapsed: HashSet<String> = s
            .records()
            .iter()
            .filter(|r| r.dir == dir && (r.lapsed || r.until <= now))
            .filter_map(|r| r.name.clone())
            .collect();
        let mut line = Vec::with_capacity(children.len());
        let live: Vec<&String> = children.iter().filter(|c| !lapsed.contains(*c)).collect();
        for batch in live.chunks(READ_BATCH) {
            // The client sends each request as it is made: a batch costs
            // one round trip, not one per node.
            let reads: Vec<_> = batch
                .iter()
                .map(|name| s.client.get_data(&format!("{dir}/{name}")))
                .collect();
            for (name, read) in batch.iter().zip(reads) {
                match self
                    .call(|| self.what("list the candidates of", election), read)
                    .await
                {
                    Ok((data, _)) => line.push(candidacy_of(name, &data)),
                    Err(e) if is_no_node(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(line)
    }

    /// The sorted children of `dir`; none if it does not exist.
    pub(crate) async fn children(
        &self,
        client: &zk::Client,
        election: &ElectionName,
        dir: &str,
    ) -> Result<Vec<String>, StoreError> {
        match self
            .call(
                || self.what("list the candidates of", election),
                client.list_children(dir),
            )
            .await
        {
            Ok(mut c) => {
                sort_children(&mut c);
                Ok(c)
            }
            Err(e) if is_no_node(&e) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}

impl ZkStore {
    /// The store's own watch of `election`: the children and the leader's
    /// node, watched again after each change.
    pub(crate) async fn watch_stream(
        &self,
        election: &ElectionName,
    ) -> Result<LeaderStream, StoreError> {
        let s = self.session(None).await?;
        struct State {
            store: ZkStore,
            client: zk::Client,
            election: ElectionName,
            dir: String,
            /// Completes at the next change after the last item.
            wake: Option<Wake>,
            ended: bool,
        }
        let state = State {
            store: self.clone(),
            client: s.client.clone(),
            dir: self.election_path(election),
            election: election.clone(),
            wake: None,
            ended: false,
        };
        let leaders = futures_util::stream::unfold(state, |mut st| async move {
            if st.ended {
                return None;
            }
            if let Some(wake) = st.wake.take() {
                let event = wake.await;
                if event.event_type == zk::EventType::Session
                    && matches!(
                        event.session_state,
                        zk::SessionState::Expired
                            | zk::SessionState::Closed
                            | zk::SessionState::AuthFailed
                    )
                {
                    // The watches went with the session: the consumer opens
                    // a new watch, on a new session.
                    st.ended = true;
                    let what = st.store.what("watch", &st.election);
                    return Some((
                        Err(StoreError::unavailable(format!(
                            "{what}: the session ended ({:?})",
                            event.session_state
                        ))),
                        st,
                    ));
                }
            }
            match st.store.watch_once(&st.client, &st.election, &st.dir).await {
                Ok((leader, wake)) => {
                    st.wake = Some(wake);
                    Some((Ok(leader), st))
                }
                Err(e) => {
                    st.ended = true;
                    Some((Err(e), st))
                }
            }
        });
        Ok(Box::pin(leaders))
    }
}

/// A wait for the next change a watch was set for.
type Wake = std::pin::Pin<Box<dyn Future<Output = zk::WatchedEvent> + Send>>;

impl ZkStore {
    /// Reads the leader and sets watches on what would change it: the
    /// election's children, and the leader's node (its data: proclaimed
    /// metadata). Returns the leader and a future that completes at the
    /// first change.
    async fn watch_once(
        &self,
        client: &zk::Client,
        election: &ElectionName,
        dir: &str,
    ) -> Result<(Option<LeaderInfo>, Wake), StoreError> {
        loop {
            let listed = self
                .call(
                    || self.what("watch", election),
                    client.get_and_watch_children(dir),
                )
                .await;
            let (mut children, children_watch) = match listed {
                Ok((children, _stat, watcher)) => (children, watcher),
                Err(e) if is_no_node(&e) => {
                    // No election node yet: wait for it to appear.
                    let (_, watcher) = self
                        .call(
                            || self.what("watch", election),
                            client.check_and_watch_stat(dir),
                        )
                        .await?;
                    return Ok((None, Box::pin(async move { watcher.changed().await })));
                }
                Err(e) => return Err(e),
            };
            sort_children(&mut children);
            let Some(first) = children.first() else {
                return Ok((
                    None,
                    Box::pin(async move { children_watch.changed().await }),
                ));
            };
            let path = format!("{dir}/{first}");
            match self
                .call(
                    || self.what("watch the leader of", election),
                    client.get_and_watch_data(&path),
                )
                .await
            {
                Ok((data, stat, data_watch)) => {
                    let mut leader = leader_of(first, &data, stat.czxid);
                    // Metadata it proclaims later: watch where it goes.
                    let meta = self.meta_path(election, first);
                    let (exists, meta_watch) = self
                        .call(
                            || self.what("watch the leader's metadata in", election),
                            client.check_and_watch_stat(&meta),
                        )
                        .await?;
                    if exists.is_some()
                        && let Some(m) = self.proclaimed(client, election, first).await?
                    {
                        leader.metadata = m;
                    }
                    let wake = async move {
                        tokio::select! {
                            e = children_watch.changed() => e,
                            e = data_watch.changed() => e,
                            e = meta_watch.changed() => e,
                        }
                    };
                    return Ok((Some(leader), Box::pin(wake)));
                }
                // The first left between the two reads: read again.
                Err(e) if is_no_node(&e) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}
