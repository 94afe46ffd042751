//! The ZooKeeper store when its server fails, on a standalone server of
//! each test's own (the kit's 100 ms tick):
//!
//! * the server paused (SIGSTOP) past the session timeout, then resumed —
//!   Curator's LOST: the leader steps down at its renew deadline, the
//!   server expires the session with its nodes, and a candidate leads
//!   again on a new session with a larger token;
//! * one store holding three elections: the server sees one session, and
//!   when it expires every one of the three terms ends, and all three lead
//!   again on one new session;
//! * the server paused for less than the session timeout, or killed and
//!   restarted at once (it keeps its sessions) — Curator's SUSPENDED then
//!   RECONNECTED: a renewal succeeds before the renew deadline and the
//!   leader keeps its term (same token, same session);
//! * a call left unpolled while it opens a session on a paused server (as
//!   a candidate leaves its watch while it acquires): the store's other
//!   calls go through once the server answers;
//! * a foreign node under an election's path: a candidate's acquire is
//!   [`Corrupt`](ErrorKind::Corrupt), naming it, and never a takeover.
//!
//! Candidates run on [`TIMING`] (ttl 2 s granted as the session timeout,
//! a renewal every 300 ms, step-down 1.5 s after the last renewal sent)
//! unless a test says otherwise; each has a store, so a session, of its
//! own unless the test is about sharing one. The faults are the kit's
//! blocking calls, made in `block_in_place` so that the candidates' tasks
//! run on meanwhile. The tests run one at a time ([`SERIAL`]).

mod common;
mod zk_faults_support;

use std::collections::BTreeSet;
use std::time::Duration;

use regent_core::{CampaignError, EndReason, ErrorKind, LeaseStore, Status};
use regent_testkit::History;
use regent_testkit::engines::ZooKeeper;
use regent_testkit::fixtures::acquire_request;
use regent_zookeeper::{EXPIRY_SLACK, ZkStore};
use tokio::task::block_in_place;
use tokio::time::{Instant, sleep_until, timeout};
use zk_faults_support::{
    LATE, Leading, RENEW_DEADLINE, RENEW_EVERY, Running, SERIAL, TIMING, TTL, Term, Timing,
    candidate, election, ephemerals_in_dump, first_leading, hex, mntr_value, sessions_in_cons,
    shut_down, since, store, until_following, until_renewed_after,
};
use zookeeper_client as zk;

/// How long a pause must last for a session to expire on both sides:
/// zookeeper-client gives a session up 7/5 of its timeout after it last
/// heard from the server (2.8 s), and the server expires it as soon as it
/// runs again. A pause shorter than that could end with the client
/// reconnecting before the server's expiry thread has run, reviving the
/// session (ZooKeeper lets a session whose expiry was not yet processed be
/// touched again).
const EXPIRING_PAUSE: Duration = Duration::from_millis(3800);

/// A pause longer than a renew interval and than zookeeper-client waits
/// for an answer before it drops a connection (0.4 of the session timeout:
/// 0.8 s), and shorter than the session timeout and than the renew
/// deadline less a renew interval ([`SUSPEND_TIMING`]: 1.4 s), so that the
/// client reconnects to its session and a renewal can succeed in time.
const BRIEF_PAUSE: Duration = Duration::from_secs(1);

/// The longest a server may take to expire a session and delete its
/// nodes once it runs again, or a new session to be opened and an acquire
/// to win on it.
const RECOVERY: Duration = Duration::from_secs(3);

/// A candidate asks for its first session and campaigns.
async fn running(zk: &ZooKeeper, chroot: &str, e: &str, who: &str, history: &History) -> Running {
    let s = store(&zk.address(), chroot, TTL).await;
    Running::spawn(candidate(s, &election(e), who, TIMING), history)
}

/// The answer to a four-letter word.
fn four(zk: &ZooKeeper, word: &str) -> String {
    block_in_place(|| zk.four_letter_word(word))
        .unwrap_or_else(|e| panic!("{word} on {}: {e}", zk.address()))
}

