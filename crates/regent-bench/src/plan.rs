//! What a bench will run, resolved from `--stores`, `--cases`, `--runs`
//! and `--short` before any engine starts.

use crate::case::{Case, LoadCase};
use crate::error::BenchError;
use crate::store::StoreKind;

/// Runs per case in the full mode.
pub(crate) const FULL_RUNS: usize = 50;
/// Runs of a graceful case in `--short` mode.
pub(crate) const SHORT_RUNS: usize = 5;
/// Runs of a crash case in `--short` mode: each costs a ttl.
pub(crate) const SHORT_CRASH_RUNS: usize = 3;

/// One (store, case) of the bench: its tools run side by side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) store: StoreKind,
    pub(crate) case: Case,
    pub(crate) runs: usize,
}

/// Everything a bench will run, in order: stores in the order given (or
/// [`StoreKind::DEFAULT`]), each store's cases in [`Case::ALL`]'s order.
/// Without `--cases`, graceful and crash; `preferred` and `requested`
/// (regent's hand-overs, issue 30) only when named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) stores: Vec<StoreKind>,
    pub(crate) blocks: Vec<Block>,
    /// The load cases (`herd`, `scale`, `observe`, `observe-crash`; see
    /// `load/`), by store, in the order of [`LoadCase::ALL`]: only when
    /// named in `--cases`, and only on the stores they run on.
    pub(crate) loads: Vec<(StoreKind, LoadCase)>,
    /// Runs per store of `observe` and of `observe-crash`: as many as a
    /// graceful and a crash hand-over case gets.
    pub(crate) observe_runs: [usize; 2],
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
            None => StoreKind::DEFAULT
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
                            .filter(|s| !s.is_consul())
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
                // The memory store has no hand-over case: no process but
                // the bench's own can reach it.
                if chosen && !case.tools(store).is_empty() {
                    let runs = runs_of(case, runs, short);
                    blocks.push(Block { store, case, runs });
                }
            }
        }
        let mut loads = Vec::new();
        for &store in &stores {
            for case in LoadCase::ALL {
                let named = wanted_loads
                    .iter()
                    .any(|(s, c)| *c == case && s.is_none_or(|s| s == store));
                if named && case.runs_on(store) {
                    loads.push((store, case));
                }
            }
        }
        if blocks.is_empty() && loads.is_empty() {
            return Err(BenchError::Usage(format!(
                "nothing to run: the memory and azblob stores have only the load cases ({}; \
                 azblob only observe and observe-crash), and redis and redis-sentinel none \
                 of them",
                names(LoadCase::ALL.iter().map(|c| c.name()))
            )));
        }
        Ok(Self {
            stores,
            blocks,
            loads,
            observe_runs: [
                runs_of(Case::Graceful, runs, short),
                runs_of(Case::Crash, runs, short),
            ],
        })
    }

    /// Runs per store of load case `case` (the crowds run once).
    pub(crate) fn load_runs(&self, case: LoadCase) -> usize {
        match case {
            LoadCase::Herd | LoadCase::Scale => 1,
            LoadCase::Observe => self.observe_runs[0],
            LoadCase::ObserveCrash => self.observe_runs[1],
        }
    }

    /// How many runs in all: the progress bar's length.
    pub(crate) fn total_runs(&self) -> u64 {
        self.blocks
            .iter()
            .map(|b| (b.runs * b.case.tools(b.store).len()) as u64)
            .sum()
    }
}

