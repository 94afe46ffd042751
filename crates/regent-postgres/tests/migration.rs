//! Tables and builds from before `regent_leases.incarnation`: a table an
//! earlier build made is migrated when a store opens it (directly and
//! through PgBouncer in transaction mode), keeping its rows; an earlier
//! build's statements go on working beside this one's, and none of its
//! terms is ever taken over; a role that may not alter the table is told
//! the statement its owner runs; a migration that cannot get the table's
//! lock gives up soon, transient, rather than stall every statement.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::time::{Duration, Instant};

use regent_core::{
    Acquire, AcquireRequest, ElectionName, ErrorKind, FencingToken, HolderId, LeaderInfo, Lease,
    LeaseHandle, LeaseStore, Metadata,
};
use regent_postgres::PostgresStore;
use tokio_postgres::types::Type;

/// The tables as the builds before `incarnation` made them.
fn old_tables(schema: &str) -> String {
    format!(
        "CREATE TABLE {schema}.regent_leases (
             election   text PRIMARY KEY,
             holder     text NOT NULL,
             token      bigint NOT NULL,
             expires_at timestamptz NOT NULL,
             ttl_ms     bigint NOT NULL,
             metadata   text NOT NULL DEFAULT '{{}}'
         );
         CREATE TABLE {schema}.regent_tokens (
             election text PRIMARY KEY,
             last     bigint NOT NULL
         );
         CREATE TABLE {schema}.regent_roster (
             election   text NOT NULL,
             holder     text NOT NULL,
             expires_at timestamptz NOT NULL,
             metadata   text NOT NULL DEFAULT '{{}}',
             PRIMARY KEY (election, holder)
         );
         CREATE TABLE {schema}.regent_reserved (
             election text PRIMARY KEY,
             holder   text NOT NULL,
             until    timestamptz NOT NULL
         );"
    )
}

/// The acquire statement of the builds before `incarnation`, word for
/// word: `$1` election, `$2` holder, `$3` ttl in ms, `$4` metadata.
fn old_acquire(schema: &str) -> String {
    let leases = format!("\"{schema}\".\"regent_leases\"");
    let tokens = format!("\"{schema}\".\"regent_tokens\"");
    let reserved = format!("\"{schema}\".\"regent_reserved\"");
    let notify = format!("pg_notify('regent_leases', '{schema}/' || election)");
    format!(
        "WITH now AS (SELECT clock_timestamp() AS t),
         live AS (
             SELECT holder, token, metadata FROM {leases}
             WHERE election = $1 AND expires_at > (SELECT t FROM now)
         ),
         kept AS (
             SELECT 1 FROM {reserved}
             WHERE election = $1 AND until > (SELECT t FROM now) AND holder <> $2
         ),
         bump AS (
             INSERT INTO {tokens} AS c (election, last)
             SELECT $1, (extract(epoch FROM (SELECT t FROM now)) * 1000000)::bigint
             WHERE NOT EXISTS (SELECT 1 FROM live) AND NOT EXISTS (SELECT 1 FROM kept)
             ON CONFLICT (election) DO UPDATE SET last = greatest(c.last + 1, excluded.last)
             RETURNING last
         ),
         won AS (
             INSERT INTO {leases} AS l (election, holder, token, expires_at, ttl_ms, metadata)
             SELECT $1, $2, (SELECT last FROM bump),
                    (SELECT t FROM now) + $3 * interval '1 millisecond', $3, $4
             FROM bump
             ON CONFLICT (election) DO UPDATE SET
                 holder = excluded.holder, token = excluded.token,
                 expires_at = excluded.expires_at, ttl_ms = excluded.ttl_ms,
                 metadata = excluded.metadata
             WHERE l.expires_at <= (SELECT t FROM now)
             RETURNING token, election
         ),
         cleared AS (
             DELETE FROM {reserved} WHERE election = $1 AND EXISTS (SELECT 1 FROM won)
             RETURNING 1
         )
         SELECT (SELECT token FROM won) AS won, live.holder, live.token, live.metadata,
                (SELECT count({notify}) FROM won) AS notified,
                (SELECT count(*) FROM cleared) AS cleared
         FROM (SELECT 1) AS one LEFT JOIN live ON true"
    )
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect as the test");
    tokio::spawn(conn);
    client
}

