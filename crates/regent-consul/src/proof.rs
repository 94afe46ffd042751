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
//!   Only if the file exists, names this host's boot (the kernel's
//!   `boot_id`, written into it by the holder), lies on a local
//!   filesystem, **and** its lock is free is the previous holder proven
//!   gone: the instance takes `S'` over (renews it and locks the key again
//!   under it, which gives a new, larger fencing token) and holds the
//!   proof itself. Anything else (no file: another host, another user, a
//!   private `/tmp`; another boot; a network filesystem, whose locks
//!   another host's kernel cannot see; a held lock) proves nothing, and the
//!   instance waits the session out like any follower.
//!
//! The directory must be this user's own: every component that is not a
//! root-owned system directory (`/tmp`, `/run/user`) must belong to the
//! effective user and be writable by nobody else, and none may be a
//! symbolic link; otherwise another user could plant a file that proves
//! anything, and the shortcut is off.
//!
//! Limits, stated in the crate docs too: a process of the term that closes
//! its inherited descriptors and keeps running (a daemon that escaped a
//! PID namespace; Python's `subprocess` closes them by default), or that
//! unlocks the descriptor, frees the proof early.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::FdFlags;

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
    lock: OwnedFd,
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
            .mode(0o700)
            .create(&self.dir)?;
        check_private(&self.dir)?;
        let boot = boot_id()?;
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
            .and_then(|()| write_all(&fd, boot.as_bytes()))
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
        check_private(&self.dir).ok()?;
        let path = self.path(session);
        let fd = rustix::fs::open(
            &path,
            OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        if !is_local(&fd) {
            return None;
        }
        rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).ok()?;
        let mut written = [0_u8; 64];
        let n = rustix::io::pread(&fd, &mut written, 0).ok()?;
        if written.get(..n)? != boot_id().ok()?.as_bytes() {
            return None;
        }
        Some(Gone { path, lock: fd })
    }

    /// Makes `gone`'s proof this process's own, for `session`, which it
    /// took over: the descriptor becomes inheritable, as [`Proofs::hold`]'s.
    pub(crate) fn adopt(&self, gone: Gone, session: &str) {
        match rustix::io::fcntl_setfd(&gone.lock, FdFlags::empty()) {
            Ok(()) => {
                self.held().insert(session.to_owned(), gone.lock);
            }
            Err(_) => gone.finish(),
        }
    }
}

/// The kernel's id of this boot: a proof from another boot proves
/// nothing here.
fn boot_id() -> io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?
        .trim()
        .to_owned())
}

fn write_all(fd: &OwnedFd, mut bytes: &[u8]) -> rustix::io::Result<()> {
    while !bytes.is_empty() {
        let n = rustix::io::write(fd, bytes)?;
        bytes = &bytes[n..];
    }
    Ok(())
}

/// Whether `fd`'s file lies on a filesystem whose `flock`s this kernel
/// alone decides (tmpfs, ext4, xfs, btrfs, overlayfs, f2fs, zfs): not on
/// NFS, CIFS, FUSE or a cluster filesystem, where another host's locks
/// are not seen or a lock may be dropped under a live holder.
fn is_local(fd: &OwnedFd) -> bool {
    const LOCAL: [u64; 7] = [
        0x0102_1994, // tmpfs
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // xfs
        0x9123_683E, // btrfs
        0x794C_7630, // overlayfs
        0xF2F5_2010, // f2fs
        0x2FC1_2FC1, // zfs
    ];
    rustix::fs::fstatfs(fd)
        .is_ok_and(|fs| u64::try_from(fs.f_type).is_ok_and(|t| LOCAL.contains(&t)))
}

/// Checks that `dir` is this user's own: every component up to `/` is a
/// directory (not a symbolic link) owned by the effective user or by root,
/// that nobody else may write, unless it is root's and sticky (`/tmp`).
fn check_private(dir: &Path) -> io::Result<()> {
    let me = rustix::process::geteuid().as_raw();
    let mut at = Some(dir);
    while let Some(path) = at {
        let meta = std::fs::symlink_metadata(path)?;
        let mode = meta.mode();
        let sticky_root = meta.uid() == 0 && mode & 0o1000 != 0;
        let others_write = mode & 0o022 != 0;
        if !meta.file_type().is_dir()
            || (meta.uid() != me && meta.uid() != 0)
            || (others_write && !sticky_root)
        {
            return Err(io::Error::other(format!(
                "{} is not this user's own directory (owner {}, mode {:o})",
                path.display(),
                meta.uid(),
                mode & 0o7777
            )));
        }
        at = path.parent().filter(|p| !p.as_os_str().is_empty());
    }
    Ok(())
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

    /// The tests hold inheritable descriptors and one starts a child: run
    /// them one at a time, so that no child inherits another test's lock.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    const S1: &str = "0f3c6a2e-1b7d-4c55-9a0e-5d1f2b3c4d5e";

    #[test]
    fn a_held_proof_proves_nothing_a_released_one_proves_the_holder_gone() {
        let _serial = serial();
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
    fn a_directory_others_may_write_or_a_link_proves_nothing() {
        let _serial = serial();
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let proofs = Proofs::new(open.join("p"));
        assert!(proofs.hold(S1).is_err(), "a world-writable parent");
        let link = dir.path().join("link");
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), &link).unwrap();
        assert!(Proofs::new(link).hold(S1).is_err(), "a symbolic link");
        // A proof planted where only the owner may write is still checked.
        let good = Proofs::new(dir.path().join("good"));
        good.hold(S1).unwrap();
        drop(good.held().remove(S1));
        std::fs::set_permissions(
            dir.path().join("good"),
            std::fs::Permissions::from_mode(0o733),
        )
        .unwrap();
        assert!(
            Proofs::new(dir.path().join("good"))
                .prove_gone(S1)
                .is_none(),
            "others may write the directory now"
        );
    }

    #[test]
    fn a_proof_of_another_boot_proves_nothing() {
        let _serial = serial();
        let dir = tempfile::tempdir().unwrap();
        let proofs = Proofs::new(dir.path().to_owned());
        proofs.hold(S1).unwrap();
        drop(proofs.held().remove(S1));
        std::fs::write(
            dir.path().join(format!("{S1}.lock")),
            "00000000-0000-0000-0000-000000000000",
        )
        .unwrap();
        assert!(Proofs::new(dir.path().to_owned()).prove_gone(S1).is_none());
    }

    #[test]
    fn a_forgotten_proof_leaves_no_file() {
        let _serial = serial();
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
        let _serial = serial();
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
        let _serial = serial();
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
