//! regent's store conformance suite against a real ZooKeeper.

mod common;

use common::ConformanceHarness;

/// On a big stack: the suite's futures nest deep in an unoptimised build.
#[test]
fn zookeeper_store_conforms() {
    regent_testkit::block_on_big_stack(4, || async {
        ConformanceHarness {
            zookeeper: common::start_zookeeper().await,
            chroot: "/regent-conformance".to_owned(),
        }
        .run()
        .await;
    });
}
