//! The etcd store as a [`StoreKind`]: its URL grammar, its options (TLS
//! files, user, password), reading their files, the contradictions between
//! them, connecting, and what its errors mean in terms of those options.
//!
//! See [`KIND`] for the grammar and the options.
//!
//! Every rule broken is a [`TargetError`] naming the URL part, flag or
//! variable and the rule, before any connection.

use std::fmt;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use regent_core::target::{
    ConnectFuture, OptionKind, OptionValue, Options, Source, StoreKind, StoreOption, Target,
    TargetError, port_number, printable, redacted,
};
use regent_core::{BoxStore, StoreError};

use crate::store::{DEFAULT_REQUEST_TIMEOUT, EtcdStore, EtcdStoreBuilder};

/// etcd's client port, used when an endpoint names none.
pub const DEFAULT_PORT: u16 = 2379;

// The names the options get by the convention of `regent_core::target`
// (a unit test checks them against it), for messages.
const FLAG_CACERT: &str = "--etcd-cacert";
const FLAG_CERT: &str = "--etcd-cert";
const FLAG_KEY: &str = "--etcd-key";
const FLAG_USER: &str = "--etcd-user";
const FLAG_PASSWORD_FILE: &str = "--etcd-password-file";
const ENV_CERT: &str = "REGENT_ETCD_CERT";
const ENV_KEY: &str = "REGENT_ETCD_KEY";
const ENV_USER: &str = "REGENT_ETCD_USER";
const ENV_PASSWORD_FILE: &str = "REGENT_ETCD_PASSWORD_FILE";
const ENV_PASSWORD: &str = "REGENT_ETCD_PASSWORD";

/// The etcd store kind: `etcd://` and `etcds://` URLs and their options.
///
/// ```text
/// etcd://HOST[:PORT][,HOST[:PORT]…][/NAMESPACE]     plain text
/// etcds://…                                         TLS
/// ```
///
/// The port defaults to 2379; IPv6 hosts go in brackets; the path is the
/// key prefix (`etcd://h/team-a`: election `jobs` lives under
/// `/team-a/jobs/`, the keys `etcdctl elect /team-a/jobs` uses).
///
/// | option | kind | flag / variable |
/// |---|---|---|
/// | `cacert` | path | `--etcd-cacert` / `REGENT_ETCD_CACERT` |
/// | `cert`, `key` | path | `--etcd-cert`, `--etcd-key` / `REGENT_ETCD_CERT`, `REGENT_ETCD_KEY` |
/// | `user` | text | `--etcd-user` / `REGENT_ETCD_USER` |
/// | `password-file` | path | `--etcd-password-file` / `REGENT_ETCD_PASSWORD_FILE` |
/// | `password` | secret | `REGENT_ETCD_PASSWORD` only |
///
/// Every rule broken is a [`TargetError`] naming the URL part, flag or
/// variable and the rule, before any connection.
pub static KIND: StoreKind = StoreKind {
    name: "etcd",
    schemes: &["etcd", "etcds"],
    advises: &["http", "https"],
    forms: "etcd://HOST[:PORT][,HOST[:PORT]…][/NAMESPACE], etcds://… (the same, over TLS); PORT defaults to 2379",
    short_forms: "etcd://… or etcds://…",
    default_call_timeout: DEFAULT_REQUEST_TIMEOUT,
    options: &[
        StoreOption {
            name: "cacert",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "CA certificate (PEM) that signed etcd's server certificates, for etcds:// \
                   (default: the system's CA store)",
        },
        StoreOption {
            name: "cert",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "Client certificate (PEM) for etcd's --client-cert-auth; with --etcd-key",
        },
        StoreOption {
            name: "key",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "Private key (PEM) of --etcd-cert",
        },
        StoreOption {
            name: "user",
            kind: OptionKind::Text,
            value_name: "USER",
            help: "etcd user; its password comes from --etcd-password-file or REGENT_ETCD_PASSWORD",
        },
        StoreOption {
            name: "password-file",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "File holding the etcd user's password on one line",
        },
        StoreOption {
            name: "password",
            kind: OptionKind::Secret,
            value_name: "PASSWORD",
            help: "The etcd user's password (never a flag: `ps` would show it)",
        },
    ],
    examples: &[
        "regent run --store etcd://10.0.0.1:2379,10.0.0.2:2379 --election jobs -- ./worker",
        "REGENT_ETCD_PASSWORD=... regent run --store etcds://etcd.internal:2379 \\\n      \
         --etcd-cacert ca.pem --etcd-user app --election jobs -- ./worker",
    ],
    parse,
};

fn parse(url: &str, options: &Options) -> Result<Box<dyn Target>, TargetError> {
    let url = parse_url(url).map_err(TargetError::new)?;
    let security = security(options, &url).map_err(TargetError::new)?;
    let tls = if url.tls {
        Some(read_tls(&security)?)
    } else {
        None
    };
    Ok(Box::new(EtcdTarget {
        url,
        tls,
        user: security.user,
    }))
}

#[cfg(feature = "tls")]
fn read_tls(security: &EtcdSecurity) -> Result<TlsPem, TargetError> {
    security.read_tls().map_err(TargetError::new)
}

#[cfg(not(feature = "tls"))]
fn read_tls(_: &EtcdSecurity) -> Result<TlsPem, TargetError> {
    Err(TargetError::new(
        "etcds:// needs TLS, which this build leaves out: build regent-etcd with its feature \
         'tls' (regent: 'etcd-tls')",
    ))
}

/// An etcd cluster named by an `etcd://` or `etcds://` URL and its options,
/// checked, with every TLS and password file read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdTarget {
    url: EtcdUrl,
    /// The PEM texts to speak TLS with: `Some` exactly for etcds://.
    tls: Option<TlsPem>,
    user: Option<Credentials>,
}

