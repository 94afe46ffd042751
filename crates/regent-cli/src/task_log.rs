//! The log of regent's demo task (`regent __demo-task --log FILE`): the
//! command `regent demo` runs on its leaders, and the one the end-to-end
//! tests and the benchmark harness run to see when a term's command starts
//! and stops.
//!
//! One line per event, `EVENT ID TOKEN MONO_NS PID`: `start` when the
//! task starts, `stop` when SIGTERM reaches it (with `--log-stop`); ID and
//! TOKEN are the term's (`REGENT_LEADER_ID`, `REGENT_FENCING_TOKEN`);
//! MONO_NS is CLOCK_MONOTONIC, the clock every process of a host shares
//! (`regent_proc::mono_ns`); PID is the task's pid as `/proc` names it
//! (inside a PID namespace its own `getpid()` says something else). Lines
//! of older logs have no PID.
//!
//! ```
//! let dir = tempfile::tempdir()?;
//! let log = dir.path().join("task.log");
//! std::fs::write(&log, "start a-1 7 1000 4242\nstop a-1 7 2000 4242\ngarbage\n")?;
//! let events = regent_cli::task_log::read(&log);
//! assert_eq!(events.len(), 2);
//! assert_eq!(events[0].kind, "start");
//! assert_eq!((events[0].token, events[0].mono_ns, events[0].pid), (7, 1000, Some(4242)));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::path::Path;

/// One line of the task log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEvent {
    /// `start` or `stop`.
    pub kind: String,
    /// The leader's id (`REGENT_LEADER_ID`).
    pub id: String,
    /// The term's fencing token.
    pub token: u64,
    /// When, on CLOCK_MONOTONIC, in nanoseconds.
    pub mono_ns: u64,
    /// The task's pid as `/proc` names it (none in older logs).
    pub pid: Option<i32>,
}

/// Every well-formed line of the log at `log`, in order (none when the
/// file is missing; malformed lines are skipped).
pub fn read(log: &Path) -> Vec<TaskEvent> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter_map(parse).collect()
}

fn parse(line: &str) -> Option<TaskEvent> {
    let mut f = line.split_whitespace();
    Some(TaskEvent {
        kind: f.next()?.to_owned(),
        id: f.next()?.to_owned(),
        token: f.next()?.parse().ok()?,
        mono_ns: f.next()?.parse().ok()?,
        pid: match f.next() {
            Some(pid) => Some(pid.parse().ok()?),
            None => None,
        },
    })
}

/// The line the task writes for `kind` (`start`, `stop`); `token` as the
/// task found it in its environment.
pub(crate) fn line(kind: &str, id: &str, token: &str, mono_ns: u64, pid: i32) -> String {
    format!("{kind} {id} {token} {mono_ns} {pid}\n")
}
