//! Helpers shared by the integration tests: a real ZooKeeper from the test
//! kit, a raw client to tamper with it behind regent's back, and the
//! conformance suite's harness.

#![allow(dead_code)]

use std::time::Duration;

use regent_core::ElectionName;
use regent_core::testing::Harness;
use regent_testkit::engines::ZooKeeper;
use regent_zookeeper::{ZkStore, ZkStoreBuilder};
use zookeeper_client as zk;

/// Starts a standalone server (the kit's 100 ms tick: sessions of 0.2 to
/// 2 s); a missing ZooKeeper fails the test with the kit's message, which
/// names `scripts/install-engines`.
pub(crate) async fn start_zookeeper() -> ZooKeeper {
    tokio::task::spawn_blocking(ZooKeeper::start)
        .await
        .expect("the start task ran")
        .unwrap_or_else(|e| panic!("cannot start ZooKeeper for this test: {e}"))
}

/// The tests' call timeout: short, so that a hang fails a test quickly.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// A store builder on `servers` under `chroot`.
pub(crate) fn store_builder(servers: &str, chroot: &str) -> ZkStoreBuilder {
    ZkStore::builder(servers)
        .chroot(chroot)
        .call_timeout(CALL_TIMEOUT)
}

/// A plain client, as an operator's tool would use.
pub(crate) async fn raw(servers: &str) -> zk::Client {
    zk::Client::connect(servers)
        .await
        .expect("connect a raw client")
}

fn open() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// regent's store conformance suite on one server, under a chroot.
pub(crate) struct ConformanceHarness {
    pub(crate) zookeeper: ZooKeeper,
    pub(crate) chroot: String,
}

impl ConformanceHarness {
    pub(crate) async fn run(&self) {
        regent_core::testing::run(self).await;
    }

    fn dir(&self, election: &ElectionName) -> String {
        format!("{}/{election}", self.chroot)
    }
}

impl Harness for ConformanceHarness {
    type Store = ZkStore;

    async fn store(&self) -> ZkStore {
        store_builder(&self.zookeeper.address(), &self.chroot)
            .connect()
            .await
            .expect("connect the store under test")
    }

    async fn unreachable_store(&self) -> ZkStore {
        store_builder(&format!("127.0.0.1:{}", closed_port()), &self.chroot)
            .build()
            .expect("building sends nothing")
    }

    fn ttl(&self) -> Duration {
        // Granted as asked by the kit's server. 2 s, not 1: the client
        // gives up on a connection that answers nothing for 2/5 of the
        // session, and at 1 s those 400 ms were too few for the JVM on a
        // loaded CI host (an acquire failed "no response from connection
        // in 400ms").
        Duration::from_secs(2)
    }

    async fn delete_records(&self, election: &ElectionName) {
        let c = raw(&self.zookeeper.address()).await;
        let dir = self.dir(election);
        for child in c.list_children(&dir).await.unwrap_or_default() {
            let _ = c.delete(&format!("{dir}/{child}"), None).await;
        }
        let _ = c.delete(&dir, None).await;
    }

    async fn put_garbage(&self, election: &ElectionName) {
        let c = raw(&self.zookeeper.address()).await;
        let dir = self.dir(election);
        c.mkdir(&dir, &open())
            .await
            .expect("make the election's node");
        c.create(&format!("{dir}/garbage"), b"\x00\xff not regent", &open())
            .await
            .expect("create a foreign node");
    }
}

/// A port on 127.0.0.1 where nothing listens.
pub(crate) fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}