impl fmt::Display for EtcdTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.url.fmt(f)
    }
}

impl EtcdTarget {
    /// A store builder for this target, with `request_timeout`.
    pub fn builder(&self, request_timeout: Duration) -> EtcdStoreBuilder {
        let mut builder = EtcdStore::builder(self.url.endpoints.clone())
            .namespace(self.url.namespace.clone())
            .request_timeout(request_timeout);
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            // As etcdctl: a CA file replaces the system's CA store.
            builder = match &tls.ca {
                Some(ca) => builder.tls_ca_pem(ca),
                None => builder.tls_system_roots(),
            };
            if let Some((cert, key)) = &tls.identity {
                builder = builder.tls_client_identity_pem(cert, &key.0);
            }
        }
        if let Some(c) = &self.user {
            builder = builder.user(&c.user, &c.password.0);
        }
        builder
    }
}

impl Target for EtcdTarget {
    fn kind(&self) -> &'static StoreKind {
        &KIND
    }

    fn connect(&self, call_timeout: Duration) -> ConnectFuture<'_> {
        Box::pin(async move { Ok(BoxStore::new(self.builder(call_timeout).connect().await?)) })
    }

    /// What an etcd refusing the client certificate, or its absence, is
    /// about: the store tells the refusal apart (see
    /// [`is_refused_client_certificate`](crate::is_refused_client_certificate));
    /// a closed connection means it only over TLS.
    fn hint(&self, e: &StoreError) -> Option<String> {
        let tls = self.tls.as_ref()?;
        if !crate::error::is_refused_client_certificate(e) {
            return None;
        }
        Some(match tls.identity {
            None => format!(
                "regent presented no client certificate; if etcd requires one, pass it with \
                 {FLAG_CERT} FILE and {FLAG_KEY} FILE (or {ENV_CERT} and {ENV_KEY})"
            ),
            Some(_) => format!(
                "regent presented the client certificate of {FLAG_CERT} (or {ENV_CERT}); etcd \
                 must trust the CA that signed it"
            ),
        })
    }
}

/// `etcd[s]://HOST[:PORT][,HOST[:PORT]…][/NAMESPACE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EtcdUrl {
    /// `etcds://`: speak TLS.
    tls: bool,
    /// `HOST:PORT` each, IPv6 hosts in brackets; the port defaults to 2379.
    endpoints: Vec<String>,
    /// The URL's path with a trailing `/` (empty without a path): election
    /// `NAME` lives under `NAMESPACE` + `NAME/`.
    namespace: String,
}

impl fmt::Display for EtcdUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            if self.tls { "etcds" } else { "etcd" },
            self.endpoints.join(","),
            self.namespace
        )
    }
}

/// An `etcd://`, `etcds://`, or (for advice) `http[s]://` URL.
fn parse_url(url: &str) -> Result<EtcdUrl, String> {
    let shown = redacted(url);
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(format!("--store '{shown}' is not an etcd URL"));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "etcd" => parse_etcd(&shown, false, rest),
        "etcds" => parse_etcd(&shown, true, rest),
        "http" => Err(not_http(&shown, false, rest)),
        "https" => Err(not_http(&shown, true, rest)),
        _ => Err(format!("--store '{shown}' is not an etcd URL")),
    }
}

/// The message for `http[s]://…`, what etcdctl's `--endpoints` takes: the
/// etcd URL to write instead, spelled out when the endpoints parse.
fn not_http(shown: &str, tls: bool, rest: &str) -> String {
    let (scheme, ours) = if tls {
        ("https", "etcds")
    } else {
        ("http", "etcd")
    };
    let example = rest.strip_prefix("//").and_then(|r| {
        let endpoints = r
            .split(',')
            .map(|e| strip_http(e).unwrap_or(e))
            .collect::<Vec<_>>()
            .join(",");
        parse_etcd("", tls, &format!("//{endpoints}")).ok()
    });
    let example = match example {
        Some(e) => format!(" (here {e})"),
        None => String::new(),
    };
    let ca = if tls {
        format!(", with the CA in {FLAG_CACERT}")
    } else {
        String::new()
    };
    format!(
        "--store '{shown}': regent does not take {scheme}:// URLs; write etcd endpoints as \
         {ours}://HOST:PORT[,HOST:PORT]{example}{ca}"
    )
}

/// `e` without a leading `http://` or `https://`, in any case.
fn strip_http(e: &str) -> Option<&str> {
    let (scheme, rest) = e.split_once("://")?;
    ["http", "https"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s))
        .then_some(rest)
}

