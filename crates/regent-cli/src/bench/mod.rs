//! `regent bench`: how long a leader hand-over takes with regent, beside
//! each engine's own tool, on the stores installed on this machine.
//!
//! ```text
//! regent bench [--runs N] [--short] [--stores LIST] [--cases LIST] [--out FILE.md] [--json FILE]
//! ```
//!
//! # What is measured
//!
//! Per store × case, each tool side by side (the plan, `plan.rs`):
//!
//! | store | graceful | crash |
//! |---|---|---|
//! | sqlite | `regent run` | `regent run` |
//! | etcd | `regent run`, `etcdctl elect NAME PROPOSAL` | `regent run`, `etcdctl lock --ttl 2 NAME CMD` |
//! | consul | `regent run`, `consul lock PREFIX CMD` (and with `exec CMD`) | `regent run`, `consul lock PREFIX CMD` |
//! | zookeeper | `regent run`, Curator `LeaderLatch` | `regent run`, Curator `LeaderLatch` |
//!
//! * **graceful**: the leading process gets its own graceful signal
//!   (SIGTERM; SIGINT for `etcdctl elect`, which resigns on SIGINT only);
//!   the time runs to the next leader's start. Its command exits at once
//!   on SIGTERM, so what is timed is the tool's own work.
//! * **crash**: SIGKILL of the leading tool process alone, at a ttl of 2 s
//!   for both tools (Consul: `consul lock`'s fixed session TTL, 15 s); also
//!   reported, whether the old command was left running.
//!
//! regent's ttl is the native tool's where that has one (etcd's and
//! ZooKeeper's 2 s, Consul's 15 s), else 2 s. A new hand-over case is a
//! variant of [`plan::Case`], its tools, and how a run stops the leader
//! ([`series`]).
//!
//! The load cases, only when named in `--cases` ([`load`]): **herd**, a
//! thousand candidates of one election in the bench's process, and the
//! store operations each failover costs them; **scale**, one process
//! leading 1 to 10,000 elections, and what that costs per ttl (store
//! operations, CPU, memory, threads).
//!
//! # Method
//!
//! The engines are started by regent-testkit on free ports of `127.0.0.1`
//! ([`engines`]), each tool keeps a leader and a follower on an election
//! of its own, and the tools take turns run by run. A run ([`series`])
//! waits until the follower stands in line, then 0.3 s plus a random part
//! of the holder's renewal interval; reads CLOCK_MONOTONIC and signals the
//! leading tool process; waits for the follower to lead (its command logs
//! CLOCK_MONOTONIC as it starts — regent's hidden `__demo-task` — or its
//! line is stamped as the bench reads it); 0.5 s later looks for the old
//! command; then replaces the old leader by a new follower. The report
//! ([`report`]) gives p50 / p99 / max per store × tool × case, a strip
//! plot per case ([`svg`]), the machine and the engines' versions.
//!
//! # Cleanup
//!
//! Every process runs in a process group of its own and is killed by PID
//! and process group when its guard drops — on success, error or Ctrl-C
//! (SIGINT or SIGTERM make every wait end, exit 130) alike; engines stop by
//! the PID the test kit recorded. Nothing is killed by name.

mod engines;
mod load;
mod plan;
mod proc;
mod report;
mod series;
mod stats;
mod svg;

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use self::engines::RunningStore;
use self::plan::{Block, Plan, StoreKind};
use self::report::Facts;
use self::series::{Series, SeriesResult};

/// `regent bench`'s help: the cases, the tools, the outputs.
pub(crate) const AFTER_HELP: &str = "\
Stores and their tools (regent run is on every row):
  sqlite     graceful, crash: regent only (a temporary file)
  etcd       graceful: etcdctl elect NAME PROPOSAL (SIGINT, its resign)
             crash: etcdctl lock --ttl 2 NAME CMD
  consul     graceful: consul lock PREFIX CMD, and with `exec CMD`
             crash: consul lock (about 40 s a run: left out of --short)
  zookeeper  graceful, crash: Curator LeaderLatch (session 2 s)
Load cases, on any store, only when named in --cases (regent alone):
  herd       1000 candidates of one election (--short: 50), 5 failovers:
             the hand-over and the store operations per failover
  scale      1, 100, 1000, 10000 elections led by one process (--short:
             1, 100): store operations, CPU, memory, threads per ttl
The engines come from scripts/install-engines and run on free ports of
127.0.0.1 (etcd: one member; Consul: a dev agent; ZooKeeper: standalone).

Examples:
  regent bench --short --stores sqlite,etcd --out /tmp/bench.md
  regent bench --stores sqlite,etcd,zookeeper,consul --cases graceful,etcd:crash \\
      --out docs/benchmarks.md --json /tmp/samples.json
  regent bench --stores sqlite,etcd,zookeeper --cases herd,scale --out docs/load.md

Exit codes:
  0  every run measured; the report written
  1  a run failed (a wait timed out, a tool exited early): the message
     shows the evidence
  2  usage error, or an engine asked for is not installed
  130  interrupted (SIGINT or SIGTERM); everything started is stopped";

