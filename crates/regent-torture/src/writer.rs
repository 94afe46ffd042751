//! `__torture-writer`: the command every candidate of a campaign runs
//! while it leads. Single-threaded and runtime-free, like the shim.
//!
//! It starts its own background job first (itself again with
//! `--background`, in its process group), so that work orphaned by a
//! careless stop shows up at the fence too. Then both write to the fence
//! every 50 ms with `$REGENT_FENCING_TOKEN` and
//! `$REGENT_LEADER_ID`, reconnecting with a short backoff whenever the
//! connection fails: a stale leader that keeps writing is exactly what the
//! campaign looks for, so the writer never gives up. It ends only by a
//! signal.

//!
//! # The contract with the front end
//!
//! The campaign starts each candidate as `REGENT run … -- REGENT
//! __torture-writer --fence ADDR --campaign ID` (see
//! [`WriterArgs::to_args`]), and the writer starts its background job the
//! same way with `--background`. The program behind `REGENT` (the
//! [`Config::regent`](crate::Config::regent) executable) must therefore
//! take [`MODE`] as its first argument, parse those three flags into a
//! [`WriterArgs`] and call [`main`], with no async runtime: `regent` does
//! so in its hidden `__torture-writer` mode. The campaign finds writers
//! by that first argument and by `--campaign ID` in `/proc`.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// The hidden mode's name: the writer's first argument.
pub const MODE: &str = "__torture-writer";

/// The flag naming the campaign a writer belongs to.
pub(crate) const CAMPAIGN: &str = "--campaign";

/// The flag a background job carries.
pub(crate) const BACKGROUND: &str = "--background";

/// Time between two writes.
const WRITE_EVERY: Duration = Duration::from_millis(50);

/// A writer's arguments after [`MODE`]: `--fence ADDR --campaign ID
/// [--background]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterArgs {
    /// The fence's address (`--fence`).
    pub fence: SocketAddr,
    /// The campaign this writer belongs to (`--campaign`): the nemesis
    /// finds its processes by it, and the end of the campaign finds
    /// leftovers.
    pub campaign: String,
    /// Be the background job, do not start another (`--background`).
    pub background: bool,
}

impl WriterArgs {
    /// The arguments that start this writer: [`MODE`], then its flags.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            MODE.into(),
            "--fence".into(),
            self.fence.to_string().into(),
            CAMPAIGN.into(),
            self.campaign.clone().into(),
        ];
        if self.background {
            args.push(BACKGROUND.into());
        }
        args
    }
}

/// Writes a line on stderr; never panics (a closed stderr loses it).
fn warn(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The writer: starts its background job (unless it is one), then writes
/// to the fence every 50 ms until a signal ends it. Reads
/// `$REGENT_FENCING_TOKEN` and `$REGENT_LEADER_ID`, which `regent run`
/// sets; without them it returns exit code 2 at once.
pub fn main(args: &WriterArgs) -> ExitCode {
    let token: u64 = match std::env::var("REGENT_FENCING_TOKEN")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        Some(t) => t,
        None => {
            warn(format_args!(
                "torture writer: no REGENT_FENCING_TOKEN; run under `regent run`"
            ));
            return ExitCode::from(2);
        }
    };
    let id = std::env::var("REGENT_LEADER_ID").unwrap_or_default();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_graphic()) {
        warn(format_args!(
            "torture writer: REGENT_LEADER_ID is missing or not printable ASCII"
        ));
        return ExitCode::from(2);
    }
    if !args.background {
        let spawned = Command::new("/proc/self/exe")
            .arg0(
                std::env::args_os()
                    .next()
                    .unwrap_or_else(|| "regent".into()),
            )
            .args(
                WriterArgs {
                    background: true,
                    ..args.clone()
                }
                .to_args(),
            )
            .stdin(Stdio::null())
            .spawn();
        // Not waited for: it is the orphan-to-be, and dies by signal.
        if let Err(e) = spawned {
            warn(format_args!(
                "torture writer: cannot start the background job: {e}"
            ));
        }
    }
    let role = if args.background { "bg" } else { "cmd" };
    // As /proc names it: the writer runs in a PID namespace, where
    // getpid() names another number.
    let pid = regent_proc::self_pid().unwrap_or(0);
    let mut seq = 0u64;
    let mut backoff = Duration::from_millis(50);
    let mut conn: Option<(TcpStream, BufReader<TcpStream>)> = None;
    loop {
        if conn.is_none() {
            conn = connect(args.fence);
        }
        let ok = match &mut conn {
            Some((out, replies)) => {
                seq += 1;
                let mut reply = String::new();
                writeln!(out, "W {token} {id} {pid} {role} {seq}").is_ok()
                    && replies.read_line(&mut reply).is_ok_and(|n| n > 0)
            }
            None => false,
        };
        if ok {
            backoff = Duration::from_millis(50);
            std::thread::sleep(WRITE_EVERY);
        } else {
            conn = None;
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }
}

fn connect(addr: SocketAddr) -> Option<(TcpStream, BufReader<TcpStream>)> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(1))).ok()?;
    let _ = s.set_nodelay(true);
    let read = s.try_clone().ok()?;
    Some((s, BufReader::new(read)))
}
