//! The bench's outputs: a markdown report with a table and an SVG plot per
//! case, the raw samples as JSON, and the summary table on stdout.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::case::{Case, Tool};
use crate::error::BenchError;
use crate::load::report as load_report;
use crate::load::result::LoadResult;
use crate::series::{RunResult, SeriesResult, signal_name};
use crate::stats::Summary;
use crate::store::StoreKind;
use crate::svg;

/// What the report says of the machine and the run.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    /// The harness's arguments, as given, each quoted for `sh` where it
    /// needs it (`--short --stores sqlite,etcd …`).
    pub(crate) command: String,
    /// When it ran (UTC, to the second).
    pub(crate) date: String,
    pub(crate) machine: Vec<(String, String)>,
    /// Per store: its engine's and tools' versions.
    pub(crate) engines: Vec<(StoreKind, Vec<String>)>,
    /// The bench's wall time, from engine start to the last run.
    pub(crate) took: Duration,
}

impl Facts {
    /// The machine's facts: cores, CPU, memory, kernel; the `regent`
    /// binary run (`regent --version`, and its path) and the harness's
    /// build.
    pub(crate) fn machine(regent: &Path) -> Vec<(String, String)> {
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
            .map_or("?".to_owned(), |(_, m)| m.trim().to_owned());
        let memory = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let kb: u64 = m
                    .lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .ok()?;
                Some(format!("{:.1} GiB", kb as f64 / 1024.0 / 1024.0))
            })
            .unwrap_or_else(|| "?".to_owned());
        let uname = rustix::system::uname();
        let kernel = format!(
            "{} {} {}",
            uname.sysname().to_string_lossy(),
            uname.release().to_string_lossy(),
            uname.machine().to_string_lossy()
        );
        let build = if cfg!(debug_assertions) {
            "debug build"
        } else {
            "release build"
        };
        let version = std::process::Command::new(regent)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(|l| l.trim().to_owned())
            })
            .unwrap_or_else(|| "?".to_owned());
        vec![
            ("cores".into(), cores.to_string()),
            ("CPU".into(), cpu),
            ("memory".into(), memory),
            ("kernel".into(), kernel),
            ("regent".into(), format!("{version} ({})", regent.display())),
            (
                "harness".into(),
                format!("regent-bench {} ({build})", env!("CARGO_PKG_VERSION")),
            ),
        ]
    }
}

/// `/proc/loadavg`'s 1, 5 and 15 minute load averages: other work on the
/// machine while the bench ran shows there.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".to_owned())
}

fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The results table, markdown.
pub(crate) fn table(results: &[SeriesResult]) -> String {
    let mut s = String::from(
        "| store | case | tool | ttl | signal | runs | p50 ms | p99 ms | max ms | old command left running |\n\
         |---|---|---|---|---|---:|---:|---:|---:|---|\n",
    );
    for r in results {
        let Some(summary) = r.summary() else { continue };
        let left = match r.left_running() {
            Some(k) => format!("{k} of {}", r.runs.len()),
            None => "no command".to_owned(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {left} |",
            r.store,
            r.case,
            r.tool.name(),
            r.tool.ttl_note(),
            signal_name(r.tool, r.case),
            summary.n,
            ms(summary.p50),
            ms(summary.p99),
            ms(summary.max),
        );
    }
    s
}

/// The plot file of `case` beside the report `out`: `DIR/STEM/CASE.svg`,
/// and the link to it from the report.
fn plot_path(out: &Path, case: Case) -> (PathBuf, String) {
    let stem = out
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("benchmarks")
        .to_owned();
    let dir = out.parent().unwrap_or(Path::new(".")).join(&stem);
    (
        dir.join(format!("{}.svg", case.name())),
        format!("{stem}/{}.svg", case.name()),
    )
}

/// Writes the markdown report to `out` and a plot per case beside it;
/// returns the files written.
pub(crate) fn write_markdown(
    out: &Path,
    facts: &Facts,
    results: &[SeriesResult],
    loads: &[LoadResult],
) -> Result<Vec<PathBuf>, BenchError> {
    let write = |path: &Path, text: &str| {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| BenchError::Failed(format!("cannot create {}: {e}", dir.display())))?;
        }
        std::fs::write(path, text)
            .map_err(|e| BenchError::Failed(format!("cannot write {}: {e}", path.display())))
    };
    let mut written = Vec::new();
    let mut md = String::new();
    let title = if results.is_empty() {
        load_report::title(loads)
    } else {
        "# Leader hand-over: regent beside each engine's own tool"
    };
    let _ = writeln!(md, "{title}\n");
    let _ = writeln!(
        md,
        "Written by `regent-bench` (`crates/regent-bench`) on {} ({:.0} min). To \
         measure again (from the repository's root, engines installed by \
         `scripts/install-engines`; `scripts/bench` builds `regent` and the harness \
         in release mode and runs it):\n\n```sh\nscripts/bench {}\n```\n",
        facts.date,
        facts.took.as_secs_f64() / 60.0,
        facts.command
    );
    if !results.is_empty() {
        let _ = writeln!(md, "## Results\n");
        md.push_str(&table(results));
        md.push('\n');
    }
    let stopped: Vec<&SeriesResult> = results.iter().filter(|r| r.stopped.is_some()).collect();
    if !stopped.is_empty() {
        md.push_str(
            "Series an engine's own tool ended early (its failure, not regent's: the \
             other series ran on, and its row holds the runs it made):\n\n",
        );
        for r in stopped {
            let _ = writeln!(
                md,
                "- {} / {} / {}: after {} runs: {}",
                r.store,
                r.case,
                r.tool.name(),
                r.runs.len(),
                r.stopped.as_deref().unwrap_or_default()
            );
        }
        md.push('\n');
    }
    let voided: Vec<&SeriesResult> = results.iter().filter(|r| !r.voided.is_empty()).collect();
    if !voided.is_empty() {
        md.push_str(
            "Runs voided and run again (the leader's command had ended on its own before \
             the signal: its tool had lost its leadership by itself):\n\n",
        );
        for r in voided {
            let _ = writeln!(
                md,
                "- {} / {} / {}: {} ({})",
                r.store,
                r.case,
                r.tool.name(),
                r.voided.len(),
                r.voided.join("; ")
            );
        }
        md.push('\n');
    }
    if !results.is_empty() {
        md.push_str(
            "Times run from the signal to the leading process to the next leader's start: \
         its command's first instruction for `regent run`, `etcdctl lock` and `consul \
         lock` (the command logs CLOCK_MONOTONIC as it starts), the line a tool prints \
         as it leads for `etcdctl elect` (its proposal) and the Curator participant \
         (`isLeader`), as the bench reads it. In the hand-over cases (`preferred`, \
         `requested`: regent alone; no engine's tool has priorities or takes a request) \
         nothing is signalled: the time runs from the old command's SIGTERM, the `stop` \
         line it logs with CLOCK_MONOTONIC as the signal reaches it, to the next leader's \
         command's `start` line; the time from what set the hand-over off is given \
         below each. p50 and p99 are nearest-rank percentiles. \"Old command left \
         running\": runs in which the old leader's command, or a process of its process \
         group, was alive 0.5 s after the next leader's start, or in which the old \
         command logged its stop only after the next leader's command had logged its \
         start.\n\n",
        );
    }

    for case in Case::ALL {
        let rows: Vec<&SeriesResult> = results.iter().filter(|r| r.case == case).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(md, "### {}\n", case_heading(case));
        let (path, link) = plot_path(out, case);
        let plot_rows: Vec<svg::Row> = rows
            .iter()
            .map(|r| svg::Row {
                label: format!("{} ({})", label(r), r.tool.ttl_note()),
                regent: matches!(r.tool, Tool::Regent { .. }),
                samples: r.samples(),
            })
            .collect();
        write(&path, &svg::strip_plot(case.title(), &plot_rows))?;
        written.push(path);
        let _ = writeln!(
            md,
            "![{}: every run of every tool, log time axis]({link})\n",
            case.title()
        );
        md.push_str(case_text(case));
        md.push('\n');
        md.push_str(&trigger_notes(case, &rows));
        md.push_str(&sigterm_notes(case, &rows));
        if case == Case::Crash {
            md.push_str(&release_notes(&rows));
        }
        md.push_str(&outlived_notes(&rows));
    }
    md.push_str(&compared(results));
    md.push_str(&session_notes(results));

    md.push_str(&load_report::markdown(loads));

    let _ = writeln!(md, "## Machine and engines\n");
    for (k, v) in &facts.machine {
        let _ = writeln!(md, "- {k}: {v}");
    }
    for (store, versions) in &facts.engines {
        let _ = writeln!(md, "- {store}: {}", versions.join("; "));
    }
    md.push('\n');
    if !results.is_empty() {
        md.push_str(METHOD);
    }
    write(out, &md)?;
    written.push(out.to_owned());
    Ok(written)
}

