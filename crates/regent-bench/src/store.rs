//! The stores a bench can run on, by name, and whether their engines are
//! installed.

use std::fmt;
use std::path::{Path, PathBuf};

use regent_testkit::engines::postgres::{BINDIR_VAR, DEFAULT_BINDIR, PGBOUNCER_VAR};
use regent_testkit::engines::redis::{CLI_VAR, SENTINEL_VAR, SERVER_VAR};

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
    /// One PostgreSQL server, reached directly; no native tool (PostgreSQL
    /// has no election tool of its own).
    Postgres,
    /// One PostgreSQL server behind PgBouncer in transaction pooling mode:
    /// regent's statements go through the pooler, its watches `LISTEN` on
    /// a connection straight to the server (`--postgres-listen-url`), as
    /// the store's docs tell users of such a pooler. No native tool. Only
    /// when named.
    PgBouncer,
    /// One Redis server (no persistence), reached directly; no native tool
    /// (Redis has no election tool of its own).
    Redis,
    /// A Redis primary and its replica watched by three Sentinels, reached
    /// through them (`redis+sentinel://S1,S2,S3/mymaster`). No native tool.
    /// Only when named.
    RedisSentinel,
    /// A Consul cluster as one is deployed: three servers and a client
    /// agent per candidate (regent's on agents 0 and 1, `consul lock`'s on
    /// 2 and 3); regent at `consul lock`'s session TTL and at its own
    /// default ttl, beside `consul lock`. Only when named.
    ConsulCluster,
    /// regent's in-memory store, inside the measuring process: the floor
    /// of what candidates cost (their tasks and timers), for the load
    /// cases only. Only when named.
    Memory,
    /// Azure Blob leases on Azurite, Microsoft's storage emulator, reached
    /// with its development account: for the load cases only (no election
    /// tool of its own; a blob lease's ttl is 15 s at least). Only when
    /// named.
    Azblob,
}

impl StoreKind {
    /// Every store, in the order a bench runs them.
    pub(crate) const ALL: [Self; 11] = [
        Self::Sqlite,
        Self::Etcd,
        Self::Consul,
        Self::ZooKeeper,
        Self::Postgres,
        Self::PgBouncer,
        Self::Redis,
        Self::RedisSentinel,
        Self::ConsulCluster,
        Self::Memory,
        Self::Azblob,
    ];

    /// The stores benched when `--stores` is not given (those whose engine
    /// is installed; SQLite always).
    pub(crate) const DEFAULT: [Self; 6] = [
        Self::Sqlite,
        Self::Etcd,
        Self::Consul,
        Self::ZooKeeper,
        Self::Postgres,
        Self::Redis,
    ];

