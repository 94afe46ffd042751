//! The connection thread: one per [`SqliteStore`](crate::SqliteStore)
//! (its clones share it), the only user of the store's connection. It runs
//! every request in group commits; why is in the crate docs.
//!
//! The thread takes the requests waiting in its channel in batches:
//!
//! * reads run at once, together in one read transaction, and are answered
//!   at once: they wait for no write lock (but a read that comes while
//!   writes wait for their commit waits with them: at most the commit
//!   interval, and at most its own [`longest_wait`] for an acquire's
//!   read);
//! * writes wait until the commit interval has passed since the previous
//!   commit began (at once if it has), gathering the writes that come
//!   meanwhile, but never longer than the most urgent of them may wait
//!   ([`longest_wait`]); then they run in one `BEGIN IMMEDIATE`
//!   transaction and one `COMMIT`: one fsync for all of them.
//!
//! Invariant: a write is answered only after the commit that made it
//! durable succeeded. If the transaction cannot begin or commit, or an
//! error makes SQLite roll it back, every write of the batch gets an error.
//! A write that fails alone leaves the others' work in place: one made of
//! several statements ([`Access::Write`]) runs inside a savepoint of its
//! own, rolled back if it fails; one of a single statement
//! ([`Access::WriteOne`]) is undone by SQLite itself when that statement
//! fails.
//!
//! A request is a closure on the connection, so that a new operation is
//! one more closure.
//!
//! Between batches the thread also runs the shared poll of the store's
//! watches ([`Watches`]): one read transaction per poll interval for all
//! the elections watched.
//!
//! While writes wait, the thread parks rather than wake for every request
//! that joins them; a sender whose request may not wait that long unparks
//! it (see [`longest_wait`]).
//!
//! The thread ends when every sender of its channel is gone (the last
//! store clone, including those held by the streams of its watches), after
//! the batch in hand; it closes the connection as it ends. It is not
//! joined: joining from the last clone's `drop` would block an async
//! worker for as long as that batch waits for a lock. Invariant: every
//! request the thread takes is answered, unless the thread itself dies (a
//! bug: a panic outside [`Thread::guarded`]); a caller whose answer is
//! dropped, or who cannot send, knows that the thread is gone for good.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use regent_core::{ElectionName, ErrorKind, LeaderInfo, StoreError};
use rusqlite::Connection;
use tokio::sync::{oneshot, watch};

use crate::bell;
use crate::clock::{BOOT_ID_PATH, later, monotonic_now_ns, read_boot_id};
use crate::db::{self, Seen, Site};
use crate::error::classify;

/// The most requests the thread takes from its channel at a time, and the
/// most writes that wait for a commit: bounds the time the first of a
/// batch waits for the last one to run.
const MAX_BATCH: usize = 1024;

/// A request may wait in the thread's hands for others to join it at most
/// this share of its lease's ttl: see [`longest_wait`].
pub(crate) const WAIT_SHARE: u32 = 20;

/// The longest a request of a lease of `ttl` waits for the requests that
/// join it: the commit interval, but at most `ttl / WAIT_SHARE`.
///
/// Why a twentieth: with the candidates' defaults (a renewal every ttl/5,
/// a step-down 3·ttl/5 after the last renewal sent) a renewal has 2·ttl/5
/// from its send to the step-down, eight twentieths. A renewal cycle can
/// wait twice (an answer that comes late delays the next send; the next
/// renewal waits again): two twentieths, a quarter of that budget. The
/// other three quarters are left for the commits themselves (an fsync
/// each), a failed renewal's retry (ttl/20 later) and a loaded host. An
/// acquire also waits twice (its read, then its write): ttl/10, against a
/// campaign's attempt bound of 3·ttl/5. At the default ttl of 10 s the
/// share is 500 ms, so the default commit interval of 50 ms decides; it
/// starts to shorten the wait below a ttl of one second (20 × 50 ms).
/// Commits per second then stay bounded by `WAIT_SHARE / ttl` of the
/// shortest ttl in use, however many elections there are.
pub(crate) fn longest_wait(ttl: Duration, commit_interval: Duration) -> Duration {
    (ttl / WAIT_SHARE).min(commit_interval)
}

/// What the thread has done, counted for tests and benches.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Group commits that succeeded.
    pub(crate) commits: AtomicU64,
    /// Writes those commits answered (each its own outcome).
    pub(crate) writes: AtomicU64,
    /// The most writes one commit answered.
    pub(crate) largest: AtomicU64,
    /// Times the thread waited with writes in hand.
    pub(crate) waits: AtomicU64,
}

/// A source error shared by the answers of every request of a batch.
type SharedError = Arc<dyn StdError + Send + Sync>;

