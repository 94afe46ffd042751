//! Many elections in one process on one [`SqliteStore`]: what they cost in
//! CPU, memory, threads and bytes written to disk (issue 12).
//!
//! ```text
//! cargo bench -p regent-sqlite --bench scale -- [--elections 1000,10000] [--window 30s] [--followers] [--memory] [--spread] [--commit-interval 20ms] [--short]
//! ```
//!
//! Every measurement runs in a child process of its own (the bench runs
//! itself again), so that `/proc/self` describes that measurement alone.
//!
//! **Leaders** (always): the child opens one [`SqliteStore`] in a
//! temporary directory (under `REGENT_SCALE_DIR` if set, else the system's
//! temporary directory: it must be on a real disk for the bytes written to
//! mean anything), builds `N` [`Candidate`]s on it (clones of the one
//! store), each for an election of its own with the default ttl (10 s: a
//! renewal every 2 s), on a tokio multi-thread runtime with 2 workers, and
//! campaigns all of them at once; each wins.
//!
//! **Followers** (`--followers`): another process wins the `N` elections
//! and keeps them; the measured child builds `N` candidates of its own for
//! the same elections, which follow those leaders: each tries to acquire
//! once per renewal interval (the candidates' safety net) and watches its
//! election through the store's shared poll.
//!
//! Then the child waits one renewal interval (warm-up), and reads over the
//! measurement window (default 30 s): CPU time (`utime + stime` of
//! `/proc/self/stat`, and of the store's connection thread alone), bytes
//! written to the storage layer (`write_bytes` of `/proc/self/io`), store
//! calls made (and how long renewals took); at its end the resident memory
//! (`VmRSS`) and the threads (`Threads` of `/proc/self/status`, sampled
//! every 100 ms: the most seen). Last it checks that every leader still
//! leads (every follower still follows its leader): otherwise the bench
//! fails (exit status 1), so that a store that drops renewals cannot pass
//! for a fast one.
//!
//! `--memory` adds, for each count, leaders on regent's in-memory store
//! (`MemoryStore`) instead of SQLite: the floor, what the candidates
//! themselves cost (their tasks and timers), to set the store's share
//! apart.
//!
//! `--commit-interval D` opens the stores with that
//! [`commit_interval`](regent_sqlite::SqliteStoreBuilder::commit_interval)
//! instead of the default.
//!
//! `--spread` starts the campaigns spread evenly over one renewal interval
//! rather than all at once, so that renewals (and a follower's retries) do
//! not come in bursts: what a process that has run for a while sees, and
//! the harder case for group commits.
//!
//! `--short` (100 elections, a 3 s window, no warm-up) is the smoke run of
//! `scripts/test`, which builds the bench in the test profile (`cargo test
//! --bench scale -- --short`). Its numbers mean nothing; that it runs, and
//! that every leader still leads, does. The counts and the window may also be
//! set with `REGENT_SCALE_ELECTIONS` and `REGENT_SCALE_WINDOW_SECS`.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use regent_core::memory::MemoryStore;
use regent_core::{
    Acquire, AcquireRequest, Candidate, ElectionName, HolderId, LeaderInfo, LeaderStream, Lease,
    LeaseStore, Renewal, Status, StoreError, StoreInfo,
};
use regent_sqlite::SqliteStore;

