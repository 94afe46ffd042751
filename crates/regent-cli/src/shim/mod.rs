//! The shim: a tiny single-threaded process (this binary, hidden mode
//! `__shim`) between `regent` and CMD, and the guard that nothing of a
//! term's work outlives it.
//!
//! Why a separate process: nothing of the leader's work may outlive
//! `regent`, even a SIGKILLed one, and nothing may run past the lease while
//! `regent` is stopped or hung.
//!
//! # The kernel's guard: a PID namespace per term
//!
//! `regent` and the shim used to be each other's only guard: the shim
//! stopped CMD when `regent` died, `regent` stopped CMD when the shim died.
//! A fault campaign found the hole: freeze `regent` (SIGSTOP), SIGKILL the
//! shim, and CMD — with its background jobs — ran on unsupervised beside
//! every newer term, for good if `regent` was then killed too. A guard
//! that a process can be killed out of is no guard; one the kernel
//! enforces is. So CMD's whole tree runs in a **PID namespace** of its own:
//!
//! ```text
//! regent ── shim (__shim) ── init (__shim --init, pid 1 of the namespace) ── CMD ── jobs…
//! ```
//!
//! * The shim calls `unshare(CLONE_NEWPID)` and starts the init, the first
//!   process of the new namespace (pid 1 there). When a namespace's init
//!   dies, by any means, the kernel SIGKILLs every other process in it and
//!   no process can leave it: background jobs, `setsid` daemons and double
//!   forks included.
//! * The init asks for `PR_SET_PDEATHSIG(SIGTERM)`: when the shim dies,
//!   even by SIGKILL, the init stops CMD (SIGTERM, `grace`, SIGKILL — its
//!   dead-man's deadline still applies), then exits, and the kernel clears
//!   whatever is left. This needs nobody else: `regent` may be frozen or
//!   dead. SIGKILL of the init itself ends everything at once. The shim
//!   and the init are single-threaded, so the death signal is tied to the
//!   process, not to a thread that could end early.
//! * The init does what the shim alone did before (below): it is CMD's
//!   parent, reads the control socket, keeps the dead-man's switch, stops
//!   CMD. As pid 1 it receives only the signals it handles, so CMD is not
//!   pid 1 (a shell there would ignore SIGTERM); `kill(-1, …)` from the
//!   init reaches exactly the namespace's other processes.
//! * `regent` is a child subreaper: whatever of a term is orphaned when a
//!   shim dies becomes its child, and it stops every child it still has
//!   before the lease may go (see `tree.rs`).
//!
//! Why not a cgroup with `cgroup.kill`: it needs cgroup v2 with a
//! delegated, writable subtree, which a plain user, a container and hybrid
//! hosts (cgroup v1 controllers, v2 mounted aside, as on the machines this
//! was built on) often lack; and a cgroup outlives the processes that made
//! it, so a killed `regent` would leave one behind to clean. A PID namespace
//! needs only CAP_SYS_ADMIN (root, or a container's root) and the kernel
//! tears it down with its init.
//!
//! Costs, documented for users: CMD sees itself as pid 2 and its jobs
//! with small pids (`$$`, `getpid()`, pid files written by CMD name
//! namespace pids, while `/proc` and `ps` still show the host's); CMD
//! cannot leave the namespace to run as a daemon outside regent's control,
//! which is the point.
//!
//! Fallback (`--pid-namespace auto`, the default, without the privilege;
//! or `never`): the shim itself is CMD's parent and guard, as described
//! next, and `regent` reports once that it runs without the kernel's
//! guard. Then a frozen `regent` whose shim is SIGKILLed leaves CMD running
//! until `regent` resumes (it stops every orphan before it campaigns
//! again), and for good if `regent` is killed meanwhile.
//! `--pid-namespace always` refuses to start without a namespace.
//!
//! # The supervisor (the init, or the shim itself in the fallback)
//!
//! * CMD runs as the leader of a new process group; the supervisor is a
//!   child subreaper (or pid 1), so orphaned background jobs become its
//!   children and are reaped. Stopping CMD stops the group and every such
//!   child, even a job that left the group (`setsid`).
//! * The shim leads a process group of its own, apart from regent's: a
//!   job-control stop of regent's group must not freeze the dead-man's
//!   switch too.
//! * The shim's stdin is one end of a socket pair whose other end `regent`
//!   holds; the init inherits it. The shim says `N pid` or `N none <why>`
//!   on it (whether CMD has a namespace).
//! * Started ahead of its term: `regent` starts the next term's shim (and
//!   so its init) while it still follows, and the supervisor waits for
//!   `G TOKEN DEADLINE` — the term's fencing token (CMD's
//!   `REGENT_FENCING_TOKEN`) and its first step-down instant — before it
//!   starts CMD. A hand-over then waits for CMD's start alone, not for two
//!   starts of this binary before it. Without a go (regent gone, `S`, a
//!   signal) it exits having started nothing.
//! * When `regent` dies, however it dies, the kernel closes the socket and
//!   the supervisor reads EOF; as a second line of defence the shim asks
//!   for `PR_SET_PDEATHSIG(SIGTERM)` and catches it (forwarding it to the
//!   init). (`regent` spawns the shim from its main thread, whose exit is
//!   the process's exit, so the death signal cannot fire early when some
//!   other thread ends.) Either way the supervisor kills the whole group:
//!   SIGTERM, `grace`, SIGKILL.
//! * Dead-man's switch: `regent` sends `D <ns>` after every renewal — its
//!   step-down instant on CLOCK_MONOTONIC, the clock all processes share. If
//!   that instant passes with no newer one (regent paused, hung, starved),
//!   the supervisor stops the group by itself; the timing rules make SIGKILL
//!   land before the lease could pass on. `S` asks for the same stop.
//!
//! # Giving the lease back when regent dies
//!
//! A crash of `regent` alone (kill -9, the OOM killer, a bug) leaves the
//! supervisor alive: it stops CMD's whole tree at once. Once that tree is
//! provably gone (the namespace's other processes, or the group and every
//! orphan, reaped), nothing of the term can act, so the lease need not run
//! out: the supervisor gives it back and the next leader starts in
//! milliseconds instead of after a ttl.
//!
//! * At the start of every term `regent run` writes `T TICKET` on the
//!   control socket, in the same write as the go: one line of JSON with
//!   the store as `--store`, its flags and the variables it read, and the
//!   term's lease (see `regent::guardian::Ticket`). It may hold a store's secret, so
//!   it travels only on the socket, and the supervisor that holds it makes
//!   itself non-dumpable (CMD, of the same user, cannot read its memory).
//! * The supervisor heeds every line regent wrote before it acts on
//!   regent's end or its death signal, and reads what is left in the
//!   socket on its way to the end. (It used to heed the lines that came
//!   with the go only after its first wake-up; regent's death in CMD's
//!   first ~50 ms woke it first, and the lease ran out: issue 25.)
//! * The supervisor releases only when regent is gone (its end of the
//!   socket is closed) and the tree is gone. A frozen `regent` (the
//!   dead-man's switch fired) or a killed shim (regent lives and resigns
//!   itself) is not a reason.
//! * After a stop regent asked for (`S`), once the tree is gone, the
//!   supervisor says `C` and stays, ticket in hand, until regent says `R`
//!   (it gave the lease back itself) or dies (then the ticket gives it
//!   back). regent releases on `C`, not after the supervisor's exit: a
//!   regent killed between the two left the lease to its ttl.
//! * The release runs in a process of its own (`__shim --release`, the
//!   ticket on its stdin), bounded; the store's own `release` frees only
//!   that lease, never a later holder's (the conformance suite checks it
//!   through a second connection). A release process killed by a signal
//!   is started once more. If it fails, the lease expires by its ttl, as
//!   before.
//!
//! `regent peer` sends no ticket: a peer's term is not a store's lease.
//! A crash of the whole instance (the host, or regent with its supervisor)
//! still costs the ttl, and so does the one instant where regent alone
//! holds the lease with no live supervisor holding its ticket: between
//! the acquire's answer and the go, which carries the ticket (`regent
//! torture --sweep` measures every point). `REGENT_SHIM_KEEP_LEASE` (a test hook) plays a
//! release that fails.
//!
//! Exit status: CMD's own (128+signal if killed) when it ended by itself;
//! [`STOPPED_BY_SHIM`] when the supervisor stopped it. When the init is
//! killed by a signal, the shim kills itself with SIGKILL so that `regent`
//! sees a supervisor that died, as it was.
//!
//! Test hook: `REGENT_FAILPOINT` holds the shim, the init or the release
//! process at a named point of a term, so that tests and `regent torture
//! --sweep` can kill a process there (see `failpoint.rs`).
mod control;
mod release;
mod signals;

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, Signal};

