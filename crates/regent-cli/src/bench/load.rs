//! The load cases of `regent bench`: what a crowd costs a store.
//!
//! * **herd**: [`HERD`] candidates of one election in this process (one
//!   connection to the store; `--short`: [`HERD_SHORT`]). The leader
//!   resigns, [`FAILOVERS`] times over; for each failover the bench times
//!   the hand-over (the resign to the next leader's win) and counts the
//!   store operations the whole crowd makes from the resign until a
//!   tenth of a second after the win (`SETTLE`), but for renewals (which
//!   go on whatever happens: the crowd's idle cost, shown apart), less
//!   what the crowd makes of those kinds in as long idle (a follower's
//!   retries, measured before). Queue stores
//!   (etcd, ZooKeeper) should wake only the next in line: a failover costs
//!   the crowd a few operations, whatever its size. Race stores (SQLite,
//!   Consul) wake every follower to try: one or two operations each.
//! * **scale**: one process leading E elections at once, one candidate
//!   each (E in [`SCALE`]; `--short`: [`SCALE_SHORT`]): over one ttl, the
//!   store operations, the CPU time, the memory the candidates added and
//!   the process's threads.
//!
//! Operations are counted at the store's interface ([`Counting`]): each
//! call of `try_acquire`, `renew`, `release`, `update_metadata`,
//! `current_leader`, each watch opened and each change a watch delivered.
//! One call can be more than one request to the engine (etcd: a queued
//! place's acquire is a keep-alive and a read; a renewal a read and a
//! keep-alive), so the counts compare stores' behaviour, not their wire
//! traffic. Both cases use regent's default ttl (10 s; Consul's minimum
//! is the same) and timing.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use regent_core::{
    Acquire, AcquireRequest, BoxStore, Candidate, ElectionName, HolderId, LeaderInfo, LeaderStream,
    Leadership, Lease, LeaseStore, Metadata, Renewal, Status, StoreError, StoreInfo,
};
use serde_json::{Value, json};

use super::BenchError;
use super::engines::RunningStore;
use super::plan::StoreKind;

/// Candidates of the herd.
pub(crate) const HERD: usize = 1_000;
/// Candidates of the herd in `--short` mode.
pub(crate) const HERD_SHORT: usize = 50;
/// Failovers per herd.
pub(crate) const FAILOVERS: usize = 5;
/// Elections held at once by the scale case.
pub(crate) const SCALE: [usize; 4] = [1, 100, 1_000, 10_000];
/// Elections held at once by the scale case in `--short` mode.
pub(crate) const SCALE_SHORT: [usize; 2] = [1, 100];
/// The ttl of both cases: `regent run`'s default.
const TTL: Duration = Duration::from_secs(10);
/// How long after a failover's win its operations are still counted.
const SETTLE: Duration = Duration::from_millis(100);
/// The pause after a failover's count before the next failover.
const BETWEEN_FAILOVERS: Duration = Duration::from_secs(1);

/// A load case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum LoadCase {
    /// Many candidates, one election: the store operations per failover.
    Herd,
    /// Many elections, one process: what holding them costs per ttl.
    Scale,
}

impl LoadCase {
    pub(crate) const ALL: [Self; 2] = [Self::Herd, Self::Scale];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Herd => "herd",
            Self::Scale => "scale",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "herd" => Some(Self::Herd),
            "scale" => Some(Self::Scale),
            _ => None,
        }
    }
}

impl std::fmt::Display for LoadCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Store operations by kind, as [`Counting`] saw them.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    acquire: AtomicU64,
    renew: AtomicU64,
    release: AtomicU64,
    update: AtomicU64,
    read: AtomicU64,
    watch: AtomicU64,
    change: AtomicU64,
}

/// A snapshot of [`Counts`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Ops {
    pub(crate) acquire: f64,
    pub(crate) renew: f64,
    pub(crate) release: f64,
    pub(crate) update: f64,
    pub(crate) read: f64,
    pub(crate) watch: f64,
    pub(crate) change: f64,
}

