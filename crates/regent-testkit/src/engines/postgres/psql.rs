//! SQL as the superuser, through PostgreSQL's own client: `psql` run once
//! per statement against a server or a pooler, bounded in time (a paused
//! server accepts the connection and never answers).

use std::path::Path;
use std::time::Duration;

use super::super::EngineError;
use super::super::process::run_client;
use super::SUPERUSER;
use super::programs::command_without_pg_vars;

/// How long [`Postgres::psql`](super::Postgres::psql) and the kit's own
/// statements wait for an answer.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `sql` with `psql` as [`SUPERUSER`] on `127.0.0.1:port`,
/// database `database`, and returns what it printed: unaligned, tuples
/// only (`-A -t`), fields split by `|`, rows by newlines, without the last
/// newline. `instance` names the server in errors.
///
/// # Errors
///
/// [`EngineError::Setup`] with psql's output when psql fails (it stops at
/// the first error); [`EngineError::Io`] of kind
/// [`std::io::ErrorKind::TimedOut`] when psql has not finished after `timeout`
/// (it is killed then); [`EngineError::Spawn`] when psql cannot run.
pub(super) fn run(
    psql: &Path,
    port: u16,
    database: &str,
    sql: &str,
    timeout: Duration,
    instance: &str,
) -> Result<String, EngineError> {
    let mut command = command_without_pg_vars(psql);
    command
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", SUPERUSER, "-d", database, "-c", sql])
        .env("PGAPPNAME", "regent-testkit")
        .env("PGCONNECT_TIMEOUT", timeout.as_secs().max(2).to_string());
    let stdout = run_client(
        command,
        format!("psql -c {sql:?}"),
        timeout,
        instance,
        |source| EngineError::Spawn {
            program: "psql",
            source,
        },
    )?;
    Ok(stdout.strip_suffix('\n').unwrap_or(&stdout).to_owned())
}
