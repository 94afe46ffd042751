//! Turning SQLite's result codes into regent's [`ErrorKind`]s.

use regent_core::{ErrorKind, StoreError};
use rusqlite::ErrorCode;
use rusqlite::ffi;

/// The kind of a rusqlite error: whether retrying may help.
pub(crate) fn classify(e: &rusqlite::Error) -> ErrorKind {
    match e {
        rusqlite::Error::SqliteFailure(code, _)
        | rusqlite::Error::SqlInputError { error: code, .. } => classify_code(code),
        // A column regent wrote holds a value of another type: someone else
        // wrote it.
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::Utf8Error(..)
        | rusqlite::Error::InvalidColumnType(..) => ErrorKind::Corrupt,
        rusqlite::Error::InvalidPath(_) => ErrorKind::Config,
        _ => ErrorKind::Protocol,
    }
}

fn classify_code(code: &ffi::Error) -> ErrorKind {
    match code.code {
        // Another connection holds the lock past our busy timeout, or the
        // machine is short of something that may come back.
        ErrorCode::DatabaseBusy
        | ErrorCode::DatabaseLocked
        | ErrorCode::FileLockingProtocolFailed
        | ErrorCode::SchemaChanged
        | ErrorCode::OperationInterrupted
        | ErrorCode::SystemIoFailure
        | ErrorCode::DiskFull
        | ErrorCode::OutOfMemory => ErrorKind::Unavailable,
        ErrorCode::CannotOpen
        | ErrorCode::ReadOnly
        | ErrorCode::PermissionDenied
        | ErrorCode::NoLargeFileSupport => ErrorKind::Config,
        ErrorCode::AuthorizationForStatementDenied => ErrorKind::Auth,
        ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => ErrorKind::Corrupt,
        // SQLITE_ERROR: "no such table" and the like — regent's tables were
        // dropped or altered behind its back.
        ErrorCode::Unknown => ErrorKind::Config,
        _ => ErrorKind::Protocol,
    }
}

/// A [`StoreError`] of the right kind for a rusqlite error, with `context`
/// naming the operation, the election and the path, and the rusqlite error
/// as its source.
pub(crate) fn db_error(context: impl Into<String>, e: rusqlite::Error) -> StoreError {
    StoreError::new(classify(&e), context).with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(code), None)
    }

    #[test]
    fn sqlite_codes_are_classified() {
        let cases = [
            (ffi::SQLITE_BUSY, ErrorKind::Unavailable),
            (ffi::SQLITE_LOCKED, ErrorKind::Unavailable),
            (ffi::SQLITE_IOERR, ErrorKind::Unavailable),
            (ffi::SQLITE_CANTOPEN, ErrorKind::Config),
            (ffi::SQLITE_READONLY, ErrorKind::Config),
            (ffi::SQLITE_PERM, ErrorKind::Config),
            (ffi::SQLITE_AUTH, ErrorKind::Auth),
            (ffi::SQLITE_CORRUPT, ErrorKind::Corrupt),
            (ffi::SQLITE_NOTADB, ErrorKind::Corrupt),
            (ffi::SQLITE_ERROR, ErrorKind::Config),
            (ffi::SQLITE_MISUSE, ErrorKind::Protocol),
        ];
        for (code, kind) in cases {
            assert_eq!(classify(&failure(code)), kind, "code {code}");
        }
        // Extended codes classify by their primary code.
        assert_eq!(
            classify(&failure(ffi::SQLITE_BUSY_SNAPSHOT)),
            ErrorKind::Unavailable
        );
    }

    #[test]
    fn db_error_keeps_the_source() {
        let e = db_error(
            "acquire election 'x' in '/tmp/a.db'",
            failure(ffi::SQLITE_BUSY),
        );
        assert!(e.is_transient());
        assert!(std::error::Error::source(&e).is_some());
        assert!(e.to_string().contains("/tmp/a.db"));
    }
}
