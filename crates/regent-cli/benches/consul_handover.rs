//! regent and `consul lock` side by side on one Consul cluster: how long a
//! hand-over takes when the leading process is stopped (SIGTERM) or
//! crashes (SIGKILL), and whether the old leader's command outlives it.
//!
//! ```text
//! cargo bench -p regent-cli --all-features --bench consul_handover -- [--runs N] [--json FILE] [--case graceful|crash]
//! ```
//!
//! # Setup
//!
//! One [`ConsulCluster`] from the test kit: three servers and four client
//! agents on `127.0.0.1`. regent's candidates talk to agents 0 and 1,
//! `consul lock`'s to agents 2 and 3; every candidate talks only to its own
//! agent, as a real deployment would (one agent per host). Each series
//! below has a key of its own in the cluster (regent: the election
//! `bench-…`, key `regent/bench-…`; `consul lock`: the prefix
//! `bench/consul-lock-…`, key `…/.lock`).
//!
//! The tools, each as a user would run it:
//!
//! * `regent run --store consul://AGENT --election NAME --id ID --ttl T --
//!   regent __demo-task --log LOG --log-stop`, once with `--ttl 15s`
//!   (`consul lock`'s session TTL) and once with regent's default 10 s;
//! * `consul lock -http-addr=AGENT PREFIX env REGENT_LEADER_ID=ID
//!   REGENT_FENCING_TOKEN=N regent __demo-task --log LOG --log-stop`, with
//!   every option at its default (session TTL 15 s and Consul's default
//!   lock delay of 15 s: the bench reads the holder's session back from
//!   Consul and reports what it really was). `consul lock` joins the
//!   command's words and runs them with `$SHELL -c`; the bench sets
//!   `SHELL=/bin/sh`, what a service without a login shell gets. Debian's
//!   `sh` (dash) forks the command rather than exec'ing it, so the
//!   process `consul lock` signals is the shell, not the command;
//! * for SIGTERM also `consul lock … PREFIX exec env …`: the shell execs
//!   the command, which becomes `consul lock`'s own child.
//!
//! Both run the same child: regent's hidden demo task, which appends
//! `start ID TOKEN MONO_NS PID` to the series' log as it starts, and
//! `stop …` when SIGTERM reaches it (`MONO_NS`: CLOCK_MONOTONIC, the clock
//! this bench reads too; `PID` as `/proc` names it). regent gives it its id
//! and fencing token in the environment; for `consul lock`, `env` sets the
//! same variables, with the number of the candidate as the "token".
//!
//! # Method
//!
//! Each series (one tool, one ttl, one case) keeps two candidates running,
//! one leading and one following. A run:
//!
//! 1. waits until the follower is ready: regent's logs `following` (its
//!    first look at the key found it held and it now watches it); `consul
//!    lock`'s has created its session on its agent (its blocking query on
//!    the key follows within milliseconds), then waits 300 ms more;
//! 2. waits 1 s plus a random part of the holder's renewal interval
//!    (regent: a fifth of its ttl, its default; `consul lock`: half its
//!    TTL, as Go's `api.Session.RenewPeriodic` renews), so that the signal
//!    falls at a random point of the renewal cycle, which decides how long
//!    Consul keeps a dead holder's session;
//! 3. reads CLOCK_MONOTONIC and sends the signal to the leading **tool
//!    process** only (regent or `consul lock`; never to its child):
//!    SIGTERM in the `graceful` case, SIGKILL in the `crash` case;
//! 4. waits for the follower's child to log its start: **the measured
//!    time** is that start's timestamp minus the signal's;
//! 5. 1 s after that start, checks whether the old leader's child is still
//!    alive: its PID (the same process, by its start time) or any live
//!    process left in its process group (the tool process itself aside),
//!    and whether it logged `stop` (SIGTERM reached it);
//! 6. waits for the old tool process to exit (SIGTERM: up to 30 s; SIGKILL:
//!    at once) and checks again: a child alive then is **left running**;
//! 7. kills whatever of the old leader is left (by PID and process group),
//!    and starts a new candidate on the old leader's agent, which follows.
//!    The new leader is the next run's victim, so leader and follower swap
//!    agents every run.
//!
//! The first run of a series also reads the lock holder's session from
//! Consul (`GET /v1/kv/KEY` for its id, then `GET /v1/session/info/ID`)
//! and reports its `TTL`, `LockDelay`, `Behavior` and health checks.
//!
//! # What the numbers mean
//!
//! SIGTERM: the time to release the lock and for the follower to notice,
//! acquire and start its child. SIGKILL: nobody releases the lock, so the
//! follower waits for Consul to invalidate the holder's session (Consul
//! runs session timers at twice the TTL, counted from the last renewal),
//! plus the session's lock delay, plus however the tool retries an acquire
//! refused during that delay. The old child: regent runs it under a
//! supervisor that stops it when regent dies, even by SIGKILL; `consul
//! lock` runs it as a plain child.
//!
//! Every process the bench starts runs in a process group of its own and
//! is killed by PID and process group when its guard drops, on success,
//! panic or Ctrl-C (SIGINT or SIGTERM makes the next wait panic) alike;
//! nothing is killed by name. Every wait is bounded
//! and panics naming what it waited for, with the tools' stderr and the
//! child log.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use regent_testkit::engines::{Consul, ConsulCluster};
use rustix::process::{Pid, Signal};
use serde_json::{Value, json};

