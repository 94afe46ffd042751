//! The etcd kind's unit tests: URLs, TLS files and credentials, and the
//! library's wording of what is wrong with them.

#![cfg_attr(not(feature = "tls"), allow(dead_code, unused_imports))]

use std::ffi::OsString;
use std::path::PathBuf;

use regent_core::target::{Mention, Piece, Source, TargetError, redacted};

use super::security::{Credentials, EtcdSecurity, Secret, TlsPem, password, security};
use super::url::{EtcdUrl, parse_url};
use super::{DEFAULT_PORT, ENV_CERT, ENV_KEY, FLAG_CERT, FLAG_KEY, KIND};

const ENV_PASSWORD: &str = "REGENT_ETCD_PASSWORD";

/// The names the hint uses are the ones the convention gives.
#[test]
fn hints_use_the_conventional_names() {
    let name = |o: &str| KIND.option(o).unwrap();
    for (option, flag) in [("cert", FLAG_CERT), ("key", FLAG_KEY)] {
        assert_eq!(format!("--{}", name(option).flag_name(&KIND)), flag);
    }
    for (option, var) in [
        ("cert", ENV_CERT),
        ("key", ENV_KEY),
        ("password", ENV_PASSWORD),
    ] {
        assert_eq!(name(option).env_name(&KIND), var);
    }
    assert!(!name("password").has_flag());
    assert_eq!(KIND.secret_env_names(), [ENV_PASSWORD]);
}

fn etcd(tls: bool, endpoints: &[&str], namespace: &str) -> EtcdUrl {
    EtcdUrl {
        tls,
        endpoints: endpoints.iter().map(|s| s.to_string()).collect(),
        namespace: namespace.into(),
    }
}

/// The URL, or the library's message.
fn parse_store_url(url: &str) -> Result<EtcdUrl, String> {
    parse_url(url).map_err(|detail| TargetError::url(&KIND, url, detail).to_string())
}

/// The flags as the CLI had them.
#[derive(Debug, Clone, Default)]
struct EtcdArgs {
    etcd_cacert: Option<PathBuf>,
    etcd_cert: Option<PathBuf>,
    etcd_key: Option<PathBuf>,
    etcd_user: Option<String>,
    etcd_password_file: Option<PathBuf>,
}

impl EtcdArgs {
    fn flag(&self, name: &str) -> Option<OsString> {
        match name {
            "etcd-cacert" => self.etcd_cacert.clone().map(Into::into),
            "etcd-cert" => self.etcd_cert.clone().map(Into::into),
            "etcd-key" => self.etcd_key.clone().map(Into::into),
            "etcd-user" => self.etcd_user.clone().map(Into::into),
            "etcd-password-file" => self.etcd_password_file.clone().map(Into::into),
            _ => None,
        }
    }
}

