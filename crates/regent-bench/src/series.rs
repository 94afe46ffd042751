//! A series: one tool on one store in one case, two candidates (a leader
//! and a follower), and its runs. See the [method](crate#method).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use regent_proc::mono_ns;

use crate::case::{Case, PREFERRED_SETTLE, REQUEST_TIMEOUT, Tool};
use crate::child_log::{CommandProcess, read_log};
use crate::engines::RunningStore;
use crate::error::BenchError;
use crate::process::{Stdout, ToolProcess, describe_exit};
use crate::stats::Summary;
use crate::store::StoreKind;
use crate::wait::{pause, wait_for};

/// How long after the new leader's start the old command is looked for.
const AFTER_START: Duration = Duration::from_millis(500);

/// How long before the signal the follower has been ready at least: its
/// watch or blocking query stands by then.
const SETTLE: Duration = Duration::from_millis(300);

/// Bound on a candidate becoming leader or follower when started (a JVM,
/// then Curator's connection, take a few seconds on a busy machine).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Bound on a tool process's exit after its graceful signal.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How many runs in a row may be voided (the leader lost its leadership on
/// its own before the signal) before the series gives up.
const MAX_VOIDED_IN_A_ROW: usize = 3;

/// What `etcdctl elect` and the Curator participant print when they lead.
const CURATOR_LEADS: &str = "EVENT isLeader";

/// One hand-over.
#[derive(Debug, Clone)]
pub(crate) struct RunResult {
    pub(crate) old_leader: String,
    pub(crate) new_leader: String,
    /// Signal to the new leader's start (its command's, or its line); in
    /// the hand-over cases (no signal), the old command's SIGTERM, as it
    /// logged it, to the new command's start (zero if the old command
    /// logged its stop only after that start: see `stopped_late`).
    pub(crate) handover: Duration,
    /// The old command's SIGTERM (its `stop` line) to the new command's
    /// start (its `start` line), when the stop came first: in the
    /// hand-over cases the same as `handover`; after a signal, the
    /// hand-over less the signal's way to the command.
    pub(crate) from_stop: Option<Duration>,
    /// Whether the old command logged its stop only after the new command
    /// had logged its start: the two ran side by side. `None` without a
    /// command, or without a stop line.
    pub(crate) stopped_late: Option<bool>,
    /// The hand-over cases: what set it off to the new leader's start —
    /// the preferred candidate's spawn (`preferred`: its start-up, the
    /// settle time, the leader's next look, the hand-over), or the start of
    /// `regent handover` (`requested`).
    pub(crate) from_trigger: Option<Duration>,
    /// `requested`: the start of `regent handover` to its answer (its JSON
    /// line, stamped as the bench read it; the command exits right after).
    pub(crate) request: Option<Duration>,
    /// `requested`: whether the new leader confirmed the request
    /// (`"answered"` in `regent handover --json`).
    pub(crate) answered: Option<bool>,
    /// Processes of the old leader's command alive 0.5 s after the new
    /// start; `None` for tools that run no command.
    pub(crate) left_running: Option<Vec<i32>>,
    /// … and once the old tool process had exited (or after 5 s of a
    /// crash, 30 s of a graceful stop): the command outlived its tool.
    pub(crate) left_at_end: Option<Vec<i32>>,
    /// Whether the old command logged SIGTERM; `None` without a command.
    pub(crate) got_sigterm: Option<bool>,
    /// Signal to the old command's SIGTERM, when it logged one: how much
    /// of a graceful hand-over went before the old command was told.
    pub(crate) old_stop: Option<Duration>,
    /// How the old tool process ended.
    pub(crate) old_tool_exit: String,
}

/// How a run ended.
enum Outcome {
    Measured(RunResult),
    /// Not measured: the leader's command had ended on its own before the
    /// signal (its tool lost leadership by itself); why.
    Voided(String),
}

