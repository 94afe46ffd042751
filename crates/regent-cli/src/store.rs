//! Opening the store a URL names, with retries while it is unreachable.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use regent_core::{
    BoxStore, ElectionName, FencingToken, HolderId, Lease, LeaseHandle, LeaseStore, StoreError,
};
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
    /// What the target was made of, to make it again in another process
    /// (see [`Ticket`]): the URL, the store flags, and the variables the
    /// parse read.
    source: Source,
}

/// The makings of a [`Target`]. `Debug` hides the values: some are
/// secrets.
struct Source {
    url: String,
    flags: Vec<(String, OsString)>,
    env: Vec<(String, OsString)>,
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("url", &regent_core::target::redacted(&self.url))
            .finish_non_exhaustive()
    }
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
    // Every variable the parse reads is noted, to be handed on in a ticket.
    let read = RefCell::new(Vec::new());
    let target = regent::url::parse(&url, &args.options.given, |k| {
        let v = std::env::var_os(k);
        if let Some(v) = &v {
            read.borrow_mut().push((k.to_owned(), v.clone()));
        }
        v
    })
    .map_err(|e| CliError::usage(e.to_string()))?;
    Ok(Target {
        target,
        default_dir: args
            .store
            .is_none()
            .then(|| default.parent().map(PathBuf::from))
            .flatten(),
        source: Source {
            url,
            flags: args.options.given.clone(),
            env: read.into_inner(),
        },
    })
}

/// What a process other than `regent` needs to release one term's lease:
/// the store, as `--store`, its flags and its variables named it, and the
/// lease. `regent run` hands one to the command's supervisor at the start
/// of every term (on the control socket, never in an argument or the
/// environment: it may hold a store's secret), so that when `regent`
/// itself dies the supervisor, once the command's processes are provably
/// gone, gives the lease back (`__shim --release`) and the next leader
/// need not wait out the ttl. A release by ticket is the store's own
/// `release`: it frees only that lease, never a later holder's.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Ticket {
    url: String,
    flags: Vec<(String, String)>,
    env: Vec<(String, String)>,
    election: String,
    holder: String,
    token: u64,
    ttl_ms: u64,
    handle: String,
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("url", &regent_core::target::redacted(&self.url))
            .field("election", &self.election)
            .field("holder", &self.holder)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Ticket {
    /// The ticket of `lease` on `target`, as one line of JSON; `None` when
    /// a flag or variable is not UTF-8 (then the lease is left to expire).
    pub(crate) fn line(target: &Target, lease: &Lease) -> Option<String> {
        let text = |pairs: &[(String, OsString)]| -> Option<Vec<(String, String)>> {
            pairs
                .iter()
                .map(|(k, v)| Some((k.clone(), v.to_str()?.to_owned())))
                .collect()
        };
        let ticket = Ticket {
            url: target.source.url.clone(),
            flags: text(&target.source.flags)?,
            env: text(&target.source.env)?,
            election: lease.election.as_str().to_owned(),
            holder: lease.holder.as_str().to_owned(),
            token: lease.token.get(),
            ttl_ms: u64::try_from(lease.ttl.as_millis()).unwrap_or(u64::MAX),
            handle: lease.handle.as_str().to_owned(),
        };
        serde_json::to_string(&ticket).ok()
    }

    /// Parses a ticket line.
    pub(crate) fn parse(line: &str) -> Result<Ticket, String> {
        serde_json::from_str(line.trim()).map_err(|e| format!("a malformed release ticket: {e}"))
    }

    /// Whether the ticket holds any variable (which may be a secret).
    pub(crate) fn has_env(&self) -> bool {
        !self.env.is_empty()
    }

    /// Releases the ticket's lease: makes the target again from the
    /// ticket alone (not this process's environment), connects, releases.
    /// Every call is bounded by `timeout`.
    pub(crate) async fn release(self, timeout: Duration) -> Result<(), String> {
        let flags: Vec<(String, OsString)> = self
            .flags
            .into_iter()
            .map(|(k, v)| (k, OsString::from(v)))
            .collect();
        let env = self.env;
        let target = regent::url::parse(&self.url, &flags, |k| {
            env.iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| OsString::from(v))
        })
        .map_err(|e| e.to_string())?;
        let lease = Lease {
            election: ElectionName::new(&self.election).map_err(|e| e.to_string())?,
            holder: HolderId::new(&self.holder).map_err(|e| e.to_string())?,
            token: FencingToken::new(self.token),
            ttl: Duration::from_millis(self.ttl_ms),
            handle: LeaseHandle::new(self.handle),
        };
        let store = tokio::time::timeout(timeout, target.connect(timeout))
            .await
            .map_err(|_| format!("connecting to {target}: no answer within {timeout:?}"))?
            .map_err(|e| format!("connecting to {target}: {}", chain(&e)))?;
        tokio::time::timeout(timeout, store.release(&lease))
            .await
            .map_err(|_| format!("release on {target}: no answer within {timeout:?}"))?
            .map_err(|e| format!("release on {target}: {}", chain(&e)))
    }
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
