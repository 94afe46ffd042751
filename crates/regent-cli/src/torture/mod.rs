//! `regent torture`: a fault campaign. N `regent run` candidates on one
//! store each run a writer ([`writer`]) against a fenced resource
//! ([`fence`]) served by this process, while a seeded nemesis
//! ([`nemesis`]) injects one fault every 0.5–3 s: kills, terminations and
//! stops of the leader, of its whole process tree, of its shim or its
//! command, of followers, and of the store's own processes where torture
//! started them (`--store-command`) or was told their pids (`--store-pid`).
//! Killed candidates are replaced, so N stay alive. On a store reached over
//! the network (a clock of its own), `clock-fast` and `clock-slow` replace a
//! follower by one started under libfaketime (`LD_PRELOAD`, `FAKETIME="+0
//! xRATE"`): regent's clock and timers, through libc, run at that rate. The
//! shim reads CLOCK_MONOTONIC through the vDSO (rustix) and is not skewed,
//! unlike a real host's whole clock: it still keeps the step-down instant
//! regent hands it, converted at the moment it is sent. On one host (the
//! SQLite store) every process shares the kernel's clock, so the faults do
//! not apply there. Slow clocks stay within the 1% drift regent's timing
//! rules allow for: beyond it no lease can be kept safe by time, and the
//! fence would be all that is left.
//!
//! # A store of several processes
//!
//! A store may be a cluster reached through several endpoints, as Consul
//! is: servers holding the data, and an agent on each candidate's host
//! that the candidate talks to. `--store` given several times names the
//! endpoints: each new candidate takes the URL the fewest live candidates
//! use (the first of those), so N candidates on N agents keep one each.
//! `--store-command` and `--store-pid` given several times name the
//! processes: each `store-stop` or `store-kill` hits one of them, in a
//! seeded order that hits every one once before any twice (`store-kill`
//! passes over the processes torture did not start: it could not restart
//! them). The report's fault log names the process hit by its index: the
//! `--store-command`s in the order given, then the `--store-pid`s. torture
//! knows no store's roles (which server leads its cluster): it hits
//! processes, not roles. `store-kill` restarts a process on what it left
//! on disk, so the store must keep its data across a restart: a Consul dev
//! agent keeps none, its indices start again, and the checker would
//! rightly see the tokens go back. Nor does Azurite, Azure Storage's
//! emulator: it forgets every finite lease when it restarts (a follower
//! takes the blob at once while the old leader still counts on its lease,
//! two leaders that only the fence tells apart) and a SIGKILL loses the
//! writes of its last seconds; `store-stop` suits it (its leases expire on
//! the host's clock meanwhile, as Azure's would).
//!
//! # The ttl
//!
//! `--ttl` defaults to 2 s, or to the store's shortest ttl when that is
//! longer (Consul's sessions: 10 s; Azure Blob's leases: 15 s). A ttl the store refuses is a usage
//! error before any candidate starts. Every pause the nemesis makes
//! scales with the ttl (a stop lasts 1–3 ttl), and a leader fault waits up
//! to a failover (`2 × ttl` plus the store's expiry slack: on Consul, a
//! session ends between one and two ttls after its last renewal) for a
//! leader to hit; so at a 10 s ttl a campaign injects a fault every 10–20
//! s, not every 2 s.
//!
//! At the end every candidate is stopped (SIGTERM, then SIGKILL), the fence
//! listens two ttls more, and the [`checker`] judges the records: stale
//! writes the fence refused (expected only from a frozen tree), token
//! regressions, tokens shared by two ids, writes and writer processes that
//! outlived the campaign; and it measures the leaderless gap each kind of
//! fault caused (a fault the leader's term outlived causes none). A table
//! goes to stdout and a JSON report to `--report`.
//!
//! `--sweep` replaces the nemesis by a crash-point sweep (see
//! [`sweep`]): every process of a term killed at every point of its life.
//!
//! The seed is printed at the start and kept in the report. `--seed`
//! replays the same choices (kinds, pauses, targets among followers and
//! store processes), but not the same timing: which candidate leads when
//! a fault falls depends on the scheduler and the store.
//!
//! Exit codes: 0 no violation; 4 at least one violation; 2 usage errors
//! (a ttl the store refuses included); 1 runtime failure (no leader ever,
//! a fence that cannot listen, a report that cannot be written).

mod checker;
mod fence;
mod nemesis;
mod procfs;
mod proxy;
mod sweep;
pub(crate) mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use clap::{Args, ValueEnum as _};
use regent_core::{ElectionName, HolderId, LeaseStore};
use rustix::process::{Pid, Signal};
use serde::Serialize;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use self::checker::{After, Findings, Survivor, Violation, WriteRun};
use self::fence::Shared;
use self::nemesis::{Fault, FaultKind, FaultList, Setting, parse_faults};
use crate::cli::{AlgorithmArg, StoreArgs, StoreFlags, parse_duration};
use crate::clock::mono_ns;
use crate::error::CliError;
use crate::store;

/// How often exited candidates are looked for between faults.
const REAP_EVERY: Duration = Duration::from_millis(100);

/// Exit code when the campaign found a violation.
pub(crate) const EXIT_VIOLATION: u8 = 4;

/// The exit codes, for `regent torture --help`.
pub(crate) const AFTER_HELP: &str = "Faults (--faults, comma-separated; default: all that apply):
  kill-leader            SIGKILL the leading regent
  term-leader            SIGTERM the leading regent
  stop-leader            SIGSTOP the leading regent alone for 1-3 ttl, then SIGCONT
  stop-tree              SIGSTOP the leader's whole tree (regent, shims, command,
                         jobs) for 1.5-3 ttl, then SIGCONT
  kill-shim              SIGKILL the leader's shim
  stop-leader-kill-shim  SIGSTOP the leading regent, SIGKILL its shim 0.5s (at most
                         ttl/4) later, then after 2 ttl SIGCONT or SIGKILL the
                         regent (seeded)
  kill-cmd               SIGKILL the leader's command (not its background job)
  kill-follower          SIGKILL a candidate that does not lead
  store-stop             SIGSTOP a store process for 1-3 ttl (--store-command or
                         --store-pid)
  store-kill             SIGKILL a store process torture started, restart it after
                         1s (--store-command); the store must keep its data across
                         a restart (a Consul dev agent does not, nor do Azurite's
                         leases)
  store-cut              hold the leader's store traffic for 1-3 ttl (a proxy per
                         candidate; the --store URL's endpoints need explicit ports)
  store-delay            delay the leader's store traffic by 1/4-1 ttl per chunk for
                         1-3 ttl (proxies, as store-cut)
  clock-fast             replace a follower by one whose clock (regent's and its
                         command's) runs 2-10% fast (libfaketime; a store on the
                         network: on one host all share one clock)
  clock-slow             as clock-fast, 0.1-0.9% slow: within the 1% drift
                         regent's timing allows for
  partition              cut the leader, with up to (n-1)/2 - 1 other members,
                         off from the rest of a peer group for 1-3 ttl (--peer:
                         a proxy per pair of members)

