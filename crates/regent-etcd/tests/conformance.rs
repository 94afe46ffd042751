//! regent's store conformance suite against a real etcd.

mod common;

use std::time::Duration;

use regent_core::ElectionName;
use regent_core::testing::{Harness, run};
use regent_etcd::EtcdStore;
use regent_testkit::engines::Etcd;

struct EtcdHarness {
    etcd: Etcd,
}

impl Harness for EtcdHarness {
    type Store = EtcdStore;

    async fn store(&self) -> EtcdStore {
        common::store(self.etcd.endpoints()).await
    }

    async fn unreachable_store(&self) -> EtcdStore {
        common::store(vec![format!("127.0.0.1:{}", common::closed_port())]).await
    }

    fn ttl(&self) -> Duration {
        // etcd's minimum with the kit's fast-election flags.
        Duration::from_secs(1)
    }

    async fn delete_records(&self, election: &ElectionName) {
        common::delete_prefix(&self.etcd.endpoints(), election).await;
    }

    async fn put_garbage(&self, election: &ElectionName) {
        common::raw(&self.etcd.endpoints())
            .await
            .put(
                format!("{election}/garbage"),
                b"\x00\xff not regent".to_vec(),
                None,
            )
            .await
            .expect("put a foreign key");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_store_conforms() {
    let harness = EtcdHarness {
        etcd: common::start_etcd().await,
    };
    run(&harness).await;
}
