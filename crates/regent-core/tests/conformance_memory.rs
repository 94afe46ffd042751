//! The store conformance suite against the memory store, in both styles.

use std::time::Duration;

use regent_core::StoreInfo;
use regent_core::memory::MemoryStore;
use regent_core::store::{ExpirySlack, TtlGrant};
use regent_core::testing::{MemoryHarness, run, run_checks};

/// The names of the checks that fail on `store` when it claims `claim`.
async fn failures_of_a_store_claiming(
    store: MemoryStore,
    claim: impl Fn(StoreInfo) -> StoreInfo + Send + Sync + 'static,
) -> Vec<String> {
    let harness = lying::Harness::new(store, claim);
    run_checks(&harness)
        .await
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn failed(names: &[String], check: &str) -> bool {
    names.iter().any(|f| f.starts_with(check))
}

/// Regression (ttl range): a store that accepts a ttl below the minimum it
/// declares (rounding it, say) is caught.
#[tokio::test(start_paused = true)]
async fn suite_catches_a_store_that_accepts_a_ttl_below_its_minimum() {
    let names = failures_of_a_store_claiming(MemoryStore::race(), |info| {
        let max = info.max_ttl;
        info.with_ttl_range(Duration::from_secs(1), max)
    })
    .await;
    assert!(
        failed(&names, "ttl_outside_the_store_range_is_refused"),
        "{names:#?}"
    );
}

/// Regression (ttl range): a store that accepts a ttl above the maximum it
/// declares is caught.
#[tokio::test(start_paused = true)]
async fn suite_catches_a_store_that_accepts_a_ttl_above_its_maximum() {
    let names = failures_of_a_store_claiming(MemoryStore::race(), |info| {
        let min = info.min_ttl;
        info.with_ttl_range(min, Duration::from_secs(60))
    })
    .await;
    assert!(
        failed(&names, "ttl_outside_the_store_range_is_refused"),
        "{names:#?}"
    );
}

/// Regression (ttl range): a store that refuses a ttl inside the range it
/// declares is caught.
#[tokio::test(start_paused = true)]
async fn suite_catches_a_store_that_refuses_a_ttl_it_declares() {
    let store = MemoryStore::race();
    store.set_ttl_range(Duration::from_secs(1), Duration::from_secs(60));
    let names = failures_of_a_store_claiming(store, |info| {
        let min = info.min_ttl;
        info.with_ttl_range(min, Duration::from_secs(120))
    })
    .await;
    assert!(
        failed(&names, "ttl_at_the_ends_of_the_store_range_is_honoured"),
        "{names:#?}"
    );
}

/// Regression (granted ttl): a store that grants less than asked without
/// declaring that it negotiates is caught.
#[tokio::test(start_paused = true)]
async fn suite_catches_a_store_that_grants_less_without_saying_so() {
    let store = MemoryStore::race();
    store.set_granted_ttl(Some(Duration::from_millis(1500)));
    let names =
        failures_of_a_store_claiming(store, |info| info.with_ttl_grant(TtlGrant::AtLeastAsked))
            .await;
    assert!(failed(&names, "won_lease_carries_its_fields"), "{names:#?}");
    assert!(
        failed(&names, "ttl_at_the_ends_of_the_store_range_is_honoured"),
        "{names:#?}"
    );
}

/// Regression (expiry slack): a store that expires leases later than it
/// declares is caught by the checks that wait for expiry.
#[tokio::test(start_paused = true)]
async fn suite_catches_a_store_that_expires_later_than_it_says() {
    let store = MemoryStore::race();
    store.set_expiry_slack(ExpirySlack::proportional(100));
    let names =
        failures_of_a_store_claiming(store, |info| info.with_expiry_slack(ExpirySlack::NONE)).await;
    assert!(
        failed(&names, "expired_lease_is_not_revived_by_renew"),
        "{names:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn memory_race_store_conforms() {
    run(&MemoryHarness::race()).await;
}

#[tokio::test(start_paused = true)]
async fn memory_queue_store_conforms() {
    run(&MemoryHarness::queue()).await;
}

/// A store that frees leases one more ttl late (Consul) conforms when it
/// says so: the suite waits for the ttl-dependent slack.
#[tokio::test(start_paused = true)]
async fn memory_store_with_a_ttl_dependent_expiry_slack_conforms() {
    for store in [MemoryStore::race(), MemoryStore::queue()] {
        store.set_expiry_slack(ExpirySlack::proportional(100));
        run(&MemoryHarness::with_store(store)).await;
    }
}

/// A store with a narrow ttl range (as Azure Blob's) conforms: it refuses
/// ttls outside it and honours both ends.
#[tokio::test(start_paused = true)]
async fn memory_store_with_a_narrow_ttl_range_conforms() {
    let store = MemoryStore::race();
    store.set_ttl_range(Duration::from_secs(1), Duration::from_secs(60));
    run(&MemoryHarness::with_store(store)).await;
}

/// A store that negotiates, and says so, may grant less than asked.
#[tokio::test(start_paused = true)]
async fn memory_store_that_negotiates_a_shorter_ttl_conforms() {
    let store = MemoryStore::queue();
    store.set_granted_ttl(Some(Duration::from_millis(1500)));
    run(&MemoryHarness::with_store(store)).await;
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

/// Regression (item 8): a store whose metadata update lets any holder
/// write the leader's record is caught.
#[tokio::test(start_paused = true)]
async fn suite_catches_an_update_that_ignores_the_holder() {
    let failures = run_checks(&sloppy::Harness::new(sloppy::Flaw::AnyHolder)).await;
    let names: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert!(
        failed(&names, "update_metadata_is_seen_and_keeps_the_term"),
        "{names:#?}"
    );
}

/// Regression (item 8): a store that publishes new metadata by taking a
/// new term (release, then acquire) is caught: the token must stay.
#[tokio::test(start_paused = true)]
async fn suite_catches_an_update_that_takes_a_new_term() {
    let failures = run_checks(&sloppy::Harness::new(sloppy::Flaw::NewTerm)).await;
    let names: Vec<String> = failures.iter().map(ToString::to_string).collect();
    assert!(
        failed(&names, "update_metadata_is_seen_and_keeps_the_term"),
        "{names:#?}"
    );
}

mod sloppy {
    //! A memory store whose `update_metadata` breaks contract item 8.
    use std::time::Duration;

    use regent_core::memory::MemoryStore;
    use regent_core::testing::{Layered, StoreLayer};
    use regent_core::{
        Acquire, AcquireRequest, ElectionName, Lease, LeaseStore, Metadata, Renewal, StoreError,
    };

    #[derive(Clone, Copy)]
    pub(crate) enum Flaw {
        /// Updates the record that has the lease's token, whoever holds it.
        AnyHolder,
        /// Releases the lease and acquires the election again.
        NewTerm,
    }

    impl StoreLayer for Flaw {
        async fn update_metadata<S: LeaseStore>(
            &self,
            store: &S,
            lease: &Lease,
            metadata: &Metadata,
        ) -> Result<Renewal, StoreError> {
            match self {
                Flaw::AnyHolder => match store.current_leader(&lease.election).await? {
                    Some(l) if l.token == lease.token => {
                        let theirs = Lease {
                            holder: l.holder,
                            ..lease.clone()
                        };
                        store.update_metadata(&theirs, metadata).await
                    }
                    _ => Ok(Renewal::Lost),
                },
                Flaw::NewTerm => {
                    if store.renew(lease).await? == Renewal::Lost {
                        return Ok(Renewal::Lost);
                    }
                    store.release(lease).await?;
                    let req = AcquireRequest {
                        election: lease.election.clone(),
                        holder: lease.holder.clone(),
                        ttl: lease.ttl,
                        metadata: metadata.clone(),
                    };
                    match store.try_acquire(&req, None).await? {
                        Acquire::Won(_) => Ok(Renewal::Renewed),
                        Acquire::Held { .. } => Ok(Renewal::Lost),
                    }
                }
            }
        }
    }

    pub(crate) type Store = Layered<MemoryStore, Flaw>;

    pub(crate) struct Harness {
        store: Store,
    }

    impl Harness {
        pub(crate) fn new(flaw: Flaw) -> Self {
            Self {
                store: Layered::new(MemoryStore::race(), flaw),
            }
        }
    }

    impl regent_core::testing::Harness for Harness {
        type Store = Store;
        async fn store(&self) -> Store {
            self.store.clone()
        }
        async fn unreachable_store(&self) -> Store {
            let dead = MemoryStore::race();
            dead.fail_next(u32::MAX);
            Layered::sharing(dead, self.store.layer().clone())
        }
        fn ttl(&self) -> Duration {
            Duration::from_secs(2)
        }
        async fn delete_records(&self, e: &ElectionName) {
            self.store.inner().delete_records(e);
        }
        async fn put_garbage(&self, e: &ElectionName) {
            self.store.inner().put_garbage(e);
        }
    }
}

mod broken {
    //! A store that always lets the acquirer win (and reuses tokens).
    use std::time::Duration;

    use regent_core::memory::MemoryStore;
    use regent_core::testing::{Layered, StoreLayer};
    use regent_core::{Acquire, AcquireRequest, ElectionName, Lease, LeaseStore, StoreError};

    pub(crate) struct AlwaysWins;

    impl StoreLayer for AlwaysWins {
        async fn try_acquire<S: LeaseStore>(
            &self,
            store: &S,
            req: &AcquireRequest,
            queued: Option<&Lease>,
        ) -> Result<Acquire, StoreError> {
            match store.try_acquire(req, queued).await? {
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
    }

    pub(crate) type Store = Layered<MemoryStore, AlwaysWins>;

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
            Layered::new(self.mem().clone(), AlwaysWins)
        }
        async fn unreachable_store(&self) -> Store {
            let dead = MemoryStore::race();
            dead.fail_next(u32::MAX);
            Layered::new(dead, AlwaysWins)
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

mod lying {
    //! A memory store whose [`StoreInfo`] claims something else than what
    //! it does.
    use std::time::Duration;

    use regent_core::memory::MemoryStore;
    use regent_core::testing::{Layered, StoreLayer};
    use regent_core::{ElectionName, LeaseStore, StoreInfo};

    /// What the store claims, made of what it is.
    pub(crate) struct Claim(Box<dyn Fn(StoreInfo) -> StoreInfo + Send + Sync>);

    impl StoreLayer for Claim {
        fn info<S: LeaseStore>(&self, store: &S) -> StoreInfo {
            (self.0)(store.info())
        }
    }

    pub(crate) type Store = Layered<MemoryStore, Claim>;

    pub(crate) struct Harness {
        store: Store,
    }

    impl Harness {
        pub(crate) fn new(
            inner: MemoryStore,
            claim: impl Fn(StoreInfo) -> StoreInfo + Send + Sync + 'static,
        ) -> Self {
            Self {
                store: Layered::new(inner, Claim(Box::new(claim))),
            }
        }
    }

    impl regent_core::testing::Harness for Harness {
        type Store = Store;
        async fn store(&self) -> Store {
            self.store.clone()
        }
        async fn unreachable_store(&self) -> Store {
            let dead = MemoryStore::new(self.store.inner().info().style);
            dead.fail_next(u32::MAX);
            Layered::sharing(dead, self.store.layer().clone())
        }
        fn ttl(&self) -> Duration {
            Duration::from_secs(2)
        }
        async fn delete_records(&self, e: &ElectionName) {
            self.store.inner().delete_records(e);
        }
        async fn put_garbage(&self, e: &ElectionName) {
            self.store.inner().put_garbage(e);
        }
    }
}
