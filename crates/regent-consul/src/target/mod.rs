//! The Consul store as a [`StoreKind`]: its URL grammar, its options (ACL
//! token, TLS files, datacenter), Consul's own environment variables as
//! fallbacks, reading their files, the contradictions between them, and
//! connecting.
//!
//! See [`KIND`] for the grammar and the options.
//!
//! The URL's grammar is `url.rs`'s, the other options `options.rs`'s; this
//! file holds the kind and the target.

mod options;
mod url;

#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use regent_core::target::{
    ConnectFuture, HolderIdFuture, OptionKind, Options, StoreKind, StoreOption, Target, TargetError,
};

use regent_core::{BoxStore, ErrorKind, HolderId, StoreError};

use crate::error::{TlsFailure, is_token_refusal, tls_failure};
use crate::store::{
    ConsulStore, ConsulStoreBuilder, DEFAULT_CALL_TIMEOUT, default_restart_proofs_dir,
};
use options::{Secret, TlsPem};
use url::ConsulUrl;
pub use url::{DEFAULT_PORT, DEFAULT_TLS_PORT};

/// The Consul store kind: `consul://` and `consuls://` URLs and their
/// options.
///
/// ```text
/// consul://[HOST[:PORT]][/PREFIX][?dc=DC]     plain HTTP (PORT defaults to 8500)
/// consuls://…                                 TLS (PORT defaults to 8501)
/// ```
///
/// * Without a host (`consul://`), the agent is the one Consul's own tools
///   use: `CONSUL_HTTP_ADDR` (`HOST:PORT`, or with `http://` /
///   `https://`, which must match the URL's scheme), else `127.0.0.1:8500`.
/// * The path is the key prefix (`consul://h/svc/jobs`: election `a` is
///   the key `svc/jobs/a`); without one, `regent/`.
/// * `?dc=DC` picks the datacenter; the default is the agent's.
///
/// | option | kind | flag / variable | Consul's variable, used when unset |
/// |---|---|---|---|
/// | `token` | secret | `REGENT_CONSUL_TOKEN` only | `CONSUL_HTTP_TOKEN` |
/// | `token-file` | path | `--consul-token-file` / `REGENT_CONSUL_TOKEN_FILE` | `CONSUL_HTTP_TOKEN_FILE` |
/// | `cacert` | path | `--consul-cacert` / `REGENT_CONSUL_CACERT` | `CONSUL_CACERT` |
/// | `cert`, `key` | path | `--consul-cert`, `--consul-key` / `REGENT_CONSUL_CERT`, `REGENT_CONSUL_KEY` | `CONSUL_CLIENT_CERT`, `CONSUL_CLIENT_KEY` |
/// | `dc` | text | `--consul-dc` / `REGENT_CONSUL_DC` | — |
/// | `lock-delay` | text: a duration, `0s` to `24h` | `--consul-lock-delay` / `REGENT_CONSUL_LOCK_DELAY` | — (regent's default: the ttl, see the [crate docs](crate#lock-delay)) |
///
/// Consul's variables are honoured so that regent finds the agent and the
/// token the way `consul` does on the same host. They are the user's
/// environment for Consul's tools, so a front end does not scrub them from
/// the command it runs (it scrubs `REGENT_CONSUL_TOKEN`); Consul's TLS
/// variables only apply to `consuls://` and are ignored by `consul://`
/// (regent's own TLS options there are an error).
///
/// Every rule broken is a [`TargetError`] naming the URL part or the
/// options (and Consul's variables) and the rule, before any connection.
pub static KIND: StoreKind = StoreKind {
    name: "consul",
    schemes: &["consul", "consuls"],
    advises: &["http", "https"],
    forms: "consul://[HOST[:PORT]][/PREFIX][?dc=DC], consuls://… (the same, over TLS); PORT \
            defaults to 8500 (consuls: 8501), HOST to CONSUL_HTTP_ADDR or 127.0.0.1",
    short_forms: "consul://… or consuls://…",
    default_call_timeout: DEFAULT_CALL_TIMEOUT,
    options: &[
        StoreOption {
            name: "token",
            kind: OptionKind::Secret,
            value_name: "TOKEN",
            help: "Consul ACL token (never a flag: `ps` would show it); default: CONSUL_HTTP_TOKEN",
        },
        StoreOption {
            name: "token-file",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "File holding the Consul ACL token on one line; default: CONSUL_HTTP_TOKEN_FILE",
        },
        StoreOption {
            name: "cacert",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "CA certificate (PEM) of the agent's HTTPS certificate, for consuls:// \
                   (default: CONSUL_CACERT, else the system's CA store)",
        },
        StoreOption {
            name: "cert",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "Client certificate (PEM) for an agent with verify_incoming; with \
                   --consul-key (default: CONSUL_CLIENT_CERT)",
        },
        StoreOption {
            name: "key",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "Private key (PEM) of --consul-cert (default: CONSUL_CLIENT_KEY)",
        },
        StoreOption {
            name: "dc",
            kind: OptionKind::Text,
            value_name: "DC",
            help: "Datacenter of the sessions and keys (default: the agent's); or ?dc= in the URL",
        },
        StoreOption {
            name: "lock-delay",
            kind: OptionKind::Text,
            value_name: "DURATION",
            help: "Lock delay of regent's sessions, 0s to 24h (default: the ttl, so that \
                   nobody takes the key before an ended session's holder has stepped down, \
                   whatever ended it; shorter delays make crash failovers faster and leave \
                   those cases to fencing tokens)",
        },
    ],
    examples: &[
        "regent run --store consul://127.0.0.1:8500 --election jobs -- ./worker",
        "CONSUL_HTTP_TOKEN=... regent run --store consuls://consul.internal/svc/regent \\\n      \
         --consul-cacert ca.pem --election jobs -- ./worker",
    ],
    parse,
};

