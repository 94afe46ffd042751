//! A 3-member etcd cluster on 127.0.0.1: killing the member that is Raft
//! leader while a regent leader holds an election either leaves that leader
//! leading or hands over to exactly one new leader; tokens never go
//! backwards; no leaderless gap is longer than ttl + etcd's election timeout
//! + 1 s.

mod common;

use std::time::Duration;

use regent_core::Candidate;
use regent_etcd::EtcdStore;
use regent_testkit::History;
use regent_testkit::engines::EtcdCluster;
use regent_testkit::engines::etcd::ELECTION_TIMEOUT;
use tokio::time::Instant;

const TTL: Duration = Duration::from_secs(2);

async fn run_candidate(candidate: Candidate<EtcdStore>, history: History) {
    let stop = candidate.shutdown_token();
    while !stop.is_cancelled() {
        match candidate.campaign().await {
            Ok(leadership) => {
                history.begin_leadership(&leadership);
                leadership.until_ended().await;
                history.end_leadership(&leadership);
            }
            Err(regent_core::CampaignError::Shutdown) => break,
            Err(e) => panic!("campaign of {} failed: {e}", candidate.holder()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_raft_leader_keeps_one_regent_leader() {
    let mut cluster = tokio::task::spawn_blocking(|| EtcdCluster::start(3))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot start a 3-member etcd cluster: {e}"));
    let election = common::election("cluster");
    let history = History::new();
    let mut candidates = Vec::new();
    let mut tasks = Vec::new();
    for who in ["a", "b", "c"] {
        let store = EtcdStore::builder(cluster.endpoints())
            .request_timeout(Duration::from_millis(500))
            .connect()
            .await
            .expect("connect");
        let c = Candidate::builder(store, election.clone(), common::holder(who))
            .ttl(TTL)
            .renew_every(Duration::from_millis(300))
            .renew_deadline(Duration::from_millis(1500))
            .grace(Duration::from_millis(100))
            .build()
            .expect("valid timing");
        candidates.push(c.shutdown_token());
        tasks.push(tokio::spawn(run_candidate(c, history.clone())));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        history.leaders_at(Instant::now()).len(),
        1,
        "one regent leader before the kill: {:?}",
        history.intervals()
    );

    let raft_leader = cluster
        .leader_index()
        .expect("the cluster has a Raft leader");
    let killed_at = Instant::now();
    tokio::task::block_in_place(|| cluster.kill(raft_leader));
    tokio::time::sleep(TTL * 3).await;

    for stop in &candidates {
        stop.cancel();
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("candidates stop")
            .expect("candidate task");
    }
    let summary = history.assert_ok();
    let terms: Vec<(String, u64)> = history
        .intervals()
        .iter()
        .map(|i| (i.holder.to_string(), i.token.get()))
        .collect();
    eprintln!("terms (holder, token), Raft leader m{raft_leader} killed: {terms:?}");
    let mut intervals = history.intervals();
    intervals.sort_by_key(|i| i.start);
    assert!(summary.terms >= 1);
    // Leaderless gaps after the first term, up to the stop.
    let limit = TTL + ELECTION_TIMEOUT + Duration::from_secs(1);
    for pair in intervals.windows(2) {
        let end = pair[0].end.expect("ended before the next began");
        let gap = pair[1].start.saturating_duration_since(end);
        assert!(
            gap <= limit,
            "leaderless for {gap:?} (> {limit:?}) after the kill at +{:?}: {intervals:#?}",
            end.saturating_duration_since(killed_at)
        );
        assert!(
            pair[1].token > pair[0].token,
            "tokens went backwards: {intervals:#?}"
        );
    }
    let last = intervals.last().expect("at least one term");
    let last_end = last.end.expect("stopped");
    assert!(
        last_end >= killed_at + TTL * 2,
        "no leader in the end phase after the kill: {intervals:#?}"
    );
}
