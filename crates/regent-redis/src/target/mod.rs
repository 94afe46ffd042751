//! The Redis store as a [`StoreKind`]: `redis://`, `rediss://` and
//! `redis+sentinel://` URLs as Redis users write them, the password from
//! the environment or a file (never the command line), and connecting.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use redis::sentinel::SentinelNodeConnectionInfo;
use redis::{Client, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo};
use regent_core::target::{
    ConnectFuture, Detail, Mention, OptionKind, OptionValue, Options, Source, StoreKind,
    StoreOption, Target, TargetError, printable,
};
use regent_core::{BoxStore, ErrorKind, StoreError};

use crate::error::TlsFailure;
use crate::store::{DEFAULT_CALL_TIMEOUT, DEFAULT_PREFIX, RedisStore, RedisStoreBuilder};

/// Redis's port, by default.
pub const DEFAULT_PORT: u16 = 6379;
/// A Sentinel's port, by default.
pub const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// The Redis store kind: `redis://`, `rediss://` and `redis+sentinel://`
/// URLs.
///
/// ```text
/// redis://[USER@]HOST[:PORT][/DB]                           one Redis
/// rediss://[USER@]HOST[:PORT][/DB]                          the same, over TLS
/// redis+sentinel://[USER@]HOST[:PORT][,HOST[:PORT]…]/MASTER[/DB]
///                                                           the master the Sentinels name
/// ```
///
/// `redis://` and `rediss://` are the forms of `redis-cli -u` and of the
/// `redis` crate (its `#insecure` and `?protocol=` suffixes are not
/// taken). The `redis` crate documents no URL for Sentinel (it takes the
/// Sentinels' `redis://` addresses and the master's name apart);
/// `redis+sentinel://` is the form several clients and tools use: the
/// Sentinels' addresses (port 26379 by default), then the name they
/// monitor the master under, then the database. Lettuce's form,
/// `redis-sentinel://HOST[:PORT][,…][/DB]#MASTER`, is taken too. `USER` is the Redis 6 ACL user on the master (`default`
/// when none); the port is 6379 by default, the database 0.
///
/// The password is never on the command line (`ps` shows it): a password
/// in the URL is refused; it comes from `REGENT_REDIS_PASSWORD`, or the
/// file `password-file` names, else `REDISCLI_AUTH` (redis-cli's
/// variable). The Sentinels' own password (`requirepass` in
/// `sentinel.conf`) is `REGENT_REDIS_SENTINEL_PASSWORD`.
///
/// `rediss://` verifies the server's certificate against the CA of
/// `cacert` (else the system's trusted roots) and the URL's host, and
/// presents the client certificate of `cert` with its private key `key`,
/// given together, when the server asks for one (`tls-auth-clients yes`,
/// Redis's default for a TLS port), as `redis-cli --tls --cacert --cert
/// --key` do. The three are PEM files, read and checked when the URL is
/// parsed, and only for `rediss://`.
///
/// | option | kind | flag / variable |
/// |---|---|---|
/// | `user` | text | `--redis-user` / `REGENT_REDIS_USER` |
/// | `password` | secret | `REGENT_REDIS_PASSWORD` only |
/// | `password-file` | path | `--redis-password-file` / `REGENT_REDIS_PASSWORD_FILE` |
/// | `sentinel-password` | secret | `REGENT_REDIS_SENTINEL_PASSWORD` only |
/// | `cacert` | path | `--redis-cacert` / `REGENT_REDIS_CACERT` |
/// | `cert` | path | `--redis-cert` / `REGENT_REDIS_CERT` |
/// | `key` | path | `--redis-key` / `REGENT_REDIS_KEY` |
/// | `prefix` | text | `--redis-prefix` / `REGENT_REDIS_PREFIX` |
/// | `wait-replicas` | text | `--redis-wait-replicas` / `REGENT_REDIS_WAIT_REPLICAS` |
pub static KIND: StoreKind = StoreKind {
    name: "redis",
    schemes: &["redis", "rediss", "redis+sentinel", "redis-sentinel"],
    advises: &[],
    forms: "redis://[USER@]HOST[:PORT][/DB], rediss://… (the same, over TLS), \
            redis+sentinel://[USER@]HOST[:PORT][,HOST[:PORT]…]/MASTER[/DB] (the master \
            Sentinels name); PORT defaults to 6379 (Sentinels: 26379)",
    short_forms: "redis://…, rediss://… or redis+sentinel://…",
    default_call_timeout: DEFAULT_CALL_TIMEOUT,
    options: &[
        StoreOption {
            name: "user",
            kind: OptionKind::Text,
            value_name: "USER",
            help: "The Redis ACL user (default: the URL's, else `default`)",
        },
        StoreOption {
            name: "password",
            kind: OptionKind::Secret,
            value_name: "PASSWORD",
            help: "The user's password (never a flag: `ps` would show it); default: the \
                   password file, else REDISCLI_AUTH",
        },
        StoreOption {
            name: "password-file",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "File holding the user's password on one line",
        },
        StoreOption {
            name: "sentinel-password",
            kind: OptionKind::Secret,
            value_name: "PASSWORD",
            help: "The Sentinels' password (their requirepass), for redis+sentinel://",
        },
        StoreOption {
            name: "cacert",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "CA certificate (PEM) that signed the server's certificate, for rediss:// \
                   (default: the system's trusted roots)",
        },
        StoreOption {
            name: "cert",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "Client certificate (PEM) for rediss:// when the server asks for one \
                   (tls-auth-clients yes, Redis's default); with --redis-key",
        },
        StoreOption {
            name: "key",
            kind: OptionKind::Path,
            value_name: "FILE",
            help: "Private key (PEM) of --redis-cert",
        },
        StoreOption {
            name: "prefix",
            kind: OptionKind::Text,
            value_name: "PREFIX",
            help: "The prefix of regent's keys and channels (default: regent:)",
        },
        StoreOption {
            name: "wait-replicas",
            kind: OptionKind::Text,
            value_name: "N",
            help: "After winning, wait until N replicas acknowledge the new term (WAIT), \
                   else give it back; narrows, does not close, the window in which a \
                   failover loses a term (default: 0, no wait)",
        },
    ],
    examples: &[
        "REGENT_REDIS_PASSWORD=… regent run --store redis://app@10.0.0.5:6379/0 --election jobs -- ./worker",
        "regent run --store redis+sentinel://10.0.0.1,10.0.0.2,10.0.0.3/mymaster \\\n      \
         --redis-password-file /run/secrets/redis --election jobs -- ./worker",
    ],
    parse,
};

