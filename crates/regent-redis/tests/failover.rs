//! Redis with a replica and three Sentinels: the store follows the master
//! through a failover; the tokens after a failover to a replica that
//! missed the last writes are above every token before it, with and
//! without a leader in office; a replica acknowledges a term (`WAIT`); a
//! master name the Sentinels do not know is a configuration error.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::time::{Duration, Instant};

use regent_core::{Acquire, AcquireRequest, ElectionName, HolderId, Lease, LeaseStore, Metadata};
use regent_redis::{RedisStore, redis};

use common::{cmd, kit, unique};

fn request(election: &ElectionName, holder: &str) -> AcquireRequest {
    AcquireRequest {
        election: election.clone(),
        holder: HolderId::new(holder).unwrap(),
        ttl: Duration::from_secs(30),
        metadata: Metadata::default(),
    }
}

/// Acquires until the store answers (it reconnects through the Sentinels
/// after the master changed), within `within`.
async fn acquire_eventually(
    store: &RedisStore,
    election: &ElectionName,
    holder: &str,
    within: Duration,
) -> Acquire {
    let start = Instant::now();
    loop {
        match store.try_acquire(&request(election, holder), None).await {
            Ok(a) => return a,
            Err(e) => {
                assert!(e.is_transient(), "during a failover: {e}");
                assert!(
                    start.elapsed() < within,
                    "the store found no master within {within:?}: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// The election's token counter on the server at `url`.
async fn counter_at(url: &str, election: &ElectionName) -> Option<u64> {
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let value: Option<String> = redis::cmd("GET")
        .arg(format!("regent:{{{election}}}:token"))
        .query_async(&mut c)
        .await
        .unwrap();
    value.map(|v| v.parse().expect("a counter"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_after_a_failover_to_a_replica_that_missed_writes_are_above() {
    let mut cluster = kit::sentinels();
    let store = RedisStore::builder_for(&cluster.store_url())
        .expect("the kit's URL")
        .build()
        .await
        .expect("connect through the Sentinels");
    let election = unique("failover");

    // With a replica that answers, a term it must acknowledge is won.
    let waiting = RedisStore::builder_for(&cluster.store_url())
        .expect("the kit's URL")
        .wait_replicas(1, Duration::from_secs(2))
        .build()
        .await
        .expect("connect through the Sentinels");
    let acked = unique("acked");
    match acquire_eventually(&waiting, &acked, "a", Duration::from_secs(5)).await {
        Acquire::Won(l) => waiting.release(&l).await.unwrap(),
        other => panic!("a free election, acknowledged by the replica: {other:?}"),
    }

    // Terms the replica sees.
    let Acquire::Won(seen) =
        acquire_eventually(&store, &election, "a", Duration::from_secs(5)).await
    else {
        panic!("a free election was not won");
    };
    store.release(&seen).await.unwrap();
    let replica = format!("redis://{}", cluster.replica().addr());
    let start = Instant::now();
    while counter_at(&replica, &election).await != Some(seen.token.get()) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the replica never saw the first term"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Terms the replica misses: it is stopped while they are written.
    let _ = cluster.pause_replica();
    // Stopped is not enough: what the primary sends lands in the stopped
    // replica's socket buffer, and it applies it once resumed. Cut the
    // link too; the stopped replica cannot connect again.
    let primary = format!("redis://{}", cluster.master_addr().expect("a master"));
    cmd(
        &primary,
        redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"),
    )
    .await;
    let mut before: Vec<Lease> = Vec::new();
    for holder in ["b", "c", "d"] {
        let Acquire::Won(l) =
            acquire_eventually(&store, &election, holder, Duration::from_secs(5)).await
        else {
            panic!("{holder} should win a free election");
        };
        if holder != "d" {
            store.release(&l).await.unwrap();
        }
        before.push(l);
    }
    let highest = before.iter().map(|l| l.token).max().unwrap();
    // d holds a term when the primary dies: the promoted replica never
    // heard of it.
    let new_master = tokio::task::block_in_place(|| cluster.fail_over(Duration::from_secs(60)))
        .expect("the Sentinels promote the replica");

    // The scenario holds: the new master's counter is behind.
    let counter = counter_at(&format!("redis://{new_master}"), &election).await;
    assert_eq!(
        counter,
        Some(seen.token.get()),
        "the promoted replica should have missed the terms of b, c and d"
    );

    // The term d held may be lost with the writes: then e wins at once,
    // and only the token tells d's writes from e's.
    let after = match acquire_eventually(&store, &election, "e", Duration::from_secs(30)).await {
        Acquire::Won(l) => l,
        Acquire::Held {
            leader: Some(l), ..
        } => {
            // The replica had d's term after all: it leads with its token.
            assert_eq!(l.token, highest, "a term the old master never granted");
            store.release(&before[2]).await.unwrap();
            match acquire_eventually(&store, &election, "e", Duration::from_secs(5)).await {
                Acquire::Won(l) => l,
                other => panic!("after d released: {other:?}"),
            }
        }
        other => panic!("after the failover: {other:?}"),
    };
    assert!(
        after.token > highest,
        "token {} after the failover is not above {} before it",
        after.token,
        highest
    );
    // And the store talks to the new master: renewals work.
    assert_eq!(
        store.renew(&after).await.unwrap(),
        regent_core::Renewal::Renewed
    );
}

/// A leader whose term a failover loses: the follower wins on the new
/// master with a greater token, and the old leader's term ends (it cannot
/// renew a term the new master never heard of). Between the two, only
/// the token tells their writes apart — which it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_under_a_leader_ends_its_term_and_the_next_token_is_above() {
    use regent_core::Candidate;

    let mut cluster = kit::sentinels();
    let connect = || async {
        RedisStore::builder_for(&cluster.store_url())
            .expect("the kit's URL")
            .call_timeout(Duration::from_millis(500))
            .build()
            .await
            .expect("connect through the Sentinels")
    };
    let (store_a, store_b) = (connect().await, connect().await);
    let election = unique("failover-leader");
    let candidate = |store: RedisStore, who: &str| {
        Candidate::builder(store, election.clone(), HolderId::new(who).unwrap())
            .ttl(Duration::from_secs(4))
            .renew_every(Duration::from_millis(500))
            .renew_deadline(Duration::from_secs(2))
            .grace(Duration::from_millis(500))
            .retry_every(Duration::from_millis(300))
            .build()
            .expect("valid timing")
    };

    // The replica misses the leader's term.
    let _ = cluster.pause_replica();
    let primary = format!("redis://{}", cluster.master_addr().expect("a master"));
    cmd(
        &primary,
        redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"),
    )
    .await;
    let a = candidate(store_a, "a");
    let leading = tokio::time::timeout(Duration::from_secs(10), a.campaign())
        .await
        .expect("a leads in time")
        .expect("a leads");
    let b = candidate(store_b, "b");
    let follower = tokio::spawn(async move {
        let l = b.campaign().await;
        (l, b)
    });

    tokio::task::block_in_place(|| cluster.fail_over(Duration::from_secs(60)))
        .expect("the Sentinels promote the replica");

    let ended = tokio::time::timeout(Duration::from_secs(15), leading.until_ended())
        .await
        .expect("a's term ends: the new master never granted it");
    let (next, _b) = tokio::time::timeout(Duration::from_secs(30), follower)
        .await
        .expect("b leads after the failover")
        .expect("b's task");
    let next = next.expect("b leads");
    assert!(
        next.token() > leading.token(),
        "b's token {} after the failover is not above a's {} ({ended:?})",
        next.token(),
        leading.token()
    );
    drop(a);
}

/// A master name the Sentinels do not monitor is `Config`, not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_name_the_sentinels_do_not_know_is_a_config_error() {
    let cluster = kit::sentinels();
    let url = cluster
        .store_url()
        .replace(&format!("/{}", cluster.master_name()), "/no-such-master");
    let e = RedisStore::connect(&url)
        .await
        .expect_err("an unknown master name");
    assert_eq!(e.kind(), regent_core::ErrorKind::Config, "{e}");
    assert!(e.to_string().contains("no-such-master"), "{e}");
}
