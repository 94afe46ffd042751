//! The stores a bench runs on, started by regent-testkit on free ports of
//! `127.0.0.1` and stopped by PID when dropped: a SQLite file, one etcd
//! member, one Consul dev agent, a Consul cluster (three servers, four
//! client agents), one standalone ZooKeeper server (with the Curator
//! participant compiled for it), one PostgreSQL server (alone, or behind
//! PgBouncer in transaction pooling mode), one Redis server (no
//! persistence), a Redis primary and replica behind three Sentinels,
//! Azurite (Azure Blob), or nothing (the memory store);
//! how the tools reach them; and what the report says of them.

use std::path::Path;
use std::process::{Command, Stdio};

use regent_testkit::engines::redis::{DOWN_AFTER, QUORUM};
use regent_testkit::engines::{
    Azurite, Consul, ConsulCluster, Engine as _, EngineError, Etcd, LatchParticipant, Postgres,
    PostgresBehindPgBouncer, Redis, RedisSentinels, ZooKeeper,
};
use serde_json::Value;
use tempfile::TempDir;

use crate::error::BenchError;
use crate::store::StoreKind;

/// Client agents of the Consul cluster: regent's candidates use the first
/// pair, `consul lock`'s the second (`Tool::agents`).
pub(crate) const CLUSTER_AGENTS: usize = 4;

/// A running store and what its tools need of it.
#[derive(Debug)]
pub(crate) enum RunningStore {
    /// The directory that holds the database file `e.db`.
    Sqlite(TempDir),
    Etcd(Etcd),
    Consul(Consul),
    ConsulCluster(ConsulCluster),
    ZooKeeper {
        server: ZooKeeper,
        participant: LatchParticipant,
    },
    Postgres(Postgres),
    /// The server, and PgBouncer in front of it in transaction mode.
    PgBouncer(PostgresBehindPgBouncer),
    /// One server, the kit's defaults (no persistence).
    Redis(Redis),
    /// A primary, its replica and three Sentinels.
    RedisSentinel(Box<RedisSentinels>),
    Memory,
    Azblob(Azurite),
}

impl RunningStore {
    /// Starts `kind`'s engine and waits until it serves. SQLite's file
    /// goes in a new directory under `sqlite_dir` (the system's temporary
    /// directory if `None`).
    pub(crate) fn start(kind: StoreKind, sqlite_dir: Option<&Path>) -> Result<Self, BenchError> {
        let engine_error = |e: EngineError| match e {
            EngineError::NotInstalled { .. }
            | EngineError::NotInstalledAt { .. }
            | EngineError::JarNotFound { .. } => {
                BenchError::Usage(format!("cannot start {kind}: {e}"))
            }
            e => BenchError::Failed(format!("cannot start {kind}: {e}")),
        };
        Ok(match kind {
            StoreKind::Sqlite => {
                let mut builder = tempfile::Builder::new();
                builder.prefix("regent-bench-sqlite-");
                let dir = match sqlite_dir {
                    Some(parent) => builder.tempdir_in(parent),
                    None => builder.tempdir(),
                };
                Self::Sqlite(dir.map_err(|e| {
                    BenchError::Failed(format!("a directory for SQLite's file: {e}"))
                })?)
            }
            StoreKind::Etcd => Self::Etcd(Etcd::start().map_err(engine_error)?),
            StoreKind::Consul => Self::Consul(Consul::start().map_err(engine_error)?),
            StoreKind::ConsulCluster => {
                Self::ConsulCluster(ConsulCluster::start(CLUSTER_AGENTS).map_err(engine_error)?)
            }
            StoreKind::ZooKeeper => {
                // The JVM compiles while the server starts.
                let compiling = std::thread::spawn(LatchParticipant::compile);
                let server = ZooKeeper::start().map_err(engine_error);
                let participant = compiling
                    .join()
                    .map_err(|_| {
                        BenchError::Failed("compiling the Curator participant panicked".into())
                    })?
                    .map_err(engine_error)?;
                Self::ZooKeeper {
                    server: server?,
                    participant,
                }
            }
            StoreKind::Postgres => Self::Postgres(Postgres::start().map_err(engine_error)?),
            StoreKind::PgBouncer => {
                Self::PgBouncer(PostgresBehindPgBouncer::start().map_err(engine_error)?)
            }
            StoreKind::Redis => Self::Redis(Redis::start().map_err(engine_error)?),
            StoreKind::RedisSentinel => {
                Self::RedisSentinel(Box::new(RedisSentinels::start().map_err(engine_error)?))
            }
            StoreKind::Memory => Self::Memory,
            StoreKind::Azblob => Self::Azblob(Azurite::start().map_err(engine_error)?),
        })
    }

