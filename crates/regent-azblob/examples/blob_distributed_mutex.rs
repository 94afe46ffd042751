//! The Leader Election pattern's reference sample, in Rust, with regent:
//! instances of one program race for the lease on the blob
//! `leases/MyLeaderCoordinatorTask`, and only the one holding it runs the
//! coordinator task, which here prints its fencing token every second.
//!
//! ```text
//! # Azurite on its default port (UseDevelopmentStorage=true), two terminals:
//! cargo run -p regent-azblob --example blob_distributed_mutex
//! cargo run -p regent-azblob --example blob_distributed_mutex
//! # Ctrl-C in the leader's terminal: the other takes over within a retry
//! # interval (3 s), with a larger token.
//! ```
//!
//! # The sample's names in regent
//!
//! As in the table of the crate docs (`regent_azblob`, "The reference
//! sample, mapped"):
//!
//! | the sample | here |
//! | --- | --- |
//! | `BlobSettings` (account, container, blob) | [`BlobSettings`]: a [`StorageAccount`] from `AZURE_STORAGE_CONNECTION_STRING`, the container `leases`, the blob `MyLeaderCoordinatorTask`, given to [`AzblobStore::builder`]`(account, "leases").blob("MyLeaderCoordinatorTask")` |
//! | `BlobLeaseManager` (acquire, renew, release) | [`AzblobStore`], the `LeaseStore` whose `try_acquire`, `renew` and `release` the candidate calls |
//! | `BlobDistributedMutex` | [`BlobDistributedMutex`]: a [`Supervisor`] over a [`Candidate`] |
//! | `RunTaskWhenMutexAcquired(token)` | [`BlobDistributedMutex::run_task_when_mutex_acquired`], over [`Supervisor::run`]: the task gets a [`LeaderContext`] with the term's cancellation and fencing token |
//! | `TryAcquireLeaseOrWait` | the campaign of [`Candidate::campaign`]: try, then again every `retry_every` (ttl/5, 3 s), with backoff while the service fails |
//! | `KeepRenewingLease` | the candidate's renewal every `renew_every` (ttl/5, 3 s), stepping down at `renew_deadline` (3·ttl/5, 9 s) without a renewal, whatever the requests are doing |
//! | `CancelAllWhenAnyCompletes` | the supervisor: a lost lease cancels the task, a finished task resigns the lease, and a silent task (no heartbeat for [`HEALTH_TIMEOUT`]) steps down; [`Candidate::shutdown`] releases the lease |
//!
//! # Usage
//!
//! `blob_distributed_mutex [--container NAME] [--holder ID] [--for DURATION]`
//!
//! * `AZURE_STORAGE_CONNECTION_STRING`: the storage account, as the Azure
//!   SDKs and `az` read it; `UseDevelopmentStorage=true` (Azurite on
//!   `127.0.0.1:10000`) when unset.
//! * `--container NAME`: the container of the lease blob (`leases`).
//! * `--holder ID`: this instance's name in the lease record
//!   (`node-PID`).
//! * `--for DURATION`: stop after `DURATION` (`90s`, `1m30s`, `250ms`) as
//!   on SIGTERM; runs until stopped without it.
//!
//! Standard output: `HOLDER: campaigning for CONTAINER/BLOB` at the start,
//! `HOLDER: leading with fencing token TOKEN` every second of every term,
//! `HOLDER: stopped` at the end. regent's own log (terms won and lost) goes
//! to standard error, filtered by `RUST_LOG` (`info`).
//!
//! The first Ctrl-C or SIGTERM stops gracefully: the task is cancelled and
//! the lease released, so another instance takes over at its next try;
//! a second one exits at once, leaving the lease to expire.
//!
//! Exit codes: 0 after a graceful stop; 1 on an error retrying cannot fix
//! (settings, credentials, a blob regent did not write); 2 for bad
//! arguments; 130 on the second signal.

use std::future::Future;
use std::io::IsTerminal as _;
use std::time::Duration;

use anyhow::Context as _;
use regent_azblob::{AzblobStore, StorageAccount};
use regent_core::{
    Candidate, ElectionName, HolderId, LeaderContext, Restart, Supervisor, SupervisorExit,
};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// The sample's container.
const CONTAINER: &str = "leases";

/// The sample's blob, and the election's name.
const BLOB: &str = "MyLeaderCoordinatorTask";

/// The lease's ttl: the shortest the Blob service grants, so that a crashed
/// leader's lease is free soonest.
const TTL: Duration = Duration::from_secs(15);

/// How long the coordinator task may go without a heartbeat (it beats every
/// second) before its leader steps down: a hung task gives the lease up.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the lease lives: the storage account, the container and the blob.
struct BlobSettings {
    account: StorageAccount,
    container: String,
    blob: String,
}

impl BlobSettings {
    /// The account of `AZURE_STORAGE_CONNECTION_STRING` (the development
    /// storage when unset), `container`, and the sample's blob.
    fn from_env(container: String) -> anyhow::Result<Self> {
        let connection = std::env::var("AZURE_STORAGE_CONNECTION_STRING")
            .unwrap_or_else(|_| "UseDevelopmentStorage=true".to_owned());
        let account = StorageAccount::from_connection_string(&connection)
            .context("AZURE_STORAGE_CONNECTION_STRING")?;
        Ok(Self {
            account,
            container,
            blob: BLOB.to_owned(),
        })
    }
}

