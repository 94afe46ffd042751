//! Finding processes by `/proc` (through `regent_proc`, the one reader):
//! parent links and command lines, never by pids a process reports about
//! itself (inside a PID namespace `getpid()` names another number than the
//! one the nemesis can signal). What torture adds: a process's mode, the
//! hidden subcommand it runs.

pub(crate) use regent_proc::{alive, argv, descendants, pids, signal, stat};

/// The live children of `parent` whose first argument is `mode` (a hidden
/// subcommand such as `__shim`).
pub(crate) fn children_in_mode(parent: i32, mode: &str) -> Vec<i32> {
    regent_proc::children_of(parent)
        .into_iter()
        .filter(|&p| is_mode(p, mode))
        .collect()
}

/// Whether `pid` runs this binary's hidden mode `mode` (its first argument),
/// not merely mentions it (the shim's and regent's arguments do too).
pub(crate) fn is_mode(pid: i32, mode: &str) -> bool {
    argv(pid).get(1).is_some_and(|a| a == mode)
}
