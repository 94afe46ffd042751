//! `--log-format json`: every line on stderr is one JSON object, and every
//! line of a term carries its election, holder and token at the top level;
//! `text` stays as it was; a format regent does not know is a usage error.

mod common;

use std::time::Duration;

use common::*;
use rustix::process::Signal;
use serde_json::{Map, Value};

/// Every line of `stderr` as a JSON object with the keys every line has;
/// panics naming the first line that is not one.
fn objects(stderr: &str) -> Vec<Map<String, Value>> {
    stderr
        .lines()
        .map(|line| {
            let Ok(Value::Object(o)) = serde_json::from_str(line) else {
                panic!("not a JSON object: {line:?}\nstderr:\n{stderr}");
            };
            for key in ["timestamp", "level", "target", "message"] {
                assert!(o[key].is_string(), "no {key} in {line}");
            }
            o
        })
        .collect()
}

fn message(o: &Map<String, Value>) -> &str {
    o["message"].as_str().unwrap_or_default()
}

/// Checks that every line from each `elected leader` to its `leadership
/// ended` carries `election`, `holder` and that term's `token`; returns how
/// many lines of the terms came from regent itself (not `regent_core`,
/// whose events carry the fields of their own).
fn assert_terms_carry_their_fields(lines: &[Map<String, Value>], holder: &str) -> usize {
    let mut term: Option<u64> = None;
    let mut terms = 0;
    let mut own = 0;
    for o in lines {
        if message(o) == "elected leader" {
            assert_eq!(term, None, "a term began inside another: {o:?}");
            term = Some(o["token"].as_u64().expect("a numeric token"));
            terms += 1;
        }
        let Some(token) = term else { continue };
        assert_eq!(o.get("election"), Some(&Value::from(ELECTION)), "{o:?}");
        assert_eq!(o.get("holder"), Some(&Value::from(holder)), "{o:?}");
        assert_eq!(o.get("token"), Some(&Value::from(token)), "{o:?}");
        if !o["target"]
            .as_str()
            .unwrap_or_default()
            .starts_with("regent_core")
        {
            own += 1;
        }
        if message(o) == "leadership ended" {
            term = None;
        }
    }
    assert!(terms > 0, "no term in {lines:?}");
    own
}

#[test]
fn a_term_in_json_is_one_object_per_line_with_its_election_holder_and_token() {
    let sb = Sandbox::new();
    let mut args = vec!["--log-format".to_owned(), "json".to_owned()];
    args.extend(sb.run_args(&["--id", "a", "--restart", "never"], &["true"]));
    let out = sb.run_owned(&args, &[("REGENT_LOG", "info")], Duration::from_secs(20));
    no_panic(&out);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = objects(&out.stderr);
    for needed in ["elected leader", "leadership ended"] {
        assert!(
            lines.iter().any(|o| message(o) == needed),
            "no {needed:?} in\n{}",
            out.stderr
        );
    }
    assert_terms_carry_their_fields(&lines, "a");
}

/// `REGENT_LOG_FORMAT` and the flag after the subcommand (it is global)
/// choose JSON too; a flag wins over the variable.
#[test]
fn the_variable_and_the_flag_after_the_subcommand_choose_the_format() {
    let sb = Sandbox::new();
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut flags = vec!["--id", "a", "--restart", "never"];
        flags.extend_from_slice(extra);
        let args = sb.run_args(&flags, &["true"]);
        let mut env = env.to_vec();
        env.push(("REGENT_LOG", "info"));
        let out = sb.run_owned(&args, &env, Duration::from_secs(20));
        assert_eq!(out.code, Some(0), "{extra:?} {env:?}: {}", out.stderr);
        out.stderr
    };
    let json = run(&[], &[("REGENT_LOG_FORMAT", "json")]);
    assert_terms_carry_their_fields(&objects(&json), "a");
    let json = run(&["--log-format", "json"], &[]);
    assert_terms_carry_their_fields(&objects(&json), "a");
    let text = run(&["--log-format", "text"], &[("REGENT_LOG_FORMAT", "json")]);
    assert!(text.contains(" INFO "), "{text}");
    assert!(!text.lines().any(|l| l.starts_with('{')), "{text}");
}

