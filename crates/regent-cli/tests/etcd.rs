//! `regent` on etcd, beyond the tests every store runs (see
//! `regent_testkit::for_every_engine!`): an unreachable cluster at start, a
//! cluster that dies under a leader and comes back, sharing an election with
//! `etcdctl elect` under a namespace, and TLS with client certificates and a
//! user.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use regent_testkit::engines::{Etcd, EtcdTls};

/// ttl 2s: renew every 400 ms, step down 1.2 s after the last renewal was
/// sent, grace 775 ms (core defaults).
const TTL: &str = "2s";
const RENEW_DEADLINE_NS: u64 = 1_200_000_000;

#[test]
fn an_unreachable_cluster_is_exit_3_after_retries_naming_the_store() {
    // Ports 1 and 2: privileged, so no test's etcd can be listening there.
    let store = "etcd://127.0.0.1:1,127.0.0.1:2";
    assert_unavailable_at_start(
        store,
        &[&format!("regent: store {store}: store unavailable")],
    );
}

/// etcd dies under a leader: its command stops at the renew deadline,
/// regent stays up, and when etcd is back exactly one candidate leads
/// again, with a larger token.
#[test]
fn a_dead_cluster_stops_the_command_and_regent_leads_again_when_it_returns() {
    let mut sb = Sandbox::etcd();
    sb.candidate("c1", TTL, &[]);
    let old = sb.first_start(Duration::from_secs(10));
    sb.candidate("c2", TTL, &[]);
    std::thread::sleep(Duration::from_millis(500));

    let killed_at = mono_ns();
    sb.etcd_engine_mut().kill();
    let stop = wait_for(
        Duration::from_secs(5),
        "the leader's command to get SIGTERM",
        || sb.stop_of(&old.id, old.token),
        || sb.report(),
    );
    let took = stop.mono_ns - killed_at;
    eprintln!("etcd killed -> command stopped: {:.3}s", secs(took));
    // The last renewal was sent at most one renew interval before the kill,
    // so the step-down comes at most the renew deadline after the kill.
    assert!(
        took <= RENEW_DEADLINE_NS + 700_000_000,
        "the command stopped {:.3}s after etcd died, later than the renew deadline\n{}",
        secs(took),
        sb.report()
    );
    std::thread::sleep(Duration::from_secs(1));
    for id in ["c1", "c2"] {
        assert!(
            sb.by_id(id).running(),
            "{id} exited while etcd was down\n{}",
            sb.report()
        );
    }
    assert_eq!(
        sb.starts().len(),
        1,
        "a term began without etcd\n{}",
        sb.report()
    );

    sb.etcd_engine_mut().restart().expect("restart etcd");
    let next = wait_for(
        Duration::from_secs(15),
        "a leader after etcd came back",
        || sb.start_after(old.token),
        || sb.report(),
    );
    eprintln!(
        "etcd back: {} leads with token {} (was {} with {})",
        next.id, next.token, old.id, old.token
    );
    // One more ttl: no second task may start beside it.
    std::thread::sleep(Duration::from_secs(2));
    let starts = sb.starts();
    assert_eq!(starts.len(), 2, "more than one new term\n{}", sb.report());
    assert_tokens_increase(&starts, &sb.report());
    assert_eq!(sb.status()["leader"]["token"], next.token);
}

/// `etcdctl elect NAME` and `regent run` on `etcd://…/NAMESPACE` with
/// election `e` meet under the key prefix `/NAMESPACE/e/`: regent waits
/// behind etcdctl's leader, `regent status` names it, and when etcdctl
/// resigns regent leads and `etcdctl elect -l` names regent's leader.
#[test]
fn etcdctl_elect_and_regent_share_one_election_under_a_namespace() {
    let mut sb = Sandbox::etcd();
    let store = format!("etcd://{}/team/jobs", sb.etcd_engine().endpoint());
    let mut elect = etcdctl_spawn(&sb, "elect", &["elect", "/team/jobs/e", "go-leader"]);
    wait_for(
        Duration::from_secs(10),
        "etcdctl's leader in regent status",
        || (status_json(&store, &[])["leader"]["id"] == "go-leader").then_some(()),
        || sb.report(),
    );
    sb.candidate_on(&store, "c1", TTL, &[]);
    // regent's key queues behind etcdctl's; then a few renewal rounds.
    wait_for(
        Duration::from_secs(10),
        "regent's key in line behind etcdctl's",
        || {
            let keys = sb
                .etcd_engine()
                .etcdctl(["get", "--prefix", "--keys-only", "/team/jobs/e/"])
                .stdout;
            (String::from_utf8_lossy(&keys)
                .lines()
                .filter(|l| !l.is_empty())
                .count()
                == 2)
                .then_some(())
        },
        || sb.report(),
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        sb.starts().is_empty(),
        "regent led beside etcdctl's leader\n{}",
        sb.report()
    );

    // etcdctl resigns on SIGINT (it deletes its key).
    signal(
        i32::try_from(elect.id()).unwrap(),
        rustix::process::Signal::INT,
    );
    let _ = elect.wait();
    let term = sb.first_start(Duration::from_secs(10));
    let mut listen = etcdctl_spawn(&sb, "listen", &["elect", "-l", "/team/jobs/e"]);
    let out = sb.path("listen.out");
    let first_lines = wait_for(
        Duration::from_secs(10),
        "two lines from etcdctl elect -l",
        || {
            let text = std::fs::read_to_string(&out).ok()?;
            let lines: Vec<String> = text.lines().map(str::to_owned).collect();
            (lines.len() >= 2).then_some(lines)
        },
        || sb.report(),
    );
    let _ = listen.kill();
    let _ = listen.wait();
    assert!(
        first_lines[0].starts_with("/team/jobs/e/") && first_lines[1].contains("\"holder\":\"c1\""),
        "etcdctl elect -l printed {first_lines:?} while {term:?} leads"
    );
}

