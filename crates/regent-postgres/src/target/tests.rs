use std::collections::HashMap;

use super::*;

fn with_env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k| map.get(k).map(OsString::from)
}

fn target(url: &str, env: &[(&str, &str)]) -> Result<PostgresTarget, String> {
    parse_target(url, &Options::new(), &with_env(env)).map_err(|e| e.to_string())
}

#[test]
fn urls_as_libpq_reads_them() {
    let t = target("postgres://app@db.internal:6432/jobs", &[]).unwrap();
    assert_eq!(t.to_string(), "postgres://app@db.internal:6432/jobs");
    let t = target("postgresql://db/jobs?user=ops&port=5433", &[]).unwrap();
    assert_eq!(t.to_string(), "postgres://ops@db:5433/jobs");
    // The parts left out come from libpq's variables, then its defaults.
    let env = [
        ("PGHOST", "pg1"),
        ("PGPORT", "5434"),
        ("PGUSER", "svc"),
        ("PGDATABASE", "d"),
    ];
    assert_eq!(
        target("postgres://", &env).unwrap().to_string(),
        "postgres://svc@pg1:5434/d"
    );
    assert_eq!(
        target("postgres://", &[("USER", "me")])
            .unwrap()
            .to_string(),
        "postgres://me@localhost:5432/me"
    );
    // Several hosts, for a failover to whichever is the primary.
    let t = target(
        "postgres://a@h1:5432,h2:5433/db?target_session_attrs=read-write",
        &[],
    )
    .unwrap();
    assert_eq!(
        t.to_string(),
        "postgres://a@h1:5432,h2:5433/db?target_session_attrs=read-write"
    );
    assert_eq!(
        target("postgres://a%40corp@h/my%20db", &[])
            .unwrap()
            .to_string(),
        "postgres://a@corp@h:5432/my db"
    );
}

