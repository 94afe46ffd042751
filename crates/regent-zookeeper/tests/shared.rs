//! What one store's many elections and watchers share:
//!
//! * renewals reach ZooKeeper in rounds: a round is one `multiRead` of the
//!   nodes of every renewal waiting, so a process holding many elections
//!   sends O(1) requests per ttl, not one per renewal; and each renewal in
//!   a round still gets its own answer;
//! * the watchers of one election share one watch: a change costs the
//!   server one new look, not one per watcher.

mod common;

use std::time::Duration;

use futures_util::StreamExt as _;
use futures_util::future::join_all;
use regent_core::{Acquire, ElectionName, Lease, LeaseStore, Renewal};
use regent_testkit::engines::ZooKeeper;
use regent_testkit::fixtures::acquire_request;

const TTL: Duration = Duration::from_secs(2);
const ELECTIONS: usize = 200;

/// The packets the server has received from clients so far.
fn packets_received(zk: &ZooKeeper) -> u64 {
    let mntr = zk.four_letter_word("mntr").expect("mntr answers");
    mntr.lines()
        .find_map(|l| l.strip_prefix("zk_packets_received\t"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zk_packets_received in mntr:\n{mntr}"))
}

/// The node of `lease` under `chroot`: its handle is `SESSION/NAME`.
fn node(chroot: &str, lease: &Lease) -> String {
    let name = lease
        .handle
        .as_str()
        .split_once('/')
        .expect("SESSION/NAME")
        .1;
    format!("{chroot}/{}/{name}", lease.election)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_renewals_of_many_elections_go_in_one_read_and_each_gets_its_answer() {
    let zk = common::start_zookeeper().await;
    let store = common::store_builder(&zk.address(), "/rounds")
        .connect()
        .await
        .expect("connect");
    let acquired = join_all((0..ELECTIONS).map(|i| {
        let store = store.clone();
        async move {
            let election = ElectionName::new(format!("e{i}")).expect("a valid name");
            store
                .try_acquire(&acquire_request(&election, "host-1", TTL), None)
                .await
        }
    }))
    .await;
    let leases: Vec<Lease> = acquired
        .into_iter()
        .map(|a| match a.expect("acquire") {
            Acquire::Won(lease) => lease,
            other => panic!("alone in its election, it wins: {other:?}"),
        })
        .collect();

    let before = packets_received(&zk);
    let renewals = join_all(leases.iter().map(|l| store.renew(l))).await;
    let sent = packets_received(&zk) - before;
    for (l, r) in leases.iter().zip(&renewals) {
        assert!(matches!(r, Ok(Renewal::Renewed)), "{}: {r:?}", l.election);
    }
    // One read for the first renewal to come, one for the rest, and the
    // client's pings; one per renewal would be 200.
    assert!(
        sent <= 10,
        "{ELECTIONS} renewals at once sent the server {sent} packets"
    );

    // A node deleted behind our back: its renewal, in a round with the
    // others, is lost, and theirs renewed.
    let gone = 7;
    common::raw(&zk.address())
        .await
        .delete(&node("/rounds", &leases[gone]), None)
        .await
        .expect("delete a node as an operator would");
    let renewals = join_all(leases.iter().map(|l| store.renew(l))).await;
    for (i, (l, r)) in leases.iter().zip(&renewals).enumerate() {
        if i == gone {
            assert!(matches!(r, Ok(Renewal::Lost)), "{}: {r:?}", l.election);
        } else {
            assert!(matches!(r, Ok(Renewal::Renewed)), "{}: {r:?}", l.election);
        }
    }
    // And it stays lost.
    assert!(matches!(
        store.renew(&leases[gone]).await,
        Ok(Renewal::Lost)
    ));
    eprintln!("{ELECTIONS} renewals at once: {sent} packets received by the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchers_of_one_election_share_one_watch() {
    const WATCHERS: usize = 200;
    let zk = common::start_zookeeper().await;
    let store = common::store_builder(&zk.address(), "/watched")
        .connect()
        .await
        .expect("connect");
    let election = ElectionName::new("jobs").expect("a valid name");
    let mut watches = Vec::new();
    for _ in 0..WATCHERS {
        let mut watch = store.watch(&election).await.expect("watch");
        let first = watch.next().await.expect("a first item").expect("no error");
        assert_eq!(first, None, "no leader yet");
        watches.push(watch);
    }
    let before = packets_received(&zk);
    let Acquire::Won(lease) = store
        .try_acquire(&acquire_request(&election, "host-1", TTL), None)
        .await
        .expect("acquire")
    else {
        panic!("alone in its election, it wins")
    };
    for w in &mut watches {
        let leader = w.next().await.expect("an item").expect("no error");
        assert_eq!(leader.map(|l| l.token), Some(lease.token));
    }
    let sent = packets_received(&zk) - before;
    // The acquire (a create, a list, a look) and one new look of the
    // watch (list, leader, its metadata) and pings; a watch per watcher
    // would be 3 per watcher.
    assert!(
        sent <= 30,
        "{WATCHERS} watchers of one change sent the server {sent} packets"
    );
    eprintln!("{WATCHERS} watchers of one change: {sent} packets received by the server");
}