/// Why a request got no answer of its own.
#[derive(Clone)]
pub(crate) enum Failure {
    /// The batch's transaction failed as a whole: `why` says how.
    Batch {
        kind: ErrorKind,
        why: &'static str,
        source: Option<SharedError>,
    },
    /// The request's closure panicked; its work was rolled back.
    Panicked,
    /// The thread recovered from a panic (a bug) while the request was in
    /// hand, before it could answer; the transaction was rolled back.
    Recovered,
}

impl Failure {
    fn db(why: &'static str, e: rusqlite::Error) -> Self {
        Failure::Batch {
            kind: classify(&e),
            why,
            source: Some(Arc::new(e)),
        }
    }

    /// The error a caller gets: its own context (the operation, the
    /// election, the path), then what happened to the batch.
    pub(crate) fn into_error(self, context: String) -> StoreError {
        match self {
            Failure::Batch { kind, why, source } => {
                let e = StoreError::new(kind, format!("{context}: {why}"));
                match source {
                    Some(source) => e.with_source(source),
                    None => e,
                }
            }
            Failure::Panicked => StoreError::unavailable(format!(
                "{context}: the request panicked on the store's connection thread"
            )),
            Failure::Recovered => StoreError::unavailable(format!(
                "{context}: the store's connection thread recovered from a panic before it answered"
            )),
        }
    }
}

/// What a request's caller receives.
pub(crate) type Answer<T> = Result<Result<T, StoreError>, Failure>;

/// Whether a request reads or writes, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Only reads: runs in a read transaction, never waits for the write
    /// lock.
    Read,
    /// Changes rows in one statement at most, as its last step: runs in
    /// the batch's write transaction as it is (a savepoint would cost more
    /// than the statement). Should it fail after it changed rows all the
    /// same, the whole batch is rolled back and fails.
    WriteOne,
    /// Changes rows in several statements: runs in the batch's write
    /// transaction inside a savepoint of its own.
    Write,
}

/// A message to the connection thread.
pub(crate) enum Message {
    /// Run a request.
    Request(Box<dyn Request>),
    /// Follow an election in the shared poll; the answer is the election's
    /// channel of polled states.
    Watch(ElectionName, oneshot::Sender<watch::Receiver<Polled>>),
    /// The wake-up bell rang (a release, maybe by another process): poll
    /// the watches now.
    Bell,
    /// Kill the thread, as a bug outside any request would.
    #[cfg(test)]
    Die,
}

/// One request: a closure on the connection and the caller's answer.
pub(crate) trait Request: Send {
    fn access(&self) -> Access;
    /// When a write should be committed at the latest: its send, plus its
    /// [`longest_wait`].
    fn due(&self) -> Instant;
    /// The caller has stopped waiting (its future was dropped).
    fn abandoned(&self) -> bool;
    /// Runs the closure and keeps its result for [`Request::answer`].
    fn run(&mut self, conn: &Connection, site: &Site) -> Ran;
    /// The error the closure returned, if it returned one.
    fn take_error(&mut self) -> Option<StoreError>;
    /// Sends the kept result.
    fn answer(self: Box<Self>);
    /// Sends `failure` instead of the kept result.
    fn fail(self: Box<Self>, failure: Failure);
}

/// How a request's closure ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ran {
    Ok,
    Failed,
    Panicked,
}

/// A [`Request`] made of a closure returning `T`.
pub(crate) struct Pending<T, F> {
    access: Access,
    due: Instant,
    op: Option<F>,
    result: Option<Answer<T>>,
    reply: oneshot::Sender<Answer<T>>,
}

impl<T, F> Pending<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection, &Site) -> Result<T, StoreError> + Send + 'static,
{
    /// A request due at `due` (see [`Request::due`]), and the receiver of
    /// its answer.
    pub(crate) fn request(
        access: Access,
        due: Instant,
        op: F,
    ) -> (Box<dyn Request>, oneshot::Receiver<Answer<T>>) {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            access,
            due,
            op: Some(op),
            result: None,
            reply,
        };
        (Box::new(pending), answer)
    }
}

impl<T, F> Request for Pending<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection, &Site) -> Result<T, StoreError> + Send + 'static,
{
    fn access(&self) -> Access {
        self.access
    }

    fn due(&self) -> Instant {
        self.due
    }

    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }

    fn run(&mut self, conn: &Connection, site: &Site) -> Ran {
        let Some(op) = self.op.take() else {
            return Ran::Failed;
        };
        let (result, ran) = match catch_unwind(AssertUnwindSafe(|| op(conn, site))) {
            Ok(Ok(v)) => (Ok(Ok(v)), Ran::Ok),
            Ok(Err(e)) => (Ok(Err(e)), Ran::Failed),
            Err(_) => (Err(Failure::Panicked), Ran::Panicked),
        };
        self.result = Some(result);
        ran
    }

    fn take_error(&mut self) -> Option<StoreError> {
        match self.result.take() {
            Some(Ok(Err(e))) => Some(e),
            other => {
                self.result = other;
                None
            }
        }
    }

    fn answer(self: Box<Self>) {
        let Pending { result, reply, .. } = *self;
        // A request that never ran was abandoned: nobody waits for it.
        if let Some(result) = result {
            let _ = reply.send(result);
        }
    }

    fn fail(self: Box<Self>, failure: Failure) {
        let _ = self.reply.send(Err(failure));
    }
}

