//! The Redis store over TLS (`rediss://`), against the TLS port of a real
//! server with the test kit's certificates: the CA of `cacert` verifies
//! the server, `cert` and `key` give the client certificate a server with
//! `tls-auth-clients yes` asks for, and the wrong CA, no certificate or an
//! untrusted one are errors that name their cause. Every store here is
//! made as the CLI makes it: the URL and options parsed by [`KIND`], then
//! [`Target::connect`](regent_core::target::Target::connect). And the
//! conformance suite, over TLS with a client certificate.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::path::Path;
use std::time::Duration;

use regent_core::target::Options;
use regent_core::testing::{Harness, run};
use regent_core::{
    Acquire, AcquireRequest, BoxStore, ElectionName, ErrorKind, HolderId, LeaseStore, Metadata,
    StoreError,
};
use regent_redis::{KIND, RedisStore, redis};
use regent_testkit::engines::{Redis, RedisTls, RedisTlsFiles};

use common::{RedisHarness, kit, unique};

/// How long one call waits, connecting included.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// A server of the test's own with a TLS port in `mode`.
fn tls_server(mode: RedisTls) -> (Redis, String, RedisTlsFiles) {
    let redis = kit::own(Redis::builder().tls(mode));
    let url = redis.tls_store_url().expect("a TLS port");
    let files = redis.tls_files().expect("TLS files").clone();
    (redis, url, files)
}

/// The store at `url` with the path options `options`, as a program sets
/// them: parsed by [`KIND`] (no environment), then connected.
async fn connect(url: &str, options: &[(&str, &Path)]) -> Result<BoxStore, StoreError> {
    let mut given = Options::new();
    for (name, path) in options {
        given.set(&KIND, name, path).expect("an option of redis");
    }
    let target = (KIND.parse)(url, &given, &|_| None).expect("the URL and options parse");
    target.connect(CALL_TIMEOUT).await
}

fn request(election: &ElectionName, holder: &str) -> AcquireRequest {
    AcquireRequest {
        election: election.clone(),
        holder: HolderId::new(holder).unwrap(),
        ttl: Duration::from_secs(10),
        metadata: Metadata::default(),
    }
}

/// Two terms of one election, each won and released: the second's token
/// is greater.
async fn two_terms(store: &BoxStore, name: &str) {
    let election = unique(name);
    let mut last = None;
    for holder in ["a", "b"] {
        let lease = match store.try_acquire(&request(&election, holder), None).await {
            Ok(Acquire::Won(lease)) => lease,
            other => panic!("{holder} should win a free election over TLS, got {other:?}"),
        };
        assert_eq!(
            store
                .current_leader(&election)
                .await
                .unwrap()
                .map(|l| l.token),
            Some(lease.token)
        );
        if let Some(last) = last {
            assert!(lease.token > last, "token {} after {last}", lease.token);
        }
        last = Some(lease.token);
        store.release(&lease).await.unwrap();
        assert_eq!(store.current_leader(&election).await.unwrap(), None);
    }
}

/// The connection's error, or the first call's: a TLS 1.3 server checks
/// the client's certificate after the client has finished its handshake,
/// so its refusal reaches the client at its first read.
async fn first_failure(url: &str, options: &[(&str, &Path)]) -> StoreError {
    let store = match connect(url, options).await {
        Err(e) => return e,
        Ok(store) => store,
    };
    match store
        .try_acquire(&request(&unique("refused"), "a"), None)
        .await
    {
        Err(e) => e,
        Ok(won) => panic!("the server let the client in: {won:?}"),
    }
}

