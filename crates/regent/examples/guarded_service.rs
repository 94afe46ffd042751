//! A service whose leases a crash does not hold for a ttl: the crash
//! guardian (feature `guardian`, Linux) gives them back once the process
//! is gone.
//!
//! ```text
//! cargo run -p regent-election --features guardian --example guarded_service -- [STORE [HOLDER_ID [TTL_SECS]]]
//! ```
//!
//! STORE is a SQLite file, or a store's URL (`etcd://127.0.0.1:2379`, with
//! the store's feature). Start it twice on the same STORE, then `kill -9` the one that
//! leads: the other leads within milliseconds, not after TTL_SECS (60 by
//! default). Without `Guardian::start` the same kill costs the whole ttl.

use std::path::PathBuf;
use std::time::Duration;

use regent::guardian::Guardian;
use regent::{BoxError, Candidate, ElectionName, HolderId, Supervisor};

fn main() -> Result<(), BoxError> {
    // First thing: in the guardian process, this call guards and never
    // returns.
    let guardian = Guardian::start()?;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let store = args.next().map_or_else(
        || std::env::temp_dir().join("regent-examples.db"),
        PathBuf::from,
    );
    let holder = match args.next() {
        Some(id) => HolderId::new(id)?,
        None => HolderId::host_pid(),
    };
    let ttl = Duration::from_secs(args.next().map_or(Ok(60), |s| s.parse())?);
    println!("guardian: pid {}", guardian.pid());

    tokio::runtime::Runtime::new()?.block_on(async {
        let store = store.to_str().ok_or("STORE is not UTF-8")?;
        let url = if store.contains("://") {
            store.to_owned()
        } else {
            format!("sqlite:{store}")
        };
        // By URL: the guardian opens the store again to give a lease back.
        let store = guardian.connect(&url, &[]).await?;
        let candidate = Candidate::builder(store, ElectionName::new("guarded")?, holder)
            .ttl(ttl)
            .build()?;
        println!("campaigning");
        let exit = Supervisor::new(candidate)
            .run_until(regent::shutdown_signal(), |leader| async move {
                let token = leader.token();
                println!("leading: token {token}");
                // The leader's work, fenced by `token`, goes here.
                leader.cancelled().await;
                println!("stopped leading: token {token}");
                Ok::<_, BoxError>(())
            })
            .await?;
        println!("exit: {exit:?}");
        Ok(())
    })
}
