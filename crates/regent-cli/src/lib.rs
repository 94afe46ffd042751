//! `regent`: the sidecar CLI. `regent run -- CMD` runs CMD only while this
//! instance leads; `status` and `watch` show the leader; `demo` shows
//! failovers live on the embedded store; `torture` runs a fault campaign
//! against a fenced resource and reports violations. See `regent --help`.
//! (Hand-over benchmarks beside each engine's own tool: the unpublished
//! crate `regent-bench`, `scripts/bench`.)
//!
//! # Design notes
//!
//! The sidecar as a whole is described in `docs/architecture.md` §4,
//! "Running work on the leader"; these notes say why it is built so.
//!
//! * The shim (see `shim/mod.rs`) leads a process group of its own, apart from
//!   regent's: a job-control stop of regent's group (Ctrl-Z,
//!   `kill -STOP -PGID`) would otherwise freeze the dead-man's switch
//!   together with regent while CMD, in its own group, ran on.
//! * CMD's tree runs in a PID namespace of its own whose init (a second
//!   shim process) dies with the shim, so that the kernel, not a live
//!   regent, ends everything of a term whose supervisor was killed; regent
//!   is a child subreaper and stops every orphan of a term before it lets
//!   the lease go (`shim/mod.rs` says why a namespace and not a cgroup, and
//!   what happens where regent may not create one).
//! * The shim is started from `/proc/self/exe`, not the binary's path: a
//!   package upgrade that replaces the file must not break running
//!   instances at their next term.
//! * The heartbeat descriptor (`--health-timeout`) is moved below 10 by the
//!   shim, because dash, Debian's `sh`, accepts only single-digit
//!   descriptors in `>&N`.
//! * Stores: this crate names none (but the default, `sqlite:PATH`). The
//!   facade `regent` lists the stores this build includes (`regent::url`),
//!   each described by its crate's `StoreKind`: URL grammar, options and
//!   their variables, files, contradictions, connecting and hints. The store
//!   flags and their `--help` sections are generated from those option
//!   tables (`cli.rs`, `StoreFlags`: `--KIND-NAME`, variable
//!   `REGENT_KIND_NAME`); `demo` forwards them as given; secrets (options
//!   of kind secret) have no flag, are removed from the environment CMD
//!   gets, and make regent non-dumpable while set. Every flag and file is
//!   checked, and every file read, before the first connection, so
//!   contradictions are exit 2 at once rather than exit 3 after the start
//!   retries. Files are read once at start: a rotated certificate takes a
//!   restart. Adding a store costs this crate nothing but the facade
//!   feature in `Cargo.toml`.
//! * `regent run` is not a client of the core's `Supervisor`, on purpose.
//!   The supervisor serves in-process tasks: when leadership ends it gives
//!   the task `grace`, then drops the future and releases the lease — a
//!   dropped future has stopped for good. A process group has not: regent
//!   can only learn that CMD stopped by waiting for the shim (grace, then
//!   its SIGKILL sweep), and when the shim is stuck it must kill the group
//!   itself before the lease may go. Releasing at `grace`, as the
//!   supervisor does, would let the next leader start while the old CMD is
//!   still being killed. So `run.rs` keeps its own loop: it releases only
//!   after the group is confirmed gone (the lease otherwise expires by its
//!   ttl), reads heartbeats from a pipe rather than an in-process
//!   `Heartbeat`, exits with CMD's status under `--restart never`, and
//!   lets a second signal cut the stop short. What it shares with the
//!   core: `Candidate` (campaign, renewals, step-down on its own clock,
//!   `Leadership` and its lease state for the dead-man's switch) and the
//!   timing rules.
//! * Terms shorter than the ttl are followed by a jittered, doubling
//!   backoff (100 ms up to the ttl) before the next campaign, so a command
//!   that fails at once is not restarted in a hot loop.
//! * Without `--ttl`, `run` takes 10 s, or the store's minimum ttl if it is
//!   longer (Azure Blob's leases: 15 s), as `demo` and `torture` take
//!   theirs: only an open store tells its minimum, so a timing flag that
//!   breaks a rule at 10 s (`--renew-deadline 12s`) is judged once the
//!   store is open, at the ttl it gives; every other usage error still
//!   comes before any connection.
//! * Logs (`logs.rs`): `--log-format json` lifts the fields of the spans a
//!   line was logged in to the top level of its object, beside the
//!   event's, and `run.rs` enters a `term` span (election, holder, token)
//!   around each term, recorded at every level: a collector selects a
//!   term's lines by its token, whoever logged them. tracing-subscriber's
//!   own JSON format keeps span fields nested, hence a small formatter.
//!   In JSON `warn_user!` lines are tracing events (target `regent`, shown
//!   whatever `REGENT_LOG` says) so that they carry the term too; in text
//!   they are the plain lines they always were.

