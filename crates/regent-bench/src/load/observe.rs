//! The observer cases: does an [`Observer`] learn of a new leader as soon
//! as the candidate that becomes it does (issue 29, item 4)?
//!
//! Per run, on an election of its own: candidate A leads, candidate B
//! campaigns and waits (stands in line, on a queue store), and an
//! [`Observer`] follows the election through [`Observer::changes`] and
//! [`Observer::leader_watch`]. A, B and the observer each have a store
//! instance of their own (a connection, a session, a client: as three
//! processes would), but for the memory store, which they share. On a
//! store that is polled ([`WatchMode::Poll`]), B starts a random part of
//! the poll interval after the observer, so that their polls run at
//! independent phases. Once all three see A lead, and 0.3 s plus a random
//! part of the renewal interval later, A goes at `t0`:
//!
//! * **observe**: A resigns (`Leadership::resign`): the release.
//! * **observe-crash**: A's calls fail at its store's interface from `t0`
//!   on (regent-core's [`Faults`] layer, `partition`): its renewals and
//!   release never reach the store, as if its task hung, while its store
//!   instance (the process) lives on. The lease lapses by its ttl.
//!
//! Each side stamps what it sees with the monotonic clock as it sees it:
//! `t_cand` when B's `campaign` returns, `t_obs` when `changes()` first
//! yields B with B's fencing token, `t_watch` when `leader_watch()` holds
//! it; and every "no leader" the observer yields between `t0` and `t_obs`.
//! A run in which B or the observer has not seen the hand-over within the
//! bound is counted as missed, with its evidence in a note.
//!
//! The ttl is 2 s where the store takes it; Consul's shortest is 10 s and
//! a blob lease's 15 s.

use std::sync::Arc;
use std::time::Duration;

use regent_core::testing::{Faults, Layered};
use regent_core::{
    BoxStore, CampaignError, Candidate, ElectionName, FencingToken, HolderId, LeaderInfo,
    Leadership, LeaseStore as _, Observer, Status, WatchMode,
};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::engines::RunningStore;
use crate::error::BenchError;
use crate::load::open::StoreSpec;
use crate::load::result::{Departure, LoadResult, ObserveRun};
use crate::store::StoreKind;

/// The candidates' ttl on `kind`: 2 s, or the store's shortest.
pub(crate) fn ttl(kind: StoreKind) -> Duration {
    match kind {
        StoreKind::Consul | StoreKind::ConsulCluster => regent::consul::MIN_TTL,
        StoreKind::Azblob => regent::azblob::MIN_TTL,
        _ => crate::case::TTL,
    }
}

/// How long a run may take from `t0` until B and the observer have both
/// seen the hand-over: a loaded machine's margin, and after a crash three
/// ttls (Consul: the session's two, and the lock delay) on top.
fn bound(ttl: Duration, departure: Departure) -> Duration {
    let margin = Duration::from_secs(30);
    match departure {
        Departure::Resign => margin,
        Departure::Crash => 3 * ttl + margin,
    }
}

/// How long the election may take to be ready: A leading, B following,
/// the observer naming A.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The three sides' stores.
struct Stores {
    /// A's: its calls can be cut off (`Faults::partition`).
    a: Layered<BoxStore, Faults>,
    b: BoxStore,
    observer: BoxStore,
}

impl Stores {
    /// Three instances of the store `spec` describes (the memory store:
    /// one, shared).
    async fn open(spec: &StoreSpec) -> Result<Self, BenchError> {
        let a = spec.open_boxed().await?;
        let (b, observer) = if spec.kind == StoreKind::Memory {
            (a.clone(), a.clone())
        } else {
            (spec.open_boxed().await?, spec.open_boxed().await?)
        };
        Ok(Self {
            a: Layered::new(a, Faults::new()),
            b,
            observer,
        })
    }
}

fn failed(what: impl std::fmt::Display) -> BenchError {
    BenchError::Failed(what.to_string())
}