/// A finished series, for the report.
#[derive(Debug, Clone)]
pub(crate) struct SeriesResult {
    pub(crate) store: StoreKind,
    pub(crate) case: Case,
    pub(crate) tool: Tool,
    pub(crate) runs: Vec<RunResult>,
    /// Runs not measured, and run again: what was seen.
    pub(crate) voided: Vec<String>,
    /// Why the series stopped before its last run: a native tool's failure
    /// ends its own series, not the bench (regent's ends the bench).
    pub(crate) stopped: Option<String>,
    /// On Consul, the lock holder's session as Consul held it at the
    /// series' first leader (`GET /v1/session/info`).
    pub(crate) session: Option<Value>,
}

impl SeriesResult {
    pub(crate) fn samples(&self) -> Vec<Duration> {
        self.runs.iter().map(|r| r.handover).collect()
    }

    pub(crate) fn summary(&self) -> Option<Summary> {
        Summary::of(&self.samples())
    }

    /// Runs whose old command still ran after the new leader started, if
    /// the tool runs a command: alive 0.5 s after the new start, or its
    /// stop logged only after the new command's start.
    pub(crate) fn left_running(&self) -> Option<usize> {
        self.tool.runs_command().then(|| {
            self.runs
                .iter()
                .filter(|r| {
                    r.left_running.as_ref().is_some_and(|p| !p.is_empty())
                        || r.stopped_late == Some(true)
                })
                .count()
        })
    }

    /// The samples of one of a run's optional times (`from_stop`,
    /// `from_trigger`, `request`), for the runs that have it.
    pub(crate) fn samples_of(
        &self,
        time: impl Fn(&RunResult) -> Option<Duration>,
    ) -> Vec<Duration> {
        self.runs.iter().filter_map(time).collect()
    }

    /// Runs whose old command still ran once its tool process had exited,
    /// if the tool runs a command.
    pub(crate) fn left_at_end(&self) -> Option<usize> {
        self.tool.runs_command().then(|| {
            self.runs
                .iter()
                .filter(|r| r.left_at_end.as_ref().is_some_and(|p| !p.is_empty()))
                .count()
        })
    }

    pub(crate) fn to_json(&self) -> Value {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let summary = self.summary();
        json!({
            "store": self.store.name(),
            "case": self.case.name(),
            "tool": self.tool.name(),
            "ttl_ms": ms(self.tool.ttl()),
            "ttl": self.tool.ttl_note(),
            "signal": signal_name(self.tool, self.case),
            "runs": self.runs.len(),
            "p50_ms": summary.map(|s| ms(s.p50)),
            "p99_ms": summary.map(|s| ms(s.p99)),
            "max_ms": summary.map(|s| ms(s.max)),
            "old_command_left_running": self.left_running(),
            "old_command_outlived_its_tool": self.left_at_end(),
            "voided_runs": self.voided,
            "stopped_early": self.stopped,
            "holder_session": self.session,
            "samples": self.runs.iter().map(|r| json!({
                "handover_ms": ms(r.handover),
                "old_leader": r.old_leader,
                "new_leader": r.new_leader,
                "old_command_alive_after_new_start": r.left_running,
                "old_command_alive_after_tool_exit": r.left_at_end,
                "old_command_got_sigterm": r.got_sigterm,
                "old_command_sigterm_ms": r.old_stop.map(ms),
                "old_command_sigterm_to_new_start_ms": r.from_stop.map(ms),
                "old_command_stopped_after_new_start": r.stopped_late,
                "trigger_to_new_start_ms": r.from_trigger.map(ms),
                "request_to_answer_ms": r.request.map(ms),
                "request_answered": r.answered,
                "old_tool_exit": r.old_tool_exit,
            })).collect::<Vec<_>>(),
        })
    }
}

/// The signal's name, for the report; in the hand-over cases, what sets
/// the hand-over off instead.
pub(crate) fn signal_name(tool: Tool, case: Case) -> &'static str {
    match (tool.signal(case), case) {
        (Some(rustix::process::Signal::KILL), _) => "SIGKILL",
        (Some(rustix::process::Signal::INT), _) => "SIGINT",
        (Some(_), _) => "SIGTERM",
        (None, Case::Preferred) => "none: priority N+1 starts, settle 1s",
        (None, _) => "none: regent handover --to",
    }
}