/// Polls `check` every 20 ms until it holds or `deadline` passes; returns
/// whether it held.
async fn eventually(deadline: Instant, mut check: impl FnMut() -> bool) -> bool {
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn children(servers: &str, dir: &str) -> BTreeSet<String> {
    let c = common::raw(servers).await;
    c.list_children(dir)
        .await
        .unwrap_or_else(|e| panic!("list {dir}: {e}"))
        .into_iter()
        .collect()
}

/// Checks that `term` ended at its renew deadline, measured from its last
/// renewal confirmed before the server was paused at `paused_at` (a paused
/// server confirms nothing). Returns how long after its last renewal it
/// stepped down.
fn assert_stepped_down_at_deadline(term: &Term, paused_at: Instant) -> Duration {
    let basis = term.last_confirmed(RENEW_DEADLINE);
    let led_on = term.ended.at.saturating_duration_since(basis);
    assert_eq!(
        term.ended.reason,
        EndReason::DeadlinePassed,
        "{}'s term {} in {} ended {} after the pause ({led_on:?} after its last renewal) \
         with \"{}\", not at its renew deadline ({} after the pause): {term:?}",
        term.holder,
        term.token,
        term.node,
        since(paused_at, term.ended.at),
        term.ended.reason,
        since(paused_at, term.step_down_at),
    );
    assert!(
        basis <= paused_at,
        "a renewal sent {} was confirmed by a paused server",
        since(paused_at, basis)
    );
    assert!(
        term.ended.at >= term.step_down_at && led_on <= RENEW_DEADLINE + LATE,
        "{} stepped down {} after the pause, due {} after it",
        term.holder,
        since(paused_at, term.ended.at),
        since(paused_at, term.step_down_at)
    );
    led_on
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_paused_past_the_session_timeout_ends_the_term_at_its_deadline_and_the_session() {
    let _serial = SERIAL.lock().await;
    let mut zk = common::start_zookeeper().await;
    let chroot = "/faults-expiry";
    let history = History::new();
    let a = running(&zk, chroot, "expiry", "a", &history).await;
    let first = a.until_leading(TTL * 2, "alone in the election").await;
    let b = running(&zk, chroot, "expiry", "b", &history).await;
    until_following(&b, first.token).await;
    let b_session = hex(b
        .candidate
        .store()
        .session_info()
        .await
        .expect("b's session is open")
        .0);
    let dir = a.candidate.store().election_path(a.candidate.election());

    let paused_at = block_in_place(|| {
        zk.pause();
        Instant::now()
    });
    // Nothing the server answers any more: a steps down on its own clock.
    let ended = a.until_term_ends(first.token, RENEW_DEADLINE + LATE).await;
    // The point is the session's expiry: wait it out, paused.
    sleep_until(paused_at + EXPIRING_PAUSE).await;
    let resumed_at = block_in_place(|| {
        zk.resume();
        Instant::now()
    });
    let led_on = assert_stepped_down_at_deadline(&ended, paused_at);

    // The server expires both sessions, and their nodes go with them.
    let old = [first.session.clone(), b_session.clone()];
    let mut gone_at = None;
    let gone = eventually(resumed_at + RECOVERY, || {
        let Ok(dump) = block_in_place(|| zk.four_letter_word("dump")) else {
            return false;
        };
        let left = ephemerals_in_dump(&dump);
        let now_gone = old.iter().all(|s| !left.contains_key(s));
        if now_gone {
            gone_at.get_or_insert_with(Instant::now);
        }
        now_gone
    })
    .await;
    assert!(
        gone,
        "the sessions {old:?} outlived their timeout:\n{}",
        four(&zk, "dump")
    );
    assert!(
        !children(&zk.address(), &dir).await.contains(&first.node),
        "a's node {} outlived its session",
        first.node
    );

    // A candidate leads again, on a new session, with a larger token.
    let running = vec![a, b];
    let (i, next) = first_leading(&running, RECOVERY, "a or b leads again").await;
    let led_again_at = Instant::now();
    assert!(
        next.token > first.token,
        "{} <= {}",
        next.token,
        first.token
    );
    assert!(
        !old.contains(&next.session),
        "the new term runs on the session {}, one that expired",
        next.session
    );
    let who = running[i].holder().clone();
    shut_down(running).await;
    history.assert_ok();

    eprintln!(
        "paused {EXPIRING_PAUSE:?}: a's last renewal sent {}, stepped down {} ({:?} after its \
         due instant, {led_on:?} after its last renewal); sessions gone {} after the resume; \
         {who} leads again with token {} {} after the resume (token before: {})",
        since(paused_at, ended.last_confirmed(RENEW_DEADLINE)),
        since(paused_at, ended.ended.at),
        ended.ended.at.saturating_duration_since(ended.step_down_at),
        since(resumed_at, gone_at.expect("gone")),
        next.token,
        since(resumed_at, led_again_at),
        first.token,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_store_is_one_session_and_its_expiry_ends_every_election() {
    let _serial = SERIAL.lock().await;
    let mut zk = common::start_zookeeper().await;
    let shared = store(&zk.address(), "/faults-one-session", TTL).await;
    let names = ["jobs", "billing", "reports"];
    let histories: Vec<History> = names.iter().map(|_| History::new()).collect();
    let running: Vec<Running> = names
        .iter()
        .zip(&histories)
        .map(|(e, h)| Running::spawn(candidate(shared.clone(), &election(e), "host-1", TIMING), h))
        .collect();
    let mut firsts = Vec::new();
    for r in &running {
        firsts.push(r.until_leading(TTL * 2, "alone in its election").await);
    }
    let session = hex(shared.session_info().await.expect("a session").0);

    // One session for the three: one connection, one session on the
    // server, and it owns the three leaders' nodes.
    let sessions_seen = |zk: &ZooKeeper| {
        let cons = four(zk, "cons");
        let global = mntr_value(&four(zk, "mntr"), "zk_global_sessions");
        (sessions_in_cons(&cons), global, cons)
    };
    let (in_cons, global, cons) = sessions_seen(&zk);
    assert_eq!(in_cons, BTreeSet::from([session.clone()]), "{cons}");
    assert_eq!(global.as_deref(), Some("1"), "one session on the server");
    let owned = ephemerals_in_dump(&four(&zk, "dump"));
    let nodes: BTreeSet<String> = firsts.iter().map(|f| f.node.clone()).collect();
    assert_eq!(owned.len(), 1, "{owned:?}");
    let owned_nodes: BTreeSet<String> = owned[&session]
        .iter()
        .map(|p| p.rsplit('/').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        owned_nodes, nodes,
        "the session owns the three leaders' nodes"
    );
    assert!(firsts.iter().all(|f| f.session == session));

    let paused_at = block_in_place(|| {
        zk.pause();
        Instant::now()
    });
    let mut ends = Vec::new();
    for (r, f) in running.iter().zip(&firsts) {
        ends.push(r.until_term_ends(f.token, RENEW_DEADLINE + LATE).await);
    }
    // The point is the session's expiry: wait it out, paused.
    sleep_until(paused_at + EXPIRING_PAUSE).await;
    let resumed_at = block_in_place(|| {
        zk.resume();
        Instant::now()
    });
    for e in &ends {
        assert_stepped_down_at_deadline(e, paused_at);
    }

    // All three lead again, on one new session.
    let mut nexts = Vec::new();
    for (r, f) in running.iter().zip(&firsts) {
        let within = (resumed_at + RECOVERY).saturating_duration_since(Instant::now());
        let what = format!("a new term in {}", r.candidate.election());
        let next = r
            .until(within, &what, |l| {
                l.as_ref().is_some_and(|l| l.token > f.token)
            })
            .await
            .expect("waited for it");
        nexts.push(next);
    }
    let all_again_at = Instant::now();
    let new_session = nexts[0].session.clone();
    assert_ne!(new_session, session, "a new session");
    assert!(nexts.iter().all(|n| n.session == new_session), "{nexts:?}");
    assert_eq!(
        shared.session_info().await.map(|s| hex(s.0)),
        Some(new_session.clone())
    );
    let settled = eventually(resumed_at + RECOVERY, || {
        let (in_cons, global, _) = sessions_seen(&zk);
        in_cons == BTreeSet::from([new_session.clone()]) && global.as_deref() == Some("1")
    })
    .await;
    let (in_cons, global, cons) = sessions_seen(&zk);
    assert!(
        settled,
        "one session, {new_session}, on the server after the expiry: {in_cons:?}, \
         zk_global_sessions {global:?}\n{cons}"
    );
    let owned = ephemerals_in_dump(&four(&zk, "dump"));
    assert_eq!(
        owned.keys().collect::<Vec<_>>(),
        [&new_session],
        "{owned:?}"
    );
    assert_eq!(owned[&new_session].len(), 3, "{owned:?}");

    shut_down(running).await;
    for h in &histories {
        h.assert_ok();
    }
    let first_end = ends.iter().map(|e| e.ended.at).min().expect("three");
    let last_end = ends.iter().map(|e| e.ended.at).max().expect("three");
    // Each steps down 1.5 s after its own last renewal, and each renews
    // every 300 ms on its own: the three ends lie within a renew interval.
    assert!(
        last_end - first_end <= RENEW_EVERY + LATE,
        "the ends spread over {:?}",
        last_end - first_end
    );
    eprintln!(
        "one session {session} for 3 elections (cons: 1 session, zk_global_sessions 1, dump: \
         1 session owning 3 nodes); paused {EXPIRING_PAUSE:?}: the 3 terms ended at their \
         deadlines, {} to {} after the pause; all 3 led again on session {new_session} {} after \
         the resume",
        since(paused_at, first_end),
        since(paused_at, last_end),
        since(resumed_at, all_again_at),
    );
}

/// Checks that `leader`'s term survived a fault of the server that began
/// at `fault_at`: a renewal sent after it is confirmed before the renew
/// deadline, and the term keeps its token, its session and its follower.
/// Returns when the renewal was seen confirmed.
async fn assert_term_kept(
    leader: &Running,
    follower: &Running,
    first: &Leading,
    session: i64,
    fault_at: Instant,
    t: Timing,
) -> Instant {
    let state = until_renewed_after(
        &first.lease_state,
        fault_at,
        t.renew_deadline,
        fault_at + t.renew_deadline,
    )
    .await;
    let renewed_at = Instant::now();
    if let Some(ended) = state.ended {
        panic!(
            "{}'s term {} ended {} after the fault with \"{}\" instead of renewing; its \
             deadline was {} after the fault: {:?}{}",
            leader.holder(),
            first.token,
            since(fault_at, ended.at),
            ended.reason,
            since(fault_at, state.step_down_at),
            leader.terms(),
            leader
                .failure()
                .map_or_else(String::new, |f| format!("; {f}"))
        );
    }
    assert!(
        state.step_down_at > fault_at + t.renew_deadline,
        "{} confirmed no renewal sent after the fault before its deadline ({} after it)",
        leader.holder(),
        since(fault_at, state.step_down_at),
    );
    let now = leader.now_leading().expect("still leading");
    assert_eq!(now.token, first.token, "the same term");
    assert!(leader.terms().is_empty(), "{:?}", leader.terms());
    assert_eq!(
        leader.candidate.store().session_info().await.map(|s| s.0),
        Some(session),
        "the same session"
    );
    let status = follower.candidate.status().borrow().clone();
    assert!(
        matches!(&status, Status::Follower { leader: Some(l) } if l.token == first.token),
        "{} still follows {}: {status:?}{}",
        follower.holder(),
        leader.holder(),
        follower
            .failure()
            .map_or_else(String::new, |f| format!("; {f}"))
    );
    renewed_at
}

/// A renewal every 200 ms and a step-down 1.6 s after the last one sent:
/// a renewal sent at most 200 ms before a pause of 1 s leaves 0.4 s after
/// the resume for the client to reconnect and a renewal to succeed.
const SUSPEND_TIMING: Timing = Timing {
    ttl: TTL,
    renew_every: Duration::from_millis(200),
    renew_deadline: Duration::from_millis(1600),
    grace: Duration::from_millis(100),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_brief_pause_of_the_server_keeps_the_term() {
    let _serial = SERIAL.lock().await;
    let mut zk = common::start_zookeeper().await;
    let chroot = "/faults-suspended";
    let e = election("suspended");
    let history = History::new();
    let t = SUSPEND_TIMING;
    let a = Running::spawn(
        candidate(store(&zk.address(), chroot, TTL).await, &e, "a", t),
        &history,
    );
    let first = a.until_leading(TTL * 2, "alone in the election").await;
    let b = Running::spawn(
        candidate(store(&zk.address(), chroot, TTL).await, &e, "b", t),
        &history,
    );
    until_following(&b, first.token).await;
    let session = a.candidate.store().session_info().await.expect("open").0;

    let paused_at = block_in_place(|| {
        zk.pause();
        Instant::now()
    });
    // The point is a pause of a known length: longer than zookeeper-client
    // waits for an answer before it drops the connection (0.8 s for a 2 s
    // session), shorter than the renew deadline less a renew interval.
    sleep_until(paused_at + BRIEF_PAUSE).await;
    let resumed_at = block_in_place(|| {
        zk.resume();
        Instant::now()
    });
    let renewed_at = assert_term_kept(&a, &b, &first, session, paused_at, t).await;
    // Had the server expired the session, b would lead once its timeout and
    // the expiry's slack had passed: wait that out, and look again.
    sleep_until(paused_at + TTL + EXPIRY_SLACK.for_ttl(TTL)).await;
    assert_term_kept(&a, &b, &first, session, paused_at, t).await;
    let owned = ephemerals_in_dump(&four(&zk, "dump"));
    assert!(
        owned
            .get(&first.session)
            .is_some_and(|nodes| nodes.iter().any(|n| n.ends_with(&first.node))),
        "a's node is still its session's: {owned:?}"
    );

    shut_down(vec![a, b]).await;
    let summary = history.assert_ok();
    assert_eq!(summary.terms, 1, "a's term only");
    eprintln!(
        "paused {BRIEF_PAUSE:?}: a's term {} kept on session {}; a renewal sent after the pause \
         began seen confirmed {} after the resume",
        first.token,
        first.session,
        since(resumed_at, renewed_at),
    );
}

/// Slower timing for a kill and restart of the server: a JVM starts in
/// 0.3–1 s, and zookeeper-client reconnects with a doubling back-off (0.1,
/// 0.3, 0.7, 1.5, 3.1 s after the loss), so the renew deadline (6 s) is
/// well beyond the reconnect that follows a restart of up to 3 s.
const RESTART_TIMING: Timing = Timing {
    ttl: Duration::from_secs(10),
    renew_every: Duration::from_secs(1),
    renew_deadline: Duration::from_secs(6),
    grace: Duration::from_millis(200),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quick_restart_of_the_server_keeps_the_session_and_the_term() {
    let _serial = SERIAL.lock().await;
    let mut zk = common::start_zookeeper().await;
    let chroot = "/faults-restart";
    let e = election("restart");
    let history = History::new();
    let t = RESTART_TIMING;
    let a = Running::spawn(
        candidate(store(&zk.address(), chroot, t.ttl).await, &e, "a", t),
        &history,
    );
    let first = a.until_leading(TTL * 2, "alone in the election").await;
    let b = Running::spawn(
        candidate(store(&zk.address(), chroot, t.ttl).await, &e, "b", t),
        &history,
    );
    until_following(&b, first.token).await;
    let session = a.candidate.store().session_info().await.expect("open").0;

    let (killed_at, restarted_at) = block_in_place(|| {
        zk.kill();
        let killed_at = Instant::now();
        zk.restart()
            .unwrap_or_else(|e| panic!("restart ZooKeeper: {e}"));
        (killed_at, Instant::now())
    });
    let renewed_at = assert_term_kept(&a, &b, &first, session, killed_at, t).await;

    shut_down(vec![a, b]).await;
    let summary = history.assert_ok();
    assert_eq!(summary.terms, 1, "a's term only");
    eprintln!(
        "server killed and serving again {:?} later: a's term {} kept on session {}; a renewal \
         sent after the kill seen confirmed {} after the kill",
        restarted_at - killed_at,
        first.token,
        first.session,
        since(killed_at, renewed_at),
    );
}

/// Regression: a call left unpolled while it opened a session (as a
/// candidate leaves its watch while it acquires) held the store's session
/// lock, and every later call of the store waited behind it for good. The
/// attempt now runs in a task of its own that callers only wait for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_left_unpolled_while_opening_a_session_never_blocks_the_stores_other_calls() {
    let _serial = SERIAL.lock().await;
    let mut zk = common::start_zookeeper().await;
    let servers = zk.address();
    let s: ZkStore = store(&servers, "/faults-parked", TTL).await;
    let e = election("parked");
    block_in_place(|| zk.pause());
    // An acquire asking another ttl needs a session of its own (no node
    // lives on the store's first): it starts opening one on the paused
    // server, and its caller stops polling it there.
    let req = acquire_request(&e, "a", TTL + Duration::from_millis(500));
    let mut parked = Box::pin(s.try_acquire(&req, None));
    assert!(
        timeout(Duration::from_millis(500), &mut parked)
            .await
            .is_err(),
        "an acquire on a paused server answered"
    );
    block_in_place(|| zk.resume());
    // The store's other calls go through once the server answers.
    let read = timeout(common::CALL_TIMEOUT * 3, s.current_leader(&e))
        .await
        .expect("a read waited behind the unpolled acquire");
    assert_eq!(read.expect("a read once the server answers"), None);
    drop(parked);
    // The store still campaigns.
    assert!(matches!(
        timeout(common::CALL_TIMEOUT * 3, s.try_acquire(&req, None))
            .await
            .expect("an acquire answers"),
        Ok(regent_core::Acquire::Won(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_foreign_node_in_the_election_is_corrupt_never_a_takeover() {
    let _serial = SERIAL.lock().await;
    let zk = common::start_zookeeper().await;
    let chroot = "/faults-garbage";
    let servers = zk.address();
    let raw = common::raw(&servers).await;
    let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());

    // Nobody leads, and a foreign node sits where a leader would.
    let alone = election("alone");
    let probe: ZkStore = store(&servers, chroot, TTL).await;
    let dir = probe.election_path(&alone);
    raw.mkdir(&dir, &open).await.expect("the election's node");
    let garbage = format!("{dir}/garbage");
    raw.create(&garbage, b"\x00\xff not regent", &open)
        .await
        .expect("a foreign node");
    let c = candidate(probe.clone(), &alone, "c", TIMING);
    let campaign = timeout(TTL * 2, c.campaign())
        .await
        .expect("the campaign gives up at once");
    match campaign {
        Err(CampaignError::Store(e)) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            assert!(e.to_string().contains(&garbage), "names the node: {e}");
        }
        other => panic!("a campaign past a foreign node: {other:?}"),
    }
    assert_eq!(
        children(&servers, &dir).await,
        BTreeSet::from(["garbage".to_owned()]),
        "c's node was taken back"
    );
    let req = acquire_request(&alone, "d", TTL);
    match probe.try_acquire(&req, None).await {
        Err(e) => assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}"),
        Ok(won) => panic!("an acquire past a foreign node: {won:?}"),
    }
    assert_eq!(
        children(&servers, &dir).await,
        BTreeSet::from(["garbage".to_owned()]),
        "d's node was taken back"
    );
    c.shutdown().await;

    // A leader leads, and a foreign node appears that sorts before its
    // node ("0-" before "0000000000"): a newcomer's acquire is Corrupt, and
    // the leader keeps its term and renews on.
    let history = History::new();
    let led = election("led");
    let a = running(&zk, chroot, "led", "a", &history).await;
    let first = a.until_leading(TTL * 2, "alone in the election").await;
    let dir = probe.election_path(&led);
    let garbage = format!("{dir}/0-garbage");
    raw.create(&garbage, b"", &open)
        .await
        .expect("a foreign node");
    let planted_at = Instant::now();
    let b = candidate(store(&servers, chroot, TTL).await, &led, "b", TIMING);
    match timeout(TTL * 2, b.campaign())
        .await
        .expect("the campaign gives up at once")
    {
        Err(CampaignError::Store(e)) => {
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
            assert!(e.to_string().contains(&garbage), "names the node: {e}");
        }
        other => panic!("a campaign past a foreign node: {other:?}"),
    }
    b.shutdown().await;
    let state = until_renewed_after(
        &first.lease_state,
        planted_at,
        RENEW_DEADLINE,
        planted_at + RENEW_DEADLINE,
    )
    .await;
    assert!(
        state.ended.is_none() && state.step_down_at > planted_at + RENEW_DEADLINE,
        "a renews past the foreign node: {state:?}, {:?}",
        a.terms()
    );
    assert_eq!(a.now_leading().map(|l| l.token), Some(first.token));
    // What an observer is shown: the store reads the first child, which
    // is the foreign node.
    let shown = probe.current_leader(&led).await;
    assert_eq!(
        children(&servers, &dir).await,
        BTreeSet::from([first.node.clone(), "0-garbage".to_owned()]),
        "b's node was taken back"
    );
    shut_down(vec![a]).await;
    assert_eq!(history.assert_ok().terms, 1);
    eprintln!(
        "a foreign node is Corrupt for every acquire, leader or none; with a leading, \
         current_leader shows {:?}",
        shown.map(|l| l.map(|l| (l.holder.to_string(), l.token)))
    );
}
