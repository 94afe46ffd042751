//! The restart shortcut's proof: a lock file per won session that says,
//! once it is free, that the process which won with that session — and
//! every process it started while it led — is gone.
//!
//! Consul's recipe lets an instance that finds its own ClientID in the key
//! ("we were restarted") lead again at once. Consul cannot tell whether
//! the previous process with that ClientID is gone: its session lives on
//! for up to two TTLs after the last renewal, and a frozen or partitioned
//! process renews nothing yet may still act. What can tell is the kernel:
//!
//! * On winning with session `S`, the holder creates `DIR/S.lock` and takes
//!   an exclusive `flock` on it. The file is created under a temporary
//!   name, locked, then renamed, so that `S.lock` is never seen unlocked
//!   while its holder lives. The descriptor is *not* close-on-exec: every
//!   process the holder starts while it leads (regent's shim, its init,
//!   the command and what the command starts, unless one of them closes
//!   it) holds the same lock.
//! * The kernel releases a `flock` when the last descriptor of its open
//!   file is closed: when every one of those processes has exited, however
//!   it exited (SIGKILL, OOM kill, a crash).
//! * A restarted instance that finds the key locked by session `S'` under
//!   its own ClientID tries `flock(LOCK_EX | LOCK_NB)` on `DIR/S'.lock`.
//!   Only if the file exists **and** the lock is free is the previous
//!   holder proven gone: the instance ends `S'` (`PUT
//!   /v1/session/destroy`), removes the file and acquires as usual, with a
//!   new, larger fencing token. A missing file (another host, another
//!   user, a private `/tmp`, a crash before the file was made) or a held
//!   lock proves nothing, and the instance waits the session out like any
//!   follower.
//!
//! The proof holds where the lock directory is one directory for every
//! process that could be the previous holder: the same host (or the same
//! container filesystem) and the same user. It is never wrong in the other
//! direction: a process that cannot see the file takes no shortcut.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{FlockOperation, Mode, OFlags};

/// The proofs of one store: its directory and the locks this process holds.
#[derive(Debug)]
pub(crate) struct Proofs {
    dir: PathBuf,
    /// Session id → the locked descriptor of `DIR/SESSION.lock`.
    held: Mutex<HashMap<String, OwnedFd>>,
}

/// A previous holder's proof, locked by this process while it ends the
/// session; [`Gone::finish`] removes the file.
#[derive(Debug)]
pub(crate) struct Gone {
    path: PathBuf,
    _lock: OwnedFd,
}