/// p50 / p99 / max of `samples`, in ms, for a table's cells.
fn cells(samples: &[Duration]) -> String {
    match Summary::of(samples) {
        Some(t) => format!("{} | {} | {} | {}", t.n, ms(t.p50), ms(t.p99), ms(t.max)),
        None => "0 | – | – | –".to_owned(),
    }
}

/// One of a run's times, by name: a column of [`trigger_notes`].
type Time = (&'static str, fn(&RunResult) -> Option<Duration>);

/// For the hand-over cases: the time from what set the hand-over off to
/// the new leader's start (and, `requested`, to `regent handover`'s
/// answer), a table of its own beside the main one.
fn trigger_notes(case: Case, rows: &[&SeriesResult]) -> String {
    let columns: &[Time] = match case {
        Case::Preferred => &[(
            "the preferred candidate's start to its command's start",
            |r| r.from_trigger,
        )],
        Case::Requested => &[
            ("`regent handover`'s start to its answer", |r| r.request),
            (
                "`regent handover`'s start to the new command's start",
                |r| r.from_trigger,
            ),
        ],
        Case::Graceful | Case::Crash => return String::new(),
    };
    let mut s = String::from(
        "| store | tool | time | runs | p50 ms | p99 ms | max ms |\n|---|---|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        for (what, time) in columns {
            let _ = writeln!(
                s,
                "| {} | {} | {what} | {} |",
                r.store,
                r.tool.name(),
                cells(&r.samples_of(time))
            );
        }
    }
    s.push('\n');
    if case == Case::Requested {
        for r in rows {
            let answered = r
                .runs
                .iter()
                .filter(|run| run.answered == Some(true))
                .count();
            let _ = writeln!(
                s,
                "- {}: the new leader confirmed the request (`\"answered\": true`) in \
                 {answered} of {} runs",
                label_among(rows, r),
                r.runs.len()
            );
        }
        s.push('\n');
    }
    s
}

/// For the tools that run a command: when the old command got its
/// SIGTERM, counted from the signal to the tool (the hand-over cases:
/// from what set it off) (p50), and how often; after a signal, also the
/// time from that SIGTERM to the next start, as the hand-over cases count.
fn sigterm_notes(case: Case, rows: &[&SeriesResult]) -> String {
    let mut s = String::new();
    let after = match case {
        Case::Graceful | Case::Crash => "the signal",
        Case::Preferred => "the preferred candidate's start",
        Case::Requested => "`regent handover`'s start",
    };
    for r in rows.iter().filter(|r| r.tool.runs_command()) {
        let told: Vec<Duration> = r.runs.iter().filter_map(|run| run.old_stop).collect();
        let from_stop = Summary::of(&r.samples_of(|run| run.from_stop))
            .filter(|_| !case.is_hand_over())
            .map(|f| {
                format!(
                    "; from it to the next start p50 {} ms, p99 {} ms, max {} ms",
                    ms(f.p50),
                    ms(f.p99),
                    ms(f.max)
                )
            })
            .unwrap_or_default();
        let _ = match Summary::of(&told) {
            Some(t) => writeln!(
                s,
                "- {}: the old command had its SIGTERM {} ms after {after} (p50; \
                 {} of {} runs){from_stop}",
                label_among(rows, r),
                ms(t.p50),
                t.n,
                r.runs.len()
            ),
            None => writeln!(
                s,
                "- {}: the old command never had a SIGTERM ({} runs)",
                label_among(rows, r),
                r.runs.len()
            ),
        };
    }
    if !s.is_empty() {
        s.insert_str(
            0,
            "When the old command was told to stop, as it logged it; the rest of the \
             hand-over went to releasing, noticing, acquiring and starting:\n\n",
        );
        s.push('\n');
    }
    s
}

