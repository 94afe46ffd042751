//! The shim: a tiny single-threaded process (this binary, hidden mode
//! `__shim`) that is the parent of CMD and owns its process group.
//!
//! Why a separate process: nothing of the leader's work may outlive
//! `regent`, even a SIGKILLed one, and nothing may run past the lease while
//! `regent` is stopped or hung.
//!
//! * CMD runs as the leader of a new process group; the shim is a child
//!   subreaper, so orphaned background jobs become its children and are
//!   reaped. Stopping CMD stops the group and every such child, even a job
//!   that left the group (`setsid`).
//! * The shim leads a process group of its own, apart from regent's: a
//!   job-control stop of regent's group must not freeze the dead-man's
//!   switch too.
//! * The shim's stdin is one end of a socket pair whose other end `regent`
//!   holds. The shim writes `G <pgid>` (CMD's process group) on it once CMD
//!   runs, so that `regent` can stop the group itself if the shim dies
//!   without doing so (SIGKILL, a crash).
//! * When `regent` dies,
//!   however it dies, the kernel closes it and the shim reads EOF; as a
//!   second line of defence the shim asks for `PR_SET_PDEATHSIG(SIGTERM)`
//!   and catches it. (`regent` spawns the shim from its main thread, whose
//!   exit is the process's exit, so the death signal cannot fire early when
//!   some other thread ends.) Either way the shim kills the whole group:
//!   SIGTERM, `grace`, SIGKILL.
//! * Dead-man's switch: `regent` sends `D <ns>` after every renewal — its
//!   step-down instant on CLOCK_MONOTONIC, the clock all processes share. If
//!   that instant passes with no newer one (regent paused, hung, starved),
//!   the shim stops the group by itself; the timing rules make SIGKILL land
//!   before the lease could pass on. `S` asks for the same stop.
//!
//! Exit status: CMD's own (128+signal if killed) when it ended by itself;
//! [`STOPPED_BY_SHIM`] when the shim stopped it.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use clap::Args;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, Signal, WaitOptions};

use crate::clock::mono_ns;

/// The shim's exit status when it stopped CMD itself (deadline passed,
/// regent gone, or asked to stop).
pub(crate) const STOPPED_BY_SHIM: u8 = 254;

#[derive(Debug, Args)]
pub(crate) struct ShimArgs {
    /// Time between SIGTERM and SIGKILL, in milliseconds.
    #[arg(long)]
    pub(crate) grace_ms: u64,
    /// The first deadline, CLOCK_MONOTONIC nanoseconds.
    #[arg(long)]
    pub(crate) deadline_ns: u64,
    /// regent's pid: if the shim's parent is already another, regent died
    /// before the death signal was armed.
    #[arg(long)]
    pub(crate) parent: i32,
    /// The command.
    #[arg(last = true, required = true)]
    pub(crate) cmd: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Asked,
    ParentGone,
    Deadline,
    Signal,
}

pub(crate) fn main(args: ShimArgs) -> ExitCode {
    match run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            warn_user!("regent shim: {e}");
            ExitCode::from(STOPPED_BY_SHIM)
        }
    }
}

fn run(args: &ShimArgs) -> std::io::Result<u8> {
    let grace = Duration::from_millis(args.grace_ms);
    // First, before any other descriptor is opened here, so that fd 3 is
    // free to take.
    let heartbeat = heartbeat_fd();
    let signals = SignalPipe::new()?;
    rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
    if rustix::process::getppid()
        .map(Pid::as_raw_nonzero)
        .map(|p| p.get())
        != Some(args.parent)
    {
        // regent died before the death signal was armed.
        return Ok(STOPPED_BY_SHIM);
    }
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;

    let (program, rest) = args.cmd.split_first().expect("clap requires CMD");
    let mut command = Command::new(program);
    command.args(rest).process_group(0).stdin(Stdio::null());
    if let Some(fd) = &heartbeat {
        command.env("REGENT_HEARTBEAT_FD", fd.as_raw_fd().to_string());
    }
    let child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            report("E");
            warn_user!("regent: cannot start '{program}': {e}");
            return Ok(127);
        }
    };
    let pgid = Pid::from_child(&child);
    // Tell regent CMD's process group, on the control socket that is also
    // the shim's stdin: should the shim die without stopping the group
    // (SIGKILL, a crash), regent stops it. Nothing to do if this fails:
    // the shim is then the group's only guard, as before.
    let _ = rustix::io::write(
        std::io::stdin(),
        format!("G {}\n", pgid.as_raw_nonzero()).as_bytes(),
    );
    // From here on the shim reaps every child itself (CMD and orphans), so
    // std's handle is not used to wait.
    drop(child);

    let mut deadline = args.deadline_ns;
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    let stop = 'wait: loop {
        if let Some(status) = reap(pgid) {
            // CMD ended by itself; its background jobs go with it.
            stop_group(pgid, grace);
            return Ok(status);
        }
        let now = mono_ns();
        if now >= deadline {
            break 'wait Stop::Deadline;
        }
        // Wake at least every 50 ms to reap children.
        let wait = Duration::from_nanos(deadline - now).min(Duration::from_millis(50));
        let timeout = Timespec {
            tv_sec: 0,
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        let stdin_fd = std::io::stdin();
        let mut fds = [
            PollFd::new(&signals.read, PollFlags::IN),
            PollFd::new(&stdin_fd, PollFlags::IN),
        ];
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                // Never leave CMD behind, whatever fails here.
                stop_group(pgid, grace);
                report("X");
                return Err(e.into());
            }
        }
        let signalled = !fds[0].revents().is_empty();
        let stdin_ready = !fds[1].revents().is_empty();
        if signalled {
            break 'wait Stop::Signal;
        }
        if stdin_ready {
            let mut buf = [0u8; 256];
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => {
                    break 'wait Stop::ParentGone;
                }
                Ok(n) => {
                    line.extend_from_slice(&buf[..n]);
                    while let Some(pos) = line.iter().position(|b| *b == b'\n') {
                        let cmd: Vec<u8> = line.drain(..=pos).collect();
                        match parse_control(&cmd) {
                            Some(Control::Deadline(ns)) => deadline = ns,
                            Some(Control::Stop) => break 'wait Stop::Asked,
                            None => {}
                        }
                    }
                }
            }
        }
    };
    // Stop first, talk after: a closed stderr must not keep CMD alive.
    stop_group(pgid, grace);
    let _ = reap(pgid);
    report("X");
    match stop {
        Stop::Deadline => warn_user!(
            "regent: no lease renewal reached the command's supervisor before the step-down deadline; stopped the command"
        ),
        Stop::ParentGone | Stop::Signal => {
            warn_user!("regent: regent went away; stopped the command")
        }
        Stop::Asked => {}
    }
    Ok(STOPPED_BY_SHIM)
}

