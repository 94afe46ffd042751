//! The harness's command line: its flags, resolved into the plan
//! (`plan.rs`) and the scale case's options, and the hidden subcommand a
//! scale measurement's own process runs.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::load::scale::{SCALE, SCALE_SHORT, ScaleOptions};
use crate::load::scale_child::ChildArgs;

/// The help's tail: the cases, the tools, the outputs.
const AFTER_HELP: &str = "\
Stores and their tools (regent run is on every row):
  sqlite          graceful, crash: regent only (a temporary file)
  etcd            graceful: etcdctl elect NAME PROPOSAL (SIGINT, its resign)
                  crash: etcdctl lock --ttl 2 NAME CMD
  consul          graceful: consul lock PREFIX CMD, and with `exec CMD`
                  crash: consul lock (about 40 s a run: left out of --short)
  zookeeper       graceful, crash: Curator LeaderLatch (session 2 s)
  postgres        graceful, crash: regent only (one server; PostgreSQL has
                  no election tool of its own)
  pgbouncer       only when named; graceful, crash: regent only, through
                  PgBouncer in transaction mode, its watches listening
                  straight to the server (--postgres-listen-url)
  redis           graceful, crash: regent only (one server, no persistence;
                  Redis has no election tool of its own)
  redis-sentinel  only when named; graceful, crash: regent only, through
                  three Sentinels to a primary with a replica
                  (redis+sentinel://S1,S2,S3/mymaster)
  consul-cluster  only when named: three servers, a client agent per
                  candidate; regent at --ttl 15s and 10s beside consul lock
                  (its crash left out of --short)
  memory          only when named, load cases only: regent's in-memory
                  store in the measuring process (the floor)
  azblob          only when named, observe and observe-crash only: Azure
                  Blob leases on Azurite (ttl 15 s, its shortest)
Hand-over cases (issue 30), only when named in --cases; regent run alone on
every store (no engine's tool has priorities or takes a request):
  preferred  the leader runs with --priority N; each run starts a candidate
             with --priority N+1 --settle 1s, which the leader hands its
             term to: timed from the old command's SIGTERM to the new
             command's start, and from the new candidate's start
  requested  a leader and a follower; regent handover --to FOLLOWER --json:
             timed from the old command's SIGTERM to the new command's
             start, and from the request's start to its answer
Load cases, only when named in --cases (regent alone):
  herd       1000 candidates of one election (--short: 50), 5 failovers:
             the hand-over and the store operations per failover
  scale      1, 100, 1000, 10000 elections led by one process (--short:
             1, 100; or --elections), each size in a process of its own:
             store operations, CPU, memory, threads, bytes written per ttl
  observe    --runs hand-overs (a resign) between two candidates, with an
             Observer beside them, each on a store connection of its own:
             when the observer names the next leader, against when that
             leader's campaign returns (ttl 2 s; Consul 10 s, azblob 15 s)
  observe-crash  the same when the leader stops renewing and releasing
The engines come from scripts/install-engines and run on free ports of
127.0.0.1 (etcd: one member; Consul: a dev agent; ZooKeeper: standalone;
PostgreSQL: one server, as the user postgres when run as root; Redis: one
server, or a primary, a replica and three Sentinels; Azurite: its Blob
service).
The candidates run the `regent` binary beside this one (--regent PATH, or
REGENT_BIN, to name another): scripts/bench builds both in release mode.

Examples:
  scripts/bench --short --stores sqlite,etcd --out /tmp/bench.md
  scripts/bench --stores sqlite,etcd,zookeeper,consul --cases graceful,etcd:crash \\
      --out docs/benchmarks.md --json /tmp/samples.json
  scripts/bench --stores consul-cluster --runs 5
  scripts/bench --stores sqlite,postgres,etcd,zookeeper \\
      --cases graceful,preferred,requested --runs 30 --out /tmp/handover.md
  scripts/bench --stores postgres,pgbouncer --out /tmp/postgres.md
  scripts/bench --stores redis,redis-sentinel --out /tmp/redis.md
  scripts/bench --stores sqlite,etcd,zookeeper --cases herd,scale --out docs/load.md
  scripts/bench --stores sqlite,etcd,consul,zookeeper,azblob,postgres,memory \\
      --cases observe --runs 30 --out /tmp/observer.md
  scripts/bench --stores sqlite,memory --cases scale --elections 1000,10000 \\
      --window 30s --followers --spread

Exit codes:
  0  every run measured; the report written
  1  a run failed (a wait timed out, a tool exited early): the message
     shows the evidence
  2  usage error, an engine asked for is not installed, or no regent binary
  130  interrupted (SIGINT or SIGTERM); everything started is stopped";

/// `regent-bench`: how long a leader hand-over takes with `regent run`,
/// beside each engine's own tool, and what a crowd costs a store.
///
/// Starts the stores installed here on free ports of 127.0.0.1 (SQLite: a
/// temporary file), keeps a leader and a follower of each tool on each,
/// and per case stops the leader again and again: graceful (its own
/// graceful signal) and crash (kill -9, ttl 2 s); when named, regent's
/// hand-overs to a candidate of higher priority (preferred) and on
/// request (requested). Prints p50, p99 and max
/// per store, tool and case; --out writes a markdown report with an SVG
/// plot per case, --json every sample. A progress bar shows on stderr when
/// that is a terminal.
#[derive(Debug, Parser)]
#[command(
    name = "regent-bench",
    version,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) bench: BenchArgs,
    #[command(subcommand)]
    pub(crate) hidden: Option<Hidden>,
}

