//! One dev agent per test process, shared by every test that needs only a
//! store: [`SharedConsul`].

use std::time::Duration;

use regent_core::store::ExpirySlack;

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::shared::{self, Shared, SharedCell};
use super::Consul;

/// A share of the test process's one Consul dev agent: its own key prefix
/// (`consul://127.0.0.1:PORT/t7-TEST/`) on an agent started once, by the
/// first test that asks, and stopped by its PID when the test process
/// exits.
///
/// Consul's session TTL floor (10 s) makes its tests slow; a test binary's
/// tests run concurrently, and one agent for all of them costs one start
/// (about a second) and one agent's idle work instead of one per test. The
/// prefix isolates the tests as an agent of their own would: every key a
/// test's candidates touch lives under it, and sessions are per
/// candidate. What the prefix cannot isolate is the agent itself, so a
/// share refuses to kill, pause, stop or restart it ([`Engine::kill`] and
/// the rest panic, naming [`Consul::start`], which gives a test an agent of
/// its own to break).
///
/// # Lifetime
///
/// A `static` is never dropped, and the agent must not outlive the test
/// process. So with the agent the kit starts a watchman: a `sh` whose
/// standard input is a pipe only the test process holds. When the test
/// process exits, however it exits (a normal end, a panic, SIGKILL), the
/// pipe closes, the watchman reads end-of-file, stops the agent by its PID
/// (SIGINT, then SIGKILL after [`STOP_TIMEOUT`](super::STOP_TIMEOUT), only
/// while that PID's working directory is still the agent's) and removes
/// its directory.
///
/// ```no_run
/// use regent_testkit::engines::{Engine, SharedConsul};
///
/// let a = SharedConsul::get()?;
/// let b = SharedConsul::get()?;
/// assert_ne!(a.store_url(), b.store_url()); // one agent, two prefixes
/// assert_eq!(a.pid(), b.pid());
/// # Ok::<(), regent_testkit::engines::EngineError>(())
/// ```
pub struct SharedConsul {
    agent: &'static Shared<Consul>,
    address: String,
    pid: Option<u32>,
    prefix: String,
}

/// The agent (with its watchman), or why it could not start.
static AGENT: SharedCell<Consul> = SharedCell::new();

impl SharedConsul {
    /// A share of the process's dev agent, started (and waited for) if no
    /// test started it yet. Its prefix is `tN-NAME/`, `NAME` the current
    /// thread's name (the test's, under the standard test harness) with
    /// every character other than ASCII letters, digits, `-` and `_`
    /// replaced.
    ///
    /// # Errors
    ///
    /// As [`Consul::start`] the first time, when Consul is missing or does
    /// not start; later calls fail the same way without trying again
    /// ([`EngineError::SharedFailed`] quoting the first error).
    pub fn get() -> Result<Self, EngineError> {
        let agent =
            Shared::get_or_start(&AGENT, "consul dev agent", Consul::start, |c| &c.process)?;
        let consul = agent.lock();
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
        Ok(Self {
            agent,
            address: consul.address(),
            pid: consul.pid(),
            prefix: format!("t{n}-{name}/"),
        })
    }

    /// This share's key prefix, with its trailing `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The agent's HTTP address, `127.0.0.1:PORT`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Runs `f` on the shared agent (its HTTP helpers, its `consul`
    /// command), the other tests' shares waiting meanwhile.
    pub fn with_agent<T>(&self, f: impl FnOnce(&Consul) -> T) -> T {
        f(&self.agent.lock())
    }

    fn refuse(&self, what: &str) -> ! {
        panic!(
            "cannot {what} the shared Consul agent (other tests use it): start one of the \
             test's own with Consul::start()"
        )
    }
}

impl std::fmt::Debug for SharedConsul {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedConsul")
            .field("address", &self.address)
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// A share as one of the [engines](super::super): its URL names its
/// prefix; faults on the agent are refused (panic).
impl Engine for SharedConsul {
    /// As [`SharedConsul::get`].
    fn start() -> Result<Self, EngineError> {
        Self::get()
    }

    fn kind(&self) -> &'static str {
        "consul"
    }

    /// `consul://127.0.0.1:PORT/tN-NAME`.
    fn store_url(&self) -> String {
        format!(
            "consul://{}/{}",
            self.address,
            self.prefix.trim_end_matches('/')
        )
    }

    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn is_healthy(&self) -> bool {
        self.with_agent(Consul::is_healthy)
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
        self.with_agent(|c| c.process.log_tail(lines))
    }

    fn min_ttl(&self) -> Duration {
        super::MIN_TTL
    }

    fn expiry_slack(&self) -> ExpirySlack {
        ExpirySlack::proportional(100).at_least(super::MIN_TTL * 2)
    }
}