impl Gone {
    /// Removes the proof file (the lock goes with the descriptor).
    pub(crate) fn finish(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether `session` is a session id as Consul makes them (a UUID): the
/// only names used as file names here.
pub(crate) fn is_session_id(session: &str) -> bool {
    !session.is_empty()
        && session.len() <= 64
        && session.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

impl Proofs {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            held: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, session: &str) -> PathBuf {
        self.dir.join(format!("{session}.lock"))
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, OwnedFd>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes and locks the proof of `session`, just won. The descriptor is
    /// inherited by every process this one starts until
    /// [`Proofs::forget`].
    pub(crate) fn hold(&self, session: &str) -> io::Result<()> {
        if !is_session_id(session) {
            return Err(io::Error::other("not a session id"));
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode_0700()
            .create(&self.dir)?;
        let tmp = self
            .dir
            .join(format!(".{session}.{}.tmp", std::process::id()));
        // No CLOEXEC: the children started while this session leads must
        // hold the lock too.
        let fd = rustix::fs::open(
            &tmp,
            OFlags::CREATE | OFlags::TRUNC | OFlags::RDWR | OFlags::NOFOLLOW,
            Mode::RUSR | Mode::WUSR,
        )?;
        let locked = rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive)
            .and_then(|()| rustix::fs::rename(&tmp, self.path(session)));
        if let Err(e) = locked {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
        self.held().insert(session.to_owned(), fd);
        Ok(())
    }

    /// Ends this process's proof of `session` (released or lost): removes
    /// the file, then closes the descriptor. Children that inherited it
    /// keep the lock, on a file nobody can find any more.
    pub(crate) fn forget(&self, session: &str) {
        if let Some(fd) = self.held().remove(session) {
            let _ = std::fs::remove_file(self.path(session));
            drop(fd);
        }
    }

    /// Whether the process that won with `session` on this host, and every
    /// process it started since, is gone: its proof exists and nobody holds
    /// its lock. The proof stays locked by the returned [`Gone`] while the
    /// caller ends the session.
    pub(crate) fn prove_gone(&self, session: &str) -> Option<Gone> {
        if !is_session_id(session) || self.held().contains_key(session) {
            return None;
        }
        let path = self.path(session);
        let fd = rustix::fs::open(
            &path,
            OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).ok()?;
        Some(Gone { path, _lock: fd })
    }
}

trait DirBuilderExt {
    fn mode_0700(&mut self) -> &mut Self;
}

impl DirBuilderExt for std::fs::DirBuilder {
    fn mode_0700(&mut self) -> &mut Self {
        std::os::unix::fs::DirBuilderExt::mode(self, 0o700)
    }
}

/// Where the CLI keeps its proofs: `$XDG_RUNTIME_DIR/regent/consul`, else
/// `TMPDIR/regent-UID/consul`.
pub(crate) fn default_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(run) => PathBuf::from(run).join("regent").join("consul"),
        None => std::env::temp_dir()
            .join(format!("regent-{}", rustix::process::getuid().as_raw()))
            .join("consul"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S1: &str = "0f3c6a2e-1b7d-4c55-9a0e-5d1f2b3c4d5e";

    #[test]
    fn a_held_proof_proves_nothing_a_released_one_proves_the_holder_gone() {
        let dir = tempfile::tempdir().unwrap();
        let holder = Proofs::new(dir.path().join("p"));
        let restarted = Proofs::new(dir.path().join("p"));
        assert!(restarted.prove_gone(S1).is_none(), "no file: no proof");
        holder.hold(S1).unwrap();
        assert!(holder.prove_gone(S1).is_none(), "its own session");
        assert!(
            restarted.prove_gone(S1).is_none(),
            "the holder's lock is held"
        );
        // The holder's descriptor closes (it exited) but the file stays.
        let fd = holder.held().remove(S1).unwrap();
        drop(fd);
        let gone = restarted.prove_gone(S1).expect("the lock is free");
        assert!(
            Proofs::new(dir.path().join("p")).prove_gone(S1).is_none(),
            "the prover holds the lock while it ends the session"
        );
        gone.finish();
        assert!(!dir.path().join("p").join(format!("{S1}.lock")).exists());
    }

    #[test]
    fn a_forgotten_proof_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let proofs = Proofs::new(dir.path().to_owned());
        proofs.hold(S1).unwrap();
        assert!(dir.path().join(format!("{S1}.lock")).exists());
        proofs.forget(S1);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(proofs.prove_gone(S1).is_none());
    }

    #[test]
    fn session_ids_from_the_store_never_name_other_files() {
        for bad in ["", "../x", "a/b", "x.lock", &"a".repeat(65)] {
            assert!(!is_session_id(bad), "{bad}");
            assert!(
                Proofs::new(PathBuf::from("/nonexistent"))
                    .prove_gone(bad)
                    .is_none()
            );
        }
        assert!(is_session_id(S1));
    }

    #[test]
    fn a_child_started_while_leading_keeps_the_proof_held_until_it_exits() {
        let dir = tempfile::tempdir().unwrap();
        let holder = Proofs::new(dir.path().to_owned());
        holder.hold(S1).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // The holder itself dies: its descriptor closes, the file stays.
        drop(holder.held().remove(S1).unwrap());
        let restarted = Proofs::new(dir.path().to_owned());
        assert!(
            restarted.prove_gone(S1).is_none(),
            "the child of the old term still runs"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(restarted.prove_gone(S1).is_some());
    }
}
