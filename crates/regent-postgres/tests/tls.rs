//! TLS to a real PostgreSQL, as libpq's `sslmode` says: a server that lets
//! two roles in only over TLS (one of them only with a client certificate
//! of its CA), reached by URL as the CLI reaches it, and by the builder.

use std::time::Duration;

use regent_core::target::Options;
use regent_core::{
    Acquire, AcquireRequest, BoxStore, ElectionName, ErrorKind, HolderId, LeaseStore, Metadata,
    StoreError,
};
use regent_postgres::{Config, PostgresStore, Tls};
use regent_testkit::engines::Postgres;
use regent_testkit::pki::TlsFiles;

/// Roles the server lets in over TLS only; `cert_only` with a client
/// certificate of the CA only.
const HBA: &[&str] = &[
    "hostnossl all tls_only 127.0.0.1/32 reject",
    "hostnossl all cert_only 127.0.0.1/32 reject",
    "hostssl all cert_only 127.0.0.1/32 trust clientcert=verify-ca",
];

fn request(election: &str) -> AcquireRequest {
    AcquireRequest {
        election: ElectionName::new(election).unwrap(),
        holder: HolderId::new("tls-test").unwrap(),
        ttl: Duration::from_secs(10),
        metadata: Metadata::default(),
    }
}

/// The store `url` names, opened as `regent --store URL` opens it (no
/// variables of the test's own environment).
async fn open(url: &str) -> Result<BoxStore, StoreError> {
    let target = (regent_postgres::KIND.parse)(url, &Options::new(), &|_| None)
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    target.connect(Duration::from_secs(5)).await
}

/// Opens the store and wins an election of its own on it.
async fn wins(url: &str, election: &str) {
    let store = open(url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {}", regent_core::report(&e)));
    let won = store.try_acquire(&request(election), None).await;
    assert!(matches!(won, Ok(Acquire::Won(_))), "{url}: {won:?}");
}

async fn refused(url: &str, kind: ErrorKind, says: &str) {
    let e = open(url)
        .await
        .err()
        .unwrap_or_else(|| panic!("{url} connected"));
    let text = regent_core::report(&e).to_string();
    assert_eq!(e.kind(), kind, "{url}: {text}");
    assert!(text.contains(says), "{url}: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_as_libpq_sslmode_says() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TlsFiles::generate(dir.path()).unwrap();
    let mut pg = Postgres::start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"));
    pg.enable_tls(&pki, HBA)
        .unwrap_or_else(|e| panic!("cannot turn TLS on: {e}"));
    pg.psql("create role tls_only login superuser; create role cert_only login superuser")
        .unwrap();
    let at = |user: &str, query: &str| {
        format!("postgres://{user}@127.0.0.1:{}/regent?{query}", pg.port())
    };
    let ca = pki.ca_cert().display().to_string();
    let other_ca = pki.other_ca_cert().display().to_string();

    // Without TLS the server's rule refuses the role.
    refused(
        &at("tls_only", "sslmode=disable"),
        ErrorKind::Auth,
        "no encryption",
    )
    .await;
    // libpq's default (prefer) and require speak TLS, unchecked.
    wins(&at("tls_only", ""), "tls_prefer").await;
    wins(&at("tls_only", "sslmode=require"), "tls_require").await;
    // The server's certificate checked by the CA, and its name
    // (127.0.0.1 is in it).
    wins(
        &at("tls_only", &format!("sslmode=verify-ca&sslrootcert={ca}")),
        "tls_verify_ca",
    )
    .await;
    wins(
        &at("tls_only", &format!("sslmode=verify-full&sslrootcert={ca}")),
        "tls_verify_full",
    )
    .await;
    // Another CA's word is not the server's: a configuration error, not
    // one to retry.
    for mode in ["verify-ca", "verify-full", "require"] {
        refused(
            &at(
                "tls_only",
                &format!("sslmode={mode}&sslrootcert={other_ca}"),
            ),
            ErrorKind::Config,
            "did not pass the check",
        )
        .await;
    }
    // A role that needs a client certificate: none, another CA's, its own.
    refused(
        &at("cert_only", "sslmode=require"),
        ErrorKind::Auth,
        "certificate",
    )
    .await;
    refused(
        &at(
            "cert_only",
            &format!(
                "sslmode=require&sslcert={}&sslkey={}",
                pki.other_client_cert().display(),
                pki.other_client_key().display()
            ),
        ),
        ErrorKind::Auth,
        "refused the TLS handshake",
    )
    .await;
    wins(
        &at(
            "cert_only",
            &format!(
                "sslmode=verify-full&sslrootcert={ca}&sslcert={}&sslkey={}",
                pki.client_cert().display(),
                pki.client_key().display()
            ),
        ),
        "tls_client_cert",
    )
    .await;

    // The builder: a name the certificate does not hold fails verify-full
    // and passes verify-ca, at the same address.
    let ca_pem = std::fs::read(pki.ca_cert()).unwrap();
    let config = || {
        let mut c = Config::new();
        c.user("tls_only")
            .dbname("regent")
            .host("db.example")
            .hostaddr(std::net::Ipv4Addr::LOCALHOST.into())
            .port(pg.port())
            .ssl_mode(regent_postgres::SslMode::Require)
            .connect_timeout(Duration::from_secs(5));
        c
    };
    let e = PostgresStore::builder(config())
        .tls(Tls::verify_full(&ca_pem).unwrap())
        .build()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{}", regent_core::report(&e));
    let store = PostgresStore::builder(config())
        .tls(Tls::verify_ca(&ca_pem).unwrap())
        .build()
        .await
        .unwrap_or_else(|e| panic!("verify-ca: {}", regent_core::report(&e)));
    assert!(matches!(
        store.try_acquire(&request("tls_builder"), None).await,
        Ok(Acquire::Won(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tls_is_a_configuration_error_when_tls_is_required() {
    let pg = Postgres::start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"));
    let url = format!("{}?sslmode=require", pg.store_url());
    refused(&url, ErrorKind::Config, "does not speak TLS").await;
    // prefer falls back to plain, as libpq.
    wins(
        &format!("{}?sslmode=prefer", pg.store_url()),
        "no_tls_prefer",
    )
    .await;
}

/// Regression: tokio-postgres's own refusal of a configuration (here two
/// ports for one host) had no SQLSTATE and was taken for a server that
/// is not there, to be retried for ever.
#[tokio::test]
async fn a_configuration_tokio_postgres_refuses_is_not_retried() {
    let mut c = Config::new();
    c.user("u").host("h").port(1).port(2);
    let e = PostgresStore::builder(c).build().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{}", regent_core::report(&e));
}
