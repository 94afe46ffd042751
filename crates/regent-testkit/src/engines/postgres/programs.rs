//! Where the PostgreSQL and PgBouncer programs are, and whom they run as.
//!
//! Debian installs PostgreSQL's server programs in
//! `/usr/lib/postgresql/15/bin`, which is not on `PATH`, and PgBouncer in
//! `/usr/sbin`, which is not on an ordinary user's. initdb, postgres,
//! pg_ctl and pgbouncer all refuse to run as root: as root, the kit runs
//! them as the `postgres` user Debian's postgresql-common creates, in
//! directories it hands to that user.

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::super::EngineError;

/// The variable naming the directory of PostgreSQL's programs (`initdb`,
/// `postgres`, `pg_ctl`, `pg_basebackup`, `psql`) instead of
/// [`DEFAULT_BINDIR`].
pub const BINDIR_VAR: &str = "REGENT_POSTGRES_BINDIR";

/// Where Debian's `postgresql-15` installs PostgreSQL's programs.
pub const DEFAULT_BINDIR: &str = "/usr/lib/postgresql/15/bin";

/// The variable naming the `pgbouncer` to run instead of the one on `PATH`
/// (or `/usr/sbin/pgbouncer`).
pub const PGBOUNCER_VAR: &str = "REGENT_PGBOUNCER_BIN";

/// Where Debian's `pgbouncer` installs it.
const DEBIAN_PGBOUNCER: &str = "/usr/sbin/pgbouncer";

/// The user the kit runs the server as when the tests run as root.
const SYSTEM_USER: &str = "postgres";

/// The programs of PostgreSQL the kit runs, found when an engine starts.
#[derive(Debug, Clone)]
pub(super) struct Programs {
    pub(super) initdb: PathBuf,
    pub(super) postgres: PathBuf,
    pub(super) pg_ctl: PathBuf,
    pub(super) pg_basebackup: PathBuf,
    pub(super) psql: PathBuf,
}

impl Programs {
    /// Finds every program in `REGENT_POSTGRES_BINDIR` when that is set
    /// and not empty; else in [`DEFAULT_BINDIR`], then on `PATH`.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalledAt`] or [`EngineError::NotInstalled`]
    /// for the first missing program; both name `scripts/install-engines`.
    pub(super) fn find() -> Result<Self, EngineError> {
        Ok(Self {
            initdb: postgres_program("initdb")?,
            postgres: postgres_program("postgres")?,
            pg_ctl: postgres_program("pg_ctl")?,
            pg_basebackup: postgres_program("pg_basebackup")?,
            psql: postgres_program("psql")?,
        })
    }
}

fn postgres_program(name: &'static str) -> Result<PathBuf, EngineError> {
    if let Some(dir) = std::env::var_os(BINDIR_VAR).filter(|d| !d.is_empty()) {
        let path = Path::new(&dir).join(name);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(EngineError::NotInstalledAt {
                program: name,
                path,
                var: BINDIR_VAR,
            })
        };
    }
    let debian = Path::new(DEFAULT_BINDIR).join(name);
    if is_executable(&debian) {
        return Ok(debian);
    }
    on_path(name).ok_or(EngineError::NotInstalled { program: name })
}

/// `pgbouncer`: the path in `REGENT_PGBOUNCER_BIN` when that is set and
/// not empty; else the first on `PATH`, else Debian's
/// `/usr/sbin/pgbouncer`.
///
/// # Errors
///
/// [`EngineError::NotInstalledAt`] or [`EngineError::NotInstalled`],
/// naming `scripts/install-engines`.
pub(super) fn pgbouncer_program() -> Result<PathBuf, EngineError> {
    if let Some(path) = std::env::var_os(PGBOUNCER_VAR).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(EngineError::NotInstalledAt {
                program: "pgbouncer",
                path,
                var: PGBOUNCER_VAR,
            })
        };
    }
    on_path("pgbouncer")
        .or_else(|| Some(PathBuf::from(DEBIAN_PGBOUNCER)).filter(|p| is_executable(p)))
        .ok_or(EngineError::NotInstalled {
            program: "pgbouncer",
        })
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whom the kit runs PostgreSQL's programs as: the `postgres` user when
/// the tests run as root, else the tests' own user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RunAs {
    /// `(uid, gid)` to switch to; `None`: the current user.
    ids: Option<(u32, u32)>,
}

impl RunAs {
    /// The `postgres` user (from `getent passwd`) when this process runs
    /// as root; else the current user.
    ///
    /// # Errors
    ///
    /// [`EngineError::Io`] (naming `scripts/install-engines`) when the
    /// tests run as root and there is no `postgres` user.
    pub(super) fn detect() -> Result<Self, EngineError> {
        if !rustix::process::geteuid().is_root() {
            return Ok(Self { ids: None });
        }
        let not_found = |source| EngineError::Io {
            action: "find the user `postgres` to run PostgreSQL as (initdb, postgres and \
                     pgbouncer refuse root; Debian's postgresql-common creates the user: \
                     run scripts/install-engines)",
            source,
        };
        let output = Command::new("getent")
            .args(["passwd", SYSTEM_USER])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(not_found)?;
        // name:password:uid:gid:…
        let line = String::from_utf8_lossy(&output.stdout);
        let mut fields = line.trim_end().split(':').skip(2);
        let mut id = || fields.next().and_then(|f| f.parse::<u32>().ok());
        match (id(), id()) {
            (Some(uid), Some(gid)) if output.status.success() => Ok(Self {
                ids: Some((uid, gid)),
            }),
            _ => Err(not_found(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "`getent passwd {SYSTEM_USER}` found no such user ({})",
                    output.status
                ),
            ))),
        }
    }

    /// Hands `path` to the user (a no-op when that is the current user).
    pub(super) fn own(&self, path: &Path) -> Result<(), EngineError> {
        match self.ids {
            Some((uid, gid)) => {
                std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(|source| {
                    EngineError::Io {
                        action: "hand an engine's directory to the user `postgres`",
                        source,
                    }
                })
            }
            None => Ok(()),
        }
    }

    /// A command for `program` running as this user, in `dir`, with stdin
    /// closed and none of the test's `PG*` variables (libpq, psql and the
    /// server read them as settings: `PGHOST`, `PGDATA`, `PGPORT`, …).
    pub(super) fn command(&self, program: &Path, dir: &Path) -> Command {
        let mut command = command_without_pg_vars(program);
        command.current_dir(dir);
        if let Some((uid, gid)) = self.ids {
            // std drops the supplementary groups when root switches user.
            command.uid(uid).gid(gid);
        }
        command
    }
}

/// A command for `program` with stdin closed and none of the test's
/// `PG*` variables, as the current user.
pub(super) fn command_without_pg_vars(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PG") {
            command.env_remove(key);
        }
    }
    command.stdin(Stdio::null());
    command
}