/// The store's options the thread needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Options {
    pub(crate) busy_timeout: Duration,
    pub(crate) poll_interval: Duration,
    pub(crate) commit_interval: Duration,
}

/// Opens the connection on this thread, reports the outcome on `ready`,
/// then serves `requests` until every sender is gone.
pub(crate) fn run(
    path: PathBuf,
    options: Options,
    stats: Arc<Stats>,
    ready: oneshot::Sender<Result<(), StoreError>>,
    requests: Receiver<Message>,
) {
    let Options {
        busy_timeout,
        poll_interval,
        commit_interval,
    } = options;
    let opened = read_boot_id(std::path::Path::new(BOOT_ID_PATH)).and_then(|boot_id| {
        let conn = db::open(&path, busy_timeout)?;
        Ok((conn, Site::new(path, boot_id)))
    });
    let (conn, site) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    // A dropped open: nobody will send anything, and the connection closes.
    if ready.send(Ok(())).is_err() {
        return;
    }
    let path = site.path.clone();
    let thread = Thread {
        conn,
        bell: bell::Ringer::open(&path),
        site,
        requests,
        watches: Watches::new(poll_interval),
        pace: Pace::new(commit_interval),
        stats,
    };
    // A bug outside any request: the requests in hand and in the channel
    // are dropped unanswered, and their callers, and every later one, get
    // a permanent error.
    if catch_unwind(AssertUnwindSafe(|| thread.serve())).is_err() {
        tracing::error!(path = %path.display(), "sqlite store: the connection thread died of a panic; the store is unusable");
    }
}

struct Thread {
    conn: Connection,
    /// Rung after a batch that released a lease (see `bell`).
    bell: Option<bell::Ringer>,
    site: Site,
    requests: Receiver<Message>,
    watches: Watches,
    pace: Pace,
    stats: Arc<Stats>,
}

/// When writes may commit: at most [`Pace::BURST`] commits at once, then
/// one per commit interval (a generic cell rate algorithm). Writes that
/// come while they may not wait, and share the next commit. Only commits
/// that changed rows count: one that wrote nothing (an acquire held by
/// another, a lost renewal) costs no fsync.
///
/// Invariant: `next` is at most [`Pace::BURST`] intervals after the last
/// commit, so that a commit made early (for an urgent write, see
/// [`longest_wait`]) delays the next one by at most one interval.
struct Pace {
    interval: Duration,
    /// The theoretical time of the next commit, were commits evenly
    /// spaced.
    next: Instant,
    /// When the pace began: an instant already past.
    start: Instant,
}

impl Pace {
    /// How many commits may follow each other at once after a quiet
    /// spell: a caller that makes a few writes in a row, one after the
    /// other, does not wait.
    const BURST: u32 = 4;

    fn new(interval: Duration) -> Self {
        let now = Instant::now();
        Pace {
            interval,
            next: now,
            start: now,
        }
    }

    /// The earliest instant the next commit may start.
    fn commit_at(&self) -> Instant {
        // An allowance that reaches before the clock's origin allows the
        // commit at once.
        self.interval
            .checked_mul(Self::BURST - 1)
            .and_then(|allowance| self.next.checked_sub(allowance))
            .unwrap_or(self.start)
    }

    /// A commit that changed rows started at `now`.
    fn committed(&mut self, now: Instant) {
        let most = later(now, self.interval.saturating_mul(Self::BURST));
        self.next = later(self.next.max(now), self.interval).min(most);
    }
}

