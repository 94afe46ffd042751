//! The store's own rules beyond the conformance suite: fencing tokens that
//! outlive the row and the connection, boot ids, garbage rows, ttl bounds,
//! and the polling watch.

mod common;

use std::time::Duration;

use futures_util::StreamExt;
use regent_core::{
    Acquire, ErrorKind, FencingToken, Lease, LeaseHandle, LeaseStore, Renewal, SafetyClass,
    StoreError, StoreStyle, WatchMode,
};
use regent_sqlite::{MIN_TTL, SqliteStore};
use rusqlite::types::Value;

use common::{HandRow, election, holder, mono_ns, raw, req};

const TTL: Duration = Duration::from_secs(30);

/// The watch's next item, within a bound that only guards against a hang.
async fn next(
    w: &mut regent_core::LeaderStream,
) -> Option<Result<Option<regent_core::LeaderInfo>, StoreError>> {
    tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .expect("the watch answers within seconds")
}

async fn win(store: &SqliteStore, e: &str, who: &str, ttl: Duration) -> Lease {
    match store.try_acquire(&req(&election(e), who, ttl), None).await {
        Ok(Acquire::Won(lease)) => lease,
        other => panic!("{who} should win {e}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_survive_row_deletion_and_reopening_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let t1 = win(&store, "e", "a", TTL).await;
    store.release(&t1).await.expect("release");
    let t2 = win(&store, "e", "b", TTL).await;
    raw(&path)
        .execute("DELETE FROM regent_lease", [])
        .expect("delete the lease row");
    let t3 = win(&store, "e", "c", TTL).await;
    assert!(
        t1.token < t2.token && t2.token < t3.token,
        "{t1:?} {t2:?} {t3:?}"
    );
    // Close every connection (the WAL is checkpointed into the file), then
    // open the file again.
    drop(store);
    let store = SqliteStore::open(&path).await.expect("reopen");
    raw(&path)
        .execute("DELETE FROM regent_lease", [])
        .expect("delete the lease row");
    let t4 = win(&store, "e", "d", TTL).await;
    assert!(t4.token > t3.token, "{t3:?} {t4:?}");
    // A renewal of a term whose row was deleted is lost, not revived.
    assert_eq!(store.renew(&t3).await.expect("renew"), Renewal::Lost);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_from_another_boot_is_expired() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let e = election("e");
    let conn = raw(&path);
    // A live row of this boot holds the election: the control.
    let mut row = HandRow::live("e", "ghost", 7, TTL);
    row.write(&conn);
    let leader = store.current_leader(&e).await.expect("read");
    assert_eq!(leader.map(|l| l.holder), Some(holder("ghost")));
    assert!(matches!(
        store.try_acquire(&req(&e, "b", TTL), None).await,
        Ok(Acquire::Held { leader: Some(l), queued: None }) if l.holder == holder("ghost")
    ));

    // The same row, written under another boot: its expiry, though still in
    // the future of this boot's clock, means nothing.
    row.boot_id = "00000000-0000-0000-0000-000000000000".to_owned().into();
    row.write(&conn);
    assert_eq!(store.current_leader(&e).await.expect("read"), None);
    let ghost = Lease {
        election: e.clone(),
        holder: holder("ghost"),
        token: FencingToken::new(7),
        ttl: TTL,
        handle: LeaseHandle::new("sqlite-7"),
    };
    assert_eq!(store.renew(&ghost).await.expect("renew"), Renewal::Lost);
    let b = win(&store, "e", "b", TTL).await;
    assert_eq!(b.token, FencingToken::new(8), "the counter carries on");
}

/// One way a row can be garbage, and what the error must mention.
struct Garbage {
    what: &'static str,
    change: fn(&mut HandRow),
    mentions: &'static str,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_rows_are_corrupt_and_never_taken_over() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let conn = raw(&path);
    let cases = [
        Garbage {
            what: "a holder that is not a holder id",
            change: |r| r.holder = Value::Text("has space".into()),
            mentions: "holder",
        },
        Garbage {
            // (An integer would become text by the column's affinity.)
            what: "a holder that is a blob",
            change: |r| r.holder = Value::Blob(vec![0xff, 0x00]),
            mentions: "holder",
        },
        Garbage {
            what: "token zero",
            change: |r| r.token = Value::Integer(0),
            mentions: "token",
        },
        Garbage {
            what: "a negative token",
            change: |r| r.token = Value::Integer(-3),
            mentions: "token",
        },
        Garbage {
            what: "a token that is text",
            change: |r| r.token = Value::Text("seven".into()),
            mentions: "token",
        },
        Garbage {
            what: "a token above the counter",
            change: |r| r.token = Value::Integer(9),
            mentions: "fencing counter",
        },
        Garbage {
            what: "no fencing counter",
            change: |r| r.counter = None,
            mentions: "fencing counter",
        },
        Garbage {
            what: "metadata that is not JSON",
            change: |r| r.metadata = Value::Text("addr=10.0.0.1".into()),
            mentions: "metadata",
        },
        Garbage {
            what: "metadata that is a JSON array",
            change: |r| r.metadata = Value::Text("[1]".into()),
            mentions: "metadata",
        },
        Garbage {
            what: "metadata with a number",
            change: |r| r.metadata = Value::Text(r#"{"port":80}"#.into()),
            mentions: "metadata",
        },
        Garbage {
            what: "ttl zero",
            change: |r| r.ttl_ms = Value::Integer(0),
            mentions: "ttl_ms",
        },
        Garbage {
            what: "an expiry beyond the ttl on this boot's clock",
            change: |r| r.expires_at_ns = Value::Integer(i64::MAX),
            mentions: "beyond its ttl",
        },
        Garbage {
            what: "an empty boot id",
            change: |r| r.boot_id = Value::Text(String::new()),
            mentions: "boot_id",
        },
        Garbage {
            what: "an expiry that is text",
            change: |r| r.expires_at_ns = Value::Text("soon".into()),
            mentions: "expires_at_ns",
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let name = format!("garbage-{i}");
        let e = election(&name);
        let mut row = HandRow::live(&name, "owner", 7, TTL);
        (case.change)(&mut row);
        row.write(&conn);
        let check = |op: &str, err: StoreError| {
            assert_eq!(err.kind(), ErrorKind::Corrupt, "{}: {op}: {err}", case.what);
            let msg = err.to_string();
            assert!(
                msg.contains(&name) && msg.contains(case.mentions),
                "{}: {op}: the error should name the election and {:?}: {msg}",
                case.what,
                case.mentions
            );
        };
        match store.try_acquire(&req(&e, "b", TTL), None).await {
            Err(err) => check("acquire", err),
            Ok(other) => panic!("{}: acquire answered {other:?}", case.what),
        }
        match store.current_leader(&e).await {
            Err(err) => check("current_leader", err),
            Ok(other) => panic!("{}: current_leader answered {other:?}", case.what),
        }
        match store.watch(&e).await {
            Err(err) => check("watch", err),
            Ok(_) => panic!("{}: watch started on garbage", case.what),
        }
        let owner = Lease {
            election: e.clone(),
            holder: holder("owner"),
            token: FencingToken::new(7),
            ttl: TTL,
            handle: LeaseHandle::new("sqlite-7"),
        };
        match store.renew(&owner).await {
            Err(err) => check("renew", err),
            Ok(other) => panic!("{}: renew answered {other:?}", case.what),
        }
        // Nothing was changed: the garbage is still there for an operator.
        let holder_now: Value = conn
            .query_row(
                "SELECT holder FROM regent_lease WHERE election = ?1",
                [&name],
                |r| r.get(0),
            )
            .expect("the row is still there");
        assert_eq!(holder_now, row.holder, "{}", case.what);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_below_the_minimum_or_above_a_day_is_refused_and_never_rounded_down() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path().join("regent.db"))
        .await
        .expect("open");
    let info = store.info();
    assert_eq!(info.name, "sqlite");
    assert_eq!(info.style, StoreStyle::Race);
    assert_eq!(info.safety, SafetyClass::SingleNode);
    assert_eq!(info.min_ttl, MIN_TTL);
    assert_eq!(info.watch, WatchMode::Poll(Duration::from_millis(100)));
    assert_eq!(
        info.expiry_slack_for(Duration::from_secs(10)),
        Duration::ZERO
    );
    assert_eq!(info.expiry_slack, regent_core::store::ExpirySlack::NONE);
    assert_eq!(info.max_ttl, regent_core::MAX_TTL);

    let e = election("e");
    for ttl in [
        Duration::ZERO,
        MIN_TTL - Duration::from_nanos(1),
        regent_core::MAX_TTL + Duration::from_nanos(1),
    ] {
        let err = store
            .try_acquire(&req(&e, "a", ttl), None)
            .await
            .expect_err("out of range");
        assert_eq!(err.kind(), ErrorKind::Config, "{ttl:?}: {err}");
        assert!(err.to_string().contains("ttl"), "{err}");
    }
    // 10.5 ms is granted as 11 ms, never 10.
    let lease = win(&store, "e", "a", Duration::from_micros(10_500)).await;
    assert_eq!(lease.ttl, Duration::from_millis(11));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_lost_not_revived_even_when_nobody_took_over() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path().join("regent.db"))
        .await
        .expect("open");
    let ttl = Duration::from_millis(50);
    let a = win(&store, "e", "a", ttl).await;
    let sent = mono_ns();
    // Wait it out on the store's own clock.
    tokio::time::sleep(ttl * 2).await;
    assert!(mono_ns() - sent > 50_000_000);
    assert_eq!(store.renew(&a).await.expect("renew"), Renewal::Lost);
    assert_eq!(
        store.current_leader(&election("e")).await.expect("read"),
        None
    );
    // The row is still there, expired; a new holder takes it with a new token.
    let b = win(&store, "e", "b", TTL).await;
    assert!(b.token > a.token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_polls_changes_and_ends_after_a_permanent_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::builder(&path)
        .poll_interval(Duration::from_millis(20))
        .open()
        .await
        .expect("open");
    assert_eq!(
        store.info().watch,
        WatchMode::Poll(Duration::from_millis(20))
    );
    let e = election("e");
    let mut w = store.watch(&e).await.expect("watch");
    assert_eq!(next(&mut w).await.expect("an item").expect("ok"), None);
    let a = win(&store, "e", "a", TTL).await;
    let seen = next(&mut w).await.expect("an item").expect("ok");
    assert_eq!(seen.map(|l| (l.holder, l.token)), Some((a.holder, a.token)));
    // Garbage appears: the watch reports it and ends.
    let mut row = HandRow::live("e", "x", 1, TTL);
    row.metadata = Value::Text("not json".into());
    row.counter = Some(100);
    row.write(&raw(&path));
    let err = next(&mut w)
        .await
        .expect("an item")
        .expect_err("garbage is an error");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert!(next(&mut w).await.is_none(), "the watch ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_metadata_rewrites_only_the_metadata_and_never_a_garbage_row() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let a = win(&store, "e", "a", TTL).await;
    let columns = |conn: &rusqlite::Connection| -> (String, i64, i64, String) {
        conn.query_row(
            "SELECT holder, token, expires_at_ns, metadata FROM regent_lease WHERE election = 'e'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .expect("the row")
    };
    let before = columns(&raw(&path));
    let m = regent_core::Metadata::from_pairs([("addr", "10.0.0.1:80")]).expect("small");
    assert_eq!(
        store.update_metadata(&a, &m).await.expect("update"),
        Renewal::Renewed
    );
    let after = columns(&raw(&path));
    assert_eq!(
        (&after.0, after.1, after.2),
        (&before.0, before.1, before.2),
        "holder, token and expiry stay: an update is not a renewal"
    );
    assert_eq!(after.3, r#"{"addr":"10.0.0.1:80"}"#);

    let mut row = HandRow::live("e", "a", 1, TTL);
    row.metadata = Value::Text("[1, 2, 3]".to_owned());
    row.write(&raw(&path));
    let err = store.update_metadata(&a, &m).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert_eq!(
        columns(&raw(&path)).3,
        "[1, 2, 3]",
        "garbage stays as it was"
    );
}

/// Regression: processes that open a new file at the same time failed with
/// "database is locked" while switching it to WAL (SQLite answers that
/// switch SQLITE_BUSY without waiting on the busy timeout). Every opener
/// must succeed within its busy timeout.
#[test]
fn many_openers_of_a_new_file_all_succeed() {
    for round in 0..30 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
        let openers: Vec<_> = (0..6)
            .map(|_| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    barrier.wait();
                    rt.block_on(async { SqliteStore::open(&path).await.map(drop) })
                })
            })
            .collect();
        for opener in openers {
            if let Err(e) = opener.join().unwrap() {
                panic!(
                    "round {round}: an opener failed: {}",
                    regent_core::report(&e)
                );
            }
        }
    }
}