/// The argument that makes the bench a child: `--child ROLE N WINDOW_MS
/// WARM_UP_MS DIR SPREAD COMMIT_INTERVAL_MS`.
const CHILD: &str = "--child";
/// How a child hands its numbers to the parent: one line with this prefix.
const RESULT: &str = "REGENT-SCALE";
/// What a holding child prints once it leads every election.
const READY: &str = "REGENT-SCALE-READY";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == CHILD) {
        let role = args.get(i + 1).and_then(|r| Role::parse(r));
        let num = |j: usize| args.get(i + j).and_then(|s| s.parse::<u64>().ok());
        let dir = args.get(i + 5).map(PathBuf::from);
        let spread = args.get(i + 6).map(|s| s == "spread");
        let commit_interval = args.get(i + 7).map(|s| s.parse::<u64>().ok());
        let (Some(role), Some(n), Some(window), Some(warm_up), Some(dir), Some(spread)) =
            (role, num(2), num(3), num(4), dir, spread)
        else {
            eprintln!(
                "usage: {CHILD} lead|hold|follow|memory ELECTIONS WINDOW_MS WARM_UP_MS DIR spread|burst [COMMIT_INTERVAL_MS]"
            );
            return ExitCode::from(2);
        };
        let run = Run {
            role,
            n,
            window: Duration::from_millis(window),
            warm_up: Duration::from_millis(warm_up),
            db: dir.join("regent.db"),
            spread,
            commit_interval: commit_interval.flatten().map(Duration::from_millis),
        };
        return child(&run);
    }
    match Plan::parse(&args) {
        Ok(plan) => parent(&plan),
        Err(e) => {
            eprintln!("scale bench: {e}");
            eprintln!(
                "usage: scale [--elections N[,N...]] [--window DURATION (30s, 500ms)] [--followers] [--memory] [--spread] [--commit-interval DURATION] [--short]"
            );
            ExitCode::from(2)
        }
    }
}

/// What a child does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Leads `N` elections, and is measured.
    Lead,
    /// Leads `N` elections until its stdin closes, for followers to follow.
    Hold,
    /// Follows the `N` leaders of a holding child, and is measured.
    Follow,
    /// Leads `N` elections on the in-memory store, and is measured.
    LeadMemory,
}

impl Role {
    fn parse(s: &str) -> Option<Role> {
        match s {
            "lead" => Some(Role::Lead),
            "hold" => Some(Role::Hold),
            "follow" => Some(Role::Follow),
            "memory" => Some(Role::LeadMemory),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Role::Lead => "lead",
            Role::Hold => "hold",
            Role::Follow => "follow",
            Role::LeadMemory => "memory",
        }
    }
}

// ---------------------------------------------------------------- parent

struct Plan {
    counts: Vec<u64>,
    window: Duration,
    warm_up: Duration,
    followers: bool,
    memory: bool,
    spread: bool,
    commit_interval: Option<Duration>,
}

impl Plan {
    fn parse(args: &[String]) -> Result<Plan, String> {
        let mut plan = Plan {
            counts: vec![1_000, 10_000],
            window: Duration::from_secs(30),
            // One renewal interval of the default ttl: every candidate has
            // renewed (or retried) once before the window opens.
            warm_up: Duration::from_secs(2),
            followers: false,
            memory: false,
            spread: false,
            commit_interval: None,
        };
        if let Ok(v) = std::env::var("REGENT_SCALE_ELECTIONS") {
            plan.counts = counts(&v)?;
        }
        if let Ok(v) = std::env::var("REGENT_SCALE_WINDOW_SECS") {
            let secs: u64 = v
                .parse()
                .map_err(|_| format!("REGENT_SCALE_WINDOW_SECS={v:?} is not whole seconds"))?;
            plan.window = Duration::from_secs(secs);
        }
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--short" => {
                    plan.counts = vec![100];
                    plan.window = Duration::from_secs(3);
                    plan.warm_up = Duration::ZERO;
                }
                "--elections" => {
                    plan.counts = counts(it.next().ok_or("--elections needs a value")?)?;
                }
                "--window" => {
                    plan.window = duration(it.next().ok_or("--window needs a value")?)?;
                }
                "--followers" => plan.followers = true,
                "--memory" => plan.memory = true,
                "--spread" => plan.spread = true,
                "--commit-interval" => {
                    let d = it.next().ok_or("--commit-interval needs a value")?;
                    plan.commit_interval = Some(duration(d)?);
                }
                // What `cargo bench` passes to every bench.
                "--bench" => {}
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if plan.window.is_zero() {
            return Err("the window must be longer than zero".into());
        }
        Ok(plan)
    }
}

