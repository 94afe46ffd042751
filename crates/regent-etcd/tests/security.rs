//! The etcd store against a secured etcd: TLS (server certificate, client
//! certificates) and etcd's authentication, with the certificates the test
//! kit makes. What each misconfiguration comes out as, and that none of them
//! hangs past the request timeout.
//!
//! Needs the `tls` feature (see `Cargo.toml`).

mod common;

use std::path::Path;
use std::time::Duration;

use etcd_client::{Certificate, ConnectOptions, Identity, Permission, TlsOptions};
use regent_core::{Acquire, Candidate, ElectionName, ErrorKind, LeaseStore, StoreError};
use regent_etcd::{EtcdStore, EtcdStoreBuilder, is_refused_client_certificate};
use regent_testkit::engines::{Etcd, EtcdBuilder, EtcdTls};
use tokio::time::Instant;

use common::{ConformanceHarness, REQUEST_TIMEOUT, holder, req, store_builder};

const TTL: Duration = Duration::from_secs(1);

const USER: &str = "regent";
const PASSWORD: &str = "correct-horse-battery-staple";

async fn start(builder: EtcdBuilder) -> Etcd {
    tokio::task::spawn_blocking(move || builder.start())
        .await
        .expect("the start task ran")
        .unwrap_or_else(|e| panic!("cannot start a secured etcd for this test: {e}"))
}

