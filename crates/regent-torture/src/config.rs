//! A campaign's configuration: what `regent torture`'s flags set.

use std::path::PathBuf;
use std::time::Duration;

use regent_core::ElectionName;

use crate::console::Console;
use crate::fault::FaultKind;

/// The ttl of a campaign on a store when none is given, unless the
/// store's shortest ttl is longer (Consul: 10 s, Azure Blob: 15 s).
pub const DEFAULT_TTL: Duration = Duration::from_secs(2);

/// A peer group's failure timeout when no ttl is given: `regent peer`'s.
pub const DEFAULT_PEER_TTL: Duration = Duration::from_secs(1);

/// What a campaign runs: where, how many candidates, which faults for how
/// long, and where the report goes.
///
/// [`Config::new`] takes the one thing with no default, the `regent`
/// executable; the rest has `regent torture`'s defaults and chained
/// setters. [`run`](crate::run) checks the whole (its
/// [`ConfigError`](crate::ConfigError)s name the field and the rule).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// The `regent` executable the candidates run (`regent run`, or
    /// `regent peer`), and their command runs in its hidden
    /// [`writer`](crate::writer) mode. `regent torture` passes its own.
    pub regent: PathBuf,
    /// The store's URLs, one per endpoint (a Consul agent per candidate):
    /// each new candidate takes the URL the fewest live candidates use.
    /// Every URL must reach the same store. None: a fresh SQLite file in
    /// the campaign's temporary directory.
    pub stores: Vec<String>,
    /// The election (default `torture`).
    pub election: ElectionName,
    /// How many candidates to keep alive, 2–20 (default 5).
    pub candidates: u8,
    /// The candidates' lease ttl; a peer group's failure timeout. Default:
    /// [`DEFAULT_TTL`], or the store's shortest ttl if longer;
    /// [`DEFAULT_PEER_TTL`] in a peer group.
    pub ttl: Option<Duration>,
    /// How long to inject faults (default 10 minutes).
    pub duration: Duration,
    /// The kinds of fault to inject (default: every kind that applies). A
    /// kind that cannot apply is a [`ConfigError`](crate::ConfigError).
    pub faults: Option<Vec<FaultKind>>,
    /// The nemesis's seed (default: random). The same seed replays the
    /// same choices, not the same timing.
    pub seed: Option<u64>,
    /// Where to write the JSON report; none: the
    /// [`Outcome`](crate::Outcome) alone holds it.
    pub report: Option<PathBuf>,
    /// Commands that start the store's processes (`sh -c CMD`, each in
    /// its own process group), in this order; the campaign waits until
    /// the store answers, may stop and kill them, and stops them at the
    /// end. They need [`stores`](Config::stores).
    pub store_commands: Vec<String>,
    /// The pids of store processes started by someone else: the campaign
    /// may stop them.
    pub store_pids: Vec<i32>,
    /// A peer group instead of a store's candidates.
    pub peers: Option<Peers>,
    /// Instead of random faults, the crash-point sweep with this many runs
    /// per crash point and process (1–1000).
    pub sweep: Option<u32>,
    /// Where progress, the table and warnings go (default: stdout and
    /// stderr).
    pub console: Console,
}

/// A peer group under torture: `candidates` `regent peer` members, ids
/// 1..N, on `127.0.0.1`, each pair linked through a proxy of the
/// campaign's (the `partition` fault).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peers {
    /// The algorithm the members elect with.
    pub algorithm: regent_peer::Algorithm,
    /// Whether the members run in quorum mode: a partition cannot give
    /// two leaders, and refused writes are violations.
    pub quorum: bool,
}

impl Config {
    /// A campaign of `regent torture`'s defaults whose candidates run the
    /// `regent` executable at `regent`.
    pub fn new(regent: impl Into<PathBuf>) -> Self {
        Self {
            regent: regent.into(),
            stores: Vec::new(),
            election: ElectionName::new("torture").expect("a valid election name"),
            candidates: 5,
            ttl: None,
            duration: Duration::from_secs(600),
            faults: None,
            seed: None,
            report: None,
            store_commands: Vec::new(),
            store_pids: Vec::new(),
            peers: None,
            sweep: None,
            console: Console::stdio(),
        }
    }

    /// Adds a store URL ([`Config::stores`]).
    #[must_use]
    pub fn store(mut self, url: impl Into<String>) -> Self {
        self.stores.push(url.into());
        self
    }

    /// Sets [`Config::election`].
    #[must_use]
    pub fn election(mut self, election: ElectionName) -> Self {
        self.election = election;
        self
    }

    /// Sets [`Config::candidates`].
    #[must_use]
    pub fn candidates(mut self, n: u8) -> Self {
        self.candidates = n;
        self
    }

    /// Sets [`Config::ttl`].
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets [`Config::duration`].
    #[must_use]
    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// Sets [`Config::faults`].
    #[must_use]
    pub fn faults(mut self, kinds: impl IntoIterator<Item = FaultKind>) -> Self {
        self.faults = Some(kinds.into_iter().collect());
        self
    }

    /// Sets [`Config::seed`].
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Sets [`Config::report`].
    #[must_use]
    pub fn report(mut self, path: impl Into<PathBuf>) -> Self {
        self.report = Some(path.into());
        self
    }

    /// Adds a store command ([`Config::store_commands`]).
    #[must_use]
    pub fn store_command(mut self, command: impl Into<String>) -> Self {
        self.store_commands.push(command.into());
        self
    }

    /// Adds a store pid ([`Config::store_pids`]).
    #[must_use]
    pub fn store_pid(mut self, pid: i32) -> Self {
        self.store_pids.push(pid);
        self
    }

    /// Sets [`Config::peers`].
    #[must_use]
    pub fn peers(mut self, peers: Peers) -> Self {
        self.peers = Some(peers);
        self
    }

    /// Sets [`Config::sweep`].
    #[must_use]
    pub fn sweep(mut self, runs: u32) -> Self {
        self.sweep = Some(runs);
        self
    }

    /// Sets [`Config::console`].
    #[must_use]
    pub fn console(mut self, console: Console) -> Self {
        self.console = console;
        self
    }
}
