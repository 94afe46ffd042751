//! The load cases' report: a markdown section per case and every
//! measurement as JSON.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use crate::load::result::LoadResult;
use crate::stats::percentile;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `p50 / p99 / max` of `samples` (nearest rank), in ms to a tenth, with
/// a sign when `signed`; `–` without samples.
fn spread(mut samples: Vec<f64>, signed: bool) -> String {
    samples.sort_by(f64::total_cmp);
    let Some(&max) = samples.last() else {
        return "–".to_owned();
    };
    let f = |v: f64| {
        if signed {
            format!("{v:+.1}")
        } else {
            format!("{v:.1}")
        }
    };
    format!(
        "{} / {} / {}",
        f(percentile(&samples, 50)),
        f(percentile(&samples, 99)),
        f(max)
    )
}

/// The report's title for load results alone.
pub(crate) fn title(results: &[LoadResult]) -> &'static str {
    if results
        .iter()
        .all(|r| matches!(r, LoadResult::Observe { .. }))
    {
        "# Observers beside candidates: who learns of a new leader when"
    } else {
        "# Many candidates, many elections: what regent costs a store"
    }
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
            "One process leads every election (or, as `follow`, follows the leaders another \
             process holds), a candidate each, at a ttl of 10 s (renewed every 2 s), on a \
             tokio runtime of 2 workers; each size runs in a process of its own, measured \
             after a warm-up of one renewal interval. Per ttl: the store requests (counted at \
             the store's interface: a renewal is one whatever it costs the engine), the \
             requests the engine itself counted (what a store that shares one lease or \
             session among elections saves shows here), the CPU time of the whole process \
             and of SQLite's connection thread; the resident memory at the end and what the \
             candidates added, the most threads seen, the bytes the process wrote (SQLite), \
             renewals' mean and longest time, and the candidates that stopped leading \
             (following) within the window.\n\n",
        );
        md.push_str(
            "| store | role | elections | all led in s | requests per ttl | per election | engine's count per ttl | CPU ms per ttl | store thread CPU ms per ttl | memory MiB (added) | threads | written KiB/s | renewal avg / max ms | lost |\n\
             |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for r in scales {
            let LoadResult::Scale { store, rows } = r else {
                continue;
            };
            for row in rows {
                #[allow(clippy::cast_precision_loss)]
                let per = row.ops_per_ttl.requests() / row.elections as f64;
                #[allow(clippy::cast_precision_loss)]
                let (mib, added) = (
                    row.rss_kib as f64 / 1024.0,
                    row.rss_added_kib as f64 / 1024.0,
                );
                let dash = || "–".to_owned();
                let engine = row.engine_per_ttl.map_or_else(dash, |e| format!("{e:.0}"));
                let store_cpu = row
                    .store_thread_cpu_per_ttl
                    .map_or_else(dash, |d| format!("{:.0}", d.as_secs_f64() * 1e3));
                let written = row
                    .written_per_s
                    .map_or_else(dash, |b| format!("{:.1}", b / 1024.0));
                let renewals = match (row.renew_avg, row.renew_max) {
                    (Some(avg), Some(max)) => format!(
                        "{:.1} / {:.1}",
                        avg.as_secs_f64() * 1e3,
                        max.as_secs_f64() * 1e3
                    ),
                    _ => dash(),
                };
                let _ = writeln!(
                    md,
                    "| {store} | {} | {} | {:.1} | {:.0} | {per:.2} | {engine} | {:.0} | {store_cpu} | {mib:.1} ({added:.1}) | {} | {written} | {renewals} | {} |",
                    row.role,
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
    md.push_str(&observe_markdown(results));
    md
}

/// The observer cases' section.
fn observe_markdown(results: &[LoadResult]) -> String {
    let mut md = String::new();
    let observed: Vec<&LoadResult> = results
        .iter()
        .filter(|r| matches!(r, LoadResult::Observe { .. }))
        .collect();
    if observed.is_empty() {
        return md;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let _ = writeln!(
        md,
        "## Observers: who learns of a new leader when
"
    );
    md.push_str(
        "In the bench's process, per run and on an election of its own: candidate A leads, \
         candidate B campaigns and waits, and an `Observer` follows the election, each on a \
         store instance of its own (a connection, a session, a client, as three processes \
         would have; the memory store: one, shared); on a store that is polled, B starts \
         a random part of the poll interval after the observer, so that their polls run at \
         independent phases, as two processes' would. Once all three see A lead, and 0.3 s \
         plus a random part of the renewal interval later, A goes: **observe**, A resigns \
         (`Leadership::resign`); **observe-crash**, A's renewals and release stop reaching \
         the store (regent-core's `Faults` layer cuts A off at its store's interface, as if \
         its task hung; its store instance lives on), so its lease lapses by the ttl. Times \
         run on the monotonic clock from that instant to B's `campaign` returning \
         (candidate), to the observer's `changes()` first naming B with B's fencing token \
         (observer), and to its `leader_watch()` holding B. *observer − candidate* is \
         signed: negative, the observer named B before B's campaign returned. *said \"no \
         leader\"*: the runs in which `changes()` yielded \"no leader\" between A going and \
         naming B, and for how long it had said so when it named B. Cells are p50 / p99 / \
         max (nearest rank), in ms. A run missed is one in which B or the observer had not \
         seen the hand-over within the bound (30 s; after a crash three ttls more).\n\n",
    );
    md.push_str(
        "| store | case | ttl | runs | candidate (B leads) | observer `changes()` | observer − candidate | `leader_watch()` | said \"no leader\" | \"no leader\" for | watch errors | missed |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut evidence = Vec::new();
    for r in observed {
        let LoadResult::Observe {
            store,
            departure,
            ttl,
            runs,
            missed,
        } = r
        else {
            continue;
        };
        let column = |f: &dyn Fn(&crate::load::result::ObserveRun) -> f64| {
            runs.iter().map(f).collect::<Vec<f64>>()
        };
        let gaps: Vec<f64> = runs.iter().filter_map(|r| r.no_leader).map(ms).collect();
        let errors: usize = runs.iter().map(|r| r.errors).sum();
        let _ = writeln!(
            md,
            "| {store} | {} | {} s | {} | {} | {} | {} | {} | {} of {} | {} | {errors} | {} |",
            departure.case_name(),
            ttl.as_secs(),
            runs.len(),
            spread(column(&|r| ms(r.candidate)), false),
            spread(column(&|r| ms(r.observer)), false),
            spread(column(&|r| ms(r.observer) - ms(r.candidate)), true),
            spread(column(&|r| ms(r.leader_watch)), false),
            gaps.len(),
            runs.len(),
            spread(gaps, false),
            missed.len(),
        );
        evidence.extend(
            missed
                .iter()
                .map(|m| format!("- {store} {}: {m}", departure.case_name())),
        );
    }
    md.push('\n');
    if !evidence.is_empty() {
        md.push_str("Runs missed, and what each side saw from A going on:\n\n");
        for line in evidence {
            let _ = writeln!(md, "{line}");
        }
        md.push('\n');
    }
    md
}

/// Every measurement, as JSON.
pub(crate) fn to_json(results: &[LoadResult]) -> Value {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
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
                        "handover_ms": ms(f.handover),
                        "ops": f.ops.to_json(),
                        "engine_requests": f.engine,
                    })).collect::<Vec<_>>(),
                }),
                LoadResult::Scale { store, rows } => json!({
                    "case": "scale", "store": store.name(),
                    "rows": rows.iter().map(|row| json!({
                        "elections": row.elections,
                        "role": row.role.name(),
                        "all_led_in_s": row.won_in.as_secs_f64(),
                        "window_s": row.window.as_secs_f64(),
                        "ops_per_ttl": row.ops_per_ttl.to_json(),
                        "engine_requests_per_ttl": row.engine_per_ttl,
                        "cpu_ms_per_ttl": ms(row.cpu_per_ttl),
                        "store_thread_cpu_ms_per_ttl": row.store_thread_cpu_per_ttl.map(ms),
                        "rss_kib": row.rss_kib,
                        "rss_added_kib": row.rss_added_kib,
                        "threads": row.threads,
                        "written_bytes_per_s": row.written_per_s,
                        "renew_avg_ms": row.renew_avg.map(ms),
                        "renew_max_ms": row.renew_max.map(ms),
                        "leaders_lost": row.lost,
                    })).collect::<Vec<_>>(),
                }),
                LoadResult::Observe {
                    store,
                    departure,
                    ttl,
                    runs,
                    missed,
                } => json!({
                    "case": departure.case_name(), "store": store.name(),
                    "ttl_s": ttl.as_secs_f64(),
                    "runs": runs.iter().map(|r| json!({
                        "candidate_ms": ms(r.candidate),
                        "observer_ms": ms(r.observer),
                        "observer_minus_candidate_ms": ms(r.observer) - ms(r.candidate),
                        "leader_watch_ms": ms(r.leader_watch),
                        "no_leader_ms": r.no_leader.map(ms),
                        "watch_errors": r.errors,
                    })).collect::<Vec<_>>(),
                    "missed": missed,
                }),
            })
            .collect(),
    )
}
