//! The scale case: one process leading many elections at once, one
//! candidate each, and what that costs per ttl: store operations (and the
//! engine's own count of requests), CPU time, memory, threads, bytes
//! written, renewals' times.
//!
//! Each measurement (a size, a role) runs in a process of its own
//! (`scale_child.rs`), so that the process's accounts describe the
//! candidates alone; the harness reads the engine's own count as the
//! child's window opens and closes. Followers (`--followers`) follow the
//! leaders another child holds. A size at which any candidate stopped
//! leading (following) within the window is the last tried.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use regent_proc::mono_ns;
use serde_json::Value;

use crate::engines::RunningStore;
use crate::error::BenchError;
use crate::load::counting::Ops;
use crate::load::open::StoreSpec;
use crate::load::result::{LoadResult, Role, ScaleRow, TTL};
use crate::load::scale_child::{READY, RESULT, WINDOW_END, WINDOW_START};
use crate::process::{Stdout, ToolProcess, describe_exit};
use crate::store::StoreKind;
use crate::wait::wait_for;

/// Elections held at once, by default.
pub(crate) const SCALE: [usize; 4] = [1, 100, 1_000, 10_000];
/// Elections held at once in `--short` mode, by default.
pub(crate) const SCALE_SHORT: [usize; 2] = [1, 100];
/// The wait between the last win and the window: one renewal interval, so
/// that every candidate has renewed (or retried) once.
const WARM_UP: Duration = Duration::from_secs(2);
/// The bound on a child's campaigns, warm-up included.
const LED_WITHIN: Duration = Duration::from_secs(330);

/// How the scale case runs (`--elections`, `--window`, `--followers`,
/// `--spread`, `--sqlite-commit-interval`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScaleOptions {
    /// The sizes, in order.
    pub(crate) elections: Vec<usize>,
    /// The measurement window (the figures are given per ttl).
    pub(crate) window: Duration,
    /// Also measure followers of another process's leaders.
    pub(crate) followers: bool,
    /// Spread the campaigns over one renewal interval.
    pub(crate) spread: bool,
    /// SQLite's commit interval, where not its default.
    pub(crate) commit_interval: Option<Duration>,
}

/// Runs the scale case on `engine`: the harness at `harness` runs the
/// children; their files go in `dir`.
pub(crate) fn scale(
    engine: &RunningStore,
    options: &ScaleOptions,
    harness: &Path,
    dir: &Path,
    note: &dyn Fn(String),
) -> Result<LoadResult, BenchError> {
    let kind = engine.kind();
    let spec = StoreSpec::of(engine, options.commit_interval);
    let mut roles = vec![Role::Lead];
    if options.followers {
        if kind == StoreKind::Memory {
            note("memory scale: no followers (no other process can reach the store)".into());
        } else {
            roles.push(Role::Follow);
        }
    }
    let mut rows = Vec::new();
    'sizes: for &e in &options.elections {
        for &role in &roles {
            let row = measure(engine, &spec, options, harness, dir, e, role)?;
            note(format!(
                "{kind} scale: {e} {role}s ready in {:.1} s; per ttl: {:.0} store requests ({}), \
                 {:.0} ms CPU; {:.1} MiB, {} threads",
                row.won_in.as_secs_f64(),
                row.ops_per_ttl.requests(),
                row.ops_per_ttl.describe(),
                row.cpu_per_ttl.as_secs_f64() * 1e3,
                row.rss_kib as f64 / 1024.0,
                row.threads
            ));
            let lost = row.lost;
            rows.push(row);
            if lost > 0 {
                note(format!(
                    "{kind} scale: {lost} of {e} {role}s stopped while measured: no larger size"
                ));
                break 'sizes;
            }
        }
    }
    Ok(LoadResult::Scale { store: kind, rows })
}

/// A child of `role` with `e` elections, named `name`.
fn spawn_child(
    spec: &StoreSpec,
    options: &ScaleOptions,
    harness: &Path,
    dir: &Path,
    (e, role, tag): (usize, Role, &str),
) -> Result<ToolProcess, BenchError> {
    let mut command = Command::new(harness);
    command
        .arg("__scale-child")
        .args(["--role", role.name()])
        .args(["--elections", &e.to_string(), "--tag", tag])
        .args(["--window-ms", &options.window.as_millis().to_string()])
        .args(["--warm-up-ms", &WARM_UP.as_millis().to_string()])
        .args(options.spread.then_some("--spread"))
        .args(spec.to_args());
    let name = format!("scale-{}-{e}-{role}", spec.kind);
    ToolProcess::spawn(&name, &mut command, dir, Stdout::Lines, false)
}

