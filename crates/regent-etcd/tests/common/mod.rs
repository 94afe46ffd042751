//! Helpers shared by the integration tests: a real etcd from the test kit,
//! a raw client to tamper with it behind regent's back, requests.

#![allow(dead_code)]

use std::time::Duration;

use etcd_client::{Client, DeleteOptions};
use regent_core::ElectionName;
use regent_etcd::EtcdStore;
use regent_testkit::engines::Etcd;

/// Starts a single-member etcd; a missing etcd fails the test with the kit's
/// message, which names `scripts/install-engines`.
pub(crate) async fn start_etcd() -> Etcd {
    tokio::task::spawn_blocking(Etcd::start)
        .await
        .expect("the start task ran")
        .unwrap_or_else(|e| panic!("cannot start etcd for this test: {e}"))
}

/// A store on `endpoints` with a short request timeout.
pub(crate) async fn store(endpoints: Vec<String>) -> EtcdStore {
    EtcdStore::builder(endpoints)
        .request_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect to etcd")
}

/// A plain etcd client, as an operator's tool would use.
pub(crate) async fn raw(endpoints: &[String]) -> Client {
    Client::connect(endpoints, None)
        .await
        .expect("connect a raw client")
}

/// Deletes every key of `election`.
pub(crate) async fn delete_prefix(endpoints: &[String], election: &ElectionName) {
    raw(endpoints)
        .await
        .delete(
            format!("{election}/"),
            Some(DeleteOptions::new().with_prefix()),
        )
        .await
        .expect("delete the election's keys");
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
