//! The wake-up bell: a release, and a new leader's win, wake the watches
//! of every process at once, rather than at their next poll.
//!
//! SQLite tells no other connection about a commit, so followers poll
//! (see the crate docs, "Watch"): on its own, a graceful hand-over waits
//! for the next poll, up to the poll interval (100 ms). The bell removes
//! that wait for the two changes of a term a watch waits for: beside the
//! database `PATH` lies the file `PATH-wake`, and a connection thread
//! whose commit deleted a lease row (a release) or wrote a won one writes
//! one byte to it. (It rang on releases alone at first: candidates took
//! over at once, but an observer named the new leader only at its next
//! poll, up to 100 ms later.) Every store
//! open on the file watches it with inotify; its bell thread, woken by the
//! write, asks its connection thread to poll now.
//!
//! Why a file of its own and not the database or its WAL: every commit,
//! renewals included, writes those, and a poll per renewal of any process
//! would multiply the polls of a host with many elections; a release and
//! a win are rare, once per term. Why inotify: the kernel wakes exactly
//! the watchers of that file,
//! whatever process or container (on a shared bind mount) they run in, and
//! nothing needs to be cleaned up when a process dies.
//!
//! The bell is a hint, never needed for safety or liveness: a store that
//! cannot create, write or watch it (a read-only directory, an inotify
//! limit reached, the file deleted) logs it at debug level and polls as
//! before. A spurious ring costs one poll.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use rustix::fs::inotify;

/// The bell's file beside the database at `db`: `DB-wake`.
pub(crate) fn path_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wake");
    PathBuf::from(name)
}

/// The ringing side, held by the connection thread.
pub(crate) struct Ringer {
    file: File,
}

impl Ringer {
    /// Opens (creating it if missing) the bell of the database at `db`,
    /// which is open already. The bell gets the database file's
    /// permissions, so that whoever may write the database may ring.
    pub(crate) fn open(db: &Path) -> Option<Ringer> {
        let path = path_of(db);
        let mode = std::fs::metadata(db)
            .map(|m| m.permissions().mode() & 0o666)
            .unwrap_or(0o644);
        match OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(mode)
            .open(&path)
        {
            Ok(file) => Some(Ringer { file }),
            Err(e) => {
                tracing::debug!(bell = %path.display(), error = %e, "sqlite store: cannot open the wake-up bell; other processes' followers see releases at their next poll");
                None
            }
        }
    }

    /// Rings: one byte written at the start of the file (its size stays
    /// one byte).
    pub(crate) fn ring(&self) {
        if let Err(e) = self.file.write_at(&[1], 0) {
            tracing::debug!(error = %e, "sqlite store: cannot ring the wake-up bell");
        }
    }
}

/// The watching side: an inotify watch on the bell and the thread that
/// reads it. Dropping it removes the watch, which ends the thread.
pub(crate) struct Listener {
    inotify: Arc<OwnedFd>,
    watch: i32,
}

