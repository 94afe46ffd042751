//! Secured etcd members of the test kit (TLS, authentication), against the
//! real etcd and etcdctl (installed by `scripts/install-engines`).

mod common;

use std::fs;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use regent_testkit::engines::{EngineError, Etcd, EtcdTls, EtcdTlsFiles};

use common::{assert_success, stderr, stdout};

/// etcdctl's words for a refused TLS handshake: its gRPC dial never
/// succeeds.
const HANDSHAKE_REFUSED: &str = "context deadline exceeded";

#[track_caller]
fn assert_failure(output: &Output, expected: &str) {
    assert!(
        !output.status.success(),
        "etcdctl succeeded where it must fail: {}",
        stdout(output)
    );
    assert!(
        stderr(output).contains(expected),
        "etcdctl failed without saying {expected:?}: {}",
        stderr(output)
    );
}

/// etcdctl against `url` with only the flags given here, and short timeouts
/// so that a refused handshake fails in about a second.
fn bare_etcdctl(url: &str) -> Command {
    let program = std::env::var_os("REGENT_ETCDCTL_BIN")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "etcdctl".into());
    let mut command = Command::new(program);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ETCDCTL_") {
            command.env_remove(key);
        }
    }
    command
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={url}"))
        .arg("--dial-timeout=1s")
        .arg("--command-timeout=1s");
    command
}

fn run(mut command: Command, args: &[&str]) -> Output {
    command.args(args).output().expect("run etcdctl")
}

fn flag(name: &str, path: &Path) -> String {
    format!("--{name}={}", path.display())
}

#[test]
fn a_client_cert_member_serves_only_clients_with_a_certificate_of_its_ca() {
    let mut etcd = Etcd::builder().tls(EtcdTls::ClientCert).start().unwrap();
    assert_eq!(etcd.tls(), Some(EtcdTls::ClientCert));
    assert!(etcd.is_healthy());
    assert!(etcd.is_leader(), "a single member leads its cluster");
    assert!(etcd.endpoint().starts_with("127.0.0.1:"));
    assert_eq!(etcd.client_url(), format!("https://{}", etcd.endpoint()));
    assert_eq!(etcd.credentials(), None);
    let files = etcd.tls_files().expect("a TLS member has files").clone();
    for path in [
        files.ca_cert(),
        files.server_cert(),
        files.server_key(),
        files.client_cert(),
        files.client_key(),
        files.other_ca_cert(),
        files.other_client_cert(),
        files.other_client_key(),
    ] {
        let pem = fs::read_to_string(path).unwrap();
        assert!(pem.starts_with("-----BEGIN "), "{} is PEM", path.display());
    }
    assert_ne!(
        fs::read(files.ca_cert()).unwrap(),
        fs::read(files.other_ca_cert()).unwrap()
    );

    // The kit's helpers carry the CA and the client certificate.
    assert_success(&etcd.etcdctl(["put", "k", "v"]));
    let get = etcd.etcdctl(["get", "k", "--print-value-only"]);
    assert_success(&get);
    assert_eq!(stdout(&get).trim(), "v");

    let url = etcd.client_url();
    let ca = flag("cacert", files.ca_cert());
    // No client certificate.
    assert_failure(
        &run(bare_etcdctl(&url), &[&ca, "get", "k"]),
        HANDSHAKE_REFUSED,
    );
    // A client certificate of another CA.
    assert_failure(
        &run(
            bare_etcdctl(&url),
            &[
                &ca,
                &flag("cert", files.other_client_cert()),
                &flag("key", files.other_client_key()),
                "get",
                "k",
            ],
        ),
        HANDSHAKE_REFUSED,
    );
    // The server is not trusted by a client that trusts only the other CA.
    assert_failure(
        &run(
            bare_etcdctl(&url),
            &[
                &flag("cacert", files.other_ca_cert()),
                &flag("cert", files.client_cert()),
                &flag("key", files.client_key()),
                "get",
                "k",
            ],
        ),
        HANDSHAKE_REFUSED,
    );
    // Plain HTTP on the client port gets no answer of etcd's.
    assert!(!plain_http_health_answers(&etcd));

    etcd.restart().unwrap();
    assert!(etcd.is_healthy());
    let get = etcd.etcdctl(["get", "k", "--print-value-only"]);
    assert_success(&get);
    assert_eq!(stdout(&get).trim(), "v");

    let dir = files.ca_cert().parent().unwrap().to_owned();
    drop(etcd);
    assert!(!dir.exists(), "certificates left behind");
}