impl Thread {
    fn serve(mut self) {
        // Writes waiting for their commit, and the earliest of their dues.
        let mut writes: Vec<Box<dyn Request>> = Vec::new();
        let mut commit_by: Option<Instant> = None;
        let mut closed = false;
        loop {
            let mut received = None;
            if writes.is_empty() {
                // Idle: wake for the first request, or the next poll.
                let first = match self.watches.next {
                    None => self
                        .requests
                        .recv()
                        .map_err(|_| RecvTimeoutError::Disconnected),
                    Some(at) => self
                        .requests
                        .recv_timeout(at.saturating_duration_since(Instant::now())),
                };
                match first {
                    Ok(m) => received = Some(m),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => closed = true,
                }
            } else {
                // Writes wait for their commit: park rather than wake for
                // each request that joins them (reads too wait that long).
                // A request that may not wait that long unparks the thread.
                let until = [commit_by, self.watches.next]
                    .into_iter()
                    .flatten()
                    .fold(self.pace.commit_at(), Instant::min);
                let wait = until.saturating_duration_since(Instant::now());
                if !wait.is_zero() {
                    self.stats.waits.fetch_add(1, Ordering::Relaxed);
                    std::thread::park_timeout(wait);
                }
            }
            let mut reads = Vec::new();
            let mut taken = 0;
            loop {
                let message = match received.take() {
                    Some(m) => m,
                    None if taken >= MAX_BATCH => break,
                    None => match self.requests.try_recv() {
                        Ok(m) => m,
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            closed = true;
                            break;
                        }
                    },
                };
                taken += 1;
                match message {
                    Message::Request(r) => match r.access() {
                        Access::Read => reads.push(r),
                        Access::WriteOne | Access::Write => {
                            commit_by = Some(commit_by.map_or(r.due(), |by| by.min(r.due())));
                            writes.push(r);
                        }
                    },
                    Message::Watch(election, reply) => {
                        let _ = reply.send(self.watches.add(election));
                    }
                    Message::Bell => self.watches.poll_now(),
                    #[cfg(test)]
                    Message::Die => panic!("the connection thread dies (as the test wants)"),
                }
            }
            if !reads.is_empty() {
                self.guarded(&mut reads, |t, reads| run_reads(&t.conn, &t.site, reads));
            }
            let now = Instant::now();
            let due = closed
                || writes.len() >= MAX_BATCH
                || self.pace.commit_at() <= now
                || commit_by.is_some_and(|by| by <= now);
            if !writes.is_empty() && due {
                let mut batch = std::mem::take(&mut writes);
                commit_by = None;
                let changes = self.conn.total_changes();
                self.guarded(&mut batch, |t, batch| {
                    run_writes(&t.conn, &t.site, &t.stats, batch);
                });
                // After the commit (or its failure: a ring for nothing
                // costs the listeners one poll).
                if self.site.released.take()
                    && let Some(bell) = &self.bell
                {
                    bell.ring();
                }
                if self.conn.total_changes() != changes {
                    self.watches.wrote = true;
                    self.pace.committed(now);
                }
            }
            if closed {
                return;
            }
            if self.watches.next.is_some_and(|at| at <= Instant::now()) {
                self.guarded(&mut Vec::new(), |t, _| t.watches.poll(&t.conn, &t.site));
            }
        }
    }

    /// Runs `f` on `requests`, which it answers and removes as it goes. A
    /// panic in it (a bug: requests catch their own) rolls back whatever
    /// transaction it left open and fails the requests it left unanswered,
    /// with a transient error, so that the thread serves on.
    fn guarded(
        &mut self,
        requests: &mut Vec<Box<dyn Request>>,
        f: impl FnOnce(&mut Self, &mut Vec<Box<dyn Request>>),
    ) {
        if catch_unwind(AssertUnwindSafe(|| f(self, requests))).is_err() {
            tracing::error!(path = %self.site.path.display(), "sqlite store: the connection thread recovered from a panic");
            if !self.conn.is_autocommit() {
                let _ = self.conn.execute_batch("ROLLBACK");
            }
            requests.drain(..).for_each(|r| r.fail(Failure::Recovered));
        }
    }
}