/// The heartbeat pipe's write end (`$REGENT_HEARTBEAT_FD`, inherited from
/// regent), moved to the lowest free descriptor — fd 3 in practice — so
/// that every shell can write to it (`echo >&3`; dash accepts only
/// single-digit descriptors). Without unsafe code the inherited number is
/// reopened through /proc/self/fd.
fn heartbeat_fd() -> Option<OwnedFd> {
    let n: u32 = std::env::var("REGENT_HEARTBEAT_FD").ok()?.parse().ok()?;
    let reopened = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{n}"))
        .ok()?;
    let low = rustix::io::fcntl_dupfd_cloexec(&reopened, 3).ok()?;
    // CMD must inherit it.
    rustix::io::fcntl_setfd(&low, rustix::io::FdFlags::empty()).ok()?;
    Some(low)
}

/// A line to regent on the control socket (the shim's stdin): `X` when the
/// shim stopped CMD itself, `E` when CMD could not be started. Out of band,
/// so that no exit status of CMD's can be mistaken for them.
fn report(what: &str) {
    let _ = rustix::io::write(std::io::stdin(), format!("{what}\n").as_bytes());
}

enum Control {
    Deadline(u64),
    Stop,
}

fn parse_control(line: &[u8]) -> Option<Control> {
    let text = std::str::from_utf8(line).ok()?.trim();
    if text == "S" {
        return Some(Control::Stop);
    }
    let ns = text.strip_prefix("D ")?.parse().ok()?;
    Some(Control::Deadline(ns))
}

/// Reaps every exited child; returns CMD's status if CMD was among them.
fn reap(cmd: Pid) -> Option<u8> {
    let mut status = None;
    while let Ok(Some((pid, st))) = rustix::process::wait(WaitOptions::NOHANG) {
        if pid == cmd {
            status = Some(match (st.exit_status(), st.terminating_signal()) {
                (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
                (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(255),
                _ => 1,
            });
        }
    }
    status
}

/// Stops CMD's work: SIGTERM to CMD's group and to every other child the
/// shim has, up to `grace` for all of them to go, then SIGKILL.
///
/// "Every other child": jobs that left the group (`setsid`, a daemon's
/// double fork) are still CMD's work, and as a child subreaper the shim
/// inherits them as soon as their parent exits. They get their signals at
/// the same moments as the group, so that the whole stop still fits within
/// `grace` (the timing rules count on it); whatever is reparented to the
/// shim meanwhile joins at once.
fn stop_group(pgid: Pid, grace: Duration) {
    let group_gone = || rustix::process::test_kill_process_group(pgid).is_err();
    let mut termed = Vec::new();
    let start = std::time::Instant::now();
    let _ = rustix::process::kill_process_group(pgid, Signal::TERM);
    loop {
        let _ = reap(pgid);
        let orphans = children();
        for &child in &orphans {
            // Members of CMD's group had their SIGTERM: a second one would
            // read as "exit at once" to a command that, like regent, gives
            // a second signal that meaning.
            let in_group = rustix::process::getpgid(Some(child)).is_ok_and(|g| g == pgid);
            if !in_group && !termed.contains(&child) {
                kill_with_group(child, Signal::TERM);
                termed.push(child);
            }
        }
        if group_gone() && orphans.is_empty() {
            return;
        }
        if start.elapsed() >= grace {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
        for child in children() {
            kill_with_group(child, Signal::KILL);
        }
        let _ = reap(pgid);
        if group_gone() && children().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
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

/// The shim's live (not yet exited) children, found through /proc: CMD
/// and the orphans it inherited as a subreaper.
fn children() -> Vec<Pid> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name, which may hold ") ": state ppid ...
        let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
        let state = fields.next()?;
        let ppid: i32 = fields.next()?.parse().ok()?;
        (ppid == me && state != "Z" && state != "X").then(|| Pid::from_raw(pid))?
    })
    .collect()
}

/// SIGTERM, SIGINT and SIGHUP, delivered as readable bytes on a pipe.
struct SignalPipe {
    read: std::os::unix::net::UnixStream,
}

impl SignalPipe {
    fn new() -> std::io::Result<Self> {
        let (read, write) = std::os::unix::net::UnixStream::pair()?;
        read.set_nonblocking(true)?;
        for sig in [
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::low_level::pipe::register(sig, write.try_clone()?)?;
        }
        Ok(Self { read })
    }
}
