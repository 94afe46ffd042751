//! One ZooKeeper session and what this store did with it: the nodes made
//! on it, each with the instant its lease lapses unless renewed; the
//! reaper, which deletes the nodes whose lease lapsed; and the rounds,
//! which renew the nodes of many elections with one read.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use regent_core::store::shared::ROUNDS_PER_TTL;
use regent_core::{FencingToken, HolderId, Lease};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;
use zookeeper_client as zk;

use crate::record::{is_protected_by, meta_path, token_of};

/// One ZooKeeper session and what this store did with it.
pub(crate) struct Session {
    pub(crate) client: zk::Client,
    pub(crate) id: i64,
    pub(crate) asked: Duration,
    pub(crate) granted: Duration,
    /// A node was created on it: it stays until it expires.
    pub(crate) used: AtomicBool,
    /// The nodes this session made (or may have made: a create whose
    /// answer never came), each with the instant its lease lapses unless
    /// renewed. Never held across an await; a request sent while it is
    /// held is ordered against the reaper's deletes.
    pub(crate) records: Mutex<Vec<Record>>,
    /// Wakes the reaper when a record is added.
    pub(crate) wake: Arc<Notify>,
    /// Renewals waiting for the next round (see [`run_rounds`]).
    pub(crate) waiting: Mutex<Vec<Waiting>>,
    /// Wakes the rounds' task when a renewal joins.
    pub(crate) round_wake: Arc<Notify>,
    /// The reaper and the rounds' task: they end with the session.
    pub(crate) tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// A renewal waiting for its session's next round.
pub(crate) struct Waiting {
    pub(crate) dir: String,
    pub(crate) name: String,
    pub(crate) lease: Lease,
    /// Whether the node is still the lease's (`false`: lost).
    pub(crate) answer: oneshot::Sender<Result<bool, RoundError>>,
}

/// A node of ours and its lease.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) dir: String,
    /// Its protection GUID.
    pub(crate) guid: String,
    /// Its name; `None` while the create's answer has not come.
    pub(crate) name: Option<String>,
    pub(crate) holder: HolderId,
    pub(crate) token: Option<FencingToken>,
    /// The lease lapses here unless renewed: the send instant of the last
    /// create, acquire or renewal, plus the granted ttl.
    pub(crate) until: Instant,
    /// An acquire returned it to its caller. Until then (an acquire given
    /// up on after its create was sent) the holder's next acquire takes it
    /// rather than queueing a second place.
    pub(crate) delivered: bool,
    /// The length of its data: a round's read answers it.
    pub(crate) size: usize,
    /// Its lease lapsed and the reaper's delete failed: only the reaper
    /// touches it (it is tried again), never a renewal.
    pub(crate) lapsed: bool,
}

impl Record {
    pub(crate) fn is(&self, dir: &str, name: &str, lease: &Lease) -> bool {
        !self.lapsed
            && self.dir == dir
            && self.name.as_deref() == Some(name)
            && self.holder == lease.holder
            && self.token == Some(lease.token)
    }
}

impl Session {
    pub(crate) fn is_alive(&self) -> bool {
        !matches!(
            self.client.state(),
            zk::SessionState::Expired | zk::SessionState::Closed | zk::SessionState::AuthFailed
        )
    }

    pub(crate) fn records(&self) -> std::sync::MutexGuard<'_, Vec<Record>> {
        lock(&self.records)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let tasks = self
            .tasks
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for task in tasks.drain(..) {
            task.abort();
        }
    }
}

/// Deletes the nodes of `session` whose lease lapsed: their candidate
/// stopped renewing (its task hung or was dropped) in a process that lives
/// on, so the session alone would keep them in line for ever. A delete that
/// fails is tried again a second later, until the session ends. Ends with
/// the session.
pub(crate) async fn reap(session: Weak<Session>, wake: Arc<Notify>) {
    /// How long the reaper waits for one answer, and then before it tries
    /// a failed delete again.
    const PATIENCE: Duration = Duration::from_secs(1);
    loop {
        let next = {
            let Some(s) = session.upgrade() else { return };
            let now = Instant::now();
            let (expired, deletes) = {
                let mut records = s.records();
                let (expired, live): (Vec<Record>, Vec<Record>) =
                    records.drain(..).partition(|r| r.until <= now);
                *records = live;
                // Sent while the records are locked: a renewal sent after
                // finds its record gone, one sent before is applied first.
                let deletes: Vec<_> = expired
                    .iter()
                    .filter_map(|r| {
                        let name = r.name.as_ref()?;
                        let path = format!("{}/{name}", r.dir);
                        tracing::info!(node = %path, holder = %r.holder, "zookeeper: a lease lapsed unrenewed; deleting its node");
                        // Its proclaimed metadata, if any: best effort (it
                        // is ephemeral, and read only for a live node).
                        drop(s.client.delete(&meta_path(&r.dir, name), None));
                        Some((r.clone(), s.client.delete(&path, None)))
                    })
                    .collect();
                (expired, deletes)
            };
            let mut failed = Vec::new();
            for (r, delete) in deletes {
                match tokio::time::timeout(PATIENCE * 5, delete).await {
                    Ok(Ok(()) | Err(zk::Error::NoNode)) => {}
                    _ => failed.push(r),
                }
            }
            for r in expired.into_iter().filter(|r| r.name.is_none()) {
                if !delete_protected(&s, &r.dir, &r.guid, PATIENCE * 5).await {
                    failed.push(r);
                }
            }
            let mut records = s.records();
            if s.is_alive() {
                for mut r in failed {
                    r.lapsed = true;
                    r.until = now + PATIENCE;
                    records.push(r);
                }
            }
            records
                .iter()
                .map(|r| r.until)
                .min()
                .unwrap_or(now + Duration::from_secs(3600))
        };
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = wake.notified() => {}
        }
    }
}

