//! The etcd store as a [`StoreKind`]: its URL grammar, its options (TLS
//! files, user, password), reading their files, the contradictions between
//! them, connecting, and what its errors mean in terms of those options.
//!
//! See [`KIND`] for the grammar and the options.
//!
//! Every rule broken is a [`TargetError`] naming the URL part or the
//! options and the rule, before any connection.
//!
//! The URL's grammar is `url.rs`'s, the TLS files and credentials
//! `security.rs`'s; this file holds the kind and the target.

mod security;
mod url;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use regent_core::target::{
    ConnectFuture, OptionKind, Options, StoreKind, StoreOption, Target, TargetError,
};
use regent_core::{BoxStore, StoreError};

use crate::store::{DEFAULT_REQUEST_TIMEOUT, EtcdStore, EtcdStoreBuilder};
use security::{Credentials, EtcdSecurity, TlsPem};
pub use url::DEFAULT_PORT;
use url::EtcdUrl;

// The names the options get by the convention of `regent_core::target`
// (a unit test checks them against it), for the hint, which names them
// for the CLI.
const FLAG_CERT: &str = "--etcd-cert";
const FLAG_KEY: &str = "--etcd-key";
const ENV_CERT: &str = "REGENT_ETCD_CERT";
const ENV_KEY: &str = "REGENT_ETCD_KEY";

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
/// Every rule broken is a [`TargetError`] naming the URL part or the
/// options and the rule, before any connection.
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

fn parse(
    url: &str,
    options: &Options,
    _env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    let parsed = url::parse_url(url).map_err(|detail| TargetError::url(&KIND, url, detail))?;
    let security = security::security(options, &parsed)?;
    let tls = if parsed.tls {
        Some(read_tls(&security, url)?)
    } else {
        None
    };
    Ok(Box::new(EtcdTarget {
        url: parsed,
        tls,
        user: security.user,
    }))
}

#[cfg(feature = "tls")]
fn read_tls(security: &EtcdSecurity, _url: &str) -> Result<TlsPem, TargetError> {
    security.read_tls()
}

#[cfg(not(feature = "tls"))]
fn read_tls(_: &EtcdSecurity, url: &str) -> Result<TlsPem, TargetError> {
    Err(TargetError::url(
        &KIND,
        url,
        "needs TLS, which this build leaves out: build regent-etcd with its feature 'tls' \
         (regent: 'etcd-tls')",
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
