//! The examples, run as the processes a user would start, on one SQLite
//! file in a temporary directory: a graceful stop hands over at once and
//! the fenced file only sees tokens grow (`leader_task`); a one-shot job
//! runs once across three instances, also when an attempt fails
//! (`one_shot_job`); the observer follows a running leader (`observer`);
//! one process holds many elections and gives them all back on SIGTERM
//! (`many_elections`), and another follows them all (`observe_many`); a
//! crash of a service with the crash guardian hands over at once
//! (`guarded_service`).
//!
//! The binaries are found next to this test's executable
//! (`target/PROFILE/examples/`), where `cargo test` builds them. A run of
//! this file alone (`cargo test -p regent-election --test examples`) does not build
//! examples: the test then builds the one it needs with `$CARGO build
//! --example NAME`, and also when the binary is older than its source.
#![cfg(feature = "sqlite")]

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustix::process::{Pid, Signal};

/// The examples' ttl.
const TTL: Duration = Duration::from_secs(3);

/// Bounds every wait for a line, generous for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(20);

/// A graceful stop hands the lease over well before the ttl, and the
/// fenced file sees every token at least as large as the one before.
#[test]
fn leader_task_hands_over_on_sigterm_and_fences_its_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (db, out) = (path(&dir, "store.db"), path(&dir, "out.log"));
    let mut a = Example::start("leader_task", &[&db, &out, "a"], &[]);
    let first = a.wait_for("a to lead", |l| token_of(l, "leading: token "));
    let mut b = Example::start("leader_task", &[&db, &out, "b"], &[]);
    b.wait_for("b to follow a", |l| {
        l.starts_with(&format!("following: a (token {first})"))
            .then_some(())
    });
    // A few fenced lines from a.
    wait_until("a's lines", || count_lines(&out) >= 3);

    let stopped = Instant::now();
    a.signal(Signal::TERM);
    let second = b.wait_for("b to lead", |l| token_of(l, "leading: token "));
    let handed_over = stopped.elapsed();
    assert!(second > first, "token {second} after {first}");
    assert!(
        handed_over < TTL / 2,
        "b led {handed_over:?} after a's SIGTERM: a graceful stop must not wait for the ttl ({TTL:?})"
    );
    a.wait_for("a to stop its task", |l| {
        (l == format!("stopped leading: token {first}")).then_some(())
    });
    assert!(a.exit().success(), "{}", a.log());
    a.drain();
    assert_eq!(a.lines.last().map(String::as_str), Some("exit: Shutdown"));

    wait_until("b's lines", || {
        std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .any(|l| l.starts_with(&format!("{second} b ")))
    });
    b.signal(Signal::TERM);
    assert!(b.exit().success(), "{}", b.log());

    let text = std::fs::read_to_string(&out).unwrap();
    let tokens: Vec<u64> = text
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        tokens.windows(2).all(|w| w[0] <= w[1]),
        "a token fell:\n{text}"
    );
    assert!(
        tokens.contains(&first) && tokens.contains(&second),
        "{text}"
    );
}

/// Three instances of a one-shot job: it runs once, and all three exit 0.
#[test]
fn one_shot_job_runs_once_across_three_instances() {
    one_shot_job(false);
}

/// As above, with every instance's first attempt failing: the first
/// leader's job fails, and the job still runs to completion exactly once.
#[test]
fn one_shot_job_runs_once_when_an_attempt_fails() {
    one_shot_job(true);
}

fn one_shot_job(fail_once: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (db, resource) = (path(&dir, "store.db"), path(&dir, "resource.db"));
    let env: &[(&str, &str)] = if fail_once {
        &[("ONE_SHOT_JOB_FAIL_ONCE", "1")]
    } else {
        &[]
    };
    let mut jobs: Vec<Example> = ["a", "b", "c"]
        .into_iter()
        .map(|id| Example::start("one_shot_job", &[&db, &resource, id], env))
        .collect();
    for job in &mut jobs {
        assert!(job.exit().success(), "{}", job.log());
        job.drain();
    }
    let all: Vec<&String> = jobs.iter().flat_map(|j| &j.lines).collect();
    let count = |prefix: &str| all.iter().filter(|l| l.starts_with(prefix)).count();
    let report = || format!("{all:#?}");
    assert_eq!(count("job done: "), 1, "{}", report());
    assert_eq!(count("job step "), 3, "{}", report());
    assert_eq!(count("exit: job done"), 3, "{}", report());
    if fail_once {
        assert!(count("job failed: ") >= 1, "{}", report());
    }
    // The resource holds one run's output.
    let conn = rusqlite::Connection::open(&resource).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM job_output", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 3);
}