/// The regent binary of this build.
const REGENT: &str = env!("CARGO_BIN_EXE_regent");

/// `consul lock`'s session TTL: `api.DefaultLockSessionTTL` of Consul's Go
/// client. The bench reports the TTL Consul really holds next to it.
const CONSUL_LOCK_TTL: Duration = Duration::from_secs(15);

/// Consul's default session lock delay, which `consul lock` keeps.
const CONSUL_LOCK_DELAY: Duration = Duration::from_secs(15);

/// How often `consul lock` (Go's `api.Lock`) retries an acquire that the
/// lock delay refused: `api.DefaultLockRetryTime`.
const CONSUL_LOCK_RETRY: Duration = Duration::from_secs(5);

/// Client agents: regent's candidates use the first pair, `consul lock`'s
/// the second.
const AGENTS: usize = 4;

/// How long after the new leader's start the old child is checked.
const AFTER_START: Duration = Duration::from_secs(1);

/// Bound on a tool process's exit after SIGTERM.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Bound on a candidate becoming leader or follower when started.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Set by SIGINT or SIGTERM to the bench: every wait then panics, and the
/// guards kill what the bench started.
static INTERRUPTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(Arc::default);

fn main() {
    let options = Options::parse();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&INTERRUPTED))
            .expect("catch SIGINT and SIGTERM");
    }

    let dir = tempfile::Builder::new()
        .prefix("regent-consul-bench-")
        .tempdir()
        .expect("a temporary directory");
    for path in [Path::new(REGENT), dir.path()] {
        assert!(
            path.to_str().is_some_and(|p| p
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))),
            "{}: consul lock runs its child through `sh -c`, so this path must be a plain word",
            path.display()
        );
    }

    eprintln!("starting a Consul cluster: 3 servers, {AGENTS} client agents");
    let cluster = ConsulCluster::start(AGENTS)
        .unwrap_or_else(|e| panic!("cannot start a Consul cluster with {AGENTS} agents: {e}"));
    let consul_version = consul_version(cluster.agent(0));
    eprintln!("{consul_version}; {} runs per series", options.runs);

    let mut results = Vec::new();
    for case in options.cases() {
        for tool in tools(case) {
            let mut series = Series::new(&cluster, dir.path(), tool, case);
            results.push(series.measure(options.runs));
            series.shut_down();
        }
    }
    drop(cluster);

    let table = markdown_table(&results);
    println!("{table}");
    if let Some(path) = &options.json {
        let report = json!({
            "consul_version": consul_version,
            "cluster": { "servers": ConsulCluster::SERVERS, "client_agents": AGENTS },
            "runs_per_series": options.runs,
            "series": results.iter().map(SeriesResult::to_json).collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&report).expect("JSON");
        std::fs::write(path, text + "\n")
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        eprintln!("wrote {}", path.display());
    }
}

/// The tools of a case: regent at `consul lock`'s TTL and at its own
/// default, `consul lock` as it comes, and, for SIGTERM, `consul lock` with
/// an `exec`'d command (after SIGKILL nobody signals the child either way).
fn tools(case: Case) -> Vec<Tool> {
    let mut tools = vec![
        Tool::Regent {
            ttl: Duration::from_secs(15),
        },
        Tool::Regent {
            ttl: Duration::from_secs(10),
        },
        Tool::ConsulLock { exec: false },
    ];
    if case == Case::Graceful {
        tools.push(Tool::ConsulLock { exec: true });
    }
    tools
}

// ------------------------------------------------------------------ options

/// The bench's command line (after `cargo bench … --`).
struct Options {
    runs: usize,
    json: Option<PathBuf>,
    case: Option<Case>,
}

