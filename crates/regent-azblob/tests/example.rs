//! The example `blob_distributed_mutex`, the reference sample's program,
//! run as two processes against the shared Azurite: exactly one leads and
//! prints its fencing token; SIGTERM stops it, releasing the lease, and the
//! other takes over at its next try with a larger token.
//!
//! The example binary is found next to this test's executable
//! (`target/debug/examples/`), where `cargo test` builds it; a run of this
//! test alone (`cargo test --test example`) does not, and then, or when
//! the binary is older than the example's or the crate's source, the test
//! builds it with `$CARGO build -p regent-azblob --example
//! blob_distributed_mutex` in the same target directory, saying so.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use regent_testkit::engines::SharedAzurite;
use rustix::process::{Pid, Signal};

const EXAMPLE: &str = "blob_distributed_mutex";

/// The example's follower retry interval (ttl 15 s / 5).
const RETRY_EVERY: Duration = Duration::from_secs(3);

/// The example's binary, built if it is missing or older than its
/// source or the crate's.
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's executable");
    // target/PROFILE/deps/example-HASH
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/PROFILE/deps");
    let binary = profile_dir.join("examples").join(EXAMPLE);
    let why = match modified(&binary) {
        None => "is not built",
        Some(built) if newest_source() > built => "is older than its source",
        Some(_) => return binary,
    };
    let target_dir = profile_dir.parent().expect("target/PROFILE");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "{} {why}: building it with `{} build -p regent-azblob --example {EXAMPLE}` (target \
         directory {})",
        binary.display(),
        cargo.to_string_lossy(),
        target_dir.display()
    );
    let mut build = Command::new(&cargo);
    build
        .args(["build", "-p", "regent-azblob", "--example", EXAMPLE])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    // What cargo set for this test's run, not for a build: build scripts
    // that watch these (ring's watches CARGO_MANIFEST_DIR) would run
    // again, and everything above them be rebuilt, twice.
    for (name, _) in std::env::vars_os() {
        let name_str = name.to_string_lossy();
        if name_str == "OUT_DIR"
            || [
                "CARGO_MANIFEST_",
                "CARGO_PKG_",
                "CARGO_BIN_",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
            ]
            .iter()
            .any(|p| name_str.starts_with(p))
        {
            build.env_remove(&name);
        }
    }
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo");
    assert!(status.success(), "building the example failed: {status}");
    assert!(binary.exists(), "cargo built no {}", binary.display());
    binary
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// When the example or the crate's code last changed.
fn newest_source() -> SystemTime {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_dir(crate_dir.join("src"))
        .expect("the crate's src")
        .filter_map(|entry| modified(&entry.ok()?.path()));
    [
        crate_dir.join("examples").join(format!("{EXAMPLE}.rs")),
        crate_dir.join("Cargo.toml"),
    ]
    .iter()
    .filter_map(|p| modified(p))
    .chain(src)
    .max()
    .expect("the example's source")
}

/// A line the example printed on standard output, when it was read.
struct Line {
    who: &'static str,
    at: Instant,
    text: String,
}

impl Line {
    /// The fencing token of a `HOLDER: leading with fencing token TOKEN`
    /// line.
    fn token(&self) -> Option<u64> {
        let rest = self.text.strip_prefix(self.who)?;
        let token = rest.strip_prefix(": leading with fencing token ")?;
        Some(token.parse().expect("a token is a number"))
    }
}

/// One running example; SIGKILLed by its PID on drop if it still runs.
struct Instance {
    who: &'static str,
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Instance {
    fn start(
        binary: &PathBuf,
        share: &SharedAzurite,
        who: &'static str,
        lines: Sender<Line>,
    ) -> Self {
        let mut child = Command::new(binary)
            .args(["--container", share.container(), "--holder", who])
            // A bound for an instance the test leaves behind.
            .args(["--for", "2m"])
            .env("AZURE_STORAGE_CONNECTION_STRING", share.connection_string())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                let line = Line {
                    who,
                    at: Instant::now(),
                    text,
                };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped");
        let collected = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                collected
                    .lock()
                    .expect("not poisoned")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Self { who, child, stderr }
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("a pid")).expect("not 0");
        rustix::process::kill_process(pid, signal)
            .unwrap_or_else(|e| panic!("signal {}: {e}", self.who));
    }