/// Two candidates of one tool on one election, and the child log their
/// commands share. Dropping it kills both candidates' trees and every
/// leader command it saw start.
pub(crate) struct Series<'a> {
    store: &'a RunningStore,
    tool: Tool,
    case: Case,
    /// The regent binary, as a path other programs can run.
    regent: &'a Path,
    /// `etcd-crash-etcdctl-lock`: names the election, the files and the
    /// candidates.
    tag: String,
    dir: PathBuf,
    log: PathBuf,
    slots: [Option<ToolProcess>; 2],
    leader: usize,
    /// The command of each leader seen, by candidate name.
    commands: Vec<(String, CommandProcess)>,
    started: usize,
    /// `requested`: the run's `regent handover`, while it runs, and how
    /// many were started.
    request: Option<ToolProcess>,
    requests: usize,
    runs: Vec<RunResult>,
    voided: Vec<String>,
    /// Why the series stopped early, if it did (see `SeriesResult`).
    pub(crate) stopped: Option<String>,
    session: Option<Value>,
}

impl<'a> Series<'a> {
    pub(crate) fn new(
        store: &'a RunningStore,
        tool: Tool,
        case: Case,
        regent: &'a Path,
        root: &Path,
    ) -> Result<Self, BenchError> {
        let tag = format!("{}-{}-{}", store.kind(), case, tool.tag());
        let dir = root.join(&tag);
        std::fs::create_dir_all(&dir)
            .map_err(|e| BenchError::Failed(format!("{}: {e}", dir.display())))?;
        Ok(Self {
            store,
            tool,
            case,
            regent,
            log: dir.join("commands.log"),
            dir,
            tag,
            slots: [None, None],
            leader: 0,
            commands: Vec::new(),
            started: 0,
            request: None,
            requests: 0,
            runs: Vec::new(),
            voided: Vec::new(),
            stopped: None,
            session: None,
        })
    }

    pub(crate) fn tag(&self) -> &str {
        &self.tag
    }

    /// Whether a failure of this series may end it alone: an engine's own
    /// tool failing (an `etcdctl lock` follower that did not queue in 30 s
    /// on a loaded host) is noted in the report, and the bench goes on.
    /// regent's own failure ends the bench.
    pub(crate) fn may_stop_alone(&self) -> bool {
        !matches!(self.tool, Tool::Regent { .. })
    }

    /// The election (etcd: also the key prefix; Consul: `consul lock`'s
    /// prefix; ZooKeeper: the latch path's last part).
    fn election(&self) -> String {
        format!("bench-{}", self.tag)
    }

    /// Starts the first leader and the first follower (`preferred`: the
    /// leader alone; each run starts the candidate preferred to it).
    pub(crate) fn start(&mut self) -> Result<(), BenchError> {
        let first = self.spawn(0)?;
        self.wait_leader_start(
            0,
            START_TIMEOUT,
            &format!("{first}, the first leader, to lead"),
        )
        .map_err(|e| self.with_evidence(e))?;
        self.leader = 0;
        if self.store.kind().is_consul() {
            // Best effort: the report says what the read found.
            let session = self
                .store
                .consul_holder_session(&self.consul_key())
                .unwrap_or_else(|e| json!({ "error": format!("{e:?}") }));
            self.session = Some(session);
        }
        if self.case == Case::Preferred {
            return Ok(());
        }
        self.spawn_follower(1)
    }

    /// The Consul key of the series' lock: regent's election under its
    /// default prefix, `consul lock`'s `PREFIX/.lock`.
    fn consul_key(&self) -> String {
        match self.tool {
            Tool::ConsulLock { .. } => format!("bench/{}/.lock", self.tag),
            _ => format!("regent/{}", self.election()),
        }
    }