/// The lines regent writes itself during a term (here the health warning,
/// a `warn_user!` line) get the term's fields from its span, at the default
/// level too (`REGENT_LOG` unset: `warn`); in text, the default, the same
/// line is the plain line it always was.
#[test]
fn regent_s_own_lines_of_a_term_carry_the_term_and_text_is_unchanged() {
    let warning = "regent: no heartbeat on REGENT_HEARTBEAT_FD for 200ms; stepping down";
    for (format, level) in [("json", "info"), ("json", "warn"), ("text", "info")] {
        let mut sb = Sandbox::new();
        let mut args = match format {
            "text" => vec![],
            f => vec!["--log-format".to_owned(), f.to_owned()],
        };
        args.extend(sb.run_args(
            &["--id", "a", "--health-timeout", "200ms"],
            &["sleep", "1000"],
        ));
        let i = sb.spawn_env(
            "a",
            std::path::Path::new(REGENT),
            &args,
            &[("REGENT_LOG", level)],
        );
        // Two terms that stepped down for silence: the first one's lines
        // are all written by then.
        let stderr = || std::fs::read_to_string(sb.path("a.err")).unwrap_or_default();
        wait_for(
            Duration::from_secs(20),
            "two silent terms to step down",
            || (stderr().matches("no heartbeat").count() >= 2).then_some(()),
            stderr,
        );
        sb.regent(i).signal(Signal::TERM);
        let status = sb.regent(i).wait_exit(Duration::from_secs(10));
        let stderr = sb.regent(i).stderr();
        assert_eq!(status.code(), Some(0), "{format}: {stderr}");
        if format == "text" {
            assert!(stderr.lines().any(|l| l == warning), "{stderr}");
            assert!(!stderr.lines().any(|l| l.starts_with('{')), "{stderr}");
            continue;
        }
        let lines = objects(&stderr);
        let warnings: Vec<_> = lines.iter().filter(|o| message(o) == warning).collect();
        assert!(
            warnings.len() >= 2,
            "{level}: warnings missing in\n{stderr}"
        );
        for w in warnings {
            assert_eq!(w["level"], "WARN", "{w:?}");
            assert_eq!(w["target"], "regent", "{w:?}");
            assert_eq!(w.get("election"), Some(&Value::from(ELECTION)), "{w:?}");
            assert_eq!(w.get("holder"), Some(&Value::from("a")), "{w:?}");
            assert!(w.get("token").is_some_and(Value::is_u64), "{w:?}");
        }
        if level == "info" {
            let own = assert_terms_carry_their_fields(&lines, "a");
            assert!(own >= 2, "no line of regent's own in a term:\n{stderr}");
        }
    }
}

/// The shim and its release, processes of their own, write JSON too when
/// they inherit `REGENT_LOG_FORMAT`: here after regent is killed.
#[test]
fn the_supervisor_s_lines_are_json_too() {
    let mut sb = Sandbox::new();
    let i = sb.candidate_env("a", "1s", &[], &[("REGENT_LOG_FORMAT", "json")]);
    sb.first_start(Duration::from_secs(10));
    sb.regent(i).signal(Signal::KILL);
    // The supervisor's last line, after the release's.
    let last = "went away; stopped the command";
    let stderr = wait_for(
        Duration::from_secs(10),
        "the supervisor to say that it stopped the command",
        || {
            let s = std::fs::read_to_string(sb.path("a.err")).unwrap_or_default();
            s.contains(last).then_some(s)
        },
        || sb.report(),
    );
    // Every line is an object (the task writes nothing to stderr), the
    // supervisor's among them.
    let lines = objects(&stderr);
    assert!(
        lines
            .iter()
            .any(|o| message(o).contains(last) && o["level"] == "WARN"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_log_format_is_a_usage_error_naming_the_flag_or_variable() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("e.db").display());
    let run = [
        "run",
        "--store",
        &store,
        "--election",
        ELECTION,
        "--",
        "true",
    ];
    for (args, env, names) in [
        (
            [&["--log-format", "xml"][..], &run[..]].concat(),
            &[][..],
            "--log-format",
        ),
        (
            run.to_vec(),
            &[("REGENT_LOG_FORMAT", "xml")][..],
            "REGENT_LOG_FORMAT",
        ),
    ] {
        let out = run_bounded_env(&args, env, Duration::from_secs(10));
        no_panic(&out);
        assert_eq!(out.code, Some(2), "{args:?} {env:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(names) && out.stderr.contains("xml"),
            "{args:?} {env:?}: {}",
            out.stderr
        );
        assert!(out.took < Duration::from_secs(2), "took {:?}", out.took);
        // Refused before the store was opened.
        assert!(!dir.path().join("e.db").exists());
    }
}

/// As `closed_stderr.rs` pins for text: with stderr a closed pipe, the
/// JSON lines of the retries are lost, not a panic (exit 101), and the
/// documented exit 3 follows.
#[test]
fn json_into_a_dead_stderr_still_ends_with_exit_3() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = std::process::Command::new(REGENT)
        // Port 1: nothing listens there, the connection is refused.
        .args([
            "--log-format",
            "json",
            "status",
            "--store",
            "etcd://127.0.0.1:1",
            "--election",
            "e",
        ])
        .env("REGENT_START_RETRY", "1s")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3), "{status:?}");
}