    /// Waits for the process to exit, at most `within`.
    fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let until = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the example") {
                return status;
            }
            assert!(
                Instant::now() < until,
                "{} did not exit within {within:?}\n{}",
                self.who,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        format!(
            "--- {}'s standard error\n{}",
            self.who,
            self.stderr.lock().expect("not poisoned")
        )
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What the examples print, as it comes, and what came so far.
struct Output {
    lines: Receiver<Line>,
    seen: Vec<(&'static str, String)>,
}

impl Output {
    /// The next line, within `within`.
    fn next(&mut self, within: Duration) -> Result<Line, RecvTimeoutError> {
        let line = self.lines.recv_timeout(within)?;
        self.seen.push((line.who, line.text.clone()));
        Ok(line)
    }

    /// The next line for which `pick` says yes, within `within`.
    fn next_picked<T>(
        &mut self,
        within: Duration,
        what: &str,
        mut pick: impl FnMut(&Line) -> Option<T>,
        log: impl FnOnce() -> String,
    ) -> (Line, T) {
        let until = Instant::now() + within;
        loop {
            match self.next(until.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    if let Some(v) = pick(&line) {
                        return (line, v);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {what} within {within:?}\n{}", log())
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("both examples exited\n{}", log())
                }
            }
        }
    }

    /// Everything until both examples have closed their output.
    fn drain(&mut self) {
        while let Ok(line) = self.lines.recv() {
            self.seen.push((line.who, line.text));
        }
    }
}

#[test]
fn one_instance_leads_and_sigterm_hands_over_with_a_larger_token() {
    let share =
        SharedAzurite::get().unwrap_or_else(|e| panic!("cannot start Azurite for this test: {e}"));
    let binary = example_binary();
    let (tx, lines) = mpsc::channel();
    let mut output = Output {
        lines,
        seen: Vec::new(),
    };
    let mut instances = [
        Instance::start(&binary, &share, "a", tx.clone()),
        Instance::start(&binary, &share, "b", tx),
    ];
    let logs =
        |instances: &[Instance; 2]| format!("{}\n{}", instances[0].log(), instances[1].log());

    // One of them leads and prints its token.
    let (first, token) = output.next_picked(
        Duration::from_secs(20),
        "token from either instance",
        Line::token,
        || logs(&instances),
    );
    let leader = usize::from(first.who == "b");
    let other = 1 - leader;
    // Exactly one: for longer than the other's retry interval, only the
    // leader prints, and always the same token.
    let watch_until = Instant::now() + RETRY_EVERY + Duration::from_secs(1);
    let mut printed = 1;
    let mut last_of_leader = first.at;
    while let Some(left) = watch_until.checked_duration_since(Instant::now()) {
        match output.next(left) {
            Ok(line) => {
                if let Some(t) = line.token() {
                    assert_eq!(
                        line.who,
                        first.who,
                        "both instances lead: {:?} after {:?}\n{}",
                        line.text,
                        first.text,
                        logs(&instances)
                    );
                    assert_eq!(t, token, "a term's token never changes");
                    printed += 1;
                    last_of_leader = line.at;
                }
            }
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => panic!("the examples exited"),
        }
    }
    assert!(
        printed >= 4,
        "the leader printed its token {printed} times in {:?}\n{}",
        RETRY_EVERY + Duration::from_secs(1),
        logs(&instances)
    );

    // SIGTERM: the leader stops its task and releases the lease; the other
    // leads at its next try, long before the lease could have expired
    // (15 s after the last renewal).
    let termed = Instant::now();
    instances[leader].signal(Signal::TERM);
    let (took_over, new_token) = output.next_picked(
        RETRY_EVERY + Duration::from_secs(4),
        "token from the other instance after SIGTERM",
        |line| {
            let t = line.token()?;
            if line.who == first.who {
                // A last tick of the old term, before its cancellation.
                assert_eq!(t, token);
                last_of_leader = line.at;
                None
            } else {
                Some(t)
            }
        },
        || logs(&instances),
    );
    eprintln!(
        "example: {} led with {token}, SIGTERM; {} led {:.3?} later with {new_token}",
        first.who,
        took_over.who,
        took_over.at - termed
    );
    assert!(new_token > token, "{new_token} !> {token}");
    assert!(last_of_leader < took_over.at);
    let status = instances[leader].wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{}", instances[leader].log());

    instances[other].signal(Signal::TERM);
    let status = instances[other].wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{}", instances[other].log());
    // Both said goodbye on standard output.
    output.drain();
    for who in ["a", "b"] {
        assert!(
            output
                .seen
                .iter()
                .any(|(w, text)| *w == who && text == &format!("{who}: stopped")),
            "{who} did not print its stop: {:?}",
            output.seen
        );
    }
}
