//! What every engine that runs as a child process shares: finding the
//! program, free ports, a temporary directory with the data dir and the log,
//! starting on new ports after a port collision, waiting with a bound until
//! the engine is ready, pausing, and stopping by PID.
//!
//! An engine type holds one [`EngineProcess`] per process and adds only what
//! is its own: its command line ([`EngineProcess::command`] plus arguments)
//! and its health check (a closure given to [`EngineProcess::wait_ready`]).

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use tempfile::TempDir;

use super::{EngineError, STOP_TIMEOUT, Signaled};

/// How often the kit polls a child or a health check.
pub(crate) const POLL: Duration = Duration::from_millis(10);

/// Starts on fresh ports after a port collision, at most this many times.
const START_ATTEMPTS: usize = 5;

/// How many lines of an engine's log its startup errors quote.
pub(crate) const LOG_TAIL_LINES: usize = 20;

/// A program the kit runs: the `default` name looked up on `PATH`, or the
/// path in the override variable `var` when that is set and not empty.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    name: &'static str,
    overridden: Option<(PathBuf, &'static str)>,
    /// The engine the program runs when that is not the program itself
    /// (`java` running ZooKeeper).
    engine: Option<&'static str>,
}

impl Program {
    pub(crate) fn from_env(name: &'static str, var: &'static str) -> Self {
        let overridden = std::env::var_os(var)
            .filter(|path| !path.is_empty())
            .map(|path| (PathBuf::from(path), var));
        Self {
            name,
            overridden,
            engine: None,
        }
    }

    /// Names the engine this program runs, when that is not the program
    /// itself (`java` running ZooKeeper): the temporary directory, the log
    /// and the watchman are named after the engine.
    pub(crate) fn running(mut self, engine: &'static str) -> Self {
        self.engine = Some(engine);
        self
    }

    /// The engine's name, such as `etcd` or `zookeeper` (whose program is
    /// `java`).
    pub(crate) fn engine(&self) -> &'static str {
        self.engine.unwrap_or(self.name)
    }

    /// What to pass to [`std::process::Command::new`].
    pub(crate) fn command_name(&self) -> OsString {
        match &self.overridden {
            Some((path, _)) => path.clone().into_os_string(),
            None => self.name.into(),
        }
    }

    /// A `Command` for this program with stdin closed and no variable of the
    /// test's environment whose name starts with `env_prefix` (engines read
    /// such variables as flags: `ETCD_*`, `ETCDCTL_*`).
    pub(crate) fn command(&self, env_prefix: &str) -> Command {
        let mut command = Command::new(self.command_name());
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with(env_prefix) {
                command.env_remove(key);
            }
        }
        command.stdin(Stdio::null());
        command
    }

    /// The error for a failed spawn of this program: "not installed" with the
    /// install script's name when the program does not exist.
    pub(crate) fn spawn_error(&self, source: io::Error) -> EngineError {
        if source.kind() != io::ErrorKind::NotFound {
            return EngineError::Spawn {
                program: self.name,
                source,
            };
        }
        match &self.overridden {
            Some((path, var)) => EngineError::NotInstalledAt {
                program: self.name,
                path: path.clone(),
                var,
            },
            None => EngineError::NotInstalled { program: self.name },
        }
    }
}

/// One engine process and its temporary directory: `data/` (the engine's
/// data dir) and `ENGINE.log` (standard output and error of every run;
/// `ENGINE` is the program's name unless [`Program::running`] named
/// another).
///
/// The directory outlives [`stop`](Self::stop) and [`kill`](Self::kill), so
/// a new [`spawn`](Self::spawn) restarts the engine on the same data; it is
/// removed on drop, after the process is stopped.
#[derive(Debug)]
pub(crate) struct EngineProcess {
    program: Program,
    /// `None` once the kit stopped or killed the process (and reaped it).
    child: Option<Child>,
    /// Whether the kit sent SIGSTOP and no SIGCONT since.
    paused: bool,
    /// What [`stop`](Self::stop) sends first: SIGTERM unless the engine
    /// shuts down gracefully on another signal.
    stop_signal: Signal,
    // Declared last: removed after `Drop` stopped the process.
    dir: TempDir,
}