/// Like `eprintln!`, but never panics: with a closed stderr (a dead log
/// pipe) regent must still stop the command and release the lease. With
/// `--log-format json` the line is a JSON object (see `logs.rs`).
macro_rules! warn_user {
    ($($arg:tt)*) => {
        $crate::logs::user_line(format_args!($($arg)*))
    };
}

/// Like `println!`, but never panics; for status lines nobody may read.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod cli;
mod clock;
mod config;
mod dashboard;
mod demo;
mod error;
mod exe;
mod failpoint;
mod handover;
mod http;
mod logs;
mod output;
#[cfg(feature = "peer")]
mod peer;
mod reference;
mod run;
mod shim;
mod show;
mod store;
pub mod task_log;
mod torture;
mod tree;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
pub use crate::logs::{LogFormat, init_logs_as};

/// Logs to stderr as regent does: the level from `REGENT_LOG` (an
/// `EnvFilter` directive, default `warn`), colour only at a terminal, and a
/// log line that cannot be written is lost rather than a panic (with a
/// closed stderr regent must still stop the command and release the
/// lease). Programs that start `regent` beside their own work (the
/// benchmark harness) log the same way. Call it once, first. This is
/// [`init_logs_as`] with [`LogFormat::Text`].
///
/// ```no_run
/// regent_cli::init_logs();
/// tracing::warn!("to stderr, unless REGENT_LOG says otherwise");
/// ```
pub fn init_logs() {
    init_logs_as(LogFormat::Text);
}

/// The whole `regent` program: parses `std::env::args` and runs the
/// command; the binary's `main` is only this call.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before anything warns. The shim gets it as a flag from regent; the
    // other internal processes learn it from REGENT_LOG_FORMAT; none fails
    // on it.
    let log_format = cli.log_format();
    logs::set_format(log_format.as_ref().map_or(LogFormat::Text, |f| *f));
    // The shim and the demo task stay single-threaded and runtime-free.
    match cli.command {
        Command::Shim(args) => return shim::main(args),
        Command::DemoTask(args) => return demo::task_main(args),
        Command::TortureWriter(args) => return torture::writer_main(args),
        Command::Completions(args) => {
            return exit_code(reference::print_completions(args.shell));
        }
        Command::Reference(args) => return exit_code(reference::write_reference(&args.dir)),
        _ => {}
    }
    let log_format = match log_format {
        Ok(f) => f,
        Err(e) => {
            warn_user!("regent: {e}");
            return ExitCode::from(e.code);
        }
    };
    init_logs_as(log_format);
    let command = cli.command;
    store::hide_environment_if_secret();
    // One thread: the shim is spawned from the main thread, which lives as
    // long as the process, so the shim's parent-death signal cannot fire
    // when some worker thread exits.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            warn_user!("regent: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async move {
        match command {
            Command::Run(args) => run::run(args).await,
            #[cfg(feature = "peer")]
            Command::Peer(args) => peer::run(args).await,
            #[cfg(not(feature = "peer"))]
            Command::Peer(_) => Err(error::CliError::usage(
                "this regent was built without the `peer` feature",
            )),
            Command::Status(args) => show::status(args).await,
            Command::Watch(args) => show::watch(args).await,
            Command::Dashboard(args) => dashboard::dashboard(args).await,
            Command::Handover(args) => handover::handover(args).await,
            Command::Demo(args) => demo::demo(args).await,
            Command::Torture(args) => torture::torture(args).await,
            Command::Shim(_)
            | Command::DemoTask(_)
            | Command::TortureWriter(_)
            | Command::Completions(_)
            | Command::Reference(_) => {
                unreachable!("handled above")
            }
        }
    });
    // Regression: dropping the runtime waits for its blocking threads, and
    // one of them may be reading a stdin that never closes (the lifeline
    // of `--lifeline-stdin`): `regent run` hung after a graceful stop
    // until torture SIGKILLed it. Nothing left there matters any more.
    runtime.shutdown_background();
    exit_code(result)
}

/// A command's result as the process's exit code; an error is reported
/// first.
fn exit_code(result: Result<u8, error::CliError>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            warn_user!("regent: {e}");
            ExitCode::from(e.code)
        }
    }
}