    /// One hand-over: signal the leader, time the follower's start, look
    /// for the old command, replace the old leader by a new follower. A run
    /// whose leader lost its leadership by itself before the signal is
    /// voided, noted, and run again once someone leads.
    pub(crate) fn run_once(&mut self) -> Result<&RunResult, BenchError> {
        for _ in 0..MAX_VOIDED_IN_A_ROW {
            match self.try_run_once() {
                Ok(Outcome::Measured(result)) => {
                    self.runs.push(result);
                    return Ok(self.runs.last().expect("just pushed"));
                }
                Ok(Outcome::Voided(why)) => {
                    tracing::warn!(series = %self.tag, "run voided: {why}");
                    self.voided.push(why);
                    self.resync().map_err(|e| self.with_evidence(e))?;
                }
                Err(e) => return Err(self.with_evidence(e)),
            }
        }
        Err(self.with_evidence(BenchError::Failed(format!(
            "{MAX_VOIDED_IN_A_ROW} runs in a row voided: {}",
            self.voided.join("; ")
        ))))
    }

    /// After a voided run: whoever leads now (the last command started
    /// that still runs) is the leader, and the other candidate is replaced
    /// by a new follower.
    fn resync(&mut self) -> Result<(), BenchError> {
        let names: Vec<Option<String>> = self
            .slots
            .iter()
            .map(|s| s.as_ref().map(|p| p.name.clone()))
            .collect();
        let log = self.log.clone();
        let (slot, start) = wait_for(
            self.tool.handover_bound(Case::Crash),
            Duration::from_millis(10),
            "a leader again after a voided run",
            || {
                Ok(read_log(&log)
                    .into_iter()
                    .rev()
                    .filter(|e| e.event == "start")
                    .find_map(|e| {
                        let slot = names.iter().position(|n| n.as_deref() == Some(&e.id))?;
                        let command = CommandProcess::of(&e)?;
                        Some((slot, (e.id, command)))
                    }))
            },
        )?;
        self.commands.push(start);
        self.leader = slot;
        self.slots[1 - slot] = None;
        if self.case == Case::Preferred {
            // The leader alone: the next run starts the preferred one.
            return Ok(());
        }
        self.spawn_follower(1 - slot)
    }

