//! A sweep's cells (a crash point × a process): their runs, the verdict
//! on them, and the table.

use std::time::Duration;

use serde::Serialize;

use super::point::{Best, Point, Victim};
use crate::campaign::Campaign;
use crate::console::Console;

/// One run of a sweep's cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SweepRun {
    /// From the kill to the next term's first write; `None` when the term
    /// survived or no next term wrote in time.
    pub failover_ms: Option<f64>,
    /// The crashed term went on.
    pub survived: bool,
    /// No term wrote within the bound.
    pub leaderless: bool,
    /// Writes of the crashed term after the next term's first.
    pub overlaps: usize,
    /// Processes of the crashed term still alive once the next term wrote
    /// and a grace had gone.
    pub survivors: Vec<i32>,
}

/// A crash point × a process: its runs and verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Cell {
    /// The crash point, in words.
    pub point: String,
    /// The process killed there.
    pub process: Victim,
    /// The best failover the crash allows.
    pub best: Best,
    /// Each run.
    pub runs: Vec<SweepRun>,
    /// The median failover, ms.
    pub failover_p50_ms: Option<f64>,
    /// The longest failover, ms.
    pub failover_max_ms: Option<f64>,
    /// Writes of crashed terms after the next term's first, in all runs.
    pub overlaps: usize,
    /// Processes of crashed terms that outlived them, in all runs.
    pub survivors: usize,
    /// What is wrong, if anything.
    pub violations: Vec<String>,
}

impl Cell {
    /// Whether the cell broke no rule.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The verdict on a cell's runs.
pub(crate) fn judge(
    c: &Campaign,
    point: Point,
    victim: Victim,
    best: Best,
    runs: Vec<SweepRun>,
) -> Cell {
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

/// The sweep's table.
pub(crate) fn print_table(console: &Console, cells: &[Cell]) {
    say!(
        console,
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
            console,
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
