//! What a campaign ends with: its report (the JSON `regent torture`
//! writes), and the outcome [`run`](crate::run) returns.

use std::path::PathBuf;

use serde::Serialize;

use crate::checker::{After, Findings};
use crate::fault::{Fault, FaultKind};
use crate::sweep::Cell;

/// How a campaign ended: its report, and where the evidence is.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Outcome {
    /// The report, as written to [`Config::report`](crate::Config::report).
    pub report: Report,
    /// Where the report was written; `None` if no path was configured, or
    /// if writing failed on a campaign with violations (a warning said
    /// why; without violations that is an [`Error`](crate::Error)).
    pub written: Option<PathBuf>,
    /// Where the candidates' logs were kept: the campaign's temporary
    /// directory, kept when it found violations (removed otherwise).
    pub logs: Option<PathBuf>,
}

impl Outcome {
    /// Whether the campaign found no violation (`regent torture` exits 0,
    /// else 4).
    pub fn ok(&self) -> bool {
        self.report.ok()
    }
}

/// A campaign's report: the nemesis's or the sweep's.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Report {
    /// A campaign of random faults.
    Campaign(Box<CampaignReport>),
    /// A crash-point sweep.
    Sweep(SweepReport),
}

impl Report {
    /// Whether no rule was broken.
    pub fn ok(&self) -> bool {
        match self {
            Self::Campaign(r) => r.ok,
            Self::Sweep(r) => r.ok,
        }
    }

    /// The JSON `regent torture --report` writes.
    ///
    /// # Errors
    ///
    /// Only if serde_json fails, which it does not for these types.
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec_pretty(self)
    }
}

/// The parameters of a campaign, as its report keeps them.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct Parameters {
    /// The store URLs (the default SQLite file's if none was given; none
    /// for a peer group).
    pub stores: Vec<String>,
    /// The election.
    pub election: String,
    /// How many candidates were kept alive.
    pub candidates: u8,
    /// The ttl (a peer group: the members' failure timeout), ms.
    pub ttl_ms: u128,
    /// How long faults were injected, ms.
    pub duration_ms: u128,
    /// The kinds of fault injected.
    pub faults: Vec<FaultKind>,
    /// The store commands, in the order of the fault log's
    /// `store_process` indices, then the store pids.
    pub store_commands: Vec<String>,
    /// The store pids.
    pub store_pids: Vec<i32>,
    /// The peer algorithm, when a peer group ran instead of a store's
    /// candidates (`stores` is then empty; the ttl is the members' failure
    /// timeout).
    pub peer: Option<String>,
    /// Whether the peer group ran in quorum mode.
    pub quorum: bool,
}

/// The report of a campaign of random faults.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct CampaignReport {
    /// The nemesis's seed.
    pub seed: u64,
    /// The campaign's id, which its writers carry (`--campaign`).
    pub campaign: String,
    /// What ran.
    pub parameters: Parameters,
    /// CLOCK_MONOTONIC ns when the campaign started; every `*_ns` is on
    /// this clock.
    pub started_ns: u64,
    /// When it ended.
    pub ended_ns: u64,
    /// How many candidates were started in all.
    pub candidates_started: usize,
    /// Request lines the fence could not parse.
    pub garbage_lines: u64,
    /// Whether no rule was broken.
    pub ok: bool,
    /// The checker's verdict.
    #[serde(flatten)]
    pub findings: Findings,
    /// Every fault, in order, with what followed it.
    pub fault_log: Vec<LoggedFault>,
}

/// A fault as the report logs it: what was done, and what followed.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct LoggedFault {
    /// The fault.
    #[serde(flatten)]
    pub fault: Fault,
    /// From the fault to the first accepted write of a newer term, if the
    /// fault found a leader and its term did not outlive the fault.
    pub gap_ms: Option<f64>,
    /// A later fault found the same term leading.
    pub survived: bool,
}

impl LoggedFault {
    pub(crate) fn new(fault: &Fault, after: Option<&After>) -> Self {
        Self {
            fault: fault.clone(),
            gap_ms: match after {
                Some(After::NewTerm(ns)) => Some(*ns as f64 / 1e6),
                _ => None,
            },
            survived: after == Some(&After::Survived),
        }
    }
}

/// The report of a crash-point sweep.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct SweepReport {
    /// The store URLs.
    pub stores: Vec<String>,
    /// The election.
    pub election: String,
    /// The ttl, ms.
    pub ttl_ms: u128,
    /// Runs per crash point and process.
    pub runs: u32,
    /// Whether no cell broke a rule.
    pub ok: bool,
    /// Every crash point × process, with its runs and verdict.
    pub cells: Vec<Cell>,
}