    fn try_run_once(&mut self) -> Result<Outcome, BenchError> {
        let (old, new) = (self.leader, 1 - self.leader);
        let old_name = self.slot(old)?.name.clone();
        let old_pid = self.slot(old)?.pid;
        // The latest: a candidate may lead twice after a voided run.
        let old_command = self
            .commands
            .iter()
            .rev()
            .find(|(leader, _)| *leader == old_name)
            .map(|(_, c)| c.clone());

        let renew_ms = u64::try_from(self.tool.renew_every().as_millis()).unwrap_or(1000);
        pause(SETTLE + Duration::from_millis(fastrand::u64(..renew_ms.max(1))))?;
        if let Some(c) = &old_command
            && !c.alive_processes(old_pid).contains(&c.pid)
        {
            return Ok(Outcome::Voided(format!(
                "{old_name}'s command {} ended on its own before the signal",
                c.pid
            )));
        }
        let triggered_at = mono_ns();
        let (new_name, what) = match self.tool.signal(self.case) {
            Some(signal) => {
                self.slot(old)?.signal(signal);
                let new_name = self.slot(new)?.name.clone();
                let what = format!(
                    "{new_name} to lead after {} to {old_name}",
                    signal_name(self.tool, self.case)
                );
                (new_name, what)
            }
            None if self.case == Case::Preferred => {
                // Its start is the trigger: the candidate of higher
                // priority appears.
                let new_name = self.spawn(new)?;
                let what = format!(
                    "{old_name} to hand over to {new_name}, which started with a higher \
                     priority (settle {PREFERRED_SETTLE:?})"
                );
                (new_name, what)
            }
            None => {
                let new_name = self.slot(new)?.name.clone();
                self.request_hand_over(old, &new_name)?;
                let what = format!("{new_name} to lead after regent handover --to {new_name}");
                (new_name, what)
            }
        };
        let started_at = self.wait_leader_start(new, self.tool.handover_bound(self.case), &what)?;
        self.leader = new;
        let (request, answered) = self.request_answer(&new_name, triggered_at)?;

        pause(Duration::from_nanos(
            (started_at + AFTER_START.as_nanos() as u64).saturating_sub(mono_ns()),
        ))?;
        let left_running = old_command.as_ref().map(|c| c.alive_processes(old_pid));
        let exit_within = match self.case {
            Case::Graceful => EXIT_TIMEOUT,
            Case::Crash => Duration::from_secs(5),
            // The old leader follows now: stop it as a follower.
            Case::Preferred | Case::Requested => {
                self.slot(old)?.signal(rustix::process::Signal::TERM);
                EXIT_TIMEOUT
            }
        };
        let old_tool_exit = describe_exit(self.slot_mut(old)?.wait_exit(exit_within)?);
        let left_at_end = old_command.as_ref().map(|c| c.alive_processes(old_pid));
        let stop = old_command.as_ref().and_then(|c| {
            read_log(&self.log)
                .into_iter()
                .find(|e| e.event == "stop" && e.pid == c.pid)
        });
        let got_sigterm = old_command.as_ref().map(|_| stop.is_some());
        let stop_ns = stop.as_ref().map(|e| e.mono_ns);
        let old_stop = stop_ns.map(|at| Duration::from_nanos(at.saturating_sub(triggered_at)));
        let stopped_late = stop_ns.map(|at| at > started_at);
        let from_stop = stop_ns
            .filter(|at| *at <= started_at)
            .map(|at| Duration::from_nanos(started_at - at));
        let (handover, from_trigger) = if self.case.is_hand_over() {
            let Some(at) = stop_ns else {
                return Err(BenchError::Failed(format!(
                    "{old_name}'s command logged no stop (SIGTERM) by the time its tool process \
                     ended, though {new_name} leads"
                )));
            };
            (
                Duration::from_nanos(started_at.saturating_sub(at)),
                Some(Duration::from_nanos(
                    started_at.saturating_sub(triggered_at),
                )),
            )
        } else {
            (
                Duration::from_nanos(started_at.saturating_sub(triggered_at)),
                None,
            )
        };

        // Clear the field for the next run: nothing of the old leader stays.
        if let Some(c) = &old_command {
            c.kill();
        }
        self.slots[old] = None;
        if self.case != Case::Preferred {
            self.spawn_follower(old)?;
        }
        Ok(Outcome::Measured(RunResult {
            old_leader: old_name,
            new_leader: new_name,
            handover,
            from_stop,
            stopped_late,
            from_trigger,
            request,
            answered,
            left_running,
            left_at_end,
            got_sigterm,
            old_stop,
            old_tool_exit,
        }))
    }

    /// `requested`: starts `regent handover --to NEW --json` on the
    /// series' election, through the old leader's store address.
    fn request_hand_over(&mut self, old: usize, new_name: &str) -> Result<(), BenchError> {
        self.requests += 1;
        let name = format!("{}-handover-{}", self.tag, self.requests);
        let mut c = Command::new(self.regent);
        c.args(["handover", "--store"])
            .arg(self.store.regent_url(self.tool.agents(), old))
            .args(self.store.regent_flags())
            .args(["--election", &self.election(), "--to", new_name, "--json"])
            .arg("--timeout")
            .arg(format!("{}ms", REQUEST_TIMEOUT.as_millis()));
        let process = ToolProcess::spawn(&name, &mut c, &self.dir, Stdout::Lines, false)?;
        self.request = Some(process);
        Ok(())
    }

