//! What `--store` and the `--etcd-*` flags (or their environment variables)
//! name, checked before anything is opened: a parsed store URL and, for
//! etcd, the TLS files and credentials to use.
//!
//! Every rule broken is a message naming the flag or variable and the rule;
//! the caller makes it a usage error (exit 2).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::cli::EtcdArgs;

/// etcd's client port, used when an endpoint names none.
pub(crate) const ETCD_DEFAULT_PORT: u16 = 2379;

/// Environment variables read when the matching flag is absent.
pub(crate) const ENV_CACERT: &str = "REGENT_ETCD_CACERT";
pub(crate) const ENV_CERT: &str = "REGENT_ETCD_CERT";
pub(crate) const ENV_KEY: &str = "REGENT_ETCD_KEY";
pub(crate) const ENV_USER: &str = "REGENT_ETCD_USER";
pub(crate) const ENV_PASSWORD_FILE: &str = "REGENT_ETCD_PASSWORD_FILE";
/// The password itself; never a flag, so that it does not show in `ps`.
/// Removed from CMD's environment.
pub(crate) const ENV_PASSWORD: &str = "REGENT_ETCD_PASSWORD";

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreUrl {
    /// `sqlite:PATH`.
    Sqlite(PathBuf),
    /// `etcd://…` or `etcds://…`.
    Etcd(EtcdUrl),
}

/// `etcd[s]://HOST[:PORT][,HOST[:PORT]…][/NAMESPACE]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EtcdUrl {
    /// `etcds://`: speak TLS.
    pub(crate) tls: bool,
    /// `HOST:PORT` each, IPv6 hosts in brackets; the port defaults to 2379.
    pub(crate) endpoints: Vec<String>,
    /// The URL's path with a trailing `/` (empty without a path): election
    /// `NAME` lives under `NAMESPACE` + `NAME/`.
    pub(crate) namespace: String,
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
            Self::Etcd(e) => write!(
                f,
                "{}://{}{}",
                if e.tls { "etcds" } else { "etcd" },
                e.endpoints.join(","),
                e.namespace
            ),
        }
    }
}

/// Schemes regent knows of but this build does not include yet.
const PLANNED: &[&str] = &["consul", "azblob", "zk", "redis", "postgres"];

const SUPPORTED: &str = "sqlite:PATH, etcd://HOST:PORT[,HOST:PORT], etcds://HOST:PORT[,HOST:PORT]";

pub(crate) fn parse_store_url(url: &str) -> Result<StoreUrl, String> {
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(format!(
            "--store '{url}' has no scheme; expected one of {SUPPORTED}"
        ));
    };
    match scheme {
        "sqlite" => {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(
                    "--store sqlite: needs a file path, e.g. sqlite:/var/lib/app/regent.db".into(),
                );
            }
            Ok(StoreUrl::Sqlite(PathBuf::from(path)))
        }
        "etcd" | "etcds" => parse_etcd(url, scheme == "etcds", rest).map(StoreUrl::Etcd),
        s if PLANNED.contains(&s) => Err(format!(
            "--store scheme '{s}' is not supported by this build yet; supported: {SUPPORTED}"
        )),
        s => Err(format!(
            "--store has unknown scheme '{s}'; supported: {SUPPORTED}"
        )),
    }
}

fn parse_etcd(url: &str, tls: bool, rest: &str) -> Result<EtcdUrl, String> {
    let Some(rest) = rest.strip_prefix("//") else {
        return Err(format!(
            "--store '{url}': write etcd stores as etcd://HOST:PORT[,HOST:PORT]"
        ));
    };
    if let Some(c) = rest.chars().find(|c| matches!(c, '?' | '#' | '@')) {
        let why = if c == '@' {
            "put the user in --etcd-user and the password in REGENT_ETCD_PASSWORD or --etcd-password-file"
        } else {
            "etcd URLs take no query or fragment"
        };
        return Err(format!("--store '{url}': unexpected '{c}': {why}"));
    }
    let (hosts, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if hosts.is_empty() {
        return Err(format!(
            "--store '{url}' names no etcd endpoint; expected etcd://HOST:PORT[,HOST:PORT]"
        ));
    }
    let endpoints = hosts
        .split(',')
        .map(|h| parse_endpoint(h).map_err(|e| format!("--store '{url}': {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let namespace = match path {
        "" | "/" => String::new(),
        p if p.ends_with('/') => p.to_owned(),
        p => format!("{p}/"),
    };
    if namespace.contains("//") {
        return Err(format!(
            "--store '{url}': the namespace '{path}' has an empty segment"
        ));
    }
    Ok(EtcdUrl {
        tls,
        endpoints,
        namespace,
    })
}

/// `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT` → `HOST:PORT`.
fn parse_endpoint(h: &str) -> Result<String, String> {
    if h.is_empty() {
        return Err("empty endpoint (two commas, or a trailing comma)".into());
    }
    if h.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("endpoint '{h}' contains whitespace"));
    }
    let (host, port) = if let Some(v6) = h.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return Err(format!("endpoint '{h}' opens '[' without closing it"));
        };
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
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
        match h.split_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (h.to_owned(), None),
        }
    };
    if host.is_empty() {
        return Err(format!("endpoint '{h}' has no host"));
    }
    let port = match port {
        None => ETCD_DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => {
                return Err(format!(
                    "endpoint '{h}': port '{p}' is not a number from 1 to 65535"
                ));
            }
        },
    };
    Ok(format!("{host}:{port}"))
}

