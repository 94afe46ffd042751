//! `regent status --peer` and `regent watch --peer` end to end: three real
//! `regent peer` processes on 127.0.0.1; any member's address names the
//! leader and its token; a watch prints the successor after the leader's
//! SIGTERM; another secret gets no answer (exit 3); the flags' rules are
//! usage errors (exit 2); a member that is not there is exit 3 after the
//! start window's retries.

mod common;

use std::time::Duration;

use common::{Event, Sandbox, free_ports, mono_ns, no_panic, run_bounded_env, secs, wait_for};
use rustix::process::Signal;
use serde_json::json;

const SECRET: &str = "the three members' shared secret";
const ELECTION: &str = "jobs";

/// Three Bully members of election `jobs`, running, with the first
/// leader's task started (member 3).
struct Group {
    sandbox: Sandbox,
    addrs: Vec<String>,
    first: Event,
}

impl Group {
    fn start() -> Self {
        let mut sandbox = Sandbox::new();
        std::fs::write(sandbox.path("secret"), format!("{SECRET}\n")).unwrap();
        std::fs::write(sandbox.path("wrong"), "not the members' secret at all").unwrap();
        let addrs: Vec<String> = free_ports(3)
            .into_iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        let peers = addrs
            .iter()
            .enumerate()
            .map(|(i, addr)| format!("{}={addr}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let secret = sandbox.path("secret");
        for id in 1..=3 {
            let mut args: Vec<String> = [
                "peer",
                "--algorithm",
                "bully",
                "--id",
                &id.to_string(),
                "--peers",
                &peers,
                "--secret-file",
                secret.to_str().unwrap(),
                "--election",
                ELECTION,
                "--heartbeat-interval",
                "100ms",
                "--failure-timeout",
                "1s",
                "--grace",
                "300ms",
                "--",
            ]
            .map(String::from)
            .to_vec();
            args.extend(sandbox.task_cmd());
            sandbox.spawn(&id.to_string(), &args);
        }
        // A lower member up alone for a failure timeout (members start one
        // after another, slowly on a loaded host) may lead briefly first.
        let mut first = wait_for(
            Duration::from_secs(15),
            "the first leader's task",
            || sandbox.start_after(0),
            || sandbox.report(),
        );
        for _ in 0..3 {
            if first.id == "3" {
                break;
            }
            let after = first.token;
            first = wait_for(
                Duration::from_secs(15),
                "3's term",
                || sandbox.start_after(after),
                || sandbox.report(),
            );
        }
        assert_eq!(first.id, "3", "{}", sandbox.report());
        Self {
            sandbox,
            addrs,
            first,
        }
    }

    fn secret_file(&self, name: &str) -> String {
        self.sandbox.path(name).to_str().unwrap().to_owned()
    }
}

/// `regent ARGS` with `env`, within 15 s.
fn regent(args: &[&str], env: &[(&str, &str)]) -> common::Output {
    let out = run_bounded_env(args, env, Duration::from_secs(15));
    no_panic(&out);
    out
}

#[test]
fn status_names_the_leader_and_its_token_on_any_members_address() {
    let g = Group::start();
    let token = g.first.token;
    for addr in &g.addrs {
        let out = regent(
            &["status", "--peer", addr, "--json"],
            &[("REGENT_PEER_SECRET", SECRET)],
        );
        assert_eq!(out.code, Some(0), "{addr}: {}", out.stderr);
        let printed: serde_json::Value = serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("{addr}: status printed {:?}: {e}", out.stdout));
        assert_eq!(
            printed,
            json!({"election": ELECTION, "leader": {"id": "3", "token": token, "metadata": {}}}),
            "{addr}"
        );
    }

    // The human line, the secret from a file, and --election checked.
    let secret = g.secret_file("secret");
    let addr = g.addrs[0].as_str();
    let out = regent(
        &[
            "status",
            "--peer",
            addr,
            "--secret-file",
            &secret,
            "--election",
            ELECTION,
        ],
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        format!("election {ELECTION}: leader 3 (token {token})")
    );
    let out = regent(
        &[
            "status",
            "--peer",
            addr,
            "--secret-file",
            &secret,
            "--election",
            "other",
        ],
        &[],
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("--election other") && out.stderr.contains(ELECTION),
        "{}",
        out.stderr
    );

    // Another secret: the member drops the query; no answer, exit 3.
    let wrong = g.secret_file("wrong");
    let out = regent(
        &["status", "--peer", addr, "--secret-file", &wrong, "--json"],
        &[],
    );
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "no answer from {addr} within 2s (is the secret the group's?)"
        )),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}

