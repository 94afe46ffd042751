//! The stores a bench can run on, by name, and whether their engines are
//! installed.

use std::fmt;
use std::path::{Path, PathBuf};

/// A store the bench can start, with its engine's own tool where one
/// exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum StoreKind {
    /// The embedded store: a file in a temporary directory; no native tool.
    Sqlite,
    /// One etcd member; `etcdctl elect` and `etcdctl lock`.
    Etcd,
    /// One Consul dev agent, shared by every candidate; `consul lock`.
    Consul,
    /// One standalone ZooKeeper server; Curator's `LeaderLatch`.
    ZooKeeper,
    /// A Consul cluster as one is deployed: three servers and a client
    /// agent per candidate (regent's on agents 0 and 1, `consul lock`'s on
    /// 2 and 3); regent at `consul lock`'s session TTL and at its own
    /// default ttl, beside `consul lock`. Only when named.
    ConsulCluster,
    /// regent's in-memory store, inside the measuring process: the floor
    /// of what candidates cost (their tasks and timers), for the load
    /// cases only. Only when named.
    Memory,
}

impl StoreKind {
    /// Every store, in the order a bench runs them.
    pub(crate) const ALL: [Self; 6] = [
        Self::Sqlite,
        Self::Etcd,
        Self::Consul,
        Self::ZooKeeper,
        Self::ConsulCluster,
        Self::Memory,
    ];

    /// The stores benched when `--stores` is not given (those whose engine
    /// is installed; SQLite always).
    pub(crate) const DEFAULT: [Self; 4] = [Self::Sqlite, Self::Etcd, Self::Consul, Self::ZooKeeper];

    /// Its name in `--stores`, `--cases STORE:CASE` and the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Etcd => "etcd",
            Self::Consul => "consul",
            Self::ZooKeeper => "zookeeper",
            Self::ConsulCluster => "consul-cluster",
            Self::Memory => "memory",
        }
    }

    /// The store named `s`.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "sqlite" => Some(Self::Sqlite),
            "etcd" => Some(Self::Etcd),
            "consul" => Some(Self::Consul),
            "zookeeper" | "zk" => Some(Self::ZooKeeper),
            "consul-cluster" => Some(Self::ConsulCluster),
            "memory" => Some(Self::Memory),
            _ => None,
        }
    }

    /// Whether it is a Consul (a dev agent or a cluster): the bench reads
    /// the lock holder's session back from it.
    pub(crate) fn is_consul(self) -> bool {
        matches!(self, Self::Consul | Self::ConsulCluster)
    }

    /// The programs (and, for ZooKeeper, jars) the store's engine and
    /// tools need, or why they are missing.
    pub(crate) fn check_installed(self) -> Result<(), String> {
        let programs: &[(&str, &str)] = match self {
            Self::Sqlite | Self::Memory => &[],
            Self::Etcd => &[
                ("etcd", "REGENT_ETCD_BIN"),
                ("etcdctl", "REGENT_ETCDCTL_BIN"),
            ],
            Self::Consul | Self::ConsulCluster => &[("consul", "REGENT_CONSUL_BIN")],
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

/// Whether `path` is an executable file.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
