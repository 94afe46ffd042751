//! `regent dashboard`'s flags.

use clap::Args;

use super::http::HttpArgs;
use super::show::{MemberArgs, ShowArgs};
use super::store::{StoreFlags, store_help};

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
    #[command(flatten)]
    pub(crate) member: MemberArgs,
    #[command(flatten)]
    pub(crate) http: HttpArgs,
}

impl DashboardArgs {
    /// One `status`'s flags per election shown (one for a peer group),
    /// each election once.
    pub(crate) fn each(&self) -> Vec<ShowArgs> {
        let show = |election: Option<String>| ShowArgs {
            store: self.store.clone(),
            election,
            options: self.options.clone(),
            member: self.member.clone(),
            json: false,
        };
        if self.elections.is_empty() {
            return vec![show(None)];
        }
        let mut seen = std::collections::BTreeSet::new();
        self.elections
            .iter()
            .filter(|e| seen.insert(e.as_str()))
            .map(|e| show(Some(e.clone())))
            .collect()
    }
}
