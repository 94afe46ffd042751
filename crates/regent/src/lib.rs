//! **regent**: leader election for Rust services.
//!
//! Several identical instances of a service run; regent makes them agree on
//! exactly one leader, runs the coordinator work only there, notices when the
//! leader dies or hangs, and elects another — without two leaders acting on
//! the same resource, because every term carries a fencing token.
//!
//! This crate is the facade: it re-exports [`regent_core`] and, behind one
//! feature per backend, the store crates: `sqlite` (default) as
//! `regent::sqlite`; `etcd` (and `etcd-tls` for TLS) as `regent::etcd`,
//! which needs `protoc` to build; `consul` as `regent::consul`; `azblob`
//! (Azure Blob leases) as `regent::azblob`; ZooKeeper as it lands.
//!
//! ```
//! use std::time::Duration;
//! use regent::{Candidate, ElectionName, HolderId, Supervisor, Restart, BoxError};
//! use regent::memory::MemoryStore;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let candidate = Candidate::builder(
//!     MemoryStore::race(), // in production: regent::sqlite::SqliteStore, etcd, ...
//!     ElectionName::new("report-scheduler")?,
//!     HolderId::new("host-a")?,
//! )
//! .ttl(Duration::from_secs(10))
//! .build()?;
//! println!("{}", candidate.explain());
//!
//! let exit = Supervisor::new(candidate)
//!     .restart(Restart::Never)
//!     .run(|leader| async move {
//!         // Only the leader runs this. Pass the token with every write, and
//!         // stop when `leader.cancelled()` fires.
//!         let token = leader.token();
//!         println!("leading with fencing token {token}");
//!         Ok::<_, BoxError>(())
//!     })
//!     .await?;
//! # let _ = exit;
//! # Ok(()) }
//! ```
//!
//! # Stores by URL
//!
//! [`connect`] opens the store a URL names (`sqlite:PATH`, `etcd://…`,
//! `consul://…`, `azblob://CONTAINER`), with options by name and the rest
//! from `REGENT_<STORE>_<OPTION>` variables (and the variables the store's
//! own tools read, such as `CONSUL_HTTP_TOKEN` or
//! `AZURE_STORAGE_CONNECTION_STRING`, where the store crate says so);
//! [`url`] lists the stores this build includes and parses URLs for front
//! ends such as the `regent` CLI. Everything about a store lives
//! in its crate, described by a [`StoreKind`]; this crate only picks it by
//! scheme, one feature each. Adding a store is a crate, a feature here and
//! an entry in [`url`] (the README's "adding a store" lists the steps).
//!
//! See [`regent_core`] for the safety model, the timing rules and the
//! fencing contract.

pub use regent_core::*;

pub mod url;
pub use url::{ConnectError, connect};

/// Completes when the process is asked to stop: SIGINT (Ctrl-C) or SIGTERM
/// (what `kill`, systemd and Kubernetes send) on Unix, Ctrl-C elsewhere.
/// Hand it to [`Supervisor::run_until`] so that a stop releases the lease
/// and a follower takes over at once, instead of a ttl later.
///
/// ```no_run
/// # use regent::{BoxError, Candidate, ElectionName, HolderId, Supervisor};
/// # async fn demo(candidate: Candidate<regent::BoxStore>) -> Result<(), Box<dyn std::error::Error>> {
/// Supervisor::new(candidate)
///     .run_until(regent::shutdown_signal(), |leader| async move {
///         leader.cancelled().await;
///         Ok::<_, BoxError>(())
///     })
///     .await?;
/// # Ok(()) }
/// ```
///
/// If a handler cannot be installed (no runtime with signals enabled), the
/// failure is logged and this waits for the other signal, or for ever.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = async {
            match signal(SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    cannot_listen("SIGTERM", &e);
                    std::future::pending::<()>().await;
                }
            }
        };
        let int = async {
            if let Err(e) = tokio::signal::ctrl_c().await {
                cannot_listen("SIGINT", &e);
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = term => {}
            () = int => {}
        }
    }
    #[cfg(not(unix))]
    {
        if let Err(e) = tokio::signal::ctrl_c().await {
            cannot_listen("Ctrl-C", &e);
            std::future::pending::<()>().await;
        }
    }
}

fn cannot_listen(what: &str, e: &std::io::Error) {
    tracing::warn!(error = %e, "cannot listen for {what}; shutdown_signal() waits for the others");
}

/// The embedded default store (feature `sqlite`, on by default): leases in
/// one SQLite file shared by the processes of one host.
#[cfg(feature = "sqlite")]
pub use regent_sqlite as sqlite;

/// The etcd v3 store (feature `etcd`; `etcd-tls` adds TLS): elections on an
/// etcd cluster, interoperable with `etcdctl elect`.
#[cfg(feature = "etcd")]
pub use regent_etcd as etcd;

/// The Consul store (feature `consul`): Consul's leader-election recipe
/// over sessions and KV, with TLS and ACL tokens.
#[cfg(feature = "consul")]
pub use regent_consul as consul;

/// The Azure Blob store (feature `azblob`): blob leases, the Leader
/// Election pattern's reference example, over the REST API with a shared
/// key or a SAS token (ttl 15 to 60 s).
#[cfg(feature = "azblob")]
pub use regent_azblob as azblob;
