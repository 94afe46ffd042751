//! `regent-bench --short`, as CI runs it: on SQLite and etcd, every
//! (store, tool, case) gets a row with numbers in the report, every case a
//! plot, and the JSON every sample. etcd comes from `scripts/install-engines`;
//! without it the bench exits 2 naming that script, and the test fails.
//!
//! The candidates run the `regent` binary: `REGENT_BIN`, else `regent` in
//! the target directory of this test (`cargo test --workspace` builds it;
//! `cargo test -p regent-bench` alone does not: `cargo build -p
//! regent-cli` first).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const HARNESS: &str = env!("CARGO_BIN_EXE_regent-bench");

/// The `regent` binary the harness runs, as the harness finds it.
fn regent() -> PathBuf {
    if let Some(path) = std::env::var_os("REGENT_BIN").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    // target/PROFILE/deps/bench-HASH → target/PROFILE/regent
    let exe = std::env::current_exe().expect("the test's own path");
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("regent"))
        .expect("a target directory");
    assert!(
        path.is_file(),
        "no regent binary at {}: build it with `cargo build -p regent-cli` (cargo test \
         --workspace does), or set REGENT_BIN",
        path.display()
    );
    path
}

/// `regent-bench ARGS`, running the `regent` binary of this build.
fn harness() -> Command {
    let mut command = Command::new(HARNESS);
    command.env("REGENT_BIN", regent());
    command
}

/// `regent-bench ARGS --out OUT --json JSON`, which must succeed; the
/// report it wrote.
fn run_ok(args: &[&str], out: &std::path::Path, json: &std::path::Path) -> String {
    let run = harness()
        .args(args)
        .arg("--out")
        .arg(out)
        .arg("--json")
        .arg(json)
        .output()
        .expect("run regent-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "regent-bench failed ({}):\n{stderr}",
        run.status
    );
    std::fs::read_to_string(out).expect("the report")
}

/// The rows `--short --stores sqlite,etcd` must have: (store, case, tool).
const ROWS: &[(&str, &str, &str)] = &[
    ("sqlite", "graceful", "regent run"),
    ("etcd", "graceful", "regent run"),
    ("etcd", "graceful", "etcdctl elect"),
    ("sqlite", "crash", "regent run"),
    ("etcd", "crash", "regent run"),
    ("etcd", "crash", "etcdctl lock"),
];

/// The cells of the report's table rows (the header and rule aside).
fn table_rows(report: &str) -> Vec<Vec<String>> {
    report
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| store") && !l.starts_with("|---"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

fn number(cell: &str) -> f64 {
    cell.parse()
        .unwrap_or_else(|_| panic!("{cell:?} is not a number"))
}

#[test]
fn short_mode_on_sqlite_and_etcd_reports_every_row_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("docs").join("benchmarks.md");
    let json = dir.path().join("samples.json");
    let began = Instant::now();
    let run = harness()
        .args(["--short", "--stores", "sqlite,etcd", "--out"])
        .arg(&out)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run regent-bench");
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "regent-bench failed ({}):\n{stderr}\n{stdout}",
        run.status
    );
    assert!(
        took < Duration::from_secs(120),
        "--short took {took:?}; CI wants well under 2 minutes"
    );

    let report = std::fs::read_to_string(&out).expect("the report");
    let rows = table_rows(&report);
    assert_eq!(rows.len(), ROWS.len(), "{report}");
    for (store, case, tool) in ROWS {
        let row = rows
            .iter()
            .find(|r| r[0] == *store && r[1] == *case && r[2] == *tool)
            .unwrap_or_else(|| panic!("no row for {store} / {case} / {tool}:\n{report}"));
        // store, case, tool, ttl, signal, runs, p50, p99, max, left running
        assert_eq!(row.len(), 10, "{row:?}");
        let runs = number(&row[5]);
        assert_eq!(runs, if *case == "crash" { 3.0 } else { 5.0 }, "{row:?}");
        let (p50, p99, max) = (number(&row[6]), number(&row[7]), number(&row[8]));
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{row:?}");
        if *case == "crash" {
            let expected = if *tool == "etcdctl lock" {
                // Nobody gives its lease back: it expires, 2 s after its
                // last keep-alive (sent every 2/3 s).
                assert!(p50 > 1000.0, "etcdctl lock's lease went early: {row:?}");
                // Its command is a plain child: it runs on.
                "3 of 3"
            } else {
                // regent's supervisor stops it when regent dies.
                "0 of 3"
            };
            assert_eq!(row[9], expected, "{row:?}");
        }
    }
    assert!(report.contains("scripts/bench --short"), "{report}");
    assert!(report.contains("- cores: "), "{report}");
    assert!(report.contains("etcd Version: "), "{report}");
    for case in ["graceful", "crash"] {
        let plot = dir
            .path()
            .join("docs/benchmarks")
            .join(format!("{case}.svg"));
        let svg =
            std::fs::read_to_string(&plot).unwrap_or_else(|e| panic!("{}: {e}", plot.display()));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(
            report.contains(&format!("(benchmarks/{case}.svg)")),
            "{report}"
        );
        // A dot per run, and two in the legend.
        let runs: usize = ROWS
            .iter()
            .filter(|r| r.1 == case)
            .map(|_| if case == "crash" { 3 } else { 5 })
            .sum();
        assert_eq!(svg.matches("<circle").count(), runs + 2, "{case}");
    }

    let samples: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let series = samples["series"].as_array().expect("series");
    assert_eq!(series.len(), ROWS.len());
    for s in series {
        let runs = s["samples"].as_array().expect("samples");
        assert_eq!(runs.len() as u64, s["runs"].as_u64().unwrap());
        assert!(
            runs.iter()
                .all(|r| r["handover_ms"].as_f64().unwrap() > 0.0)
        );
    }
    // The table is on stdout too.
    assert!(
        stdout.contains("| etcd | crash | etcdctl lock |"),
        "{stdout}"
    );
}