    /// `requested`: waits for the run's `regent handover` to exit, checks
    /// that it handed over to `new_name`, and returns the time from
    /// `asked_at` to its answer and whether the new leader confirmed it.
    /// `(None, None)` in the other cases.
    fn request_answer(
        &mut self,
        new_name: &str,
        asked_at: u64,
    ) -> Result<(Option<Duration>, Option<bool>), BenchError> {
        let Some(process) = self.request.as_mut() else {
            return Ok((None, None));
        };
        let status = process.wait_exit(REQUEST_TIMEOUT + Duration::from_secs(10))?;
        if !status.is_some_and(|s| s.success()) {
            return Err(BenchError::Failed(format!(
                "regent handover --to {new_name}: {}",
                describe_exit(status)
            )));
        }
        // The reader thread may hold the last line a moment longer.
        let line = wait_for(
            Duration::from_secs(5),
            Duration::from_millis(2),
            "regent handover's answer on its standard output",
            || {
                Ok(process
                    .lines()
                    .into_iter()
                    .find(|l| l.text.starts_with('{')))
            },
        )?;
        let answer: Value = serde_json::from_str(&line.text).map_err(|e| {
            BenchError::Failed(format!("regent handover printed {:?}: {e}", line.text))
        })?;
        if answer["to"]["id"] != new_name {
            return Err(BenchError::Failed(format!(
                "regent handover --to {new_name} answered {answer}"
            )));
        }
        self.request = None;
        Ok((
            Some(Duration::from_nanos(line.at_ns.saturating_sub(asked_at))),
            answer["answered"].as_bool(),
        ))
    }

    /// Stops both candidates and every command left; the result.
    pub(crate) fn finish(mut self) -> SeriesResult {
        self.halt();
        SeriesResult {
            store: self.store.kind(),
            case: self.case,
            tool: self.tool,
            runs: std::mem::take(&mut self.runs),
            voided: std::mem::take(&mut self.voided),
            stopped: self.stopped.take(),
            session: self.session.take(),
        }
    }

    /// Stops both candidates (SIGTERM, up to 5 s each).
    pub(crate) fn halt(&mut self) {
        self.request = None;
        for p in self.slots.iter().flatten() {
            p.signal(rustix::process::Signal::TERM);
        }
        for p in self.slots.iter_mut().flatten() {
            let _ = p.wait_exit(Duration::from_secs(5));
        }
    }

    fn slot(&self, i: usize) -> Result<&ToolProcess, BenchError> {
        self.slots[i]
            .as_ref()
            .ok_or_else(|| BenchError::Failed(format!("{}: no candidate in slot {i}", self.tag)))
    }

    fn slot_mut(&mut self, i: usize) -> Result<&mut ToolProcess, BenchError> {
        let tag = self.tag.clone();
        self.slots[i]
            .as_mut()
            .ok_or_else(|| BenchError::Failed(format!("{tag}: no candidate in slot {i}")))
    }

    /// Starts a candidate in `slot`; returns its name.
    fn spawn(&mut self, slot: usize) -> Result<String, BenchError> {
        self.started += 1;
        let number = self.started;
        let name = format!("{}-{number}", self.tag);
        let (mut command, stdout, stdin) = self.command(&name, number, slot)?;
        let mut process = ToolProcess::spawn(&name, &mut command, &self.dir, stdout, stdin)?;
        if self.tool == Tool::CuratorLatch {
            // A JVM, then Curator's connection; then the latch starts.
            wait_for(
                START_TIMEOUT,
                Duration::from_millis(10),
                &format!("{name} to connect (READY)"),
                || {
                    Ok(process
                        .lines()
                        .iter()
                        .any(|l| l.text == "READY")
                        .then_some(()))
                },
            )
            .map_err(|e| self.with_evidence(e))?;
            process.send("start")?;
        }
        self.slots[slot] = Some(process);
        Ok(name)
    }