/// The harness's own processes.
#[derive(Debug, Subcommand)]
pub(crate) enum Hidden {
    /// Internal: one measurement of the scale case.
    #[command(hide = true, name = "__scale-child")]
    ScaleChild(ChildArgs),
}

/// The harness's flags.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Runs per case and tool, and hand-overs per store of observe and
    /// observe-crash (default: 50; with --short 5, and 3 for a crash).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) runs: Option<u32>,
    /// CI mode: few runs, and no case that costs tens of seconds a run
    /// (Consul's crash), unless named in --cases.
    #[arg(long)]
    pub(crate) short: bool,
    /// The stores, comma-separated: sqlite, etcd, consul, zookeeper,
    /// postgres, pgbouncer, redis, redis-sentinel, consul-cluster, memory,
    /// azblob (default: sqlite and every one of etcd, consul, zookeeper,
    /// postgres and redis whose engine is installed).
    #[arg(long, value_name = "LIST")]
    pub(crate) stores: Option<String>,
    /// The cases, comma-separated: graceful, crash, regent's hand-overs
    /// preferred and requested, and the load cases herd, scale, observe
    /// and observe-crash; STORE:CASE runs a case on that store only (e.g.
    /// graceful,etcd:crash). Default: graceful and crash.
    #[arg(long, value_name = "LIST")]
    pub(crate) cases: Option<String>,
    /// Write the markdown report here, and an SVG plot per case beside it
    /// (docs/benchmarks.md: docs/benchmarks/graceful.svg, …).
    #[arg(long, value_name = "FILE.md")]
    pub(crate) out: Option<PathBuf>,
    /// Write every sample and the facts as JSON here.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// The `regent` binary the candidates run (default: $REGENT_BIN, else
    /// `regent` beside this program, as `cargo build --release -p
    /// regent-cli -p regent-bench` leaves it).
    #[arg(long, value_name = "PATH")]
    pub(crate) regent: Option<PathBuf>,
    /// scale: the numbers of elections, comma-separated (default:
    /// 1,100,1000,10000; with --short 1,100).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = clap::value_parser!(u32).range(1..=1_000_000)
    )]
    pub(crate) elections: Vec<u32>,
    /// scale: the measurement window, e.g. 30s (default: one ttl, 10s);
    /// the figures are given per ttl.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) window: Option<Duration>,
    /// scale: also measure as many followers of another process's
    /// leaders.
    #[arg(long)]
    pub(crate) followers: bool,
    /// scale: start the campaigns spread over one renewal interval rather
    /// than all at once (what a process that has run a while sees).
    #[arg(long)]
    pub(crate) spread: bool,
    /// herd and scale on SQLite: the store's commit interval, where not
    /// its default.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) sqlite_commit_interval: Option<Duration>,
    /// Where SQLite's file goes (a new directory under DIR; default: the
    /// system's temporary directory). For the bytes scale counts to mean
    /// anything, a real disk, not a tmpfs.
    #[arg(long, value_name = "DIR")]
    pub(crate) sqlite_dir: Option<PathBuf>,
}

impl BenchArgs {
    /// The scale case's options.
    pub(crate) fn scale_options(&self) -> ScaleOptions {
        let elections = if !self.elections.is_empty() {
            self.elections.iter().map(|&n| n as usize).collect()
        } else if self.short {
            SCALE_SHORT.to_vec()
        } else {
            SCALE.to_vec()
        };
        ScaleOptions {
            elections,
            window: self.window.unwrap_or(crate::load::result::TTL),
            followers: self.followers,
            spread: self.spread,
            commit_interval: self.sqlite_commit_interval,
        }
    }
}

/// `30s`, `500ms`, `1m30s`: jiff's "friendly" format; longer than zero.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let parsed: jiff::SignedDuration = s
        .trim()
        .parse()
        .map_err(|e| format!("{s:?} is not a duration such as 30s or 500ms: {e}"))?;
    Duration::try_from(parsed)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{s:?}: a duration longer than zero"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_scale_defaults() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
        let cli = Cli::try_parse_from(["regent-bench", "--short", "--elections", "5,50"]).unwrap();
        let options = cli.bench.scale_options();
        assert_eq!(options.elections, [5, 50]);
        assert_eq!(options.window, Duration::from_secs(10));
        let cli = Cli::try_parse_from(["regent-bench", "--short"]).unwrap();
        assert_eq!(cli.bench.scale_options().elections, SCALE_SHORT);
    }
}
