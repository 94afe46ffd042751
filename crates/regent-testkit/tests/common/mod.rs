//! Helpers shared by the engine tests: reading etcdctl's output, running
//! checks in a child test process with a variable set.

#![allow(dead_code)]

use std::process::{Command, Output};

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[track_caller]
pub(crate) fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "etcdctl failed ({}): {}{}",
        output.status,
        stdout(output),
        stderr(output)
    );
}

/// Runs `checks` in a child process re-running only the test `name` with
/// `var=value` in its environment (this process's environment is shared by
/// the tests running in parallel, and setting it would need unsafe code).
/// In the child, `var` is set and `checks` runs; here, the child must pass
/// and say that it ran them.
pub(crate) fn in_child_with_env(name: &str, var: &str, value: &str, checks: impl FnOnce()) {
    let checked = format!("checked in a child: {name}");
    if std::env::var(var).as_deref() == Ok(value) {
        checks();
        println!("{checked}");
        return;
    }
    let child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture"])
        .env(var, value)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    assert!(child.status.success(), "child test failed:\n{out}");
    assert!(out.contains(&checked), "child test did not run:\n{out}");
}