fn counts(s: &str) -> Result<Vec<u64>, String> {
    s.split(',')
        .map(|n| match n.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{n:?} is not a count of elections")),
        })
        .collect()
}

fn duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration such as 30s or 500ms");
    if let Some(ms) = s.strip_suffix("ms") {
        return ms.parse().map(Duration::from_millis).map_err(|_| bad());
    }
    if let Some(secs) = s.strip_suffix('s') {
        return secs.parse().map(Duration::from_secs).map_err(|_| bad());
    }
    Err(bad())
}

/// One measurement's numbers, as its child printed them.
struct Row {
    role: Role,
    elections: u64,
    fields: Vec<(String, f64)>,
}

impl Row {
    fn get(&self, key: &str) -> f64 {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map_or(f64::NAN, |(_, v)| *v)
    }
}

fn parent(plan: &Plan) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("scale bench: cannot find its own executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut rows = Vec::new();
    let mut failed = false;
    let mut roles = vec![Role::Lead];
    if plan.followers {
        roles.push(Role::Follow);
    }
    if plan.memory {
        roles.push(Role::LeadMemory);
    }
    for &n in &plan.counts {
        for &role in &roles {
            eprintln!(
                "scale bench: {n} elections ({}), {:?} warm-up, {:?} window",
                role.name(),
                plan.warm_up,
                plan.window
            );
            match measure_in_child(&exe, plan, role, n) {
                Ok(row) => {
                    failed |= row.get("ok") != n as f64;
                    rows.push(row);
                }
                Err(e) => {
                    eprintln!("scale bench: {n} elections ({}): {e}", role.name());
                    failed = true;
                }
            }
        }
    }
    print!("{}", table(&rows));
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn temp_dir() -> std::io::Result<tempfile::TempDir> {
    match std::env::var_os("REGENT_SCALE_DIR") {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
}

fn spawn(exe: &Path, role: Role, n: u64, plan: &Plan, dir: &Path) -> std::io::Result<Child> {
    Command::new(exe)
        .args([CHILD, role.name(), &n.to_string()])
        .arg(plan.window.as_millis().to_string())
        .arg(plan.warm_up.as_millis().to_string())
        .arg(dir)
        .arg(if plan.spread { "spread" } else { "burst" })
        .args(plan.commit_interval.map(|d| d.as_millis().to_string()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
}

/// Runs the measured child of `role` (with a holding child first, for
/// followers) and returns its numbers.
fn measure_in_child(exe: &Path, plan: &Plan, role: Role, n: u64) -> Result<Row, String> {
    let dir = temp_dir().map_err(|e| format!("temp dir: {e}"))?;
    let holder = if role == Role::Follow {
        let mut holder =
            spawn(exe, Role::Hold, n, plan, dir.path()).map_err(|e| format!("spawn: {e}"))?;
        let out = holder.stdout.take().expect("piped");
        let ready = BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .any(|l| l == READY);
        if !ready {
            let _ = holder.wait();
            return Err("the holding process did not win every election".into());
        }
        Some(holder)
    } else {
        None
    };
    let measured = spawn(exe, role, n, plan, dir.path()).map_err(|e| format!("spawn: {e}"))?;
    let out = measured
        .wait_with_output()
        .map_err(|e| format!("wait: {e}"))?;
    if let Some(mut holder) = holder {
        // Its stdin closes: it ends.
        drop(holder.stdin.take());
        let _ = holder.wait();
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(RESULT))
        .ok_or_else(|| format!("the child reported nothing ({})", out.status))?;
    if !out.status.success() {
        eprintln!("scale bench: the child failed: {}", out.status);
    }
    Ok(Row {
        role,
        elections: n,
        fields: line
            .split_whitespace()
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k.to_owned(), v.parse().ok()?))
            })
            .collect(),
    })
}

fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{:>9} {:>6} {:>6} {:>8} {:>8} {:>8} {:>7} {:>7} {:>10} {:>11} {:>8} {:>9} {:>9} {:>6}",
        "elections",
        "role",
        "cpu %",
        "cpu%/1k",
        "store %",
        "rss MiB",
        "MiB/1k",
        "threads",
        "written/s",
        "wr/s per 1k",
        "ops/s",
        "renew avg",
        "renew max",
        "ok",
    );
    for r in rows {
        let per_k = r.elections as f64 / 1_000.0;
        let cpu = r.get("cpu_pct");
        let rss = r.get("rss_kib") / 1024.0;
        let written = r.get("write_bytes_per_s");
        let renew = |key: &str, precision: usize| match r.role {
            Role::Follow => "-".to_owned(),
            _ => format!("{:.precision$}ms", r.get(key)),
        };
        let fsync = |b: f64| match r.role {
            Role::LeadMemory => "-".to_owned(),
            _ => bytes(b),
        };
        let _ = writeln!(
            out,
            "{:>9} {:>6} {:>6.1} {:>8.2} {:>8.1} {:>8.1} {:>7.2} {:>7} {:>10} {:>11} {:>8.0} {:>9} {:>9} {:>6}",
            r.elections,
            r.role.name(),
            cpu,
            cpu / per_k,
            r.get("store_thread_cpu_pct"),
            rss,
            rss / per_k,
            r.get("threads_max"),
            fsync(written),
            fsync(written / per_k),
            r.get("ops_per_s"),
            renew("renew_avg_ms", 1),
            renew("renew_max_ms", 0),
            r.get("ok"),
        );
    }
    out
}

fn bytes(b: f64) -> String {
    if !b.is_finite() {
        return "?".into();
    }
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

// ---------------------------------------------------------------- child

/// One child's task.
struct Run {
    role: Role,
    n: u64,
    window: Duration,
    warm_up: Duration,
    db: PathBuf,
    /// Start the campaigns spread over one renewal interval.
    spread: bool,
    commit_interval: Option<Duration>,
}

/// Opens the store as the run says.
async fn open(run: &Run) -> Result<SqliteStore, String> {
    let mut builder = SqliteStore::builder(&run.db);
    if let Some(interval) = run.commit_interval {
        builder = builder.commit_interval(interval);
    }
    builder.open().await.map_err(|e| format!("open: {e}"))
}

fn child(run: &Run) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let done = runtime.block_on(async {
        match run.role {
            Role::Hold => hold(run).await.map(|()| None),
            Role::LeadMemory => measure(run, MemoryStore::race()).await.map(Some),
            Role::Lead | Role::Follow => match open(run).await {
                Ok(store) => measure(run, store).await.map(Some),
                Err(e) => Err(e),
            },
        }
    });
    match done {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some((report, ok))) => {
            println!("{RESULT} {report}");
            if ok == run.n {
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "scale bench: only {ok} of {} candidates still {} after the window",
                    run.n,
                    if run.role == Role::Follow {
                        "follow their leader"
                    } else {
                        "lead"
                    }
                );
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!(
                "scale bench ({} elections, {}): {e}",
                run.n,
                run.role.name()
            );
            ExitCode::FAILURE
        }
    }
}

fn candidates<S: LeaseStore + Clone>(store: &S, n: u64, who: &str) -> Vec<Candidate<S>> {
    let holder = HolderId::new(format!("{who}-{}", std::process::id())).expect("a holder id");
    (0..n)
        .map(|i| {
            let election = ElectionName::new(format!("scale-{i}")).expect("an election name");
            Candidate::builder(store.clone(), election, holder.clone())
                .build()
                .expect("the default timing is valid")
        })
        .collect()
}

/// Wins every election and keeps them until stdin closes.
async fn hold(run: &Run) -> Result<(), String> {
    let store = open(run).await?;
    let candidates = candidates(&store, run.n, "holder");
    let leaderships = win_all(&candidates, run.spread).await?;
    println!("{READY}");
    tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new()))
        .await
        .map_err(|e| format!("stdin: {e}"))?
        .map_err(|e| format!("stdin: {e}"))?;
    // Leave without releasing: see `measure`.
    std::mem::forget(leaderships);
    std::mem::forget(candidates);
    Ok(())
}

