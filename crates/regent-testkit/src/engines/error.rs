//! Why an engine could not be started or queried: [`EngineError`], the
//! one error of every engine of the kit.

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// Why an engine could not be started or queried.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The engine's program is not on `PATH`.
    #[error("{program} not found on PATH; run scripts/install-engines")]
    NotInstalled {
        /// The program looked for, such as `etcd`.
        program: &'static str,
    },
    /// The program named by an override variable does not exist.
    #[error("{program} not found at {} (set by {var}); run scripts/install-engines", path.display())]
    NotInstalledAt {
        /// The program looked for, such as `etcd`.
        program: &'static str,
        /// The path the override variable named.
        path: PathBuf,
        /// The override variable, such as `REGENT_ETCD_BIN`.
        var: &'static str,
    },
    /// A jar (or directory) of a Java engine's classpath does not exist:
    /// ZooKeeper's, or Curator's for the tests that run Curator.
    #[error("{} not found (in the {classpath} classpath, which {var} sets); run scripts/install-engines", jar.display())]
    JarNotFound {
        /// The classpath, such as `zookeeper` or `curator`.
        classpath: &'static str,
        /// The jar that does not exist.
        jar: PathBuf,
        /// The variable that sets the classpath instead of the kit's
        /// default, such as `REGENT_ZOOKEEPER_CLASSPATH`.
        var: &'static str,
    },
    /// The program exists but could not be started.
    #[error("could not start {program}")]
    Spawn {
        /// The program started, such as `etcd`.
        program: &'static str,
        /// Why starting it failed.
        #[source]
        source: io::Error,
    },
    /// Setting up for the engine failed: a temporary directory, a free port,
    /// a log file.
    #[error("could not {action}")]
    Io {
        /// What the kit was doing, such as "create a temporary directory".
        action: &'static str,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The engine exited before it became healthy.
    #[error("{instance} exited during startup ({status}); its log ends with:\n{log_tail}")]
    Exited {
        /// Which instance, such as `etcd member n2`.
        instance: String,
        /// How it exited.
        status: ExitStatus,
        /// The last lines of its log.
        log_tail: String,
    },
    /// The engine kept running but did not become healthy in time.
    #[error("{instance} not healthy after {waited:?}; its log ends with:\n{log_tail}")]
    NotReady {
        /// Which instance, such as `etcd member n2`.
        instance: String,
        /// How long the kit waited.
        waited: Duration,
        /// The last lines of its log.
        log_tail: String,
    },
    /// A step the kit runs against a started engine to set it up failed,
    /// such as `etcdctl user add` while enabling authentication.
    #[error("{instance}: {step} failed ({status}):\n{output}")]
    Setup {
        /// Which instance, such as `etcd member m0`.
        instance: String,
        /// The step, such as `etcdctl auth enable` (never a password).
        step: String,
        /// How the step's program exited.
        status: ExitStatus,
        /// What it printed.
        output: String,
    },
    /// The test certificates of a TLS engine could not be made.
    #[error("could not make test certificates")]
    Pki(#[from] crate::pki::PkiError),
    /// A shared engine failed to start earlier in this process; every
    /// later share fails with that first error.
    #[error("the shared {engine} did not start earlier in this test process: {first}")]
    SharedFailed {
        /// The engine, such as `consul dev agent` or `azurite`.
        engine: &'static str,
        /// The first error, as text.
        first: String,
    },
    /// No member of a cluster reported itself Raft leader in time.
    #[error("no {engine} member is leader after {waited:?}")]
    NoLeader {
        /// The engine, such as `etcd`.
        engine: &'static str,
        /// How long the kit waited.
        waited: Duration,
    },
}
