//! regent's own binary, which it starts again as the shim, the release
//! process, the demo's candidates and torture's candidates.

use crate::error::CliError;

/// The binary to start the shim from: the running image itself, through
/// `/proc/self/exe` (the forked child resolves it to the same image). The
/// path `current_exe()` names stops existing when the file is replaced —
/// as any package upgrade does — and every running `regent run` then failed
/// at its next term; a newer binary there might not speak this one's shim
/// protocol anyway.
pub(crate) fn own_exe() -> Result<std::path::PathBuf, CliError> {
    let running = std::path::Path::new("/proc/self/exe");
    if running.exists() {
        return Ok(running.to_owned());
    }
    std::env::current_exe()
        .map_err(|e| CliError::failure(format!("cannot find regent's own binary: {e}")))
}

/// [`own_exe`] for the shim, which has no use for the error: spawning
/// fails with the path's own message.
pub(crate) fn own_exe_path() -> std::path::PathBuf {
    own_exe().unwrap_or_else(|_| "/proc/self/exe".into())
}
