//! The PostgreSQL store when things fail, against a real server:
//!
//! * the server restarted (fast shutdown, then started on the same data),
//!   paused (SIGSTOP to the postmaster and every child) past the ttl, and
//!   killed (SIGKILL) then recovered from the crash: the leader keeps its
//!   term if a renewal gets through in time, else steps down by its renew
//!   deadline; never two leaders; afterwards one leads again, and the next
//!   term's token is above every earlier one (the counter survived);
//! * a watch stream left unpolled while its read connects again to a
//!   paused server (as a candidate leaves its watch while it acquires):
//!   the store's other calls go through once the server answers;
//! * PgBouncer (transaction mode) in front of the server restarted, and
//!   killed then restarted: the same;
//! * every backend terminated (`pg_terminate_backend`) under a leader and a
//!   listening follower: the leader keeps its term, and the follower's
//!   `LISTEN` connection is made again, so a release still wakes it (the
//!   store's own renewal on a new connection is in `failover.rs`);
//! * an operator deleting or rewriting the row under a leader: the leader
//!   learns at its next renewal that the term is lost, and the next term's
//!   token is above its own;
//! * garbage the schema allows in the tables: readers get `Corrupt` naming
//!   the problem, a live garbage row is never taken over, an expired one
//!   is, a counter at the largest bigint is `Corrupt`, and a `ttl_ms` an
//!   operator rewrote never lets a renewal report a lease the row no
//!   longer gives.
//!
//! The tests that fault a server (or terminate its backends) have a server
//! of their own, faulted through the kit's blocking calls in
//! `block_in_place` so that the candidates' tasks run on meanwhile; the
//! others share one server while they run ([`shared_server`]), each on an
//! election of its own. Candidates run on [`TTL`] 2 s, renewing every
//! 300 ms and stepping down 1.2 s after the last renewal sent.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use regent_core::{
    Acquire, CampaignError, Candidate, ElectionName, EndReason, Ended, ErrorKind, FencingToken,
    HolderId, LeaseState, LeaseStore, Renewal, Status,
};
use regent_postgres::PostgresStore;
use regent_testkit::History;
use regent_testkit::engines::{Postgres, PostgresBehindPgBouncer};
use regent_testkit::fixtures::{acquire_request, holder};
use tokio::sync::watch;
use tokio::task::{JoinHandle, block_in_place};
use tokio::time::{Instant, timeout};

/// The ttl every candidate asks for.
const TTL: Duration = Duration::from_secs(2);
/// A renewal every 300 ms...
const RENEW_EVERY: Duration = Duration::from_millis(300);
/// ...and a step-down 1.2 s after the last renewal that succeeded was
/// sent, 0.78 s before the local lease deadline (`ttl × 0.99 − 5 ms`).
const RENEW_DEADLINE: Duration = Duration::from_millis(1200);
/// The leader's work stops within this after the step-down.
const GRACE: Duration = Duration::from_millis(200);
/// A follower tries every 300 ms, besides what its watch tells it.
const RETRY_EVERY: Duration = Duration::from_millis(300);
/// How late a timer may fire on a loaded two-core machine (a build may run
/// beside the tests): the slack on "by its deadline".
const LATE: Duration = Duration::from_millis(500);
/// The bound on waiting for something that must happen: a leader after a
/// recovery, a term's end, a follower's view.
const WAIT: Duration = Duration::from_secs(20);

// ------------------------------------------------------------------ servers

/// One server for the tests of this binary that do not fault it, started
/// by the first that asks and stopped when the last running one drops its
/// handle (a later test starts another): a `static` is never dropped, and
/// the server must not outlive the tests.
fn shared_server() -> Arc<Postgres> {
    static SHARED: Mutex<Weak<Postgres>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(pg) = shared.upgrade() {
        return pg;
    }
    let pg = Arc::new(own_server());
    *shared = Arc::downgrade(&pg);
    pg
}

/// A server of the test's own, to fault.
fn own_server() -> Postgres {
    block_in_place(Postgres::start).unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"))
}

fn behind_pgbouncer() -> PostgresBehindPgBouncer {
    block_in_place(PostgresBehindPgBouncer::start)
        .unwrap_or_else(|e| panic!("cannot start PostgreSQL behind PgBouncer: {e}"))
}

/// A connection of the operator's (the superuser), straight to the server.
async fn operator(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("the operator connects to {url}: {e}"));
    tokio::spawn(conn);
    client
}

/// Runs the operator's `sql` (one statement, no parameters); returns the
/// rows it touched or returned.
async fn operate(url: &str, sql: &str) -> u64 {
    operator(url)
        .await
        .execute(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("the operator's {sql:?}: {e}"))
}

/// The election's counter in `regent_tokens`, as the server has it now.
async fn counter(url: &str, election: &ElectionName) -> i64 {
    operator(url)
        .await
        .query_one(
            "SELECT last FROM regent_tokens WHERE election = $1",
            &[&election.as_str()],
        )
        .await
        .unwrap_or_else(|e| panic!("read the counter of {election}: {e}"))
        .get(0)
}

fn election(name: &str) -> ElectionName {
    ElectionName::new(name).expect("valid election name")
}

