//! A scale measurement's own process: the harness runs itself again as
//! `regent-bench __scale-child …`, so that `/proc/self` (CPU, memory,
//! threads, bytes written) describes the candidates alone.
//!
//! The child opens the store ([`StoreSpec`]), builds one [`Candidate`] per
//! election on it (clones of one counted store, `counting.rs`, regent's default
//! timing) on a tokio runtime of 2 workers, and
//!
//! * **lead**: campaigns every candidate (all at once, or with `--spread`
//!   spread evenly over one renewal interval) and waits until each won;
//! * **hold**: the same, then prints `READY` and holds until killed, for
//!   followers to follow;
//! * **follow**: campaigns every candidate for the elections a holding
//!   child leads, and waits until each follows that leader (each then
//!   tries to acquire once per renewal interval and watches its election).
//!
//! Then it waits the warm-up (one renewal interval: everyone has renewed
//! or retried once), prints `WINDOW-START`, measures over the window, and
//! prints `WINDOW-END` (the harness reads the engine's own count at both
//! lines) and `RESULT {json}`: the operations by kind, renewals' times,
//! CPU time (the process's and the SQLite store thread's), resident memory
//! (and what the candidates added to it), the most threads seen (sampled
//! every 100 ms), bytes written, and how many candidates no longer lead
//! (follow) at the end.

use std::io::Write as _;
use std::time::{Duration, Instant};

use clap::Args;
use regent_core::{Candidate, ElectionName, HolderId, Leadership, LeaseStore, Status};
use regent_proc::usage;
use serde_json::json;

use crate::error::BenchError;
use crate::load::counting::{Counted, counted};
use crate::load::open::{Opened, StoreSpec};
use crate::load::result::{Role, TTL};

use crate::store::StoreKind;

/// The line a holding child prints once it leads every election.
pub(crate) const READY: &str = "READY";
/// The line a measuring child prints as its window opens.
pub(crate) const WINDOW_START: &str = "WINDOW-START";
/// The line a measuring child prints as its window closes.
pub(crate) const WINDOW_END: &str = "WINDOW-END";
/// The prefix of the line that carries a measurement, as JSON.
pub(crate) const RESULT: &str = "RESULT ";

/// The bound on every campaign being won (every follower following).
const ALL_LED_WITHIN: Duration = Duration::from_secs(300);

/// `__scale-child`'s arguments (written by `scale.rs`, never by hand).
#[derive(Debug, Clone, Args)]
pub(crate) struct ChildArgs {
    /// lead, hold or follow.
    #[arg(long, value_parser = parse_role)]
    pub(crate) role: Role,
    /// How many elections.
    #[arg(long)]
    pub(crate) elections: usize,
    /// Names the elections: `bench-scale-TAG-I` (a holding and a following
    /// child share it).
    #[arg(long)]
    pub(crate) tag: String,
    /// The measurement window, in milliseconds.
    #[arg(long)]
    pub(crate) window_ms: u64,
    /// The wait between the last win and the window, in milliseconds.
    #[arg(long)]
    pub(crate) warm_up_ms: u64,
    /// Spread the campaigns evenly over one renewal interval.
    #[arg(long)]
    pub(crate) spread: bool,
    /// The store (`StoreSpec::to_args`).
    #[arg(long, value_parser = parse_kind)]
    pub(crate) kind: StoreKind,
    /// The store's URL.
    #[arg(long)]
    pub(crate) url: String,
    /// SQLite's commit interval, in milliseconds.
    #[arg(long)]
    pub(crate) commit_interval_ms: Option<u64>,
    /// Where PostgreSQL's watches `LISTEN` (behind PgBouncer).
    #[arg(long)]
    pub(crate) listen_url: Option<String>,
    /// Azurite's Blob endpoint.
    #[arg(long)]
    pub(crate) azblob_endpoint: Option<String>,
}

fn parse_role(s: &str) -> Result<Role, String> {
    Role::parse(s).ok_or_else(|| format!("no role {s:?}"))
}

fn parse_kind(s: &str) -> Result<StoreKind, String> {
    StoreKind::parse(s).ok_or_else(|| format!("no store {s:?}"))
}

