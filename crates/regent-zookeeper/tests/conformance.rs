//! regent's store conformance suite against a real ZooKeeper.

mod common;

use common::ConformanceHarness;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zookeeper_store_conforms() {
    ConformanceHarness {
        zookeeper: common::start_zookeeper().await,
        chroot: "/regent-conformance".to_owned(),
    }
    .run()
    .await;
}