async fn store(url: &str) -> PostgresStore {
    PostgresStore::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect a store to {url}: {e}"))
}

fn candidate(store: PostgresStore, e: &ElectionName, who: &str) -> Candidate<PostgresStore> {
    Candidate::builder(store, e.clone(), holder(who))
        .ttl(TTL)
        .renew_every(RENEW_EVERY)
        .renew_deadline(RENEW_DEADLINE)
        .grace(GRACE)
        .retry_every(RETRY_EVERY)
        .build()
        .expect("valid timing")
}

// --------------------------------------------------------------- candidates

/// The term a candidate leads now.
#[derive(Clone, Debug)]
struct Leading {
    token: FencingToken,
    /// Its deadlines, moved by every renewal, and its end.
    lease_state: watch::Receiver<LeaseState>,
}

/// One term, once it ended.
#[derive(Clone, Debug)]
struct Term {
    holder: HolderId,
    token: FencingToken,
    /// How and when (the instant its cancellation fired) it ended.
    ended: Ended,
    /// When it was due to step down as it ended: the send instant of its
    /// last confirmed renewal (or of the acquire) plus the renew deadline.
    step_down_at: Instant,
    /// Its local lease deadline as it ended.
    deadline: Instant,
}

/// A candidate campaigning in a task until it is shut down, recording
/// every term it leads in a [`History`] (begin when the guard is in hand,
/// end at the instant the guard says it ended) and in its own list. A term
/// that ends is given up at once, as work that stopped would.
struct Running {
    candidate: Candidate<PostgresStore>,
    leading: watch::Receiver<Option<Leading>>,
    terms: Arc<Mutex<Vec<Term>>>,
    /// Why its campaign stopped other than by shutdown: an error the core
    /// took for permanent, which leaves the candidate out for good.
    failed: watch::Receiver<Option<String>>,
    task: JoinHandle<()>,
}

impl Running {
    fn spawn(candidate: Candidate<PostgresStore>, history: &History) -> Self {
        let (c, history) = (candidate.clone(), history.clone());
        let (leading_tx, leading) = watch::channel(None);
        let (failed_tx, failed) = watch::channel(None);
        let terms = Arc::new(Mutex::new(Vec::new()));
        let record = terms.clone();
        let task = tokio::spawn(async move {
            loop {
                match c.campaign().await {
                    Ok(leadership) => {
                        history.begin_leadership(&leadership);
                        leading_tx.send_replace(Some(Leading {
                            token: leadership.token(),
                            lease_state: leadership.lease_state(),
                        }));
                        let ended = leadership.until_ended().await;
                        history.end_leadership(&leadership);
                        let state = *leadership.lease_state().borrow();
                        lock(&record).push(Term {
                            holder: leadership.holder().clone(),
                            token: leadership.token(),
                            ended,
                            step_down_at: state.step_down_at,
                            deadline: state.deadline,
                        });
                        leading_tx.send_replace(None);
                        drop(leadership);
                    }
                    Err(CampaignError::Shutdown) => break,
                    Err(e) => {
                        failed_tx.send_replace(Some(format!(
                            "the campaign of {} failed for good: {}",
                            c.holder(),
                            regent_core::report(&e)
                        )));
                        break;
                    }
                }
            }
        });
        Self {
            candidate,
            leading,
            terms,
            failed,
            task,
        }
    }

    fn holder(&self) -> &HolderId {
        self.candidate.holder()
    }

    fn terms(&self) -> Vec<Term> {
        lock(&self.terms).clone()
    }

    fn failure(&self) -> Option<String> {
        self.failed.borrow().clone()
    }

    /// Waits up to `within` until what it leads is `wanted`; returns that.
    ///
    /// # Panics
    ///
    /// With `what` if it does not, or at once if its campaign failed.
    async fn until(
        &self,
        within: Duration,
        what: &str,
        wanted: impl Fn(&Option<Leading>) -> bool,
    ) -> Option<Leading> {
        let (mut leading, mut failed) = (self.leading.clone(), self.failed.clone());
        let gone = || format!("the task of {} ended", self.holder());
        let waited = timeout(within, async {
            // Each `Ref` is copied out at once: held, it would block the
            // candidate's task, which sends on these channels.
            tokio::select! {
                biased;
                r = failed.wait_for(Option::is_some) => {
                    Err(r.map_or_else(|_| gone(), |f| f.clone().unwrap_or_default()))
                }
                r = leading.wait_for(|l| wanted(l)) => r.map(|l| l.clone()).map_err(|_| gone()),
            }
        })
        .await;
        match waited {
            Ok(Ok(leading)) => leading,
            Ok(Err(failure)) => panic!("{failure} (while waiting until {what})"),
            Err(_) => panic!(
                "{}: not within {within:?}: {what} (its status: {:?}){}",
                self.holder(),
                *self.candidate.status().borrow(),
                self.failure()
                    .map_or_else(String::new, |f| format!("; {f}"))
            ),
        }
    }