    /// Which store it is.
    pub(crate) fn kind(&self) -> StoreKind {
        match self {
            Self::Sqlite(_) => StoreKind::Sqlite,
            Self::Etcd(_) => StoreKind::Etcd,
            Self::Consul(_) => StoreKind::Consul,
            Self::ConsulCluster(_) => StoreKind::ConsulCluster,
            Self::ZooKeeper { .. } => StoreKind::ZooKeeper,
            Self::Postgres(_) => StoreKind::Postgres,
            Self::PgBouncer(_) => StoreKind::PgBouncer,
            Self::Redis(_) => StoreKind::Redis,
            Self::RedisSentinel(_) => StoreKind::RedisSentinel,
            Self::Memory => StoreKind::Memory,
            Self::Azblob(_) => StoreKind::Azblob,
        }
    }

    /// The `--store` URL regent takes (ZooKeeper: under the chroot
    /// `/regent-bench`; the Consul cluster: its first client agent;
    /// PgBouncer: the pooler's, with [`RunningStore::listen_url`] beside
    /// it; Redis behind Sentinels: `redis+sentinel://S1,S2,S3/mymaster`;
    /// Azure Blob: the container, with
    /// [`RunningStore::azblob_endpoint`] beside it; the memory store has
    /// none that another process could use).
    pub(crate) fn store_url(&self) -> String {
        match self {
            Self::Sqlite(dir) => format!("sqlite:{}", dir.path().join("e.db").display()),
            Self::Etcd(e) => e.store_url(),
            Self::Consul(e) => e.store_url(),
            Self::ConsulCluster(c) => format!("consul://{}", c.agents()[0].address()),
            Self::ZooKeeper { server, .. } => format!("zk://{}/regent-bench", server.address()),
            Self::Postgres(e) => e.store_url(),
            Self::PgBouncer(e) => e.store_url(),
            Self::Redis(e) => e.store_url(),
            Self::RedisSentinel(e) => e.store_url(),
            Self::Memory => "memory:".to_owned(),
            Self::Azblob(e) => e.store_url(),
        }
    }

    /// Azurite's Blob endpoint (`http://127.0.0.1:PORT/devstoreaccount1`),
    /// signed for with the development account's well-known key.
    pub(crate) fn azblob_endpoint(&self) -> Option<String> {
        match self {
            Self::Azblob(e) => Some(e.blob_endpoint()),
            _ => None,
        }
    }

    /// Where regent's PostgreSQL watches `LISTEN`, when not on `--store`'s
    /// server: behind PgBouncer in transaction mode, a connection straight
    /// to the server (the pooler cannot carry a `LISTEN`).
    pub(crate) fn listen_url(&self) -> Option<String> {
        match self {
            Self::PgBouncer(e) => Some(e.postgres().store_url()),
            _ => None,
        }
    }

    /// The store flags a `regent run` candidate takes besides `--store`:
    /// `--postgres-listen-url URL` behind PgBouncer.
    pub(crate) fn regent_flags(&self) -> Vec<String> {
        self.listen_url()
            .map(|url| vec!["--postgres-listen-url".to_owned(), url])
            .unwrap_or_default()
    }

    /// The `--store` URL of the candidate in `slot` of a series whose
    /// candidates use the client agents `agents`: on the Consul cluster,
    /// its own agent; elsewhere the store's one URL.
    pub(crate) fn regent_url(&self, agents: [usize; 2], slot: usize) -> String {
        match self.consul_agent(agents, slot) {
            Some(agent) if matches!(self, Self::ConsulCluster(_)) => {
                format!("consul://{}", agent.address())
            }
            _ => self.store_url(),
        }
    }

    /// The Consul agent the candidate in `slot` talks to: the dev agent,
    /// or on the cluster the client agent `agents[slot]`.
    pub(crate) fn consul_agent(&self, agents: [usize; 2], slot: usize) -> Option<&Consul> {
        match self {
            Self::Consul(agent) => Some(agent),
            Self::ConsulCluster(cluster) => cluster.agents().get(agents[slot]),
            _ => None,
        }
    }

    pub(crate) fn etcd(&self) -> Option<&Etcd> {
        match self {
            Self::Etcd(e) => Some(e),
            _ => None,
        }
    }

