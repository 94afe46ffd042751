//! The SQLite store as a [`StoreKind`]: the URL `sqlite:PATH`, no options.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use regent_core::BoxStore;
use regent_core::target::{ConnectFuture, Options, StoreKind, Target, TargetError};

use crate::store::{DEFAULT_BUSY_TIMEOUT, SqliteStore};

/// The SQLite store kind: `sqlite:PATH` (also `sqlite://PATH`; a relative
/// path is relative to the working directory). It has no options.
pub static KIND: StoreKind = StoreKind {
    name: "sqlite",
    schemes: &["sqlite"],
    advises: &[],
    forms: "sqlite:PATH",
    short_forms: "sqlite:PATH",
    default_call_timeout: DEFAULT_BUSY_TIMEOUT,
    options: &[],
    examples: &[
        "regent run --store sqlite:/var/lib/app/regent.db --election jobs --ttl 5s -- python worker.py",
    ],
    parse,
};

/// A SQLite file named by `sqlite:PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqliteTarget {
    path: PathBuf,
}

impl SqliteTarget {
    /// The file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl fmt::Display for SqliteTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sqlite:{}", self.path.display())
    }
}

fn parse(
    url: &str,
    _options: &Options,
    _env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    let rest = url
        .split_once(':')
        .filter(|(scheme, _)| KIND.takes(scheme))
        .map(|(_, rest)| rest)
        .ok_or_else(|| TargetError::url(&KIND, url, "is not a sqlite: URL"))?;
    let path = rest.strip_prefix("//").unwrap_or(rest);
    if path.is_empty() {
        return Err(TargetError::url(
            &KIND,
            url,
            "needs a file path, e.g. sqlite:/var/lib/app/regent.db",
        ));
    }
    Ok(Box::new(SqliteTarget {
        path: PathBuf::from(path),
    }))
}

impl Target for SqliteTarget {
    fn kind(&self) -> &'static StoreKind {
        &KIND
    }

    fn connect(&self, call_timeout: Duration) -> ConnectFuture<'_> {
        Box::pin(async move {
            let store = SqliteStore::builder(&self.path)
                .busy_timeout(call_timeout)
                .open()
                .await?;
            Ok(BoxStore::new(store))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(url: &str) -> Result<String, String> {
        (KIND.parse)(url, &Options::new(), &|_| None)
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn sqlite_urls() {
        assert_eq!(path_of("sqlite:/tmp/x.db"), Ok("sqlite:/tmp/x.db".into()));
        assert_eq!(path_of("sqlite:rel.db"), Ok("sqlite:rel.db".into()));
        assert_eq!(path_of("sqlite:///abs.db"), Ok("sqlite:/abs.db".into()));
        assert_eq!(path_of("SQLite:/x.db"), Ok("sqlite:/x.db".into()));
        assert_eq!(
            path_of("sqlite:"),
            Err(
                "sqlite URL 'sqlite:' needs a file path, e.g. sqlite:/var/lib/app/regent.db".into()
            )
        );
        let e = (KIND.parse)("etcd://h", &Options::new(), &|_| None).unwrap_err();
        assert!(
            matches!(&e, TargetError::Url { store, url, .. } if store.name == "sqlite" && url == "etcd://h"),
            "{e:?}"
        );
    }
}
