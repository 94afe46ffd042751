//! What a bench measures: the stores, the cases, the tools of each
//! (store, case), and how many runs; resolved from the flags before any
//! engine starts.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::process::Signal;

use super::BenchError;
use super::load::LoadCase;

/// Runs per case in the full mode.
pub(crate) const FULL_RUNS: usize = 50;
/// Runs of a graceful case in `--short` mode.
pub(crate) const SHORT_RUNS: usize = 5;
/// Runs of a crash case in `--short` mode: each costs a ttl.
pub(crate) const SHORT_CRASH_RUNS: usize = 3;

/// regent's ttl, and the native tool's where it has one, on the stores
/// whose tools take any ttl: the crash case's 2 s.
pub(crate) const TTL: Duration = Duration::from_secs(2);

/// `consul lock`'s session TTL (`api.DefaultLockSessionTTL`, no flag): the
/// ttl regent gets on Consul too (its minimum is 10 s).
pub(crate) const CONSUL_LOCK_TTL: Duration = Duration::from_secs(15);

/// Consul's default session lock delay, which `consul lock` keeps.
pub(crate) const CONSUL_LOCK_DELAY: Duration = Duration::from_secs(15);

/// The session TTL of `etcdctl elect` (`concurrency.NewSession`'s default;
/// the command has no flag for it).
pub(crate) const ETCDCTL_ELECT_TTL: Duration = Duration::from_secs(60);

/// The Curator participant's session timeout (fixed in its source).
pub(crate) const CURATOR_SESSION: Duration = Duration::from_secs(2);

/// A store the bench can start, with its engine's own tool where one
/// exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum StoreKind {
    /// The embedded store: a temporary file; no native tool.
    Sqlite,
    /// One etcd member; `etcdctl elect` and `etcdctl lock`.
    Etcd,
    /// One Consul dev agent; `consul lock`.
    Consul,
    /// One standalone ZooKeeper server; Curator's `LeaderLatch`.
    ZooKeeper,
}

