//! The child log, and the leader commands that write it.
//!
//! Every tool under test runs the same command, `regent __demo-task --log
//! LOG --log-stop`, which appends `start ID TOKEN MONO_NS PID` to the
//! series' log as it starts and `stop …` when SIGTERM reaches it
//! (`MONO_NS`: CLOCK_MONOTONIC, the clock the bench reads too; `PID` as
//! `/proc` names it).

use std::collections::BTreeSet;
use std::path::Path;

use regent_proc::{Signal, group_members, own_group, signal, signal_group, stat};

/// A line of the child log: `start|stop ID TOKEN MONO_NS PID`.
#[derive(Debug, Clone)]
pub(crate) struct LogLine {
    pub(crate) event: String,
    pub(crate) id: String,
    pub(crate) mono_ns: u64,
    pub(crate) pid: i32,
}

/// Every well-formed line of the log at `log` (none if it is missing),
/// read by the sidecar's own reader (`regent_cli::task_log`).
pub(crate) fn read_log(log: &Path) -> Vec<LogLine> {
    regent_cli::task_log::read(log)
        .into_iter()
        .filter_map(|e| {
            Some(LogLine {
                event: e.kind,
                id: e.id,
                mono_ns: e.mono_ns,
                pid: e.pid?,
            })
        })
        .collect()
}

/// A leader's command, as it was when it logged its start: enough to tell
/// later whether it, or anything in its process group, still runs.
#[derive(Debug, Clone)]
pub(crate) struct CommandProcess {
    pub(crate) pid: i32,
    /// Its start time in clock ticks: with the PID, names one process
    /// even if the PID is reused.
    start_ticks: u64,
    pgid: i32,
}

impl CommandProcess {
    /// The command that logged `start`, if it still runs.
    pub(crate) fn of(start: &LogLine) -> Option<Self> {
        let s = stat(start.pid).filter(|s| s.alive())?;
        Some(Self {
            pid: start.pid,
            start_ticks: s.start_ticks,
            pgid: s.pgrp,
        })
    }

    fn is_itself(&self, pid: i32) -> bool {
        stat(pid).is_some_and(|s| s.alive() && s.start_ticks == self.start_ticks)
    }

    /// The live processes of this command: itself, and whatever else lives
    /// in its process group but `tool` (`etcdctl lock`'s and `consul
    /// lock`'s commands share the tool's group).
    pub(crate) fn alive_processes(&self, tool: i32) -> Vec<i32> {
        let mut alive: BTreeSet<i32> = group_members(self.pgid)
            .into_iter()
            .filter(|&p| p != tool)
            .collect();
        if self.is_itself(self.pid) {
            alive.insert(self.pid);
        } else {
            alive.remove(&self.pid);
        }
        alive.into_iter().collect()
    }

    /// SIGKILLs the command and its process group (never the bench's own).
    pub(crate) fn kill(&self) {
        if self.pgid > 1 && self.pgid != own_group() && !group_members(self.pgid).is_empty() {
            signal_group(self.pgid, Signal::KILL);
        }
        if self.is_itself(self.pid) {
            signal(self.pid, Signal::KILL);
        }
    }
}
