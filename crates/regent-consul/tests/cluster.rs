//! The Consul store on a real cluster (three servers, one client agent per
//! candidate, from the test kit), under faults:
//!
//! * the Raft-leader server is killed while a regent leader holds the
//!   election: never two regent leaders, tokens never go back, and a regent
//!   leader renews (or acquires) through the new Raft leader;
//! * the regent leader's own agent is paused (SIGSTOP): the leader steps
//!   down at its renew deadline, and a follower leads only once Consul has
//!   invalidated the old session;
//! * the regent leader's own agent is stopped and stays down past the
//!   leader's renew deadline, then restarts: the leader steps down at its
//!   deadline, a follower leads once Consul has invalidated the old
//!   session, and the old leader, campaigning all along, follows it once
//!   its agent is back;
//! * a candidate joins and a follower leaves while one leads: the leader
//!   stays.
//!
//! The tests of this binary share one cluster while any of them runs (the
//! harness runs them in parallel); each has client agents and an election
//! of its own ([`KILL_AGENTS`], [`PAUSE_AGENTS`], [`MEMBERSHIP_AGENTS`],
//! [`RESTART_AGENTS`]).
//! Killing the Raft leader is felt by every test: a Raft election of a
//! second or two, which the store's retries and the renew deadline absorb.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use regent_consul::ConsulStore;
use regent_core::{
    Candidate, ElectionName, EndReason, Ended, FencingToken, HolderId, LeaseState, Status,
};
use regent_testkit::engines::ConsulCluster;
use regent_testkit::fixtures::{first_watched, holder};
use regent_testkit::{History, Interval};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Consul's shortest session TTL.
const TTL: Duration = Duration::from_secs(10);
const RENEW_EVERY: Duration = Duration::from_secs(1);
const RENEW_DEADLINE: Duration = Duration::from_secs(6);
/// Below the renew deadline, above a Raft election with
/// `raft_multiplier = 1`.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How late a timer may fire on a busy two-core machine (three servers
/// and eleven agents run beside the tests).
const SCHEDULING: Duration = Duration::from_secs(1);
/// Bound on a Raft election among the surviving servers.
const RAFT_ELECTION: Duration = Duration::from_secs(15);

/// Client agents of each test: one per candidate.
const KILL_AGENTS: Range<usize> = 0..3;
const PAUSE_AGENTS: Range<usize> = 3..6;
const MEMBERSHIP_AGENTS: Range<usize> = 6..9;
const RESTART_AGENTS: Range<usize> = 9..11;
const AGENTS: usize = RESTART_AGENTS.end;

/// Consul invalidates a session between one and two TTLs after its last
/// renewal arrived, and a new Raft leader restarts every session's timer:
/// the longest the election may stay without a regent leader after a fault
/// (plus a Raft election, an acquire and scheduling).
fn max_gap() -> Duration {
    TTL * 2 + RAFT_ELECTION + Duration::from_secs(3)
}

type Shared = Arc<Mutex<ConsulCluster>>;

/// The cluster the running tests share; started by the first, stopped when
/// the last drops it.
static CLUSTER: Mutex<Weak<Mutex<ConsulCluster>>> = Mutex::new(Weak::new());

async fn cluster() -> Shared {
    tokio::task::spawn_blocking(|| {
        let mut shared = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cluster) = shared.upgrade() {
            return cluster;
        }
        let cluster = Arc::new(Mutex::new(ConsulCluster::start(AGENTS).unwrap_or_else(
            |e| panic!("cannot start a Consul cluster with {AGENTS} agents: {e}"),
        )));
        *shared = Arc::downgrade(&cluster);
        cluster
    })
    .await
    .expect("the start task ran")
}

/// The cluster, to read or to inject a fault; call it in `block_in_place`.
fn lock(cluster: &Shared) -> MutexGuard<'_, ConsulCluster> {
    cluster.lock().unwrap_or_else(|e| e.into_inner())
}

fn agent_address(cluster: &Shared, i: usize) -> String {
    tokio::task::block_in_place(|| lock(cluster).agent(i).address())
}

