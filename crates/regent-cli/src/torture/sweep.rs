//! `regent torture --sweep`: a kill -9 at every point of a term's life.
//!
//! A campaign's nemesis hits a term at random moments; a crash path that
//! opens for a few milliseconds (the first wake-up of a term's supervisor,
//! a release under way) is rarely hit that way. The sweep hits each on
//! purpose: for every crash point of a term and every process of the term
//! that exists there — `regent`, its shim, the namespace's init, CMD (the
//! writer), the release process of a hand-back — it starts two fresh
//! candidates, brings the term to that point, SIGKILLs that process, and
//! measures what follows through the fence:
//!
//! * **failover**: from the kill to the next term's first accepted write
//!   (or *survived*: the term went on, as it should when only its
//!   pre-started shim died);
//! * **overlaps**: writes of the crashed term (accepted or refused) after
//!   the next term's first one — the old command acting beside the new;
//! * **survivors**: processes of the crashed term (shim, init, writers,
//!   release) still alive once the next term writes and a grace has gone.
//!
//! Each point's failover is compared with the best it allows: where the
//! term's supervisor outlives the crash holding the term's release ticket,
//! or regent lives to resign, the next leader starts in milliseconds
//! (judged: under half a ttl); where nothing left alive holds the lease
//! (regent killed between the acquire's answer and the go, before it
//! handed the ticket over; the namespace killed under its release), the
//! lease must run out: at most a crash failover (two ttls and the store's
//! expiry slack, plus 2 s). Anything else is a violation, as an overlap or
//! a survivor is.
//!
//! The points are reached through the `REGENT_FAILPOINT` hook (see
//! `failpoint.rs`: the process that reaches the stage holds there until
//! the sweep has killed its victim) or by time, measured from the term's
//! first write, which the writer makes as it starts: 0, 5, 20 and 50 ms
//! after, and 10 ms before the first renewal is due. The graceful points
//! are reached by a SIGTERM of the leading regent, the hand-back by a
//! kill -9 of it.

use std::path::PathBuf;
use std::time::Duration;

use rustix::process::Signal;
use serde::Serialize;
use tokio::time::Instant;

use super::{Campaign, fence, procfs, writer};
use crate::clock::mono_ns;
use crate::error::CliError;

/// A point of a term's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Point {
    /// regent has the acquire's answer; the go is not sent.
    Acquired,
    /// The supervisor has the go (and the ticket); CMD has not started.
    BeforeCmd,
    /// This many ms after CMD's first write.
    AfterStart(u64),
    /// 10 ms before the first renewal is due.
    BeforeRenewal,
    /// A renewal answered, before its deadline reaches the supervisor.
    Renewed,
    /// A graceful stop (SIGTERM of regent): the supervisor is about to
    /// stop CMD.
    Stopping,
    /// A graceful stop: CMD is gone, regent is about to release.
    Release,
    /// regent was killed: its supervisor's release process is about to
    /// give the lease back by the ticket.
    HandBack,
}

impl Point {
    const ALL: [Point; 11] = [
        Point::Acquired,
        Point::BeforeCmd,
        Point::AfterStart(0),
        Point::AfterStart(5),
        Point::AfterStart(20),
        Point::AfterStart(50),
        Point::BeforeRenewal,
        Point::Renewed,
        Point::Stopping,
        Point::Release,
        Point::HandBack,
    ];

    fn name(self) -> String {
        match self {
            Point::Acquired => "acquire answered, before the go".into(),
            Point::BeforeCmd => "go taken, before CMD starts".into(),
            Point::AfterStart(ms) => format!("CMD started +{ms} ms"),
            Point::BeforeRenewal => "10 ms before a renewal".into(),
            Point::Renewed => "renewal answered, not yet passed on".into(),
            Point::Stopping => "graceful stop, before CMD stops".into(),
            Point::Release => "graceful stop, before the release".into(),
            Point::HandBack => "hand-back by ticket under way".into(),
        }
    }

