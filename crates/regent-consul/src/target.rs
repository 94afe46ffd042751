//! The Consul store as a [`StoreKind`]: its URL grammar, its options (ACL
//! token, TLS files, datacenter), Consul's own environment variables as
//! fallbacks, reading their files, the contradictions between them, and
//! connecting.
//!
//! See [`KIND`] for the grammar and the options.

use std::ffi::OsString;
use std::fmt;
use std::net::Ipv6Addr;
use std::time::Duration;

use regent_core::target::{
    ConnectFuture, HolderIdFuture, OptionKind, OptionValue, Options, Source, StoreKind,
    StoreOption, Target, TargetError, port_number, printable, redacted,
};

use regent_core::{BoxStore, ErrorKind, HolderId, StoreError};

use crate::error::{TlsFailure, is_token_refusal, tls_failure};
use crate::store::{
    ConsulStore, ConsulStoreBuilder, DEFAULT_CALL_TIMEOUT, DEFAULT_PREFIX, MAX_TTL,
    default_restart_proofs_dir, normalize_prefix,
};

/// The agent's HTTP port, used when a `consul://` URL names none.
pub const DEFAULT_PORT: u16 = 8500;

/// The agent's HTTPS port, used when a `consuls://` URL names none.
pub const DEFAULT_TLS_PORT: u16 = 8501;

/// Consul's own variables, honoured when regent's option is not given.
const CONSUL_HTTP_ADDR: &str = "CONSUL_HTTP_ADDR";
const CONSUL_HTTP_TOKEN: &str = "CONSUL_HTTP_TOKEN";
const CONSUL_HTTP_TOKEN_FILE: &str = "CONSUL_HTTP_TOKEN_FILE";
const CONSUL_CACERT: &str = "CONSUL_CACERT";
const CONSUL_CLIENT_CERT: &str = "CONSUL_CLIENT_CERT";
const CONSUL_CLIENT_KEY: &str = "CONSUL_CLIENT_KEY";

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
/// | `lock-delay` | text: a duration, `0s` to `24h` | `--consul-lock-delay` / `REGENT_CONSUL_LOCK_DELAY` | — (regent's default: 0, see the [crate docs](crate#lock-delay)) |
///
/// Consul's variables are honoured so that regent finds the agent and the
/// token the way `consul` does on the same host. They are the user's
/// environment for Consul's tools, so a front end does not scrub them from
/// the command it runs (it scrubs `REGENT_CONSUL_TOKEN`); Consul's TLS
/// variables only apply to `consuls://` and are ignored by `consul://`
/// (regent's own TLS options there are an error).
///
/// Every rule broken is a [`TargetError`] naming the URL part, flag or
/// variable and the rule, before any connection.
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
            help: "Lock delay of regent's sessions, e.g. 0s or 10s (default 0s: a leader steps \
                   down on its own clock first; set the ttl to cover an operator destroying a \
                   session too, at the cost of a ttl per crash failover)",
        },
    ],
    examples: &[
        "regent run --store consul://127.0.0.1:8500 --election jobs -- ./worker",
        "CONSUL_HTTP_TOKEN=... regent run --store consuls://consul.internal/svc/regent \\\n      \
         --consul-cacert ca.pem --election jobs -- ./worker",
    ],
    parse,
};

fn parse(url: &str, options: &Options) -> Result<Box<dyn Target>, TargetError> {
    parse_with_env(url, options, &|name| std::env::var_os(name))
        .map(|t| Box::new(t) as Box<dyn Target>)
}