/// Deletes the node of session `s` protected by `guid` under `dir`, if a
/// create whose answer never came made one; whether that is done.
async fn delete_protected(s: &Session, dir: &str, guid: &str, patience: Duration) -> bool {
    let children = match tokio::time::timeout(patience, s.client.list_children(dir)).await {
        Ok(Ok(children)) => children,
        Ok(Err(zk::Error::NoNode)) => return true,
        _ => return false,
    };
    let mut done = true;
    for c in children.iter().filter(|c| is_protected_by(c, guid)) {
        let path = format!("{dir}/{c}");
        match tokio::time::timeout(patience, s.client.check_stat(&path)).await {
            Ok(Ok(Some(st))) if st.ephemeral_owner == s.id => {
                match tokio::time::timeout(patience, s.client.delete(&path, None)).await {
                    Ok(Ok(()) | Err(zk::Error::NoNode)) => {}
                    _ => done = false,
                }
            }
            Ok(Ok(_)) => {}
            _ => done = false,
        }
    }
    done
}

/// The most one round's read asks for: its answer stays well under
/// ZooKeeper's default `jute.maxbuffer` (1 MiB), which servers and clients
/// hold the packets they read to.
const ROUND_BYTES: usize = 512 * 1024;

/// What one node's read adds to an answer besides the node's data: its
/// stat (68 bytes), the op's header and the data's length.
const READ_OVERHEAD: usize = 96;

/// Renews the session's nodes in rounds, so that a process holding many
/// elections sends the server O(1) requests per ttl instead of one per
/// renewal: a renewal waits for the next round, and a round is one read
/// (ZooKeeper's `multiRead`; more than one only past [`ROUND_BYTES`]) of
/// the nodes of every renewal waiting. Rounds are at least
/// `granted / ROUNDS_PER_TTL` apart, so a renewal waits at most that long
/// for its round; the first after a quiet spell goes at once. Ends with
/// the session.
pub(crate) async fn run_rounds(session: Weak<Session>, wake: Arc<Notify>, call_timeout: Duration) {
    let mut last: Option<Instant> = None;
    loop {
        wake.notified().await;
        if let Some(last) = last {
            let Some(spacing) = session.upgrade().map(|s| s.granted / ROUNDS_PER_TTL) else {
                return;
            };
            tokio::time::sleep_until(last + spacing).await;
        }
        let Some(s) = session.upgrade() else { return };
        // Each round in a task of its own, so that a slow answer does not
        // hold back the next round; this one waits only for the send.
        let (sent_at, sent) = oneshot::channel();
        tokio::spawn(async move { s.round(call_timeout, sent_at).await });
        if let Ok(Some(sent)) = sent.await {
            last = Some(sent);
        }
    }
}

/// What one read of a round got: its results, ZooKeeper's error, or
/// nothing within the call timeout.
type ReadAnswer = Result<Result<Vec<zk::MultiReadResult>, zk::Error>, tokio::time::error::Elapsed>;

/// Why a round could not tell a renewal whether its node stands.
pub(crate) enum RoundError {
    Zk(zk::Error),
    NoAnswer,
    Garbled(String),
}

