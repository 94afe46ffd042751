//! One process holding many elections, one per shard, on one shared store.
//!
//! ```text
//! cargo run -p regent-election --example many_elections -- [STORE_DB [ELECTIONS [HOLDER_ID]]]
//! ```
//!
//! Each shard (`shard-0`, `shard-1`, … ELECTIONS of them, 100 by default)
//! has its own election; one `SupervisorSet` campaigns for them all on one
//! store and runs each shard's work while this process leads it. It prints
//! how many of them this process leads whenever that changes. Start it
//! twice: the first to start leads every shard (nothing balances them), and
//! when it stops (Ctrl-C, SIGTERM) it gives every lease back and the other
//! takes them all over at once. The `observe_many` example follows them.

use std::path::PathBuf;

use regent::sqlite::SqliteStore;
use regent::{BoxError, ElectionName, HolderId, SupervisorSet};

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
    let elections = (0..shards)
        .map(|shard| ElectionName::new(format!("shard-{shard}")))
        .collect::<Result<Vec<_>, _>>()?;

    // One store for every election: clones share its connection.
    let set = SupervisorSet::builder(SqliteStore::open(&db).await?, holder, elections).build()?;
    let mut leading = set.leading();
    // Until SIGINT or SIGTERM; then every shard's work stops and every
    // lease is given back before this returns.
    let run = set.run_until(regent::shutdown_signal(), |_shard, leader| async move {
        // This shard's work, fenced by `leader.token()`, goes here.
        leader.cancelled().await;
        Ok::<_, BoxError>(())
    });
    tokio::pin!(run);
    let mut shown = None;
    let exits = loop {
        let now = leading.borrow_and_update().len();
        if shown != Some(now) {
            println!("leading {now} of {shards} elections");
            shown = Some(now);
        }
        tokio::select! {
            exits = &mut run => break exits,
            _ = leading.changed() => {}
        }
    };
    println!(
        "stopped: leading {} of {shards} elections",
        set.leading().borrow().len()
    );
    // The shards that failed, by name (the others ran until the signal).
    exits?;
    Ok(())
}
