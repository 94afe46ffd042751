//! The options of a Consul target beside its URL: the ACL token, the
//! datacenter, the TLS files and the lock delay, with Consul's own
//! variables as fallbacks; checked against the URL and each other, their
//! files read.

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use regent_core::target::{
    Detail, Mention, OptionValue, Options, Source, StoreKind, TargetError, printable,
};

use super::url::ConsulUrl;
use crate::store::MAX_TTL;

/// Consul's own variables, honoured when regent's option is not given.
pub(super) const CONSUL_HTTP_TOKEN: &str = "CONSUL_HTTP_TOKEN";
pub(super) const CONSUL_HTTP_TOKEN_FILE: &str = "CONSUL_HTTP_TOKEN_FILE";
pub(super) const CONSUL_CACERT: &str = "CONSUL_CACERT";
pub(super) const CONSUL_CLIENT_CERT: &str = "CONSUL_CLIENT_CERT";
pub(super) const CONSUL_CLIENT_KEY: &str = "CONSUL_CLIENT_KEY";

/// Bytes that must not be printed (an ACL token, a private key).
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Secret(pub(super) Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// The PEM texts of a `consuls://` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TlsPem {
    pub(super) ca: Option<Vec<u8>>,
    pub(super) identity: Option<(Vec<u8>, Secret)>,
}

/// What the options say, checked.
pub(super) struct Settings {
    pub(super) dc: Option<String>,
    pub(super) token: Option<Secret>,
    /// `Some` exactly for `consuls://`.
    pub(super) tls: Option<TlsPem>,
    pub(super) lock_delay: Option<Duration>,
}

/// The settings `options` give for `url`, a URL of `kind` (whose options
/// they are), with Consul's variables read through `env`.
pub(super) fn settings(
    kind: &'static StoreKind,
    url: &ConsulUrl,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Settings, TargetError> {
    // Consul's variable `var`, as a value of regent's option `option`.
    let consul_env = |option: &'static str, var: &str| {
        env(var).filter(|v| !v.is_empty()).map(|value| OptionValue {
            value,
            source: Source::Env(var.to_owned()),
            store: kind,
            option,
        })
    };
    let own = |name: &str| options.get(name).cloned();

    let token = match (own("token"), own("token-file")) {
        (Some(t), Some(f)) => {
            return Err(TargetError::conflict(
                &t,
                &[&f],
                Detail::new("and ")
                    .given(f.given())
                    .text(" both give the Consul token; keep one"),
            ));
        }
        (Some(t), None) => Some(token_text(&t)?),
        (None, Some(f)) => Some(read_token_file(&f)?),
        (None, None) => match consul_env("token", CONSUL_HTTP_TOKEN) {
            Some(t) => Some(token_text(&t)?),
            None => consul_env("token-file", CONSUL_HTTP_TOKEN_FILE)
                .map(|f| read_token_file(&f))
                .transpose()?,
        },
    };

    let dc = match (own("dc"), &url.dc) {
        (Some(o), Some(u)) if o.text()? != u => {
            return Err(TargetError::conflict(
                &o,
                &[],
                format!(
                    "says datacenter '{}' but the URL says ?dc={u}; keep one",
                    printable(o.text()?)
                ),
            ));
        }
        (Some(o), _) => Some(o.text()?.to_owned()),
        (None, u) => u.clone(),
    };

    let tls_own = ["cacert", "cert", "key"].map(own);
    let tls = if url.tls {
        let [ca, cert, key] = tls_own;
        let ca = ca.or_else(|| consul_env("cacert", CONSUL_CACERT));
        let cert = cert.or_else(|| consul_env("cert", CONSUL_CLIENT_CERT));
        let key = key.or_else(|| consul_env("key", CONSUL_CLIENT_KEY));
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some((
                read_pem(&c, "CERTIFICATE")?,
                Secret(read_pem(&k, "PRIVATE KEY")?),
            )),
            (Some(c), None) => {
                return Err(TargetError::missing(
                    &c,
                    &["key"],
                    Detail::new("needs its private key: ").option("key", Mention::EitherWay),
                ));
            }
            (None, Some(k)) => {
                return Err(TargetError::missing(
                    &k,
                    &["cert"],
                    Detail::new("needs its certificate: ").option("cert", Mention::EitherWay),
                ));
            }
            (None, None) => None,
        };
        let ca = ca.map(|c| read_pem(&c, "CERTIFICATE")).transpose()?;
        Some(TlsPem { ca, identity })
    } else {
        if let Some(o) = tls_own.iter().flatten().next() {
            return Err(TargetError::conflict(
                o,
                &[],
                "is set but the URL is consul://; TLS files apply to consuls:// URLs",
            ));
        }
        None
    };
    let lock_delay = own("lock-delay")
        .map(|v| {
            let text = v.text()?;
            parse_go_duration(text)
                .filter(|d| *d <= MAX_TTL)
                .ok_or_else(|| {
                    TargetError::bad_value(
                        &v,
                        format!(
                            "'{}' is not a lock delay: write a duration from 0s to 24h, such as \
                             0s, 500ms, 10s or 1m30s",
                            printable(text)
                        ),
                    )
                })
        })
        .transpose()?;
    Ok(Settings {
        dc,
        token,
        tls,
        lock_delay,
    })
}

/// A duration as Consul writes them (Go's): one or more `NUMBER UNIT`
/// with units `ms`, `s`, `m`, `h`, a fraction allowed (`1.5s`, `1m30s`,
/// `0s`). `None` for anything else.
pub(super) fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit..];
        total = total.checked_add(Duration::try_from_secs_f64(number * seconds).ok()?)?;
    }
    Some(total)
}

fn token_text(v: &OptionValue) -> Result<Secret, TargetError> {
    let text = v.text()?.trim();
    if text.is_empty() || text.chars().any(|c| c.is_control() || c == ' ') {
        return Err(TargetError::bad_value(
            v,
            "must be one Consul ACL token, without spaces or control characters",
        ));
    }
    Ok(Secret(text.as_bytes().to_vec()))
}

fn read_token_file(v: &OptionValue) -> Result<Secret, TargetError> {
    let path = std::path::Path::new(&v.value);
    let text = std::fs::read_to_string(path).map_err(|e| TargetError::unreadable(v, path, e))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.as_slice() {
        [token] => token_text(&OptionValue {
            value: OsString::from(*token),
            ..v.clone()
        }),
        [] => Err(TargetError::bad_file(v, path, ": the file is empty")),
        _ => Err(TargetError::bad_file(
            v,
            path,
            ": the file must hold the token on one line",
        )),
    }
}

/// Reads the PEM file of `v`, which must hold a block whose label ends
/// with `label` (`CERTIFICATE`, `PRIVATE KEY`).
fn read_pem(v: &OptionValue, label: &str) -> Result<Vec<u8>, TargetError> {
    let path = std::path::Path::new(&v.value);
    let bytes = std::fs::read(path).map_err(|e| TargetError::unreadable(v, path, e))?;
    let text = String::from_utf8_lossy(&bytes);
    let labels: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("-----BEGIN ")?.strip_suffix("-----"))
        .map(printable)
        .collect();
    if labels.is_empty() {
        return Err(TargetError::bad_file(v, path, ": not a PEM file"));
    }
    if !labels
        .iter()
        .any(|l| l.ends_with(label) && !l.ends_with(&format!("{label} REQUEST")))
    {
        return Err(TargetError::bad_file(
            v,
            path,
            format!(": holds no {label} block, only {}", labels.join(", ")),
        ));
    }
    Ok(bytes)
}