impl StoreKind {
    pub(crate) const ALL: [Self; 4] = [Self::Sqlite, Self::Etcd, Self::Consul, Self::ZooKeeper];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Etcd => "etcd",
            Self::Consul => "consul",
            Self::ZooKeeper => "zookeeper",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "sqlite" => Some(Self::Sqlite),
            "etcd" => Some(Self::Etcd),
            "consul" => Some(Self::Consul),
            "zookeeper" | "zk" => Some(Self::ZooKeeper),
            _ => None,
        }
    }

    /// regent's ttl on this store: the native tool's where it has one.
    pub(crate) fn regent_ttl(self) -> Duration {
        match self {
            Self::Consul => CONSUL_LOCK_TTL,
            Self::Sqlite | Self::Etcd | Self::ZooKeeper => TTL,
        }
    }

    /// The programs (and, for ZooKeeper, jars) the store's engine and
    /// tools need, or why they are missing.
    pub(crate) fn check_installed(self) -> Result<(), String> {
        let programs: &[(&str, &str)] = match self {
            Self::Sqlite => &[],
            Self::Etcd => &[
                ("etcd", "REGENT_ETCD_BIN"),
                ("etcdctl", "REGENT_ETCDCTL_BIN"),
            ],
            Self::Consul => &[("consul", "REGENT_CONSUL_BIN")],
            Self::ZooKeeper => &[("java", "REGENT_JAVA_BIN"), ("javac", "")],
        };
        for (program, var) in programs {
            find_program(program, var)?;
        }
        if self == Self::ZooKeeper {
            regent_testkit::engines::zookeeper_classpath().map_err(|e| e.to_string())?;
            regent_testkit::engines::curator_classpath().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `program` as the test kit would run it: the path in `var` when that is
/// set, else the first executable of that name on `PATH`.
fn find_program(program: &str, var: &str) -> Result<PathBuf, String> {
    if let Some(path) = (!var.is_empty())
        .then(|| std::env::var_os(var))
        .flatten()
        .filter(|p| !p.is_empty())
    {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!(
                "{program} not found at {} (set by {var}); run scripts/install-engines",
                path.display()
            ))
        };
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
        .ok_or_else(|| format!("{program} not found on PATH; run scripts/install-engines"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What happens to the leading tool process. New cases (`scale`, `herd`)
/// are new variants: a name, the tools that run it, and how a run stops
/// the leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Case {
    /// Its own graceful signal (SIGTERM; SIGINT for `etcdctl elect`): the
    /// tool releases, the next leader's command starts.
    Graceful,
    /// SIGKILL of the tool process alone: the lease must expire.
    Crash,
}

impl Case {
    pub(crate) const ALL: [Self; 2] = [Self::Graceful, Self::Crash];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Graceful => "graceful",
            Self::Crash => "crash",
        }
    }

    pub(crate) fn title(self) -> &'static str {
        match self {
            Self::Graceful => "graceful stop of the leader (SIGTERM, or SIGINT for etcdctl elect)",
            Self::Crash => "kill -9 of the leading process",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "graceful" => Some(Self::Graceful),
            "crash" => Some(Self::Crash),
            _ => None,
        }
    }

    /// The tools that run this case on `store`, regent first.
    pub(crate) fn tools(self, store: StoreKind) -> Vec<Tool> {
        let native: &[Tool] = match (store, self) {
            (StoreKind::Sqlite, _) => &[],
            (StoreKind::Etcd, Self::Graceful) => &[Tool::EtcdctlElect],
            (StoreKind::Etcd, Self::Crash) => &[Tool::EtcdctlLock],
            (StoreKind::Consul, Self::Graceful) => &[
                Tool::ConsulLock { exec: false },
                Tool::ConsulLock { exec: true },
            ],
            (StoreKind::Consul, Self::Crash) => &[Tool::ConsulLock { exec: false }],
            (StoreKind::ZooKeeper, _) => &[Tool::CuratorLatch],
        };
        let mut tools = vec![Tool::Regent {
            ttl: store.regent_ttl(),
        }];
        tools.extend_from_slice(native);
        tools
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tool under test: regent, or an engine's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Tool {
    /// `regent run --ttl TTL -- regent __demo-task …`.
    Regent { ttl: Duration },
    /// `etcdctl elect NAME PROPOSAL`: leads until SIGINT, printing its
    /// proposal when elected.
    EtcdctlElect,
    /// `etcdctl lock --ttl 2 NAME CMD…`.
    EtcdctlLock,
    /// `consul lock PREFIX CMD` (through `$SHELL -c`); with `exec`, the
    /// shell execs CMD.
    ConsulLock { exec: bool },
    /// A Curator `LeaderLatch` participant in a JVM of its own.
    CuratorLatch,
}

impl Tool {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Regent { .. } => "regent run",
            Self::EtcdctlElect => "etcdctl elect",
            Self::EtcdctlLock => "etcdctl lock",
            Self::ConsulLock { exec: false } => "consul lock",
            Self::ConsulLock { exec: true } => "consul lock, exec CMD",
            Self::CuratorLatch => "Curator LeaderLatch",
        }
    }

    /// A short tag for file and election names.
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Self::Regent { .. } => "regent",
            Self::EtcdctlElect => "etcdctl-elect",
            Self::EtcdctlLock => "etcdctl-lock",
            Self::ConsulLock { exec: false } => "consul-lock",
            Self::ConsulLock { exec: true } => "consul-lock-exec",
            Self::CuratorLatch => "curator",
        }
    }

    /// The lease, session or ttl the tool's leadership lives by.
    pub(crate) fn ttl(self) -> Duration {
        match self {
            Self::Regent { ttl } => ttl,
            Self::EtcdctlElect => ETCDCTL_ELECT_TTL,
            Self::EtcdctlLock => TTL,
            Self::ConsulLock { .. } => CONSUL_LOCK_TTL,
            Self::CuratorLatch => CURATOR_SESSION,
        }
    }

    /// How the ttl is set, for the report.
    pub(crate) fn ttl_note(self) -> String {
        let s = self.ttl().as_secs();
        match self {
            Self::Regent { .. } => format!("--ttl {s}s"),
            Self::EtcdctlElect => format!("session {s} s (fixed)"),
            Self::EtcdctlLock => format!("--ttl {s}"),
            Self::ConsulLock { .. } => format!(
                "session {s} s, lock delay {} s (defaults)",
                CONSUL_LOCK_DELAY.as_secs()
            ),
            Self::CuratorLatch => format!("session {s} s"),
        }
    }

    /// How often the holder renews: the random part of the wait before the
    /// signal spans one such interval, so that the signal falls anywhere in
    /// the renewal cycle. regent: its default, a fifth of the ttl; etcd's
    /// Go client: a third of the lease TTL; `consul lock`: half its session
    /// TTL; ZooKeeper's Java client pings at a third of its session timeout.
    pub(crate) fn renew_every(self) -> Duration {
        match self {
            Self::Regent { ttl } => ttl / 5,
            Self::EtcdctlElect | Self::EtcdctlLock => self.ttl() / 3,
            Self::ConsulLock { .. } => CONSUL_LOCK_TTL / 2,
            Self::CuratorLatch => CURATOR_SESSION / 3,
        }
    }

    /// The signal that stops the leading tool process in `case`: each
    /// tool's own graceful stop. `etcdctl elect` resigns on SIGINT only
    /// (SIGTERM kills it, leaving its session to expire).
    pub(crate) fn signal(self, case: Case) -> Signal {
        match (case, self) {
            (Case::Crash, _) => Signal::KILL,
            (Case::Graceful, Self::EtcdctlElect) => Signal::INT,
            (Case::Graceful, _) => Signal::TERM,
        }
    }

    /// Whether the tool runs a command (whose start is logged by the demo
    /// task) rather than announcing its leadership on its standard output.
    pub(crate) fn runs_command(self) -> bool {
        match self {
            Self::Regent { .. } | Self::EtcdctlLock | Self::ConsulLock { .. } => true,
            Self::EtcdctlElect | Self::CuratorLatch => false,
        }
    }

    /// The longest a hand-over may take before the bench gives up: after a
    /// crash, the store ends the holder's lease within its ttl and slack
    /// (Consul: two session TTLs, then the lock delay and `consul lock`'s
    /// 5 s retry), plus a margin for a busy machine.
    pub(crate) fn handover_bound(self, case: Case) -> Duration {
        let margin = Duration::from_secs(20);
        match (case, self) {
            (Case::Graceful, _) => margin,
            (Case::Crash, Self::ConsulLock { .. }) => {
                2 * CONSUL_LOCK_TTL + CONSUL_LOCK_DELAY + Duration::from_secs(5) + margin
            }
            (Case::Crash, Self::Regent { ttl }) => 3 * ttl + margin,
            (Case::Crash, _) => 2 * self.ttl() + margin,
        }
    }
}

