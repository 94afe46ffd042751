//! The shim between regent and the command: the command's environment, and
//! nothing the command started outlives its term, even when the command
//! ends by itself.

mod common;

use std::time::Duration;

use common::*;

/// `regent run --ttl 2s --restart never -- sh -c SCRIPT` in `sb`, to its end.
fn run_script(sb: &Sandbox, script: &str) -> Output {
    run_script_env(sb, script, &[])
}

/// [`run_script`] with `env` added to regent's environment.
fn run_script_env(sb: &Sandbox, script: &str, env: &[(&str, &str)]) -> Output {
    let args = sb.run_args(&["--id", "c1", "--restart", "never"], &["sh", "-c", script]);
    let out = run_owned(&args, env, Duration::from_secs(10));
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

/// Runs `sh -c '<job> & echo $! > FILE; <then>'` in `sb` to its end, checks
/// it exited 0, and returns its output and the background job's pid.
fn run_with_background_job(sb: &Sandbox, job: &str, then: &str) -> (Output, i32) {
    let bg = sb.path("bg");
    let out = run_script(sb, &format!("{job} & echo $! > '{}'; {then}", bg.display()));
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
    let (out, pid) = run_with_background_job(&sb, "sleep 1000", "exit 0");
    assert_background_job_dies(pid);
    eprintln!("regent ended {:?} after start", out.took);
}

fn background_jobs_that_ignore_sigterm_are_killed_after_the_grace(sb: Sandbox) {
    let (_, pid) = run_with_background_job(&sb, "trap '' TERM; sleep 1000", "exit 0");
    assert_background_job_dies(pid);
}

/// A job that left the command's process group (`setsid`) is still the
/// command's work: the shim, a child subreaper, inherits it when its parent
/// exits, and must not leave it behind.
fn background_jobs_that_left_the_process_group_die_too(sb: Sandbox) {
    // Give it time to leave the group before the command exits.
    let (_, pid) = run_with_background_job(&sb, "setsid sleep 1000", "sleep 0.3; exit 0");
    let left = alive_as(pid, "sleep");
    if left {
        signal(pid, rustix::process::Signal::KILL);
    }
    assert!(!left, "the setsid job {pid} outlived the command");
}

/// Regression: when the shim itself was SIGKILLed, nothing stopped the
/// command — it ran on, orphaned, and regent (restart always) started a
/// second copy next to it. The shim now reports CMD's process group to
/// regent, which stops the group itself when the shim dies.
fn sigkill_of_the_shim_still_stops_the_command_and_its_jobs(mut sb: Sandbox) {
    let i = sb.candidate("c1", "2s", &[]);
    let first = sb.first_start(Duration::from_secs(10));
    let bg = sb.bg_pid(&first.id, first.token);
    let shim = sb
        .regent(i)
        .shim()
        .unwrap_or_else(|| panic!("no shim\n{}", sb.report()));
    signal(shim, rustix::process::Signal::KILL);
    wait_for(
        Duration::from_secs(3),
        "the orphaned command, its background job and its group to die",
        || {
            (!alive(first.pid) && !alive_as(bg, "sleep") && group_members(first.pid).is_empty())
                .then_some(())
        },
        || sb.report(),
    );
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
    let c1 = sb.candidate("c1", "2s", &[]);
    let first = sb.first_start(Duration::from_secs(10));
    let shim = sb
        .regent(c1)
        .shim()
        .unwrap_or_else(|| panic!("no shim\n{}", sb.report()));
    signal(shim, rustix::process::Signal::STOP);
    sb.regent(c1).signal(rustix::process::Signal::STOP);
    std::thread::sleep(Duration::from_millis(1500));
    sb.regent(c1).signal(rustix::process::Signal::CONT);
    let next = wait_for(
        Duration::from_secs(10),
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