/// Waits up to `within` for `child` to print `line` (or a line starting
/// with it); returns the line. An early exit is an error with the child's
/// last words.
fn wait_line(child: &mut ToolProcess, line: &str, within: Duration) -> Result<String, BenchError> {
    let what = format!("{} to print {}", child.name, line.trim());
    wait_for(within, Duration::from_millis(5), &what, || {
        if let Some(found) = child.lines().into_iter().find(|l| l.text.starts_with(line)) {
            return Ok(Some(found.text));
        }
        if let Some(status) = child.try_status() {
            let stderr = child.stderr();
            let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(BenchError::Failed(format!(
                "{} exited ({}) before {what}:\n{}",
                child.name,
                describe_exit(Some(status)),
                tail.join("\n")
            )));
        }
        Ok(None)
    })
}

fn measure(
    engine: &RunningStore,
    spec: &StoreSpec,
    options: &ScaleOptions,
    harness: &Path,
    dir: &Path,
    e: usize,
    role: Role,
) -> Result<ScaleRow, BenchError> {
    let tag = match role {
        Role::Follow | Role::Hold => format!("{}-{e}-f", std::process::id()),
        Role::Lead => format!("{}-{e}-l", std::process::id()),
    };
    // Killed when dropped, after the measurement.
    let _holder = match role {
        Role::Follow => {
            let mut holder = spawn_child(spec, options, harness, dir, (e, Role::Hold, &tag))?;
            wait_line(&mut holder, READY, LED_WITHIN)?;
            Some(holder)
        }
        Role::Lead | Role::Hold => None,
    };
    let mut child = spawn_child(spec, options, harness, dir, (e, role, &tag))?;
    wait_line(&mut child, WINDOW_START, LED_WITHIN)?;
    let engine_before = engine.engine_requests();
    let from_ns = mono_ns();
    wait_line(
        &mut child,
        WINDOW_END,
        options.window + Duration::from_secs(30),
    )?;
    let engine_after = engine.engine_requests();
    let engine_window_s = (mono_ns().saturating_sub(from_ns)) as f64 / 1e9;
    let line = wait_line(&mut child, RESULT, Duration::from_secs(60))?;
    let result: Value = serde_json::from_str(line.trim_start_matches(RESULT))
        .map_err(|e| BenchError::Failed(format!("{}: {e}: {line}", child.name)))?;
    // It releases a networked store's leases, then exits.
    let _ = child.wait_exit(Duration::from_secs(90))?;

    let f = |k: &str| result.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let window_s = f("window_s").max(1e-3);
    let per_ttl = TTL.as_secs_f64() / window_s;
    let ops_per_ttl = Ops::from_json(&result["ops"]).scaled(per_ttl);
    let renewed = f("renewed");
    let leads = role == Role::Lead && renewed > 0.0;
    let spent = |secs: f64| Duration::from_secs_f64((secs * per_ttl).max(0.0));
    Ok(ScaleRow {
        elections: e,
        role,
        won_in: Duration::from_secs_f64(f("won_in_s").max(0.0)),
        window: Duration::from_secs_f64(window_s),
        ops_per_ttl,
        engine_per_ttl: engine_after.zip(engine_before).map(|(after, before)| {
            (after - before) * TTL.as_secs_f64() / engine_window_s.max(1e-3)
        }),
        cpu_per_ttl: spent(f("cpu_s")),
        store_thread_cpu_per_ttl: (spec.kind == StoreKind::Sqlite)
            .then(|| spent(f("store_thread_cpu_s"))),
        rss_kib: f("rss_kib") as i64,
        rss_added_kib: f("rss_added_kib") as i64,
        threads: f("threads") as u64,
        written_per_s: matches!(spec.kind, StoreKind::Sqlite | StoreKind::Memory)
            .then(|| result["written_bytes"].as_f64())
            .flatten()
            .map(|b| b / window_s),
        renew_avg: leads.then(|| Duration::from_secs_f64(f("renew_ns") / renewed / 1e9)),
        renew_max: leads.then(|| Duration::from_secs_f64(f("renew_max_ns") / 1e9)),
        lost: f("lost") as usize,
    })
}