    /// Waits up to `within` until its term `token` has ended; returns it.
    async fn until_term_ends(&self, token: FencingToken, within: Duration) -> Term {
        let what = format!("its term {token} ends");
        self.until(within, &what, |l| {
            l.as_ref().is_none_or(|l| l.token != token)
        })
        .await;
        self.terms()
            .into_iter()
            .find(|t| t.token == token)
            .expect("a term that ended is recorded")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits up to `within` until one of `running` leads; returns its index
/// and term.
async fn first_leading(running: &[&Running], within: Duration, what: &str) -> (usize, Leading) {
    let waits = running.iter().enumerate().map(|(i, r)| {
        Box::pin(async move {
            let leading = r.until(within, what, Option::is_some).await;
            (i, leading.expect("waited for it"))
        })
    });
    let (first, _, _) = futures_util::future::select_all(waits).await;
    first
}

/// Waits until `c` follows the term of `holder` with `token`: its status
/// names it.
async fn until_following(c: &Candidate<PostgresStore>, holder: &str, token: FencingToken) {
    let mut status = c.status();
    timeout(
        WAIT,
        status.wait_for(|s| {
            matches!(s, Status::Follower { leader: Some(l) }
                if l.holder.as_str() == holder && l.token == token)
        }),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} does not follow {holder}'s term {token} within {WAIT:?}: {:?}",
            c.holder(),
            *c.status().borrow()
        )
    })
    .expect("the candidate lives");
}

/// Shuts every candidate down at once and waits for their tasks; no
/// campaign may have failed for good on the way.
async fn shut_down(running: Vec<Running>) {
    for r in &running {
        r.candidate.shutdown_token().cancel();
    }
    let failures: Vec<String> = running.iter().filter_map(Running::failure).collect();
    for r in running {
        let holder = r.holder().clone();
        timeout(WAIT, r.task)
            .await
            .unwrap_or_else(|_| panic!("{holder} did not stop within {WAIT:?}"))
            .unwrap_or_else(|e| panic!("the task of {holder} failed: {e}"));
    }
    assert!(
        failures.is_empty(),
        "a campaign stopped on an error the core took for permanent: {failures:#?}"
    );
}

/// Two candidates on `url`, each with a store of its own: `a` leads and
/// has renewed once, `b` campaigns and follows it.
async fn two_candidates(url: &str, e: &ElectionName, history: &History) -> (Running, Running) {
    let a = Running::spawn(candidate(store(url).await, e, "a"), history);
    let leading = a
        .until(WAIT, "a leads a free election", Option::is_some)
        .await;
    let leading = leading.expect("waited for it");
    let b = Running::spawn(candidate(store(url).await, e, "b"), history);
    until_following(&b.candidate, "a", leading.token).await;
    let mut state = leading.lease_state.clone();
    let won = state.borrow_and_update().step_down_at;
    timeout(WAIT, state.wait_for(|s| s.step_down_at > won))
        .await
        .expect("a renews its term")
        .expect("the leadership lives");
    (a, b)
}

/// `at` relative to `origin`, signed, for messages.
fn since(origin: Instant, at: Instant) -> String {
    match at.checked_duration_since(origin) {
        Some(after) => format!("+{after:.3?}"),
        None => format!("-{:.3?}", origin - at),
    }
}

/// Checks that `term` ended on its own clock, by its renew deadline (and so
/// before its local lease deadline, before which the server cannot give the
/// row to anyone else).
fn assert_stepped_down_by_its_deadline(term: &Term, fault_at: Instant, what: &str) {
    assert_eq!(
        term.ended.reason,
        EndReason::DeadlinePassed,
        "{}'s term {} ended {} after the server was {what} with \"{}\", not at its renew \
         deadline: {term:?}",
        term.holder,
        term.token,
        since(fault_at, term.ended.at),
        term.ended.reason,
    );
    assert!(
        term.ended.at <= term.step_down_at + LATE,
        "{} stepped down {} after the server was {what}, due {} after it",
        term.holder,
        since(fault_at, term.ended.at),
        since(fault_at, term.step_down_at)
    );
    assert!(
        term.ended.at < term.deadline,
        "{} stepped down {} after the server was {what}, after its local lease deadline ({})",
        term.holder,
        since(fault_at, term.ended.at),
        since(fault_at, term.deadline)
    );
}

/// After an outage that began at `fault_at` and was over at `back`: the
/// term `leading` of `r` either goes on, confirmed by a renewal sent after
/// `back` (`None`), or stepped down by its renew deadline (the term).
async fn kept_or_stepped_down(
    r: &Running,
    leading: &Leading,
    fault_at: Instant,
    back: Instant,
    what: &str,
) -> Option<Term> {
    let mut state = leading.lease_state.clone();
    let state = *timeout(
        WAIT,
        state.wait_for(|s| s.ended.is_some() || s.step_down_at >= back + RENEW_DEADLINE),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{}'s term {} neither renewed nor ended within {WAIT:?} of the server being {what}",
            r.holder(),
            leading.token
        )
    })
    .expect("the leadership lives");
    // Not ended: a renewal sent after the outage was confirmed.
    state.ended?;
    let term = r.until_term_ends(leading.token, WAIT).await;
    assert_stepped_down_by_its_deadline(&term, fault_at, what);
    Some(term)
}

/// What [`kept_or_stepped_down`] found, for the log.
fn outcome_text(stepped_down: Option<&Term>, fault_at: Instant) -> String {
    match stepped_down {
        None => "was kept (renewed after the outage)".to_owned(),
        Some(term) => format!(
            "stepped down {} after the fault ({})",
            since(fault_at, term.ended.at),
            term.ended.reason
        ),
    }
}