/// A password or a private key: `Debug` shows `***`.
#[derive(Clone, PartialEq, Eq)]
struct Secret<T = String>(T);

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A client certificate and its private key, both PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    cert: Vec<u8>,
    key: Secret<Vec<u8>>,
}

/// Where the store finds its server.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Where {
    /// One server; TLS or not.
    Direct { host: String, port: u16, tls: bool },
    /// The master the Sentinels at these addresses name.
    Sentinels {
        sentinels: Vec<(String, u16)>,
        master: String,
    },
}

/// A Redis named by a URL and its options, checked, with its files read.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisTarget {
    place: Where,
    db: i64,
    user: Option<String>,
    password: Option<Secret>,
    sentinel_password: Option<Secret>,
    cacert: Option<Vec<u8>>,
    identity: Option<Identity>,
    prefix: String,
    wait_replicas: u32,
}

impl fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // No password in logs.
        write!(f, "RedisTarget({self})")
    }
}

impl fmt::Display for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = self
            .user
            .as_ref()
            .map(|u| format!("{u}@"))
            .unwrap_or_default();
        match &self.place {
            Where::Direct { host, port, tls } => {
                let scheme = if *tls { "rediss" } else { "redis" };
                write!(f, "{scheme}://{user}{}:{port}/{}", bracket(host), self.db)?;
            }
            Where::Sentinels { sentinels, master } => {
                let list: Vec<String> = sentinels
                    .iter()
                    .map(|(h, p)| format!("{}:{p}", bracket(h)))
                    .collect();
                write!(
                    f,
                    "redis+sentinel://{user}{}/{master}/{}",
                    list.join(","),
                    self.db
                )?;
            }
        }
        if self.prefix != DEFAULT_PREFIX {
            write!(f, " (prefix {})", self.prefix)?;
        }
        Ok(())
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

