//! regent's store conformance suite against a real etcd.

mod common;

use common::ConformanceHarness;

/// On a big stack: the suite's futures nest deep in an unoptimised build.
#[test]
fn etcd_store_conforms() {
    regent_testkit::block_on_big_stack(4, || async {
        ConformanceHarness::plain(common::start_etcd().await)
            .run()
            .await;
    });
}