A peer group (--peer ALGORITHM): N `regent peer` members, ids 1..N, with no
store; --ttl is their failure timeout (default 1s; heartbeats every ttl/5). A
killed member comes back with its id and address. The store faults do not
apply; partition does, and the clock faults stay within the 1% drift both ways
(a member's clock also times the promises it makes). Without --quorum a
partition gives the group two leaders by design (timing-only), and so may a
member joining again after any fault: writes the fence refuses during a fault
are counted as expected, not as violations. With --quorum they are violations.

A store of several processes: give --store-command (or --store-pid) once per
process; each store fault hits one, every one in turn in a seeded order. Give
--store once per endpoint (a Consul agent per candidate): each new candidate
takes the URL the fewest live candidates use. The report's fault log names the
store process hit by its index: the --store-commands in order, then the
--store-pids.

The crash-point sweep (--sweep): instead of random faults, a kill -9 of each
process of a term (regent, its shim, the namespace's init, CMD, the release
process of a hand-back) at every point of the term's life: the acquire
answered, the go taken, CMD started +0/5/20/50 ms, around a renewal, during a
graceful stop, before the release, during the hand-back by ticket. Each run
starts two fresh candidates. A table gives, per point and process, the
failover (kill to the next term's first write) p50/max against the best the
point allows (ms where a live process holds the lease: judged under half a
ttl; ttl where none does), and the crashed term's writes after the next
term's first (overlaps) and processes left running (survivors); any of these
is a violation. --sweep-runs sets the runs per cell (default 3).

Examples:
  regent torture --duration 5m
  regent torture --sweep --store etcd://127.0.0.1:2379 --ttl 2s
  regent torture --candidates 3 --ttl 1s --faults kill-leader,stop-tree --seed 42
  regent torture --peer bully --quorum --candidates 5 --duration 5m
  regent torture --store consul://127.0.0.1:8500 --store consul://127.0.0.1:8510 \\
      --candidates 2 --ttl 10s --faults store-stop,store-kill,kill-leader \\
      --store-command 'exec consul agent -server -bootstrap-expect=3 -node=s0 …' \\
      --store-command '…s1…' --store-command '…s2…' \\
      --store-command 'exec consul agent -node=a0 -retry-join=… …' \\
      --store-command '…a1…'

Exit codes:
  0  the campaign (or sweep) ended with no violation
  1  runtime failure (no candidate ever led, the fence could not listen, the
     report could not be written)
  2  usage or configuration error; the message names the flag and the rule
  4  at least one violation; the table and the report give the evidence";

#[derive(Debug, Args)]
pub(crate) struct TortureArgs {
    /// Store URL (default: a fresh SQLite file in a temporary directory).
    /// Repeat it for a store reached through several endpoints (a Consul
    /// agent per candidate): each new candidate takes the URL the fewest
    /// live candidates use. Every URL must reach the same store.
    #[arg(long = "store", value_name = "URL")]
    pub(crate) stores: Vec<String>,
    /// Election name.
    #[arg(long, value_name = "NAME", default_value = "torture")]
    pub(crate) election: String,
    #[command(flatten)]
    pub(crate) options: StoreFlags,
    /// How many candidates to keep alive (2-20).
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u8).range(2..=20))]
    pub(crate) candidates: u8,
    /// Lease ttl of the candidates [default: 2s, or the store's shortest
    /// ttl if longer (Consul: 10s, Azure Blob: 15s)].
    #[arg(long, value_parser = parse_duration)]
    pub(crate) ttl: Option<Duration>,
    /// How long to inject faults.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub(crate) duration: Duration,
    /// Fault kinds to inject, comma-separated (see below).
    #[arg(long, value_name = "LIST", value_parser = parse_faults)]
    pub(crate) faults: Option<FaultList>,
    /// Seed of the nemesis (default: random; printed, and kept in the report).
    #[arg(long, value_name = "S")]
    pub(crate) seed: Option<u64>,
    /// Where to write the JSON report.
    #[arg(long, value_name = "FILE", default_value = "torture-report.json")]
    pub(crate) report: PathBuf,
    /// Start the store with `sh -c CMD` (in its own process group), wait
    /// until it answers, and allow store-stop and store-kill. Needs --store.
    /// Repeat it for a store of several processes (a cluster's servers and
    /// agents), one each: they start in the order given.
    #[arg(long = "store-command", value_name = "CMD")]
    pub(crate) store_commands: Vec<String>,
    /// The pid of a store process started by someone else: allows
    /// store-stop. Repeat it for several processes.
    #[arg(long = "store-pid", value_name = "PID")]
    pub(crate) store_pids: Vec<i32>,
    /// Torture a peer group of this algorithm instead of a store's
    /// candidates: --candidates `regent peer` members, ids 1..N, on
    /// 127.0.0.1, each pair linked through a proxy (partition).
    #[arg(long, value_enum, value_name = "ALGORITHM",
          conflicts_with_all = ["stores", "store_commands", "store_pids"])]
    pub(crate) peer: Option<AlgorithmArg>,
    /// With --peer: the members run with --quorum.
    #[arg(long, requires = "peer")]
    pub(crate) quorum: bool,
    /// Instead of random faults, a kill -9 at every point of a term's life
    /// (see below), --sweep-runs times each, two fresh candidates a run.
    #[arg(long, conflicts_with_all = ["peer", "faults", "duration"])]
    pub(crate) sweep: bool,
    /// With --sweep: runs per crash point and process.
    #[arg(long, value_name = "N", default_value_t = 3, requires = "sweep",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) sweep_runs: u32,
}

/// `--ttl`'s default, unless the store's shortest ttl is longer.
const DEFAULT_TTL: Duration = Duration::from_secs(2);

/// The ttl of the campaign: `--ttl`, else [`DEFAULT_TTL`] raised to the
/// store's shortest ttl.
fn campaign_ttl(given: Option<Duration>, store_min: Duration) -> Duration {
    given.unwrap_or(DEFAULT_TTL.max(store_min))
}

/// `--ttl`'s default in a peer group: `regent peer`'s failure timeout.
const DEFAULT_PEER_TTL: Duration = Duration::from_secs(1);

/// A peer group's heartbeat interval: a fifth of the failure timeout, as
/// `regent peer`'s defaults.
fn peer_heartbeat(ttl: Duration) -> Duration {
    ttl / 5
}

