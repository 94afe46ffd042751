//! `regent_postgres::fence` against a real PostgreSQL, directly and
//! through PgBouncer in transaction pooling mode: the first token is
//! recorded, an equal or larger one passes, a smaller one is refused
//! naming the newest and its transaction's write is rolled back; two
//! terms' transactions are serialised by the fence row's lock (the older
//! token waits for the newer's commit and is refused, an older one that
//! checked first commits first); REPEATABLE READ fails rather than
//! passes; tokens a bigint cannot hold are refused; a role with only the
//! documented privileges can fence, and a missing table or privilege is
//! named.
//!
//! The tests share one server with a PgBouncer in front of it while they
//! run ([`engine`]), each in a schema of its own or on resources of its
//! own.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use regent_core::FencingToken;
use regent_postgres::fence::{self, Fence, FenceError};
use regent_postgres::tokio_postgres::{self, Client, GenericClient, IsolationLevel, NoTls};
use regent_testkit::engines::PostgresBehindPgBouncer;
use tokio::task::block_in_place;

/// Bounds a wait for something that must happen (a check to block on the
/// row lock); only a hang reaches it.
const WAIT: Duration = Duration::from_secs(20);

/// One server, with PgBouncer in front of it, for the tests of this
/// binary: started by the first that asks and stopped when the last
/// running one drops its handle (a later test starts another); a `static`
/// is never dropped, and the server must not outlive the tests.
fn engine() -> Arc<PostgresBehindPgBouncer> {
    static SHARED: Mutex<Weak<PostgresBehindPgBouncer>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(engine) = shared.upgrade() {
        return engine;
    }
    let engine = Arc::new(
        block_in_place(PostgresBehindPgBouncer::start)
            .unwrap_or_else(|e| panic!("cannot start PostgreSQL behind PgBouncer: {e}")),
    );
    *shared = Arc::downgrade(&engine);
    engine
}

/// Where a test's clients connect: the server itself, or PgBouncer.
#[derive(Clone, Copy, Debug)]
enum Via {
    Direct,
    PgBouncer,
}

impl Via {
    fn url(self, engine: &PostgresBehindPgBouncer) -> String {
        match self {
            Via::Direct => engine.postgres().store_url(),
            Via::PgBouncer => engine.pgbouncer().store_url(),
        }
    }
}

async fn connect(url: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    tokio::spawn(conn);
    client
}

/// A schema of its own with a table of data to protect, and a fence in
/// it, made by `client`.
async fn setup(engine: &PostgresBehindPgBouncer, client: &Client, name: &str) -> Fence {
    let schema = common::unique(name);
    common::sql_at(
        &engine.postgres().store_url(),
        &format!("CREATE SCHEMA {schema}; CREATE TABLE {schema}.data (token bigint, what text)"),
    )
    .await;
    let fence = Fence::builder().schema(&schema).build().unwrap();
    fence.create_table(client).await.unwrap();
    fence
}

fn t(v: u64) -> FencingToken {
    FencingToken::new(v)
}

/// `"schema".data`, beside the fence table.
fn data(fence: &Fence) -> String {
    let schema = fence.table().split('.').next().unwrap();
    format!("{schema}.data")
}

/// One fenced write: checks `token`, inserts a row of data, commits.
async fn write(
    client: &mut Client,
    fence: &Fence,
    token: FencingToken,
    what: &str,
) -> Result<(), FenceError> {
    let tx = client.transaction().await.unwrap();
    fence.check_and_record(&tx, "data", token).await?;
    insert(&tx, fence, token, what).await;
    tx.commit().await.unwrap();
    Ok(())
}

async fn insert(
    tx: &tokio_postgres::Transaction<'_>,
    fence: &Fence,
    token: FencingToken,
    what: &str,
) {
    let token = i64::try_from(token.get()).unwrap();
    tx.execute_typed(
        &format!("INSERT INTO {} (token, what) VALUES ($1, $2)", data(fence)),
        &[
            (&token, tokio_postgres::types::Type::INT8),
            (&what, tokio_postgres::types::Type::TEXT),
        ],
    )
    .await
    .unwrap();
}