/// One (store, case) of the bench: its tools run side by side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) store: StoreKind,
    pub(crate) case: Case,
    pub(crate) runs: usize,
}

/// Everything a bench will run, in order: stores in the order given (or
/// [`StoreKind::ALL`]), each store's cases in [`Case::ALL`]'s order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) stores: Vec<StoreKind>,
    pub(crate) blocks: Vec<Block>,
    /// The load cases (`herd`, `scale`; see `load.rs`), by store, in the
    /// order of [`LoadCase::ALL`]: only when named in `--cases`.
    pub(crate) loads: Vec<(StoreKind, LoadCase)>,
}

impl Plan {
    /// The plan for `--stores`, `--cases`, `--runs` and `--short`.
    /// `installed` tells which stores' engines are installed (asked only
    /// when `--stores` is not given, or to refuse one that was).
    pub(crate) fn resolve(
        stores: Option<&str>,
        cases: Option<&str>,
        runs: Option<usize>,
        short: bool,
        installed: impl Fn(StoreKind) -> Result<(), String>,
    ) -> Result<Self, BenchError> {
        let stores = match stores {
            Some(list) => {
                let mut chosen = Vec::new();
                for name in split_list(list) {
                    let store = StoreKind::parse(name).ok_or_else(|| {
                        BenchError::Usage(format!(
                            "--stores: unknown store '{name}'; the stores are {}",
                            names(StoreKind::ALL.iter().map(|s| s.name()))
                        ))
                    })?;
                    if !chosen.contains(&store) {
                        chosen.push(store);
                    }
                }
                if chosen.is_empty() {
                    return Err(BenchError::Usage("--stores: no store named".into()));
                }
                for store in &chosen {
                    installed(*store)
                        .map_err(|why| BenchError::Usage(format!("--stores {store}: {why}")))?;
                }
                chosen
            }
            None => StoreKind::ALL
                .into_iter()
                .filter(|s| *s == StoreKind::Sqlite || installed(*s).is_ok())
                .collect(),
        };

        // (store or every store, case)
        let mut wanted: Vec<(Option<StoreKind>, Case)> = Vec::new();
        let mut wanted_loads: Vec<(Option<StoreKind>, LoadCase)> = Vec::new();
        match cases {
            Some(list) => {
                for item in split_list(list) {
                    let (store, case) = match item.split_once(':') {
                        Some((store, case)) => {
                            let kind = StoreKind::parse(store).ok_or_else(|| {
                                BenchError::Usage(format!(
                                    "--cases {item}: unknown store '{store}'"
                                ))
                            })?;
                            if !stores.contains(&kind) {
                                return Err(BenchError::Usage(format!(
                                    "--cases {item}: {kind} is not among the stores benched ({})",
                                    names(stores.iter().map(|s| s.name()))
                                )));
                            }
                            (Some(kind), case)
                        }
                        None => (None, item),
                    };
                    if let Some(load) = LoadCase::parse(case) {
                        wanted_loads.push((store, load));
                        continue;
                    }
                    let case = Case::parse(case).ok_or_else(|| {
                        BenchError::Usage(format!(
                            "--cases: unknown case '{case}'; the cases are {}",
                            names(
                                Case::ALL
                                    .iter()
                                    .map(|c| c.name())
                                    .chain(LoadCase::ALL.iter().map(|c| c.name()))
                            )
                        ))
                    })?;
                    wanted.push((store, case));
                }
                if wanted.is_empty() && wanted_loads.is_empty() {
                    return Err(BenchError::Usage("--cases: no case named".into()));
                }
            }
            None => {
                wanted.push((None, Case::Graceful));
                if short {
                    // Consul's crash costs about 40 s a run: not for CI.
                    wanted.extend(
                        stores
                            .iter()
                            .filter(|s| **s != StoreKind::Consul)
                            .map(|s| (Some(*s), Case::Crash)),
                    );
                } else {
                    wanted.push((None, Case::Crash));
                }
            }
        }

        let mut blocks = Vec::new();
        for &store in &stores {
            for case in Case::ALL {
                let chosen = wanted
                    .iter()
                    .any(|(s, c)| *c == case && s.is_none_or(|s| s == store));
                if chosen {
                    let runs = match (runs, short, case) {
                        (Some(n), _, _) => n,
                        (None, false, _) => FULL_RUNS,
                        (None, true, Case::Graceful) => SHORT_RUNS,
                        (None, true, Case::Crash) => SHORT_CRASH_RUNS,
                    };
                    blocks.push(Block { store, case, runs });
                }
            }
        }
        let mut loads = Vec::new();
        for &store in &stores {
            for case in LoadCase::ALL {
                if wanted_loads
                    .iter()
                    .any(|(s, c)| *c == case && s.is_none_or(|s| s == store))
                {
                    loads.push((store, case));
                }
            }
        }
        Ok(Self {
            stores,
            blocks,
            loads,
        })
    }

