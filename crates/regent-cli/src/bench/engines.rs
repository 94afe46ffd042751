//! The stores a bench runs on, started by regent-testkit on free ports of
//! `127.0.0.1` and stopped by PID when dropped: a SQLite file, one etcd
//! member, one Consul dev agent, one standalone ZooKeeper server (with the
//! Curator participant compiled for it); and what the report says of them.

use std::process::{Command, Stdio};

use regent_testkit::engines::{
    Consul, Engine as _, EngineError, Etcd, LatchParticipant, Sqlite, ZooKeeper,
};
use serde_json::Value;

use super::BenchError;
use super::plan::StoreKind;

/// A running store and what its tools need of it.
#[derive(Debug)]
pub(crate) enum RunningStore {
    Sqlite(Sqlite),
    Etcd(Etcd),
    Consul(Consul),
    ZooKeeper {
        server: ZooKeeper,
        participant: LatchParticipant,
    },
}

impl RunningStore {
    /// Starts `kind`'s engine and waits until it serves.
    pub(crate) fn start(kind: StoreKind) -> Result<Self, BenchError> {
        let engine_error = |e: EngineError| match e {
            EngineError::NotInstalled { .. }
            | EngineError::NotInstalledAt { .. }
            | EngineError::JarNotFound { .. } => {
                BenchError::Usage(format!("cannot start {kind}: {e}"))
            }
            e => BenchError::Failed(format!("cannot start {kind}: {e}")),
        };
        Ok(match kind {
            StoreKind::Sqlite => Self::Sqlite(Sqlite::start().map_err(engine_error)?),
            StoreKind::Etcd => Self::Etcd(Etcd::start().map_err(engine_error)?),
            StoreKind::Consul => Self::Consul(Consul::start().map_err(engine_error)?),
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
        })
    }

    pub(crate) fn kind(&self) -> StoreKind {
        match self {
            Self::Sqlite(_) => StoreKind::Sqlite,
            Self::Etcd(_) => StoreKind::Etcd,
            Self::Consul(_) => StoreKind::Consul,
            Self::ZooKeeper { .. } => StoreKind::ZooKeeper,
        }
    }

    /// The `--store` URL regent takes (ZooKeeper: under the chroot
    /// `/regent-bench`).
    pub(crate) fn store_url(&self) -> String {
        match self {
            Self::Sqlite(e) => e.store_url(),
            Self::Etcd(e) => e.store_url(),
            Self::Consul(e) => e.store_url(),
            Self::ZooKeeper { server, .. } => format!("zk://{}/regent-bench", server.address()),
        }
    }

    pub(crate) fn etcd(&self) -> Option<&Etcd> {
        match self {
            Self::Etcd(e) => Some(e),
            _ => None,
        }
    }

    pub(crate) fn consul(&self) -> Option<&Consul> {
        match self {
            Self::Consul(e) => Some(e),
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

    /// Whether the Consul agent holds a session named `name`.
    pub(crate) fn consul_has_session(&self, name: &str) -> Result<bool, BenchError> {
        let agent = self
            .consul()
            .ok_or_else(|| BenchError::Failed("not a Consul store".into()))?;
        let path = format!("/v1/session/node/{}", agent.node());
        let response = agent
            .http_get(&path)
            .map_err(|e| BenchError::Failed(format!("GET {path}: {e}")))?;
        if response.status != 200 {
            return Err(BenchError::Failed(format!(
                "GET {path}: {} {}",
                response.status, response.body
            )));
        }
        let sessions: Value = serde_json::from_str(&response.body)
            .map_err(|e| BenchError::Failed(format!("GET {path}: {e}: {}", response.body)))?;
        Ok(sessions
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s.get("Name").and_then(Value::as_str) == Some(name)))
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
            Self::Consul(agent) => {
                let out = agent.consul_command().arg("version").output();
                vec![
                    out.map(|o| first_line(&o.stdout))
                        .unwrap_or_else(|e| format!("consul: {e}")),
                    "a dev agent (`consul agent -dev`: one server, in memory)".to_owned(),
                ]
            }
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
