//! Opening the store a URL names, with retries while it is unreachable.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use regent_core::{BoxStore, ElectionName, HolderId, LeaseStore, StoreError};
use tokio::time::Instant;

use crate::cli::{StoreArgs, default_store_path, parse_duration};
use crate::error::{CliError, chain};

/// How long a command keeps retrying an unreachable store at start before
/// exiting with code 3.
pub(crate) const START_RETRY: Duration = Duration::from_secs(10);

/// Hidden, for tests: replaces [`START_RETRY`] (a duration such as `1s`), so
/// that the end-to-end tests of exit code 3 do not wait 10 s each. Not in
/// `--help`: operators have no reason to shorten the window.
pub(crate) const START_RETRY_ENV: &str = "REGENT_START_RETRY";

pub(crate) fn start_retry() -> Result<Duration, CliError> {
    match std::env::var(START_RETRY_ENV) {
        Ok(v) => parse_duration(&v).map_err(|e| CliError::usage(format!("{START_RETRY_ENV}: {e}"))),
        Err(_) => Ok(START_RETRY),
    }
}

/// The election name from `--election`, checked.
pub(crate) fn election(args: &StoreArgs) -> Result<ElectionName, CliError> {
    ElectionName::new(&args.election).map_err(|e| CliError::usage(format!("--election: {e}")))
}

/// What `--store` and the store flags name, checked and with every file
/// read, before any connection: usage errors come at once.
#[derive(Debug)]
pub(crate) struct Target {
    target: Box<dyn regent_core::Target>,
    /// No `--store`: the default file, whose directory regent creates.
    default_dir: Option<PathBuf>,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.target.fmt(f)
    }
}

/// Parses and checks `--store` (or the default) and the store flags and
/// variables, and reads the files they name.
pub(crate) fn target(args: &StoreArgs) -> Result<Target, CliError> {
    let default = default_store_path();
    let url = match &args.store {
        Some(url) => url.clone(),
        // `sqlite://` keeps a path that starts with `//` whole.
        None => match default.to_str() {
            Some(path) => format!("sqlite://{path}"),
            None => {
                return Err(CliError::usage(format!(
                    "the default store {} is not a UTF-8 path; pass --store sqlite:PATH",
                    default.display()
                )));
            }
        },
    };
    let target = regent::url::parse(&url, &args.options.given, |k| std::env::var_os(k))
        .map_err(|e| CliError::usage(e.to_string()))?;
    Ok(Target {
        target,
        default_dir: args
            .store
            .is_none()
            .then(|| default.parent().map(PathBuf::from))
            .flatten(),
    })
}

/// The environment variables of every store's secrets (a password
/// …): CMD does not inherit them.
pub(crate) fn secret_variables() -> Vec<String> {
    regent::url::store_kinds()
        .iter()
        .flat_map(|k| k.secret_env_names())
        .collect()
}

/// With a store's secret in regent's environment, makes the process
/// non-dumpable: `/proc/PID/environ` is then readable by root only, not by
/// CMD and other processes of the same user (the shim and CMD are not given
/// the variable at all). No core dumps and no debugger attach by the same
/// user follow from it; a password file needs none of this.
pub(crate) fn hide_environment_if_secret() {
    let Some(var) = secret_variables()
        .into_iter()
        .find(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))
    else {
        return;
    };
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        tracing::warn!(error = %e, "cannot hide {var} from other processes");
    }
}

/// The store `--store` names (or the default), opened and checked with one
/// read, retried for [`START_RETRY`] (or [`START_RETRY_ENV`]) while
/// unreachable.
///
/// `call_timeout` bounds every later call of the store (a request, a
/// wait on SQLite's lock): `regent run` passes its renew interval, so that
/// one stalled request leaves time to retry before the renew deadline.
pub(crate) async fn open(
    target: &Target,
    election: &ElectionName,
    call_timeout: Option<Duration>,
) -> Result<BoxStore, CliError> {
    if let Some(dir) = &target.default_dir {
        std::fs::create_dir_all(dir).map_err(|e| {
            CliError::usage(format!(
                "cannot create the default store directory {}: {e}; pass --store sqlite:PATH",
                dir.display()
            ))
        })?;
    }
    let window = start_retry()?;
    // An attempt waits on another connection's lock (SQLite) or for an
    // answer for at most half the window, so that a shortened window
    // still retries once.
    let attempt_timeout = attempt_timeout(
        target.target.kind().default_call_timeout,
        window,
        call_timeout,
    );
    let start = Instant::now();
    let mut delay = Duration::from_millis(100);
    loop {
        match try_open(target, election, attempt_timeout).await {
            Ok(store) => return Ok(store),
            Err(e) if e.is_transient() && start.elapsed() < window => {
                tracing::warn!(error = %chain(&e), "store unavailable; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(store_error(target, "store", &e)),
        }
    }
}

/// How long one store call may take: the store's default, at most half
/// the start window (so that a shortened window still retries once), and
/// at most `bound` (`regent run`'s renew interval).
fn attempt_timeout(default: Duration, window: Duration, bound: Option<Duration>) -> Duration {
    let t = default.min(window / 2);
    match bound {
        Some(b) => t.min(b),
        None => t,
    }
}

/// A store error as the CLI reports it: `WHAT URL: ERROR`, the exit code
/// of its kind, and the store's hint where it can say which of the user's
/// settings the error is about. (The store's own message says what the
/// error means; the election is in it.)
pub(crate) fn store_error(target: &Target, what: &str, e: &StoreError) -> CliError {
    let error = CliError::from_store(&format!("{what} {target}"), e);
    match target.target.hint(e) {
        Some(hint) => error.with_hint(&hint),
        None => error,
    }
}

/// The holder id the store's conventions give this instance (Consul: its
/// agent's node name), for a `regent run` without `--id`; `None` where the
/// store has none. Called once the store answered.
pub(crate) async fn default_holder_id(
    target: &Target,
    call_timeout: Duration,
) -> Result<Option<HolderId>, CliError> {
    target
        .target
        .default_holder_id(call_timeout)
        .await
        .map_err(|e| store_error(target, "name this instance from", &e))
}

async fn try_open(
    target: &Target,
    election: &ElectionName,
    attempt_timeout: Duration,
) -> Result<BoxStore, StoreError> {
    let store = target.target.connect(attempt_timeout).await?;
    store.current_leader(election).await?;
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `regent run` kept the store's 5 s request timeout whatever
    /// its timing, so at `--ttl 3s` (renew deadline 1.8 s) one stalled
    /// request outlasted the deadline with no retry; a renewal (two
    /// requests) could take 10 s at the default ttl of 10 s.
    #[test]
    fn store_calls_are_bounded_by_the_renew_interval() {
        let s = Duration::from_secs;
        let attempt_timeout = |window, bound| attempt_timeout(s(5), window, bound);
        assert_eq!(attempt_timeout(s(10), None), s(5));
        assert_eq!(attempt_timeout(s(1), None), Duration::from_millis(500));
        assert_eq!(attempt_timeout(s(10), Some(s(2))), s(2));
        assert_eq!(
            attempt_timeout(s(10), Some(Duration::from_millis(600))),
            Duration::from_millis(600)
        );
        assert_eq!(
            attempt_timeout(s(1), Some(s(2))),
            Duration::from_millis(500)
        );
    }
}
