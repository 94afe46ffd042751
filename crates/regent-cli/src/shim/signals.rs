//! Signals as readable bytes, so that the supervisor's `poll` wakes for
//! them.

use std::io::Read;

/// Signals delivered as readable bytes on a socket pair, so that `poll`
/// wakes for them: SIGTERM, SIGINT and SIGHUP ([`SignalPipe::new`]), or
/// SIGCHLD ([`SignalPipe::children`]).
pub(super) struct SignalPipe {
    pub(super) read: std::os::unix::net::UnixStream,
}

impl SignalPipe {
    /// The signals that ask for a stop.
    pub(super) fn new() -> std::io::Result<Self> {
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
    pub(super) fn children() -> std::io::Result<Self> {
        Self::of(&[signal_hook::consts::SIGCHLD])
    }

    pub(super) fn of(signals: &[i32]) -> std::io::Result<Self> {
        let (read, write) = std::os::unix::net::UnixStream::pair()?;
        read.set_nonblocking(true)?;
        for &sig in signals {
            signal_hook::low_level::pipe::register(sig, write.try_clone()?)?;
        }
        Ok(Self { read })
    }

    /// Whether a signal arrived since the last call; reads without waiting.
    pub(super) fn drain(&self) -> bool {
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
