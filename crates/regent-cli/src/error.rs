//! The CLI's errors, each carrying its documented exit code.

use std::fmt;

use regent_core::{ErrorKind, StoreError};

/// Usage or configuration error.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Store unreachable at start, after retries.
pub(crate) const EXIT_UNREACHABLE: u8 = 3;
/// Runtime failure after start.
pub(crate) const EXIT_FAILURE: u8 = 1;

#[derive(Debug)]
pub(crate) struct CliError {
    pub(crate) code: u8,
    message: String,
}

impl CliError {
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_USAGE,
            message: message.into(),
        }
    }

    /// Whatever regent reads from (a store, a peer group's member) cannot
    /// be reached at start.
    #[cfg_attr(not(feature = "peer"), allow(dead_code))]
    pub(crate) fn unreachable(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_UNREACHABLE,
            message: message.into(),
        }
    }

    pub(crate) fn failure(message: impl Into<String>) -> Self {
        Self {
            code: EXIT_FAILURE,
            message: message.into(),
        }
    }

    /// A store error at start: configuration problems are usage errors, an
    /// unreachable store is exit 3, anything else a failure.
    pub(crate) fn from_store(what: &str, e: &StoreError) -> Self {
        let code = match e.kind() {
            ErrorKind::Config | ErrorKind::Auth => EXIT_USAGE,
            ErrorKind::Unavailable => EXIT_UNREACHABLE,
            _ => EXIT_FAILURE,
        };
        Self {
            code,
            message: format!("{what}: {}", chain(e)),
        }
    }
}

impl CliError {
    /// Adds a hint on a line of its own.
    pub(crate) fn with_hint(mut self, hint: &str) -> Self {
        self.message.push_str("\n  hint: ");
        self.message.push_str(hint);
        self
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// An error and its sources, joined by ": ".
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(cause) = src {
        let text = cause.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        src = cause.source();
    }
    s
}
