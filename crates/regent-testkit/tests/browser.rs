//! regent's live page (`crates/regent-cli/src/http/page.html`) in headless
//! Chromium, served with a fixture `/api/state` the test changes: the page
//! follows a change of leader without a reload, shows a lost connection
//! and recovers, and shows ids from the network as text.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use regent_testkit::browser::Browser;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

/// A holder id that is markup, from a store anyone may write to.
const HOSTILE: &str = "<img src=x onerror=alert(1)>";

/// Unix milliseconds of the fixture's first term.
const T0: i64 = 1_764_300_000_000;

/// `GET /` answers the page, `GET /api/state` the state the test set last
/// (503 while it is `None`), anything else 404. One thread per connection:
/// the browser may open a connection it sends nothing on.
struct Fixture {
    addr: SocketAddr,
    state: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Fixture {
    fn start(page: String) -> Self {
        // Bound here and held: no other process can take the port.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fixture server");
        let addr = listener.local_addr().expect("the fixture's address");
        let state = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let page = Arc::new(page);
        let accept = thread::spawn({
            let (state, stop) = (Arc::clone(&state), Arc::clone(&stop));
            move || {
                thread::scope(|scope| {
                    for stream in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let Ok(stream) = stream else { continue };
                        let (page, state) = (Arc::clone(&page), Arc::clone(&state));
                        scope.spawn(move || serve(stream, &page, &state));
                    }
                });
            }
        });
        Self {
            addr,
            state,
            stop,
            accept: Some(accept),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    fn set_state(&self, state: Option<Value>) {
        *self.state.lock().unwrap() = state.map(|s| s.to_string());
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn serve(mut stream: TcpStream, page: &str, state: &Mutex<Option<String>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut byte = [0; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let path = path.split('?').next().unwrap_or(path);
    let (status, kind, body) = match path {
        "/" => ("200 OK", "text/html; charset=utf-8", page.to_owned()),
        "/api/state" => match state.lock().unwrap().clone() {
            Some(json) => ("200 OK", "application/json", json),
            None => (
                "503 Service Unavailable",
                "text/plain",
                "fixture down".into(),
            ),
        },
        _ => ("404 Not Found", "text/plain", "not found".into()),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// The fixture's state of the one election `jobs`, at `now` ms after T0.
fn state(now: i64, election: Value) -> Value {
    let mut election = election;
    election["election"] = json!("jobs");
    election["store"] = json!("sqlite:/tmp/regent.db");
    election["self"] = Value::Null;
    json!({ "version": 1, "now_ms": T0 + now, "source": "dashboard", "elections": [election] })
}

fn term(
    holder: &str,
    token: u64,
    from: i64,
    to: Option<i64>,
    end: Option<&str>,
    gap: Option<i64>,
) -> Value {
    json!({
        "holder": holder, "token": token, "from_ms": T0 + from, "to_ms": to.map(|to| T0 + to),
        "end": end, "gap_before_ms": gap,
    })
}

/// Waits for the JavaScript condition `js` on the page; on timeout, fails
/// naming `what` and quoting the page's text.
#[track_caller]
fn wait(browser: &mut Browser, what: &str, js: &str) {
    if let Err(err) = browser.wait_for(js, WAIT) {
        let text = browser
            .eval("document.body.innerText")
            .unwrap_or_else(|e| Value::from(format!("(unreadable: {e})")));
        panic!(
            "the page never showed {what}: {err}\nthe page reads:\n{}",
            text.as_str().unwrap_or_default()
        );
    }
}

/// A JavaScript string literal holding `text`.
fn js_string(text: &str) -> String {
    Value::from(text).to_string()
}

#[test]
fn the_live_page_follows_the_leader_without_a_reload() {
    let page_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../regent-cli/src/http/page.html");
    let page = std::fs::read_to_string(&page_path)
        .unwrap_or_else(|e| panic!("read {}: {e}", page_path.display()));
    let fixture = Fixture::start(page);
    let a_term = term("a", 1, 0, None, None, None);
    fixture.set_state(Some(state(
        10_000,
        json!({
            "leader": { "id": "a", "token": 1, "metadata": { "host": "<b>h1</b>" }, "since_ms": T0 },
            "lease_left_ms": 5200,
            "candidates": ["a", "b", HOSTILE],
            "health": { "ok": true, "reason": "leading; last renewal 0.4 s ago" },
            "error": null,
            "terms": [a_term],
        }),
    )));

    let mut browser = Browser::launch().unwrap_or_else(|e| panic!("cannot start the browser: {e}"));
    browser.navigate(&fixture.url()).expect("load the page");
    assert_eq!(browser.eval("document.title").unwrap(), "regent");

    let card = r#"document.querySelector('.election[data-election="jobs"]')"#;
    wait(
        &mut browser,
        "leader a with token 1",
        &format!(
            r#"(() => {{ const l = {card}.querySelector(".leader");
                return l.dataset.holder === "a" && l.dataset.token === "1"
                    && l.querySelector(".leader-id").textContent === "a"; }})()"#
        ),
    );
    wait(
        &mut browser,
        "a lease counting down and a healthy badge",
        &format!(
            r#"/^\d+\.\d s$/.test({card}.querySelector(".lease .value").textContent)
                && {card}.querySelector(".health").dataset.ok === "true""#
        ),
    );
    // The page is not reloaded from here on: this stays.
    browser
        .eval(r#"window.regentTestMarker = "same page"; window.alert = () => { window.regentAlerted = true; }"#)
        .unwrap();

    // The lease is lost: no leader, a's term ended.
    let a_lost = term("a", 1, 0, Some(12_000), Some("lease lost"), None);
    fixture.set_state(Some(state(
        12_500,
        json!({
            "leader": null, "lease_left_ms": null, "candidates": ["b", HOSTILE],
            "health": { "ok": false, "reason": "no leader" },
            "error": "store unreachable: <script>alert(2)</script>",
            "terms": [a_lost],
        }),
    )));
    wait(
        &mut browser,
        "no leader, with the store's error",
        &format!(
            r#"(() => {{ const l = {card}.querySelector(".leader");
                return l.classList.contains("none") && l.dataset.token === ""
                    && l.textContent.includes("no leader")
                    && {card}.querySelector(".error").textContent.includes("<script>alert(2)</script>")
                    && !{card}.querySelector(".error").hidden; }})()"#
        ),
    );

    // b takes over after a gap of 1.2 s.
    fixture.set_state(Some(state(
        14_000,
        json!({
            "leader": { "id": "b", "token": 2, "metadata": {}, "since_ms": T0 + 13_200 },
            "lease_left_ms": 4800, "candidates": ["b", HOSTILE],
            "health": { "ok": true, "reason": "leading" }, "error": null,
            "terms": [a_lost, term("b", 2, 13_200, None, None, Some(1_200))],
        }),
    )));
    wait(
        &mut browser,
        "leader b with token 2",
        &format!(
            r#"(() => {{ const l = {card}.querySelector(".leader");
                return l.dataset.holder === "b" && l.dataset.token === "2"
                    && l.querySelector(".leader-id").textContent === "b"; }})()"#
        ),
    );
    wait(
        &mut browser,
        "the timeline newest first, token 1 ended by a lost lease, 1.2 s before token 2",
        &format!(
            r#"(() => {{ const rows = [...{card}.querySelectorAll("tr.term")];
                const one = {card}.querySelector('tr.term[data-token="1"]');
                const two = {card}.querySelector('tr.term[data-token="2"]');
                return rows.map(r => r.dataset.token).join() === "2,1"
                    && one.dataset.end === "lease lost"
                    && one.querySelector("td.end").textContent === "lease lost"
                    && one.querySelector("td.holder").textContent === "a"
                    && two.querySelector("td.to").textContent === "leading"
                    && two.querySelector("td.gap").textContent === "1.2 s"
                    && {card}.querySelectorAll("svg.bars rect.bar").length === 2
                    && {card}.querySelector(".error").hidden; }})()"#
        ),
    );
    assert_eq!(
        browser.eval("window.regentTestMarker").unwrap(),
        "same page",
        "the page was reloaded"
    );

    // The server stops answering, then answers again.
    let polls = |browser: &mut Browser| {
        browser
            .eval(r#"Number(document.getElementById("status").dataset.polls)"#)
            .unwrap()
            .as_f64()
            .unwrap()
    };
    let before = polls(&mut browser);
    let b_state = fixture.state.lock().unwrap().clone();
    fixture.set_state(None);
    wait(
        &mut browser,
        "the lost connection",
        r#"(() => { const s = document.getElementById("status");
            return s.dataset.state === "lost" && s.textContent === "connection lost — retrying"; })()"#,
    );
    *fixture.state.lock().unwrap() = b_state;
    wait(
        &mut browser,
        "the connection back",
        r#"document.getElementById("status").dataset.state === "ok""#,
    );
    assert!(polls(&mut browser) > before);

    // A holder id that is markup leads: it is shown as text, nothing runs.
    let hostile = js_string(HOSTILE);
    fixture.set_state(Some(state(
        20_000,
        json!({
            "leader": { "id": HOSTILE, "token": 3, "metadata": { "<i>k</i>": "<img src=y onerror=alert(3)>" }, "since_ms": T0 + 19_000 },
            "lease_left_ms": null, "candidates": [HOSTILE, "b"],
            "health": null, "error": null,
            "terms": [a_lost, term("b", 2, 13_200, Some(18_000), Some("released"), Some(1_200)),
                      term(HOSTILE, 3, 19_000, None, None, Some(1_000))],
        }),
    )));
    wait(
        &mut browser,
        "the markup id as text",
        &format!(
            r#"(() => {{ const l = {card}.querySelector(".leader");
                return l.dataset.holder === {hostile} && l.dataset.token === "3"
                    && l.querySelector(".leader-id").textContent === {hostile}
                    && {card}.querySelector('tr.term[data-token="3"] td.holder').textContent === {hostile}
                    && {card}.querySelector(".candidate").textContent === {hostile}
                    && {card}.querySelector(".metadata").textContent.includes("<img src=y onerror=alert(3)>")
                    && {card}.querySelector(".health").dataset.ok === "unknown"; }})()"#
        ),
    );
    let injected = browser
        .eval(r#"[document.querySelectorAll("main img, main script, main b, main i").length, window.regentAlerted === true]"#)
        .unwrap();
    assert_eq!(
        injected,
        json!([0, false]),
        "markup from the state became elements"
    );
    assert_eq!(
        browser.eval("window.regentTestMarker").unwrap(),
        "same page"
    );

    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("page.png");
    browser.screenshot(&shot).expect("a screenshot");
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG: {:?}",
        &png[..png.len().min(8)]
    );
    assert!(png.len() > 1000, "a {} byte PNG of a whole page", png.len());
}

#[test]
fn a_dropped_browser_leaves_no_process() {
    let browser = Browser::launch().unwrap_or_else(|e| panic!("cannot start the browser: {e}"));
    let pid = i32::try_from(browser.pid()).unwrap();
    assert!(!regent_proc::group_members(pid).is_empty());
    drop(browser);
    assert_eq!(regent_proc::group_members(pid), Vec::<i32>::new());
    assert!(!regent_proc::alive(pid));
}
