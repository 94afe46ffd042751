//! Ending a term's processes: the sweep the shim runs over CMD's group and
//! the orphans it adopted, and that `regent run` runs over its own children
//! once the shim is gone (both are child subreapers, so whatever of CMD's
//! work lost its parent is their child).
//!
//! Everything here is synchronous and signal-safe enough for the shim, which
//! has no runtime; `regent run` calls it from a blocking task.

use std::io::Read as _;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, Signal, WaitOptions};

/// The live (not yet exited) children of this process, found through
/// /proc. Valid only where `/proc` numbers pids as this process sees them
/// (not inside the shim's PID namespace).
pub(crate) fn children() -> Vec<Pid> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    regent_proc::children_of(me)
        .into_iter()
        .filter_map(Pid::from_raw)
        .collect()
}

/// Whether this process has any child at all, live or exited but not
/// yet reaped: `waitpid(-1, WNOHANG)` fails with ECHILD only when it has
/// none. (A child that exited just now is reaped by the look; it is
/// counted, to be safe.)
pub(crate) fn has_children() -> bool {
    !matches!(
        rustix::process::wait(WaitOptions::NOHANG),
        Err(rustix::io::Errno::CHILD)
    )
}

/// Reaps every exited child; returns `watch`'s status if it was among them:
/// its exit code, or 128 + the signal that killed it.
pub(crate) fn reap(watch: Option<Pid>) -> Option<u8> {
    let mut status = None;
    while let Ok(Some((pid, st))) = rustix::process::wait(WaitOptions::NOHANG) {
        if Some(pid) == watch {
            status = Some(match (st.exit_status(), st.terminating_signal()) {
                (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
                (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(255),
                _ => 1,
            });
        }
    }
    status
}

/// Stops every child of this process, with `group` (CMD's process group)
/// if given: SIGTERM to the group and to every other child, up to `grace`
/// for all of them to go, then SIGKILL until none is left (at most 2 s).
///
/// "Every other child": jobs that left the group (`setsid`, a daemon's
/// double fork) are still CMD's work, and a child subreaper inherits them as
/// soon as their parent exits. They get their signals at the same moments
/// as the group, so that the whole stop still fits within `grace` (the
/// timing rules count on it); whatever is reparented meanwhile joins at
/// once. Returns whether everything is gone.
pub(crate) fn stop_children(
    group: Option<Pid>,
    grace: Duration,
    wake: Option<&UnixStream>,
) -> bool {
    let group_gone = || group.is_none_or(|g| rustix::process::test_kill_process_group(g).is_err());
    let mut termed = Vec::new();
    let mut pause = Backoff::new();
    let start = Instant::now();
    if let Some(g) = group {
        let _ = rustix::process::kill_process_group(g, Signal::TERM);
    }
    loop {
        let _ = reap(None);
        let orphans = children();
        for &child in &orphans {
            // Members of CMD's group had their SIGTERM: a second one would
            // read as "exit at once" to a command that, like regent, gives
            // a second signal that meaning.
            let in_group =
                group.is_some_and(|g| rustix::process::getpgid(Some(child)).is_ok_and(|p| p == g));
            if !in_group && !termed.contains(&child) {
                kill_with_group(child, Signal::TERM);
                termed.push(child);
            }
        }
        if group_gone() && orphans.is_empty() {
            return true;
        }
        if start.elapsed() >= grace {
            break;
        }
        pause.sleep(wake);
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if let Some(g) = group {
            let _ = rustix::process::kill_process_group(g, Signal::KILL);
        }
        for child in children() {
            kill_with_group(child, Signal::KILL);
        }
        let _ = reap(None);
        if group_gone() && children().is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Stops every other process of this PID namespace; for its init (pid 1),
/// where `kill(-1, …)` reaches exactly them. SIGTERM once to each, up to
/// `grace` for all to go, then SIGKILL until none is left (at most 2 s).
/// Returns whether everything is gone. (When the init exits the kernel
/// kills whatever is left anyway; this is the graceful part.)
pub(crate) fn stop_namespace(grace: Duration, wake: Option<&UnixStream>) -> bool {
    // kill(-1, sig): every process this one may signal but itself and
    // init; inside a PID namespace, only that namespace's.
    let everyone = Pid::INIT;
    // Zombies count for kill(-1, 0) until reaped: reap first.
    let empty = || {
        let _ = reap(None);
        rustix::process::test_kill_process_group(everyone).is_err()
    };
    let _ = rustix::process::kill_process_group(everyone, Signal::TERM);
    let start = Instant::now();
    let mut pause = Backoff::new();
    while start.elapsed() < grace {
        if empty() {
            return true;
        }
        pause.sleep(wake);
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if empty() {
            return true;
        }
        let _ = rustix::process::kill_process_group(everyone, Signal::KILL);
        std::thread::sleep(Duration::from_millis(10));
    }
    empty()
}

/// The pauses between looks at processes asked to stop: most commands
/// exit within a millisecond of SIGTERM, and a hand-over waits for that
/// exit, so the first looks come quickly (0.5, 1, 2, 4 ms), then every
/// 10 ms. A pause ends early when `wake` (the supervisor's SIGCHLD pipe)
/// becomes readable: the last process of a namespace, or of CMD's group,
/// is a child of the supervisor's when it exits (its parent's exit made
/// it one), so its exit is seen at once rather than at the next look
/// (which cost a hand-over 2 to 4 ms).
struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_micros(500);
    const MOST: Duration = Duration::from_millis(10);

    fn new() -> Self {
        Backoff { next: Self::FIRST }
    }

    fn sleep(&mut self, wake: Option<&UnixStream>) {
        match wake {
            None => std::thread::sleep(self.next),
            Some(pipe) => {
                let mut fds = [PollFd::new(pipe, PollFlags::IN)];
                let timeout = Timespec {
                    tv_sec: 0,
                    tv_nsec: i64::from(self.next.subsec_nanos()),
                };
                // EINTR, or any failure, ends the pause early: one more look.
                let _ = poll(&mut fds, Some(&timeout));
                let mut buf = [0u8; 64];
                while matches!((&*pipe).read(&mut buf), Ok(n) if n > 0) {}
            }
        }
        self.next = (self.next * 2).min(Self::MOST);
    }
}

/// Signals `pid`, and the process group it leads if it leads one (a job
/// that called `setsid` takes its own children along).
fn kill_with_group(pid: Pid, sig: Signal) {
    if rustix::process::getpgid(Some(pid)).is_ok_and(|g| g == pid) {
        let _ = rustix::process::kill_process_group(pid, sig);
    }
    let _ = rustix::process::kill_process(pid, sig);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_child_is_seen_without_looking_through_proc() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        assert!(has_children());
        let pid = Pid::from_child(&child);
        assert!(children().contains(&pid) || regent_proc::self_pid().is_none());
        let _ = child.kill();
        let _ = child.wait();
    }
}