/// For regent's crash rows: whether its supervisor gave the lease back
/// (the hand-over well under the ttl) or the lease expired by its ttl.
fn release_notes(rows: &[&SeriesResult]) -> String {
    let mut s = String::new();
    for r in rows
        .iter()
        .filter(|r| matches!(r.tool, Tool::Regent { .. }))
    {
        let Some(summary) = r.summary() else { continue };
        let given_back = r
            .runs
            .iter()
            .filter(|run| run.handover < r.tool.ttl() / 2)
            .count();
        let _ = writeln!(
            s,
            "- {}: the lease was given back (hand-over under half the ttl) in \
             {given_back} of {} runs{}",
            label_among(rows, r),
            summary.n,
            if given_back == 0 {
                "; it expired by its ttl"
            } else {
                ""
            }
        );
    }
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// For the tools that run a command, when any run's command outlived its
/// tool process: in how many runs.
fn outlived_notes(rows: &[&SeriesResult]) -> String {
    let mut s = String::new();
    for r in rows {
        if let Some(k) = r.left_at_end().filter(|k| *k > 0) {
            let _ = writeln!(
                s,
                "- {}: {k} of {} runs",
                label_among(rows, r),
                r.runs.len()
            );
        }
    }
    if !s.is_empty() {
        s.insert_str(
            0,
            "The old command still ran once its tool process had exited (looked for \
             again then; after a crash, once the tool was reaped), in:\n\n",
        );
        s.push('\n');
    }
    s
}

/// regent's hand-overs side by side, per store, when the bench ran a
/// hand-over case beside `graceful`: the graceful stop counted from the
/// signal and from the old command's SIGTERM, and the hand-overs (from the
/// old command's SIGTERM).
fn compared(results: &[SeriesResult]) -> String {
    let regent = |r: &&SeriesResult| matches!(r.tool, Tool::Regent { .. });
    if !results.iter().filter(regent).any(|r| r.case.is_hand_over()) {
        return String::new();
    }
    let mut s = String::from(
        "### regent's hand-overs side by side\n\n\
         p50 / p99 in ms, regent run only. \"From its SIGTERM\": from the old command's \
         SIGTERM (its `stop` line) to the next command's `start` line, the count of the \
         hand-over cases; the graceful stop's own count, from the signal to `regent run`, \
         adds the signal's way through regent and its supervisor to the command.\n\n\
         | store | ttl | graceful, from the signal | graceful, from its SIGTERM | \
         preferred, from its SIGTERM | requested, from its SIGTERM |\n\
         |---|---|---:|---:|---:|---:|\n",
    );
    let pair = |samples: Vec<Duration>| match Summary::of(&samples) {
        Some(t) => format!("{} / {}", ms(t.p50), ms(t.p99)),
        None => "–".to_owned(),
    };
    let mut seen: Vec<(StoreKind, Tool)> = Vec::new();
    for r in results.iter().filter(regent) {
        if seen.contains(&(r.store, r.tool)) {
            continue;
        }
        seen.push((r.store, r.tool));
        let of = |case: Case| {
            results
                .iter()
                .find(|o| o.store == r.store && o.tool == r.tool && o.case == case)
        };
        let cell = |case: Case, time: fn(&RunResult) -> Option<Duration>| {
            of(case).map_or_else(|| "–".to_owned(), |o| pair(o.samples_of(time)))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            r.store,
            r.tool.ttl_note(),
            cell(Case::Graceful, |run| Some(run.handover)),
            cell(Case::Graceful, |run| run.from_stop),
            cell(Case::Preferred, |run| run.from_stop),
            cell(Case::Requested, |run| run.from_stop),
        );
    }
    s.push('\n');
    s
}

/// On Consul, the lock holders' sessions as Consul held them.
fn session_notes(results: &[SeriesResult]) -> String {
    let mut s = String::new();
    for r in results {
        let Some(session) = &r.session else { continue };
        let _ = writeln!(
            s,
            "- {} / {} / {} ({}): {}",
            r.store,
            r.case,
            r.tool.name(),
            r.tool.ttl_note(),
            session_summary(session)
        );
    }
    if !s.is_empty() {
        s.insert_str(
            0,
            "### Sessions as Consul held them\n\nThe lock holder's session, read back \
             from Consul as each series' first leader led (`GET /v1/kv/KEY`, then `GET \
             /v1/session/info/ID`):\n\n",
        );
        s.push('\n');
    }
    s
}

/// `TTL`, `LockDelay`, `Behavior` and health checks of a
/// `/v1/session/info` entry (Consul 1.8 names them `NodeChecks` and
/// `ServiceChecks`; older versions `Checks`).
fn session_summary(session: &Value) -> String {
    if let Some(error) = session.get("error") {
        return format!("not read: {error}");
    }
    let field = |name: &str| session.get(name).cloned().unwrap_or(Value::Null);
    let lock_delay = match field("LockDelay").as_u64() {
        #[allow(clippy::cast_precision_loss)]
        Some(ns) => format!("{:.0} s", ns as f64 / 1e9),
        None => field("LockDelay").to_string(),
    };
    let mut s = format!(
        "TTL {}, LockDelay {lock_delay}, Behavior {}",
        field("TTL"),
        field("Behavior"),
    );
    for checks in ["Checks", "NodeChecks", "ServiceChecks"] {
        if let Some(v) = session.get(checks) {
            let _ = write!(s, ", {checks} {v}");
        }
    }
    s
}

/// `store / tool`: a series' name in the notes and plots.
fn label(r: &SeriesResult) -> String {
    format!("{} / {}", r.store, r.tool.name())
}

/// [`label`], with the ttl where another of `rows` has the same label
/// (regent at two ttls on the Consul cluster).
fn label_among(rows: &[&SeriesResult], r: &SeriesResult) -> String {
    let same = rows
        .iter()
        .filter(|o| o.store == r.store && o.tool.name() == r.tool.name())
        .count();
    if same > 1 {
        format!("{} ({})", label(r), r.tool.ttl_note())
    } else {
        label(r)
    }
}

fn case_heading(case: Case) -> &'static str {
    match case {
        Case::Graceful => "Graceful stop",
        Case::Crash => "Crash (kill -9)",
        Case::Preferred => "Hand-over to a candidate of higher priority (preferred)",
        Case::Requested => "Hand-over on request (requested)",
    }
}