/// A value and where it came from: a flag or an environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sourced<T> {
    pub(crate) value: T,
    pub(crate) from: &'static str,
}

/// TLS files and credentials for an etcd store, checked against its URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EtcdSecurity {
    pub(crate) cacert: Option<Sourced<PathBuf>>,
    /// Client certificate and its key.
    pub(crate) identity: Option<(Sourced<PathBuf>, Sourced<PathBuf>)>,
    /// User and password.
    pub(crate) user: Option<(String, String)>,
}

/// PEM contents read from the files an [`EtcdSecurity`] names.
#[derive(Debug, Clone)]
pub(crate) struct EtcdTlsPem {
    pub(crate) ca: Vec<u8>,
    pub(crate) identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl EtcdSecurity {
    /// Reads the TLS files (`None` without TLS).
    pub(crate) fn read_tls(&self) -> Result<Option<EtcdTlsPem>, String> {
        let Some(ca) = &self.cacert else {
            return Ok(None);
        };
        let identity = match &self.identity {
            Some((cert, key)) => Some((read_pem(cert)?, read_pem(key)?)),
            None => None,
        };
        Ok(Some(EtcdTlsPem {
            ca: read_pem(ca)?,
            identity,
        }))
    }
}

fn read_pem(file: &Sourced<PathBuf>) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(&file.value)
        .map_err(|e| format!("{} {}: {e}", file.from, file.value.display()))?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(format!(
            "{} {}: not a PEM file (no '-----BEGIN' line)",
            file.from,
            file.value.display()
        ));
    }
    Ok(bytes)
}

