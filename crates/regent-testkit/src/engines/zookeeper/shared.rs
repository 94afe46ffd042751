//! One standalone server per test process, shared by every test that needs
//! only a store: [`SharedZooKeeper`].

use std::time::Duration;

use regent_core::store::ExpirySlack;

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::shared::{self, Shared, SharedCell};
use super::server::{ZooKeeper, expiry_slack};

/// A share of the test process's one ZooKeeper server: a chroot of its own
/// (`zk://127.0.0.1:PORT/t7-TEST`) on a standalone server started once, by
/// the first test that asks, and stopped by its PID when the test process
/// exits.
///
/// A server costs a JVM (about 60 MB and a third of a second to start);
/// a test binary's tests run concurrently, and one server for all of them
/// costs one. The chroot isolates the tests as a server of their own
/// would: every node a test's candidates touch lives under it, and
/// sessions are per client. [`SharedZooKeeper::get`] creates the chroot's
/// node, so that it is there as `/` is on a server of one's own. What the
/// chroot cannot isolate is the server itself, so a share refuses to kill,
/// pause, stop or restart it ([`Engine::kill`] and the rest panic, naming
/// [`ZooKeeper::start`], which gives a test a server of its own to break).
///
/// # Lifetime
///
/// As [`SharedConsul`](super::super::SharedConsul)'s agent: a watchman
/// process, whose standard input is a pipe only the test process holds,
/// stops the JVM by its PID (SIGTERM, then SIGKILL after
/// [`STOP_TIMEOUT`](super::STOP_TIMEOUT), only while that PID's working
/// directory is still the server's) and removes its directory once the
/// test process exits, however it exits.
///
/// ```no_run
/// use regent_testkit::engines::{Engine, SharedZooKeeper};
///
/// let a = SharedZooKeeper::get()?;
/// let b = SharedZooKeeper::get()?;
/// assert_ne!(a.store_url(), b.store_url()); // one server, two chroots
/// assert_eq!(a.pid(), b.pid());
/// # Ok::<(), regent_testkit::engines::EngineError>(())
/// ```
pub struct SharedZooKeeper {
    server: &'static Shared<ZooKeeper>,
    address: String,
    pid: Option<u32>,
    tick_time: Duration,
    chroot: String,
}

/// The server (with its watchman), or why it could not start.
static SERVER: SharedCell<ZooKeeper> = SharedCell::new();

impl SharedZooKeeper {
    /// A share of the process's server, started (and waited for) if no
    /// test started it yet, with its chroot's node created. Its chroot is
    /// `/tN-NAME`, `NAME` the current thread's name (the test's, under the
    /// standard test harness) with every character other than ASCII
    /// letters, digits, `-` and `_` replaced by `_`.
    ///
    /// # Errors
    ///
    /// As [`ZooKeeper::start`] the first time, when ZooKeeper is missing or
    /// does not start; later calls fail the same way without trying again
    /// ([`EngineError::SharedFailed`] quoting the first error).
    /// [`EngineError::Io`] when the chroot's node could not be created.
    pub fn get() -> Result<Self, EngineError> {
        let server = Shared::get_or_start(&SERVER, "zookeeper", ZooKeeper::start, |z| &z.process)?;
        let zk = server.lock();
        let (n, name) = shared::next_share();
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(80)
            .collect();
        let chroot = format!("/t{n}-{name}");
        zk.create_node(&chroot, b"")
            .map_err(|source| EngineError::Io {
                action: "create the chroot of a shared ZooKeeper's share",
                source,
            })?;
        Ok(Self {
            server,
            address: zk.address(),
            pid: zk.pid(),
            tick_time: zk.tick_time(),
            chroot,
        })
    }

    /// This share's chroot, such as `/t7-TEST`: the node every path of its
    /// store URL lives under.
    pub fn chroot(&self) -> &str {
        &self.chroot
    }

    /// The server's client address, `127.0.0.1:PORT`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Runs `f` on the shared server (its four-letter words, its
    /// command-line client), the other tests' shares waiting meanwhile.
    pub fn with_server<T>(&self, f: impl FnOnce(&ZooKeeper) -> T) -> T {
        f(&self.server.lock())
    }

    fn refuse(&self, what: &str) -> ! {
        panic!(
            "cannot {what} the shared ZooKeeper server (other tests use it): start one of the \
             test's own with ZooKeeper::start()"
        )
    }
}

impl std::fmt::Debug for SharedZooKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedZooKeeper")
            .field("address", &self.address)
            .field("chroot", &self.chroot)
            .finish()
    }
}

/// A share as one of the [engines](super::super): its URL names its
/// chroot; faults on the server are refused (panic).
impl Engine for SharedZooKeeper {
    /// As [`SharedZooKeeper::get`].
    fn start() -> Result<Self, EngineError> {
        Self::get()
    }

    fn kind(&self) -> &'static str {
        "zk"
    }

    /// `zk://127.0.0.1:PORT/tN-NAME`.
    fn store_url(&self) -> String {
        format!("zk://{}{}", self.address, self.chroot)
    }

    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn is_healthy(&self) -> bool {
        self.with_server(ZooKeeper::is_healthy)
    }

    fn kill(&mut self) -> Signaled {
        self.refuse("kill")
    }

    fn pause(&mut self) -> Signaled {
        self.refuse("pause")
    }

    fn resume(&mut self) -> Signaled {
        self.refuse("resume")
    }

    fn stop(&mut self) -> Signaled {
        self.refuse("stop")
    }

    fn restart(&mut self) -> Result<(), EngineError> {
        self.refuse("restart")
    }

    fn log_tail(&self, lines: usize) -> String {
        self.with_server(|z| z.process.log_tail(lines))
    }

    fn min_ttl(&self) -> Duration {
        self.tick_time * 2
    }

    fn expiry_slack(&self) -> ExpirySlack {
        expiry_slack(self.tick_time)
    }
}
