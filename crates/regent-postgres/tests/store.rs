//! The PostgreSQL store's own promises, against a real server: tokens that
//! outgrow a lost counter, one winner among racing candidates, a term won
//! by an acquire whose answer never came taken over by its own store
//! alone, and the privileges a role needs, named when they are missing.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::time::Duration;

use regent_core::{
    Acquire, AcquireRequest, ElectionName, HolderId, Lease, LeaseStore, Metadata, Renewal,
};
use regent_postgres::PostgresStore;

fn request(election: &ElectionName, holder: &str) -> AcquireRequest {
    AcquireRequest {
        election: election.clone(),
        holder: HolderId::new(holder).unwrap(),
        ttl: Duration::from_secs(10),
        metadata: Metadata::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_outgrow_a_counter_that_was_deleted() {
    let pg = common::server();
    let store = PostgresStore::connect(&pg.url()).await.unwrap();
    let election = ElectionName::new(common::unique("deleted-counter")).unwrap();
    let Acquire::Won(first) = store
        .try_acquire(&request(&election, "a"), None)
        .await
        .unwrap()
    else {
        panic!("a free election was not won");
    };
    store.release(&first).await.unwrap();
    // An operator empties the counters (or a restore loses them).
    pg.sql(&format!(
        "DELETE FROM regent_tokens WHERE election = '{election}';
         DELETE FROM regent_leases WHERE election = '{election}'"
    ))
    .await;
    let Acquire::Won(second) = store
        .try_acquire(&request(&election, "b"), None)
        .await
        .unwrap()
    else {
        panic!("a free election was not won");
    };
    assert!(second.token > first.token, "{second:?} after {first:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_racing_for_a_free_election_make_one_winner() {
    let pg = common::server();
    let election = ElectionName::new(common::unique("race")).unwrap();
    let mut stores = Vec::new();
    for _ in 0..8 {
        stores.push(PostgresStore::connect(&pg.url()).await.unwrap());
    }
    for round in 0..5 {
        let tries = stores.iter().enumerate().map(|(i, s)| {
            let req = request(&election, &format!("c{i}"));
            async move { s.try_acquire(&req, None).await }
        });
        let results = futures_util::future::join_all(tries).await;
        let won: Vec<_> = results
            .into_iter()
            .filter_map(|r| match r.unwrap() {
                Acquire::Won(l) => Some(l),
                _ => None,
            })
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {won:?}");
        stores[0].release(&won[0]).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_privileges_is_told_which_it_needs() {
    let pg = common::server();
    let (role, locked) = (common::unique("app"), common::unique("locked"));
    pg.sql(&format!(
        "CREATE ROLE {role} LOGIN;
         CREATE SCHEMA {locked}; REVOKE ALL ON SCHEMA {locked} FROM PUBLIC;
         GRANT USAGE ON SCHEMA {locked} TO {role};"
    ))
    .await;
    let as_app = |schema: &str| {
        let mut config: regent_postgres::Config = pg.url().parse().unwrap();
        config.user(&role);
        PostgresStore::builder(config).schema(schema).build()
    };
    // The role may not create the tables, and nobody has.
    let e = as_app(&locked).await.unwrap_err();
    assert_eq!(e.kind(), regent_core::ErrorKind::Auth, "{e}");
    assert!(
        e.to_string().contains("SELECT, INSERT, UPDATE and DELETE"),
        "{e}"
    );
    // An administrator creates them but grants nothing yet: the first
    // request names the privileges.
    let admin = PostgresStore::builder(pg.url().parse().unwrap())
        .schema(&locked)
        .build()
        .await
        .unwrap();
    drop(admin);
    let store = as_app(&locked).await.unwrap();
    let election = ElectionName::new("privileges").unwrap();
    let e = store
        .try_acquire(&request(&election, "a"), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), regent_core::ErrorKind::Auth, "{e}");
    assert!(
        e.to_string().contains("SELECT, INSERT, UPDATE and DELETE"),
        "{e}"
    );
    pg.sql(&format!(
        "GRANT SELECT, INSERT, UPDATE, DELETE ON {locked}.regent_leases, {locked}.regent_tokens TO {role}"
    ))
    .await;
    // Two of the four: the acquire still names what it needs.
    let e = store
        .try_acquire(&request(&election, "a"), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("regent_reserved"), "{e}");
    pg.sql(&format!(
        "GRANT SELECT, INSERT, UPDATE, DELETE ON {locked}.regent_roster, {locked}.regent_reserved TO {role}"
    ))
    .await;
    assert!(matches!(
        store
            .try_acquire(&request(&election, "a"), None)
            .await
            .unwrap(),
        Acquire::Won(_)
    ));
}

/// A release, a new leader and new metadata wake a watch at once (their
/// statements notify), long before its poll would have looked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_wake_a_watch_before_its_poll() {
    use futures_util::StreamExt as _;
    let pg = common::server();
    let slow = PostgresStore::builder(pg.url().parse().unwrap())
        .poll_interval(Duration::from_secs(60))
        .build()
        .await
        .unwrap();
    let store = PostgresStore::connect(&pg.url()).await.unwrap();
    let election = ElectionName::new(common::unique("wake")).unwrap();
    let mut watch = slow.watch(&election).await.unwrap();
    assert_eq!(watch.next().await.unwrap().unwrap(), None);
    let within = Duration::from_secs(10);
    let Acquire::Won(a) = store
        .try_acquire(&request(&election, "a"), None)
        .await
        .unwrap()
    else {
        panic!("a free election was not won");
    };
    let seen = tokio::time::timeout(within, watch.next())
        .await
        .expect("woken by the acquire");
    assert_eq!(seen.unwrap().unwrap().map(|l| l.token), Some(a.token));
    let new = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
    store.update_metadata(&a, &new).await.unwrap();
    let seen = tokio::time::timeout(within, watch.next())
        .await
        .expect("woken by the update");
    assert_eq!(seen.unwrap().unwrap().map(|l| l.metadata), Some(new));
    store.release(&a).await.unwrap();
    let seen = tokio::time::timeout(within, watch.next())
        .await
        .expect("woken by the release");
    assert_eq!(seen.unwrap().unwrap(), None);
}

/// Regression: a column of another type than regent wrote (a table an
/// operator altered) panicked the reader; it is `Corrupt`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_altered_under_the_store_is_corrupt_not_a_panic() {
    let pg = common::server();
    let schema = common::unique("altered");
    pg.sql(&format!("CREATE SCHEMA {schema}")).await;
    let store = PostgresStore::builder(pg.url().parse().unwrap())
        .schema(&schema)
        .build()
        .await
        .unwrap();
    let election = ElectionName::new("altered").unwrap();
    let Acquire::Won(_) = store
        .try_acquire(&request(&election, "a"), None)
        .await
        .unwrap()
    else {
        panic!("a free election was not won");
    };
    pg.sql(&format!(
        "ALTER TABLE {schema}.regent_leases ALTER COLUMN token TYPE text USING token::text"
    ))
    .await;
    let e = store.current_leader(&election).await.unwrap_err();
    assert_eq!(e.kind(), regent_core::ErrorKind::Corrupt, "{e}");
    assert!(e.to_string().contains("column token"), "{e}");
}

/// Regression: instances starting together on a database without the
/// tables raced on creating them, and the losers failed to start ("type
/// regent_leases already exists", a usage error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_starting_together_all_find_or_make_the_tables() {
    let pg = common::server();
    for round in 0..20 {
        let schema = common::unique(&format!("together{round}"));
        pg.sql(&format!("CREATE SCHEMA {schema}")).await;
        let starts = (0..16).map(|_| {
            PostgresStore::builder(pg.url().parse().unwrap())
                .schema(&schema)
                .build()
        });
        for r in futures_util::future::join_all(starts).await {
            r.unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
    }
}

/// Regression: an acquire whose answer never came (its caller gave up on
/// it while the statement waited for a lock; the server ran it when the
/// lock went) left a term the caller never heard of, and the caller's next
/// acquire was held by that term, its own: it followed itself until the
/// term ran out, a ttl with nobody leading. Its own store takes it over at
/// once, with a greater token. Another store under the same holder id
/// (another process, maybe an older incarnation still leading) does not,
/// and a term handed out is never taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_won_unanswered_is_taken_over_by_its_own_store_alone() {
    let pg = common::server();
    let schema = common::unique("unanswered");
    pg.sql(&format!("CREATE SCHEMA {schema}")).await;
    let open = || {
        PostgresStore::builder(pg.url().parse().unwrap())
            .schema(&schema)
            .build()
    };
    let (store, other) = (open().await.unwrap(), open().await.unwrap());
    let election = ElectionName::new("unanswered").unwrap();
    let req = AcquireRequest {
        ttl: Duration::from_secs(60),
        ..request(&election, "a")
    };
    let connect = || async {
        let (client, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
    };
    let (locker, looker) = (connect().await, connect().await);

    // The table locked, the acquire's statement waits on the server until
    // the caller gives up on it.
    locker
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {schema}.regent_leases IN EXCLUSIVE MODE"
        ))
        .await
        .unwrap();
    let waiting = async {
        for _ in 0..500 {
            let row = looker
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                     WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0",
                    &[&format!("\"{schema}\".\"regent_leases\"")],
                )
                .await
                .unwrap();
            if row.get::<_, i64>(0) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the acquire's statement never waited on the lock");
    };
    tokio::select! {
        got = store.try_acquire(&req, None) => panic!("answered through the lock: {got:?}"),
        () = waiting => {}
    }
    locker.batch_execute("COMMIT").await.unwrap();
    // The server runs the acquire nobody waits for any more.
    let mut orphan = None;
    for _ in 0..500 {
        orphan = other.current_leader(&election).await.unwrap();
        if orphan.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let orphan = orphan.expect("the unanswered acquire won");
    assert_eq!(orphan.holder.as_str(), "a");

    match other.try_acquire(&req, None).await.unwrap() {
        Acquire::Held {
            leader: Some(l), ..
        } => assert_eq!(l.token, orphan.token, "{l:?}"),
        got => panic!("another store took a's term over: {got:?}"),
    }
    let Acquire::Won(lease) = store.try_acquire(&req, None).await.unwrap() else {
        panic!("a's store did not take its own term over");
    };
    assert!(lease.token > orphan.token, "{lease:?} after {orphan:?}");
    assert_eq!(store.renew(&lease).await.unwrap(), Renewal::Renewed);
    // A term it handed out is never taken again: a leads with it.
    match store.try_acquire(&req, None).await.unwrap() {
        Acquire::Held {
            leader: Some(l), ..
        } => assert_eq!(l.token, lease.token, "{l:?}"),
        got => panic!("a's store took over the term it handed out: {got:?}"),
    }
    let now = other.current_leader(&election).await.unwrap().unwrap();
    assert_eq!(now.token, lease.token);
    // The unanswered acquire's term is over: renewing it is lost.
    let stale = Lease {
        token: orphan.token,
        ..lease.clone()
    };
    assert_eq!(store.renew(&stale).await.unwrap(), Renewal::Lost);
}
