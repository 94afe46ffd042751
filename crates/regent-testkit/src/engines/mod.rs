//! Real store engines on `127.0.0.1`, started as child processes for the store
//! crates' integration tests.
//!
//! Each engine runs on free ports in its own temporary directory and is
//! stopped by the PID the kit recorded when it is dropped (SIGTERM, then
//! SIGKILL after a bound), never by name, so tests can run in parallel and
//! leave nothing behind. Starting waits, with a bound, until the engine
//! answers its own health check.
//!
//! The engines come from Debian packages installed by `scripts/install-engines`.
//! An engine that is not installed is an error naming that script
//! ([`EngineError::NotInstalled`]): a test that needs an engine fails without
//! it, it never passes by skipping.
//!
//! The API is blocking: starting, stopping and health checks take
//! milliseconds to a few seconds of real time. Call it from a plain `#[test]`
//! or before entering the async part of a `#[tokio::test]`; use
//! `tokio::task::spawn_blocking` where other tasks must keep running.
//!
//! | engine | type | binary (override) |
//! |---|---|---|
//! | etcd 3.4 | [`etcd::Etcd`], [`etcd::EtcdCluster`]; secured (TLS, authentication) by [`etcd::Etcd::builder`] | `etcd` (`REGENT_ETCD_BIN`), `etcdctl` (`REGENT_ETCDCTL_BIN`) |

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

pub mod etcd;
mod http;
mod process;

pub use etcd::{Etcd, EtcdBuilder, EtcdCluster, EtcdTls, EtcdTlsFiles};

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
    /// No member of a cluster reported itself Raft leader in time.
    #[error("no {engine} member is leader after {waited:?}")]
    NoLeader {
        /// The engine, such as `etcd`.
        engine: &'static str,
        /// How long the kit waited.
        waited: Duration,
    },
}