    /// The failpoint stage that holds the term at this point.
    fn stage(self) -> Option<&'static str> {
        match self {
            Point::Acquired => Some("regent-acquired"),
            Point::BeforeCmd => Some("init-before-cmd"),
            Point::Renewed => Some("regent-renewed"),
            Point::Stopping => Some("supervisor-stopping"),
            Point::Release => Some("regent-release"),
            Point::HandBack => Some("release-by-ticket"),
            Point::AfterStart(_) | Point::BeforeRenewal => None,
        }
    }

    /// The processes of the term that exist at this point.
    fn victims(self, namespaced: bool) -> Vec<Victim> {
        let mut v = match self {
            Point::Acquired | Point::BeforeCmd => vec![Victim::Regent, Victim::Shim, Victim::Init],
            Point::AfterStart(_) | Point::BeforeRenewal | Point::Renewed | Point::Stopping => {
                vec![Victim::Regent, Victim::Shim, Victim::Init, Victim::Cmd]
            }
            // The supervisor waits for regent's word that it released.
            Point::Release => vec![Victim::Regent, Victim::Shim, Victim::Init],
            Point::HandBack => vec![Victim::Release, Victim::Shim, Victim::Init],
        };
        if !namespaced {
            v.retain(|&x| x != Victim::Init);
        }
        v
    }

    /// Whether a term may go on past a crash at this point (its
    /// pre-started supervisor died: regent starts another).
    fn best_for_survival(self) -> bool {
        self == Point::Acquired
    }

    /// The best failover this crash allows.
    fn best(self, victim: Victim) -> Best {
        match (self, victim) {
            // Nobody alive holds the term's ticket: the supervisor has
            // not got it yet.
            (Point::Acquired, Victim::Regent) => Best::Ttl,
            // The namespace's end takes the release process with it.
            (Point::HandBack, Victim::Init) => Best::Ttl,
            _ => Best::Fast,
        }
    }
}

/// A process of a term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Victim {
    Regent,
    Shim,
    Init,
    Cmd,
    Release,
}

impl Victim {
    fn name(self) -> &'static str {
        match self {
            Victim::Regent => "regent",
            Victim::Shim => "shim",
            Victim::Init => "init",
            Victim::Cmd => "cmd",
            Victim::Release => "release",
        }
    }
}

/// What a crash at a point should cost at best.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Best {
    /// A hand-over in milliseconds (judged: under half a ttl), or none:
    /// the term goes on (its pre-started supervisor died, and regent
    /// started another in time).
    Fast,
    /// The lease runs out: at most a crash failover.
    Ttl,
}

/// One run of a cell.
#[derive(Debug, Clone, Serialize)]
struct Run {
    /// From the kill to the next term's first write; `None` when the term
    /// survived or no next term wrote in time.
    failover_ms: Option<f64>,
    survived: bool,
    /// No term wrote within the bound.
    leaderless: bool,
    overlaps: usize,
    survivors: Vec<i32>,
}

/// A crash point × a process: its runs and verdict.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Cell {
    point: String,
    process: Victim,
    best: Best,
    runs: Vec<Run>,
    failover_p50_ms: Option<f64>,
    failover_max_ms: Option<f64>,
    overlaps: usize,
    survivors: usize,
    /// What is wrong, if anything.
    violations: Vec<String>,
}

