//! `regent status --json` and `regent watch --json` print the documented
//! objects: `{"election": NAME, "leader": null | {"id", "token", "metadata"},
//! "candidates": [{"id", "priority"}]}`, the candidates where the store
//! lists them.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use rustix::process::Signal;
use serde_json::{Value, json};

fn leader_object(id: &str, token: u64) -> Value {
    json!({"election": ELECTION, "leader": {"id": id, "token": token, "metadata": {}}})
}

/// The object without its `"candidates"`, which must be, where present, a
/// list of `{"id", "priority"}` naming only `allowed`.
fn without_candidates(mut v: Value, allowed: &[&str]) -> Value {
    if let Some(list) = v.as_object_mut().and_then(|o| o.remove("candidates")) {
        let list = list
            .as_array()
            .unwrap_or_else(|| panic!("candidates: {list}"));
        for c in list {
            let id = c["id"]
                .as_str()
                .unwrap_or_else(|| panic!("a candidate: {c}"));
            assert!(allowed.contains(&id), "{id} listed, not one of {allowed:?}");
            assert!(c.get("priority").is_some(), "{c}");
        }
    }
    v
}

fn status_json_without_then_with_a_leader(mut sb: Sandbox) {
    let out = sb.run_bounded(
        &[
            "status",
            "--store",
            &sb.store(),
            "--election",
            ELECTION,
            "--json",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let none: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        without_candidates(none, &[]),
        json!({"election": ELECTION, "leader": null})
    );

    let ttl = sb.ttl();
    sb.candidate("c1", &ttl, &[]);
    let start = sb.first_start(Duration::from_secs(10));
    assert_eq!(
        without_candidates(sb.status(), &["c1"]),
        leader_object("c1", start.token)
    );

    let human = sb.run_bounded(
        &["status", "--store", &sb.store(), "--election", ELECTION],
        Duration::from_secs(10),
    );
    let first = human.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!("election e: leader c1 (token {})", start.token)
    );
}

/// A `regent watch --json` whose stdout lines arrive on a channel; killed
/// with its tree on drop.
struct Watch {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
}

impl Watch {
    fn start(sb: &Sandbox) -> Self {
        let mut child = sb
            .command()
            .args([
                "watch",
                "--store",
                &sb.store(),
                "--election",
                ELECTION,
                "--json",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn regent watch");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    fn next(&self, within: Duration, what: &str) -> Value {
        let line = self
            .lines
            .recv_timeout(within)
            .unwrap_or_else(|e| panic!("watch printed no {what} within {within:?}: {e}"));
        let v =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("watch printed {line:?}: {e}"));
        without_candidates(v, &["c1", "lib-1"])
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            kill_tree(i32::try_from(self.child.id()).unwrap());
            let _ = self.child.wait();
        }
    }
}

fn watch_json_prints_one_object_per_change(mut sb: Sandbox) {
    let mut watch = Watch::start(&sb);
    let none = json!({"election": ELECTION, "leader": null});
    assert_eq!(watch.next(Duration::from_secs(10), "first object"), none);

    let ttl = sb.ttl();
    let c1 = sb.candidate("c1", &ttl, &[]);
    let start = sb.first_start(Duration::from_secs(10));
    assert_eq!(
        watch.next(Duration::from_secs(3), "leader object"),
        leader_object("c1", start.token)
    );

    sb.regent(c1).signal(Signal::TERM);
    assert_eq!(
        watch.next(Duration::from_secs(3), "no-leader object after release"),
        none
    );
    let exit = sb.regent(c1).wait_exit(Duration::from_secs(5));
    assert_eq!(exit.code(), Some(0));

    // Nothing changes from here: nothing more may be printed.
    std::thread::sleep(Duration::from_millis(600));
    signal(i32::try_from(watch.child.id()).unwrap(), Signal::TERM);
    let mut status = None;
    for _ in 0..500 {
        status = watch.child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = status.expect("watch did not exit within 5 s of SIGTERM");
    assert_eq!(status.code(), Some(0));
    // The reader ends at EOF, which the exit brought.
    let mut extra = Vec::new();
    loop {
        match watch.lines.recv_timeout(Duration::from_secs(5)) {
            Ok(line) => extra.push(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("watch's stdout stayed open"),
        }
    }
    assert!(extra.is_empty(), "watch printed more: {extra:?}");
}

/// Issue 12: metadata a leader proclaims while leading reaches `regent
/// watch`, with the same token (the term goes on).
#[test]
fn watch_shows_metadata_a_leader_proclaims() {
    let sb = Sandbox::new();
    let watch = Watch::start(&sb);
    let none = json!({"election": ELECTION, "leader": null});
    assert_eq!(watch.next(Duration::from_secs(10), "first object"), none);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = regent::connect(&sb.store(), &[]).await.unwrap();
        let candidate = regent::Candidate::builder(
            store,
            regent::ElectionName::new(ELECTION).unwrap(),
            regent::HolderId::new("lib-1").unwrap(),
        )
        .ttl(Duration::from_secs(5))
        .metadata(regent::Metadata::from_pairs([("state", "starting")]).unwrap())
        .build()
        .unwrap();
        let leadership = candidate.campaign().await.unwrap();
        let token = leadership.token().get();
        let seen = watch.next(Duration::from_secs(3), "leader object");
        assert_eq!(
            seen,
            json!({"election": ELECTION, "leader": {"id": "lib-1", "token": token, "metadata": {"state": "starting"}}})
        );
        leadership
            .proclaim(regent::Metadata::from_pairs([("state", "serving")]).unwrap())
            .await
            .unwrap();
        let seen = watch.next(Duration::from_secs(3), "object with the new metadata");
        assert_eq!(
            seen,
            json!({"election": ELECTION, "leader": {"id": "lib-1", "token": token, "metadata": {"state": "serving"}}})
        );
        leadership.resign().await.unwrap();
        candidate.shutdown().await;
    });
    assert_eq!(watch.next(Duration::from_secs(3), "no leader"), none);
}

regent_testkit::for_every_engine!(
    Sandbox::with_engine,
    [
        status_json_without_then_with_a_leader,
        watch_json_prints_one_object_per_change,
    ]
);
