//! The hidden `__shim` mode's flags (see `crate::shim`).

use clap::Args;

use super::run::PidNamespace;

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
    /// `regent::guardian::Ticket`), release its lease, exit 0 (1 if it failed).
    #[arg(long, conflicts_with_all = ["probe", "init"])]
    pub(crate) release: bool,
    /// The command.
    #[arg(last = true, required_unless_present_any = ["probe", "release"])]
    pub(crate) cmd: Vec<String>,
}