/// Runs of `case`: `--runs`, else [`FULL_RUNS`], or in `--short` mode
/// [`SHORT_RUNS`] (a crash: [`SHORT_CRASH_RUNS`]).
fn runs_of(case: Case, runs: Option<usize>, short: bool) -> usize {
    match (runs, short, case) {
        (Some(n), _, _) => n,
        (None, false, _) => FULL_RUNS,
        (None, true, Case::Graceful | Case::Preferred | Case::Requested) => SHORT_RUNS,
        (None, true, Case::Crash) => SHORT_CRASH_RUNS,
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
    use crate::case::{Tool, regent_ttl};

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
        assert_eq!(plan.stores, StoreKind::DEFAULT.to_vec());
        assert_eq!(plan.blocks.len(), 12);
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

    /// regent's hand-overs (issue 30) run only when named, regent alone on
    /// every store, beside graceful on the same stores for comparison.
    #[test]
    fn the_hand_over_cases_run_when_named_regent_alone() {
        let plan = Plan::resolve(None, None, None, false, all_installed).unwrap();
        assert!(!plan.blocks.iter().any(|b| b.case.is_hand_over()));
        let plan = Plan::resolve(
            Some("sqlite,postgres,etcd,zookeeper"),
            Some("graceful,preferred,requested"),
            Some(30),
            false,
            all_installed,
        )
        .unwrap();
        let got: Vec<(StoreKind, Case, usize)> = plan
            .blocks
            .iter()
            .map(|b| (b.store, b.case, b.runs))
            .collect();
        let mut want = Vec::new();
        for store in [
            StoreKind::Sqlite,
            StoreKind::Postgres,
            StoreKind::Etcd,
            StoreKind::ZooKeeper,
        ] {
            for case in [Case::Graceful, Case::Preferred, Case::Requested] {
                want.push((store, case, 30));
            }
        }
        assert_eq!(got, want);
        for b in plan.blocks.iter().filter(|b| b.case.is_hand_over()) {
            let tools = b.case.tools(b.store);
            assert_eq!(tools.len(), 1, "{b:?}");
            assert!(matches!(tools[0], Tool::Regent { .. }), "{b:?}");
            assert_eq!(tools[0].signal(b.case), None);
        }
        // Graceful keeps etcdctl elect and the Curator latch beside regent.
        assert_eq!(plan.total_runs(), 30 * (4 * 3 + 2));
        let short =
            Plan::resolve(Some("etcd"), Some("requested"), None, true, all_installed).unwrap();
        assert_eq!(
            short.blocks,
            [Block {
                store: StoreKind::Etcd,
                case: Case::Requested,
                runs: SHORT_RUNS
            }]
        );
    }

    #[test]
    fn unknown_names_are_usage_errors() {
        for (stores, cases) in [
            (Some("sqlite,mongodb"), None),
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
                if store.load_only() {
                    assert!(tools.is_empty());
                    continue;
                }
                assert!(matches!(tools[0], Tool::Regent { .. }));
                // SQLite and PostgreSQL have no election tool of their own,
                // and no engine's tool has priorities or hand-over requests.
                let regent_alone = case.is_hand_over()
                    || matches!(
                        store,
                        StoreKind::Sqlite
                            | StoreKind::Postgres
                            | StoreKind::PgBouncer
                            | StoreKind::Redis
                            | StoreKind::RedisSentinel
                    );
                assert_eq!(
                    tools.iter().all(|t| matches!(t, Tool::Regent { .. })),
                    regent_alone,
                    "{store} {case}"
                );
                if store != StoreKind::ConsulCluster {
                    assert_eq!(tools.len() == 1, regent_alone, "{store} {case}");
                }
            }
        }
        assert_eq!(
            Case::Crash.tools(StoreKind::Etcd)[1].ttl(),
            regent_ttl(StoreKind::Etcd)
        );
    }

    /// The Consul cluster is benched only when named, with regent at
    /// `consul lock`'s TTL and at its own default; its crash is no CI case.
    #[test]
    fn the_consul_cluster_runs_regent_at_two_ttls_beside_consul_lock() {
        let plan = Plan::resolve(None, None, None, false, all_installed).unwrap();
        assert!(!plan.stores.contains(&StoreKind::ConsulCluster));
        let plan = Plan::resolve(Some("consul-cluster"), None, None, true, all_installed).unwrap();
        let got: Vec<Case> = plan.blocks.iter().map(|b| b.case).collect();
        assert_eq!(got, [Case::Graceful]);
        let tools = Case::Crash.tools(StoreKind::ConsulCluster);
        let ttls: Vec<u64> = tools.iter().map(|t| t.ttl().as_secs()).collect();
        assert_eq!(ttls, [15, 10, 15]);
        assert_eq!(tools[2], Tool::ConsulLock { exec: false });
        assert_eq!(tools[2].agents(), [2, 3]);
    }

    /// PostgreSQL is benched by default (where installed), PgBouncer in
    /// front of it only when named; both run regent alone at the crash
    /// case's ttl, in both cases, the crash in `--short` too.
    #[test]
    fn postgres_runs_regent_alone_and_pgbouncer_only_when_named() {
        let plan = Plan::resolve(None, None, None, true, all_installed).unwrap();
        assert!(plan.stores.contains(&StoreKind::Postgres));
        assert!(!plan.stores.contains(&StoreKind::PgBouncer));
        let plan =
            Plan::resolve(Some("postgres,pgbouncer"), None, None, true, all_installed).unwrap();
        let got: Vec<(StoreKind, Case, usize)> = plan
            .blocks
            .iter()
            .map(|b| (b.store, b.case, b.runs))
            .collect();
        assert_eq!(
            got,
            [
                (StoreKind::Postgres, Case::Graceful, SHORT_RUNS),
                (StoreKind::Postgres, Case::Crash, SHORT_CRASH_RUNS),
                (StoreKind::PgBouncer, Case::Graceful, SHORT_RUNS),
                (StoreKind::PgBouncer, Case::Crash, SHORT_CRASH_RUNS),
            ]
        );
        for store in [StoreKind::Postgres, StoreKind::PgBouncer] {
            for case in Case::ALL {
                assert_eq!(
                    case.tools(store),
                    [Tool::Regent {
                        ttl: crate::case::TTL
                    }]
                );
            }
        }
        assert_eq!(StoreKind::parse("postgresql"), Some(StoreKind::Postgres));
    }

    /// Redis is benched by default (where installed), behind Sentinels
    /// only when named; both run regent alone at the crash case's ttl, in
    /// both cases, the crash in `--short` too; the load cases named run on
    /// both.
    #[test]
    fn redis_runs_regent_alone_and_redis_sentinel_only_when_named() {
        let plan = Plan::resolve(None, None, None, true, all_installed).unwrap();
        assert!(plan.stores.contains(&StoreKind::Redis));
        assert!(!plan.stores.contains(&StoreKind::RedisSentinel));
        let plan = Plan::resolve(None, None, None, true, only_sqlite).unwrap();
        assert!(!plan.stores.contains(&StoreKind::Redis));
        let plan = Plan::resolve(
            Some("redis,redis-sentinel"),
            Some("graceful,crash,herd,observe"),
            None,
            true,
            all_installed,
        )
        .unwrap();
        let got: Vec<(StoreKind, Case, usize)> = plan
            .blocks
            .iter()
            .map(|b| (b.store, b.case, b.runs))
            .collect();
        assert_eq!(
            got,
            [
                (StoreKind::Redis, Case::Graceful, SHORT_RUNS),
                (StoreKind::Redis, Case::Crash, SHORT_CRASH_RUNS),
                (StoreKind::RedisSentinel, Case::Graceful, SHORT_RUNS),
                (StoreKind::RedisSentinel, Case::Crash, SHORT_CRASH_RUNS),
            ]
        );
        assert_eq!(
            plan.loads,
            [
                (StoreKind::Redis, LoadCase::Herd),
                (StoreKind::Redis, LoadCase::Observe),
                (StoreKind::RedisSentinel, LoadCase::Herd),
                (StoreKind::RedisSentinel, LoadCase::Observe),
            ]
        );
        for store in [StoreKind::Redis, StoreKind::RedisSentinel] {
            for case in Case::ALL {
                assert_eq!(
                    case.tools(store),
                    [Tool::Regent {
                        ttl: crate::case::TTL
                    }]
                );
            }
        }
        let err = Plan::resolve(Some("sqlite,redis"), None, None, true, only_sqlite).unwrap_err();
        let BenchError::Usage(message) = err else {
            panic!("{err:?}")
        };
        assert!(message.contains("--stores redis"), "{message}");
    }

    #[test]
    fn the_memory_store_runs_only_load_cases() {
        let plan = Plan::resolve(
            Some("sqlite,memory"),
            Some("scale"),
            None,
            false,
            all_installed,
        )
        .unwrap();
        assert_eq!(
            plan.loads,
            [
                (StoreKind::Sqlite, LoadCase::Scale),
                (StoreKind::Memory, LoadCase::Scale)
            ]
        );
        let err = Plan::resolve(Some("memory"), None, None, false, all_installed).unwrap_err();
        assert!(matches!(err, BenchError::Usage(_)), "{err:?}");
    }

    /// Azure Blob runs the observer cases alone: no hand-over tool, and
    /// the crowds' ttl is shorter than a blob lease.
    #[test]
    fn azblob_runs_only_the_observer_cases() {
        let plan = Plan::resolve(
            Some("etcd,azblob"),
            Some("herd,observe,observe-crash"),
            Some(7),
            false,
            all_installed,
        )
        .unwrap();
        assert_eq!(
            plan.loads,
            [
                (StoreKind::Etcd, LoadCase::Herd),
                (StoreKind::Etcd, LoadCase::Observe),
                (StoreKind::Etcd, LoadCase::ObserveCrash),
                (StoreKind::Azblob, LoadCase::Observe),
                (StoreKind::Azblob, LoadCase::ObserveCrash),
            ]
        );
        assert_eq!(plan.load_runs(LoadCase::Observe), 7);
        assert!(plan.blocks.is_empty());
        let err =
            Plan::resolve(Some("azblob"), Some("scale"), None, false, all_installed).unwrap_err();
        assert!(matches!(err, BenchError::Usage(_)), "{err:?}");
        let short = Plan::resolve(
            Some("memory"),
            Some("observe-crash"),
            None,
            true,
            all_installed,
        )
        .unwrap();
        assert_eq!(short.load_runs(LoadCase::ObserveCrash), SHORT_CRASH_RUNS);
    }
}
