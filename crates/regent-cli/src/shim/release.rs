//! Giving a term's lease back without regent: the supervisor hands its
//! release ticket to a process of its own (`__shim --release`), which
//! releases the lease with the store's own `release`.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// How long a release by ticket may take in all before the supervisor
/// stops waiting for it (each store call is bounded by
/// [`RELEASE_CALL_TIMEOUT`]).
pub(super) const RELEASE_BOUND: Duration = Duration::from_secs(15);

/// The bound of each store call of a release by ticket.
pub(super) const RELEASE_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Gives the term's lease back by its ticket, in a process of its own
/// (`__shim --release`: it needs a runtime and the store's client, which
/// the supervisor does without), and waits for it, at most
/// [`RELEASE_BOUND`] in all. The ticket goes on the child's stdin, never in
/// its arguments or environment. A release process killed by a signal
/// (the OOM killer, a stray kill) is started once more: a release frees
/// only this term's lease, so a second one is harmless.
pub(super) fn hand_back(ticket: &str) {
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
pub(super) fn release_once(
    ticket: &str,
    started: std::time::Instant,
) -> Option<std::process::ExitStatus> {
    use std::io::Write as _;
    let spawned = Command::new(crate::exe::own_exe_path())
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
pub(super) fn release_by_ticket() -> ExitCode {
    let mut text = String::new();
    // A ticket is a few hundred bytes; a megabyte is garbage.
    if let Err(e) = std::io::stdin().take(1 << 20).read_to_string(&mut text) {
        warn_user!("regent: cannot read the release ticket: {e}");
        return ExitCode::from(1);
    }
    let ticket = match regent::guardian::Ticket::from_line(&text) {
        Ok(t) => t,
        Err(e) => {
            warn_user!("regent: {e}");
            return ExitCode::from(1);
        }
    };
    if ticket.may_hold_secrets() {
        let _ =
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    }
    crate::failpoint::hold(crate::failpoint::Stage::ReleaseByTicket, None);
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