/// PostgreSQL, directly and behind PgBouncer in transaction mode (regent's
/// watches listening straight to the server), in short mode: regent alone
/// (PostgreSQL has no election tool of its own), a row per store and case,
/// the crashed regent's lease given back by its supervisor rather than
/// left to expire, and the engines' versions in the report.
#[test]
fn short_mode_on_postgres_and_pgbouncer_reports_regent_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("postgres.md");
    let json = dir.path().join("postgres.json");
    let report = run_ok(&["--short", "--stores", "postgres,pgbouncer"], &out, &json);
    let rows = table_rows(&report);
    assert_eq!(rows.len(), 4, "{report}");
    for store in ["postgres", "pgbouncer"] {
        for (case, runs) in [("graceful", 5.0), ("crash", 3.0)] {
            let row = rows
                .iter()
                .find(|r| r[0] == store && r[1] == case)
                .unwrap_or_else(|| panic!("no row for {store} / {case}:\n{report}"));
            assert_eq!(row[2], "regent run", "{row:?}");
            assert_eq!(row[3], "--ttl 2s", "{row:?}");
            assert_eq!(number(&row[5]), runs, "{row:?}");
            let (p50, p99, max) = (number(&row[6]), number(&row[7]), number(&row[8]));
            assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{row:?}");
            assert_eq!(row[9], format!("0 of {runs}"), "{row:?}");
            if case == "crash" {
                // The supervisor gave the lease back: no wait for the
                // 2 s ttl.
                assert!(p50 < 1000.0, "{store}: the lease expired: {row:?}");
            }
        }
    }
    assert!(report.contains("- postgres: PostgreSQL "), "{report}");
    assert!(report.contains("- pgbouncer: PostgreSQL "), "{report}");
    assert!(report.contains("PgBouncer 1."), "{report}");
    assert!(report.contains("--postgres-listen-url"), "{report}");
    let samples: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(samples["series"].as_array().expect("series").len(), 4);
}