impl Cell {
    pub(super) fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The term a sweep run crashes.
struct Crashed {
    /// Its term's fencing token.
    token: u64,
    victim_pid: i32,
    /// Every process of the term at the kill but regent.
    tree: Vec<i32>,
    killed_ns: u64,
}

/// Runs the sweep: `runs` runs per cell. Returns the cells.
pub(super) async fn sweep(c: &mut Campaign, runs: u32) -> Result<Vec<Cell>, CliError> {
    let namespaced = namespaced(c).await?;
    if !namespaced {
        say!("regent torture: no PID namespace here; the init's points are left out");
    }
    let renew_every = c.ttl / 5;
    let mut cells = Vec::new();
    let mut n = 0;
    for point in Point::ALL {
        for victim in point.victims(namespaced) {
            let best = point.best(victim);
            let mut done = Vec::new();
            for _ in 0..runs {
                n += 1;
                let run = run_once(c, point, victim, renew_every, n).await?;
                done.push(run);
            }
            let cell = judge(c, point, victim, best, done);
            c.say(&format!(
                "{:<40} {:<8} {}",
                point.name(),
                victim.name(),
                if cell.ok() {
                    "ok".to_owned()
                } else {
                    cell.violations.join("; ")
                }
            ));
            cells.push(cell);
        }
    }
    Ok(cells)
}

/// Whether CMD gets a PID namespace here: one candidate's tree is looked
/// at (an init under its shim).
async fn namespaced(c: &mut Campaign) -> Result<bool, CliError> {
    c.spawn()?;
    let pid = c.candidates.last().map_or(0, |x| x.pid);
    let until = Instant::now() + c.failover + Duration::from_secs(10);
    let found = loop {
        if let Some(shim) = shim_of(pid) {
            if !procfs::children_in_mode(shim, "__shim").is_empty() {
                break true;
            }
            // The shim says whether it made a namespace once it is up;
            // without one, its child is CMD once the term starts.
            if first_write_of(c, 0, None).is_some() {
                break procfs::descendants(shim).iter().any(|&p| is_init(p));
            }
        }
        if Instant::now() >= until {
            return Err(CliError::failure(format!(
                "the first candidate neither started a supervisor nor led within {:?}",
                c.failover + Duration::from_secs(10)
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    clean_up(c).await;
    Ok(found)
}

/// One run: two fresh candidates, the term brought to `point`, `victim`
/// killed, the next term awaited, the evidence gathered, everything
/// stopped.
async fn run_once(
    c: &mut Campaign,
    point: Point,
    victim: Victim,
    renew_every: Duration,
    n: u32,
) -> Result<Run, CliError> {
    let before = max_token(c);
    let hold = c.dir.join(format!("sweep-{n}.held"));
    c.env = point
        .stage()
        .map(|s| {
            vec![(
                crate::failpoint::ENV.to_owned(),
                format!("{s}:{}", hold.display()),
            )]
        })
        .unwrap_or_default();
    c.spawn()?;
    c.spawn()?;
    c.env.clear();
    let crashed = match reach(c, point, victim, renew_every, before, &hold).await {
        Some(x) => x,
        None => {
            release_hold(&hold);
            clean_up(c).await;
            return Err(CliError::failure(format!(
                "sweep: the term never reached '{}' (candidate logs in {})",
                point.name(),
                c.dir.display()
            )));
        }
    };
    release_hold(&hold);
    let run = observe(c, point, &crashed).await;
    clean_up(c).await;
    Ok(run)
}

/// Brings a term of the run's candidates to `point` and kills `victim`
/// there; `None` if the term never got there.
async fn reach(
    c: &mut Campaign,
    point: Point,
    victim: Victim,
    renew_every: Duration,
    before: u64,
    hold: &std::path::Path,
) -> Option<Crashed> {
    let within = c.failover + Duration::from_secs(10);
    // Graceful points and the hand-back: a term that writes, then a
    // SIGTERM or a kill -9 of its regent sends it to the point.
    match point {
        Point::Stopping | Point::Release | Point::HandBack => {
            let first = wait_write(c, before, within).await?;
            if point == Point::HandBack {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let regent = c.candidates.iter().find(|x| x.id == first.id)?.pid;
            let sig = if point == Point::HandBack {
                Signal::KILL
            } else {
                Signal::TERM
            };
            procfs::signal(regent, sig);
        }
        _ => {}
    }
    let (id, token) = match point.stage() {
        Some(_) => {
            let (holder, token) = wait_held(hold, within).await?;
            let id = c
                .candidates
                .iter()
                .find(|x| x.pid == holder || procfs::descendants(x.pid).contains(&holder))
                .map(|x| x.id.clone())
                .or_else(|| {
                    // The hand-back's release runs under a dead regent:
                    // its term's writes name the candidate.
                    last_writer_above(c, before)
                })?;
            let token = token.or_else(|| {
                fence::lock(&c.fence)
                    .writes()
                    .iter()
                    .filter(|w| w.id == id && w.token > before)
                    .map(|w| w.token)
                    .max()
            })?;
            (id, token)
        }
        None => {
            let first = wait_write(c, before, within).await?;
            let at = match point {
                Point::AfterStart(ms) => first.at_ns + ms * 1_000_000,
                _ => first.at_ns + nanos(renew_every.saturating_sub(Duration::from_millis(10))),
            };
            while mono_ns() < at {
                if at.saturating_sub(mono_ns()) > 2_000_000 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else {
                    std::hint::spin_loop();
                }
            }
            (first.id, first.token)
        }
    };
    let regent = c
        .candidates
        .iter()
        .find(|x| x.id == id)
        .map(|x| x.pid)
        .filter(|&p| procfs::alive(p));
    // The victim may be on its way: a supervisor started ahead of its term
    // starts its init while regent already holds at the acquire.
    let until = Instant::now() + Duration::from_secs(2);
    let (tree, victim_pid) = loop {
        let tree = match regent {
            Some(r) => procfs::descendants(r),
            // regent is dead (the hand-back): its supervisor's processes
            // carry on, orphans.
            None => orphans_of(c),
        };
        let found = match victim {
            Victim::Regent => regent,
            Victim::Shim => tree.iter().copied().find(|&p| is_shim(p)),
            Victim::Init => tree.iter().copied().find(|&p| is_init(p)),
            Victim::Cmd => tree
                .iter()
                .copied()
                .find(|&p| procfs::is_mode(p, writer::MODE) && !is_background(p)),
            Victim::Release => tree.iter().copied().find(|&p| is_release(p)),
        };
        match found {
            Some(pid) => break (tree, pid),
            None if Instant::now() >= until => return None,
            None => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    };
    procfs::signal(victim_pid, Signal::KILL);
    Some(Crashed {
        token,
        victim_pid,
        tree,
        killed_ns: mono_ns(),
    })
}

/// Waits for the next term after the crash, then for the crashed term's
/// processes to be gone, and judges the writes.
async fn observe(c: &mut Campaign, point: Point, x: &Crashed) -> Run {
    let bound = c.failover + Duration::from_secs(2);
    let until = Instant::now() + bound;
    let expect_survival = point.best_for_survival();
    // The next term writes above the crashed term's token; a term that
    // goes on writes with its own after the kill.
    let next = loop {
        let found = fence::lock(&c.fence)
            .writes()
            .iter()
            .find(|w| {
                w.accepted
                    && (w.token > x.token
                        || (expect_survival && w.token == x.token && w.at_ns > x.killed_ns))
            })
            .cloned();
        if let Some(w) = found {
            break Some(w);
        }
        if Instant::now() >= until {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let survived = next.as_ref().is_some_and(|w| w.token == x.token);
    // The crashed term's processes get the stop's grace and a sweep.
    let settle = Instant::now() + Duration::from_secs(3);
    let mut left: Vec<i32> = Vec::new();
    if !survived {
        loop {
            left = x
                .tree
                .iter()
                .copied()
                .filter(|&p| p != x.victim_pid && procfs::alive(p))
                .collect();
            if left.is_empty() || Instant::now() >= settle {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // Writes that straggle in after the next term's first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let overlaps = match &next {
        Some(n) if !survived => fence::lock(&c.fence)
            .writes()
            .iter()
            .filter(|w| w.token == x.token && w.at_ns > n.at_ns)
            .count(),
        _ => 0,
    };
    Run {
        failover_ms: next
            .as_ref()
            .filter(|_| !survived)
            .map(|n| n.at_ns.saturating_sub(x.killed_ns) as f64 / 1e6),
        survived,
        leaderless: next.is_none(),
        overlaps,
        survivors: left,
    }
}

fn judge(c: &Campaign, point: Point, victim: Victim, best: Best, runs: Vec<Run>) -> Cell {
    let mut times: Vec<f64> = runs.iter().filter_map(|r| r.failover_ms).collect();
    times.sort_by(f64::total_cmp);
    let p50 = times.get(times.len().saturating_sub(1) / 2).copied();
    let max = times.last().copied();
    let overlaps = runs.iter().map(|r| r.overlaps).sum();
    let survivors = runs.iter().map(|r| r.survivors.len()).sum();
    let mut violations = Vec::new();
    if overlaps > 0 {
        violations.push(format!(
            "{overlaps} writes of the crashed term after the next term's first"
        ));
    }
    if survivors > 0 {
        violations.push(format!(
            "{survivors} processes of the crashed term outlived it"
        ));
    }
    let leaderless = runs.iter().filter(|r| r.leaderless).count();
    if leaderless > 0 {
        violations.push(format!(
            "{leaderless} runs had no new term within {:?}",
            c.failover + Duration::from_secs(2)
        ));
    }
    let ttl_ms = c.ttl.as_secs_f64() * 1e3;
    let crash_ms = (c.failover + Duration::from_secs(2)).as_secs_f64() * 1e3;
    match best {
        Best::Fast => {
            if let Some(m) = max.filter(|&m| m >= ttl_ms / 2.0) {
                violations.push(format!(
                    "a hand-over took {m:.0} ms, half a ttl or more: the lease was waited out"
                ));
            }
        }
        Best::Ttl => {
            if let Some(m) = max.filter(|&m| m > crash_ms) {
                violations.push(format!("a failover took {m:.0} ms, past {crash_ms:.0} ms"));
            }
        }
    }
    Cell {
        point: point.name(),
        process: victim,
        best,
        runs,
        failover_p50_ms: p50,
        failover_max_ms: max,
        overlaps,
        survivors,
        violations,
    }
}

/// The sweep's table, on stdout.
pub(super) fn print_table(cells: &[Cell]) {
    say!(
        "\n{:<40} {:<8} {:>4} {:>5} {:>12} {:>10} {:>8} {:>9}",
        "crash point",
        "process",
        "runs",
        "best",
        "failover p50",
        "max",
        "overlaps",
        "survivors"
    );
    for cell in cells {
        let ms = |v: Option<f64>| match v {
            Some(v) if v >= 1000.0 => format!("{:.2} s", v / 1e3),
            Some(v) => format!("{v:.0} ms"),
            None if cell.runs.iter().any(|r| r.survived) => "survived".into(),
            None => "-".into(),
        };
        let best = match cell.best {
            Best::Fast => "ms",
            Best::Ttl => "ttl",
        };
        say!(
            "{:<40} {:<8} {:>4} {:>5} {:>12} {:>10} {:>8} {:>9}{}",
            cell.point,
            cell.process.name(),
            cell.runs.len(),
            best,
            ms(cell.failover_p50_ms),
            ms(cell.failover_max_ms),
            cell.overlaps,
            cell.survivors,
            if cell.ok() { "" } else { "  VIOLATION" }
        );
    }
}

/// The first accepted write above `token` (from `id` if given).
fn first_write_of(c: &Campaign, token: u64, id: Option<&str>) -> Option<fence::Write> {
    fence::lock(&c.fence)
        .writes()
        .iter()
        .find(|w| w.accepted && w.token > token && id.is_none_or(|i| w.id == i))
        .cloned()
}

async fn wait_write(c: &Campaign, token: u64, within: Duration) -> Option<fence::Write> {
    let until = Instant::now() + within;
    loop {
        if let Some(w) = first_write_of(c, token, None) {
            return Some(w);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// Waits for the failpoint's file: the pid of the process holding there,
/// and the term's token if it knew it.
async fn wait_held(hold: &std::path::Path, within: Duration) -> Option<(i32, Option<u64>)> {
    let until = Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(hold).unwrap_or_default();
        if text.ends_with('\n') {
            let mut words = text.split_whitespace();
            let pid = words.next()?.parse().ok()?;
            return Some((pid, words.next().and_then(|t| t.parse().ok())));
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

fn release_hold(hold: &std::path::Path) {
    let mut go = hold.as_os_str().to_owned();
    go.push(".go");
    let _ = std::fs::write(PathBuf::from(go), b"");
}

fn max_token(c: &Campaign) -> u64 {
    fence::lock(&c.fence)
        .writes()
        .iter()
        .map(|w| w.token)
        .max()
        .unwrap_or(0)
}

fn last_writer_above(c: &Campaign, token: u64) -> Option<String> {
    fence::lock(&c.fence)
        .writes()
        .iter()
        .rev()
        .find(|w| w.token > token)
        .map(|w| w.id.clone())
}

/// Stops the run's candidates and whatever of their terms is left.
async fn clean_up(c: &mut Campaign) {
    c.stop_all(c.ttl * 3 + Duration::from_secs(5)).await;
    for p in orphans_of(c) {
        procfs::signal(p, Signal::KILL);
    }
    for s in c.writers_alive() {
        procfs::signal(s.pid, Signal::KILL);
    }
}

/// The processes of terms whose regent died: every shim of this campaign
/// (its command names the campaign) whose parent is no live candidate,
/// and everything under it.
fn orphans_of(c: &Campaign) -> Vec<i32> {
    let regents: Vec<i32> = c
        .candidates
        .iter()
        .map(|x| x.pid)
        .filter(|&p| procfs::alive(p))
        .collect();
    let mut found = Vec::new();
    for p in procfs::pids() {
        if !is_shim(p) || !procfs::argv(p).contains(&c.campaign_id) {
            continue;
        }
        if procfs::stat(p).is_some_and(|s| regents.contains(&s.ppid)) {
            continue;
        }
        found.push(p);
        found.extend(procfs::descendants(p));
    }
    found
}

fn shim_of(regent: i32) -> Option<i32> {
    procfs::children_in_mode(regent, "__shim")
        .into_iter()
        .find(|&p| is_shim(p))
}

fn has_arg(pid: i32, arg: &str) -> bool {
    procfs::argv(pid).iter().any(|a| a == arg)
}

fn is_shim(pid: i32) -> bool {
    procfs::is_mode(pid, "__shim") && !has_arg(pid, "--init") && !has_arg(pid, "--release")
}

fn is_init(pid: i32) -> bool {
    procfs::is_mode(pid, "__shim") && has_arg(pid, "--init")
}

fn is_release(pid: i32) -> bool {
    procfs::is_mode(pid, "__shim") && has_arg(pid, "--release")
}

fn is_background(pid: i32) -> bool {
    has_arg(pid, "--background")
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
