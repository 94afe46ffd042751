//! Why a bench stopped, and the exit code each reason gets.

/// Exit code of a bench that ran every run and wrote its report.
pub(crate) const EXIT_SUCCESS: u8 = 0;
/// Exit code of a failed run (a wait timed out, a tool exited early).
pub(crate) const EXIT_FAILURE: u8 = 1;
/// Exit code of a usage error, a missing engine or a missing `regent`.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code after SIGINT or SIGTERM.
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// Why a bench stopped.
#[derive(Debug)]
pub(crate) enum BenchError {
    /// A flag's rule broken, an engine asked for that is not installed, or
    /// no `regent` binary: exit 2.
    Usage(String),
    /// SIGINT or SIGTERM to the bench: exit 130.
    Interrupted,
    /// Anything else (a wait timed out, a tool exited early, a file could
    /// not be written), with the evidence: exit 1.
    Failed(String),
}

impl BenchError {
    /// The process's exit code for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => EXIT_USAGE,
            Self::Interrupted => EXIT_INTERRUPTED,
            Self::Failed(_) => EXIT_FAILURE,
        }
    }
}