use self::control::{
    CLOSE_WAIT, ControlReader, ControlSocket, End, Heeded, regent_end, wait_for_go,
};
use self::release::{RELEASE_BOUND, hand_back, release_by_ticket};
use self::signals::SignalPipe;
use crate::cli::{PidNamespace, ShimArgs};
use crate::clock::mono_ns;
use crate::tree;

/// The shim's exit status when it stopped CMD itself (deadline passed,
/// regent gone, or asked to stop).
pub(crate) const STOPPED_BY_SHIM: u8 = 254;

/// Test hook: with this variable set, the supervisor never gives a lease
/// back (as when the release fails), so that tests can reach what comes
/// after an unreleased crash (Consul's restart shortcut, a ttl's wait).
pub(crate) const KEEP_LEASE_ENV: &str = "REGENT_SHIM_KEEP_LEASE";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Asked,
    ParentGone,
    Deadline,
    Signal,
}

/// How the supervisor ends CMD's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    /// CMD's group and the supervisor's other children (the fallback).
    Group,
    /// Every other process of the supervisor's PID namespace (the init).
    Namespace,
}

pub(crate) fn main(args: ShimArgs) -> ExitCode {
    if args.probe {
        return match new_pid_namespace() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                warn_user!("{e}");
                ExitCode::from(1)
            }
        };
    }
    if args.release {
        return release_by_ticket();
    }
    let result = if args.init { init(&args) } else { shim(&args) };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            warn_user!("regent shim: {e}");
            ExitCode::from(STOPPED_BY_SHIM)
        }
    }
}