/// `shown` is the URL as messages may quote it (see [`redacted`]).
fn parse_etcd(shown: &str, tls: bool, rest: &str) -> Result<EtcdUrl, String> {
    let Some(rest) = rest.strip_prefix("//") else {
        return Err(format!(
            "--store '{shown}': write etcd stores as etcd://HOST:PORT[,HOST:PORT]"
        ));
    };
    // Before any other check: a password may hold any of the characters
    // the others look for, and '@' says best what went wrong.
    if rest.contains('@') {
        return Err(format!(
            "--store '{shown}': unexpected '@': put the user in --etcd-user and the password in \
             {ENV_PASSWORD} or --etcd-password-file"
        ));
    }
    // `etcd://http://h:2379` or `etcd://a:2379,etcd://b:2379`: a scheme
    // inside the host list, i.e. a `://` before the namespace starts.
    if let Some(i) = rest.find("://")
        && !rest[..i].contains('/')
    {
        return Err(format!(
            "--store '{shown}': list endpoints as HOST:PORT after one etcd:// \
             (e.g. etcd://a:2379,b:2379)"
        ));
    }
    if let Some(c) = rest.chars().find(|c| matches!(c, '?' | '#')) {
        return Err(format!(
            "--store '{shown}': unexpected '{c}': etcd URLs take no query or fragment"
        ));
    }
    let (hosts, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if hosts.is_empty() {
        return Err(format!(
            "--store '{shown}' names no etcd endpoint; expected etcd://HOST:PORT[,HOST:PORT]"
        ));
    }
    let endpoints = hosts
        .split(',')
        .map(|h| parse_endpoint(h).map_err(|e| format!("--store '{shown}': {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    check_namespace(path).map_err(|e| format!("--store '{shown}': {e}"))?;
    let namespace = match path {
        "" | "/" => String::new(),
        p if p.ends_with('/') => p.to_owned(),
        p => format!("{p}/"),
    };
    if namespace.contains("//") {
        return Err(format!(
            "--store '{shown}': the namespace '{path}' has an empty segment"
        ));
    }
    Ok(EtcdUrl {
        tls,
        endpoints,
        namespace,
    })
}

/// The URL's path, used as the etcd key prefix exactly as written.
fn check_namespace(path: &str) -> Result<(), String> {
    if let Some(c) = path.chars().find(|c| c.is_whitespace() || c.is_control()) {
        let what = match c {
            ' ' => "a space",
            c if c.is_control() => "a control character",
            _ => "whitespace",
        };
        return Err(format!(
            "the namespace '{}' contains {what}; write it without whitespace or control characters",
            printable(path)
        ));
    }
    if path.contains('%') {
        return Err(format!(
            "the namespace '{path}' contains '%': regent does not percent-decode the URL, so \
             '%' would be part of the etcd keys; write the namespace without it"
        ));
    }
    Ok(())
}

/// `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT` → `HOST:PORT`.
fn parse_endpoint(h: &str) -> Result<String, String> {
    if h.is_empty() {
        return Err("empty endpoint (two commas, or a trailing comma)".into());
    }
    if h.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("endpoint '{}' contains whitespace", printable(h)));
    }
    let (host, port) = if let Some(v6) = h.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return Err(format!("endpoint '{h}' opens '[' without closing it"));
        };
        if addr.parse::<Ipv6Addr>().is_err() {
            return Err(format!("'{addr}' in endpoint '{h}' is not an IPv6 address"));
        }
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("endpoint '{h}': expected ':PORT' after ']'"))?,
            ),
        };
        (format!("[{addr}]"), port)
    } else {
        if h.matches(':').count() > 1 {
            return Err(unbracketed_v6(h));
        }
        match h.split_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (h.to_owned(), None),
        }
    };
    if host.is_empty() {
        return Err(format!("endpoint '{h}' has no host"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => port_number(p)
            .ok_or_else(|| format!("endpoint '{h}': port '{p}' is not a number from 1 to 65535"))?,
    };
    Ok(format!("{host}:{port}"))
}

/// The message for an endpoint with two or more ':' outside brackets: an
/// IPv6 address, with the bracketed form to write when it is one.
fn unbracketed_v6(h: &str) -> String {
    let whole = h.parse::<Ipv6Addr>().is_ok();
    let with_port = h
        .rsplit_once(':')
        .filter(|(addr, port)| addr.parse::<Ipv6Addr>().is_ok() && port_number(port).is_some());
    let fix = match (with_port, whole) {
        (Some((addr, port)), true) => {
            format!("[{addr}]:{port}, or [{h}] if all of it is the address")
        }
        (Some((addr, port)), false) => format!("[{addr}]:{port}"),
        (None, true) => format!("[{h}]"),
        (None, false) => "[ADDRESS]:PORT".into(),
    };
    format!("endpoint '{h}' has more than one ':'; IPv6 addresses go in brackets: {fix}")
}

/// A value and where it came from: a flag or an environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sourced<T> {
    value: T,
    from: Source,
}

/// A password or a private key: `Debug` shows `***`, so that no `{:?}` of
/// it or of what holds it prints it.
#[derive(Clone, PartialEq, Eq)]
struct Secret<T>(T);

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// An etcd user and its password.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Credentials {
    user: String,
    password: Secret<String>,
}

/// TLS files and credentials for an etcd store, checked against its URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct EtcdSecurity {
    /// The CA to trust (etcds:// only); without it, the system's CA store
    /// (as etcdctl does without `--cacert`).
    cacert: Option<Sourced<PathBuf>>,
    /// Client certificate and its key (etcds:// only).
    identity: Option<(Sourced<PathBuf>, Sourced<PathBuf>)>,
    user: Option<Credentials>,
}

/// PEM contents read from the files an [`EtcdSecurity`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TlsPem {
    /// The CA to trust; `None`: the system's CA store.
    ca: Option<Vec<u8>>,
    /// Client certificate and its private key.
    identity: Option<(Vec<u8>, Secret<Vec<u8>>)>,
}

#[cfg(feature = "tls")]
impl EtcdSecurity {
    /// Reads the TLS files of an etcds:// store, checking that each holds
    /// what its flag takes: a swapped certificate and key fail here, naming
    /// the flags, rather than as a TLS error at connection.
    fn read_tls(&self) -> Result<TlsPem, String> {
        let identity = match &self.identity {
            Some((cert, key)) => Some((
                read_pem(cert, PemKind::Certificate)?,
                Secret(read_pem(key, PemKind::PrivateKey)?),
            )),
            None => None,
        };
        Ok(TlsPem {
            ca: match &self.cacert {
                Some(ca) => Some(read_pem(ca, PemKind::Certificate)?),
                None => None,
            },
            identity,
        })
    }
}

/// What a PEM file must hold for the flag that names it.
#[cfg(feature = "tls")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PemKind {
    /// `--etcd-cacert`, `--etcd-cert`: a `CERTIFICATE` block.
    Certificate,
    /// `--etcd-key`: a `PRIVATE KEY` block (`RSA PRIVATE KEY`, `EC …` too).
    PrivateKey,
}

