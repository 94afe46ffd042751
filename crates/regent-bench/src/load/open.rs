//! The store a load case's candidates use, opened in the bench's process
//! (the herd, the observer) or in a scale measurement's own process, from
//! one description that travels on a command line.

use std::ffi::OsString;
use std::time::Duration;

use regent::azblob::{AzblobStore, StorageAccount};
use regent::consul::ConsulStore;
use regent::sqlite::SqliteStore;
use regent_core::BoxStore;
use regent_core::memory::MemoryStore;

use crate::engines::RunningStore;
use crate::error::BenchError;
use crate::store::StoreKind;

/// How to open a running store from any process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreSpec {
    pub(crate) kind: StoreKind,
    /// The store's URL (the Consul cluster: its first client agent).
    pub(crate) url: String,
    /// SQLite's commit interval, where not its default.
    pub(crate) commit_interval: Option<Duration>,
    /// Where PostgreSQL's watches `LISTEN`, where not on the store's URL
    /// (behind PgBouncer: straight to the server).
    pub(crate) listen_url: Option<String>,
    /// Azurite's Blob endpoint, signed for with the development account.
    pub(crate) azblob_endpoint: Option<String>,
}

/// A store opened by [`StoreSpec::open`]: SQLite and the memory store as
/// themselves, so that the scale case measures them without a box.
pub(crate) enum Opened {
    Memory(MemoryStore),
    Sqlite(SqliteStore),
    Boxed(BoxStore),
}

impl StoreSpec {
    /// The description of `store`.
    pub(crate) fn of(store: &RunningStore, commit_interval: Option<Duration>) -> Self {
        Self {
            kind: store.kind(),
            url: store.store_url(),
            commit_interval: commit_interval.filter(|_| store.kind() == StoreKind::Sqlite),
            listen_url: store.listen_url(),
            azblob_endpoint: store.azblob_endpoint(),
        }
    }

    /// As arguments of the scale child (`--kind K --url U
    /// [--commit-interval-ms N] [--listen-url L] [--azblob-endpoint E]`).
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--kind".into(),
            self.kind.name().into(),
            "--url".into(),
            self.url.clone().into(),
        ];
        if let Some(d) = self.commit_interval {
            args.push("--commit-interval-ms".into());
            args.push(d.as_millis().to_string().into());
        }
        if let Some(url) = &self.listen_url {
            args.push("--listen-url".into());
            args.push(url.clone().into());
        }
        if let Some(endpoint) = &self.azblob_endpoint {
            args.push("--azblob-endpoint".into());
            args.push(endpoint.clone().into());
        }
        args
    }

    /// Opens the store.
    ///
    /// Consul is built as a library that holds many elections builds it:
    /// without the CLI's restart proofs (one election per process, a
    /// session per term), so that its elections share sessions. Azure
    /// Blob: Azurite's development account at its endpoint, the blob of an
    /// election its name in the container of the URL.
    pub(crate) async fn open(&self) -> Result<Opened, BenchError> {
        let failed = |e: &dyn std::fmt::Display| {
            BenchError::Failed(format!("cannot open {}: {e}", self.url))
        };
        Ok(match self.kind {
            StoreKind::Memory => Opened::Memory(MemoryStore::race()),
            StoreKind::Sqlite => {
                let path = self.url.strip_prefix("sqlite:").unwrap_or(&self.url);
                let mut builder = SqliteStore::builder(path);
                if let Some(interval) = self.commit_interval {
                    builder = builder.commit_interval(interval);
                }
                Opened::Sqlite(builder.open().await.map_err(|e| failed(&e))?)
            }
            StoreKind::Consul | StoreKind::ConsulCluster => {
                let address = self.url.strip_prefix("consul://").unwrap_or(&self.url);
                Opened::Boxed(BoxStore::new(
                    ConsulStore::builder(address)
                        .build()
                        .map_err(|e| failed(&e))?,
                ))
            }
            StoreKind::Azblob => {
                let container = self.url.strip_prefix("azblob://").unwrap_or(&self.url);
                let endpoint = self.azblob_endpoint.as_deref().ok_or_else(|| {
                    BenchError::Failed(format!("{}: no Azurite endpoint", self.url))
                })?;
                let account = StorageAccount::development()
                    .with_endpoint(endpoint)
                    .map_err(|e| failed(&e))?;
                Opened::Boxed(BoxStore::new(
                    AzblobStore::builder(account, container)
                        .build()
                        .map_err(|e| failed(&e))?,
                ))
            }
            StoreKind::Etcd
            | StoreKind::ZooKeeper
            | StoreKind::Postgres
            | StoreKind::PgBouncer
            | StoreKind::Redis
            | StoreKind::RedisSentinel => {
                let options: Vec<(&str, &str)> = self
                    .listen_url
                    .iter()
                    .map(|url| ("listen-url", url.as_str()))
                    .collect();
                Opened::Boxed(
                    regent::connect(&self.url, &options)
                        .await
                        .map_err(|e| failed(&e))?,
                )
            }
        })
    }

    /// Opens the store, boxed.
    pub(crate) async fn open_boxed(&self) -> Result<BoxStore, BenchError> {
        Ok(match self.open().await? {
            Opened::Memory(s) => BoxStore::new(s),
            Opened::Sqlite(s) => BoxStore::new(s),
            Opened::Boxed(s) => s,
        })
    }
}