/// The observer case on `engine`: `runs` hand-overs, each on an election
/// of its own.
pub(crate) async fn observe(
    engine: &RunningStore,
    spec: &StoreSpec,
    runs: usize,
    departure: Departure,
    note: &dyn Fn(String),
) -> Result<LoadResult, BenchError> {
    let kind = engine.kind();
    let ttl = ttl(kind);
    let stores = Stores::open(spec).await?;
    let case = departure.case_name();
    let mut measured = Vec::with_capacity(runs);
    let mut missed = Vec::new();
    for run in 0..runs {
        match one_run(&stores, ttl, departure, run).await? {
            Ok(r) => {
                note(format!(
                    "{kind} {case} {}/{runs}: candidate {:.1} ms, observer {:.1} ms ({:+.1}), \
                     leader_watch {:.1} ms{}{}",
                    run + 1,
                    ms(r.candidate),
                    ms(r.observer),
                    ms(r.observer) - ms(r.candidate),
                    ms(r.leader_watch),
                    r.no_leader.map_or_else(String::new, |d| format!(
                        ", \"no leader\" for {:.1} ms",
                        ms(d)
                    )),
                    match r.errors {
                        0 => String::new(),
                        n => format!(", {n} watch errors"),
                    }
                ));
                measured.push(r);
            }
            Err(why) => {
                note(format!("{kind} {case} {}/{runs}: missed: {why}", run + 1));
                missed.push(why);
            }
        }
    }
    Ok(LoadResult::Observe {
        store: kind,
        departure,
        ttl,
        runs: measured,
        missed,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// What one side of the observer saw, stamped as it saw it.
type Seen = (Instant, Result<Option<LeaderInfo>, String>);

/// One hand-over: `Ok(Ok(run))` measured, `Ok(Err(evidence))` missed (B or
/// the observer did not see it within the bound), `Err` the bench failed.
async fn one_run(
    stores: &Stores,
    ttl: Duration,
    departure: Departure,
    run: usize,
) -> Result<Result<ObserveRun, String>, BenchError> {
    let pid = std::process::id();
    let election = ElectionName::new(format!("bench-{}-{pid}-{run}", departure.case_name()))
        .map_err(failed)?;
    let a = Arc::new(
        Candidate::builder(
            stores.a.clone(),
            election.clone(),
            HolderId::new(format!("a-{run}")).map_err(failed)?,
        )
        .ttl(ttl)
        .build()
        .map_err(failed)?,
    );
    let b = Arc::new(
        Candidate::builder(
            stores.b.clone(),
            election.clone(),
            HolderId::new(format!("b-{run}")).map_err(failed)?,
        )
        .ttl(ttl)
        .build()
        .map_err(failed)?,
    );
    let mut tasks = JoinSet::new();
    let result = hand_over(stores, &a, &b, departure, &mut tasks).await;
    // Whatever happened: the terms still held were dropped (their
    // releases run in the candidates' tasks; A's, after a crash, cannot
    // reach the store), the candidates go, and so does the observer.
    futures_util::future::join(a.shutdown(), b.shutdown()).await;
    tasks.shutdown().await;
    result
}

/// The last thing `seen` holds: who leads, as the observer said last.
fn last_leader(seen: &[Seen]) -> Option<&LeaderInfo> {
    seen.iter()
        .rev()
        .find_map(|(_, item)| item.as_ref().ok())
        .and_then(Option::as_ref)
}

fn drain(rx: &mut mpsc::UnboundedReceiver<Seen>, into: &mut Vec<Seen>) {
    while let Ok(seen) = rx.try_recv() {
        into.push(seen);
    }
}

/// The first instant at or after `t0` that `seen` names `holder`, with
/// `token` if given.
fn first_naming(
    seen: &[Seen],
    t0: Instant,
    holder: &HolderId,
    token: Option<FencingToken>,
) -> Option<Instant> {
    seen.iter()
        .filter(|(at, _)| *at >= t0)
        .find(|(_, item)| {
            matches!(item, Ok(Some(l)) if l.holder == *holder && token.is_none_or(|t| l.token == t))
        })
        .map(|(at, _)| *at)
}

/// `seen` from `t0` on, for a missed run's evidence: `+12.3 ms b-4/17`.
fn describe(seen: &[Seen], t0: Instant) -> String {
    let items: Vec<String> = seen
        .iter()
        .filter(|(at, _)| *at >= t0)
        .map(|(at, item)| {
            let what = match item {
                Ok(Some(l)) => format!("{}/{}", l.holder, l.token),
                Ok(None) => "no leader".to_owned(),
                Err(e) => format!("error: {e}"),
            };
            format!("+{:.1} ms {what}", ms(*at - t0))
        })
        .collect();
    if items.is_empty() {
        "nothing".to_owned()
    } else {
        items.join(", ")
    }
}

/// Leads with A, waits with B and the observer, lets A go at `t0`, and
/// times who learns what when.
async fn hand_over(
    stores: &Stores,
    a: &Arc<Candidate<Layered<BoxStore, Faults>>>,
    b: &Arc<Candidate<BoxStore>>,
    departure: Departure,
    tasks: &mut JoinSet<()>,
) -> Result<Result<ObserveRun, String>, BenchError> {
    let election = a.election().clone();
    let leading = tokio::time::timeout(READY_WITHIN, a.campaign())
        .await
        .map_err(|_| failed(format!("A did not lead {election} within {READY_WITHIN:?}")))?
        .map_err(|e| failed(format!("A's campaign: {e}")))?;
    let token_a = leading.token();

    // The observer, on a store instance of its own: every change as the
    // stream yields it, and the value its `leader_watch` holds.
    let observer = Observer::new(stores.observer.clone(), election.clone());
    let (changes_tx, mut changes_rx) = mpsc::unbounded_channel::<Seen>();
    let mut changes = observer.changes();
    tasks.spawn(async move {
        while let Some(item) = changes.next().await {
            let seen = (Instant::now(), item.map_err(|e| e.to_string()));
            if changes_tx.send(seen).is_err() {
                return;
            }
        }
    });
    let (watch_tx, mut watch_rx) = mpsc::unbounded_channel::<Seen>();
    tasks.spawn(async move {
        let mut watch = match observer.leader_watch().await {
            Ok(w) => w,
            Err(e) => {
                let _ = watch_tx.send((Instant::now(), Err(e.to_string())));
                return;
            }
        };
        let first = watch.borrow_and_update().clone();
        let _ = watch_tx.send((Instant::now(), Ok(first)));
        while watch.changed().await.is_ok() {
            let now = watch.borrow_and_update().clone();
            if watch_tx.send((Instant::now(), Ok(now))).is_err() {
                return;
            }
        }
    });

    // A store that is polled: the observer's polls and B's at phases
    // apart, as two processes' would be (started together, they polled in
    // step, and the observer always read just before B won).
    if let WatchMode::Poll(interval) = stores.observer.info().watch {
        tokio::time::sleep(interval.mul_f64(fastrand::f64())).await;
    }

    // B campaigns, and says when it leads.
    let (won_tx, mut won_rx) =
        mpsc::unbounded_channel::<(Instant, Result<Leadership, CampaignError>)>();
    let campaigning = b.clone();
    tasks.spawn(async move {
        let won = campaigning.campaign().await;
        let _ = won_tx.send((Instant::now(), won));
    });

    // Ready: A leads, B follows (stands in line), the observer names A.
    let (mut changes_seen, mut watch_seen) = (Vec::new(), Vec::new());
    let names_a = |seen: &[Seen]| {
        last_leader(seen).is_some_and(|l| l.holder == *a.holder() && l.token == token_a)
    };
    let ready_by = Instant::now() + READY_WITHIN;
    loop {
        drain(&mut changes_rx, &mut changes_seen);
        drain(&mut watch_rx, &mut watch_seen);
        if let Ok((_, won)) = won_rx.try_recv() {
            return Err(failed(format!(
                "B's campaign ended while A led: {:?}",
                won.map(|l| l.token())
            )));
        }
        let following = matches!(*b.status().borrow(), Status::Follower { .. });
        if following && names_a(&changes_seen) && names_a(&watch_seen) {
            break;
        }
        if Instant::now() >= ready_by {
            return Err(failed(format!(
                "{election}: not ready within {READY_WITHIN:?}: B {:?}, the observer saw {}",
                *b.status().borrow(),
                describe(&changes_seen, ready_by - READY_WITHIN)
            )));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // As series.rs does: not in step with renewals or polls.
    let renew_every = a.timing().renew_every;
    tokio::time::sleep(Duration::from_millis(300) + renew_every.mul_f64(fastrand::f64())).await;

    let t0 = Instant::now();
    // Held to the end of the run after a crash: its drop would release.
    let _crashed = match departure {
        Departure::Resign => {
            leading
                .resign()
                .await
                .map_err(|e| failed(format!("A's resign: {e}")))?;
            None
        }
        Departure::Crash => {
            stores.a.layer().partition(a.holder());
            Some(leading)
        }
    };
    let holder_b = b.holder().clone();
    let until = t0 + bound(a.timing().ttl, departure);
    let mut won: Option<(Instant, Leadership)> = None;
    loop {
        drain(&mut changes_rx, &mut changes_seen);
        drain(&mut watch_rx, &mut watch_seen);
        if won.is_none()
            && let Ok((at, result)) = won_rx.try_recv()
        {
            let leadership = result.map_err(|e| failed(format!("B's campaign: {e}")))?;
            won = Some((at, leadership));
        }
        let seen_by_both = first_naming(&changes_seen, t0, &holder_b, None).is_some()
            && first_naming(&watch_seen, t0, &holder_b, None).is_some();
        if won.is_some() && seen_by_both {
            break;
        }
        if Instant::now() >= until {
            return Ok(Err(format!(
                "{election}, {:.0} s after A went: B {}; changes(): {}; leader_watch(): {}",
                ms(until - t0) / 1e3,
                won.as_ref().map_or_else(
                    || "not leading".to_owned(),
                    |(at, l)| format!("leading at +{:.1} ms (token {})", ms(*at - t0), l.token())
                ),
                describe(&changes_seen, t0),
                describe(&watch_seen, t0)
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let Some((t_cand, leadership_b)) = won else {
        unreachable!("the loop ends with B leading")
    };
    let token_b = Some(leadership_b.token());
    let (Some(t_obs), Some(t_watch)) = (
        first_naming(&changes_seen, t0, &holder_b, token_b),
        first_naming(&watch_seen, t0, &holder_b, token_b),
    ) else {
        return Ok(Err(format!(
            "{election}: the observer named B with a token not B's ({}): changes(): {}; \
             leader_watch(): {}",
            leadership_b.token(),
            describe(&changes_seen, t0),
            describe(&watch_seen, t0)
        )));
    };
    let between = changes_seen
        .iter()
        .filter(|(at, _)| *at >= t0 && *at < t_obs);
    let no_leader = between
        .clone()
        .find(|(_, item)| matches!(item, Ok(None)))
        .map(|(at, _)| t_obs - *at);
    let errors = between.filter(|(_, item)| item.is_err()).count();
    Ok(Ok(ObserveRun {
        candidate: t_cand - t0,
        observer: t_obs - t0,
        leader_watch: t_watch - t0,
        no_leader,
        errors,
    }))
}
