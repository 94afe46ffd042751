//! `regent dashboard`'s flags.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::http::HttpArgs;
use super::show::ShowArgs;
use super::store::{StoreFlags, store_help};
use super::values::parse_duration;

/// The elections to show, on a store or a peer group's member, and where.
#[derive(Debug, Args)]
pub(crate) struct DashboardArgs {
    #[arg(long, value_name = "URL", help = store_help(), conflicts_with = "peer")]
    pub(crate) store: Option<String>,
    /// The elections to show: repeat the flag, or separate names with
    /// commas. With --peer it may be left out (the member names its own).
    #[arg(
        long = "election",
        value_name = "NAME",
        value_delimiter = ',',
        required_unless_present = "peer"
    )]
    pub(crate) elections: Vec<String>,
    #[command(flatten)]
    pub(crate) options: StoreFlags,
    /// Show a peer group (`regent peer`) as one of its members sees it: the
    /// address it listens on.
    #[arg(long, value_name = "HOST:PORT", help_heading = "Peer group")]
    pub(crate) peer: Option<String>,
    /// A file holding the peer group's shared secret (default: the variable
    /// REGENT_PEER_SECRET).
    #[arg(
        long,
        value_name = "FILE",
        requires = "peer",
        help_heading = "Peer group"
    )]
    pub(crate) secret_file: Option<PathBuf>,
    /// How long to wait for the member to accept the connection, and then
    /// for its answer (default: 2s).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "peer", help_heading = "Peer group")]
    pub(crate) peer_timeout: Option<Duration>,
    #[command(flatten)]
    pub(crate) http: HttpArgs,
}

impl DashboardArgs {
    /// One `status`'s flags per election shown (one for a peer group).
    pub(crate) fn each(&self) -> Vec<ShowArgs> {
        let show = |election: Option<String>| ShowArgs {
            store: self.store.clone(),
            election,
            options: self.options.clone(),
            peer: self.peer.clone(),
            secret_file: self.secret_file.clone(),
            peer_timeout: self.peer_timeout,
            json: false,
        };
        if self.elections.is_empty() {
            return vec![show(None)];
        }
        self.elections
            .iter()
            .map(|e| show(Some(e.clone())))
            .collect()
    }
}
