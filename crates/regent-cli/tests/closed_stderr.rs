//! Regression: with stderr a closed pipe (a dead log collector), printing
//! panicked the shim before it stopped the command, and the command ran on
//! past the lease with nobody holding it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const REGENT: &str = env!("CARGO_BIN_EXE_regent");

fn alive(pid: i32) -> bool {
    // A zombie is as good as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

fn wait_until(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

#[test]
fn a_killed_regent_with_a_dead_stderr_still_takes_its_command_down() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("cmd.pid");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader); // nobody reads regent's (or the shim's) stderr
    let mut regent = Command::new(REGENT)
        .args(["run", "--store"])
        .arg(format!("sqlite:{}", dir.path().join("e.db").display()))
        .args(["--election", "e", "--ttl", "2s", "--", "sh", "-c"])
        .arg(format!(
            // Its pid as /proc names it: `$$` would be the PID
            // namespace's.
            "read -r p _ < /proc/self/stat; echo $p > '{}'; exec sleep 1000",
            pidfile.display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(writer)
        .spawn()
        .unwrap();
    let started = wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| s.trim().parse::<i32>().is_ok())
    });
    if !started {
        let _ = regent.kill();
        panic!("the command never started");
    }
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    regent.kill().unwrap(); // SIGKILL
    let _ = regent.wait();
    let gone = wait_until(Duration::from_secs(5), || !alive(pid));
    if !gone {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(gone, "the command outlived its killed regent");
}

/// Regression: with stderr a closed pipe, the first retry warning made the
/// log subscriber fail to write and then panic (exit 101) instead of the
/// documented exit 3 for an unreachable store.
#[test]
fn retry_warnings_into_a_dead_stderr_still_end_with_exit_3() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(REGENT)
        // Port 1: nothing listens there, the connection is refused.
        .args(["status", "--store", "etcd://127.0.0.1:1", "--election", "e"])
        .env("REGENT_START_RETRY", "1s")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3), "{status:?}");
}