impl Listener {
    /// Watches the bell of the database at `db` (created by the connection
    /// thread as it opened); at every ring, `wake` runs on the bell thread
    /// with what `target` still points to. The thread ends when the watch
    /// is removed (this listener dropped, the bell deleted or moved) or
    /// `target` is gone.
    pub(crate) fn start<T: Send + Sync + 'static>(
        db: &Path,
        target: Weak<T>,
        wake: fn(&T),
    ) -> Option<Listener> {
        let path = path_of(db);
        let started = (|| {
            let fd = inotify::init(inotify::CreateFlags::CLOEXEC)?;
            let watch = inotify::add_watch(
                &fd,
                &path,
                inotify::WatchFlags::MODIFY
                    | inotify::WatchFlags::DELETE_SELF
                    | inotify::WatchFlags::MOVE_SELF,
            )?;
            Ok::<_, rustix::io::Errno>((Arc::new(fd), watch))
        })();
        let (fd, watch) = match started {
            Ok(started) => started,
            Err(e) => {
                tracing::debug!(bell = %path.display(), error = %e, "sqlite store: cannot watch the wake-up bell; releases by other processes are seen at the next poll");
                return None;
            }
        };
        let thread_fd = Arc::clone(&fd);
        let spawned = std::thread::Builder::new()
            .name("regent-sqlite-bell".into())
            .spawn(move || listen(&thread_fd, &path, &target, wake));
        match spawned {
            Ok(_) => Some(Listener { inotify: fd, watch }),
            Err(e) => {
                tracing::debug!(error = %e, "sqlite store: cannot start the wake-up bell's thread");
                None
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // The kernel answers with IN_IGNORED, which wakes the thread to
        // find its target gone. (If the watch is gone already, so is the
        // thread, or it is about to end.)
        let _ = inotify::remove_watch(self.inotify.as_fd(), self.watch);
    }
}

/// The bell thread: one wake-up per read of events (a burst of rings is
/// one poll), until the watch goes or `target` does.
fn listen<T>(fd: &OwnedFd, path: &Path, target: &Weak<T>, wake: fn(&T)) {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 1024];
    let mut events = inotify::Reader::new(fd, &mut buf);
    loop {
        let mut rang = false;
        let mut gone = false;
        loop {
            match events.next() {
                Ok(event) => {
                    let flags = event.events();
                    if flags.intersects(
                        inotify::ReadFlags::IGNORED
                            | inotify::ReadFlags::DELETE_SELF
                            | inotify::ReadFlags::MOVE_SELF,
                    ) {
                        gone = true;
                    }
                    if flags.contains(inotify::ReadFlags::MODIFY) {
                        rang = true;
                    }
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    tracing::debug!(bell = %path.display(), error = %e, "sqlite store: the wake-up bell cannot be read; polling only");
                    return;
                }
            }
            if events.is_buffer_empty() {
                break;
            }
        }
        let Some(target) = target.upgrade() else {
            return;
        };
        if rang {
            wake(&target);
        }
        drop(target);
        if gone {
            tracing::debug!(bell = %path.display(), "sqlite store: the wake-up bell is no longer watched; polling only");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let until = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_ring_wakes_every_listener_and_a_dropped_listener_ends_its_thread() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("regent.db");
        std::fs::write(&db, b"").unwrap();
        let ringer = Ringer::open(&db).expect("the bell opens");
        assert!(path_of(&db).exists());
        let (a, b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let bump = |n: &AtomicUsize| {
            n.fetch_add(1, Ordering::SeqCst);
        };
        let listen_a = Listener::start(&db, Arc::downgrade(&a), bump).expect("watch a");
        let listen_b = Listener::start(&db, Arc::downgrade(&b), bump).expect("watch b");
        ringer.ring();
        wait_for("both listeners to wake", || {
            a.load(Ordering::SeqCst) >= 1 && b.load(Ordering::SeqCst) >= 1
        });
        assert_eq!(std::fs::metadata(path_of(&db)).unwrap().len(), 1);
        // A dropped listener's thread ends: its fd's last holder is the
        // thread, so the fd count of the process goes back.
        let weak_fd = Arc::downgrade(&listen_a.inotify);
        drop(listen_a);
        wait_for("the thread of a dropped listener to end", || {
            weak_fd.strong_count() == 0
        });
        let before = b.load(Ordering::SeqCst);
        ringer.ring();
        wait_for("the other listener to wake again", || {
            b.load(Ordering::SeqCst) > before
        });
        drop(listen_b);
    }

    #[test]
    fn a_listener_whose_target_is_gone_ends_at_the_next_ring() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("regent.db");
        std::fs::write(&db, b"").unwrap();
        let ringer = Ringer::open(&db).unwrap();
        let target = Arc::new(AtomicUsize::new(0));
        let listener = Listener::start(&db, Arc::downgrade(&target), |n: &AtomicUsize| {
            n.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let weak_fd = Arc::downgrade(&listener.inotify);
        drop(target);
        ringer.ring();
        // The thread drops its fd as it ends; the listener holds the other.
        wait_for("the thread to end", || weak_fd.strong_count() == 1);
    }

    #[test]
    fn no_bell_where_it_cannot_be_made_and_no_panic() {
        let db = Path::new("/nonexistent-dir-for-regent/regent.db");
        assert!(Ringer::open(db).is_none());
        let target = Arc::new(());
        assert!(Listener::start(db, Arc::downgrade(&target), |()| {}).is_none());
    }
}
