//! `regent torture`: short seeded campaigns end with no violation on every
//! engine, inject at least ten faults and write a report that parses; on
//! etcd started by torture itself (`--store-command`) the store faults
//! (stop, kill and restart, cut, delay) run too; bad flags are usage errors naming the flag.
//!
//! Every fault kind runs, `stop-leader-kill-shim` included: a frozen
//! leader whose shim is SIGKILLed left its command writing beside newer
//! terms until the command got a PID namespace of its own (issue 9).
//!
//! Campaigns run one at a time (a lock): they measure failover times, and
//! three at once on a small machine would measure the machine.

mod common;

use std::net::TcpListener;
use std::sync::Mutex;
use std::time::Duration;

use common::*;

/// Every fault on the candidates' processes.
const FAULTS: &str = "kill-leader,term-leader,stop-leader,stop-tree,kill-shim,\
                      stop-leader-kill-shim,kill-cmd,kill-follower";

const SEED: &str = "20240611";

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `regent torture` with a 1 s ttl, 3 candidates, 40 s of faults and
/// the fixed seed, plus `extra`; it must exit 0. Returns its report. Its
/// table is printed (`--nocapture` shows it).
fn campaign(sandbox: &Sandbox, store: &str, faults: &str, extra: &[&str]) -> serde_json::Value {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let report = sandbox.path("report.json");
    let report_arg = report.to_str().unwrap();
    let mut args = vec![
        "torture",
        "--store",
        store,
        "--candidates",
        "3",
        "--ttl",
        "1s",
        "--duration",
        "40s",
        "--seed",
        SEED,
        "--faults",
        faults,
        "--report",
        report_arg,
    ];
    args.extend_from_slice(extra);
    let out = run_bounded(&args, Duration::from_secs(150));
    no_panic(&out);
    eprintln!("{}", out.stdout);
    assert_eq!(
        out.code,
        Some(0),
        "torture failed:\n--- stdout\n{}\n--- stderr\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stdout.contains(&format!("seed {SEED}")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("violations: none"), "{}", out.stdout);
    let text = std::fs::read_to_string(&report).expect("the report");
    let json: serde_json::Value = serde_json::from_str(&text).expect("the report parses");
    assert_eq!(json["seed"].as_u64(), Some(SEED.parse().unwrap()));
    assert_eq!(json["ok"], true);
    assert_eq!(
        json["violations"].as_array().map(Vec::len),
        Some(0),
        "{text}"
    );
    assert_eq!(json["parameters"]["candidates"], 3);
    assert_eq!(json["parameters"]["ttl_ms"], 1000);
    let injected: u64 = json["faults"]
        .as_object()
        .expect("faults per kind")
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(injected >= 10, "only {injected} faults:\n{}", out.stdout);
    assert_eq!(
        json["fault_log"].as_array().map(Vec::len),
        Some(usize::try_from(injected).unwrap())
    );
    assert!(json["accepted_writes"].as_u64().unwrap() > 100, "{text}");
    assert!(json["terms"].as_u64().unwrap() >= 2, "{text}");
    for (kind, gaps) in json["gaps"].as_object().expect("gaps") {
        for field in ["faults", "new_terms", "median_ms", "p90_ms", "max_ms"] {
            assert!(gaps.get(field).is_some(), "gaps of {kind} lack {field}");
        }
    }
    for field in [
        "expected_refused_writes",
        "refused_writes",
        "garbage_lines",
        "campaign",
    ] {
        assert!(json.get(field).is_some(), "the report lacks {field}");
    }
    json
}

fn short_campaign_has_no_violation(sandbox: Sandbox) {
    let store = sandbox.store();
    campaign(&sandbox, &store, FAULTS, &[]);
}

regent_testkit::for_every_engine!(Sandbox::with_engine, [short_campaign_has_no_violation]);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// etcd started by torture (`--store-command`, the test kit's settings on
/// free ports and a data dir of the test's), so that `store-stop` and
/// `store-kill` (restart on the same data) are offered; and `store-cut` and
/// `store-delay` through a proxy per candidate.
#[test]
fn campaign_with_store_faults_on_etcd_started_by_torture() {
    let sandbox = Sandbox::new();
    let etcd = std::env::var("REGENT_ETCD_BIN").unwrap_or_else(|_| "etcd".into());
    let (client, peer) = (free_port(), free_port());
    let data = sandbox.path("etcd-data");
    let command = format!(
        "exec '{etcd}' --name=torture --data-dir='{data}' \
         --listen-client-urls=http://127.0.0.1:{client} \
         --advertise-client-urls=http://127.0.0.1:{client} \
         --listen-peer-urls=http://127.0.0.1:{peer} \
         --initial-advertise-peer-urls=http://127.0.0.1:{peer} \
         --initial-cluster=torture=http://127.0.0.1:{peer} \
         --initial-cluster-state=new --heartbeat-interval=10 --election-timeout=100 \
         --logger=zap",
        data = data.display()
    );
    let store = format!("etcd://127.0.0.1:{client}");
    let faults =
        format!("{FAULTS},store-stop,store-kill,store-cut,store-delay,clock-fast,clock-slow");
    let json = campaign(&sandbox, &store, &faults, &["--store-command", &command]);
    let store_faults: u64 = ["store-stop", "store-kill", "store-cut", "store-delay"]
        .iter()
        .filter_map(|k| json["faults"][k].as_u64())
        .sum();
    assert!(store_faults >= 1, "no store fault injected: {json}");

    assert!(
        json["parameters"]["store_command"]
            .as_str()
            .is_some_and(|c| c.contains("--data-dir")),
        "{json}"
    );
}

/// Candidates whose clocks run fast (2-10%) or slow (within the 1% drift
/// regent allows for), through libfaketime (`scripts/install-engines`
/// installs it), beside leaders killed and stopped: no violation.
#[test]
fn clock_faults_on_etcd() {
    let sandbox = Sandbox::etcd();
    let store = sandbox.store();
    let json = campaign(
        &sandbox,
        &store,
        "clock-fast,clock-slow,kill-leader,stop-leader,stop-leader-kill-shim",
        &[],
    );
    let clock_faults: u64 = ["clock-fast", "clock-slow"]
        .iter()
        .filter_map(|k| json["faults"][k].as_u64())
        .sum();
    assert!(clock_faults >= 3, "{clock_faults} clock faults: {json}");
    let skewed = json["fault_log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["detail"]
                .as_str()
                .is_some_and(|d| d.contains("whose clock runs at x"))
        })
        .count();
    assert_eq!(u64::try_from(skewed).unwrap(), clock_faults, "{json}");
}

