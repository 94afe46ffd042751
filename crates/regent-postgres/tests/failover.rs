//! Faults of the server under a leader: tokens after a standby's promotion
//! are above every token before, also those of the commits the standby
//! missed; a leader whose connection is terminated renews on a new one.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::time::Duration;

use regent_core::{Acquire, AcquireRequest, ElectionName, HolderId, LeaseStore, Metadata, Renewal};
use regent_postgres::PostgresStore;
use regent_testkit::engines::PostgresPair;

fn request(election: &ElectionName, holder: &str) -> AcquireRequest {
    AcquireRequest {
        election: election.clone(),
        holder: HolderId::new(holder).unwrap(),
        ttl: Duration::from_secs(5),
        metadata: Metadata::default(),
    }
}

async fn term(store: &PostgresStore, election: &ElectionName, holder: &str) -> u64 {
    match store
        .try_acquire(&request(election, holder), None)
        .await
        .unwrap()
    {
        Acquire::Won(lease) => {
            store.release(&lease).await.unwrap();
            lease.token.get()
        }
        held => panic!("a free election was not won: {held:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_after_a_promotion_are_above_every_token_before_even_the_lost_ones() {
    let mut pair = PostgresPair::start()
        .unwrap_or_else(|e| panic!("cannot start a primary and a standby: {e}"));
    let election = ElectionName::new("promoted").unwrap();
    let primary = PostgresStore::connect(&pair.primary_url()).await.unwrap();
    let mut tokens = Vec::new();
    for i in 0..3 {
        tokens.push(term(&primary, &election, &format!("a{i}")).await);
    }
    pair.wait_standby_caught_up().unwrap();
    // From here on the standby misses what the primary commits: these
    // terms are lost in the failover, their tokens were handed out.
    pair.disconnect_standby().unwrap();
    for i in 0..20 {
        tokens.push(term(&primary, &election, &format!("lost{i}")).await);
    }
    drop(primary);
    pair.promote_after_killing_primary().unwrap();
    let promoted = PostgresStore::connect(&pair.standby_url()).await.unwrap();
    let after = term(&promoted, &election, "b").await;
    let before = *tokens.iter().max().unwrap();
    assert!(
        after > before,
        "token {after} after the promotion, {before} before it"
    );
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_connection_is_terminated_renews_on_a_new_one() {
    let pg = regent_testkit::engines::Postgres::start()
        .unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"));
    let store = PostgresStore::connect(&pg.store_url()).await.unwrap();
    let election = ElectionName::new("terminated").unwrap();
    let Acquire::Won(lease) = store
        .try_acquire(&request(&election, "a"), None)
        .await
        .unwrap()
    else {
        panic!("a free election was not won");
    };
    assert!(pg.terminate_backends().unwrap() > 0);
    // The next call finds the connection closed (or fails on it, which the
    // candidate retries): the one after renews on a new connection.
    let first = store.renew(&lease).await;
    let second = store.renew(&lease).await;
    assert!(
        matches!(first, Ok(Renewal::Renewed)) || matches!(second, Ok(Renewal::Renewed)),
        "{first:?} then {second:?}"
    );
    if let Err(e) = &first {
        assert!(e.is_transient(), "{e}");
    }
}
