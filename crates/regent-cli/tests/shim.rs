//! The shim between regent and the command: the command's environment, and
//! nothing the command started outlives its term, even when the command
//! ends by itself.

mod common;

use std::time::Duration;

use common::*;

/// `regent run --ttl TTL --restart never -- sh -c SCRIPT` in `sb` (the
/// sandbox's ttl), to its end.
fn run_script(sb: &Sandbox, script: &str) -> Output {
    run_script_env(sb, script, &[])
}

/// [`run_script`] with `env` added to regent's environment.
fn run_script_env(sb: &Sandbox, script: &str, env: &[(&str, &str)]) -> Output {
    let args = sb.run_args(&["--id", "c1", "--restart", "never"], &["sh", "-c", script]);
    let out = sb.run_owned(&args, env, Duration::from_secs(10));
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    out
}

fn read_pid(path: &std::path::Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

fn the_command_gets_the_election_its_id_and_its_fencing_token(sb: Sandbox) {
    let env = sb.path("env");
    let out = run_script(
        &sb,
        &format!(
            "echo \"$REGENT_ELECTION $REGENT_LEADER_ID $REGENT_FENCING_TOKEN\" > '{}'",
            env.display()
        ),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let env = std::fs::read_to_string(&env).unwrap();
    let token: u64 = env
        .strip_prefix("e c1 ")
        .and_then(|t| t.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("expected 'e c1 TOKEN', got {env:?}"));
    assert!(token >= 1, "{env:?}");
}

/// Runs `sh -c '(<setup> exec <job>) & <then>'` in `sb` to its end, checks
/// it exited 0, and returns its output and the background job's pid.
fn run_with_background_job(sb: &Sandbox, setup: &str, job: &str, then: &str) -> (Output, i32) {
    let bg = sb.path("bg");
    let job = background_job(setup, job, &format!("'{}'", bg.display()));
    let out = run_script(sb, &format!("{job}; {then}"));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    (out, read_pid(&bg))
}

/// Waits up to a second for the background `sleep` with `pid` to be gone.
fn assert_background_job_dies(pid: i32) {
    wait_for(
        Duration::from_secs(1),
        "the background job to be gone",
        || (!alive_as(pid, "sleep")).then_some(()),
        || format!("pid {pid}: {}", cmdline(pid)),
    );
}

fn background_jobs_die_when_the_command_exits_by_itself(sb: Sandbox) {
    let (out, pid) = run_with_background_job(&sb, "", "sleep 1000", "exit 0");
    assert_background_job_dies(pid);
    eprintln!("regent ended {:?} after start", out.took);
}

fn background_jobs_that_ignore_sigterm_are_killed_after_the_grace(sb: Sandbox) {
    let (_, pid) = run_with_background_job(&sb, "trap '' TERM;", "sleep 1000", "exit 0");
    assert_background_job_dies(pid);
}

/// A job that left the command's process group (`setsid`) is still the
/// command's work: the shim, a child subreaper, inherits it when its parent
/// exits, and must not leave it behind.
fn background_jobs_that_left_the_process_group_die_too(sb: Sandbox) {
    // Give it time to leave the group before the command exits.
    let (_, pid) = run_with_background_job(&sb, "", "setsid sleep 1000", "sleep 0.3; exit 0");
    let left = alive_as(pid, "sleep");
    if left {
        signal(pid, rustix::process::Signal::KILL);
    }
    assert!(!left, "the setsid job {pid} outlived the command");
}

/// Regression: when the shim itself was SIGKILLed, nothing stopped the
/// command — it ran on, orphaned, and regent (restart always) started a
/// second copy next to it. Now the namespace's init stops it (or, without
/// a namespace, regent, a child subreaper, stops its orphans).
fn sigkill_of_the_shim_still_stops_the_command_and_its_jobs(sb: Sandbox) {
    sigkill_of_the_shim_stops_the_command(sb, &[]);
}

/// [`sigkill_of_the_shim_still_stops_the_command_and_its_jobs`] without a
/// PID namespace: regent, the child subreaper, stops its orphans.
fn without_a_namespace_regent_stops_what_a_killed_shim_left(sb: Sandbox) {
    sigkill_of_the_shim_stops_the_command(sb, &["--pid-namespace", "never"]);
}

fn sigkill_of_the_shim_stops_the_command(mut sb: Sandbox, flags: &[&str]) {
    let ttl = sb.ttl();
    let i = sb.candidate("c1", &ttl, flags);
    let first = sb.first_start(Duration::from_secs(10));
    let shim = sb
        .regent(i)
        .shim()
        .unwrap_or_else(|| panic!("no shim\n{}", sb.report()));
    signal(shim, rustix::process::Signal::KILL);
    sb.wait_term_gone(&first, Duration::from_secs(3));
    let stop = sb
        .stop_of(&first.id, first.token)
        .unwrap_or_else(|| panic!("the command got no SIGTERM\n{}", sb.report()));
    // regent campaigns again and runs a new term, after the old one ended.
    let next = wait_for(
        Duration::from_secs(5),
        "the next term",
        || sb.start_after(first.token),
        || sb.report(),
    );
    assert!(stop.mono_ns < next.mono_ns, "{}", sb.report());
    assert!(sb.regent(i).running());
}

/// Regression: if the shim did not finish stopping the command (here it
/// is SIGSTOPped), regent gave up waiting after grace + 3 s, released the
/// lease and campaigned again — and started a second shim and command next
/// to the first, which ran on. regent now kills the stuck shim and the
/// command's group before it lets the lease go.
///
/// Setup: regent and its shim are stopped past the step-down deadline, then
/// regent alone resumes; it finds its leadership over and asks the (still
/// stopped) shim to stop the command.
fn a_stuck_shim_is_killed_with_the_command_before_regent_leads_again(mut sb: Sandbox) {
    let timing = sb.timing();
    let c1 = sb.candidate("c1", &timing.ttl_arg(), &[]);
    let first = sb.first_start(Duration::from_secs(10));
    let shim = sb
        .regent(c1)
        .shim()
        .unwrap_or_else(|| panic!("no shim\n{}", sb.report()));
    signal(shim, rustix::process::Signal::STOP);
    sb.regent(c1).signal(rustix::process::Signal::STOP);
    // Past the step-down deadline (3·ttl/5).
    std::thread::sleep(timing.scaled(Duration::from_millis(1500)));
    sb.regent(c1).signal(rustix::process::Signal::CONT);
    let next = wait_for(
        timing.crash_failover() + Duration::from_secs(5),
        "c1's next term",
        || sb.start_after(first.token),
        || sb.report(),
    );
    let task_alive = alive(first.pid);
    let group = group_members(first.pid);
    signal(shim, rustix::process::Signal::CONT);
    assert!(
        !task_alive && group.is_empty(),
        "term {} started while term {}'s command ran on (alive: {task_alive}, group {group:?})\n{}",
        next.token,
        first.token,
        sb.report()
    );
    assert!(!alive(shim), "the stuck shim was left behind");
    assert!(sb.regent(c1).running(), "{}", sb.report());
}

/// Regression: the shim was started from `current_exe()`, a path that no
/// longer exists once the binary is replaced on disk (any package upgrade),
/// so every running `regent run` exited 1 at its next term: "cannot start
/// the supervisor shim: No such file or directory".
fn replacing_the_binary_on_disk_does_not_stop_a_running_regent(mut sb: Sandbox) {
    let bin = sb.path("regent-copy");
    std::fs::copy(REGENT, &bin).unwrap();
    let terms = sb.path("terms");
    let script = format!(
        "echo $REGENT_FENCING_TOKEN >> '{}'; sleep 0.1",
        terms.display()
    );
    let count = || {
        std::fs::read_to_string(&terms)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let args = sb.run_args(&[], &["sh", "-c", &script]);
    let i = sb.spawn_from("copy", &bin, &args);
    wait_for(
        Duration::from_secs(10),
        "a first term",
        || (count() >= 1).then_some(()),
        || sb.report(),
    );
    // Replace the file as an upgrade does: a new file renamed over it.
    let new = sb.path("regent-copy.new");
    std::fs::copy(REGENT, &new).unwrap();
    std::fs::rename(&new, &bin).unwrap();
    let before = count();
    wait_for(
        Duration::from_secs(10),
        "two more terms after the binary was replaced",
        || (count() >= before + 2).then_some(()),
        || sb.report(),
    );
    assert!(sb.regent(i).running(), "regent exited\n{}", sb.report());
}

regent_testkit::for_every_engine!(
    Sandbox::with_engine,
    [
        the_command_gets_the_election_its_id_and_its_fencing_token,
        background_jobs_die_when_the_command_exits_by_itself,
        background_jobs_that_ignore_sigterm_are_killed_after_the_grace,
        background_jobs_that_left_the_process_group_die_too,
        sigkill_of_the_shim_still_stops_the_command_and_its_jobs,
        without_a_namespace_regent_stops_what_a_killed_shim_left,
        a_stuck_shim_is_killed_with_the_command_before_regent_leads_again,
        replacing_the_binary_on_disk_does_not_stop_a_running_regent,
    ]
);

/// The etcd password is regent's secret: CMD's environment does not have it.
#[test]
fn the_command_does_not_inherit_the_etcd_password() {
    let sb = Sandbox::new();
    let seen = sb.path("seen");
    let script = format!(
        "echo \"${{REGENT_ETCD_PASSWORD-unset}} ${{REGENT_ETCD_USER-unset}}\" > '{}'",
        seen.display()
    );
    let out = run_script_env(
        &sb,
        &script,
        &[
            ("REGENT_ETCD_PASSWORD", "s3cret"),
            ("REGENT_ETCD_USER", "app"),
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // The user name is no secret and stays; the password goes.
    assert_eq!(std::fs::read_to_string(&seen).unwrap(), "unset app\n");
}

// ------------------------------------------------------ the shim killed at every point of a term
//
// Regression (issue 9): a fault campaign froze the leading regent
// (SIGSTOP), then SIGKILLed its shim. Nothing guarded the command any more:
// it and its background job wrote on beside every newer term, and for good
// once the frozen regent was SIGKILLed too. Now the command's tree runs in a
// PID namespace whose init dies with the shim (by its death signal) and
// takes everything in it along, with nobody's help. These tests need the
// privilege to create one (root or CAP_SYS_ADMIN).

/// Which process of the term's supervision the test kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Victim {
    /// `regent __shim`, regent's child.
    Shim,
    /// `regent __shim --init`, pid 1 of the command's namespace.
    Init,
}

/// What happens to the frozen regent afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// SIGCONT: it notices, stops what is left and campaigns again.
    Resume,
    /// SIGKILL: nothing of its term may be left.
    Kill,
}

/// The shim (or init) of candidate `i`, which must run the command in a
/// namespace.
fn supervision(sb: &mut Sandbox, i: usize) -> (i32, i32) {
    let shim = sb
        .regent(i)
        .shim()
        .unwrap_or_else(|| panic!("no shim\n{}", sb.report()));
    let init = wait_for(
        Duration::from_secs(5),
        "the namespace's init (creating a PID namespace needs root or CAP_SYS_ADMIN)",
        || {
            descendants(shim)
                .into_iter()
                .find(|&p| stat(p).is_some_and(|s| s.ppid == shim) && cmdline(p).contains("--init"))
        },
        || sb.report(),
    );
    (shim, init)
}

fn victim_pid(victim: Victim, shim: i32, init: i32) -> i32 {
    match victim {
        Victim::Shim => shim,
        Victim::Init => init,
    }
}

/// c1 leads, c2 waits. c1's regent is frozen, then its shim (or init) is
/// SIGKILLed: the command and its background job must be gone within a
/// second while regent stays frozen, and stay gone; then regent is resumed
/// or killed, and c2's term (or c1's next) starts after the old command
/// ended.
fn a_frozen_regent_loses_its_supervisor(victim: Victim, then: Then) {
    let mut sb = Sandbox::new();
    let c1 = sb.candidate("c1", "2s", &[]);
    let first = sb.first_start(Duration::from_secs(10));
    let _c2 = sb.candidate("c2", "2s", &[]);
    let bg = sb.bg_pid(&first.id, first.token);
    let (shim, init) = supervision(&mut sb, c1);
    sb.regent(c1).signal(rustix::process::Signal::STOP);
    signal(
        victim_pid(victim, shim, init),
        rustix::process::Signal::KILL,
    );
    wait_for(
        Duration::from_secs(2),
        "the command, its background job, the shim and the init to be gone while regent is frozen",
        || {
            (!alive(first.pid) && !alive_as(bg, "sleep") && !alive(shim) && !alive(init))
                .then_some(())
        },
        || sb.report(),
    );
    let ended = mono_ns();
    if victim == Victim::Shim {
        // The init stopped the command gracefully: SIGTERM reached it.
        assert!(
            sb.stop_of(&first.id, first.token).is_some(),
            "the command got no SIGTERM\n{}",
            sb.report()
        );
    }
    match then {
        Then::Resume => sb.regent(c1).signal(rustix::process::Signal::CONT),
        Then::Kill => sb.regent(c1).signal(rustix::process::Signal::KILL),
    }
    let next = wait_for(
        Duration::from_secs(10),
        "the next term",
        || sb.start_after(first.token),
        || sb.report(),
    );
    assert!(ended < next.mono_ns, "{}", sb.report());
    assert!(
        !alive(first.pid) && !alive_as(bg, "sleep"),
        "{}",
        sb.report()
    );
    if then == Then::Resume {
        assert!(sb.regent(c1).running(), "{}", sb.report());
    }
}

#[test]
fn a_frozen_regent_whose_shim_is_killed_leaves_nothing_running_when_it_resumes() {
    a_frozen_regent_loses_its_supervisor(Victim::Shim, Then::Resume);
}

#[test]
fn a_frozen_regent_whose_shim_is_killed_leaves_nothing_running_when_it_is_killed_too() {
    a_frozen_regent_loses_its_supervisor(Victim::Shim, Then::Kill);
}

#[test]
fn a_frozen_regent_whose_init_is_killed_leaves_nothing_running() {
    a_frozen_regent_loses_its_supervisor(Victim::Init, Then::Kill);
}

/// The shim (or init) is held at a point of its start-up by the test hook,
/// regent is frozen, the held process is SIGKILLed: no command may ever
/// start from that term, and regent, resumed, leads again.
fn killed_during_start_up(stage: &str, victim: Victim) {
    let mut sb = Sandbox::new();
    let held = sb.path("held");
    let spec = format!("{stage}:{}", held.display());
    let task = sb.task_cmd();
    let task: Vec<&str> = task.iter().map(String::as_str).collect();
    let args = sb.run_args(&["--id", "c1"], &task);
    let c1 = sb.spawn_env(
        "c1",
        std::path::Path::new(REGENT),
        &args,
        &[("REGENT_FAILPOINT", &spec)],
    );
    wait_for(
        Duration::from_secs(10),
        &format!("the shim to reach {stage}"),
        || held.exists().then_some(()),
        || sb.report(),
    );
    let shim = sb
        .regent(c1)
        .shim()
        .unwrap_or_else(|| panic!("no shim\n{}", sb.report()));
    let init = sb.regent(c1).init();
    sb.regent(c1).signal(rustix::process::Signal::STOP);
    let pid = match victim {
        Victim::Shim => shim,
        Victim::Init => init.unwrap_or_else(|| panic!("no init\n{}", sb.report())),
    };
    signal(pid, rustix::process::Signal::KILL);
    let regent = sb.regent(c1).pid;
    wait_for(
        Duration::from_secs(2),
        "everything under the frozen regent to be gone",
        || {
            let left: Vec<i32> = descendants(regent)
                .into_iter()
                .filter(|&p| alive(p))
                .collect();
            // The init held at its hook ignores SIGTERM there; the frozen
            // regent (its subreaper now) ends it when it resumes.
            let only_held_init = left.len() == 1 && Some(left[0]) == init;
            (left.is_empty() || only_held_init).then_some(())
        },
        || sb.report(),
    );
    assert!(sb.starts().is_empty(), "a command started\n{}", sb.report());
    sb.regent(c1).signal(rustix::process::Signal::CONT);
    let first = sb.first_start(Duration::from_secs(15));
    assert!(sb.regent(c1).running(), "{}", sb.report());
    assert!(
        init.is_none_or(|p| !alive(p)),
        "the held init outlived its term\n{}",
        sb.report()
    );
    assert_eq!(sb.starts().len(), 1, "{first:?}\n{}", sb.report());
}

#[test]
fn the_shim_killed_before_it_starts_the_init_leaves_nothing() {
    killed_during_start_up("shim-before-init", Victim::Shim);
}

#[test]
fn the_shim_killed_before_the_init_starts_the_command_leaves_nothing() {
    killed_during_start_up("init-before-cmd", Victim::Shim);
}

#[test]
fn the_init_killed_before_it_starts_the_command_leaves_nothing() {
    killed_during_start_up("init-before-cmd", Victim::Init);
}

/// During a step-down: regent is asked to stop (SIGTERM), the command
/// ignores SIGTERM and would get its whole grace; the shim is SIGKILLed in
/// that grace and regent frozen. The command must still be gone by the end
/// of the grace, and regent, resumed, exits 0 having released the lease.
#[test]
fn the_shim_killed_during_a_step_down_still_ends_the_command() {
    let mut sb = Sandbox::new();
    let pidfile = sb.path("cmd.pid");
    let script = format!(
        "trap '' TERM; {}; exec sleep 1000",
        write_own_pid(&format!("'{}'", pidfile.display()))
    );
    let args = sb.run_args(&["--id", "c1"], &["sh", "-c", &script]);
    let c1 = sb.spawn("c1", &args);
    let cmd = wait_for(
        Duration::from_secs(10),
        "the command to start",
        || {
            std::fs::read_to_string(&pidfile)
                .ok()?
                .trim()
                .parse::<i32>()
                .ok()
        },
        || sb.report(),
    );
    let (shim, init) = supervision(&mut sb, c1);
    sb.regent(c1).signal(rustix::process::Signal::TERM);
    // The stop has begun once the init has passed SIGTERM on.
    std::thread::sleep(Duration::from_millis(200));
    assert!(alive(cmd), "the command ignores SIGTERM\n{}", sb.report());
    sb.regent(c1).signal(rustix::process::Signal::STOP);
    signal(shim, rustix::process::Signal::KILL);
    wait_for(
        Duration::from_secs(2),
        "the command and the init to be gone while regent is frozen",
        || (!alive(cmd) && !alive(init)).then_some(()),
        || sb.report(),
    );
    sb.regent(c1).signal(rustix::process::Signal::CONT);
    let status = sb.regent(c1).wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{}", sb.report());
    assert!(sb.status()["leader"].is_null(), "{}", sb.report());
}

/// `--pid-namespace never` runs the command without a namespace: it sees
/// its host pid.
#[test]
fn pid_namespace_never_runs_the_command_with_its_host_pid() {
    let sb = Sandbox::new();
    let seen = sb.path("seen");
    let script = format!(
        "read -r p _ < /proc/self/stat; echo \"$$ $p\" > '{}'",
        seen.display()
    );
    for (mode, same) in [("never", true), ("always", false)] {
        let args = sb.run_args(
            &["--id", "c1", "--restart", "never", "--pid-namespace", mode],
            &["sh", "-c", &script],
        );
        let out = sb.run_owned(&args, &[], Duration::from_secs(10));
        assert_eq!(out.code, Some(0), "{mode}: {}", out.stderr);
        let text = std::fs::read_to_string(&seen).unwrap();
        let pids: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(pids.len(), 2, "{text:?}");
        assert_eq!(
            pids[0] == pids[1],
            same,
            "{mode}: $$ and /proc say {text:?}"
        );
    }
}

/// Without the privilege (here: regent run as `nobody` through `setpriv`),
/// `--pid-namespace auto` says so once — not at every term — and runs the
/// command anyway; `always` is a usage error (exit 2) naming the flag
/// before any campaign.
#[test]
fn without_the_privilege_auto_says_so_once_and_always_refuses() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let store = format!("sqlite:{}", dir.path().join("e.db").display());
    let unprivileged = |args: &[&str]| {
        let mut cmd = std::process::Command::new("timeout");
        cmd.arg("30");
        if rustix::process::geteuid().is_root() {
            cmd.args([
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ]);
        }
        let out = cmd
            .arg(REGENT)
            .args(["run", "--store", &store, "--election", "e", "--ttl", "2s"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    let (code, stderr) = unprivileged(&["--pid-namespace", "always", "--", "true"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--pid-namespace always: cannot create a PID namespace"),
        "{stderr}"
    );

    // Two terms: the first fails, the second succeeds.
    let marker = dir.path().join("tried");
    let script = format!(
        "test -e '{m}' || {{ touch '{m}'; exit 1; }}",
        m = marker.display()
    );
    let (code, stderr) = unprivileged(&["--restart", "on-failure", "--", "sh", "-c", &script]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stderr
            .matches("the command runs without a PID namespace of its own")
            .count(),
        1,
        "{stderr}"
    );
}