/// The observer prints the leader of a running `leader_task`.
#[test]
fn observer_follows_a_running_leader() {
    let dir = tempfile::tempdir().unwrap();
    let (db, out) = (path(&dir, "store.db"), path(&dir, "out.log"));
    let mut leader = Example::start("leader_task", &[&db, &out, "a"], &[]);
    let token = leader.wait_for("a to lead", |l| token_of(l, "leading: token "));
    let mut observer = Example::start("observer", &[&db], &[]);
    // Both ways of following, in whichever order they print.
    let mut expected = vec![
        format!("requests go to: a (token {token})"),
        format!("new leader: a (token {token})"),
    ];
    observer.wait_for("the leader through both ways", |l| {
        expected.retain(|e| e != l);
        expected.is_empty().then_some(())
    });
    leader.signal(Signal::TERM);
    observer.wait_for("the observer to see no leader", |l| {
        (l == "requests go to: no leader").then_some(())
    });
    observer.signal(Signal::TERM);
    assert!(observer.exit().success(), "{}", observer.log());
    assert!(leader.exit().success(), "{}", leader.log());
}

/// One process leads every election it holds, and gives them all back on
/// SIGTERM.
#[test]
fn many_elections_leads_them_all_and_gives_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = path(&dir, "store.db");
    let mut shards = Example::start("many_elections", &[&db, "20", "p"], &[]);
    shards.wait_for("all 20 led", |l| {
        (l == "leading 20 of 20 elections").then_some(())
    });
    shards.signal(Signal::TERM);
    assert!(shards.exit().success(), "{}", shards.log());
    shards.drain();
    assert_eq!(
        shards.lines.last().map(String::as_str),
        Some("stopped: leading 0 of 20 elections")
    );
}

/// `observe_many` names the leader of every shard `many_elections` leads,
/// and sees each shard pass to a second holder when the first stops.
#[test]
fn observe_many_follows_every_shard_through_a_hand_over() {
    let dir = tempfile::tempdir().unwrap();
    let db = path(&dir, "store.db");
    let mut p = Example::start("many_elections", &[&db, "5", "p"], &[]);
    p.wait_for("p to lead all 5", |l| {
        (l == "leading 5 of 5 elections").then_some(())
    });
    let mut q = Example::start("many_elections", &[&db, "5", "q"], &[]);
    let mut observer = Example::start("observe_many", &[&db, "5"], &[]);
    let mut by_p: std::collections::BTreeSet<String> =
        (0..5).map(|n| format!("shard-{n}")).collect();
    observer.wait_for("every shard led by p", |l| {
        if let Some((shard, who)) = l.split_once(": ")
            && who.starts_with("p (token ")
        {
            by_p.remove(shard);
        }
        by_p.is_empty().then_some(())
    });
    p.signal(Signal::TERM);
    let mut by_q: std::collections::BTreeSet<String> =
        (0..5).map(|n| format!("shard-{n}")).collect();
    observer.wait_for("every shard led by q", |l| {
        if let Some((shard, who)) = l.split_once(": ")
            && who.starts_with("q (token ")
        {
            by_q.remove(shard);
        }
        by_q.is_empty().then_some(())
    });
    assert!(p.exit().success(), "{}", p.log());
    q.wait_for("q to lead all 5", |l| {
        (l == "leading 5 of 5 elections").then_some(())
    });
    for process in [&mut q, &mut observer] {
        process.signal(Signal::TERM);
        assert!(process.exit().success(), "{}", process.log());
    }
}

/// The crash guardian: `kill -9` of the leader gives its lease back at
/// once, although its ttl is an hour (only the guardian can have released
/// it), and the next instance leads with a greater token.
#[cfg(all(feature = "guardian", target_os = "linux"))]
#[test]
fn guarded_service_crash_gives_the_lease_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = path(&dir, "store.db");
    let mut a = Example::start("guarded_service", &[&db, "a", "3600"], &[]);
    let guardian = a.wait_for("a's guardian", |l| token_of(l, "guardian: pid "));
    let first = a.wait_for("a to lead", |l| token_of(l, "leading: token "));
    let mut b = Example::start("guarded_service", &[&db, "b", "3600"], &[]);
    b.wait_for("b to campaign", |l| (l == "campaigning").then_some(()));
    let killed = Instant::now();
    a.signal(Signal::KILL);
    let second = b.wait_for("b to lead", |l| token_of(l, "leading: token "));
    eprintln!("b led {:?} after a's kill -9", killed.elapsed());
    assert!(second > first, "token {second} after {first}");
    a.exit();
    wait_until("a's guardian to end", || has_ended(guardian));
    let said = a.stderr.lock().unwrap().clone();
    assert!(
        said.contains("gave back the lease of election 'guarded' (holder 'a', token"),
        "{said}"
    );
    b.signal(Signal::TERM);
    assert!(b.exit().success(), "{}", b.log());
}

