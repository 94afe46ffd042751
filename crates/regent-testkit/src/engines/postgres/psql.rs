//! SQL as the superuser, through PostgreSQL's own client: `psql` run once
//! per statement against a server or a pooler, bounded in time (a paused
//! server accepts the connection and never answers).

use std::fs::File;
use std::io::{self, Read as _, Seek as _};
use std::path::Path;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use super::super::EngineError;
use super::super::process::POLL;
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
/// [`io::ErrorKind::TimedOut`] when psql has not finished after `timeout`
/// (it is killed then); [`EngineError::Spawn`] when psql cannot run.
pub(super) fn run(
    psql: &Path,
    port: u16,
    database: &str,
    sql: &str,
    timeout: Duration,
    instance: &str,
) -> Result<String, EngineError> {
    let capture = || {
        tempfile::tempfile().map_err(|source| EngineError::Io {
            action: "create a file for psql's output",
            source,
        })
    };
    let (mut out, mut err) = (capture()?, capture()?);
    let clone = |file: &File| {
        file.try_clone().map_err(|source| EngineError::Io {
            action: "create a file for psql's output",
            source,
        })
    };
    let mut command = command_without_pg_vars(psql);
    command
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", SUPERUSER, "-d", database, "-c", sql])
        .env("PGAPPNAME", "regent-testkit")
        .env("PGCONNECT_TIMEOUT", timeout.as_secs().max(2).to_string())
        .stdout(Stdio::from(clone(&out)?))
        .stderr(Stdio::from(clone(&err)?));
    let mut child = command.spawn().map_err(|source| EngineError::Spawn {
        program: "psql",
        source,
    })?;
    drop(command);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(EngineError::Io {
                    action: "get psql's answer in time",
                    source: io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{instance}: no answer to `{sql}` within {timeout:?}"),
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
            step: format!("psql -c {sql:?}"),
            status,
            output: format!("{stdout}{stderr}"),
        });
    }
    Ok(stdout.strip_suffix('\n').unwrap_or(&stdout).to_owned())
}