/// Executes one statement without arguments, prepared once per connection.
fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Runs `reads` in one read transaction (one snapshot) and answers them,
/// leaving `reads` empty.
fn run_reads(conn: &Connection, site: &Site, reads: &mut Vec<Box<dyn Request>>) {
    reads.retain(|r| !r.abandoned());
    // Alone, a read needs no transaction of its own.
    let grouped = reads.len() > 1;
    if grouped && let Err(e) = exec(conn, "BEGIN") {
        let failure = Failure::db("the read transaction did not begin", e);
        reads.drain(..).for_each(|r| r.fail(failure.clone()));
        return;
    }
    for r in reads.iter_mut() {
        // An error that ends the transaction leaves the reads after it in
        // autocommit mode, each its own snapshot: still right for a read.
        r.run(conn, site);
    }
    if grouped && !conn.is_autocommit() {
        // Nothing was written: ending the transaction cannot lose anything.
        let _ = exec(conn, "COMMIT");
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
    reads.drain(..).for_each(Request::answer);
}

const SAVEPOINT: &str = "SAVEPOINT regent_request";
const RELEASE: &str = "RELEASE regent_request";
const ROLLBACK_TO: &str = "ROLLBACK TO regent_request";

/// Runs `writes` in one write transaction, commits once, then answers
/// them, leaving `writes` empty.
fn run_writes(conn: &Connection, site: &Site, stats: &Stats, writes: &mut Vec<Box<dyn Request>>) {
    writes.retain(|w| !w.abandoned());
    if writes.is_empty() {
        return;
    }
    let fail_all = |writes: &mut Vec<Box<dyn Request>>, failure: Failure| {
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        writes.drain(..).for_each(|w| w.fail(failure.clone()));
    };
    // Waits up to the busy timeout for another connection's write lock.
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        return fail_all(
            writes,
            Failure::db("the write transaction did not begin", e),
        );
    }
    for i in 0..writes.len() {
        let savepoint = writes[i].access() == Access::Write;
        if savepoint && let Err(e) = exec(conn, SAVEPOINT) {
            return fail_all(writes, Failure::db("a savepoint failed", e));
        }
        let changes = conn.total_changes();
        let ran = writes[i].run(conn, site);
        let lost = conn.is_autocommit();
        let stray = !savepoint && ran != Ran::Ok && conn.total_changes() != changes;
        if lost || stray {
            // Either SQLite rolled the whole transaction back (an I/O
            // error, a full disk, no memory), or a one-statement write
            // failed after it changed rows, which only rolling back the
            // whole batch undoes: every write of the batch fails.
            let why = if lost {
                "its group commit was rolled back after an error"
            } else {
                "its group commit was rolled back after a request failed half-way"
            };
            let failure = match writes[i].take_error() {
                Some(e) => Failure::Batch {
                    kind: e.kind(),
                    why,
                    source: Some(Arc::new(e)),
                },
                None => Failure::Batch {
                    kind: ErrorKind::Unavailable,
                    why,
                    source: None,
                },
            };
            return fail_all(writes, failure);
        }
        if !savepoint {
            continue;
        }
        let ended = match ran {
            Ran::Ok => exec(conn, RELEASE),
            Ran::Failed | Ran::Panicked => {
                exec(conn, ROLLBACK_TO).and_then(|()| exec(conn, RELEASE))
            }
        };
        if let Err(e) = ended {
            return fail_all(writes, Failure::db("a savepoint failed", e));
        }
    }
    // The fsync: every write of the batch is durable when it returns.
    if let Err(e) = exec(conn, "COMMIT") {
        return fail_all(writes, Failure::db("the group commit failed", e));
    }
    let answered = writes.len() as u64;
    stats.commits.fetch_add(1, Ordering::Relaxed);
    stats.writes.fetch_add(answered, Ordering::Relaxed);
    stats.largest.fetch_max(answered, Ordering::Relaxed);
    writes.drain(..).for_each(Request::answer);
}

// ---------------------------------------------------------------- watches

/// What the shared poll publishes for one election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Polled {
    /// Not polled yet.
    Unread,
    /// Who leads: `None` is no leader.
    Leader(Option<LeaderInfo>),
    /// The election's row, or the poll as a whole, failed to read. The
    /// streams read the election again through `current_leader`, which
    /// reports the error with its cause.
    Failed,
}

/// The shared poll: every election the store's streams watch, however
/// many, is read in one read transaction per poll interval, and its state
/// published on one `watch` channel that all its streams share.
///
/// A poll reads rows only if something may have changed them: another
/// connection committed (`PRAGMA data_version` moved), this connection
/// wrote, or the election is newly watched. Otherwise it only judges the
/// rows it kept against the clock, which is how expiry is seen. Rows are
/// read one lookup each for a few elections, and in one scan of the table
/// for many (more than [`SCAN_ABOVE`], and at least a quarter of the
/// table). A row read again that differs only in its expiry (a renewal)
/// is neither copied nor validated again.
struct Watches {
    interval: Duration,
    /// By the election's name, which the scan reads.
    elections: HashMap<Box<str>, Watched>,
    /// The rows the last scan saw.
    table_rows: usize,
    /// When the next poll is due; `None` while nothing is watched.
    next: Option<Instant>,
    /// `PRAGMA data_version` at the last poll; `None` when the rows kept
    /// cannot be trusted (nothing read yet, or the last poll failed).
    data_version: Option<i64>,
    /// This connection changed rows since the last poll.
    wrote: bool,
}

/// Above this many elections watched, the poll may scan the table rather
/// than look each row up.
const SCAN_ABOVE: usize = 32;

struct Watched {
    election: ElectionName,
    state: watch::Sender<Polled>,
    /// The row as last read: `Ok(None)` when there was none.
    seen: Result<Option<Seen>, ()>,
    /// Newly watched, or a stream joined since the last poll: read the row
    /// and notify every stream, changed or not (a new stream's first state
    /// was read apart from the poll, and may differ from the channel's).
    fresh: bool,
    /// Seen by the scan in progress.
    found: bool,
}

impl Watches {
    fn new(interval: Duration) -> Self {
        Watches {
            interval,
            elections: HashMap::new(),
            table_rows: 0,
            next: None,
            data_version: None,
            wrote: false,
        }
    }

    fn add(&mut self, election: ElectionName) -> watch::Receiver<Polled> {
        if self.next.is_none() {
            self.next = Some(later(Instant::now(), self.interval));
        }
        let name: Box<str> = election.as_str().into();
        let watched = self.elections.entry(name).or_insert_with(|| Watched {
            election,
            state: watch::Sender::new(Polled::Unread),
            seen: Err(()),
            fresh: true,
            found: false,
        });
        watched.fresh = true;
        watched.state.subscribe()
    }

