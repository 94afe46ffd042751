//! Apache Curator's `LeaderLatch` as a process: [`LatchParticipant`], the
//! kit's Java participant compiled with the installed JDK, for the tests
//! and benchmarks that put a Curator participant beside regent's.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tempfile::TempDir;

use super::super::EngineError;
use super::classpath::curator_classpath;
use super::server::JAVA_VAR;

/// The JVM's option variables of the caller's environment, not passed on
/// (as the kit does for ZooKeeper's servers).
const JVM_VARS: &[&str] = &[
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
];

/// The compiled `LatchParticipant`: one Curator `LeaderLatch` participant
/// per process, driven line by line over its standard input.
///
/// [`LatchParticipant::compile`] writes [`LatchParticipant::SOURCE`] into
/// a temporary directory and compiles it there with the `javac` beside the
/// `java` the kit runs (`REGENT_JAVA_BIN`, else the one on `PATH`) against
/// [`curator_classpath`]; [`LatchParticipant::command`] runs one
/// participant. The protocol (the source's class comment):
///
/// * arguments `CONNECT_STRING LATCH_PATH PARTICIPANT_ID`; it prints
///   `READY` once its client is connected (the latch not yet started);
/// * one answer line per command: `start` → `STARTED`, `leader?` →
///   `LEADER ID` or `LEADER -`, `has?` → `HAS true|false`,
///   `participants?` → `PARTICIPANTS ID…` (in line), `close` → `CLOSED`;
///   `exit` (or the end of its input) closes the client and exits;
/// * the latch's listener prints `EVENT isLeader` and `EVENT notLeader` as
///   they come; a failed command prints `ERROR …`;
/// * its client's session timeout is 2 s;
/// * SIGTERM or SIGINT closes the latch and the client (a shutdown hook),
///   so the next participant leads at once; SIGKILL leaves the session to
///   expire.
///
/// Every line is flushed. Dropping the value removes the classes.
///
/// ```no_run
/// use std::process::Stdio;
/// use regent_testkit::engines::{LatchParticipant, ZooKeeper};
///
/// let zk = ZooKeeper::start()?;
/// let participant = LatchParticipant::compile()?;
/// let child = participant
///     .command(&zk.address(), "/jobs", "curator-1")
///     .stdin(Stdio::piped())
///     .stdout(Stdio::piped())
///     .spawn()
///     .expect("a JVM");
/// # drop(child);
/// # Ok::<(), regent_testkit::engines::EngineError>(())
/// ```
#[derive(Debug)]
pub struct LatchParticipant {
    classes: TempDir,
    classpath: String,
    java: PathBuf,
}

impl LatchParticipant {
    /// The participant's Java source (class `LatchParticipant`).
    pub const SOURCE: &'static str = include_str!("LatchParticipant.java");

    /// Compiles the participant into a temporary directory.
    ///
    /// # Errors
    ///
    /// [`EngineError::JarNotFound`] when a jar of Curator's classpath is
    /// missing, [`EngineError::NotInstalled`] when there is no `javac`
    /// (both name `scripts/install-engines`), [`EngineError::Setup`] when
    /// it did not compile (quoting `javac`), [`EngineError::Io`] or
    /// [`EngineError::Spawn`] when setting up failed.
    pub fn compile() -> Result<Self, EngineError> {
        let classpath = curator_classpath()?;
        let classes = tempfile::Builder::new()
            .prefix("regent-curator-participant-")
            .tempdir()
            .map_err(|source| EngineError::Io {
                action: "create a temporary directory for the Curator participant",
                source,
            })?;
        let source = classes.path().join("LatchParticipant.java");
        std::fs::write(&source, Self::SOURCE).map_err(|source| EngineError::Io {
            action: "write the Curator participant's source",
            source,
        })?;
        let java = java();
        let javac = javac(&java);
        let output = jvm(&javac)
            .args(["-encoding", "UTF-8", "-nowarn", "-cp"])
            .arg(&classpath)
            .arg("-d")
            .arg(classes.path())
            .arg(&source)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| match source.kind() {
                io::ErrorKind::NotFound => EngineError::NotInstalled { program: "javac" },
                _ => EngineError::Spawn {
                    program: "javac",
                    source,
                },
            })?;
        if !output.status.success() {
            return Err(EngineError::Setup {
                instance: "the Curator participant".to_owned(),
                step: format!("{} LatchParticipant.java", javac.display()),
                status: output.status,
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ),
            });
        }
        Ok(Self {
            classes,
            classpath,
            java,
        })
    }

    /// A `Command` running participant `id` on the latch `latch_path` of
    /// the ZooKeeper at `connect_string` (`HOST:PORT[,…]`), in a small JVM
    /// (serial GC, client compiler, 64 MiB heap) without the caller's JVM
    /// option variables. Standard input, output and error are the
    /// caller's to set.
    pub fn command(&self, connect_string: &str, latch_path: &str, id: &str) -> Command {
        let mut classpath = OsString::from(self.classes.path());
        classpath.push(":");
        classpath.push(&self.classpath);
        let mut command = jvm(&self.java);
        command
            .args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx64m"])
            .arg("-XX:-UsePerfData")
            .arg("-cp")
            .arg(classpath)
            .args(["LatchParticipant", connect_string, latch_path, id]);
        command
    }

    /// The `java` the participant runs on.
    pub fn java(&self) -> &Path {
        &self.java
    }

    /// The Curator classpath it was compiled against and runs with.
    pub fn classpath(&self) -> &str {
        &self.classpath
    }
}

/// `java`: `REGENT_JAVA_BIN`, or the one on `PATH`.
fn java() -> PathBuf {
    std::env::var_os(JAVA_VAR)
        .filter(|path| !path.is_empty())
        .map_or_else(|| PathBuf::from("java"), PathBuf::from)
}

/// The `javac` beside `java` (after symlinks), so that `java` reads the
/// classes it writes; else the one on `PATH`.
fn javac(java: &Path) -> PathBuf {
    let found = if java.components().count() > 1 {
        Some(java.to_path_buf())
    } else {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join(java))
            .find(|path| path.is_file())
    };
    found
        .and_then(|path| path.canonicalize().ok())
        .map(|path| path.with_file_name("javac"))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("javac"))
}

fn jvm(program: &Path) -> Command {
    let mut command = Command::new(program);
    for var in JVM_VARS {
        command.env_remove(var);
    }
    command
}