/// When the `i`th of `n` candidates starts campaigning.
fn start_delay(c: &Candidate<impl LeaseStore>, i: usize, n: usize, spread: bool) -> Duration {
    if spread {
        c.timing().renew_every.mul_f64(i as f64 / n as f64)
    } else {
        Duration::ZERO
    }
}

async fn win_all<S: LeaseStore + Clone>(
    candidates: &[Candidate<S>],
    spread: bool,
) -> Result<Vec<regent_core::Leadership>, String> {
    let started = Instant::now();
    let campaigns: Vec<_> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let c = c.clone();
            let delay = start_delay(&c, i, candidates.len(), spread);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                c.campaign().await
            })
        })
        .collect();
    let mut leaderships = Vec::with_capacity(campaigns.len());
    for campaign in campaigns {
        let leadership = campaign
            .await
            .map_err(|e| format!("campaign task: {e}"))?
            .map_err(|e| format!("campaign: {e}"))?;
        leaderships.push(leadership);
    }
    eprintln!(
        "  {} won in {:.2} s",
        leaderships.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(leaderships)
}

/// Whether `status` follows a leader other than `me`.
fn follows(status: &Status, me: &HolderId) -> bool {
    matches!(status, Status::Follower { leader: Some(l) } if &l.holder != me)
}

/// The report line, and how many candidates are still as they should be
/// at the end (leading, or following the holder).
async fn measure<S: LeaseStore + Clone>(run: &Run, store: S) -> Result<(String, u64), String> {
    let store = Counted::new(store);
    let candidates = candidates(&store, run.n, run.role.name());
    let mut leaderships = Vec::new();
    if run.role != Role::Follow {
        leaderships = win_all(&candidates, run.spread).await?;
    } else {
        for (i, c) in candidates.iter().enumerate() {
            let c = c.clone();
            let delay = start_delay(&c, i, candidates.len(), run.spread);
            // Never wins while the holder lives; ends with the runtime.
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                c.campaign().await
            });
        }
        let started = Instant::now();
        for c in &candidates {
            let me = c.holder().clone();
            tokio::time::timeout(
                Duration::from_secs(60),
                c.status().wait_for(|s| follows(s, &me)),
            )
            .await
            .map_err(|_| "a follower did not see its leader within 60 s".to_owned())?
            .map_err(|e| format!("status: {e}"))?;
        }
        eprintln!(
            "  {} follow after {:.2} s",
            candidates.len(),
            started.elapsed().as_secs_f64()
        );
    }

    tokio::time::sleep(run.warm_up).await;
    let cpu0 = cpu_ticks()?;
    let store_cpu0 = store_thread_ticks();
    let written0 = write_bytes()?;
    let ops0 = store.stats.ops.load(Ordering::Relaxed);
    store.stats.reset_renewals();
    let t0 = Instant::now();
    let mut threads_max = 0;
    while t0.elapsed() < run.window {
        threads_max = threads_max.max(status_field("Threads:")?);
        tokio::time::sleep(Duration::from_millis(100).min(run.window)).await;
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_ticks()? - cpu0;
    let store_cpu = store_thread_ticks().saturating_sub(store_cpu0);
    let written = write_bytes()? - written0;
    let ops = store.stats.ops.load(Ordering::Relaxed) - ops0;
    let threads = status_field("Threads:")?;
    let rss_kib = status_field("VmRSS:")?;
    let (renewals, renew_ns, renew_max_ns) = store.stats.renewals();
    let ok = match run.role {
        Role::Follow => candidates
            .iter()
            .filter(|c| follows(&c.status().borrow(), c.holder()))
            .count(),
        _ => leaderships.iter().filter(|l| l.check().is_ok()).count(),
    };

    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let mut report = String::new();
    let _ = write!(
        report,
        "cpu_pct={:.2} store_thread_cpu_pct={:.2} rss_kib={rss_kib} threads={threads} threads_max={} \
         write_bytes_per_s={:.0} ops_per_s={:.1} renewals={renewals} \
         renew_avg_ms={:.2} renew_max_ms={:.1} ok={ok}",
        cpu as f64 / ticks / secs * 100.0,
        store_cpu as f64 / ticks / secs * 100.0,
        threads_max.max(threads),
        written as f64 / secs,
        ops as f64 / secs,
        renew_ns as f64 / renewals.max(1) as f64 / 1e6,
        renew_max_ns as f64 / 1e6,
    );
    eprintln!("  {report}");
    // Leave without releasing: the process ends here, and releasing
    // thousands of leases would only measure the way out.
    std::mem::forget(leaderships);
    std::mem::forget(candidates);
    Ok((report, ok as u64))
}