/// `unshare(CLONE_NEWPID)`: this process's next child is the first process
/// (pid 1) of a new PID namespace; this process itself stays where it is.
fn new_pid_namespace() -> std::io::Result<()> {
    // rustix deprecates its safe `unshare` because `CLONE_FILES` can break
    // other threads' descriptors; `CLONE_NEWPID` touches no descriptor and
    // the shim is single-threaded.
    #[allow(deprecated)]
    rustix::thread::unshare(rustix::thread::UnshareFlags::NEWPID)
        .map_err(|e| std::io::Error::other(format!("unshare: {e}")))
}

/// The shim proper (regent's child).
fn shim(args: &ShimArgs) -> std::io::Result<u8> {
    rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
    if rustix::process::getppid()
        .map(Pid::as_raw_nonzero)
        .map(|p| p.get())
        != Some(args.parent)
    {
        // regent died before the death signal was armed.
        return Ok(STOPPED_BY_SHIM);
    }
    let isolated = match args.pid_namespace {
        PidNamespace::Never => Err("--pid-namespace never".to_owned()),
        PidNamespace::Auto | PidNamespace::Always => new_pid_namespace().map_err(|e| e.to_string()),
    };
    match isolated {
        Ok(()) => {
            report("N pid");
            hold(args)
        }
        Err(why) if args.pid_namespace == PidNamespace::Always => {
            warn_user!(
                "regent: cannot create a PID namespace ({why}); not starting the command (--pid-namespace always)"
            );
            report("X");
            Ok(STOPPED_BY_SHIM)
        }
        Err(why) => {
            report(&format!("N none {why}"));
            supervise(args, Guard::Group)
        }
    }
}

