//! `--health-timeout`: a command that stops writing to
//! `$REGENT_HEARTBEAT_FD` makes its leader step down; and terms that end at
//! once do not make a hot loop of campaigns.

mod common;

use std::time::Duration;

use common::*;
use rustix::process::Signal;

fn args(sb: &Sandbox, id: &str, extra: &[&str], cmd: &[String]) -> Vec<String> {
    let mut flags = vec!["--id", id];
    flags.extend_from_slice(extra);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    sb.run_args(&flags, &cmd)
}

/// Also pins that the descriptor works from dash, which accepts only
/// single-digit descriptors in `>&N`.
fn a_silent_command_makes_its_leader_step_down(mut sb: Sandbox) {
    let script = format!(
        "for i in 1 2 3; do echo beat >&$REGENT_HEARTBEAT_FD || exit 9; sleep 0.2; done; \
         exec '{REGENT}' __demo-task --log '{log}' --log-stop",
        log = sb.log().display()
    );
    let cmd = vec!["sh".to_string(), "-c".to_string(), script];
    let a = args(&sb, "c1", &["--health-timeout", "1s"], &cmd);
    sb.spawn("c1", &a);
    let first = sb.first_start(Duration::from_secs(10));
    let stop = wait_for(
        Duration::from_secs(6),
        "the silent command to be stopped",
        || sb.stop_of(&first.id, first.token),
        || sb.report(),
    );
    let silent_for = secs(stop.mono_ns - first.mono_ns);
    assert!(
        (0.5..=2.5).contains(&silent_for),
        "stopped {silent_for:.2}s after its last beats; health timeout 1s\n{}",
        sb.report()
    );
    let stderr = sb.regent(0).stderr();
    assert!(stderr.contains("no heartbeat"), "{stderr}");
    assert!(!stderr.contains("Bad fd number"), "{stderr}");
}

fn commands_that_fail_at_once_are_restarted_with_backoff(mut sb: Sandbox) {
    let count = sb.path("runs");
    let script = format!("echo run >> '{}'; exit 1", count.display());
    let cmd = vec!["sh".to_string(), "-c".to_string(), script];
    let a = args(&sb, "c1", &["--restart", "always"], &cmd);
    let i = sb.spawn("c1", &a);
    let runs = || {
        std::fs::read_to_string(&count)
            .unwrap_or_default()
            .lines()
            .count()
    };
    // Restarted: a second run comes (after the backoff, and after the pause
    // that leaves a given-back term to waiting followers first: up to the
    // store's poll interval + 250 ms).
    wait_for(
        Duration::from_secs(10),
        "a second run",
        || (runs() >= 2).then_some(()),
        || sb.report(),
    );
    // Let it fail for a while; without a backoff this is hundreds of runs.
    std::thread::sleep(Duration::from_secs(3));
    sb.regent(i).signal(Signal::TERM);
    let status = sb.regent(i).wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    let runs = runs();
    assert!(runs <= 20, "{runs} runs in about 3 s");
}

/// Regression: one SIGTERM while regent was stopping a command after a
/// step-down was taken for the second signal: exit 130, lease not released.
fn one_sigterm_during_a_step_down_still_shuts_down_cleanly(mut sb: Sandbox) {
    let cmd = vec![
        "sh".to_string(),
        "-c".to_string(),
        "trap '' TERM; while :; do sleep 0.1; done".to_string(),
    ];
    let a = args(&sb, "c1", &["--health-timeout", "1s"], &cmd);
    let i = sb.spawn("c1", &a);
    let err = sb.path("c1.err");
    wait_for(
        Duration::from_secs(10),
        "the step-down for silence",
        || {
            std::fs::read_to_string(&err)
                .unwrap_or_default()
                .contains("no heartbeat")
                .then_some(())
        },
        || sb.report(),
    );
    // The command ignores SIGTERM: regent is now waiting out its grace.
    sb.regent(i).signal(Signal::TERM);
    let status = sb.regent(i).wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{}", sb.regent(i).stderr());
}

regent_testkit::for_every_engine!(
    Sandbox::with_engine,
    [
        a_silent_command_makes_its_leader_step_down,
        commands_that_fail_at_once_are_restarted_with_backoff,
        one_sigterm_during_a_step_down_still_shuts_down_cleanly,
    ]
);
