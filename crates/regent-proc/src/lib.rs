//! The host facts regent's processes share: the Linux process table as
//! `/proc` shows it, what this process uses ([`usage`]), the clock every
//! process on a host shares, and free ports of `127.0.0.1` ([`ports`]) for
//! the servers they start.
//!
//! regent's sidecar sweeps what is left of a term's processes, its fault
//! campaign (`regent-torture`) finds the process a fault should hit, and
//! its benchmarks (`regent-bench`) and tests look for commands that
//! outlived their leader. All of them read the same few fields of
//! `/proc/PID/stat` and `/proc/PID/cmdline`; this crate is the one reader.
//!
//! Processes are found by `/proc` — parent links, process groups, command
//! lines — never by a pid a process reports about itself: inside a PID
//! namespace `getpid()` names another number than the one an outside
//! process can signal. Every reader tolerates a process that exits while
//! it is read (it is simply not there).
//!
//! ```
//! let me = regent_proc::self_pid().expect("/proc is mounted");
//! let stat = regent_proc::stat(me).expect("this process is in /proc");
//! assert!(stat.alive());
//! assert!(regent_proc::pids().contains(&me));
//! assert!(!regent_proc::argv(me).is_empty());
//! ```

pub mod ports;
pub mod usage;

use std::collections::BTreeSet;

use rustix::process::Pid;
pub use rustix::process::Signal;

/// The fields of `/proc/PID/stat` regent reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The state letter: `R`, `S`, `D`, `T` (stopped), `Z` (zombie), …
    pub state: char,
    /// The parent's pid.
    pub ppid: i32,
    /// The process group.
    pub pgrp: i32,
    /// CPU time in user and kernel mode so far (`utime + stime`), in
    /// clock ticks.
    pub cpu_ticks: u64,
    /// Start time in clock ticks since boot: with the pid, it names one
    /// process even if the pid is reused.
    pub start_ticks: u64,
}

impl Stat {
    /// Not exited (zombies count as gone).
    pub fn alive(self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }

    /// Stopped by a signal (SIGSTOP, SIGTSTP).
    pub fn stopped(self) -> bool {
        self.state == 'T'
    }
}

/// `/proc/PID/stat` of `pid`, or `None` when it is not there (never was,
/// or exited and was reaped).
pub fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// A `stat` file of `/proc` (a process's or a thread's): its command name
/// and the fields regent reads.
pub(crate) fn parse_stat_named(text: &str) -> Option<(&str, Stat)> {
    // The command name may hold spaces and parentheses: it runs from the
    // first '(' to the last ')', and the fields after it start there.
    let close = text.rfind(')')?;
    let name = text.get(text.find('(')? + 1..close)?;
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let number = |i: usize| -> Option<u64> { fields.get(i)?.parse().ok() };
    Some((
        name,
        Stat {
            state: fields.first()?.chars().next()?,
            ppid: fields.get(1)?.parse().ok()?,
            pgrp: fields.get(2)?.parse().ok()?,
            cpu_ticks: number(11)? + number(12)?,
            start_ticks: number(19)?,
        },
    ))
}

fn parse_stat(text: &str) -> Option<Stat> {
    parse_stat_named(text).map(|(_, stat)| stat)
}

/// Whether `pid` exists and has not exited (zombies count as gone).
pub fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(Stat::alive)
}

/// Whether `pid` is stopped (SIGSTOP).
pub fn stopped(pid: i32) -> bool {
    stat(pid).is_some_and(Stat::stopped)
}

/// This process's pid as the mounted `/proc` numbers it: the same as
/// `getpid()` except inside a PID namespace whose `/proc` belongs to an
/// outer one (the sidecar's init sees itself as 1 there).
pub fn self_pid() -> Option<i32> {
    std::fs::read_link("/proc/self")
        .ok()?
        .to_str()?
        .parse()
        .ok()
}

/// Every pid in `/proc` now.
pub fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The arguments of `pid` (empty for a zombie or a vanished process).
pub fn argv(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The command line of `pid`, its arguments joined by spaces.
pub fn cmdline(pid: i32) -> String {
    argv(pid).join(" ")
}

/// The live children of `parent` now.
pub fn children_of(parent: i32) -> Vec<i32> {
    pids()
        .into_iter()
        .filter(|&p| stat(p).is_some_and(|s| s.ppid == parent && s.alive()))
        .collect()
}

/// Every live descendant of `root` now (not `root` itself), by parent
/// links, parents before their children.
pub fn descendants(root: i32) -> Vec<i32> {
    let table: Vec<(i32, i32)> = pids()
        .into_iter()
        .filter_map(|p| stat(p).filter(|s| s.alive()).map(|s| (p, s.ppid)))
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

/// The live processes of process group `pgid` now.
pub fn group_members(pgid: i32) -> Vec<i32> {
    pids()
        .into_iter()
        .filter(|&p| stat(p).is_some_and(|s| s.pgrp == pgid && s.alive()))
        .collect()
}

/// The process group of this process.
pub fn own_group() -> i32 {
    rustix::process::getpgid(None).map_or(0, |p| p.as_raw_nonzero().get())
}

/// Sends `sig` to `pid`; whether it was delivered.
pub fn signal(pid: i32, sig: Signal) -> bool {
    Pid::from_raw(pid).is_some_and(|p| rustix::process::kill_process(p, sig).is_ok())
}

/// Sends `sig` to process group `pgid`; whether it was delivered.
pub fn signal_group(pgid: i32, sig: Signal) -> bool {
    Pid::from_raw(pgid).is_some_and(|p| rustix::process::kill_process_group(p, sig).is_ok())
}

/// SIGKILLs `root`'s descendants, the process groups they belong to (which
/// reaches background jobs whose parent already died), and `root` itself;
/// never this process's own group.
pub fn kill_tree(root: i32) {
    let own = own_group();
    let mut pids = descendants(root);
    pids.push(root);
    let groups: BTreeSet<i32> = pids
        .iter()
        .filter_map(|&p| stat(p).map(|s| s.pgrp))
        .filter(|&g| g != own && g > 1)
        .collect();
    for g in groups {
        signal_group(g, Signal::KILL);
    }
    for p in pids {
        signal(p, Signal::KILL);
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds: the one clock every process on a
/// host shares (tokio's and std's `Instant` read it on Linux), so an
/// instant can be handed to another process as a number.
pub fn mono_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // The monotonic clock is non-negative and fits u64 nanoseconds for 584 years.
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped() {
        let text = "42 (a (b) c) S 7 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                state: 'S',
                ppid: 7,
                pgrp: 42,
                cpu_ticks: 0,
                start_ticks: 12345
            })
        );
    }

    #[test]
    fn a_child_is_found_and_its_death_seen() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let pid = i32::try_from(child.id()).unwrap();
        let me = self_pid().unwrap();
        assert!(children_of(me).contains(&pid));
        assert!(descendants(me).contains(&pid));
        assert_eq!(argv(pid), ["sleep", "30"]);
        assert!(signal(pid, Signal::KILL));
        child.wait().unwrap();
        assert!(!alive(pid));
        assert!(!descendants(me).contains(&pid));
    }
}
