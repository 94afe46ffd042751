//! `regent demo`: N `regent run` candidates on one embedded store, each
//! running a small leader task; then failures — kill -9 of the leader,
//! SIGTERM of the leader, SIGSTOP of the leader past its ttl — with a live
//! view of who leads and, at the end, a table of every failover.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use futures_util::StreamExt;
use regent_core::{ElectionName, LeaderInfo, LeaseStore as _, Observer};
use rustix::process::{Pid, Signal};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::cli::{DemoArgs, StoreArgs, TaskArgs};
use crate::clock::mono_ns;
use crate::error::CliError;
use crate::store;
use crate::task_log;

/// The demo's leader task: notes when it started (on CLOCK_MONOTONIC, the
/// clock the demo measures failures with), then works until stopped.
///
/// The log lines are `EVENT ID TOKEN MONO_NS PID`; readers take the fields
/// they know from the left (the demo reads the first four of "start").
pub(crate) fn task_main(args: TaskArgs) -> ExitCode {
    let id = std::env::var("REGENT_LEADER_ID").unwrap_or_default();
    let token = std::env::var("REGENT_FENCING_TOKEN").unwrap_or_default();
    // As /proc names it: the task may run in a PID namespace, where
    // getpid() says something else.
    let pid = regent_proc::self_pid().unwrap_or_else(|| std::process::id() as i32);
    // Armed before the start line is written: a SIGTERM that follows the
    // start at once must still be logged.
    let stops = if args.log_stop {
        match signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM]) {
            Ok(s) => Some(s),
            Err(e) => {
                warn_user!("demo task: cannot catch SIGTERM: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        None
    };
    if let Err(e) = append(
        &args.log,
        &task_log::line("start", &id, &token, mono_ns(), pid),
    ) {
        warn_user!("demo task: cannot write {}: {e}", args.log.display());
        return ExitCode::from(1);
    }
    match stops {
        Some(mut stops) => {
            if stops.forever().next().is_some() {
                let line = task_log::line("stop", &id, &token, mono_ns(), pid);
                if let Err(e) = append(&args.log, &line) {
                    warn_user!("demo task: cannot write {}: {e}", args.log.display());
                }
                let _ =
                    signal_hook::low_level::emulate_default_handler(signal_hook::consts::SIGTERM);
            }
            ExitCode::from(128 + 15)
        }
        None => loop {
            std::thread::sleep(Duration::from_millis(200));
        },
    }
}

fn append(log: &Path, line: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut f| f.write_all(line.as_bytes()))
}

/// A term's command started: who, with which token, when (CLOCK_MONOTONIC).
struct Start {
    id: String,
    token: u64,
    at_ns: u64,
}

fn read_starts(log: &Path) -> Vec<Start> {
    task_log::read(log)
        .into_iter()
        .filter(|e| e.kind == "start")
        .map(|e| Start {
            id: e.id,
            token: e.token,
            at_ns: e.mono_ns,
        })
        .collect()
}

struct Failover {
    cause: &'static str,
    from: (String, u64),
    to: Option<(String, u64)>,
    took: Option<Duration>,
}

struct Demo {
    exe: PathBuf,
    dir: PathBuf,
    url: String,
    election: ElectionName,
    /// The store flags, passed on to every candidate.
    store_args: Vec<std::ffi::OsString>,
    ttl: Duration,
    log: PathBuf,
    children: BTreeMap<String, Child>,
    started: Instant,
}

