//! Fixtures for the end-to-end tests of the `regent` binary: a sandbox
//! directory per test, `regent` processes that are killed with everything
//! they started when the fixture drops (by PID and process group, never by
//! name), the leader task's start/stop log, and bounded waits that fail with
//! the evidence.
//!
//! The leader command of most tests is
//! `sh -c 'sleep 1000 & echo $! > DIR/bg.ID.TOKEN; exec regent __demo-task --log DIR/tasks.log --log-stop'`:
//! a background job whose death the tests check, and the hidden demo task,
//! which appends `start ID TOKEN MONO_NS PID` when it starts and
//! `stop ID TOKEN MONO_NS PID` when SIGTERM reaches it (CLOCK_MONOTONIC, the
//! clock [`mono_ns`] reads here).

#![allow(dead_code, unreachable_pub)] // Each test file uses a part.

use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use regent_testkit::engines::{Engine, Etcd, Sqlite};
use rustix::process::Signal;

/// The binary under test.
pub const REGENT: &str = env!("CARGO_BIN_EXE_regent");

/// The election every test uses (each test has its own store file).
pub const ELECTION: &str = "e";

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of the task log.
#[allow(unused_imports)]
pub use regent_proc::mono_ns;

/// Nanoseconds as seconds, for messages.
pub fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Polls `probe` every 10 ms until it yields a value or `within` passes;
/// then panics with `what` and the evidence `context` gives.
pub fn wait_for<T>(
    within: Duration,
    what: &str,
    mut probe: impl FnMut() -> Option<T>,
    context: impl FnOnce() -> String,
) -> T {
    let until = Instant::now() + within;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        if Instant::now() >= until {
            panic!(
                "timed out after {within:?} waiting for {what}\n{}",
                context()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ------------------------------------------------------------------ /proc

// Each test binary uses a part.
#[allow(unused_imports)]
pub use regent_proc::{
    alive, cmdline, descendants, group_members, kill_tree, signal, signal_group, stat, stopped,
};

/// Whether `pid` is a live `regent __demo-task` (not merely a process whose
/// arguments mention it, like the shim or `sh -c`).
pub fn is_task(pid: i32) -> bool {
    alive(pid)
        && regent_proc::argv(pid)
            .get(1)
            .is_some_and(|a| a == "__demo-task")
}

/// Whether `pid` is alive and its command line contains `needle` (guards
/// against a recycled pid).
pub fn alive_as(pid: i32, needle: &str) -> bool {
    alive(pid) && cmdline(pid).contains(needle)
}

/// Shell text that starts `exec` (after `setup`) as a background job which
/// writes its own pid, as /proc names it, to `file` (a shell word), and
/// waits until it has. `$!` would not do: the command may run in a PID
/// namespace, where the shell's pids are not the host's.
pub fn background_job(setup: &str, exec: &str, file: &str) -> String {
    format!(
        "( {setup} read -r p _ < /proc/self/stat; echo $p > {file}.tmp; mv {file}.tmp {file}; exec {exec} ) & \
         while [ ! -e {file} ]; do sleep 0.01; done"
    )
}

/// Shell text that writes the shell's own pid, as /proc names it, to
/// `file` (a shell word); see [`background_job`].
pub fn write_own_pid(file: &str) -> String {
    format!("read -r p _ < /proc/self/stat; echo $p > {file}")
}

/// `n` distinct ports free on 127.0.0.1 a moment ago, outside the
/// kernel's ephemeral range so that no outgoing connection takes one while
/// a member is down: for `regent peer` members.
pub fn free_ports(n: usize) -> Vec<u16> {
    regent_testkit::ports::free_ports(n).expect("free ports of 127.0.0.1")
}

// ------------------------------------------------------------------ task log

/// A line of the task log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// "start" or "stop".
    pub kind: String,
    pub id: String,
    pub token: u64,
    pub mono_ns: u64,
    pub pid: i32,
}

pub fn read_events(log: &Path) -> Vec<Event> {
    regent_cli::task_log::read(log)
        .into_iter()
        .filter_map(|e| {
            Some(Event {
                kind: e.kind,
                id: e.id,
                token: e.token,
                mono_ns: e.mono_ns,
                pid: e.pid?,
            })
        })
        .collect()
}

// ------------------------------------------------------------------ sandbox

/// A temporary directory with a store, a task log and the candidates
/// started in it. Dropping it kills every candidate's process tree, then
/// its engine (which stops by PID).
///
/// The tests every store runs take a `Sandbox` and are listed in
/// `regent_testkit::for_every_engine!(Sandbox::with_engine, [...])`: they
/// run as `sqlite::NAME`, `etcd::NAME`, … one per engine of the test kit's
/// one list.
///
/// Every `regent` a sandbox starts ([`Self::spawn`], [`Self::run_bounded`],
/// [`Self::status`], [`Self::command`]) gets the engine's
/// [`Engine::client_env`] (Azurite's connection string): start `regent`
/// on the sandbox's store only through them.
pub struct Sandbox {
    dir: tempfile::TempDir,
    regents: Vec<Regent>,
    // Dropped after the regents (fields drop after `Drop::drop`).
    engine: Box<dyn Engine>,
}

impl Sandbox {
    /// A sandbox whose store is a SQLite file of its own.
    pub fn new() -> Self {
        Self::with_engine(Box::new(
            Sqlite::start().unwrap_or_else(|e| panic!("cannot set up SQLite for this test: {e}")),
        ))
    }

    /// A sandbox whose store is `engine`, started by the caller (or by
    /// `for_every_engine!`).
    pub fn with_engine(engine: Box<dyn Engine>) -> Self {
        Self {
            dir: tempfile::Builder::new()
                .prefix("regent-e2e-")
                .tempdir()
                .expect("temporary directory"),
            regents: Vec::new(),
            engine,
        }
    }

    /// A sandbox whose store is a single-node etcd of its own. Fails,
    /// naming `scripts/install-engines`, when etcd is not installed.
    pub fn etcd() -> Self {
        let etcd = Etcd::start().unwrap_or_else(|e| panic!("cannot start etcd for this test: {e}"));
        Self::with_etcd(etcd)
    }

    /// A sandbox whose store is `etcd`, started by the caller (secured, for
    /// instance). [`Self::store`] names it as `etcd://`, or `etcds://` with
    /// TLS; the certificates and credentials are the caller's to pass.
    pub fn with_etcd(etcd: Etcd) -> Self {
        Self::with_engine(Box::new(etcd))
    }

    /// The sandbox's engine.
    pub fn engine(&self) -> &dyn Engine {
        &*self.engine
    }

    /// [`Self::engine`], to kill, pause or restart it.
    pub fn engine_mut(&mut self) -> &mut dyn Engine {
        &mut *self.engine
    }

    /// The sandbox's etcd.
    ///
    /// # Panics
    ///
    /// If its store is not etcd.
    pub fn etcd_engine(&self) -> &Etcd {
        self.engine
            .downcast_ref()
            .unwrap_or_else(|| panic!("a sandbox with etcd, not {}", self.engine.kind()))
    }

    /// [`Self::etcd_engine`], to kill or restart it.
    ///
    /// # Panics
    ///
    /// If its store is not etcd.
    pub fn etcd_engine_mut(&mut self) -> &mut Etcd {
        let kind = self.engine.kind();
        self.engine
            .downcast_mut()
            .unwrap_or_else(|| panic!("a sandbox with etcd, not {kind}"))
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The engine's store URL: `sqlite:/tmp/…/e.db`,
    /// `etcd://127.0.0.1:PORT`, …
    pub fn store(&self) -> String {
        self.engine.store_url()
    }

    /// What a `regent` on this store needs in its environment besides the
    /// URL ([`Engine::client_env`]), then `env`: `env` wins.
    pub fn client_env(&self, env: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut all = self.engine.client_env();
        all.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        all
    }

    /// A `Command` for `regent` with [`Self::client_env`] in its
    /// environment; add the arguments.
    pub fn command(&self) -> Command {
        let mut command = Command::new(REGENT);
        command.envs(self.engine.client_env());
        command
    }

    /// [`run_bounded`] with [`Self::client_env`].
    pub fn run_bounded(&self, args: &[&str], within: Duration) -> Output {
        self.run_bounded_env(args, &[], within)
    }

    /// [`run_bounded_env`] with [`Self::client_env`] before `env`.
    pub fn run_bounded_env(&self, args: &[&str], env: &[(&str, &str)], within: Duration) -> Output {
        let env = self.client_env(env);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run_bounded_env(args, &env, within)
    }

    /// [`run_owned`] with [`Self::client_env`] before `env`.
    pub fn run_owned(&self, args: &[String], env: &[(&str, &str)], within: Duration) -> Output {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run_bounded_env(&args, env, within)
    }

    pub fn log(&self) -> PathBuf {
        self.path("tasks.log")
    }

    pub fn events(&self) -> Vec<Event> {
        read_events(&self.log())
    }

    pub fn starts(&self) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.kind == "start")
            .collect()
    }

    /// The stop line of the term `(id, token)`, if written.
    pub fn stop_of(&self, id: &str, token: u64) -> Option<Event> {
        self.events()
            .into_iter()
            .find(|e| e.kind == "stop" && e.id == id && e.token == token)
    }

    /// The first start with a token above `token`.
    pub fn start_after(&self, token: u64) -> Option<Event> {
        self.starts().into_iter().find(|e| e.token > token)
    }

    /// The pid of the background job the term `(id, token)` started.
    pub fn bg_pid(&self, id: &str, token: u64) -> i32 {
        let f = self.path(&format!("bg.{id}.{token}"));
        std::fs::read_to_string(&f)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
            .trim()
            .parse()
            .expect("a pid")
    }

    /// Waits until the term's task process, its background job and its
    /// whole process group are gone.
    pub fn wait_term_gone(&self, term: &Event, within: Duration) {
        let bg = self.bg_pid(&term.id, term.token);
        wait_for(
            within,
            &format!(
                "{}'s task (pid {}), its background job (pid {bg}) and its process group to die",
                term.id, term.pid
            ),
            || {
                (!alive(term.pid) && !alive_as(bg, "sleep") && group_members(term.pid).is_empty())
                    .then_some(())
            },
            || self.report(),
        );
    }

    /// Freezes the whole instance of candidate `i`, whose term is `term`
    /// (regent, its shim, the namespace's init if any, the command's
    /// group), as a cgroup freeze or a paused container would.
    pub fn freeze_instance(&mut self, i: usize, term: &Event) -> Frozen {
        let regent = self.regent(i).pid;
        let shim = self
            .regent(i)
            .shim()
            .unwrap_or_else(|| panic!("no shim under {regent}\n{}", self.report()));
        let init = self.regent(i).init();
        signal(regent, Signal::STOP);
        signal(shim, Signal::STOP);
        if let Some(init) = init {
            signal(init, Signal::STOP);
        }
        signal_group(term.pid, Signal::STOP);
        Frozen {
            regent,
            shim,
            init,
            group: term.pid,
            at: mono_ns(),
        }
    }

    /// The leader command: a background job, then the demo task.
    pub fn task_cmd(&self) -> Vec<String> {
        let script = format!(
            "{job}; exec '{REGENT}' __demo-task --log '{log}' --log-stop",
            job = background_job(
                "",
                "sleep 1000",
                &format!(
                    "'{}'/bg.$REGENT_LEADER_ID.$REGENT_FENCING_TOKEN",
                    self.dir.path().display()
                )
            ),
            log = self.log().display(),
        );
        vec!["sh".into(), "-c".into(), script]
    }

    /// The timing the tests use on this sandbox's engine.
    pub fn timing(&self) -> Timing {
        Timing::for_engine(&*self.engine)
    }

    /// The ttl as a flag value: `2000ms`, or the store's floor.
    pub fn ttl(&self) -> String {
        self.timing().ttl_arg()
    }

    /// `run --store STORE --election e --ttl TTL EXTRA -- CMD` on this
    /// sandbox's store, TTL from [`Self::timing`].
    pub fn run_args(&self, extra: &[&str], cmd: &[&str]) -> Vec<String> {
        let ttl = self.ttl();
        let mut with_ttl = vec!["--ttl", ttl.as_str()];
        with_ttl.extend_from_slice(extra);
        run_args_on(&self.store(), &with_ttl, cmd)
    }

    /// Starts `regent run --id ID --ttl TTL [extra] -- task_cmd`.
    pub fn candidate(&mut self, id: &str, ttl: &str, extra: &[&str]) -> usize {
        let store = self.store();
        self.candidate_on(&store, id, ttl, extra)
    }

    /// [`Self::candidate`] with `env` added to regent's environment.
    pub fn candidate_env(
        &mut self,
        id: &str,
        ttl: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> usize {
        let mut flags = vec!["--id", id, "--ttl", ttl];
        flags.extend_from_slice(extra);
        let task = self.task_cmd();
        let task: Vec<&str> = task.iter().map(String::as_str).collect();
        let args = run_args_on(&self.store(), &flags, &task);
        self.spawn_env(id, Path::new(REGENT), &args, env)
    }

    /// [`Self::candidate`] with the store URL `store`.
    pub fn candidate_on(&mut self, store: &str, id: &str, ttl: &str, extra: &[&str]) -> usize {
        let mut flags = vec!["--id", id, "--ttl", ttl];
        flags.extend_from_slice(extra);
        let task = self.task_cmd();
        let task: Vec<&str> = task.iter().map(String::as_str).collect();
        let args = run_args_on(store, &flags, &task);
        self.spawn(id, &args)
    }

    /// Starts `regent ARGS` as the fixture `name` (its output goes to
    /// DIR/NAME.out and DIR/NAME.err). Returns its index for [`Self::regent`].
    pub fn spawn(&mut self, name: &str, args: &[String]) -> usize {
        self.spawn_from(name, Path::new(REGENT), args)
    }

    /// [`Self::spawn`] with another copy of the binary.
    pub fn spawn_from(&mut self, name: &str, program: &Path, args: &[String]) -> usize {
        self.spawn_env(name, program, args, &[])
    }

    /// [`Self::spawn_from`] with `env` added to regent's environment
    /// (after [`Self::client_env`]'s).
    pub fn spawn_env(
        &mut self,
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> usize {
        let env = self.client_env(env);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let r = Regent::spawn(name, program, self.dir.path(), args, &env);
        self.regents.push(r);
        self.regents.len() - 1
    }

    pub fn regent(&mut self, i: usize) -> &mut Regent {
        &mut self.regents[i]
    }

    /// The index of the (first) fixture whose id is `id`.
    pub fn index_of(&self, id: &str) -> usize {
        self.regents
            .iter()
            .position(|r| r.name == id)
            .unwrap_or_else(|| panic!("no candidate {id}"))
    }

    /// The fixture whose id is `id`.
    pub fn by_id(&mut self, id: &str) -> &mut Regent {
        self.regents
            .iter_mut()
            .find(|r| r.name == id)
            .unwrap_or_else(|| panic!("no candidate {id}"))
    }

    /// Waits for the first leader task to start.
    pub fn first_start(&self, within: Duration) -> Event {
        wait_for(
            within,
            "a leader task to start",
            || self.starts().into_iter().next(),
            || self.report(),
        )
    }

    /// Everything a failing test should show: the task log, each
    /// candidate's stderr and the end of the engine's log.
    pub fn report(&self) -> String {
        let mut s = format!(
            "--- task log (now {:.3}s)\n{}",
            secs(mono_ns()),
            std::fs::read_to_string(self.log()).unwrap_or_default()
        );
        for r in &self.regents {
            let _ = write!(s, "--- {} (pid {}) stderr\n{}", r.name, r.pid, r.stderr());
        }
        let _ = write!(
            s,
            "--- {} ({}) log tail\n{}",
            self.engine.kind(),
            self.engine.store_url(),
            self.engine.log_tail(20)
        );
        s
    }

    /// `regent status --json` on this sandbox's store.
    pub fn status(&self) -> serde_json::Value {
        self.status_env(&[])
    }

    /// [`Self::status`] with `env` added (after [`Self::client_env`]'s).
    pub fn status_env(&self, env: &[(&str, &str)]) -> serde_json::Value {
        let env = self.client_env(env);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        status_json(&self.store(), &env)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Regents drop first (kill their trees); then any task group from
        // the log that outlived its regent, if it is still a demo task.
        self.regents.clear();
        for e in self.events() {
            if is_task(e.pid) && stat(e.pid).is_some_and(|s| s.pgrp == e.pid) {
                signal_group(e.pid, Signal::KILL);
            }
        }
    }
}

/// An instance frozen whole by [`Sandbox::freeze_instance`].
#[derive(Debug, Clone, Copy)]
pub struct Frozen {
    pub regent: i32,
    pub shim: i32,
    pub init: Option<i32>,
    /// The command's process group.
    pub group: i32,
    /// When it was frozen ([`mono_ns`]).
    pub at: u64,
}

impl Frozen {
    /// Lets it go on: the command first, so that it is running to log the
    /// SIGTERM the resumed shim sends it (a stopped task would be
    /// SIGKILLed unlogged), regent last.
    pub fn thaw(&self) {
        signal_group(self.group, Signal::CONT);
        if let Some(init) = self.init {
            signal(init, Signal::CONT);
        }
        signal(self.shim, Signal::CONT);
        signal(self.regent, Signal::CONT);
    }
}

// ------------------------------------------------------------------ timing

/// The timing of a test that runs on every engine: a ttl of 2 s, or the
/// store's floor if that is longer (Consul: 10 s, Azure Blob: 15 s), and
/// what regent's core derives from it by default.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub ttl: Duration,
    /// The core's default renew interval: ttl/5.
    pub renew_every: Duration,
    /// The core's default renew deadline: 3·ttl/5.
    pub renew_deadline: Duration,
    /// How much later than the ttl the store may free a dead holder's
    /// lease ([`Engine::expiry_slack`]).
    pub expiry_slack: Duration,
    /// How late a follower's watch may see a change ([`Engine::watch_delay`]).
    pub watch_delay: Duration,
}

impl Timing {
    /// The shortest ttl the tests use.
    pub const BASE_TTL: Duration = Duration::from_secs(2);

    pub fn for_engine(engine: &dyn Engine) -> Self {
        let ttl = Self::BASE_TTL.max(engine.min_ttl());
        Self {
            ttl,
            renew_every: ttl / 5,
            renew_deadline: ttl * 3 / 5,
            expiry_slack: engine.expiry_slack().for_ttl(ttl),
            watch_delay: engine.watch_delay(),
        }
    }

    /// The ttl as a flag value: this timing's, but at least `floor` (a
    /// test whose `--grace` needs room).
    pub fn ttl_arg_at_least(&self, floor: Duration) -> String {
        format!("{}ms", self.ttl.max(floor).as_millis())
    }

    /// The latest a follower may take over after the leader released its
    /// lease: it sees the release at its watch's next poll (if the store
    /// polls), then acquires; 1 s for those requests on a loaded machine,
    /// or half the ttl where that is longer. Either way well before the
    /// lease could have expired: a hand-over within it was a release. (At
    /// Azure Blob's 15 s ttl the 2 s of poll and requests were once 2.76 s
    /// on a machine running the whole suite: Azurite's requests slow down
    /// under load; the half ttl still tells a release from an expiry.)
    pub fn release_failover(&self) -> Duration {
        (self.watch_delay + Duration::from_secs(1)).max(self.ttl / 2)
    }

    /// The ttl as a flag value, in milliseconds.
    pub fn ttl_arg(&self) -> String {
        format!("{}ms", self.ttl.as_millis())
    }

    /// The latest a follower may take over after the leader's crash: the
    /// lease frees at most `ttl + expiry slack` after the last renewal,
    /// which was at most a renew interval before the crash, plus 3 s for
    /// the follower to notice and acquire (a follower kept out by Consul's
    /// lock delay retries every renew interval) and for a loaded machine.
    pub fn crash_failover(&self) -> Duration {
        self.ttl + self.expiry_slack + self.renew_every + Duration::from_secs(3)
    }

    /// `d`, given for the base ttl of 2 s, scaled to this ttl: a wait for
    /// something that takes a few renewals.
    pub fn scaled(&self, d: Duration) -> Duration {
        d.mul_f64(self.ttl.as_secs_f64() / Self::BASE_TTL.as_secs_f64())
    }
}

// ------------------------------------------------------------------ regent

/// A `regent` process started in its own process group. Dropping it kills
/// its whole tree.
pub struct Regent {
    pub name: String,
    pub pid: i32,
    child: Child,
    err: PathBuf,
    status: Option<ExitStatus>,
}

impl Regent {
    fn spawn(
        name: &str,
        program: &Path,
        dir: &Path,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Self {
        let out = std::fs::File::create(dir.join(format!("{name}.out"))).expect("out file");
        let err_path = dir.join(format!("{name}.err"));
        let err = std::fs::File::create(&err_path).expect("err file");
        let child = Command::new(program)
            .args(args)
            .env("REGENT_LOG", "info")
            // Consul's restart proofs go to the sandbox, not the user's
            // runtime directory.
            .env("XDG_RUNTIME_DIR", dir)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .expect("spawn regent");
        Self {
            name: name.to_owned(),
            pid: i32::try_from(child.id()).unwrap(),
            child,
            err: err_path,
            status: None,
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    pub fn signal(&self, sig: Signal) {
        signal(self.pid, sig);
    }

    /// The shim this regent runs now, if any.
    pub fn shim(&self) -> Option<i32> {
        descendants(self.pid)
            .into_iter()
            .find(|&p| stat(p).is_some_and(|s| s.ppid == self.pid) && cmdline(p).contains("__shim"))
    }

    /// The init of the shim's PID namespace, if CMD runs in one.
    pub fn init(&self) -> Option<i32> {
        let shim = self.shim()?;
        descendants(shim)
            .into_iter()
            .find(|&p| stat(p).is_some_and(|s| s.ppid == shim) && cmdline(p).contains("--init"))
    }

    /// The exit status if the process has exited (reaping it).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("try_wait");
        }
        self.status
    }

    pub fn running(&mut self) -> bool {
        self.try_status().is_none()
    }

    /// Waits up to `within` for the process to exit.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let name = self.name.clone();
        let err = self.err.clone();
        wait_for(
            within,
            &format!("regent {name} to exit"),
            || self.try_status(),
            || {
                format!(
                    "--- {name} stderr\n{}",
                    std::fs::read_to_string(err).unwrap_or_default()
                )
            },
        )
    }
}

impl Drop for Regent {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            kill_tree(self.pid);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ------------------------------------------------------------------ one-shot runs

/// `run --store STORE --election e EXTRA -- CMD`.
/// The shim's test hook: its supervisor never gives a lease back, as when
/// the release by ticket fails, so that a crash costs the ttl.
pub const KEEP_LEASE: (&str, &str) = ("REGENT_SHIM_KEEP_LEASE", "1");

pub fn run_args_on(store: &str, extra: &[&str], cmd: &[&str]) -> Vec<String> {
    let mut args = vec!["run", "--store", store, "--election", ELECTION];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    args.into_iter().map(String::from).collect()
}

/// `regent status --store STORE --election e --json` with `env` added,
/// which must succeed; its JSON.
pub fn status_json(store: &str, env: &[(&str, &str)]) -> serde_json::Value {
    let args = ["status", "--store", store, "--election", ELECTION, "--json"];
    let out = run_bounded_env(&args, env, Duration::from_secs(15));
    assert_eq!(out.code, Some(0), "regent status failed: {}", out.stderr);
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("status printed {:?}: {e}", out.stdout))
}

/// Fails if regent panicked.
pub fn no_panic(out: &Output) {
    assert!(
        !out.stderr.contains("panicked"),
        "regent panicked:\n{}",
        out.stderr
    );
}

/// `regent status` and `regent run` on `store` with a start window of
/// 1 s: both retry, then exit 3 with a message containing `needles`, and
/// print nothing on stdout nor any terminal escape code.
pub fn assert_unavailable_at_start(store: &str, needles: &[&str]) {
    assert_unavailable_at_start_env(store, &[], needles);
}

/// [`assert_unavailable_at_start`] with `env` in regent's environment.
pub fn assert_unavailable_at_start_env(store: &str, env: &[(&str, &str)], needles: &[&str]) {
    let status = ["status", "--store", store, "--election", ELECTION, "--json"].map(String::from);
    let mut env = env.to_vec();
    env.push(("REGENT_START_RETRY", "1s"));
    for args in [
        status.to_vec(),
        run_args_on(store, &["--ttl", "2s"], &["true"]),
    ] {
        let out = run_owned(&args, &env, Duration::from_secs(15));
        no_panic(&out);
        assert_eq!(out.code, Some(3), "{args:?}: {}", out.stderr);
        for needle in needles {
            assert!(
                out.stderr.contains(needle),
                "{args:?}: no {needle:?} in\n{}",
                out.stderr
            );
        }
        assert!(
            out.stderr.contains("retrying"),
            "{args:?}: no retry before giving up:\n{}",
            out.stderr
        );
        // Several attempts in the window (four when they fail at once),
        // one warning per cause (it was one per attempt): an unreachable
        // address is a cause, and the tests name at most two.
        let warned = out.stderr.matches("store unavailable; retrying").count();
        assert!(
            (1..=2).contains(&warned),
            "{args:?}: {warned} warnings: {}",
            out.stderr
        );
        assert!(
            out.took >= Duration::from_secs(1) && out.took < Duration::from_secs(6),
            "{args:?}: gave up after {:?}, not after the 1 s window",
            out.took
        );
        assert!(
            !out.stderr.contains('\u{1b}'),
            "{args:?}: escape codes in a non-terminal stderr: {:?}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    }
}

/// [`run_bounded_env`] with arguments as owned strings.
pub fn run_owned(args: &[String], env: &[(&str, &str)], within: Duration) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_bounded_env(&args, env, within)
}

/// What a bounded run of `regent` produced.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

/// Runs `regent ARGS` to its end, or kills its tree after `within` and
/// panics.
pub fn run_bounded(args: &[&str], within: Duration) -> Output {
    run_bounded_env(args, &[], within)
}

pub fn run_bounded_env(args: &[&str], env: &[(&str, &str)], within: Duration) -> Output {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::process::ExitStatusExt;
    // Files, not pipes: a process that outlives regent (the very thing some
    // tests look for) would hold a pipe open and hang the reader.
    let mut out = tempfile::tempfile().expect("stdout file");
    let mut err = tempfile::tempfile().expect("stderr file");
    let started = Instant::now();
    let mut child = Command::new(REGENT)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("clone"))
        .stderr(err.try_clone().expect("clone"))
        .process_group(0)
        .spawn()
        .expect("spawn regent");
    let pid = i32::try_from(child.id()).unwrap();
    let read_back = |f: &mut std::fs::File| {
        let mut s = String::new();
        f.seek(SeekFrom::Start(0)).expect("seek");
        f.read_to_string(&mut s).expect("read output");
        s
    };
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if started.elapsed() > within {
            kill_tree(pid);
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "regent {args:?} did not finish within {within:?}; stderr:\n{}",
                read_back(&mut err)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = started.elapsed();
    Output {
        code: status.code(),
        signal: status.signal(),
        stdout: read_back(&mut out),
        stderr: read_back(&mut err),
        took,
    }
}

/// Asserts the strict growth of fencing tokens in the order the tasks
/// started.
pub fn assert_tokens_increase(starts: &[Event], report: &str) {
    for w in starts.windows(2) {
        assert!(
            w[1].token > w[0].token,
            "fencing tokens did not strictly increase: {} then {}\n{report}",
            w[0].token,
            w[1].token
        );
    }
}

// ------------------------------------------------------------------ http

/// `METHOD PATH` to the HTTP endpoint at `addr` (`--http`), over a plain
/// `TcpStream` with `Connection: close`: the status and the body. Errors
/// when nothing listens there, or no answer comes within 5 s.
pub fn http_request(method: &str, addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    use std::io::Write as _;
    use std::net::{TcpStream, ToSocketAddrs as _};
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let to = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| bad(format!("{addr}: no address")))?;
    let mut stream = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad(format!("no end of the head in {raw:?}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("no status in {head:?}")))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .replace(' ', "")
            .starts_with("transfer-encoding:chunked")
    });
    let body = if chunked {
        dechunk(body).ok_or_else(|| bad(format!("a bad chunked body {body:?}")))?
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

/// [`http_request`] with `GET`.
pub fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    http_request("GET", addr, path)
}

fn dechunk(mut body: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}
