//! The failpoint protocol: how the crash-point sweep holds a process of a
//! term at a named point of its life, to kill it exactly there.
//!
//! The contract between the sweep and the processes of a term (regent,
//! its shim, the init, the release process), which implement the hook:
//!
//! * The variable [`ENV`] = `STAGE:FILE` ([`spec`]) is set in the
//!   candidates' environment; regent, the shim, the init and the release
//!   process inherit it; the command (CMD) must not.
//! * The process that reaches `STAGE` creates `FILE` — only if it does not
//!   exist, so that candidates started with the same hook hold once
//!   between them — and writes one line into it ([`holder_line`]): its pid
//!   as `/proc` names it (inside a PID namespace `getpid()` says 1) and
//!   the term's fencing token where the process knows it.
//! * It then waits until `FILE.go` ([`go_file`]) exists, and goes on.
//!   Nobody creating `FILE.go` holds it for good: the process is there to
//!   be killed. The sweep reads the holder with [`parse_holder`] (a line
//!   not yet ended by `\n` is not complete), kills its victim, and creates
//!   `FILE.go`.
//!
//! The stages ([`Stage`]):
//!
//! | stage | process | where |
//! |---|---|---|
//! | `regent-acquired` | regent | the acquire answered, before the go |
//! | `shim-before-init` | shim | after `unshare`, before the init starts |
//! | `init-before-cmd` | supervisor | the go taken, before CMD starts |
//! | `regent-renewed` | regent | a renewal answered, before its deadline reaches the supervisor |
//! | `supervisor-stopping` | supervisor | a stop regent asked for, before CMD is stopped |
//! | `regent-release` | regent | CMD gone, before regent gives its lease back |
//! | `release-by-ticket` | release | the ticket read, before the store's release |
//!
//! The supervisor is the init in a PID namespace, the shim without one.
//! A held regent blocks the thread it holds on: the lease keeper goes on
//! in regent's other threads.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The hook's variable: `STAGE:FILE`.
pub const ENV: &str = "REGENT_FAILPOINT";

/// A point of a term's life where a process can be held (see the
/// [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stage {
    /// regent: the acquire answered, before the go.
    RegentAcquired,
    /// The shim: after `unshare`, before the init starts.
    ShimBeforeInit,
    /// The supervisor: the go taken, before CMD starts.
    InitBeforeCmd,
    /// regent: a renewal answered, before its deadline reaches the
    /// supervisor.
    RegentRenewed,
    /// The supervisor: a stop regent asked for, before CMD is stopped.
    SupervisorStopping,
    /// regent: CMD gone, before regent gives its lease back.
    RegentRelease,
    /// The release process: the ticket read, before the store's release.
    ReleaseByTicket,
}

impl Stage {
    /// Every stage, in the order of a term's life.
    pub const ALL: [Self; 7] = [
        Self::RegentAcquired,
        Self::ShimBeforeInit,
        Self::InitBeforeCmd,
        Self::RegentRenewed,
        Self::SupervisorStopping,
        Self::RegentRelease,
        Self::ReleaseByTicket,
    ];

    /// The stage's name, as [`ENV`] gives it.
    pub fn name(self) -> &'static str {
        match self {
            Self::RegentAcquired => "regent-acquired",
            Self::ShimBeforeInit => "shim-before-init",
            Self::InitBeforeCmd => "init-before-cmd",
            Self::RegentRenewed => "regent-renewed",
            Self::SupervisorStopping => "supervisor-stopping",
            Self::RegentRelease => "regent-release",
            Self::ReleaseByTicket => "release-by-ticket",
        }
    }

    /// The stage named `name`, if one is.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The value of [`ENV`] that holds the first process reaching `stage`,
/// with the holder file `file`.
pub fn spec(stage: Stage, file: &Path) -> OsString {
    let mut value = OsString::from(stage.name());
    value.push(":");
    value.push(file);
    value
}

/// The stage name and the holder file a value of [`ENV`] gives; `None`
/// if it is not `STAGE:FILE`. The stage name is not checked: a process
/// compares it with its own stages.
pub fn parse_spec(value: &str) -> Option<(&str, &Path)> {
    let (stage, file) = value.split_once(':')?;
    Some((stage, Path::new(file)))
}

/// The line a holding process writes into the holder file: its pid as
/// `/proc` names it, and the term's fencing token if it knows it.
pub fn holder_line(pid: &str, token: Option<u64>) -> String {
    match token {
        Some(t) => format!("{pid} {t}\n"),
        None => format!("{pid}\n"),
    }
}

/// Who holds at a stage, as the holder file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// The holding process, as `/proc` names it.
    pub pid: i32,
    /// The term's fencing token, if the process knew it.
    pub token: Option<u64>,
}

/// The holder a holder file's text names; `None` until its line is
/// complete (ended by `\n`) or if it does not parse.
pub fn parse_holder(text: &str) -> Option<Holder> {
    if !text.ends_with('\n') {
        return None;
    }
    let mut words = text.split_whitespace();
    let pid = words.next()?.parse().ok()?;
    Some(Holder {
        pid,
        token: words.next().and_then(|t| t.parse().ok()),
    })
}

/// The file whose creation lets the process holding at `file` go on:
/// `FILE.go`.
pub fn go_file(file: &Path) -> PathBuf {
    let mut go = file.as_os_str().to_owned();
    go.push(".go");
    PathBuf::from(go)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_round_trips() {
        let file = Path::new("/tmp/x/sweep-1.held");
        let spec = spec(Stage::RegentRenewed, file);
        assert_eq!(spec, "regent-renewed:/tmp/x/sweep-1.held");
        let (stage, at) = parse_spec(spec.to_str().unwrap()).unwrap();
        assert_eq!(Stage::from_name(stage), Some(Stage::RegentRenewed));
        assert_eq!(at, file);
        assert_eq!(go_file(file), Path::new("/tmp/x/sweep-1.held.go"));
        assert_eq!(
            parse_holder(&holder_line("42", Some(7))),
            Some(Holder {
                pid: 42,
                token: Some(7)
            })
        );
        assert_eq!(
            parse_holder(&holder_line("42", None)),
            Some(Holder {
                pid: 42,
                token: None
            })
        );
        assert_eq!(parse_holder("42 7"), None, "a line not yet complete");
        for s in Stage::ALL {
            assert_eq!(Stage::from_name(s.name()), Some(s));
        }
    }
}
