//! Finding processes by `/proc`: parent links and command lines, never by
//! pids a process reports about itself (inside a PID namespace `getpid()`
//! names another number than the one the nemesis can signal).

use rustix::process::{Pid, Signal};

pub(crate) use crate::tree::stat;

/// Whether `pid` exists and has not exited (zombies count as gone).
pub(crate) fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(crate::tree::Stat::alive)
}

/// The arguments of `pid` (empty for a zombie or a vanished process).
pub(crate) fn argv(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every pid in `/proc` now.
pub(crate) fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Every live descendant of `root` now (not `root` itself), by parent
/// links, parents before their children.
pub(crate) fn descendants(root: i32) -> Vec<i32> {
    let table: Vec<(i32, i32)> = pids()
        .into_iter()
        .filter_map(|p| stat(p).filter(|s| s.state != 'Z').map(|s| (p, s.ppid)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            table
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

/// The live children of `parent` whose first argument is `mode` (a hidden
/// subcommand such as `__shim`).
pub(crate) fn children_in_mode(parent: i32, mode: &str) -> Vec<i32> {
    pids()
        .into_iter()
        .filter(|&p| stat(p).is_some_and(|s| s.ppid == parent) && alive(p) && is_mode(p, mode))
        .collect()
}

/// Whether `pid` runs this binary's hidden mode `mode` (its first argument),
/// not merely mentions it (the shim's and regent's arguments do too).
pub(crate) fn is_mode(pid: i32, mode: &str) -> bool {
    argv(pid).get(1).is_some_and(|a| a == mode)
}

pub(crate) fn signal(pid: i32, sig: Signal) -> bool {
    Pid::from_raw(pid).is_some_and(|p| rustix::process::kill_process(p, sig).is_ok())
}
