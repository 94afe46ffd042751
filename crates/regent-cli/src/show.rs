//! `regent status` and `regent watch`: on a store, or (`--peer`) on a
//! member of a peer group (`peer.rs`).

use futures_util::StreamExt;
use regent_core::Observer;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::ShowArgs;
use crate::config::{ShowConfig, Source};
use crate::error::{CliError, chain};
use crate::output::{print, print_status};
use crate::store;

pub(crate) async fn status(args: ShowArgs) -> Result<u8, CliError> {
    show(args, false).await
}

pub(crate) async fn watch(args: ShowArgs) -> Result<u8, CliError> {
    show(args, true).await
}

/// The leader once, or (`follow`) then every change until SIGTERM or
/// SIGINT: on a store, or on a member of a peer group.
async fn show(args: ShowArgs, follow: bool) -> Result<u8, CliError> {
    let ShowConfig { source, json } = ShowConfig::resolve(args).await?;
    let (election, target, window) = match source {
        Source::Store {
            election,
            target,
            window,
        } => (election, target, window),
        #[cfg(feature = "peer")]
        Source::Peer(member) if follow => return crate::peer::watch(&member, json).await,
        #[cfg(feature = "peer")]
        Source::Peer(member) => return crate::peer::status(&member, json).await,
    };
    let store = store::open_within(&target, &election, None, window).await?;
    let observer = Observer::new(store.clone(), election.clone());
    if !follow {
        let leader = observer
            .current()
            .await
            .map_err(|e| CliError::from_store("reading the leader", &e))?;
        let candidates = regent_core::LeaseStore::candidates(&store, &election)
            .await
            .map_err(|e| CliError::from_store("reading the candidates", &e))?;
        print_status(json, &election, leader.as_ref(), candidates.as_deref());
        return Ok(0);
    }
    let mut changes = Box::pin(observer.changes());
    let sig =
        |kind| signal(kind).map_err(|e| CliError::failure(format!("cannot catch signals: {e}")));
    let (mut term, mut int) = (sig(SignalKind::terminate())?, sig(SignalKind::interrupt())?);
    loop {
        tokio::select! {
            item = changes.next() => match item {
                Some(Ok(leader)) => {
                    // The candidates as they stand at this change, where the
                    // store lists them (a read, bounded: the watch goes on
                    // without them).
                    let read = regent_core::LeaseStore::candidates(&store, &election);
                    match tokio::time::timeout(std::time::Duration::from_secs(2), read).await {
                        Ok(Ok(list)) => print_status(json, &election, leader.as_ref(), list.as_deref()),
                        _ => print(json, &election, leader.as_ref()),
                    }
                }
                Some(Err(e)) if e.is_transient() => warn_user!("regent: {}; retrying", chain(&e)),
                Some(Err(e)) => return Err(CliError::failure(format!("watch failed: {}", chain(&e)))),
                None => return Ok(0),
            },
            _ = term.recv() => return Ok(0),
            _ = int.recv() => return Ok(0),
        }
    }
}
