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
//!
//! [`longest_wait`]: crate::request::longest_wait

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use regent_core::{ElectionName, StoreError};
use rusqlite::Connection;
use tokio::sync::{oneshot, watch};

use crate::batch::{Stats, run_reads, run_writes};
use crate::bell;
use crate::clock::{BOOT_ID_PATH, later, read_boot_id};
use crate::db::Site;
use crate::poll::{Polled, Watches};
use crate::request::{Access, Failure, Request};
use crate::schema;

/// The most requests the thread takes from its channel at a time, and the
/// most writes that wait for a commit: bounds the time the first of a
/// batch waits for the last one to run.
const MAX_BATCH: usize = 1024;

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
        let conn = schema::open(&path, busy_timeout)?;
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
    /// Rung after a batch that released or won a lease (see `bell`).
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
///
/// [`longest_wait`]: crate::request::longest_wait
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
                if self.site.leader_changed.take()
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use regent_core::ErrorKind;

    use super::*;
    use crate::batch::exec;
    use crate::request::{Answer, Pending};

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
            conn: schema::open(&path, Duration::from_secs(1)).expect("open"),
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
