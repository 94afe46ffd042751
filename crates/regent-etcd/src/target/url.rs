//! etcd's URLs: `etcd[s]://HOST[:PORT][,HOST[:PORT]…][/NAMESPACE]`, and
//! advice for the `http[s]://` endpoints etcdctl takes.
//!
//! What is wrong comes back as a [`Detail`] that follows the URL; the
//! caller makes it a [`TargetError::Url`](regent_core::TargetError::Url).

use std::fmt;
use std::net::Ipv6Addr;

use regent_core::target::{Detail, Mention, port_number, printable};

/// etcd's client port, used when an endpoint names none.
pub const DEFAULT_PORT: u16 = 2379;

/// `etcd[s]://HOST[:PORT][,HOST[:PORT]…][/NAMESPACE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EtcdUrl {
    /// `etcds://`: speak TLS.
    pub(super) tls: bool,
    /// `HOST:PORT` each, IPv6 hosts in brackets; the port defaults to 2379.
    pub(super) endpoints: Vec<String>,
    /// The URL's path with a trailing `/` (empty without a path): election
    /// `NAME` lives under `NAMESPACE` + `NAME/`.
    pub(super) namespace: String,
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
pub(super) fn parse_url(url: &str) -> Result<EtcdUrl, Detail> {
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(Detail::new("is not an etcd URL"));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "etcd" => parse_etcd(false, rest),
        "etcds" => parse_etcd(true, rest),
        "http" => Err(not_http(false, rest)),
        "https" => Err(not_http(true, rest)),
        _ => Err(Detail::new("is not an etcd URL")),
    }
}

/// The advice for `http[s]://…`, what etcdctl's `--endpoints` takes: the
/// etcd URL to write instead, spelled out when the endpoints parse.
fn not_http(tls: bool, rest: &str) -> Detail {
    let (scheme, ours) = if tls {
        ("https", "etcds")
    } else {
        ("http", "etcd")
    };
    // A URL with credentials does not parse ('@'): none is echoed.
    let example = rest.strip_prefix("//").and_then(|r| {
        let endpoints = r
            .split(',')
            .map(|e| strip_http(e).unwrap_or(e))
            .collect::<Vec<_>>()
            .join(",");
        parse_etcd(tls, &format!("//{endpoints}")).ok()
    });
    let example = match example {
        Some(e) => format!(" (here {e})"),
        None => String::new(),
    };
    let detail = Detail::new(format!(
        ": regent does not take {scheme}:// URLs; write etcd endpoints as \
         {ours}://HOST:PORT[,HOST:PORT]{example}"
    ));
    if tls {
        detail
            .text(", with the CA in ")
            .option("cacert", Mention::Set)
    } else {
        detail
    }
}

/// `e` without a leading `http://` or `https://`, in any case.
fn strip_http(e: &str) -> Option<&str> {
    let (scheme, rest) = e.split_once("://")?;
    ["http", "https"]
        .iter()
        .any(|s| scheme.eq_ignore_ascii_case(s))
        .then_some(rest)
}

/// What follows `etcd:` or `etcds:`.
fn parse_etcd(tls: bool, rest: &str) -> Result<EtcdUrl, Detail> {
    let Some(rest) = rest.strip_prefix("//") else {
        return Err(Detail::new(
            ": write etcd stores as etcd://HOST:PORT[,HOST:PORT]",
        ));
    };
    // Before any other check: a password may hold any of the characters
    // the others look for, and '@' says best what went wrong.
    if rest.contains('@') {
        return Err(Detail::new(": unexpected '@': put the user in ")
            .option("user", Mention::Set)
            .text(" and the password in ")
            .option("password", Mention::Set)
            .text(" or ")
            .option("password-file", Mention::Set));
    }
    // `etcd://http://h:2379` or `etcd://a:2379,etcd://b:2379`: a scheme
    // inside the host list, i.e. a `://` before the namespace starts.
    if let Some(i) = rest.find("://")
        && !rest[..i].contains('/')
    {
        return Err(Detail::new(
            ": list endpoints as HOST:PORT after one etcd:// (e.g. etcd://a:2379,b:2379)",
        ));
    }
    if let Some(c) = rest.chars().find(|c| matches!(c, '?' | '#')) {
        return Err(Detail::new(format!(
            ": unexpected '{c}': etcd URLs take no query or fragment"
        )));
    }
    let (hosts, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if hosts.is_empty() {
        return Err(Detail::new(
            "names no etcd endpoint; expected etcd://HOST:PORT[,HOST:PORT]",
        ));
    }
    let endpoints = hosts
        .split(',')
        .map(|h| parse_endpoint(h).map_err(|e| Detail::new(format!(": {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    check_namespace(path).map_err(|e| Detail::new(format!(": {e}")))?;
    let namespace = match path {
        "" | "/" => String::new(),
        p if p.ends_with('/') => p.to_owned(),
        p => format!("{p}/"),
    };
    if namespace.contains("//") {
        return Err(Detail::new(format!(
            ": the namespace '{path}' has an empty segment"
        )));
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
