//! The PostgreSQL store as a [`StoreKind`]: `postgres://` URLs as libpq
//! reads them, libpq's variables as fallbacks, the password from the
//! environment or a password file (never the command line), and
//! connecting.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use regent_core::BoxStore;
use regent_core::target::{
    ConnectFuture, OptionKind, Options, StoreKind, StoreOption, Target, TargetError,
};

use crate::store::{DEFAULT_SCHEMA, PostgresStore};
use crate::tls::Tls;

/// The query parameters of libpq's that regent takes.
const PARAMS: &[&str] = &[
    "host",
    "port",
    "dbname",
    "user",
    "sslmode",
    "connect_timeout",
    "application_name",
    "target_session_attrs",
    "passfile",
    "sslrootcert",
    "sslcert",
    "sslkey",
];

/// The PostgreSQL store kind: `postgres://` and `postgresql://` URLs.
///
/// ```text
/// postgres://[USER@][HOST[:PORT][,HOST[:PORT]…]][/DBNAME][?PARAM=VALUE&…]
/// ```
///
/// As libpq: a missing part comes from `PGHOST`, `PGPORT`, `PGUSER`,
/// `PGDATABASE` (then `localhost`, `5432`, the user `USER` names, the user's
/// name); parameters `host`, `port`, `dbname`, `user`, `sslmode`,
/// `connect_timeout`, `application_name`, `target_session_attrs` and
/// `passfile`, with the variables `PGSSLMODE`, `PGCONNECT_TIMEOUT`,
/// `PGAPPNAME`, `PGTARGETSESSIONATTRS`, `PGPASSFILE` as fallbacks. Several
/// hosts with `target_session_attrs=read-write` follow a failover to
/// whichever is the primary.
///
/// The password is never on the command line (`ps` shows it): a password
/// in the URL is refused; it comes from `REGENT_POSTGRES_PASSWORD`, else
/// `PGPASSWORD`, else the password file (`passfile`, `PGPASSFILE`, else
/// `~/.pgpass`, lines `HOST:PORT:DB:USER:PASSWORD` as libpq reads them).
///
/// TLS as libpq's `sslmode` (default `prefer`; `PGSSLMODE`): `disable`;
/// `allow` and `prefer` (TLS if the server offers it, unchecked; `allow`
/// tries TLS first, as `prefer`); `require` (TLS, unchecked unless a root
/// certificate is found, then as `verify-ca`); `verify-ca` (the server's
/// certificate chains to the root certificate); `verify-full` (and names
/// the host). The root certificate is `sslrootcert` (`PGSSLROOTCERT`,
/// else `~/.postgresql/root.crt`), or `system` for the system's trusted
/// roots (which, as in libpq, makes `verify-full` the default and refuses
/// weaker modes); a client certificate is `sslcert` and `sslkey`
/// (`PGSSLCERT`, `PGSSLKEY`, else `~/.postgresql/postgresql.crt` and
/// `.key` if they exist).
pub static KIND: StoreKind = StoreKind {
    name: "postgres",
    schemes: &["postgres", "postgresql"],
    advises: &[],
    forms: "postgres://[USER@][HOST[:PORT][,HOST[:PORT]…]][/DBNAME][?sslmode=…&…] \
            (postgresql:// too; parts from PGHOST, PGPORT, PGUSER, PGDATABASE as libpq)",
    short_forms: "postgres://… or postgresql://…",
    default_call_timeout: Duration::from_secs(2),
    options: &[
        StoreOption {
            name: "password",
            kind: OptionKind::Secret,
            value_name: "PASSWORD",
            help: "The role's password (never a flag: `ps` would show it); default: \
                   PGPASSWORD, else the password file",
        },
        StoreOption {
            name: "schema",
            kind: OptionKind::Text,
            value_name: "SCHEMA",
            help: "The schema of regent's tables (default: public)",
        },
        StoreOption {
            name: "listen-url",
            kind: OptionKind::Text,
            value_name: "URL",
            help: "Where watches LISTEN for the wake-ups of a release: a postgres:// URL \
                   straight to the database when --store goes through a pooler in \
                   transaction mode, or `off` (watches then poll); default: --store's server",
        },
    ],
    examples: &[
        "PGPASSWORD=… regent run --store postgres://app@db.internal/app --election jobs -- ./worker",
        "regent run --store 'postgres://app@pgbouncer:6432/app' \\\n      \
         --postgres-listen-url postgres://app@db.internal/app --election jobs -- ./worker",
    ],
    parse,
};

