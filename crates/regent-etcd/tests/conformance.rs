//! regent's store conformance suite against a real etcd.

mod common;

use common::ConformanceHarness;

/// The suite's futures nest deep in an unoptimised build, and with the
/// workspace's features (TLS in etcd's client) they overflowed a 2 MiB
/// stack: the suite runs on a runtime whose threads have 16 MiB.
const STACK: usize = 16 << 20;

#[test]
fn etcd_store_conforms() {
    let suite = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(4)
                .thread_stack_size(STACK)
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(async {
                    ConformanceHarness::plain(common::start_etcd().await)
                        .run()
                        .await;
                });
        })
        .expect("a thread for the suite");
    if let Err(panic) = suite.join() {
        std::panic::resume_unwind(panic);
    }
}
