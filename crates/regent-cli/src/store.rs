//! Opening the store a URL names, with retries while it is unreachable.

use std::time::Duration;

use regent_core::{BoxStore, ElectionName, LeaseStore, StoreError};
use tokio::time::Instant;

use crate::cli::{StoreArgs, StoreUrl, default_store_path, parse_duration, parse_store_url};
use crate::error::CliError;

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

/// The store `--store` names (or the default), opened and checked with one
/// read, retried for [`START_RETRY`] (or [`START_RETRY_ENV`]) while
/// unreachable.
pub(crate) async fn open(args: &StoreArgs, election: &ElectionName) -> Result<BoxStore, CliError> {
    let url = match &args.store {
        Some(url) => parse_store_url(url).map_err(CliError::usage)?,
        None => {
            let path = default_store_path();
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| {
                    CliError::usage(format!(
                        "cannot create the default store directory {}: {e}; pass --store sqlite:PATH",
                        dir.display()
                    ))
                })?;
            }
            StoreUrl::Sqlite(path)
        }
    };
    let window = start_retry()?;
    // An attempt waits on another connection's lock for at most half the
    // window, so that a shortened window still retries once (by default it
    // is the store's own 5 s busy timeout).
    let busy_timeout = regent_sqlite::DEFAULT_BUSY_TIMEOUT.min(window / 2);
    let start = Instant::now();
    let mut delay = Duration::from_millis(100);
    loop {
        match try_open(&url, election, busy_timeout).await {
            Ok(store) => return Ok(store),
            Err(e) if e.is_transient() && start.elapsed() < window => {
                tracing::warn!(error = %e, "store unavailable; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(CliError::from_store(&describe(&url), &e)),
        }
    }
}

fn describe(url: &StoreUrl) -> String {
    match url {
        StoreUrl::Sqlite(p) => format!("store sqlite:{}", p.display()),
    }
}

async fn try_open(
    url: &StoreUrl,
    election: &ElectionName,
    busy_timeout: Duration,
) -> Result<BoxStore, StoreError> {
    let store = match url {
        StoreUrl::Sqlite(path) => BoxStore::new(
            regent_sqlite::SqliteStore::builder(path)
                .busy_timeout(busy_timeout)
                .open()
                .await?,
        ),
    };
    store.current_leader(election).await?;
    Ok(store)
}