/// The whole error, its causes included.
fn chain(e: &StoreError) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_ca_verifies_the_server_and_terms_run_over_tls() {
    let (_server, url, files) = tls_server(RedisTls::Server);
    let store = connect(&url, &[("cacert", files.ca_cert())])
        .await
        .unwrap_or_else(|e| panic!("connect over TLS: {}", chain(&e)));
    two_terms(&store, "tls").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_requires_client_certificates_refuses_none_and_takes_ours() {
    let (_server, url, files) = tls_server(RedisTls::ClientCert);
    let ca = ("cacert", files.ca_cert());

    let e = first_failure(&url, &[ca]).await;
    assert_eq!(e.kind(), ErrorKind::Auth, "{}", chain(&e));
    assert!(
        e.to_string().contains("wants a client certificate")
            && e.to_string().contains("--redis-cert"),
        "{e}"
    );

    let store = connect(
        &url,
        &[
            ca,
            ("cert", files.client_cert()),
            ("key", files.client_key()),
        ],
    )
    .await
    .unwrap_or_else(|e| panic!("connect with a client certificate: {}", chain(&e)));
    two_terms(&store, "tls-client-cert").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_of_another_ca_is_a_config_error_naming_the_option() {
    let (_server, url, files) = tls_server(RedisTls::Server);
    let e = first_failure(&url, &[("cacert", files.other_ca_cert())]).await;
    assert_eq!(e.kind(), ErrorKind::Config, "{}", chain(&e));
    assert!(e.to_string().contains("--redis-cacert"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_client_certificate_is_refused_with_an_error_naming_it() {
    let (_server, url, files) = tls_server(RedisTls::ClientCert);
    let e = first_failure(
        &url,
        &[
            ("cacert", files.ca_cert()),
            ("cert", files.other_client_cert()),
            ("key", files.other_client_key()),
        ],
    )
    .await;
    assert_eq!(e.kind(), ErrorKind::Auth, "{}", chain(&e));
    assert!(
        e.to_string().contains("refused the client certificate"),
        "{e}"
    );
}

/// The conformance harness on the TLS port of a server that requires
/// client certificates, presenting the kit's; what the suite does behind
/// regent's back goes through the plain port.
struct TlsHarness {
    plain: RedisHarness,
    tls_url: String,
    certificates: redis::TlsCertificates,
}

impl Harness for TlsHarness {
    type Store = RedisStore;

    async fn store(&self) -> RedisStore {
        let client =
            redis::Client::build_with_tls(self.tls_url.as_str(), self.certificates.clone())
                .expect("a TLS client");
        // As the plain harness: a watch polls often enough to see an
        // expiry at the suite's short ttl.
        RedisStore::builder(client)
            .poll_interval(Duration::from_millis(100))
            .build()
            .await
            .expect("open the store over TLS")
    }

    async fn unreachable_store(&self) -> RedisStore {
        self.plain.unreachable_store().await
    }

    /// The store takes a term it won for a caller who never heard of it
    /// back (`scripts::ACQUIRE`): held to it.
    fn checks_retried_acquire_after_a_lost_answer(&self) -> bool {
        true
    }

    fn ttl(&self) -> Duration {
        self.plain.ttl()
    }

    async fn delete_records(&self, election: &ElectionName) {
        self.plain.delete_records(election).await;
    }

    async fn put_garbage(&self, election: &ElectionName) {
        self.plain.put_garbage(election).await;
    }
}

#[test]
fn redis_store_conforms_over_tls_with_a_client_certificate() {
    let redis = Redis::builder()
        .tls(RedisTls::ClientCert)
        .start()
        .unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
    let files = redis.tls_files().expect("TLS files");
    let read = |path: &Path| std::fs::read(path).expect("a PEM file of the kit");
    let harness = TlsHarness {
        plain: RedisHarness {
            direct: redis.store_url(),
            store_url: redis.store_url(),
        },
        tls_url: redis.tls_store_url().expect("a TLS port"),
        certificates: redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: read(files.client_cert()),
                client_key: read(files.client_key()),
            }),
            root_cert: Some(read(files.ca_cert())),
        },
    };
    regent_testkit::block_on_big_stack(2, move || async move { run(&harness).await });
    drop(redis);
}
