//! The Consul kind's unit tests: URLs, Consul's variables, tokens, TLS
//! files, and the library's wording of what is wrong with them.

use std::ffi::OsString;
use std::time::Duration;

use regent_core::target::{Mention, Options, Piece, Source, TargetError};

use super::options::{
    CONSUL_CACERT, CONSUL_HTTP_TOKEN, CONSUL_HTTP_TOKEN_FILE, Secret, TlsPem, parse_go_duration,
};
use super::url::{CONSUL_HTTP_ADDR, ConsulUrl};
use super::{KIND, parse_with_env};

fn no_env(_: &str) -> Option<OsString> {
    None
}

/// The URL, or the library's message.
fn url(s: &str) -> Result<ConsulUrl, String> {
    parse_url(s, &no_env)
}

fn parse_url(s: &str, env: &dyn Fn(&str) -> Option<OsString>) -> Result<ConsulUrl, String> {
    super::url::parse_url(&KIND, s, env).map_err(|e| e.to_string())
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
        ("consul://tok@h:1", "option `token` or CONSUL_HTTP_TOKEN"),
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
    assert!(!url("http://s3cret@h").unwrap_err().contains("s3cret"));
    assert_eq!(
        url("consul://s3cret@h").unwrap_err(),
        "consul URL 'consul://***@h': unexpected '@': put the ACL token in option `token` or \
         CONSUL_HTTP_TOKEN, never in the URL"
    );
}

#[test]
fn consul_http_addr_fills_an_empty_host() {
    let env = |v: &'static str| move |k: &str| (k == CONSUL_HTTP_ADDR).then(|| OsString::from(v));
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
    assert_eq!(
        e,
        "consul: CONSUL_HTTP_ADDR is 'https://h:8501' (https) but the URL is consul://; write \
         consuls://"
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
    assert_eq!(
        e.to_string(),
        "consul option `token` and option `token-file` both give the Consul token; keep one"
    );
    std::fs::write(&file, "a\nb\n").unwrap();
    let e = parse_with_env("consul://h", &options(&[("token-file", path)]), &no_env).unwrap_err();
    assert!(e.to_string().contains("one line"), "{e}");
    let env = |k: &str| (k == CONSUL_HTTP_TOKEN_FILE).then(|| OsString::from("/nonexistent/t"));
    let e = parse_with_env("consul://h", &Options::new(), &env).unwrap_err();
    assert!(
        matches!(&e, TargetError::Unreadable { option, .. }
            if option.option == "token-file"
                && option.source == Source::Env(CONSUL_HTTP_TOKEN_FILE.into())),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with(
            "consul option `token-file` (CONSUL_HTTP_TOKEN_FILE): cannot read /nonexistent/t: "
        ),
        "{e}"
    );
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
    let target = |v: &str| parse_with_env("consul://h:1", &options(&[("lock-delay", v)]), &no_env);
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
    assert_eq!(
        e.to_string(),
        "consul option `dc` says datacenter 'b' but the URL says ?dc=a; keep one"
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
    assert!(e.to_string().contains("consuls://"), "{e}");
    // Consul's own TLS variables do not bother a consul:// URL.
    let consul_ca = |k: &str| (k == CONSUL_CACERT).then(|| OsString::from("/nonexistent"));
    assert!(parse_with_env("consul://h", &Options::new(), &consul_ca).is_ok());
    // ... and are read for consuls://.
    let e = parse_with_env("consuls://h", &Options::new(), &consul_ca).unwrap_err();
    assert!(e.to_string().contains("(CONSUL_CACERT)"), "{e}");

    let e = parse_with_env("consuls://h", &options(&[("cert", cert)]), &no_env).unwrap_err();
    assert_eq!(
        e.to_string(),
        "consul option `cert` needs its private key: option `key`"
    );
    let e = parse_with_env("consuls://h", &options(&[("key", key)]), &no_env).unwrap_err();
    assert!(
        matches!(&e, TargetError::Missing { missing, detail, .. }
        if missing == &["cert"]
            && detail.pieces().contains(&Piece::Option {
                name: "cert",
                mention: Mention::EitherWay,
            })),
        "{e:?}"
    );
    let swapped = options(&[("cert", key), ("key", cert)]);
    let e = parse_with_env("consuls://h", &swapped, &no_env).unwrap_err();
    assert!(
        e.to_string()
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
    let t = (KIND.parse)("consul://127.0.0.1:1/x?dc=d", &Options::new(), &|_| None).unwrap();
    assert_eq!(t.to_string(), "consul://127.0.0.1:1/x/?dc=d");
    let store = t.connect(Duration::from_secs(1)).await.unwrap();
    assert_eq!(store.info().name, "consul");
}