/// A database named by a `postgres://` URL and its options, checked, with
/// the password (if any) read.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresTarget {
    main: Endpoint,
    /// Where to LISTEN: `None` for off.
    listen: Option<Endpoint>,
    schema: String,
}

/// One server (or several, for a failover) and how to log in.
#[derive(Clone, PartialEq, Eq)]
struct Endpoint {
    hosts: Vec<(String, u16)>,
    user: String,
    dbname: String,
    password: Option<String>,
    connect_timeout: Option<Duration>,
    application_name: String,
    read_write: bool,
    tls: TlsSettings,
}

/// libpq's `sslmode`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            _ => return None,
        })
    }
}

/// How one endpoint speaks TLS, with the files it names read.
#[derive(Clone, PartialEq, Eq)]
struct TlsSettings {
    mode: Mode,
    /// The root certificates (PEM), or `None` for the system's trusted
    /// roots; read only where the mode checks the server.
    roots: Option<Roots>,
    /// The client certificate and key (PEM).
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

#[derive(Clone, PartialEq, Eq)]
enum Roots {
    Pem(Vec<u8>),
    System,
}

impl TlsSettings {
    const OFF: Self = Self {
        mode: Mode::Disable,
        roots: None,
        identity: None,
    };

    /// Whether a connection speaks TLS.
    fn ssl_mode(&self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode;
        match self.mode {
            Mode::Disable => SslMode::Disable,
            Mode::Allow | Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }

    /// How it checks the server.
    fn tls(&self) -> Result<Tls, regent_core::StoreError> {
        let tls = match (&self.mode, &self.roots) {
            (Mode::VerifyFull, Some(Roots::System)) => Tls::verify_full_system()?,
            (Mode::VerifyFull, Some(Roots::Pem(pem))) => Tls::verify_full(pem)?,
            (Mode::VerifyCa | Mode::Require, Some(Roots::Pem(pem))) => Tls::verify_ca(pem)?,
            _ => Tls::unverified(),
        };
        match &self.identity {
            Some((cert, key)) => tls.client_certificate(cert, key),
            None => Ok(tls),
        }
    }
}

impl fmt::Debug for PostgresTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password stays out of logs.
        write!(f, "PostgresTarget({self})")
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password stays out of logs.
        write!(f, "Endpoint({self})")
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts: Vec<String> = self.hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
        write!(
            f,
            "postgres://{}@{}/{}",
            self.user,
            hosts.join(","),
            self.dbname
        )?;
        let mut query = Vec::new();
        if self.read_write {
            query.push("target_session_attrs=read-write");
        }
        match self.tls.mode {
            Mode::Prefer => {}
            Mode::Disable => query.push("sslmode=disable"),
            Mode::Allow => query.push("sslmode=allow"),
            Mode::Require => query.push("sslmode=require"),
            Mode::VerifyCa => query.push("sslmode=verify-ca"),
            Mode::VerifyFull => query.push("sslmode=verify-full"),
        }
        if !query.is_empty() {
            write!(f, "?{}", query.join("&"))?;
        }
        Ok(())
    }
}

impl fmt::Display for PostgresTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.main)?;
        if self.schema != DEFAULT_SCHEMA {
            write!(f, " (schema {})", self.schema)?;
        }
        Ok(())
    }
}

fn parse(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    parse_target(url, options, env).map(|t| Box::new(t) as Box<dyn Target>)
}

fn var(env: &dyn Fn(&str) -> Option<OsString>, name: &str) -> Result<Option<String>, TargetError> {
    match env(name) {
        None => Ok(None),
        Some(v) => v
            .into_string()
            .map(Some)
            .map_err(|_| TargetError::bad_variable(&KIND, name, "is not UTF-8")),
    }
}

