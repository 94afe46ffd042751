//! `regent torture`: the fault campaign's command line. The campaign is
//! the crate `regent_torture` (its docs say what a campaign does and
//! checks); this adapter turns the flags into its `Config`, reaches the
//! store through this crate's own store resolution (`--store`, the store
//! flags and their variables, `regent run`'s start retries), passes
//! SIGINT and SIGTERM as the campaign's stop, and renders its errors as
//! flags and exit codes: 0 no violation, 4 a violation, 2 usage, 1 failure.
//! It also serves the campaign's writer as the hidden `__torture-writer`
//! mode.

use std::ffi::OsString;
use std::process::ExitCode;

use regent_core::{BoxError, BoxStore, ElectionName};
use regent_torture::{
    ConfigError, Error, FaultKind, FaultRefusal, PeerAlgorithm, Peers, StoreAccess,
};

use crate::cli::{AlgorithmArg, FaultList, StoreArgs, StoreFlags, TortureArgs, WriterArgs};
use crate::error::{CliError, chain};
use crate::store;

/// Exit code when the campaign found a violation.
pub(crate) const EXIT_VIOLATION: u8 = 4;

/// `__torture-writer`: the campaign's writer (single-threaded, no
/// runtime).
pub(crate) fn writer_main(args: WriterArgs) -> ExitCode {
    regent_torture::writer::main(&regent_torture::writer::WriterArgs {
        fence: args.fence,
        campaign: args.campaign,
        background: args.background,
    })
}

/// `regent torture`.
pub(crate) async fn torture(args: TortureArgs) -> Result<u8, CliError> {
    let election = ElectionName::new(&args.election)
        .map_err(|e| CliError::usage(format!("--election: {e}")))?;
    let mut config = regent_torture::Config::new(crate::exe::own_exe()?)
        .election(election)
        .candidates(args.candidates)
        .duration(args.duration)
        .report(args.report);
    config.stores = args.stores;
    config.ttl = args.ttl;
    config.faults = args.faults.map(|FaultList(kinds)| kinds);
    config.seed = args.seed;
    config.store_commands = args.store_commands;
    config.store_pids = args.store_pids;
    config.peers = args.peer.map(|algorithm| Peers {
        algorithm: match algorithm {
            AlgorithmArg::LowestId => PeerAlgorithm::LowestId,
            AlgorithmArg::Bully => PeerAlgorithm::Bully,
            AlgorithmArg::Ring => PeerAlgorithm::Ring,
        },
        quorum: args.quorum,
    });
    config.sweep = args.sweep.then_some(args.sweep_runs);
    let stores = CliStores {
        election: args.election,
        options: args.options,
    };
    let outcome = regent_torture::run(config, &stores, interrupted()?)
        .await
        .map_err(cli_error)?;
    Ok(if outcome.ok() { 0 } else { EXIT_VIOLATION })
}

/// The store as `regent run` reaches it: `--store` and the store flags
/// (and their variables), resolved by [`store::target`], opened by
/// [`store::open`] with its start retries, forwarded to every candidate as
/// flags.
struct CliStores {
    election: String,
    options: StoreFlags,
}

/// An error of this crate's store resolution, carried through the
/// campaign and recovered whole by [`cli_error`] (its exit code too).
#[derive(Debug)]
struct FrontEnd(CliError);

impl std::fmt::Display for FrontEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for FrontEnd {}

impl StoreAccess for CliStores {
    type Endpoint = store::Target;

    fn resolve(&self, url: &str) -> Result<store::Target, BoxError> {
        store::target(&StoreArgs {
            store: Some(url.to_owned()),
            election: self.election.clone(),
            options: self.options.clone(),
        })
        .map_err(|e| Box::new(FrontEnd(e)) as BoxError)
    }

    async fn open(
        &self,
        endpoint: &store::Target,
        election: &ElectionName,
    ) -> Result<BoxStore, BoxError> {
        store::open(endpoint, election, None)
            .await
            .map_err(|e| Box::new(FrontEnd(e)) as BoxError)
    }

    fn child_args(&self) -> Vec<OsString> {
        self.options.to_args()
    }
}