impl Options {
    fn parse() -> Self {
        let mut options = Self {
            runs: 5,
            json: None,
            case: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |flag: &str| {
                args.next()
                    .unwrap_or_else(|| panic!("{flag} needs a value"))
            };
            match arg.as_str() {
                // cargo bench passes it to every bench binary.
                "--bench" => {}
                "--runs" => {
                    options.runs = value("--runs")
                        .parse()
                        .ok()
                        .filter(|n| *n >= 1)
                        .expect("--runs takes a positive number");
                }
                "--json" => options.json = Some(value("--json").into()),
                "--case" => {
                    options.case = Some(match value("--case").as_str() {
                        "graceful" => Case::Graceful,
                        "crash" => Case::Crash,
                        other => panic!("--case is graceful or crash, not {other:?}"),
                    });
                }
                other => panic!(
                    "unknown argument {other:?}; usage: consul_handover [--runs N] [--json FILE] \
                     [--case graceful|crash]"
                ),
            }
        }
        options
    }

    fn cases(&self) -> Vec<Case> {
        match self.case {
            Some(case) => vec![case],
            None => vec![Case::Graceful, Case::Crash],
        }
    }
}

// ------------------------------------------------------------------ what is measured

/// How the leading tool process is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// SIGTERM: the tool may stop its child and release the lock.
    Graceful,
    /// SIGKILL of the tool process alone, as a crash.
    Crash,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Self::Graceful => "graceful (SIGTERM)",
            Self::Crash => "crash (kill -9)",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Self::Graceful => "graceful",
            Self::Crash => "crash",
        }
    }

    fn signal(self) -> Signal {
        match self {
            Self::Graceful => Signal::TERM,
            Self::Crash => Signal::KILL,
        }
    }
}

/// The tool under test.
#[derive(Debug, Clone, Copy)]
enum Tool {
    /// `regent run` with this `--ttl`.
    Regent { ttl: Duration },
    /// `consul lock` with its defaults; with `exec`, the child command
    /// starts with `exec`, so that the shell `consul lock` runs it with
    /// becomes the child itself.
    ConsulLock { exec: bool },
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Self::Regent { .. } => "regent",
            Self::ConsulLock { exec: false } => "consul lock",
            Self::ConsulLock { exec: true } => "consul lock, `exec` CMD",
        }
    }

    fn ttl(self) -> Duration {
        match self {
            Self::Regent { ttl } => ttl,
            Self::ConsulLock { .. } => CONSUL_LOCK_TTL,
        }
    }

    fn tag(self) -> String {
        match self {
            Self::Regent { ttl } => format!("regent-ttl{}", ttl.as_secs()),
            Self::ConsulLock { exec: false } => "consul-lock".to_owned(),
            Self::ConsulLock { exec: true } => "consul-lock-exec".to_owned(),
        }
    }

    /// How often the holder renews its session: regent's default (a fifth
    /// of the ttl); `consul lock` renews at half the session TTL.
    fn renew_every(self) -> Duration {
        match self {
            Self::Regent { ttl } => ttl / 5,
            Self::ConsulLock { .. } => CONSUL_LOCK_TTL / 2,
        }
    }

    /// The client agents of its two candidates.
    fn agents(self) -> [usize; 2] {
        match self {
            Self::Regent { .. } => [0, 1],
            Self::ConsulLock { .. } => [2, 3],
        }
    }

    /// The longest a hand-over may take before the bench gives up: Consul
    /// invalidates a session within two TTLs of its last renewal, then the
    /// lock delay and the tool's retry, plus a margin for a busy machine.
    fn handover_bound(self, case: Case) -> Duration {
        let margin = Duration::from_secs(20);
        match (case, self) {
            (Case::Graceful, _) => margin,
            (Case::Crash, Self::Regent { ttl }) => 2 * ttl + margin,
            (Case::Crash, Self::ConsulLock { .. }) => {
                2 * CONSUL_LOCK_TTL + CONSUL_LOCK_DELAY + CONSUL_LOCK_RETRY + margin
            }
        }
    }
}

/// One run of a series.
#[derive(Debug)]
struct RunResult {
    old_leader: String,
    new_leader: String,
    /// Signal to the new leader's child start.
    handover: Duration,
    /// Processes of the old leader's child alive 1 s after the new start.
    alive_after_start: Vec<i32>,
    /// … and once the old tool process had exited.
    alive_at_end: Vec<i32>,
    /// How the old tool process ended (`None`: it did not exit in time).
    old_tool_exit: Option<ExitStatus>,
    /// Whether the old child logged `stop`: SIGTERM reached it.
    old_child_got_sigterm: bool,
}

