//! Flags as the user typed them (clap), and their resolution into checked
//! settings. Every rule broken is a usage error (exit 2) naming the flag.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::shim::PidNamespace;
use clap::{Arg, ArgMatches, Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use regent_core::target::{OptionKind, StoreKind, StoreOption};

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
    /// Start several candidates on one store (by default a temporary SQLite
    /// file), inject failures and show every failover.
    #[command(after_help = after_help())]
    Demo(DemoArgs),
    /// Run a fault campaign: candidates write to a fenced resource while a
    /// seeded nemesis kills and stops leaders, their shims and commands,
    /// followers and the store; then check that no stale leader's write got
    /// through and that nothing outlived the campaign.
    #[command(after_help = crate::torture::AFTER_HELP)]
    Torture(crate::torture::TortureArgs),
    /// Internal: the process that owns CMD's process group.
    #[command(hide = true, name = "__shim")]
    Shim(crate::shim::ShimArgs),
    /// Internal: the demo's leader task.
    #[command(hide = true, name = "__demo-task")]
    DemoTask(crate::demo::TaskArgs),
    /// Internal: the torture campaign's leader command.
    #[command(hide = true, name = "__torture-writer")]
    TortureWriter(crate::torture::WriterArgs),
}

/// Where the election lives.
#[derive(Debug, Args)]
pub(crate) struct StoreArgs {
    #[arg(long, value_name = "URL", help = store_help())]
    pub(crate) store: Option<String>,
    /// Election name: 1-128 of A-Z a-z 0-9 . _ -, starting with a letter or digit.
    #[arg(long, value_name = "NAME")]
    pub(crate) election: String,
    #[command(flatten)]
    pub(crate) options: StoreFlags,
}

/// `--store`'s help: the URL forms of every store in this build.
fn store_help() -> String {
    format!(
        "Store URL: {} (default: sqlite:$XDG_STATE_HOME/regent/elections.db, else \
         ~/.local/state/regent/elections.db)",
        regent::url::supported_forms()
    )
}

/// The options of every store this build includes, as flags generated from
/// the stores' option tables: `--KIND-NAME` under the help heading `KIND
/// store`, each falling back to its variable `REGENT_KIND_NAME` (read when
/// the store is resolved, not by clap: a variable of another store than the
/// URL's is ignored, a flag of another store is an error). Secrets have no
/// flag.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoreFlags {
    /// `(flag name without dashes, value)` for every flag given.
    pub(crate) given: Vec<(String, OsString)>,
}

impl StoreFlags {
    /// The flags as arguments again, for a child `regent run`.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        self.given
            .iter()
            .flat_map(|(flag, value)| [format!("--{flag}").into(), value.clone()])
            .collect()
    }
}

/// Every store option that has a flag, with its kind.
fn flag_options() -> impl Iterator<Item = (&'static StoreKind, &'static StoreOption)> {
    regent::url::store_kinds()
        .iter()
        .flat_map(|kind| kind.options.iter().map(move |o| (*kind, o)))
        .filter(|(_, o)| o.has_flag())
}

impl FromArgMatches for StoreFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = Self::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for (kind, option) in flag_options() {
            let name = option.flag_name(kind);
            if let Some(value) = matches.get_one::<OsString>(&name) {
                self.given.retain(|(f, _)| *f != name);
                self.given.push((name, value.clone()));
            }
        }
        Ok(())
    }
}