#[test]
fn a_server_tls_member_accepts_clients_without_a_certificate() {
    let etcd = Etcd::builder().tls(EtcdTls::Server).start().unwrap();
    assert_eq!(etcd.tls(), Some(EtcdTls::Server));
    let files = etcd.tls_files().unwrap();
    assert_success(&etcd.etcdctl(["put", "k", "v"]));
    let url = etcd.client_url();
    assert_success(&run(
        bare_etcdctl(&url),
        &[&flag("cacert", files.ca_cert()), "get", "k"],
    ));
    assert_failure(
        &run(
            bare_etcdctl(&url),
            &[&flag("cacert", files.other_ca_cert()), "get", "k"],
        ),
        HANDSHAKE_REFUSED,
    );
}

#[test]
fn auth_for_a_user_other_than_root_grants_the_whole_keyspace() {
    let etcd = Etcd::builder().auth("alice", "wonderland").start().unwrap();
    assert_eq!(etcd.tls(), None);
    assert!(etcd.tls_files().is_none());
    assert_eq!(etcd.credentials(), Some(("alice", "wonderland")));
    assert!(etcd.is_healthy());
    assert!(etcd.is_leader());
    assert_eq!(etcd.client_url(), format!("http://{}", etcd.endpoint()));

    assert_success(&etcd.etcdctl(["put", "any/key", "v"]));
    assert_success(&etcd.etcdctl(["put", "\u{7f}last", "v"]));
    let get = etcd.etcdctl(["get", "any/key", "--print-value-only"]);
    assert_success(&get);
    assert_eq!(stdout(&get).trim(), "v");
    // alice is not root: user administration is refused.
    assert_failure(&etcd.etcdctl(["user", "list"]), "permission denied");

    let url = etcd.client_url();
    assert_failure(
        &run(bare_etcdctl(&url), &["get", "any/key"]),
        "user name is empty",
    );
    assert_failure(
        &run(
            bare_etcdctl(&url),
            &["--user=alice:not-the-password", "get", "any/key"],
        ),
        "authentication failed",
    );
    assert_failure(
        &run(
            bare_etcdctl(&url),
            &["--user=root:wonderland", "get", "any/key"],
        ),
        "authentication failed",
    );
}

#[test]
fn auth_as_root_over_client_cert_tls() {
    let etcd = Etcd::builder()
        .tls(EtcdTls::ClientCert)
        .auth("root", "s3cret")
        .start()
        .unwrap();
    assert_eq!(etcd.credentials(), Some(("root", "s3cret")));
    let users = etcd.etcdctl(["user", "list"]);
    assert_success(&users);
    assert_eq!(stdout(&users).trim(), "root");

    // The client certificate's common name names no user: a request with
    // the certificate but without a password is refused.
    let files = etcd.tls_files().unwrap();
    assert_ne!(EtcdTlsFiles::CLIENT_COMMON_NAME, "root");
    assert_failure(
        &run(
            bare_etcdctl(&etcd.client_url()),
            &[
                &flag("cacert", files.ca_cert()),
                &flag("cert", files.client_cert()),
                &flag("key", files.client_key()),
                "get",
                "k",
            ],
        ),
        "permission denied",
    );
}

/// Whether `GET /health` over plain HTTP on the client port gets an HTTP
/// answer.
fn plain_http_health_answers(etcd: &Etcd) -> bool {
    let Ok(mut stream) = TcpStream::connect(etcd.client_addr()) else {
        return false;
    };
    let timeout = Some(Duration::from_secs(1));
    stream.set_read_timeout(timeout).unwrap();
    stream.set_write_timeout(timeout).unwrap();
    if stream.write_all(b"GET /health HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).contains(r#""health":"true""#)
}

#[test]
fn a_failed_auth_step_is_a_setup_error_without_the_password() {
    let err = Etcd::builder().auth("", "hunter2").start().unwrap_err();
    let EngineError::Setup { step, output, .. } = &err else {
        panic!("expected a setup error: {err:?}")
    };
    assert_eq!(step, "etcdctl user add ");
    assert!(output.contains("user name is empty"), "{output}");
    for shown in [err.to_string(), format!("{err:?}")] {
        assert!(!shown.contains("hunter2"), "the password leaked: {shown}");
    }
}