    /// Its name in `--stores`, `--cases STORE:CASE` and the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Etcd => "etcd",
            Self::Consul => "consul",
            Self::ZooKeeper => "zookeeper",
            Self::Postgres => "postgres",
            Self::PgBouncer => "pgbouncer",
            Self::Redis => "redis",
            Self::RedisSentinel => "redis-sentinel",
            Self::ConsulCluster => "consul-cluster",
            Self::Memory => "memory",
            Self::Azblob => "azblob",
        }
    }

    /// The store named `s`.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "sqlite" => Some(Self::Sqlite),
            "etcd" => Some(Self::Etcd),
            "consul" => Some(Self::Consul),
            "zookeeper" | "zk" => Some(Self::ZooKeeper),
            "postgres" | "postgresql" => Some(Self::Postgres),
            "pgbouncer" => Some(Self::PgBouncer),
            "redis" => Some(Self::Redis),
            "redis-sentinel" | "sentinel" => Some(Self::RedisSentinel),
            "consul-cluster" => Some(Self::ConsulCluster),
            "memory" => Some(Self::Memory),
            "azblob" => Some(Self::Azblob),
            _ => None,
        }
    }

    /// Whether it is a Consul (a dev agent or a cluster): the bench reads
    /// the lock holder's session back from it.
    pub(crate) fn is_consul(self) -> bool {
        matches!(self, Self::Consul | Self::ConsulCluster)
    }

    /// Whether it is a PostgreSQL server (reached directly or through
    /// PgBouncer).
    pub(crate) fn is_postgres(self) -> bool {
        matches!(self, Self::Postgres | Self::PgBouncer)
    }

    /// Whether only the load cases run on it: no process but the bench's
    /// own can reach the memory store, and Azure Blob has no election tool
    /// to run beside regent.
    pub(crate) fn load_only(self) -> bool {
        matches!(self, Self::Memory | Self::Azblob)
    }

    /// The programs (and, for ZooKeeper, jars) the store's engine and
    /// tools need, or why they are missing.
    pub(crate) fn check_installed(self) -> Result<(), String> {
        if self.is_postgres() {
            for program in POSTGRES_PROGRAMS {
                find_postgres_program(program)?;
            }
        }
        if self == Self::PgBouncer {
            find_pgbouncer()?;
        }
        let programs: &[(&str, &str)] = match self {
            Self::Sqlite | Self::Memory | Self::Postgres | Self::PgBouncer => &[],
            Self::Etcd => &[
                ("etcd", "REGENT_ETCD_BIN"),
                ("etcdctl", "REGENT_ETCDCTL_BIN"),
            ],
            Self::Consul | Self::ConsulCluster => &[("consul", "REGENT_CONSUL_BIN")],
            Self::ZooKeeper => &[("java", "REGENT_JAVA_BIN"), ("javac", "")],
            Self::Azblob => &[("azurite-blob", "REGENT_AZURITE_BIN")],
            Self::Redis => &[("redis-server", SERVER_VAR), ("redis-cli", CLI_VAR)],
            Self::RedisSentinel => &[
                ("redis-server", SERVER_VAR),
                ("redis-cli", CLI_VAR),
                ("redis-sentinel", SENTINEL_VAR),
            ],
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

/// The programs of PostgreSQL the test kit runs to start a server.
const POSTGRES_PROGRAMS: [&str; 5] = ["initdb", "postgres", "pg_ctl", "pg_basebackup", "psql"];

/// Where Debian's `pgbouncer` package installs it (the test kit's last
/// resort).
const DEBIAN_PGBOUNCER: &str = "/usr/sbin/pgbouncer";

/// A program of PostgreSQL as the test kit finds it: in the directory
/// `REGENT_POSTGRES_BINDIR` names when that is set, else in Debian's
/// `/usr/lib/postgresql/15/bin`, else on `PATH`.
fn find_postgres_program(program: &str) -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os(BINDIR_VAR).filter(|d| !d.is_empty()) {
        let path = Path::new(&dir).join(program);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!(
                "{program} not found at {} (set by {BINDIR_VAR}); run scripts/install-engines",
                path.display()
            ))
        };
    }
    let debian = Path::new(DEFAULT_BINDIR).join(program);
    if is_executable(&debian) {
        return Ok(debian);
    }
    find_program(program, "").map_err(|_| {
        format!("{program} not found in {DEFAULT_BINDIR} nor on PATH; run scripts/install-engines")
    })
}

/// `pgbouncer` as the test kit finds it: the path in
/// `REGENT_PGBOUNCER_BIN` when that is set, else the first on `PATH`, else
/// Debian's `/usr/sbin/pgbouncer` (not on an ordinary user's `PATH`).
fn find_pgbouncer() -> Result<PathBuf, String> {
    find_program("pgbouncer", PGBOUNCER_VAR).or_else(|e| {
        let debian = Path::new(DEBIAN_PGBOUNCER);
        let unset = std::env::var_os(PGBOUNCER_VAR).is_none_or(|v| v.is_empty());
        if unset && is_executable(debian) {
            Ok(debian.to_owned())
        } else {
            Err(e)
        }
    })
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