/// `utime + stime` of this process, in clock ticks.
fn cpu_ticks() -> Result<u64, String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| format!("stat: {e}"))?;
    stat_ticks(&stat).ok_or_else(|| "/proc/self/stat has no utime and stime".into())
}

/// `utime + stime` of a `stat` file of `/proc` (fields 14 and 15).
fn stat_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces: count from its ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `utime + stime` of the store's connection threads (named
/// `regent-sqlite`), in clock ticks; zero where there are none.
fn store_thread_ticks() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            let (head, _) = stat.rsplit_once(')')?;
            if !head.ends_with("(regent-sqlite") {
                return None;
            }
            stat_ticks(&stat)
        })
        .sum()
}

/// Bytes this process caused to be sent to the storage layer.
fn write_bytes() -> Result<u64, String> {
    let io = std::fs::read_to_string("/proc/self/io").map_err(|e| format!("io: {e}"))?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "/proc/self/io has no write_bytes".into())
}

/// A number field of `/proc/self/status` (`Threads:`, `VmRSS:` in KiB).
fn status_field(key: &str) -> Result<u64, String> {
    let status =
        std::fs::read_to_string("/proc/self/status").map_err(|e| format!("status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("/proc/self/status has no {key}"))
}

// ---------------------------------------------------------------- counting

/// Counts the store calls the candidates make, and times renewals.
#[derive(Default)]
struct Stats {
    ops: AtomicU64,
    renewals: AtomicU64,
    renew_ns: AtomicU64,
    renew_max_ns: AtomicU64,
}

impl Stats {
    fn reset_renewals(&self) {
        self.renewals.store(0, Ordering::Relaxed);
        self.renew_ns.store(0, Ordering::Relaxed);
        self.renew_max_ns.store(0, Ordering::Relaxed);
    }

    fn renewals(&self) -> (u64, u64, u64) {
        (
            self.renewals.load(Ordering::Relaxed),
            self.renew_ns.load(Ordering::Relaxed),
            self.renew_max_ns.load(Ordering::Relaxed),
        )
    }
}

/// A store, with every call counted.
#[derive(Clone)]
struct Counted<S> {
    inner: S,
    stats: Arc<Stats>,
}

impl<S> Counted<S> {
    fn new(inner: S) -> Self {
        Self {
            inner,
            stats: Arc::default(),
        }
    }

    fn count(&self) {
        self.stats.ops.fetch_add(1, Ordering::Relaxed);
    }
}

impl<S: LeaseStore + Clone> LeaseStore for Counted<S> {
    fn info(&self) -> StoreInfo {
        self.inner.info()
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        self.count();
        self.inner.try_acquire(req, queued).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        self.count();
        let sent = Instant::now();
        let r = self.inner.renew(lease).await;
        let ns = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.stats.renewals.fetch_add(1, Ordering::Relaxed);
        self.stats.renew_ns.fetch_add(ns, Ordering::Relaxed);
        self.stats.renew_max_ns.fetch_max(ns, Ordering::Relaxed);
        r
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.count();
        self.inner.release(lease).await
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &regent_core::Metadata,
    ) -> Result<Renewal, StoreError> {
        self.count();
        self.inner.update_metadata(lease, metadata).await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.count();
        self.inner.current_leader(election).await
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        self.inner.watch(election).await
    }
}
