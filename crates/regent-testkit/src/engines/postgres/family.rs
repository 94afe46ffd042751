//! A postmaster's children: the backends, the checkpointer, the WAL writer
//! and receiver, … A server is all of them: pausing it stops every one
//! (a stopped postmaster alone still lets its backends answer), killing it
//! kills every one (a killed postmaster's children linger a moment, holding
//! the shared memory a new postmaster refuses to share).
//!
//! Each child is remembered with its start time, so that a PID reused by
//! another process once the child has exited is never signalled.

use std::thread;
use std::time::Instant;

use rustix::process::Signal;

use super::super::process::POLL;

/// Processes of one server, each with its start time.
#[derive(Debug, Default)]
pub(super) struct Family(Vec<(i32, u64)>);

impl Family {
    /// The live descendants of `postmaster` now. Stop the postmaster first
    /// when the list must be complete: a running one may fork meanwhile.
    pub(super) fn of(postmaster: u32) -> Self {
        let Ok(pid) = i32::try_from(postmaster) else {
            return Self::default();
        };
        Self::known(regent_proc::descendants(pid))
    }

    /// The postmaster and its live descendants now.
    pub(super) fn with_postmaster(postmaster: u32) -> Self {
        let Ok(pid) = i32::try_from(postmaster) else {
            return Self::default();
        };
        let mut pids = vec![pid];
        pids.extend(regent_proc::descendants(pid));
        Self::known(pids)
    }

    fn known(pids: Vec<i32>) -> Self {
        Self(
            pids.into_iter()
                .filter_map(|p| regent_proc::stat(p).map(|s| (p, s.start_ticks)))
                .collect(),
        )
    }

    /// Sends `signal` to every one still there.
    pub(super) fn signal(&self, signal: Signal) {
        for &(pid, _) in self.live() {
            regent_proc::signal(pid, signal);
        }
    }

    /// Waits until every one has exited or `deadline` passes; whether they
    /// all have. A zombie has exited (it holds no memory any more).
    pub(super) fn wait_gone(&self, deadline: Instant) -> bool {
        loop {
            if self.live().next().is_none() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(POLL);
        }
    }

    /// Waits until every one still there is stopped (SIGSTOP delivered:
    /// state `T`) or `deadline` passes.
    pub(super) fn wait_stopped(&self, deadline: Instant) {
        while self.live().any(|&(pid, _)| !regent_proc::stopped(pid)) && Instant::now() < deadline {
            thread::sleep(POLL);
        }
    }

    fn live(&self) -> impl Iterator<Item = &(i32, u64)> {
        self.0.iter().filter(|(pid, started)| {
            regent_proc::stat(*pid).is_some_and(|s| s.start_ticks == *started && s.alive())
        })
    }
}