impl Counts {
    fn snapshot(&self) -> Ops {
        #[allow(clippy::cast_precision_loss)]
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        Ops {
            acquire: get(&self.acquire),
            renew: get(&self.renew),
            release: get(&self.release),
            update: get(&self.update),
            read: get(&self.read),
            watch: get(&self.watch),
            change: get(&self.change),
        }
    }
}

impl Ops {
    fn zip(self, other: Self, f: impl Fn(f64, f64) -> f64) -> Self {
        Self {
            acquire: f(self.acquire, other.acquire),
            renew: f(self.renew, other.renew),
            release: f(self.release, other.release),
            update: f(self.update, other.update),
            read: f(self.read, other.read),
            watch: f(self.watch, other.watch),
            change: f(self.change, other.change),
        }
    }

    fn minus(self, other: Self) -> Self {
        self.zip(other, |a, b| a - b)
    }

    fn scaled(self, k: f64) -> Self {
        self.zip(Self::default(), |a, _| a * k)
    }

    /// Every operation but the changes watches delivered (those are the
    /// engine's pushes, not requests).
    pub(crate) fn requests(self) -> f64 {
        self.acquire + self.renew + self.release + self.update + self.read + self.watch
    }

    fn to_json(self) -> Value {
        json!({
            "try_acquire": self.acquire, "renew": self.renew, "release": self.release,
            "update_metadata": self.update, "current_leader": self.read,
            "watch": self.watch, "watch_changes": self.change,
        })
    }