#[test]
fn watch_prints_the_new_leader_after_the_leaders_sigterm() {
    let mut g = Group::start();
    let secret = g.secret_file("secret");
    let args: Vec<String> = ["watch", "--peer", &g.addrs[0], "--secret-file", &secret]
        .map(String::from)
        .to_vec();
    let watch = g.sandbox.spawn("watch", &args);
    let out = g.sandbox.path("watch.out");
    let lines = || std::fs::read_to_string(&out).unwrap_or_default();
    let first_line = format!("election {ELECTION}: leader 3 (token {})", g.first.token);
    wait_for(
        Duration::from_secs(10),
        "the watch's first line",
        || lines().lines().any(|l| l == first_line).then_some(()),
        || format!("--- watch.out\n{}\n{}", lines(), g.sandbox.report()),
    );

    let asked = mono_ns();
    g.sandbox.by_id("3").signal(Signal::TERM);
    let second = wait_for(
        Duration::from_secs(5),
        "the successor after SIGTERM",
        || g.sandbox.start_after(g.first.token),
        || g.sandbox.report(),
    );
    assert_eq!(second.id, "2", "{}", g.sandbox.report());
    let second_line = format!("election {ELECTION}: leader 2 (token {})", second.token);
    wait_for(
        Duration::from_secs(5),
        "the watch to print the successor",
        || lines().lines().any(|l| l == second_line).then_some(()),
        || format!("--- watch.out\n{}\n{}", lines(), g.sandbox.report()),
    );
    let printed = mono_ns();
    eprintln!(
        "watch --peer: the successor printed {:.3}s after SIGTERM ({:.3}s after its task started)",
        secs(printed - asked),
        secs(printed.saturating_sub(second.mono_ns))
    );
    // Every line is one of the documented forms, in order, the new leader last.
    let text = lines();
    assert!(
        text.lines().all(|l| l == first_line
            || l == second_line
            || l == format!("election {ELECTION}: no leader")),
        "{text}"
    );
    assert_eq!(text.lines().last(), Some(second_line.as_str()), "{text}");

    g.sandbox.regent(watch).signal(Signal::TERM);
    let status = g.sandbox.regent(watch).wait_exit(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
}

/// Runs `regent ARGS` and checks exit 2, no panic, and every `needle` in
/// stderr, at once (no connection tried).
fn usage_error(args: &[&str], env: &[(&str, &str)], needles: &[&str]) {
    let out = regent(args, env);
    assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
    for needle in needles {
        assert!(
            out.stderr.contains(needle),
            "{args:?}: no {needle:?} in\n{}",
            out.stderr
        );
    }
    assert!(
        out.took < Duration::from_secs(2),
        "{args:?} took {:?}",
        out.took
    );
}

#[test]
fn the_peer_flags_rules_are_usage_errors() {
    let secret = [("REGENT_PEER_SECRET", SECRET)];
    for command in ["status", "watch"] {
        usage_error(
            &[
                command,
                "--peer",
                "127.0.0.1:1",
                "--store",
                "sqlite:/tmp/x.db",
                "--election",
                "e",
            ],
            &secret,
            &["--peer", "--store"],
        );
        usage_error(
            &[command, "--secret-file", "/nonexistent", "--election", "e"],
            &[],
            &["--peer"],
        );
        usage_error(&[command], &[], &["--election"]);
        usage_error(
            &[command, "--peer", "127.0.0.1"],
            &secret,
            &["--peer '127.0.0.1' is not HOST:PORT"],
        );
        usage_error(
            &[command, "--peer", "127.0.0.1:1", "--etcd-user", "app"],
            &secret,
            &["--etcd-user is a store's flag", "--peer"],
        );
        usage_error(
            &[command, "--peer", "127.0.0.1:1", "--peer-timeout", "0s"],
            &secret,
            &["--peer-timeout"],
        );
        usage_error(
            &[
                command,
                "--peer",
                "127.0.0.1:1",
                "--secret-file",
                "/nonexistent",
            ],
            &[],
            &["--secret-file /nonexistent"],
        );
        usage_error(
            &[command, "--peer", "127.0.0.1:1"],
            &[("REGENT_PEER_SECRET", "short")],
            &["REGENT_PEER_SECRET", "at least 16"],
        );
    }
}

#[test]
fn a_member_that_is_not_there_is_exit_3_after_the_start_window() {
    let addr = format!("127.0.0.1:{}", free_ports(1)[0]);
    for command in ["status", "watch"] {
        let out = regent(
            &[command, "--peer", &addr, "--json"],
            &[("REGENT_PEER_SECRET", SECRET), ("REGENT_START_RETRY", "1s")],
        );
        assert_eq!(out.code, Some(3), "{command}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("cannot connect to {addr}")),
            "{command}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("retrying"), "{command}: {}", out.stderr);
        assert!(
            out.took >= Duration::from_secs(1) && out.took < Duration::from_secs(6),
            "{command}: gave up after {:?}",
            out.took
        );
        assert!(out.stdout.is_empty(), "{command}: {}", out.stdout);
    }
}
