//! Opening the store a URL names, with retries while it is unreachable.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use regent_core::target::{
    Detail, Mention, Piece, SchemeProblem, Source as ValueSource, StoreKind, TargetError,
};
use regent_core::{BoxStore, ElectionName, HolderId, Lease, LeaseStore, StoreError};
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
    .map_err(|e| CliError::usage(target_message(&e)))?;
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

/// A target error as the CLI words it: the URL as `--store`, each option
/// as the flag or variable that set it (`--etcd-cacert`,
/// `REGENT_ETCD_PASSWORD`, or another tool's variable the store read,
/// `CONSUL_CACERT`), other options mentioned as the error asks. The
/// library's own wording ([`TargetError`]'s `Display`) names options by
/// name; this is the one place that turns those names into flags and
/// variables (by [`regent_core::StoreOption::flag_name`] and `env_name`).
pub(crate) fn target_message(e: &TargetError) -> String {
    match e {
        TargetError::Scheme {
            url,
            scheme,
            problem,
            supported,
            ..
        } => match problem {
            SchemeProblem::Missing => {
                format!("--store '{url}' has no scheme; expected one of {supported}")
            }
            SchemeProblem::LeftOut {
                feature,
                cli_feature,
                ..
            } => format!(
                "--store scheme '{scheme}' is not in this build of regent: build it with the \
                 cargo feature '{feature}' (of the regent crate; regent-cli: '{cli_feature}'); \
                 supported: {supported}"
            ),
            SchemeProblem::Planned => format!(
                "--store scheme '{scheme}' is not supported by this build yet; supported: \
                 {supported}"
            ),
            SchemeProblem::Unknown => {
                format!("--store has unknown scheme '{scheme}'; supported: {supported}")
            }
            _ => e.to_string(),
        },
        TargetError::Url {
            store, url, detail, ..
        } => format!("--store '{url}'{}", spelled(store, None, detail)),
        TargetError::UnknownOption {
            store: None,
            option,
            ..
        } => format!("--{option} is not a store option"),
        TargetError::ForeignOption {
            url, owner, option, ..
        } => format!(
            "{} applies only to {} stores (--store {}), not to {url}",
            option_words(owner, option, Mention::Set, None),
            owner.name,
            owner.short_forms
        ),
        TargetError::BadValue {
            store,
            option,
            path,
            detail,
            ..
        } => {
            let path = path
                .as_ref()
                .map(|p| format!(" {}", p.display()))
                .unwrap_or_default();
            format!(
                "{}{path}{}",
                option.source,
                spelled(store, Some(&option.source), detail)
            )
        }
        TargetError::Conflict {
            store,
            options,
            detail,
            ..
        } => match options.first() {
            Some(first) => format!(
                "{}{}",
                first.source,
                spelled(store, Some(&first.source), detail)
            ),
            None => e.to_string(),
        },
        TargetError::Missing {
            store,
            needed_by,
            detail,
            ..
        } => match needed_by {
            Some(by) => format!("{}{}", by.source, spelled(store, Some(&by.source), detail)),
            None => spelled(store, None, detail).trim_start().to_owned(),
        },
        TargetError::Unreadable {
            option,
            path,
            source,
            ..
        } => format!("{} {}: {source}", option.source, path.display()),
        TargetError::BadVariable {
            store,
            variable,
            detail,
            ..
        } => format!("{variable}{}", spelled(store, None, detail)),
        _ => e.to_string(),
    }
}

/// `detail` as it follows its subject (given by `subject`, if an option),
/// with `store`'s options as flags and variables.
fn spelled(store: &StoreKind, subject: Option<&ValueSource>, detail: &Detail) -> String {
    let mut text = detail.joiner().to_owned();
    for piece in detail.pieces() {
        match piece {
            Piece::Text(words) => text.push_str(words),
            Piece::Option { name, mention } => {
                text.push_str(&option_words(store, name, *mention, subject));
            }
            Piece::Given(given) => text.push_str(&given.source.to_string()),
            other => text.push_str(&other.to_string()),
        }
    }
    text
}

