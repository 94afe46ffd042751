//! regent's store conformance suite against a real etcd.

mod common;

use common::ConformanceHarness;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_store_conforms() {
    ConformanceHarness::plain(common::start_etcd().await)
        .run()
        .await;
}