impl Demo {
    fn spawn(&mut self, id: &str) -> Result<(), CliError> {
        let out = std::fs::File::create(self.dir.join(format!("{id}.log")))
            .map_err(|e| CliError::failure(format!("demo log: {e}")))?;
        let err = out
            .try_clone()
            .map_err(|e| CliError::failure(format!("demo log: {e}")))?;
        let child = Command::new(&self.exe)
            .args([
                "run",
                "--store",
                &self.url,
                "--election",
                self.election.as_str(),
                "--id",
                id,
            ])
            .args(&self.store_args)
            .arg("--ttl")
            .arg(format!("{}ms", self.ttl.as_millis()))
            .arg("--lifeline-stdin")
            .arg("--")
            .arg(&self.exe)
            .arg("__demo-task")
            .arg("--log")
            .arg(&self.log)
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| CliError::failure(format!("cannot start candidate {id}: {e}")))?;
        self.children.insert(id.to_owned(), child);
        Ok(())
    }

    fn signal(&self, id: &str, sig: Signal) {
        if let Some(pid) = self.children.get(id).and_then(Child::id)
            && let Some(pid) = Pid::from_raw(pid as i32)
        {
            let _ = rustix::process::kill_process(pid, sig);
        }
    }

    fn say(&self, what: &str) {
        say!("[{:>6.2}s] {what}", self.started.elapsed().as_secs_f64());
    }

    /// Waits for a leader task with a token above `above` to start.
    async fn next_start(&self, above: u64, within: Duration) -> Option<Start> {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Some(s) = read_starts(&self.log).into_iter().find(|s| s.token > above) {
                return Some(s);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    async fn stop_all(&mut self) {
        for child in self.children.values_mut() {
            // Closing the lifeline asks for a graceful stop.
            drop(child.stdin.take());
        }
        let until = Instant::now() + Duration::from_secs(5);
        for child in self.children.values_mut() {
            if let Some(pid) = child.id().and_then(|p| Pid::from_raw(p as i32)) {
                let _ = rustix::process::kill_process(pid, Signal::CONT);
            }
            if tokio::time::timeout_at(until, child.wait()).await.is_err() {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
        }
        self.children.clear();
    }
}

/// The candidates' ttl unless `--ttl` says otherwise or the store's
/// minimum is longer.
const DEFAULT_TTL: Duration = Duration::from_secs(2);

/// `--duration`'s default, unless the ttl needs longer.
const DEFAULT_DURATION: Duration = Duration::from_secs(60);

/// The bound on the whole demo without `--duration`: [`DEFAULT_DURATION`],
/// or what the scenario takes at this ttl if longer. Two of its steps wait
/// out a crash failover (the ttl, the store's `expiry_slack`, a follower's
/// retry at ttl/5), the SIGSTOP step three ttls more; 15 s cover the
/// starts, the hand-over on SIGTERM and the pauses of the live view.
/// Regression: at Azure Blob's 15 s ttl (and Consul's 10 s) the scenario
/// took 90 s and more, and the demo failed at its default 60 s.
fn default_duration(ttl: Duration, expiry_slack: Duration) -> Duration {
    let crash_failover = ttl + expiry_slack + ttl / 5;
    DEFAULT_DURATION.max(crash_failover * 2 + ttl * 3 + Duration::from_secs(15))
}

pub(crate) async fn demo(args: DemoArgs) -> Result<u8, CliError> {
    if !(2..=20).contains(&args.candidates) {
        return Err(CliError::usage(format!(
            "--candidates must be between 2 and 20, not {}",
            args.candidates
        )));
    }
    let tmp = tempfile::Builder::new()
        .prefix("regent-demo-")
        .tempdir()
        .map_err(|e| CliError::failure(format!("temporary directory: {e}")))?;
    let url = args
        .store
        .clone()
        .unwrap_or_else(|| format!("sqlite:{}", tmp.path().join("demo.db").display()));
    let store_args = StoreArgs {
        store: Some(url.clone()),
        election: args.election.clone(),
        options: args.options.clone(),
    };
    let election = store::election(&store_args)?;
    let store = store::open(&store::target(&store_args)?, &election, None).await?;
    let info = store.info();
    let ttl = match args.ttl {
        None => DEFAULT_TTL.max(info.min_ttl),
        Some(ttl) if ttl < info.min_ttl => {
            return Err(CliError::usage(format!(
                "--ttl {ttl:?} is below the {} store's minimum ttl, {:?}",
                info.name, info.min_ttl
            )));
        }
        Some(ttl) => ttl,
    };
    let mut demo = Demo {
        exe: crate::exe::own_exe()?,
        dir: tmp.path().to_owned(),
        url,
        election: election.clone(),
        store_args: args.options.to_args(),
        ttl,
        log: tmp.path().join("starts.log"),
        children: BTreeMap::new(),
        started: Instant::now(),
    };
    say!(
        "regent demo: {} candidates on {}, election '{}', ttl {:?}",
        args.candidates,
        demo.url,
        demo.election,
        ttl
    );
    for k in 1..=args.candidates {
        demo.spawn(&format!("demo-{k}"))?;
    }
    let duration = args
        .duration
        .unwrap_or_else(|| default_duration(ttl, info.expiry_slack_for(ttl)));
    let result = tokio::time::timeout(duration, scenario(&mut demo, store)).await;
    demo.stop_all().await;
    let failovers = match result {
        Ok(r) => r?,
        Err(_) => {
            return Err(CliError::failure(format!(
                "the demo did not finish within --duration {duration:?}"
            )));
        }
    };
    print_table(&failovers);
    let complete = failovers.iter().all(|f| f.took.is_some());
    say!(
        "all candidate processes stopped; removed {}",
        tmp.path().display()
    );
    Ok(if complete { 0 } else { 1 })
}

async fn scenario(
    demo: &mut Demo,
    store: regent_core::BoxStore,
) -> Result<Vec<Failover>, CliError> {
    let observer = Observer::new(store, demo.election.clone());
    let mut changes = Box::pin(observer.changes());
    let mut current: Option<LeaderInfo> = None;
    let within = demo.ttl * 4 + Duration::from_secs(10);
    // The live view runs alongside every step.
    macro_rules! follow_for {
        ($d:expr) => {{
            let until = Instant::now() + $d;
            loop {
                match tokio::time::timeout_at(until, changes.next()).await {
                    Err(_) => break,
                    Ok(Some(Ok(l))) => {
                        match &l {
                            Some(l) => {
                                demo.say(&format!("leader {} (token {})", l.holder, l.token))
                            }
                            None => demo.say("no leader"),
                        }
                        current = l;
                    }
                    Ok(Some(Err(e))) => demo.say(&format!("store: {e}")),
                    Ok(None) => break,
                }
            }
        }};
    }
    let Some(first) = demo.next_start(0, within).await else {
        // Say why: what the first candidate said.
        let said = std::fs::read_to_string(demo.dir.join("demo-1.log")).unwrap_or_default();
        let tail: Vec<&str> = said.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(CliError::failure(format!(
            "no candidate became leader within {within:?}; demo-1 said:\n{}",
            tail.join("\n")
        )));
    };
    follow_for!(Duration::from_millis(1500));
    // The newest term whose task started since the last failure, from the
    // task log: a store that is polled (SQLite, Azure Blob) shows a new
    // leader to the live view up to a poll interval late, so the view
    // alone may still name the leader the last step replaced.
    let mut newest = Some((first.id, first.token));
    let mut failovers = Vec::new();
    for (cause, sig) in [
        ("kill -9 of the leader", Signal::KILL),
        ("SIGTERM of the leader", Signal::TERM),
        ("SIGSTOP of the leader past its ttl", Signal::STOP),
    ] {
        let Some((id, token)) = leader_now(current.as_ref(), newest.take()) else {
            follow_for!(demo.ttl * 2);
            continue;
        };
        demo.say(&format!("-> {cause}: {id}"));
        let at = mono_ns();
        demo.signal(&id, sig);
        let next = demo.next_start(token, within).await;
        let took = next
            .as_ref()
            .map(|s| Duration::from_nanos(s.at_ns.saturating_sub(at)));
        if let Some(s) = &next {
            demo.say(&format!(
                "   {}'s task started with token {} after {:.2}s",
                s.id,
                s.token,
                took.unwrap_or_default().as_secs_f64()
            ));
            newest = Some((s.id.clone(), s.token));
        }
        follow_for!(Duration::from_millis(500));
        match sig {
            Signal::STOP => {
                // Keep it stopped past its ttl, then let it go on: it must
                // come back as a follower, not as a second leader.
                follow_for!(demo.ttl * 2);
                demo.signal(&id, Signal::CONT);
                demo.say(&format!("-> SIGCONT: {id} resumes and follows"));
                follow_for!(demo.ttl);
            }
            _ => {
                if let Some(mut child) = demo.children.remove(&id) {
                    let _ = child.wait().await;
                }
                demo.spawn(&id)?;
                demo.say(&format!("   restarted {id} as a follower"));
                follow_for!(Duration::from_millis(500));
            }
        }
        failovers.push(Failover {
            cause,
            from: (id, token),
            to: next.map(|s| (s.id, s.token)),
            took,
        });
    }
    Ok(failovers)
}

/// The leader to hit, as `(id, token)`: the live view's, unless the task
/// of a newer term started since the last failure (`newest`, from the task
/// log) and the view has not shown it yet. `None` when neither names one.
fn leader_now(view: Option<&LeaderInfo>, newest: Option<(String, u64)>) -> Option<(String, u64)> {
    match (view, newest) {
        (Some(l), Some(n)) if n.1 > l.token.get() => Some(n),
        (Some(l), _) => Some((l.holder.to_string(), l.token.get())),
        (None, n) => n,
    }
}

fn print_table(failovers: &[Failover]) {
    say!();
    for line in table(failovers) {
        say!("{line}");
    }
    say!();
    say!("Tokens only grow: every new leader's token is above the one it replaced.");
}

/// The failovers' table, one line per row after the header, each column
/// as wide as its widest cell: a token may be one digit (SQLite's first
/// term) or sixteen (a store whose tokens follow its clock in µs).
fn table(failovers: &[Failover]) -> Vec<String> {
    let mut rows = vec![[
        "failure".to_owned(),
        "old leader".to_owned(),
        "new leader".to_owned(),
        "failure -> next task start".to_owned(),
    ]];
    for f in failovers {
        let to =
            f.to.as_ref()
                .map_or("none".to_owned(), |(id, t)| format!("{id} ({t})"));
        let took = f.took.map_or("did not happen".to_owned(), |d| {
            format!("{:.2}s", d.as_secs_f64())
        });
        rows.push([
            f.cause.to_owned(),
            format!("{} ({})", f.from.0, f.from.1),
            to,
            took,
        ]);
    }
    let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
    let widths = [width(0), width(1), width(2)];
    rows.iter()
        .map(|[cause, from, to, took]| {
            format!(
                "{cause:<w0$}  {from:<w1$}  {to:<w2$}  {took}",
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2]
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens of sixteen digits (Redis's, PostgreSQL's, Azure Blob's) were
    /// wider than the 18 columns the table gave a leader, and pushed the
    /// rows out of line with the header.
    #[test]
    fn the_table_lines_up_with_long_and_short_tokens() {
        let failovers = [
            Failover {
                cause: "kill -9 of the leader",
                from: ("demo-3".into(), 1_795_944_980_226_164),
                to: Some(("demo-4".into(), 1_795_944_981_792_336)),
                took: Some(Duration::from_millis(10)),
            },
            Failover {
                cause: "SIGSTOP of the leader past its ttl",
                from: ("demo-4".into(), 7),
                to: None,
                took: None,
            },
        ];
        let lines = table(&failovers);
        assert_eq!(lines.len(), 3);
        let column = |line: &str, text: &str| line.find(text).unwrap();
        let new_leader = column(&lines[0], "new leader");
        assert_eq!(column(&lines[1], "demo-4 (1795944981792336)"), new_leader);
        assert_eq!(column(&lines[2], "none"), new_leader);
        let took = column(&lines[0], "failure -> next task start");
        assert_eq!(column(&lines[1], "0.01s"), took);
        assert_eq!(column(&lines[2], "did not happen"), took);
        assert_eq!(
            column(&lines[2], "demo-4 (7)"),
            column(&lines[0], "old leader")
        );
    }

    /// The task's log lines grew a PID field and "stop" lines; the demo
    /// must still read the starts, old format or new.
    #[test]
    fn read_starts_takes_old_and_new_lines_and_skips_stops() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("starts.log");
        std::fs::write(
            &log,
            "start a 1 100\nstart b 2 200 4242\nstop b 2 300 4242\nstart c 3 400 77\n",
        )
        .unwrap();
        let starts: Vec<_> = read_starts(&log)
            .into_iter()
            .map(|s| (s.id, s.token, s.at_ns))
            .collect();
        assert_eq!(
            starts,
            [
                ("a".to_owned(), 1, 100),
                ("b".to_owned(), 2, 200),
                ("c".to_owned(), 3, 400)
            ]
        );
    }

    /// Regression: the default `--duration 60s` cut the demo short at
    /// Azure Blob's ttl of 15 s (and Consul's 10 s, whose sessions end up
    /// to two ttls late).
    #[test]
    fn the_default_duration_grows_with_the_ttl() {
        let s = Duration::from_secs;
        assert_eq!(default_duration(s(2), Duration::ZERO), s(60));
        assert_eq!(
            default_duration(s(15), s(1)),
            s(15 + 1 + 3) * 2 + s(45 + 15)
        );
        assert_eq!(
            default_duration(s(10), s(20)),
            s(10 + 20 + 2) * 2 + s(30 + 15)
        );
    }

    /// Regression: on a polled store the live view still named the leader
    /// that SIGTERM had just replaced, and the demo SIGSTOPped that
    /// restarted follower instead of the new leader.
    #[test]
    fn the_leader_to_hit_is_the_newest_term_the_view_may_not_show_yet() {
        let view = |id: &str, token| LeaderInfo {
            holder: regent_core::HolderId::new(id).unwrap(),
            token: regent_core::FencingToken::new(token),
            metadata: regent_core::Metadata::new(),
        };
        let newest = |id: &str, token| Some((id.to_owned(), token));
        assert_eq!(
            leader_now(Some(&view("demo-2", 7)), newest("demo-3", 9)),
            newest("demo-3", 9)
        );
        assert_eq!(
            leader_now(Some(&view("demo-3", 9)), newest("demo-3", 9)),
            newest("demo-3", 9)
        );
        assert_eq!(
            leader_now(Some(&view("demo-1", 11)), None),
            newest("demo-1", 11)
        );
        assert_eq!(leader_now(None, newest("demo-3", 9)), newest("demo-3", 9));
        assert_eq!(leader_now(None, None), None);
    }
}
