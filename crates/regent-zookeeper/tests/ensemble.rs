//! The ZooKeeper store on a three-server ensemble from the test kit, with
//! three regent candidates, each with a store (so a session) of its own:
//!
//! * the ensemble's **leader** is killed while a regent leader holds the
//!   election: every client loses its server while the two left elect a
//!   new leader, then reconnects to its session (a new leader restarts
//!   every session's timeout);
//! * the regent leader's **own server** (the follower its client is
//!   connected to, found with `cons`) is killed: its client moves its
//!   session to the other server it knows.
//!
//! In both, the regent leader keeps leading (a renewal succeeds before its
//! renew deadline) or steps down by its deadline and a follower takes
//! over; every term is recorded from its guard (begin when in hand, end at
//! the instant the guard says) and checked: never two regent leaders at
//! one instant, tokens grow in time order, and the election is never
//! without a leader for longer than [`max_gap`].
//!
//! Candidates run on ttl 2 s (granted as the session timeout), a renewal
//! every 300 ms, step-down 1.5 s after the last renewal sent. The tests
//! run one at a time ([`SERIAL`]): three JVMs each, on two cores.

mod common;
mod zk_faults_support;

use std::collections::BTreeMap;
use std::time::Duration;

use regent_testkit::engines::ZooKeeperEnsemble;
use regent_testkit::{History, Interval};
use regent_zookeeper::EXPIRY_SLACK;
use tokio::task::block_in_place;
use tokio::time::{Instant, sleep_until};
use zk_faults_support::{
    LATE, RENEW_DEADLINE, Running, SERIAL, TIMING, TTL, candidate, election, first_leading, hex,
    sessions_in_cons, shut_down, since, store, until_following, until_renewed_after,
};

/// How long the two servers left may take to elect a leader (measured by
/// the kit: 0.4–0.6 s after a kill).
const ZK_ELECTION: Duration = Duration::from_secs(5);

/// The longest the election may go without a regent leader after a kill.
/// If the leader cannot renew, it steps down by its renew deadline and
/// releases its node once its client is back; if its session is gone
/// instead, the node goes when the session expires: the ttl (the session
/// timeout, which a new ensemble leader starts again) plus the store's
/// expiry slack (1.5 s at a ttl of 2 s). Add a second for the followers'
/// clients to reconnect (zookeeper-client's back-off doubles from 0.1 s
/// per round of servers) and their watches to fire and an acquire to win.
fn max_gap() -> Duration {
    TTL + EXPIRY_SLACK.for_ttl(TTL) + Duration::from_secs(1)
}

async fn start_ensemble() -> ZooKeeperEnsemble {
    tokio::task::spawn_blocking(ZooKeeperEnsemble::start)
        .await
        .expect("the start task ran")
        .unwrap_or_else(|e| panic!("cannot start a ZooKeeper ensemble for this test: {e}"))
}

/// Which member each session is connected to, by `cons` on every running
/// member.
fn connections(ensemble: &ZooKeeperEnsemble) -> BTreeMap<String, usize> {
    block_in_place(|| {
        let mut on = BTreeMap::new();
        for (i, m) in ensemble.members().iter().enumerate() {
            if !m.is_running() {
                continue;
            }
            if let Ok(cons) = m.four_letter_word("cons") {
                for s in sessions_in_cons(&cons) {
                    on.insert(s, i);
                }
            }
        }
        on
    })
}

/// `a` first (so that it leads), then `b` and `c` behind it, each store on
/// `servers[i]`.
async fn campaign(
    servers: [String; 3],
    chroot: &str,
    name: &str,
    history: &History,
) -> (Vec<Running>, zk_faults_support::Leading) {
    let e = election(name);
    let mut running = Vec::new();
    for (who, servers) in ["a", "b", "c"].into_iter().zip(servers) {
        let s = store(&servers, chroot, TTL).await;
        running.push(Running::spawn(candidate(s, &e, who, TIMING), history));
        if who == "a" {
            running[0]
                .until_leading(TTL * 2, "alone in the election")
                .await;
        }
    }
    let first = running[0].now_leading().expect("a leads");
    for f in &running[1..] {
        until_following(f, first.token).await;
    }
    (running, first)
}