    /// The next poll runs at once (if anything is watched).
    fn poll_now(&mut self) {
        if self.next.is_some() {
            self.next = Some(Instant::now());
        }
    }

    fn poll(&mut self, conn: &Connection, site: &Site) {
        self.elections.retain(|_, w| !w.state.is_closed());
        if self.elections.is_empty() {
            self.next = None;
            self.data_version = None;
            return;
        }
        let wrote = std::mem::take(&mut self.wrote);
        let read = self.read(conn, site, wrote);
        if !conn.is_autocommit() {
            // Nothing was written: ending the transaction cannot lose anything.
            if exec(conn, "COMMIT").is_err() {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
        // Read after the rows: a row written after the clock was read would
        // look as if it expired beyond its ttl.
        let now = monotonic_now_ns();
        for w in self.elections.values_mut() {
            let election = &w.election;
            let polled = match (&read, &w.seen) {
                (Err(()), _) | (_, Err(())) => Polled::Failed,
                (Ok(()), Ok(None)) => Polled::Leader(None),
                (Ok(()), Ok(Some(seen))) => match seen.live_at(site, election, now) {
                    Ok(true) => {
                        // Unchanged: nothing to clone or send.
                        if !w.fresh
                            && matches!(&*w.state.borrow(), Polled::Leader(Some(l)) if seen.is_leader(l))
                        {
                            continue;
                        }
                        Polled::Leader(Some(seen.leader()))
                    }
                    Ok(false) => Polled::Leader(None),
                    Err(_) => Polled::Failed,
                },
            };
            let fresh = std::mem::take(&mut w.fresh);
            w.state.send_if_modified(|current| {
                let changed = fresh || *current != polled;
                *current = polled;
                changed
            });
        }
        self.next = Some(later(Instant::now(), self.interval));
    }

    /// Reads again the rows that may have changed, in one read
    /// transaction left open for the caller to end. `Err` when the
    /// transaction or its view could not be read at all.
    fn read(&mut self, conn: &Connection, site: &Site, wrote: bool) -> Result<(), ()> {
        let version = exec(conn, "BEGIN").and_then(|()| db::data_version(conn));
        let version = match version {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(path = %site.path.display(), error = %e, "sqlite store: the poll of the watches failed");
                self.data_version = None;
                return Err(());
            }
        };
        let all = wrote || self.data_version != Some(version);
        self.data_version = Some(version);
        let many = self.elections.len();
        if all && many > SCAN_ABOVE && many * 4 >= self.table_rows {
            return self.scan(conn, site);
        }
        for w in self.elections.values_mut() {
            if !all && !w.fresh && w.seen.is_ok() {
                continue;
            }
            let before = std::mem::replace(&mut w.seen, Err(())).ok().flatten();
            w.seen = db::read_again(conn, site, &w.election, before).map_err(drop);
        }
        Ok(())
    }

    /// Reads every row of the table, keeping those watched.
    fn scan(&mut self, conn: &Connection, site: &Site) -> Result<(), ()> {
        // Invariant: after a scan, `found` is set exactly on the elections
        // it saw; the others have no row.
        for w in self.elections.values_mut() {
            w.found = false;
        }
        let scanned = db::scan_rows(conn, |name, row| {
            if let Some(w) = self.elections.get_mut(name) {
                let before = std::mem::replace(&mut w.seen, Err(())).ok().flatten();
                w.seen = db::refresh(site, &w.election, row, 1, before)
                    .map(Some)
                    .map_err(drop);
                w.found = true;
            }
        });
        match scanned {
            Ok(rows) => {
                self.table_rows = rows;
                for w in self.elections.values_mut() {
                    if !w.found {
                        w.seen = Ok(None);
                    }
                }
                Ok(())
            }
            Err(e) => {
                tracing::debug!(path = %site.path.display(), error = %e, "sqlite store: the poll of the watches failed");
                self.data_version = None;
                Err(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    type Op = Box<dyn FnOnce(&Connection, &Site) -> Result<i64, StoreError> + Send>;

    const OPTIONS: Options = Options {
        busy_timeout: Duration::from_secs(1),
        poll_interval: Duration::from_millis(100),
        commit_interval: Duration::ZERO,
    };

    /// Sends `ops` before the thread starts, so that they form one batch,
    /// then starts the thread on a new store in `dir` and waits for every
    /// answer. The channel stays open (the returned sender) until the
    /// caller drops it.
    fn one_batch(
        dir: &std::path::Path,
        ops: Vec<(Access, Op)>,
    ) -> (Vec<Answer<i64>>, mpsc::Sender<Message>) {
        let (requests, received) = mpsc::channel();
        let answers: Vec<_> = ops
            .into_iter()
            .map(|(access, op)| {
                let (request, answer) = Pending::request(access, Instant::now(), op);
                requests
                    .send(Message::Request(request))
                    .expect("the receiver is here");
                answer
            })
            .collect();
        let (ready, opened) = oneshot::channel();
        let path = dir.join("regent.db");
        std::thread::spawn(move || run(path, OPTIONS, Arc::default(), ready, received));
        opened
            .blocking_recv()
            .expect("the thread answers")
            .expect("open");
        let answers = answers
            .into_iter()
            .map(|a| a.blocking_recv().expect("every request is answered"))
            .collect();
        (answers, requests)
    }

    fn insert(key: &'static str) -> Op {
        Box::new(move |conn, _| {
            conn.execute(
                "INSERT INTO regent_meta (key, value) VALUES (?1, 'x')",
                [key],
            )
            .map_err(|e| StoreError::unavailable("insert").with_source(e))?;
            Ok(1)
        })
    }

    fn count(key: &'static str) -> Op {
        Box::new(move |conn, _| {
            conn.query_row(
                "SELECT count(*) FROM regent_meta WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .map_err(|e| StoreError::unavailable("count").with_source(e))
        })
    }

    fn then_panic(op: Op) -> Op {
        Box::new(move |conn, site| {
            let _ = op(conn, site);
            panic!("a request that panics (as the test wants)");
        })
    }

    fn ok(answer: &Answer<i64>) -> i64 {
        match answer {
            Ok(Ok(v)) => *v,
            Ok(Err(e)) => panic!("an error: {e}"),
            Err(_) => panic!("a failure"),
        }
    }

    #[test]
    fn a_request_that_panics_or_fails_is_undone_alone_and_the_thread_serves_on() {
        let dir = tempfile::tempdir().expect("temp dir");
        let failing: Op = Box::new(|conn, site| {
            insert("failed")(conn, site)?;
            Err(StoreError::corrupt("refused after writing"))
        });
        let (answers, requests) = one_batch(
            dir.path(),
            vec![
                (Access::WriteOne, insert("before")),
                (Access::Write, then_panic(insert("panicked"))),
                (Access::Write, failing),
                (Access::WriteOne, insert("after")),
                (Access::Read, then_panic(count("before"))),
            ],
        );
        assert_eq!(ok(&answers[0]), 1);
        assert!(matches!(answers[1], Err(Failure::Panicked)));
        assert!(matches!(&answers[2], Ok(Err(e)) if e.kind() == ErrorKind::Corrupt));
        assert_eq!(ok(&answers[3]), 1);
        assert!(matches!(answers[4], Err(Failure::Panicked)));

        // The thread serves on; only the two good writes were committed.
        let mut check = Vec::new();
        for key in ["before", "panicked", "failed", "after"] {
            let (request, answer) = Pending::request(Access::Read, Instant::now(), count(key));
            requests
                .send(Message::Request(request))
                .expect("the thread runs");
            check.push(answer);
        }
        let counts: Vec<i64> = check
            .into_iter()
            .map(|a| ok(&a.blocking_recv().expect("answered")))
            .collect();
        assert_eq!(counts, [1, 0, 0, 1]);
    }

    #[test]
    fn a_one_statement_write_that_fails_after_writing_fails_its_whole_batch() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Breaks the promise of `WriteOne`: its change could be undone only
        // with the whole batch.
        let broken: Op = Box::new(|conn, site| {
            insert("broken")(conn, site)?;
            Err(StoreError::corrupt("refused after writing"))
        });
        let (answers, requests) = one_batch(
            dir.path(),
            vec![
                (Access::WriteOne, insert("before")),
                (Access::WriteOne, broken),
                (Access::WriteOne, insert("after")),
            ],
        );
        for answer in &answers {
            match answer {
                Err(Failure::Batch { kind, .. }) => assert_eq!(*kind, ErrorKind::Corrupt),
                _ => panic!("every write of the batch fails"),
            }
        }
        for key in ["before", "broken", "after"] {
            let (request, answer) = Pending::request(Access::Read, Instant::now(), count(key));
            requests
                .send(Message::Request(request))
                .expect("the thread runs");
            assert_eq!(ok(&answer.blocking_recv().expect("answered")), 0, "{key}");
        }
    }

    #[test]
    fn when_sqlite_rolls_the_transaction_back_every_write_of_the_batch_fails() {
        let dir = tempfile::tempdir().expect("temp dir");
        // What SQLite does on an I/O error or a full disk: the whole
        // transaction is rolled back under the requests' feet.
        let lost: Op = Box::new(|conn, _| {
            conn.execute_batch("ROLLBACK").expect("roll back");
            Err(StoreError::unavailable("disk full, say"))
        });
        let (answers, requests) = one_batch(
            dir.path(),
            vec![
                (Access::Write, insert("before")),
                (Access::Write, lost),
                (Access::Write, insert("after")),
            ],
        );
        for answer in &answers {
            match answer {
                Err(Failure::Batch { kind, .. }) => assert_eq!(*kind, ErrorKind::Unavailable),
                _ => panic!("every write of the batch fails"),
            }
        }
        let (request, answer) = Pending::request(Access::Read, Instant::now(), count("before"));
        requests
            .send(Message::Request(request))
            .expect("the thread runs");
        assert_eq!(ok(&answer.blocking_recv().expect("answered")), 0);
    }

    /// `commit_interval(Duration::MAX)` panicked the thread at the first
    /// write (a duration multiplied past its range), and
    /// `poll_interval(Duration::MAX)` at the first watch (an instant past
    /// the clock's range). The builder now refuses such options; the
    /// arithmetic does not panic whatever it is given.
    #[test]
    fn huge_intervals_do_not_panic_the_pace_or_the_poll() {
        let mut pace = Pace::new(Duration::MAX);
        assert!(
            pace.commit_at() <= Instant::now(),
            "the first commit at once"
        );
        for _ in 0..2 * Pace::BURST {
            pace.committed(Instant::now());
            let _ = pace.commit_at();
        }
        let mut watches = Watches::new(Duration::MAX);
        drop(watches.add(ElectionName::new("e").expect("a name")));
        assert!(watches.next.is_some_and(|at| at > Instant::now()));
    }

    /// The wait bound: the commit interval at the default ttl, a twentieth
    /// of the ttl below 20 intervals, down to the store's minimum ttl.
    #[test]
    fn a_request_waits_at_most_a_twentieth_of_its_ttl() {
        let interval = Duration::from_millis(50);
        let wait = |ms| longest_wait(Duration::from_millis(ms), interval);
        assert_eq!(wait(10_000), interval);
        assert_eq!(wait(1_000), interval);
        assert_eq!(wait(100), Duration::from_millis(5));
        assert_eq!(wait(10), Duration::from_micros(500));
        assert_eq!(
            longest_wait(Duration::from_millis(100), Duration::ZERO),
            Duration::ZERO
        );
    }

    /// A commit made early for an urgent write delays the next one by at
    /// most one commit interval: the pace does not run ahead.
    #[test]
    fn early_commits_delay_the_pace_by_one_interval_at_most() {
        let interval = Duration::from_millis(50);
        let mut pace = Pace::new(interval);
        let now = Instant::now();
        for _ in 0..100 {
            pace.committed(now);
        }
        assert_eq!(pace.commit_at(), now + interval);
    }

    /// Every request the thread takes is answered, unless it dies: a
    /// panic in the thread's own code (a bug) while requests are in hand
    /// rolls their transaction back and fails them with a transient error,
    /// and the thread serves on. Before, they were dropped unanswered,
    /// which now means that the thread died.
    #[test]
    fn a_panic_outside_the_requests_fails_those_in_hand_and_the_thread_serves_on() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("regent.db");
        let mut thread = Thread {
            conn: db::open(&path, Duration::from_secs(1)).expect("open"),
            bell: None,
            site: Site::new(
                path,
                read_boot_id(std::path::Path::new(BOOT_ID_PATH)).expect("boot id"),
            ),
            requests: mpsc::channel().1,
            watches: Watches::new(Duration::from_secs(1)),
            pace: Pace::new(Duration::ZERO),
            stats: Arc::default(),
        };
        let (request, answer) = Pending::request(Access::Write, Instant::now(), insert("x"));
        let mut in_hand = vec![request];
        thread.guarded(&mut in_hand, |t, writes| {
            exec(&t.conn, "BEGIN IMMEDIATE").expect("begin");
            writes[0].run(&t.conn, &t.site);
            panic!("a bug after the write ran (as the test wants)");
        });
        assert!(in_hand.is_empty(), "the requests in hand were failed");
        match answer.blocking_recv().expect("answered, not dropped") {
            Err(failure @ Failure::Recovered) => {
                let e = failure.into_error("insert".into());
                assert!(e.is_transient(), "{e}");
            }
            _ => panic!("the request in hand fails as recovered"),
        }
        assert!(
            thread.conn.is_autocommit(),
            "the transaction was rolled back"
        );
        let (request, answer) = Pending::request(Access::Read, Instant::now(), count("x"));
        thread.guarded(&mut vec![request], |t, reads| {
            run_reads(&t.conn, &t.site, reads);
        });
        assert_eq!(ok(&answer.blocking_recv().expect("answered")), 0);
    }

    #[test]
    fn the_thread_ends_when_the_channel_closes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (requests, received) = mpsc::channel();
        let (ready, opened) = oneshot::channel();
        let path = dir.path().join("regent.db");
        let thread =
            std::thread::spawn(move || run(path, OPTIONS, Arc::default(), ready, received));
        opened.blocking_recv().expect("answered").expect("open");
        drop(requests);
        thread.join().expect("the thread ends without a panic");
    }
}