/// The options `args` and `env` give, checked against `url`; the error
/// as the library words it.
fn etcd_security(
    args: &EtcdArgs,
    url: &EtcdUrl,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<EtcdSecurity, String> {
    etcd_security_error(args, url, env).map_err(|e| e.to_string())
}

/// As [`etcd_security`], the error typed.
fn etcd_security_error(
    args: &EtcdArgs,
    url: &EtcdUrl,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<EtcdSecurity, TargetError> {
    security(&KIND.resolve(|f| args.flag(f), env), url)
}

/// What `read_tls` says, as the library words it.
#[cfg(feature = "tls")]
fn read_tls(security: EtcdSecurity) -> Result<TlsPem, String> {
    security.read_tls().map_err(|e| e.to_string())
}

#[test]
fn etcd_urls() {
    assert_eq!(
        parse_store_url("Etcds://h/ns"),
        Ok(etcd(true, &["h:2379"], "/ns/"))
    );
    assert!(KIND.forms.contains("[/NAMESPACE]"), "{}", KIND.forms);
    assert!(
        KIND.forms
            .contains(&format!("PORT defaults to {DEFAULT_PORT}")),
        "{}",
        KIND.forms
    );
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
        ("etcd://u:p@h:1", "option `user`"),
        ("etcd://h:1?x=1", "no query"),
        ("etcd://h:1//x", "empty segment"),
        ("etcd://h 1:2", "whitespace"),
    ] {
        let e = parse_store_url(url).expect_err(url);
        assert!(e.contains(needle), "{url}: {e}");
        assert!(e.starts_with("etcd URL '"), "{url}: {e}");
    }
}

/// Regression: `--store etcd://root:hunter2@h:2379` printed the URL,
/// password included, in its error message.
#[test]
fn messages_never_quote_a_password_typed_into_the_url() {
    for url in [
        "etcd://root:hunter2@h:2379",
        "etcds://root:hunter2@h:2379/ns",
        "ETCD://root:hunter2@h:2379",
        "etcd://root:hun/ter2@h:2379",
        "etcd://root:hun#ter2@h:2379",
        "etcd://root:hun?ter2@h:2379",
        "etcd://root:hun@ter2@h:2379",
        "etcd://a:1,root:hunter2@b:2",
        "etcd://root:hunter2@",
        "etcd:root:hunter2@h:2379",
        "http://root:hunter2@h:2379",
        "https://root:hunter2@h:2379",
    ] {
        let e = parse_store_url(url).expect_err(url);
        assert!(
            !e.contains("hunter2") && !e.contains("ter2") && !e.contains("root"),
            "{url}: {e}"
        );
    }
    assert_eq!(
        parse_store_url("etcd://root:hunter2@h:2379").unwrap_err(),
        "etcd URL 'etcd://***@h:2379': unexpected '@': put the user in option `user` and the \
         password in option `password` or option `password-file`"
    );
    let e = parse_store_url("etcd:root:hunter2@h:2379").unwrap_err();
    assert!(e.contains("'***@h:2379'"), "{e}");
    assert_eq!(redacted("etcd://h:1/ns"), "etcd://h:1/ns");
    assert_eq!(redacted("etcd://u:p@h/a@b"), "etcd://***@b");
}

#[test]
fn http_urls_as_etcdctl_takes_them_get_the_etcd_url_to_write() {
    let e = parse_store_url("http://10.0.0.1:2379").unwrap_err();
    assert!(
        e.contains("etcd URL 'http://10.0.0.1:2379'")
            && e.contains("etcd://HOST:PORT")
            && e.contains("(here etcd://10.0.0.1:2379)")
            && !e.contains("unknown scheme"),
        "{e}"
    );
    let e = parse_store_url("https://a:2379,https://b:2379").unwrap_err();
    assert!(
        e.contains("etcds://HOST:PORT")
            && e.contains("(here etcds://a:2379,b:2379)")
            && e.contains("with the CA in option `cacert`"),
        "{e}"
    );
    let e = parse_store_url("HTTP://h").unwrap_err();
    assert!(e.contains("(here etcd://h:2379)"), "{e}");
    // Nothing to spell out: the general form only.
    let e = parse_store_url("http:h").unwrap_err();
    assert!(e.contains("etcd://HOST:PORT") && !e.contains("here"), "{e}");
}

/// Regression: `etcd://http://h:2379` said "endpoint 'http:' … port ''".
#[test]
fn a_scheme_inside_the_endpoint_list_is_named() {
    for url in [
        "etcd://http://h:2379",
        "etcd://a:2379,etcd://b:2379",
        "etcds://https://h:2379/ns",
    ] {
        let e = parse_store_url(url).expect_err(url);
        assert!(
            e.contains("list endpoints as HOST:PORT after one etcd://")
                && e.contains("etcd://a:2379,b:2379")
                && !e.contains("port ''"),
            "{url}: {e}"
        );
    }
}

/// Regression: `etcd://::1` said "has no host", `etcd://fe80::1`
/// "port ':1'".
#[test]
fn ipv6_without_brackets_gets_the_bracketed_form() {
    for (url, fix) in [
        ("etcd://::1", "brackets: [::1]"),
        ("etcd://fe80::1", "brackets: [fe80::1]"),
        ("etcd://2001:db8::1:2379", "brackets: [2001:db8::1]:2379"),
        ("etcd://a:1,::1:2379", "brackets: [::1]:2379"),
        ("etcd://a:1:2", "brackets: [ADDRESS]:PORT"),
    ] {
        let e = parse_store_url(url).expect_err(url);
        assert!(
            e.contains("IPv6 addresses go in brackets") && e.contains(fix),
            "{url}: {e}"
        );
        assert!(
            !e.contains("has no host") && !e.contains("port '"),
            "{url}: {e}"
        );
    }
    let e = parse_store_url("etcd://2001:db8::1:2379").unwrap_err();
    assert!(e.contains("or [2001:db8::1:2379] if all of it"), "{e}");
}

/// Regression: `u16::from_str` takes a leading '+', so `etcd://h:+80`
/// was port 80.
#[test]
fn ports_are_digits_only() {
    for (url, port) in [
        ("etcd://h:+80", "'+80'"),
        ("etcd://[::1]:+1", "'+1'"),
        ("etcd://h:-1", "'-1'"),
        ("etcd://h:٣", "'٣'"),
    ] {
        let e = parse_store_url(url).expect_err(url);
        assert!(
            e.contains(&format!("port {port} is not a number from 1 to 65535")),
            "{url}: {e}"
        );
    }
    assert_eq!(
        parse_store_url("etcd://h:02379"),
        Ok(etcd(false, &["h:2379"], ""))
    );
}

#[test]
fn namespaces_are_checked() {
    let e = parse_store_url("etcd://h:1/svc/a b").unwrap_err();
    assert!(
        e.contains("the namespace '/svc/a b' contains a space"),
        "{e}"
    );
    let e = parse_store_url("etcd://h:1/a\tb").unwrap_err();
    assert!(
        e.contains("the namespace '/a\\tb' contains a control character") && !e.contains('\t'),
        "{e}"
    );
    let e = parse_store_url("etcd://h:1/a\u{1b}[2Jb").unwrap_err();
    assert!(
        !e.contains('\u{1b}') && e.contains("control character"),
        "{e}"
    );
    let e = parse_store_url("etcd://h:1/a%20b").unwrap_err();
    assert!(
        e.contains("the namespace '/a%20b' contains '%'") && e.contains("percent-decode"),
        "{e}"
    );
    let e = parse_store_url("etcd://h:1/a//b").unwrap_err();
    assert!(e.contains("namespace '/a//b' has an empty segment"), "{e}");
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
    move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into())
}