fn parse_target(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<PostgresTarget, TargetError> {
    let password = match options.get("password") {
        Some(v) => Some(v.value.to_string_lossy().into_owned()),
        None => var(env, "PGPASSWORD")?,
    };
    let main = endpoint(url, password.as_deref(), env)?;
    let listen = match options.get("listen-url") {
        None => Some(main.clone()),
        Some(v) if v.value == "off" => None,
        Some(v) => {
            let text = v.value.to_string_lossy().into_owned();
            Some(
                endpoint(&text, password.as_deref(), env)
                    .map_err(|e| TargetError::bad_value(v, format!("{e}")))?,
            )
        }
    };
    let schema = match options.get("schema") {
        None => DEFAULT_SCHEMA.to_owned(),
        Some(v) => {
            let s = v.value.to_string_lossy().into_owned();
            if !crate::store::is_identifier(&s) {
                return Err(TargetError::bad_value(
                    v,
                    "is not a plain identifier (letters, digits and _, not starting with a digit, at most 63 bytes)",
                ));
            }
            s
        }
    };
    Ok(PostgresTarget {
        main,
        listen,
        schema,
    })
}

/// Decodes `%XX` escapes, as libpq does in URLs.
fn decode(url: &str, part: &str) -> Result<String, TargetError> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = part
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    TargetError::url(&KIND, url, format!("has a bad escape in {part:?}"))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| TargetError::url(&KIND, url, "is not UTF-8 once decoded"))
}

fn endpoint(
    url: &str,
    password: Option<&str>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Endpoint, TargetError> {
    let rest = url
        .split_once("://")
        .filter(|(scheme, _)| KIND.takes(scheme))
        .map(|(_, rest)| rest)
        .ok_or_else(|| TargetError::url(&KIND, url, "is not a postgres:// URL"))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut params = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = decode(url, k)?;
        if k == "password" || k == "sslpassword" {
            return Err(TargetError::url(
                &KIND,
                url,
                "carries a password: give it in REGENT_POSTGRES_PASSWORD, PGPASSWORD or a password file, never on the command line",
            ));
        }
        if !PARAMS.contains(&k.as_str()) {
            return Err(TargetError::url(
                &KIND,
                url,
                format!(
                    "has the parameter {k:?}, which regent does not take (it takes {})",
                    PARAMS.join(", ")
                ),
            ));
        }
        params.insert(k, decode(url, v)?);
    }
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if userinfo.is_some_and(|u| u.contains(':')) {
        return Err(TargetError::url(
            &KIND,
            url,
            "carries a password: give it in REGENT_POSTGRES_PASSWORD, PGPASSWORD or a password file, never on the command line",
        ));
    }
    let user = match (params.get("user"), userinfo.filter(|u| !u.is_empty())) {
        (Some(u), _) => u.clone(),
        (None, Some(u)) => decode(url, u)?,
        (None, None) => match var(env, "PGUSER")? {
            Some(u) => u,
            None => var(env, "USER")?.unwrap_or_else(|| "postgres".to_owned()),
        },
    };
    let dbname = match (params.get("dbname"), path) {
        (Some(d), _) => d.clone(),
        (None, p) if !p.is_empty() => decode(url, p)?,
        _ => var(env, "PGDATABASE")?.unwrap_or_else(|| user.clone()),
    };
    let default_port = match params.get("port") {
        Some(p) => Some(p.clone()),
        None => var(env, "PGPORT")?,
    };
    let default_port: u16 = match default_port {
        Some(p) => p.parse().map_err(|_| {
            TargetError::url(&KIND, url, format!("has port {p:?}, not a port number"))
        })?,
        None => 5432,
    };
    let host_text = match params.get("host") {
        Some(h) => h.clone(),
        None if !hosts.is_empty() => decode(url, hosts)?,
        None => var(env, "PGHOST")?.unwrap_or_else(|| "localhost".to_owned()),
    };
    let mut list = Vec::new();
    for h in host_text.split(',') {
        let (host, port) = match h
            .rsplit_once(':')
            .filter(|(host, _)| !host.ends_with(']') || h.starts_with('['))
        {
            Some((host, port)) if !host.is_empty() => (
                host,
                port.parse::<u16>().map_err(|_| {
                    TargetError::url(&KIND, url, format!("has port {port:?}, not a port number"))
                })?,
            ),
            _ => (h, default_port),
        };
        if host.is_empty() {
            return Err(TargetError::url(&KIND, url, "has an empty host"));
        }
        list.push((
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
        ));
    }
    let tls = tls_settings(url, &params, env)?;
    let connect_timeout = match params
        .get("connect_timeout")
        .cloned()
        .map_or_else(|| var(env, "PGCONNECT_TIMEOUT"), |t| Ok(Some(t)))?
    {
        None => None,
        Some(t) => Some(Duration::from_secs(t.parse::<u64>().map_err(|_| {
            TargetError::url(
                &KIND,
                url,
                format!("has connect_timeout {t:?}, not whole seconds"),
            )
        })?)),
    };
    let application_name = match params.get("application_name") {
        Some(a) => a.clone(),
        None => var(env, "PGAPPNAME")?.unwrap_or_else(|| "regent".to_owned()),
    };
    let read_write = match params
        .get("target_session_attrs")
        .cloned()
        .map_or_else(|| var(env, "PGTARGETSESSIONATTRS"), |t| Ok(Some(t)))?
        .as_deref()
    {
        None | Some("any") => false,
        Some("read-write") => true,
        Some(other) => {
            return Err(TargetError::url(
                &KIND,
                url,
                format!("has target_session_attrs {other:?}; regent takes any or read-write"),
            ));
        }
    };
    let password = match password {
        Some(p) => Some(p.to_owned()),
        None => {
            let file = match params.get("passfile") {
                Some(f) => Some(PathBuf::from(f)),
                None => match var(env, "PGPASSFILE")? {
                    Some(f) => Some(PathBuf::from(f)),
                    None => var(env, "HOME")?.map(|h| PathBuf::from(h).join(".pgpass")),
                },
            };
            file.and_then(|f| std::fs::read_to_string(f).ok())
                .and_then(|text| pgpass(&text, &list, &dbname, &user))
        }
    };
    Ok(Endpoint {
        hosts: list,
        user,
        dbname,
        password,
        connect_timeout,
        application_name,
        read_write,
        tls,
    })
}

