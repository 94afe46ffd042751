//! The harness's run: the plan, each store's engine in turn, the
//! hand-over series taking turns run by run, the load cases, and the
//! report.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::args::BenchArgs;
use crate::case::Case;
use crate::console::{note, say};
use crate::engines::RunningStore;
use crate::error::{BenchError, EXIT_SUCCESS};
use crate::load::report as load_report;
use crate::plan::{Block, Plan};
use crate::report::{self, Facts};
use crate::series::{Series, SeriesResult};
use crate::store::{StoreKind, is_executable};
use crate::wait::catch_interrupts;

/// Runs the harness: blocking, with no runtime (the engines' API and the
/// waits are blocking; the load cases start their own).
pub(crate) fn main(args: &BenchArgs) -> ExitCode {
    match bench(args) {
        Ok(()) => ExitCode::from(EXIT_SUCCESS),
        Err(e) => {
            match &e {
                BenchError::Usage(m) | BenchError::Failed(m) => note(&format!("regent-bench: {m}")),
                BenchError::Interrupted => {
                    note("regent-bench: interrupted; everything it started is stopped");
                }
            }
            ExitCode::from(e.exit_code())
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
    let regent = regent_path(args.regent.as_deref())?;
    let harness = std::env::current_exe()
        .map_err(|e| BenchError::Failed(format!("cannot find the harness's own binary: {e}")))?;
    let scale = args.scale_options();
    catch_interrupts()?;
    let dir = tempfile::Builder::new()
        .prefix("regent-bench-")
        .tempdir()
        .map_err(|e| BenchError::Failed(format!("a temporary directory: {e}")))?;

    let progress = progress_bar(plan.total_runs());
    let progress_note = |line: String| progress.suspend(|| note(&line));
    progress_note(format!(
        "regent-bench: {} runs in all ({})",
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
        let loads: Vec<crate::case::LoadCase> = plan
            .loads
            .iter()
            .filter(|(s, _)| *s == store)
            .map(|(_, c)| *c)
            .collect();
        if blocks.is_empty() && loads.is_empty() {
            continue;
        }
        progress.set_message(format!("starting {store}"));
        let running = RunningStore::start(store, args.sqlite_dir.as_deref())?;
        let versions = running.versions();
        progress_note(format!("{store}: {}", versions.join("; ")));
        engine_facts.push((store, versions));
        for group in groups(&blocks) {
            let block_results = run_blocks(&running, &group, &regent, dir.path(), &progress)?;
            for r in &block_results {
                if let Some(s) = r.summary() {
                    progress_note(format!(
                        "{} {} {} ({}): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} runs{}",
                        r.store,
                        r.case,
                        r.tool.name(),
                        r.tool.ttl_note(),
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
            load_results.push(crate::load::run(
                &running,
                case,
                (plan.load_runs(case), args.short),
                &scale,
                (&harness, dir.path()),
                &progress_note,
            )?);
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
            let mut machine = Facts::machine(&regent);
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
        say(&report::table(&results));
    }
    if !load_results.is_empty() {
        say(&load_report::markdown(&load_results));
    }
    if let Some(out) = &args.out {
        for path in report::write_markdown(out, &facts, &results, &load_results)? {
            note(&format!("wrote {}", path.display()));
        }
    }
    if let Some(path) = &args.json {
        let mut json = report::to_json(&facts, &results);
        json["load"] = load_report::to_json(&load_results);
        let text = serde_json::to_string_pretty(&json)
            .map_err(|e| BenchError::Failed(format!("JSON: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| BenchError::Failed(format!("cannot write {}: {e}", path.display())))?;
        note(&format!("wrote {}", path.display()));
    }
    Ok(())
}

/// A store's blocks, grouped into those whose series take turns: each
/// block alone, except that the hand-over cases (`preferred`,
/// `requested`) and `graceful` run together, so that a drift of the
/// machine affects the hand-overs and the graceful stop they are compared
/// with alike.
fn groups<'b>(blocks: &[&'b Block]) -> Vec<Vec<&'b Block>> {
    if !blocks.iter().any(|b| b.case.is_hand_over()) {
        return blocks.iter().map(|b| vec![*b]).collect();
    }
    let (together, apart): (Vec<&Block>, Vec<&Block>) = blocks
        .iter()
        .partition(|b| b.case == Case::Graceful || b.case.is_hand_over());
    std::iter::once(together)
        .chain(apart.into_iter().map(|b| vec![b]))
        .collect()
}

/// One or more (store, case) blocks: every tool's series started, then run
/// after run, the series taking turns (in reverse order every other
/// round), each until its block's runs are done.
fn run_blocks(
    store: &RunningStore,
    blocks: &[&Block],
    regent: &Path,
    dir: &Path,
    progress: &ProgressBar,
) -> Result<Vec<SeriesResult>, BenchError> {
    let mut series = Vec::new();
    for block in blocks {
        for tool in block.case.tools(block.store) {
            progress.set_message(format!(
                "{} {}: starting {}",
                block.store,
                block.case,
                tool.name()
            ));
            let mut s = Series::new(store, tool, block.case, regent, dir)?;
            match s.start() {
                Ok(()) => {}
                Err(BenchError::Failed(why)) if s.may_stop_alone() => stop_alone(&mut s, why, 0),
                Err(e) => return Err(e),
            }
            series.push((s, block.runs));
        }
    }
    let rounds = blocks.iter().map(|b| b.runs).max().unwrap_or(0);
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..series.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (s, runs) = &mut series[i];
            if round >= *runs {
                continue;
            }
            if s.stopped.is_some() {
                progress.inc(1);
                continue;
            }
            let tag = s.tag().to_owned();
            progress.set_message(format!("{tag}: run {}/{runs}", round + 1));
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
    Ok(series.into_iter().map(|(s, _)| s.finish()).collect())
}

/// Ends `s` (an engine's own tool) after `done` runs: the report says why.
fn stop_alone(s: &mut Series<'_>, why: String, done: usize) {
    note(&format!(
        "regent-bench: {} stopped after {done} runs: {why}",
        s.tag()
    ));
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

/// The `regent` binary the candidates run: `given`, else `$REGENT_BIN`,
/// else `regent` beside the harness's own executable. It must exist, and
/// be a plain word: `consul lock` passes it through `sh -c`.
fn regent_path(given: Option<&Path>) -> Result<PathBuf, BenchError> {
    let from_env = std::env::var_os("REGENT_BIN")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let (path, whence) = match (given, from_env) {
        (Some(p), _) => (p.to_owned(), "--regent"),
        (None, Some(p)) => (p, "REGENT_BIN"),
        (None, None) => {
            let exe = std::env::current_exe().map_err(|e| {
                BenchError::Failed(format!("cannot find the harness's own binary: {e}"))
            })?;
            let beside = exe.with_file_name("regent");
            (beside, "beside regent-bench")
        }
    };
    if !is_executable(&path) {
        return Err(BenchError::Usage(format!(
            "no regent binary at {} ({whence}): build it with `cargo build --release -p \
             regent-cli -p regent-bench` (scripts/bench does), or name one with --regent PATH",
            path.display()
        )));
    }
    let path = std::path::absolute(&path)
        .map_err(|e| BenchError::Failed(format!("{}: {e}", path.display())))?;
    let plain = path.to_str().is_some_and(|p| {
        p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    });
    if !plain {
        return Err(BenchError::Usage(format!(
            "{}: consul lock runs its command through `sh -c`, so regent's path must be a \
             plain word (letters, digits, / . _ - +)",
            path.display()
        )));
    }
    Ok(path)
}

/// The harness's arguments as given, each quoted for `sh` where it needs
/// it: what follows `scripts/bench` in the report.
fn command_line() -> String {
    std::env::args()
        .skip(1)
        .map(|a| shell_word(&a))
        .collect::<Vec<_>>()
        .join(" ")
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

    /// The hand-over cases take turns with graceful on the same store; the
    /// crash, and every case of a bench without them, runs alone.
    #[test]
    fn hand_overs_take_turns_with_the_graceful_stop() {
        let plan = Plan::resolve(
            Some("etcd"),
            Some("graceful,crash,preferred,requested"),
            Some(3),
            false,
            |_| Ok(()),
        )
        .unwrap();
        let blocks: Vec<&Block> = plan.blocks.iter().collect();
        let cases: Vec<Vec<Case>> = groups(&blocks)
            .iter()
            .map(|g| g.iter().map(|b| b.case).collect())
            .collect();
        assert_eq!(
            cases,
            [
                vec![Case::Graceful, Case::Preferred, Case::Requested],
                vec![Case::Crash]
            ]
        );
        let plan = Plan::resolve(Some("etcd"), None, Some(3), false, |_| Ok(())).unwrap();
        let blocks: Vec<&Block> = plan.blocks.iter().collect();
        assert_eq!(groups(&blocks).len(), 2);
    }

    #[test]
    fn shell_words() {
        assert_eq!(shell_word("--stores"), "--stores");
        assert_eq!(shell_word("sqlite,etcd:crash"), "sqlite,etcd:crash");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
