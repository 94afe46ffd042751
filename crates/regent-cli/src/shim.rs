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
//!   term's lease (see `store::Ticket`). It may hold a store's secret, so
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

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use clap::{Args, ValueEnum};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, Signal};

use crate::clock::mono_ns;
use crate::tree;

/// The shim's exit status when it stopped CMD itself (deadline passed,
/// regent gone, or asked to stop).
pub(crate) const STOPPED_BY_SHIM: u8 = 254;

/// Whether CMD's tree runs in a PID namespace of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PidNamespace {
    /// When the privilege allows it (CAP_SYS_ADMIN); else without, said once.
    Auto,
    /// Always; regent refuses to start where it cannot.
    Always,
    /// Never (CMD needs its host pids, e.g. to write a pid file others read).
    Never,
}

impl PidNamespace {
    /// The flag's value for this setting, as clap spells it.
    pub(crate) fn as_arg(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }
}

#[derive(Debug, Args)]
pub(crate) struct ShimArgs {
    /// Time between SIGTERM and SIGKILL, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub(crate) grace_ms: u64,
    /// The parent's pid, as /proc names it: if the parent is already
    /// another, it died before the death signal was armed.
    #[arg(long, default_value_t = 0)]
    pub(crate) parent: i32,
    /// Whether to give CMD a PID namespace.
    #[arg(long, value_enum, default_value_t = PidNamespace::Auto)]
    pub(crate) pid_namespace: PidNamespace,
    /// This process is the namespace's init, started by the shim.
    #[arg(long)]
    pub(crate) init: bool,
    /// Only check that a PID namespace can be created here: exit 0 if so,
    /// else 1 with the reason on stderr.
    #[arg(long)]
    pub(crate) probe: bool,
    /// Only give a lease back: read a release ticket on stdin (see
    /// `store::Ticket`), release its lease, exit 0 (1 if it failed).
    #[arg(long, conflicts_with_all = ["probe", "init"])]
    pub(crate) release: bool,
    /// The command.
    #[arg(last = true, required_unless_present_any = ["probe", "release"])]
    pub(crate) cmd: Vec<String>,
}

/// Test hook: with this variable set, the supervisor never gives a lease
/// back (as when the release fails), so that tests can reach what comes
/// after an unreleased crash (Consul's restart shortcut, a ttl's wait).
pub(crate) const KEEP_LEASE_ENV: &str = "REGENT_SHIM_KEEP_LEASE";

/// How long a release by ticket may take in all before the supervisor
/// stops waiting for it (each store call is bounded by
/// [`RELEASE_CALL_TIMEOUT`]).
const RELEASE_BOUND: Duration = Duration::from_secs(15);

/// How long the supervisor waits for regent's end of the control socket
/// to close after regent's death signal (see `regent_end`); a
/// supervisor stopped for another reason (the shim killed, regent alive)
/// waits this long before it exits.
const CLOSE_WAIT: Duration = Duration::from_millis(500);

/// The bound of each store call of a release by ticket.
const RELEASE_CALL_TIMEOUT: Duration = Duration::from_secs(5);

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
    crate::failpoint::hold("shim-before-init", None);
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut command = Command::new(crate::run::own_exe_path());
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
    crate::failpoint::hold("init-before-cmd", Some(go.token));
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
        crate::failpoint::hold("supervisor-stopping", Some(go.token));
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

/// A line from regent on the control socket.
#[derive(Debug, PartialEq, Eq)]
enum Control {
    /// `G TOKEN DEADLINE_NS`: the term began; start CMD.
    Go(Go),
    /// `D DEADLINE_NS`: the step-down instant moved.
    Deadline(u64),
    /// `S`: stop CMD.
    Stop,
    /// `T TICKET`: the term's release ticket.
    Ticket(String),
    /// `R`: regent gave the lease back itself (after `C`).
    Released,
}

/// What the supervisor needs to start CMD: the term's fencing token and
/// its first step-down instant (CLOCK_MONOTONIC nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Go {
    token: u64,
    deadline_ns: u64,
}

