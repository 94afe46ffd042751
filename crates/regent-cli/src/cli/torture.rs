//! `regent torture`'s flags, and its writer's (`__torture-writer`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use regent_torture::FaultKind;

use super::peer::AlgorithmArg;
use super::store::StoreFlags;
use super::values::parse_duration;

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
  preempt                replace a follower by one of a priority above every
                         other's (--priority, --settle of one ttl): the leader
                         hands its term over to it
  handover               ask the leader to hand over (`regent handover`), to a
                         follower drawn at random or to the next

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

/// `--faults`: kinds by name, comma-separated, at least one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FaultList(pub(crate) Vec<FaultKind>);

fn parse_faults(s: &str) -> Result<FaultList, String> {
    FaultKind::parse_list(s)
        .map(FaultList)
        .map_err(|e| e.to_string())
}

/// The hidden `__torture-writer` mode's arguments
/// (`regent_torture::writer::WriterArgs::to_args`).
#[derive(Debug, Args)]
pub(crate) struct WriterArgs {
    /// The fence's address.
    #[arg(long, value_name = "ADDR")]
    pub(crate) fence: SocketAddr,
    /// The campaign this writer belongs to: the nemesis finds its
    /// processes by it, and the end of the campaign finds leftovers.
    #[arg(long, value_name = "ID")]
    pub(crate) campaign: String,
    /// Be the background job (do not start another).
    #[arg(long)]
    pub(crate) background: bool,
}
