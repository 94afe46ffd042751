//! The ZooKeeper store as a [`StoreKind`]: its URL grammar, its digest
//! credentials (from a variable or a file, never a flag), and connecting.
//!
//! See [`KIND`] for the grammar and the options.

use std::fmt;
use std::time::Duration;

use regent_core::target::{
    ConnectFuture, Detail, Mention, OptionKind, Options, StoreKind, StoreOption, Target,
    TargetError, port_number, printable, redacted,
};
use regent_core::{BoxStore, ErrorKind, StoreError};

use crate::store::{DEFAULT_CALL_TIMEOUT, ZkStore};

/// ZooKeeper's client port, used when an endpoint names none.
pub const DEFAULT_PORT: u16 = 2181;

/// The ZooKeeper store kind: `zk://` URLs and their options.
///
/// ```text
/// zk://HOST[:PORT][,HOST[:PORT]…][/CHROOT]     PORT defaults to 2181
/// ```
///
/// * The hosts are the ensemble's servers (the client picks one, and moves
///   to another when it fails), as ZooKeeper's connect string lists them.
/// * The path is the chroot: election `jobs` is the node `CHROOT/jobs`,
///   which is the latch path a Curator `LeaderLatch` of the same election
///   uses. Without a path, `/jobs`.
///
/// | option | kind | flag / variable |
/// |---|---|---|
/// | `digest` | secret: `USER:PASSWORD` | `REGENT_ZOOKEEPER_DIGEST` only |
/// | `digest-file` | path: a file holding `USER:PASSWORD` on one line | `--zookeeper-digest-file` / `REGENT_ZOOKEEPER_DIGEST_FILE` |
///
/// With digest credentials the session authenticates with ZooKeeper's
/// `digest` scheme, and the nodes regent creates carry the ACL
/// `creator_all` (that user only); without, `world:anyone` may do
/// anything, as Curator's default. Credentials never go on the command
/// line, where `ps` shows them.
///
/// Every rule broken is a [`TargetError`] naming the URL part or the
/// option and the rule, before any connection.
pub static KIND: StoreKind = StoreKind {
    name: "zookeeper",
    schemes: &["zk"],
    advises: &["zookeeper"],
    forms: "zk://HOST[:PORT][,HOST[:PORT]…][/CHROOT]; PORT defaults to 2181",
    short_forms: "zk://…",
    default_call_timeout: DEFAULT_CALL_TIMEOUT,
    options: &[
        StoreOption {
            name: "digest",
            kind: OptionKind::Secret,
            value_name: "USER:PASSWORD",
            help: "ZooKeeper digest credentials (never a flag: `ps` would show them)",
        },
        StoreOption {
            name: "digest-file",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "File holding the ZooKeeper digest credentials, USER:PASSWORD on one line",
        },
    ],
    examples: &[
        "regent run --store zk://10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181/services \\\n      \
         --election jobs -- ./worker",
        "REGENT_ZOOKEEPER_DIGEST=app:secret regent status --store zk://127.0.0.1:2181 --election jobs",
    ],
    parse,
};

/// A `zk://` URL and its options, checked, with the digest file read.
#[derive(Clone)]
pub struct ZkTarget {
    /// `host:port,host:port`.
    servers: String,
    /// `""` or `/a/b`.
    chroot: String,
    /// `(user, password)`.
    digest: Option<(String, String)>,
}

impl fmt::Debug for ZkTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkTarget")
            .field("servers", &self.servers)
            .field("chroot", &self.chroot)
            .field("digest_user", &self.digest.as_ref().map(|(u, _)| u))
            .finish()
    }
}

impl fmt::Display for ZkTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "zk://{}{}", self.servers, self.chroot)
    }
}

impl ZkTarget {
    /// The servers, `host:port,host:port`.
    pub fn servers(&self) -> &str {
        &self.servers
    }

    /// The chroot: `""` or `/a/b`.
    pub fn chroot(&self) -> &str {
        &self.chroot
    }

    /// The store's builder for this target.
    pub fn builder(&self) -> crate::ZkStoreBuilder {
        let mut b = ZkStore::builder(self.servers.clone()).chroot(self.chroot.clone());
        if let Some((user, password)) = &self.digest {
            b = b.digest(user.clone(), password.clone());
        }
        b
    }
}

fn parse(
    url: &str,
    options: &Options,
    _env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    parse_target(url, options).map(|t| Box::new(t) as Box<dyn Target>)
}