fn parse(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    parse_target(url, options, env).map(|t| Box::new(t) as Box<dyn Target>)
}

const NO_PASSWORD_IN_URL: &str = "carries a password: give it in REGENT_REDIS_PASSWORD or a \
     password file (--redis-password-file), never on the command line";

/// Decodes `%XX` escapes.
fn decode(url: &str, part: &str) -> Result<String, TargetError> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = part
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| TargetError::url(&KIND, url, "has a bad %-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| TargetError::url(&KIND, url, "is not UTF-8 once decoded"))
}

/// `HOST[:PORT]`, IPv6 hosts in brackets.
fn host_port(url: &str, text: &str, default: u16) -> Result<(String, u16), TargetError> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| TargetError::url(&KIND, url, "has an IPv6 host without its ']'"))?;
        match after {
            "" => (host, None),
            p => (
                host,
                Some(p.strip_prefix(':').ok_or_else(|| {
                    TargetError::url(&KIND, url, format!("has {:?} after a host", printable(p)))
                })?),
            ),
        }
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(TargetError::url(&KIND, url, "has an empty host"));
    }
    let port = match port {
        None => default,
        Some(p) => regent_core::target::port_number(p).ok_or_else(|| {
            TargetError::url(
                &KIND,
                url,
                format!("has port {:?}, not a port number", printable(p)),
            )
        })?,
    };
    Ok((host.to_owned(), port))
}

fn db_number(url: &str, text: &str) -> Result<i64, TargetError> {
    text.parse::<u16>().map(i64::from).map_err(|_| {
        TargetError::url(
            &KIND,
            url,
            format!("has database {:?}, not a database number", printable(text)),
        )
    })
}

