//! `regent_sqlite::fence` on real SQLite files: the first token is
//! recorded, an equal or larger one passes, a smaller one is refused
//! naming the newest and leaves the caller's transaction to roll back;
//! two connections' transactions are serialised, and an older term's
//! transaction never commits after a newer token has; tokens SQLite
//! cannot hold are refused, as is a check outside a transaction.

use std::path::Path;
use std::time::Duration;

use regent_core::FencingToken;
use regent_sqlite::fence::{self, Fence, FenceError};
use regent_sqlite::rusqlite::{self, Connection, ErrorCode, TransactionBehavior};

/// A connection to the application's database at `path`: WAL, as a
/// service would run it, a table of data to protect, and a busy timeout
/// of `busy`.
fn open(path: &Path, busy: Duration) -> Connection {
    let conn = Connection::open(path).unwrap();
    conn.busy_timeout(busy).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS data (token INTEGER NOT NULL, what TEXT)")
        .unwrap();
    conn
}

fn t(v: u64) -> FencingToken {
    FencingToken::new(v)
}

/// One fenced write: checks `token`, inserts a row of `data`, commits.
fn write(conn: &mut Connection, token: FencingToken, what: &str) -> Result<(), FenceError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    fence::check_and_record(&tx, "data", token)?;
    tx.execute(
        "INSERT INTO data (token, what) VALUES (?1, ?2)",
        (i64::try_from(token.get()).unwrap(), what),
    )
    .unwrap();
    tx.commit().unwrap();
    Ok(())
}

fn rows(conn: &Connection) -> Vec<(i64, String)> {
    let mut s = conn
        .prepare("SELECT token, what FROM data ORDER BY rowid")
        .unwrap();
    s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn newest(conn: &Connection) -> Option<FencingToken> {
    Fence::default().newest(conn, "data").unwrap()
}

#[test]
fn the_first_token_is_recorded_in_a_table_made_on_first_use() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("app.db"), Duration::from_secs(5));
    write(&mut conn, t(3), "first").unwrap();
    assert_eq!(newest(&conn), Some(t(3)));
    assert_eq!(rows(&conn), [(3, "first".to_owned())]);
    let schema: String = conn
        .query_row(
            "SELECT sql FROM sqlite_schema WHERE name = ?1",
            [fence::DEFAULT_TABLE],
            |r| r.get(0),
        )
        .unwrap();
    assert!(schema.contains("resource TEXT PRIMARY KEY"), "{schema}");
}

#[test]
fn an_equal_token_passes_again_and_a_larger_one_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("app.db"), Duration::from_secs(5));
    fence::create_table(&conn).unwrap();
    for i in 0..3 {
        write(&mut conn, t(5), &format!("term 5, write {i}")).unwrap();
    }
    write(&mut conn, t(9), "term 9").unwrap();
    assert_eq!(newest(&conn), Some(t(9)));
    assert_eq!(rows(&conn).len(), 4);
}

#[test]
fn a_smaller_token_is_refused_naming_the_newest_and_its_write_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("app.db"), Duration::from_secs(5));
    write(&mut conn, t(9), "term 9").unwrap();

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    // Written before the check, in the same transaction: the order does
    // not matter, the commit does.
    tx.execute("INSERT INTO data (token, what) VALUES (4, 'stale')", [])
        .unwrap();
    let e = fence::check_and_record(&tx, "data", t(4)).unwrap_err();
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
    assert!(e.is_stale());
    let text = e.to_string();
    assert!(
        text.contains("token 4") && text.contains("token 9") && text.contains("\"data\""),
        "{text}"
    );
    // The transaction is still usable, and rolls back.
    let inside: i64 = tx
        .query_row("SELECT count(*) FROM data", [], |r| r.get(0))
        .unwrap();
    assert_eq!(inside, 2, "the refused check undid nothing of the caller's");
    tx.rollback().unwrap();
    assert_eq!(rows(&conn), [(9, "term 9".to_owned())]);
    assert_eq!(newest(&conn), Some(t(9)));

    // Through `?`, as a caller writes it: dropping the transaction rolls
    // back.
    assert!(write(&mut conn, t(8), "stale too").unwrap_err().is_stale());
    assert_eq!(rows(&conn).len(), 1);
}

#[test]
fn two_connections_are_serialised_and_the_older_term_cannot_commit_after_the_newer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let mut old = open(&path, Duration::from_secs(5));
    // No busy timeout: a wait for the lock is an error we can see.
    let mut new = open(&path, Duration::ZERO);
    write(&mut old, t(1), "term 1").unwrap();

    // Term 1 checks and writes; term 2 cannot begin meanwhile.
    let tx = old
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    fence::check_and_record(&tx, "data", t(1)).unwrap();
    tx.execute(
        "INSERT INTO data (token, what) VALUES (1, 'term 1, late')",
        [],
    )
    .unwrap();
    let busy = new
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap_err();
    assert_eq!(busy.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
    tx.commit().unwrap();

    // Term 2 writes; from then on term 1 is refused.
    write(&mut new, t(2), "term 2").unwrap();
    let e = write(&mut old, t(1), "term 1, after term 2").unwrap_err();
    assert!(e.is_stale(), "{e}");
    assert_eq!(
        rows(&new).iter().map(|r| r.0).collect::<Vec<_>>(),
        [1, 1, 2]
    );
}

