//! One dev agent per test process, shared by every test that needs only a
//! store: [`SharedConsul`].

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use regent_core::store::ExpirySlack;

use super::super::{Engine, EngineError, Signaled};
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
    address: String,
    pid: Option<u32>,
    prefix: String,
}

/// The agent and the pipe to its watchman; never dropped.
struct Agent {
    consul: Mutex<Consul>,
    _watchman: Watchman,
}

struct Watchman {
    _child: Child,
    _lifeline: ChildStdin,
}

/// The agent, or why it could not start (every later share fails with the
/// same message).
static AGENT: OnceLock<Result<Agent, String>> = OnceLock::new();

/// Numbers the shares: prefixes stay unique even for two shares of one
/// test.
static NEXT: AtomicU64 = AtomicU64::new(1);

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
        let agent = AGENT.get_or_init(|| Agent::start().map_err(|e| e.to_string()));
        let agent = agent.as_ref().map_err(|first| EngineError::SharedFailed {
            engine: "consul dev agent",
            first: first.clone(),
        })?;
        let consul = agent.consul.lock().unwrap_or_else(|p| p.into_inner());
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name: String = std::thread::current()
            .name()
            .unwrap_or("test")
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
    ///
    /// # Panics
    ///
    /// If no agent was started, which a share cannot be without.
    pub fn with_agent<T>(&self, f: impl FnOnce(&Consul) -> T) -> T {
        let Some(Ok(agent)) = AGENT.get() else {
            unreachable!("a share exists only once the agent started");
        };
        f(&agent.consul.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn refuse(&self, what: &str) -> ! {
        panic!(
            "cannot {what} the shared Consul agent (other tests use it): start one of the \
             test's own with Consul::start()"
        )
    }
}

impl Agent {
    fn start() -> Result<Self, EngineError> {
        let consul = Consul::start()?;
        let pid = consul.pid().expect("a started agent has a pid");
        let dir = consul.process.dir().to_owned();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(
                // $1 the agent's pid, $2 its directory (its cwd), $3 the
                // stop timeout in tenths of a second.
                r#"read -r _
                alive() { [ "$(readlink "/proc/$1/cwd" 2>/dev/null)" = "$2" ]; }
                if alive "$1" "$2"; then
                    kill -INT "$1"
                    i=0
                    while alive "$1" "$2" && [ "$i" -lt "$3" ]; do sleep 0.1; i=$((i + 1)); done
                    alive "$1" "$2" && kill -KILL "$1"
                fi
                rm -rf "$2""#,
            )
            .arg("regent-consul-watchman")
            .arg(pid.to_string())
            .arg(&dir)
            .arg((super::STOP_TIMEOUT.as_millis() / 100).to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of the test's process group: a ^C that kills the tests
            // leaves it to clean up.
            .process_group(0)
            .spawn()
            .map_err(|source| EngineError::Spawn {
                program: "sh",
                source,
            })?;
        let mut lifeline = child.stdin.take().expect("piped stdin");
        // Nothing is ever written but this: the watchman waits for EOF.
        let _ = lifeline.flush();
        Ok(Self {
            consul: Mutex::new(consul),
            _watchman: Watchman {
                _child: child,
                _lifeline: lifeline,
            },
        })
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
        ExpirySlack::proportional(100)
    }
}
