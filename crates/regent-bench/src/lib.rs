//! regent's benchmark harness: how long a leader hand-over takes with
//! `regent run`, beside each engine's own tool, on the stores installed on
//! this machine; what a crowd of candidates or elections costs a store;
//! and how soon an observer learns who leads. Not published (`publish = false`, as tokio keeps its benches):
//! it needs the test kit's engines. The shipped `regent` binary has no
//! bench command; this crate runs it.
//!
//! # Running it
//!
//! From the repository's root, with the engines from
//! `scripts/install-engines`:
//!
//! ```text
//! scripts/bench [--runs N] [--short] [--stores LIST] [--cases LIST] [--out FILE.md] [--json FILE]
//!               [--regent PATH] [--elections LIST] [--window D] [--followers] [--spread]
//!               [--sqlite-commit-interval D] [--sqlite-dir DIR]
//! ```
//!
//! `scripts/bench` builds `regent` and `regent-bench` in release mode
//! (`cargo build --release -p regent-cli -p regent-bench`) and runs
//! `target/release/regent-bench` with its arguments. The candidates run the
//! `regent` binary beside the harness's own executable, or the one named by
//! `--regent PATH` (or `REGENT_BIN`); without one the harness exits 2
//! naming that build command. `regent-bench --help` lists the stores, the
//! cases, examples and the exit codes.
//!
//! # Where results go
//!
//! The summary table goes to standard output, progress and notes to
//! standard error. `--out FILE.md` writes a markdown report (the table,
//! the notes per case, the machine, the engines' versions, the method, and
//! the command that reproduces it, `scripts/bench ARGS`) and an SVG strip
//! plot per case in `FILE/` beside it; `--json FILE` every sample and the
//! facts. The committed results are `docs/benchmarks.md` (with
//! `docs/benchmarks/`), `docs/load.md` and `docs/bench/`;
//! `docs/benchmarks.md` names the command behind each.
//!
//! # What is measured
//!
//! Per store × case, each tool side by side (`case.rs`):
//!
//! | store | graceful | crash |
//! |---|---|---|
//! | sqlite | `regent run` | `regent run` |
//! | etcd | `regent run`, `etcdctl elect NAME PROPOSAL` | `regent run`, `etcdctl lock --ttl 2 NAME CMD` |
//! | consul | `regent run`, `consul lock PREFIX CMD` (and with `exec CMD`) | `regent run`, `consul lock PREFIX CMD` |
//! | zookeeper | `regent run`, Curator `LeaderLatch` | `regent run`, Curator `LeaderLatch` |
//! | postgres | `regent run` | `regent run` |
//! | pgbouncer | `regent run` | `regent run` |
//! | redis | `regent run` | `regent run` |
//! | redis-sentinel | `regent run` | `regent run` |
//! | consul-cluster | `regent run` at 15 s and 10 s, `consul lock` (and with `exec CMD`) | `regent run` at 15 s and 10 s, `consul lock` |
//!
//! * **graceful**: the leading process gets its own graceful signal
//!   (SIGTERM; SIGINT for `etcdctl elect`, which resigns on SIGINT only);
//!   the time runs to the next leader's start. Its command exits at once
//!   on SIGTERM, so what is timed is the tool's own work.
//! * **crash**: SIGKILL of the leading tool process alone, at a ttl of 2 s
//!   for both tools (Consul: `consul lock`'s fixed session TTL, 15 s); also
//!   reported, whether the old command was left running, and whether it
//!   outlived its tool process.
//! * **preferred** and **requested** (issue 30; only when named in
//!   `--cases`; `regent run` alone on every store, as no engine's tool has
//!   priorities or takes a hand-over request): nothing is signalled. In
//!   `preferred` the leader runs with `--priority N` and each run starts a
//!   candidate with `--priority N+1 --settle 1s`, which the leader hands
//!   its term to once it has seen it for the settle time; in `requested`
//!   a leader and a follower run, and `regent handover --to FOLLOWER
//!   --json` asks the leader to hand over. The time runs from the old
//!   command's SIGTERM (its `stop` line in the task log) to the new
//!   command's `start` line; the time from what set it off (the preferred
//!   candidate's spawn; `regent handover`'s start, to its answer and to the
//!   new start) is reported beside it, and the report sets regent's
//!   graceful stop, counted both ways, beside them per store.
//!
//! regent's ttl is the native tool's where that has one (etcd's and
//! ZooKeeper's 2 s, Consul's 15 s), else 2 s. `consul` is a dev agent all
//! candidates share; `consul-cluster` (only when named) is Consul as it is
//! deployed: three servers and a client agent per candidate, with the lock
//! holder's session read back from Consul. `postgres` is one PostgreSQL
//! server and `pgbouncer` (only when named) the same behind PgBouncer in
//! transaction pooling mode, regent's watches listening straight to the
//! server (`--postgres-listen-url`); PostgreSQL has no election tool of
//! its own, so regent runs alone there, as on SQLite. `redis` is one Redis
//! server (no persistence) and `redis-sentinel` (only when named) a primary
//! and its replica behind three Sentinels, regent reaching the primary
//! through them (`redis+sentinel://S1,S2,S3/mymaster`); regent runs alone
//! there too; the load cases open them by URL. A new hand-over case is a
//! variant of `Case`, its tools, and how a run stops the leader
//! (`series.rs`).
//!
//! The load cases, only when named in `--cases` (`load/`): **herd**, a
//! thousand candidates of one election in the harness's process, and the
//! store operations each failover costs them; **scale**, one process
//! leading 1 to 10,000 elections (or following another process's leaders,
//! `--followers`), each size in a process of its own, and what that costs
//! per ttl: store operations (counted at the store's interface, and by the
//! engine itself where it counts), CPU, memory, threads, bytes written,
//! renewals' times; **observe** (`load/observe.rs`), whether an
//! [`Observer`](regent_core::Observer) learns of a new leader as soon as
//! the candidate that becomes it does (issue 29, item 4): per run, on an
//! election of its own, candidate A leads, candidate B waits, and an
//! observer follows, each on a store instance of its own (as three
//! processes would be; the memory store's they share); A resigns, and the
//! monotonic clock times from the resign to B's `campaign` returning, to
//! the observer's `changes()` first naming B with B's fencing token, and
//! to its `leader_watch()` holding B; the report gives each, the signed
//! difference observer − candidate (negative: the observer knew first),
//! and the runs in which the observer said "no leader" in between, and
//! for how long. **observe-crash** is the same when A's renewals and
//! release stop reaching the store instead (cut off at its store's
//! interface by regent-core's `Faults` layer, as if its task hung): both
//! wait for the lease to lapse. The observer cases run `--runs` times per
//! store at a ttl of 2 s (Consul: 10 s, Azure Blob: 15 s, their
//! shortest). The `memory` store (only when named) measures the floor: the
//! candidates alone. `azblob` (only when named) is Azure Blob leases on
//! Azurite, for the observer cases only (no election tool of its own, and
//! a blob lease outlasts the crowds' ttl).
//!
//! # Method
//!
//! The engines are started by regent-testkit on free ports of `127.0.0.1`
//! (`engines.rs`), each tool keeps a leader and a follower on an election
//! of its own, and the tools take turns run by run (a store's `graceful`,
//! `preferred` and `requested` series all together). A run (`series.rs`)
//! waits until the follower stands in line, then 0.3 s plus a random part
//! of the holder's renewal interval; reads CLOCK_MONOTONIC and signals the
//! leading tool process; waits for the follower to lead (its command logs
//! CLOCK_MONOTONIC as it starts — `regent`'s hidden `__demo-task`, run by
//! every tool that runs a command — or its line is stamped as the harness
//! reads it); 0.5 s later looks for the old command, and again once the
//! old tool process has exited; then replaces the old leader by a new
//! follower. The report (`report.rs`) gives p50 / p99 / max per store ×
//! tool × case, a strip plot per case (`svg.rs`), the machine and the
//! engines' versions.
//!
//! # Cleanup
//!
//! Every process runs in a process group of its own and is killed by PID
//! and process group when its guard drops — on success, error or Ctrl-C
//! (SIGINT or SIGTERM make every wait end, exit 130) alike; engines stop by
//! the PID the test kit recorded. Nothing is killed by name.
//!
//! # Layout
//!
//! Each file uses only files below it in this list (no cycles):
//! `run.rs` (the driver) and `args.rs` (the flags); `report.rs`;
//! `series.rs`; `load/` (`mod.rs` → `herd.rs`, `observe.rs`, `scale.rs`
//! → `scale_child.rs` → `open.rs`, `counting.rs`, `usage.rs`; `report.rs`,
//! `result.rs`); `plan.rs`; `engines.rs`; `case.rs`; `store.rs`;
//! `process.rs`, `child_log.rs`, `wait.rs`, `svg.rs`, `stats.rs`,
//! `console.rs`, `error.rs`.

mod args;
mod case;
mod child_log;
mod console;
mod engines;
mod error;
mod load;
mod plan;
mod process;
mod report;
mod run;
mod series;
mod stats;
mod store;
mod svg;
mod wait;

use std::process::ExitCode;

use clap::Parser as _;

/// The whole `regent-bench` program: parses `std::env::args` and runs the
/// harness (or, as `__scale-child`, one scale measurement); the binary's
/// `main` is only this call.
pub fn main() -> ExitCode {
    let cli = args::Cli::parse();
    // Logs as the sidecar does.
    regent_cli::init_logs();
    match cli.hidden {
        Some(args::Hidden::ScaleChild(child)) => load::scale_child::main(&child),
        None => run::main(&cli.bench),
    }
}