#[cfg(feature = "tls")]
impl PemKind {
    /// Whether a block labelled `label` is what this flag takes, by the
    /// check the store builder's TLS setters make.
    fn takes(self, label: &crate::store::PemLabel) -> bool {
        match self {
            Self::Certificate => label.is_certificate(),
            Self::PrivateKey => label.is_private_key(),
        }
    }
}

#[cfg(feature = "tls")]
fn read_pem(file: &Sourced<PathBuf>, want: PemKind) -> Result<Vec<u8>, String> {
    let name = format!("{} {}", file.from, file.value.display());
    let bytes = std::fs::read(&file.value).map_err(|e| format!("{name}: {e}"))?;
    let labels = crate::store::pem_labels(&bytes);
    if labels.is_empty() {
        return Err(format!("{name}: not a PEM file (no '-----BEGIN' line)"));
    }
    if labels.iter().any(|l| want.takes(l)) {
        return Ok(bytes);
    }
    // Name the other file the way this one was given: flag or variable.
    let by_flag = file.from.is_flag();
    let (block, hint) = match want {
        PemKind::Certificate => (
            "CERTIFICATE",
            format!(
                "is it the key? {} takes that",
                if by_flag { FLAG_KEY } else { ENV_KEY }
            ),
        ),
        PemKind::PrivateKey => (
            "PRIVATE KEY",
            format!(
                "is it the certificate? {} takes that",
                if by_flag { FLAG_CERT } else { ENV_CERT }
            ),
        ),
    };
    let found = labels
        .iter()
        .map(|l| printable(l.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    // A block of the other kind: most likely the two files were swapped.
    if labels
        .iter()
        .any(|l| l.is_certificate() || l.is_private_key())
    {
        Err(format!(
            "{name}: holds no {block} block, only {found} ({hint})"
        ))
    } else {
        Err(format!("{name}: holds no {block} block, only {found}"))
    }
}

/// A path option as given.
fn path(options: &Options, name: &str) -> Option<Sourced<PathBuf>> {
    options.get(name).map(|v| Sourced {
        value: PathBuf::from(&v.value),
        from: v.source.clone(),
    })
}

/// Checks the TLS files and credentials given in `options` against the
/// store URL.
fn security(options: &Options, url: &EtcdUrl) -> Result<EtcdSecurity, String> {
    let cacert = path(options, "cacert");
    let cert = path(options, "cert");
    let key = path(options, "key");

    if !url.tls
        && let Some(s) = [&cacert, &cert, &key].into_iter().flatten().next()
    {
        return Err(format!(
            "{} is set, but the store {url} is plain-text etcd; write etcds://… to speak TLS",
            s.from
        ));
    }
    let identity = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        (Some(c), None) => {
            return Err(format!(
                "{} needs its private key: {FLAG_KEY} FILE (or {ENV_KEY})",
                c.from
            ));
        }
        (None, Some(k)) => {
            return Err(format!(
                "{} needs its certificate: {FLAG_CERT} FILE (or {ENV_CERT})",
                k.from
            ));
        }
    };

    let user = options.get("user").map(|v| Sourced {
        value: v.value.to_string_lossy().into_owned(),
        from: v.source.clone(),
    });
    if let Some(u) = user.as_ref().filter(|u| u.value.contains(':')) {
        // Never echo what follows the ':': it is likely a password.
        return Err(format!(
            "{} '{}:…' contains ':'; give the password through {ENV_PASSWORD} or \
             {FLAG_PASSWORD_FILE}, not after the user name",
            u.from,
            u.value.split(':').next().unwrap_or_default()
        ));
    }
    let password = password(options)?;
    let user = match (user, password) {
        (None, None) => None,
        (Some(u), Some(p)) => Some(Credentials {
            user: u.value,
            password: p.value,
        }),
        (Some(u), None) => {
            return Err(format!(
                "{} '{}' needs a password: set {ENV_PASSWORD}, or pass {FLAG_PASSWORD_FILE} FILE \
                 (or {ENV_PASSWORD_FILE})",
                u.from, u.value
            ));
        }
        (None, Some(p)) => {
            return Err(format!(
                "{} is set but no user is: pass {FLAG_USER} USER (or {ENV_USER})",
                p.from
            ));
        }
    };
    Ok(EtcdSecurity {
        cacert,
        identity,
        user,
    })
}

/// The password: `--etcd-password-file`, else `REGENT_ETCD_PASSWORD`, else
/// `REGENT_ETCD_PASSWORD_FILE`. A file's trailing line break is not part
/// of the password.
fn password(options: &Options) -> Result<Option<Sourced<Secret<String>>>, String> {
    let file = options.get("password-file");
    let file = match (file, options.get("password")) {
        (Some(f), _) if !matches!(f.source, Source::Env(_)) => Some(f),
        (_, Some(p)) => return secret_text(p).map(Some),
        (f, None) => f,
    };
    let Some(OptionValue { value, source }) = file else {
        return Ok(None);
    };
    let path = PathBuf::from(value);
    let text =
        read_password_file(&path).map_err(|e| format!("{source} {}: {e}", path.display()))?;
    Ok(Some(Sourced {
        value: Secret(text),
        from: source.clone(),
    }))
}

fn secret_text(p: &OptionValue) -> Result<Sourced<Secret<String>>, String> {
    let value = p
        .value
        .clone()
        .into_string()
        .map_err(|_| format!("{} is not valid UTF-8", p.source))?;
    Ok(Sourced {
        value: Secret(value),
        from: p.source.clone(),
    })
}

fn read_password_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let text = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if text.is_empty() {
        return Err("the file is empty".into());
    }
    if text.contains('\n') {
        return Err("the password file must hold one line".into());
    }
    Ok(text.to_owned())
}

#[cfg(test)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
mod tests {
    use super::*;
    use std::ffi::OsString;