/// After a recovery: one of `a` and `b` leads with a token of at least
/// `old` (the same term, if it was kept), and the other follows that term;
/// then the leader shuts down, and the other leads at once with a token
/// above every earlier one. Both stop; the history has one leader at a
/// time and tokens that grow. Returns the largest token.
async fn one_leads_then_hands_over(
    a: Running,
    b: Running,
    old: FencingToken,
    history: &History,
    what: &str,
) -> FencingToken {
    let (i, leading) = first_leading(&[&a, &b], WAIT, &format!("one leads after {what}")).await;
    assert!(
        leading.token >= old,
        "a term {} after {what}, {old} before",
        leading.token
    );
    let (leader, other) = if i == 0 { (a, b) } else { (b, a) };
    let leader_name = leader.holder().to_string();
    until_following(&other.candidate, &leader_name, leading.token).await;

    // A graceful hand-over: the store works as before, and the next term's
    // token is above every one before.
    leader.candidate.shutdown().await;
    let next = other
        .until(WAIT, "the other leads after the hand-over", Option::is_some)
        .await
        .expect("waited for it");
    let earlier = history
        .intervals()
        .into_iter()
        .filter(|i| i.token != next.token)
        .map(|i| i.token)
        .max()
        .expect("earlier terms");
    assert!(
        next.token > earlier,
        "the term after {what} and a hand-over has token {}, an earlier one {earlier}",
        next.token
    );
    shut_down(vec![leader, other]).await;
    let summary = history.assert_ok();
    summary.max_token.expect("terms")
}