/// A candidate whose store talks to client agent `agent` only.
fn candidate(
    cluster: &Shared,
    agent: usize,
    election: &ElectionName,
    who: &str,
) -> Candidate<ConsulStore> {
    let store = ConsulStore::builder(agent_address(cluster, agent))
        .call_timeout(CALL_TIMEOUT)
        .build()
        .expect("build the store");
    Candidate::builder(store, election.clone(), holder(who))
        .ttl(TTL)
        .renew_every(RENEW_EVERY)
        .renew_deadline(RENEW_DEADLINE)
        .grace(Duration::from_millis(200))
        .build()
        .expect("valid timing")
}

fn election(name: &str) -> ElectionName {
    ElectionName::new(name).expect("valid election name")
}

/// A term a candidate leads in.
#[derive(Clone, Debug)]
struct Term {
    token: FencingToken,
    /// The Consul session of the term.
    session: String,
    /// Its lease state: `step_down_at` moves on with every renewal.
    state: watch::Receiver<LeaseState>,
}

impl Term {
    /// Whether a renewal (or the acquire) sent at or after `at` succeeded.
    fn confirmed_since(&self, at: Instant) -> bool {
        self.state.borrow().step_down_at >= at + RENEW_DEADLINE
    }
}

/// A candidate campaigning in a task until it is shut down.
struct Running {
    candidate: Candidate<ConsulStore>,
    /// The term it leads in, set once the term's begin is in the history
    /// and cleared once its end is.
    leading: watch::Receiver<Option<Term>>,
    /// How each of its terms ended.
    task: JoinHandle<Vec<Ended>>,
}

impl Running {
    /// Campaigns again after every term, recording each term in `history`.
    fn spawn(candidate: Candidate<ConsulStore>, history: &History) -> Self {
        let (c, history) = (candidate.clone(), history.clone());
        let (leading_tx, leading) = watch::channel(None);
        let task = tokio::spawn(async move {
            let mut ends = Vec::new();
            loop {
                match c.campaign().await {
                    Ok(leadership) => {
                        history.begin_leadership(&leadership);
                        leading_tx.send_replace(Some(Term {
                            token: leadership.token(),
                            session: leadership.lease().handle.as_str().to_owned(),
                            state: leadership.lease_state(),
                        }));
                        leadership.until_ended().await;
                        history.end_leadership(&leadership);
                        leading_tx.send_replace(None);
                        ends.extend(leadership.ended());
                    }
                    Err(regent_core::CampaignError::Shutdown) => break ends,
                    Err(e) => panic!("campaign of {} failed: {e}", c.holder()),
                }
            }
        });
        Self {
            candidate,
            leading,
            task,
        }
    }

    fn holder(&self) -> &HolderId {
        self.candidate.holder()
    }

    fn term(&self) -> Option<Term> {
        self.leading.borrow().clone()
    }
}

/// Shuts `r` down; returns how each of its terms ended, in order.
async fn stop(r: Running) -> Vec<Ended> {
    r.candidate.shutdown_token().cancel();
    let holder = r.holder().clone();
    tokio::time::timeout(Duration::from_secs(10), r.task)
        .await
        .unwrap_or_else(|_| panic!("{holder} did not stop within 10 s"))
        .expect("candidate task")
}

/// Shuts every candidate down at once; returns how each one's terms ended,
/// in order.
async fn shut_down(running: Vec<Running>) -> Vec<Vec<Ended>> {
    for r in &running {
        r.candidate.shutdown_token().cancel();
    }
    let mut ends = Vec::new();
    for r in running {
        ends.push(stop(r).await);
    }
    ends
}

/// Waits until every one of `followers` follows the leader with `token`.
async fn wait_following(followers: &[&Running], token: FencingToken) {
    for f in followers {
        first_watched(
            [f.candidate.status()],
            TTL,
            &format!("{} follows the leader with token {token}", f.holder()),
            |s| matches!(s, Status::Follower { leader: Some(l) } if l.token == token),
        )
        .await;
    }
}