    /// The names messages use are the ones the convention gives.
    #[test]
    fn messages_use_the_conventional_names() {
        let name = |o: &str| KIND.option(o).unwrap();
        for (option, flag) in [
            ("cacert", FLAG_CACERT),
            ("cert", FLAG_CERT),
            ("key", FLAG_KEY),
            ("user", FLAG_USER),
            ("password-file", FLAG_PASSWORD_FILE),
        ] {
            assert_eq!(format!("--{}", name(option).flag_name(&KIND)), flag);
        }
        for (option, var) in [
            ("cert", ENV_CERT),
            ("key", ENV_KEY),
            ("user", ENV_USER),
            ("password-file", ENV_PASSWORD_FILE),
            ("password", ENV_PASSWORD),
        ] {
            assert_eq!(name(option).env_name(&KIND), var);
        }
        assert!(!name("password").has_flag());
        assert_eq!(KIND.secret_env_names(), [ENV_PASSWORD]);
    }

    fn etcd(tls: bool, endpoints: &[&str], namespace: &str) -> EtcdUrl {
        EtcdUrl {
            tls,
            endpoints: endpoints.iter().map(|s| s.to_string()).collect(),
            namespace: namespace.into(),
        }
    }

    fn parse_store_url(url: &str) -> Result<EtcdUrl, String> {
        parse_url(url)
    }

    /// The flags as the CLI had them.
    #[derive(Debug, Clone, Default)]
    struct EtcdArgs {
        etcd_cacert: Option<PathBuf>,
        etcd_cert: Option<PathBuf>,
        etcd_key: Option<PathBuf>,
        etcd_user: Option<String>,
        etcd_password_file: Option<PathBuf>,
    }

    impl EtcdArgs {
        fn flag(&self, name: &str) -> Option<OsString> {
            match name {
                "etcd-cacert" => self.etcd_cacert.clone().map(Into::into),
                "etcd-cert" => self.etcd_cert.clone().map(Into::into),
                "etcd-key" => self.etcd_key.clone().map(Into::into),
                "etcd-user" => self.etcd_user.clone().map(Into::into),
                "etcd-password-file" => self.etcd_password_file.clone().map(Into::into),
                _ => None,
            }
        }
    }

