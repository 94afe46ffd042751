//! `regent status` and `regent watch`'s settings: a store and an
//! election, or a member of a peer group, resolved and checked once.

use std::time::Duration;

use regent_core::ElectionName;

use crate::cli::ShowArgs;
#[cfg(feature = "peer")]
use crate::config::peer::{Member, member};
use crate::error::CliError;
use crate::store;

/// What `status` and `watch` read.
pub(crate) enum Source {
    /// An election on a store.
    Store {
        election: ElectionName,
        target: store::Target,
        /// How long to retry a store that cannot be reached yet
        /// (`REGENT_START_RETRY`).
        window: Duration,
    },
    /// A member of a peer group (`--peer`).
    #[cfg(feature = "peer")]
    Peer(Member),
}

/// Everything `status` and `watch` need, checked.
pub(crate) struct ShowConfig {
    pub(crate) source: Source,
    /// `--json`.
    pub(crate) json: bool,
}

impl ShowConfig {
    /// Checks the flags and variables, reads the files they name, and
    /// resolves `--peer`'s host.
    pub(crate) async fn resolve(args: ShowArgs) -> Result<Self, CliError> {
        let source = if args.member.peer.is_some() {
            peer(&args).await?
        } else {
            let store_args = args.store_args()?;
            Source::Store {
                election: store::election(&store_args)?,
                target: store::target(&store_args)?,
                window: store::start_retry()?,
            }
        };
        Ok(Self {
            source,
            json: args.json,
        })
    }
}

#[cfg(feature = "peer")]
async fn peer(args: &ShowArgs) -> Result<Source, CliError> {
    Ok(Source::Peer(member(args).await?))
}

#[cfg(not(feature = "peer"))]
async fn peer(_: &ShowArgs) -> Result<Source, CliError> {
    Err(CliError::usage(
        "--peer: this regent was built without the `peer` feature",
    ))
}
