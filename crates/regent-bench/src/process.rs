//! The tool processes a bench starts: each in a process group of its own,
//! its standard error in a file and its standard output in a file or read
//! line by line, and killed with its whole tree when dropped (by PID and
//! process group, never by name).

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use regent_proc::{Signal, kill_tree, mono_ns, signal};

use crate::error::BenchError;
use crate::wait::check_interrupted;

/// A line of a tool's standard output, stamped with CLOCK_MONOTONIC as
/// the bench read it.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub(crate) at_ns: u64,
    pub(crate) text: String,
}

/// Where a tool's standard output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdout {
    /// A file beside its standard error: the tool's command writes there
    /// too, and may outlive it.
    File,
    /// Read line by line by a thread, each line stamped as it arrives:
    /// for tools that announce leadership on their output and run no
    /// command.
    Lines,
}

/// A tool process in a process group of its own, its standard error in a
/// file. Dropping it kills its whole tree (descendants by parent links and
/// their process groups) unless it has exited.
pub(crate) struct ToolProcess {
    pub(crate) name: String,
    pub(crate) pid: i32,
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: PathBuf,
    lines: Arc<Mutex<Vec<Line>>>,
    reader: Option<JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl ToolProcess {
    /// Starts `command` as `name`, with files `DIR/NAME.out` and
    /// `DIR/NAME.err`; with `stdin`, its standard input is a pipe.
    pub(crate) fn spawn(
        name: &str,
        command: &mut Command,
        dir: &Path,
        stdout: Stdout,
        stdin: bool,
    ) -> Result<Self, BenchError> {
        let io = |what: &str, e: std::io::Error| BenchError::Failed(format!("{what}: {e}"));
        let stderr = dir.join(format!("{name}.err"));
        let err = std::fs::File::create(&stderr).map_err(|e| io("a stderr file", e))?;
        let out = match stdout {
            Stdout::File => Stdio::from(
                std::fs::File::create(dir.join(format!("{name}.out")))
                    .map_err(|e| io("a stdout file", e))?,
            ),
            Stdout::Lines => Stdio::piped(),
        };
        let mut child = command
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| {
                BenchError::Failed(format!(
                    "cannot start {name} ({:?}): {e}",
                    command.get_program()
                ))
            })?;
        let lines: Arc<Mutex<Vec<Line>>> = Arc::default();
        let reader = child.stdout.take().map(|out| {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for text in BufReader::new(out).lines() {
                    let Ok(text) = text else { break };
                    let line = Line {
                        at_ns: mono_ns(),
                        text,
                    };
                    lines.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                }
            })
        });
        Ok(Self {
            name: name.to_owned(),
            pid: i32::try_from(child.id()).unwrap_or(i32::MAX),
            stdin: child.stdin.take(),
            child,
            stderr,
            lines,
            reader,
            status: None,
        })
    }

    /// The standard output lines read so far.
    pub(crate) fn lines(&self) -> Vec<Line> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Writes `line` to its standard input.
    pub(crate) fn send(&mut self, line: &str) -> Result<(), BenchError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| BenchError::Failed(format!("{} has no standard input", self.name)))?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| BenchError::Failed(format!("write {line:?} to {}: {e}", self.name)))
    }

    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The exit status if it has exited, reaping it.
    pub(crate) fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits up to `within` for it to exit.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Result<Option<ExitStatus>, BenchError> {
        let until = Instant::now() + within;
        loop {
            check_interrupted()?;
            if let Some(status) = self.try_status() {
                return Ok(Some(status));
            }
            if Instant::now() >= until {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends `sig` to the tool process itself (not its group).
    pub(crate) fn signal(&self, sig: Signal) {
        if self.status.is_none() {
            signal(self.pid, sig);
        }
    }
}

impl Drop for ToolProcess {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            kill_tree(self.pid);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // Its output pipe is closed now (nothing of its tree is left that
        // holds it): the reader ends.
        drop(self.stdin.take());
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// How a process ended, for the report.
pub(crate) fn describe_exit(status: Option<ExitStatus>) -> String {
    match status {
        None => "did not exit".to_owned(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(sig)) => format!("signal {sig}"),
            _ => format!("{s}"),
        },
    }
}