impl Session {
    /// One round: sends the reads of the nodes of the renewals waiting,
    /// tells `sent_at` when (`None`: none waited), and answers each
    /// renewal when the reads' answers come. The send instant is taken
    /// after the renewals were taken: each was called before it.
    async fn round(&self, call_timeout: Duration, sent_at: oneshot::Sender<Option<Instant>>) {
        let batch = std::mem::take(&mut *lock(&self.waiting));
        if batch.is_empty() {
            let _ = sent_at.send(None);
            return;
        }
        let sent = Instant::now();
        let mut reads = Vec::new();
        {
            // Sent while the records are locked, as a single renewal's read
            // is: the reaper's deletes are ordered against it.
            let mut records = self.records();
            // Looked up once a round, not once a renewal: a session may
            // carry thousands of records.
            let found: Vec<Option<usize>> = {
                let index: HashMap<(&str, &str), usize> = records
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| !r.lapsed)
                    .filter_map(|(i, r)| Some(((r.dir.as_str(), r.name.as_deref()?), i)))
                    .collect();
                batch
                    .iter()
                    .map(|w| {
                        index
                            .get(&(w.dir.as_str(), w.name.as_str()))
                            .copied()
                            .filter(|&i| records[i].is(&w.dir, &w.name, &w.lease))
                    })
                    .collect()
            };
            let mut reader = self.client.new_multi_reader();
            let mut chunk: Vec<Waiting> = Vec::new();
            let (mut asked, mut answered) = (0, 0);
            for (w, i) in batch.into_iter().zip(found) {
                // Its caller gave up (a timeout): no renewal for nobody.
                if w.answer.is_closed() {
                    continue;
                }
                let Some(r) = i.map(|i| &mut records[i]) else {
                    let _ = w.answer.send(Ok(false));
                    continue;
                };
                // A lapsed lease is never revived: the reaper deletes its
                // node.
                if r.until <= sent {
                    let _ = w.answer.send(Ok(false));
                    continue;
                }
                let path = format!("{}/{}", w.dir, w.name);
                let (ask, answer) = (path.len() + READ_OVERHEAD, r.size + READ_OVERHEAD);
                if !chunk.is_empty()
                    && (asked + ask > ROUND_BYTES || answered + answer > ROUND_BYTES)
                {
                    reads.push((std::mem::take(&mut chunk), reader.commit()));
                    reader = self.client.new_multi_reader();
                    (asked, answered) = (0, 0);
                }
                if let Err(e) = reader.add_get_data(&path) {
                    let _ = w.answer.send(Err(RoundError::Zk(e)));
                    continue;
                }
                r.until = sent + self.granted;
                asked += ask;
                answered += answer;
                chunk.push(w);
            }
            if !chunk.is_empty() {
                reads.push((chunk, reader.commit()));
            }
        }
        let _ = sent_at.send(Some(sent));
        let answers =
            futures_util::future::join_all(reads.into_iter().map(|(chunk, read)| async move {
                (chunk, tokio::time::timeout(call_timeout, read).await)
            }))
            .await;
        self.answer(answers);
    }

    /// Answers each renewal of a round by its read's result, and forgets
    /// the records found lost.
    fn answer(&self, answers: Vec<(Vec<Waiting>, ReadAnswer)>) {
        let mut lost = Vec::new();
        for (chunk, answer) in answers {
            let results = match answer {
                Ok(Ok(results)) if results.len() == chunk.len() => results,
                Ok(Ok(results)) => {
                    let why = format!(
                        "ZooKeeper answered a read of {} nodes with {} results",
                        chunk.len(),
                        results.len()
                    );
                    for w in chunk {
                        let _ = w.answer.send(Err(RoundError::Garbled(why.clone())));
                    }
                    continue;
                }
                Ok(Err(e)) => {
                    for w in chunk {
                        let _ = w.answer.send(Err(RoundError::Zk(e.clone())));
                    }
                    continue;
                }
                Err(_) => {
                    for w in chunk {
                        let _ = w.answer.send(Err(RoundError::NoAnswer));
                    }
                    continue;
                }
            };
            for (w, result) in chunk.into_iter().zip(results) {
                let answer = match result {
                    zk::MultiReadResult::Data { stat, .. }
                        if stat.ephemeral_owner == self.id
                            && token_of(stat.czxid) == w.lease.token =>
                    {
                        Ok(true)
                    }
                    zk::MultiReadResult::Data { .. }
                    | zk::MultiReadResult::Error {
                        err: zk::Error::NoNode,
                    } => Ok(false),
                    zk::MultiReadResult::Error { err } => Err(RoundError::Zk(err)),
                    other => Err(RoundError::Garbled(format!(
                        "ZooKeeper answered a read of a node with {other:?}"
                    ))),
                };
                if matches!(answer, Ok(false)) {
                    lost.push((w.dir.clone(), w.name.clone(), w.lease.clone()));
                }
                let _ = w.answer.send(answer);
            }
        }
        if !lost.is_empty() {
            self.records()
                .retain(|r| !lost.iter().any(|(dir, name, lease)| r.is(dir, name, lease)));
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