    /// The command line of candidate `name` in `slot`, where its standard
    /// output goes, and whether it reads commands on its standard input.
    fn command(
        &self,
        name: &str,
        number: usize,
        slot: usize,
    ) -> Result<(Command, Stdout, bool), BenchError> {
        let log = self.log.display().to_string();
        let regent = self.regent.display().to_string();
        let demo_task = [regent.as_str(), "__demo-task", "--log", &log, "--log-stop"];
        let env_ids = [
            format!("REGENT_LEADER_ID={name}"),
            format!("REGENT_FENCING_TOKEN={number}"),
        ];
        let missing = |what: &str| BenchError::Failed(format!("{}: not {what}", self.tag));
        Ok(match self.tool {
            Tool::Regent { ttl } => {
                let mut c = Command::new(self.regent);
                c.args(["run", "--store"])
                    .arg(self.store.regent_url(self.tool.agents(), slot))
                    // Behind PgBouncer: where its watches LISTEN.
                    .args(self.store.regent_flags())
                    .args(["--election", &self.election(), "--id", name])
                    .arg("--ttl")
                    .arg(format!("{}ms", ttl.as_millis()));
                if self.case == Case::Preferred {
                    // Each candidate started outranks every one before it.
                    c.arg("--priority")
                        .arg(number.to_string())
                        .arg("--settle")
                        .arg(format!("{}ms", PREFERRED_SETTLE.as_millis()));
                }
                c.arg("--")
                    .args(demo_task)
                    // "following" is logged at debug.
                    .env("REGENT_LOG", "info,regent_core::candidate=debug");
                (c, Stdout::File, false)
            }
            Tool::EtcdctlElect => {
                let etcd = self.store.etcd().ok_or_else(|| missing("etcd"))?;
                let mut c = etcd.etcdctl_command();
                // The proposal is the candidate's name: the line it prints
                // when it leads.
                c.args(["elect", &self.election(), name]);
                (c, Stdout::Lines, false)
            }
            Tool::EtcdctlLock => {
                let etcd = self.store.etcd().ok_or_else(|| missing("etcd"))?;
                let mut c = etcd.etcdctl_command();
                c.args(["lock", "--ttl", &self.tool.ttl().as_secs().to_string()])
                    .arg(self.election())
                    // The command's flags are not etcdctl's.
                    .arg("--")
                    .arg("env")
                    .args(&env_ids)
                    .args(demo_task);
                (c, Stdout::File, false)
            }
            Tool::ConsulLock { exec } => {
                let agent = self
                    .store
                    .consul_agent(self.tool.agents(), slot)
                    .ok_or_else(|| missing("Consul"))?;
                let mut c = agent.consul_command();
                c.arg("lock")
                    .arg(format!("-name={name}"))
                    .arg(format!("bench/{}", self.tag))
                    .args(exec.then_some("exec"))
                    .arg("env")
                    .args(&env_ids)
                    .args(demo_task)
                    // consul lock runs the command with $SHELL -c.
                    .env("SHELL", "/bin/sh");
                (c, Stdout::File, false)
            }
            Tool::CuratorLatch => {
                let (server, participant) =
                    self.store.zookeeper().ok_or_else(|| missing("ZooKeeper"))?;
                let c = participant.command(
                    &server.address(),
                    &format!("/curator-bench/{}", self.election()),
                    name,
                );
                (c, Stdout::Lines, true)
            }
        })
    }

    /// Starts a candidate in `slot` and waits until it follows: it stands
    /// in line (or watches the leader) and has not started anything.
    fn spawn_follower(&mut self, slot: usize) -> Result<(), BenchError> {
        let name = self.spawn(slot)?;
        let what = format!("{name} to follow");
        let (store, tool) = (self.store, self.tool);
        let prefix = format!("{}/", self.election());
        let slots = &mut self.slots;
        let mut asked_at: Option<usize> = None;
        let result = wait_for(START_TIMEOUT, Duration::from_millis(20), &what, || {
            let process = slots[slot]
                .as_mut()
                .ok_or_else(|| BenchError::Failed(format!("{name}: gone")))?;
            if let Some(status) = process.try_status() {
                return Err(BenchError::Failed(format!(
                    "{name} exited ({}) before it followed",
                    describe_exit(Some(status))
                )));
            }
            let ready = match tool {
                Tool::Regent { .. } => process.stderr().contains("following"),
                // Its key (a lease's) stands in line behind the leader's.
                Tool::EtcdctlElect | Tool::EtcdctlLock => store.etcd_keys(&prefix)? >= 2,
                // Its session exists once `api.Lock` has begun; its
                // blocking query on the key follows at once.
                Tool::ConsulLock { .. } => store.consul_has_session(&name)?,
                // Its node stands in the latch's line: ask until the
                // participants are two.
                Tool::CuratorLatch => {
                    let lines = process.lines();
                    let answer = asked_at.map(|from| {
                        lines[from.min(lines.len())..]
                            .iter()
                            .find(|l| l.text.starts_with("PARTICIPANTS"))
                            .map(|l| l.text.split_whitespace().count())
                    });
                    match answer {
                        // Asked, not answered yet.
                        Some(None) => false,
                        Some(Some(words)) if words >= 3 => true,
                        Some(Some(_)) | None => {
                            asked_at = Some(lines.len());
                            process.send("participants?")?;
                            false
                        }
                    }
                }
            };
            Ok(ready.then_some(()))
        });
        result.map_err(|e| self.with_evidence(e))?;
        // A follower of a tool that runs a command and leads at once took
        // over from a leader that lost its leadership by itself: the next
        // run finds the leader's command gone and is voided.
        if self.tool == Tool::CuratorLatch
            && self
                .slot(slot)?
                .lines()
                .iter()
                .any(|l| l.text == CURATOR_LEADS)
        {
            return Err(self.with_evidence(BenchError::Failed(format!(
                "the follower {name} leads beside the leader"
            ))));
        }
        Ok(())
    }