fn credentials(user: &str, password: &str) -> Credentials {
    Credentials {
        user: user.into(),
        password: Secret(password.into()),
    }
}

const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n";
const KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----\nS0VZ\n-----END PRIVATE KEY-----\n";

fn pem_file(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    write_file(dir, name, CERT_PEM)
}

fn write_file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[cfg(feature = "tls")]
#[test]
fn tls_files_need_etcds_and_etcds_trusts_its_ca_or_the_system_store() {
    let plain = parse_store_url("etcd://h:1").unwrap();
    let tls = parse_store_url("etcds://h:1").unwrap();
    let args = EtcdArgs {
        etcd_cacert: Some("/ca.pem".into()),
        ..EtcdArgs::default()
    };
    let e = etcd_security(&args, &plain, no_env).unwrap_err();
    assert_eq!(
        e,
        "etcd option `cacert` is set, but the store etcd://h:1 is plain-text etcd; write \
         etcds://… to speak TLS"
    );
    let e =
        etcd_security_error(&EtcdArgs::default(), &plain, env_of(&[(ENV_CERT, "/c")])).unwrap_err();
    assert!(
        matches!(&e, TargetError::Conflict { options, .. }
            if options[0].option == "cert" && options[0].source == Source::Env(ENV_CERT.into())),
        "{e:?}"
    );
    // Without a CA file, the system's CA store.
    let system = etcd_security(&EtcdArgs::default(), &tls, no_env).unwrap();
    assert!(system.cacert.is_none());
    let pem = read_tls(system).unwrap();
    assert!(pem.ca.is_none() && pem.identity.is_none());
    let ok = etcd_security(&args, &tls, no_env).unwrap();
    assert_eq!(ok.cacert.unwrap().from.source.to_string(), "--etcd-cacert");
    // The flag wins over the variable.
    let ok = etcd_security(&args, &tls, env_of(&[("REGENT_ETCD_CACERT", "/other")])).unwrap();
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
    assert_eq!(e, "etcd option `cert` needs its private key: option `key`");
    let e = etcd_security_error(
        &EtcdArgs {
            etcd_cert: None,
            ..args.clone()
        },
        &tls,
        env_of(&[(ENV_KEY, "/k.pem")]),
    )
    .unwrap_err();
    assert!(
        matches!(&e, TargetError::Missing { missing, needed_by: Some(by), detail, .. }
        if missing == &["cert"]
            && by.source == Source::Env(ENV_KEY.into())
            && detail.pieces().contains(&Piece::Option {
                name: "cert",
                mention: Mention::EitherWayWithValue,
            })),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "etcd option `key` needs its certificate: option `cert`"
    );
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
    assert_eq!(
        e,
        "etcd option `user` 'root' needs a password: set option `password`, or pass option \
         `password-file`"
    );
    let ok = etcd_security(&user, &url, env_of(&[(ENV_PASSWORD, "s3cret")])).unwrap();
    assert_eq!(ok.user, Some(credentials("root", "s3cret")));
    let e = etcd_security(&EtcdArgs::default(), &url, env_of(&[(ENV_PASSWORD, "x")])).unwrap_err();
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
    assert_eq!(ok.user, Some(credentials("u", "s3cret")));
    std::fs::write(&file, "").unwrap();
    let e = etcd_security(&args, &url, no_env).unwrap_err();
    assert!(
        e.contains("etcd option `password-file`") && e.contains("empty"),
        "{e}"
    );
    std::fs::write(&file, "a\nb\n").unwrap();
    assert!(
        etcd_security(&args, &url, no_env)
            .unwrap_err()
            .contains("one line")
    );
    std::fs::write(&file, [0xff, b'\n']).unwrap();
    let e = etcd_security_error(&args, &url, no_env).unwrap_err();
    assert!(matches!(e, TargetError::Unreadable { .. }), "{e:?}");
    let missing = EtcdArgs {
        etcd_password_file: Some(dir.path().join("missing")),
        ..args
    };
    let e = etcd_security_error(&missing, &url, no_env).unwrap_err();
    assert!(
        matches!(&e, TargetError::Unreadable { option, path, .. }
            if option.option == "password-file" && path.ends_with("missing")),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("etcd option `password-file`: cannot read "),
        "{e}"
    );
}

