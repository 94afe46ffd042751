//! Follows the leaders of many elections without campaigning: what a
//! router in front of sharded leaders, or a dashboard of them, needs.
//!
//! ```text
//! cargo run -p regent-election --example observe_many -- [STORE_DB [ELECTIONS]]
//! ```
//!
//! It watches the shards of the `many_elections` example (`shard-0`,
//! `shard-1`, … ELECTIONS of them, 100 by default) on the same store, and
//! prints each change naming its shard: `shard-3: p (token 7)`,
//! `shard-3: no leader`. Start it beside two `many_elections` and stop the
//! one that leads: every shard goes to the other. Ctrl-C or SIGTERM ends
//! it.

use std::path::PathBuf;

use regent::sqlite::SqliteStore;
use regent::{BoxError, ElectionName, LeaderInfo, ObserverSet};

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
    let elections = (0..shards)
        .map(|shard| ElectionName::new(format!("shard-{shard}")))
        .collect::<Result<Vec<_>, _>>()?;

    let observers = ObserverSet::new(SqliteStore::open(&db).await?, elections);

    // Every change of every shard, as one stream: the leader of each now,
    // then each change, naming the shard. (`leader_watch()` keeps a map of
    // the leaders current instead, for a router that looks one up per
    // request; `on_new_leader` calls back with the shard and its leader.)
    let mut changes = observers.changes();
    let shutdown = regent::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            change = changes.next() => match change {
                Some((shard, Ok(leader))) => println!("{shard}: {}", describe(leader.as_ref())),
                // Retried: the stream goes on with this shard's changes.
                Some((shard, Err(e))) if e.is_transient() => {
                    eprintln!("{shard}: {} (retrying)", regent::report(&e));
                }
                // This shard is no longer followed; the others are.
                Some((shard, Err(e))) => eprintln!("{shard}: {}", regent::report(&e)),
                None => return Err("every shard's watch failed for good".into()),
            },
        }
    }
    let leaders = changes.leaders();
    let led = leaders.values().filter(|l| l.is_some()).count();
    println!("stopped: {led} of {shards} elections have a leader");
    Ok(())
}

fn describe(leader: Option<&LeaderInfo>) -> String {
    match leader {
        Some(l) => format!("{} (token {})", l.holder, l.token),
        None => "no leader".to_owned(),
    }
}
