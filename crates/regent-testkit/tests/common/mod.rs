//! Helpers shared by the engine tests: reading etcdctl's output.

#![allow(dead_code)]

use std::process::Output;

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