fn case_text(case: Case) -> &'static str {
    match case {
        Case::Graceful => {
            "The leading process gets its own graceful signal: SIGTERM (`regent run`, \
             `consul lock`, the Curator participant, whose shutdown hook closes its latch \
             and client as a service's would) or SIGINT (`etcdctl elect` resigns on \
             SIGINT only: SIGTERM kills it, and its session would live on for its 60 s). \
             The command exits at once on SIGTERM, so what is timed is the tool's own \
             work: regent stops the command and waits for its whole process tree to be \
             gone, then releases; the follower's watch (etcd, ZooKeeper), blocking query \
             (Consul), wake-up file (SQLite, besides its poll every 100 ms), `LISTEN` \
             (PostgreSQL, woken by the release's `NOTIFY`; behind PgBouncer, on a \
             connection straight to the server; besides its poll every 500 ms) or \
             `SUBSCRIBE` (Redis, woken by the release's `PUBLISH`; besides its poll every \
             500 ms) tells it, \
             and it starts its command through its supervisor. `etcdctl elect` and the Curator participant run no \
             command: they only print.\n"
        }
        Case::Crash => {
            "SIGKILL of the leading tool process alone (`regent run`, not its supervisor \
             or command; `etcdctl lock`, not its command; the participant's JVM). \
             `etcdctl lock`'s lease and the Curator participant's session must expire, \
             at the same ttl as regent's (2 s), counted from their last keep-alive. \
             regent's supervisor outlives regent: it stops the command when regent dies, \
             and once the command's whole process group is gone it gives the lease back \
             by the release ticket regent handed it at the start of the term, so the \
             next leader need not wait for the ttl (where the store's release fails, the \
             lease expires by its ttl). `etcdctl lock` runs its command as a plain \
             child, which runs on.\n"
        }
        Case::Preferred => {
            "regent run alone (the engines' tools have no priorities). The leader runs \
             with `--priority N`; each run starts a candidate with `--priority N+1 --settle \
             1s` (every candidate has that settle time). The leader reads the candidates \
             after each renewal (every ttl/5, 400 ms); once it has seen the new one there \
             for the settle time it hands its term over: it stops its command as on a \
             graceful stop (SIGTERM, then waits for its whole process tree to be gone) and \
             gives the lease to that candidate alone (`release_to`), which starts its \
             command. **The time measured** runs from the old command's SIGTERM (its \
             `stop` line) to the new command's start (its `start` line): the part of the \
             hand-over that a graceful stop also has. The table below gives the whole, \
             from the new candidate's spawn (its process start, its connection and \
             enrollment, the settle time rounded up to the leader's next look, the \
             hand-over). The old leader, a follower now, is then stopped (SIGTERM), and \
             the new leader is the next run's.\n"
        }
        Case::Requested => {
            "regent run alone (the engines' tools take no request). A leader and a \
             follower, without priorities; each run starts `regent handover --store URL \
             --election NAME --to FOLLOWER --json --timeout 20s`. The leader reads the \
             request after its next renewal (every ttl/5, 400 ms), stops its command as \
             on a graceful stop and gives the lease to the follower alone (`release_to`); \
             `regent handover` returns once the new term has begun (and, unless it timed \
             out waiting, the new leader has confirmed the request). **The time \
             measured** runs from the old command's SIGTERM (its `stop` line) to the new \
             command's start (its `start` line). The table below gives the time from \
             `regent handover`'s start (its process start, its connection, the request \
             record, the leader's next look, the hand-over) to its answer on standard \
             output (stamped as the bench read it; it exits right after) and to the new \
             command's start. The old leader, a follower now, is then stopped (SIGTERM) \
             and replaced by a new follower.\n"
        }
    }
}

