//! `regent dashboard` end to end: it observes two elections on a SQLite
//! store beside two real `regent run` candidates of one of them, and its
//! live page, in headless Chromium, follows a kill -9 of the leader
//! without a reload.
//!
//! `REGENT_SCREENSHOT=PATH` (relative to the workspace root) also keeps
//! the page's picture there: `docs/images/dashboard.png` comes from
//! `REGENT_SCREENSHOT=docs/images/dashboard.png cargo test -p regent-cli
//! --all-features --test dashboard`.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use regent_testkit::browser::Browser;
use rustix::process::Signal;
use serde_json::Value;

const JOBS: &str = "jobs";

/// How long the page may take to show what the endpoint knows: a few of
/// its 500 ms polls.
const PAGE_WAIT: Duration = Duration::from_secs(10);

/// `run --store STORE --election jobs --id ID --ttl TTL -- task_cmd`.
fn jobs_candidate(sb: &mut Sandbox, id: &str) {
    let ttl = sb.ttl();
    let mut args: Vec<String> = [
        "run",
        "--store",
        &sb.store(),
        "--election",
        JOBS,
        "--id",
        id,
        "--ttl",
        &ttl,
        "--",
    ]
    .map(String::from)
    .to_vec();
    args.extend(sb.task_cmd());
    sb.spawn(id, &args);
}

/// Waits for the JavaScript condition `js` on the page; on timeout, fails
/// naming `what` and quoting the page's text.
#[track_caller]
fn wait(browser: &mut Browser, what: &str, js: &str, sb: &Sandbox) {
    if let Err(err) = browser.wait_for(js, PAGE_WAIT) {
        let text = browser
            .eval("document.body.innerText")
            .unwrap_or_else(|e| Value::from(format!("(unreadable: {e})")));
        panic!(
            "the page never showed {what}: {err}\nthe page reads:\n{}\n{}",
            text.as_str().unwrap_or_default(),
            sb.report()
        );
    }
}

/// Where `REGENT_SCREENSHOT` asks for the picture: a relative path is
/// taken from the workspace root.
fn screenshot_target() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("REGENT_SCREENSHOT").filter(|p| !p.is_empty())?);
    Some(if path.is_absolute() {
        path
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path)
    })
}

fn assert_png(path: &Path) {
    let png = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG: {:?}",
        path.display(),
        &png[..png.len().min(8)]
    );
    assert!(png.len() > 1000, "a {} byte PNG of a whole page", png.len());
}