/// Resolves the `--etcd-*` flags, falling back to their environment
/// variables (read through `env`), against the store URL.
///
/// A flag given for a store that is not etcd is an error; variables are
/// then ignored, since one environment may serve several stores.
pub(crate) fn etcd_security(
    args: &EtcdArgs,
    url: &StoreUrl,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<EtcdSecurity, String> {
    let StoreUrl::Etcd(etcd) = url else {
        if let Some(flag) = args.given().first() {
            return Err(format!(
                "{flag} applies only to etcd stores (--store etcd://… or etcds://…), not to {url}"
            ));
        }
        return Ok(EtcdSecurity::default());
    };
    let var = |name: &'static str| env(name).filter(|v| !v.is_empty());
    let path = |flag: &Option<PathBuf>, name: &'static str, var_name: &'static str| match flag {
        Some(p) => Some(Sourced {
            value: p.clone(),
            from: name,
        }),
        None => var(var_name).map(|v| Sourced {
            value: PathBuf::from(v),
            from: var_name,
        }),
    };
    let cacert = path(&args.etcd_cacert, "--etcd-cacert", ENV_CACERT);
    let cert = path(&args.etcd_cert, "--etcd-cert", ENV_CERT);
    let key = path(&args.etcd_key, "--etcd-key", ENV_KEY);

    if !etcd.tls {
        if let Some(s) = [&cacert, &cert, &key].into_iter().flatten().next() {
            return Err(format!(
                "{} is set, but the store {url} is plain-text etcd; write etcds://… to speak TLS",
                s.from
            ));
        }
    } else if cacert.is_none() {
        return Err(format!(
            "the store {url} speaks TLS and needs the CA that signed etcd's server certificates: \
             --etcd-cacert FILE (or {ENV_CACERT})"
        ));
    }
    let identity = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        (Some(c), None) => {
            return Err(format!(
                "{} needs its private key: --etcd-key FILE (or {ENV_KEY})",
                c.from
            ));
        }
        (None, Some(k)) => {
            return Err(format!(
                "{} needs its certificate: --etcd-cert FILE (or {ENV_CERT})",
                k.from
            ));
        }
    };

    let user = match &args.etcd_user {
        Some(u) => Some(Sourced {
            value: u.clone(),
            from: "--etcd-user",
        }),
        None => var(ENV_USER).map(|v| Sourced {
            value: v.to_string_lossy().into_owned(),
            from: ENV_USER,
        }),
    };
    if let Some(u) = user.as_ref().filter(|u| u.value.contains(':')) {
        // Never echo what follows the ':': it is likely a password.
        return Err(format!(
            "{} '{}:…' contains ':'; give the password through {ENV_PASSWORD} or \
             --etcd-password-file, not after the user name",
            u.from,
            u.value.split(':').next().unwrap_or_default()
        ));
    }
    let password = password(args, &var)?;
    let user = match (user, password) {
        (None, None) => None,
        (Some(u), Some(p)) => Some((u.value, p.value)),
        (Some(u), None) => {
            return Err(format!(
                "{} '{}' needs a password: set {ENV_PASSWORD}, or pass --etcd-password-file FILE \
                 (or {ENV_PASSWORD_FILE})",
                u.from, u.value
            ));
        }
        (None, Some(p)) => {
            return Err(format!(
                "{} is set but no user is: pass --etcd-user USER (or {ENV_USER})",
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
fn password(
    args: &EtcdArgs,
    var: &impl Fn(&'static str) -> Option<OsString>,
) -> Result<Option<Sourced<String>>, String> {
    let file = match (&args.etcd_password_file, var(ENV_PASSWORD)) {
        (Some(f), _) => Some(("--etcd-password-file", f.clone())),
        (None, Some(p)) => {
            let value = p
                .into_string()
                .map_err(|_| format!("{ENV_PASSWORD} is not valid UTF-8"))?;
            return Ok(Some(Sourced {
                value,
                from: ENV_PASSWORD,
            }));
        }
        (None, None) => var(ENV_PASSWORD_FILE).map(|f| (ENV_PASSWORD_FILE, PathBuf::from(f))),
    };
    let Some((from, path)) = file else {
        return Ok(None);
    };
    let text = read_password_file(&path).map_err(|e| format!("{from} {}: {e}", path.display()))?;
    Ok(Some(Sourced { value: text, from }))
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
mod tests {
    use super::*;

    fn etcd(tls: bool, endpoints: &[&str], namespace: &str) -> StoreUrl {
        StoreUrl::Etcd(EtcdUrl {
            tls,
            endpoints: endpoints.iter().map(|s| s.to_string()).collect(),
            namespace: namespace.into(),
        })
    }

    #[test]
    fn sqlite_urls() {
        assert_eq!(
            parse_store_url("sqlite:/tmp/x.db"),
            Ok(StoreUrl::Sqlite("/tmp/x.db".into()))
        );
        assert_eq!(
            parse_store_url("sqlite:rel.db"),
            Ok(StoreUrl::Sqlite("rel.db".into()))
        );
        assert_eq!(
            parse_store_url("sqlite:///abs.db"),
            Ok(StoreUrl::Sqlite("/abs.db".into()))
        );
        assert!(parse_store_url("sqlite:").is_err());
    }

    #[test]
    fn other_schemes() {
        let e = parse_store_url("mongo://x").unwrap_err();
        assert!(
            e.contains("unknown scheme 'mongo'") && e.contains("etcd://"),
            "{e}"
        );
        let e = parse_store_url("consul://h:1").unwrap_err();
        assert!(e.contains("not supported by this build"), "{e}");
        assert!(
            parse_store_url("nothing")
                .unwrap_err()
                .contains("no scheme")
        );
    }

    #[test]
    fn etcd_urls() {
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

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into())
    }

    fn pem_file(dir: &tempfile::TempDir, name: &str) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(
            &p,
            "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        p
    }

    #[test]
    fn etcd_flags_on_another_store_are_refused_but_variables_ignored() {
        let url = parse_store_url("sqlite:/x.db").unwrap();
        let args = EtcdArgs {
            etcd_user: Some("u".into()),
            ..EtcdArgs::default()
        };
        let e = etcd_security(&args, &url, no_env).unwrap_err();
        assert!(e.contains("--etcd-user applies only to etcd stores"), "{e}");
        let env = env_of(&[(ENV_USER, "u"), (ENV_CACERT, "/nope")]);
        assert_eq!(
            etcd_security(&EtcdArgs::default(), &url, env),
            Ok(EtcdSecurity::default())
        );
    }

    #[test]
    fn tls_files_need_etcds_and_etcds_needs_a_ca() {
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
        let e = etcd_security(&EtcdArgs::default(), &tls, no_env).unwrap_err();
        assert!(e.contains("--etcd-cacert FILE"), "{e}");
        let ok = etcd_security(&args, &tls, no_env).unwrap();
        assert_eq!(ok.cacert.unwrap().from, "--etcd-cacert");
        // The flag wins over the variable.
        let ok = etcd_security(&args, &tls, env_of(&[(ENV_CACERT, "/other")])).unwrap();
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
        assert_eq!(ok.user, Some(("root".into(), "s3cret".into())));
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
        assert_eq!(ok.user, Some(("u".into(), "s3cret".into())));
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
            .unwrap()
            .expect("tls");
        assert!(pem.ca.starts_with(b"-----BEGIN"));
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
}
