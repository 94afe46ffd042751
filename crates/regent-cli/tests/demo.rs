//! `regent demo`: finishes, prints the failover table with a measured time
//! for each failure, and leaves no process behind — on its default SQLite
//! file, and on etcd with the `--etcd-*` flags passed on to its candidates.
//!
//! This binary holds one test because it makes the test process a child
//! subreaper: every process the demo leaves behind is reparented here,
//! where it can be found by its parent pid, instead of to init.

mod common;

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rustix::process::WaitOptions;

#[test]
fn demo_with_three_candidates_prints_three_measured_failovers_and_cleans_up() {
    let me = rustix::process::getpid();
    rustix::process::set_child_subreaper(Some(me)).expect("PR_SET_CHILD_SUBREAPER");
    let me = me.as_raw_nonzero().get();
    demo(me, &[], None);

    // On etcd with a user: the flags reach every candidate (a candidate
    // without them could not authenticate, and the demo would not finish).
    let etcd = regent_testkit::engines::Etcd::builder()
        .auth("demo-user", "demo-secret")
        .start()
        .unwrap_or_else(|e| panic!("cannot start etcd: {e}"));
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "demo-secret\n").unwrap();
    let store = format!("etcd://{}/demos", etcd.endpoint());
    let etcd_pid = etcd.pid().map(|p| i32::try_from(p).unwrap());
    demo(
        me,
        &[
            "--store",
            &store,
            "--election",
            "etcd-demo",
            "--etcd-user",
            "demo-user",
            "--etcd-password-file",
            password.to_str().unwrap(),
        ],
        etcd_pid,
    );
    let keys = etcd
        .etcdctl(["get", "--prefix", "--keys-only", "/demos/"])
        .stdout;
    assert!(
        String::from_utf8_lossy(&keys).trim().is_empty(),
        "the demo left keys behind: {}",
        String::from_utf8_lossy(&keys)
    );
}

/// Runs `regent demo --candidates 3 --ttl 1s EXTRA` as a child of this
/// subreaper (`me`) and checks its table and that nothing is left behind
/// (but `ours`, the test's own etcd, also a child of `me`).
fn demo(me: i32, extra: &[&str], ours: Option<i32>) {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("demo.out");
    let err_path = dir.path().join("demo.err");
    let mut demo = Command::new(REGENT)
        .args(["demo", "--candidates", "3", "--ttl", "1s"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .expect("spawn regent demo");
    let demo_pid = i32::try_from(demo.id()).unwrap();

    // Every process seen under the demo, by (pid, start time) so that a
    // recycled pid is not mistaken for a leftover.
    let mut seen: BTreeMap<(i32, u64), String> = BTreeMap::new();
    let started = Instant::now();
    let status = loop {
        for p in descendants(demo_pid) {
            if let Some(st) = stat(p) {
                seen.entry((p, st.start_ticks))
                    .or_insert_with(|| cmdline(p));
            }
        }
        if let Some(s) = demo.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(60) {
            kill_tree(demo_pid);
            let _ = demo.kill();
            let _ = demo.wait();
            panic!(
                "the demo did not finish within 60 s\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    eprintln!("demo took {:?}\n{stdout}", started.elapsed());

    // Leftovers: orphans reparented to this subreaper, and anything seen
    // under the demo that still runs. Killed by pid before asserting.
    std::thread::sleep(Duration::from_millis(200));
    let orphans: Vec<(i32, String)> = descendants(me)
        .into_iter()
        .filter(|&p| alive(p) && Some(p) != ours)
        .map(|p| (p, cmdline(p)))
        .collect();
    let survivors: Vec<(i32, String)> = seen
        .iter()
        .filter(|((p, start), _)| alive(*p) && stat(*p).is_some_and(|s| s.start_ticks == *start))
        .map(|((p, _), cmd)| (*p, cmd.clone()))
        .collect();
    for (p, _) in orphans.iter().chain(&survivors) {
        kill_tree(*p);
    }
    while let Ok(Some(_)) = rustix::process::wait(WaitOptions::NOHANG) {}
    assert!(
        seen.len() >= 9,
        "saw only {} processes under the demo (3 candidates, shims, tasks expected): {seen:?}",
        seen.len()
    );
    assert!(
        orphans.is_empty() && survivors.is_empty(),
        "the demo left processes behind: orphans {orphans:?}, survivors {survivors:?}"
    );

    assert_eq!(
        status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    for cause in ["kill -9", "SIGTERM", "SIGSTOP"] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(cause))
            .unwrap_or_else(|| panic!("no table row for {cause}:\n{stdout}"));
        let took = row
            .split_whitespace()
            .last()
            .and_then(|t| t.strip_suffix('s'))
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("row {row:?} has no measured time"));
        assert!((0.0..10.0).contains(&took), "{cause}: failover of {took}s");
    }
    let removed = stdout
        .lines()
        .find_map(|l| l.split("removed ").nth(1))
        .expect("the demo names its temporary directory");
    assert!(
        !std::path::Path::new(removed.trim()).exists(),
        "{removed} was not removed"
    );
}