/// [`KIND`]'s parser with Consul's variables read through `env`.
fn parse_with_env(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<ConsulTarget, TargetError> {
    let url = parse_url(url, env).map_err(TargetError::new)?;
    let consul_env = |var: &str| {
        env(var).filter(|v| !v.is_empty()).map(|value| OptionValue {
            value,
            source: Source::Env(var.to_owned()),
        })
    };
    let own = |name: &str| options.get(name).cloned();

    let token = match (own("token"), own("token-file")) {
        (Some(t), Some(f)) => {
            return Err(TargetError::new(format!(
                "{} and {} both give the Consul token; keep one",
                t.source, f.source
            )));
        }
        (Some(t), None) => Some(token_text(&t)?),
        (None, Some(f)) => Some(read_token_file(&f)?),
        (None, None) => match consul_env(CONSUL_HTTP_TOKEN) {
            Some(t) => Some(token_text(&t)?),
            None => consul_env(CONSUL_HTTP_TOKEN_FILE)
                .map(|f| read_token_file(&f))
                .transpose()?,
        },
    };

    let dc = match (own("dc"), &url.dc) {
        (Some(o), Some(u)) if o.text()? != u => {
            return Err(TargetError::new(format!(
                "{} says datacenter '{}' but the URL says ?dc={u}; keep one",
                o.source,
                printable(o.text()?)
            )));
        }
        (Some(o), _) => Some(o.text()?.to_owned()),
        (None, u) => u.clone(),
    };

    let tls_own = ["cacert", "cert", "key"].map(own);
    let tls = if url.tls {
        let [ca, cert, key] = tls_own;
        let ca = ca.or_else(|| consul_env(CONSUL_CACERT));
        let cert = cert.or_else(|| consul_env(CONSUL_CLIENT_CERT));
        let key = key.or_else(|| consul_env(CONSUL_CLIENT_KEY));
        let identity = match (cert, key) {
            (Some(c), Some(k)) => Some((
                read_pem(&c, "CERTIFICATE")?,
                Secret(read_pem(&k, "PRIVATE KEY")?),
            )),
            (Some(c), None) => {
                return Err(TargetError::new(format!(
                    "{} needs its private key: --consul-key or REGENT_CONSUL_KEY",
                    c.source
                )));
            }
            (None, Some(k)) => {
                return Err(TargetError::new(format!(
                    "{} needs its certificate: --consul-cert or REGENT_CONSUL_CERT",
                    k.source
                )));
            }
            (None, None) => None,
        };
        let ca = ca.map(|c| read_pem(&c, "CERTIFICATE")).transpose()?;
        Some(TlsPem { ca, identity })
    } else {
        if let Some(o) = tls_own.iter().flatten().next() {
            return Err(TargetError::new(format!(
                "{} is set but the URL is consul://; TLS files apply to consuls:// URLs",
                o.source
            )));
        }
        None
    };
    let lock_delay = own("lock-delay")
        .map(|v| {
            let text = v.text()?;
            parse_go_duration(text)
                .filter(|d| *d <= MAX_TTL)
                .ok_or_else(|| {
                    TargetError::new(format!(
                        "{} '{}' is not a lock delay: write a duration from 0s to 24h, such as \
                         0s, 500ms, 10s or 1m30s",
                        v.source,
                        printable(text)
                    ))
                })
        })
        .transpose()?;
    Ok(ConsulTarget {
        url,
        dc,
        token,
        tls,
        lock_delay,
    })
}

/// A duration as Consul writes them (Go's): one or more `NUMBER UNIT`
/// with units `ms`, `s`, `m`, `h`, a fraction allowed (`1.5s`, `1m30s`,
/// `0s`). `None` for anything else.
fn parse_go_duration(text: &str) -> Option<Duration> {
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
        return Err(TargetError::new(format!(
            "{} must be one Consul ACL token, without spaces or control characters",
            v.source
        )));
    }
    Ok(Secret(text.as_bytes().to_vec()))
}

fn read_token_file(v: &OptionValue) -> Result<Secret, TargetError> {
    let path = std::path::Path::new(&v.value);
    let text = std::fs::read_to_string(path).map_err(|e| {
        TargetError::new(format!(
            "{} {}: cannot read it ({e})",
            v.source,
            path.display()
        ))
    })?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.as_slice() {
        [token] => token_text(&OptionValue {
            value: OsString::from(*token),
            source: v.source.clone(),
        }),
        [] => Err(TargetError::new(format!(
            "{} {}: the file is empty",
            v.source,
            path.display()
        ))),
        _ => Err(TargetError::new(format!(
            "{} {}: the file must hold the token on one line",
            v.source,
            path.display()
        ))),
    }
}

