//! `__torture-writer`: the command every torture candidate runs while it
//! leads. Single-threaded and runtime-free, like the shim.
//!
//! It starts its own background job first (itself again with
//! `--background`, in its process group), so that work orphaned by a
//! careless stop shows up at the fence too. Then both write to the fence
//! every [`WRITE_EVERY`] with `$REGENT_FENCING_TOKEN` and
//! `$REGENT_LEADER_ID`, reconnecting with a short backoff whenever the
//! connection fails: a stale leader that keeps writing is exactly what the
//! campaign looks for, so the writer never gives up. It ends only by a
//! signal.

use std::io::{BufRead, BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use clap::Args;

/// The hidden subcommand's name.
pub(crate) const MODE: &str = "__torture-writer";

/// Time between two writes.
const WRITE_EVERY: Duration = Duration::from_millis(50);

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

pub(crate) fn main(args: WriterArgs) -> ExitCode {
    let token: u64 = match std::env::var("REGENT_FENCING_TOKEN")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        Some(t) => t,
        None => {
            warn_user!("torture writer: no REGENT_FENCING_TOKEN; run under `regent run`");
            return ExitCode::from(2);
        }
    };
    let id = std::env::var("REGENT_LEADER_ID").unwrap_or_default();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_graphic()) {
        warn_user!("torture writer: REGENT_LEADER_ID is missing or not printable ASCII");
        return ExitCode::from(2);
    }
    if !args.background {
        let spawned = Command::new("/proc/self/exe")
            .arg0(
                std::env::args_os()
                    .next()
                    .unwrap_or_else(|| "regent".into()),
            )
            .arg(MODE)
            .arg("--fence")
            .arg(args.fence.to_string())
            .arg("--campaign")
            .arg(&args.campaign)
            .arg("--background")
            .stdin(Stdio::null())
            .spawn();
        // Not waited for: it is the orphan-to-be, and dies by signal.
        if let Err(e) = spawned {
            warn_user!("torture writer: cannot start the background job: {e}");
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
