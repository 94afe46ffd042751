//! A store that cannot be used: a clear message, the documented exit code,
//! never a panic, and never a silent takeover of a file that is not ours.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn directory_that_does_not_exist_is_a_usage_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let store = format!("sqlite:{}", missing.join("e.db").display());
    for args in [
        vec!["status", "--store", &store, "--election", "e"],
        vec!["run", "--store", &store, "--election", "e", "--", "true"],
    ] {
        let out = run_bounded(&args, Duration::from_secs(15));
        no_panic(&out);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("'{}' does not exist", missing.display())),
            "{args:?}: the message does not name the missing directory:\n{}",
            out.stderr
        );
        assert!(!missing.exists(), "regent created {}", missing.display());
    }
}

#[test]
fn file_of_random_bytes_is_reported_as_not_a_database_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    // Not random but as good: no SQLite header, no structure.
    let junk: Vec<u8> = (0..16_384u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&path, &junk).unwrap();
    let store = format!("sqlite:{}", path.display());
    for args in [
        vec!["status", "--store", &store, "--election", "e", "--json"],
        vec!["watch", "--store", &store, "--election", "e"],
        vec![
            "run",
            "--store",
            &store,
            "--election",
            "e",
            "--ttl",
            "2s",
            "--",
            "true",
        ],
    ] {
        let out = run_bounded(&args, Duration::from_secs(15));
        no_panic(&out);
        assert_eq!(out.code, Some(1), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("not a SQLite database"),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains(&path.display().to_string()));
        assert!(out.stdout.is_empty(), "{args:?} printed {:?}", out.stdout);
    }
    assert_eq!(std::fs::read(&path).unwrap(), junk, "the file was modified");
}

#[test]
fn sqlite_database_of_another_application_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('x');")
        .unwrap();
    let store = format!("sqlite:{}", path.display());
    let out = run_bounded(
        &["status", "--store", &store, "--election", "e"],
        Duration::from_secs(15),
    );
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("not a regent store"), "{}", out.stderr);
}

/// Another connection holds an exclusive lock (rollback journal mode, so
/// that it blocks readers too): regent retries for the start window, then
/// exits 3. `REGENT_START_RETRY` shortens the 10 s window.
///
/// Also pins a regression: the retry warnings carried ANSI colour codes into
/// a stderr that is not a terminal.
#[test]
fn locked_database_is_unavailable_exit_3_after_retries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE other (x INTEGER)")
        .unwrap();
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
        .unwrap();
    tx.execute("INSERT INTO other VALUES (1)", []).unwrap();
    let store = format!("sqlite:{}", path.display());
    assert_unavailable_at_start(&store, &["unavailable", "locked"]);
    tx.rollback().unwrap();
}
