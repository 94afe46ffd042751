//! One process holding many elections, one per shard, on one shared store.
//!
//! ```text
//! cargo run -p regent --example many_elections -- [STORE_DB [ELECTIONS [HOLDER_ID]]]
//! ```
//!
//! Each shard (`shard-0`, `shard-1`, … ELECTIONS of them, 100 by default)
//! has its own election and its own supervisor; all share one store. It
//! prints how many of them this process leads whenever that changes.
//! Start it twice: the first to start leads every shard (nothing balances
//! them), and when it stops (Ctrl-C, SIGTERM) it gives every lease back and
//! the other takes them all over at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use regent::sqlite::SqliteStore;
use regent::{BoxError, CancellationToken, Candidate, ElectionName, HolderId, Supervisor};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let db = args.next().map_or_else(
        || std::env::temp_dir().join("regent-examples.db"),
        PathBuf::from,
    );
    let shards: usize = args.next().map_or(Ok(100), |n| n.parse())?;
    let holder = match args.next() {
        Some(id) => HolderId::new(id)?,
        None => HolderId::host_pid(),
    };

    // One store for every election: clones share its connection.
    let store = SqliteStore::open(&db).await?;
    let leading = Arc::new(AtomicUsize::new(0));
    // One signal for all: cancelling `stop` stops every supervisor, each of
    // which gives its lease back.
    let stop = CancellationToken::new();
    let mut supervisors = tokio::task::JoinSet::new();
    for shard in 0..shards {
        let candidate = Candidate::builder(
            store.clone(),
            ElectionName::new(format!("shard-{shard}"))?,
            holder.clone(),
        )
        .build()?;
        let (stop, leading) = (stop.clone(), leading.clone());
        supervisors.spawn(async move {
            Supervisor::new(candidate)
                .run_until(stop.cancelled_owned(), |leader| {
                    let leading = leading.clone();
                    async move {
                        // This shard's work, fenced by `leader.token()`, goes here.
                        leading.fetch_add(1, Ordering::Relaxed);
                        leader.cancelled().await;
                        leading.fetch_sub(1, Ordering::Relaxed);
                        Ok::<_, BoxError>(())
                    }
                })
                .await
        });
    }

    let shutdown = regent::shutdown_signal();
    tokio::pin!(shutdown);
    let mut shown = None;
    loop {
        let now = leading.load(Ordering::Relaxed);
        if shown != Some(now) {
            println!("leading {now} of {shards} elections");
            shown = Some(now);
        }
        tokio::select! {
            () = &mut shutdown => break,
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
    stop.cancel();
    // Every supervisor is awaited: all leases are given back before exit.
    while let Some(done) = supervisors.join_next().await {
        done??;
    }
    println!(
        "stopped: leading {} of {shards} elections",
        leading.load(Ordering::Relaxed)
    );
    Ok(())
}
