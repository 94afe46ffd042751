//! Usage and configuration errors: exit 2, a message that names the flag
//! and the rule, no store touched, no panic.

mod common;

use std::time::Duration;

use common::*;

/// Runs `regent ARGS` and checks exit 2, no panic, and that stderr contains
/// every one of `expected`.
fn usage_error(args: &[&str], expected: &[&str]) {
    let out = run_bounded(args, Duration::from_secs(10));
    assert_eq!(
        out.code,
        Some(2),
        "regent {args:?}: expected exit 2, got {:?}; stderr:\n{}",
        out.code,
        out.stderr
    );
    assert!(
        !out.stderr.contains("panicked"),
        "regent {args:?} panicked:\n{}",
        out.stderr
    );
    for e in expected {
        assert!(
            out.stderr.contains(e),
            "regent {args:?}: stderr does not name {e:?}:\n{}",
            out.stderr
        );
    }
    // A usage error is reported before any store is opened or retried.
    assert!(
        out.took < Duration::from_secs(2),
        "regent {args:?} took {:?}",
        out.took
    );
}

/// `regent run --store sqlite:DIR/e.db --election e EXTRA -- true`.
fn run_with(dir: &tempfile::TempDir, extra: &[&str], expected: &[&str]) {
    let store = format!("sqlite:{}", dir.path().join("e.db").display());
    let mut args = vec!["run", "--store", &store, "--election", "e"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "true"]);
    usage_error(&args, expected);
    assert!(
        !dir.path().join("e.db").exists(),
        "regent {args:?} created the store before failing"
    );
}

#[test]
fn zero_ttl() {
    let dir = tempfile::tempdir().unwrap();
    run_with(&dir, &["--ttl", "0s"], &["--ttl 0s", "greater than zero"]);
}

/// Regression: timing errors named all four timing flags, and a rule
/// broken against a default (the renew deadline of 3*ttl/5) did not say it
/// was one. Each now starts with the flags involved.
#[test]
fn renew_interval_not_below_ttl() {
    let dir = tempfile::tempdir().unwrap();
    for every in ["2s", "3s"] {
        run_with(
            &dir,
            &["--ttl", "2s", "--renew-every", every],
            &[
                &format!("regent: --renew-every {every}, --renew-deadline (default 3*ttl/5)"),
                "must exceed 1.2 x renew interval",
            ],
        );
    }
    run_with(
        &dir,
        &["--ttl", "2s", "--renew-deadline", "2s"],
        &[
            "regent: --renew-deadline 2s, --ttl 2s",
            "must be shorter than ttl",
        ],
    );
    run_with(
        &dir,
        &["--ttl", "2s", "--grace", "2s"],
        &["regent: --grace 2s", "does not fit"],
    );
}

#[test]
fn duration_without_unit() {
    let dir = tempfile::tempdir().unwrap();
    run_with(&dir, &["--ttl", "10"], &["--ttl", "'10' has no unit"]);
    run_with(&dir, &["--ttl", "10y"], &["--ttl", "unknown unit 'y'"]);
}

#[test]
fn unknown_store_scheme() {
    usage_error(
        &["run", "--store", "foo:x", "--election", "e", "--", "true"],
        &[
            "--store",
            "unknown scheme 'foo'",
            "supported: sqlite:PATH, etcd://",
        ],
    );
    usage_error(
        &["status", "--store", "nothing", "--election", "e"],
        &["--store", "no scheme"],
    );
}

/// A Redis URL with a password is a usage error that hides it and says
/// where the password goes.
#[test]
fn a_redis_password_in_the_url_is_a_usage_error_and_stays_hidden() {
    let args = [
        "run",
        "--store",
        "redis://app:hunter2@127.0.0.1:6379",
        "--election",
        "e",
        "--",
        "true",
    ];
    usage_error(
        &args,
        &["--store", "carries a password", "REGENT_REDIS_PASSWORD"],
    );
    let out = run_bounded(&args, Duration::from_secs(10));
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
}

/// Malformed Consul URLs and TLS files on a plain consul:// URL are usage
/// errors reported before any connection.
#[test]
fn bad_consul_settings() {
    usage_error(
        &[
            "status",
            "--store",
            "consul://127.0.0.1:1?token=x",
            "--election",
            "e",
        ],
        &["--store", "Consul URLs take only ?dc=DATACENTER"],
    );
    usage_error(
        &[
            "status",
            "--store",
            "consul://127.0.0.1:1",
            "--consul-cacert",
            "ca.pem",
            "--election",
            "e",
        ],
        &["--consul-cacert", "consuls://"],
    );
    usage_error(
        &[
            "status",
            "--store",
            "consul://127.0.0.1:1",
            "--consul-lock-delay",
            "10",
            "--election",
            "e",
        ],
        &["--consul-lock-delay '10' is not a lock delay", "0s to 24h"],
    );
}