/// `regent bench`'s flags.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Runs per case and tool (default: 50; with --short 5, and 3 for a
    /// crash).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) runs: Option<u32>,
    /// CI mode: few runs, and no case that costs tens of seconds a run
    /// (Consul's crash), unless named in --cases.
    #[arg(long)]
    pub(crate) short: bool,
    /// The stores, comma-separated: sqlite, etcd, consul, zookeeper
    /// (default: sqlite and every store whose engine is installed).
    #[arg(long, value_name = "LIST")]
    pub(crate) stores: Option<String>,
    /// The cases, comma-separated: graceful, crash, and the load cases
    /// herd and scale; STORE:CASE runs a case on that store only (e.g.
    /// graceful,etcd:crash). Default: graceful and crash.
    #[arg(long, value_name = "LIST")]
    pub(crate) cases: Option<String>,
    /// Write the markdown report here, and an SVG plot per case beside it
    /// (docs/benchmarks.md: docs/benchmarks/graceful.svg, …).
    #[arg(long, value_name = "FILE.md")]
    pub(crate) out: Option<PathBuf>,
    /// Write every sample and the facts as JSON here.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
}

/// Why a bench stopped.
#[derive(Debug)]
pub(crate) enum BenchError {
    /// A flag's rule broken, or an engine asked for is not installed:
    /// exit 2.
    Usage(String),
    /// SIGINT or SIGTERM to the bench: exit 130.
    Interrupted,
    /// Anything else (a wait timed out, a tool exited early, a file could
    /// not be written), with the evidence: exit 1.
    Failed(String),
}

/// Runs `regent bench`: blocking, with no runtime (the engines' API and
/// the waits are blocking).
pub(crate) fn main(args: BenchArgs) -> ExitCode {
    match bench(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(BenchError::Usage(m)) => {
            warn_user!("regent bench: {m}");
            ExitCode::from(crate::error::EXIT_USAGE)
        }
        Err(BenchError::Interrupted) => {
            warn_user!("regent bench: interrupted; everything it started is stopped");
            ExitCode::from(130)
        }
        Err(BenchError::Failed(m)) => {
            warn_user!("regent bench: {m}");
            ExitCode::from(crate::error::EXIT_FAILURE)
        }
    }
}

