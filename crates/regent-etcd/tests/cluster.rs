//! A 3-member etcd cluster on 127.0.0.1: killing the member that is Raft
//! leader while a regent leader holds an election either leaves that leader
//! leading or hands over to exactly one new leader; tokens never go
//! backwards; no leaderless gap is longer than ttl + etcd's election timeout
//! + 1 s.
//!
//! With every member as endpoint the regent leader's client fails over to a
//! surviving member and the leader usually keeps leading. The handover
//! branch is forced by giving the regent leader the Raft leader as its only
//! endpoint: after the kill it cannot renew, steps down at its renew
//! deadline, and a follower on a surviving member takes over once etcd
//! expires the old lease.

mod common;

use std::time::Duration;

use regent_core::{Candidate, ElectionName, EndReason, Ended, FencingToken, HolderId, Status};
use regent_etcd::EtcdStore;
use regent_testkit::engines::EtcdCluster;
use regent_testkit::engines::etcd::ELECTION_TIMEOUT;
use regent_testkit::fixtures::first_watched;
use regent_testkit::{History, Interval};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(2);
const RENEW_EVERY: Duration = Duration::from_millis(300);
const RENEW_DEADLINE: Duration = Duration::from_millis(1500);

/// The longest the election may stay without a regent leader after a kill.
fn max_gap() -> Duration {
    TTL + ELECTION_TIMEOUT + Duration::from_secs(1)
}

async fn start_cluster() -> EtcdCluster {
    tokio::task::spawn_blocking(|| EtcdCluster::start(3))
        .await
        .expect("the start task ran")
        .unwrap_or_else(|e| panic!("cannot start a 3-member etcd cluster: {e}"))
}

/// A candidate whose store talks to `endpoints` only, with the timing every
/// test here uses.
async fn candidate(
    endpoints: Vec<String>,
    election: &ElectionName,
    who: &str,
) -> Candidate<EtcdStore> {
    let store = EtcdStore::builder(endpoints)
        .request_timeout(Duration::from_millis(500))
        .connect()
        .await
        .expect("connect");
    Candidate::builder(store, election.clone(), common::holder(who))
        .ttl(TTL)
        .renew_every(RENEW_EVERY)
        .renew_deadline(RENEW_DEADLINE)
        .grace(Duration::from_millis(100))
        .build()
        .expect("valid timing")
}

/// A candidate campaigning in a task until it is shut down.
struct Running {
    candidate: Candidate<EtcdStore>,
    /// The token of the term it leads in, set once the term's begin is in
    /// the history and cleared once its end is.
    leading: watch::Receiver<Option<FencingToken>>,
    /// How each of its terms ended.
    task: JoinHandle<Vec<Ended>>,
}