/// An earlier build's acquire of `election` for `holder` (ttl 60 s): the
/// token it won, if it did.
async fn old_build_acquires(
    client: &tokio_postgres::Client,
    schema: &str,
    election: &str,
    holder: &str,
) -> Option<FencingToken> {
    let row = client
        .query_typed(
            &old_acquire(schema),
            &[
                (&election, Type::TEXT),
                (&holder, Type::TEXT),
                (&60_000_i64, Type::INT8),
                (&"{}", Type::TEXT),
            ],
        )
        .await
        .expect("the earlier build's acquire")
        .pop()
        .expect("a row");
    row.get::<_, Option<i64>>("won")
        .map(|t| FencingToken::new(u64::try_from(t).unwrap()))
}

/// Whether `regent_leases` of `schema` has column `incarnation`.
async fn has_incarnation(client: &tokio_postgres::Client, schema: &str) -> bool {
    client
        .query_one(
            "SELECT count(*) FROM information_schema.columns
             WHERE table_schema = $1 AND table_name = 'regent_leases'
               AND column_name = 'incarnation'",
            &[&schema],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 1
}

fn request(election: &ElectionName, holder: &str) -> AcquireRequest {
    AcquireRequest {
        election: election.clone(),
        holder: HolderId::new(holder).unwrap(),
        ttl: Duration::from_secs(60),
        metadata: Metadata::default(),
    }
}

fn held_by(got: Acquire) -> LeaderInfo {
    match got {
        Acquire::Held {
            leader: Some(l), ..
        } => l,
        got => panic!("not held by a leader: {got:?}"),
    }
}

/// A table of an earlier build, with a live term in it, opened by a store
/// at `url` (the server, or PgBouncer in front of it at `direct`).
async fn an_old_table_is_migrated_and_keeps_its_rows(url: &str, direct: &str) {
    let admin = connect(direct).await;
    let schema = common::unique("migrated");
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}; {}", old_tables(&schema)))
        .await
        .unwrap();
    // An earlier build leads `kept` as `a`.
    let kept = ElectionName::new("kept").unwrap();
    let old = old_build_acquires(&admin, &schema, "kept", "a")
        .await
        .expect("an earlier build wins a free election");

    let store = PostgresStore::builder(url.parse().unwrap())
        .schema(&schema)
        .build()
        .await
        .expect("the store opens a table of an earlier build");
    assert!(has_incarnation(&admin, &schema).await, "not migrated");

    let leader = store.current_leader(&kept).await.unwrap().unwrap();
    assert_eq!((leader.holder.as_str(), leader.token), ("a", old));
    // The earlier build's term stands, for another holder and for `a`
    // alike: its record names no incarnation, and is never taken over.
    for who in ["b", "a"] {
        let l = held_by(store.try_acquire(&request(&kept, who), None).await.unwrap());
        assert_eq!((l.holder.as_str(), l.token), ("a", old), "{who}");
    }

    // The earlier build goes on working on the migrated table, and this
    // one takes none of its terms either.
    let beside = ElectionName::new("beside").unwrap();
    let theirs = old_build_acquires(&admin, &schema, "beside", "a")
        .await
        .expect("an earlier build wins a free election on a migrated table");
    let l = held_by(
        store
            .try_acquire(&request(&beside, "a"), None)
            .await
            .unwrap(),
    );
    assert_eq!(l.token, theirs);

    // Released (the term's holder and token are all a release needs), the
    // election is won with a greater token.
    let release = Lease {
        election: kept.clone(),
        holder: HolderId::new("a").unwrap(),
        token: old,
        ttl: Duration::from_secs(60),
        handle: LeaseHandle::default(),
    };
    store.release(&release).await.unwrap();
    let Acquire::Won(new) = store.try_acquire(&request(&kept, "b"), None).await.unwrap() else {
        panic!("a released election was not won");
    };
    assert!(new.token > old, "{new:?} after {old}");
    // And an earlier build is held by the term this build wrote.
    assert_eq!(old_build_acquires(&admin, &schema, "kept", "c").await, None);

    // A second store opens the migrated table as it is.
    PostgresStore::builder(url.parse().unwrap())
        .schema(&schema)
        .build()
        .await
        .expect("a second store opens the migrated table");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_an_earlier_build_is_migrated_on_open_and_keeps_its_rows() {
    let pg = common::server();
    an_old_table_is_migrated_and_keeps_its_rows(&pg.url(), &pg.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_an_earlier_build_is_migrated_through_pgbouncer_in_transaction_mode() {
    let both = common::behind_pgbouncer();
    an_old_table_is_migrated_and_keeps_its_rows(
        &both.pgbouncer().store_url(),
        &both.postgres().store_url(),
    )
    .await;
}

/// An earlier build that wins over a lapsed term of this build's leaves
/// `incarnation` as it was (it knows no such column): the term is not
/// ours, though its holder id is, and the token this build last handed
/// out is not its token. It is never taken over: the incarnation is
/// bound to the token it was written with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_an_earlier_build_wrote_over_ours_is_never_taken_over() {
    let pg = common::server();
    let admin = connect(&pg.url()).await;
    let schema = common::unique("overwritten");
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    let store = PostgresStore::builder(pg.url().parse().unwrap())
        .schema(&schema)
        .build()
        .await
        .unwrap();
    let election = ElectionName::new("overwritten").unwrap();
    let Acquire::Won(ours) = store
        .try_acquire(&request(&election, "a"), None)
        .await
        .unwrap()
    else {
        panic!("a free election was not won");
    };
    // Our term lapses; an earlier build's `a` (another process) wins.
    admin
        .batch_execute(&format!(
            "UPDATE {schema}.regent_leases SET expires_at = now() - interval '1 second'
             WHERE election = 'overwritten'"
        ))
        .await
        .unwrap();
    let theirs = old_build_acquires(&admin, &schema, "overwritten", "a")
        .await
        .expect("the earlier build wins the lapsed election");
    let left: String = admin
        .query_one(
            &format!(
                "SELECT incarnation FROM {schema}.regent_leases WHERE election = 'overwritten'"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(left.ends_with(&format!("/{}", ours.token)), "{left}");

    let l = held_by(
        store
            .try_acquire(&request(&election, "a"), None)
            .await
            .unwrap(),
    );
    assert_eq!((l.holder.as_str(), l.token), ("a", theirs));
}

/// A role that may use the tables but not alter them (an administrator
/// made them, for an earlier build) cannot add the column: it is told
/// the statement the table's owner runs, and opens the table once the
/// owner has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_may_not_add_the_column_is_told_the_statement() {
    let pg = common::server();
    let admin = connect(&pg.url()).await;
    let (schema, role) = (common::unique("owned"), common::unique("app"));
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA {schema}; {}
             CREATE ROLE {role} LOGIN;
             GRANT USAGE ON SCHEMA {schema} TO {role};
             GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.regent_leases,
                 {schema}.regent_tokens, {schema}.regent_roster, {schema}.regent_reserved
                 TO {role};",
            old_tables(&schema)
        ))
        .await
        .unwrap();
    let as_app = || {
        let mut config: regent_postgres::Config = pg.url().parse().unwrap();
        config.user(&role);
        PostgresStore::builder(config).schema(&schema).build()
    };
    let e = as_app().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
    for says in [
        "incarnation",
        "owner",
        "ALTER TABLE regent_leases ADD COLUMN IF NOT EXISTS incarnation text",
    ] {
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    assert!(!has_incarnation(&admin, &schema).await);

    admin
        .batch_execute(&format!(
            "ALTER TABLE {schema}.regent_leases ADD COLUMN IF NOT EXISTS incarnation text"
        ))
        .await
        .unwrap();
    let store = as_app().await.expect("the migrated table opens");
    let election = ElectionName::new("owned").unwrap();
    assert!(matches!(
        store
            .try_acquire(&request(&election, "a"), None)
            .await
            .unwrap(),
        Acquire::Won(_)
    ));
}

/// The column is added under the table's lock, which every statement on
/// the table waits behind while the `ALTER TABLE` waits for it: with a
/// transaction holding the table (a long one, a dump), the store gives up
/// within moments, transient, and adds it once the table is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_that_cannot_lock_the_table_gives_up_soon_and_transient() {
    let pg = common::server();
    let (admin, reader) = (connect(&pg.url()).await, connect(&pg.url()).await);
    let schema = common::unique("busy");
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}; {}", old_tables(&schema)))
        .await
        .unwrap();
    reader
        .batch_execute(&format!(
            "BEGIN; SELECT count(*) FROM {schema}.regent_leases"
        ))
        .await
        .unwrap();
    let open = || {
        PostgresStore::builder(pg.url().parse().unwrap())
            .schema(&schema)
            .build()
    };
    let start = Instant::now();
    let e = open().await.unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(e.to_string().contains("lock"), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "gave up after {:?}",
        start.elapsed()
    );
    reader.batch_execute("COMMIT").await.unwrap();
    open().await.expect("the table is free: migrated");
    assert!(has_incarnation(&admin, &schema).await);
}