/// Runs a task only while this instance holds the blob's lease.
struct BlobDistributedMutex<F> {
    supervisor: Supervisor<Candidate<AzblobStore>>,
    task: F,
}

impl<F, Fut> BlobDistributedMutex<F>
where
    F: FnMut(LeaderContext) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    /// A mutex on `settings`' blob for `holder`; `task` runs on every term.
    fn new(settings: BlobSettings, holder: HolderId, task: F) -> anyhow::Result<Self> {
        let store = AzblobStore::builder(settings.account, settings.container)
            .blob(settings.blob.clone())
            .build()?;
        let candidate = Candidate::builder(store, ElectionName::new(&settings.blob)?, holder)
            .ttl(TTL)
            .build()?;
        let supervisor = Supervisor::new(candidate)
            .restart(Restart::Always)
            .health_timeout(HEALTH_TIMEOUT)?;
        Ok(Self { supervisor, task })
    }

    /// Campaigns, runs the task while leading and campaigns again after
    /// each term, until `cancel` fires: then the task is cancelled, the
    /// lease released, and this returns.
    ///
    /// # Errors
    ///
    /// A store error that retrying cannot fix (credentials, a blob that is
    /// not regent's record); the lease is released first.
    async fn run_task_when_mutex_acquired(
        &mut self,
        cancel: CancellationToken,
    ) -> anyhow::Result<()> {
        let candidate = self.supervisor.candidate().clone();
        let run = self.supervisor.run(&mut self.task);
        tokio::pin!(run);
        let exit = tokio::select! {
            exit = &mut run => {
                candidate.shutdown().await;
                exit
            }
            () = cancel.cancelled() => {
                // The supervisor must go on while the candidate shuts down:
                // it ends the term, lets the task stop, and only then is
                // the lease released.
                let (exit, ()) = tokio::join!(&mut run, candidate.shutdown());
                exit
            }
        };
        match exit.context("campaign")? {
            SupervisorExit::Shutdown => Ok(()),
            other => anyhow::bail!("supervision ended unexpectedly: {other:?}"),
        }
    }
}

/// The coordinator: prints the term's fencing token every second until
/// leadership ends. A real one passes the token with every write.
async fn coordinate(ctx: LeaderContext, holder: HolderId) -> anyhow::Result<()> {
    let mut every_second = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            () = ctx.cancelled() => return Ok(()),
            _ = every_second.tick() => {
                ctx.heartbeat().beat();
                println!("{holder}: leading with fencing token {}", ctx.token());
            }
        }
    }
}

/// The command line.
struct Args {
    container: String,
    holder: HolderId,
    run_for: Option<Duration>,
}

const USAGE: &str =
    "usage: blob_distributed_mutex [--container NAME] [--holder ID] [--for DURATION]";

impl Args {
    fn parse(mut args: impl Iterator<Item = String>) -> anyhow::Result<Self> {
        let mut container = CONTAINER.to_owned();
        let mut holder = None;
        let mut run_for = None;
        while let Some(flag) = args.next() {
            let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--container" => container = value()?,
                "--holder" => holder = Some(HolderId::new(value()?).context("--holder")?),
                "--for" => {
                    let text = value()?;
                    let d: jiff::SignedDuration = text
                        .parse()
                        .with_context(|| format!("--for {text}: not a duration (90s, 1m30s)"))?;
                    run_for = Some(
                        Duration::try_from(d)
                            .with_context(|| format!("--for {text}: a negative duration"))?,
                    );
                }
                other => anyhow::bail!("unknown argument '{other}'"),
            }
        }
        let holder = match holder {
            Some(h) => h,
            None => HolderId::new(format!("node-{}", std::process::id()))?,
        };
        Ok(Self {
            container,
            holder,
            run_for,
        })
    }
}

/// Cancels `stop` on the first SIGINT or SIGTERM, or once `run_for` has
/// passed; exits at once (130) on a second signal.
async fn stop_on_signal(
    stop: CancellationToken,
    mut interrupt: Signal,
    mut terminate: Signal,
    run_for: Option<Duration>,
) {
    let deadline = async {
        match run_for {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
        () = deadline => {}
    }
    stop.cancel();
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    eprintln!("second signal: exiting at once; the lease expires by its ttl");
    std::process::exit(130);
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e:#}\n{USAGE}");
            std::process::exit(2);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();

    // Installed before the lease is sought, so that no signal is missed.
    let interrupt = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    let terminate = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let stop = CancellationToken::new();
    let signals = tokio::spawn(stop_on_signal(
        stop.clone(),
        interrupt,
        terminate,
        args.run_for,
    ));

    let settings = BlobSettings::from_env(args.container)?;
    let place = format!("{}/{}", settings.container, settings.blob);
    let holder = args.holder;
    println!("{holder}: campaigning for {place}");
    let task_holder = holder.clone();
    let mut mutex = BlobDistributedMutex::new(settings, holder.clone(), move |ctx| {
        coordinate(ctx, task_holder.clone())
    })?;
    let result = mutex.run_task_when_mutex_acquired(stop.clone()).await;
    signals.abort();
    let _aborted = signals.await;
    result?;
    println!("{holder}: stopped");
    Ok(())
}
