//! `regent handover`'s flags.

use std::time::Duration;

use clap::Args;

use super::store::StoreArgs;
use super::values::parse_duration;

/// `regent handover`: ask the leader of an election to hand over.
#[derive(Debug, Args)]
pub(crate) struct HandoverArgs {
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// The candidate to hand over to (its --id); default: the next, the
    /// candidate of highest priority.
    #[arg(long, value_name = "ID")]
    pub(crate) to: Option<String>,
    /// How long to wait for the new term (default: 30s). The leader
    /// answers at its next renewal, then stops its command as on SIGTERM.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub(crate) timeout: Option<Duration>,
    /// Print JSON: {"election", "from": {"id", "token"}, "to": {"id", "token"}, "answered"}.
    #[arg(long)]
    pub(crate) json: bool,
}