/// The shim with CMD in a namespace: starts the init, forwards the signals
/// that ask for a stop, and ends as the init ended.
fn hold(args: &ShimArgs) -> std::io::Result<u8> {
    let signals = SignalPipe::new()?;
    let exits = SignalPipe::children()?;
    crate::failpoint::hold(crate::failpoint::Stage::ShimBeforeInit, None);
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut command = Command::new(crate::exe::own_exe_path());
    command
        .arg0(
            std::env::args_os()
                .next()
                .unwrap_or_else(|| "regent".into()),
        )
        .arg("__shim")
        .arg("--init")
        .arg("--grace-ms")
        .arg(args.grace_ms.to_string())
        .arg("--parent")
        .arg(me.to_string())
        .arg("--")
        .args(&args.cmd);
    let mut init = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            warn_user!("regent: cannot start the command's init: {e}");
            report("X");
            return Ok(STOPPED_BY_SHIM);
        }
    };
    let pid = Pid::from_child(&init);
    loop {
        if let Some(status) = init.try_wait()? {
            return Ok(match (status.code(), status.signal()) {
                (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
                (None, sig) => {
                    // Killed: everything in its namespace went with it.
                    // regent must see a supervisor that died, as it did.
                    warn_user!(
                        "regent: the command's init was killed (signal {}); the kernel ended the command's namespace",
                        sig.unwrap_or(0)
                    );
                    let _ = rustix::process::kill_process(rustix::process::getpid(), Signal::KILL);
                    STOPPED_BY_SHIM
                }
            });
        }
        let timeout = Timespec {
            tv_sec: 0,
            tv_nsec: 50_000_000,
        };
        let mut fds = [
            PollFd::new(&signals.read, PollFlags::IN),
            PollFd::new(&exits.read, PollFlags::IN),
        ];
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                // Never leave CMD behind: the init's end is the namespace's.
                let _ = init.kill();
                let _ = init.wait();
                report("X");
                return Err(e.into());
            }
        }
        // The init's exit is looked for at the top of the loop.
        exits.drain();
        if signals.drain() {
            // regent died (the death signal) or someone asks for a stop:
            // the init stops CMD gracefully.
            let _ = rustix::process::kill_process(pid, Signal::TERM);
        }
    }
}

/// The namespace's init (pid 1), started by the shim.
fn init(args: &ShimArgs) -> std::io::Result<u8> {
    rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
    // getppid() says 0 here (the shim is outside the namespace); /proc,
    // mounted for an outer namespace, still names it.
    if let Some(me) = regent_proc::self_pid()
        && regent_proc::stat(me).map(|s| s.ppid) != Some(args.parent)
    {
        // The shim died before the death signal was armed.
        return Ok(STOPPED_BY_SHIM);
    }
    supervise(args, Guard::Namespace)
}