    /// "12 acquire, 3 renew, …": the kinds that are not (about) zero.
    fn describe(self) -> String {
        let parts: Vec<String> = [
            (self.acquire, "acquire"),
            (self.renew, "renew"),
            (self.release, "release"),
            (self.update, "update"),
            (self.read, "read"),
            (self.watch, "watch opened"),
            (self.change, "watch changes"),
        ]
        .into_iter()
        .filter(|(n, _)| n.abs() >= 0.5)
        .map(|(n, what)| format!("{n:.0} {what}"))
        .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// A store that counts the operations made through it.
#[derive(Clone)]
pub(crate) struct Counting {
    inner: BoxStore,
    counts: Arc<Counts>,
}

fn count(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl LeaseStore for Counting {
    fn info(&self) -> StoreInfo {
        self.inner.info()
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        count(&self.counts.acquire);
        self.inner.try_acquire(req, queued).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        count(&self.counts.renew);
        self.inner.renew(lease).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        count(&self.counts.release);
        self.inner.release(lease).await
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        count(&self.counts.update);
        self.inner.update_metadata(lease, metadata).await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        count(&self.counts.read);
        self.inner.current_leader(election).await
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        count(&self.counts.watch);
        let stream = self.inner.watch(election).await?;
        let counts = self.counts.clone();
        Ok(Box::pin(stream.inspect(move |_| count(&counts.change))))
    }
}

/// The requests the engine itself counted so far, where it counts them:
/// etcd's `grpc_server_msg_received_total` (every gRPC message, by method,
/// keep-alives and watch requests included), ZooKeeper's
/// `zk_packets_received` (`mntr`; sessions' pings included). `None` for
/// the other stores.
fn engine_requests(store: &RunningStore) -> Option<f64> {
    if let Some(etcd) = store.etcd() {
        let text = etcd.metrics().ok()?;
        return Some(
            text.lines()
                .filter(|l| l.starts_with("grpc_server_msg_received_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        );
    }
    if let Some((zk, _)) = store.zookeeper() {
        let text = zk.four_letter_word("mntr").ok()?;
        return text.lines().find_map(|l| {
            let (k, v) = l.split_once(char::is_whitespace)?;
            (k == "zk_packets_received").then(|| v.trim().parse().ok())?
        });
    }
    None
}

/// What one load case measured on one store.
#[derive(Debug, Clone)]
pub(crate) enum LoadResult {
    Herd {
        store: StoreKind,
        candidates: usize,
        /// Operations per second of the whole crowd, idle.
        idle_per_s: Ops,
        /// The engine's own count of requests per second, idle.
        engine_idle_per_s: Option<f64>,
        failovers: Vec<Failover>,
    },
    Scale {
        store: StoreKind,
        rows: Vec<ScaleRow>,
    },
}

/// One failover of a herd.
#[derive(Debug, Clone)]
pub(crate) struct Failover {
    pub(crate) handover: Duration,
    /// The crowd's operations from the resign to [`SETTLE`] after the win,
    /// less the idle rate over as long.
    pub(crate) ops: Ops,
    /// The same, as the engine counted its requests.
    pub(crate) engine: Option<f64>,
}

/// One line of the scale case.
#[derive(Debug, Clone)]
pub(crate) struct ScaleRow {
    pub(crate) elections: usize,
    /// Time until every election had its leader.
    pub(crate) won_in: Duration,
    /// Store operations over one ttl.
    pub(crate) ops_per_ttl: Ops,
    /// The engine's own count of requests over one ttl.
    pub(crate) engine_per_ttl: Option<f64>,
    /// CPU time (user + system) over one ttl.
    pub(crate) cpu_per_ttl: Duration,
    /// Resident memory the candidates added.
    pub(crate) rss_added_kib: i64,
    /// The process's threads while they lead.
    pub(crate) threads: u64,
    /// Elections whose leader stepped down while measured (this process
    /// or the store could not keep up): the larger sizes are not tried.
    pub(crate) lost: usize,
}

/// Runs `case` on `store`.
pub(crate) fn run(
    store: &RunningStore,
    case: LoadCase,
    short: bool,
    note: &dyn Fn(String),
) -> Result<LoadResult, BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| BenchError::Failed(format!("a runtime: {e}")))?;
    let url = store.store_url();
    runtime.block_on(async {
        let opened = match store.consul() {
            // As a library that holds many elections builds it: without
            // the CLI's restart proofs (one election per process, a
            // session per term), so that its elections share sessions.
            Some(consul) => regent::consul::ConsulStore::builder(consul.address())
                .build()
                .map(BoxStore::new)
                .map_err(|e| BenchError::Failed(format!("cannot open {url}: {e}")))?,
            None => regent::connect(&url, &[])
                .await
                .map_err(|e| BenchError::Failed(format!("cannot open {url}: {e}")))?,
        };
        let counting = Counting {
            inner: opened,
            counts: Arc::new(Counts::default()),
        };
        // SIGINT or SIGTERM to the bench (see `proc::catch_interrupts`).
        let stop = async {
            while super::proc::check_interrupted().is_ok() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let run = async {
            match case {
                LoadCase::Herd => {
                    herd(store, counting, if short { HERD_SHORT } else { HERD }, note).await
                }
                LoadCase::Scale => {
                    let sizes: &[usize] = if short { &SCALE_SHORT } else { &SCALE };
                    scale(store, counting, sizes, note).await
                }
            }
        };
        tokio::select! {
            r = run => r,
            () = stop => Err(BenchError::Interrupted),
        }
    })
}

fn name(text: String) -> Result<ElectionName, BenchError> {
    ElectionName::new(&text).map_err(|e| BenchError::Failed(format!("election {text}: {e}")))
}

fn holder(text: String) -> Result<HolderId, BenchError> {
    HolderId::new(&text).map_err(|e| BenchError::Failed(format!("holder {text}: {e}")))
}

fn candidate(
    store: &Counting,
    election: ElectionName,
    holder: HolderId,
) -> Result<Candidate<Counting>, BenchError> {
    Candidate::builder(store.clone(), election, holder)
        .ttl(TTL)
        .build()
        .map_err(|e| BenchError::Failed(format!("candidate: {e}")))
}

/// Waits for `what` up to `within`, looking every 20 ms.
async fn until(
    within: Duration,
    what: &str,
    mut done: impl FnMut() -> bool,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + within;
    while !done() {
        if Instant::now() >= deadline {
            return Err(BenchError::Failed(format!("{what}: not within {within:?}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The herd: candidates that each lead once, and resign when told.
async fn herd(
    engine: &RunningStore,
    store: Counting,
    n: usize,
    note: &dyn Fn(String),
) -> Result<LoadResult, BenchError> {
    let kind = engine.kind();
    let election = name(format!("bench-herd-{}", std::process::id()))?;
    let (won_tx, mut won_rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Leadership)>();
    let mut candidates = Vec::with_capacity(n);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let c = Arc::new(candidate(
            &store,
            election.clone(),
            holder(format!("herd-{i}"))?,
        )?);
        candidates.push(c.clone());
        let won = won_tx.clone();
        tasks.spawn(async move {
            if let Ok(leadership) = c.campaign().await {
                let _ = won.send((i, leadership));
            }
        });
    }
    let started = Instant::now();
    let (mut leader_at, mut leadership) =
        tokio::time::timeout(Duration::from_secs(120), won_rx.recv())
            .await
            .map_err(|_| BenchError::Failed("herd: no first leader within 120 s".into()))?
            .ok_or_else(|| BenchError::Failed("herd: no candidate won".into()))?;
    // Every other candidate follows (stands in line, on a queue store).
    let followers_ready = || {
        candidates
            .iter()
            .enumerate()
            .all(|(i, c)| i == leader_at || matches!(*c.status().borrow(), Status::Follower { .. }))
    };
    until(
        Duration::from_secs(120),
        "herd: every candidate following",
        followers_ready,
    )
    .await?;
    note(format!(
        "{kind} herd: {n} candidates campaigning in {:.1}s",
        started.elapsed().as_secs_f64()
    ));
    // Settle, then the idle rate over one ttl.
    tokio::time::sleep(TTL / 5).await;
    let before = store.counts.snapshot();
    let engine_before = engine_requests(engine);
    let idle_from = Instant::now();
    tokio::time::sleep(TTL).await;
    let idle_s = idle_from.elapsed().as_secs_f64();
    let idle = store.counts.snapshot().minus(before).scaled(1.0 / idle_s);
    let engine_idle = engine_requests(engine)
        .zip(engine_before)
        .map(|(after, before)| (after - before) / idle_s);
    let mut failovers = Vec::new();
    for _ in 0..FAILOVERS.min(n - 1) {
        let before = store.counts.snapshot();
        let engine_before = engine_requests(engine);
        let t0 = Instant::now();
        let old = leader_at;
        leadership
            .resign()
            .await
            .map_err(|e| BenchError::Failed(format!("herd: resign: {e}")))?;
        candidates[old].shutdown().await;
        let (next, next_leadership) = tokio::time::timeout(Duration::from_secs(60), won_rx.recv())
            .await
            .map_err(|_| BenchError::Failed("herd: no next leader within 60 s".into()))?
            .ok_or_else(|| BenchError::Failed("herd: every candidate ended".into()))?;
        let handover = t0.elapsed();
        tokio::time::sleep(SETTLE).await;
        let window = t0.elapsed().as_secs_f64();
        // Renewals go on whatever happens, in bursts (candidates that
        // started together renew together): subtracted as an average
        // rate they swamped the count (at 1,000 etcd candidates a
        // failover once came out at -193). They are the idle cost, shown
        // apart; a failover's count is every other kind, less those
        // kinds' own idle rate (a follower's retries).
        let mut ops = store
            .counts
            .snapshot()
            .minus(before)
            .minus(idle.scaled(window));
        ops.renew = 0.0;
        let engine_ops = engine_requests(engine)
            .zip(engine_before)
            .zip(engine_idle)
            .map(|((after, before), idle)| after - before - idle * window);
        note(format!(
            "{kind} herd: failover in {:.1} ms, {:.0} store requests beyond idle ({}){}",
            handover.as_secs_f64() * 1e3,
            ops.requests(),
            ops.describe(),
            engine_ops.map_or_else(String::new, |e| format!("; the engine counted {e:.0}"))
        ));
        failovers.push(Failover {
            handover,
            ops,
            engine: engine_ops,
        });
        leader_at = next;
        leadership = next_leadership;
        // Let the crowd settle before the next failover, as between real
        // ones: etcd's watchers learn the key behind a new head up to half
        // a second later; a failover 0.1 s after the last found most of
        // them still reading, and every one of them read again at once.
        tokio::time::sleep(BETWEEN_FAILOVERS).await;
    }
    // The crowd first, so that nobody is next in line when the leader goes.
    shut_down(
        candidates
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leader_at)
            .map(|(_, c)| c),
    )
    .await;
    let _ = leadership.resign().await;
    candidates[leader_at].shutdown().await;
    won_rx.close();
    while let Ok((_, late)) = won_rx.try_recv() {
        let _ = late.resign().await;
    }
    tasks.shutdown().await;
    Ok(LoadResult::Herd {
        store: kind,
        candidates: n,
        idle_per_s: idle,
        engine_idle_per_s: engine_idle,
        failovers,
    })
}

/// Shuts the candidates down all at once: one after another, ten thousand
/// took minutes.
async fn shut_down<'a>(candidates: impl Iterator<Item = &'a Arc<Candidate<Counting>>>) {
    futures_util::future::join_all(candidates.map(|c| c.shutdown())).await;
}

/// What the process uses: CPU time so far, resident memory, threads.
fn usage() -> (Duration, i64, u64) {
    let cpu = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let cpu = Duration::new(
        u64::try_from(cpu.tv_sec).unwrap_or(0),
        u32::try_from(cpu.tv_nsec).unwrap_or(0),
    );
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> i64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (
        cpu,
        field("VmRSS:"),
        u64::try_from(field("Threads:")).unwrap_or(0),
    )
}

/// The scale case: `sizes` elections at a time, each led by a candidate of
/// its own in this process.
async fn scale(
    engine: &RunningStore,
    store: Counting,
    sizes: &[usize],
    note: &dyn Fn(String),
) -> Result<LoadResult, BenchError> {
    let kind = engine.kind();
    let mut rows = Vec::new();
    for &e in sizes {
        let (_, rss_before, _) = usage();
        let started = Instant::now();
        let mut candidates = Vec::with_capacity(e);
        let mut terms = tokio::task::JoinSet::new();
        for i in 0..e {
            let c = Arc::new(candidate(
                &store,
                name(format!("bench-scale-{}-{e}-{i}", std::process::id()))?,
                holder(format!("scale-{i}"))?,
            )?);
            candidates.push(c.clone());
            terms.spawn(async move { c.campaign().await.map_err(|err| err.to_string()) });
        }
        let mut leaderships = Vec::with_capacity(e);
        let all_by = tokio::time::Instant::now() + Duration::from_secs(300);
        while let Some(joined) = tokio::time::timeout_at(all_by, terms.join_next())
            .await
            .map_err(|_| {
                BenchError::Failed(format!("scale: {e} elections not all led within 300 s"))
            })?
        {
            let leadership = joined
                .map_err(|err| BenchError::Failed(format!("scale: a campaign panicked: {err}")))?
                .map_err(|err| BenchError::Failed(format!("scale: a campaign failed: {err}")))?;
            leaderships.push(leadership);
        }
        let won_in = started.elapsed();
        // Settle, then one ttl.
        tokio::time::sleep(TTL / 5).await;
        let before = store.counts.snapshot();
        let engine_before = engine_requests(engine);
        let (cpu_before, _, _) = usage();
        let from = Instant::now();
        tokio::time::sleep(TTL).await;
        let (cpu_after, rss, threads) = usage();
        let k = TTL.as_secs_f64() / from.elapsed().as_secs_f64();
        let ops_per_ttl = store.counts.snapshot().minus(before).scaled(k);
        let engine_per_ttl = engine_requests(engine)
            .zip(engine_before)
            .map(|(after, before)| (after - before) * k);
        let cpu_per_ttl = (cpu_after.saturating_sub(cpu_before)).mul_f64(k);
        let lost = leaderships.iter().filter(|l| l.check().is_err()).count();
        let row = ScaleRow {
            elections: e,
            won_in,
            ops_per_ttl,
            engine_per_ttl,
            cpu_per_ttl,
            rss_added_kib: rss - rss_before,
            threads,
            lost,
        };
        note(format!(
            "{kind} scale: {e} elections led in {:.1}s; per ttl: {:.0} store requests ({}), \
             {:.0} ms CPU; +{} KiB, {} threads",
            won_in.as_secs_f64(),
            ops_per_ttl.requests(),
            ops_per_ttl.describe(),
            cpu_per_ttl.as_secs_f64() * 1e3,
            row.rss_added_kib,
            threads
        ));
        rows.push(row);
        futures_util::future::join_all(leaderships.into_iter().map(Leadership::resign)).await;
        shut_down(candidates.iter()).await;
        if lost > 0 {
            note(format!(
                "{kind} scale: {lost} of {e} leaders stepped down while measured: no larger size"
            ));
            break;
        }
    }
    Ok(LoadResult::Scale { store: kind, rows })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The markdown section for `results`.
pub(crate) fn markdown(results: &[LoadResult]) -> String {
    let mut md = String::new();
    let herds: Vec<&LoadResult> = results
        .iter()
        .filter(|r| matches!(r, LoadResult::Herd { .. }))
        .collect();
    if !herds.is_empty() {
        let _ = writeln!(md, "## Herd: many candidates, one election\n");
        md.push_str(
            "The candidates run in the bench's process on one connection; the leader resigns, \
             and the store operations the whole crowd made from the resign until 0.1 s after \
             the next leader's win are counted at the store's interface, but for renewals \
             (which go on whatever happens: the idle rate, last column), less what the crowd \
             makes of the other kinds idle in as long (a follower's retries). The engine's own \
             count (etcd: gRPC messages received; ZooKeeper: packets received) includes the \
             renewals' requests, less their average idle rate: it is noisy. Medians over the \
             failovers.\n\n",
        );
        md.push_str(
            "| store | candidates | failovers | hand-over p50 ms | requests per failover | per candidate | kinds (p50 failover) | engine's count per failover | idle requests/s (engine's) |\n\
             |---|---:|---:|---:|---:|---:|---|---:|---:|\n",
        );
        for r in herds {
            let LoadResult::Herd {
                store,
                candidates,
                idle_per_s,
                engine_idle_per_s,
                failovers,
            } = r
            else {
                continue;
            };
            let engine = failovers
                .iter()
                .map(|f| f.engine)
                .collect::<Option<Vec<f64>>>()
                .map_or_else(|| "–".to_owned(), |v| format!("{:.0}", median(v)));
            let engine_idle = engine_idle_per_s.map_or_else(String::new, |e| format!(" ({e:.0})"));
            let handover = median(
                failovers
                    .iter()
                    .map(|f| f.handover.as_secs_f64() * 1e3)
                    .collect(),
            );
            let requests = median(failovers.iter().map(|f| f.ops.requests()).collect());
            let typical = failovers
                .iter()
                .min_by(|a, b| {
                    (a.ops.requests() - requests)
                        .abs()
                        .total_cmp(&(b.ops.requests() - requests).abs())
                })
                .map_or_else(String::new, |f| f.ops.describe());
            #[allow(clippy::cast_precision_loss)]
            let per = requests / (*candidates as f64 - 1.0).max(1.0);
            let _ = writeln!(
                md,
                "| {store} | {candidates} | {} | {handover:.1} | {requests:.0} | {per:.2} | {typical} | {engine} | {:.0}{engine_idle} |",
                failovers.len(),
                idle_per_s.requests()
            );
        }
        md.push('\n');
    }
    let scales: Vec<&LoadResult> = results
        .iter()
        .filter(|r| matches!(r, LoadResult::Scale { .. }))
        .collect();
    if !scales.is_empty() {
        let _ = writeln!(md, "## Scale: many elections, one process\n");
        md.push_str(
            "One process leads every election, a candidate each, at a ttl of 10 s (renewed \
             every 2 s); over one ttl: the store requests (counted at the store's interface: a \
             renewal is one whatever it costs the engine), the requests the engine itself \
             counted (what a store that shares one lease or session among elections saves \
             shows here), the CPU time of the whole process, the resident memory the \
             candidates added, and its threads.\n\n",
        );
        md.push_str(
            "| store | elections | all led in s | requests per ttl | per election | engine's count per ttl | CPU ms per ttl | memory added MiB | threads | leaders lost |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for r in scales {
            let LoadResult::Scale { store, rows } = r else {
                continue;
            };
            for row in rows {
                #[allow(clippy::cast_precision_loss)]
                let per = row.ops_per_ttl.requests() / row.elections as f64;
                #[allow(clippy::cast_precision_loss)]
                let mib = row.rss_added_kib as f64 / 1024.0;
                let engine = row
                    .engine_per_ttl
                    .map_or_else(|| "–".to_owned(), |e| format!("{e:.0}"));
                let _ = writeln!(
                    md,
                    "| {store} | {} | {:.1} | {:.0} | {per:.2} | {engine} | {:.0} | {mib:.1} | {} | {} |",
                    row.elections,
                    row.won_in.as_secs_f64(),
                    row.ops_per_ttl.requests(),
                    row.cpu_per_ttl.as_secs_f64() * 1e3,
                    row.threads,
                    row.lost
                );
            }
        }
        md.push('\n');
    }
    md
}

/// Every measurement, as JSON.
pub(crate) fn to_json(results: &[LoadResult]) -> Value {
    Value::Array(
        results
            .iter()
            .map(|r| match r {
                LoadResult::Herd {
                    store,
                    candidates,
                    idle_per_s,
                    engine_idle_per_s,
                    failovers,
                } => json!({
                    "case": "herd", "store": store.name(), "candidates": candidates,
                    "idle_per_s": idle_per_s.to_json(),
                    "engine_idle_per_s": engine_idle_per_s,
                    "failovers": failovers.iter().map(|f| json!({
                        "handover_ms": f.handover.as_secs_f64() * 1e3,
                        "ops": f.ops.to_json(),
                        "engine_requests": f.engine,
                    })).collect::<Vec<_>>(),
                }),
                LoadResult::Scale { store, rows } => json!({
                    "case": "scale", "store": store.name(),
                    "rows": rows.iter().map(|row| json!({
                        "elections": row.elections,
                        "all_led_in_s": row.won_in.as_secs_f64(),
                        "ops_per_ttl": row.ops_per_ttl.to_json(),
                        "engine_requests_per_ttl": row.engine_per_ttl,
                        "cpu_ms_per_ttl": row.cpu_per_ttl.as_secs_f64() * 1e3,
                        "rss_added_kib": row.rss_added_kib,
                        "threads": row.threads,
                        "leaders_lost": row.lost,
                    })).collect::<Vec<_>>(),
                }),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_arithmetic_and_description() {
        let a = Ops {
            acquire: 10.0,
            renew: 4.0,
            change: 7.0,
            ..Ops::default()
        };
        let b = Ops {
            acquire: 2.0,
            ..Ops::default()
        };
        let d = a.minus(b.scaled(2.0));
        assert!((d.acquire - 6.0).abs() < 1e-9);
        assert!(
            (d.requests() - 10.0).abs() < 1e-9,
            "changes are not requests"
        );
        assert_eq!(d.describe(), "6 acquire, 4 renew, 7 watch changes");
        assert_eq!(Ops::default().describe(), "none");
        assert!(
            LoadCase::ALL
                .iter()
                .all(|c| LoadCase::parse(c.name()) == Some(*c))
        );
    }
}