const METHOD: &str = "## Method

Each store's engine is started by regent's test kit on free ports of \
127.0.0.1 (etcd: one member, heartbeat 10 ms, election timeout 100 ms; \
Consul: a dev agent, one server in memory, which is enough for the graceful \
case; the Consul cluster: three servers and a client agent per candidate, \
as one is deployed; ZooKeeper: one standalone server, tickTime 100 ms; \
PostgreSQL: one server (fsync off), and for `pgbouncer` PgBouncer in \
transaction pooling mode in front of it; Redis: one server without \
persistence, and for `redis-sentinel` a primary and its replica behind three \
Sentinels; SQLite: a file in a temporary directory). PostgreSQL and Redis, \
like SQLite, have no election tool of their own: regent runs alone there. For each store and case, each \
tool keeps two candidates running on an election of its own, a leader and a \
follower, and the tools take turns run by run (the order reversed every \
other round; a store's graceful and hand-over cases, `preferred` and \
`requested`, take turns together), so that a drift of the machine affects \
them alike. A run:

1. waits until the follower stands in line: regent's has logged `following`, \
etcdctl's key exists beside the leader's, `consul lock`'s session exists, the \
Curator participant's node is in the latch's line;
2. waits 0.3 s plus a random part of the holder's renewal interval, so that \
the signal falls anywhere in the renewal cycle;
3. reads CLOCK_MONOTONIC and signals the leading tool process only;
4. waits for the follower to lead: **the time measured** runs to its start;
5. 0.5 s later, looks for the old leader's command (by PID and start time, \
and its process group); then waits for the old tool process to exit, and \
looks again;
6. kills whatever is left of the old leader and starts a new follower in its \
place (on the Consul cluster, on the old leader's agent): the new leader is \
the next run's victim.

The hand-over cases (`preferred`, `requested`; regent alone) differ in steps \
3 and 5: instead of signalling the leader, step 3 starts a candidate of \
higher priority (`preferred`: there is no follower before it) or `regent \
handover --to FOLLOWER` (`requested`); the time measured runs from the old \
command's `stop` line to the new command's `start` line, both on \
CLOCK_MONOTONIC; and in step 5 the old leader, which follows now, is stopped \
with SIGTERM before the second look. In `preferred` no follower is started in \
step 6: the next run starts the next candidate of higher priority.

Every process runs in a process group of its own and is killed by PID and \
process group when the bench ends, on an error or Ctrl-C alike; nothing is \
killed by name. `regent run` runs the hidden `regent __demo-task` as its \
command, and so do `etcdctl lock` and `consul lock` (through `env`, with the \
same variables regent sets). The raw samples: `scripts/bench … --json FILE`.

Consul as a dev agent that every candidate shares is enough for the graceful \
case. On a real topology (three servers, a client agent per candidate, \
sessions read back from Consul) both cases are `scripts/bench --stores \
consul-cluster`.
";

/// Every sample, with the facts, as JSON.
pub(crate) fn to_json(facts: &Facts, results: &[SeriesResult]) -> Value {
    json!({
        "command": facts.command,
        "date": facts.date,
        "took_s": facts.took.as_secs_f64(),
        "machine": facts.machine.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
        "engines": facts.engines.iter().map(|(s, v)| (s.name().to_owned(), Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
        "series": results.iter().map(SeriesResult::to_json).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ms: u64) -> RunResult {
        RunResult {
            old_leader: "a".into(),
            new_leader: "b".into(),
            handover: Duration::from_millis(ms),
            from_stop: None,
            stopped_late: None,
            from_trigger: None,
            request: None,
            answered: None,
            left_running: None,
            left_at_end: None,
            got_sigterm: None,
            old_stop: None,
            old_tool_exit: "exit status: 0".into(),
        }
    }

    fn series(case: Case, runs: Vec<RunResult>) -> SeriesResult {
        SeriesResult {
            store: StoreKind::Sqlite,
            case,
            tool: Tool::Regent {
                ttl: Duration::from_secs(2),
            },
            runs,
            voided: Vec::new(),
            stopped: None,
            session: None,
        }
    }

    fn facts() -> Facts {
        Facts {
            command: "--stores sqlite --cases graceful,preferred,requested".into(),
            date: "2026-11-29 09:00 UTC".into(),
            machine: Vec::new(),
            engines: Vec::new(),
            took: Duration::from_secs(60),
        }
    }

    /// The hand-over cases get rows in the one table, a table of the time
    /// from what set them off, and a comparison with the graceful stop
    /// counted from the old command's SIGTERM; an old command that logged
    /// its stop only after the new start counts as left running.
    #[test]
    fn hand_over_cases_are_reported_beside_the_graceful_stop() {
        let graceful: Vec<RunResult> = [10, 12]
            .into_iter()
            .map(|t| RunResult {
                from_stop: Some(Duration::from_millis(t - 1)),
                stopped_late: Some(false),
                old_stop: Some(Duration::from_millis(1)),
                ..run(t)
            })
            .collect();
        let hand_over = |t: u64, late: bool| RunResult {
            from_stop: (!late).then(|| Duration::from_millis(t)),
            stopped_late: Some(late),
            from_trigger: Some(Duration::from_millis(1500)),
            request: Some(Duration::from_millis(300)),
            answered: Some(true),
            old_stop: Some(Duration::from_millis(1400)),
            left_running: Some(Vec::new()),
            ..run(t)
        };
        let results = [
            series(Case::Graceful, graceful),
            series(
                Case::Preferred,
                vec![hand_over(8, false), hand_over(9, false)],
            ),
            series(
                Case::Requested,
                vec![hand_over(7, false), hand_over(0, true)],
            ),
        ];
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("handover.md");
        let written = write_markdown(&out, &facts(), &results, &[]).unwrap();
        let md = std::fs::read_to_string(&out).unwrap();
        for case in ["preferred", "requested"] {
            assert!(
                written
                    .iter()
                    .any(|p| p.ends_with(format!("handover/{case}.svg"))),
                "{written:?}"
            );
        }
        assert!(
            md.contains(
                "| sqlite | preferred | regent run | --ttl 2s | none: priority N+1 starts, settle 1s | 2 | 8.00 | 9.00 | 9.00 | 0 of 2 |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| sqlite | requested | regent run | --ttl 2s | none: regent handover --to | 2 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 1 of 2 |"),
            "the late stop is left running: {md}"
        );
        assert!(
            md.contains(
                "| sqlite | regent run | the preferred candidate's start to its command's start | 2 | 1500 | 1500 | 1500 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| sqlite | regent run | `regent handover`'s start to its answer | 2 | 300 | 300 | 300 |"),
            "{md}"
        );
        assert!(md.contains("in 2 of 2 runs"), "{md}");
        assert!(md.contains("### regent's hand-overs side by side"), "{md}");
        assert!(
            md.contains(
                "| sqlite | --ttl 2s | 10.0 / 12.0 | 9.00 / 11.0 | 8.00 / 9.00 | 7.00 / 7.00 |"
            ),
            "{md}"
        );
        assert!(md.contains("from it to the next start p50 9.00 ms"), "{md}");
        let json = to_json(&facts(), &results);
        assert_eq!(
            json["series"][1]["signal"],
            "none: priority N+1 starts, settle 1s"
        );
        assert_eq!(
            json["series"][2]["samples"][1]["old_command_stopped_after_new_start"],
            true
        );
        assert_eq!(
            json["series"][2]["samples"][0]["request_to_answer_ms"],
            300.0
        );
        // Without a hand-over case, no comparison.
        let out = dir.path().join("graceful.md");
        write_markdown(&out, &facts(), &results[..1], &[]).unwrap();
        let md = std::fs::read_to_string(&out).unwrap();
        assert!(!md.contains("side by side"), "{md}");
    }

    /// A native tool's series that failed keeps its runs in the table and
    /// says why it stopped, in the markdown and the JSON.
    #[test]
    fn a_series_an_engines_tool_ended_early_is_reported_with_why() {
        let stopped = SeriesResult {
            store: StoreKind::Etcd,
            case: Case::Crash,
            tool: Tool::EtcdctlLock,
            runs: vec![run(1800), run(1900)],
            voided: Vec::new(),
            stopped: Some("the follower did not queue within 30s".into()),
            session: None,
        };
        let facts = Facts {
            command: "regent bench".into(),
            date: "2026-11-27 09:00 UTC".into(),
            machine: Vec::new(),
            engines: Vec::new(),
            took: Duration::from_secs(60),
        };
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("bench.md");
        write_markdown(&out, &facts, std::slice::from_ref(&stopped), &[]).unwrap();
        let md = std::fs::read_to_string(&out).unwrap();
        assert!(
            md.contains(
                "- etcd / crash / etcdctl lock: after 2 runs: the follower did not queue within 30s"
            ),
            "{md}"
        );
        assert!(md.contains("| etcd | crash | etcdctl lock |"), "{md}");
        let json = to_json(&facts, &[stopped]);
        assert_eq!(
            json["series"][0]["stopped_early"],
            "the follower did not queue within 30s"
        );
    }
}