fn parse(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    parse_with_env(url, options, env).map(|t| Box::new(t) as Box<dyn Target>)
}

/// [`KIND`]'s parser with Consul's variables read through `env`.
fn parse_with_env(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<ConsulTarget, TargetError> {
    let url = url::parse_url(&KIND, url, env)?;
    let settings = options::settings(&KIND, &url, options, env)?;
    Ok(ConsulTarget {
        url,
        dc: settings.dc,
        token: settings.token,
        tls: settings.tls,
        lock_delay: settings.lock_delay,
    })
}

/// A Consul agent named by a `consul://` or `consuls://` URL and its
/// options, checked, with every file read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsulTarget {
    url: ConsulUrl,
    dc: Option<String>,
    token: Option<Secret>,
    /// `Some` exactly for `consuls://`.
    tls: Option<TlsPem>,
    /// The `lock-delay` option, if given.
    lock_delay: Option<Duration>,
}

impl fmt::Display for ConsulTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}/{}",
            if self.url.tls { "consuls" } else { "consul" },
            self.url.address,
            self.url.prefix
        )?;
        if let Some(dc) = &self.dc {
            write!(f, "?dc={dc}")?;
        }
        Ok(())
    }
}

impl ConsulTarget {
    /// A store builder for this target, with `call_timeout`.
    pub fn builder(&self, call_timeout: Duration) -> ConsulStoreBuilder {
        let scheme = if self.url.tls { "https" } else { "http" };
        let mut b = ConsulStore::builder(format!("{scheme}://{}", self.url.address))
            .prefix(self.url.prefix.clone())
            .call_timeout(call_timeout)
            // A front end runs one instance per process, as the recipe's
            // ClientID assumes: the restart shortcut applies.
            .restart_proofs(default_restart_proofs_dir());
        if let Some(dc) = &self.dc {
            b = b.datacenter(dc.clone());
        }
        if let Some(delay) = self.lock_delay {
            b = b.lock_delay(delay);
        }
        if let Some(token) = &self.token {
            b = b.token(String::from_utf8_lossy(&token.0).into_owned());
        }
        if let Some(tls) = &self.tls {
            b = match &tls.ca {
                Some(ca) => b.tls_ca_pem(ca.clone()),
                None => b.tls(),
            };
            if let Some((cert, key)) = &tls.identity {
                b = b.tls_client_identity_pem(cert.clone(), key.0.clone());
            }
        }
        b
    }
}

impl Target for ConsulTarget {
    fn kind(&self) -> &'static StoreKind {
        &KIND
    }

    fn connect(&self, call_timeout: Duration) -> ConnectFuture<'_> {
        Box::pin(async move { Ok(BoxStore::new(self.builder(call_timeout).build()?)) })
    }

    /// Which of the user's settings an error is about: the CA for an agent
    /// certificate that did not verify, the client certificate the agent
    /// refused, the ACL policy a refused token needs (with this target's
    /// key prefix).
    fn hint(&self, e: &StoreError) -> Option<String> {
        if let Some(tls) = tls_failure(e) {
            let pem = self.tls.as_ref()?;
            return Some(match (tls, &pem.ca, &pem.identity) {
                (TlsFailure::ServerCertificate, Some(_), _) => {
                    "regent trusts only the CA of --consul-cacert (or REGENT_CONSUL_CACERT, \
                     CONSUL_CACERT): it must have signed the agent's HTTPS certificate, which \
                     must name the URL's host"
                        .to_owned()
                }
                (TlsFailure::ServerCertificate, None, _) => {
                    "regent trusts the system's CA store: pass the CA of the agent's HTTPS \
                     certificate with --consul-cacert FILE (or CONSUL_CACERT)"
                        .to_owned()
                }
                (TlsFailure::ClientCertificate, _, None) => {
                    "regent presented no client certificate; if the agent has \
                     verify_incoming, pass one with --consul-cert FILE and --consul-key FILE \
                     (or CONSUL_CLIENT_CERT and CONSUL_CLIENT_KEY)"
                        .to_owned()
                }
                (TlsFailure::ClientCertificate, _, Some(_)) => {
                    "regent presented the client certificate of --consul-cert (or \
                     CONSUL_CLIENT_CERT); the agent must trust the CA that signed it"
                        .to_owned()
                }
            });
        }
        if !is_token_refusal(e) {
            return None;
        }
        let prefix = &self.url.prefix;
        let policy = format!(
            "the token needs a policy with key_prefix \"{prefix}\" {{ policy = \"write\" }} \
             and session_prefix \"\" {{ policy = \"write\" }} (and agent_prefix \"\" {{ \
             policy = \"read\" }} for regent run without --id, which reads the agent's node \
             name)"
        );
        Some(match self.token {
            Some(_) => policy,
            None => format!(
                "no ACL token was given: set REGENT_CONSUL_TOKEN, --consul-token-file or \
                 CONSUL_HTTP_TOKEN; {policy}"
            ),
        })
    }

    /// The agent's node name: the recipe's ClientID.
    fn default_holder_id(&self, call_timeout: Duration) -> HolderIdFuture<'_> {
        Box::pin(async move {
            let store = self.builder(call_timeout).build()?;
            let node = store.agent_node_name().await?;
            HolderId::new(&node).map(Some).map_err(|e| {
                StoreError::new(
                    ErrorKind::Config,
                    format!(
                        "the agent's node name '{}' cannot be a holder id ({e}); pass --id",
                        regent_core::target::printable(&node)
                    ),
                )
            })
        })
    }
}