pub(crate) fn parse_target(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<RedisTarget, TargetError> {
    let (scheme, rest) = url
        .split_once("://")
        .filter(|(scheme, _)| KIND.takes(scheme))
        .ok_or_else(|| TargetError::url(&KIND, url, format!("is not one of {}", KIND.forms)))?;
    let scheme = scheme.to_ascii_lowercase();
    let sentinel = scheme.ends_with("sentinel");
    // Lettuce's form names the master in the fragment: `…/DB#MASTER`.
    let (rest, fragment_master) = match rest.split_once('#') {
        Some((r, m)) if sentinel && !m.is_empty() => (r, Some(decode(url, m)?)),
        _ => (rest, None),
    };
    // Before any other check: a password may hold any character.
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (userinfo, hosts) = match rest[..authority_end].rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, &rest[..authority_end]),
    };
    if userinfo.is_some_and(|u| u.contains(':')) {
        return Err(TargetError::url(&KIND, url, NO_PASSWORD_IN_URL));
    }
    let path = &rest[authority_end..];
    if path.contains(['?', '#']) {
        return Err(TargetError::url(
            &KIND,
            url,
            "has a query or a fragment, which regent does not take (its settings are options)",
        ));
    }
    let segments: Vec<&str> = path
        .strip_prefix('/')
        .map(|p| p.split('/').collect())
        .unwrap_or_default();
    let mut segments = segments.into_iter().filter(|s| !s.is_empty());
    let url_user = userinfo
        .filter(|u| !u.is_empty())
        .map(|u| decode(url, u))
        .transpose()?;
    let place = if sentinel {
        let mut sentinels = Vec::new();
        for h in hosts.split(',') {
            sentinels.push(host_port(url, h, DEFAULT_SENTINEL_PORT)?);
        }
        let master = match fragment_master {
            Some(m) => m,
            None => decode(
                url,
                segments.next().ok_or_else(|| {
                    TargetError::url(
                        &KIND,
                        url,
                        "names no master: redis+sentinel://HOST[:PORT][,…]/MASTER[/DB]",
                    )
                })?,
            )?,
        };
        Where::Sentinels { sentinels, master }
    } else {
        if hosts.contains(',') {
            return Err(TargetError::url(
                &KIND,
                url,
                "names several hosts: for a master and its replicas, name their Sentinels \
                 (redis+sentinel://S1,S2,S3/MASTER)",
            ));
        }
        let (host, port) = host_port(url, hosts, DEFAULT_PORT)?;
        Where::Direct {
            host,
            port,
            tls: scheme == "rediss",
        }
    };
    let db = match segments.next() {
        Some(d) => db_number(url, d)?,
        None => 0,
    };
    if let Some(extra) = segments.next() {
        return Err(TargetError::url(
            &KIND,
            url,
            format!("has {:?} after the database number", printable(extra)),
        ));
    }

    let user = match (options.get("user"), url_user) {
        (Some(u), Some(_)) => {
            return Err(TargetError::bad_value(
                u,
                "names a user, and so does the URL: keep one",
            ));
        }
        (Some(u), None) => {
            let text = u.text()?;
            if text.contains(':') {
                return Err(TargetError::bad_value(
                    u,
                    Detail::new(format!(
                        "'{}:…' contains ':'; give the password through ",
                        printable(text.split(':').next().unwrap_or_default())
                    ))
                    .option("password", Mention::Set)
                    .text(" or ")
                    .option("password-file", Mention::Set)
                    .text(", not after the user name"),
                ));
            }
            Some(text.to_owned())
        }
        (None, u) => u,
    };
    let password = match password(options)? {
        Some(p) => Some(p),
        None => match env("REDISCLI_AUTH") {
            None => None,
            Some(v) if v.is_empty() => None,
            Some(v) => Some(Secret(v.into_string().map_err(|_| {
                TargetError::bad_variable(&KIND, "REDISCLI_AUTH", "is not UTF-8")
            })?)),
        },
    };
    let sentinel_password = match options.get("sentinel-password") {
        None => None,
        Some(_) if !sentinel => {
            return Err(TargetError::url(
                &KIND,
                url,
                Detail::new("names no Sentinels, but ")
                    .option("sentinel-password", Mention::Set)
                    .text(" is set: use redis+sentinel://, or unset it"),
            ));
        }
        Some(v) => Some(Secret(v.text()?.to_owned())),
    };
    let (cacert, identity) = tls_files(options, matches!(place, Where::Direct { tls: true, .. }))?;
    let prefix = match options.get("prefix") {
        None => DEFAULT_PREFIX.to_owned(),
        Some(v) => {
            let p = v.text()?;
            if p.contains(['{', '}']) || p.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(TargetError::bad_value(
                    v,
                    "may hold neither braces, spaces nor control characters",
                ));
            }
            p.to_owned()
        }
    };
    let wait_replicas =
        match options.get("wait-replicas") {
            None => 0,
            Some(v) => v.text()?.trim().parse::<u32>().map_err(|_| {
                TargetError::bad_value(v, "is not a number of replicas (0, 1, 2, …)")
            })?,
        };
    Ok(RedisTarget {
        place,
        db,
        user,
        password,
        sentinel_password,
        cacert,
        identity,
        prefix,
        wait_replicas,
    })
}

/// The PEM files of `cacert`, and of `cert` with `key`: only for a URL
/// that speaks TLS, the certificate and its key together, each file
/// holding what its option takes.
fn tls_files(
    options: &Options,
    tls: bool,
) -> Result<(Option<Vec<u8>>, Option<Identity>), TargetError> {
    let [cacert, cert, key] = ["cacert", "cert", "key"].map(|name| options.get(name));
    if !tls && let Some(v) = [cacert, cert, key].into_iter().flatten().next() {
        return Err(TargetError::bad_value(
            v,
            "is for rediss:// URLs (TLS); this one speaks none",
        ));
    }
    let identity = match (cert, key) {
        (None, None) => None,
        (Some(c), Some(k)) => Some(Identity {
            cert: read_pem(c, Pem::Certificate)?,
            key: Secret(read_pem(k, Pem::PrivateKey)?),
        }),
        (Some(c), None) => {
            return Err(TargetError::missing(
                c,
                &["key"],
                Detail::new("needs its private key: ").option("key", Mention::EitherWayWithValue),
            ));
        }
        (None, Some(k)) => {
            return Err(TargetError::missing(
                k,
                &["cert"],
                Detail::new("needs its certificate: ").option("cert", Mention::EitherWayWithValue),
            ));
        }
    };
    let cacert = cacert.map(|v| read_pem(v, Pem::Certificate)).transpose()?;
    Ok((cacert, identity))
}

