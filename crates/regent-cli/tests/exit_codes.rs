//! `regent run`'s exit status: the command's own with `--restart never`
//! (128+signal if killed, 127 if it cannot start), 0 after a clean end or a
//! stop signal.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rustix::process::Signal;

/// `regent run --store STORE --election e --ttl TTL EXTRA -- CMD` (the
/// sandbox's ttl), to its end.
fn run(sb: &Sandbox, extra: &[&str], cmd: &[&str]) -> Output {
    let out = sb.run_owned(&sb.run_args(extra, cmd), &[], Duration::from_secs(15));
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    out
}

fn restart_never_exits_with_the_commands_status(sb: Sandbox) {
    let out = run(&sb, &["--restart", "never"], &["sh", "-c", "exit 7"]);
    assert_eq!(out.code, Some(7), "{}", out.stderr);
}

fn restart_never_exits_128_plus_the_signal_that_killed_the_command(sb: Sandbox) {
    let out = run(&sb, &["--restart", "never"], &["sh", "-c", "kill -9 $$"]);
    assert_eq!(out.code, Some(128 + 9), "{}", out.stderr);
    let out = run(&sb, &["--restart", "never"], &["sh", "-c", "kill -TERM $$"]);
    assert_eq!(out.code, Some(128 + 15), "{}", out.stderr);
}

fn restart_on_failure_ends_with_0_after_a_clean_exit(sb: Sandbox) {
    let out = run(&sb, &["--restart", "on-failure"], &["true"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

fn a_command_that_does_not_exist_exits_127_naming_it(sb: Sandbox) {
    let out = run(
        &sb,
        &["--restart", "never"],
        &["/nonexistent/regent-e2e-cmd"],
    );
    assert_eq!(out.code, Some(127), "{}", out.stderr);
    assert!(
        out.stderr.contains("/nonexistent/regent-e2e-cmd"),
        "{}",
        out.stderr
    );
}

fn restart_on_failure_runs_a_failing_command_again(mut sb: Sandbox) {
    let runs = sb.path("runs");
    let script = format!("echo $REGENT_FENCING_TOKEN >> '{}'; exit 3", runs.display());
    let args = sb.run_args(&["--restart", "on-failure"], &["sh", "-c", &script]);
    let i = sb.spawn("c1", &args);
    let tokens: Vec<u64> = wait_for(
        Duration::from_secs(10),
        "three runs of the failing command",
        || {
            let t: Vec<u64> = std::fs::read_to_string(&runs)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            (t.len() >= 3).then_some(t)
        },
        || sb.report(),
    );
    // Each run is a new term with a new token.
    assert!(tokens.windows(2).all(|w| w[1] > w[0]), "tokens {tokens:?}");
    sb.regent(i).signal(Signal::TERM);
    let status = sb.regent(i).wait_exit(Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
}

/// On SIGTERM regent stops the command (SIGTERM, grace, SIGKILL); a second
/// signal makes it exit at once, and the shim still finishes the stop.
fn a_second_signal_exits_at_once_and_the_command_still_dies(mut sb: Sandbox) {
    let log = sb.log();
    // The task ignores SIGTERM (inherited SIG_IGN), so only SIGKILL after
    // the grace of 2 s ends it.
    let script = format!(
        "trap '' TERM; exec '{REGENT}' __demo-task --log '{}'",
        log.display()
    );
    // A ttl with room for the grace: 10 s, or the store's floor.
    let ttl = sb.timing().ttl_arg_at_least(Duration::from_secs(10));
    let args = run_args_on(
        &sb.store(),
        &["--ttl", &ttl, "--grace", "2s"],
        &["sh", "-c", &script],
    );
    let i = sb.spawn("c1", &args);
    let task = sb.first_start(Duration::from_secs(10));
    sb.regent(i).signal(Signal::TERM);
    std::thread::sleep(Duration::from_millis(300));
    assert!(sb.regent(i).running(), "regent did not wait for the grace");
    let second = Instant::now();
    sb.regent(i).signal(Signal::TERM);
    sb.regent(i).wait_exit(Duration::from_millis(800));
    eprintln!("second signal: exit after {:?}", second.elapsed());
    wait_for(
        Duration::from_secs(4),
        "the task that ignores SIGTERM to be SIGKILLed after the grace",
        || (!alive(task.pid) && group_members(task.pid).is_empty()).then_some(()),
        || sb.report(),
    );
}

/// Regression: the demo's lifeline (a closed stdin) began a graceful stop,
/// then read EOF again at once, which counted as a second signal: regent
/// exited 130 before releasing the lease, and its key (etcd) or row stayed
/// until the ttl ran out.
fn a_closed_lifeline_stops_gracefully_and_releases(sb: Sandbox) {
    let ttl = sb.timing().ttl_arg_at_least(Duration::from_secs(10));
    let args = run_args_on(
        &sb.store(),
        &["--ttl", &ttl, "--lifeline-stdin"],
        &["sleep", "1000"],
    );
    let mut regent = sb
        .command()
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(sb.path("lifeline.err")).unwrap())
        .spawn()
        .unwrap();
    wait_for(
        Duration::from_secs(10),
        "regent to lead",
        || (!sb.status()["leader"].is_null()).then_some(()),
        || sb.report(),
    );
    drop(regent.stdin.take());
    let status = wait_for(
        Duration::from_secs(10),
        "regent to exit",
        || regent.try_wait().unwrap(),
        || sb.report(),
    );
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        sb.status()["leader"].is_null(),
        "the lease outlived regent: {}",
        sb.status()
    );
}

regent_testkit::for_every_engine!(
    Sandbox::with_engine,
    [
        a_closed_lifeline_stops_gracefully_and_releases,
        restart_never_exits_with_the_commands_status,
        restart_never_exits_128_plus_the_signal_that_killed_the_command,
        restart_on_failure_ends_with_0_after_a_clean_exit,
        a_command_that_does_not_exist_exits_127_naming_it,
        restart_on_failure_runs_a_failing_command_again,
        a_second_signal_exits_at_once_and_the_command_still_dies,
    ]
);