    /// Waits up to `within` for the candidate in `slot` to lead; returns
    /// when it started (CLOCK_MONOTONIC ns) and records its command.
    fn wait_leader_start(
        &mut self,
        slot: usize,
        within: Duration,
        what: &str,
    ) -> Result<u64, BenchError> {
        let name = self.slot(slot)?.name.clone();
        let log = self.log.clone();
        let tool = self.tool;
        let process = self.slot(slot)?;
        let (at_ns, command) = wait_for(within, Duration::from_millis(2), what, || {
            Ok(match tool {
                Tool::Regent { .. } | Tool::EtcdctlLock | Tool::ConsulLock { .. } => {
                    match read_log(&log)
                        .into_iter()
                        .find(|s| s.event == "start" && s.id == name)
                    {
                        Some(start) => {
                            let command = CommandProcess::of(&start).ok_or_else(|| {
                                BenchError::Failed(format!(
                                    "{name}'s command {} logged its start and was gone at once",
                                    start.pid
                                ))
                            })?;
                            Some((start.mono_ns, Some(command)))
                        }
                        None => None,
                    }
                }
                // etcdctl elect prints the key, then the proposal: the
                // candidate's name.
                Tool::EtcdctlElect => process
                    .lines()
                    .iter()
                    .find(|l| l.text == name)
                    .map(|l| (l.at_ns, None)),
                Tool::CuratorLatch => process
                    .lines()
                    .iter()
                    .find(|l| l.text == CURATOR_LEADS)
                    .map(|l| (l.at_ns, None)),
            })
        })?;
        if let Some(command) = command {
            self.commands.push((name, command));
        }
        Ok(at_ns)
    }

    /// `e` with what a failing wait shows: the command log and each
    /// candidate's last lines.
    fn with_evidence(&self, e: BenchError) -> BenchError {
        let BenchError::Failed(message) = e else {
            return e;
        };
        let mut s = format!(
            "{}: {message}\n--- command log (now {} ns)\n{}",
            self.tag,
            mono_ns(),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
        for p in self.slots.iter().flatten().chain(&self.request) {
            let stderr = p.stderr();
            let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
            let _ = writeln!(s, "--- {} (pid {}) stderr, last lines", p.name, p.pid);
            for line in tail.into_iter().rev() {
                let _ = writeln!(s, "{line}");
            }
            let lines = p.lines();
            if !lines.is_empty() {
                let _ = writeln!(s, "--- {} stdout", p.name);
                for l in lines.iter().rev().take(20).rev() {
                    let _ = writeln!(s, "{} {}", l.at_ns, l.text);
                }
            }
        }
        BenchError::Failed(s)
    }
}

impl Drop for Series<'_> {
    fn drop(&mut self) {
        // The candidates' trees first, then any command that outlived its
        // candidate.
        self.slots = [None, None];
        self.request = None;
        for (_, c) in &self.commands {
            c.kill();
        }
    }
}