/// A future that completes on SIGINT or SIGTERM.
fn interrupted() -> Result<impl Future<Output = ()> + Send, CliError> {
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

/// The campaign's error as the CLI reports it: its wording with flags, and
/// its exit code (2 for usage, 1 for a failure; the store's own errors
/// keep theirs).
fn cli_error(e: Error) -> CliError {
    match e {
        Error::Config(e) => CliError::usage(usage_message(&e)),
        Error::StoreUrl { source, .. } | Error::StoreOpen { source, .. } => {
            match source.downcast::<FrontEnd>() {
                Ok(front_end) => front_end.0,
                Err(other) => CliError::failure(chain(&*other)),
            }
        }
        Error::StoreCommand(e) => {
            CliError::failure(format!("--store-command: cannot start sh: {e}"))
        }
        Error::StoreCommandGone => CliError::failure("--store-command exited at once"),
        Error::StoreExited {
            command,
            status,
            output,
        } => CliError::failure(format!(
            "the store (--store-command {command:?}) exited by itself ({status}); its last \
             output:\n{output}"
        )),
        e if e.is_usage() => CliError::usage(chain(&e)),
        e => CliError::failure(chain(&e)),
    }
}

/// A configuration the campaign refuses, in flags.
fn usage_message(e: &ConfigError) -> String {
    match e {
        ConfigError::FaultRefused { fault, why } => refusal(*fault, *why),
        ConfigError::StoreCommandsWithoutStores => {
            "--store-command needs --store: the URL of the store the command starts".to_owned()
        }
        ConfigError::NoSuchStorePid { pid } => format!("--store-pid {pid}: no such process"),
        ConfigError::ZeroTtl => "--ttl must be above zero".to_owned(),
        ConfigError::PeerTtl { ttl, source } => {
            format!("--ttl {ttl:?} (the members' failure timeout): {source}")
        }
        ConfigError::MixedStores {
            endpoint,
            kind,
            first,
        } => format!(
            "--store: every URL must reach the same store; {endpoint} is a {kind} store, not {first}"
        ),
        ConfigError::Ttl {
            ttl,
            defaulted: true,
            source,
        } => format!("--ttl (default {ttl:?}): {source}"),
        ConfigError::Ttl { ttl, source, .. } => format!("--ttl {ttl:?}: {source}"),
        // The flags' own parsers rule the rest out.
        e => chain(e),
    }
}

/// Why `--faults KIND` cannot apply, in flags.
fn refusal(fault: FaultKind, why: FaultRefusal) -> String {
    match why {
        FaultRefusal::PeerGroupHasNoStore => format!(
            "--faults {fault}: a peer group (--peer) has no store to {}",
            match fault {
                FaultKind::StoreStop => "stop",
                FaultKind::StoreKill => "kill",
                _ => "cut off",
            }
        ),
        FaultRefusal::NeedsStoreProcess => format!(
            "--faults {fault}: needs --store-command or --store-pid; a store without a server \
             process (such as the default SQLite file) cannot be stopped"
        ),
        FaultRefusal::NeedsStoreCommand => format!(
            "--faults {fault}: needs --store-command (torture restarts the store); a store \
             without a server process (such as the default SQLite file) cannot be killed"
        ),
        FaultRefusal::NeedsProxiableStore => format!(
            "--faults {fault}: needs --store URLs of the form scheme://HOST:PORT[,HOST:PORT]… \
             (explicit ports) to put a proxy between each candidate and the store; a file \
             store such as the default SQLite file has no connection to {}",
            if fault == FaultKind::StoreCut {
                "cut"
            } else {
                "delay"
            }
        ),
        FaultRefusal::NeedsOwnClock => format!(
            "--faults {fault}: needs a store with a clock of its own, reached over the \
             network (--store scheme://HOST:PORT…), or a peer group (--peer); processes \
             on one host, as with the default SQLite file, share one clock"
        ),
        FaultRefusal::NeedsFaketime => format!(
            "--faults {fault}: needs libfaketime (Debian: apt install faketime, or \
             scripts/install-engines; elsewhere set REGENT_LIBFAKETIME to its \
             libfaketimeMT.so.1)"
        ),
        FaultRefusal::NeedsPeerGroup => format!(
            "--faults {fault}: cuts a peer group (--peer) in two; a store's candidates are \
             cut off from their store by store-cut"
        ),
        why => format!("--faults {fault}: {why}"),
    }
}
