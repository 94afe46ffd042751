//! `regent status` and `regent watch`: a store and an election, or a
//! member of a peer group.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::store::{StoreArgs, StoreFlags, store_help};
use super::values::parse_duration;

/// `status` and `watch`: a store and an election, or a member of a peer
/// group.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    #[arg(long, value_name = "URL", help = store_help(), conflicts_with = "peer")]
    pub(crate) store: Option<String>,
    /// Election name: 1-128 of A-Z a-z 0-9 . _ -, starting with a letter or
    /// digit. With --peer it may be left out (the member names its own);
    /// if given, it must be the one the member runs.
    #[arg(long, value_name = "NAME", required_unless_present = "peer")]
    pub(crate) election: Option<String>,
    #[command(flatten)]
    pub(crate) options: StoreFlags,
    #[command(flatten)]
    pub(crate) member: MemberArgs,
    /// Print JSON: {"election": NAME, "leader": null | {"id", "token", "metadata"},
    /// "candidates": [{"id", "priority"}]}, the candidates where the store
    /// lists them (a queue store's line, a race store's roster).
    #[arg(long)]
    pub(crate) json: bool,
}

/// A member of a peer group to ask instead of a store (`status`,
/// `watch`, `dashboard`).
#[derive(Debug, Clone, Args)]
pub(crate) struct MemberArgs {
    /// Ask a member of a peer group (`regent peer`) instead of a store: the
    /// address it listens on (its --listen, or its entry in --peers).
    #[arg(long, value_name = "HOST:PORT", help_heading = "Peer group")]
    pub(crate) peer: Option<String>,
    /// A file holding the peer group's shared secret (default: the variable
    /// REGENT_PEER_SECRET); one trailing newline is dropped.
    #[arg(
        long,
        value_name = "FILE",
        requires = "peer",
        help_heading = "Peer group"
    )]
    pub(crate) secret_file: Option<PathBuf>,
    /// How long to wait for the member to accept the connection, and then
    /// for its answer (default: 2s).
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_duration,
        requires = "peer",
        help_heading = "Peer group"
    )]
    pub(crate) peer_timeout: Option<Duration>,
}

impl ShowArgs {
    /// The store and election, when no `--peer` is given.
    pub(crate) fn store_args(&self) -> Result<StoreArgs, crate::error::CliError> {
        let Some(election) = self.election.clone() else {
            return Err(crate::error::CliError::usage(
                "--election NAME is required, unless --peer HOST:PORT is given",
            ));
        };
        Ok(StoreArgs {
            store: self.store.clone(),
            election,
            options: self.options.clone(),
        })
    }
}