/// A deferred transaction that began before the newer term committed
/// reads the old snapshot, but SQLite never lets it write from there:
/// its check fails, with `SQLITE_BUSY` rather than `Stale`.
#[test]
fn a_deferred_transaction_older_than_the_newer_commit_cannot_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let mut old = open(&path, Duration::from_secs(1));
    let mut new = open(&path, Duration::from_secs(1));
    write(&mut old, t(1), "term 1").unwrap();

    let tx = old.transaction().unwrap();
    assert_eq!(newest(&tx), Some(t(1)), "a snapshot from before term 2");
    write(&mut new, t(2), "term 2").unwrap();
    let e = fence::check_and_record(&tx, "data", t(1)).unwrap_err();
    let FenceError::Sql { source, .. } = &e else {
        panic!("not an SQLite error: {e:?}");
    };
    assert_eq!(source.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
    assert!(e.to_string().contains("run the transaction again"), "{e}");
    drop(tx);
    assert!(write(&mut old, t(1), "again").unwrap_err().is_stale());
}

#[test]
fn a_token_sqlite_cannot_hold_is_refused_not_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("app.db"), Duration::from_secs(5));
    let max = u64::try_from(i64::MAX).unwrap();
    write(&mut conn, t(max), "the largest").unwrap();
    assert_eq!(newest(&conn), Some(t(max)));
    for above in [max + 1, u64::MAX] {
        let e = write(&mut conn, t(above), "too large").unwrap_err();
        assert!(
            matches!(&e, FenceError::TokenOutOfRange { token, .. } if *token == t(above)),
            "{e:?}"
        );
        assert!(e.to_string().contains(&i64::MAX.to_string()), "{e}");
    }
    assert_eq!(newest(&conn), Some(t(max)));
}

#[test]
fn a_check_outside_a_transaction_is_refused_and_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open(&dir.path().join("app.db"), Duration::from_secs(5));
    let e = fence::check_and_record(&conn, "data", t(1)).unwrap_err();
    assert!(
        matches!(&e, FenceError::NotInTransaction { resource, .. } if resource == "data"),
        "{e:?}"
    );
    assert!(e.to_string().contains("outside a transaction"), "{e}");
    fence::create_table(&conn).unwrap();
    assert_eq!(newest(&conn), None);
}

#[test]
fn a_savepoint_and_a_plain_begin_are_transactions_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("app.db"), Duration::from_secs(5));
    {
        let mut tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        let sp = tx.savepoint().unwrap();
        fence::check_and_record(&sp, "data", t(2)).unwrap();
        sp.commit().unwrap();
        tx.commit().unwrap();
    }
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert!(
        fence::check_and_record(&conn, "data", t(1))
            .unwrap_err()
            .is_stale()
    );
    conn.execute_batch("ROLLBACK").unwrap();
    assert_eq!(newest(&conn), Some(t(2)));
}

#[test]
fn resources_and_tables_are_fenced_apart() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("app.db"), Duration::from_secs(5));
    let other = Fence::builder().table("jobs_fence").build().unwrap();
    assert_eq!(other.table(), "jobs_fence");
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    fence::check_and_record(&tx, "a", t(10)).unwrap();
    // Another resource, and the same resource in another table, start
    // afresh.
    fence::check_and_record(&tx, "b", t(1)).unwrap();
    other.check_and_record(&tx, "a", t(1)).unwrap();
    tx.commit().unwrap();
    assert_eq!(other.newest(&conn, "a").unwrap(), Some(t(1)));
    assert_eq!(Fence::default().newest(&conn, "a").unwrap(), Some(t(10)));
}

#[test]
fn a_table_name_that_is_not_a_plain_identifier_is_refused() {
    for bad in ["", "a b", "x\"; DROP TABLE data; --", "1st", "sqlite_fence"] {
        let e = Fence::builder().table(bad).build().unwrap_err();
        assert!(
            matches!(&e, FenceError::InvalidTable { table, .. } if table == bad),
            "{e:?}"
        );
        assert!(e.to_string().contains("plain identifier"), "{e}");
    }
}

/// A fence row an operator rewrote to something that is not a token is
/// an SQLite error naming the table: never a pass, never a panic.
#[test]
fn a_fence_row_holding_garbage_is_an_error_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = open(&dir.path().join("app.db"), Duration::from_secs(5));
    write(&mut conn, t(1), "term 1").unwrap();
    conn.execute("UPDATE regent_fence SET token = 'garbage'", [])
        .unwrap();
    let e = write(&mut conn, t(2), "term 2").unwrap_err();
    assert!(matches!(e, FenceError::Sql { .. }), "{e:?}");
    assert!(e.to_string().contains("regent_fence"), "{e}");
    assert!(std::error::Error::source(&e).is_some());
    assert_eq!(rows(&conn).len(), 1);
}

#[test]
fn public_types_are_send_and_sync() {
    fn is<T: Send + Sync + 'static>() {}
    is::<Fence>();
    is::<fence::FenceBuilder>();
    // rusqlite's error is Send + Sync: so is ours.
    is::<FenceError>();
    let _: fn(&rusqlite::Connection) -> Result<(), FenceError> = fence::create_table;
}