#[test]
fn a_store_asked_for_without_its_engine_is_a_usage_error_naming_the_install_script() {
    let empty = tempfile::tempdir().unwrap();
    let run = harness()
        .args(["--short", "--stores", "sqlite,etcd"])
        // No etcd anywhere: an empty PATH, and no override.
        .env("PATH", empty.path())
        .env_remove("REGENT_ETCD_BIN")
        .env_remove("REGENT_ETCDCTL_BIN")
        .output()
        .expect("run regent-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("etcd"), "{stderr}");
    assert!(stderr.contains("scripts/install-engines"), "{stderr}");
}

/// PostgreSQL's programs where `REGENT_POSTGRES_BINDIR` says, and none
/// there: a usage error naming the variable and the install script, before
/// any engine starts.
#[test]
fn postgres_without_its_programs_is_a_usage_error_naming_the_install_script() {
    let empty = tempfile::tempdir().unwrap();
    let run = harness()
        .args(["--short", "--stores", "sqlite,postgres"])
        .env("REGENT_POSTGRES_BINDIR", empty.path())
        .output()
        .expect("run regent-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("REGENT_POSTGRES_BINDIR"), "{stderr}");
    assert!(stderr.contains("scripts/install-engines"), "{stderr}");
}

/// A `redis-server` named by `REGENT_REDIS_SERVER_BIN` that is not
/// there: a usage error naming the variable and the install script, before
/// any engine starts.
#[test]
fn redis_without_its_server_is_a_usage_error_naming_the_install_script() {
    let empty = tempfile::tempdir().unwrap();
    let run = harness()
        .args(["--short", "--stores", "sqlite,redis"])
        .env("REGENT_REDIS_SERVER_BIN", empty.path().join("redis-server"))
        .output()
        .expect("run regent-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("REGENT_REDIS_SERVER_BIN"), "{stderr}");
    assert!(stderr.contains("scripts/install-engines"), "{stderr}");
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["--stores", "mongodb"][..],
        &["--cases", "stampede"],
        &["--runs", "0"],
        &["--out", "report.txt"],
        &["--stores", "memory"],
        &["--window", "0s"],
    ] {
        let run = harness().args(args).output().unwrap();
        assert_eq!(
            run.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
}

/// The load cases in short mode, as CI runs them on etcd: a herd of 50
/// candidates through its failovers, and 1 and 100 elections held by one
/// process, with the store operations counted at regent's store interface
/// and by etcd itself.
#[test]
fn short_load_cases_on_etcd_count_store_operations() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.md");
    let json = dir.path().join("load.json");
    let report = run_ok(
        &["--short", "--stores", "etcd", "--cases", "herd,scale"],
        &out,
        &json,
    );
    assert!(
        report.contains("## Herd: many candidates, one election"),
        "{report}"
    );
    assert!(
        report.contains("## Scale: many elections, one process"),
        "{report}"
    );
    let rows = table_rows(&report);
    let herd = rows
        .iter()
        .find(|r| r[0] == "etcd" && r[1] == "50")
        .unwrap_or_else(|| panic!("no herd row:\n{report}"));
    // store, candidates, failovers, hand-over, requests, per candidate,
    // kinds, engine's count, idle
    assert_eq!(herd.len(), 9, "{herd:?}");
    assert_eq!(number(&herd[2]), 5.0, "{herd:?}");
    assert!(number(&herd[3]) > 0.0, "{herd:?}");
    assert!(
        herd[6].contains("release"),
        "a failover starts with a release: {herd:?}"
    );
    assert!(herd[7].parse::<f64>().is_ok(), "etcd's own count: {herd:?}");
    let samples: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let load = samples["load"].as_array().expect("load samples");
    let scale = load
        .iter()
        .find(|l| l["case"] == "scale")
        .expect("the scale case");
    let rows = scale["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{scale}");
    // Every leader renews: at the default timing, about 5 times per ttl.
    for row in rows {
        let elections = row["elections"].as_f64().unwrap();
        let renewals = row["ops_per_ttl"]["renew"].as_f64().unwrap();
        assert!(
            renewals >= 3.0 * elections && renewals <= 7.0 * elections,
            "{row}"
        );
        let engine = row["engine_requests_per_ttl"].as_f64().unwrap();
        if elections == 1.0 {
            // One election's renewal is a keep-alive and a look at the
            // lease's keys.
            assert!(engine >= renewals, "{row}");
        } else {
            // The elections share one lease: its rounds (at most ten per
            // ttl, two requests each) renew them all (issue 15, item 3).
            assert!(
                engine <= 30.0,
                "one lease's rounds, not one per election: {row}"
            );
        }
        assert!(row["threads"].as_u64().unwrap() >= 1, "{row}");
    }
}

/// Without a `regent` binary the harness says how to build one, before
/// any engine starts.
#[test]
fn a_missing_regent_binary_is_a_usage_error_naming_the_build_command() {
    let run = Command::new(HARNESS)
        .args([
            "--short",
            "--stores",
            "sqlite",
            "--regent",
            "/nonexistent/regent",
        ])
        .output()
        .expect("run regent-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("/nonexistent/regent"), "{stderr}");
    assert!(
        stderr.contains("cargo build --release -p regent-cli -p regent-bench"),
        "{stderr}"
    );
}

/// The scale case as `scripts/test` ran SQLite's smoke run (100 elections,
/// a 3 s window), with followers and the memory store's floor: each size
/// in a process of its own, and every leader still leads (every follower
/// still follows) at the window's end.
#[test]
fn short_scale_on_sqlite_and_memory_keeps_every_leader_and_follower() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("scale.json");
    let run = harness()
        .args([
            "--short",
            "--stores",
            "sqlite,memory",
            "--cases",
            "scale",
            "--window",
            "3s",
            "--followers",
            "--json",
        ])
        .arg(&json)
        .output()
        .expect("run regent-bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "regent-bench failed ({}):\n{stderr}",
        run.status
    );
    assert!(
        stdout.contains("## Scale: many elections, one process"),
        "{stdout}"
    );
    let samples: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let load = samples["load"].as_array().expect("load samples");
    let rows = |store: &str| -> Vec<Value> {
        load.iter()
            .find(|l| l["case"] == "scale" && l["store"] == store)
            .unwrap_or_else(|| panic!("no scale case on {store}: {samples}"))["rows"]
            .as_array()
            .unwrap()
            .clone()
    };
    let sqlite = rows("sqlite");
    // 1 and 100 elections, led and followed.
    let got: Vec<(u64, &str)> = sqlite
        .iter()
        .map(|r| {
            (
                r["elections"].as_u64().unwrap(),
                r["role"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [(1, "lead"), (1, "follow"), (100, "lead"), (100, "follow")]
    );
    let memory = rows("memory");
    assert_eq!(memory.len(), 2, "no followers on the memory store");
    for row in sqlite.iter().chain(&memory) {
        assert_eq!(row["leaders_lost"], 0, "{row}");
        assert!(row["threads"].as_u64().unwrap() >= 1, "{row}");
        let elections = row["elections"].as_f64().unwrap();
        let renewals = row["ops_per_ttl"]["renew"].as_f64().unwrap();
        if row["role"] == "lead" {
            // About 5 renewals per ttl each, at the default timing.
            assert!(
                renewals >= 3.0 * elections && renewals <= 7.0 * elections,
                "{row}"
            );
            assert!(row["renew_avg_ms"].as_f64().is_some(), "{row}");
        } else {
            // A follower tries to acquire about once per renewal interval.
            assert!(renewals == 0.0, "{row}");
            let acquires = row["ops_per_ttl"]["try_acquire"].as_f64().unwrap();
            assert!(acquires >= 2.0 * elections, "{row}");
        }
    }
    for row in &sqlite {
        assert!(
            row["store_thread_cpu_ms_per_ttl"].as_f64().is_some(),
            "{row}"
        );
        assert!(row["written_bytes_per_s"].as_f64().is_some(), "{row}");
    }
}

/// The Consul cluster (three servers, a client agent per candidate), as
/// `benches/consul_handover.rs` measured it before it joined the harness:
/// regent at `consul lock`'s TTL and at its own default beside `consul
/// lock`, the holder's session read back from Consul. `consul lock`'s
/// command, run through `sh -c`, outlives a SIGTERM to `consul lock`;
/// regent's never does.
#[test]
fn short_consul_cluster_runs_regent_at_two_ttls_beside_consul_lock() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cluster.md");
    let json = dir.path().join("cluster.json");
    let report = run_ok(
        &["--short", "--stores", "consul-cluster", "--runs", "2"],
        &out,
        &json,
    );
    let rows = table_rows(&report);
    let row = |tool: &str, ttl: &str| {
        rows.iter()
            .find(|r| {
                r[0] == "consul-cluster"
                    && r[1] == "graceful"
                    && r[2] == tool
                    && r[3].starts_with(ttl)
            })
            .unwrap_or_else(|| panic!("no row for {tool} ({ttl}):\n{report}"))
            .clone()
    };
    assert_eq!(row("regent run", "--ttl 15s")[9], "0 of 2");
    assert_eq!(row("regent run", "--ttl 10s")[9], "0 of 2");
    assert_eq!(row("consul lock", "session 15 s")[9], "2 of 2");
    assert_eq!(row("consul lock, exec CMD", "session 15 s")[9], "0 of 2");
    assert_eq!(rows.len(), 4, "{report}");
    assert!(
        report.contains("### Sessions as Consul held them"),
        "{report}"
    );
    assert!(report.contains("client agents"), "{report}");
    let samples: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    for s in samples["series"].as_array().unwrap() {
        let session = &s["holder_session"];
        assert!(session["TTL"].is_string(), "{session}");
    }
}

/// Issue 29, item 4: an observer on a store instance of its own names the
/// new leader as soon as that leader's campaign returns. On SQLite it once
/// said "no leader" up to a poll interval (100 ms) longer, until a won
/// acquire rang the wake-up bell too; on the memory store (the floor) the
/// two are one and the same event.
#[test]
fn observe_on_sqlite_and_memory_names_the_next_leader_with_its_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("observe.md");
    let json = dir.path().join("observe.json");
    let report = run_ok(
        &["--short", "--stores", "sqlite,memory", "--cases", "observe"],
        &out,
        &json,
    );
    assert!(
        report.contains("## Observers: who learns of a new leader when"),
        "{report}"
    );
    let samples: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let load = samples["load"].as_array().expect("load samples");
    for store in ["sqlite", "memory"] {
        let case = load
            .iter()
            .find(|l| l["case"] == "observe" && l["store"] == store)
            .unwrap_or_else(|| panic!("no observe case on {store}: {samples}"));
        assert_eq!(case["missed"].as_array().unwrap().len(), 0, "{case}");
        let runs = case["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 5, "--short: 5 hand-overs: {case}");
        let mut lags: Vec<f64> = runs
            .iter()
            .map(|r| r["observer_minus_candidate_ms"].as_f64().unwrap())
            .collect();
        lags.sort_by(f64::total_cmp);
        // Well under SQLite's poll interval: the bell, not the poll.
        assert!(lags[lags.len() / 2] < 50.0, "{store}: {lags:?}");
    }
}

/// Issue 30's hand-overs on SQLite, beside the graceful stop: a leader
/// handing its term to a candidate of higher priority once it has seen it
/// for the settle time (1 s), and to the follower `regent handover --to`
/// names; regent alone, the old command stopped before the new one
/// started, the hand-over timed from the old command's SIGTERM, the whole
/// from what set it off.
#[test]
fn short_hand_overs_on_sqlite_are_timed_from_the_old_commands_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("handover.md");
    let json = dir.path().join("handover.json");
    let report = run_ok(
        &[
            "--stores",
            "sqlite",
            "--cases",
            "graceful,preferred,requested",
            "--runs",
            "2",
        ],
        &out,
        &json,
    );
    let rows = table_rows(&report);
    for case in ["graceful", "preferred", "requested"] {
        let row = rows
            .iter()
            .find(|r| r[0] == "sqlite" && r[1] == case)
            .unwrap_or_else(|| panic!("no row for {case}:\n{report}"));
        assert_eq!(row[2], "regent run", "{row:?}");
        assert_eq!(number(&row[5]), 2.0, "{row:?}");
        let (p50, p99, max) = (number(&row[6]), number(&row[7]), number(&row[8]));
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{row:?}");
        // A hand-over is a graceful stop and a release: well under the
        // settle time and the ttl.
        assert!(max < 1000.0, "{row:?}");
        assert_eq!(row[9], "0 of 2", "{row:?}");
    }
    assert!(
        report.contains("### regent's hand-overs side by side"),
        "{report}"
    );
    let samples: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let series = samples["series"].as_array().expect("series");
    assert_eq!(series.len(), 3);
    for s in series {
        for run in s["samples"].as_array().unwrap() {
            assert_eq!(run["old_command_got_sigterm"], true, "{run}");
            assert_eq!(run["old_command_stopped_after_new_start"], false, "{run}");
            let whole = run["trigger_to_new_start_ms"].as_f64();
            match s["case"].as_str().unwrap() {
                // The new candidate's start, the settle time, the next look.
                "preferred" => assert!(whole.unwrap() > 1000.0, "{run}"),
                "requested" => {
                    assert!(whole.unwrap() > 0.0, "{run}");
                    assert!(run["request_to_answer_ms"].as_f64().unwrap() > 0.0, "{run}");
                    assert!(run["request_answered"].is_boolean(), "{run}");
                }
                _ => assert!(whole.is_none(), "{run}"),
            }
        }
    }
}