#[test]
fn a_password_never_comes_from_the_command_line() {
    for url in [
        "postgres://app:s3cret@db/jobs",
        "postgres://app@db/jobs?password=s3cret",
    ] {
        let e = target(url, &[]).unwrap_err();
        assert!(e.contains("carries a password"), "{e}");
        assert!(!e.contains("s3cret"), "the message shows the secret: {e}");
    }
    // From the environment, or a password file as libpq reads it.
    let t = target("postgres://app@db/jobs", &[("PGPASSWORD", "pw")]).unwrap();
    assert_eq!(t.main.password.as_deref(), Some("pw"));
    let dir = std::env::temp_dir().join(format!("regent-pgpass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pgpass");
    std::fs::write(
        &file,
        "# comment\nother:5432:jobs:app:no\ndb:5432:*:app:from\\:file\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let t = target("postgres://app@db/jobs", &[("PGPASSFILE", f)]).unwrap();
    assert_eq!(t.main.password.as_deref(), Some("from:file"));
    let t = target(&format!("postgres://app@db/jobs?passfile={f}"), &[]).unwrap();
    assert_eq!(t.main.password.as_deref(), Some("from:file"));
    let t = target("postgres://nobody@db/jobs", &[("PGPASSFILE", f)]).unwrap();
    assert_eq!(t.main.password, None);
    std::fs::remove_dir_all(&dir).unwrap();
    // And never in what is shown.
    let t = target("postgres://app@db/jobs", &[("PGPASSWORD", "pw")]).unwrap();
    assert!(!format!("{t} {t:?}").contains("pw"));
}

#[test]
fn bad_urls_say_what_is_wrong() {
    for (url, says) in [
        ("etcd://h", "is not a postgres:// URL"),
        ("postgres://h/db?sslcrl=x", "does not take"),
        ("postgres://h:99999/db", "not a port number"),
        (
            "postgres://h/db?sslmode=verify-ca",
            "no root certificate to check the server by",
        ),
        (
            "postgres://h/db?sslmode=require&sslrootcert=system",
            "weaker sslmode than verify-full",
        ),
        (
            "postgres://h/db?sslmode=verify-ca&sslrootcert=/no/such/ca.pem",
            "/no/such/ca.pem, which cannot be read",
        ),
        (
            "postgres://h/db?sslmode=require&sslcert=/no/such/c.pem",
            "no key: give sslkey",
        ),
        ("postgres://h/db?sslmode=sometimes", "not one of libpq's"),
        ("postgres://h/db?connect_timeout=2s", "not whole seconds"),
        (
            "postgres://h/db?target_session_attrs=standby",
            "any or read-write",
        ),
        ("postgres://h/%zz", "bad escape"),
    ] {
        let e = target(url, &[]).unwrap_err();
        assert!(e.contains(says), "{url}: {e}");
    }
    let e = target("postgres://h/db", &[("PGSSLMODE", "verify-full")]).unwrap_err();
    assert!(e.contains("sslmode=verify-full"), "{e}");
}

#[test]
fn options_schema_and_where_to_listen() {
    let mut o = Options::new();
    o.set(&KIND, "schema", "leases").unwrap();
    o.set(&KIND, "listen-url", "postgres://app@db:5432/jobs")
        .unwrap();
    let t = parse_target("postgres://app@pgbouncer:6432/jobs", &o, &with_env(&[])).unwrap();
    assert_eq!(t.schema, "leases");
    assert_eq!(
        t.listen.as_ref().map(ToString::to_string).as_deref(),
        Some("postgres://app@db:5432/jobs")
    );
    let mut o = Options::new();
    o.set(&KIND, "listen-url", "off").unwrap();
    let t = parse_target("postgres://app@pgbouncer:6432/jobs", &o, &with_env(&[])).unwrap();
    assert_eq!(t.listen, None);
    let mut o = Options::new();
    o.set(&KIND, "schema", "1bad").unwrap();
    let e = parse_target("postgres://h/db", &o, &with_env(&[])).unwrap_err();
    assert!(e.to_string().contains("plain identifier"), "{e}");
}

#[test]
fn tls_as_libpq_reads_it() {
    let dir = std::env::temp_dir().join(format!("regent-pg-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The default: TLS if the server offers it, unchecked.
    let t = target("postgres://app@db/jobs", &[]).unwrap();
    assert_eq!(t.main.tls.mode, Mode::Prefer);
    assert_eq!(t.to_string(), "postgres://app@db:5432/jobs");
    let t = target("postgres://app@db/jobs?sslmode=require", &[]).unwrap();
    assert_eq!(t.to_string(), "postgres://app@db:5432/jobs?sslmode=require");
    assert!(t.main.tls.roots.is_none());
    let t = target("postgres://app@db/jobs", &[("PGSSLMODE", "disable")]).unwrap();
    assert_eq!(
        t.main.config(Duration::from_secs(1)).get_ssl_mode(),
        tokio_postgres::config::SslMode::Disable
    );
    // The system's roots make verify-full the default, as libpq 16.
    let t = target("postgres://app@db/jobs?sslrootcert=system", &[]).unwrap();
    assert_eq!(t.main.tls.mode, Mode::VerifyFull);
    // A root certificate in ~/.postgresql turns require into verify-ca.
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".postgresql")).unwrap();
    let pki = regent_testkit::pki::TlsFiles::generate(&dir).unwrap();
    std::fs::copy(pki.ca_cert(), home.join(".postgresql/root.crt")).unwrap();
    let h = home.to_str().unwrap();
    let t = target("postgres://app@db/jobs?sslmode=require", &[("HOME", h)]).unwrap();
    assert!(matches!(t.main.tls.roots, Some(Roots::Pem(_))));
    // Files that hold the wrong thing are named at once.
    let ca = pki.ca_cert().to_str().unwrap();
    let key = pki.client_key().to_str().unwrap();
    let e = target(
        &format!("postgres://app@db/jobs?sslmode=verify-full&sslrootcert={key}"),
        &[],
    )
    .unwrap_err();
    assert!(e.contains("no CERTIFICATE block"), "{e}");
    let e = target(
        &format!(
            "postgres://app@db/jobs?sslmode=verify-full&sslrootcert={ca}&sslcert={ca}&sslkey={ca}"
        ),
        &[],
    )
    .unwrap_err();
    assert!(e.contains("no usable PRIVATE KEY"), "{e}");
    // The variables stand in for the parameters.
    let cert = pki.client_cert().to_str().unwrap();
    let t = target(
        "postgres://app@db/jobs",
        &[
            ("PGSSLMODE", "verify-ca"),
            ("PGSSLROOTCERT", ca),
            ("PGSSLCERT", cert),
            ("PGSSLKEY", key),
        ],
    )
    .unwrap();
    assert_eq!(t.main.tls.mode, Mode::VerifyCa);
    assert!(t.main.tls.identity.is_some());
    // The key never shows.
    assert!(!format!("{t:?}").contains("PRIVATE"));
    std::fs::remove_dir_all(&dir).unwrap();
}