    pub(crate) fn zookeeper(&self) -> Option<(&ZooKeeper, &LatchParticipant)> {
        match self {
            Self::ZooKeeper {
                server,
                participant,
            } => Some((server, participant)),
            _ => None,
        }
    }

    /// How many keys start with `prefix` on the etcd member.
    pub(crate) fn etcd_keys(&self, prefix: &str) -> Result<usize, BenchError> {
        let etcd = self
            .etcd()
            .ok_or_else(|| BenchError::Failed("not an etcd store".into()))?;
        let out = etcd
            .try_etcdctl(["get", "--prefix", "--keys-only", prefix])
            .map_err(|e| BenchError::Failed(format!("etcdctl get: {e}")))?;
        if !out.status.success() {
            return Err(BenchError::Failed(format!(
                "etcdctl get --prefix {prefix}: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count())
    }

    /// `GET PATH` on the first Consul agent, which must answer 200; its
    /// body as JSON.
    fn consul_get(&self, path: &str) -> Result<Value, BenchError> {
        let agent = self
            .consul_agent([0, 0], 0)
            .ok_or_else(|| BenchError::Failed("not a Consul store".into()))?;
        let response = agent
            .http_get(path)
            .map_err(|e| BenchError::Failed(format!("GET {path}: {e}")))?;
        if response.status != 200 {
            return Err(BenchError::Failed(format!(
                "GET {path}: {} {}",
                response.status, response.body
            )));
        }
        serde_json::from_str(&response.body)
            .map_err(|e| BenchError::Failed(format!("GET {path}: {e}: {}", response.body)))
    }

    /// Whether Consul holds a session named `name` (on any node).
    pub(crate) fn consul_has_session(&self, name: &str) -> Result<bool, BenchError> {
        let sessions = self.consul_get("/v1/session/list")?;
        Ok(sessions
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s.get("Name").and_then(Value::as_str) == Some(name)))
    }

    /// The session that holds the Consul key `key` now, as Consul holds
    /// it (`GET /v1/kv/KEY`, then `GET /v1/session/info/ID`).
    pub(crate) fn consul_holder_session(&self, key: &str) -> Result<Value, BenchError> {
        let entry = self.consul_get(&format!("/v1/kv/{key}"))?;
        let id = entry[0]["Session"]
            .as_str()
            .ok_or_else(|| BenchError::Failed(format!("{key} is not locked: {entry}")))?;
        let info = self.consul_get(&format!("/v1/session/info/{id}"))?;
        Ok(info[0].clone())
    }

    /// The requests the engine itself counted so far, where it counts them:
    /// etcd's `grpc_server_msg_received_total` (every gRPC message, by
    /// method, keep-alives and watch requests included), ZooKeeper's
    /// `zk_packets_received` (`mntr`; sessions' pings included). `None` for
    /// the other stores.
    pub(crate) fn engine_requests(&self) -> Option<f64> {
        if let Some(etcd) = self.etcd() {
            let text = etcd.metrics().ok()?;
            return Some(
                text.lines()
                    .filter(|l| l.starts_with("grpc_server_msg_received_total{"))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum(),
            );
        }
        if let Some((zk, _)) = self.zookeeper() {
            let text = zk.four_letter_word("mntr").ok()?;
            return text.lines().find_map(|l| {
                let (k, v) = l.split_once(char::is_whitespace)?;
                (k == "zk_packets_received").then(|| v.trim().parse().ok())?
            });
        }
        None
    }

    /// The engine and its tools' versions, for the report.
    pub(crate) fn versions(&self) -> Vec<String> {
        match self {
            Self::Sqlite(_) => vec![format!(
                "SQLite {} (compiled into regent)",
                rusqlite::version()
            )],
            Self::Etcd(etcd) => {
                let etcdctl = etcd
                    .try_etcdctl(["version"])
                    .map(|o| first_line(&o.stdout))
                    .unwrap_or_else(|e| e.to_string());
                vec![
                    program_version("etcd", &["--version"]).unwrap_or_else(|| "etcd: ?".into()),
                    etcdctl,
                ]
            }
            Self::Consul(agent) => vec![
                consul_version(agent),
                "a dev agent (`consul agent -dev`: one server, in memory)".to_owned(),
            ],
            Self::ConsulCluster(cluster) => vec![
                consul_version(&cluster.agents()[0]),
                format!(
                    "a cluster of {} servers and {CLUSTER_AGENTS} client agents; each \
                     candidate talks to its own agent (regent's: agents 0 and 1, consul \
                     lock's: 2 and 3)",
                    ConsulCluster::SERVERS
                ),
            ],
            Self::Memory => vec!["regent's in-memory store, in the measuring process".to_owned()],
            Self::Azblob(_) => vec![
                program_version("azurite-blob", &["--version"])
                    .map_or_else(|| "Azurite: ?".into(), |v| format!("Azurite {v}")),
                "its Blob service, data on disk, the development account; regent's watch \
                 reads the blob every second"
                    .to_owned(),
            ],
            Self::Postgres(server) => vec![
                postgres_version(server),
                "one server, the test kit's settings (fsync off, shared_buffers 32 MB); \
                 regent's watches LISTEN on it"
                    .to_owned(),
            ],
            Self::PgBouncer(both) => {
                let pgbouncer = both
                    .pgbouncer()
                    .console("show version")
                    .map(|v| v.lines().next().unwrap_or("PgBouncer: ?").trim().to_owned())
                    .unwrap_or_else(|e| format!("PgBouncer: {e}"));
                vec![
                    postgres_version(both.postgres()),
                    format!(
                        "{pgbouncer} in transaction pooling mode in front of it (pool size \
                         20); regent's watches LISTEN on a connection straight to the \
                         server (--postgres-listen-url)"
                    ),
                ]
            }
            Self::Redis(server) => vec![
                redis_version(server),
                "one server, the test kit's settings (no persistence: save \"\", \
                 appendonly no); regent's watches SUBSCRIBE on it"
                    .to_owned(),
            ],
            Self::RedisSentinel(group) => vec![
                redis_version(group.primary()),
                format!(
                    "a primary and its replica (no persistence), watched by three \
                     Sentinels (quorum {QUORUM}, down-after {} ms); regent reaches the \
                     primary through them ({})",
                    DOWN_AFTER.as_millis(),
                    group.store_url()
                ),
            ],
            Self::ZooKeeper {
                server,
                participant,
            } => {
                let srvr = server
                    .four_letter_word("srvr")
                    .ok()
                    .and_then(|s| s.lines().next().map(str::to_owned))
                    .unwrap_or_else(|| "ZooKeeper: ?".into());
                let java = Command::new(participant.java())
                    .arg("-version")
                    .stdin(Stdio::null())
                    .output()
                    .map(|o| first_line(&o.stderr))
                    .unwrap_or_else(|e| format!("java: {e}"));
                vec![
                    format!(
                        "{srvr} (standalone, tickTime {} ms)",
                        server.tick_time().as_millis()
                    ),
                    format!(
                        "Curator {} (LeaderLatch), on {java}",
                        curator_version(participant.classpath())
                    ),
                ]
            }
        }
    }
}

/// `PostgreSQL 15.x (Debian …)`: the server's `version()` up to its
/// platform.
fn postgres_version(server: &Postgres) -> String {
    match server.psql("select version()") {
        Ok(v) => v
            .split(" on ")
            .next()
            .unwrap_or(v.as_str())
            .trim()
            .to_owned(),
        Err(e) => format!("PostgreSQL: {e}"),
    }
}

/// `Redis 7.0.15`: the server's `redis_version` (`INFO server`).
fn redis_version(server: &Redis) -> String {
    match server.cli(&["INFO", "server"]) {
        Ok(info) => info
            .lines()
            .find_map(|l| l.trim().strip_prefix("redis_version:"))
            .map_or_else(|| "Redis: ?".to_owned(), |v| format!("Redis {v}")),
        Err(e) => format!("Redis: {e}"),
    }
}

fn consul_version(agent: &Consul) -> String {
    agent
        .consul_command()
        .arg("version")
        .output()
        .map(|o| first_line(&o.stdout))
        .unwrap_or_else(|e| format!("consul: {e}"))
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_owned()
}

fn program_version(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    Some(first_line(&out.stdout))
}

/// The version in the name of a `curator-recipes-VERSION.jar` beside the
/// classpath's recipes jar (Debian installs such links), else `?`.
fn curator_version(classpath: &str) -> String {
    let recipes = classpath.split(':').map(std::path::Path::new).find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("curator-recipes"))
    });
    let versioned = |name: &str| {
        name.strip_prefix("curator-recipes-")?
            .strip_suffix(".jar")
            .map(str::to_owned)
    };
    recipes
        .and_then(|jar| {
            if let Some(v) = jar.file_name()?.to_str().and_then(versioned) {
                return Some(v);
            }
            std::fs::read_dir(jar.parent()?)
                .ok()?
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .find_map(|n| versioned(&n))
        })
        .unwrap_or_else(|| "?".to_owned())
}