impl Args for StoreFlags {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        for (kind, option) in flag_options() {
            let name = option.flag_name(kind);
            let hint = match option.kind {
                OptionKind::Path => clap::ValueHint::FilePath,
                _ => clap::ValueHint::Other,
            };
            cmd = cmd.arg(
                Arg::new(name.clone())
                    .long(name)
                    .value_name(option.value_name)
                    .value_parser(clap::value_parser!(OsString))
                    .value_hint(hint)
                    .help(format!("{} [env: {}]", option.help, option.env_name(kind)))
                    .help_heading(format!("{} store", kind.name)),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// This instance's id, unique per election (default: the Consul agent's
    /// node name on consul:// stores, as Consul's recipe does, so instances
    /// that share an agent each need their own --id; HOSTNAME-PID
    /// elsewhere).
    #[arg(long)]
    pub(crate) id: Option<String>,
    /// Lease time to live (default: 10s, or the store's minimum ttl if it
    /// is longer: Consul's 10s, Azure Blob's 15s).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) ttl: Option<Duration>,
    /// Renew interval: how often the leader renews (default: ttl/5).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) renew_every: Option<Duration>,
    /// Step down when no renewal succeeded for this long (default: 3*ttl/5).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) renew_deadline: Option<Duration>,
    #[command(flatten)]
    pub(crate) child: ChildArgs,
}

/// How CMD runs while this instance leads: what `regent run` and
/// `regent peer` share.
#[derive(Debug, Args)]
pub(crate) struct ChildArgs {
    /// Time CMD gets between SIGTERM and SIGKILL (default: 2s, or less when a
    /// short ttl leaves less room before the lease could pass on).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) grace: Option<Duration>,
    /// When to campaign again after CMD exits by itself.
    #[arg(long, value_enum, default_value_t = RestartArg::Always)]
    pub(crate) restart: RestartArg,
    /// Step down if CMD writes nothing to $REGENT_HEARTBEAT_FD for this long.
    #[arg(long, value_parser = parse_duration)]
    pub(crate) health_timeout: Option<Duration>,
    /// Run CMD's whole process tree in a PID namespace of its own, which the
    /// kernel ends with everything in it when regent's supervisor dies, even
    /// by SIGKILL: "auto" where regent may (root, CAP_SYS_ADMIN), saying once
    /// when it may not; "always" refuses to start without; "never" for a
    /// CMD that must see its host pids (a pid file others read).
    #[arg(long, value_enum, default_value_t = PidNamespace::Auto, value_name = "WHEN")]
    pub(crate) pid_namespace: PidNamespace,
    /// Internal (demo): shut down gracefully when stdin closes.
    #[arg(long, hide = true)]
    pub(crate) lifeline_stdin: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub(crate) cmd: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct PeerArgs {
    /// The election algorithm; every member must use the same.
    #[arg(long, value_enum)]
    pub(crate) algorithm: AlgorithmArg,
    /// This member's id: a number, unique in the group and listed in
    /// --peers.
    #[arg(long)]
    pub(crate) id: u64,
    /// The address to accept the other members' connections on (default:
    /// this member's address in --peers).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<std::net::SocketAddr>,
    /// Every member of the group, this one included: ID=HOST:PORT,...
    #[arg(long, value_name = "ID=ADDR,...", value_parser = parse_peers)]
    pub(crate) peers: PeerList,
    /// Lead only while a majority of the members acknowledge it within the
    /// lease: a partition cannot give two leaders at once.
    #[arg(long)]
    pub(crate) quorum: bool,
    /// A file holding the group's shared secret (at least 16 bytes; default:
    /// the variable REGENT_PEER_SECRET). Never on the command line.
    #[arg(long, value_name = "FILE")]
    pub(crate) secret_file: Option<std::path::PathBuf>,
    /// How often the leader (every member for lowest-id) sends heartbeats.
    #[arg(long, value_parser = parse_duration, default_value = "200ms")]
    pub(crate) heartbeat_interval: Duration,
    /// A member unheard of for this long is taken for dead.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub(crate) failure_timeout: Duration,
    /// The name CMD sees as REGENT_ELECTION.
    #[arg(long, value_name = "NAME", default_value = "peer")]
    pub(crate) election: String,
    #[command(flatten)]
    pub(crate) child: ChildArgs,
}

/// The peer algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AlgorithmArg {
    /// The lowest id among the live members leads.
    LowestId,
    /// Bully: the highest live id wins.
    Bully,
    /// Ring: an election goes round the ring; the highest live id leads.
    Ring,
}

/// `--peers`, parsed: ids and addresses, each id once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeerList(pub(crate) std::collections::BTreeMap<u64, std::net::SocketAddr>);

/// Parses `ID=HOST:PORT,...`. A host name is resolved now, once.
pub(crate) fn parse_peers(s: &str) -> Result<PeerList, String> {
    use std::net::ToSocketAddrs as _;
    let mut peers = std::collections::BTreeMap::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((id, addr)) = entry.split_once('=') else {
            return Err(format!("'{entry}' is not ID=HOST:PORT"));
        };
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| format!("'{id}' in '{entry}' is not a member id (a number)"))?;
        let addr = addr
            .trim()
            .to_socket_addrs()
            .map_err(|e| format!("'{addr}' in '{entry}' is not HOST:PORT: {e}"))?
            .next()
            .ok_or_else(|| format!("'{addr}' in '{entry}' resolves to no address"))?;
        if peers.insert(id, addr).is_some() {
            return Err(format!("member {id} is listed twice"));
        }
    }
    if peers.is_empty() {
        return Err("no members: give ID=HOST:PORT,...".to_owned());
    }
    Ok(PeerList(peers))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RestartArg {
    /// Campaign again after CMD ends, however it ended.
    Always,
    /// Campaign again only if CMD failed (non-zero, or killed).
    OnFailure,
    /// Exit with CMD's status when it ends.
    Never,
}

/// `status` and `watch`: a store and an election, or a member of a peer
/// group.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    #[arg(long, value_name = "URL", help = store_help(), conflicts_with = "peer")]
    pub(crate) store: Option<String>,
    /// Election name: 1-128 of A-Z a-z 0-9 . _ -, starting with a letter or
    /// digit. With --peer it may be left out (the member names its own);
    /// if given, it must be the one the member runs.
    #[arg(long, value_name = "NAME", required_unless_present = "peer")]
    pub(crate) election: Option<String>,
    #[command(flatten)]
    pub(crate) options: StoreFlags,
    /// Ask a member of a peer group (`regent peer`) instead of a store: the
    /// address it listens on (its --listen, or its entry in --peers).
    #[arg(long, value_name = "HOST:PORT", help_heading = "Peer group")]
    pub(crate) peer: Option<String>,
    /// A file holding the peer group's shared secret (default: the variable
    /// REGENT_PEER_SECRET); one trailing newline is dropped.
    #[arg(
        long,
        value_name = "FILE",
        requires = "peer",
        help_heading = "Peer group"
    )]
    pub(crate) secret_file: Option<PathBuf>,
    /// How long to wait for the member to accept the connection, and then
    /// for its answer (default: 2s).
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = parse_duration,
        requires = "peer",
        help_heading = "Peer group"
    )]
    pub(crate) peer_timeout: Option<Duration>,
    /// Print JSON: {"election": NAME, "leader": null | {"id", "token", "metadata"}}.
    #[arg(long)]
    pub(crate) json: bool,
}

