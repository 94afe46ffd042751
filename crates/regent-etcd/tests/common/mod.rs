//! Helpers shared by the integration tests: a real etcd from the test kit,
//! a raw client to tamper with it behind regent's back, the conformance
//! suite's harness, requests.

#![allow(dead_code)]

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, DeleteOptions};
use regent_core::ElectionName;
use regent_core::testing::Harness;
use regent_etcd::{EtcdStore, EtcdStoreBuilder};
use regent_testkit::engines::Etcd;

/// Starts a single-member etcd; a missing etcd fails the test with the kit's
/// message, which names `scripts/install-engines`.
pub(crate) async fn start_etcd() -> Etcd {
    tokio::task::spawn_blocking(Etcd::start)
        .await
        .expect("the start task ran")
        .unwrap_or_else(|e| panic!("cannot start etcd for this test: {e}"))
}

/// The tests' request timeout: short, so that a hang would fail a test
/// quickly.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// A store builder on `endpoints` with [`REQUEST_TIMEOUT`].
pub(crate) fn store_builder<E: Into<String>>(
    endpoints: impl IntoIterator<Item = E>,
) -> EtcdStoreBuilder {
    EtcdStore::builder(endpoints).request_timeout(REQUEST_TIMEOUT)
}

/// A store on `endpoints` with [`REQUEST_TIMEOUT`].
pub(crate) async fn store(endpoints: Vec<String>) -> EtcdStore {
    store_builder(endpoints)
        .connect()
        .await
        .expect("connect to etcd")
}

/// A plain etcd client, as an operator's tool would use.
pub(crate) async fn raw(endpoints: &[String]) -> Client {
    raw_with(endpoints, None).await
}

/// A plain etcd client with `options` (TLS, a user).
pub(crate) async fn raw_with(endpoints: &[String], options: Option<ConnectOptions>) -> Client {
    Client::connect(endpoints, options)
        .await
        .expect("connect a raw client")
}

/// regent's store conformance suite on one etcd member, reached as the
/// builders and the raw client's options say.
pub(crate) struct ConformanceHarness {
    /// The member, kept running for the suite.
    pub(crate) etcd: Etcd,
    /// Connects the stores under test.
    pub(crate) store: EtcdStoreBuilder,
    /// Connects a store on a port where nothing listens; connecting must
    /// send nothing.
    pub(crate) unreachable_store: EtcdStoreBuilder,
    /// The raw client's settings, to tamper with the member behind regent's
    /// back.
    pub(crate) raw_options: Option<ConnectOptions>,
}

impl ConformanceHarness {
    /// On a plain member: no TLS, no user.
    pub(crate) fn plain(etcd: Etcd) -> Self {
        Self {
            store: store_builder(etcd.endpoints()),
            unreachable_store: store_builder([format!("127.0.0.1:{}", closed_port())]),
            raw_options: None,
            etcd,
        }
    }

    /// Runs the whole suite; fails the test on the first failed check.
    pub(crate) async fn run(&self) {
        regent_core::testing::run(self).await;
    }

    async fn raw(&self) -> Client {
        raw_with(&self.etcd.endpoints(), self.raw_options.clone()).await
    }
}

impl Harness for ConformanceHarness {
    type Store = EtcdStore;

    async fn store(&self) -> EtcdStore {
        self.store
            .clone()
            .connect()
            .await
            .expect("connect the store under test")
    }

    async fn unreachable_store(&self) -> EtcdStore {
        self.unreachable_store
            .clone()
            .connect()
            .await
            .expect("connecting to a closed port sends nothing")
    }

    fn ttl(&self) -> Duration {
        // etcd's minimum with the kit's fast-election flags.
        Duration::from_secs(1)
    }

    async fn delete_records(&self, election: &ElectionName) {
        self.raw()
            .await
            .delete(
                format!("{election}/"),
                Some(DeleteOptions::new().with_prefix()),
            )
            .await
            .expect("delete the election's keys");
    }

    async fn put_garbage(&self, election: &ElectionName) {
        self.raw()
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

/// A port on 127.0.0.1 where nothing listens.
pub(crate) fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("its address").port()
}

pub(crate) fn election(name: &str) -> ElectionName {
    let salt = std::process::id()
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0));
    ElectionName::new(format!("{name}-{salt:08x}")).expect("valid election name")
}

#[allow(unused_imports, reason = "each test binary uses its own subset")]
pub(crate) use regent_testkit::fixtures::{acquire_request as req, holder};
