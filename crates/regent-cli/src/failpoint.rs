//! A test hook: hold a process at a named point of a term, so that a test
//! or `regent torture --sweep` can crash the term exactly there.
//!
//! The protocol (the variable `REGENT_FAILPOINT=STAGE:FILE`, the stages,
//! the holder file and its `FILE.go`) is the campaign's contract with the
//! sidecar, written down once in `regent_torture::failpoint`; this is the
//! sidecar's side of it. regent, the shim, the init and the release
//! process inherit the variable; the shim removes it from CMD's
//! environment.

use std::path::Path;
use std::time::Duration;

pub(crate) use regent_torture::failpoint::ENV;
pub(crate) use regent_torture::failpoint::Stage;
use regent_torture::failpoint::{go_file, holder_line, parse_spec};

/// Holds here if the hook names `stage` (see the module docs); `token` is
/// the term's fencing token, if this process knows it.
pub(crate) fn hold(stage: Stage, token: Option<u64>) {
    let Ok(spec) = std::env::var(ENV) else {
        return;
    };
    let Some((at, file)) = parse_spec(&spec) else {
        return;
    };
    if at != stage.name() {
        return;
    }
    // Only the first process to reach the stage holds: the file is
    // created only if it does not exist.
    let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file)
    else {
        return;
    };
    use std::io::Write as _;
    // As /proc names it: inside a PID namespace getpid() says 1.
    let pid = regent_proc::self_pid().map_or(std::process::id().to_string(), |p| p.to_string());
    let _ = f.write_all(holder_line(&pid, token).as_bytes());
    drop(f);
    let go = go_file(file);
    while !Path::new(&go).exists() {
        std::thread::sleep(Duration::from_millis(1));
    }
}
