//! Commands through Redis's own client: `redis-cli` run once per command,
//! bounded in time (a paused server accepts the connection and never
//! answers).

use std::fs::File;
use std::io::{self, Read as _, Seek as _};
use std::net::SocketAddr;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use super::super::EngineError;
use super::super::process::{POLL, Program};
use super::{CLI_VAR, ENV_PREFIX};

/// How long [`Redis::cli`](super::Redis::cli) waits for `redis-cli` to
/// finish before it kills it.
pub const CLI_TIMEOUT: Duration = Duration::from_secs(10);

/// `redis-cli`, from `PATH` or the path in `REGENT_REDIS_CLI_BIN`.
pub(super) fn program() -> Program {
    Program::from_env("redis-cli", CLI_VAR)
}

/// Runs `redis-cli -e -h IP -p PORT [--user U --pass P --no-auth-warning]
/// ARGS…` and returns its standard output without surrounding white space.
/// `instance` names the server in errors.
///
/// # Errors
///
/// [`EngineError::Setup`] naming the command (never the password) with
/// what redis-cli printed when it fails, which with `-e` includes an error
/// reply; [`EngineError::Io`] of kind [`io::ErrorKind::TimedOut`] when it
/// has not finished after [`CLI_TIMEOUT`] (it is killed then);
/// [`EngineError::NotInstalled`] (naming `scripts/install-engines`) or
/// [`EngineError::Spawn`] when it cannot run.
pub(super) fn run(
    addr: SocketAddr,
    auth: Option<(&str, &str)>,
    args: &[&str],
    instance: &str,
) -> Result<String, EngineError> {
    let capture = || {
        tempfile::tempfile().map_err(|source| EngineError::Io {
            action: "create a file for redis-cli's output",
            source,
        })
    };
    let (mut out, mut err) = (capture()?, capture()?);
    let clone = |file: &File| {
        file.try_clone().map_err(|source| EngineError::Io {
            action: "create a file for redis-cli's output",
            source,
        })
    };
    let program = program();
    let mut command = program.command(ENV_PREFIX);
    // -e: an error reply fails redis-cli (else it exits 0).
    command
        .arg("-e")
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()]);
    if let Some((user, password)) = auth {
        command
            .args(["--user", user, "--pass", password])
            .arg("--no-auth-warning");
    }
    command
        .args(args)
        .stdout(Stdio::from(clone(&out)?))
        .stderr(Stdio::from(clone(&err)?));
    let mut child = command
        .spawn()
        .map_err(|source| program.spawn_error(source))?;
    drop(command);
    let step = format!("redis-cli {}", args.join(" "));
    let deadline = Instant::now() + CLI_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(EngineError::Io {
                    action: "get redis-cli's answer in time",
                    source: io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{instance}: no answer to `{step}` within {CLI_TIMEOUT:?}"),
                    ),
                });
            }
        }
    };
    let read = |file: &mut File| {
        let mut text = String::new();
        let _ = file.rewind();
        let _ = file.read_to_string(&mut text);
        text
    };
    let (stdout, stderr) = (read(&mut out), read(&mut err));
    if !status.success() {
        return Err(EngineError::Setup {
            instance: instance.to_owned(),
            step,
            status,
            output: format!("{stdout}{stderr}"),
        });
    }
    Ok(stdout.trim().to_owned())
}
