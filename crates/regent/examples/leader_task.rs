//! A leader task with fencing and a graceful stop.
//!
//! ```text
//! cargo run -p regent-election --example leader_task -- [STORE_DB [OUTPUT [HOLDER_ID]]]
//! ```
//!
//! Start two or three, in different terminals. The leader appends a line to
//! OUTPUT (default: `regent-leader-task.log` in the temp dir) every 200 ms,
//! each with its term's fencing token. OUTPUT is the *fenced resource*: it
//! remembers the largest token it has accepted (in `OUTPUT.fence`, a
//! SQLite file, by `regent::sqlite::fence`) and refuses smaller ones, so a
//! leader that was paused past its lease (GC, SIGSTOP, swapping) cannot
//! write after its successor has.
//!
//! Ctrl-C or `kill` (SIGINT, SIGTERM) stops the leader's task, gives the
//! lease back, and another instance leads at once; `kill -9` costs a ttl
//! (3 s here) before another instance leads.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use regent::sqlite::rusqlite::{Connection, TransactionBehavior};
use regent::sqlite::{SqliteStore, fence};
use regent::{BoxError, Candidate, ElectionName, FencingToken, HolderId, Status, Supervisor};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let db = args
        .next()
        .map_or_else(|| temp("regent-examples.db"), PathBuf::from);
    let output = args
        .next()
        .map_or_else(|| temp("regent-leader-task.log"), PathBuf::from);
    let holder = args
        .next()
        .unwrap_or_else(|| regent::HolderId::host_pid().to_string());

    let candidate = Candidate::builder(
        SqliteStore::open(&db).await?,
        ElectionName::new("leader-task")?,
        HolderId::new(&holder)?,
    )
    // Short, so that a crash fails over quickly in a demo; the default
    // (10 s) suits most services.
    .ttl(Duration::from_secs(3))
    .build()?;
    let log = FencedLog::new(output);

    // Who leads, as this instance sees it (client-go's `OnNewLeader`).
    let mut status = candidate.status();
    let follow = tokio::spawn(async move {
        while status.changed().await.is_ok() {
            if let Status::Follower { leader: Some(l) } = &*status.borrow_and_update() {
                println!("following: {} (token {})", l.holder, l.token);
            }
        }
    });

    // One line for a graceful stop: on SIGINT or SIGTERM the task is
    // cancelled, gets its grace to return, and the lease is given back.
    let exit = Supervisor::new(candidate)
        .run_until(regent::shutdown_signal(), |leader| {
            let (log, holder) = (log.clone(), holder.clone());
            async move {
                let token = leader.token();
                println!("leading: token {token}");
                let mut tick = tokio::time::interval(Duration::from_millis(200));
                for seq in 1u64.. {
                    tokio::select! {
                        // Leadership ended (lost, shutdown): stop writing now.
                        () = leader.cancelled() => break,
                        _ = tick.tick() => {}
                    }
                    if let Err(e) = log.append(token, &format!("{holder} {seq}")) {
                        // Refused (a newer term has written: this one is
                        // over, whatever the lease says) or the file
                        // failed. The term ends with the error, and the
                        // supervisor campaigns again.
                        println!("stopped leading: token {token}: {e}");
                        return Err(e);
                    }
                }
                println!("stopped leading: token {token}");
                Ok::<_, BoxError>(())
            }
        })
        .await;
    follow.abort();
    println!("exit: {:?}", exit?);
    Ok(())
}

/// The fenced resource: an append-only file of `TOKEN LINE` lines that
/// refuses a write with a smaller token than one it has accepted.
///
/// A file has no transactions to check the token in, as a table does
/// (see `one_shot_job`): the largest token accepted is kept in a SQLite
/// file beside it, `OUTPUT.fence`, and the file's lock keeps one writer at
/// a time from the check to the append.
#[derive(Clone)]
struct FencedLog {
    path: PathBuf,
    fence: PathBuf,
}

impl FencedLog {
    fn new(path: PathBuf) -> Self {
        let mut fence = path.clone().into_os_string();
        fence.push(".fence");
        Self {
            path,
            fence: fence.into(),
        }
    }

    /// Appends `TOKEN LINE`, unless a larger token has been accepted.
    /// (Blocking calls of a few milliseconds at most; a resource across
    /// the network would have an async client.)
    fn append(&self, token: FencingToken, line: &str) -> Result<(), BoxError> {
        let mut log = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)?;
        // The check and the write under one lock: two processes that both
        // believe they lead cannot slip between them.
        log.lock()?;
        let mut seen = Connection::open(&self.fence)?;
        seen.busy_timeout(Duration::from_secs(5))?;
        let tx = seen.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // The fencing check: refused if a larger token has been accepted.
        fence::check_and_record(&tx, "leader-task-log", token)?;
        // Committed before the line is written, so that no line is ever
        // in the file under a token the fence has not kept.
        tx.commit()?;
        writeln!(log, "{token} {line}")?;
        Ok(())
        // The lock goes with `log`.
    }
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(name)
}
