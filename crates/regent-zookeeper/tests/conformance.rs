//! regent's store conformance suite against a real ZooKeeper.

mod common;

use common::ConformanceHarness;

/// The suite's futures nest deep in an unoptimised build (etcd's overflowed
/// a 2 MiB stack): the suite runs on a runtime whose threads have 16 MiB.
const STACK: usize = 16 << 20;

#[test]
fn zookeeper_store_conforms() {
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
                    ConformanceHarness {
                        zookeeper: common::start_zookeeper().await,
                        chroot: "/regent-conformance".to_owned(),
                    }
                    .run()
                    .await;
                });
        })
        .expect("a thread for the suite");
    if let Err(panic) = suite.join() {
        std::panic::resume_unwind(panic);
    }
}
