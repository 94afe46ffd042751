//! What the load cases measured.

use std::fmt;
use std::time::Duration;

use crate::load::counting::Ops;
use crate::store::StoreKind;

/// What one load case measured on one store.
#[derive(Debug, Clone)]
pub(crate) enum LoadResult {
    /// The herd (`herd.rs`).
    Herd {
        store: StoreKind,
        candidates: usize,
        /// Operations per second of the whole crowd, idle.
        idle_per_s: Ops,
        /// The engine's own count of requests per second, idle.
        engine_idle_per_s: Option<f64>,
        failovers: Vec<Failover>,
    },
    /// The scale case (`scale.rs`): a row per size and role.
    Scale {
        store: StoreKind,
        rows: Vec<ScaleRow>,
    },
    /// An observer case (`observe.rs`): a hand-over per run.
    Observe {
        store: StoreKind,
        departure: Departure,
        /// The candidates' ttl.
        ttl: Duration,
        /// The runs measured.
        runs: Vec<ObserveRun>,
        /// The runs in which B or the observer did not see the hand-over
        /// within the bound: what each side saw.
        missed: Vec<String>,
    },
}

/// One hand-over of an observer case, each time from the instant A went
/// (its resign called, or its calls cut off).
#[derive(Debug, Clone)]
pub(crate) struct ObserveRun {
    /// Until B's campaign returned (B leads).
    pub(crate) candidate: Duration,
    /// Until the observer's `changes()` first yielded B with B's token.
    pub(crate) observer: Duration,
    /// Until its `leader_watch()` held B with B's token.
    pub(crate) leader_watch: Duration,
    /// How long `changes()` had said "no leader" when it named B: from
    /// its first "no leader" after A went (`None`: it never said so).
    pub(crate) no_leader: Option<Duration>,
    /// Errors `changes()` yielded in between (its watch failed and was
    /// opened again).
    pub(crate) errors: usize,
}

/// One failover of a herd.
#[derive(Debug, Clone)]
pub(crate) struct Failover {
    pub(crate) handover: Duration,
    /// The crowd's operations from the resign to a tenth of a second after
    /// the win, less the idle rate over as long.
    pub(crate) ops: Ops,
    /// The same, as the engine counted its requests.
    pub(crate) engine: Option<f64>,
}

/// What the candidates of a scale measurement do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Each leads its election: measured.
    Lead,
    /// Each leads its election until killed, for followers to follow: not
    /// measured.
    Hold,
    /// Each follows the leader a holding process keeps: measured.
    Follow,
}

impl Role {
    /// Its name on the child's command line and in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Lead => "lead",
            Self::Hold => "hold",
            Self::Follow => "follow",
        }
    }

    /// The role named `s`.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "lead" => Some(Self::Lead),
            "hold" => Some(Self::Hold),
            "follow" => Some(Self::Follow),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One measurement of the scale case: `elections` candidates in a process
/// of their own, over a window, given per ttl.
#[derive(Debug, Clone)]
pub(crate) struct ScaleRow {
    pub(crate) elections: usize,
    /// Leaders, or followers of another process's leaders.
    pub(crate) role: Role,
    /// Time until every election had its leader (every follower saw it).
    pub(crate) won_in: Duration,
    /// The measurement window.
    pub(crate) window: Duration,
    /// Store operations over one ttl.
    pub(crate) ops_per_ttl: Ops,
    /// The engine's own count of requests over one ttl.
    pub(crate) engine_per_ttl: Option<f64>,
    /// CPU time (user + system) of the whole process over one ttl.
    pub(crate) cpu_per_ttl: Duration,
    /// CPU time of the SQLite store's connection thread over one ttl.
    pub(crate) store_thread_cpu_per_ttl: Option<Duration>,
    /// Resident memory at the window's end.
    pub(crate) rss_kib: i64,
    /// Resident memory the candidates added.
    pub(crate) rss_added_kib: i64,
    /// The process's threads: the most seen in the window.
    pub(crate) threads: u64,
    /// Bytes the process sent to the storage layer, per second (SQLite
    /// and the memory store: a networked store's engine writes, not this
    /// process).
    pub(crate) written_per_s: Option<f64>,
    /// Renewals' mean and longest time in the window (leaders only).
    pub(crate) renew_avg: Option<Duration>,
    pub(crate) renew_max: Option<Duration>,
    /// Candidates no longer leading (following their leader) at the
    /// window's end: this process or the store could not keep up, and the
    /// larger sizes are not tried.
    pub(crate) lost: usize,
}

/// The ttl of the load cases' candidates: `regent run`'s default (10 s,
/// renewed every 2 s; Consul's minimum is the same).
pub(crate) const TTL: Duration = regent_core::DEFAULT_TTL;

/// How A goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Departure {
    /// A resigns.
    Resign,
    /// A's renewals and release stop reaching the store.
    Crash,
}

impl Departure {
    /// The case's name in `--cases` and the report.
    pub(crate) fn case_name(self) -> &'static str {
        match self {
            Self::Resign => "observe",
            Self::Crash => "observe-crash",
        }
    }
}