/// Reads the PEM file of `v`, which must hold a block whose label ends
/// with `label` (`CERTIFICATE`, `PRIVATE KEY`).
fn read_pem(v: &OptionValue, label: &str) -> Result<Vec<u8>, TargetError> {
    let path = std::path::Path::new(&v.value);
    let bytes = std::fs::read(path).map_err(|e| {
        TargetError::new(format!(
            "{} {}: cannot read it ({e})",
            v.source,
            path.display()
        ))
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let labels: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("-----BEGIN ")?.strip_suffix("-----"))
        .collect();
    if labels.is_empty() {
        return Err(TargetError::new(format!(
            "{} {}: not a PEM file",
            v.source,
            path.display()
        )));
    }
    if !labels
        .iter()
        .any(|l| l.ends_with(label) && !l.ends_with(&format!("{label} REQUEST")))
    {
        return Err(TargetError::new(format!(
            "{} {}: holds no {label} block, only {}",
            v.source,
            path.display(),
            labels.join(", ")
        )));
    }
    Ok(bytes)
}

/// Bytes that must not be printed (an ACL token, a private key).
#[derive(Clone, PartialEq, Eq)]
struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// The PEM texts of a `consuls://` target.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TlsPem {
    ca: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Secret)>,
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
    /// `--consul-lock-delay`, if given.
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

/// `consul[s]://[HOST[:PORT]][/PREFIX][?dc=DC]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ConsulUrl {
    tls: bool,
    /// `HOST:PORT`, an IPv6 host in brackets.
    address: String,
    /// The key prefix, with its trailing `/`.
    prefix: String,
    dc: Option<String>,
}

fn parse_url(url: &str, env: &dyn Fn(&str) -> Option<OsString>) -> Result<ConsulUrl, String> {
    let shown = redacted(url);
    let not_ours = || format!("--store '{shown}' is not a Consul URL");
    let (scheme, rest) = url.split_once(':').ok_or_else(not_ours)?;
    let tls = match scheme.to_ascii_lowercase().as_str() {
        "consul" => false,
        "consuls" => true,
        s @ ("http" | "https") => {
            let ours = if s == "https" { "consuls" } else { "consul" };
            let hosts = rest.trim_start_matches('/');
            return Err(format!(
                "--store '{shown}': regent does not take {s}:// URLs; write the agent as \
                 {ours}://{hosts}"
            ));
        }
        _ => return Err(not_ours()),
    };
    let rest = rest
        .strip_prefix("//")
        .ok_or_else(|| format!("--store '{shown}': write Consul stores as consul://HOST:PORT"))?;
    if rest.contains('@') {
        return Err(format!(
            "--store '{shown}': unexpected '@': put the ACL token in REGENT_CONSUL_TOKEN or \
             CONSUL_HTTP_TOKEN, never in the URL"
        ));
    }
    if rest.contains('#') {
        return Err(format!(
            "--store '{shown}': unexpected '#': Consul URLs take no fragment"
        ));
    }
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let dc = query
        .map(|q| parse_query(q).map_err(|e| format!("--store '{shown}': {e}")))
        .transpose()?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.contains(',') {
        return Err(format!(
            "--store '{shown}': name one agent: regent talks to one Consul agent (the local \
             one, usually), which forwards to the servers"
        ));
    }
    let default_port = if tls { DEFAULT_TLS_PORT } else { DEFAULT_PORT };
    let address = if authority.is_empty() {
        match env(CONSUL_HTTP_ADDR).filter(|v| !v.is_empty()) {
            Some(addr) => from_consul_http_addr(&addr, tls, default_port)?,
            None => format!("127.0.0.1:{default_port}"),
        }
    } else {
        parse_host_port(authority, default_port).map_err(|e| format!("--store '{shown}': {e}"))?
    };
    let prefix = match path.strip_prefix('/') {
        None | Some("") => DEFAULT_PREFIX.to_owned(),
        Some(p) => normalize_prefix(p).map_err(|e| format!("--store '{shown}': {e}"))?,
    };
    Ok(ConsulUrl {
        tls,
        address,
        prefix,
        dc,
    })
}

