//! The herd: [`HERD`] candidates of one election in the bench's process
//! (one connection to the store; `--short`: [`HERD_SHORT`]). The leader
//! resigns, [`FAILOVERS`] times over; for each failover the bench times the
//! hand-over (the resign to the next leader's win) and counts the store
//! operations the whole crowd makes from the resign until a tenth of a
//! second after the win (`SETTLE`), but for renewals (which go on whatever
//! happens: the crowd's idle cost, shown apart), less what the crowd makes
//! of those kinds in as long idle (a follower's retries, measured before).
//! Queue stores (etcd, ZooKeeper) should wake only the next in line: a
//! failover costs the crowd a few operations, whatever its size. Race
//! stores (SQLite, Consul) wake every follower to try: one or two
//! operations each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use regent_core::{BoxStore, Candidate, ElectionName, HolderId, Leadership, Status};

use crate::engines::RunningStore;
use crate::error::BenchError;
use crate::load::counting::Counted;
use crate::load::result::{Failover, LoadResult, TTL};

/// Candidates of the herd.
pub(crate) const HERD: usize = 1_000;
/// Candidates of the herd in `--short` mode.
pub(crate) const HERD_SHORT: usize = 50;
/// Failovers per herd.
pub(crate) const FAILOVERS: usize = 5;
/// How long after a failover's win its operations are still counted.
const SETTLE: Duration = Duration::from_millis(100);
/// The pause after a failover's count before the next failover.
const BETWEEN_FAILOVERS: Duration = Duration::from_secs(1);

fn name(text: String) -> Result<ElectionName, BenchError> {
    ElectionName::new(&text).map_err(|e| BenchError::Failed(format!("election {text}: {e}")))
}

fn holder(text: String) -> Result<HolderId, BenchError> {
    HolderId::new(&text).map_err(|e| BenchError::Failed(format!("holder {text}: {e}")))
}

fn candidate(
    store: &Counted<BoxStore>,
    election: ElectionName,
    holder: HolderId,
) -> Result<Candidate<Counted<BoxStore>>, BenchError> {
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
pub(crate) async fn herd(
    engine: &RunningStore,
    store: Counted<BoxStore>,
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
    let before = store.layer().snapshot();
    let engine_before = engine.engine_requests();
    let idle_from = Instant::now();
    tokio::time::sleep(TTL).await;
    let idle_s = idle_from.elapsed().as_secs_f64();
    let idle = store.layer().snapshot().minus(before).scaled(1.0 / idle_s);
    let engine_idle = engine
        .engine_requests()
        .zip(engine_before)
        .map(|(after, before)| (after - before) / idle_s);
    let mut failovers = Vec::new();
    for _ in 0..FAILOVERS.min(n - 1) {
        let before = store.layer().snapshot();
        let engine_before = engine.engine_requests();
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
            .layer()
            .snapshot()
            .minus(before)
            .minus(idle.scaled(window));
        ops.renew = 0.0;
        let engine_ops = engine
            .engine_requests()
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
async fn shut_down<'a>(candidates: impl Iterator<Item = &'a Arc<Candidate<Counted<BoxStore>>>>) {
    futures_util::future::join_all(candidates.map(|c| c.shutdown())).await;
}
