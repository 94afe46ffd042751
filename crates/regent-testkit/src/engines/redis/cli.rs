//! Commands through Redis's own client: `redis-cli` run once per command,
//! bounded in time (a paused server accepts the connection and never
//! answers).

use std::net::SocketAddr;
use std::time::Duration;

use super::super::EngineError;
use super::super::process::{Program, run_client};
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
/// reply; [`EngineError::Io`] of kind [`std::io::ErrorKind::TimedOut`] when it
/// has not finished after [`CLI_TIMEOUT`] (it is killed then);
/// [`EngineError::NotInstalled`] (naming `scripts/install-engines`) or
/// [`EngineError::Spawn`] when it cannot run.
pub(super) fn run(
    addr: SocketAddr,
    auth: Option<(&str, &str)>,
    args: &[&str],
    instance: &str,
) -> Result<String, EngineError> {
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
    command.args(args);
    let step = format!("redis-cli {}", args.join(" "));
    let stdout = run_client(command, step, CLI_TIMEOUT, instance, |source| {
        program.spawn_error(source)
    })?;
    Ok(stdout.trim().to_owned())
}