impl EngineProcess {
    /// Creates the temporary directory (`regent-ENGINE-…`) for `program`; the
    /// process starts with [`spawn`](Self::spawn).
    pub(crate) fn new(program: Program) -> Result<Self, EngineError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("regent-{}-", program.engine()))
            .tempdir()
            .map_err(|source| EngineError::Io {
                action: "create a temporary directory for an engine",
                source,
            })?;
        Ok(Self {
            program,
            child: None,
            paused: false,
            stop_signal: Signal::TERM,
            dir,
        })
    }

    /// Makes [`stop`](Self::stop) (and so drop) send `signal` first instead
    /// of SIGTERM, for an engine whose graceful shutdown is on another
    /// signal (Consul's on SIGINT).
    pub(crate) fn with_stop_signal(mut self, signal: Signal) -> Self {
        self.stop_signal = signal;
        self
    }

    /// What [`stop`](Self::stop) sends first.
    pub(crate) fn stop_signal(&self) -> Signal {
        self.stop_signal
    }

    /// The program this process runs.
    pub(crate) fn program(&self) -> &Program {
        &self.program
    }

    /// The temporary directory, for files of the engine's own (certificates,
    /// configuration).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The data dir, `DIR/data`, which the engine creates (some insist on
    /// creating it themselves, with their own permissions).
    pub(crate) fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The log, `DIR/ENGINE.log`.
    pub(crate) fn log_path(&self) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.program.engine()))
    }

    /// The last `lines` lines of the log, or a note why there are none.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path(), lines)
    }

    /// The PID while the process runs (as far as the kit knows).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the kit started the process and has not stopped or killed it
    /// since.
    pub(crate) fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts `command` (from [`Program::command`] of this process's
    /// program) with its output appended to the log. The caller stops a
    /// running process first.
    pub(crate) fn spawn(&mut self, mut command: Command) -> Result<(), EngineError> {
        debug_assert!(self.child.is_none(), "spawn over a running process");
        let open = || {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.log_path())
                .map_err(|source| EngineError::Io {
                    action: "open an engine's log file",
                    source,
                })
        };
        command
            .stdout(Stdio::from(open()?))
            .stderr(Stdio::from(open()?));
        let child = command
            .spawn()
            .map_err(|source| self.program.spawn_error(source))?;
        self.child = Some(child);
        self.paused = false;
        Ok(())
    }

    /// Polls `ready` until it says yes ([`Ok`]), the process exits
    /// ([`EngineError::Exited`]), or `deadline` passes
    /// ([`EngineError::NotReady`]); both errors name `instance` and quote
    /// the log.
    pub(crate) fn wait_ready(
        &mut self,
        deadline: Instant,
        instance: &str,
        mut ready: impl FnMut() -> bool,
    ) -> Result<(), EngineError> {
        let started = Instant::now();
        loop {
            self.check_not_exited(instance)?;
            if ready() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(EngineError::NotReady {
                    instance: instance.to_owned(),
                    waited: started.elapsed(),
                    log_tail: self.log_tail(LOG_TAIL_LINES),
                });
            }
            thread::sleep(POLL);
        }
    }

    /// [`EngineError::Exited`], naming `instance` and quoting the log, if
    /// the process has exited on its own (it is reaped then); for waits
    /// that watch several processes at once.
    pub(crate) fn check_not_exited(&mut self, instance: &str) -> Result<(), EngineError> {
        let exited = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        match exited {
            Some(status) => {
                self.child = None;
                Err(EngineError::Exited {
                    instance: instance.to_owned(),
                    status,
                    log_tail: self.log_tail(LOG_TAIL_LINES),
                })
            }
            None => Ok(()),
        }
    }

    /// Sends `signal` to the process by its PID, if it runs.
    pub(crate) fn signal(&mut self, signal: Signal) -> Signaled {
        match self.child.as_mut() {
            Some(child) => {
                send(child, signal);
                Signaled::Sent
            }
            None => Signaled::NotRunning,
        }
    }

    /// SIGSTOP: the process keeps its sockets but answers nothing until
    /// [`resume`](Self::resume).
    pub(crate) fn pause(&mut self) -> Signaled {
        let sent = self.signal(Signal::STOP);
        self.paused |= sent == Signaled::Sent;
        sent
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub(crate) fn resume(&mut self) -> Signaled {
        self.paused = false;
        self.signal(Signal::CONT)
    }

    /// First half of [`stop`](Self::stop): SIGTERM (or the engine's own
    /// stop signal), and SIGCONT to a paused process so that it can act on
    /// it. Lets a caller stop several processes together.
    pub(crate) fn begin_stop(&mut self) -> Signaled {
        let sent = self.signal(self.stop_signal);
        if self.paused {
            self.resume();
        }
        sent
    }

    /// Second half of [`stop`](Self::stop): waits until the process exits or
    /// `deadline` passes, then SIGKILL, and reaps it.
    pub(crate) fn finish_stop(&mut self, deadline: Instant) {
        if let Some(mut child) = self.child.take()
            && !wait_until(&mut child, deadline)
        {
            kill(&mut child);
        }
        self.paused = false;
    }

    /// SIGTERM (or the engine's own stop signal), then SIGKILL if the
    /// process has not exited after [`STOP_TIMEOUT`]; returns once it is
    /// reaped.
    pub(crate) fn stop(&mut self) -> Signaled {
        let sent = self.begin_stop();
        self.finish_stop(Instant::now() + STOP_TIMEOUT);
        sent
    }

    /// SIGKILL, as a crash would, and reap.
    pub(crate) fn kill(&mut self) -> Signaled {
        self.paused = false;
        match self.child.take() {
            Some(mut child) => {
                kill(&mut child);
                Signaled::Sent
            }
            None => Signaled::NotRunning,
        }
    }
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `start` again while it fails because a port it was given was taken
/// between [`free_ports`] and the engine binding it (see
/// [`is_port_collision`]), at most a few times. `start` picks new ports on
/// every call.
pub(crate) fn retry_on_port_collision<T>(
    mut start: impl FnMut() -> Result<T, EngineError>,
) -> Result<T, EngineError> {
    let mut attempt = 1;
    loop {
        match start() {
            Err(err) if attempt < START_ATTEMPTS && is_port_collision(&err) => attempt += 1,
            done => return done,
        }
    }
}

/// Whether the engine exited because a port was taken: its log says
/// "address already in use", as etcd, Consul, Redis, PostgreSQL and the JVM
/// all do (in one capitalisation or another).
pub(crate) fn is_port_collision(err: &EngineError) -> bool {
    matches!(err, EngineError::Exited { log_tail, .. }
        if log_tail.to_ascii_lowercase().contains("address already in use"))
}

/// `n` distinct ports that were free on 127.0.0.1 a moment ago, outside
/// the kernel's ephemeral range ([`crate::ports`]).
///
/// Another process may still take one before the engine binds it, which
/// [`retry_on_port_collision`] handles.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>, EngineError> {
    crate::ports::free_ports(n).map_err(|source| EngineError::Io {
        action: "find a free port on 127.0.0.1",
        source,
    })
}