fn bench(args: &BenchArgs) -> Result<(), BenchError> {
    let plan = Plan::resolve(
        args.stores.as_deref(),
        args.cases.as_deref(),
        args.runs.map(|n| n as usize),
        args.short,
        StoreKind::check_installed,
    )?;
    for path in [&args.out, &args.json].into_iter().flatten() {
        if path.is_dir() {
            return Err(BenchError::Usage(format!(
                "{} is a directory; give a file",
                path.display()
            )));
        }
    }
    if args
        .out
        .as_ref()
        .is_some_and(|p| p.extension().is_none_or(|e| e != "md"))
    {
        return Err(BenchError::Usage(
            "--out takes a markdown file, FILE.md (the plots go to FILE/)".into(),
        ));
    }
    proc::catch_interrupts()?;
    let exe = own_path()?;
    let dir = tempfile::Builder::new()
        .prefix("regent-bench-")
        .tempdir()
        .map_err(|e| BenchError::Failed(format!("a temporary directory: {e}")))?;

    let progress = progress_bar(plan.total_runs());
    let note = |line: String| progress.suspend(|| warn_user!("{line}"));
    note(format!(
        "regent bench: {} runs in all ({})",
        plan.total_runs(),
        plan.blocks
            .iter()
            .map(|b| format!("{} {} ×{}", b.store, b.case, b.runs))
            .chain(plan.loads.iter().map(|(s, c)| format!("{s} {c}")))
            .collect::<Vec<_>>()
            .join(", ")
    ));

    let began = Instant::now();
    let load_at_start = report::load_average();
    let mut results = Vec::new();
    let mut load_results = Vec::new();
    let mut engine_facts = Vec::new();
    for &store in &plan.stores {
        let blocks: Vec<&Block> = plan.blocks.iter().filter(|b| b.store == store).collect();
        let loads: Vec<load::LoadCase> = plan
            .loads
            .iter()
            .filter(|(s, _)| *s == store)
            .map(|(_, c)| *c)
            .collect();
        if blocks.is_empty() && loads.is_empty() {
            continue;
        }
        progress.set_message(format!("starting {store}"));
        let running = RunningStore::start(store)?;
        let versions = running.versions();
        note(format!("{store}: {}", versions.join("; ")));
        engine_facts.push((store, versions));
        for block in blocks {
            let block_results = run_block(&running, block, &exe, dir.path(), &progress)?;
            for r in &block_results {
                if let Some(s) = r.summary() {
                    note(format!(
                        "{} {} {}: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} runs{}",
                        r.store,
                        r.case,
                        r.tool.name(),
                        s.p50.as_secs_f64() * 1e3,
                        s.p99.as_secs_f64() * 1e3,
                        s.max.as_secs_f64() * 1e3,
                        s.n,
                        match r.voided.len() {
                            0 => String::new(),
                            n => format!(" ({n} voided and run again)"),
                        }
                    ));
                }
            }
            results.extend(block_results);
        }
        for case in loads {
            progress.set_message(format!("{store} {case}"));
            load_results.push(load::run(&running, case, args.short, &note)?);
        }
        // The engine stops here, before the next one starts.
        drop(running);
    }
    progress.finish_and_clear();

    let facts = Facts {
        command: command_line(),
        date: jiff::Timestamp::now()
            .strftime("%Y-%m-%d %H:%M UTC")
            .to_string(),
        machine: {
            let mut machine = Facts::machine();
            machine.push((
                "load average (1, 5, 15 min)".into(),
                format!(
                    "{load_at_start} at the start, {} at the end",
                    report::load_average()
                ),
            ));
            machine
        },
        engines: engine_facts,
        took: began.elapsed(),
    };
    if !results.is_empty() {
        say!("{}", report::table(&results));
    }
    if !load_results.is_empty() {
        say!("{}", load::markdown(&load_results));
    }
    if let Some(out) = &args.out {
        for path in report::write_markdown(out, &facts, &results, &load_results)? {
            warn_user!("wrote {}", path.display());
        }
    }
    if let Some(path) = &args.json {
        let mut json = report::to_json(&facts, &results);
        json["load"] = load::to_json(&load_results);
        let text = serde_json::to_string_pretty(&json)
            .map_err(|e| BenchError::Failed(format!("JSON: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| BenchError::Failed(format!("cannot write {}: {e}", path.display())))?;
        warn_user!("wrote {}", path.display());
    }
    Ok(())
}

/// One (store, case): every tool's series started, then run after run,
/// the tools taking turns (in reverse order every other round).
fn run_block(
    store: &RunningStore,
    block: &Block,
    exe: &std::path::Path,
    dir: &std::path::Path,
    progress: &ProgressBar,
) -> Result<Vec<SeriesResult>, BenchError> {
    let mut series = Vec::new();
    for tool in block.case.tools(block.store) {
        progress.set_message(format!(
            "{} {}: starting {}",
            block.store,
            block.case,
            tool.name()
        ));
        let mut s = Series::new(store, tool, block.case, exe, dir)?;
        match s.start() {
            Ok(()) => {}
            Err(BenchError::Failed(why)) if s.may_stop_alone() => stop_alone(&mut s, why, 0),
            Err(e) => return Err(e),
        }
        series.push(s);
    }
    for round in 0..block.runs {
        let mut order: Vec<usize> = (0..series.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let s = &mut series[i];
            if s.stopped.is_some() {
                progress.inc(1);
                continue;
            }
            let tag = s.tag().to_owned();
            progress.set_message(format!("{tag}: run {}/{}", round + 1, block.runs));
            let may_stop_alone = s.may_stop_alone();
            match s.run_once() {
                Ok(r) => tracing::debug!(
                    series = tag,
                    handover_ms = r.handover.as_secs_f64() * 1e3,
                    left_running = ?r.left_running,
                    "run"
                ),
                Err(BenchError::Failed(why)) if may_stop_alone => {
                    progress.suspend(|| stop_alone(s, why, round));
                }
                Err(e) => return Err(e),
            }
            progress.inc(1);
        }
    }
    Ok(series.into_iter().map(Series::finish).collect())
}

/// Ends `s` (an engine's own tool) after `done` runs: the report says why.
fn stop_alone(s: &mut Series<'_>, why: String, done: usize) {
    warn_user!("regent bench: {} stopped after {done} runs: {why}", s.tag());
    s.stopped = Some(why);
    s.halt();
}

/// A bar on stderr when that is a terminal; hidden otherwise (CI logs get
/// the plan and one line per series).
fn progress_bar(len: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} (eta {eta}) {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// This binary's path, for commands other programs run (`etcdctl lock`
/// execs it; `consul lock` passes it through `sh -c`, so it must be a
/// plain word).
fn own_path() -> Result<PathBuf, BenchError> {
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::Failed(format!("cannot find regent's own binary: {e}")))?;
    let plain = exe.to_str().is_some_and(|p| {
        p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    });
    if !plain {
        return Err(BenchError::Usage(format!(
            "{}: consul lock runs its command through `sh -c`, so regent's path must be a \
             plain word (letters, digits, / . _ - +)",
            exe.display()
        )));
    }
    Ok(exe)
}

/// The command line as given, `regent` first, each word quoted for `sh`
/// where it needs it.
fn command_line() -> String {
    let mut words = vec!["bench".to_owned()];
    words.extend(
        std::env::args()
            .skip_while(|a| a != "bench")
            .skip(1)
            .map(|a| shell_word(&a)),
    );
    words.join(" ")
}

fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words() {
        assert_eq!(shell_word("--stores"), "--stores");
        assert_eq!(shell_word("sqlite,etcd:crash"), "sqlite,etcd:crash");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