/// A series: one tool, one ttl, one case, several runs.
#[derive(Debug)]
struct SeriesResult {
    tool: Tool,
    case: Case,
    key: String,
    runs: Vec<RunResult>,
    /// The lock holder's session as Consul holds it.
    session: Value,
}

impl SeriesResult {
    fn durations(&self) -> Vec<Duration> {
        let mut d: Vec<Duration> = self.runs.iter().map(|r| r.handover).collect();
        d.sort();
        d
    }

    fn p50(&self) -> Duration {
        let d = self.durations();
        let n = d.len();
        if n % 2 == 1 {
            d[n / 2]
        } else {
            (d[n / 2 - 1] + d[n / 2]) / 2
        }
    }

    fn left_running_after_start(&self) -> usize {
        self.runs
            .iter()
            .filter(|r| !r.alive_after_start.is_empty())
            .count()
    }

    fn left_running_at_end(&self) -> usize {
        self.runs
            .iter()
            .filter(|r| !r.alive_at_end.is_empty())
            .count()
    }

    fn got_sigterm(&self) -> usize {
        self.runs.iter().filter(|r| r.old_child_got_sigterm).count()
    }

    fn to_json(&self) -> Value {
        let d = self.durations();
        json!({
            "case": self.case.tag(),
            "tool": self.tool.name(),
            "ttl_s": self.tool.ttl().as_secs_f64(),
            "key": self.key,
            "p50_s": self.p50().as_secs_f64(),
            "min_s": d.first().map(Duration::as_secs_f64),
            "max_s": d.last().map(Duration::as_secs_f64),
            "old_child_alive_1s_after_new_start": self.left_running_after_start(),
            "old_child_left_running": self.left_running_at_end(),
            "old_child_got_sigterm": self.got_sigterm(),
            "holder_session": self.session,
            "runs": self.runs.iter().map(|r| json!({
                "old_leader": r.old_leader,
                "new_leader": r.new_leader,
                "handover_s": r.handover.as_secs_f64(),
                "old_child_alive_1s_after_new_start": r.alive_after_start,
                "old_child_alive_at_end": r.alive_at_end,
                "old_tool_exit": r.old_tool_exit.map(describe_exit),
                "old_child_got_sigterm": r.old_child_got_sigterm,
            })).collect::<Vec<_>>(),
        })
    }
}

fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => format!("{status}"),
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn markdown_table(results: &[SeriesResult]) -> String {
    let mut s = String::from(
        "| case | tool | ttl | runs | p50 | min | max | old child alive 1 s after new start | old child left running | old child got SIGTERM |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in results {
        let d = r.durations();
        let n = r.runs.len();
        let _ = writeln!(
            s,
            "| {} | {} | {} s | {n} | {} | {} | {} | {} of {n} | {} of {n} | {} of {n} |",
            r.case.name(),
            r.tool.name(),
            r.tool.ttl().as_secs(),
            secs(r.p50()),
            secs(d[0]),
            secs(d[n - 1]),
            r.left_running_after_start(),
            r.left_running_at_end(),
            r.got_sigterm(),
        );
    }
    s.push_str("\nLock holders' sessions as Consul held them:\n\n");
    for r in results {
        let _ = writeln!(
            s,
            "- {} / {} (ttl {} s), key `{}`: {}",
            r.case.tag(),
            r.tool.name(),
            r.tool.ttl().as_secs(),
            r.key,
            session_summary(&r.session)
        );
    }
    s
}