/// Starts `etcdctl ARGS` on the sandbox's etcd, its output in
/// `DIR/NAME.out` and `DIR/NAME.err` (which the report shows).
fn etcdctl_spawn(sb: &Sandbox, name: &str, args: &[&str]) -> std::process::Child {
    let out = std::fs::File::create(sb.path(&format!("{name}.out"))).unwrap();
    let err = std::fs::File::create(sb.path(&format!("{name}.err"))).unwrap();
    sb.etcd_engine()
        .etcdctl_command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("etcdctl")
}

/// TLS with a client certificate and a user: flags for `run`, the
/// environment variables for `status`; a wrong password is a usage error
/// (exit 2) that names the user and never the password.
#[test]
fn tls_with_client_certificates_and_a_user() {
    let etcd = Etcd::builder()
        .tls(EtcdTls::ClientCert)
        .auth("app", "app-secret")
        .start()
        .unwrap_or_else(|e| panic!("cannot start a secured etcd: {e}"));
    let files = etcd.tls_files().expect("tls files").clone();
    let store = format!("etcds://{}", etcd.endpoint());
    let mut sb = Sandbox::with_etcd(etcd);
    let password_file = sb.path("password");
    std::fs::write(&password_file, "app-secret\n").unwrap();
    let (ca, cert, key, pw) = (
        files.ca_cert().display().to_string(),
        files.client_cert().display().to_string(),
        files.client_key().display().to_string(),
        password_file.display().to_string(),
    );
    sb.candidate_on(
        &store,
        "c1",
        TTL,
        &[
            "--etcd-cacert",
            &ca,
            "--etcd-cert",
            &cert,
            "--etcd-key",
            &key,
            "--etcd-user",
            "app",
            "--etcd-password-file",
            &pw,
        ],
    );
    let term = sb.first_start(Duration::from_secs(10));

    let env = [
        ("REGENT_ETCD_CACERT", ca.as_str()),
        ("REGENT_ETCD_CERT", cert.as_str()),
        ("REGENT_ETCD_KEY", key.as_str()),
        ("REGENT_ETCD_USER", "app"),
        ("REGENT_ETCD_PASSWORD", "app-secret"),
    ];
    let v = status_json(&store, &env);
    assert_eq!(v["leader"]["id"], "c1", "{v}");
    assert_eq!(v["leader"]["token"], term.token, "{v}");

    // Without a CA file, etcds:// trusts the system's CA store, which
    // SSL_CERT_FILE replaces (as for OpenSSL): the test CA there works, and
    // without it the server's certificate is refused at once (exit 2).
    let status = [
        "status",
        "--store",
        &store,
        "--election",
        ELECTION,
        "--json",
    ];
    let system = |ca: &str| {
        let env = [
            ("SSL_CERT_FILE", ca),
            ("SSL_CERT_DIR", "/nonexistent"),
            env[1],
            env[2],
            env[3],
            env[4],
        ];
        run_bounded_env(&status, &env, Duration::from_secs(15))
    };
    let out = system(&ca);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("\"c1\""), "{}", out.stdout);
    let out = system(&files.other_ca_cert().display().to_string());
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("certificate"), "{}", out.stderr);

    let mut wrong = env;
    wrong[4] = ("REGENT_ETCD_PASSWORD", "not-the-secret");
    let out = run_bounded_env(&status, &wrong, Duration::from_secs(15));
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("user 'app'") && !out.stderr.contains("not-the-secret"),
        "{}",
        out.stderr
    );

    // A server certificate from a CA regent was not told to trust is a
    // configuration error, reported at once rather than retried.
    let mut untrusted = env;
    let other_ca = files.other_ca_cert().display().to_string();
    untrusted[0] = ("REGENT_ETCD_CACERT", other_ca.as_str());
    let out = run_bounded_env(&status, &untrusted, Duration::from_secs(15));
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("certificate") && out.took < Duration::from_secs(5),
        "{:?}: {}",
        out.took,
        out.stderr
    );

    // No client certificate where etcd requires one: etcd refuses it after
    // the client's side of the TLS 1.3 handshake is done, so regent sees
    // either the refusal (exit 2) or a closed connection (exit 3 after the
    // retries). The store's message says what the closed connection may
    // mean, and regent names the flags that give a client certificate.
    let no_cert = [env[0], ("REGENT_START_RETRY", "1s"), env[3], env[4]];
    let out = run_bounded_env(&status, &no_cert, Duration::from_secs(15));
    no_panic(&out);
    eprintln!("no client certificate: exit {:?}\n{}", out.code, out.stderr);
    let flags = "hint: regent presented no client certificate; if etcd requires one, pass it \
                 with --etcd-cert FILE and --etcd-key FILE";
    match out.code {
        Some(2) => assert!(
            out.stderr
                .contains("the server refused the client's TLS certificate")
                && out.stderr.contains(flags),
            "{}",
            out.stderr
        ),
        Some(3) => assert!(
            out.stderr.contains(
                "the server closed the connection after it was made; with TLS this is how \
                 etcd refuses a missing or untrusted client certificate"
            ) && out.stderr.contains(flags),
            "{}",
            out.stderr
        ),
        other => panic!("exit {other:?}: {}", out.stderr),
    }
}

