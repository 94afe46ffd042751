//! Consul's URLs: `consul[s]://[HOST[:PORT]][/PREFIX][?dc=DC]`, with
//! `CONSUL_HTTP_ADDR` for a URL without a host, and advice for the
//! `http[s]://` addresses Consul's tools take.

use std::ffi::OsString;
use std::net::Ipv6Addr;

use regent_core::target::{
    Detail, Mention, StoreKind, TargetError, port_number, printable, redacted,
};

use crate::store::{DEFAULT_PREFIX, normalize_prefix};

/// The agent's HTTP port, used when a `consul://` URL names none.
pub const DEFAULT_PORT: u16 = 8500;

/// The agent's HTTPS port, used when a `consuls://` URL names none.
pub const DEFAULT_TLS_PORT: u16 = 8501;

/// Consul's variable for the agent's address, honoured when the URL names
/// no host.
pub(super) const CONSUL_HTTP_ADDR: &str = "CONSUL_HTTP_ADDR";

/// `consul[s]://[HOST[:PORT]][/PREFIX][?dc=DC]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ConsulUrl {
    pub(super) tls: bool,
    /// `HOST:PORT`, an IPv6 host in brackets.
    pub(super) address: String,
    /// The key prefix, with its trailing `/`.
    pub(super) prefix: String,
    pub(super) dc: Option<String>,
}

/// Parses `url`, a URL of `kind` (the errors' store), with Consul's
/// variables read through `env`.
pub(super) fn parse_url(
    kind: &'static StoreKind,
    url: &str,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<ConsulUrl, TargetError> {
    let bad = |detail: Detail| TargetError::url(kind, url, detail);
    let not_ours = || bad(Detail::new("is not a Consul URL"));
    let (scheme, rest) = url.split_once(':').ok_or_else(not_ours)?;
    let tls = match scheme.to_ascii_lowercase().as_str() {
        "consul" => false,
        "consuls" => true,
        s @ ("http" | "https") => {
            let ours = if s == "https" { "consuls" } else { "consul" };
            let hosts = redacted(rest.trim_start_matches('/'));
            return Err(bad(Detail::new(format!(
                ": regent does not take {s}:// URLs; write the agent as {ours}://{hosts}"
            ))));
        }
        _ => return Err(not_ours()),
    };
    let rest = rest
        .strip_prefix("//")
        .ok_or_else(|| bad(Detail::new(": write Consul stores as consul://HOST:PORT")))?;
    if rest.contains('@') {
        return Err(bad(Detail::new(": unexpected '@': put the ACL token in ")
            .option("token", Mention::Set)
            .text(" or CONSUL_HTTP_TOKEN, never in the URL")));
    }
    if rest.contains('#') {
        return Err(bad(Detail::new(
            ": unexpected '#': Consul URLs take no fragment",
        )));
    }
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let dc = query
        .map(|q| parse_query(q).map_err(|e| bad(Detail::new(format!(": {e}")))))
        .transpose()?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.contains(',') {
        return Err(bad(Detail::new(
            ": name one agent: regent talks to one Consul agent (the local one, usually), which \
             forwards to the servers",
        )));
    }
    let default_port = if tls { DEFAULT_TLS_PORT } else { DEFAULT_PORT };
    let address = if authority.is_empty() {
        match env(CONSUL_HTTP_ADDR).filter(|v| !v.is_empty()) {
            Some(addr) => from_consul_http_addr(&addr, tls, default_port)
                .map_err(|detail| TargetError::bad_variable(kind, CONSUL_HTTP_ADDR, detail))?,
            None => format!("127.0.0.1:{default_port}"),
        }
    } else {
        parse_host_port(authority, default_port).map_err(|e| bad(Detail::new(format!(": {e}"))))?
    };
    let prefix = match path.strip_prefix('/') {
        None | Some("") => DEFAULT_PREFIX.to_owned(),
        Some(p) => normalize_prefix(p).map_err(|e| bad(Detail::new(format!(": {e}"))))?,
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
                // The name alone: the value may be a secret (`?token=`).
                let name = pair.split_once('=').map_or(pair, |(name, _)| name);
                return Err(format!(
                    "unexpected '{}' in the query: Consul URLs take only ?dc=DATACENTER",
                    printable(name)
                ));
            }
        }
    }
    dc.ok_or_else(|| "an empty query: write ?dc=DATACENTER or nothing".into())
}

/// `CONSUL_HTTP_ADDR`: `HOST:PORT`, `http://HOST:PORT` or
/// `https://HOST:PORT` (Consul's tools also take a `unix://` socket,
/// which regent does not). The error follows the variable's name.
fn from_consul_http_addr(value: &OsString, tls: bool, default_port: u16) -> Result<String, Detail> {
    let addr = value
        .to_str()
        .ok_or_else(|| Detail::new("is not valid UTF-8"))?;
    let shown = redacted(addr);
    let host_port = match addr.split_once("://") {
        None => addr,
        Some((s, rest)) if s.eq_ignore_ascii_case("http") && !tls => rest,
        Some((s, rest)) if s.eq_ignore_ascii_case("https") && tls => rest,
        Some((s, _)) if s.eq_ignore_ascii_case("https") => {
            return Err(Detail::new(format!(
                "is '{shown}' (https) but the URL is consul://; write consuls://"
            )));
        }
        Some((s, _)) if s.eq_ignore_ascii_case("http") => {
            return Err(Detail::new(format!(
                "is '{shown}' (http) but the URL is consuls://; write consul://"
            )));
        }
        Some(_) => {
            return Err(Detail::new(format!(
                "is '{shown}'; regent takes HOST:PORT or http(s)://HOST:PORT there (no unix:// \
                 socket); name the agent in the URL instead"
            )));
        }
    };
    parse_host_port(host_port.trim_end_matches('/'), default_port)
        .map_err(|e| Detail::new(format!("is '{shown}': {e}")))
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
