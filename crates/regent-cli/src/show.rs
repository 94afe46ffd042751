//! `regent status` and `regent watch`: on a store, or (`--peer`) on a
//! member of a peer group (`peer.rs`).

use futures_util::StreamExt;
use regent_core::{ElectionName, LeaderInfo, Observer};
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::ShowArgs;
use crate::error::{CliError, chain};
use crate::store;

/// The documented JSON object:
/// `{"election": NAME, "leader": null | {"id": ID, "token": N, "metadata": {...}}}`.
pub(crate) fn to_json(election: &ElectionName, leader: Option<&LeaderInfo>) -> Value {
    json!({
        "election": election.as_str(),
        "leader": leader.map(|l| json!({
            "id": l.holder.as_str(),
            "token": l.token.get(),
            "metadata": l.metadata.iter().map(|(k, v)| (k.to_owned(), Value::from(v))).collect::<serde_json::Map<String, Value>>(),
        })),
    })
}

fn human(election: &ElectionName, leader: Option<&LeaderInfo>) -> String {
    match leader {
        Some(l) => format!(
            "election {election}: leader {} (token {})",
            l.holder, l.token
        ),
        None => format!("election {election}: no leader"),
    }
}

pub(crate) fn print(json: bool, election: &ElectionName, leader: Option<&LeaderInfo>) {
    use std::io::Write as _;
    let line = if json {
        to_json(election, leader).to_string()
    } else {
        human(election, leader)
    };
    // Whoever read our output is gone (`regent watch | head -1`): done.
    if writeln!(std::io::stdout(), "{line}").is_err() {
        std::process::exit(0);
    }
}

pub(crate) async fn status(args: ShowArgs) -> Result<u8, CliError> {
    if args.peer.is_some() {
        return peer_status(&args).await;
    }
    let store_args = args.store_args()?;
    let election = store::election(&store_args)?;
    let store = store::open(&store::target(&store_args)?, &election, None).await?;
    let leader = Observer::new(store, election.clone())
        .current()
        .await
        .map_err(|e| CliError::from_store("reading the leader", &e))?;
    print(args.json, &election, leader.as_ref());
    Ok(0)
}

#[cfg(feature = "peer")]
async fn peer_status(args: &ShowArgs) -> Result<u8, CliError> {
    crate::peer::status(args).await
}

#[cfg(feature = "peer")]
async fn peer_watch(args: &ShowArgs) -> Result<u8, CliError> {
    crate::peer::watch(args).await
}

#[cfg(not(feature = "peer"))]
async fn peer_status(_: &ShowArgs) -> Result<u8, CliError> {
    Err(CliError::usage(
        "--peer: this regent was built without the `peer` feature",
    ))
}

#[cfg(not(feature = "peer"))]
async fn peer_watch(args: &ShowArgs) -> Result<u8, CliError> {
    peer_status(args).await
}

pub(crate) async fn watch(args: ShowArgs) -> Result<u8, CliError> {
    if args.peer.is_some() {
        return peer_watch(&args).await;
    }
    let store_args = args.store_args()?;
    let election = store::election(&store_args)?;
    let store = store::open(&store::target(&store_args)?, &election, None).await?;
    let observer = Observer::new(store, election.clone());
    let mut changes = Box::pin(observer.changes());
    let sig =
        |kind| signal(kind).map_err(|e| CliError::failure(format!("cannot catch signals: {e}")));
    let (mut term, mut int) = (sig(SignalKind::terminate())?, sig(SignalKind::interrupt())?);
    loop {
        tokio::select! {
            item = changes.next() => match item {
                Some(Ok(leader)) => print(args.json, &election, leader.as_ref()),
                Some(Err(e)) if e.is_transient() => warn_user!("regent: {}; retrying", chain(&e)),
                Some(Err(e)) => return Err(CliError::failure(format!("watch failed: {}", chain(&e)))),
                None => return Ok(0),
            },
            _ = term.recv() => return Ok(0),
            _ = int.recv() => return Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::{FencingToken, HolderId, Metadata};

    #[test]
    fn json_shape_is_the_documented_one() {
        let e = ElectionName::new("jobs").unwrap();
        assert_eq!(
            to_json(&e, None).to_string(),
            r#"{"election":"jobs","leader":null}"#
        );
        let l = LeaderInfo {
            holder: HolderId::new("a-1").unwrap(),
            token: FencingToken::new(7),
            metadata: Metadata::from_pairs([("addr", "x")]).unwrap(),
        };
        assert_eq!(
            to_json(&e, Some(&l)),
            json!({"election": "jobs", "leader": {"id": "a-1", "token": 7, "metadata": {"addr": "x"}}})
        );
    }
}