// ------------------------------------------------------------ server faults

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restarted_under_a_leader_keeps_the_term_or_steps_down_by_its_deadline() {
    let mut pg = own_server();
    let url = pg.store_url();
    let e = election("restarted");
    let history = History::new();
    let (a, b) = two_candidates(&url, &e, &history).await;
    let leading = a.leading.borrow().clone().expect("a leads");

    // Fast shutdown (clients disconnected, a checkpoint), then a start on
    // the same data and port.
    let fault_at = Instant::now();
    block_in_place(|| pg.restart()).unwrap_or_else(|err| panic!("restart the server: {err}"));
    let back = Instant::now();
    let outcome = kept_or_stepped_down(&a, &leading, fault_at, back, "restarted").await;
    eprintln!(
        "server restarted in {:.3?}: a's term {} {}",
        back - fault_at,
        leading.token,
        outcome_text(outcome.as_ref(), fault_at)
    );
    // The row and the counter were kept: nothing issued before is issued
    // again.
    assert!(counter(&url, &e).await >= i64::try_from(leading.token.get()).unwrap());
    one_leads_then_hands_over(a, b, leading.token, &history, "the restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_paused_past_the_ttl_the_leader_steps_down_by_its_deadline_and_one_leads_after() {
    let mut pg = own_server();
    let url = pg.store_url();
    let e = election("paused");
    let history = History::new();
    let (a, b) = two_candidates(&url, &e, &history).await;
    let leading = a.leading.borrow().clone().expect("a leads");

    let paused_at = Instant::now();
    block_in_place(|| pg.pause());
    let down = Instant::now();
    // Renewals hang on the paused server (the store has no call timeout of
    // its own): the leader steps down on its own clock all the same.
    let term = a.until_term_ends(leading.token, WAIT).await;
    assert_stepped_down_by_its_deadline(&term, paused_at, "paused");
    assert!(
        term.step_down_at - RENEW_DEADLINE <= down,
        "a renewal sent {} after the pause was confirmed by a paused server",
        since(down, term.step_down_at - RENEW_DEADLINE)
    );
    // Nobody leads while the server is paused: no answer, no term.
    assert!(b.leading.borrow().is_none() && a.leading.borrow().is_none());

    // Paused for longer than the ttl: the row has expired by the server's
    // clock when it runs again.
    tokio::time::sleep_until(paused_at + TTL + LATE).await;
    assert!(
        b.leading.borrow().is_none() && a.leading.borrow().is_none(),
        "someone leads on a paused server"
    );
    assert!(
        !a.candidate.status().borrow().is_leader(),
        "a's status still says it leads: {:?}",
        *a.candidate.status().borrow()
    );
    let resumed_at = Instant::now();
    assert!(term.ended.at < resumed_at);
    block_in_place(|| pg.resume());
    eprintln!(
        "server paused for {:.3?}: a stepped down {} after the pause ({:?})",
        resumed_at - paused_at,
        since(paused_at, term.ended.at),
        term.ended.reason
    );
    let max = one_leads_then_hands_over(a, b, leading.token, &history, "the resume").await;
    assert!(max > leading.token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_killed_the_leader_steps_down_by_its_deadline_and_the_counter_survives_the_crash() {
    let mut pg = own_server();
    let url = pg.store_url();
    let e = election("killed");
    let history = History::new();
    let (a, b) = two_candidates(&url, &e, &history).await;
    let leading = a.leading.borrow().clone().expect("a leads");

    let killed_at = Instant::now();
    block_in_place(|| pg.kill());
    // Renewals fail (the connection is reset, new ones refused) and are
    // retried until the leader's own deadline.
    let term = a.until_term_ends(leading.token, WAIT).await;
    assert_stepped_down_by_its_deadline(&term, killed_at, "killed");
    assert!(b.leading.borrow().is_none() && a.leading.borrow().is_none());

    let restarting = Instant::now();
    block_in_place(|| pg.restart()).unwrap_or_else(|err| panic!("recover the server: {err}"));
    eprintln!(
        "server killed: a stepped down {} after the kill; crash recovery took {:.3?}",
        since(killed_at, term.ended.at),
        restarting.elapsed()
    );
    // Every acknowledged commit survived the crash: the counter is at the
    // last token issued, or beyond.
    let last = counter(&url, &e).await;
    assert!(
        last >= i64::try_from(leading.token.get()).unwrap(),
        "the counter is {last} after the crash, token {} was issued before it",
        leading.token
    );
    let max = one_leads_then_hands_over(a, b, leading.token, &history, "the recovery").await;
    assert!(max > leading.token);
}

/// The client backends connected to the server's database, but the
/// kit's own.
fn client_backends(pg: &Postgres) -> usize {
    block_in_place(|| {
        pg.psql(
            "select count(*) from pg_stat_activity \
             where backend_type = 'client backend' and pid <> pg_backend_pid()",
        )
    })
    .unwrap_or_else(|e| panic!("count the backends: {e}"))
    .trim()
    .parse()
    .expect("a count")
}

/// A watch stream whose consumer stopped polling it while its read was
/// connecting again (a candidate keeps its watch while it tries to
/// acquire, and polls it only between tries) must not hold up the store's
/// other calls: they share the store's connection, and each must go
/// through once the server answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_left_unpolled_while_reconnecting_never_blocks_the_stores_other_calls() {
    use futures_util::StreamExt as _;
    let mut pg = own_server();
    let e = election("parked-watch");
    let s = PostgresStore::builder(pg.store_url().parse().unwrap())
        .poll_interval(Duration::from_millis(100))
        .listen_on(None)
        .build()
        .await
        .unwrap();
    let mut watch = s.watch(&e).await.unwrap();
    assert_eq!(watch.next().await.unwrap().unwrap(), None);

    // The store's connection ends (its only one: no listening connection);
    // once its backend is gone, the server is paused.
    assert_eq!(
        block_in_place(|| pg.terminate_backends()).expect("terminate"),
        1
    );
    let deadline = Instant::now() + WAIT;
    while client_backends(&pg) > 0 {
        assert!(Instant::now() < deadline, "the backend does not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    block_in_place(|| pg.pause());
    // The watch's next read connects again and gets no answer; its consumer
    // stops waiting, and keeps the stream. (A read that still met the
    // closed connection fails first, as unavailable.)
    let mut parked = false;
    for _ in 0..5 {
        match timeout(Duration::from_secs(1), watch.next()).await {
            Err(_) => {
                parked = true;
                break;
            }
            Ok(Some(Err(err))) if err.is_transient() => {}
            Ok(other) => panic!("a read of a paused server answered {other:?}"),
        }
    }
    assert!(parked, "the watch's read never waited on the paused server");
    block_in_place(|| pg.resume());

    // The server answers again: a call of the store's own goes through.
    let read = timeout(WAIT, s.current_leader(&e)).await;
    assert!(
        matches!(read, Ok(Ok(None))),
        "the store's read {}, {WAIT:?} after the server was resumed, while a watch stream it \
         made is left unpolled: {read:?}",
        if read.is_err() { "hangs" } else { "failed" }
    );
    drop(watch);
}

// ---------------------------------------------------------- PgBouncer faults

/// A store through PgBouncer, its watches listening straight to the server
/// (as the crate docs ask of a pooler in transaction mode).
async fn pooled_store(engine: &PostgresBehindPgBouncer) -> PostgresStore {
    let direct: regent_postgres::Config = engine.postgres().store_url().parse().unwrap();
    PostgresStore::builder(engine.pgbouncer().store_url().parse().unwrap())
        .listen_on(Some(direct))
        .build()
        .await
        .unwrap_or_else(|e| panic!("connect a store through PgBouncer: {e}"))
}

async fn two_pooled_candidates(
    engine: &PostgresBehindPgBouncer,
    e: &ElectionName,
    history: &History,
) -> (Running, Running) {
    let a = Running::spawn(candidate(pooled_store(engine).await, e, "a"), history);
    let leading = a
        .until(WAIT, "a leads a free election", Option::is_some)
        .await
        .expect("waited for it");
    let b = Running::spawn(candidate(pooled_store(engine).await, e, "b"), history);
    until_following(&b.candidate, "a", leading.token).await;
    let mut state = leading.lease_state.clone();
    let won = state.borrow_and_update().step_down_at;
    timeout(WAIT, state.wait_for(|s| s.step_down_at > won))
        .await
        .expect("a renews its term")
        .expect("the leadership lives");
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_restarted_under_a_leader_keeps_the_term_or_steps_down_by_its_deadline() {
    let mut engine = behind_pgbouncer();
    let e = election("pooler-restarted");
    let history = History::new();
    let (a, b) = two_pooled_candidates(&engine, &e, &history).await;
    let leading = a.leading.borrow().clone().expect("a leads");

    // SIGTERM (PgBouncer's immediate shutdown: every client connection is
    // cut), then a start on the same port.
    let fault_at = Instant::now();
    block_in_place(|| engine.pgbouncer_mut().restart())
        .unwrap_or_else(|err| panic!("restart PgBouncer: {err}"));
    let back = Instant::now();
    let outcome =
        kept_or_stepped_down(&a, &leading, fault_at, back, "behind a restarted pooler").await;
    eprintln!(
        "PgBouncer restarted in {:.3?}: a's term {} {}",
        back - fault_at,
        leading.token,
        outcome_text(outcome.as_ref(), fault_at)
    );
    one_leads_then_hands_over(a, b, leading.token, &history, "the pooler's restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_killed_the_leader_steps_down_by_its_deadline_and_one_leads_after_its_restart() {
    let mut engine = behind_pgbouncer();
    let e = election("pooler-killed");
    let history = History::new();
    let (a, b) = two_pooled_candidates(&engine, &e, &history).await;
    let leading = a.leading.borrow().clone().expect("a leads");

    let killed_at = Instant::now();
    block_in_place(|| engine.pgbouncer_mut().kill());
    // Every connection through it is cut and new ones are refused; the
    // server runs on, holding a's row until it expires.
    let term = a.until_term_ends(leading.token, WAIT).await;
    assert_stepped_down_by_its_deadline(&term, killed_at, "out of reach (PgBouncer killed)");
    assert!(b.leading.borrow().is_none() && a.leading.borrow().is_none());

    block_in_place(|| engine.pgbouncer_mut().restart())
        .unwrap_or_else(|err| panic!("start PgBouncer again: {err}"));
    eprintln!(
        "PgBouncer killed: a stepped down {} after the kill",
        since(killed_at, term.ended.at)
    );
    let max = one_leads_then_hands_over(a, b, leading.token, &history, "PgBouncer's return").await;
    assert!(max > leading.token);
}

// ------------------------------------------------------ terminated backends

/// The PIDs of the backends listening for the store's notifications.
fn listening_backends(pg: &Postgres) -> Vec<String> {
    let out = block_in_place(|| {
        pg.psql(
            "select pid from pg_stat_activity \
             where backend_type = 'client backend' and query = 'LISTEN regent_leases'",
        )
    })
    .unwrap_or_else(|e| panic!("list the listening backends: {e}"));
    out.lines().map(str::to_owned).collect()
}

/// What `failover.rs` does not cover: a candidate, not one store call, and
/// the follower's listening connection, which the termination ends too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_terminated_the_leader_keeps_its_term_and_a_release_still_wakes_the_follower() {
    let pg = own_server();
    let url = pg.store_url();
    let e = election("terminated");
    let a = candidate(store(&url).await, &e, "a");
    // b polls and retries once in two minutes: within the test's bounds
    // only a notification can wake it.
    let deaf = Duration::from_secs(120);
    let b_store = PostgresStore::builder(url.parse().unwrap())
        .poll_interval(deaf)
        .build()
        .await
        .unwrap();
    let b = Candidate::builder(b_store, e.clone(), holder("b"))
        .ttl(TTL)
        .renew_every(RENEW_EVERY)
        .renew_deadline(RENEW_DEADLINE)
        .grace(GRACE)
        .retry_every(deaf)
        .build()
        .expect("valid timing");
    let a_leads = timeout(WAIT, a.campaign())
        .await
        .expect("a leads at once")
        .expect("a leads");
    let b_campaign = {
        let b = b.clone();
        tokio::spawn(async move { b.campaign().await })
    };
    until_following(&b, "a", a_leads.token()).await;
    let deadline = Instant::now() + WAIT;
    let before = loop {
        let listening = listening_backends(&pg);
        if !listening.is_empty() {
            break listening;
        }
        assert!(Instant::now() < deadline, "b's watch never listens");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let terminated_at = Instant::now();
    let n = block_in_place(|| pg.terminate_backends()).expect("terminate the backends");
    assert!(
        n >= 3,
        "terminated {n} backends: a's, b's and b's listening one at least"
    );
    // a renews on a new connection (a renewal that met the dying one fails
    // as unavailable, and is retried) well before its deadline.
    let mut state = a_leads.lease_state();
    let state = *timeout(
        WAIT,
        state.wait_for(|s| s.ended.is_some() || s.step_down_at >= terminated_at + RENEW_DEADLINE),
    )
    .await
    .expect("a renews or ends")
    .expect("the leadership lives");
    assert_eq!(
        state.ended, None,
        "a's term ended when its backend was terminated"
    );
    assert!(a_leads.check().is_ok());

    // b's store listens again on a new connection.
    let deadline = Instant::now() + WAIT;
    loop {
        let listening = listening_backends(&pg);
        if listening.iter().any(|pid| !before.contains(pid)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "b's watch does not listen again within {WAIT:?} of the termination"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let token = a_leads.token();
    let resigned_at = Instant::now();
    a_leads.resign().await.expect("the release goes through");
    let b_leads = timeout(WAIT, b_campaign)
        .await
        .unwrap_or_else(|_| panic!("b is not woken by a's release within {WAIT:?}"))
        .expect("the campaign task ran")
        .expect("b leads");
    eprintln!(
        "backends terminated: a renewed on a new connection; b led {:.3?} after a's release",
        resigned_at.elapsed()
    );
    assert!(b_leads.token() > token);
    b_leads.resign().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

// ---------------------------------------------------- the row under a leader

/// The operator runs `rewrite` (with `{election}` for the election's name)
/// on the row of a leading `a` while `b` follows: `a` learns at its next
/// renewal that its term is lost, and the next term, whoever wins it, has
/// a larger token. (A row an operator deletes or expires is free at once:
/// `b` may win before `a`'s next renewal, and only the fencing token then
/// tells their writes apart; the history is not checked for overlaps.)
async fn rewritten_under_the_leader(name: &str, rewrite: &str) {
    let pg = shared_server();
    let url = pg.store_url();
    let e = election(&common::unique(name));
    let history = History::new();
    let (a, b) = two_candidates(&url, &e, &history).await;
    let leading = a.leading.borrow().clone().expect("a leads");

    let sql = rewrite.replace("{election}", e.as_str());
    assert_eq!(operate(&url, &sql).await, 1, "{sql}");
    // Committed: a's next renewal sees it.
    let written_at = Instant::now();
    let term = a.until_term_ends(leading.token, WAIT).await;
    assert_eq!(
        term.ended.reason,
        EndReason::Lost,
        "after {sql:?} a's term ended {} after it: {term:?}",
        since(written_at, term.ended.at)
    );
    assert!(
        term.ended.at <= written_at + RENEW_EVERY + LATE,
        "a learned {} after {sql:?} that its term was lost, not at its next renewal",
        since(written_at, term.ended.at)
    );
    // a's lost term is over in its record: whoever leads now leads a new
    // term.
    let (_, next) = first_leading(&[&a, &b], WAIT, &format!("one leads after {sql:?}")).await;
    eprintln!(
        "{sql}: a's term lost {} after it; the next term has token {} (a's was {})",
        since(written_at, term.ended.at),
        next.token,
        leading.token
    );
    assert!(
        next.token > leading.token,
        "the term after a lost one has token {}, the lost one {}",
        next.token,
        leading.token
    );
    shut_down(vec![a, b]).await;
    // Tokens grow with every term's start, whoever held it.
    let mut intervals = history.intervals();
    intervals.sort_by_key(|i| i.start);
    assert!(
        intervals.windows(2).all(|w| w[0].token < w[1].token),
        "{intervals:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_deleted_under_the_leader_its_next_renewal_is_lost() {
    rewritten_under_the_leader(
        "deleted",
        "DELETE FROM regent_leases WHERE election = '{election}'",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_given_to_another_holder_the_leader_loses_at_its_next_renewal() {
    rewritten_under_the_leader(
        "reassigned",
        "UPDATE regent_leases SET holder = 'mallory' WHERE election = '{election}'",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_token_lowered_the_leader_loses_at_its_next_renewal() {
    rewritten_under_the_leader(
        "lowered",
        "UPDATE regent_leases SET token = token - 1 WHERE election = '{election}'",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_expired_by_an_operator_the_leader_loses_at_its_next_renewal() {
    rewritten_under_the_leader(
        "expired",
        "UPDATE regent_leases SET expires_at = now() - interval '1 second' \
         WHERE election = '{election}'",
    )
    .await;
}

// ------------------------------------------------------- garbage in the table

/// Rows an operator or another program wrote, which the schema allows but
/// regent never writes: a reader gets `Corrupt` naming the problem (a
/// watch too, at its first read), an acquire leaves the live row alone
/// (never a takeover) and takes it once it has expired, with a token above
/// the counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_rows_are_corrupt_to_readers_and_never_taken_over_while_live() {
    let pg = shared_server();
    let url = pg.store_url();
    let s = store(&url).await;
    for (i, (holder, token, metadata, says)) in [
        ("", "7", "'{}'", "holder \"\""),
        ("x y", "7", "'{}'", "holder \"x y\""),
        ("x", "0", "'{}'", "token 0 is not a fencing token"),
        ("x", "-42", "'{}'", "token -42 is not a fencing token"),
        ("x", "7", "'not json'", "metadata is not JSON"),
        ("x", "7", "'[1]'", "not a JSON object"),
        ("x", "7", r#"'{"k": 1}'"#, "not a string"),
    ]
    .into_iter()
    .enumerate()
    {
        let e = election(&common::unique(&format!("garbage{i}")));
        operate(
            &url,
            &format!(
                "INSERT INTO regent_leases (election, holder, token, expires_at, ttl_ms, metadata)
                 VALUES ('{e}', '{holder}', {token}, now() + interval '1 hour', -5, {metadata})"
            ),
        )
        .await;
        let err = s.current_leader(&e).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        assert!(err.to_string().contains(says), "{says:?} not in: {err}");
        assert!(err.to_string().contains(e.as_str()), "{err}");
        let err = match s.watch(&e).await {
            Ok(_) => panic!("a watch of garbage ({says}) opened"),
            Err(err) => err,
        };
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
        match s
            .try_acquire(&acquire_request(&e, "b", TTL), None)
            .await
            .unwrap_or_else(|err| panic!("acquire over garbage ({says}): {err}"))
        {
            Acquire::Held { leader: None, .. } => {}
            other => panic!("a live garbage row ({says}) was answered with {other:?}"),
        }
        // Expired, the garbage is anybody's: taken over with a token of the
        // counter's, above every token before.
        operate(
            &url,
            &format!(
                "UPDATE regent_leases SET expires_at = now() - interval '1 second' \
                 WHERE election = '{e}'"
            ),
        )
        .await;
        let Acquire::Won(lease) = s
            .try_acquire(&acquire_request(&e, "b", TTL), None)
            .await
            .unwrap_or_else(|err| panic!("acquire over expired garbage ({says}): {err}"))
        else {
            panic!("expired garbage ({says}) was not taken over");
        };
        assert!(lease.token.get() > 7);
        let leader = s.current_leader(&e).await.unwrap().expect("b leads");
        assert_eq!((leader.holder.as_str(), leader.token), ("b", lease.token));
        assert_eq!(s.renew(&lease).await.unwrap(), Renewal::Renewed);
        s.release(&lease).await.unwrap();
    }
}

/// A counter at the largest bigint (an operator's, or a restore's): the
/// next acquire is `Corrupt` (the sum is out of range), never a wrapped or
/// negative token; the row stays free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_at_the_largest_bigint_is_corrupt_not_a_wrapped_token() {
    let pg = shared_server();
    let url = pg.store_url();
    let s = store(&url).await;
    let e = election(&common::unique("overflow"));
    let Acquire::Won(first) = s
        .try_acquire(&acquire_request(&e, "a", TTL), None)
        .await
        .unwrap()
    else {
        panic!("a free election was not won");
    };
    s.release(&first).await.unwrap();
    operate(
        &url,
        &format!(
            "UPDATE regent_tokens SET last = {} WHERE election = '{e}'",
            i64::MAX
        ),
    )
    .await;
    let err = s
        .try_acquire(&acquire_request(&e, "b", TTL), None)
        .await
        .expect_err("no token follows the largest bigint");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    let report = regent_core::report(&err).to_string();
    assert!(report.contains("out of range"), "{report}");
    assert!(report.contains(e.as_str()), "{report}");
    assert_eq!(s.current_leader(&e).await.unwrap(), None);
    assert_eq!(counter(&url, &e).await, i64::MAX);
}

/// `ttl_ms` rewritten under a leader (the schema allows any bigint): a
/// renewal either fails (lost, or an error) or leaves the row the
/// leader's for at least the ttl it counts on (its lease's, from the
/// instant it sent the renewal). It must never answer `Renewed` while
/// leaving a row that is free at once: the leader would lead on while
/// another candidate wins the row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_ttl_never_lets_a_renewal_leave_the_row_free() {
    let pg = shared_server();
    let url = pg.store_url();
    let (s, other) = (store(&url).await, store(&url).await);
    let mut failures = Vec::new();
    // (A small positive ttl_ms, 1 ms say, does the same, but whether the
    // row has expired by the next read depends on the timing.)
    for ttl_ms in [-1000_i64, 0, i64::MAX] {
        let e = election(&common::unique("ttl-rewritten"));
        let Acquire::Won(lease) = s
            .try_acquire(&acquire_request(&e, "a", TTL), None)
            .await
            .unwrap()
        else {
            panic!("a free election was not won");
        };
        operate(
            &url,
            &format!("UPDATE regent_leases SET ttl_ms = {ttl_ms} WHERE election = '{e}'"),
        )
        .await;
        let sent = Instant::now();
        let renewed = s.renew(&lease).await;
        eprintln!(
            "ttl_ms {ttl_ms} under a leader: its renewal answered {}",
            match &renewed {
                Ok(r) => format!("{r:?}"),
                Err(err) => regent_core::report(err).to_string(),
            }
        );
        match &renewed {
            Ok(Renewal::Lost) => continue,
            Err(err) => {
                assert_eq!(err.kind(), ErrorKind::Corrupt, "ttl_ms {ttl_ms}: {err}");
                continue;
            }
            Ok(Renewal::Renewed) => {}
        }
        // Renewed: a believes it leads until `sent` + its usable ttl.
        let leader = s.current_leader(&e).await.unwrap();
        let taken = other
            .try_acquire(&acquire_request(&e, "b", TTL), None)
            .await
            .unwrap();
        let checked = sent.elapsed();
        assert!(
            checked < TTL / 2,
            "ttl_ms {ttl_ms}: two reads took {checked:?}, too slow to tell"
        );
        let still_a = leader
            .as_ref()
            .is_some_and(|l| l.holder.as_str() == "a" && l.token == lease.token);
        if !still_a || matches!(taken, Acquire::Won(_)) {
            failures.push(format!(
                "ttl_ms {ttl_ms}: the renewal answered {renewed:?}, yet {checked:.3?} after it \
                 was sent the leader read back is {leader:?} and b's acquire got {taken:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "a renewal reported a lease the row no longer gives: two leaders:\n{}",
        failures.join("\n")
    );
}