/// What a PEM file must hold for the option that names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pem {
    /// `cacert`, `cert`: a `CERTIFICATE` block.
    Certificate,
    /// `key`: a private key block (`PRIVATE KEY`, `RSA PRIVATE KEY`,
    /// `EC PRIVATE KEY`).
    PrivateKey,
}

impl Pem {
    fn takes(self, label: &str) -> bool {
        match self {
            Self::Certificate => label == "CERTIFICATE",
            Self::PrivateKey => label.ends_with("PRIVATE KEY"),
        }
    }
}

/// The file `value` names, checked to hold a block of `want`: a file that
/// is no PEM, or the certificate and the key swapped, is an error naming
/// the option now, not a failed handshake later.
fn read_pem(value: &OptionValue, want: Pem) -> Result<Vec<u8>, TargetError> {
    let path = PathBuf::from(&value.value);
    let bytes = std::fs::read(&path).map_err(|e| TargetError::unreadable(value, &path, e))?;
    let text = String::from_utf8_lossy(&bytes);
    let labels: Vec<&str> = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("-----BEGIN "))
        .filter_map(|rest| rest.strip_suffix("-----"))
        .collect();
    if labels.is_empty() {
        return Err(TargetError::bad_file(
            value,
            &path,
            ": not a PEM file (no '-----BEGIN' line)",
        ));
    }
    if labels.iter().any(|l| want.takes(l)) {
        return Ok(bytes);
    }
    let found = labels
        .iter()
        .map(|l| printable(l))
        .collect::<Vec<_>>()
        .join(", ");
    let (block, other, is_it) = match want {
        Pem::Certificate => ("CERTIFICATE", "key", "the key"),
        Pem::PrivateKey => ("PRIVATE KEY", "cert", "the certificate"),
    };
    let detail = Detail::new(format!(": holds no {block} block, only {found}"));
    // `cert` holding a key, or `key` a certificate: most likely the two
    // files were swapped.
    let other_kind = match want {
        Pem::Certificate => Pem::PrivateKey,
        Pem::PrivateKey => Pem::Certificate,
    };
    let detail = if value.option != "cacert" && labels.iter().any(|l| other_kind.takes(l)) {
        detail
            .text(format!(" (is it {is_it}? "))
            .option(other, Mention::LikeTheSubject)
            .text(" takes that)")
    } else {
        detail
    };
    Err(TargetError::bad_file(value, &path, detail))
}

/// The password: `password-file` given by flag (or by a program), else
/// `password`, else `password-file` given by variable. A file's trailing
/// line break is not part of the password.
fn password(options: &Options) -> Result<Option<Secret>, TargetError> {
    let file = match (options.get("password-file"), options.get("password")) {
        (Some(f), _) if !matches!(f.source, Source::Env(_)) => Some(f),
        (_, Some(p)) => return Ok(Some(Secret(p.text()?.to_owned()))),
        (f, None) => f,
    };
    let Some(file) = file else {
        return Ok(None);
    };
    read_password_file(file).map(Some)
}

fn read_password_file(file: &OptionValue) -> Result<Secret, TargetError> {
    let path = PathBuf::from(&file.value);
    let text =
        std::fs::read_to_string(&path).map_err(|e| TargetError::unreadable(file, &path, e))?;
    let text = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if text.is_empty() {
        return Err(TargetError::bad_file(file, &path, ": the file is empty"));
    }
    if text.contains('\n') {
        return Err(TargetError::bad_file(
            file,
            &path,
            ": the password file must hold one line",
        ));
    }
    Ok(Secret(text.to_owned()))
}

impl RedisTarget {
    /// How to log in on the server (the master, under Sentinels).
    fn login(&self) -> RedisConnectionInfo {
        let mut info = RedisConnectionInfo::default().set_db(self.db);
        if let Some(u) = &self.user {
            info = info.set_username(u);
        }
        if let Some(p) = &self.password {
            info = info.set_password(&p.0);
        }
        info
    }