/// The guardian acts on the service's death only: killed itself, it
/// gives nothing back and the service goes on leading; the service's
/// crash then leaves its lease to the ttl. A graceful stop gives the lease
/// back by the service itself, and the guardian ends with it.
#[cfg(all(feature = "guardian", target_os = "linux"))]
#[test]
fn guardian_gives_back_nothing_while_the_service_lives() {
    let dir = tempfile::tempdir().unwrap();
    let db = path(&dir, "store.db");
    let leader_now = || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            use regent::LeaseStore as _;
            let store = regent::sqlite::SqliteStore::open(&db).await.unwrap();
            let election = regent::ElectionName::new("guarded").unwrap();
            store
                .current_leader(&election)
                .await
                .unwrap()
                .map(|l| (l.holder.as_str().to_owned(), l.token.get()))
        })
    };

    // The guardian killed: the service leads on; its crash keeps the lease.
    let mut a = Example::start("guarded_service", &[&db, "a", "3600"], &[]);
    let guardian = a.wait_for("a's guardian", |l| token_of(l, "guardian: pid "));
    let first = a.wait_for("a to lead", |l| token_of(l, "leading: token "));
    kill(guardian, Signal::KILL);
    wait_until("a's guardian to end", || has_ended(guardian));
    assert_eq!(leader_now(), Some(("a".to_owned(), first)));
    a.signal(Signal::KILL);
    a.exit();
    assert_eq!(leader_now(), Some(("a".to_owned(), first)), "{}", a.log());

    // A graceful stop: the service releases, its guardian has nothing to
    // give back and ends.
    let other = path(&dir, "other.db");
    let mut c = Example::start("guarded_service", &[&other, "c", "3600"], &[]);
    let guardian = c.wait_for("c's guardian", |l| token_of(l, "guardian: pid "));
    c.wait_for("c to lead", |l| token_of(l, "leading: token "));
    c.signal(Signal::TERM);
    assert!(c.exit().success(), "{}", c.log());
    wait_until("c's guardian to end", || has_ended(guardian));
    let said = c.stderr.lock().unwrap().clone();
    assert!(!said.contains("gave back"), "{said}");
}

/// Whether process `pid` has exited (gone, or a zombie nobody reaped).
#[cfg(all(feature = "guardian", target_os = "linux"))]
fn has_ended(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        // pid (comm) STATE …: the state follows the last ')'.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
    })
}

#[cfg(all(feature = "guardian", target_os = "linux"))]
fn kill(pid: u64, signal: Signal) {
    let pid = Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
}

/// The service example: the leader's metrics say it leads and the
/// follower's that it does not, both are healthy, and on SIGTERM the
/// follower takes over and its metric flips.
#[cfg(feature = "monitor")]
#[test]
fn service_serves_its_metrics_and_health_and_hands_over_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = path(&dir, "store.db");
    let mut a = Example::start("service", &[&db, "127.0.0.1:0", "a"], &[]);
    let at_a = a.wait_for("a to serve", |l| {
        l.strip_prefix("serving on ").map(str::to_owned)
    });
    let first = a.wait_for("a to lead", |l| token_of(l, "leading: token "));
    let mut b = Example::start("service", &[&db, "127.0.0.1:0", "b"], &[]);
    let at_b = b.wait_for("b to serve", |l| {
        l.strip_prefix("serving on ").map(str::to_owned)
    });
    let status = r#"leader_election_master_status{name="service"} "#;
    let leads = |at: &str| {
        let (code, text) = get(at, "/metrics");
        assert_eq!(code, 200, "{text}");
        text.lines()
            .find_map(|l| l.strip_prefix(status))
            .map(str::to_owned)
    };
    assert_eq!(leads(&at_a).as_deref(), Some("1.0"));
    wait_until("b to see a lead", || {
        get(&at_b, "/leader").1 == format!("a (token {first})\n")
    });
    assert_eq!(leads(&at_b).as_deref(), Some("0.0"));
    for at in [&at_a, &at_b] {
        let (code, text) = get(at, "/healthz");
        assert_eq!(code, 200, "{text}");
    }

    a.signal(Signal::TERM);
    let second = b.wait_for("b to lead", |l| token_of(l, "leading: token "));
    assert!(second > first);
    assert_eq!(leads(&at_b).as_deref(), Some("1.0"));
    assert!(a.exit().success(), "{}", a.log());
    b.signal(Signal::TERM);
    assert!(b.exit().success(), "{}", b.log());
}

/// `GET path` on `addr` (HTTP/1.1, one request): the status and the body.
#[cfg(feature = "monitor")]
fn get(addr: &str, path: &str) -> (u16, String) {
    use std::io::Write as _;
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP reply: {reply}"));
    (code, body.to_owned())
}

