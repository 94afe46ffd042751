//! Follows the leader of an election without campaigning: what a service
//! that forwards requests to the leader, or shows it, needs.
//!
//! ```text
//! cargo run -p regent-election --example observer -- [STORE_DB [ELECTION]]
//! ```
//!
//! By default it watches the election of the `leader_task` example on the
//! same store: start a few of those beside it and stop them in turn.
//! Ctrl-C or SIGTERM ends it.

use std::path::PathBuf;

use regent::sqlite::SqliteStore;
use regent::{BoxError, ElectionName, LeaderInfo, Observer};

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
    let election = ElectionName::new(args.next().as_deref().unwrap_or("leader-task"))?;

    let observer = Observer::new(SqliteStore::open(&db).await?, election);

    // A callback on every change, the leader now included: client-go's
    // `OnNewLeader`. It runs in a task of its own until the store fails for
    // good (its error is the task's result) or it is aborted.
    let callback = observer.on_new_leader(|leader| println!("new leader: {}", describe(leader)));

    // The leader now, kept current in the background: what a request
    // router reads before each forward. `changed()` waits for the next
    // change; here it only says where requests would go.
    let mut leader = observer.leader_watch().await?;
    let shutdown = regent::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let to = describe(leader.borrow_and_update().as_ref());
        println!("requests go to: {to}");
        tokio::select! {
            () = &mut shutdown => break,
            changed = leader.changed() => {
                if changed.is_err() {
                    callback.abort();
                    return Err("watching the leader failed for good (logged above)".into());
                }
            }
        }
    }
    callback.abort();
    Ok(())
}

fn describe(leader: Option<&LeaderInfo>) -> String {
    match leader {
        Some(l) => format!("{} (token {})", l.holder, l.token),
        None => "no leader".to_owned(),
    }
}