/// Runs CMD and guards it until it ends or must stop.
fn supervise(args: &ShimArgs, guard: Guard) -> std::io::Result<u8> {
    let grace = Duration::from_millis(args.grace_ms);
    // First, before any other descriptor is opened here, so that fd 3 is
    // free to take.
    let heartbeat = heartbeat_fd();
    let signals = SignalPipe::new()?;
    let exits = SignalPipe::children()?;
    if guard == Guard::Group {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    }
    let mut stdin = ControlSocket;
    let mut control = ControlReader::default();
    // Started ahead of its term: CMD starts on regent's word, with the
    // term's token and deadline.
    let Some(go) = wait_for_go(&signals, &mut stdin, &mut control)? else {
        return Ok(STOPPED_BY_SHIM);
    };
    if mono_ns() >= go.deadline_ns {
        // The term is over before CMD could start (regent or this process
        // stalled after the go): starting it now would only run it past
        // the lease.
        report("X");
        warn_user!(
            "regent: the term's step-down deadline passed before the command could start; not starting it"
        );
        return Ok(STOPPED_BY_SHIM);
    }
    crate::failpoint::hold(crate::failpoint::Stage::InitBeforeCmd, Some(go.token));
    let stop_all = |pgid| match guard {
        Guard::Group => tree::stop_children(Some(pgid), grace, Some(&exits.read)),
        Guard::Namespace => tree::stop_namespace(grace, Some(&exits.read)),
    };

    let (program, rest) = args.cmd.split_first().expect("clap requires CMD");
    let mut command = Command::new(program);
    command
        .args(rest)
        .process_group(0)
        .stdin(Stdio::null())
        .env("REGENT_FENCING_TOKEN", go.token.to_string())
        .env_remove(crate::failpoint::ENV)
        .env_remove(KEEP_LEASE_ENV);
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
    // From here on the supervisor reaps every child itself (CMD and
    // orphans), so std's handle is not used to wait.
    drop(child);

    let mut term = Heeded {
        deadline: go.deadline_ns,
        ticket: None,
    };
    // What came with the go line: the ticket, in practice. Heeded before
    // anything else can happen, so that a crash of regent at CMD's very
    // start still finds the ticket taken.
    let mut said = std::mem::take(&mut control.pending);
    let stop = 'wait: loop {
        if term.heed(said.drain(..)) {
            break 'wait Stop::Asked;
        }
        if let Some(status) = tree::reap(Some(pgid)) {
            // CMD ended by itself; its background jobs go with it.
            stop_all(pgid);
            return Ok(status);
        }
        let now = mono_ns();
        if now >= term.deadline {
            break 'wait Stop::Deadline;
        }
        // Wake at least every 50 ms to reap children.
        let wait = Duration::from_nanos(term.deadline - now).min(Duration::from_millis(50));
        let timeout = Timespec {
            tv_sec: 0,
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        let mut fds = [
            PollFd::new(&signals.read, PollFlags::IN),
            PollFd::new(&stdin, PollFlags::IN),
            PollFd::new(&exits.read, PollFlags::IN),
        ];
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                // Never leave CMD behind, whatever fails here.
                stop_all(pgid);
                report("X");
                return Err(e.into());
            }
        }
        let signalled = !fds[0].revents().is_empty();
        let stdin_ready = !fds[1].revents().is_empty();
        // A child exited: reaped at the top of the loop.
        exits.drain();
        // What regent said is heeded before its end is: its last lines
        // and its end (or its death signal) can come in one wake-up.
        let mut closed = false;
        if stdin_ready {
            match control.read(&mut stdin) {
                Some(more) => said.extend(more),
                None => closed = true,
            }
        }
        if term.heed(said.drain(..)) {
            break 'wait Stop::Asked;
        }
        if signalled {
            break 'wait Stop::Signal;
        }
        if closed {
            break 'wait Stop::ParentGone;
        }
    };
    if stop == Stop::Asked {
        crate::failpoint::hold(crate::failpoint::Stage::SupervisorStopping, Some(go.token));
    }
    // Stop first, talk after: a closed stderr must not keep CMD alive.
    let all_gone = stop_all(pgid);
    let _ = tree::reap(Some(pgid));
    report("X");
    // regent died (its end of the control socket is closed), and nothing
    // of the term runs any more: give the lease back, so that the next
    // leader need not wait out the ttl. A frozen regent (the deadline
    // passed) or a dead shim (regent lives on and resigns itself) is not a
    // reason.
    //
    // A stop regent asked for, with everything of the term gone: regent
    // gives the lease back itself, now (`C`: the term's tree is gone),
    // while this process still holds the ticket. It says `R` once it has;
    // should it die first, its end of the socket closes and the ticket
    // gives the lease back. Without this, a regent killed between its
    // supervisor's exit and its own release left the lease to its ttl.
    //
    // What regent wrote before it died and this process had not read yet
    // (the ticket, when the death signal came first) is read on the way to
    // the socket's end, and heeded.
    let end = match stop {
        Stop::Asked if all_gone && term.ticket.is_some() => {
            report("C");
            match regent_end(&mut stdin, &mut control, RELEASE_BOUND, Some(&signals)) {
                // The shim died (regent, alive, resigns itself: a frozen
                // one must not keep this process), or regent did (its end
                // follows its death signal closely): stop waiting for R.
                End::Signalled => regent_end(&mut stdin, &mut control, CLOSE_WAIT, None),
                end => end,
            }
        }
        Stop::ParentGone | Stop::Signal if all_gone => {
            regent_end(&mut stdin, &mut control, CLOSE_WAIT, None)
        }
        Stop::Asked | Stop::ParentGone | Stop::Signal | Stop::Deadline => End::Open,
    };
    if end == End::Closed && std::env::var_os(KEEP_LEASE_ENV).is_none() {
        term.heed(control.pending.drain(..));
        if let Some(ticket) = term.ticket.take() {
            hand_back(&ticket);
        }
    }
    match stop {
        Stop::Deadline => warn_user!(
            "regent: no lease renewal reached the command's supervisor before the step-down deadline; stopped the command"
        ),
        Stop::ParentGone => warn_user!("regent: regent went away; stopped the command"),
        Stop::Signal if guard == Guard::Namespace => {
            warn_user!("regent: the command's supervisor went away; stopped the command")
        }
        Stop::Signal => warn_user!("regent: regent went away; stopped the command"),
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
/// supervisor stopped CMD itself, `E` when CMD could not be started, `N …`
/// whether CMD has a namespace, `C` when a stop regent asked for left
/// nothing of the term running (regent may release now). Out of band, so
/// that no exit status of
/// CMD's can be mistaken for them.
fn report(what: &str) {
    let _ = rustix::io::write(std::io::stdin(), format!("{what}\n").as_bytes());
}
