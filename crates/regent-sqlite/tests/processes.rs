//! Several processes race for elections in one file. The test binary runs
//! itself again as the child processes: [`child_process`] does nothing
//! unless the environment names a database.

mod common;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use regent_core::{Acquire, LeaseStore};
use regent_sqlite::SqliteStore;

use common::{election, mono_ns, req};

const ENV_DB: &str = "REGENT_SQLITE_TEST_CHILD_DB";
const ENV_NAME: &str = "REGENT_SQLITE_TEST_CHILD_NAME";
const ENV_START: &str = "REGENT_SQLITE_TEST_CHILD_START_NS";
const CHILDREN: usize = 8;
/// Long enough that no lease of the test expires while it runs: every
/// outcome is decided by the store's compare-and-set, not by timing.
const TTL: Duration = Duration::from_secs(60);

/// The child's part; a no-op in the parent's own test run.
#[test]
fn child_process() {
    let Ok(db) = std::env::var(ENV_DB) else {
        return;
    };
    let name = std::env::var(ENV_NAME).expect("the parent names the child");
    let start: i64 = std::env::var(ENV_START)
        .expect("the parent sets the start")
        .parse()
        .expect("a number");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(child(db, name, start));
}

async fn child(db: String, name: String, start_ns: i64) {
    // Every child opens the (not yet existing) file at once: creating the
    // schema races too.
    let store = SqliteStore::open(&db).await.expect("open the store");
    // One start instant for all, on the host's monotonic clock: the clock
    // every process shares.
    let wait = start_ns - mono_ns();
    if wait > 0 {
        tokio::time::sleep(Duration::from_nanos(wait.unsigned_abs())).await;
    }

    // Round 1: one try each at one election.
    match store
        .try_acquire(&req(&election("first"), &name, TTL), None)
        .await
        .expect("acquire")
    {
        Acquire::Won(l) => println!("REGENT first won {name} {}", l.token),
        Acquire::Held {
            leader: Some(l), ..
        } => println!("REGENT first held {} {}", l.holder, l.token),
        Acquire::Held { leader: None, .. } => panic!("Held without a leader"),
    }

    // Round 2: every child takes one term of another election, then lets go.
    let terms = election("terms");
    let give_up = mono_ns() + 20_000_000_000;
    loop {
        match store
            .try_acquire(&req(&terms, &name, TTL), None)
            .await
            .expect("acquire")
        {
            Acquire::Won(lease) => {
                let began = mono_ns();
                tokio::time::sleep(Duration::from_millis(20)).await;
                let ended = mono_ns();
                store.release(&lease).await.expect("release");
                println!("REGENT term {} {began} {ended} {name}", lease.token);
                return;
            }
            Acquire::Held { .. } => {
                assert!(mono_ns() < give_up, "{name} never won a term");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
}

#[derive(Debug)]
struct Term {
    token: u64,
    began: i64,
    ended: i64,
    holder: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_race_for_one_election_and_tokens_grow_across_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("regent.db");
    let exe = std::env::current_exe().expect("the test binary");
    let start = mono_ns() + 300_000_000;
    let children: Vec<_> = (0..CHILDREN)
        .map(|i| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "child_process",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(ENV_DB, &db)
                .env(ENV_NAME, format!("proc-{i}"))
                .env(ENV_START, start.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a child process")
        })
        .collect();
    let mut lines = Vec::new();
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .expect("join")
            .expect("wait for a child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a child failed: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        lines.extend(
            stdout
                .lines()
                // libtest may print "test child_process ... " before the
                // first line on the same line.
                .filter_map(|l| l.find("REGENT ").map(|i| l[i + 7..].to_owned())),
        );
    }

    // Round 1: exactly one winner, and everyone else saw it lead.
    let first: Vec<Vec<&str>> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("first "))
        .map(|l| l.split(' ').collect())
        .collect();
    assert_eq!(first.len(), CHILDREN, "{lines:#?}");
    let winners: Vec<_> = first.iter().filter(|f| f[0] == "won").collect();
    assert_eq!(winners.len(), 1, "one winner: {lines:#?}");
    let (winner, token) = (winners[0][1], winners[0][2]);
    for f in first.iter().filter(|f| f[0] == "held") {
        assert_eq!((f[1], f[2]), (winner, token), "{lines:#?}");
    }

    // Round 2: each process led once; in token order, each term ended
    // before the next began (on the clock all processes share), and the
    // tokens grew from process to process.
    let mut terms: Vec<Term> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("term "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Term {
                token: f[0].parse().expect("token"),
                began: f[1].parse().expect("began"),
                ended: f[2].parse().expect("ended"),
                holder: f[3].to_owned(),
            }
        })
        .collect();
    assert_eq!(terms.len(), CHILDREN, "{lines:#?}");
    terms.sort_by_key(|t| t.token);
    let holders: HashSet<_> = terms.iter().map(|t| &t.holder).collect();
    assert_eq!(holders.len(), CHILDREN, "{terms:#?}");
    for pair in terms.windows(2) {
        assert!(pair[0].token < pair[1].token, "{terms:#?}");
        assert!(
            pair[0].ended < pair[1].began,
            "two processes led at once: {terms:#?}"
        );
    }

    // The file remembers: a later process continues the sequence.
    let store = SqliteStore::open(&db).await.expect("reopen");
    let Acquire::Won(next) = store
        .try_acquire(&req(&election("terms"), "parent", TTL), None)
        .await
        .expect("acquire")
    else {
        panic!("every child released its term")
    };
    assert!(next.token.get() > terms[CHILDREN - 1].token, "{next:?}");
}