/// A peer group under torture: its members' addresses and the links
/// between them.
struct PeerGroup {
    algorithm: AlgorithmArg,
    quorum: bool,
    secret_file: PathBuf,
    /// Where each member listens (ids 1..N); a restarted member listens
    /// there again.
    listen: BTreeMap<u64, SocketAddr>,
    /// `(from, to)`: the proxy `from` reaches `to` through. Torture holds
    /// them for the whole campaign, so they outlive members' restarts.
    links: BTreeMap<(u64, u64), proxy::Proxy>,
}

impl PeerGroup {
    /// Binds a listen address for each of `n` members and a proxy for
    /// each ordered pair; writes the group's secret.
    fn new(
        algorithm: AlgorithmArg,
        quorum: bool,
        n: u8,
        dir: &std::path::Path,
    ) -> Result<Self, CliError> {
        let io =
            |what: &str, e: std::io::Error| CliError::failure(format!("peer group: {what}: {e}"));
        // Outside the ephemeral range: a member killed by the nemesis
        // listens on its port again when restarted, and meanwhile any
        // outgoing connection on the machine could take a port of that range.
        let ports =
            regent_testkit::ports::free_ports(usize::from(n)).map_err(|e| io("no free port", e))?;
        let listen: BTreeMap<u64, SocketAddr> = (1..=u64::from(n))
            .zip(ports)
            .map(|(id, port)| (id, SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port))))
            .collect();
        let mut links = BTreeMap::new();
        for &from in listen.keys() {
            for (&to, &addr) in &listen {
                if from != to {
                    let p = proxy::Proxy::start(addr.to_string()).map_err(|e| io("proxy", e))?;
                    links.insert((from, to), p);
                }
            }
        }
        let secret_file = dir.join("peer-secret");
        let secret: String = (0..32).map(|_| fastrand::alphanumeric()).collect();
        std::fs::write(&secret_file, secret).map_err(|e| io("secret file", e))?;
        Ok(Self {
            algorithm,
            quorum,
            secret_file,
            listen,
            links,
        })
    }

    fn members(&self) -> impl Iterator<Item = u64> + '_ {
        self.listen.keys().copied()
    }

    /// `regent peer`'s arguments for member `id`: it listens on its own
    /// address and reaches every other member through their link.
    fn args(&self, id: u64, ttl: Duration) -> Vec<OsString> {
        let peers: Vec<String> = self
            .listen
            .iter()
            .map(|(&to, &addr)| match self.links.get(&(id, to)) {
                Some(link) => format!("{to}={}", link.addr),
                None => format!("{to}={addr}"),
            })
            .collect();
        let algorithm = self
            .algorithm
            .to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default();
        let mut args: Vec<OsString> = vec![
            "--algorithm".into(),
            algorithm.into(),
            "--id".into(),
            id.to_string().into(),
            "--listen".into(),
            self.listen[&id].to_string().into(),
            "--peers".into(),
            peers.join(",").into(),
            "--secret-file".into(),
            self.secret_file.clone().into(),
            "--failure-timeout".into(),
            format!("{}ms", ttl.as_millis()).into(),
            "--heartbeat-interval".into(),
            format!("{}ms", peer_heartbeat(ttl).as_millis()).into(),
        ];
        if self.quorum {
            args.push("--quorum".into());
        }
        args
    }

    /// Sets every link between `side` and the rest of the group to `mode`,
    /// both ways.
    fn cut(&self, side: &BTreeSet<u64>, mode: proxy::Mode) {
        for ((from, to), link) in &self.links {
            if side.contains(from) != side.contains(to) {
                link.set(mode);
            }
        }
    }

    /// What the group is, in words.
    fn describe(&self) -> String {
        format!(
            "a {} peer group{}",
            self.algorithm
                .to_possible_value()
                .map(|v| v.get_name().to_owned())
                .unwrap_or_default(),
            if self.quorum {
                " in quorum mode"
            } else {
                " (timing-only)"
            }
        )
    }
}

/// A candidate: one `regent run` in its own process group.
struct Candidate {
    id: String,
    pid: i32,
    child: Child,
    /// The index of its `--store` URL.
    url: usize,
    /// Its proxies to the store's endpoints (`store-cut`, `store-delay`).
    proxies: Vec<proxy::Proxy>,
}

/// libfaketime's thread-safe preload library, for the clock faults:
/// `$REGENT_LIBFAKETIME`, else where Debian's `faketime` package puts it
/// (`scripts/install-engines` installs it), else the usual prefixes.
fn libfaketime() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REGENT_LIBFAKETIME") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    let arch = std::env::consts::ARCH;
    [
        format!("/usr/lib/{arch}-linux-gnu/faketime/libfaketimeMT.so.1"),
        "/usr/lib/faketime/libfaketimeMT.so.1".to_owned(),
        "/usr/local/lib/faketime/libfaketimeMT.so.1".to_owned(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// The store's process, when torture may signal it.
enum StoreProcess {
    /// Started by torture: `sh -c CMD`, leading its own process group.
    Ours {
        command: String,
        /// Its standard output and error, every run's.
        log: PathBuf,
        child: Box<Child>,
        pid: i32,
    },
    /// Started by someone else.
    Theirs { pid: i32 },
}

impl StoreProcess {
    fn spawn(command: &str, log_path: PathBuf) -> Result<Self, CliError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| CliError::failure(format!("store log: {e}")))?;
        let err = log
            .try_clone()
            .map_err(|e| CliError::failure(format!("store log: {e}")))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| CliError::failure(format!("--store-command: cannot start sh: {e}")))?;
        let pid = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| CliError::failure("--store-command exited at once"))?;
        Ok(Self::Ours {
            command: command.to_owned(),
            log: log_path,
            child: Box::new(child),
            pid,
        })
    }

    fn pid(&self) -> i32 {
        match self {
            Self::Ours { pid, .. } | Self::Theirs { pid } => *pid,
        }
    }

    /// Signals our store's whole group (the shell and what it started), or
    /// their store's process.
    fn signal(&self, sig: Signal) {
        match self {
            Self::Ours { pid, .. } => {
                if let Some(p) = Pid::from_raw(*pid) {
                    let _ = rustix::process::kill_process_group(p, sig);
                }
            }
            Self::Theirs { pid } => {
                procfs::signal(*pid, sig);
            }
        }
    }

    /// If our store exited (not by the nemesis: it waits for the restart),
    /// the error that says so, with the store's last output.
    fn exited(&mut self) -> Option<CliError> {
        let Self::Ours {
            child,
            log,
            command,
            ..
        } = self
        else {
            return None;
        };
        let status = child.try_wait().ok()??;
        let log = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Some(CliError::failure(format!(
            "the store (--store-command {command:?}) exited by itself ({status}); its last \
             output:\n{}",
            tail.join("\n")
        )))
    }

    /// Whether torture started it (and can restart it).
    fn is_ours(&self) -> bool {
        matches!(self, Self::Ours { .. })
    }

    /// SIGKILLs our store, waits a second, starts it again; the new pid.
    async fn kill_and_restart(&mut self) -> Result<i32, CliError> {
        self.signal(Signal::KILL);
        if let Self::Ours {
            child,
            command,
            log,
            ..
        } = self
        {
            let _ = child.wait().await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let (command, log) = (command.clone(), log.clone());
            *self = Self::spawn(&command, log)?;
        }
        Ok(self.pid())
    }
}

