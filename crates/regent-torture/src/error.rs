//! Why a campaign did not run to its verdict. A campaign that ran and
//! found violations is not an error: its [`Outcome`](crate::Outcome) says
//! so.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use regent_core::BoxError;

use crate::fault::{FaultKind, FaultRefusal};

/// Why a campaign did not reach a verdict.
///
/// [`Error::is_usage`] tells a configuration the campaign refuses (nothing
/// ran, or a candidate refused its arguments: `regent torture` exits 2)
/// from a failure while it ran (exit 1).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration breaks a rule; nothing was started.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The front end could not make sense of a store URL
    /// ([`StoreAccess::resolve`](crate::StoreAccess::resolve)).
    #[error("store URL {url}")]
    StoreUrl {
        /// The URL, its secrets redacted.
        url: String,
        /// The front end's error.
        #[source]
        source: BoxError,
    },
    /// The front end could not open the store
    /// ([`StoreAccess::open`](crate::StoreAccess::open)).
    #[error("opening the store {endpoint}")]
    StoreOpen {
        /// The endpoint, as the front end shows it.
        endpoint: String,
        /// The front end's error.
        #[source]
        source: BoxError,
    },
    /// A candidate exited before any candidate led. Exit status 2 is a
    /// usage error of `regent run`'s (a store setting it refused).
    #[error("candidate {id} exited before any led ({status}):\n{log}")]
    CandidateExited {
        /// The candidate.
        id: String,
        /// How it exited.
        status: ExitStatus,
        /// The end of its log.
        log: String,
    },
    /// No candidate wrote to the fence in time.
    #[error("no candidate wrote to the fence within {within:?}; {first}:\n{log}")]
    NoLeader {
        /// How long the campaign waited.
        within: Duration,
        /// The first candidate (`-` if none ran).
        first: String,
        /// The end of its log.
        log: String,
    },
    /// The sweep's first candidate neither started a supervisor nor led.
    #[error("the first candidate neither started a supervisor nor led within {within:?}")]
    NoSupervisor {
        /// How long the sweep waited.
        within: Duration,
    },
    /// A sweep's term never reached its crash point.
    #[error("sweep: the term never reached '{point}' (candidate logs in {})", logs.display())]
    PointNotReached {
        /// The crash point.
        point: String,
        /// Where the candidates' logs are.
        logs: PathBuf,
    },
    /// A candidate could not be started.
    #[error("cannot start candidate {id}")]
    Candidate {
        /// The candidate.
        id: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Every member of the peer group runs: none to start.
    #[error("every member of the peer group is running")]
    PeerGroupFull,
    /// A clock fault found no libfaketime.
    #[error("clock faults need libfaketime (scripts/install-engines)")]
    NoFaketime,
    /// A store command could not be started.
    #[error("cannot start a store command (sh)")]
    StoreCommand(#[source] std::io::Error),
    /// A store command exited as it started.
    #[error("a store command exited at once")]
    StoreCommandGone,
    /// A store process the campaign started exited by itself (not by the
    /// nemesis).
    #[error(
        "the store (command {command:?}) exited by itself ({status}); its last output:\n{output}"
    )]
    StoreExited {
        /// The store command.
        command: String,
        /// How it exited.
        status: ExitStatus,
        /// The last lines of its output.
        output: String,
    },
    /// Something the campaign needs from the system failed.
    #[error("{what}")]
    Io {
        /// What the campaign was doing.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// The report could not be encoded.
    #[error("the report")]
    ReportJson(#[source] serde_json::Error),
    /// The report could not be written (and the campaign found no
    /// violation; with violations the outcome is returned, the report
    /// unwritten).
    #[error("cannot write the report {}", path.display())]
    Report {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The sweep was stopped before it ended.
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    /// Whether the campaign refused its configuration (`regent torture`
    /// exits 2): a [`ConfigError`], or a candidate that exited with 2
    /// before any led (`regent run` refused a store setting). Every other
    /// error is a failure while running (exit 1).
    pub fn is_usage(&self) -> bool {
        match self {
            Self::Config(_) => true,
            Self::CandidateExited { status, .. } => status.code() == Some(2),
            _ => false,
        }
    }

    pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::Io { what, source }
    }
}

/// A configuration the campaign refuses. Each names the field of
/// [`Config`](crate::Config) it is about and the rule.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A fault kind asked for cannot be injected here.
    #[error("faults: {fault}: {why}")]
    FaultRefused {
        /// The kind.
        fault: FaultKind,
        /// Why not.
        why: FaultRefusal,
    },
    /// Store commands need store URLs: the URL of the store a command
    /// starts.
    #[error("store_commands need stores: the URL of the store the command starts")]
    StoreCommandsWithoutStores,
    /// A store pid names no process.
    #[error("store_pids: {pid}: no such process")]
    NoSuchStorePid {
        /// The pid.
        pid: i32,
    },
    /// A zero ttl.
    #[error("ttl must be above zero")]
    ZeroTtl,
    /// `candidates` outside 2–20.
    #[error("candidates: {n} is not in 2..=20")]
    Candidates {
        /// The number given.
        n: u8,
    },
    /// `sweep` runs outside 1–1000.
    #[error("sweep: {runs} runs per cell is not in 1..=1000")]
    SweepRuns {
        /// The number given.
        runs: u32,
    },
    /// A peer group has no store: no store URLs, commands or pids.
    #[error("peers: a peer group has no store (stores, store_commands, store_pids)")]
    PeersWithStore,
    /// The sweep runs on a store's candidates, not a peer group.
    #[error("sweep: the crash-point sweep runs on a store, not a peer group")]
    SweepWithPeers,
    /// The peer group's failure timeout breaks `regent peer`'s timing
    /// rules.
    #[error("ttl {ttl:?} (the members' failure timeout)")]
    PeerTtl {
        /// The ttl.
        ttl: Duration,
        /// The rule broken.
        #[source]
        source: regent_peer::ConfigError,
    },
    /// Two store URLs reach different kinds of store.
    #[error(
        "stores: every URL must reach the same store; {endpoint} is a {kind} store, not {first}"
    )]
    MixedStores {
        /// The endpoint that differs.
        endpoint: String,
        /// Its kind of store.
        kind: &'static str,
        /// The first URL's kind.
        first: &'static str,
    },
    /// The store refuses the campaign's ttl (given, or the default for
    /// it) as `regent run` would.
    #[error("ttl {ttl:?}{}", if *defaulted { " (the default)" } else { "" })]
    Ttl {
        /// The ttl.
        ttl: Duration,
        /// Whether it was the default, not given.
        defaulted: bool,
        /// The rule broken.
        #[source]
        source: regent_core::ConfigError,
    },
}