/// Malformed etcd URLs and inconsistent `--etcd-*` settings are usage
/// errors reported before any connection (port 1 would refuse one, and
/// that would be exit 3 after retries, not exit 2 at once).
#[test]
fn bad_etcd_settings() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "no pem here").unwrap();
    let ca = ca.to_str().unwrap();
    let cert = dir.path().join("cert.pem");
    std::fs::write(
        &cert,
        "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let cert = cert.to_str().unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("e.db").display());
    for (extra, expected) in [
        (
            vec!["--store", "etcd://127.0.0.1:0"],
            vec!["--store 'etcd://127.0.0.1:0'", "port '0'"],
        ),
        (
            vec!["--store", "etcd://127.0.0.1:1,,127.0.0.1:2"],
            vec!["empty endpoint"],
        ),
        (
            vec!["--store", "etcd://root:pw@127.0.0.1:1"],
            vec!["unexpected '@'", "--etcd-user"],
        ),
        (
            vec!["--store", "etcd://root:hunter2@127.0.0.1:1"],
            vec!["--store 'etcd://***@127.0.0.1:1'", "unexpected '@'"],
        ),
        (
            vec!["--store", "http://127.0.0.1:1"],
            vec!["etcd://HOST:PORT", "etcd://127.0.0.1:1"],
        ),
        (
            vec!["--store", "etcd://http://127.0.0.1:1"],
            vec!["list endpoints as HOST:PORT after one etcd://"],
        ),
        (
            vec!["--store", "etcd://::1"],
            vec!["IPv6 addresses go in brackets: [::1]"],
        ),
        (vec!["--store", "etcd://127.0.0.1:+1"], vec!["port '+1'"]),
        (
            vec!["--store", "etcd://127.0.0.1:1/a%20b"],
            vec!["namespace '/a%20b'", "percent-decode"],
        ),
        (
            // Schemes are case-insensitive: the URL is accepted, and the
            // user without a password is what is wrong.
            vec!["--store", "ETCD://127.0.0.1:1", "--etcd-user", "root"],
            vec!["--etcd-user 'root' needs a password"],
        ),
        (
            vec![
                "--store",
                "etcds://127.0.0.1:1",
                "--etcd-cacert",
                cert,
                "--etcd-cert",
                cert,
                "--etcd-key",
                cert,
            ],
            vec![
                "--etcd-key",
                "holds no PRIVATE KEY block",
                "--etcd-cert takes that",
            ],
        ),
        (
            vec!["--store", "etcd://127.0.0.1:1", "--etcd-cacert", ca],
            vec!["--etcd-cacert is set", "etcds://"],
        ),
        (
            vec!["--store", "etcds://127.0.0.1:1", "--etcd-cacert", ca],
            vec!["--etcd-cacert", "not a PEM file"],
        ),
        (
            vec!["--store", "etcd://127.0.0.1:1", "--etcd-user", "root"],
            vec![
                "--etcd-user 'root' needs a password",
                "REGENT_ETCD_PASSWORD",
            ],
        ),
        (
            vec!["--store", &sqlite, "--etcd-user", "root"],
            vec!["--etcd-user applies only to etcd stores"],
        ),
    ] {
        let mut args = vec!["status", "--election", "e"];
        args.extend_from_slice(&extra);
        usage_error(&args, &expected);
    }
    // Regression: a password typed into the URL was printed back.
    let out = run_bounded(
        &[
            "status",
            "--election",
            "e",
            "--store",
            "etcd://root:hunter2@127.0.0.1:1",
        ],
        Duration::from_secs(10),
    );
    assert!(
        !out.stderr.contains("hunter2"),
        "the password is printed:\n{}",
        out.stderr
    );
}

#[test]
fn empty_election() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("e.db").display());
    usage_error(
        &["run", "--store", &store, "--election", "", "--", "true"],
        &["--election", "must not be empty"],
    );
}

#[test]
fn bad_election_characters() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("e.db").display());
    for bad in ["a b", "a/b", "jobs:1"] {
        usage_error(
            &["run", "--store", &store, "--election", bad, "--", "true"],
            &["--election", "allowed are"],
        );
        usage_error(
            &["status", "--store", &store, "--election", bad],
            &["--election", "allowed are"],
        );
    }
}

#[test]
fn bad_id() {
    let dir = tempfile::tempdir().unwrap();
    run_with(&dir, &["--id", ""], &["--id", "must not be empty"]);
    run_with(&dir, &["--id", "a b"], &["--id", "contains ' '"]);
}

#[test]
fn missing_command() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("e.db").display());
    usage_error(
        &["run", "--store", &store, "--election", "e"],
        &["<CMD>", "required"],
    );
    usage_error(
        &["run", "--store", &store, "--election", "e", "--"],
        &["<CMD>", "required"],
    );
}

#[test]
fn demo_with_one_candidate() {
    usage_error(
        &["demo", "--candidates", "1"],
        &["--candidates", "between 2 and 20"],
    );
    usage_error(
        &["demo", "--candidates", "21"],
        &["--candidates", "between 2 and 20"],
    );
}

#[test]
fn bad_start_retry_variable() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("e.db").display());
    let out = run_bounded_env(
        &["status", "--store", &store, "--election", "e"],
        &[("REGENT_START_RETRY", "5")],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("REGENT_START_RETRY"), "{}", out.stderr);
}

/// Priorities and hand-overs: a priority that is not a number, a zero
/// settle time, an id that is not one, a zero timeout.
#[test]
fn bad_priority_and_handover_flags() {
    let dir = tempfile::tempdir().unwrap();
    run_with(&dir, &["--priority", "high"], &["--priority", "high"]);
    run_with(
        &dir,
        &["--settle", "0s"],
        &["--settle must be greater than zero"],
    );
    let store = format!("sqlite:{}", dir.path().join("s.db").display());
    usage_error(
        &[
            "handover",
            "--store",
            &store,
            "--election",
            "jobs",
            "--to",
            "a b",
        ],
        &["--to"],
    );
    usage_error(
        &[
            "handover",
            "--store",
            &store,
            "--election",
            "jobs",
            "--timeout",
            "0s",
        ],
        &["--timeout must be greater than zero"],
    );
    usage_error(
        &["handover", "--store", &store, "--election", "no/way"],
        &["election"],
    );
}