/// A parameter, else its variable.
fn param_or_var(
    params: &BTreeMap<String, String>,
    name: &str,
    variable: &str,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Option<String>, TargetError> {
    match params.get(name) {
        Some(v) => Ok(Some(v.clone())),
        None => var(env, variable),
    }
}

/// A file in `~/.postgresql`, if it exists (libpq's defaults).
fn default_file(env: &dyn Fn(&str) -> Option<OsString>, name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env("HOME")?).join(".postgresql").join(name);
    path.is_file().then_some(path)
}

fn read_file(url: &str, what: &str, path: &std::path::Path) -> Result<Vec<u8>, TargetError> {
    std::fs::read(path).map_err(|e| {
        TargetError::url(
            &KIND,
            url,
            format!(
                "names the {what} {}, which cannot be read: {e}",
                path.display()
            ),
        )
    })
}

/// `sslmode`, `sslrootcert`, `sslcert` and `sslkey` as libpq reads them,
/// with the files they name read.
fn tls_settings(
    url: &str,
    params: &BTreeMap<String, String>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<TlsSettings, TargetError> {
    let root = param_or_var(params, "sslrootcert", "PGSSLROOTCERT", env)?;
    let system = root.as_deref() == Some("system");
    let mode = match param_or_var(params, "sslmode", "PGSSLMODE", env)? {
        // As libpq 16: the system's roots are for checking names.
        None if system => Mode::VerifyFull,
        None => Mode::Prefer,
        Some(m) => Mode::parse(&m).ok_or_else(|| {
            TargetError::url(
                &KIND,
                url,
                format!(
                    "has sslmode {m:?}, not one of libpq's (disable, allow, prefer, require, verify-ca, verify-full)"
                ),
            )
        })?,
    };
    if mode == Mode::Disable {
        return Ok(TlsSettings::OFF);
    }
    if system && mode != Mode::VerifyFull {
        return Err(TargetError::url(
            &KIND,
            url,
            "has sslrootcert=system with a weaker sslmode than verify-full: as libpq, the \
             system's roots are only used to check the server's name (sslmode=verify-full)",
        ));
    }
    let checks = matches!(mode, Mode::Require | Mode::VerifyCa | Mode::VerifyFull);
    let roots = match root {
        _ if !checks => None,
        Some(_) if system => Some(Roots::System),
        Some(path) => Some(Roots::Pem(read_file(
            url,
            "root certificate (sslrootcert)",
            std::path::Path::new(&path),
        )?)),
        None => match default_file(env, "root.crt") {
            Some(path) => Some(Roots::Pem(read_file(url, "root certificate", &path)?)),
            None => None,
        },
    };
    if roots.is_none() && matches!(mode, Mode::VerifyCa | Mode::VerifyFull) {
        return Err(TargetError::url(
            &KIND,
            url,
            format!(
                "asks for sslmode={} with no root certificate to check the server by: give \
                 sslrootcert (PGSSLROOTCERT), put it in ~/.postgresql/root.crt, or use \
                 sslrootcert=system for the system's trusted roots",
                if mode == Mode::VerifyCa {
                    "verify-ca"
                } else {
                    "verify-full"
                }
            ),
        ));
    }
    let cert = match param_or_var(params, "sslcert", "PGSSLCERT", env)? {
        Some(p) => Some(PathBuf::from(p)),
        None => default_file(env, "postgresql.crt"),
    };
    let key = match param_or_var(params, "sslkey", "PGSSLKEY", env)? {
        Some(p) => Some(PathBuf::from(p)),
        None => default_file(env, "postgresql.key"),
    };
    let identity = match (cert, key) {
        (None, None) => None,
        (Some(cert), Some(key)) => Some((
            read_file(url, "client certificate (sslcert)", &cert)?,
            read_file(url, "client key (sslkey)", &key)?,
        )),
        (Some(_), None) => {
            return Err(TargetError::url(
                &KIND,
                url,
                "has a client certificate (sslcert) but no key: give sslkey (PGSSLKEY)",
            ));
        }
        (None, Some(_)) => {
            return Err(TargetError::url(
                &KIND,
                url,
                "has a client key (sslkey) but no certificate: give sslcert (PGSSLCERT)",
            ));
        }
    };
    let settings = TlsSettings {
        mode,
        roots,
        identity,
    };
    // Refused now, with the URL, rather than at the first connection.
    settings
        .tls()
        .map_err(|e| TargetError::url(&KIND, url, e.to_string()))?;
    Ok(settings)
}

/// The password of the first line of a password file that matches (as
/// libpq: `HOST:PORT:DB:USER:PASSWORD`, `*` matching anything, `\:` and
/// `\\` escaped, `#` comments).
fn pgpass(text: &str, hosts: &[(String, u16)], db: &str, user: &str) -> Option<String> {
    let (host, port) = hosts.first()?;
    let port = port.to_string();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut fields = Vec::new();
        let mut cur = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => cur.extend(chars.next()),
                ':' if fields.len() < 4 => fields.push(std::mem::take(&mut cur)),
                c => cur.push(c),
            }
        }
        fields.push(cur);
        if fields.len() != 5 {
            continue;
        }
        let want = [host.as_str(), port.as_str(), db, user];
        if fields[..4]
            .iter()
            .zip(want)
            .all(|(f, w)| f == "*" || f == w)
        {
            return Some(fields[4].clone());
        }
    }
    None
}

