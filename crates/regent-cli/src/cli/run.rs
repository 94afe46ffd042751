//! `regent run`'s flags, and how CMD runs (shared with `regent peer`).

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::store::StoreArgs;
use super::values::parse_duration;

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// This instance's id, unique per election (default: the Consul agent's
    /// node name on consul:// stores, as Consul's recipe does, so instances
    /// that share an agent each need their own --id; HOSTNAME-PID
    /// elsewhere).
    #[arg(long)]
    pub(crate) id: Option<String>,
    /// Lease time to live (default: 10s, or the store's minimum ttl if it
    /// is longer: Consul's 10s, Azure Blob's 15s).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) ttl: Option<Duration>,
    /// Renew interval: how often the leader renews (default: ttl/5).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) renew_every: Option<Duration>,
    /// Step down when no renewal succeeded for this long (default: 3*ttl/5).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) renew_deadline: Option<Duration>,
    /// This instance's priority (default: none, which counts as 0): among
    /// the candidates present, one of the highest leads. A leader that
    /// sees a candidate of strictly higher priority for --settle hands
    /// over to it: its command stops as on SIGTERM and the lease goes to
    /// that candidate alone. Equal priorities never preempt each other.
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        help_heading = "Choosing the leader"
    )]
    pub(crate) priority: Option<i32>,
    /// How long a leader must see a candidate of higher priority before it
    /// hands over to it (default: 10s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", help_heading = "Choosing the leader")]
    pub(crate) settle: Option<Duration>,
    #[command(flatten)]
    pub(crate) child: ChildArgs,
    #[command(flatten)]
    pub(crate) http: super::HttpArgs,
}

/// How CMD runs while this instance leads: what `regent run` and
/// `regent peer` share.
#[derive(Debug, Args)]
pub(crate) struct ChildArgs {
    /// Time CMD gets between SIGTERM and SIGKILL (default: 2s, or less when a
    /// short ttl leaves less room before the lease could pass on).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) grace: Option<Duration>,
    /// When to campaign again after CMD exits by itself.
    #[arg(long, value_enum, default_value_t = RestartArg::Always)]
    pub(crate) restart: RestartArg,
    /// Step down if CMD writes nothing to $REGENT_HEARTBEAT_FD for this long.
    #[arg(long, value_parser = parse_duration)]
    pub(crate) health_timeout: Option<Duration>,
    /// Run CMD's whole process tree in a PID namespace of its own, which the
    /// kernel ends with everything in it when regent's supervisor dies, even
    /// by SIGKILL: "auto" where regent may (root, CAP_SYS_ADMIN), saying once
    /// when it may not; "always" refuses to start without; "never" for a
    /// CMD that must see its host pids (a pid file others read).
    #[arg(long, value_enum, default_value_t = PidNamespace::Auto, value_name = "WHEN")]
    pub(crate) pid_namespace: PidNamespace,
    /// Internal (demo): shut down gracefully when stdin closes.
    #[arg(long, hide = true)]
    pub(crate) lifeline_stdin: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) cmd: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RestartArg {
    /// Campaign again after CMD ends, however it ended.
    Always,
    /// Campaign again only if CMD failed (non-zero, or killed).
    OnFailure,
    /// Exit with CMD's status when it ends.
    Never,
}

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

/// The default holder id: `HOSTNAME-PID`.
pub(crate) fn default_id() -> String {
    regent_core::HolderId::host_pid().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_id_is_valid() {
        assert!(regent_core::HolderId::new(default_id()).is_ok());
    }
}