/// The query: `dc=DC` and nothing else.
fn parse_query(query: &str) -> Result<String, String> {
    if query.is_empty() {
        return Err("an empty query: write ?dc=DATACENTER or nothing".into());
    }
    let mut dc = None;
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("dc", v)) => {
                if dc.is_some() {
                    return Err("?dc= is given twice".into());
                }
                if v.is_empty()
                    || !v
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                {
                    return Err(format!(
                        "the datacenter '{}' must be ASCII letters, digits, '-', '_' or '.'",
                        printable(v)
                    ));
                }
                dc = Some(v.to_owned());
            }
            _ => {
                return Err(format!(
                    "unexpected '{}' in the query: Consul URLs take only ?dc=DATACENTER",
                    printable(pair)
                ));
            }
        }
    }
    dc.ok_or_else(|| "an empty query: write ?dc=DATACENTER or nothing".into())
}

/// `CONSUL_HTTP_ADDR`: `HOST:PORT`, `http://HOST:PORT` or
/// `https://HOST:PORT` (Consul's tools also take a `unix://` socket,
/// which regent does not).
fn from_consul_http_addr(value: &OsString, tls: bool, default_port: u16) -> Result<String, String> {
    let addr = value
        .to_str()
        .ok_or_else(|| format!("{CONSUL_HTTP_ADDR} is not valid UTF-8"))?;
    let shown = printable(addr);
    let host_port = match addr.split_once("://") {
        None => addr,
        Some((s, rest)) if s.eq_ignore_ascii_case("http") && !tls => rest,
        Some((s, rest)) if s.eq_ignore_ascii_case("https") && tls => rest,
        Some((s, _)) if s.eq_ignore_ascii_case("https") => {
            return Err(format!(
                "{CONSUL_HTTP_ADDR} is '{shown}' (https) but the URL is consul://; write consuls://"
            ));
        }
        Some((s, _)) if s.eq_ignore_ascii_case("http") => {
            return Err(format!(
                "{CONSUL_HTTP_ADDR} is '{shown}' (http) but the URL is consuls://; write consul://"
            ));
        }
        Some(_) => {
            return Err(format!(
                "{CONSUL_HTTP_ADDR} is '{shown}'; regent takes HOST:PORT or http(s)://HOST:PORT \
                 there (no unix:// socket); name the agent in the URL instead"
            ));
        }
    };
    parse_host_port(host_port.trim_end_matches('/'), default_port)
        .map_err(|e| format!("{CONSUL_HTTP_ADDR} is '{shown}': {e}"))
}

