//! What the shared engines ([`SharedConsul`](super::SharedConsul),
//! [`SharedAzurite`](super::SharedAzurite)) have in common: one engine per
//! test process, started by the first test that asks, and a watchman that
//! stops it by its PID when the test process exits.
//!
//! A `static` is never dropped, and the engine must not outlive the test
//! process. So with the engine the kit starts a watchman: a `sh` whose
//! standard input is a pipe only the test process holds. When the test
//! process exits, however it exits (a normal end, a panic, SIGKILL), the
//! pipe closes, the watchman reads end-of-file, stops the engine by its PID
//! (the engine's stop signal, then SIGKILL after [`STOP_TIMEOUT`], only
//! while that PID's working directory is still the engine's directory, so
//! that a PID reused by another process is left alone) and removes the
//! directory.

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::process::EngineProcess;
use super::{EngineError, STOP_TIMEOUT};

/// One engine shared by the tests of a process, and its watchman; lives in
/// a `static` (never dropped).
pub(crate) struct Shared<T> {
    engine: Mutex<T>,
    _watchman: Watchman,
}

/// The engine of a shared engine's `static`, or why it could not start (as
/// text: every later share fails with the same message).
pub(crate) type SharedCell<T> = OnceLock<Result<Shared<T>, String>>;

impl<T> Shared<T> {
    /// The engine in `cell`, started by `start` and given a watchman for the
    /// process `process` names if no test started it yet.
    ///
    /// # Errors
    ///
    /// `start`'s error (or the watchman's) to the call that tried; later
    /// calls fail without trying again ([`EngineError::SharedFailed`]
    /// naming `engine` and quoting the first error).
    pub(crate) fn get_or_start(
        cell: &'static SharedCell<T>,
        engine: &'static str,
        start: impl FnOnce() -> Result<T, EngineError>,
        process: impl FnOnce(&T) -> &EngineProcess,
    ) -> Result<&'static Self, EngineError> {
        let mut failed = None;
        let shared = cell.get_or_init(|| {
            let started = start().and_then(|engine| {
                let watchman = Watchman::start(process(&engine))?;
                Ok(Self {
                    engine: Mutex::new(engine),
                    _watchman: watchman,
                })
            });
            started.map_err(|err| {
                let first = err.to_string();
                failed = Some(err);
                first
            })
        });
        match shared {
            Ok(shared) => Ok(shared),
            Err(first) => Err(failed.unwrap_or_else(|| EngineError::SharedFailed {
                engine,
                first: first.clone(),
            })),
        }
    }

    /// The engine, the other tests' shares waiting meanwhile. A test that
    /// panicked holding it does not poison it for the others.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.engine.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The watchman of one engine process: dropping the pipe (when the test
/// process exits) makes it stop the engine.
struct Watchman {
    _child: Child,
    _lifeline: ChildStdin,
}

impl Watchman {
    fn start(process: &EngineProcess) -> Result<Self, EngineError> {
        let pid = process.pid().expect("a started engine has a pid");
        let dir = process.dir();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(
                // $1 the engine's pid, $2 its directory (its cwd), $3 the
                // stop timeout in tenths of a second, $4 the stop signal's
                // number.
                r#"read -r _
                alive() { [ "$(readlink "/proc/$1/cwd" 2>/dev/null)" = "$2" ]; }
                if alive "$1" "$2"; then
                    kill "-$4" "$1"
                    i=0
                    while alive "$1" "$2" && [ "$i" -lt "$3" ]; do sleep 0.1; i=$((i + 1)); done
                    alive "$1" "$2" && kill -KILL "$1"
                fi
                rm -rf "$2""#,
            )
            .arg(format!("regent-{}-watchman", process.program().engine()))
            .arg(pid.to_string())
            .arg(dir)
            .arg((STOP_TIMEOUT.as_millis() / 100).to_string())
            .arg(process.stop_signal().as_raw().to_string())
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
            _child: child,
            _lifeline: lifeline,
        })
    }
}

/// Numbers the shares of every shared engine: names stay unique even for
/// two shares of one test.
static NEXT_SHARE: AtomicU64 = AtomicU64::new(1);

/// A new share's number and the current thread's name (the test's, under
/// the standard test harness; `test` for a thread without a name), which
/// the engine makes into a key prefix, a container name, ….
pub(crate) fn next_share() -> (u64, String) {
    let n = NEXT_SHARE.fetch_add(1, Ordering::Relaxed);
    let name = std::thread::current().name().unwrap_or("test").to_owned();
    (n, name)
}