impl ShowArgs {
    /// The store and election, when no `--peer` is given.
    pub(crate) fn store_args(&self) -> Result<StoreArgs, crate::error::CliError> {
        let Some(election) = self.election.clone() else {
            return Err(crate::error::CliError::usage(
                "--election NAME is required, unless --peer HOST:PORT is given",
            ));
        };
        Ok(StoreArgs {
            store: self.store.clone(),
            election,
            options: self.options.clone(),
        })
    }
}

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// How many candidate processes to start (2-20).
    #[arg(long, default_value_t = 5)]
    pub(crate) candidates: usize,
    /// Store URL (default: a fresh SQLite file in a temporary directory).
    #[arg(long, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// Election name, for a demo on a shared store.
    #[arg(long, value_name = "NAME", default_value = "demo")]
    pub(crate) election: String,
    #[command(flatten)]
    pub(crate) options: StoreFlags,
    /// Upper bound on the whole demo (default: 60s, or what the store's
    /// ttl takes if longer: two crash failovers, three ttls and 15s).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Lease ttl of the candidates (default: 2s, or the store's minimum if
    /// it is longer: Consul's 10s, Azure Blob's 15s).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) ttl: Option<Duration>,
}

/// Parses durations as people write them: `500ms`, `10s`, `1.5s`, `2m`,
/// `1m30s`, `1h 30m`, `1 minute`: jiff's "friendly" format (hours at most;
/// a fraction only on the last unit). A unit is required; negative
/// durations are refused. The checks before jiff's only give the common
/// mistakes a message of their own.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let Some(split) = s.find(|c: char| !(c.is_ascii_digit() || c == '.')) else {
        return Err(format!(
            "'{s}' has no unit; write e.g. 500ms, 10s, 1m30s or 1h"
        ));
    };
    let num = &s[..split];
    if num.is_empty() {
        return Err(format!("'{s}' does not start with a number"));
    }
    if num.parse::<f64>().is_err() {
        return Err(format!("'{num}' in '{s}' is not a number"));
    }
    // jiff wants digits on both sides of a decimal point; `.5s` and `5.s`
    // were always taken here.
    let mut text = String::with_capacity(s.len() + 1);
    let mut chars = s.chars().peekable();
    let mut last = None;
    while let Some(c) = chars.next() {
        if c == '.' {
            if !last.is_some_and(|l: char| l.is_ascii_digit()) {
                text.push('0');
            }
            if !chars.peek().is_some_and(char::is_ascii_digit) {
                last = Some(c);
                continue;
            }
        }
        text.push(c);
        last = Some(c);
    }
    let parsed: jiff::SignedDuration = text.parse().map_err(|e| match unknown_unit(s) {
        Some(unit) => format!(
            "unknown unit '{unit}' in '{s}'; use ms, s, m or h (e.g. 250ms, 1.5s, 1m30s, 1h)"
        ),
        None => format!("'{s}' is not a duration ({e}); write e.g. 250ms, 1.5s, 1m30s or 1h"),
    })?;
    let d = Duration::try_from(parsed).map_err(|_| format!("'{s}' is negative"))?;
    if d > Duration::from_secs(1_000_000_000) {
        return Err(format!("'{s}' is too long"));
    }
    Ok(d)
}

