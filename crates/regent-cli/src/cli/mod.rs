//! Flags as the user typed them (clap), and their resolution into checked
//! settings. Every rule broken is a usage error (exit 2) naming the flag.

use clap::{Parser, Subcommand};

use crate::LogFormat;
use crate::error::CliError;

mod dashboard;
mod demo;
mod handover;
mod http;
mod peer;
mod run;
mod shim;
mod show;
mod store;
mod torture;
mod values;

pub(crate) use dashboard::DashboardArgs;
pub(crate) use demo::{DemoArgs, TaskArgs};
pub(crate) use handover::HandoverArgs;
pub(crate) use http::HttpArgs;
pub(crate) use peer::{AlgorithmArg, PeerArgs};
pub(crate) use run::{ChildArgs, PidNamespace, RestartArg, RunArgs, default_id};
pub(crate) use shim::ShimArgs;
pub(crate) use show::ShowArgs;
pub(crate) use store::{StoreArgs, StoreFlags, default_store_path};
pub(crate) use torture::{AFTER_HELP as TORTURE_HELP, FaultList, TortureArgs, WriterArgs};
pub(crate) use values::parse_duration;

/// The text after every `--help`: examples (those of each store in this
/// build, from its kind) and the exit codes.
fn after_help() -> String {
    let mut examples = vec!["regent run --election nightly-report -- ./report.sh"];
    examples.extend(
        regent::url::store_kinds()
            .iter()
            .flat_map(|k| k.examples.iter().copied()),
    );
    examples.extend([
        "regent status --election jobs --json",
        "regent watch --election jobs",
        "regent run --election jobs --priority 10 -- ./worker",
        "regent handover --election jobs --to host-b",
        "regent run --election jobs --http 127.0.0.1:9464 -- ./worker",
        "regent dashboard --election jobs,reports --http 127.0.0.1:9465",
        "regent status --peer 10.0.0.2:7400 --secret-file /etc/app/peer-secret --json",
        "REGENT_PEER_SECRET=… regent watch --peer 10.0.0.2:7400",
        "regent demo --candidates 5",
    ]);
    let mut text = String::from("Examples:\n");
    for e in examples {
        text.push_str("  ");
        text.push_str(e);
        text.push('\n');
    }
    text.push_str(EXIT_CODES);
    text
}

const EXIT_CODES: &str = "
Exit codes:
  0  normal end (or the command's own 0)
  1  runtime failure after start (a store error)
  2  usage or configuration error; the message names the flag and the rule
     (refused credentials or permissions too)
  3  store unreachable at start, after retries; with --peer: the member
     unreachable at start, after retries, or no answer from it
  4  handover: the hand-over did not happen as asked (no leader, no such
     candidate, another hand-over in progress, refused, not answered in
     time, or the lease went to another candidate); nothing changed
     unless the message says so
  127  the command could not be started (not found, not executable)
  130  a second SIGTERM/SIGINT cut the graceful stop short
  N  with --restart never: the command's exit status (128+signal if killed)";

/// regent: run a command on exactly one of several instances, and keep it
/// that way.
#[derive(Debug, Parser)]
#[command(name = "regent", version, about, after_help = after_help())]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// How regent logs to stderr: `text`, lines for people (the default),
    /// or `json`, one object per line (timestamp, level, target, message and
    /// the fields at the top level; during a term every line carries
    /// election, holder and token). REGENT_LOG sets the level in both.
    /// [env: REGENT_LOG_FORMAT]
    #[arg(
        long,
        global = true,
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    log_format: Option<LogFormat>,
}

/// The variable `--log-format` falls back to.
const LOG_FORMAT_VAR: &str = "REGENT_LOG_FORMAT";