/// Parses a `zk://` URL and its options.
///
/// # Errors
///
/// A [`TargetError`] naming the URL part or option and the rule.
pub fn parse_target(url: &str, options: &Options) -> Result<ZkTarget, TargetError> {
    let use_forms = || format!("; use {}", KIND.forms);
    let bad = |detail: Detail| TargetError::url(&KIND, url, detail);
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(bad(Detail::new(": not a ZooKeeper URL").text(use_forms())));
    };
    if scheme.eq_ignore_ascii_case("zookeeper") {
        return Err(bad(Detail::new(format!(
            ": ZooKeeper's scheme here is zk://, as in {}",
            redacted(&format!("zk://{rest}"))
        ))));
    }
    if !scheme.eq_ignore_ascii_case("zk") {
        return Err(bad(Detail::new(": not a ZooKeeper URL").text(use_forms())));
    }
    if rest.contains(['?', '#']) {
        return Err(bad(
            Detail::new(": a zk:// URL takes no query or fragment").text(use_forms())
        ));
    }
    let (hosts, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if hosts.contains('@') {
        return Err(bad(Detail::new(
            ": credentials do not go in the URL (`ps` would show them); use ",
        )
        .option("digest", Mention::Set)
        .text(" or ")
        .option("digest-file", Mention::Set)));
    }
    let mut servers = Vec::new();
    for h in hosts.split(',') {
        servers.push(
            parse_server(h)
                .map_err(|why| bad(Detail::new(format!(": {why}")).text(use_forms())))?,
        );
    }
    let chroot = path.trim_end_matches('/');
    if !chroot.is_empty()
        && (chroot.contains("//")
            || chroot.split('/').skip(1).any(|p| p == "." || p == "..")
            || chroot.chars().any(|c| c.is_control()))
    {
        return Err(bad(Detail::new(format!(
            ": the chroot {} is not a ZooKeeper path (no empty, . or .. parts)",
            printable(chroot)
        ))));
    }
    let digest = digest(options)?;
    Ok(ZkTarget {
        servers: servers.join(","),
        chroot: chroot.to_owned(),
        digest,
    })
}

/// `host[:port]` as the connect string takes it.
fn parse_server(h: &str) -> Result<String, String> {
    if h.is_empty() {
        return Err("an empty host".to_owned());
    }
    let (host, port) = if let Some(rest) = h.strip_prefix('[') {
        let end = rest
            .find(']')
            .ok_or_else(|| format!("'{}' has no closing ]", printable(h)))?;
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("'{}' is not [IPV6]:PORT", printable(h))),
        };
        (&h[..end + 2], port)
    } else {
        match h.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (h, None),
        }
    };
    if host.is_empty()
        || host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
    {
        return Err(format!("'{}' is not a host", printable(host)));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => {
            port_number(p).ok_or_else(|| format!("'{}' is not a port (1-65535)", printable(p)))?
        }
    };
    Ok(format!("{host}:{port}"))
}

/// The digest credentials: `digest` (a variable), or the first line of
/// `digest-file`; both is an error.
fn digest(options: &Options) -> Result<Option<(String, String)>, TargetError> {
    const FORMAT: &str = ": ZooKeeper digest credentials are USER:PASSWORD";
    let given = options.get("digest");
    let file = options.get("digest-file");
    if let (Some(v), Some(f)) = (given, file) {
        return Err(TargetError::conflict(
            v,
            &[f],
            Detail::new("and ")
                .given(f.given())
                .text(" both give ZooKeeper digest credentials; give one"),
        ));
    }
    let (text, malformed) = match (given, file) {
        (Some(v), None) => (v.text()?.to_owned(), TargetError::bad_value(v, FORMAT)),
        (None, Some(f)) => {
            let path = std::path::Path::new(&f.value);
            let text =
                std::fs::read_to_string(path).map_err(|e| TargetError::unreadable(f, path, e))?;
            let line = text.lines().next().unwrap_or_default().to_owned();
            (line, TargetError::bad_file(f, path, FORMAT))
        }
        _ => return Ok(None),
    };
    match text.split_once(':') {
        Some((user, password)) if !user.is_empty() => {
            Ok(Some((user.to_owned(), password.to_owned())))
        }
        _ => Err(malformed),
    }
}