/// `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT` → `HOST:PORT`.
fn parse_host_port(h: &str, default_port: u16) -> Result<String, String> {
    if h.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("the agent '{}' contains whitespace", printable(h)));
    }
    let (host, port) = if let Some(v6) = h.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("'{h}' opens '[' without closing it"))?;
        if addr.parse::<Ipv6Addr>().is_err() {
            return Err(format!("'{addr}' in '{h}' is not an IPv6 address"));
        }
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("'{h}': expected ':PORT' after ']'"))?,
            ),
        };
        (format!("[{addr}]"), port)
    } else {
        if h.matches(':').count() > 1 {
            return Err(format!(
                "'{h}': IPv6 addresses go in brackets: [ADDRESS]:PORT"
            ));
        }
        match h.split_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (h.to_owned(), None),
        }
    };
    if host.is_empty() {
        return Err(format!("'{h}' has no host"));
    }
    let port = match port {
        None => default_port,
        Some(p) => {
            port_number(p).ok_or_else(|| format!("port '{p}' is not a number from 1 to 65535"))?
        }
    };
    Ok(format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    fn url(s: &str) -> Result<ConsulUrl, String> {
        parse_url(s, &no_env)
    }

    fn consul(tls: bool, address: &str, prefix: &str, dc: Option<&str>) -> ConsulUrl {
        ConsulUrl {
            tls,
            address: address.into(),
            prefix: prefix.into(),
            dc: dc.map(Into::into),
        }
    }

    fn options(pairs: &[(&str, &str)]) -> Options {
        let mut o = Options::new();
        for (k, v) in pairs {
            o.set(&KIND, k, v).unwrap();
        }
        o
    }

    #[test]
    fn the_grammar() {
        assert_eq!(
            url("consul://h:1"),
            Ok(consul(false, "h:1", "regent/", None))
        );
        assert_eq!(
            url("consul://h"),
            Ok(consul(false, "h:8500", "regent/", None))
        );
        assert_eq!(
            url("consuls://h"),
            Ok(consul(true, "h:8501", "regent/", None))
        );
        assert_eq!(
            url("CONSUL://h:1/"),
            Ok(consul(false, "h:1", "regent/", None))
        );
        assert_eq!(
            url("consul://h:1/svc/jobs?dc=eu-1"),
            Ok(consul(false, "h:1", "svc/jobs/", Some("eu-1")))
        );
        assert_eq!(
            url("consul://[::1]:9"),
            Ok(consul(false, "[::1]:9", "regent/", None))
        );
        assert_eq!(
            url("consul://"),
            Ok(consul(false, "127.0.0.1:8500", "regent/", None))
        );
        assert_eq!(
            url("consuls://?dc=a"),
            Ok(consul(true, "127.0.0.1:8501", "regent/", Some("a")))
        );
    }

    #[test]
    fn what_the_grammar_refuses() {
        for (u, says) in [
            ("consul:h:1", "consul://HOST:PORT"),
            ("consul://tok@h:1", "REGENT_CONSUL_TOKEN"),
            ("consul://h:1#x", "fragment"),
            ("consul://h:1?token=x", "only ?dc="),
            ("consul://h:1?dc=a&dc=b", "twice"),
            ("consul://h:1?dc=", "datacenter"),
            ("consul://h:1?dc=a b", "datacenter"),
            ("consul://h:1?", "empty query"),
            ("consul://a:1,b:2", "one agent"),
            ("consul://h:+80", "port '+80'"),
            ("consul://h:0", "port '0'"),
            ("consul://::1", "brackets"),
            ("consul://h:1/a b", "whitespace"),
            ("consul://h:1/a%20b", "'%'"),
            ("consul://h:1/a//b", "empty segment"),
            ("http://h:8500", "consul://h:8500"),
            ("https://h:8501", "consuls://h:8501"),
            ("etcd://h", "not a Consul URL"),
        ] {
            let e = url(u).expect_err(u);
            assert!(e.contains(says), "{u}: {e}");
        }
        // A token in the URL is never echoed.
        assert!(!url("consul://s3cret@h").unwrap_err().contains("s3cret"));
    }

    #[test]
    fn consul_http_addr_fills_an_empty_host() {
        let env =
            |v: &'static str| move |k: &str| (k == CONSUL_HTTP_ADDR).then(|| OsString::from(v));
        assert_eq!(
            parse_url("consul://", &env("10.0.0.1:8500"))
                .unwrap()
                .address,
            "10.0.0.1:8500"
        );
        assert_eq!(
            parse_url("consul:///p", &env("http://10.0.0.1")).unwrap(),
            consul(false, "10.0.0.1:8500", "p/", None)
        );
        assert_eq!(
            parse_url("consuls://", &env("https://c.internal:9501"))
                .unwrap()
                .address,
            "c.internal:9501"
        );
        let e = parse_url("consul://", &env("https://h:8501")).unwrap_err();
        assert!(
            e.contains("CONSUL_HTTP_ADDR") && e.contains("consuls://"),
            "{e}"
        );
        let e = parse_url("consul://", &env("unix:///var/run/consul.sock")).unwrap_err();
        assert!(e.contains("unix://"), "{e}");
        // A host in the URL wins.
        assert_eq!(
            parse_url("consul://h:1", &env("x:2")).unwrap().address,
            "h:1"
        );
    }

    #[test]
    fn tokens_regents_own_first_then_consuls_and_never_shown() {
        let env = |k: &str| (k == CONSUL_HTTP_TOKEN).then(|| OsString::from("consul-token"));
        let t = parse_with_env("consul://h", &Options::new(), &env).unwrap();
        assert_eq!(t.token, Some(Secret(b"consul-token".to_vec())));
        let own = KIND.resolve(
            |_| None,
            |k| (k == "REGENT_CONSUL_TOKEN").then(|| "mine".into()),
        );
        let t = parse_with_env("consul://h", &own, &env).unwrap();
        assert_eq!(t.token, Some(Secret(b"mine".to_vec())));
        let shown = format!("{t:?} {t}");
        assert!(
            !shown.contains("mine") && !shown.contains("consul-token"),
            "{shown}"
        );
        // Secrets have no flag.
        assert!(!KIND.option("token").unwrap().has_flag());
        assert_eq!(KIND.secret_env_names(), ["REGENT_CONSUL_TOKEN"]);
    }

    #[test]
    fn token_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "  abc-123\n").unwrap();
        let path = file.to_str().unwrap();
        let t = parse_with_env("consul://h", &options(&[("token-file", path)]), &no_env).unwrap();
        assert_eq!(t.token, Some(Secret(b"abc-123".to_vec())));
        let both = options(&[("token-file", path), ("token", "x")]);
        let e = parse_with_env("consul://h", &both, &no_env).unwrap_err();
        assert!(e.message().contains("keep one"), "{e}");
        std::fs::write(&file, "a\nb\n").unwrap();
        let e =
            parse_with_env("consul://h", &options(&[("token-file", path)]), &no_env).unwrap_err();
        assert!(e.message().contains("one line"), "{e}");
        let env = |k: &str| (k == CONSUL_HTTP_TOKEN_FILE).then(|| OsString::from("/nonexistent/t"));
        let e = parse_with_env("consul://h", &Options::new(), &env).unwrap_err();
        assert!(e.message().contains("CONSUL_HTTP_TOKEN_FILE"), "{e}");
    }

    #[test]
    fn lock_delays_as_consul_writes_durations() {
        let s = Duration::from_secs;
        for (text, want) in [
            ("0s", Some(Duration::ZERO)),
            ("15s", Some(s(15))),
            ("500ms", Some(Duration::from_millis(500))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("1m30s", Some(s(90))),
            ("24h", Some(s(24 * 3600))),
            ("", None),
            ("10", None),
            ("s", None),
            ("-1s", None),
            ("1d", None),
            ("1.2.3s", None),
            ("NaNs", None),
            ("1e400s", None),
        ] {
            assert_eq!(parse_go_duration(text), want, "{text:?}");
        }
        let target =
            |v: &str| parse_with_env("consul://h:1", &options(&[("lock-delay", v)]), &no_env);
        assert_eq!(target("10s").unwrap().lock_delay, Some(s(10)));
        let err = target("25h").unwrap_err().to_string();
        assert!(err.contains("'25h'") && err.contains("0s to 24h"), "{err}");
        let err = target("soon").unwrap_err().to_string();
        assert!(err.contains("'soon'"), "{err}");
        assert_eq!(
            parse_with_env("consul://h:1", &Options::new(), &no_env)
                .unwrap()
                .lock_delay,
            None
        );
    }

    #[test]
    fn datacenters_from_the_url_or_the_option_but_not_two() {
        let t = parse_with_env("consul://h?dc=a", &options(&[("dc", "a")]), &no_env).unwrap();
        assert_eq!(t.dc.as_deref(), Some("a"));
        let t = parse_with_env("consul://h", &options(&[("dc", "b")]), &no_env).unwrap();
        assert_eq!(t.to_string(), "consul://h:8500/regent/?dc=b");
        let e = parse_with_env("consul://h?dc=a", &options(&[("dc", "b")]), &no_env).unwrap_err();
        assert!(
            e.message().contains("?dc=a") && e.message().contains("option 'dc'"),
            "{e}"
        );
    }

    const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n";
    const KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n";

    #[test]
    fn tls_files_need_consuls_and_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("c.pem");
        let key = dir.path().join("k.pem");
        std::fs::write(&cert, CERT_PEM).unwrap();
        std::fs::write(&key, KEY_PEM).unwrap();
        let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());

        let e = parse_with_env("consul://h", &options(&[("cacert", cert)]), &no_env).unwrap_err();
        assert!(e.message().contains("consuls://"), "{e}");
        // Consul's own TLS variables do not bother a consul:// URL.
        let consul_ca = |k: &str| (k == CONSUL_CACERT).then(|| OsString::from("/nonexistent"));
        assert!(parse_with_env("consul://h", &Options::new(), &consul_ca).is_ok());
        // ... and are read for consuls://.
        let e = parse_with_env("consuls://h", &Options::new(), &consul_ca).unwrap_err();
        assert!(e.message().contains("CONSUL_CACERT"), "{e}");

        let e = parse_with_env("consuls://h", &options(&[("cert", cert)]), &no_env).unwrap_err();
        assert!(e.message().contains("needs its private key"), "{e}");
        let e = parse_with_env("consuls://h", &options(&[("key", key)]), &no_env).unwrap_err();
        assert!(e.message().contains("needs its certificate"), "{e}");
        let swapped = options(&[("cert", key), ("key", cert)]);
        let e = parse_with_env("consuls://h", &swapped, &no_env).unwrap_err();
        assert!(
            e.message()
                .contains("holds no CERTIFICATE block, only PRIVATE KEY"),
            "{e}"
        );

        let t = parse_with_env(
            "consuls://h",
            &options(&[("cacert", cert), ("cert", cert), ("key", key)]),
            &no_env,
        )
        .unwrap();
        let tls = t.tls.clone().unwrap();
        assert_eq!(tls.ca.as_deref(), Some(CERT_PEM.as_bytes()));
        let shown = format!("{t:?}");
        assert!(
            !shown.contains(&format!("{:?}", KEY_PEM.as_bytes())),
            "{shown}"
        );
        // No CA: the system's trust store.
        let t = parse_with_env("consuls://h", &Options::new(), &no_env).unwrap();
        assert_eq!(
            t.tls,
            Some(TlsPem {
                ca: None,
                identity: None
            })
        );
    }

    #[test]
    fn names_follow_the_convention() {
        let names: Vec<String> = KIND
            .options
            .iter()
            .filter(|o| o.has_flag())
            .map(|o| o.flag_name(&KIND))
            .collect();
        assert_eq!(
            names,
            [
                "consul-token-file",
                "consul-cacert",
                "consul-cert",
                "consul-key",
                "consul-dc",
                "consul-lock-delay",
            ]
        );
        assert_eq!(
            KIND.option("dc").unwrap().env_name(&KIND),
            "REGENT_CONSUL_DC"
        );
        assert!(KIND.takes("consuls") && KIND.answers("http"));
    }

    #[tokio::test]
    async fn a_target_connects_without_io() {
        use regent_core::LeaseStore as _;
        let t = (KIND.parse)("consul://127.0.0.1:1/x?dc=d", &Options::new()).unwrap();
        assert_eq!(t.to_string(), "consul://127.0.0.1:1/x/?dc=d");
        let store = t.connect(Duration::from_secs(1)).await.unwrap();
        assert_eq!(store.info().name, "consul");
    }
}