impl Cli {
    /// `--log-format`, else `REGENT_LOG_FORMAT`, else text; a variable
    /// that names no format is a usage error naming it.
    pub(crate) fn log_format(&self) -> Result<LogFormat, CliError> {
        if let Some(format) = self.log_format {
            return Ok(format);
        }
        match std::env::var(LOG_FORMAT_VAR) {
            Ok(v) if !v.is_empty() => clap::ValueEnum::from_str(&v, true).map_err(|_| {
                CliError::usage(format!(
                    "{LOG_FORMAT_VAR}={v:?}: not a log format (text or json)"
                ))
            }),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(LogFormat::Text),
            Err(std::env::VarError::NotUnicode(_)) => Err(CliError::usage(format!(
                "{LOG_FORMAT_VAR}: not a log format (text or json)"
            ))),
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run CMD only while this instance leads the election.
    ///
    /// CMD runs in its own process group with REGENT_ELECTION,
    /// REGENT_LEADER_ID and REGENT_FENCING_TOKEN set. When leadership is lost
    /// the group gets SIGTERM, then SIGKILL after --grace, and regent
    /// campaigns again. On SIGTERM/SIGINT regent stops CMD the same way,
    /// releases the lease and exits 0; a second signal exits at once.
    #[command(after_help = after_help())]
    Run(RunArgs),
    /// Run CMD only while this instance leads a group of peers that elect
    /// among themselves, with no store (lowest-ID, Bully or Ring over TCP).
    ///
    /// Every member runs `regent peer` with the same --peers list (its own
    /// entry included) and the same secret. CMD is supervised exactly as by
    /// `regent run`. Without --quorum a network partition can elect a
    /// leader on each side: pass REGENT_FENCING_TOKEN to what CMD writes.
    #[command(after_help = after_help())]
    Peer(PeerArgs),
    /// Print who leads the election now.
    ///
    /// With --peer HOST:PORT, ask a member of a peer group (`regent peer`)
    /// for its view instead of reading a store: the leader it sees, its
    /// fencing token, and the group's election name. Any member answers;
    /// the query is authenticated with the group's secret (--secret-file or
    /// REGENT_PEER_SECRET), and a member that cannot authenticate it does
    /// not answer.
    #[command(after_help = after_help())]
    Status(ShowArgs),
    /// Print who leads, then every change, until interrupted.
    ///
    /// With --peer HOST:PORT, follow the view of a member of a peer group
    /// (`regent peer`) instead of a store: one connection, on which the
    /// member answers as soon as its view changes. If the member goes away
    /// after the first answer, regent says so and keeps trying it.
    #[command(after_help = after_help())]
    Watch(ShowArgs),
    /// Serve a live page of one or more elections, with their metrics and
    /// health, without campaigning: any store, or a peer group's member.
    ///
    /// The page (GET / on --http) shows each election's leader, token and
    /// candidates where the store lists them, and a timeline of terms as
    /// this process saw them: who led, with which token, from when to
    /// when, why it ended, and how long nobody led before; it updates
    /// live. /metrics, /healthz, /livez, /readyz and /leader are served as
    /// by `regent run --http`.
    #[command(after_help = after_help())]
    Dashboard(DashboardArgs),
    /// Ask the leader of an election to hand its term to another candidate
    /// (--to ID, or the next: the highest priority), and wait for the new
    /// term. The leader answers at its next renewal, stops its command as
    /// on SIGTERM and passes the lease to that candidate alone; the new
    /// leader is not preempted by priorities. Exit 4 when it did not
    /// happen as asked.
    #[command(after_help = after_help())]
    Handover(HandoverArgs),
    /// Start several candidates on one store (by default a temporary SQLite
    /// file), inject failures and show every failover.
    #[command(after_help = after_help())]
    Demo(DemoArgs),
    /// Run a fault campaign: candidates write to a fenced resource while a
    /// seeded nemesis kills and stops leaders, their shims and commands,
    /// followers and the store; then check that no stale leader's write got
    /// through and that nothing outlived the campaign.
    #[command(after_help = TORTURE_HELP)]
    Torture(TortureArgs),
    /// Print the completion script of SHELL.
    ///
    /// bash: `regent completions bash > ~/.local/share/bash-completion/completions/regent`;
    /// zsh: into a directory of `$fpath`, as `_regent`; fish:
    /// `regent completions fish > ~/.config/fish/completions/regent.fish`.
    Completions(CompletionsArgs),
    /// Internal: writes the generated reference (man pages, completions,
    /// the command and store references) under DIR.
    #[command(hide = true, name = "__reference")]
    Reference(ReferenceArgs),
    /// Internal: the process that owns CMD's process group.
    #[command(hide = true, name = "__shim")]
    Shim(ShimArgs),
    /// Internal: the demo's leader task.
    #[command(hide = true, name = "__demo-task")]
    DemoTask(TaskArgs),
    /// Internal: the torture campaign's leader command.
    #[command(hide = true, name = "__torture-writer")]
    TortureWriter(WriterArgs),
}

/// `regent completions`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum, value_name = "SHELL")]
    pub(crate) shell: clap_complete::Shell,
}

/// `regent __reference`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReferenceArgs {
    /// Where to write: the repository's `docs/`.
    #[arg(value_name = "DIR")]
    pub(crate) dir: std::path::PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