/// A user who may read but not write the election's keys: `status` works,
/// `run` cannot campaign and exits 2 (a configuration error), naming the
/// key prefix the user needs and how to grant it.
#[test]
fn a_user_without_write_permission_is_exit_2_naming_the_prefix() {
    let etcd = Etcd::builder()
        .auth("root", "root-secret")
        .start()
        .unwrap_or_else(|e| panic!("cannot start etcd: {e}"));
    for step in [
        vec!["user", "add", "reader:reader-secret"],
        vec!["role", "add", "readers"],
        vec![
            "role",
            "grant-permission",
            "readers",
            "--prefix=true",
            "read",
            "/",
        ],
        vec!["user", "grant-role", "reader", "readers"],
    ] {
        let out = etcd.etcdctl(&step);
        assert!(out.status.success(), "etcdctl {step:?}: {out:?}");
    }
    let store = format!("etcd://{}/ns", etcd.endpoint());
    let env = [
        ("REGENT_ETCD_USER", "reader"),
        ("REGENT_ETCD_PASSWORD", "reader-secret"),
    ];
    assert_eq!(status_json(&store, &env)["leader"], serde_json::Value::Null);
    let args = run_args_on(&store, &["--ttl", "2s"], &["true"]);
    let out = run_owned(&args, &env, Duration::from_secs(15));
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("permission denied")
            && out
                .stderr
                .contains("the user needs read and write permission on the keys under '/ns/e/'")
            && out
                .stderr
                .contains("etcdctl role grant-permission ROLE --prefix=true readwrite '/ns/e/'")
            && !out.stderr.contains("reader-secret"),
        "{}",
        out.stderr
    );
}

/// Regression: a follower stopped by SIGTERM left its key in line until
/// its lease expired, so when the leader then stopped too, the election
/// showed a leader that was gone and the next candidate waited a ttl.
#[test]
fn a_stopped_follower_takes_its_key_out_of_line_at_once() {
    let mut sb = Sandbox::etcd();
    sb.candidate("c1", "10s", &[]);
    let term = sb.first_start(Duration::from_secs(10));
    let c2 = sb.candidate("c2", "10s", &[]);
    let keys = |sb: &Sandbox| {
        let out = sb
            .etcd_engine()
            .etcdctl(["get", "--prefix", "--keys-only", "e/"])
            .stdout;
        String::from_utf8_lossy(&out)
            .lines()
            .filter(|l| !l.is_empty())
            .count()
    };
    wait_for(
        Duration::from_secs(10),
        "c2's key in line",
        || (keys(&sb) == 2).then_some(()),
        || sb.report(),
    );
    sb.regent(c2).signal(rustix::process::Signal::TERM);
    let status = sb.regent(c2).wait_exit(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0), "{}", sb.report());
    assert_eq!(keys(&sb), 1, "c2's key outlived c2\n{}", sb.report());
    assert_eq!(sb.status()["leader"]["token"], term.token);
}