impl Target for ZkTarget {
    fn kind(&self) -> &'static StoreKind {
        &KIND
    }

    fn connect(&self, call_timeout: Duration) -> ConnectFuture<'_> {
        Box::pin(async move {
            let store = self.builder().call_timeout(call_timeout).connect().await?;
            Ok(BoxStore::new(store))
        })
    }

    fn hint(&self, error: &StoreError) -> Option<String> {
        (error.kind() == ErrorKind::Auth).then(|| {
            if self.digest.is_some() {
                "the nodes' ACLs do not grant this digest user: check REGENT_ZOOKEEPER_DIGEST or \
                 --zookeeper-digest-file, or the ACL of the election's node"
                    .to_owned()
            } else {
                "the election's node has an ACL that needs credentials: give them with \
                 REGENT_ZOOKEEPER_DIGEST or --zookeeper-digest-file (USER:PASSWORD)"
                    .to_owned()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(url: &str) -> Result<ZkTarget, String> {
        parse_target(url, &Options::new()).map_err(|e| e.to_string())
    }

    #[test]
    fn urls() {
        let t = p("zk://a:1,b,[::1]:3/svc/x/").unwrap();
        assert_eq!(t.servers(), "a:1,b:2181,[::1]:3");
        assert_eq!(t.chroot(), "/svc/x");
        assert_eq!(t.to_string(), "zk://a:1,b:2181,[::1]:3/svc/x");
        assert_eq!(p("zk://h").unwrap().chroot(), "");
        assert_eq!(p("ZK://h/").unwrap().chroot(), "");
    }

    #[test]
    fn bad_urls_name_the_rule() {
        for (url, needle) in [
            ("zk://", "an empty host"),
            ("zk://a,,b", "an empty host"),
            ("zk://h:0", "not a port"),
            ("zk://h:99999", "not a port"),
            ("zk://h/a//b", "not a ZooKeeper path"),
            ("zk://h/a/../b", "not a ZooKeeper path"),
            ("zk://u:p@h", "credentials do not go in the URL"),
            ("zk://h?x=1", "no query"),
            ("zookeeper://h", "zk://h"),
            ("etcd://h", "not a ZooKeeper URL"),
            ("zk://[::1", "no closing ]"),
        ] {
            let e = p(url).unwrap_err();
            assert!(e.contains(needle), "{url}: {e}");
            assert!(e.starts_with("zookeeper URL '"), "{url}: {e}");
        }
        assert_eq!(
            p("zk://u:p@h").unwrap_err(),
            "zookeeper URL 'zk://***@h': credentials do not go in the URL (`ps` would show them); \
             use option `digest` or option `digest-file`"
        );
    }

    /// Regression: `zk://user:password@h` was quoted whole in the message,
    /// password included; so was `zookeeper://user:password@h`.
    #[test]
    fn messages_never_quote_credentials_typed_into_the_url() {
        for url in [
            "zk://app:hunter2@h",
            "zookeeper://app:hunter2@h/x",
            "zk:app:hunter2@h",
        ] {
            let e = p(url).unwrap_err();
            assert!(!e.contains("hunter2") && !e.contains("app"), "{url}: {e}");
        }
    }

    #[test]
    fn digest_from_a_variable_or_a_file_not_both() {
        let mut o = Options::new();
        o.set(&KIND, "digest", "app:s3cret:x").unwrap();
        let t = parse_target("zk://h", &o).unwrap();
        assert_eq!(t.digest, Some(("app".to_owned(), "s3cret:x".to_owned())));
        assert!(!format!("{t:?}").contains("s3cret"));

        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("digest");
        std::fs::write(&f, "ops:pw\n").unwrap();
        let mut o = Options::new();
        o.set(&KIND, "digest-file", &f).unwrap();
        let t = parse_target("zk://h", &o).unwrap();
        assert_eq!(t.digest, Some(("ops".to_owned(), "pw".to_owned())));

        o.set(&KIND, "digest", "a:b").unwrap();
        let e = parse_target("zk://h", &o).unwrap_err();
        assert!(
            matches!(&e, TargetError::Conflict { options, .. } if options.len() == 2),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "zookeeper option `digest` and option `digest-file` both give ZooKeeper digest \
             credentials; give one"
        );

        let mut o = Options::new();
        o.set(&KIND, "digest", "nocolon").unwrap();
        let e = parse_target("zk://h", &o).unwrap_err().to_string();
        assert_eq!(
            e,
            "zookeeper option `digest`: ZooKeeper digest credentials are USER:PASSWORD"
        );

        let mut o = Options::new();
        o.set(&KIND, "digest-file", dir.path().join("gone"))
            .unwrap();
        let e = parse_target("zk://h", &o).unwrap_err();
        assert!(matches!(e, TargetError::Unreadable { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("zookeeper option `digest-file`: cannot read ")
        );
    }

    #[test]
    fn the_digest_is_a_secret_without_a_flag() {
        let d = KIND.option("digest").unwrap();
        assert!(!d.has_flag());
        assert_eq!(d.env_name(&KIND), "REGENT_ZOOKEEPER_DIGEST");
        assert_eq!(
            KIND.option("digest-file").unwrap().flag_name(&KIND),
            "zookeeper-digest-file"
        );
    }
}