/// One example's process; SIGKILLed on drop if it still runs.
struct Example {
    name: &'static str,
    child: Child,
    /// Standard output, line by line as it comes.
    incoming: Receiver<String>,
    /// The lines read so far.
    lines: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl Example {
    fn start(name: &'static str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(binary(name))
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let (tx, incoming) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut pipe, collected) = (child.stderr.take().expect("piped"), stderr.clone());
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]);
                collected.lock().unwrap().push_str(&text);
            }
        });
        Self {
            name,
            child,
            incoming,
            lines: Vec::new(),
            stderr,
        }
    }

    /// Reads lines until `pick` says yes, within [`PATIENCE`].
    fn wait_for<T>(&mut self, what: &str, mut pick: impl FnMut(&str) -> Option<T>) -> T {
        let until = Instant::now() + PATIENCE;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.incoming.recv_timeout(left) {
                Ok(line) => {
                    let picked = pick(&line);
                    self.lines.push(line);
                    if let Some(v) = picked {
                        return v;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no sign of {what}\n{}", self.log()),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("{} exited before {what}\n{}", self.name, self.log())
                }
            }
        }
    }

    /// Reads the rest of standard output (the process has exited).
    fn drain(&mut self) {
        while let Ok(line) = self.incoming.recv_timeout(PATIENCE) {
            self.lines.push(line);
        }
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap()).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
    }

    /// Waits for the process to exit, within [`PATIENCE`].
    fn exit(&mut self) -> ExitStatus {
        let until = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < until,
                "{} did not exit\n{}",
                self.name,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        format!(
            "--- {}: standard output\n{}\n--- standard error\n{}",
            self.name,
            self.lines.join("\n"),
            self.stderr.lock().unwrap()
        )
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The example's binary, built first if it is missing or older than any
/// source of the workspace's crates (the store crates and the core it is
/// built from included).
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/PROFILE/deps/examples-HASH
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let binary = profile_dir.join("examples").join(name);
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let crates = crate_dir.parent().unwrap();
    let newest = newest_source(crates).max(modified(&crates.join("../Cargo.lock")));
    if modified(&binary).is_some_and(|built| Some(built) >= newest) {
        return binary;
    }
    // One build at a time: the tests run in parallel.
    static BUILD: Mutex<()> = Mutex::new(());
    let _one = BUILD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    // The features this test was built with, so that the build reuses
    // what `cargo test` built instead of building the crates again.
    let features: Vec<&str> = [
        ("sqlite", cfg!(feature = "sqlite")),
        ("etcd", cfg!(feature = "etcd")),
        ("etcd-tls", cfg!(feature = "etcd-tls")),
        ("consul", cfg!(feature = "consul")),
        ("azblob", cfg!(feature = "azblob")),
        ("zookeeper", cfg!(feature = "zookeeper")),
        ("postgres", cfg!(feature = "postgres")),
        ("peer", cfg!(feature = "peer")),
        ("monitor", cfg!(feature = "monitor")),
        ("guardian", cfg!(feature = "guardian")),
        ("testing", cfg!(feature = "testing")),
    ]
    .into_iter()
    .filter_map(|(f, on)| on.then_some(f))
    .collect();
    build
        .args(["build", "-p", "regent-election", "--example", name])
        .args(["--no-default-features", "--features", &features.join(",")])
        .env("CARGO_TARGET_DIR", profile_dir.parent().unwrap())
        .current_dir(crate_dir);
    // Set by cargo for this test's run, not for a build: build scripts that
    // watch them would run again.
    for (var, _) in std::env::vars_os() {
        let v = var.to_string_lossy();
        if v == "OUT_DIR"
            || [
                "CARGO_MANIFEST_",
                "CARGO_PKG_",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .iter()
            .any(|p| v.starts_with(p))
        {
            build.env_remove(&var);
        }
    }
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        build.arg("--release");
    }
    eprintln!("building the example {name}: {build:?}");
    assert!(build.status().unwrap().success(), "building {name} failed");
    binary
}

/// The newest modification time of the `.rs` and `Cargo.toml` files below
/// `dir` (target directories skipped).
fn newest_source(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return None;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                newest = newest.max(newest_source(&path));
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            || path.file_name().is_some_and(|n| n == "Cargo.toml")
        {
            newest = newest.max(modified(&path));
        }
    }
    newest
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn path(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).to_str().unwrap().to_owned()
}

/// The token of a line `PREFIX TOKEN`.
fn token_of(line: &str, prefix: &str) -> Option<u64> {
    line.strip_prefix(prefix)?.parse().ok()
}

fn count_lines(path: &str) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

/// Polls `done` until it holds, within [`PATIENCE`].
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < until, "no sign of {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