    /// How many runs in all: the progress bar's length.
    pub(crate) fn total_runs(&self) -> u64 {
        self.blocks
            .iter()
            .map(|b| (b.runs * b.case.tools(b.store).len()) as u64)
            .sum()
    }
}

fn split_list(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_installed(_: StoreKind) -> Result<(), String> {
        Ok(())
    }

    fn only_sqlite(s: StoreKind) -> Result<(), String> {
        match s {
            StoreKind::Sqlite => Ok(()),
            _ => Err("not found on PATH; run scripts/install-engines".into()),
        }
    }

    #[test]
    fn defaults_are_every_installed_store_and_every_case() {
        let plan = Plan::resolve(None, None, None, false, only_sqlite).unwrap();
        assert_eq!(plan.stores, vec![StoreKind::Sqlite]);
        assert_eq!(plan.blocks.len(), 2);
        assert!(plan.blocks.iter().all(|b| b.runs == FULL_RUNS));

        let plan = Plan::resolve(None, None, None, false, all_installed).unwrap();
        assert_eq!(plan.stores, StoreKind::ALL.to_vec());
        assert_eq!(plan.blocks.len(), 8);
    }

    #[test]
    fn short_mode_leaves_consul_crash_out_and_runs_few() {
        let plan = Plan::resolve(None, None, None, true, all_installed).unwrap();
        assert!(
            !plan
                .blocks
                .iter()
                .any(|b| b.store == StoreKind::Consul && b.case == Case::Crash)
        );
        let etcd_crash = plan
            .blocks
            .iter()
            .find(|b| b.store == StoreKind::Etcd && b.case == Case::Crash)
            .unwrap();
        assert_eq!(etcd_crash.runs, SHORT_CRASH_RUNS);
        // Named, it runs.
        let plan = Plan::resolve(
            Some("consul"),
            Some("consul:crash"),
            Some(2),
            true,
            all_installed,
        )
        .unwrap();
        assert_eq!(
            plan.blocks,
            vec![Block {
                store: StoreKind::Consul,
                case: Case::Crash,
                runs: 2
            }]
        );
    }

    #[test]
    fn a_store_case_item_restricts_the_case_to_that_store() {
        let plan = Plan::resolve(
            Some("sqlite,etcd"),
            Some("graceful,etcd:crash"),
            None,
            false,
            all_installed,
        )
        .unwrap();
        let got: Vec<(StoreKind, Case)> = plan.blocks.iter().map(|b| (b.store, b.case)).collect();
        assert_eq!(
            got,
            vec![
                (StoreKind::Sqlite, Case::Graceful),
                (StoreKind::Etcd, Case::Graceful),
                (StoreKind::Etcd, Case::Crash)
            ]
        );
    }

    #[test]
    fn a_missing_engine_asked_for_is_a_usage_error_naming_the_script() {
        let err = Plan::resolve(Some("sqlite,etcd"), None, None, true, only_sqlite).unwrap_err();
        let BenchError::Usage(message) = err else {
            panic!("{err:?}")
        };
        assert!(message.contains("etcd"), "{message}");
        assert!(message.contains("scripts/install-engines"), "{message}");
    }

    #[test]
    fn load_cases_come_only_when_named() {
        let plan = Plan::resolve(Some("sqlite,etcd"), None, None, false, all_installed).unwrap();
        assert!(plan.loads.is_empty());
        let plan = Plan::resolve(
            Some("sqlite,etcd"),
            Some("graceful,etcd:scale,herd"),
            None,
            false,
            all_installed,
        )
        .unwrap();
        assert_eq!(
            plan.loads,
            [
                (StoreKind::Sqlite, LoadCase::Herd),
                (StoreKind::Etcd, LoadCase::Herd),
                (StoreKind::Etcd, LoadCase::Scale)
            ]
        );
        assert_eq!(plan.blocks.len(), 2);
        let only = Plan::resolve(Some("etcd"), Some("scale"), None, true, all_installed).unwrap();
        assert!(only.blocks.is_empty());
        assert_eq!(only.loads, [(StoreKind::Etcd, LoadCase::Scale)]);
    }

    #[test]
    fn unknown_names_are_usage_errors() {
        for (stores, cases) in [
            (Some("sqlite,redis"), None),
            (None, Some("graceful,stampede")),
            (Some("sqlite"), Some("etcd:crash")),
            (Some(""), None),
        ] {
            let err = Plan::resolve(stores, cases, None, false, all_installed).unwrap_err();
            assert!(matches!(err, BenchError::Usage(_)), "{stores:?} {cases:?}");
        }
    }

    #[test]
    fn every_store_has_regent_first_and_native_tools_where_they_exist() {
        for store in StoreKind::ALL {
            for case in Case::ALL {
                let tools = case.tools(store);
                assert!(matches!(tools[0], Tool::Regent { .. }));
                assert_eq!(tools.len() == 1, store == StoreKind::Sqlite);
            }
        }
        assert_eq!(
            Case::Crash.tools(StoreKind::Etcd)[1].ttl(),
            StoreKind::Etcd.regent_ttl()
        );
    }
}