/// Option `name` of `store` as `mention` asks: `--etcd-user`,
/// `REGENT_ETCD_PASSWORD` (a secret has no flag), `--consul-key or
/// REGENT_CONSUL_KEY`, `--etcd-key FILE (or REGENT_ETCD_KEY)`, or the way
/// the subject was given.
fn option_words(
    store: &StoreKind,
    name: &str,
    mention: Mention,
    subject: Option<&ValueSource>,
) -> String {
    let Some(option) = store.option(name) else {
        return format!("option '{name}'");
    };
    let var = option.env_name(store);
    if !option.has_flag() {
        return var;
    }
    let flag = format!("--{}", option.flag_name(store));
    match mention {
        Mention::EitherWay => format!("{flag} or {var}"),
        Mention::EitherWayWithValue => format!("{flag} {} (or {var})", option.value_name),
        Mention::LikeTheSubject if !subject.is_some_and(ValueSource::is_flag) => var,
        _ => flag,
    }
}

/// The release ticket of `lease` on `target`, as one line of JSON: the
/// store as `--store`, its flags and the variables its parse read, and the
/// lease (see [`regent::guardian::Ticket`]). `regent run` hands one to the
/// command's supervisor at the start of every term (on the control socket,
/// never in an argument or the environment: it may hold a store's secret),
/// so that when `regent` itself dies the supervisor, once the command's
/// processes are provably gone, gives the lease back (`__shim --release`)
/// and the next leader need not wait out the ttl. `None` when a flag or
/// variable is not UTF-8 (then the lease is left to expire).
pub(crate) fn ticket_line(target: &Target, lease: &Lease) -> Option<String> {
    let source = &target.source;
    regent::guardian::Ticket::new(&source.url, &source.flags, &[], &source.env, lease)
        .map(|t| t.to_line())
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
    open_within(target, election, call_timeout, start_retry()?).await
}

/// [`open`], retrying for `window` (`REGENT_START_RETRY`, resolved by the
/// caller).
pub(crate) async fn open_within(
    target: &Target,
    election: &ElectionName,
    call_timeout: Option<Duration>,
    window: Duration,
) -> Result<BoxStore, CliError> {
    if let Some(dir) = &target.default_dir {
        std::fs::create_dir_all(dir).map_err(|e| {
            CliError::usage(format!(
                "cannot create the default store directory {}: {e}; pass --store sqlite:PATH",
                dir.display()
            ))
        })?;
    }
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
                // Once per cause per 10 s, with the count held back.
                match regent_core::repeats::warn_now(&e) {
                    Some(0) => tracing::warn!(error = %chain(&e), "store unavailable; retrying"),
                    Some(held_back) => tracing::warn!(
                        error = %chain(&e), held_back,
                        "store unavailable; retrying ({held_back} times more since the last warning)"
                    ),
                    None => tracing::debug!(error = %chain(&e), "store unavailable; retrying"),
                }
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

/// An open store, and its name for this instance where it was asked for
/// one (see [`connect`]).
pub(crate) struct Opened {
    pub(crate) store: BoxStore,
    pub(crate) holder: Option<HolderId>,
}

/// [`open_within`] `window`, with `call_timeout` as the bound of every
/// store call, and, with `name_holder`, the store's name for this instance
/// ([`default_holder_id`]): what `regent run` needs of its store before
/// its first campaign.
pub(crate) async fn connect(
    target: &Target,
    election: &ElectionName,
    call_timeout: Duration,
    window: Duration,
    name_holder: bool,
) -> Result<Opened, CliError> {
    let store = open_within(target, election, Some(call_timeout), window).await?;
    let holder = if name_holder {
        default_holder_id(target, call_timeout).await?
    } else {
        None
    };
    Ok(Opened { store, holder })
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
    #[cfg(feature = "etcd")]
    use std::os::unix::ffi::OsStrExt;

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

    /// The CLI's wording of every kind of target error, pinned: each line
    /// is `URL | FLAG=VALUE,… | VARIABLE=VALUE,… | message`, `{d}` the
    /// directory of the test files, `{forms}` the supported URL forms.
    /// Issue 26 made the errors typed (the library names options by name);
    /// these messages are what regent printed before, but for a quoted
    /// `--store '…'` on SQLite, ZooKeeper and Azure Blob URLs (with
    /// credentials redacted), the io error of an unreadable Consul file
    /// without `cannot read it (…)`, and Azure's builder rule without its
    /// `store misconfigured: azblob store:` prefixes.
    #[cfg(all(
        feature = "sqlite",
        feature = "etcd",
        feature = "consul",
        feature = "azblob",
        feature = "zookeeper",
        feature = "redis"
    ))]
    const WORDING: &str = r"