/// Sends `signal` to the child by its PID unless it has already been reaped.
fn send(child: &mut Child, signal: Signal) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let pid = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
    if let Some(pid) = pid {
        // ESRCH: it exited between try_wait and here; nothing to do.
        let _ = kill_process(pid, signal);
    }
}

/// Waits until the child exits or `deadline` passes; true if it exited (and
/// is reaped).
fn wait_until(child: &mut Child, deadline: Instant) -> bool {
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            Ok(None) => thread::sleep(POLL),
        }
    }
}

/// SIGKILL and reap: afterwards the PID no longer names the child.
fn kill(child: &mut Child) {
    send(child, Signal::KILL);
    let _ = child.wait();
}

/// Runs `command`, an engine's own client run once (`psql`, `redis-cli`),
/// to its end within `timeout`, its output caught in files (a pipe left
/// unread could stall it), and returns its standard output. `step` names
/// the command in errors, `instance` the engine; `spawn_error` makes the
/// error for a client that cannot run.
///
/// # Errors
///
/// [`EngineError::Setup`] with what the client printed when it fails;
/// [`EngineError::Io`] of kind [`io::ErrorKind::TimedOut`] when it has
/// not finished after `timeout` (it is killed then); `spawn_error`'s.
pub(crate) fn run_client(
    mut command: Command,
    step: String,
    timeout: Duration,
    instance: &str,
    spawn_error: impl FnOnce(io::Error) -> EngineError,
) -> Result<String, EngineError> {
    use std::io::{Read as _, Seek as _};
    let capture = |file: Option<&fs::File>| {
        match file {
            Some(f) => f.try_clone(),
            None => tempfile::tempfile(),
        }
        .map_err(|source| EngineError::Io {
            action: "create a file for a client's output",
            source,
        })
    };
    let (mut out, mut err) = (capture(None)?, capture(None)?);
    command
        .stdout(Stdio::from(capture(Some(&out))?))
        .stderr(Stdio::from(capture(Some(&err))?));
    let mut child = command.spawn().map_err(spawn_error)?;
    drop(command);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(EngineError::Io {
                    action: "get a client's answer in time",
                    source: io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{instance}: no answer to `{step}` within {timeout:?}"),
                    ),
                });
            }
        }
    };
    let read = |file: &mut fs::File| {
        let mut text = String::new();
        let _ = file.rewind();
        let _ = file.read_to_string(&mut text);
        text
    };
    let (stdout, stderr) = (read(&mut out), read(&mut err));
    if !status.success() {
        return Err(EngineError::Setup {
            instance: instance.to_owned(),
            step,
            status,
            output: format!("{stdout}{stderr}"),
        });
    }
    Ok(stdout)
}