/// `TTL`, `LockDelay`, `Behavior` and health checks of a
/// `/v1/session/info` entry (Consul 1.8 names them `NodeChecks` and
/// `ServiceChecks`; older versions `Checks`).
fn session_summary(session: &Value) -> String {
    let field = |name: &str| session.get(name).cloned().unwrap_or(Value::Null);
    let lock_delay = match field("LockDelay").as_u64() {
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

// ------------------------------------------------------------------ a series

/// Two candidates of one tool on one key, a leader and a follower, and the
/// child log they share. Dropping it kills both candidates' process trees
/// and every leader child it saw start that is still alive.
struct Series<'a> {
    cluster: &'a ConsulCluster,
    tool: Tool,
    case: Case,
    /// `regent-ttl15-crash`, …: names the election or prefix, the files
    /// and the candidates.
    tag: String,
    dir: PathBuf,
    log: PathBuf,
    /// The Consul KV key of the lock.
    key: String,
    /// The two candidates: `slots[i]` talks to agent `tool.agents()[i]`.
    slots: [Option<ToolProcess>; 2],
    /// Which slot leads.
    leader: usize,
    /// Every leader child seen, so that none outlives the bench.
    children: Vec<ChildProcess>,
    /// How many candidates were started: numbers their names.
    started: usize,
}

impl<'a> Series<'a> {
    fn new(cluster: &'a ConsulCluster, root: &Path, tool: Tool, case: Case) -> Self {
        let tag = format!("{}-{}", tool.tag(), case.tag());
        let dir = root.join(&tag);
        std::fs::create_dir_all(&dir).expect("series directory");
        let key = match tool {
            Tool::Regent { .. } => format!("regent/bench-{tag}"),
            Tool::ConsulLock { .. } => format!("bench/{tag}/.lock"),
        };
        Self {
            cluster,
            tool,
            case,
            log: dir.join("children.log"),
            dir,
            tag,
            key,
            slots: [None, None],
            leader: 0,
            children: Vec::new(),
            started: 0,
        }
    }

    fn agent(&self, slot: usize) -> &'a Consul {
        self.cluster.agent(self.tool.agents()[slot])
    }

    /// Runs the series: a first leader and follower, then `runs` hand-overs.
    fn measure(&mut self, runs: usize) -> SeriesResult {
        eprintln!("== {}: {} runs", self.tag, runs);
        let first = self.spawn(0);
        self.wait_child_start(&first, START_TIMEOUT, "the first leader's child to start");
        self.leader = 0;
        let session = self.holder_session();
        eprintln!("   holder session: {}", session_summary(&session));
        self.spawn_follower(1);

        let mut results = Vec::with_capacity(runs);
        for run in 1..=runs {
            let r = self.run_once();
            eprintln!(
                "   run {run}/{runs}: {} -> {}: {:.3} s; old child alive 1 s after: {:?}, at end: {:?}; got SIGTERM: {}; old tool: {}",
                r.old_leader,
                r.new_leader,
                r.handover.as_secs_f64(),
                r.alive_after_start,
                r.alive_at_end,
                r.old_child_got_sigterm,
                r.old_tool_exit
                    .map_or("did not exit".to_owned(), describe_exit),
            );
            results.push(r);
        }
        SeriesResult {
            tool: self.tool,
            case: self.case,
            key: self.key.clone(),
            runs: results,
            session,
        }
    }

    /// One hand-over: signal the leader, time the follower's child start,
    /// look for the old child, replace the old leader by a new follower.
    fn run_once(&mut self) -> RunResult {
        let (old, new) = (self.leader, 1 - self.leader);
        let old_name = self.slot(old).name.clone();
        let new_name = self.slot(new).name.clone();
        let old_pid = self.slot(old).pid;
        let old_child = self
            .children
            .iter()
            .find(|c| c.leader == old_name)
            .cloned()
            .unwrap_or_else(|| panic!("no child of the leader {old_name} seen\n{}", self.report()));

        let renew_ms = u64::try_from(self.tool.renew_every().as_millis()).expect("ms");
        pause(Duration::from_millis(1000 + fastrand::u64(..renew_ms)));
        assert!(
            old_child.alive_processes(old_pid).contains(&old_child.pid),
            "the leader's child {} died before the signal\n{}",
            old_child.pid,
            self.report()
        );
        let signalled_at = mono_ns();
        signal(old_pid, self.case.signal());
        let started = self.wait_child_start(
            &new_name,
            self.tool.handover_bound(self.case),
            &format!(
                "{new_name}'s child to start after the leader's {:?}",
                self.case
            ),
        );
        let handover = Duration::from_nanos(started.mono_ns.saturating_sub(signalled_at));
        self.leader = new;

        let check_at = started.mono_ns + AFTER_START.as_nanos() as u64;
        pause(Duration::from_nanos(check_at.saturating_sub(mono_ns())));
        let alive_after_start = old_child.alive_processes(old_pid);
        let exit_within = match self.case {
            Case::Graceful => EXIT_TIMEOUT,
            Case::Crash => Duration::from_secs(5),
        };
        let old_tool_exit = self.slot_mut(old).wait_exit(exit_within);
        let alive_at_end = old_child.alive_processes(old_pid);
        let old_child_got_sigterm = read_log(&self.log)
            .iter()
            .any(|e| e.event == "stop" && e.pid == old_child.pid);

        // Clear the field for the next run: nothing of the old leader stays.
        old_child.kill();
        self.slots[old] = None;
        self.spawn_follower(old);
        RunResult {
            old_leader: old_name,
            new_leader: new_name,
            handover,
            alive_after_start,
            alive_at_end,
            old_tool_exit,
            old_child_got_sigterm,
        }
    }

    fn slot(&self, i: usize) -> &ToolProcess {
        self.slots[i].as_ref().expect("a candidate in the slot")
    }

    fn slot_mut(&mut self, i: usize) -> &mut ToolProcess {
        self.slots[i].as_mut().expect("a candidate in the slot")
    }

    /// Starts a candidate in `slot`; returns its name.
    fn spawn(&mut self, slot: usize) -> String {
        self.started += 1;
        let number = self.started;
        let name = format!("{}-{number}", self.tag);
        let agent = self.agent(slot);
        let log = self.log.display().to_string();
        let mut command = match self.tool {
            Tool::Regent { ttl } => {
                let mut c = Command::new(REGENT);
                c.args(["run", "--store"])
                    .arg(format!("consul://{}", agent.address()))
                    .args(["--election", &format!("bench-{}", self.tag)])
                    .args(["--id", &name])
                    .arg("--ttl")
                    .arg(format!("{}s", ttl.as_secs()))
                    .args(["--", REGENT, "__demo-task", "--log", &log, "--log-stop"])
                    // "following" is logged at debug.
                    .env("REGENT_LOG", "info,regent_core::candidate=debug");
                c
            }
            Tool::ConsulLock { exec } => {
                let prefix = self
                    .key
                    .strip_suffix("/.lock")
                    .expect("consul lock's key is PREFIX/.lock");
                let mut c = agent.consul_command();
                c.arg("lock")
                    .arg(format!("-http-addr={}", agent.address()))
                    .arg(prefix)
                    .args(exec.then_some("exec"))
                    .args([
                        "env",
                        &format!("REGENT_LEADER_ID={name}"),
                        &format!("REGENT_FENCING_TOKEN={number}"),
                        REGENT,
                        "__demo-task",
                        "--log",
                        &log,
                        "--log-stop",
                    ])
                    // consul lock runs the child with $SHELL -c.
                    .env("SHELL", "/bin/sh");
                c
            }
        };
        let process = ToolProcess::spawn(&name, &mut command, &self.dir);
        self.slots[slot] = Some(process);
        name
    }

    /// Starts a candidate in `slot` and waits until it follows.
    fn spawn_follower(&mut self, slot: usize) {
        let node = self.agent(slot).node().to_owned();
        let sessions_before = self.sessions_of(&node);
        let name = self.spawn(slot);
        let what = format!("{name} to follow");
        let until = Instant::now() + START_TIMEOUT;
        loop {
            check_interrupted(&what);
            let ready = match self.tool {
                Tool::Regent { .. } => self.slot(slot).stderr().contains("following"),
                // Its session exists once `api.Lock` has begun; its
                // blocking query on the key follows at once.
                Tool::ConsulLock { .. } => self
                    .sessions_of(&node)
                    .iter()
                    .any(|s| !sessions_before.contains(s)),
            };
            if ready {
                break;
            }
            if let Some(status) = self.slot_mut(slot).try_status() {
                panic!("{name} exited ({status}) before {what}\n{}", self.report());
            }
            if Instant::now() >= until {
                panic!(
                    "timed out after {START_TIMEOUT:?} waiting for {what}\n{}",
                    self.report()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(self.tool, Tool::ConsulLock { .. }) {
            pause(Duration::from_millis(300));
        }
        if let Some(start) = read_starts(&self.log).into_iter().find(|s| s.id == name) {
            panic!(
                "the follower {name} started a child ({start:?}) while the leader held the lock\n{}",
                self.report()
            );
        }
    }

    /// The IDs of the sessions of `node`.
    fn sessions_of(&self, node: &str) -> BTreeSet<String> {
        let body = self.api_get(&format!("/v1/session/node/{node}"));
        let sessions: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("sessions of {node}: {e}: {body}"));
        sessions
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| Some(s.get("ID")?.as_str()?.to_owned()))
            .collect()
    }

    /// The session that holds the lock now, as Consul holds it.
    fn holder_session(&self) -> Value {
        let entry = self.api_get(&format!("/v1/kv/{}", self.key));
        let entry: Value =
            serde_json::from_str(&entry).unwrap_or_else(|e| panic!("{}: {e}: {entry}", self.key));
        let id = entry[0]["Session"]
            .as_str()
            .unwrap_or_else(|| panic!("{} is not locked: {entry}", self.key))
            .to_owned();
        let info = self.api_get(&format!("/v1/session/info/{id}"));
        let info: Value =
            serde_json::from_str(&info).unwrap_or_else(|e| panic!("session {id}: {e}: {info}"));
        info[0].clone()
    }

    /// `GET PATH` on the first agent of the series, which must answer 200.
    fn api_get(&self, path: &str) -> String {
        let agent = self.agent(0);
        let response = agent
            .http_get(path)
            .unwrap_or_else(|e| panic!("GET {path} on {}: {e}", agent.address()));
        assert_eq!(
            response.status,
            200,
            "GET {path} on {}: {}",
            agent.address(),
            response.body
        );
        response.body
    }

    /// Waits up to `within` for the child of the candidate `name` to log
    /// its start, and records the child.
    fn wait_child_start(&mut self, name: &str, within: Duration, what: &str) -> LogLine {
        let until = Instant::now() + within;
        loop {
            check_interrupted(what);
            if let Some(start) = read_starts(&self.log).into_iter().find(|s| s.id == name) {
                let child = ChildProcess::of(&start).unwrap_or_else(|| {
                    panic!(
                        "{name}'s child {} logged its start and was gone at once\n{}",
                        start.pid,
                        self.report()
                    )
                });
                self.children.push(child);
                return start;
            }
            if Instant::now() >= until {
                panic!(
                    "timed out after {within:?} waiting for {what}\n{}",
                    self.report()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// What a failing wait shows: the child log and each candidate's
    /// stderr.
    fn report(&self) -> String {
        let mut s = format!(
            "--- {} child log (now {} ns)\n{}",
            self.tag,
            mono_ns(),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
        for p in self.slots.iter().flatten() {
            let stderr = p.stderr();
            let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
            let _ = writeln!(s, "--- {} (pid {}) stderr, last lines", p.name, p.pid);
            for line in tail.into_iter().rev() {
                let _ = writeln!(s, "{line}");
            }
        }
        s
    }

    /// Stops both candidates (SIGTERM, then their trees SIGKILLed after a
    /// bound) and every child left.
    fn shut_down(&mut self) {
        for p in self.slots.iter().flatten() {
            signal(p.pid, Signal::TERM);
        }
        for p in self.slots.iter_mut().flatten() {
            p.wait_exit(Duration::from_secs(10));
        }
        self.slots = [None, None];
        for c in &self.children {
            c.kill();
        }
    }
}

impl Drop for Series<'_> {
    fn drop(&mut self) {
        // The candidates' trees first, then any child that outlived its
        // candidate.
        self.slots = [None, None];
        for c in &self.children {
            c.kill();
        }
    }
}

// ------------------------------------------------------------------ processes

/// A tool process (`regent run` or `consul lock`) in a process group of its
/// own, its output in files. Dropping it kills its whole tree unless it has
/// exited.
struct ToolProcess {
    name: String,
    pid: i32,
    child: Child,
    stderr: PathBuf,
    status: Option<ExitStatus>,
}

impl ToolProcess {
    fn spawn(name: &str, command: &mut Command, dir: &Path) -> Self {
        let out = std::fs::File::create(dir.join(format!("{name}.out"))).expect("stdout file");
        let stderr = dir.join(format!("{name}.err"));
        let err = std::fs::File::create(&stderr).expect("stderr file");
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        Self {
            name: name.to_owned(),
            pid: i32::try_from(child.id()).expect("a pid"),
            child,
            stderr,
            status: None,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The exit status if it has exited, reaping it.
    fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("try_wait");
        }
        self.status
    }

    /// Waits up to `within` for it to exit.
    fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + within;
        loop {
            check_interrupted(&format!("{} to exit", self.name));
            if let Some(status) = self.try_status() {
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ToolProcess {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            kill_tree(self.pid);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A leader's child, as it was when it logged its start: enough to tell
/// later whether it, or anything in its process group, still runs.
#[derive(Debug, Clone)]
struct ChildProcess {
    /// The candidate that started it.
    leader: String,
    pid: i32,
    /// Its start time in clock ticks: with the PID, names one process even
    /// if the PID is reused.
    start_ticks: u64,
    pgid: i32,
}

impl ChildProcess {
    /// The child that logged `start`, if it still runs.
    fn of(start: &LogLine) -> Option<Self> {
        let s = stat(start.pid).filter(|s| !s.gone())?;
        Some(Self {
            leader: start.id.clone(),
            pid: start.pid,
            start_ticks: s.start_ticks,
            pgid: s.pgrp,
        })
    }

    fn is_itself(&self, pid: i32) -> bool {
        stat(pid).is_some_and(|s| !s.gone() && s.start_ticks == self.start_ticks)
    }

    /// The live processes of this child: itself, and whatever else lives in
    /// its process group but `tool` (`consul lock`'s child shares its
    /// group).
    fn alive_processes(&self, tool: i32) -> Vec<i32> {
        let mut alive: BTreeSet<i32> = group_members(self.pgid)
            .into_iter()
            .filter(|&p| p != tool)
            .collect();
        if self.is_itself(self.pid) {
            alive.insert(self.pid);
        } else {
            alive.remove(&self.pid);
        }
        alive.into_iter().collect()
    }

    /// SIGKILLs the child and its process group (never the bench's own).
    fn kill(&self) {
        if self.pgid > 1 && self.pgid != own_group() && !group_members(self.pgid).is_empty() {
            signal_group(self.pgid, Signal::KILL);
        }
        if self.is_itself(self.pid) {
            signal(self.pid, Signal::KILL);
        }
    }
}

// ------------------------------------------------------------------ the child log

/// A line of the child log: `start|stop ID TOKEN MONO_NS PID`.
#[derive(Debug, Clone)]
struct LogLine {
    event: String,
    id: String,
    mono_ns: u64,
    pid: i32,
}

fn read_log(log: &Path) -> Vec<LogLine> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some(LogLine {
                event: f.first()?.to_string(),
                id: f.get(1)?.to_string(),
                mono_ns: f.get(3)?.parse().ok()?,
                pid: f.get(4)?.parse().ok()?,
            })
        })
        .collect()
}

/// The `start` lines of the child log.
fn read_starts(log: &Path) -> Vec<LogLine> {
    read_log(log)
        .into_iter()
        .filter(|e| e.event == "start")
        .collect()
}

// ------------------------------------------------------------------ helpers

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of the child log.
fn mono_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(ts.tv_sec).expect("non-negative") * 1_000_000_000
        + u64::try_from(ts.tv_nsec).expect("non-negative")
}

/// Panics if the bench was asked to stop, so that the guards clean up.
fn check_interrupted(what: &str) {
    assert!(
        !INTERRUPTED.load(Ordering::Relaxed),
        "interrupted while waiting for {what}"
    );
}

/// Sleeps `d`, in slices, so that an interrupt is noticed.
fn pause(d: Duration) {
    let until = Instant::now() + d;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        check_interrupted("a pause to end");
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// The first line of `consul version`.
fn consul_version(agent: &Consul) -> String {
    let out = agent
        .consul_command()
        .arg("version")
        .output()
        .expect("run consul version");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("consul: unknown version")
        .to_owned()
}

/// The fields of `/proc/PID/stat` the bench needs.
#[derive(Debug, Clone, Copy)]
struct Stat {
    state: char,
    ppid: i32,
    pgrp: i32,
    start_ticks: u64,
}

impl Stat {
    /// A zombie or dead process has exited.
    fn gone(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields after it
    // start after the last ')'.
    let rest = text.get(text.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start_ticks: f.get(19)?.parse().ok()?,
    })
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Live processes in process group `pgid`.
fn group_members(pgid: i32) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|&p| stat(p).is_some_and(|s| s.pgrp == pgid && !s.gone()))
        .collect()
}

/// Every descendant of `root` now, by parent links.
fn descendants(root: i32) -> Vec<i32> {
    let table: Vec<(i32, i32)> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, stat(p)?.ppid)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            table
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found.remove(0);
    found
}

fn own_group() -> i32 {
    rustix::process::getpgid(None).map_or(0, |p| p.as_raw_nonzero().get())
}

fn signal(pid: i32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

fn signal_group(pgid: i32, sig: Signal) {
    if let Some(p) = Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(p, sig);
    }
}

/// SIGKILLs `root`, its descendants and the process groups they belong to
/// (which reaches jobs whose parent already died); never the bench's own
/// group.
fn kill_tree(root: i32) {
    let own = own_group();
    let mut pids = descendants(root);
    pids.push(root);
    let groups: BTreeSet<i32> = pids
        .iter()
        .filter_map(|&p| stat(p).map(|s| s.pgrp))
        .filter(|&g| g != own && g > 1)
        .collect();
    for g in groups {
        signal_group(g, Signal::KILL);
    }
    for p in pids {
        signal(p, Signal::KILL);
    }
}