#[test]
fn bad_flags_are_usage_errors_naming_the_flag() {
    for (args, needle) in [
        (&["torture", "--candidates", "1"][..], "--candidates"),
        (&["torture", "--candidates", "21"][..], "--candidates"),
        (&["torture", "--faults", "bogus"][..], "--faults"),
        (&["torture", "--faults", "kill-leader,bogus"][..], "bogus"),
        (
            &["torture", "--faults", "store-kill"][..],
            "--store-command",
        ),
        (
            &["torture", "--faults", "store-stop"][..],
            "--faults store-stop",
        ),
        (&["torture", "--ttl", "10"][..], "--ttl"),
        (
            &["torture", "--faults", "store-cut"][..],
            "--faults store-cut",
        ),
        (
            &["torture", "--store-command", "true"][..],
            "--store-command needs --store",
        ),
        (
            &["torture", "--faults", "clock-slow"][..],
            "--faults clock-slow: needs a store with a clock of its own",
        ),
    ] {
        let out = run_bounded(args, Duration::from_secs(20));
        no_panic(&out);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(needle),
            "{args:?}: no {needle:?} in\n{}",
            out.stderr
        );
    }
}

/// A store command that exits by itself (here at once, as etcd does on a
/// taken port) ends torture with exit 1 and the store's last output, not
/// after the store's connection retries with a message about a store that
/// does not answer.
#[test]
fn a_store_command_that_exits_is_named_with_its_output() {
    let port = free_port();
    let store = format!("etcd://127.0.0.1:{port}");
    let out = run_bounded(
        &[
            "torture",
            "--store",
            &store,
            "--store-command",
            "echo 'bind: address already in use' >&2; exit 3",
        ],
        Duration::from_secs(20),
    );
    no_panic(&out);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(
        out.stderr.contains("exited by itself (exit status: 3)")
            && out.stderr.contains("bind: address already in use"),
        "{}",
        out.stderr
    );
}

/// Regression: SIGTERM ended `regent torture` at once and left its
/// candidates (each in a process group of its own) and their commands
/// running for good. SIGTERM now ends the faults early with the usual
/// teardown and report; SIGKILL closes the candidates' lifeline, on which
/// each shuts down by itself.
#[test]
fn a_terminated_or_killed_torture_leaves_nothing_behind() {
    let sandbox = Sandbox::new();
    for (sig, name) in [
        (rustix::process::Signal::TERM, "term"),
        (rustix::process::Signal::KILL, "kill"),
    ] {
        let out = sandbox.path(&format!("{name}.out"));
        let report = sandbox.path(&format!("{name}.json"));
        let mut torture = std::process::Command::new(REGENT)
            .args([
                "torture",
                "--candidates",
                "3",
                "--ttl",
                "1s",
                "--duration",
                "5m",
            ])
            .arg("--report")
            .arg(&report)
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(sandbox.path(&format!("{name}.err"))).unwrap())
            .spawn()
            .unwrap();
        let pid = i32::try_from(torture.id()).unwrap();
        let text = || std::fs::read_to_string(&out).unwrap_or_default();
        wait_for(
            Duration::from_secs(20),
            "the nemesis to start",
            || text().contains("the nemesis starts").then_some(()),
            text,
        );
        // The writers carry `--campaign <torture pid>-<fence port>`.
        let marker = format!("--campaign {pid}-");
        let ours = || {
            descendants(1)
                .into_iter()
                .filter(|&p| alive(p) && cmdline(p).contains(&marker))
                .collect::<Vec<_>>()
        };
        assert!(!ours().is_empty(), "no writer runs\n{}", text());
        signal(pid, sig);
        let status = torture.wait().unwrap();
        wait_for(
            Duration::from_secs(10),
            &format!("every writer of the campaign to be gone after SIG{name}"),
            || ours().is_empty().then_some(()),
            || format!("{:?}\n{}", ours(), text()),
        );
        if sig == rustix::process::Signal::TERM {
            // Regression: candidates on the lifeline hung at their exit
            // until torture SIGKILLed them.
            let err = std::fs::read_to_string(sandbox.path("term.err")).unwrap();
            assert!(!err.contains("did not stop in time"), "{err}");
            assert_eq!(status.code(), Some(0), "{}", text());
            assert!(text().contains("violations: none"), "{}", text());
            assert!(report.exists(), "no report\n{}", text());
        }
    }
}