impl Endpoint {
    fn config(&self, call_timeout: Duration) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        for (h, p) in &self.hosts {
            c.host(h);
            c.port(*p);
        }
        c.user(&self.user)
            .dbname(&self.dbname)
            .application_name(&self.application_name)
            .connect_timeout(self.connect_timeout.unwrap_or(call_timeout));
        if let Some(p) = &self.password {
            c.password(p);
        }
        if self.read_write {
            c.target_session_attrs(tokio_postgres::config::TargetSessionAttrs::ReadWrite);
        }
        c.ssl_mode(self.tls.ssl_mode());
        c
    }
}

impl Target for PostgresTarget {
    fn kind(&self) -> &'static StoreKind {
        &KIND
    }

    fn connect(&self, call_timeout: Duration) -> ConnectFuture<'_> {
        Box::pin(async move {
            let mut builder = PostgresStore::builder(self.main.config(call_timeout))
                .schema(self.schema.clone())
                .tls(self.main.tls.tls()?)
                .listen_on(self.listen.as_ref().map(|l| l.config(call_timeout)));
            if let Some(listen) = &self.listen {
                builder = builder.listen_tls(listen.tls.tls()?);
            }
            let store = builder.build().await?;
            Ok(BoxStore::new(store))
        })
    }
}

#[cfg(test)]
mod tests;