/// The first word of `s` that is no unit of time jiff takes (days and
/// longer are not: their length varies).
fn unknown_unit(s: &str) -> Option<&str> {
    const UNITS: &[&str] = &[
        "ns",
        "nsec",
        "nsecs",
        "nanosecond",
        "nanoseconds",
        "us",
        "µs",
        "μs",
        "usec",
        "usecs",
        "microsecond",
        "microseconds",
        "ms",
        "msec",
        "msecs",
        "millisecond",
        "milliseconds",
        "s",
        "sec",
        "secs",
        "second",
        "seconds",
        "m",
        "min",
        "mins",
        "minute",
        "minutes",
        "h",
        "hr",
        "hrs",
        "hour",
        "hours",
    ];
    s.split(|c: char| !c.is_alphabetic())
        .find(|w| !w.is_empty() && !UNITS.contains(w))
}

/// The default store: `$XDG_STATE_HOME/regent/elections.db`, else
/// `$HOME/.local/state/regent/elections.db`, else
/// `/tmp/regent-UID/elections.db`.
pub(crate) fn default_store_path() -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        });
    match base {
        Some(b) => b.join("regent").join("elections.db"),
        None => std::env::temp_dir()
            .join(format!("regent-{}", rustix::process::getuid().as_raw()))
            .join("elections.db"),
    }
}

/// The default holder id: `HOSTNAME-PID`.
pub(crate) fn default_id() -> String {
    let uname = rustix::system::uname();
    let host: String = uname
        .nodename()
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_graphic)
        .take(100)
        .collect();
    let host = if host.is_empty() { "host".into() } else { host };
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10y").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("s").unwrap_err().contains("number"));
        assert!(
            parse_duration("1.2.3s")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(parse_duration("-1s").is_err());
    }

    /// Regression: `--ttl 1m30s` was refused ("unknown unit 'm30s'").
    #[test]
    fn durations_as_people_write_them() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("1m30s", ms(90_000)),
            ("1m 30s", ms(90_000)),
            ("1.5s", ms(1500)),
            ("250ms", ms(250)),
            ("1h30m", ms(5_400_000)),
            ("2 minutes", ms(120_000)),
            (" 10s ", ms(10_000)),
            (".5s", ms(500)),
            ("5.s", ms(5000)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        for bad in ["1m30", "10 parsecs", "1s2", "9999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(
            parse_duration("10 parsecs")
                .unwrap_err()
                .starts_with("unknown unit 'parsecs'")
        );
        assert!(
            parse_duration("1m30")
                .unwrap_err()
                .starts_with("'1m30' is not a duration")
        );
    }

    #[test]
    fn default_id_is_valid() {
        assert!(regent_core::HolderId::new(default_id()).is_ok());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
