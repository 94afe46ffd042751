use std::ffi::OsString;

use regent_core::target::{Options, TargetError};

use super::*;

fn no_env(_: &str) -> Option<OsString> {
    None
}

fn parse_with(url: &str, options: &Options) -> Result<RedisTarget, TargetError> {
    parse_target(url, options, &no_env)
}

fn ok(url: &str) -> RedisTarget {
    parse_with(url, &Options::new()).unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn err(url: &str) -> String {
    parse_with(url, &Options::new())
        .map(|t| panic!("{url} parsed as {t}"))
        .unwrap_err()
        .to_string()
}

fn options(pairs: &[(&str, &str)]) -> Options {
    let mut o = Options::new();
    for (k, v) in pairs {
        o.set(&KIND, k, v).expect("an option of redis");
    }
    o
}

#[test]
fn urls_as_redis_users_write_them() {
    for (url, shown) in [
        ("redis://127.0.0.1", "redis://127.0.0.1:6379/0"),
        ("redis://h:7000/3", "redis://h:7000/3"),
        ("redis://app@h/2", "redis://app@h:6379/2"),
        ("rediss://h", "rediss://h:6379/0"),
        ("redis://[::1]:7000", "redis://[::1]:7000/0"),
        ("REDIS://h/", "redis://h:6379/0"),
        (
            "redis+sentinel://s1,s2:26380,s3/mymaster",
            "redis+sentinel://s1:26379,s2:26380,s3:26379/mymaster/0",
        ),
        (
            "redis+sentinel://app@s1/mymaster/4",
            "redis+sentinel://app@s1:26379/mymaster/4",
        ),
        ("redis-sentinel://s1/m", "redis+sentinel://s1:26379/m/0"),
    ] {
        assert_eq!(ok(url).to_string(), shown, "{url}");
    }
}

#[test]
fn bad_urls_say_what_is_wrong() {
    for (url, says) in [
        ("redis://", "empty host"),
        ("redis://h:99999", "not a port number"),
        ("redis://h/x", "not a database number"),
        ("redis://h/1/2", "after the database number"),
        ("redis://a,b", "Sentinels"),
        ("redis://h/0?protocol=resp3", "query"),
        ("redis+sentinel://s1", "names no master"),
        ("http://h", "is not one of"),
    ] {
        let e = err(url);
        assert!(e.contains(says), "{url}: {e}");
    }
}

/// A password typed into the URL is refused, and never quoted.
#[test]
fn a_password_in_the_url_is_refused_unquoted() {
    for url in [
        "redis://app:hunter2@h",
        "redis://:hunter2@h/0",
        "redis+sentinel://app:hunter2@s1/m",
        "rediss://:hunter2@h",
    ] {
        let e = err(url);
        assert!(e.contains("REGENT_REDIS_PASSWORD"), "{url}: {e}");
        assert!(!e.contains("hunter2"), "{url}: {e}");
    }
}

#[test]
fn secrets_come_from_variables_and_files_never_flags() {
    assert!(!KIND.option("password").unwrap().has_flag());
    assert!(!KIND.option("sentinel-password").unwrap().has_flag());
    assert_eq!(
        KIND.secret_env_names(),
        ["REGENT_REDIS_PASSWORD", "REGENT_REDIS_SENTINEL_PASSWORD"]
    );
    let env = |name: &str| match name {
        "REGENT_REDIS_PASSWORD" => Some(OsString::from("s3cret")),
        _ => None,
    };
    let options = KIND.resolve(|_| None, env);
    let t = parse_target("redis://app@h", &options, &env).unwrap();
    assert!(t.has_password());
    assert!(!format!("{t:?}").contains("s3cret"));
    assert!(!t.to_string().contains("s3cret"));

    // redis-cli's variable, when nothing else gives one.
    let cli = |name: &str| (name == "REDISCLI_AUTH").then(|| OsString::from("x"));
    let t = parse_target("redis://h", &Options::new(), &cli).unwrap();
    assert!(t.has_password());
}

#[test]
fn password_files() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one");
    std::fs::write(&one, "s3cret\n").unwrap();
    let t = parse_with(
        "redis://h",
        &options(&[("password-file", one.to_str().unwrap())]),
    )
    .unwrap();
    assert_eq!(t.password, Some(Secret("s3cret".into())));

    let two = dir.path().join("two");
    std::fs::write(&two, "a\nb\n").unwrap();
    let e = parse_with(
        "redis://h",
        &options(&[("password-file", two.to_str().unwrap())]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("one line"), "{e}");

    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    let e = parse_with(
        "redis://h",
        &options(&[("password-file", empty.to_str().unwrap())]),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("empty"), "{e}");

    let gone = dir.path().join("gone");
    let e = parse_with(
        "redis://h",
        &options(&[("password-file", gone.to_str().unwrap())]),
    )
    .unwrap_err();
    assert!(matches!(e, TargetError::Unreadable { .. }), "{e}");
}

#[test]
fn options_that_contradict_are_refused() {
    let e = parse_with("redis://app@h", &options(&[("user", "other")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("keep one"), "{e}");
    let e = parse_with("redis://h", &options(&[("user", "app:pw")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("contains ':'") && !e.contains("pw"), "{e}");
    for url in ["redis://h", "redis+sentinel://s1/m"] {
        for option in ["cacert", "cert", "key"] {
            let e = parse_with(url, &options(&[(option, "/x.pem")]))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("option `{option}`")) && e.contains("rediss://"),
                "{url} {option}: {e}"
            );
        }
    }
    let e = parse_with("redis://h", &options(&[("sentinel-password", "x")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("redis+sentinel://"), "{e}");
    let e = parse_with("redis://h", &options(&[("wait-replicas", "some")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("number of replicas"), "{e}");
    let e = parse_with("redis://h", &options(&[("prefix", "a{b}")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("braces"), "{e}");
}

#[test]
fn options_are_read() {
    let t = parse_with(
        "redis://h",
        &options(&[
            ("user", "app"),
            ("prefix", "team-a:"),
            ("wait-replicas", "1"),
        ]),
    )
    .unwrap();
    assert_eq!(t.user.as_deref(), Some("app"));
    assert_eq!(t.prefix, "team-a:");
    assert_eq!(t.wait_replicas, 1);
    assert_eq!(t.to_string(), "redis://app@h:6379/0 (prefix team-a:)");
}

#[test]
fn flags_and_variables_follow_the_convention() {
    let flag = |n: &str| KIND.option(n).unwrap().flag_name(&KIND);
    let env = |n: &str| KIND.option(n).unwrap().env_name(&KIND);
    assert_eq!(flag("password-file"), "redis-password-file");
    assert_eq!(env("password"), "REGENT_REDIS_PASSWORD");
    // As redis-cli names them: --cacert, --cert, --key.
    for (option, flag_name, variable) in [
        ("cacert", "redis-cacert", "REGENT_REDIS_CACERT"),
        ("cert", "redis-cert", "REGENT_REDIS_CERT"),
        ("key", "redis-key", "REGENT_REDIS_KEY"),
    ] {
        assert_eq!(KIND.option(option).unwrap().kind, OptionKind::Path);
        assert_eq!(flag(option), flag_name);
        assert_eq!(env(option), variable);
    }
}

/// The test kit's PKI, in a directory of the test's own.
fn pki() -> (tempfile::TempDir, regent_testkit::pki::TlsFiles) {
    let dir = tempfile::tempdir().unwrap();
    let files = regent_testkit::pki::TlsFiles::generate(&dir.path().join("tls")).unwrap();
    (dir, files)
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn tls_files_are_read_for_rediss_and_make_a_tls_client() {
    let (_dir, files) = pki();
    let all = options(&[
        ("cacert", path(files.ca_cert())),
        ("cert", path(files.client_cert())),
        ("key", path(files.client_key())),
    ]);
    let t = parse_with("rediss://127.0.0.1:6380", &all).unwrap();
    assert_eq!(
        t.cacert.as_deref(),
        Some(std::fs::read(files.ca_cert()).unwrap().as_slice())
    );
    let identity = t.identity.as_ref().expect("a client certificate");
    assert_eq!(identity.cert, std::fs::read(files.client_cert()).unwrap());
    // The key never shows.
    assert!(!format!("{t:?}").contains("PRIVATE"), "{t:?}");
    assert!(!format!("{identity:?}").contains("PRIVATE"), "{identity:?}");
    t.builder().expect("a TLS client with a client certificate");

    // A client certificate alone: the system's trusted roots verify the
    // server.
    let t = parse_with(
        "rediss://127.0.0.1:6380",
        &options(&[
            ("cert", path(files.client_cert())),
            ("key", path(files.client_key())),
        ]),
    )
    .unwrap();
    assert!(t.cacert.is_none() && t.identity.is_some());
    t.builder().expect("a TLS client with the system's roots");
}

#[test]
fn a_client_certificate_needs_its_key_and_the_key_its_certificate() {
    let (_dir, files) = pki();
    for (given, value, missing) in [
        ("cert", files.client_cert(), "key"),
        ("key", files.client_key(), "cert"),
    ] {
        let e = parse_with("rediss://h", &options(&[(given, path(value))])).unwrap_err();
        assert!(
            matches!(&e, TargetError::Missing { missing: m, .. } if m == &[missing]),
            "{given}: {e:?}"
        );
        assert_eq!(e.options(), [given, missing], "{e}");
        assert!(
            e.to_string().contains(&format!("option `{missing}`")),
            "{e}"
        );
    }
}

#[test]
fn tls_files_that_hold_the_wrong_thing_are_refused_naming_the_option() {
    let (dir, files) = pki();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let gone = dir.path().join("gone.pem");
    let (cert, key) = (path(files.client_cert()), path(files.client_key()));

    // Swapped: each names the other option.
    let e = parse_with("rediss://h", &options(&[("cert", key), ("key", cert)]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("option `cert`") && e.contains("no CERTIFICATE block") && e.contains("`key`"),
        "{e}"
    );
    let e = parse_with("rediss://h", &options(&[("cert", cert), ("key", cert)]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("option `key`") && e.contains("no PRIVATE KEY block") && e.contains("`cert`"),
        "{e}"
    );
    // A key as the CA: refused, without the advice meant for a swap.
    let e = parse_with("rediss://h", &options(&[("cacert", key)]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("option `cacert`") && e.contains("no CERTIFICATE block") && !e.contains("is it"),
        "{e}"
    );

    for option in ["cacert", "cert", "key"] {
        let with = |file: &str| {
            let mut given = vec![("cert", cert), ("key", key)];
            given.retain(|(name, _)| *name != option);
            given.push((option, file));
            parse_with("rediss://h", &options(&given)).unwrap_err()
        };
        let e = with(path(&junk));
        assert!(
            matches!(&e, TargetError::BadValue { path: Some(_), .. })
                && e.to_string().contains("not a PEM file"),
            "{option}: {e}"
        );
        let e = with(path(&gone));
        assert!(matches!(e, TargetError::Unreadable { .. }), "{option}: {e}");
        assert_eq!(e.options(), [option], "{e}");
    }
}

/// A refused TLS handshake names its own options; the advice about a
/// missing password is for a refused user alone.
#[test]
fn a_refused_handshake_gets_no_password_hint() {
    let t = ok("rediss://h");
    let refused: redis::RedisError = std::io::Error::other(rustls::Error::AlertReceived(
        rustls::AlertDescription::CertificateRequired,
    ))
    .into();
    let e = crate::error::classify("connect".into(), refused);
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
    assert_eq!(t.hint(&e), None);
    let wrong_password = redis::make_extension_error("WRONGPASS".into(), Some("x".into()));
    let e = crate::error::classify("connect".into(), wrong_password);
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
    assert!(
        t.hint(&e)
            .is_some_and(|h| h.contains("REGENT_REDIS_PASSWORD"))
    );
}