#[cfg(feature = "tls")]
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
    let pem = read_tls(etcd_security(&args, &tls, no_env).unwrap()).unwrap();
    assert!(pem.ca.expect("a CA").starts_with(b"-----BEGIN"));
    let bad = EtcdArgs {
        etcd_cacert: Some(junk),
        ..EtcdArgs::default()
    };
    let e = read_tls(etcd_security(&bad, &tls, no_env).unwrap()).unwrap_err();
    assert!(
        e.contains("etcd option `cacert`") && e.contains("not a PEM file"),
        "{e}"
    );
    let gone = EtcdArgs {
        etcd_cacert: Some(dir.path().join("gone.pem")),
        ..EtcdArgs::default()
    };
    let e = read_tls(etcd_security(&gone, &tls, no_env).unwrap()).unwrap_err();
    assert!(e.contains("gone.pem") && e.contains("cannot read"), "{e}");
}

/// Regression: `EtcdSecurity` derived `Debug`, password included.
#[test]
fn debug_output_hides_passwords_and_keys() {
    let url = parse_store_url("etcd://h:1").unwrap();
    let args = EtcdArgs {
        etcd_user: Some("root".into()),
        ..EtcdArgs::default()
    };
    let sec = etcd_security(&args, &url, env_of(&[(ENV_PASSWORD, "s3cret")])).unwrap();
    let shown = format!("{sec:?}");
    assert!(
        shown.contains("\"root\"")
            && shown.contains("password: \"***\"")
            && !shown.contains("s3cret"),
        "{shown}"
    );
    let pw = password(&KIND.resolve(|_| None, env_of(&[(ENV_PASSWORD, "s3cret")])))
        .unwrap()
        .expect("a password");
    let shown = format!("{pw:?}");
    assert!(
        shown.contains("***") && !shown.contains("s3cret"),
        "{shown}"
    );
    let pem = TlsPem {
        ca: Some(b"CA".to_vec()),
        identity: Some((b"CERT".to_vec(), Secret(b"KEYMATERIAL".to_vec()))),
    };
    let shown = format!("{pem:?}");
    let key_bytes = format!("{:?}", b"KEYMATERIAL".as_slice());
    assert!(
        shown.contains(&format!("ca: Some({:?})", b"CA".as_slice()))
            && shown.contains("***")
            && !shown.contains("KEYMATERIAL")
            && !shown.contains(&key_bytes),
        "{shown}"
    );
}

