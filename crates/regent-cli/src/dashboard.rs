//! `regent dashboard`: the live page, metrics and health of one or more
//! elections, observed without campaigning — on a store, or through a
//! member of a peer group.

use regent_core::Observer;
use regent_monitor::{Monitor, StoreCalls};

use crate::cli::DashboardArgs;
use crate::config::{ShowConfig, Source, endpoint};
use crate::error::CliError;
use crate::http::{Line, Shown};
use crate::run::Stops;
use crate::store;

pub(crate) async fn dashboard(args: DashboardArgs) -> Result<u8, CliError> {
    // Every flag checked, and the address bound, before any connection.
    let each: Vec<_> = args.each();
    let mut sources = Vec::with_capacity(each.len());
    for show in each {
        sources.push(ShowConfig::resolve(show).await?.source);
    }
    let Some(endpoint) = endpoint(&args.http)? else {
        return Err(CliError::usage(
            "--http HOST:PORT is required (or the variable REGENT_HTTP): where to serve the page",
        ));
    };
    let mut stops = Stops::new(false)?;
    // Serving from now: while the stores are being reached, the probes
    // say so.
    let serving = endpoint.serve("dashboard", sources.len())?;
    let calls = StoreCalls::new();
    for source in sources {
        let shown = tokio::select! {
            r = watch(source, &calls) => r?,
            () = stops.next() => return Ok(0),
        };
        serving.show(shown);
    }
    stops.next().await;
    Ok(0)
}

/// The monitor of one election: the store opened (retried for the start
/// window, as `status` does), or the peer group's member asked.
async fn watch(source: Source, calls: &StoreCalls) -> Result<Shown, CliError> {
    match source {
        Source::Store {
            election,
            target,
            window,
        } => {
            let store = store::open_within(&target, &election, None, window).await?;
            // The page's reads of the line are not the election's requests:
            // uncounted, so that one cut short is no sign of a failing store.
            let line = Line::of(store.clone(), election.clone());
            let observer = Observer::new(calls.instrument(store), election);
            Ok(Shown {
                monitor: Monitor::observe(observer).with_store_calls(calls.clone()),
                store: target.to_string(),
                candidates: Some(line),
            })
        }
        #[cfg(feature = "peer")]
        Source::Peer(member) => Ok(Shown {
            store: format!("peer group, through the member at {}", member.addr),
            monitor: crate::peer::observe(&member).await?,
            candidates: None,
        }),
    }
}
