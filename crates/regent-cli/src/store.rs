//! Opening the store a URL names, with retries while it is unreachable.

use std::time::Duration;

use regent_core::{BoxStore, ElectionName, LeaseStore, StoreError};
use tokio::time::Instant;

use crate::cli::{StoreArgs, StoreUrl, default_store_path, parse_store_url};
use crate::error::CliError;

/// How long a command keeps retrying an unreachable store at start before
/// exiting with code 3.
pub(crate) const START_RETRY: Duration = Duration::from_secs(10);

/// The election name from `--election`, checked.
pub(crate) fn election(args: &StoreArgs) -> Result<ElectionName, CliError> {
    ElectionName::new(&args.election).map_err(|e| CliError::usage(format!("--election: {e}")))
}

/// The store `--store` names (or the default), opened and checked with one
/// read, retried for [`START_RETRY`] while unreachable.
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
    let start = Instant::now();
    let mut delay = Duration::from_millis(100);
    loop {
        match try_open(&url, election).await {
            Ok(store) => return Ok(store),
            Err(e) if e.is_transient() && start.elapsed() < START_RETRY => {
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

async fn try_open(url: &StoreUrl, election: &ElectionName) -> Result<BoxStore, StoreError> {
    let store = match url {
        StoreUrl::Sqlite(path) => BoxStore::new(regent_sqlite::SqliteStore::open(path).await?),
    };
    store.current_leader(election).await?;
    Ok(store)
}
