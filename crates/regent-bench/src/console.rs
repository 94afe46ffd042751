//! The harness's own lines: the report's table on standard output, notes
//! and errors on standard error. Neither panics when its stream is closed
//! (a bench piped into `head` still stops everything it started).

use std::io::Write as _;

/// Writes `line` to standard error.
pub(crate) fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Writes `text` to standard output.
pub(crate) fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}