    /// The options `args` and `env` give, checked against `url`.
    fn etcd_security(
        args: &EtcdArgs,
        url: &EtcdUrl,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<EtcdSecurity, String> {
        security(&KIND.resolve(|f| args.flag(f), env), url)
    }

    #[test]
    fn etcd_urls() {
        assert_eq!(
            parse_store_url("Etcds://h/ns"),
            Ok(etcd(true, &["h:2379"], "/ns/"))
        );
        assert!(KIND.forms.contains("[/NAMESPACE]"), "{}", KIND.forms);
        assert!(
            KIND.forms
                .contains(&format!("PORT defaults to {DEFAULT_PORT}")),
            "{}",
            KIND.forms
        );
        assert_eq!(
            parse_store_url("etcd://127.0.0.1:2379"),
            Ok(etcd(false, &["127.0.0.1:2379"], ""))
        );
        assert_eq!(
            parse_store_url("etcds://a:1,b,[::1]:3,[fe80::1]"),
            Ok(etcd(
                true,
                &["a:1", "b:2379", "[::1]:3", "[fe80::1]:2379"],
                ""
            ))
        );
        assert_eq!(
            parse_store_url("etcd://a:1/svc/leader"),
            Ok(etcd(false, &["a:1"], "/svc/leader/"))
        );
        assert_eq!(
            parse_store_url("etcd://a:1/svc/"),
            Ok(etcd(false, &["a:1"], "/svc/"))
        );
        assert_eq!(
            parse_store_url("etcd://a:1/"),
            Ok(etcd(false, &["a:1"], ""))
        );
        assert_eq!(
            parse_store_url("etcd://a:1,b:2/x").unwrap().to_string(),
            "etcd://a:1,b:2/x/"
        );
    }

    #[test]
    fn bad_etcd_urls_name_the_problem() {
        for (url, needle) in [
            ("etcd:h:1", "etcd://HOST:PORT"),
            ("etcd://", "names no etcd endpoint"),
            ("etcd:///ns", "names no etcd endpoint"),
            ("etcd://a:1,,b:2", "empty endpoint"),
            ("etcd://a:1,", "empty endpoint"),
            ("etcd://a:0", "port '0'"),
            ("etcd://a:99999", "port '99999'"),
            ("etcd://a:x", "port 'x'"),
            ("etcd://a:", "port ''"),
            ("etcd://:1", "has no host"),
            ("etcd://[::1", "without closing"),
            ("etcd://[nope]:1", "not an IPv6 address"),
            ("etcd://[::1]x", "':PORT' after ']'"),
            ("etcd://u:p@h:1", "--etcd-user"),
            ("etcd://h:1?x=1", "no query"),
            ("etcd://h:1//x", "empty segment"),
            ("etcd://h 1:2", "whitespace"),
        ] {
            let e = parse_store_url(url).expect_err(url);
            assert!(e.contains(needle), "{url}: {e}");
        }
    }

    /// Regression: `--store etcd://root:hunter2@h:2379` printed the URL,
    /// password included, in its error message.
    #[test]
    fn messages_never_quote_a_password_typed_into_the_url() {
        for url in [
            "etcd://root:hunter2@h:2379",
            "etcds://root:hunter2@h:2379/ns",
            "ETCD://root:hunter2@h:2379",
            "etcd://root:hun/ter2@h:2379",
            "etcd://root:hun#ter2@h:2379",
            "etcd://root:hun?ter2@h:2379",
            "etcd://root:hun@ter2@h:2379",
            "etcd://a:1,root:hunter2@b:2",
            "etcd://root:hunter2@",
            "etcd:root:hunter2@h:2379",
            "http://root:hunter2@h:2379",
            "https://root:hunter2@h:2379",
        ] {
            let e = parse_store_url(url).expect_err(url);
            assert!(
                !e.contains("hunter2") && !e.contains("ter2") && !e.contains("root"),
                "{url}: {e}"
            );
        }
        let e = parse_store_url("etcd://root:hunter2@h:2379").unwrap_err();
        assert!(
            e.contains("--store 'etcd://***@h:2379'")
                && e.contains("unexpected '@'")
                && e.contains("--etcd-user"),
            "{e}"
        );
        let e = parse_store_url("etcd:root:hunter2@h:2379").unwrap_err();
        assert!(e.contains("'***@h:2379'"), "{e}");
        assert_eq!(redacted("etcd://h:1/ns"), "etcd://h:1/ns");
        assert_eq!(redacted("etcd://u:p@h/a@b"), "etcd://***@b");
    }

    #[test]
    fn http_urls_as_etcdctl_takes_them_get_the_etcd_url_to_write() {
        let e = parse_store_url("http://10.0.0.1:2379").unwrap_err();
        assert!(
            e.contains("--store 'http://10.0.0.1:2379'")
                && e.contains("etcd://HOST:PORT")
                && e.contains("(here etcd://10.0.0.1:2379)")
                && !e.contains("unknown scheme"),
            "{e}"
        );
        let e = parse_store_url("https://a:2379,https://b:2379").unwrap_err();
        assert!(
            e.contains("etcds://HOST:PORT")
                && e.contains("(here etcds://a:2379,b:2379)")
                && e.contains("--etcd-cacert"),
            "{e}"
        );
        let e = parse_store_url("HTTP://h").unwrap_err();
        assert!(e.contains("(here etcd://h:2379)"), "{e}");
        // Nothing to spell out: the general form only.
        let e = parse_store_url("http:h").unwrap_err();
        assert!(e.contains("etcd://HOST:PORT") && !e.contains("here"), "{e}");
    }

    /// Regression: `etcd://http://h:2379` said "endpoint 'http:' … port ''".
    #[test]
    fn a_scheme_inside_the_endpoint_list_is_named() {
        for url in [
            "etcd://http://h:2379",
            "etcd://a:2379,etcd://b:2379",
            "etcds://https://h:2379/ns",
        ] {
            let e = parse_store_url(url).expect_err(url);
            assert!(
                e.contains("list endpoints as HOST:PORT after one etcd://")
                    && e.contains("etcd://a:2379,b:2379")
                    && !e.contains("port ''"),
                "{url}: {e}"
            );
        }
    }

    /// Regression: `etcd://::1` said "has no host", `etcd://fe80::1`
    /// "port ':1'".
    #[test]
    fn ipv6_without_brackets_gets_the_bracketed_form() {
        for (url, fix) in [
            ("etcd://::1", "brackets: [::1]"),
            ("etcd://fe80::1", "brackets: [fe80::1]"),
            ("etcd://2001:db8::1:2379", "brackets: [2001:db8::1]:2379"),
            ("etcd://a:1,::1:2379", "brackets: [::1]:2379"),
            ("etcd://a:1:2", "brackets: [ADDRESS]:PORT"),
        ] {
            let e = parse_store_url(url).expect_err(url);
            assert!(
                e.contains("IPv6 addresses go in brackets") && e.contains(fix),
                "{url}: {e}"
            );
            assert!(
                !e.contains("has no host") && !e.contains("port '"),
                "{url}: {e}"
            );
        }
        let e = parse_store_url("etcd://2001:db8::1:2379").unwrap_err();
        assert!(e.contains("or [2001:db8::1:2379] if all of it"), "{e}");
    }

    /// Regression: `u16::from_str` takes a leading '+', so `etcd://h:+80`
    /// was port 80.
    #[test]
    fn ports_are_digits_only() {
        for (url, port) in [
            ("etcd://h:+80", "'+80'"),
            ("etcd://[::1]:+1", "'+1'"),
            ("etcd://h:-1", "'-1'"),
            ("etcd://h:٣", "'٣'"),
        ] {
            let e = parse_store_url(url).expect_err(url);
            assert!(
                e.contains(&format!("port {port} is not a number from 1 to 65535")),
                "{url}: {e}"
            );
        }
        assert_eq!(
            parse_store_url("etcd://h:02379"),
            Ok(etcd(false, &["h:2379"], ""))
        );
    }

    #[test]
    fn namespaces_are_checked() {
        let e = parse_store_url("etcd://h:1/svc/a b").unwrap_err();
        assert!(
            e.contains("the namespace '/svc/a b' contains a space"),
            "{e}"
        );
        let e = parse_store_url("etcd://h:1/a\tb").unwrap_err();
        assert!(
            e.contains("the namespace '/a\\tb' contains a control character") && !e.contains('\t'),
            "{e}"
        );
        let e = parse_store_url("etcd://h:1/a\u{1b}[2Jb").unwrap_err();
        assert!(
            !e.contains('\u{1b}') && e.contains("control character"),
            "{e}"
        );
        let e = parse_store_url("etcd://h:1/a%20b").unwrap_err();
        assert!(
            e.contains("the namespace '/a%20b' contains '%'") && e.contains("percent-decode"),
            "{e}"
        );
        let e = parse_store_url("etcd://h:1/a//b").unwrap_err();
        assert!(e.contains("namespace '/a//b' has an empty segment"), "{e}");
    }

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into())
    }

    fn credentials(user: &str, password: &str) -> Credentials {
        Credentials {
            user: user.into(),
            password: Secret(password.into()),
        }
    }

    const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n";
    const KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n";

    fn pem_file(dir: &tempfile::TempDir, name: &str) -> PathBuf {
        write_file(dir, name, CERT_PEM)
    }

    fn write_file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_files_need_etcds_and_etcds_trusts_its_ca_or_the_system_store() {
        let plain = parse_store_url("etcd://h:1").unwrap();
        let tls = parse_store_url("etcds://h:1").unwrap();
        let args = EtcdArgs {
            etcd_cacert: Some("/ca.pem".into()),
            ..EtcdArgs::default()
        };
        let e = etcd_security(&args, &plain, no_env).unwrap_err();
        assert!(
            e.contains("--etcd-cacert is set") && e.contains("etcds://"),
            "{e}"
        );
        let e =
            etcd_security(&EtcdArgs::default(), &plain, env_of(&[(ENV_CERT, "/c")])).unwrap_err();
        assert!(e.contains(ENV_CERT), "{e}");
        // Without a CA file, the system's CA store.
        let system = etcd_security(&EtcdArgs::default(), &tls, no_env).unwrap();
        assert!(system.cacert.is_none());
        let pem = system.read_tls().unwrap();
        assert!(pem.ca.is_none() && pem.identity.is_none());
        let ok = etcd_security(&args, &tls, no_env).unwrap();
        assert_eq!(ok.cacert.unwrap().from.to_string(), "--etcd-cacert");
        // The flag wins over the variable.
        let ok = etcd_security(&args, &tls, env_of(&[("REGENT_ETCD_CACERT", "/other")])).unwrap();
        assert_eq!(ok.cacert.unwrap().value, PathBuf::from("/ca.pem"));
    }

    #[test]
    fn a_client_certificate_needs_its_key_and_the_other_way_round() {
        let tls = parse_store_url("etcds://h:1").unwrap();
        let args = EtcdArgs {
            etcd_cacert: Some("/ca.pem".into()),
            etcd_cert: Some("/c.pem".into()),
            ..EtcdArgs::default()
        };
        let e = etcd_security(&args, &tls, no_env).unwrap_err();
        assert!(e.contains("--etcd-cert needs its private key"), "{e}");
        let e = etcd_security(
            &EtcdArgs {
                etcd_cert: None,
                ..args.clone()
            },
            &tls,
            env_of(&[(ENV_KEY, "/k.pem")]),
        )
        .unwrap_err();
        assert!(e.contains("REGENT_ETCD_KEY needs its certificate"), "{e}");
        let ok = etcd_security(&args, &tls, env_of(&[(ENV_KEY, "/k.pem")])).unwrap();
        assert!(ok.identity.is_some());
    }

    #[test]
    fn users_need_passwords_and_passwords_users() {
        let url = parse_store_url("etcd://h:1").unwrap();
        let user = EtcdArgs {
            etcd_user: Some("root".into()),
            ..EtcdArgs::default()
        };
        let e = etcd_security(&user, &url, no_env).unwrap_err();
        assert!(
            e.contains("'root' needs a password") && e.contains(ENV_PASSWORD),
            "{e}"
        );
        let ok = etcd_security(&user, &url, env_of(&[(ENV_PASSWORD, "s3cret")])).unwrap();
        assert_eq!(ok.user, Some(credentials("root", "s3cret")));
        let e =
            etcd_security(&EtcdArgs::default(), &url, env_of(&[(ENV_PASSWORD, "x")])).unwrap_err();
        assert!(e.contains("no user is"), "{e}");
        let colon = EtcdArgs {
            etcd_user: Some("root:s3cret".into()),
            ..EtcdArgs::default()
        };
        let e = etcd_security(&colon, &url, env_of(&[(ENV_PASSWORD, "x")])).unwrap_err();
        assert!(e.contains("contains ':'") && !e.contains("s3cret"), "{e}");
        let e = etcd_security(&colon, &url, no_env).unwrap_err();
        assert!(e.contains("contains ':'") && !e.contains("s3cret"), "{e}");
    }

    #[test]
    fn password_files() {
        let dir = tempfile::tempdir().unwrap();
        let url = parse_store_url("etcd://h:1").unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\r\n").unwrap();
        let args = EtcdArgs {
            etcd_user: Some("u".into()),
            etcd_password_file: Some(file.clone()),
            ..EtcdArgs::default()
        };
        // The file flag wins over the variable.
        let ok = etcd_security(&args, &url, env_of(&[(ENV_PASSWORD, "other")])).unwrap();
        assert_eq!(ok.user, Some(credentials("u", "s3cret")));
        std::fs::write(&file, "").unwrap();
        let e = etcd_security(&args, &url, no_env).unwrap_err();
        assert!(
            e.contains("--etcd-password-file") && e.contains("empty"),
            "{e}"
        );
        std::fs::write(&file, "a\nb\n").unwrap();
        assert!(
            etcd_security(&args, &url, no_env)
                .unwrap_err()
                .contains("one line")
        );
        let missing = EtcdArgs {
            etcd_password_file: Some(dir.path().join("missing")),
            ..args
        };
        let e = etcd_security(&missing, &url, no_env).unwrap_err();
        assert!(e.contains("missing"), "{e}");
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_files_are_read_and_must_be_pem() {
        let dir = tempfile::tempdir().unwrap();
        let tls = parse_store_url("etcds://h:1").unwrap();
        let ca = pem_file(&dir, "ca.pem");
        let junk = dir.path().join("junk");
        std::fs::write(&junk, "not pem").unwrap();
        let args = EtcdArgs {
            etcd_cacert: Some(ca),
            ..EtcdArgs::default()
        };
        let pem = etcd_security(&args, &tls, no_env)
            .unwrap()
            .read_tls()
            .unwrap();
        assert!(pem.ca.expect("a CA").starts_with(b"-----BEGIN"));
        let bad = EtcdArgs {
            etcd_cacert: Some(junk),
            ..EtcdArgs::default()
        };
        let e = etcd_security(&bad, &tls, no_env)
            .unwrap()
            .read_tls()
            .unwrap_err();
        assert!(
            e.contains("--etcd-cacert") && e.contains("not a PEM file"),
            "{e}"
        );
        let gone = EtcdArgs {
            etcd_cacert: Some(dir.path().join("gone.pem")),
            ..EtcdArgs::default()
        };
        let e = etcd_security(&gone, &tls, no_env)
            .unwrap()
            .read_tls()
            .unwrap_err();
        assert!(e.contains("gone.pem"), "{e}");
    }

    /// Regression: `EtcdSecurity` derived `Debug`, password included.
    #[test]
    fn debug_output_hides_passwords_and_keys() {
        let url = parse_store_url("etcd://h:1").unwrap();
        let args = EtcdArgs {
            etcd_user: Some("root".into()),
            ..EtcdArgs::default()
        };
        let sec = etcd_security(&args, &url, env_of(&[(ENV_PASSWORD, "s3cret")])).unwrap();
        let shown = format!("{sec:?}");
        assert!(
            shown.contains("\"root\"")
                && shown.contains("password: \"***\"")
                && !shown.contains("s3cret"),
            "{shown}"
        );
        let pw = password(&KIND.resolve(|_| None, env_of(&[(ENV_PASSWORD, "s3cret")])))
            .unwrap()
            .expect("a password");
        let shown = format!("{pw:?}");
        assert!(
            shown.contains("***") && !shown.contains("s3cret"),
            "{shown}"
        );
        let pem = TlsPem {
            ca: Some(b"CA".to_vec()),
            identity: Some((b"CERT".to_vec(), Secret(b"KEYMATERIAL".to_vec()))),
        };
        let shown = format!("{pem:?}");
        let key_bytes = format!("{:?}", b"KEYMATERIAL".as_slice());
        assert!(
            shown.contains(&format!("ca: Some({:?})", b"CA".as_slice()))
                && shown.contains("***")
                && !shown.contains("KEYMATERIAL")
                && !shown.contains(&key_bytes),
            "{shown}"
        );
    }

    /// Regression: a certificate given as `--etcd-key` (or the key as
    /// `--etcd-cert`) passed as PEM and failed only as a TLS error.
    #[cfg(feature = "tls")]
    #[test]
    fn pem_files_must_hold_what_their_flag_takes() {
        let dir = tempfile::tempdir().unwrap();
        let tls = parse_store_url("etcds://h:1").unwrap();
        let ca = pem_file(&dir, "ca.pem");
        let cert = pem_file(&dir, "cert.pem");
        let key = write_file(&dir, "key.pem", KEY_PEM);
        let read = |args: &EtcdArgs, env: &'static [(&'static str, &'static str)]| {
            etcd_security(args, &tls, env_of(env)).unwrap().read_tls()
        };
        let right = EtcdArgs {
            etcd_cacert: Some(ca.clone()),
            etcd_cert: Some(cert.clone()),
            etcd_key: Some(key.clone()),
            ..EtcdArgs::default()
        };
        let pem = read(&right, &[]).unwrap();
        assert_eq!(
            pem.identity,
            Some((CERT_PEM.into(), Secret(KEY_PEM.into())))
        );

        let swapped = EtcdArgs {
            etcd_cert: Some(key.clone()),
            etcd_key: Some(cert.clone()),
            ..right.clone()
        };
        let e = read(&swapped, &[]).unwrap_err();
        assert!(
            e.contains(&format!("--etcd-cert {}", key.display()))
                && e.contains("holds no CERTIFICATE block, only PRIVATE KEY")
                && e.contains("(is it the key? --etcd-key takes that)"),
            "{e}"
        );
        let key_is_cert = EtcdArgs {
            etcd_key: Some(cert.clone()),
            ..right.clone()
        };
        let e = read(&key_is_cert, &[]).unwrap_err();
        assert!(
            e.contains(&format!(
                "--etcd-key {}: holds no PRIVATE KEY block",
                cert.display()
            )) && e.contains("only CERTIFICATE")
                && e.contains("(is it the certificate? --etcd-cert takes that)"),
            "{e}"
        );
        let ca_is_key = EtcdArgs {
            etcd_cacert: Some(key.clone()),
            ..EtcdArgs::default()
        };
        let e = read(&ca_is_key, &[]).unwrap_err();
        assert!(
            e.contains("--etcd-cacert")
                && e.contains("holds no CERTIFICATE block, only PRIVATE KEY"),
            "{e}"
        );

        // Given by variables: the messages name the variables.
        let e = etcd_security(
            &EtcdArgs {
                etcd_cacert: Some(ca.clone()),
                ..EtcdArgs::default()
            },
            &tls,
            |k: &str| match k {
                ENV_CERT => Some(cert.clone().into()),
                ENV_KEY => Some(cert.clone().into()),
                _ => None,
            },
        )
        .unwrap()
        .read_tls()
        .unwrap_err();
        assert!(
            e.contains("REGENT_ETCD_KEY") && e.contains("REGENT_ETCD_CERT takes that"),
            "{e}"
        );

        // Other key labels count; other blocks are named, without a hint.
        let rsa = write_file(
            &dir,
            "rsa.pem",
            "-----BEGIN RSA PRIVATE KEY-----\r\nAA==\r\n-----END RSA PRIVATE KEY-----\r\n",
        );
        let csr = write_file(
            &dir,
            "csr.pem",
            "-----BEGIN CERTIFICATE REQUEST-----\nAA==\n-----END CERTIFICATE REQUEST-----\n",
        );
        let rsa_key = EtcdArgs {
            etcd_key: Some(rsa),
            ..right.clone()
        };
        assert!(read(&rsa_key, &[]).is_ok());
        let csr_cert = EtcdArgs {
            etcd_cert: Some(csr),
            ..right
        };
        let e = read(&csr_cert, &[]).unwrap_err();
        assert!(
            e.contains("holds no CERTIFICATE block, only CERTIFICATE REQUEST")
                && !e.contains("is it"),
            "{e}"
        );
    }
}
