//! `regent handover`: asks the leader of an election to hand its term to
//! another candidate, and waits for the new term
//! ([`regent_core::handover::request`]).

use std::time::Duration;

use regent_core::HolderId;
use regent_core::handover::{HandOverError, HandOverRequest, HandedOver, request};
use serde_json::json;

use crate::cli::{HandoverArgs, default_id};
use crate::error::CliError;
use crate::store;

/// How long `regent handover` waits for the new term unless `--timeout`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The hand-over did not happen as asked (no leader, no such candidate,
/// another hand-over in progress, refused, not answered, or the lease
/// went to another candidate).
pub(crate) const EXIT_NOT_HANDED_OVER: u8 = 4;

pub(crate) async fn handover(args: HandoverArgs) -> Result<u8, CliError> {
    let election = store::election(&args.store)?;
    let target = store::target(&args.store)?;
    let to = args
        .to
        .as_deref()
        .map(HolderId::new)
        .transpose()
        .map_err(|e| CliError::usage(format!("--to: {e}")))?;
    let timeout = args.timeout.unwrap_or(DEFAULT_TIMEOUT);
    if timeout.is_zero() {
        return Err(CliError::usage("--timeout must be greater than zero"));
    }
    let requester = HolderId::new(format!("handover-{}", default_id()))
        .map_err(|e| CliError::usage(format!("this host's name makes no valid id: {e}")))?;
    let store = store::open(&target, &election, None).await?;
    // The request record lives as long as the wait, and lapses by itself
    // if this process dies: a ttl the store honours.
    let info = regent_core::LeaseStore::info(&store);
    let ttl = timeout
        .clamp(info.min_ttl, info.effective_max_ttl())
        .max(Duration::from_secs(1).min(info.effective_max_ttl()));
    let asked = HandOverRequest {
        election: election.clone(),
        to,
        requester,
        ttl,
        timeout,
    };
    match request(&store, &asked).await {
        Ok(done) => {
            print(args.json, &asked, &done);
            Ok(0)
        }
        Err(HandOverError::Store(e)) => Err(store::store_error(&target, "hand over on", &e)),
        Err(e) => {
            let mut error = CliError::failure(format!("hand-over not carried out: {e}"));
            error.code = EXIT_NOT_HANDED_OVER;
            Err(error)
        }
    }
}

fn print(json: bool, asked: &HandOverRequest, done: &HandedOver) {
    use std::io::Write as _;
    let line = if json {
        json!({
            "election": asked.election.as_str(),
            "from": {"id": done.from.holder.as_str(), "token": done.from.token.get()},
            "to": {"id": done.to.holder.as_str(), "token": done.to.token.get()},
            "answered": done.answered,
        })
        .to_string()
    } else {
        let mut line = format!(
            "election {}: handed over from {} (token {}) to {} (token {})",
            asked.election, done.from.holder, done.from.token, done.to.holder, done.to.token
        );
        if !done.answered {
            line.push_str(
                "; the new leader did not confirm the request, so a candidate of higher priority may take over after its settle time",
            );
        }
        line
    };
    let _ = writeln!(std::io::stdout(), "{line}");
}
