//! A test hook: hold a process at a named point of a term, so that a test
//! or `regent torture --sweep` can crash the term exactly there.
//!
//! `REGENT_FAILPOINT=STAGE:FILE` (regent, the shim, the init and the
//! release process inherit it; CMD does not): the process that reaches
//! STAGE creates FILE, writes its pid as `/proc` names it (and the term's fencing token, where
//! the process knows it) into it, and waits until `FILE.go` exists, then
//! goes on. Only the first process to reach the stage holds
//! (FILE is created only if it does not exist), so candidates started
//! with the same hook hold once between them. Nobody creating `FILE.go`
//! holds it for good: the process is there to be killed.
//!
//! The stages:
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

use std::time::Duration;

/// The hook's variable.
pub(crate) const ENV: &str = "REGENT_FAILPOINT";

/// Holds here if the hook names `stage` (see the module docs); `token` is
/// the term's fencing token, if this process knows it.
pub(crate) fn hold(stage: &str, token: Option<u64>) {
    let Ok(spec) = std::env::var(ENV) else {
        return;
    };
    let Some((at, file)) = spec.split_once(':') else {
        return;
    };
    if at != stage {
        return;
    }
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
    let _ = match token {
        Some(t) => writeln!(f, "{pid} {t}"),
        None => writeln!(f, "{pid}"),
    };
    drop(f);
    let go = format!("{file}.go");
    while !std::path::Path::new(&go).exists() {
        std::thread::sleep(Duration::from_millis(1));
    }
}