/// Regression: a certificate given as `--etcd-key` (or the key as
/// `--etcd-cert`) passed as PEM and failed only as a TLS error.
#[cfg(feature = "tls")]
#[test]
fn pem_files_must_hold_what_their_flag_takes() {
    let dir = tempfile::tempdir().unwrap();
    let tls = parse_store_url("etcds://h:1").unwrap();
    let ca = pem_file(&dir, "ca.pem");
    let cert = pem_file(&dir, "cert.pem");
    let key = write_file(&dir, "key.pem", KEY_PEM);
    let read = |args: &EtcdArgs, env: &'static [(&'static str, &'static str)]| {
        read_tls(etcd_security(args, &tls, env_of(env)).unwrap())
    };
    let right = EtcdArgs {
        etcd_cacert: Some(ca.clone()),
        etcd_cert: Some(cert.clone()),
        etcd_key: Some(key.clone()),
        ..EtcdArgs::default()
    };
    let pem = read(&right, &[]).unwrap();
    assert_eq!(
        pem.identity,
        Some((CERT_PEM.into(), Secret(KEY_PEM.into())))
    );

    let swapped = EtcdArgs {
        etcd_cert: Some(key.clone()),
        etcd_key: Some(cert.clone()),
        ..right.clone()
    };
    let e = read(&swapped, &[]).unwrap_err();
    assert_eq!(
        e,
        format!(
            "etcd option `cert` {}: holds no CERTIFICATE block, only PRIVATE KEY (is it the \
             key? option `key` takes that)",
            key.display()
        )
    );
    let key_is_cert = EtcdArgs {
        etcd_key: Some(cert.clone()),
        ..right.clone()
    };
    let e = read(&key_is_cert, &[]).unwrap_err();
    assert!(
        e.contains(&format!(
            "etcd option `key` {}: holds no PRIVATE KEY block",
            cert.display()
        )) && e.contains("only CERTIFICATE")
            && e.contains("(is it the certificate? option `cert` takes that)"),
        "{e}"
    );
    let ca_is_key = EtcdArgs {
        etcd_cacert: Some(key.clone()),
        ..EtcdArgs::default()
    };
    let e = read(&ca_is_key, &[]).unwrap_err();
    assert!(
        e.contains("etcd option `cacert`")
            && e.contains("holds no CERTIFICATE block, only PRIVATE KEY"),
        "{e}"
    );

    // Given by variables: the error says so, and asks front ends to name
    // the other file alike.
    let e = etcd_security_error(
        &EtcdArgs {
            etcd_cacert: Some(ca.clone()),
            ..EtcdArgs::default()
        },
        &tls,
        |k: &str| match k {
            ENV_CERT => Some(cert.clone().into()),
            ENV_KEY => Some(cert.clone().into()),
            _ => None,
        },
    )
    .unwrap()
    .read_tls()
    .unwrap_err();
    assert!(
        matches!(&e, TargetError::BadValue { option, path: Some(_), detail, .. }
        if option.option == "key"
            && option.source == Source::Env(ENV_KEY.into())
            && detail.pieces().contains(&Piece::Option {
                name: "cert",
                mention: Mention::LikeTheSubject,
            })),
        "{e:?}"
    );

    // Other key labels count; other blocks are named, without a hint.
    let rsa = write_file(
        &dir,
        "rsa.pem",
        "-----BEGIN RSA PRIVATE KEY-----\r\nAA==\r\n-----END RSA PRIVATE KEY-----\r\n",
    );
    let csr = write_file(
        &dir,
        "csr.pem",
        "-----BEGIN CERTIFICATE REQUEST-----\nAA==\n-----END CERTIFICATE REQUEST-----\n",
    );
    let rsa_key = EtcdArgs {
        etcd_key: Some(rsa),
        ..right.clone()
    };
    assert!(read(&rsa_key, &[]).is_ok());
    let csr_cert = EtcdArgs {
        etcd_cert: Some(csr),
        ..right
    };
    let e = read(&csr_cert, &[]).unwrap_err();
    assert!(
        e.contains("holds no CERTIFICATE block, only CERTIFICATE REQUEST") && !e.contains("is it"),
        "{e}"
    );
}
