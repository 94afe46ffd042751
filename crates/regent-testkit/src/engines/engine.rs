//! The one shape of every engine: [`Engine`].

use std::any::Any;
use std::fmt;
use std::time::Duration;

use regent_core::store::ExpirySlack;

use super::EngineError;

/// A store engine the kit started for one test: what the end-to-end tests
/// and fault injection need, whatever the store.
///
/// Each engine type starts on its own ([`Engine::start`], or a builder of
/// its own for secured or clustered set-ups) on free ports of `127.0.0.1`
/// and in its own temporary directory, and stops by PID when dropped. The
/// list of engines every end-to-end test runs over is
/// [`for_every_engine!`](crate::for_every_engine).
///
/// # Engines without a process
///
/// An embedded store such as SQLite is a file, not a server: there is no
/// process to kill or pause, and nothing but the clients can crash. Such an
/// engine says so instead of pretending: [`Engine::pid`] is `None`,
/// [`Engine::kill`], [`Engine::pause`], [`Engine::resume`] and
/// [`Engine::stop`] do nothing and return [`Signaled::NoProcess`], and
/// [`Engine::restart`] succeeds at once with the file untouched, the store
/// available throughout. A test of a fault in the engine checks
/// [`Engine::pid`] (or the [`Signaled`] it gets) and belongs to the engines
/// that have one.
///
/// # Contract
///
/// * [`Engine::store_url`] is the URL `regent --store` takes, with the
///   variables of [`Engine::client_env`] in its environment, valid as soon
///   as [`Engine::start`] returned and across [`Engine::restart`]s (same
///   ports, same data).
/// * After [`Engine::kill`] or [`Engine::stop`] the process is reaped:
///   [`Engine::pid`] is `None` and the PID it had names nothing of the
///   engine's. Its data stays until the engine is dropped.
/// * [`Engine::restart`] comes back on the same data and the same URL and
///   returns once the engine is healthy.
/// * Dropping the engine stops its process (SIGTERM, or the engine's own
///   graceful signal such as Consul's SIGINT, then SIGKILL after a bound; a
///   paused process is resumed so that it can act on it) and removes its
///   directory.
pub trait Engine: Any + fmt::Debug + Send {
    /// Starts a fresh instance on free ports, in a new temporary directory,
    /// and waits with a bound until it is healthy.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (naming `scripts/install-engines`) when
    /// the engine's program is missing; otherwise why it did not start.
    fn start() -> Result<Self, EngineError>
    where
        Self: Sized;

    /// The engine's name in the list of engines: `sqlite`, `etcd`.
    fn kind(&self) -> &'static str;

    /// The store URL `regent` takes for this engine, such as
    /// `etcd://127.0.0.1:PORT` or `sqlite:/tmp/…/e.db`.
    fn store_url(&self) -> String;

    /// The PID of the engine's process while it runs; `None` once the kit
    /// stopped or killed it, and always for an engine without a process.
    fn pid(&self) -> Option<u32>;

    /// Whether the engine answers its health check now (a paused or stopped
    /// process does not).
    fn is_healthy(&self) -> bool;

    /// Kills the process at once (SIGKILL to its PID), as a crash would,
    /// and reaps it.
    fn kill(&mut self) -> Signaled;

    /// Pauses the process (SIGSTOP): it keeps its sockets and its clients'
    /// connections but answers nothing, as a hung server would.
    fn pause(&mut self) -> Signaled;

    /// Lets a paused process go on (SIGCONT).
    fn resume(&mut self) -> Signaled;

    /// Stops the process by its PID: SIGTERM (SIGINT for Consul), then
    /// SIGKILL after a bound.
    /// Returns once it is reaped; the data stays.
    fn stop(&mut self) -> Signaled;

    /// Stops the process if it runs, starts it again on the same data and
    /// ports, and waits until it is healthy.
    ///
    /// # Errors
    ///
    /// As [`Engine::start`]; a port taken meanwhile is an error here.
    fn restart(&mut self) -> Result<(), EngineError>;

    /// The last `lines` lines of the engine's log (every run), or a note
    /// why there is none.
    fn log_tail(&self, lines: usize) -> String;

    /// The shortest ttl the engine's store accepts (Consul's sessions: 10
    /// s); zero where the store has no floor. Tests that run on every
    /// engine take their ttl from it.
    fn min_ttl(&self) -> Duration {
        Duration::ZERO
    }

    /// How much later than the ttl the engine may free a dead holder's
    /// lease: the same figure its store declares in its `StoreInfo`
    /// (`regent_etcd::EXPIRY_SLACK`, Consul's second ttl). A bound on a
    /// crash failover is `ttl + expiry_slack.for_ttl(ttl)` plus the test's own
    /// margins.
    fn expiry_slack(&self) -> ExpirySlack {
        ExpirySlack::NONE
    }

    /// How late a watch of the engine's store may see a change: the poll
    /// interval its store declares (`WatchMode::Poll`: SQLite's 100 ms,
    /// Azure Blob's 1 s); zero where the engine pushes changes (etcd
    /// watches, Consul's blocking queries). A follower learns of a released
    /// lease this late at most, so a bound on a graceful hand-over is this
    /// plus the test's own margins.
    fn watch_delay(&self) -> Duration {
        Duration::ZERO
    }

    /// The environment variables a client of this engine needs besides
    /// [`Engine::store_url`], as `(name, value)`: where the store URL does
    /// not say where the service is or how to sign for it (Azurite:
    /// `AZURE_STORAGE_CONNECTION_STRING`, its endpoint and key). Empty
    /// where the URL is enough. A test passes them to every `regent`
    /// process it starts on this engine.
    fn client_env(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

impl dyn Engine {
    /// The engine as its own type `T`, if it is one.
    pub fn downcast_ref<T: Engine>(&self) -> Option<&T> {
        (self as &dyn Any).downcast_ref()
    }

    /// The engine as its own type `T`, if it is one, to use what only that
    /// engine has (etcdctl, a cluster's members).
    pub fn downcast_mut<T: Engine>(&mut self) -> Option<&mut T> {
        (self as &mut dyn Any).downcast_mut()
    }
}

/// What [`Engine::kill`], [`Engine::pause`], [`Engine::resume`] or
/// [`Engine::stop`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signaled {
    /// The signal went to the engine's process.
    Sent,
    /// The process was not running (the kit had stopped or killed it):
    /// nothing was sent.
    NotRunning,
    /// The engine has no process (an embedded store such as SQLite):
    /// nothing was sent, and the store stays available.
    NoProcess,
}