/// The first of our store processes that exited by itself, as the error
/// of [`StoreProcess::exited`], once one has: never if none is ours.
async fn until_a_store_exits(stores: &mut [StoreProcess]) -> CliError {
    if !stores.iter().any(StoreProcess::is_ours) {
        return std::future::pending().await;
    }
    loop {
        if let Some(e) = stores.iter_mut().find_map(StoreProcess::exited) {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops our store processes, all at once (SIGTERM to each group, SIGKILL
/// to those still running 5 s later); theirs are left alone but thawed.
async fn stop_stores(stores: Vec<StoreProcess>) {
    for s in &stores {
        s.signal(Signal::CONT);
        if s.is_ours() {
            s.signal(Signal::TERM);
        }
    }
    let until = Instant::now() + Duration::from_secs(5);
    for s in stores {
        if let StoreProcess::Ours { mut child, pid, .. } = s
            && tokio::time::timeout_at(until, child.wait()).await.is_err()
            && let Some(p) = Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process_group(p, Signal::KILL);
            let _ = child.wait().await;
        }
    }
}

/// A campaign under way.
struct Campaign {
    exe: PathBuf,
    dir: PathBuf,
    /// The `--store` URLs (at least one).
    urls: Vec<String>,
    election: String,
    store_args: Vec<OsString>,
    ttl: Duration,
    /// How long a failover may take after a leader dies: its lease's ttl,
    /// the store's expiry slack (one more ttl on Consul), and the time a
    /// follower's acquire may take (one more ttl).
    failover: Duration,
    fence: Shared,
    fence_addr: std::net::SocketAddr,
    /// Unique to this campaign: its writers carry it in their arguments.
    campaign_id: String,
    /// Variables the next candidates started get (the sweep's failpoint).
    env: Vec<(String, String)>,
    candidates: Vec<Candidate>,
    /// The number in the last candidate id given.
    last_number: usize,
    /// The `--store-command` processes, then the `--store-pid` ones.
    store_processes: Vec<StoreProcess>,
    /// The store processes not yet hit in this round of store faults, in
    /// the order they will be.
    store_turns: Vec<usize>,
    /// Each store URL split around its endpoints, when candidates talk to
    /// the store through proxies.
    proxied: Option<Vec<(String, Vec<String>, String)>>,
    rng: fastrand::Rng,
    /// libfaketime, when the clock faults are on.
    faketime: Option<PathBuf>,
    /// The peer group, when torture runs one instead of a store's
    /// candidates.
    peer: Option<PeerGroup>,
    /// The write end of the candidates' lifeline (their stdin, with
    /// `--lifeline-stdin`): however torture ends, even by SIGKILL, the
    /// kernel closes it and every candidate shuts down gracefully.
    lifeline: OwnedFd,
    started: Instant,
    /// CLOCK_MONOTONIC ns at the start: the origin of printed times.
    started_ns: u64,
}

impl Campaign {
    fn say(&self, what: &str) {
        self.say_at(mono_ns(), what);
    }

    /// A line stamped with `at_ns`'s time since the start.
    fn say_at(&self, at_ns: u64, what: &str) {
        say!("[{:>7.2}s] {what}", secs_since(at_ns, self.started_ns));
    }

    /// Starts one more candidate, `torture-K` with the next K.
    fn spawn(&mut self) -> Result<(), CliError> {
        self.spawn_on(None).map(drop)
    }

    /// Starts one more candidate; with `clock`, its clock (regent's, and its
    /// command's) runs at that rate, through libfaketime. Returns its id.
    pub(super) fn spawn_on(&mut self, clock: Option<f64>) -> Result<String, CliError> {
        if let Some(group) = &self.peer {
            // The lowest member id no live candidate has.
            let id = group
                .members()
                .find(|m| {
                    let m = m.to_string();
                    !self
                        .candidates
                        .iter()
                        .any(|c| c.id == m && procfs::alive(c.pid))
                })
                .ok_or_else(|| CliError::failure("every member of the peer group is running"))?;
            let mut args: Vec<OsString> = vec!["peer".into()];
            args.extend(group.args(id, self.ttl));
            return self.start(id.to_string(), args, Vec::new(), 0, clock);
        }
        self.last_number += 1;
        let id = format!("torture-{}", self.last_number);
        // The URL the fewest live candidates use, the first of those.
        let index = (0..self.urls.len())
            .min_by_key(|&i| {
                self.candidates
                    .iter()
                    .filter(|c| c.url == i && procfs::alive(c.pid))
                    .count()
            })
            .unwrap_or(0);
        let mut proxies = Vec::new();
        let url = match self.proxied.as_ref().map(|p| &p[index]) {
            Some((before, endpoints, after)) => {
                let mut local = Vec::new();
                for e in endpoints {
                    let p = proxy::Proxy::start(e.clone())
                        .map_err(|e| CliError::failure(format!("store proxy: {e}")))?;
                    local.push(p.addr.to_string());
                    proxies.push(p);
                }
                format!("{before}{}{after}", local.join(","))
            }
            None => self.urls[index].clone(),
        };
        let mut args: Vec<OsString> = vec![
            "run".into(),
            "--store".into(),
            url.into(),
            "--election".into(),
            self.election.clone().into(),
            "--id".into(),
            id.clone().into(),
        ];
        args.extend(self.store_args.iter().cloned());
        args.extend(["--ttl".into(), format!("{}ms", self.ttl.as_millis()).into()]);
        self.start(id, args, proxies, index, clock)
    }

    /// Starts `regent ARGS --lifeline-stdin -- writer…` as the candidate
    /// `id`, in its own process group, its output to `id`'s log (appended:
    /// a peer member restarted keeps one log).
    fn start(
        &mut self,
        id: String,
        args: Vec<OsString>,
        proxies: Vec<proxy::Proxy>,
        url: usize,
        clock: Option<f64>,
    ) -> Result<String, CliError> {
        if self.peer.is_some() {
            self.last_number += 1;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{id}.log")))
            .map_err(|e| CliError::failure(format!("candidate log: {e}")))?;
        let err = log
            .try_clone()
            .map_err(|e| CliError::failure(format!("candidate log: {e}")))?;
        let mut command = Command::new(&self.exe);
        if let Some(rate) = clock {
            let lib = self.faketime.as_ref().ok_or_else(|| {
                CliError::failure("clock faults need libfaketime (scripts/install-engines)")
            })?;
            command
                .env("LD_PRELOAD", lib)
                .env("FAKETIME", format!("+0 x{rate}"));
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        let child = command
            .args(args)
            .arg("--lifeline-stdin")
            .arg("--")
            .arg(&self.exe)
            .arg(writer::MODE)
            .arg("--fence")
            .arg(self.fence_addr.to_string())
            .arg("--campaign")
            .arg(&self.campaign_id)
            .env(
                "REGENT_LOG",
                std::env::var_os("REGENT_LOG").unwrap_or_else(|| "info".into()),
            )
            .stdin(Stdio::from(self.lifeline_reader()?))
            .stdout(log)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| CliError::failure(format!("cannot start candidate {id}: {e}")))?;
        let pid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        self.candidates.push(Candidate {
            id: id.clone(),
            pid,
            child,
            url,
            proxies,
        });
        Ok(id)
    }

    /// Waits (up to 5 s) for the candidate `pid`, signalled to die, to
    /// exit, and forgets it.
    async fn wait_exited(&mut self, pid: i32) {
        if let Some(c) = self.candidates.iter_mut().find(|c| c.pid == pid) {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.child.wait()).await;
        }
        self.candidates
            .retain_mut(|c| c.pid != pid || c.child.try_wait().ok().flatten().is_none());
    }

    /// Reaps candidates that exited; returns them with their status.
    fn reap(&mut self) -> Vec<(String, std::process::ExitStatus)> {
        let mut gone = Vec::new();
        self.candidates.retain_mut(|c| match c.child.try_wait() {
            Ok(Some(status)) => {
                gone.push((c.id.clone(), status));
                false
            }
            _ => true,
        });
        gone
    }

    /// Replaces every candidate that exited.
    /// A read end of the candidates' lifeline, for one more candidate.
    fn lifeline_reader(&self) -> Result<OwnedFd, CliError> {
        let path = format!("/proc/self/fd/{}", self.lifeline.as_raw_fd());
        // The pipe's write end is ours; reopening it read-only through
        // /proc gives a read end of the same pipe (no unsafe code).
        std::fs::File::open(path)
            .map(OwnedFd::from)
            .map_err(|e| CliError::failure(format!("lifeline pipe: {e}")))
    }

    /// Replaces candidates that exited; fails when a store process torture
    /// started has exited without the nemesis (its log says why).
    fn replenish(&mut self, n: usize) -> Result<(), CliError> {
        if let Some(e) = self
            .store_processes
            .iter_mut()
            .find_map(StoreProcess::exited)
        {
            return Err(e);
        }
        for (id, status) in self.reap() {
            self.say(&format!("   {id} exited ({status}); replaced"));
        }
        while self.candidates.len() < n {
            self.spawn()?;
        }
        Ok(())
    }

    fn log_tail(&self, id: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(format!("{id}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    /// Waits for the first accepted write; a candidate that exits first is
    /// an error carrying its log (exit 2 if it exited 2: a bad flag).
    async fn first_leader(&mut self) -> Result<(), CliError> {
        let until = Instant::now() + self.ttl * 4 + Duration::from_secs(20);
        loop {
            if fence::lock(&self.fence).writes().iter().any(|w| w.accepted) {
                return Ok(());
            }
            if let Some((id, status)) = self.reap().into_iter().next() {
                let message = format!(
                    "candidate {id} exited before any led ({status}):\n{}",
                    self.log_tail(&id)
                );
                return Err(if status.code() == Some(2) {
                    CliError::usage(message)
                } else {
                    CliError::failure(message)
                });
            }
            if Instant::now() >= until {
                let first = self.candidates.first().map(|c| c.id.clone());
                return Err(CliError::failure(format!(
                    "no candidate wrote to the fence within {:?}; {}:\n{}",
                    until.duration_since(self.started),
                    first.as_deref().unwrap_or("-"),
                    first
                        .as_ref()
                        .map(|id| self.log_tail(id))
                        .unwrap_or_default()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGCONT and SIGTERM to every candidate; SIGKILL to those still
    /// running after `within`. Returns when all have exited.
    async fn stop_all(&mut self, within: Duration) {
        for c in &self.candidates {
            for p in std::iter::once(c.pid).chain(procfs::descendants(c.pid)) {
                procfs::signal(p, Signal::CONT);
            }
            procfs::signal(c.pid, Signal::TERM);
        }
        let until = Instant::now() + within;
        for c in &mut self.candidates {
            if tokio::time::timeout_at(until, c.child.wait())
                .await
                .is_err()
            {
                warn_user!("regent torture: {} did not stop in time; SIGKILL", c.id);
                let _ = c.child.start_kill();
                let _ = c.child.wait().await;
            }
        }
        self.candidates.clear();
    }

    /// This campaign's writer processes still alive.
    fn writers_alive(&self) -> Vec<Survivor> {
        procfs::pids()
            .into_iter()
            .filter(|&p| procfs::alive(p) && procfs::is_mode(p, writer::MODE))
            .filter_map(|pid| {
                let argv = procfs::argv(pid);
                argv.windows(2)
                    .any(|w| w[0] == "--campaign" && w[1] == self.campaign_id)
                    .then_some(Survivor { pid, argv })
            })
            .collect()
    }
}

/// The parameters, as the report keeps them.
#[derive(Debug, Serialize)]
struct Parameters {
    /// The `--store` URLs (the default SQLite file's if none was given).
    stores: Vec<String>,
    election: String,
    candidates: u8,
    ttl_ms: u128,
    duration_ms: u128,
    faults: Vec<FaultKind>,
    /// The store processes, in the order of the fault log's
    /// `store_process` indices: the commands, then the pids.
    store_commands: Vec<String>,
    store_pids: Vec<i32>,
    /// The peer algorithm, when a peer group ran instead of a store's
    /// candidates (`stores` is then empty; the ttl is the members' failure
    /// timeout).
    peer: Option<String>,
    /// Whether the peer group ran in quorum mode.
    quorum: bool,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    seed: u64,
    campaign: &'a str,
    parameters: Parameters,
    /// CLOCK_MONOTONIC ns when the campaign started; every `*_ns` is on
    /// this clock.
    started_ns: u64,
    ended_ns: u64,
    candidates_started: usize,
    /// Request lines the fence could not parse.
    garbage_lines: u64,
    ok: bool,
    #[serde(flatten)]
    findings: &'a Findings,
    fault_log: Vec<LoggedFault<'a>>,
}

/// A fault as the report logs it: what was done, and what followed.
#[derive(Debug, Serialize)]
struct LoggedFault<'a> {
    #[serde(flatten)]
    fault: &'a Fault,
    /// From the fault to the first accepted write of a newer term, if the
    /// fault found a leader and its term did not outlive the fault.
    gap_ms: Option<f64>,
    /// A later fault found the same term leading.
    survived: bool,
}

impl<'a> LoggedFault<'a> {
    fn new(fault: &'a Fault, after: Option<&After>) -> Self {
        Self {
            fault,
            gap_ms: match after {
                Some(After::NewTerm(ns)) => Some(*ns as f64 / 1e6),
                _ => None,
            },
            survived: after == Some(&After::Survived),
        }
    }
}

pub(crate) async fn torture(args: TortureArgs) -> Result<u8, CliError> {
    let has_process = !args.store_commands.is_empty() || !args.store_pids.is_empty();
    let has_command = !args.store_commands.is_empty();
    let faketime = libfaketime();
    // Every URL's endpoints, or none if one cannot be proxied.
    let proxiable: Option<Vec<_>> = if args.stores.is_empty() {
        None
    } else {
        args.stores.iter().map(|u| proxy::split_url(u)).collect()
    };
    let setting = Setting {
        store_process: has_process,
        store_command: has_command,
        proxiable: proxiable.is_some(),
        faketime: faketime.is_some(),
        peer: args.peer.is_some(),
    };
    let kinds: Vec<FaultKind> = match &args.faults {
        Some(FaultList(kinds)) => {
            if let Some(why) = kinds.iter().find_map(|k| k.refused(&setting)) {
                return Err(CliError::usage(why));
            }
            kinds.clone()
        }
        None => FaultKind::ALL
            .into_iter()
            .filter(|k| k.refused(&setting).is_none())
            .collect(),
    };
    if has_command && args.stores.is_empty() {
        return Err(CliError::usage(
            "--store-command needs --store: the URL of the store the command starts",
        ));
    }
    for &pid in &args.store_pids {
        if !procfs::alive(pid) {
            return Err(CliError::usage(format!(
                "--store-pid {pid}: no such process"
            )));
        }
    }
    if args.ttl.is_some_and(|t| t.is_zero()) {
        return Err(CliError::usage("--ttl must be above zero"));
    }
    let seed = args.seed.unwrap_or_else(|| fastrand::u64(..));
    let tmp = tempfile::Builder::new()
        .prefix("regent-torture-")
        .tempdir()
        .map_err(|e| CliError::failure(format!("temporary directory: {e}")))?;
    let (urls, election, ttl, failover, store_processes, peer) = match args.peer {
        Some(algorithm) => {
            let election = ElectionName::new(&args.election)
                .map_err(|e| CliError::usage(format!("--election: {e}")))?;
            let ttl = peer_ttl(args.ttl, args.candidates)?;
            let group = PeerGroup::new(algorithm, args.quorum, args.candidates, tmp.path())?;
            // A failure timeout, then an election: a round of messages,
            // with the algorithm's own timeouts (at most another ttl).
            (Vec::new(), election, ttl, ttl * 3, Vec::new(), Some(group))
        }
        None => {
            let s = prepare_stores(&args, tmp.path()).await?;
            (
                s.urls,
                s.election,
                s.ttl,
                s.ttl * 2 + s.expiry_slack,
                s.processes,
                None,
            )
        }
    };
    let server = fence::Server::start()
        .await
        .map_err(|e| CliError::failure(format!("the fence cannot listen: {e}")))?;
    let mut campaign = Campaign {
        exe: crate::run::own_exe()?,
        dir: tmp.path().to_owned(),
        urls,
        election: election.to_string(),
        store_args: args.options.to_args(),
        ttl,
        failover,
        fence: server.fence.clone(),
        fence_addr: server.addr,
        campaign_id: format!("{}-{}", std::process::id(), server.addr.port()),
        env: Vec::new(),
        candidates: Vec::new(),
        last_number: 0,
        store_processes,
        store_turns: Vec::new(),
        proxied: proxiable.filter(|_| kinds.iter().any(|k| k.needs_proxies())),
        rng: fastrand::Rng::with_seed(seed),
        lifeline: lifeline_pipe()?,
        faketime: faketime.clone(),
        peer,
        started: Instant::now(),
        started_ns: mono_ns(),
    };
    if args.sweep {
        say!(
            "fence on {}; candidate logs in {}",
            server.addr,
            tmp.path().display()
        );
        return run_sweep(campaign, server, &args, tmp).await;
    }
    let started_ns = campaign.started_ns;
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    say!(
        "regent torture: seed {seed}; {} {} {}, election '{}', ttl {:?}, faults for {:?}: {}",
        args.candidates,
        if campaign.peer.is_some() {
            "members of"
        } else {
            "candidates on"
        },
        campaign
            .peer
            .as_ref()
            .map_or_else(|| campaign.urls.join(" "), PeerGroup::describe),
        campaign.election,
        campaign.ttl,
        args.duration,
        names.join(",")
    );
    say!(
        "fence on {}; candidate logs in {}",
        server.addr,
        tmp.path().display()
    );
    let n = usize::from(args.candidates);
    let mut faults = Vec::new();
    let run = async {
        campaign.replenish(n)?;
        campaign.first_leader().await?;
        campaign.say("first leader writes; the nemesis starts");
        nemesis_loop(&mut campaign, &kinds, n, args.duration, &mut faults).await
    };
    // SIGINT or SIGTERM end the faults early; the teardown, the checker and
    // the report still run.
    let outcome = tokio::select! {
        r = run => r,
        () = interrupted()? => {
            say!("regent torture: interrupted; stopping the campaign");
            Ok(())
        }
    };

    // Teardown: candidates, then a quiet time with the fence listening.
    let stop_within = campaign.ttl * 3 + Duration::from_secs(5);
    campaign.stop_all(stop_within).await;
    let all_exited_ns = mono_ns();
    tokio::time::sleep((campaign.ttl * 2).max(Duration::from_secs(1))).await;
    let survivors = campaign.writers_alive();
    for s in &survivors {
        procfs::signal(s.pid, Signal::KILL);
    }
    stop_stores(std::mem::take(&mut campaign.store_processes)).await;
    server.stop().await;
    outcome?;

    let (writes, garbage) = {
        let f = fence::lock(&campaign.fence);
        (f.writes().to_vec(), f.garbage())
    };
    let findings = checker::check(&checker::Input {
        writes: &writes,
        faults: &faults,
        slack: campaign.ttl * 2 + Duration::from_secs(1),
        all_exited_ns: Some(all_exited_ns),
        survivors: &survivors,
    });
    print_table(
        &findings,
        garbage,
        started_ns,
        faults.iter().any(|f| f.splits),
    );
    let ok = findings.violations.is_empty();
    let report = Report {
        seed,
        campaign: &campaign.campaign_id,
        parameters: Parameters {
            stores: campaign.urls.clone(),
            election: campaign.election.clone(),
            candidates: args.candidates,
            ttl_ms: campaign.ttl.as_millis(),
            duration_ms: args.duration.as_millis(),
            faults: kinds,
            store_commands: args.store_commands.clone(),
            store_pids: args.store_pids.clone(),
            peer: args
                .peer
                .and_then(|a| a.to_possible_value())
                .map(|v| v.get_name().to_owned()),
            quorum: args.quorum,
        },
        started_ns,
        ended_ns: mono_ns(),
        candidates_started: campaign.last_number,
        garbage_lines: garbage,
        ok,
        findings: &findings,
        fault_log: faults
            .iter()
            .enumerate()
            .map(|(i, f)| LoggedFault::new(f, findings.after.get(i)))
            .collect(),
    };
    let written = serde_json::to_vec_pretty(&report)
        .map_err(|e| e.to_string())
        .and_then(|json| std::fs::write(&args.report, json).map_err(|e| e.to_string()));
    match &written {
        Ok(()) => say!("report: {} (seed {seed})", args.report.display()),
        Err(e) => warn_user!(
            "regent torture: cannot write {}: {e}",
            args.report.display()
        ),
    }
    if !ok {
        // The candidates' logs are evidence: keep them.
        let kept = tmp.keep();
        say!("candidate logs kept in {}", kept.display());
        return Ok(EXIT_VIOLATION);
    }
    match written {
        Ok(()) => Ok(0),
        Err(e) => Err(CliError::failure(format!(
            "cannot write the report {}: {e}",
            args.report.display()
        ))),
    }
}

/// `--sweep`: the crash-point sweep instead of the nemesis; its table on
/// stdout and its cells in the report.
async fn run_sweep(
    mut campaign: Campaign,
    server: fence::Server,
    args: &TortureArgs,
    tmp: tempfile::TempDir,
) -> Result<u8, CliError> {
    say!(
        "regent torture --sweep: two candidates a run on {}, election '{}', ttl {:?}, {} runs per crash point and process",
        campaign.urls.join(" "),
        campaign.election,
        campaign.ttl,
        args.sweep_runs,
    );
    let outcome = tokio::select! {
        r = sweep::sweep(&mut campaign, args.sweep_runs) => r,
        () = interrupted()? => Err(CliError::failure("interrupted")),
    };
    campaign
        .stop_all(campaign.ttl * 3 + Duration::from_secs(5))
        .await;
    stop_stores(std::mem::take(&mut campaign.store_processes)).await;
    server.stop().await;
    let cells = match outcome {
        Ok(cells) => cells,
        Err(e) => {
            let kept = tmp.keep();
            say!("candidate logs kept in {}", kept.display());
            return Err(e);
        }
    };
    sweep::print_table(&cells);
    let ok = cells.iter().all(sweep::Cell::ok);
    #[derive(Serialize)]
    struct SweepReport<'a> {
        stores: &'a [String],
        election: &'a str,
        ttl_ms: u128,
        runs: u32,
        ok: bool,
        cells: &'a [sweep::Cell],
    }
    let json = serde_json::to_vec_pretty(&SweepReport {
        stores: &campaign.urls,
        election: &campaign.election,
        ttl_ms: campaign.ttl.as_millis(),
        runs: args.sweep_runs,
        ok,
        cells: &cells,
    })
    .map_err(|e| CliError::failure(format!("the report: {e}")))?;
    std::fs::write(&args.report, json).map_err(|e| {
        CliError::failure(format!(
            "cannot write the report {}: {e}",
            args.report.display()
        ))
    })?;
    say!("report: {}", args.report.display());
    if ok {
        Ok(0)
    } else {
        let kept = tmp.keep();
        say!("candidate logs kept in {}", kept.display());
        Ok(EXIT_VIOLATION)
    }
}

/// The store a campaign runs on, opened and checked.
struct Stores {
    urls: Vec<String>,
    election: ElectionName,
    ttl: Duration,
    expiry_slack: Duration,
    /// Those it may signal: `--store-command`s (started), then `--store-pid`s.
    processes: Vec<StoreProcess>,
}

/// Starts the `--store-command`s, and opens the store at every URL (the
/// default SQLite file in `dir` if none): every one answers, the flags
/// are right and it takes the campaign's ttl.
async fn prepare_stores(args: &TortureArgs, dir: &std::path::Path) -> Result<Stores, CliError> {
    let urls = if args.stores.is_empty() {
        vec![format!("sqlite:{}", dir.join("torture.db").display())]
    } else {
        args.stores.clone()
    };
    let store_args = |url: &String| StoreArgs {
        store: Some(url.clone()),
        election: args.election.clone(),
        options: args.options.clone(),
    };
    let election = store::election(&store_args(&urls[0]))?;
    let targets = urls
        .iter()
        .map(|url| store::target(&store_args(url)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut store_processes = Vec::new();
    for (i, command) in args.store_commands.iter().enumerate() {
        match StoreProcess::spawn(command, dir.join(format!("store-{i}.log"))) {
            Ok(p) => store_processes.push(p),
            Err(e) => {
                stop_stores(store_processes).await;
                return Err(e);
            }
        }
    }
    store_processes.extend(
        args.store_pids
            .iter()
            .map(|&pid| StoreProcess::Theirs { pid }),
    );
    // Every URL answers (the open retries while the store starts), the
    // flags are right and the store takes the ttl; a store command that
    // exits meanwhile (a taken port) is the error.
    let opened = tokio::select! {
        r = check_stores(&targets, &election, args.ttl) => r,
        e = until_a_store_exits(&mut store_processes) => Err(e),
    };
    let (ttl, expiry_slack) = match opened {
        Ok(timing) => timing,
        Err(e) => {
            stop_stores(store_processes).await;
            return Err(e);
        }
    };
    Ok(Stores {
        urls,
        election,
        ttl,
        expiry_slack,
        processes: store_processes,
    })
}

/// The failure timeout of a peer campaign's members (`--ttl`, else
/// [`DEFAULT_PEER_TTL`]), checked as `regent peer` will check it.
fn peer_ttl(given: Option<Duration>, members: u8) -> Result<Duration, CliError> {
    let ttl = given.unwrap_or(DEFAULT_PEER_TTL);
    let ids = (1..=u64::from(members)).map(regent::peer::NodeId);
    regent::peer::Config::builder(regent::peer::NodeId(1), ids)
        .heartbeat_interval(peer_heartbeat(ttl))
        .failure_timeout(ttl)
        .build()
        .map_err(|e| {
            CliError::usage(format!("--ttl {ttl:?} (the members' failure timeout): {e}"))
        })?;
    Ok(ttl)
}

/// Opens the store at every URL and checks that it takes the campaign's
/// ttl (`--ttl`, or the default for this store) as `regent run` will;
/// returns that ttl and the store's expiry slack for it.
async fn check_stores(
    targets: &[store::Target],
    election: &ElectionName,
    given: Option<Duration>,
) -> Result<(Duration, Duration), CliError> {
    let mut timing = None;
    let mut name = None;
    for target in targets {
        let store = store::open(target, election, None).await?;
        let info = store.info();
        if let Some(first) = name
            && first != info.name
        {
            return Err(CliError::usage(format!(
                "--store: every URL must reach the same store; {target} is a {} store, not {first}",
                info.name
            )));
        }
        name = Some(info.name);
        let ttl = campaign_ttl(given, info.min_ttl);
        let flag = match given {
            Some(t) => format!("--ttl {t:?}"),
            None => format!("--ttl (default {ttl:?})"),
        };
        let holder = HolderId::new("torture-check")
            .map_err(|e| CliError::failure(format!("holder id: {e}")))?;
        regent_core::Candidate::builder(store, election.clone(), holder)
            .ttl(ttl)
            .build()
            .map_err(|e| CliError::usage(format!("{flag}: {e}")))?;
        timing = Some((ttl, info.expiry_slack_for(ttl)));
    }
    timing.ok_or_else(|| CliError::failure("no store to open"))
}

async fn nemesis_loop(
    campaign: &mut Campaign,
    kinds: &[FaultKind],
    n: usize,
    duration: Duration,
    faults: &mut Vec<Fault>,
) -> Result<(), CliError> {
    let end = Instant::now() + duration;
    loop {
        let wait = Duration::from_millis(campaign.rng.u64(500..=3000));
        let next = (Instant::now() + wait).min(end);
        // Replace exited candidates while waiting, not only at faults.
        while Instant::now() < next {
            tokio::time::sleep_until(next.min(Instant::now() + REAP_EVERY)).await;
            campaign.replenish(n)?;
        }
        if Instant::now() >= end {
            return Ok(());
        }
        let kind = kinds[campaign.rng.usize(..kinds.len())];
        match campaign.inject(kind).await {
            Some(f) => {
                campaign.say_at(
                    f.at_ns,
                    &format!(
                        "{kind}: {} {}",
                        match (&f.target, f.leader_token) {
                            (Some(id), Some(t)) => format!("{id} (token {t})"),
                            (Some(id), None) => id.clone(),
                            (None, Some(t)) => format!("store (leader token {t})"),
                            (None, None) => "store".into(),
                        },
                        f.detail
                    ),
                );
                faults.push(f);
            }
            None => campaign.say(&format!("{kind}: nothing to hit now; skipped")),
        }
        campaign.replenish(n)?;
    }
}

/// A future that completes on SIGINT or SIGTERM.
fn interrupted() -> Result<impl Future<Output = ()>, CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let catch =
        |kind| signal(kind).map_err(|e| CliError::failure(format!("cannot catch signals: {e}")));
    let mut int = catch(SignalKind::interrupt())?;
    let mut term = catch(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    })
}

/// The candidates' lifeline: a pipe whose write end only torture holds
/// (close-on-exec, so no child inherits it).
fn lifeline_pipe() -> Result<OwnedFd, CliError> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| CliError::failure(format!("lifeline pipe: {e}")))?;
    // Readers are reopened from the write end (see `lifeline_reader`).
    drop(read);
    Ok(write)
}

fn secs_since(ns: u64, origin: u64) -> f64 {
    ns.saturating_sub(origin) as f64 / 1e9
}

fn print_table(f: &Findings, garbage: u64, origin: u64, splits: bool) {
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.2}s", v / 1000.0));
    say!();
    say!(
        "{:<22} {:>6} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "fault",
        "count",
        "hit leader",
        "new term",
        "survived",
        "median",
        "p90",
        "max"
    );
    for (kind, count) in &f.faults {
        let g = f.gaps.get(kind).cloned().unwrap_or_default();
        say!(
            "{:<22} {:>6} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}",
            kind,
            count,
            g.faults,
            g.new_terms,
            g.survived,
            ms(g.median_ms),
            ms(g.p90_ms),
            ms(g.max_ms)
        );
    }
    say!(
        "(gap: from the fault to the first accepted write of a newer term; survived: a later \
         fault found the same term leading)"
    );
    say!(
        "writes: {} accepted, {} refused ({} expected, from frozen trees{}); {} terms; {} garbage lines",
        f.accepted_writes,
        f.refused_writes,
        f.expected_refused_writes,
        if splits {
            " or either side of a timing-only group split"
        } else {
            ""
        },
        f.terms,
        garbage
    );
    if f.violations.is_empty() {
        say!("violations: none");
        return;
    }
    say!("violations: {}", f.violations.len());
    let t = |ns: u64| secs_since(ns, origin);
    for v in &f.violations {
        let line = match v {
            Violation::StaleWrite {
                writes:
                    WriteRun {
                        id,
                        token,
                        pid,
                        role,
                        count,
                        first_ns,
                        last_ns,
                    },
                newer_id,
                newer_token,
                ..
            } => format!(
                "stale-write: {id} token {token} pid {pid} ({role}) wrote {count}x from {:.2}s to \
                 {:.2}s after {newer_id} began token {newer_token}: an unfenced resource would have \
                 taken them",
                t(*first_ns),
                t(*last_ns)
            ),
            Violation::TokenRegression {
                earlier_id,
                earlier_token,
                earlier_ns,
                later_id,
                later_token,
                later_ns,
            } => format!(
                "token-regression: {later_id} began token {later_token} at {:.2}s, after \
                 {earlier_id} began token {earlier_token} at {:.2}s",
                t(*later_ns),
                t(*earlier_ns)
            ),
            Violation::SharedToken { token, ids } => {
                format!("shared-token: token {token} written by {}", ids.join(", "))
            }
            Violation::WriteAfterExit {
                writes:
                    WriteRun {
                        id,
                        token,
                        pid,
                        count,
                        first_ns,
                        ..
                    },
                ..
            } => format!(
                "write-after-exit: {id} token {token} pid {pid} wrote {count}x from {:.2}s, after \
                 every candidate had exited",
                t(*first_ns)
            ),
            Violation::Survivor { pid, id, token, .. } => format!(
                "survivor: writer pid {pid} ({} token {}) alive after every candidate exited; killed",
                id.as_deref().unwrap_or("?"),
                token.map_or("?".into(), |t| t.to_string())
            ),
        };
        say!("  {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Consul refuses session TTLs under 10 s, Azure Blob leases under
    /// 15 s: the default follows the store's floor; a ttl given is kept
    /// (and checked against the store).
    #[test]
    fn the_default_ttl_is_raised_to_the_stores_shortest() {
        let s = Duration::from_secs;
        assert_eq!(campaign_ttl(None, Duration::from_millis(1)), s(2));
        assert_eq!(campaign_ttl(None, s(10)), s(10));
        assert_eq!(campaign_ttl(None, s(15)), s(15));
        assert_eq!(campaign_ttl(Some(s(1)), s(10)), s(1));
        assert_eq!(campaign_ttl(Some(s(30)), s(10)), s(30));
    }
}