fn pem(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A builder trusting the member's CA, presenting the client certificate
/// when the member requires one, without a user.
fn tls_builder(etcd: &Etcd) -> EtcdStoreBuilder {
    let files = etcd.tls_files().expect("a TLS member");
    let builder = store_builder(etcd.endpoints()).tls_ca_pem(pem(files.ca_cert()));
    match etcd.tls() {
        Some(EtcdTls::ClientCert) => {
            builder.tls_client_identity_pem(pem(files.client_cert()), pem(files.client_key()))
        }
        _ => builder,
    }
}

/// As [`tls_builder`], logged in as the member's user.
fn secured_builder(etcd: &Etcd) -> EtcdStoreBuilder {
    let builder = tls_builder(etcd);
    match etcd.credentials() {
        Some((user, password)) => builder.user(user, password),
        None => builder,
    }
}

async fn secured_store(etcd: &Etcd) -> EtcdStore {
    secured_builder(etcd)
        .connect()
        .await
        .expect("connect to the secured etcd")
}

/// The error's message with all its sources, as a CLI would print it.
fn full_message(err: &StoreError) -> String {
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    message
}

/// `future`'s output and how long it took.
async fn timed<T>(future: impl Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let output = future.await;
    (output, started.elapsed())
}

/// Fails unless the [`timed`] `result` is an error that came before the
/// request timeout (a timed-out request says "no answer within").
#[track_caller]
fn expect_prompt_error<T>((result, elapsed): (Result<T, StoreError>, Duration)) -> StoreError {
    let Err(err) = result else {
        panic!("expected an error, got success")
    };
    assert!(
        elapsed < REQUEST_TIMEOUT && !err.to_string().contains("no answer within"),
        "the error came after {elapsed:?}, not at once: {}",
        full_message(&err)
    );
    err
}

async fn try_acquire(store: &EtcdStore, election: &ElectionName) -> Result<Acquire, StoreError> {
    store.try_acquire(&req(election, "a", TTL), None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_server_tls_a_candidate_wins_and_every_endpoint_form_agrees() {
    let etcd = start(Etcd::builder().tls(EtcdTls::Server)).await;
    let store = secured_store(&etcd).await;
    let e = common::election("tls");

    let candidate = Candidate::builder(store.clone(), e.clone(), holder("a"))
        .ttl(Duration::from_secs(2))
        .build()
        .expect("valid timing");
    let leadership = candidate.campaign().await.expect("campaign over TLS");
    let leader = store.current_leader(&e).await.unwrap().expect("a leader");
    assert_eq!(leader.holder, holder("a"));
    assert_eq!(leader.token, leadership.token());

    // The kit's etcdctl, with the test CA, sees regent's key.
    let keys = etcd.etcdctl(["get", &store.election_prefix(&e), "--prefix", "--keys-only"]);
    assert!(keys.status.success(), "{keys:?}");
    assert!(!String::from_utf8_lossy(&keys.stdout).trim().is_empty());

    // The server certificate names 127.0.0.1 and localhost; an https://
    // URL works as a bare endpoint does.
    let port = etcd.client_addr().port();
    let ca = pem(etcd.tls_files().unwrap().ca_cert());
    for endpoint in [format!("localhost:{port}"), etcd.client_url()] {
        let other = store_builder([endpoint.clone()])
            .tls_ca_pem(&ca)
            .connect()
            .await
            .unwrap();
        let seen = other.current_leader(&e).await;
        assert_eq!(
            seen.unwrap_or_else(|err| panic!("{endpoint}: {}", full_message(&err)))
                .map(|l| l.token),
            Some(leadership.token()),
            "{endpoint}"
        );
    }
    leadership.resign().await.unwrap();
    assert_eq!(store.current_leader(&e).await.unwrap(), None);
}

/// The conformance suite over the most secured setup: TLS with client
/// certificates, and authentication as a user other than root. On a big
/// stack: the suite's futures nest deep in an unoptimised build (with TLS
/// and auth they overflowed 2 MiB).
#[test]
fn etcd_store_conforms_over_client_cert_tls_and_auth() {
    regent_testkit::block_on_big_stack(4, conforms_over_client_cert_tls_and_auth);
}

async fn conforms_over_client_cert_tls_and_auth() {
    let etcd = start(
        Etcd::builder()
            .tls(EtcdTls::ClientCert)
            .auth(USER, PASSWORD),
    )
    .await;
    let files = etcd.tls_files().unwrap();
    let (user, password) = etcd.credentials().unwrap();
    // A plain etcd client with the same certificates and user, as an
    // operator's tool would use.
    let raw_options = ConnectOptions::new()
        .with_tls(
            TlsOptions::new()
                .ca_certificate(Certificate::from_pem(pem(files.ca_cert())))
                .identity(Identity::from_pem(
                    pem(files.client_cert()),
                    pem(files.client_key()),
                )),
        )
        .with_user(user, password);
    // Without the user: connecting with one would already fail.
    let unreachable_store = store_builder([format!("127.0.0.1:{}", common::closed_port())])
        .tls_ca_pem(pem(files.ca_cert()))
        .tls_client_identity_pem(pem(files.client_cert()), pem(files.client_key()));
    let harness = ConformanceHarness {
        store: secured_builder(&etcd),
        unreachable_store,
        raw_options: Some(raw_options),
        etcd,
    };
    harness.run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_the_store_cannot_verify_is_a_config_error() {
    let etcd = start(Etcd::builder().tls(EtcdTls::Server).auth(USER, PASSWORD)).await;
    let files = etcd.tls_files().unwrap();
    let e = common::election("untrusted");
    let other_ca = || store_builder(etcd.endpoints()).tls_ca_pem(pem(files.other_ca_cert()));

    // Without a user nothing is sent at connect: the first call fails.
    let store = other_ca().connect().await.unwrap();
    let err = expect_prompt_error(timed(try_acquire(&store, &e)).await);
    assert_eq!(err.kind(), ErrorKind::Config, "{}", full_message(&err));
    assert!(
        err.to_string().contains("certificate failed verification")
            && err.to_string().contains("UnknownIssuer"),
        "{err}"
    );

    // With a user, connecting fails, before any password is sent.
    let err = expect_prompt_error(timed(other_ca().user(USER, PASSWORD).connect()).await);
    assert_eq!(err.kind(), ErrorKind::Config, "{}", full_message(&err));

    // The right CA, but a name the certificate does not carry.
    let store = tls_builder(&etcd)
        .tls_domain_name("etcd.example.com")
        .connect()
        .await
        .unwrap();
    let err = expect_prompt_error(timed(try_acquire(&store, &e)).await);
    assert_eq!(err.kind(), ErrorKind::Config, "{}", full_message(&err));
    assert!(err.to_string().contains("etcd.example.com"), "{err}");

    // No CA at all (an https:// URL without TLS settings): no system roots.
    let store = store_builder([etcd.client_url()]).connect().await.unwrap();
    let err = expect_prompt_error(timed(try_acquire(&store, &e)).await);
    assert_eq!(err.kind(), ErrorKind::Config, "{}", full_message(&err));
}

/// The test that [`run_in_child`] runs again, in a child process.
const SYSTEM_ROOTS_TEST: &str = "system_roots_trust_the_system_store_alone_or_with_a_ca_pem";

/// Set in a child of [`SYSTEM_ROOTS_TEST`]: which [`SystemStore`] its
/// `SSL_CERT_FILE` is, by [`SystemStore::name`].
const CHILD_CASE: &str = "REGENT_TEST_SYSTEM_STORE";
/// Set in a child: the member's `https://` URL.
const CHILD_URL: &str = "REGENT_TEST_ETCD_URL";
/// Set in a child: the member's CA certificate file.
const CHILD_CA: &str = "REGENT_TEST_CA_CERT";
/// Set in a child: a CA certificate file that cannot verify the member.
const CHILD_OTHER_CA: &str = "REGENT_TEST_OTHER_CA_CERT";

/// What the system's trust store holds in a child: rustls-native-certs
/// reads `SSL_CERT_FILE` instead of the platform's store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SystemStore {
    /// The member's CA.
    TheCa,
    /// Only a CA that cannot verify the member.
    AnotherCa,
    /// No certificate at all.
    Nothing,
}

impl SystemStore {
    const ALL: [Self; 3] = [Self::TheCa, Self::AnotherCa, Self::Nothing];

    fn name(self) -> &'static str {
        match self {
            Self::TheCa => "the-ca",
            Self::AnotherCa => "another-ca",
            Self::Nothing => "nothing",
        }
    }
}

/// `tls_system_roots` trusts the system's store, which `SSL_CERT_FILE`
/// stands in for. Setting it in this multi-threaded process would race the
/// other tests, so each [`SystemStore`] is checked by this test run again
/// in a child process with its own environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_roots_trust_the_system_store_alone_or_with_a_ca_pem() {
    if let Ok(case) = std::env::var(CHILD_CASE) {
        let store = SystemStore::ALL
            .into_iter()
            .find(|s| s.name() == case)
            .unwrap_or_else(|| panic!("unknown {CHILD_CASE}={case}"));
        system_roots_checks(store).await;
        println!("{}", child_ran(store));
        return;
    }
    let etcd = start(Etcd::builder().tls(EtcdTls::Server)).await;
    let files = etcd.tls_files().unwrap();
    for store in SystemStore::ALL {
        let cert_file = match store {
            SystemStore::TheCa => files.ca_cert(),
            SystemStore::AnotherCa => files.other_ca_cert(),
            // A PEM file without a certificate.
            SystemStore::Nothing => files.client_key(),
        };
        run_in_child(
            store,
            &[
                ("SSL_CERT_FILE", cert_file.as_os_str()),
                (CHILD_URL, etcd.client_url().as_ref()),
                (CHILD_CA, files.ca_cert().as_os_str()),
                (CHILD_OTHER_CA, files.other_ca_cert().as_os_str()),
            ],
        )
        .await;
    }
}

/// What a child prints once its checks of `store` passed.
fn child_ran(store: SystemStore) -> String {
    format!("system store checked in a child: {}", store.name())
}

/// Runs [`SYSTEM_ROOTS_TEST`] in a child process of this test binary, for
/// `store`, with `envs` set and no `SSL_CERT_DIR` (it would add to
/// `SSL_CERT_FILE`); fails unless the child ran its checks and passed.
async fn run_in_child(store: SystemStore, envs: &[(&str, &std::ffi::OsStr)]) {
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([SYSTEM_ROOTS_TEST, "--exact", "--nocapture"])
        .env_remove("SSL_CERT_DIR")
        .env(CHILD_CASE, store.name())
        .envs(envs.iter().copied())
        .output()
        .await
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    assert!(child.status.success(), "{store:?}: child failed:\n{out}");
    assert!(
        out.contains(&child_ran(store)),
        "{store:?}: child did not run:\n{out}"
    );
}

/// The checks in a child whose system store is `store`.
async fn system_roots_checks(store: SystemStore) {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is set"));
    let url = var(CHILD_URL);
    let ca = pem(Path::new(&var(CHILD_CA)));
    let other_ca = pem(Path::new(&var(CHILD_OTHER_CA)));
    // The bare host:port: tls_system_roots alone must choose https://.
    let bare = url.trim_start_matches("https://").to_owned();
    let system = || store_builder([bare.clone()]).tls_system_roots();
    let e = common::election("system-roots");

    let wins = async |builder: EtcdStoreBuilder, case: &str| {
        let store = builder
            .connect()
            .await
            .unwrap_or_else(|err| panic!("{case}: {}", full_message(&err)));
        let e = common::election("system-roots");
        match try_acquire(&store, &e).await {
            Ok(Acquire::Won(_)) => {}
            Ok(other) => panic!("{case}: {other:?}"),
            Err(err) => panic!("{case}: {}", full_message(&err)),
        }
    };
    let unverified = async |builder: EtcdStoreBuilder, case: &str| {
        let store = builder.connect().await.unwrap();
        let err = expect_prompt_error(timed(try_acquire(&store, &e)).await);
        assert_config(
            case,
            &err,
            &["certificate failed verification", "UnknownIssuer"],
        );
    };
    match store {
        SystemStore::TheCa => {
            wins(system(), "system roots alone").await;
            wins(system().tls_ca_pem(&other_ca), "system roots and a CA PEM").await;
            // Without tls_system_roots the system's store is not consulted.
            unverified(
                store_builder([url.clone()]).tls_ca_pem(&other_ca),
                "a CA PEM alone",
            )
            .await;
            unverified(store_builder([url.clone()]), "an https:// URL alone").await;
        }
        SystemStore::AnotherCa => {
            unverified(system(), "system roots alone").await;
            wins(system().tls_ca_pem(&ca), "a CA PEM and system roots").await;
        }
        SystemStore::Nothing => {
            for (case, builder) in [
                ("system roots alone", system()),
                ("system roots and a CA PEM", system().tls_ca_pem(&ca)),
            ] {
                assert_config_error(case, builder, "no native certs found").await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_tls_settings_are_config_errors_at_connect() {
    // Only the files are needed; nothing below reaches etcd.
    let etcd = start(Etcd::builder().tls(EtcdTls::ClientCert)).await;
    let files = etcd.tls_files().unwrap();
    let builder = || store_builder(etcd.endpoints());
    let cases = [
        (
            "a CA PEM without a certificate",
            builder().tls_ca_pem(pem(files.client_key())),
            "CA PEM must hold a certificate",
        ),
        (
            "a client certificate PEM without a certificate",
            builder().tls_client_identity_pem(b"not PEM", pem(files.client_key())),
            "client certificate PEM must hold a certificate",
        ),
        (
            "a client key PEM without a key",
            builder().tls_client_identity_pem(pem(files.client_cert()), pem(files.client_cert())),
            "client key PEM must hold a private key",
        ),
        (
            "a key of another certificate",
            builder()
                .tls_client_identity_pem(pem(files.client_cert()), pem(files.other_client_key())),
            "invalid TLS settings",
        ),
        (
            "an invalid server name",
            builder()
                .tls_ca_pem(pem(files.ca_cert()))
                .tls_domain_name("not a name!"),
            "invalid TLS settings",
        ),
    ];
    for (case, builder, expected) in cases {
        assert_config_error(case, builder, expected).await;
    }
}

/// etcd refuses a missing or foreign client certificate after the TLS 1.3
/// handshake has ended on the client's side, so the call sees either the
/// server's alert (`Auth`) or only the closed connection (`Unavailable`),
/// by a race. Either way: at once, never a hang, with a message that says
/// what the closed connection means, and told apart by
/// [`is_refused_client_certificate`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_required_but_missing_or_foreign_fails_at_once() {
    let etcd = start(Etcd::builder().tls(EtcdTls::ClientCert)).await;
    let files = etcd.tls_files().unwrap();
    let e = common::election("client-cert");
    let without = || store_builder(etcd.endpoints()).tls_ca_pem(pem(files.ca_cert()));
    let foreign = || {
        without().tls_client_identity_pem(
            pem(files.other_client_cert()),
            pem(files.other_client_key()),
        )
    };
    for (case, builder) in [("no certificate", without()), ("foreign", foreign())] {
        for _ in 0..3 {
            let store = builder.clone().connect().await.unwrap();
            let err = expect_prompt_error(timed(try_acquire(&store, &e)).await);
            assert!(
                matches!(err.kind(), ErrorKind::Auth | ErrorKind::Unavailable),
                "{case}: {:?}: {}",
                err.kind(),
                full_message(&err)
            );
            let expected = match err.kind() {
                ErrorKind::Auth => "refused the client's TLS certificate",
                _ => CLOSED_OVER_TLS,
            };
            assert!(err.to_string().contains(expected), "{case}: {err}");
            assert!(is_refused_client_certificate(&err), "{case}: {err}");
        }
    }
    // With a user, connecting authenticates and fails the same way.
    let err = expect_prompt_error(timed(without().user(USER, PASSWORD).connect()).await);
    assert!(
        matches!(err.kind(), ErrorKind::Auth | ErrorKind::Unavailable),
        "{:?}: {}",
        err.kind(),
        full_message(&err)
    );
    assert!(
        is_refused_client_certificate(&err),
        "{}",
        full_message(&err)
    );

    // The control: with the client certificate the same member serves.
    let store = tls_builder(&etcd).connect().await.unwrap();
    assert!(matches!(try_acquire(&store, &e).await, Ok(Acquire::Won(_))));
}

/// What the store says of a TLS connection the server closed or reset
/// after it was made.
const CLOSED_OVER_TLS: &str = "the server closed the connection after it was made; with TLS \
                               this is how etcd refuses a missing or untrusted client certificate";

/// Regression: the CLI took every unavailable TLS store for one refusing
/// the client certificate unless the message said otherwise. A refused
/// connection, an unknown host, a TLS client on a plaintext member (closed
/// during the handshake) are none of that, nor is a closed connection
/// without TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_to_connect_are_not_taken_for_a_refused_client_certificate() {
    let tls_member = start(Etcd::builder().tls(EtcdTls::ClientCert)).await;
    let plain_member = start(Etcd::builder()).await;
    let files = tls_member.tls_files().unwrap();
    let e = common::election("not-refused");
    let over_tls = |endpoint: String| {
        store_builder([endpoint])
            .tls_ca_pem(pem(files.ca_cert()))
            .tls_client_identity_pem(pem(files.client_cert()), pem(files.client_key()))
    };
    // Whether the store speaks TLS: without it, the server closing the
    // connection after it was made leaves no client certificate to speak
    // of, though `is_refused_client_certificate`, which cannot know, says
    // it may be one.
    let cases = [
        (
            "a closed port",
            true,
            over_tls(format!("127.0.0.1:{}", common::closed_port())),
        ),
        (
            "an unknown host",
            true,
            over_tls("regent.invalid:2379".into()),
        ),
        (
            "a plaintext member",
            true,
            over_tls(plain_member.endpoint()),
        ),
        (
            "a plaintext client",
            false,
            store_builder(tls_member.endpoints()),
        ),
    ];
    for (case, tls, builder) in cases {
        let store = builder.connect().await.unwrap();
        let err = try_acquire(&store, &e).await.expect_err(case);
        assert_eq!(
            err.kind(),
            ErrorKind::Unavailable,
            "{case}: {}",
            full_message(&err)
        );
        assert!(
            !full_message(&err).contains("client certificate"),
            "{case}: {}",
            full_message(&err)
        );
        if tls {
            assert!(
                !is_refused_client_certificate(&err),
                "{case}: {}",
                full_message(&err)
            );
        }
    }
}

/// A user who may read the election's keys but not write them: the error
/// names the key prefix (namespace included) and how to grant it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_denied_names_the_prefix_to_grant() {
    let etcd = start(Etcd::builder().auth("root", PASSWORD)).await;
    // A reader of every key under "/", set up as an operator would.
    let root = ConnectOptions::new().with_user("root", PASSWORD);
    let mut admin = common::raw_with(&etcd.endpoints(), Some(root)).await;
    admin
        .user_add("reader", "reader-secret", None)
        .await
        .unwrap();
    admin.role_add("readers").await.unwrap();
    admin
        .role_grant_permission("readers", Permission::read("/").with_prefix())
        .await
        .unwrap();
    admin.user_grant_role("reader", "readers").await.unwrap();
    let store = store_builder(etcd.endpoints())
        .namespace("/svc/")
        .user("reader", "reader-secret")
        .connect()
        .await
        .unwrap();
    let e = common::election("no-write");
    assert_eq!(store.current_leader(&e).await.unwrap(), None);
    let err = expect_prompt_error(timed(try_acquire(&store, &e)).await);
    assert_eq!(err.kind(), ErrorKind::Auth, "{}", full_message(&err));
    let prefix = store.election_prefix(&e);
    assert!(prefix.starts_with("/svc/"), "{prefix}");
    let message = err.to_string();
    assert!(
        message.contains(&format!(
            "the user needs read and write permission on the keys under '{prefix}' \
             (etcdctl role grant-permission ROLE --prefix=true readwrite '{prefix}')"
        )) && full_message(&err).contains("permission denied")
            && !message.contains("reader-secret"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_takes_the_right_password_and_refuses_a_wrong_one_without_echoing_it() {
    let etcd = start(Etcd::builder().tls(EtcdTls::Server).auth(USER, PASSWORD)).await;
    let e = common::election("auth");

    let store = secured_store(&etcd).await;
    assert!(matches!(try_acquire(&store, &e).await, Ok(Acquire::Won(_))));

    let wrong = "not-the-password";
    for (user, password) in [(USER, wrong), ("nobody", PASSWORD)] {
        let builder = tls_builder(&etcd).user(user, password);
        assert!(!format!("{builder:?}").contains(password));
        let err = expect_prompt_error(timed(builder.connect()).await);
        assert_eq!(err.kind(), ErrorKind::Auth, "{}", full_message(&err));
        let message = full_message(&err);
        assert!(message.contains(&format!("user '{user}'")), "{message}");
        assert!(message.contains("authentication failed"), "{message}");
        for shown in [message, format!("{err:?}")] {
            assert!(!shown.contains(password), "the password leaked: {shown}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_without_a_user_is_an_auth_error_on_the_first_call() {
    // Without client certificates etcd says "user name is empty"; with
    // one whose common name names no user, "permission denied".
    for tls in [EtcdTls::Server, EtcdTls::ClientCert] {
        let etcd = start(Etcd::builder().tls(tls).auth(USER, PASSWORD)).await;
        let e = common::election("no-user");
        let store = tls_builder(&etcd)
            .connect()
            .await
            .expect("connecting without a user sends nothing");
        let err = expect_prompt_error(timed(try_acquire(&store, &e)).await);
        assert_eq!(
            err.kind(),
            ErrorKind::Auth,
            "{tls:?}: {}",
            full_message(&err)
        );
        let err = expect_prompt_error(timed(store.current_leader(&e)).await);
        assert_eq!(
            err.kind(),
            ErrorKind::Auth,
            "{tls:?}: {}",
            full_message(&err)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_store_on_a_tls_port_fails_at_once() {
    let etcd = start(Etcd::builder().tls(EtcdTls::Server)).await;
    let e = common::election("plaintext");
    for endpoint in [etcd.endpoint(), format!("http://{}", etcd.endpoint())] {
        let store = store_builder([endpoint.clone()]).connect().await.unwrap();
        let err = expect_prompt_error(timed(try_acquire(&store, &e)).await);
        // The server only closes the connection: nothing tells it from a
        // member going away.
        assert_eq!(
            err.kind(),
            ErrorKind::Unavailable,
            "{endpoint}: {}",
            full_message(&err)
        );
    }
}

/// `builder` fails to connect with a [`ErrorKind::Config`] error whose
/// message contains `expected`.
async fn assert_config_error(case: &str, builder: EtcdStoreBuilder, expected: &str) {
    let err = builder.connect().await.expect_err(case);
    assert_config(case, &err, &[expected]);
}

/// `err` is a [`ErrorKind::Config`] error whose message contains every one
/// of `expected`.
fn assert_config(case: &str, err: &StoreError, expected: &[&str]) {
    assert_eq!(
        err.kind(),
        ErrorKind::Config,
        "{case}: {}",
        full_message(err)
    );
    for needle in expected {
        assert!(
            err.to_string().contains(needle),
            "{case}: {needle:?} not in {err}"
        );
    }
}
