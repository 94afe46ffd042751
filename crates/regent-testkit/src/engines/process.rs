//! Child processes of the kit: finding the program, free ports, stopping by
//! PID, and the tail of a log for error messages.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use super::EngineError;

/// How often the kit polls a child or a health check.
pub(crate) const POLL: Duration = Duration::from_millis(10);

/// A program the kit runs: the `default` name looked up on `PATH`, or the
/// path in the override variable `var` when that is set and not empty.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    name: &'static str,
    overridden: Option<(PathBuf, &'static str)>,
}

impl Program {
    pub(crate) fn from_env(name: &'static str, var: &'static str) -> Self {
        let overridden = std::env::var_os(var)
            .filter(|path| !path.is_empty())
            .map(|path| (PathBuf::from(path), var));
        Self { name, overridden }
    }

    /// What to pass to [`std::process::Command::new`].
    pub(crate) fn command_name(&self) -> OsString {
        match &self.overridden {
            Some((path, _)) => path.clone().into_os_string(),
            None => self.name.into(),
        }
    }

    /// The error for a failed spawn of this program: "not installed" with the
    /// install script's name when the program does not exist.
    pub(crate) fn spawn_error(&self, source: io::Error) -> EngineError {
        if source.kind() != io::ErrorKind::NotFound {
            return EngineError::Spawn {
                program: self.name,
                source,
            };
        }
        match &self.overridden {
            Some((path, var)) => EngineError::NotInstalledAt {
                program: self.name,
                path: path.clone(),
                var,
            },
            None => EngineError::NotInstalled { program: self.name },
        }
    }
}

/// `n` distinct ports that were free on 127.0.0.1 a moment ago.
///
/// The listeners are held until all `n` are bound, so the ports differ from
/// each other; another process may still take one before the engine binds
/// it, which the caller handles by retrying with new ports.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>, EngineError> {
    let io = |source| EngineError::Io {
        action: "find a free port on 127.0.0.1",
        source,
    };
    let listeners = (0..n)
        .map(|_| TcpListener::bind(("127.0.0.1", 0)))
        .collect::<io::Result<Vec<_>>>()
        .map_err(io)?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|addr| addr.port()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(io)
}

/// Sends `signal` to the child by its PID unless it has already been reaped.
pub(crate) fn signal(child: &mut Child, signal: Signal) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let pid = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
    if let Some(pid) = pid {
        // ESRCH: it exited between try_wait and here; nothing to do.
        let _ = kill_process(pid, signal);
    }
}

/// Waits until the child exits or `deadline` passes; true if it exited (and
/// is reaped).
pub(crate) fn wait_until(child: &mut Child, deadline: Instant) -> bool {
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            Ok(None) => thread::sleep(POLL),
        }
    }
}

/// SIGKILL and reap: afterwards the PID no longer names the child.
pub(crate) fn kill(child: &mut Child) {
    signal(child, Signal::KILL);
    let _ = child.wait();
}

/// The last `lines` lines of the log at `path`, or a note why there are none.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(err) => format!("(no log at {}: {err})", path.display()),
    }
}