/// Polls `found` every 50 ms for up to `within`; panics with `evidence()`
/// if it never answered `Some`.
async fn poll_until<T>(
    within: Duration,
    what: &str,
    mut found: impl FnMut() -> Option<T>,
    evidence: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = found() {
            return t;
        }
        if Instant::now() >= deadline {
            panic!("not within {within:?}: {what}; {}", evidence());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every term as `holder token [start, end)`, instants relative to `origin`.
fn describe(intervals: &[Interval], origin: Instant) -> Vec<String> {
    let since = |at: Instant| match at.checked_duration_since(origin) {
        Some(after) => format!("+{after:.3?}"),
        None => format!("-{:.3?}", origin - at),
    };
    intervals
        .iter()
        .map(|i| {
            let end = i.end.map_or_else(|| "…".to_owned(), since);
            format!("{} token {} [{}, {end})", i.holder, i.token, since(i.start))
        })
        .collect()
}

/// Checks the record (no two leaders at any instant, tokens grow with
/// every new term), then every handover's gap. Returns the terms in order
/// of start.
fn assert_safe_handovers(history: &History, fault_at: Instant) -> Vec<Interval> {
    history.assert_ok();
    let intervals = history.intervals();
    for pair in intervals.windows(2) {
        let end = pair[0].end.expect("ended before the next began");
        assert!(
            pair[1].token > pair[0].token,
            "tokens went backwards: {:#?}",
            describe(&intervals, fault_at)
        );
        let gap = pair[1].start.saturating_duration_since(end);
        assert!(
            gap <= max_gap(),
            "leaderless for {gap:?} (> {:?}): {:#?}",
            max_gap(),
            describe(&intervals, fault_at)
        );
    }
    intervals
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_raft_leader_server_keeps_at_most_one_regent_leader() {
    let cluster = cluster().await;
    let election = election("cluster-kill");
    let history = History::new();
    let running: Vec<Running> = KILL_AGENTS
        .zip(["a", "b", "c"])
        .map(|(agent, who)| Running::spawn(candidate(&cluster, agent, &election, who), &history))
        .collect();
    let leading = running.iter().map(|r| r.leading.clone());
    let (_, term) = first_watched(leading, TTL, "a regent leader", Option::is_some).await;
    let first_token = term.expect("leads").token;
    let others: Vec<&Running> = running.iter().filter(|r| r.term().is_none()).collect();
    wait_following(&others, first_token).await;

    let (raft_leader, killed_at, raft_recovered, new_raft_leader) =
        tokio::task::block_in_place(|| {
            let mut cluster = lock(&cluster);
            let raft_leader = cluster.leader_server().expect("the servers have a leader");
            cluster.server_mut(raft_leader).kill();
            let killed_at = Instant::now();
            let new = cluster
                .wait_for_leader(RAFT_ELECTION)
                .unwrap_or_else(|e| panic!("the two surviving servers elect no leader: {e}"));
            (raft_leader, killed_at, Instant::now(), new)
        });
    assert_ne!(raft_leader, new_raft_leader);

    // Leadership works again through the new Raft leader: some candidate's
    // renewal, or acquire, sent after it was elected succeeded.
    let (leader, _) = poll_until(
        max_gap() + RENEW_DEADLINE,
        "a regent leader confirmed through the new Raft leader",
        || {
            running.iter().enumerate().find_map(|(i, r)| {
                r.term()
                    .filter(|t| t.confirmed_since(raft_recovered))
                    .map(|t| (i, t))
            })
        },
        || format!("{:#?}", describe(&history.intervals(), killed_at)),
    )
    .await;
    let confirmed = Instant::now();
    let leader_holder = running[leader].holder().clone();

    shut_down(running).await;
    let intervals = assert_safe_handovers(&history, killed_at);
    eprintln!(
        "Raft leader s{raft_leader} killed; s{new_raft_leader} leads by +{:.3?}; regent leader \
         {leader_holder} confirmed by +{:.3?}; first leader {}; terms: {:#?}",
        raft_recovered - killed_at,
        confirmed - killed_at,
        intervals[0].holder,
        describe(&intervals, killed_at)
    );
    assert_eq!(intervals[0].token, first_token, "{intervals:#?}");
    assert!(
        intervals.iter().all(|i| i.token >= first_token),
        "no term after the first has a smaller token: {intervals:#?}"
    );
    let last = intervals.last().expect("at least one term");
    assert_eq!(last.holder, leader_holder, "{intervals:#?}");
    assert!(
        last.end.expect("stopped") >= confirmed,
        "the confirmed leader led until the shutdown: {intervals:#?}"
    );
}

/// What one `?consistent` read of a session said.
#[derive(Debug, Clone, Copy)]
struct SessionSeen {
    sent: Instant,
    received: Instant,
    alive: bool,
}

/// Reads session `id` through the agent at `address` every 100 ms until
/// Consul no longer knows it; returns every conclusive read.
async fn watch_session(address: String, id: String, seen: Arc<Mutex<Vec<SessionSeen>>>) {
    let path = format!("/v1/session/info/{id}?consistent");
    loop {
        let sent = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(2), http_get(&address, &path)).await;
        let received = Instant::now();
        if let Ok(Some(body)) = answer {
            let alive = body.contains(&id);
            seen.lock().expect("not poisoned").push(SessionSeen {
                sent,
                received,
                alive,
            });
            if !alive {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `GET path` on the agent at `address`: the body of a `200`, else `None`.
async fn http_get(address: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    // "HTTP/1.0 200 OK": Consul answers in the request's version.
    (head.split(' ').nth(1) == Some("200")).then(|| body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_cut_off_from_its_agent_steps_down_before_a_follower_leads() {
    let cluster = cluster().await;
    let election = election("cluster-pause");
    let history = History::new();
    let [a_agent, b_agent, c_agent] = [
        PAUSE_AGENTS.start,
        PAUSE_AGENTS.start + 1,
        PAUSE_AGENTS.start + 2,
    ];

    let a = Running::spawn(candidate(&cluster, a_agent, &election, "a"), &history);
    let (_, a_term) = first_watched([a.leading.clone()], TTL, "a leads", Option::is_some).await;
    let a_term = a_term.expect("a leads");
    let followers = vec![
        Running::spawn(candidate(&cluster, b_agent, &election, "b"), &history),
        Running::spawn(candidate(&cluster, c_agent, &election, "c"), &history),
    ];
    wait_following(&followers.iter().collect::<Vec<_>>(), a_term.token).await;

    // Cut "a" off: its agent hangs, connections open, answering nothing.
    let paused_at = tokio::task::block_in_place(|| {
        lock(&cluster).agent_mut(a_agent).pause();
        Instant::now()
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let session = tokio::spawn(watch_session(
        agent_address(&cluster, b_agent),
        a_term.session.clone(),
        seen.clone(),
    ));

    // "a" cannot renew: it steps down on its own clock, at the renew
    // deadline of its last successful renewal, sent before the pause.
    first_watched(
        [a.leading.clone()],
        RENEW_DEADLINE + SCHEDULING,
        "a steps down",
        Option::is_none,
    )
    .await;
    let stepped_down = Instant::now();
    let leading = followers.iter().map(|f| f.leading.clone());
    let (new, new_term) = first_watched(leading, max_gap(), "b or c leads", Option::is_some).await;
    let took_over = Instant::now();
    let new_term = new_term.expect("leads");
    tokio::time::timeout(Duration::from_secs(5), session)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "Consul still knows a's session 5 s after b or c leads: {:?}",
                seen.lock().expect("not poisoned")
            )
        })
        .expect("the session watch ran");
    let seen = seen.lock().expect("not poisoned").clone();
    // The new leader renews through its own agent.
    let new_holder = followers[new].holder().clone();
    poll_until(
        RENEW_EVERY * 3 + CALL_TIMEOUT,
        "the new leader renews",
        || {
            followers[new]
                .term()
                .filter(|t| t.confirmed_since(took_over))
        },
        || {
            format!(
                "{new_holder}: {:#?}",
                describe(&history.intervals(), paused_at)
            )
        },
    )
    .await;

    // Let "a" go on, so that it shuts down at once.
    tokio::task::block_in_place(|| lock(&cluster).agent_mut(a_agent).resume());
    let mut ends = shut_down(std::iter::once(a).chain(followers).collect()).await;
    let intervals = assert_safe_handovers(&history, paused_at);
    let since = |at: Instant| at.saturating_duration_since(paused_at);
    let last_alive = seen.iter().rev().find(|s| s.alive).copied();
    let gone = seen.last().copied().filter(|s| !s.alive);
    eprintln!(
        "a's agent paused; a stepped down by +{:.3?}, session last seen by +{:.3?}, gone by \
         +{:.3?}; {new_holder} leads by +{:.3?}; terms: {:#?}",
        since(stepped_down),
        last_alive.map(|s| since(s.received)),
        gone.map(|s| since(s.received)),
        since(took_over),
        describe(&intervals, paused_at)
    );

    let [old, new] = intervals.as_slice() else {
        panic!("exactly a's term and one successor's: {intervals:#?}");
    };
    assert_eq!(
        (old.holder.as_str(), old.token),
        ("a", a_term.token),
        "{intervals:#?}"
    );
    assert_eq!(
        (&new.holder, new.token),
        (&new_holder, new_term.token),
        "{intervals:#?}"
    );
    assert!(new.token > old.token, "tokens grow: {intervals:#?}");
    let a_end = old.end.expect("a's term ended");
    assert!(
        a_end <= paused_at + RENEW_DEADLINE + SCHEDULING,
        "a led no longer than its renew deadline after the pause: {:#?}",
        describe(&intervals, paused_at)
    );
    let a_ends = ends.remove(0);
    assert_eq!(
        a_ends.iter().map(|e| e.reason).collect::<Vec<_>>(),
        [EndReason::DeadlinePassed],
        "a stepped down at its renew deadline, once"
    );
    // The successor began only after Consul dropped a's session: every read
    // that still found the session was sent before the successor's term.
    assert!(gone.is_some(), "a's session was seen gone: {seen:?}");
    if let Some(alive) = last_alive {
        assert!(
            alive.sent < new.start,
            "a's session was still alive (read sent at +{:.3?}) after {new_holder} began at \
             +{:.3?}",
            since(alive.sent),
            since(new.start)
        );
    }
    assert!(
        new.start > a_end,
        "a stepped down before anyone else led: {intervals:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn candidates_joining_and_leaving_do_not_change_the_leader() {
    let cluster = cluster().await;
    let election = election("cluster-membership");
    let history = History::new();
    let [a_agent, b_agent, c_agent] = [
        MEMBERSHIP_AGENTS.start,
        MEMBERSHIP_AGENTS.start + 1,
        MEMBERSHIP_AGENTS.start + 2,
    ];

    let a = Running::spawn(candidate(&cluster, a_agent, &election, "a"), &history);
    let (_, a_term) = first_watched([a.leading.clone()], TTL, "a leads", Option::is_some).await;
    let a_term = a_term.expect("a leads");
    let b = Running::spawn(candidate(&cluster, b_agent, &election, "b"), &history);
    wait_following(&[&b], a_term.token).await;

    // "c" joins and follows "a"; then "b", a follower, leaves.
    let c = Running::spawn(candidate(&cluster, c_agent, &election, "c"), &history);
    wait_following(&[&c], a_term.token).await;
    let b_ends = stop(b).await;
    let removed_at = Instant::now();
    assert!(b_ends.is_empty(), "b never led: {b_ends:?}");

    // "a" renews twice after "b" left; meanwhile nobody else begins a term.
    // The bound allows one renewal that fails and waits out its call
    // timeout: with 3 s it failed once (CI-like load, 2 cores busy), a
    // liveness bound too tight, not a second leader.
    let renewed_twice = removed_at + RENEW_EVERY;
    poll_until(
        RENEW_EVERY * 3 + CALL_TIMEOUT * 2,
        "a renews twice after b left",
        || a.term().filter(|t| t.confirmed_since(renewed_twice)),
        || format!("{:#?}", describe(&history.intervals(), removed_at)),
    )
    .await;
    assert!(
        matches!(&*c.candidate.status().borrow(), Status::Follower { leader: Some(l) } if l.token == a_term.token),
        "c still follows a: {:?}",
        c.candidate.status().borrow()
    );
    let intervals = history.intervals();
    assert!(
        matches!(intervals.as_slice(), [only] if only.holder.as_str() == "a" && only.token == a_term.token && only.end.is_none()),
        "a's one term, still open: {:#?}",
        describe(&intervals, removed_at)
    );

    shut_down(vec![a, c]).await;
    history.assert_ok();
    let intervals = history.intervals();
    assert_eq!(
        intervals.len(),
        1,
        "{:#?}",
        describe(&intervals, removed_at)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_agent_restarts_steps_down_at_its_deadline_and_campaigns_again() {
    let cluster = cluster().await;
    let election = election("cluster-restart");
    let history = History::new();
    let [a_agent, b_agent] = [RESTART_AGENTS.start, RESTART_AGENTS.start + 1];

    let a = Running::spawn(candidate(&cluster, a_agent, &election, "a"), &history);
    let (_, a_term) = first_watched([a.leading.clone()], TTL, "a leads", Option::is_some).await;
    let a_term = a_term.expect("a leads");
    let b = Running::spawn(candidate(&cluster, b_agent, &election, "b"), &history);
    wait_following(&[&b], a_term.token).await;

    // a's agent stops (SIGINT, without leaving the cluster) and stays down
    // past a's renew deadline.
    let stopped_at = tokio::task::block_in_place(|| {
        lock(&cluster).agent_mut(a_agent).stop();
        Instant::now()
    });
    first_watched(
        [a.leading.clone()],
        RENEW_DEADLINE + SCHEDULING,
        "a steps down",
        Option::is_none,
    )
    .await;
    let (_, b_term) =
        first_watched([b.leading.clone()], max_gap(), "b leads", Option::is_some).await;
    let b_term = b_term.expect("b leads");

    // The agent comes back on its data dir: a, which kept campaigning
    // through the errors, follows b.
    let restarted_at = tokio::task::block_in_place(|| {
        lock(&cluster)
            .agent_mut(a_agent)
            .restart()
            .expect("restart a's agent");
        Instant::now()
    });
    wait_following(&[&a], b_term.token).await;
    let followed_at = Instant::now();
    assert!(
        b.term().is_some_and(|t| t.token == b_term.token),
        "b still leads with its term: {:#?}",
        describe(&history.intervals(), stopped_at)
    );

    let mut ends = shut_down(vec![a, b]).await;
    let intervals = assert_safe_handovers(&history, stopped_at);
    let since = |at: Instant| at.saturating_duration_since(stopped_at);
    eprintln!(
        "a's agent stopped; agent back by +{:.3?}, a follows b by +{:.3?}; terms: {:#?}",
        since(restarted_at),
        since(followed_at),
        describe(&intervals, stopped_at)
    );
    let [old, new] = intervals.as_slice() else {
        panic!("exactly a's term and b's: {intervals:#?}");
    };
    assert_eq!((old.holder.as_str(), old.token), ("a", a_term.token));
    assert_eq!((new.holder.as_str(), new.token), ("b", b_term.token));
    let a_end = old.end.expect("a's term ended");
    assert!(
        a_end <= stopped_at + RENEW_DEADLINE + SCHEDULING,
        "a led no longer than its renew deadline after its agent stopped: {:#?}",
        describe(&intervals, stopped_at)
    );
    assert!(new.start > a_end, "{intervals:#?}");
    assert_eq!(
        ends.remove(0).iter().map(|e| e.reason).collect::<Vec<_>>(),
        [EndReason::DeadlinePassed],
        "a stepped down at its renew deadline, once"
    );
}