/// The data's rows, in the order they were written.
async fn rows(client: &Client, fence: &Fence) -> Vec<(i64, String)> {
    client
        .query_typed(
            &format!("SELECT token, what FROM {} ORDER BY ctid", data(fence)),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

async fn newest(client: &impl GenericClient, fence: &Fence) -> Option<FencingToken> {
    fence.newest(client, "data").await.unwrap()
}

/// Waits until a statement on `fence`'s table waits for a lock, as the
/// server sees it.
async fn until_a_check_waits_on_the_row(operator: &Client, fence: &Fence) {
    let pattern = format!("%{}%", fence.table());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let waiting: i64 = operator
            .query_typed(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE wait_event_type = 'Lock' AND query LIKE $1",
                &[(&pattern, tokio_postgres::types::Type::TEXT)],
            )
            .await
            .unwrap()[0]
            .get(0);
        if waiting > 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no check waited on {}",
            fence.table()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// --------------------------------------------------------------- scenarios

async fn tokens_are_recorded_equal_passes_smaller_is_refused(via: Via) {
    let engine = engine();
    let mut client = connect(&via.url(&engine)).await;
    let fence = setup(&engine, &client, "record").await;

    assert_eq!(newest(&client, &fence).await, None);
    write(&mut client, &fence, t(5), "first").await.unwrap();
    assert_eq!(newest(&client, &fence).await, Some(t(5)));
    write(&mut client, &fence, t(5), "again, same term")
        .await
        .unwrap();
    write(&mut client, &fence, t(9), "newer").await.unwrap();
    assert_eq!(newest(&client, &fence).await, Some(t(9)));

    // Refused: the transaction's write, made before the check, rolls back.
    let tx = client.transaction().await.unwrap();
    insert(&tx, &fence, t(4), "stale").await;
    let e = fence.check_and_record(&tx, "data", t(4)).await.unwrap_err();
    let FenceError::Stale {
        resource,
        token,
        newest: n,
        ..
    } = &e
    else {
        panic!("not Stale: {e:?}");
    };
    assert_eq!((resource.as_str(), *token, *n), ("data", t(4), t(9)), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("token 4") && text.contains("token 9") && text.contains("\"data\""),
        "{text}"
    );
    // A refusal is an answer, not an SQL error: the transaction goes on,
    // to be rolled back.
    tx.batch_execute("SELECT 1").await.unwrap();
    tx.rollback().await.unwrap();
    // Through `?`, as a caller writes it: the dropped transaction rolls
    // back.
    let e = write(&mut client, &fence, t(8), "stale too")
        .await
        .unwrap_err();
    assert!(e.is_stale(), "{e}");

    assert_eq!(
        rows(&client, &fence).await,
        [
            (5, "first".to_owned()),
            (5, "again, same term".to_owned()),
            (9, "newer".to_owned())
        ]
    );
    assert_eq!(newest(&client, &fence).await, Some(t(9)));
}

/// The newer term's transaction has checked (and holds the row); the
/// older term's check waits for it, and is refused once it commits.
async fn an_older_token_waits_for_the_newer_commit_and_is_refused(via: Via) {
    let engine = engine();
    let url = via.url(&engine);
    let operator = connect(&engine.postgres().store_url()).await;
    let (mut old, mut new) = (connect(&url).await, connect(&url).await);
    let fence = setup(&engine, &old, "wait").await;
    write(&mut old, &fence, t(10), "term 10").await.unwrap();

    let tx_new = new.transaction().await.unwrap();
    fence
        .check_and_record(&tx_new, "data", t(20))
        .await
        .unwrap();
    let tx_old = old.transaction().await.unwrap();
    // Equal to the token recorded before: it would pass, were it not for
    // the newer term's open transaction.
    let e = {
        let old_check = fence.check_and_record(&tx_old, "data", t(10));
        tokio::pin!(old_check);
        tokio::select! {
            r = &mut old_check => panic!("the older check returned while the newer's transaction held the row: {r:?}"),
            () = until_a_check_waits_on_the_row(&operator, &fence) => {}
        }
        insert(&tx_new, &fence, t(20), "term 20").await;
        tx_new.commit().await.unwrap();
        tokio::time::timeout(WAIT, old_check)
            .await
            .expect("the older check answers once the newer commits")
            .unwrap_err()
    };
    assert!(
        matches!(&e, FenceError::Stale { newest, .. } if *newest == t(20)),
        "{e:?}"
    );
    tx_old.rollback().await.unwrap();
    assert_eq!(
        rows(&new, &fence).await,
        [(10, "term 10".to_owned()), (20, "term 20".to_owned())]
    );
}

/// The older term's transaction checked first: the newer's check waits
/// for it, the older's write commits first, then the newer's.
async fn an_older_token_that_checked_first_commits_first(via: Via) {
    let engine = engine();
    let url = via.url(&engine);
    let operator = connect(&engine.postgres().store_url()).await;
    let (mut old, mut new) = (connect(&url).await, connect(&url).await);
    let fence = setup(&engine, &old, "order").await;

    let tx_old = old.transaction().await.unwrap();
    fence
        .check_and_record(&tx_old, "data", t(10))
        .await
        .unwrap();
    let tx_new = new.transaction().await.unwrap();
    {
        let new_check = fence.check_and_record(&tx_new, "data", t(20));
        tokio::pin!(new_check);
        tokio::select! {
            r = &mut new_check => panic!("the newer check returned while the older's transaction held the row: {r:?}"),
            () = until_a_check_waits_on_the_row(&operator, &fence) => {}
        }
        insert(&tx_old, &fence, t(10), "term 10").await;
        tx_old.commit().await.unwrap();
        tokio::time::timeout(WAIT, new_check)
            .await
            .expect("the newer check answers once the older commits")
            .unwrap();
    }
    insert(&tx_new, &fence, t(20), "term 20").await;
    tx_new.commit().await.unwrap();

    assert!(
        write(&mut old, &fence, t(10), "term 10, late")
            .await
            .unwrap_err()
            .is_stale()
    );
    assert_eq!(
        rows(&new, &fence).await,
        [(10, "term 10".to_owned()), (20, "term 20".to_owned())]
    );
}

// ------------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_recorded_an_equal_one_passes_a_smaller_one_is_refused() {
    tokens_are_recorded_equal_passes_smaller_is_refused(Via::Direct).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_recorded_an_equal_one_passes_a_smaller_one_is_refused_through_pgbouncer() {
    tokens_are_recorded_equal_passes_smaller_is_refused(Via::PgBouncer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_token_blocks_on_the_row_lock_and_is_refused_after_the_newer_commits() {
    an_older_token_waits_for_the_newer_commit_and_is_refused(Via::Direct).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_token_blocks_on_the_row_lock_and_is_refused_after_the_newer_commits_through_pgbouncer()
 {
    an_older_token_waits_for_the_newer_commit_and_is_refused(Via::PgBouncer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_token_that_checked_first_commits_before_the_newer() {
    an_older_token_that_checked_first_commits_first(Via::Direct).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_token_that_checked_first_commits_before_the_newer_through_pgbouncer() {
    an_older_token_that_checked_first_commits_first(Via::PgBouncer).await;
}

/// REPEATABLE READ: a transaction whose snapshot predates the newer
/// term's commit cannot pass; PostgreSQL fails it with a serialization
/// failure, and a new transaction is then refused as stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeatable_read_transaction_older_than_the_newer_commit_fails() {
    let engine = engine();
    let url = engine.postgres().store_url();
    let (mut old, mut new) = (connect(&url).await, connect(&url).await);
    let fence = setup(&engine, &old, "repeatable").await;
    write(&mut old, &fence, t(10), "term 10").await.unwrap();

    let tx = old
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .start()
        .await
        .unwrap();
    assert_eq!(newest(&tx, &fence).await, Some(t(10)), "the snapshot");
    write(&mut new, &fence, t(20), "term 20").await.unwrap();
    let e = fence
        .check_and_record(&tx, "data", t(10))
        .await
        .unwrap_err();
    let FenceError::Sql { source, .. } = &e else {
        panic!("not an SQL error: {e:?}");
    };
    assert_eq!(
        source.code(),
        Some(&tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE),
        "{e}"
    );
    assert!(e.to_string().contains("run the transaction again"), "{e}");
    drop(tx);
    assert!(
        write(&mut old, &fence, t(10), "again")
            .await
            .unwrap_err()
            .is_stale()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_a_bigint_cannot_hold_is_refused_not_wrapped() {
    let engine = engine();
    let mut client = connect(&engine.postgres().store_url()).await;
    let fence = setup(&engine, &client, "range").await;
    let max = u64::try_from(i64::MAX).unwrap();
    write(&mut client, &fence, t(max), "the largest")
        .await
        .unwrap();
    for above in [max + 1, u64::MAX] {
        let e = write(&mut client, &fence, t(above), "too large")
            .await
            .unwrap_err();
        assert!(
            matches!(&e, FenceError::TokenOutOfRange { token, .. } if *token == t(above)),
            "{e:?}"
        );
        assert!(e.to_string().contains(&i64::MAX.to_string()), "{e}");
    }
    assert_eq!(newest(&client, &fence).await, Some(t(max)));
}

/// The module's functions use `public.regent_fence`; resources are
/// fenced apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_table_fences_each_resource_apart() {
    let engine = engine();
    let mut client = connect(&engine.pgbouncer().store_url()).await;
    fence::create_table(&client).await.unwrap();
    let (a, b) = (common::unique("a"), common::unique("b"));
    let tx = client.transaction().await.unwrap();
    fence::check_and_record(&tx, &a, t(10)).await.unwrap();
    fence::check_and_record(&tx, &b, t(1)).await.unwrap();
    tx.commit().await.unwrap();
    let tx = client.transaction().await.unwrap();
    assert!(
        fence::check_and_record(&tx, &a, t(9))
            .await
            .unwrap_err()
            .is_stale()
    );
    drop(tx);
    let default = Fence::default();
    assert_eq!(default.table(), "\"public\".\"regent_fence\"");
    assert_eq!(default.newest(&client, &a).await.unwrap(), Some(t(10)));
    assert_eq!(default.newest(&client, &b).await.unwrap(), Some(t(1)));
}

/// A role with USAGE on the schema and SELECT, INSERT and UPDATE on the
/// table fences; without them, or without the table, the error says what
/// is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_least_privileges_suffice_and_missing_ones_are_named() {
    let engine = engine();
    let admin_url = engine.postgres().store_url();
    let (role, schema) = (common::unique("fencer"), common::unique("locked"));
    common::sql_at(
        &admin_url,
        &format!(
            "CREATE ROLE {role} LOGIN;
             CREATE SCHEMA {schema}; REVOKE ALL ON SCHEMA {schema} FROM PUBLIC;
             GRANT USAGE ON SCHEMA {schema} TO {role};"
        ),
    )
    .await;
    let fence = Fence::builder().schema(&schema).build().unwrap();
    let mut config: tokio_postgres::Config = admin_url.parse().unwrap();
    config.user(&role);
    let (mut app, conn) = config.connect(NoTls).await.unwrap();
    tokio::spawn(conn);

    // No table, and no right to create it.
    let e = fence.create_table(&app).await.unwrap_err();
    assert!(e.to_string().contains("CREATE on the schema"), "{e}");
    let tx = app.transaction().await.unwrap();
    let e = fence.check_and_record(&tx, "r", t(1)).await.unwrap_err();
    assert!(e.to_string().contains("the table is missing"), "{e}");
    drop(tx);

    // An administrator makes it, with no grant yet.
    let admin = connect(&admin_url).await;
    fence.create_table(&admin).await.unwrap();
    let tx = app.transaction().await.unwrap();
    let e = fence.check_and_record(&tx, "r", t(1)).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("SELECT, INSERT and UPDATE on the table"),
        "{e}"
    );
    drop(tx);

    admin
        .batch_execute(&format!(
            "GRANT SELECT, INSERT, UPDATE ON {} TO {role}",
            fence.table()
        ))
        .await
        .unwrap();
    // The table is there: creating it again succeeds without the right.
    fence.create_table(&app).await.unwrap();
    for (token, passes) in [(2, true), (2, true), (3, true), (1, false)] {
        let tx = app.transaction().await.unwrap();
        let r = fence.check_and_record(&tx, "r", t(token)).await;
        assert_eq!(r.is_ok(), passes, "token {token}: {r:?}");
        if passes {
            tx.commit().await.unwrap();
        }
    }
    assert_eq!(fence.newest(&app, "r").await.unwrap(), Some(t(3)));
}

/// Instances starting together all create the table, or find it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_creating_the_table_together_all_succeed() {
    let engine = engine();
    let url = engine.postgres().store_url();
    let schema = common::unique("together");
    common::sql_at(&url, &format!("CREATE SCHEMA {schema}")).await;
    let fence = Fence::builder().schema(&schema).build().unwrap();
    let mut clients = Vec::new();
    for _ in 0..6 {
        clients.push(connect(&url).await);
    }
    let made = futures_util::future::join_all(clients.iter().map(|c| fence.create_table(c))).await;
    for r in made {
        r.unwrap();
    }
}

#[test]
fn names_that_are_not_plain_identifiers_are_refused() {
    for (schema, table, what) in [
        ("a b", "t", "schema"),
        ("s", "x\"; DROP TABLE data; --", "table"),
        ("", "t", "schema"),
        ("s", "1t", "table"),
    ] {
        let e = Fence::builder()
            .schema(schema)
            .table(table)
            .build()
            .unwrap_err();
        assert!(
            matches!(&e, FenceError::InvalidName { what: w, .. } if *w == what),
            "{e:?}"
        );
        assert!(e.to_string().contains("plain identifier"), "{e}");
    }
    let ok = Fence::builder()
        .schema("app")
        .table("jobs_fence")
        .build()
        .unwrap();
    assert_eq!(ok.table(), "\"app\".\"jobs_fence\"");
}

#[test]
fn public_types_and_the_checks_future_are_send() {
    fn is<T: Send + Sync + 'static>() {}
    is::<Fence>();
    is::<fence::FenceBuilder>();
    is::<FenceError>();
    // The check's future crosses threads (tokio::spawn).
    fn future_is_send<F: std::future::Future + Send>(_: F) {}
    #[allow(dead_code, reason = "only type-checked")]
    async fn check(tx: &tokio_postgres::Transaction<'_>, client: &Client) {
        future_is_send(fence::check_and_record(tx, "r", t(1)));
        future_is_send(fence::create_table(client));
        future_is_send(Fence::default().newest(tx, "r"));
    }
}
