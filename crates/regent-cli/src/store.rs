//! Opening the store a URL names, with retries while it is unreachable.

use std::time::Duration;

use regent_core::{BoxStore, ElectionName, LeaseStore, StoreError};
use tokio::time::Instant;

use crate::cli::{StoreArgs, default_store_path, parse_duration};
use crate::error::CliError;
use crate::target::{EtcdSecurity, EtcdTlsPem, EtcdUrl, StoreUrl, etcd_security, parse_store_url};

/// How long a command keeps retrying an unreachable store at start before
/// exiting with code 3.
pub(crate) const START_RETRY: Duration = Duration::from_secs(10);

/// Hidden, for tests: replaces [`START_RETRY`] (a duration such as `1s`), so
/// that the end-to-end tests of exit code 3 do not wait 10 s each. Not in
/// `--help`: operators have no reason to shorten the window.
pub(crate) const START_RETRY_ENV: &str = "REGENT_START_RETRY";

fn start_retry() -> Result<Duration, CliError> {
    match std::env::var(START_RETRY_ENV) {
        Ok(v) => parse_duration(&v).map_err(|e| CliError::usage(format!("{START_RETRY_ENV}: {e}"))),
        Err(_) => Ok(START_RETRY),
    }
}

/// The election name from `--election`, checked.
pub(crate) fn election(args: &StoreArgs) -> Result<ElectionName, CliError> {
    ElectionName::new(&args.election).map_err(|e| CliError::usage(format!("--election: {e}")))
}

/// What `--store` and the `--etcd-*` flags name, checked and with every
/// file read, before any connection: usage errors come at once.
pub(crate) struct Target {
    url: StoreUrl,
    /// No `--store`: the default SQLite file, whose directory regent creates.
    default: bool,
    etcd: Option<EtcdTarget>,
}

struct EtcdTarget {
    security: EtcdSecurity,
    tls: Option<EtcdTlsPem>,
}

/// Parses and checks `--store` (or the default) and the `--etcd-*` flags
/// and variables, and reads the files they name.
pub(crate) fn target(args: &StoreArgs) -> Result<Target, CliError> {
    let url = match &args.store {
        Some(url) => parse_store_url(url).map_err(CliError::usage)?,
        None => StoreUrl::Sqlite(default_store_path()),
    };
    let security =
        etcd_security(&args.etcd, &url, |k| std::env::var_os(k)).map_err(CliError::usage)?;
    let etcd = match &url {
        StoreUrl::Etcd(_) => Some(EtcdTarget {
            tls: security.read_tls().map_err(CliError::usage)?,
            security,
        }),
        StoreUrl::Sqlite(_) => None,
    };
    Ok(Target {
        url,
        default: args.store.is_none(),
        etcd,
    })
}

/// The store `--store` names (or the default), opened and checked with one
/// read, retried for [`START_RETRY`] (or [`START_RETRY_ENV`]) while
/// unreachable.
pub(crate) async fn open(target: &Target, election: &ElectionName) -> Result<BoxStore, CliError> {
    if let (StoreUrl::Sqlite(path), true) = (&target.url, target.default)
        && let Some(dir) = path.parent()
    {
        std::fs::create_dir_all(dir).map_err(|e| {
            CliError::usage(format!(
                "cannot create the default store directory {}: {e}; pass --store sqlite:PATH",
                dir.display()
            ))
        })?;
    }
    let window = start_retry()?;
    // An attempt waits on another connection's lock (SQLite) or for an
    // answer (etcd) for at most half the window, so that a shortened window
    // still retries once.
    let attempt_timeout = regent_sqlite::DEFAULT_BUSY_TIMEOUT
        .min(regent_etcd::DEFAULT_REQUEST_TIMEOUT)
        .min(window / 2);
    let start = Instant::now();
    let mut delay = Duration::from_millis(100);
    loop {
        match try_open(target, election, attempt_timeout).await {
            Ok(store) => return Ok(store),
            Err(e) if e.is_transient() && start.elapsed() < window => {
                tracing::warn!(error = %e, "store unavailable; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
            Err(e) => {
                let error = CliError::from_store(&format!("store {}", target.url), &e);
                return Err(match unavailable_hint(target, &e) {
                    Some(hint) => error.with_hint(hint),
                    None => error,
                });
            }
        }
    }
}

/// What else an unreachable store may mean. An etcd that requires client
/// certificates refuses a missing or untrusted one after the TLS handshake
/// has completed on the client's side (TLS 1.3), so the client mostly sees
/// a closed connection, which looks like an unreachable cluster.
fn unavailable_hint(target: &Target, e: &StoreError) -> Option<&'static str> {
    match (&target.url, e.kind()) {
        (StoreUrl::Etcd(url), regent_core::ErrorKind::Unavailable) if url.tls => Some(
            "if the cluster is up, check the TLS settings: etcd closes the connection of a \
             client whose certificate it requires and does not trust (--etcd-cert, --etcd-key)",
        ),
        _ => None,
    }
}

async fn try_open(
    target: &Target,
    election: &ElectionName,
    attempt_timeout: Duration,
) -> Result<BoxStore, StoreError> {
    let store = match (&target.url, &target.etcd) {
        (StoreUrl::Sqlite(path), _) => BoxStore::new(
            regent_sqlite::SqliteStore::builder(path)
                .busy_timeout(attempt_timeout)
                .open()
                .await?,
        ),
        (StoreUrl::Etcd(url), Some(etcd)) => {
            BoxStore::new(etcd_builder(url, etcd, attempt_timeout).connect().await?)
        }
        (StoreUrl::Etcd(_), None) => unreachable!("target() resolves etcd settings"),
    };
    store.current_leader(election).await?;
    Ok(store)
}

fn etcd_builder(
    url: &EtcdUrl,
    etcd: &EtcdTarget,
    request_timeout: Duration,
) -> regent_etcd::EtcdStoreBuilder {
    let mut builder = regent_etcd::EtcdStore::builder(url.endpoints.clone())
        .namespace(url.namespace.clone())
        .request_timeout(request_timeout);
    if let Some(tls) = &etcd.tls {
        builder = builder.tls_ca_pem(&tls.ca);
        if let Some((cert, key)) = &tls.identity {
            builder = builder.tls_client_identity_pem(cert, key);
        }
    }
    if let Some((user, password)) = &etcd.security.user {
        builder = builder.user(user, password);
    }
    builder
}