/// Runs the child; its exit status is 0 once it printed its result (or,
/// holding, when killed), 1 on an error, which it prints on stderr.
pub(crate) fn main(args: &ChildArgs) -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::console::note(&format!("scale child: a runtime: {e}"));
            return std::process::ExitCode::FAILURE;
        }
    };
    let spec = StoreSpec {
        kind: args.kind,
        url: args.url.clone(),
        commit_interval: args.commit_interval_ms.map(Duration::from_millis),
        listen_url: args.listen_url.clone(),
        azblob_endpoint: args.azblob_endpoint.clone(),
    };
    let done = runtime.block_on(async {
        match spec.open().await? {
            Opened::Memory(s) => child(args, counted(s)).await,
            Opened::Sqlite(s) => child(args, counted(s)).await,
            Opened::Boxed(s) => child(args, counted(s)).await,
        }
    });
    match done {
        Ok(()) => {
            let _ = std::io::stdout().flush();
            // Thousands of candidates' tasks need not be torn down one by
            // one: the measurement is out.
            std::process::exit(0)
        }
        Err(e) => {
            crate::console::note(&format!(
                "scale child ({} elections, {}): {e:?}",
                args.elections, args.role
            ));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Prints `line` on stdout at once: the harness times the engine's count
/// by it.
fn tell(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn failed(what: impl std::fmt::Display) -> BenchError {
    BenchError::Failed(what.to_string())
}

async fn child<S>(args: &ChildArgs, store: Counted<S>) -> Result<(), BenchError>
where
    S: LeaseStore + Clone + Send + Sync + 'static,
{
    let rss_before = usage::status_field("VmRSS:");
    let holder = std::process::id();
    let candidates = (0..args.elections)
        .map(|i| {
            let election =
                ElectionName::new(format!("bench-scale-{}-{i}", args.tag)).map_err(failed)?;
            let holder = HolderId::new(format!("{}-{holder}-{i}", args.role)).map_err(failed)?;
            Candidate::builder(store.clone(), election, holder)
                .ttl(TTL)
                .build()
                .map_err(failed)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    // The followers' campaigns, which never end while the holder lives:
    // aborted when the process ends.
    let mut campaigns = tokio::task::JoinSet::new();
    let leaderships = match args.role {
        Role::Lead | Role::Hold => win_all(&candidates, args.spread).await?,
        Role::Follow => {
            follow_all(&candidates, args.spread, &mut campaigns).await?;
            Vec::new()
        }
    };
    let won_in = started.elapsed();
    if args.role == Role::Hold {
        tell(READY);
        // Held until the harness kills this process: no release, the
        // leases expire.
        std::future::pending::<()>().await;
    }

    tokio::time::sleep(Duration::from_millis(args.warm_up_ms)).await;
    let counts = store.layer();
    let ops_before = counts.snapshot();
    let renewed_before = counts.renew_times();
    counts.take_renew_max();
    let cpu_before = usage::cpu_time();
    let store_cpu_before = usage::threads_cpu("regent-sqlite");
    let written_before = usage::write_bytes();
    let window = Duration::from_millis(args.window_ms);
    tell(WINDOW_START);
    let from = Instant::now();
    let mut threads = 0;
    while from.elapsed() < window {
        threads = threads.max(usage::status_field("Threads:"));
        tokio::time::sleep(Duration::from_millis(100).min(window)).await;
    }
    let window = from.elapsed();
    tell(WINDOW_END);
    let ops = counts.snapshot().minus(ops_before);
    let (renewed, renew_ns) = counts.renew_times();
    let (renewed, renew_ns) = (renewed - renewed_before.0, renew_ns - renewed_before.1);
    let renew_max_ns = counts.take_renew_max();
    let cpu = usage::cpu_time().saturating_sub(cpu_before);
    let store_cpu = usage::threads_cpu("regent-sqlite").saturating_sub(store_cpu_before);
    let written = usage::write_bytes()
        .zip(written_before)
        .map(|(after, before)| after.saturating_sub(before));
    let rss = usage::status_field("VmRSS:");
    threads = threads.max(usage::status_field("Threads:"));
    let lost = match args.role {
        Role::Follow => candidates
            .iter()
            .filter(|c| !follows(&c.status().borrow(), c.holder()))
            .count(),
        _ => leaderships.iter().filter(|l| l.check().is_err()).count(),
    };
    let result = json!({
        "won_in_s": won_in.as_secs_f64(),
        "window_s": window.as_secs_f64(),
        "ops": ops.to_json(),
        "renewed": renewed,
        "renew_ns": renew_ns,
        "renew_max_ns": renew_max_ns,
        "cpu_s": cpu.as_secs_f64(),
        "store_thread_cpu_s": store_cpu.as_secs_f64(),
        "written_bytes": written,
        "rss_kib": rss,
        "rss_added_kib": rss - rss_before,
        "threads": threads,
        "lost": lost,
    });
    tell(&format!("{RESULT}{result}"));
    if args.kind != StoreKind::Sqlite && args.kind != StoreKind::Memory {
        // Give a networked engine its leases back before the next size;
        // bounded, and after the measurement.
        let _ = tokio::time::timeout(
            Duration::from_secs(60),
            futures_util::future::join_all(leaderships.into_iter().map(Leadership::resign)),
        )
        .await;
    }
    Ok(())
}

/// When the `i`th of `n` candidates starts campaigning.
fn start_delay<S: LeaseStore>(c: &Candidate<S>, i: usize, n: usize, spread: bool) -> Duration {
    if spread {
        #[allow(clippy::cast_precision_loss)]
        c.timing().renew_every.mul_f64(i as f64 / n as f64)
    } else {
        Duration::ZERO
    }
}

/// Campaigns every candidate; their leaderships once all won.
async fn win_all<S>(
    candidates: &[Candidate<S>],
    spread: bool,
) -> Result<Vec<Leadership>, BenchError>
where
    S: LeaseStore + Clone + Send + Sync + 'static,
{
    let mut campaigns = tokio::task::JoinSet::new();
    for (i, c) in candidates.iter().enumerate() {
        let c = c.clone();
        let delay = start_delay(&c, i, candidates.len(), spread);
        campaigns.spawn(async move {
            tokio::time::sleep(delay).await;
            c.campaign().await
        });
    }
    let mut leaderships = Vec::with_capacity(candidates.len());
    let by = tokio::time::Instant::now() + ALL_LED_WITHIN;
    while let Some(joined) = tokio::time::timeout_at(by, campaigns.join_next())
        .await
        .map_err(|_| {
            failed(format!(
                "{} elections not all led within {ALL_LED_WITHIN:?}",
                candidates.len()
            ))
        })?
    {
        let leadership = joined
            .map_err(|e| failed(format!("a campaign panicked: {e}")))?
            .map_err(|e| failed(format!("a campaign failed: {e}")))?;
        leaderships.push(leadership);
    }
    Ok(leaderships)
}

/// Campaigns every candidate in `campaigns` (none wins while the holder
/// lives) and waits until each follows its election's leader.
async fn follow_all<S>(
    candidates: &[Candidate<S>],
    spread: bool,
    campaigns: &mut tokio::task::JoinSet<Result<Leadership, regent_core::CampaignError>>,
) -> Result<(), BenchError>
where
    S: LeaseStore + Clone + Send + Sync + 'static,
{
    for (i, c) in candidates.iter().enumerate() {
        let c = c.clone();
        let delay = start_delay(&c, i, candidates.len(), spread);
        campaigns.spawn(async move {
            tokio::time::sleep(delay).await;
            c.campaign().await
        });
    }
    let by = tokio::time::Instant::now() + ALL_LED_WITHIN;
    for c in candidates {
        let me = c.holder().clone();
        tokio::time::timeout_at(by, c.status().wait_for(|s| follows(s, &me)))
            .await
            .map_err(|_| {
                failed(format!(
                    "the followers did not all see their leaders within {ALL_LED_WITHIN:?}"
                ))
            })?
            .map_err(|e| failed(format!("status: {e}")))?;
    }
    Ok(())
}

/// Whether `status` follows a leader other than `me`.
fn follows(status: &Status, me: &HolderId) -> bool {
    matches!(status, Status::Follower { leader: Some(l) } if &l.holder != me)
}
