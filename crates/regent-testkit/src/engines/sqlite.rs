//! SQLite, the embedded store: an "engine" that is a database file in a
//! temporary directory of its own, for the tests every store runs.
//!
//! There is no server, so there is no process to kill, pause or restart:
//! see [Engines without a process](super::Engine#engines-without-a-process).
//! The file itself is made by the first `regent` that opens it.
//!
//! ```
//! use regent_testkit::engines::{Engine, Signaled, Sqlite};
//!
//! let mut sqlite = Sqlite::start()?;
//! assert!(sqlite.store_url().starts_with("sqlite:/"));
//! assert_eq!(sqlite.pid(), None);
//! assert_eq!(sqlite.kill(), Signaled::NoProcess);
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;

use super::{Engine, EngineError, Signaled};

/// A SQLite database file `e.db` in a temporary directory, removed on drop.
#[derive(Debug)]
pub struct Sqlite {
    dir: TempDir,
}

impl Sqlite {
    /// The database file, `DIR/e.db` (made by its first client).
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("e.db")
    }

    /// The temporary directory holding the file.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Engine for Sqlite {
    /// Creates the temporary directory.
    ///
    /// # Errors
    ///
    /// [`EngineError::Io`] when it cannot be created. SQLite is compiled
    /// into regent: nothing needs to be installed.
    fn start() -> Result<Self, EngineError> {
        let dir = tempfile::Builder::new()
            .prefix("regent-sqlite-")
            .tempdir()
            .map_err(|source| EngineError::Io {
                action: "create a temporary directory for SQLite",
                source,
            })?;
        Ok(Self { dir })
    }

    fn kind(&self) -> &'static str {
        "sqlite"
    }

    /// `sqlite:DIR/e.db`.
    fn store_url(&self) -> String {
        format!("sqlite:{}", self.path().display())
    }

    /// Always `None`: no process.
    fn pid(&self) -> Option<u32> {
        None
    }

    /// Whether the directory is still there.
    fn is_healthy(&self) -> bool {
        self.dir.path().is_dir()
    }

    /// Does nothing: [`Signaled::NoProcess`].
    fn kill(&mut self) -> Signaled {
        Signaled::NoProcess
    }

    /// Does nothing: [`Signaled::NoProcess`].
    fn pause(&mut self) -> Signaled {
        Signaled::NoProcess
    }

    /// Does nothing: [`Signaled::NoProcess`].
    fn resume(&mut self) -> Signaled {
        Signaled::NoProcess
    }

    /// Does nothing: [`Signaled::NoProcess`]; the file stays usable.
    fn stop(&mut self) -> Signaled {
        Signaled::NoProcess
    }

    /// Does nothing and succeeds: the file is the same data.
    fn restart(&mut self) -> Result<(), EngineError> {
        Ok(())
    }

    /// A note that there is no log.
    fn log_tail(&self, _lines: usize) -> String {
        "(sqlite is embedded in its clients: no engine log)".to_owned()
    }

    /// regent's SQLite store polls the file every 100 ms.
    fn watch_delay(&self) -> Duration {
        Duration::from_millis(100)
    }
}