    /// The store's settings, with the defaults for what the target does
    /// not say.
    pub(crate) fn builder(&self) -> Result<RedisStoreBuilder, StoreError> {
        let config = |e: redis::RedisError| {
            StoreError::new(ErrorKind::Config, format!("redis store {self}")).with_source(e)
        };
        let builder = match &self.place {
            Where::Direct { host, port, tls } => {
                let addr = if *tls {
                    ConnectionAddr::TcpTls {
                        host: host.clone(),
                        port: *port,
                        insecure: false,
                        tls_params: None,
                    }
                } else {
                    ConnectionAddr::Tcp(host.clone(), *port)
                };
                let info = addr
                    .into_connection_info()
                    .map_err(config)?
                    .set_redis_settings(self.login());
                let client = if self.cacert.is_some() || self.identity.is_some() {
                    Client::build_with_tls(
                        info,
                        redis::TlsCertificates {
                            client_tls: self.identity.as_ref().map(|id| redis::ClientTlsConfig {
                                client_cert: id.cert.clone(),
                                client_key: id.key.0.clone(),
                            }),
                            root_cert: self.cacert.clone(),
                        },
                    )
                } else {
                    Client::open(info)
                }
                .map_err(config)?;
                RedisStore::builder(client)
            }
            Where::Sentinels { sentinels, master } => {
                let mut infos = Vec::with_capacity(sentinels.len());
                for (h, p) in sentinels {
                    let mut login = RedisConnectionInfo::default();
                    if let Some(s) = &self.sentinel_password {
                        login = login.set_password(&s.0);
                    }
                    infos.push(
                        ConnectionAddr::Tcp(h.clone(), *p)
                            .into_connection_info()
                            .map_err(config)?
                            .set_redis_settings(login),
                    );
                }
                let node =
                    SentinelNodeConnectionInfo::default().set_redis_connection_info(self.login());
                RedisStore::sentinel_builder(infos, master.clone(), node)
            }
        };
        Ok(builder
            .prefix(self.prefix.clone())
            .wait_replicas(self.wait_replicas, DEFAULT_CALL_TIMEOUT))
    }

    /// The file a password came from, for messages: never its content.
    #[cfg(test)]
    fn has_password(&self) -> bool {
        self.password.is_some()
    }
}

impl Target for RedisTarget {
    fn kind(&self) -> &'static StoreKind {
        &KIND
    }

    fn connect(&self, call_timeout: Duration) -> ConnectFuture<'_> {
        Box::pin(async move {
            let store = self
                .builder()?
                .call_timeout(call_timeout)
                .wait_replicas(self.wait_replicas, call_timeout)
                .build()
                .await?;
            Ok(BoxStore::new(store))
        })
    }

    /// The password, when a server refused the user and none was given;
    /// nothing for a refused TLS handshake, whose error names the options
    /// itself.
    fn hint(&self, error: &StoreError) -> Option<String> {
        if TlsFailure::of_store_error(error).is_some() {
            return None;
        }
        match error.kind() {
            ErrorKind::Auth if self.password.is_none() => Some(
                "no password was given: set REGENT_REDIS_PASSWORD, or pass \
                 --redis-password-file FILE"
                    .to_owned(),
            ),
            _ => None,
        }
    }
}

impl RedisStore {
    /// A store on the server `url` names, with the defaults: the forms of
    /// [`KIND`](crate::KIND) (`redis://`, `rediss://`,
    /// `redis+sentinel://`), the password from `REGENT_REDIS_PASSWORD` (or
    /// `REDISCLI_AUTH`), never from the URL.
    ///
    /// # Errors
    ///
    /// As [`builder_for`](Self::builder_for), then as
    /// [`RedisStoreBuilder::build`].
    ///
    /// # Cancel safety
    ///
    /// As [`RedisStoreBuilder::build`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder_for(url)?.build().await
    }

    /// Settings for a store on the server `url` names, as
    /// [`connect`](Self::connect) reads it (the `REGENT_REDIS_…`
    /// variables of [`KIND`](crate::KIND)'s options included), to change
    /// before [`build`](RedisStoreBuilder::build).
    ///
    /// # Errors
    ///
    /// `Config` for a URL or a variable the store cannot take.
    pub fn builder_for(url: &str) -> Result<RedisStoreBuilder, StoreError> {
        let env = |name: &str| std::env::var_os(name);
        let options = KIND.resolve(|_| None, env);
        let target = parse_target(url, &options, &env)
            .map_err(|e| StoreError::new(ErrorKind::Config, e.to_string()))?;
        target.builder()
    }
}

#[cfg(test)]
mod tests;