fn parse_control(line: &[u8]) -> Option<Control> {
    let text = std::str::from_utf8(line).ok()?.trim();
    if text == "S" {
        return Some(Control::Stop);
    }
    if text == "R" {
        return Some(Control::Released);
    }
    if let Some(ticket) = text.strip_prefix("T ") {
        return Some(Control::Ticket(ticket.to_owned()));
    }
    if let Some(go) = text.strip_prefix("G ") {
        let (token, deadline) = go.split_once(' ')?;
        return Some(Control::Go(Go {
            token: token.parse().ok()?,
            deadline_ns: deadline.parse().ok()?,
        }));
    }
    let ns = text.strip_prefix("D ")?.parse().ok()?;
    Some(Control::Deadline(ns))
}

/// What the supervisor holds of its term from regent's lines.
struct Heeded {
    /// The step-down instant (CLOCK_MONOTONIC nanoseconds).
    deadline: u64,
    /// The term's release ticket, if regent sent one.
    ticket: Option<String>,
}

impl Heeded {
    /// Takes regent's lines in order; whether one asked for the stop.
    fn heed(&mut self, words: impl IntoIterator<Item = Control>) -> bool {
        for word in words {
            match word {
                Control::Deadline(ns) => self.deadline = ns,
                Control::Stop => return true,
                Control::Ticket(t) => {
                    // It may hold a store's secret: keep this process's
                    // memory from CMD (same user).
                    let _ = rustix::process::set_dumpable_behavior(
                        rustix::process::DumpableBehavior::NotDumpable,
                    );
                    self.ticket = Some(t);
                }
                // One term per supervisor: a second go means nothing; a
                // release is looked for after the stop.
                Control::Go(_) | Control::Released => {}
            }
        }
        false
    }
}

/// The control socket (the supervisor's stdin), read straight from its
/// descriptor. std's `StdinLock` buffers: what a read leaves in its buffer
/// (the rest of a long ticket line, the line after the go) is data that
/// `poll` never reports, and it waited there for regent's next line,
/// which after a crash never comes.
struct ControlSocket;

impl Read for ControlSocket {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(rustix::io::read(rustix::stdio::stdin(), buf)?)
    }
}

impl std::os::fd::AsFd for ControlSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        rustix::stdio::stdin()
    }
}

/// The control socket's lines, read as they come.
#[derive(Default)]
struct ControlReader {
    /// The start of a line not yet ended.
    partial: Vec<u8>,
    /// Lines read but not yet acted on.
    pending: Vec<Control>,
}

impl ControlReader {
    /// One read: the lines it completed, or `None` when regent's end is
    /// closed (or the socket failed: regent is not there to talk to).
    fn read<S: Read>(&mut self, stdin: &mut S) -> Option<Vec<Control>> {
        let mut buf = [0u8; 4096];
        match stdin.read(&mut buf) {
            Ok(0) => None,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Some(Vec::new()),
            Err(_) => None,
            Ok(n) => Some(self.feed(&buf[..n])),
        }
    }

    /// Bytes read from the socket: the lines they complete.
    fn feed(&mut self, bytes: &[u8]) -> Vec<Control> {
        self.partial.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(pos) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=pos).collect();
            lines.extend(parse_control(&line));
        }
        lines
    }
}