/// Checks the record: no two terms at one instant, tokens grow in order of
/// start, and no gap between terms longer than [`max_gap`]. Returns the
/// terms.
fn assert_safe(history: &History, fault_at: Instant) -> Vec<Interval> {
    history.assert_ok();
    let intervals = history.intervals();
    for pair in intervals.windows(2) {
        let end = pair[0].end.expect("ended before the next began");
        let gap = pair[1].start.saturating_duration_since(end);
        assert!(
            gap <= max_gap(),
            "no regent leader for {gap:?} (> {:?}) from {} after the fault: {}",
            max_gap(),
            since(fault_at, end),
            shown(&intervals, fault_at)
        );
    }
    intervals
}

/// The terms, times since the fault.
fn shown(intervals: &[Interval], fault_at: Instant) -> String {
    let terms: Vec<String> = intervals
        .iter()
        .map(|i| {
            let end = i.end.map_or_else(|| "…".to_owned(), |e| since(fault_at, e));
            format!(
                "{} token {} [{}, {end})",
                i.holder,
                i.token,
                since(fault_at, i.start)
            )
        })
        .collect();
    terms.join(", ")
}

/// After a fault at `fault_at`: the regent leader `a` either confirms a
/// renewal sent after the fault before its deadline (it keeps leading), or
/// its term ends by then and someone leads again within [`max_gap`] of
/// `recovered_at` (when the fault was over as far as the ensemble goes).
/// Returns whether `a` kept its term, and when the election was seen led
/// again.
async fn kept_or_handed_over(
    running: &[Running],
    first: &zk_faults_support::Leading,
    fault_at: Instant,
    recovered_at: Instant,
) -> (bool, Instant) {
    let state = until_renewed_after(
        &first.lease_state,
        fault_at,
        RENEW_DEADLINE,
        fault_at + RENEW_DEADLINE + LATE,
    )
    .await;
    match state.ended {
        None => {
            assert!(
                state.step_down_at > fault_at + RENEW_DEADLINE,
                "a neither renewed nor stepped down by its deadline: {state:?}"
            );
            (true, Instant::now())
        }
        Some(ended) => {
            assert!(
                ended.at <= fault_at + RENEW_DEADLINE + LATE,
                "a stepped down {} after the fault",
                since(fault_at, ended.at)
            );
            let within =
                (recovered_at.max(ended.at) + max_gap()).saturating_duration_since(Instant::now());
            let (i, next) = first_leading(running, within, "someone leads again").await;
            assert!(
                next.token > first.token,
                "{} leads with {}",
                running[i].holder(),
                next.token
            );
            (false, Instant::now())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_zookeeper_leader_keeps_one_regent_leader() {
    let _serial = SERIAL.lock().await;
    let mut ensemble = start_ensemble().await;
    let all = ensemble.connect_string();
    let history = History::new();
    let (running, first) = campaign(
        [all.clone(), all.clone(), all],
        "/ensemble-leader",
        "zk-leader-killed",
        &history,
    )
    .await;
    let zk_leader = block_in_place(|| ensemble.leader_index()).expect("the ensemble has a leader");
    let on = connections(&ensemble);
    let mut clients = Vec::new();
    for r in &running {
        let s = hex(r.candidate.store().session_info().await.expect("open").0);
        clients.push(format!("{} on server {:?}", r.holder(), on.get(&s)));
    }

    let (killed_at, zk_led_at) = block_in_place(|| {
        ensemble.kill(zk_leader);
        let killed_at = Instant::now();
        let new = ensemble
            .wait_for_leader(ZK_ELECTION)
            .unwrap_or_else(|e| panic!("the two servers left elect no leader: {e}"));
        assert_ne!(new, zk_leader);
        (killed_at, Instant::now())
    });
    let (kept, led_at) = kept_or_handed_over(&running, &first, killed_at, zk_led_at).await;
    // A second leader could begin only once a node vanished while its
    // holder still believed it led: its session expiring, which the new
    // ensemble leader timed from its election. Wait that out.
    sleep_until(zk_led_at + TTL + EXPIRY_SLACK.for_ttl(TTL) + LATE).await;
    let (_, now) = first_leading(&running, max_gap(), "someone leads at the end").await;
    let observed_until = Instant::now();

    shut_down(running).await;
    let intervals = assert_safe(&history, killed_at);
    let last = intervals.last().expect("a term");
    assert!(
        last.end.expect("ended at the shutdown") >= observed_until,
        "the last term ended before the shutdown: {}",
        shown(&intervals, killed_at)
    );
    if kept {
        assert_eq!(now.token, first.token, "a kept its term");
    }
    eprintln!(
        "ZooKeeper leader server {zk_leader} killed ({}); a new one led {} after the kill; \
         regent: a {} ({} after the kill); terms: {}",
        clients.join(", "),
        since(killed_at, zk_led_at),
        if kept {
            "kept its term"
        } else {
            "stepped down, another leads"
        },
        since(killed_at, led_at),
        shown(&intervals, killed_at)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_regent_leaders_own_server_moves_its_session_or_hands_over() {
    let _serial = SERIAL.lock().await;
    let mut ensemble = start_ensemble().await;
    let zk_leader = block_in_place(|| ensemble.leader_index()).expect("the ensemble has a leader");
    // a knows the two followers only, so that the server it is on is a
    // follower: killing it moves a's client, and the ensemble keeps its
    // leader (no election: a separate test kills the leader).
    let followers: Vec<usize> = (0..ensemble.len()).filter(|&i| i != zk_leader).collect();
    let a_servers = followers
        .iter()
        .map(|&i| ensemble.member(i).address())
        .collect::<Vec<_>>()
        .join(",");
    let all = ensemble.connect_string();
    let history = History::new();
    let (running, first) = campaign(
        [a_servers, all.clone(), all],
        "/ensemble-own",
        "own-server-killed",
        &history,
    )
    .await;
    let (a_session, timeout) = running[0]
        .candidate
        .store()
        .session_info()
        .await
        .expect("a's session");
    assert_eq!(timeout, TTL, "the session timeout is the ttl asked");
    let a_session = hex(a_session);
    assert_eq!(first.session, a_session);
    let own = *connections(&ensemble)
        .get(&a_session)
        .unwrap_or_else(|| panic!("no server lists a's session {a_session} in cons"));
    assert!(followers.contains(&own), "a is on server {own}, the leader");
    let other = followers.iter().copied().find(|&i| i != own).expect("two");

    block_in_place(|| ensemble.kill(own));
    let killed_at = Instant::now();
    // The client moves its session to the other follower: within the
    // session timeout, or the session is lost.
    let mut moved_at = None;
    while Instant::now() < killed_at + TTL {
        if connections(&ensemble).get(&a_session) == Some(&other) {
            moved_at = Some(Instant::now());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (kept, led_at) = kept_or_handed_over(&running, &first, killed_at, killed_at).await;
    if kept {
        assert!(
            moved_at.is_some(),
            "a kept leading, yet its session {a_session} is not on server {other}"
        );
        assert_eq!(
            running[0]
                .candidate
                .store()
                .session_info()
                .await
                .map(|s| hex(s.0)),
            Some(a_session.clone()),
            "a leads on its session"
        );
    }
    // Had the session not moved, the ensemble leader would expire it a
    // session timeout after the follower last told it of the session:
    // wait that out.
    sleep_until(killed_at + TTL + EXPIRY_SLACK.for_ttl(TTL) + LATE).await;
    let (_, now) = first_leading(&running, max_gap(), "someone leads at the end").await;
    let observed_until = Instant::now();

    shut_down(running).await;
    let intervals = assert_safe(&history, killed_at);
    let last = intervals.last().expect("a term");
    assert!(
        last.end.expect("ended at the shutdown") >= observed_until,
        "the last term ended before the shutdown: {}",
        shown(&intervals, killed_at)
    );
    if kept {
        assert_eq!(now.token, first.token, "a kept its term");
        assert_eq!(intervals.len(), 1, "{}", shown(&intervals, killed_at));
    }
    eprintln!(
        "a's server {own} (a follower; leader {zk_leader}) killed: a's session {a_session} on \
         server {other} {}; regent: a {} ({} after the kill); terms: {}",
        moved_at.map_or_else(
            || "never seen".to_owned(),
            |at| format!("{} after the kill", since(killed_at, at))
        ),
        if kept {
            "kept its term"
        } else {
            "stepped down, another leads"
        },
        since(killed_at, led_at),
        shown(&intervals, killed_at)
    );
}