/// The last `lines` lines of the log at `path`, or a note why there are none.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(err) => format!("(no log at {}: {err})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(log_tail: &str) -> EngineError {
        EngineError::Exited {
            instance: "etcd member m0".into(),
            status: Command::new("false").status().unwrap(),
            log_tail: log_tail.into(),
        }
    }

    #[test]
    fn only_an_exit_on_a_taken_port_is_a_collision() {
        assert!(is_port_collision(&exited(
            r#"{"level":"fatal","msg":"listen tcp 127.0.0.1:2380: bind: address already in use"}"#
        )));
        assert!(is_port_collision(&exited(
            "java.net.BindException: Address already in use"
        )));
        assert!(!is_port_collision(&exited(
            "member m0 has already been bootstrapped"
        )));
    }

    #[test]
    fn a_collision_starts_again_a_bounded_number_of_times() {
        let mut calls = 0;
        let result: Result<(), _> = retry_on_port_collision(|| {
            calls += 1;
            Err(exited("bind: address already in use"))
        });
        assert!(result.is_err());
        assert_eq!(calls, START_ATTEMPTS);

        let mut calls = 0;
        let result = retry_on_port_collision(|| {
            calls += 1;
            if calls < 3 {
                Err(exited("bind: address already in use"))
            } else {
                Ok(calls)
            }
        });
        assert_eq!(result.unwrap(), 3);
    }

    #[test]
    fn a_process_is_paused_resumed_killed_and_its_dir_removed_on_drop() {
        let program = Program::from_env("sleep", "REGENT_TESTKIT_NO_SUCH_VAR");
        let mut process = EngineProcess::new(program.clone()).unwrap();
        assert_eq!(process.pause(), Signaled::NotRunning);
        let mut command = program.command("REGENT_TESTKIT_NO_SUCH_PREFIX_");
        command.arg("1000");
        process.spawn(command).unwrap();
        let pid = process.pid().unwrap();
        let state = || regent_proc::stat(i32::try_from(pid).ok()?).map(|s| s.state);
        assert_eq!(process.pause(), Signaled::Sent);
        let until = Instant::now() + Duration::from_secs(5);
        while state() != Some('T') && Instant::now() < until {
            thread::sleep(POLL);
        }
        assert_eq!(state(), Some('T'), "SIGSTOP stops the process");
        // A paused process still stops: SIGTERM, then SIGCONT.
        assert_eq!(process.stop(), Signaled::Sent);
        assert_eq!(process.pid(), None);
        assert_eq!(state(), None, "reaped");
        assert_eq!(process.kill(), Signaled::NotRunning);
        let dir = process.dir().to_owned();
        drop(process);
        assert!(!dir.exists());
    }
}
