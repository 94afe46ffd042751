//! What the store's test binaries share: a share of the process's Azurite,
//! a store on it, and Blob requests as an operator's tool sends them.

// Each test binary uses what it needs of this module.
#![allow(dead_code, unreachable_pub)]

use regent_azblob::{AzblobStore, StorageAccount};
use regent_core::ElectionName;
use regent_testkit::engines::SharedAzurite;
use regent_testkit::engines::azurite::{OperatorResponse, operator_request};

/// This test's share of the process's Azurite: called on the test's own
/// thread, whose name (the test's) names the container. It blocks for
/// Azurite's start (a second) in the first test only.
pub fn share() -> SharedAzurite {
    SharedAzurite::get().unwrap_or_else(|e| panic!("cannot start Azurite for this test: {e}"))
}

/// A store on `share`'s container, on the default call timeout (5 s).
pub fn store(share: &SharedAzurite) -> AzblobStore {
    let account = StorageAccount::from_connection_string(share.connection_string())
        .expect("the kit's connection string");
    // The default call timeout: Azurite is one Node.js process, and on a
    // loaded CI host (this binary's tests beside the torture campaigns) a
    // 2 s bound once failed two conformance checks' first request.
    AzblobStore::builder(account, share.container())
        .build()
        .expect("build the store")
}

pub fn election(name: &str) -> ElectionName {
    ElectionName::new(name).expect("valid election name")
}

/// A Blob request on `blob` of `share`'s container as `az storage …`
/// sends it, from a blocking thread.
pub async fn operator(
    share: &SharedAzurite,
    method: &'static str,
    blob: &str,
    query: &'static [(&'static str, &'static str)],
    headers: Vec<(&'static str, String)>,
) -> OperatorResponse {
    let path = format!("/{}/{blob}", share.container());
    let addr = share.addr();
    tokio::task::spawn_blocking(move || {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        operator_request(addr, method, &path, query, &headers)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    })
    .await
    .expect("the request task ran")
}

/// `az storage blob lease break --lease-break-period 0` on `blob`.
pub async fn break_lease(share: &SharedAzurite, blob: &str) -> OperatorResponse {
    operator(
        share,
        "PUT",
        blob,
        &[("comp", "lease")],
        vec![
            ("x-ms-lease-action", "break".into()),
            ("x-ms-lease-break-period", "0".into()),
        ],
    )
    .await
}
