//! Opening the store a URL names, with retries while it is unreachable.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use regent_core::{BoxStore, ElectionName, LeaseStore, StoreError};
use tokio::time::Instant;

use crate::cli::{StoreArgs, default_store_path, parse_duration};
use crate::error::{CliError, chain};
use crate::target::{
    Credentials, ENV_CERT, ENV_KEY, EtcdTlsPem, EtcdUrl, StoreUrl, etcd_security, parse_store_url,
};

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
#[derive(Debug)]
pub(crate) enum Target {
    Sqlite {
        path: PathBuf,
        /// No `--store`: the default file, whose directory regent creates.
        default: bool,
    },
    Etcd {
        url: EtcdUrl,
        /// The PEM texts to speak TLS with: `Some` exactly for etcds://.
        tls: Option<EtcdTlsPem>,
        user: Option<Credentials>,
    },
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite { path, .. } => write!(f, "sqlite:{}", path.display()),
            Self::Etcd { url, .. } => url.fmt(f),
        }
    }
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
    Ok(match url {
        StoreUrl::Sqlite(path) => Target::Sqlite {
            path,
            default: args.store.is_none(),
        },
        StoreUrl::Etcd(url) => Target::Etcd {
            tls: if url.tls {
                Some(security.read_tls().map_err(CliError::usage)?)
            } else {
                None
            },
            user: security.user,
            url,
        },
    })
}

/// With `REGENT_ETCD_PASSWORD` in regent's environment, makes the process
/// non-dumpable: `/proc/PID/environ` is then readable by root only, not by
/// CMD and other processes of the same user (the shim and CMD are not given
/// the variable at all). No core dumps and no debugger attach by the same
/// user follow from it; `--etcd-password-file` needs none of this.
pub(crate) fn hide_environment_if_secret() {
    if std::env::var_os(crate::target::ENV_PASSWORD).is_some_and(|v| !v.is_empty())
        && let Err(e) =
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        tracing::warn!(error = %e, "cannot hide REGENT_ETCD_PASSWORD from other processes");
    }
}

/// The store `--store` names (or the default), opened and checked with one
/// read, retried for [`START_RETRY`] (or [`START_RETRY_ENV`]) while
/// unreachable.
///
/// `call_timeout` bounds every later call of the store (an etcd request, a
/// wait on SQLite's lock): `regent run` passes its renew interval, so that
/// one stalled request leaves time to retry before the renew deadline.
pub(crate) async fn open(
    target: &Target,
    election: &ElectionName,
    call_timeout: Option<Duration>,
) -> Result<BoxStore, CliError> {
    if let Target::Sqlite {
        path,
        default: true,
    } = target
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
    let attempt_timeout = attempt_timeout(window, call_timeout);
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

/// How long one store call may take: the stores' defaults (5 s), at most
/// half the start window (so that a shortened window still retries once),
/// and at most `bound` (`regent run`'s renew interval).
fn attempt_timeout(window: Duration, bound: Option<Duration>) -> Duration {
    let t = regent_sqlite::DEFAULT_BUSY_TIMEOUT
        .min(regent_etcd::DEFAULT_REQUEST_TIMEOUT)
        .min(window / 2);
    match bound {
        Some(b) => t.min(b),
        None => t,
    }
}

/// A store error as the CLI reports it: `WHAT URL: ERROR`, the exit code
/// of its kind, and a hint where the CLI can add which of its settings the
/// error is about. (The store's own message says what the error means; the
/// election is in it.)
pub(crate) fn store_error(target: &Target, what: &str, e: &StoreError) -> CliError {
    let error = CliError::from_store(&format!("{what} {target}"), e);
    match hint(target, e) {
        Some(hint) => error.with_hint(&hint),
        None => error,
    }
}

/// The settings an etcd refusing the client certificate, or its absence,
/// is about: regent-etcd tells the refusal apart (see
/// [`regent_etcd::is_refused_client_certificate`]); a closed connection
/// means it only over TLS.
fn hint(target: &Target, e: &StoreError) -> Option<String> {
    let Target::Etcd { tls: Some(tls), .. } = target else {
        return None;
    };
    if !regent_etcd::is_refused_client_certificate(e) {
        return None;
    }
    Some(match tls.identity {
        None => format!(
            "regent presented no client certificate; if etcd requires one, pass it with \
             --etcd-cert FILE and --etcd-key FILE (or {ENV_CERT} and {ENV_KEY})"
        ),
        Some(_) => format!(
            "regent presented the client certificate of --etcd-cert (or {ENV_CERT}); etcd must \
             trust the CA that signed it"
        ),
    })
}

async fn try_open(
    target: &Target,
    election: &ElectionName,
    attempt_timeout: Duration,
) -> Result<BoxStore, StoreError> {
    let store = match target {
        Target::Sqlite { path, .. } => BoxStore::new(
            regent_sqlite::SqliteStore::builder(path)
                .busy_timeout(attempt_timeout)
                .open()
                .await?,
        ),
        Target::Etcd { url, tls, user } => BoxStore::new(
            etcd_builder(url, tls.as_ref(), user.as_ref(), attempt_timeout)
                .connect()
                .await?,
        ),
    };
    store.current_leader(election).await?;
    Ok(store)
}

fn etcd_builder(
    url: &EtcdUrl,
    tls: Option<&EtcdTlsPem>,
    user: Option<&Credentials>,
    request_timeout: Duration,
) -> regent_etcd::EtcdStoreBuilder {
    let mut builder = regent_etcd::EtcdStore::builder(url.endpoints.clone())
        .namespace(url.namespace.clone())
        .request_timeout(request_timeout);
    if let Some(tls) = tls {
        // As etcdctl: a CA file replaces the system's CA store.
        builder = match &tls.ca {
            Some(ca) => builder.tls_ca_pem(ca),
            None => builder.tls_system_roots(),
        };
        if let Some((cert, key)) = &tls.identity {
            builder = builder.tls_client_identity_pem(cert, &key.0);
        }
    }
    if let Some(c) = user {
        builder = builder.user(&c.user, &c.password.0);
    }
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `regent run` kept etcd's 5 s request timeout whatever
    /// its timing, so at `--ttl 3s` (renew deadline 1.8 s) one stalled
    /// request outlasted the deadline with no retry; a renewal (two
    /// requests) could take 10 s at the default ttl of 10 s.
    #[test]
    fn store_calls_are_bounded_by_the_renew_interval() {
        let s = Duration::from_secs;
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
