//! The store conformance suite against the memory store, in both styles.

use regent_core::testing::{MemoryHarness, run};

#[tokio::test(start_paused = true)]
async fn memory_race_store_conforms() {
    run(&MemoryHarness::race()).await;
}

#[tokio::test(start_paused = true)]
async fn memory_queue_store_conforms() {
    run(&MemoryHarness::queue()).await;
}

/// The suite must be able to fail: a store that hands out a second lease
/// while one lives is caught.
#[tokio::test(start_paused = true)]
async fn suite_catches_a_store_that_breaks_the_contract() {
    let failures = regent_core::testing::run_checks(&broken::Harness::default()).await;
    let names: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert!(
        names
            .iter()
            .any(|f| f.starts_with("acquire_wins_only_when_free")),
        "{names:#?}"
    );
    assert!(
        names
            .iter()
            .any(|f| f.starts_with("concurrent_acquires_have_one_winner")),
        "{names:#?}"
    );
}

mod broken {
    //! A store that always lets the acquirer win (and reuses tokens).
    use std::time::Duration;

    use regent_core::memory::MemoryStore;
    use regent_core::{
        Acquire, AcquireRequest, ElectionName, LeaderInfo, LeaderStream, Lease, LeaseStore,
        Renewal, StoreError, StoreInfo,
    };

    #[derive(Clone, Default)]
    pub(crate) struct Store(Option<MemoryStore>);

    impl Store {
        fn inner(&self) -> &MemoryStore {
            self.0.as_ref().expect("built by the harness")
        }
    }

    impl LeaseStore for Store {
        fn info(&self) -> StoreInfo {
            self.inner().info()
        }
        async fn try_acquire(
            &self,
            req: &AcquireRequest,
            queued: Option<&Lease>,
        ) -> Result<Acquire, StoreError> {
            match self.inner().try_acquire(req, queued).await? {
                Acquire::Held {
                    leader: Some(l), ..
                } => Ok(Acquire::Won(Lease {
                    election: req.election.clone(),
                    holder: req.holder.clone(),
                    token: l.token,
                    ttl: req.ttl,
                    handle: Default::default(),
                })),
                other => Ok(other),
            }
        }
        async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
            self.inner().renew(lease).await
        }
        async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
            self.inner().release(lease).await
        }
        async fn current_leader(&self, e: &ElectionName) -> Result<Option<LeaderInfo>, StoreError> {
            self.inner().current_leader(e).await
        }
        async fn watch(&self, e: &ElectionName) -> Result<LeaderStream, StoreError> {
            self.inner().watch(e).await
        }
    }

    #[derive(Default)]
    pub(crate) struct Harness {
        store: std::sync::OnceLock<MemoryStore>,
    }

    impl Harness {
        fn mem(&self) -> &MemoryStore {
            self.store.get_or_init(MemoryStore::race)
        }
    }

    impl regent_core::testing::Harness for Harness {
        type Store = Store;
        async fn store(&self) -> Store {
            Store(Some(self.mem().clone()))
        }
        async fn unreachable_store(&self) -> Store {
            let dead = MemoryStore::race();
            dead.fail_next(u32::MAX);
            Store(Some(dead))
        }
        fn ttl(&self) -> Duration {
            Duration::from_secs(2)
        }
        async fn delete_records(&self, e: &ElectionName) {
            self.mem().delete_records(e);
        }
        async fn put_garbage(&self, e: &ElectionName) {
            self.mem().put_garbage(e);
        }
    }
}
