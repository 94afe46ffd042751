//! A job that runs once across the fleet, however many instances start it.
//!
//! ```text
//! cargo run -p regent-election --example one_shot_job -- [STORE_DB [RESOURCE_DB [HOLDER_ID]]]
//! ```
//!
//! Start three at once: one runs the job, and all three exit when it is
//! done. With `ONE_SHOT_JOB_FAIL_ONCE=1` in its environment, an instance's
//! first attempt fails, and another instance runs the job instead.
//!
//! A supervisor's [`Restart`] policy is per instance: with `OnFailure`
//! alone, a job that succeeds ends only *its* instance's supervision, the
//! next instance to lead runs it again, and three instances run it three
//! times. "Done" must therefore live where every instance sees it: in the
//! resource the job writes (RESOURCE_DB here, a SQLite file), recorded
//! under the term's fencing token. Each instance that leads first asks the
//! resource whether the job is done, and if so it is done too; every write
//! of the job, "done" included, is refused once a larger token has been
//! seen, so a leader that was paused past its lease cannot complete the
//! job a second time. That check is `regent::sqlite::fence`'s, in each
//! write's own transaction.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regent::sqlite::rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};
use regent::sqlite::{SqliteStore, fence};
use regent::{
    BoxError, Candidate, ElectionName, FencingToken, HolderId, Restart, Supervisor, SupervisorExit,
};

const JOB: &str = "monthly-invoices";
const STEPS: u32 = 3;

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
    let resource = args
        .next()
        .map_or_else(|| temp("regent-one-shot-job.db"), PathBuf::from);
    let holder = args
        .next()
        .unwrap_or_else(|| regent::HolderId::host_pid().to_string());
    let mut fail_next = std::env::var_os("ONE_SHOT_JOB_FAIL_ONCE").is_some();

    let candidate = Candidate::builder(
        SqliteStore::open(&db).await?,
        ElectionName::new("one-shot-job")?,
        HolderId::new(&holder)?,
    )
    .ttl(Duration::from_secs(3))
    .build()?;

    let exit = Supervisor::new(candidate)
        // Campaign again after a failed attempt; a term that returns `Ok`
        // (the job done, by this instance or another) ends this instance.
        .restart(Restart::OnFailure)
        .run_until(regent::shutdown_signal(), |leader| {
            let fail = std::mem::take(&mut fail_next);
            let resource = resource.clone();
            async move {
                let token = leader.token();
                let mut jobs = Jobs::open(&resource)?;
                // First: is it done already, by anyone?
                if let Some(by) = jobs.begin(token)? {
                    println!("job already done by token {by}: token {token} has nothing to do");
                    return Ok(());
                }
                println!("job started: token {token}");
                if fail {
                    println!("job failed: token {token} (ONE_SHOT_JOB_FAIL_ONCE)");
                    return Err("the first attempt fails, as asked".into());
                }
                for step in 1..=STEPS {
                    tokio::select! {
                        () = leader.cancelled() => {
                            println!("job interrupted: token {token}");
                            return Err("leadership ended before the job was done".into());
                        }
                        () = tokio::time::sleep(Duration::from_millis(300)) => {}
                    }
                    jobs.step(token, step)?;
                    println!("job step {step}/{STEPS}: token {token}");
                }
                jobs.finish(token)?;
                println!("job done: token {token}");
                Ok::<_, BoxError>(())
            }
        })
        .await?;
    match exit {
        SupervisorExit::Finished(term) => println!(
            "exit: job done (this instance's last term: token {})",
            term.token
        ),
        _ => println!("exit: stopped before the job was done"),
    }
    Ok(())
}

/// The fenced resource: the job's record and its output in a SQLite file.
/// `done_by` is the token of the term that completed the job; the largest
/// token seen is the fence's (its table `regent_fence`, beside these).
///
/// (Blocking calls of a few milliseconds at most; a resource across the
/// network would have an async client.)
struct Jobs(Connection);

impl Jobs {
    fn open(path: &Path) -> Result<Self, BoxError> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS job (name TEXT PRIMARY KEY, done_by INTEGER);
             CREATE TABLE IF NOT EXISTS job_output (token INTEGER NOT NULL, step INTEGER NOT NULL);",
        )?;
        Ok(Self(conn))
    }

    /// Admits `token` to the resource and says who completed the job, if
    /// anyone has.
    fn begin(&mut self, token: FencingToken) -> Result<Option<i64>, BoxError> {
        let tx = self.fenced(token)?;
        let done_by = tx
            .query_row("SELECT done_by FROM job WHERE name = ?1", [JOB], |r| {
                r.get(0)
            })
            .optional()?
            .flatten();
        tx.commit()?;
        Ok(done_by)
    }

    /// Records one step of the job's work.
    fn step(&mut self, token: FencingToken, step: u32) -> Result<(), BoxError> {
        let tx = self.fenced(token)?;
        tx.execute(
            "INSERT INTO job_output (token, step) VALUES (?1, ?2)",
            (i64::try_from(token.get())?, step),
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Records "done by `token`".
    fn finish(&mut self, token: FencingToken) -> Result<(), BoxError> {
        let tx = self.fenced(token)?;
        tx.execute(
            "INSERT INTO job (name, done_by) VALUES (?1, ?2)
             ON CONFLICT (name) DO UPDATE SET done_by = excluded.done_by",
            (JOB, i64::try_from(token.get())?),
        )?;
        tx.commit()?;
        Ok(())
    }

    /// A transaction in which `token` may write: refused (and rolled
    /// back) if a larger token has been seen; otherwise `token` is now
    /// the largest seen, committed with the writes that follow. Immediate:
    /// it takes SQLite's write lock at once, so no other instance writes
    /// between the check and the commit.
    fn fenced(&mut self, token: FencingToken) -> Result<Transaction<'_>, BoxError> {
        let tx = self
            .0
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        // The fencing check.
        fence::check_and_record(&tx, JOB, token)?;
        Ok(tx)
    }
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(name)
}