nothing |  |  | --store 'nothing' has no scheme; expected one of {forms}
mongo://x |  |  | --store has unknown scheme 'mongo'; supported: {forms}
redis://u:hunter2@h:6379 |  |  | --store 'redis://***@h:6379' carries a password: give it in REGENT_REDIS_PASSWORD or a password file (--redis-password-file), never on the command line
redis+sentinel://a:1/ |  |  | --store 'redis+sentinel://a:1/' names no master: redis+sentinel://HOST[:PORT][,…]/MASTER[/DB]
sqlite:/x.db | etcd-user=u |  | --etcd-user applies only to etcd stores (--store etcd://… or etcds://…), not to sqlite:/x.db
sqlite:/x.db | nope-x=u |  | --nope-x is not a store option
sqlite: |  |  | --store 'sqlite:' needs a file path, e.g. sqlite:/var/lib/app/regent.db
sqlite:// |  |  | --store 'sqlite://' needs a file path, e.g. sqlite:/var/lib/app/regent.db
etcd:h:1 |  |  | --store 'etcd:h:1': write etcd stores as etcd://HOST:PORT[,HOST:PORT]
etcd:root:hunter2@h:2379 |  |  | --store '***@h:2379': write etcd stores as etcd://HOST:PORT[,HOST:PORT]
etcd://root:hunter2@h:2379 |  |  | --store 'etcd://***@h:2379': unexpected '@': put the user in --etcd-user and the password in REGENT_ETCD_PASSWORD or --etcd-password-file
etcd://http://h:2379 |  |  | --store 'etcd://http://h:2379': list endpoints as HOST:PORT after one etcd:// (e.g. etcd://a:2379,b:2379)
etcd://h:1?x=1 |  |  | --store 'etcd://h:1?x=1': unexpected '?': etcd URLs take no query or fragment
etcd:// |  |  | --store 'etcd://' names no etcd endpoint; expected etcd://HOST:PORT[,HOST:PORT]
etcd://a:1,,b:2 |  |  | --store 'etcd://a:1,,b:2': empty endpoint (two commas, or a trailing comma)
etcd://h 1:2 |  |  | --store 'etcd://h 1:2': endpoint 'h 1:2' contains whitespace
etcd://[::1 |  |  | --store 'etcd://[::1': endpoint '[::1' opens '[' without closing it
etcd://[nope]:1 |  |  | --store 'etcd://[nope]:1': 'nope' in endpoint '[nope]:1' is not an IPv6 address
etcd://[::1]x |  |  | --store 'etcd://[::1]x': endpoint '[::1]x': expected ':PORT' after ']'
etcd://2001:db8::1:2379 |  |  | --store 'etcd://2001:db8::1:2379': endpoint '2001:db8::1:2379' has more than one ':'; IPv6 addresses go in brackets: [2001:db8::1]:2379, or [2001:db8::1:2379] if all of it is the address
etcd://fe80::1 |  |  | --store 'etcd://fe80::1': endpoint 'fe80::1' has more than one ':'; IPv6 addresses go in brackets: [fe80::1]
etcd://a:1:2 |  |  | --store 'etcd://a:1:2': endpoint 'a:1:2' has more than one ':'; IPv6 addresses go in brackets: [ADDRESS]:PORT
etcd://:1 |  |  | --store 'etcd://:1': endpoint ':1' has no host
etcd://a:+1 |  |  | --store 'etcd://a:+1': endpoint 'a:+1': port '+1' is not a number from 1 to 65535
etcd://h:1/a b |  |  | --store 'etcd://h:1/a b': the namespace '/a b' contains a space; write it without whitespace or control characters
etcd://h:1/a%20b |  |  | --store 'etcd://h:1/a%20b': the namespace '/a%20b' contains '%': regent does not percent-decode the URL, so '%' would be part of the etcd keys; write the namespace without it
etcd://h:1/a//b |  |  | --store 'etcd://h:1/a//b': the namespace '/a//b' has an empty segment
http://10.0.0.1:2379 |  |  | --store 'http://10.0.0.1:2379': regent does not take http:// URLs; write etcd endpoints as etcd://HOST:PORT[,HOST:PORT] (here etcd://10.0.0.1:2379)
https://a:2379,https://b:2379 |  |  | --store 'https://a:2379,https://b:2379': regent does not take https:// URLs; write etcd endpoints as etcds://HOST:PORT[,HOST:PORT] (here etcds://a:2379,b:2379), with the CA in --etcd-cacert
http:h |  |  | --store 'http:h': regent does not take http:// URLs; write etcd endpoints as etcd://HOST:PORT[,HOST:PORT]
https://acct.blob.core.windows.net/leases |  |  | --store 'https://acct.blob.core.windows.net/leases': regent does not take https:// URLs; write etcd endpoints as etcds://HOST:PORT[,HOST:PORT] (here etcds://acct.blob.core.windows.net:2379/leases/), with the CA in --etcd-cacert
etcd://h:1 | etcd-cacert={d}/cert.pem |  | --etcd-cacert is set, but the store etcd://h:1 is plain-text etcd; write etcds://… to speak TLS
etcd://h:1 |  | REGENT_ETCD_CERT=/c | REGENT_ETCD_CERT is set, but the store etcd://h:1 is plain-text etcd; write etcds://… to speak TLS
etcds://h:1 | etcd-cert={d}/cert.pem |  | --etcd-cert needs its private key: --etcd-key FILE (or REGENT_ETCD_KEY)
etcds://h:1 |  | REGENT_ETCD_KEY={d}/key.pem | REGENT_ETCD_KEY needs its certificate: --etcd-cert FILE (or REGENT_ETCD_CERT)
etcd://h:1 | etcd-user=root:s3cret |  | --etcd-user 'root:…' contains ':'; give the password through REGENT_ETCD_PASSWORD or --etcd-password-file, not after the user name
etcd://h:1 | etcd-user=root |  | --etcd-user 'root' needs a password: set REGENT_ETCD_PASSWORD, or pass --etcd-password-file FILE (or REGENT_ETCD_PASSWORD_FILE)
etcd://h:1 |  | REGENT_ETCD_USER=root | REGENT_ETCD_USER 'root' needs a password: set REGENT_ETCD_PASSWORD, or pass --etcd-password-file FILE (or REGENT_ETCD_PASSWORD_FILE)
etcd://h:1 |  | REGENT_ETCD_PASSWORD=x | REGENT_ETCD_PASSWORD is set but no user is: pass --etcd-user USER (or REGENT_ETCD_USER)
etcd://h:1 | etcd-password-file={d}/two |  | --etcd-password-file {d}/two: the password file must hold one line
etcd://h:1 | etcd-user=u,etcd-password-file={d}/empty |  | --etcd-password-file {d}/empty: the file is empty
etcd://h:1 | etcd-user=u,etcd-password-file={d}/two |  | --etcd-password-file {d}/two: the password file must hold one line
etcd://h:1 | etcd-user=u,etcd-password-file={d}/gone.pem |  | --etcd-password-file {d}/gone.pem: No such file or directory (os error 2)
etcd://h:1 | etcd-user=u | REGENT_ETCD_PASSWORD_FILE={d}/gone.pem | REGENT_ETCD_PASSWORD_FILE {d}/gone.pem: No such file or directory (os error 2)
etcds://h:1 | etcd-cacert={d}/junk |  | --etcd-cacert {d}/junk: not a PEM file (no '-----BEGIN' line)
etcds://h:1 | etcd-cacert={d}/gone.pem |  | --etcd-cacert {d}/gone.pem: No such file or directory (os error 2)
etcds://h:1 | etcd-cacert={d}/key.pem |  | --etcd-cacert {d}/key.pem: holds no CERTIFICATE block, only PRIVATE KEY (is it the key? --etcd-key takes that)
etcds://h:1 |  | REGENT_ETCD_CACERT={d}/key.pem | REGENT_ETCD_CACERT {d}/key.pem: holds no CERTIFICATE block, only PRIVATE KEY (is it the key? REGENT_ETCD_KEY takes that)
etcds://h:1 | etcd-cert={d}/key.pem,etcd-key={d}/cert.pem |  | --etcd-cert {d}/key.pem: holds no CERTIFICATE block, only PRIVATE KEY (is it the key? --etcd-key takes that)
etcds://h:1 | etcd-cert={d}/cert.pem,etcd-key={d}/cert.pem |  | --etcd-key {d}/cert.pem: holds no PRIVATE KEY block, only CERTIFICATE (is it the certificate? --etcd-cert takes that)
etcds://h:1 |  | REGENT_ETCD_CERT={d}/cert.pem,REGENT_ETCD_KEY={d}/cert.pem | REGENT_ETCD_KEY {d}/cert.pem: holds no PRIVATE KEY block, only CERTIFICATE (is it the certificate? REGENT_ETCD_CERT takes that)
etcds://h:1 |  | REGENT_ETCD_CERT={d}/key.pem,REGENT_ETCD_KEY={d}/key.pem | REGENT_ETCD_CERT {d}/key.pem: holds no CERTIFICATE block, only PRIVATE KEY (is it the key? REGENT_ETCD_KEY takes that)
etcds://h:1 | etcd-cert={d}/csr.pem,etcd-key={d}/key.pem |  | --etcd-cert {d}/csr.pem: holds no CERTIFICATE block, only CERTIFICATE REQUEST
etcds://h:1 | etcd-cert={d}/cert.pem,etcd-key={d}/junk |  | --etcd-key {d}/junk: not a PEM file (no '-----BEGIN' line)
consul:h:1 |  |  | --store 'consul:h:1': write Consul stores as consul://HOST:PORT
consul://tok@h:1 |  |  | --store 'consul://***@h:1': unexpected '@': put the ACL token in REGENT_CONSUL_TOKEN or CONSUL_HTTP_TOKEN, never in the URL
consul://h:1#x |  |  | --store 'consul://h:1#x': unexpected '#': Consul URLs take no fragment
consul://h:1?token=x |  |  | --store 'consul://h:1?token=***': unexpected 'token' in the query: Consul URLs take only ?dc=DATACENTER
consul://h:1?dc=a&dc=b |  |  | --store 'consul://h:1?dc=a&dc=b': ?dc= is given twice
consul://h:1?dc= |  |  | --store 'consul://h:1?dc=': the datacenter '' must be ASCII letters, digits, '-', '_' or '.'
consul://h:1?dc=a b |  |  | --store 'consul://h:1?dc=a b': the datacenter 'a b' must be ASCII letters, digits, '-', '_' or '.'
consul://h:1? |  |  | --store 'consul://h:1?': an empty query: write ?dc=DATACENTER or nothing
consul://a:1,b:2 |  |  | --store 'consul://a:1,b:2': name one agent: regent talks to one Consul agent (the local one, usually), which forwards to the servers
consul://h:+80 |  |  | --store 'consul://h:+80': port '+80' is not a number from 1 to 65535
consul://::1 |  |  | --store 'consul://::1': '::1': IPv6 addresses go in brackets: [ADDRESS]:PORT
consul://[::1 |  |  | --store 'consul://[::1': '[::1' opens '[' without closing it
consul://[x]:1 |  |  | --store 'consul://[x]:1': 'x' in '[x]:1' is not an IPv6 address
consul://[::1]x |  |  | --store 'consul://[::1]x': '[::1]x': expected ':PORT' after ']'
consul://:1 |  |  | --store 'consul://:1': ':1' has no host
consul://h:1/a b |  |  | --store 'consul://h:1/a b': the key prefix 'a b' contains ' '; write it without whitespace, control characters, '%', '?', '#' or '\'
consul://h:1/a%20b |  |  | --store 'consul://h:1/a%20b': the key prefix 'a%20b' contains '%'; write it without whitespace, control characters, '%', '?', '#' or '\'
consul://h:1/a//b |  |  | --store 'consul://h:1/a//b': the key prefix 'a//b' has an empty segment
consul://h | consul-token-file={d}/two | REGENT_CONSUL_TOKEN=t | REGENT_CONSUL_TOKEN and --consul-token-file both give the Consul token; keep one
consul://h |  | REGENT_CONSUL_TOKEN=a b | REGENT_CONSUL_TOKEN must be one Consul ACL token, without spaces or control characters
consul://h | consul-token-file={d}/gone.pem |  | --consul-token-file {d}/gone.pem: No such file or directory (os error 2)
consul://h | consul-token-file={d}/empty |  | --consul-token-file {d}/empty: the file is empty
consul://h | consul-token-file={d}/two |  | --consul-token-file {d}/two: the file must hold the token on one line
consul://h?dc=a | consul-dc=b |  | --consul-dc says datacenter 'b' but the URL says ?dc=a; keep one
consul://h?dc=a |  | REGENT_CONSUL_DC=b | REGENT_CONSUL_DC says datacenter 'b' but the URL says ?dc=a; keep one
consul://h | consul-cacert={d}/cert.pem |  | --consul-cacert is set but the URL is consul://; TLS files apply to consuls:// URLs
consul://h |  | REGENT_CONSUL_KEY={d}/key.pem | REGENT_CONSUL_KEY is set but the URL is consul://; TLS files apply to consuls:// URLs
consuls://h | consul-cert={d}/cert.pem |  | --consul-cert needs its private key: --consul-key or REGENT_CONSUL_KEY
consuls://h | consul-key={d}/key.pem |  | --consul-key needs its certificate: --consul-cert or REGENT_CONSUL_CERT
consuls://h | consul-cacert={d}/junk |  | --consul-cacert {d}/junk: not a PEM file
consuls://h | consul-cacert={d}/gone.pem |  | --consul-cacert {d}/gone.pem: No such file or directory (os error 2)
consuls://h | consul-cacert={d}/key.pem |  | --consul-cacert {d}/key.pem: holds no CERTIFICATE block, only PRIVATE KEY
consuls://h | consul-cert={d}/key.pem,consul-key={d}/cert.pem |  | --consul-cert {d}/key.pem: holds no CERTIFICATE block, only PRIVATE KEY
consuls://h | consul-cert={d}/csr.pem,consul-key={d}/key.pem |  | --consul-cert {d}/csr.pem: holds no CERTIFICATE block, only CERTIFICATE REQUEST
consul://h | consul-lock-delay=10 |  | --consul-lock-delay '10' is not a lock delay: write a duration from 0s to 24h, such as 0s, 500ms, 10s or 1m30s
consul://h | consul-lock-delay=25h |  | --consul-lock-delay '25h' is not a lock delay: write a duration from 0s to 24h, such as 0s, 500ms, 10s or 1m30s
azblob:leases |  |  | --store 'azblob:leases' is not an azblob:// URL: write azblob://CONTAINER[/BLOB]
azblob://leases?sig=x |  |  | --store 'azblob://leases?sig=***' holds a query, fragment or user: credentials are never part of the URL (set AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_KEY)
azblob://u@leases |  |  | --store 'azblob://***@leases' holds a query, fragment or user: credentials are never part of the URL (set AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_KEY)
azblob://Leases |  |  | --store 'azblob://Leases': the container name 'Leases' must be 3 to 63 lower-case letters, digits and single '-' between them (Azure's rule)
azblob:// |  |  | --store 'azblob://': the container name '' must be 3 to 63 lower-case letters, digits and single '-' between them (Azure's rule)
azblob://leases//x |  |  | --store 'azblob://leases//x': the blob '/x' must be ASCII letters, digits, '-', '_' and '.', with '/' between non-empty parts (at most 1024 characters)
azblob://leases | azblob-account=contoso | REGENT_AZBLOB_CONNECTION_STRING=UseDevelopmentStorage=true | REGENT_AZBLOB_CONNECTION_STRING and --azblob-account both name the storage account; give a connection string, or an account with its key or SAS token
azblob://leases |  | REGENT_AZBLOB_CONNECTION_STRING=UseDevelopmentStorage=true,REGENT_AZBLOB_KEY=c2VjcmV0 | REGENT_AZBLOB_CONNECTION_STRING and REGENT_AZBLOB_KEY both name the storage account; give a connection string, or an account with its key or SAS token
azblob://leases | azblob-account=contoso |  | --azblob-account names storage account 'contoso' but no credential: set REGENT_AZBLOB_KEY or REGENT_AZBLOB_SAS_TOKEN (or AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN)
azblob://leases |  | REGENT_AZBLOB_KEY=c2VjcmV0 | REGENT_AZBLOB_KEY is set but no storage account: set --azblob-account (or AZURE_STORAGE_ACCOUNT)
azblob://leases |  | REGENT_AZBLOB_SAS_TOKEN=sv=1 | REGENT_AZBLOB_SAS_TOKEN is set but no storage account: set --azblob-account (or AZURE_STORAGE_ACCOUNT)
azblob://leases |  |  | azblob:// needs a storage account: set AZURE_STORAGE_CONNECTION_STRING (UseDevelopmentStorage=true for Azurite on this host), or AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN
azblob://leases | azblob-endpoint=http://127.0.0.1:1/x | REGENT_AZBLOB_CONNECTION_STRING=UseDevelopmentStorage=true | --azblob-endpoint is set, but the connection string of REGENT_AZBLOB_CONNECTION_STRING names the endpoint; keep one
azblob://leases | azblob-account=contoso | REGENT_AZBLOB_KEY=c2VjcmV0,REGENT_AZBLOB_SAS_TOKEN=sv=1 | REGENT_AZBLOB_KEY and REGENT_AZBLOB_SAS_TOKEN are both set; give the account's key or a SAS token
azblob://leases |  | REGENT_AZBLOB_CONNECTION_STRING=AccountName=a1b;AccountKey=%%secret%% | REGENT_AZBLOB_CONNECTION_STRING: the account key is not base64 (copy it as `az storage account keys list` prints it)
azblob://leases | azblob-account=contoso | REGENT_AZBLOB_KEY=%%secret%% | REGENT_AZBLOB_KEY: account key is not base64 (copy it as `az storage account keys list` prints it)
azblob://leases | azblob-account=Bad_Name | REGENT_AZBLOB_KEY=c2VjcmV0 | REGENT_AZBLOB_KEY: storage account name 'Bad_Name' must be 3 to 24 lower-case letters and digits
azblob://leases | azblob-account=contoso,azblob-endpoint=ftp://x | REGENT_AZBLOB_KEY=c2VjcmV0 | --azblob-endpoint: blob endpoint 'ftp://x' must be an http:// or https:// URL with a host
zk:h |  |  | --store 'zk:h': not a ZooKeeper URL; use zk://HOST[:PORT][,HOST[:PORT]…][/CHROOT]; PORT defaults to 2181
zookeeper://h/x |  |  | --store 'zookeeper://h/x': ZooKeeper's scheme here is zk://, as in zk://h/x
zk://h?x=1 |  |  | --store 'zk://h?x=1': a zk:// URL takes no query or fragment; use zk://HOST[:PORT][,HOST[:PORT]…][/CHROOT]; PORT defaults to 2181
zk://u:p@h |  |  | --store 'zk://***@h': credentials do not go in the URL (`ps` would show them); use REGENT_ZOOKEEPER_DIGEST or --zookeeper-digest-file
zk:// |  |  | --store 'zk://': an empty host; use zk://HOST[:PORT][,HOST[:PORT]…][/CHROOT]; PORT defaults to 2181
zk://a,,b |  |  | --store 'zk://a,,b': an empty host; use zk://HOST[:PORT][,HOST[:PORT]…][/CHROOT]; PORT defaults to 2181
zk://h:0 |  |  | --store 'zk://h:0': '0' is not a port (1-65535); use zk://HOST[:PORT][,HOST[:PORT]…][/CHROOT]; PORT defaults to 2181
zk://[::1 |  |  | --store 'zk://[::1': '[::1' has no closing ]; use zk://HOST[:PORT][,HOST[:PORT]…][/CHROOT]; PORT defaults to 2181
zk://[::1]x |  |  | --store 'zk://[::1]x': '[::1]x' is not [IPV6]:PORT; use zk://HOST[:PORT][,HOST[:PORT]…][/CHROOT]; PORT defaults to 2181
zk://h/a//b |  |  | --store 'zk://h/a//b': the chroot /a//b is not a ZooKeeper path (no empty, . or .. parts)
zk://h | zookeeper-digest-file={d}/nocolon | REGENT_ZOOKEEPER_DIGEST=a:b | REGENT_ZOOKEEPER_DIGEST and --zookeeper-digest-file both give ZooKeeper digest credentials; give one
zk://h | zookeeper-digest-file={d}/gone.pem |  | --zookeeper-digest-file {d}/gone.pem: No such file or directory (os error 2)
zk://h | zookeeper-digest-file={d}/nocolon |  | --zookeeper-digest-file {d}/nocolon: ZooKeeper digest credentials are USER:PASSWORD
zk://h |  | REGENT_ZOOKEEPER_DIGEST=nocolon | REGENT_ZOOKEEPER_DIGEST: ZooKeeper digest credentials are USER:PASSWORD
zk://h |  | REGENT_ZOOKEEPER_DIGEST_FILE={d}/nocolon | REGENT_ZOOKEEPER_DIGEST_FILE {d}/nocolon: ZooKeeper digest credentials are USER:PASSWORD";

    #[cfg(all(
        feature = "sqlite",
        feature = "etcd",
        feature = "consul",
        feature = "azblob",
        feature = "zookeeper"
    ))]
    #[test]
    fn target_errors_name_flags_and_variables() {
        // The environment is the closure's alone: Consul's and Azure's own
        // variables set where the test runs change nothing (they are read
        // through it, not from the process).
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        for (name, text) in [
            (
                "cert.pem",
                "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
            ),
            (
                "key.pem",
                "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n",
            ),
            (
                "csr.pem",
                "-----BEGIN CERTIFICATE REQUEST-----\nAA==\n-----END CERTIFICATE REQUEST-----\n",
            ),
            ("junk", "not pem"),
            ("empty", ""),
            ("two", "a\nb\n"),
            ("nocolon", "nocolon\n"),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let forms = regent::url::supported_forms();
        let fill = |s: &str| s.replace("{d}", d).replace("{forms}", &forms);
        let pairs = |s: &str| -> Vec<(String, OsString)> {
            s.split(',')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap();
                    (k.to_owned(), OsString::from(fill(v)))
                })
                .collect()
        };
        let mut failures = Vec::new();
        for line in WORDING.lines().filter(|l| !l.is_empty()) {
            let [url, flags, env, want] = line.splitn(4, " | ").collect::<Vec<_>>()[..] else {
                panic!("a malformed line: {line}");
            };
            let (flags, env) = (pairs(flags), pairs(env));
            let got = match regent::url::parse(url, &flags, |k| {
                env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
            }) {
                Ok(t) => format!("no error: {t}"),
                Err(e) => target_message(&e),
            };
            if got != fill(want) {
                failures.push(format!(
                    "{url} {flags:?}\n  want {}\n  got  {got}",
                    fill(want)
                ));
            }
        }
        // A variable that is not UTF-8.
        let bytes = |b: &[u8]| OsString::from(std::ffi::OsStr::from_bytes(b));
        let e = regent::url::parse("etcd://h:1", &[("etcd-user".to_owned(), "u".into())], |k| {
            (k == "REGENT_ETCD_PASSWORD").then(|| bytes(&[0xff, 0xfe]))
        })
        .unwrap_err();
        assert_eq!(
            target_message(&e),
            "REGENT_ETCD_PASSWORD is not valid UTF-8"
        );
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
