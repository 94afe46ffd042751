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
//! [`failpoint`](crate::failpoint): the process that reaches the stage holds there until
//! the sweep has killed its victim) or by time, measured from the term's
//! first write, which the writer makes as it starts: 0, 5, 20 and 50 ms
//! after, and 10 ms before the first renewal is due. The graceful points
//! are reached by a SIGTERM of the leading regent, the hand-back by a
//! kill -9 of it.

mod cell;
mod point;

use std::path::Path;
use std::time::Duration;

use regent_proc::mono_ns;
use rustix::process::Signal;
use tokio::time::Instant;

use self::cell::judge;
pub(crate) use self::cell::print_table;
pub use self::cell::{Cell, SweepRun};
use self::point::Point;
pub use self::point::{Best, Victim};
use crate::campaign::Campaign;
use crate::error::Error;
use crate::failpoint;
use crate::fence;
use crate::procfs;
use crate::writer;

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
pub(crate) async fn sweep(c: &mut Campaign, runs: u32) -> Result<Vec<Cell>, Error> {
    let namespaced = namespaced(c).await?;
    if !namespaced {
        say!(
            c.console,
            "regent torture: no PID namespace here; the init's points are left out"
        );
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
async fn namespaced(c: &mut Campaign) -> Result<bool, Error> {
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
            return Err(Error::NoSupervisor {
                within: c.failover + Duration::from_secs(10),
            });
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
) -> Result<SweepRun, Error> {
    let before = max_token(c);
    let hold = c.dir.join(format!("sweep-{n}.held"));
    c.env = point
        .stage()
        .map(|s| vec![(failpoint::ENV.to_owned(), failpoint::spec(s, &hold))])
        .unwrap_or_default();
    c.spawn()?;
    c.spawn()?;
    c.env.clear();
    let crashed = match reach(c, point, victim, renew_every, before, &hold).await {
        Some(x) => x,
        None => {
            release_hold(&hold);
            clean_up(c).await;
            return Err(Error::PointNotReached {
                point: point.name(),
                logs: c.dir.clone(),
            });
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
    hold: &Path,
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
            let failpoint::Holder { pid: holder, token } = wait_held(hold, within).await?;
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
async fn observe(c: &mut Campaign, point: Point, x: &Crashed) -> SweepRun {
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
    SweepRun {
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
async fn wait_held(hold: &Path, within: Duration) -> Option<failpoint::Holder> {
    let until = Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(hold).unwrap_or_default();
        if text.ends_with('\n') {
            return failpoint::parse_holder(&text);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

fn release_hold(hold: &Path) {
    let _ = std::fs::write(failpoint::go_file(hold), b"");
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
    has_arg(pid, writer::BACKGROUND)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