/// Waits for regent's go (`G …`): a supervisor is started ahead of its
/// term, while regent still follows, so that a hand-over does not wait
/// for the shim and the init to start. `None` when there will be no term:
/// regent went away, asked for a stop, or a signal came. What came after
/// the go line is left in `control.pending`.
fn wait_for_go<S: Read + std::os::fd::AsFd>(
    signals: &SignalPipe,
    stdin: &mut S,
    control: &mut ControlReader,
) -> std::io::Result<Option<Go>> {
    loop {
        let mut fds = [
            PollFd::new(&signals.read, PollFlags::IN),
            PollFd::new(&*stdin, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        if !fds[0].revents().is_empty() {
            return Ok(None);
        }
        if fds[1].revents().is_empty() {
            continue;
        }
        let Some(lines) = control.read(stdin) else {
            return Ok(None);
        };
        let mut lines = lines.into_iter();
        while let Some(word) = lines.next() {
            match word {
                Control::Go(go) => {
                    control.pending.extend(lines);
                    return Ok(Some(go));
                }
                Control::Stop => return Ok(None),
                // Nothing to guard yet.
                Control::Deadline(_) | Control::Ticket(_) | Control::Released => {}
            }
        }
    }
}

/// How regent's end of the control socket ended, as [`regent_end`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// regent said it gave the lease back (`R`).
    Released,
    /// Closed: regent is gone.
    Closed,
    /// Still open when the wait ran out (or the socket failed otherwise).
    Open,
    /// A signal came first (with `signals` given).
    Signalled,
}

/// Waits up to `wait` for regent's end of the control socket: its `R`, or
/// its close. What is left to read is read up to the end of the stream, or
/// the reset a socket closed with unread data gives; its lines are left in
/// `control.pending`. regent's death closes it; regent itself closes it
/// only after the supervisor has exited.
///
/// After regent's death signal the end need not have come yet: the signal
/// comes when the thread that started the shim exits, the files close
/// when regent's last thread does.
fn regent_end<S: Read + std::os::fd::AsFd>(
    stdin: &mut S,
    control: &mut ControlReader,
    wait: Duration,
    signals: Option<&SignalPipe>,
) -> End {
    let mut buf = [0u8; 4096];
    let until = std::time::Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        let timeout = Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(0),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let (ready, signalled) = match signals {
            Some(signals) => {
                let mut fds = [
                    PollFd::new(&*stdin, PollFlags::IN),
                    PollFd::new(&signals.read, PollFlags::IN),
                ];
                let r = poll(&mut fds, Some(&timeout));
                (r, !fds[1].revents().is_empty())
            }
            None => {
                let mut fds = [PollFd::new(&*stdin, PollFlags::IN)];
                (poll(&mut fds, Some(&timeout)), false)
            }
        };
        match ready {
            Ok(0) => return End::Open,
            Ok(_) if signalled => return End::Signalled,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return End::Open,
        }
        match stdin.read(&mut buf) {
            Ok(0) => return End::Closed,
            Ok(n) => {
                let lines = control.feed(&buf[..n]);
                let released = lines.contains(&Control::Released);
                control.pending.extend(lines);
                if released {
                    return End::Released;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // A stream socket whose peer closed with data it never read
            // (the supervisor's own reports, with regent dead) answers
            // ECONNRESET rather than the end: closed all the same. (Taken
            // for "open", it kept 1 crash in 5 from giving its lease back.)
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return End::Closed,
            Err(_) => return End::Open,
        }
    }
}

/// Gives the term's lease back by its ticket, in a process of its own
/// (`__shim --release`: it needs a runtime and the store's client, which
/// the supervisor does without), and waits for it, at most
/// [`RELEASE_BOUND`] in all. The ticket goes on the child's stdin, never in
/// its arguments or environment. A release process killed by a signal
/// (the OOM killer, a stray kill) is started once more: a release frees
/// only this term's lease, so a second one is harmless.
fn hand_back(ticket: &str) {
    let started = std::time::Instant::now();
    for attempt in 0..2 {
        match release_once(ticket, started) {
            Some(status) if status.signal().is_some() && attempt == 0 => {
                warn_user!(
                    "regent: the release of the lease was killed ({status}); trying once more"
                );
            }
            _ => return,
        }
    }
}

/// One `__shim --release` process; its exit status, or `None` when it
/// could not start or did not end within [`RELEASE_BOUND`] of `started`.
fn release_once(ticket: &str, started: std::time::Instant) -> Option<std::process::ExitStatus> {
    use std::io::Write as _;
    let spawned = Command::new(crate::run::own_exe_path())
        .args(["__shim", "--release"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            warn_user!(
                "regent: cannot start the release of the lease ({e}); it expires by its ttl"
            );
            return None;
        }
    };
    if let Some(mut input) = child.stdin.take() {
        // Dropped at the end of this block: the child reads EOF.
        let _ = input.write_all(ticket.as_bytes());
    }
    let mut pause = Duration::from_micros(500);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Err(_) => return None,
            Ok(None) if started.elapsed() >= RELEASE_BOUND => {
                warn_user!(
                    "regent: the release of the lease took longer than {RELEASE_BOUND:?}; it expires by its ttl"
                );
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
        }
    }
}

/// `__shim --release`: reads a ticket on stdin and releases its lease.
fn release_by_ticket() -> ExitCode {
    let mut text = String::new();
    // A ticket is a few hundred bytes; a megabyte is garbage.
    if let Err(e) = std::io::stdin().take(1 << 20).read_to_string(&mut text) {
        warn_user!("regent: cannot read the release ticket: {e}");
        return ExitCode::from(1);
    }
    let ticket = match crate::store::Ticket::parse(&text) {
        Ok(t) => t,
        Err(e) => {
            warn_user!("regent: {e}");
            return ExitCode::from(1);
        }
    };
    if ticket.has_env() {
        let _ =
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    }
    crate::failpoint::hold("release-by-ticket", None);
    let what = format!("{ticket:?}");
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            warn_user!("regent: cannot give the lease back: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(ticket.release(RELEASE_CALL_TIMEOUT)) {
        Ok(()) => {
            tracing::info!(ticket = %what, "gave the lease back");
            warn_user!("regent: regent went away; gave the lease back once the command was gone");
            ExitCode::SUCCESS
        }
        Err(e) => {
            warn_user!(
                "regent: regent went away; cannot give the lease back ({e}); it expires by its ttl"
            );
            ExitCode::from(1)
        }
    }
}

/// Signals delivered as readable bytes on a socket pair, so that `poll`
/// wakes for them: SIGTERM, SIGINT and SIGHUP ([`SignalPipe::new`]), or
/// SIGCHLD ([`SignalPipe::children`]).
struct SignalPipe {
    read: std::os::unix::net::UnixStream,
}

impl SignalPipe {
    /// The signals that ask for a stop.
    fn new() -> std::io::Result<Self> {
        Self::of(&[
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGHUP,
        ])
    }

    /// SIGCHLD: a child exited. The supervisor reaps as soon as it comes
    /// rather than at its next periodic look: a hand-over waits for the
    /// old term's processes to be gone, and every millisecond of that
    /// wait is the service's.
    fn children() -> std::io::Result<Self> {
        Self::of(&[signal_hook::consts::SIGCHLD])
    }

    fn of(signals: &[i32]) -> std::io::Result<Self> {
        let (read, write) = std::os::unix::net::UnixStream::pair()?;
        read.set_nonblocking(true)?;
        for &sig in signals {
            signal_hook::low_level::pipe::register(sig, write.try_clone()?)?;
        }
        Ok(Self { read })
    }

    /// Whether a signal arrived since the last call; reads without waiting.
    fn drain(&self) -> bool {
        let mut any = false;
        let mut buf = [0u8; 64];
        while let Ok(n) = (&self.read).read(&mut buf) {
            if n == 0 {
                break;
            }
            any = true;
        }
        any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::os::unix::net::UnixStream;

    /// Regression: regent dead with the supervisor's reports unread in its
    /// socket makes the supervisor's read fail with ECONNRESET, not end;
    /// taken for "still open", 1 crash in 5 kept its lease for the ttl.
    #[test]
    fn a_peer_gone_with_unread_data_is_closed() {
        let (regent, mut supervisor) = UnixStream::pair().expect("pair");
        supervisor.write_all(b"X\n").expect("report");
        drop(regent);
        assert_eq!(
            regent_end(
                &mut supervisor,
                &mut ControlReader::default(),
                Duration::ZERO,
                None
            ),
            End::Closed
        );
    }

    #[test]
    fn a_peer_gone_cleanly_is_closed_and_a_live_one_is_not() {
        let (regent, mut supervisor) = UnixStream::pair().expect("pair");
        let (live, mut watched) = UnixStream::pair().expect("pair");
        (&live).write_all(b"D 1\n").expect("deadline");
        assert_eq!(
            regent_end(
                &mut watched,
                &mut ControlReader::default(),
                Duration::from_millis(20),
                None
            ),
            End::Open
        );
        drop(regent);
        assert_eq!(
            regent_end(
                &mut supervisor,
                &mut ControlReader::default(),
                Duration::ZERO,
                None
            ),
            End::Closed
        );
        drop(live);
    }

    /// After a stop regent asked for, its `R` ends the wait; regent's end
    /// without one is a close, with what it wrote before kept.
    #[test]
    fn regents_release_or_its_end_ends_the_wait_after_a_stop() {
        let (regent, mut supervisor) = UnixStream::pair().expect("pair");
        (&regent).write_all(b"D 9\nR\n").expect("write");
        let mut control = ControlReader::default();
        assert_eq!(
            regent_end(&mut supervisor, &mut control, Duration::from_secs(5), None),
            End::Released
        );
        let (regent, mut supervisor) = UnixStream::pair().expect("pair");
        (&regent).write_all(b"T late\n").expect("write");
        drop(regent);
        let mut control = ControlReader::default();
        assert_eq!(
            regent_end(&mut supervisor, &mut control, Duration::from_secs(5), None),
            End::Closed
        );
        assert_eq!(control.pending, vec![Control::Ticket("late".into())]);
    }

    /// A signal ends the wait for regent's `R` (a frozen regent whose shim
    /// was killed must not keep the supervisor for the whole bound).
    #[test]
    fn a_signal_ends_the_wait_for_regents_release() {
        let (_regent, mut supervisor) = UnixStream::pair().expect("pair");
        let (read, signal) = UnixStream::pair().expect("pair");
        read.set_nonblocking(true).expect("nonblocking");
        let signals = SignalPipe { read };
        (&signal).write_all(b"\x0f").expect("signal");
        assert_eq!(
            regent_end(
                &mut supervisor,
                &mut ControlReader::default(),
                Duration::from_secs(5),
                Some(&signals)
            ),
            End::Signalled
        );
    }

    #[test]
    fn control_lines_parse_and_garbage_is_ignored() {
        assert_eq!(
            parse_control(b"G 7 123\n"),
            Some(Control::Go(Go {
                token: 7,
                deadline_ns: 123
            }))
        );
        assert_eq!(parse_control(b"D 5\n"), Some(Control::Deadline(5)));
        assert_eq!(parse_control(b"S\n"), Some(Control::Stop));
        assert_eq!(parse_control(b"R\n"), Some(Control::Released));
        assert_eq!(parse_control(b"T {}\n"), Some(Control::Ticket("{}".into())));
        for garbage in [
            &b"G 7\n"[..],
            b"G x 1\n",
            b"G 1 -2\n",
            b"D\n",
            b"\xff\n",
            b"Q 1\n",
        ] {
            assert_eq!(parse_control(garbage), None, "{garbage:?}");
        }
    }

    /// The go line arrives with what follows it in one read, and a line
    /// longer than one read arrives whole: nothing after the go is lost,
    /// nothing before it (there is no term yet) is kept.
    #[test]
    fn the_go_keeps_the_lines_after_it_whole() {
        let (regent, mut supervisor) = UnixStream::pair().expect("pair");
        let (read, _no_signal) = UnixStream::pair().expect("pair");
        let signals = SignalPipe { read };
        let long = "x".repeat(10_000);
        let writer = std::thread::spawn(move || {
            let mut regent = regent;
            regent
                .write_all(format!("T early\nD 1\nG 9 100\nT {long}").as_bytes())
                .expect("write");
            std::thread::sleep(Duration::from_millis(20));
            regent.write_all(b"\nD 7\n").expect("write");
            regent
        });
        let mut control = ControlReader::default();
        let go = wait_for_go(&signals, &mut supervisor, &mut control).expect("poll");
        assert_eq!(
            go,
            Some(Go {
                token: 9,
                deadline_ns: 100
            })
        );
        let _regent = writer.join().expect("writer");
        let mut words = std::mem::take(&mut control.pending);
        while words.len() < 2 {
            words.extend(control.read(&mut supervisor).expect("open"));
        }
        assert_eq!(
            words,
            vec![Control::Ticket("x".repeat(10_000)), Control::Deadline(7)]
        );
    }

    /// No term comes when regent goes away or asks for a stop first.
    #[test]
    fn no_go_when_regent_is_gone_or_asks_for_a_stop() {
        let (read, _no_signal) = UnixStream::pair().expect("pair");
        let signals = SignalPipe { read };
        let (regent, mut supervisor) = UnixStream::pair().expect("pair");
        (&regent).write_all(b"D 1\n").expect("write");
        drop(regent);
        let mut control = ControlReader::default();
        assert_eq!(
            wait_for_go(&signals, &mut supervisor, &mut control).expect("poll"),
            None
        );
        let (regent, mut supervisor) = UnixStream::pair().expect("pair");
        (&regent).write_all(b"S\nG 1 2\n").expect("write");
        let mut control = ControlReader::default();
        assert_eq!(
            wait_for_go(&signals, &mut supervisor, &mut control).expect("poll"),
            None
        );
    }
}