/// The dashboard of `jobs` and `other` beside candidates c1 and c2 of
/// `jobs`: `/readyz` is 200 once both elections got an answer; the page
/// names the leader; after kill -9 of its regent, the same page (never
/// navigated again) names the new leader and lists the old term with its
/// end.
#[test]
fn the_dashboard_follows_a_kill_9_of_the_leader_without_a_reload() {
    let mut sb = Sandbox::new();
    jobs_candidate(&mut sb, "c1");
    let first = sb.first_start(Duration::from_secs(15));
    jobs_candidate(&mut sb, "c2");

    let addr = free_ports(1)
        .into_iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .next()
        .unwrap();
    let args: Vec<String> = [
        "dashboard",
        "--store",
        &sb.store(),
        "--election",
        "jobs,other",
        "--http",
        &addr,
    ]
    .map(String::from)
    .to_vec();
    let dashboard = sb.spawn("dashboard", &args);

    let ready = wait_for(
        Duration::from_secs(15),
        "the dashboard's /readyz to answer 200",
        || match http_get(&addr, "/readyz") {
            Ok((200, body)) => Some(body),
            _ => None,
        },
        || format!("{:?}\n{}", http_get(&addr, "/readyz"), sb.report()),
    );
    assert!(
        ready.contains("ok: jobs: ") && ready.contains("ok: other: "),
        "both elections in /readyz: {ready:?}"
    );

    let mut browser = Browser::launch().unwrap_or_else(|e| panic!("cannot start the browser: {e}"));
    browser
        .navigate(&format!("http://{addr}/"))
        .expect("load the page");
    let card = format!(r#"document.querySelector('.election[data-election="{JOBS}"]')"#);
    wait(
        &mut browser,
        &format!("leader {} with token {}", first.id, first.token),
        &format!(
            r#"(() => {{ const l = {card}.querySelector('.leader[data-holder="{id}"]');
                return l !== null && l.dataset.token === "{token}"
                    && l.querySelector(".leader-id").textContent === "{id}"; }})()"#,
            id = first.id,
            token = first.token
        ),
        &sb,
    );
    wait(
        &mut browser,
        "election other, with no leader",
        r#"(() => { const l = document.querySelector('.election[data-election="other"] .leader');
            return l !== null && l.classList.contains("none") && l.dataset.holder === ""; })()"#,
        &sb,
    );
    // The page is not loaded again from here on: this stays.
    browser
        .eval(r#"window.regentTestMarker = "same page""#)
        .unwrap();

    sb.by_id(&first.id).signal(Signal::KILL);
    let second = wait_for(
        sb.timing().crash_failover() + sb.timing().ttl,
        "the new leader's task",
        || sb.start_after(first.token),
        || sb.report(),
    );
    wait(
        &mut browser,
        &format!(
            "the new leader {} (token {}) and {}'s ended term {} in the timeline",
            second.id, second.token, first.id, first.token
        ),
        &format!(
            r#"(() => {{ const l = {card}.querySelector(".leader");
                const old = {card}.querySelector('tr.term[data-token="{old}"]');
                const now = {card}.querySelector('tr.term[data-token="{new}"]');
                return l.dataset.holder === "{id}" && l.dataset.token === "{new}"
                    && old !== null && old.dataset.holder === "{old_id}" && old.dataset.end !== ""
                    && old.querySelector("td.to").textContent !== "leading"
                    && now !== null && now.querySelector("td.to").textContent === "leading"
                    && [...{card}.querySelectorAll("tr.term")].map(r => r.dataset.token)
                        .slice(0, 2).join() === "{new},{old}"; }})()"#,
            id = second.id,
            new = second.token,
            old = first.token,
            old_id = first.id
        ),
        &sb,
    );
    assert_eq!(
        browser.eval("window.regentTestMarker").unwrap(),
        "same page",
        "the page was loaded again"
    );
    assert_eq!(
        browser
            .eval(r#"document.getElementById("status").dataset.state"#)
            .unwrap(),
        "ok"
    );
    let end = browser
        .eval(&format!(
            r#"{card}.querySelector('tr.term[data-token="{}"]').dataset.end"#,
            first.token
        ))
        .unwrap();
    eprintln!("the old term's end as the dashboard saw it: {end}");

    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("dashboard.png");
    browser.screenshot(&shot).expect("a screenshot");
    assert_png(&shot);
    if let Some(keep) = screenshot_target() {
        if let Some(parent) = keep.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{}: {e}", parent.display()));
        }
        std::fs::copy(&shot, &keep).unwrap_or_else(|e| panic!("{}: {e}", keep.display()));
        assert_png(&keep);
        eprintln!("screenshot kept at {}", keep.display());
    }
    assert!(
        sb.regent(dashboard).running(),
        "the dashboard exited\n{}",
        sb.report()
    );
}

/// `regent dashboard` without `--http` (nor `REGENT_HTTP`): exit 2,
/// naming the flag.
#[test]
fn the_dashboard_without_http_is_exit_2() {
    let sb = Sandbox::new();
    let store = sb.store();
    let out = sb.run_bounded_env(
        &["dashboard", "--store", &store, "--election", "jobs"],
        &[("REGENT_HTTP", "")],
        Duration::from_secs(15),
    );
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--http"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
}