impl Running {
    /// Campaigns again after every term, recording each term in `history`.
    fn spawn(candidate: Candidate<EtcdStore>, history: &History) -> Self {
        let (c, history) = (candidate.clone(), history.clone());
        let (leading_tx, leading) = watch::channel(None);
        let task = tokio::spawn(async move {
            let mut ends = Vec::new();
            loop {
                match c.campaign().await {
                    Ok(leadership) => {
                        history.begin_leadership(&leadership);
                        leading_tx.send_replace(Some(leadership.token()));
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
}

/// Shuts every candidate down at once; returns how each one's terms ended,
/// in order.
async fn shut_down(running: Vec<Running>) -> Vec<Vec<Ended>> {
    for r in &running {
        r.candidate.shutdown_token().cancel();
    }
    let mut ends = Vec::new();
    for r in running {
        let holder = r.holder().clone();
        let task = tokio::time::timeout(Duration::from_secs(10), r.task);
        ends.push(
            task.await
                .unwrap_or_else(|_| panic!("{holder} did not stop within 10 s"))
                .expect("candidate task"),
        );
    }
    ends
}

/// Checks the record, then every handover: tokens grow and no leaderless gap
/// is longer than [`max_gap`]. Returns the terms in order of start.
fn assert_safe_handovers(history: &History, killed_at: Instant) -> Vec<Interval> {
    history.assert_ok();
    let intervals = history.intervals();
    for pair in intervals.windows(2) {
        let end = pair[0].end.expect("ended before the next began");
        let gap = pair[1].start.saturating_duration_since(end);
        assert!(
            gap <= max_gap(),
            "leaderless for {gap:?} (> {:?}) from +{:?} after the kill: {intervals:#?}",
            max_gap(),
            end.saturating_duration_since(killed_at)
        );
        assert!(
            pair[1].token > pair[0].token,
            "tokens went backwards: {intervals:#?}"
        );
    }
    intervals
}

/// Makes member `i` the Raft leader again if it lost that role (a busy
/// machine can miss the kit's 10 ms heartbeats), so that the kill that
/// follows hits the Raft leader.
fn keep_raft_leader(cluster: &EtcdCluster, i: usize) {
    if cluster.leader_index() == Some(i) {
        return;
    }
    // `endpoint status`: "ENDPOINT, ID, VERSION, ..." with the ID in hex,
    // the form `move-leader` takes.
    let status = cluster.member(i).etcdctl(["endpoint", "status"]);
    let status = String::from_utf8_lossy(&status.stdout);
    let id = status
        .split(", ")
        .nth(1)
        .unwrap_or_else(|| panic!("no member id in {status:?}"))
        .to_owned();
    let moved = cluster.etcdctl(["move-leader", &id]);
    assert!(
        moved.status.success(),
        "move the Raft leadership back to m{i}: {}",
        String::from_utf8_lossy(&moved.stderr)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while cluster.leader_index() != Some(i) {
        assert!(
            std::time::Instant::now() < deadline,
            "m{i} did not become Raft leader again"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_raft_leader_keeps_one_regent_leader() {
    let mut cluster = start_cluster().await;
    let election = common::election("cluster");
    let history = History::new();
    let mut running = Vec::new();
    for who in ["a", "b", "c"] {
        let c = candidate(cluster.endpoints(), &election, who).await;
        running.push(Running::spawn(c, &history));
    }
    let leading = running.iter().map(|r| r.leading.clone());
    first_watched(leading, TTL * 2, "a regent leader", Option::is_some).await;
    assert_eq!(
        history.leaders_at(Instant::now()).len(),
        1,
        "one regent leader before the kill: {:?}",
        history.intervals()
    );

    let raft_leader = tokio::task::block_in_place(|| cluster.leader_index())
        .expect("the cluster has a Raft leader");
    let killed_at = Instant::now();
    tokio::task::block_in_place(|| cluster.kill(raft_leader));
    tokio::time::sleep(TTL * 3).await;

    shut_down(running).await;
    let intervals = assert_safe_handovers(&history, killed_at);
    let terms: Vec<(String, u64)> = intervals
        .iter()
        .map(|i| (i.holder.to_string(), i.token.get()))
        .collect();
    eprintln!("terms (holder, token), Raft leader m{raft_leader} killed: {terms:?}");
    let last = intervals.last().expect("at least one term");
    let last_end = last.end.expect("stopped");
    assert!(
        last_end >= killed_at + TTL * 2,
        "no leader in the end phase after the kill: {intervals:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_raft_leader_under_a_pinned_leader_hands_over_to_one_follower() {
    let mut cluster = start_cluster().await;
    let election = common::election("cluster-handover");
    let history = History::new();
    let raft_leader = tokio::task::block_in_place(|| cluster.leader_index())
        .expect("the cluster has a Raft leader");
    let others: Vec<usize> = (0..cluster.len()).filter(|&i| i != raft_leader).collect();

    // "a" sees the Raft leader only, and wins first.
    let a = candidate(vec![cluster.member(raft_leader).endpoint()], &election, "a").await;
    let a = Running::spawn(a, &history);
    let (_, a_token) =
        first_watched([a.leading.clone()], TTL * 2, "a leads", Option::is_some).await;
    let a_token = a_token.expect("a leads");

    // "b" and "c" see one surviving member each, and queue behind "a".
    let mut followers = Vec::new();
    for (who, &member) in ["b", "c"].iter().zip(&others) {
        let c = candidate(vec![cluster.member(member).endpoint()], &election, who).await;
        followers.push(Running::spawn(c, &history));
    }
    for f in &followers {
        first_watched(
            [f.candidate.status()],
            TTL * 2,
            "b and c follow a",
            |s| matches!(s, Status::Follower { leader: Some(l) } if l.token == a_token),
        )
        .await;
    }

    // Taken once the member is dead: a renewal sent while it was being
    // killed may still have reached it.
    let (killed_at, raft_recovered) = tokio::task::block_in_place(|| {
        keep_raft_leader(&cluster, raft_leader);
        cluster.kill(raft_leader);
        let killed_at = Instant::now();
        cluster
            .wait_for_leader(Duration::from_secs(5))
            .expect("the survivors elect a Raft leader");
        (killed_at, Instant::now())
    });
    // "a" cannot renew any more: it steps down on its own clock, within the
    // renew deadline of its last renewal, sent before the kill.
    let a_leading = [a.leading.clone()];
    first_watched(
        a_leading,
        RENEW_DEADLINE * 2,
        "a steps down",
        Option::is_none,
    )
    .await;
    let leading = followers.iter().map(|f| f.leading.clone());
    let (new, _) = first_watched(leading, max_gap() * 2, "b or c leads", Option::is_some).await;
    let took_over = Instant::now();
    // Long enough for several renewals: the new leader keeps leading, and
    // nobody else begins a term.
    tokio::time::sleep(TTL / 2).await;

    let new_holder = followers[new].holder().clone();
    let mut ends = shut_down(std::iter::once(a).chain(followers).collect()).await;
    let intervals = assert_safe_handovers(&history, killed_at);
    let since_kill = |at: Instant| match at.checked_duration_since(killed_at) {
        Some(after) => format!("+{after:.3?}"),
        None => format!("-{:.3?}", killed_at - at),
    };
    let terms: Vec<String> = intervals
        .iter()
        .map(|i| {
            let end = i.end.map_or_else(|| "…".to_owned(), since_kill);
            format!(
                "{} token {} [{}, {end})",
                i.holder,
                i.token,
                since_kill(i.start)
            )
        })
        .collect();
    eprintln!(
        "Raft leader m{raft_leader} killed; Raft leader again by {}, {new_holder} leads by {}; \
         terms since the kill: {terms:?}",
        since_kill(raft_recovered),
        since_kill(took_over),
    );

    let [old, new] = intervals.as_slice() else {
        panic!("exactly a's term and one successor's: {intervals:#?}");
    };
    assert_eq!(old.holder.as_str(), "a", "{intervals:#?}");
    assert_eq!(old.token, a_token);
    assert_eq!(new.holder, new_holder, "{intervals:#?}");
    assert!(
        new.token > old.token,
        "the successor's token (create revision) is larger: {intervals:#?}"
    );
    let a_end = old.end.expect("a's term ended");
    assert!(
        a_end <= killed_at + RENEW_DEADLINE,
        "a led no longer than its renew deadline after the kill: {intervals:#?}"
    );
    assert!(a_end <= new.start, "a stepped down first: {intervals:#?}");
    let new_end = new.end.expect("the successor's term ended at the shutdown");
    assert!(
        new_end >= took_over + TTL / 2,
        "the successor kept leading until the shutdown: {intervals:#?}"
    );
    let a_ends = ends.remove(0);
    assert_eq!(
        a_ends.iter().map(|e| e.reason).collect::<Vec<_>>(),
        [EndReason::DeadlinePassed],
        "a stepped down at its renew deadline, once"
    );
}
