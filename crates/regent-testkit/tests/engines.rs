//! The [`Engine`] contract, on every engine of the kit's one list
//! (`for_every_engine!`, each test with an engine of its own): each test
//! runs as `sqlite::NAME`, `etcd::NAME`, … against the real engine. An engine without a process (SQLite) must say
//! so ([`Signaled::NoProcess`], no PID) and stay available.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use regent_testkit::engines::{Engine, Etcd, Signaled, Sqlite};

/// The state letter of `/proc/PID/stat` (`T` when stopped), `None` once
/// the process is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

fn starts_healthy_with_a_store_url_of_its_kind(engine: Box<dyn Engine>) {
    assert!(engine.is_healthy(), "{engine:?}");
    let url = engine.store_url();
    assert!(
        url.starts_with(&format!("{}:", engine.kind())),
        "{url} is not a {} URL",
        engine.kind()
    );
    match engine.pid() {
        Some(pid) => assert!(Path::new(&format!("/proc/{pid}")).exists()),
        None => assert_eq!(engine.kind(), "sqlite", "only SQLite has no process"),
    }
}

fn kill_reaps_the_process_and_restart_comes_back_on_the_same_url(mut engine: Box<dyn Engine>) {
    let url = engine.store_url();
    let pid = engine.pid();
    let killed = engine.kill();
    match pid {
        Some(pid) => {
            assert_eq!(killed, Signaled::Sent);
            assert_eq!(engine.pid(), None);
            assert_eq!(state(pid), None, "pid {pid} outlived kill");
            assert!(!engine.is_healthy());
            assert_eq!(engine.kill(), Signaled::NotRunning);
        }
        None => {
            assert_eq!(killed, Signaled::NoProcess);
            assert!(engine.is_healthy(), "a store without process stays");
        }
    }
    engine.restart().expect("restart");
    assert!(engine.is_healthy());
    assert_eq!(engine.store_url(), url);
    assert_eq!(engine.pid().is_some(), pid.is_some());
}

fn pause_stops_answering_until_resume(mut engine: Box<dyn Engine>) {
    let paused = engine.pause();
    let Some(pid) = engine.pid() else {
        assert_eq!(paused, Signaled::NoProcess);
        assert!(engine.is_healthy());
        assert_eq!(engine.resume(), Signaled::NoProcess);
        return;
    };
    assert_eq!(paused, Signaled::Sent);
    eventually("SIGSTOP to take effect", || state(pid) == Some('T'));
    assert!(!engine.is_healthy(), "a paused engine answered");
    assert_eq!(engine.resume(), Signaled::Sent);
    eventually("the engine to answer again", || engine.is_healthy());
    assert_eq!(engine.pid(), Some(pid), "pause and resume keep the process");
}

fn a_paused_engine_still_stops_and_its_log_stays(mut engine: Box<dyn Engine>) {
    let pid = engine.pid();
    let _ = engine.pause();
    let stopped = engine.stop();
    assert_eq!(engine.pid(), None);
    match pid {
        Some(pid) => {
            assert_eq!(stopped, Signaled::Sent);
            assert_eq!(state(pid), None, "pid {pid} outlived stop");
            assert!(!engine.log_tail(5).is_empty());
        }
        None => assert_eq!(stopped, Signaled::NoProcess),
    }
    engine.restart().expect("restart after stop");
    assert!(engine.is_healthy());
}

fn dropping_the_engine_stops_its_process(engine: Box<dyn Engine>) {
    let pid = engine.pid();
    drop(engine);
    if let Some(pid) = pid {
        assert_eq!(state(pid), None, "pid {pid} outlived drop");
    }
}

regent_testkit::for_every_engine!(
    own: std::convert::identity,
    [
        starts_healthy_with_a_store_url_of_its_kind,
        kill_reaps_the_process_and_restart_comes_back_on_the_same_url,
        pause_stops_answering_until_resume,
        a_paused_engine_still_stops_and_its_log_stays,
        dropping_the_engine_stops_its_process,
    ]
);

#[test]
fn an_engine_downcasts_to_its_own_type() {
    let mut engine: Box<dyn Engine> = Box::new(Sqlite::start().unwrap());
    assert!(engine.downcast_ref::<Etcd>().is_none());
    let sqlite = engine.downcast_mut::<Sqlite>().expect("a Sqlite");
    assert_eq!(
        format!("sqlite:{}", sqlite.path().display()),
        engine.store_url()
    );
}

#[test]
fn a_sqlite_file_lives_in_its_own_directory_removed_on_drop() {
    let sqlite = Sqlite::start().unwrap();
    let dir = sqlite.dir().to_owned();
    assert!(sqlite.path().starts_with(&dir) && dir.is_dir());
    drop(sqlite);
    assert!(!dir.exists());
}

#[test]
fn engines_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send + ?Sized>() {}
    assert_send_sync::<Sqlite>();
    assert_send_sync::<Signaled>();
    assert_send::<dyn Engine>();
}
