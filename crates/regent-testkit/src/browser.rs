//! Headless Chromium, driven over its DevTools protocol, for tests of the
//! live page `regent run --http` and `regent dashboard` serve.
//!
//! A [`Browser`] is one Chromium process with one page. The test loads a
//! URL ([`Browser::navigate`]), reads and acts on the page by evaluating
//! JavaScript in it ([`Browser::eval`]), waits for a condition on the page
//! to hold ([`Browser::wait_for`]: tests wait on conditions, never sleep a
//! fixed time), and keeps a picture of it ([`Browser::screenshot`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use regent_testkit::browser::Browser;
//!
//! let mut browser = Browser::launch()?;
//! browser.navigate("http://127.0.0.1:8080/")?;
//! let leader = browser.wait_for(
//!     r#"document.querySelector(".leader")?.dataset.holder"#,
//!     Duration::from_secs(5),
//! )?;
//! assert_eq!(leader, "a");
//! # Ok::<(), regent_testkit::browser::BrowserError>(())
//! ```
//!
//! # How
//!
//! [`Browser::launch`] starts `chromium --headless --no-sandbox
//! --remote-debugging-port=0` (the sandbox needs a user namespace or a
//! setuid helper that test machines running as root lack) with a profile
//! in a temporary directory, in a process group of its own, and with flags
//! that keep it offline and quiet: no first-run, sync, component updates,
//! crash reports or other background requests. Its output goes to a log
//! in that directory, where the kit reads the "DevTools listening on
//! ws://…" line for the port Chromium picked, and quotes the log's tail in
//! startup errors.
//!
//! The kit then speaks the protocol over that one browser-wide WebSocket
//! (blocking, with [`tungstenite`]): it takes the page Chromium opened
//! (`Target.getTargets`, or `Target.createTarget` when there is none yet)
//! and attaches to it in flat mode, so page commands carry its session id.
//! That needs no request to the HTTP endpoints (`/json/list`, `/json/new`,
//! whose method changed between versions).
//!
//! Dropping the [`Browser`] SIGKILLs Chromium's whole process group (its
//! renderer and utility processes too), by the PID the kit recorded, never
//! by name, then removes the profile.
//!
//! Chromium comes from the Debian package `chromium`, which
//! `scripts/install-engines` installs; `REGENT_CHROMIUM_BIN` names another
//! binary. A missing browser is an error naming that script
//! ([`BrowserError::NotInstalled`]): a test that needs it fails, never
//! skips.
//!
//! The API is blocking and [`Send`]: call it from a plain `#[test]`, or
//! from `tokio::task::spawn_blocking` where other tasks must keep running.

use std::fs::{self, File};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tempfile::TempDir;
use tungstenite::{Message, WebSocket};

/// How long [`Browser::launch`] waits for Chromium to listen for the
/// DevTools protocol and open its page.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(20);

/// How long one protocol command may take before it fails with
/// [`BrowserError::Timeout`]; [`Browser::navigate`] waits this long for
/// the page to load.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// How often [`Browser::wait_for`] evaluates its condition.
pub const WAIT_POLL: Duration = Duration::from_millis(50);

/// The variable naming another Chromium binary than `chromium` on `PATH`.
pub const BIN_VAR: &str = "REGENT_CHROMIUM_BIN";

/// The flags besides the protocol port, the profile and the first URL:
/// headless, without the sandbox (see the [module docs](self)), offline
/// and quiet.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--window-size=1200,900",
    "--hide-scrollbars",
    "--mute-audio",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    // Containers often give /dev/shm 64 MB, too little for renderers.
    "--disable-dev-shm-usage",
];

/// What Chromium prints once its protocol endpoint listens.
const LISTENING: &str = "DevTools listening on ";

/// How many lines of Chromium's log startup errors quote.
const LOG_TAIL_LINES: usize = 20;

/// Why the browser could not be started or driven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrowserError {
    /// `chromium` is not on `PATH`.
    #[error("chromium not found on PATH; run scripts/install-engines")]
    NotInstalled,
    /// The binary [`BIN_VAR`] names does not exist.
    #[error("chromium not found at {} (set by {BIN_VAR}); run scripts/install-engines", path.display())]
    NotInstalledAt {
        /// The path the variable named.
        path: PathBuf,
    },
    /// Setting up for the browser or talking to it failed: a temporary
    /// directory, the log, starting the process, the connection, writing
    /// a screenshot.
    #[error("could not {action}")]
    Io {
        /// What the kit was doing, such as "start chromium".
        action: &'static str,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// Chromium exited while it was starting.
    #[error("chromium exited during startup ({status}); its log ends with:\n{log_tail}")]
    Exited {
        /// How it exited.
        status: ExitStatus,
        /// The last lines of its log.
        log_tail: String,
    },
    /// Chromium kept running but did not say where its protocol listens
    /// within [`LAUNCH_TIMEOUT`].
    #[error(
        "chromium did not listen for DevTools after {waited:?}; its log ends with:\n{log_tail}"
    )]
    NotListening {
        /// How long the kit waited.
        waited: Duration,
        /// The last lines of its log.
        log_tail: String,
    },
    /// The protocol's WebSocket failed: the handshake, a read or a write.
    #[error("DevTools WebSocket: could not {action}")]
    WebSocket {
        /// What the kit was doing, such as "read a message".
        action: &'static str,
        /// Why it failed.
        #[source]
        source: tungstenite::Error,
    },
    /// Chromium closed the protocol's connection.
    #[error("chromium closed the DevTools connection")]
    Closed,
    /// Chromium answered a command with an error, or with an answer the
    /// kit cannot read.
    #[error("DevTools {method}: {message}")]
    Protocol {
        /// The command, such as `Page.navigate`.
        method: String,
        /// Chromium's error message, or what is wrong with its answer.
        message: String,
    },
    /// The page could not be loaded (Chromium's `errorText`, such as
    /// `net::ERR_CONNECTION_REFUSED`).
    #[error("could not load {url}: {reason}")]
    Navigation {
        /// The URL given to [`Browser::navigate`].
        url: String,
        /// Chromium's reason.
        reason: String,
    },
    /// The JavaScript evaluated threw (or its promise rejected).
    #[error("JavaScript threw: {message}")]
    Script {
        /// The exception as the page describes it, with its stack.
        message: String,
    },
    /// A command, a page load or a [`Browser::wait_for`] condition did not
    /// finish in time.
    #[error("timed out after {waited:?} waiting for {what}; last seen: {last}")]
    Timeout {
        /// What the kit waited for: a command or the condition's source.
        what: String,
        /// How long it waited.
        waited: Duration,
        /// The condition's last value or exception, or "nothing".
        last: String,
    },
}

/// Headless Chromium with one page, driven over the DevTools protocol (see
/// the [module docs](crate::browser)); SIGKILLed with its process group
/// when dropped.
#[derive(Debug)]
pub struct Browser {
    socket: WebSocket<TcpStream>,
    /// The page's session on the browser-wide connection.
    session: String,
    next_id: u64,
    /// Set when the page fired its load event (Page domain events are on).
    loaded: bool,
    // Declared last: dropped after the connection closed.
    process: Chromium,
}

impl Browser {
    /// Starts headless Chromium with a blank page.
    ///
    /// # Errors
    ///
    /// [`BrowserError::NotInstalled`] (or `NotInstalledAt`) when Chromium
    /// is missing, naming `scripts/install-engines`; otherwise when it does
    /// not start, exits, or does not answer within [`LAUNCH_TIMEOUT`].
    pub fn launch() -> Result<Self, BrowserError> {
        let started = Instant::now();
        let deadline = started + LAUNCH_TIMEOUT;
        let mut process = Chromium::spawn()?;
        let endpoint = process.wait_listening(started, deadline)?;
        let socket = connect(&endpoint, deadline)?;
        let mut browser = Self {
            socket,
            session: String::new(),
            next_id: 0,
            loaded: false,
            process,
        };
        let targets = browser.command("Target.getTargets", json!({}))?;
        let page = targets["targetInfos"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|target| target["type"] == "page")
            .and_then(|target| target["targetId"].as_str())
            .map(str::to_owned);
        let page = match page {
            Some(page) => page,
            None => {
                let created =
                    browser.command("Target.createTarget", json!({ "url": "about:blank" }))?;
                string_field(&created, "targetId", "Target.createTarget")?
            }
        };
        let attached = browser.command(
            "Target.attachToTarget",
            json!({ "targetId": page, "flatten": true }),
        )?;
        browser.session = string_field(&attached, "sessionId", "Target.attachToTarget")?;
        browser.command("Page.enable", json!({}))?;
        Ok(browser)
    }

    /// Chromium's PID (its process group has the same number).
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// Loads `url` in the page and returns once its load event fired
    /// (scripts ran, the page's own requests may still be on their way).
    ///
    /// # Errors
    ///
    /// [`BrowserError::Navigation`] when Chromium cannot load it (a
    /// refused connection, say); [`BrowserError::Timeout`] when the load
    /// event does not come within [`CALL_TIMEOUT`]; protocol failures.
    pub fn navigate(&mut self, url: &str) -> Result<(), BrowserError> {
        self.loaded = false;
        let answer = self.command("Page.navigate", json!({ "url": url }))?;
        if let Some(reason) = answer["errorText"].as_str().filter(|r| !r.is_empty()) {
            return Err(BrowserError::Navigation {
                url: url.to_owned(),
                reason: reason.to_owned(),
            });
        }
        // A navigation within the document (a new fragment) has no loader
        // and fires no load event.
        if answer.get("loaderId").is_none() {
            return Ok(());
        }
        let deadline = Instant::now() + CALL_TIMEOUT;
        while !self.loaded {
            self.receive(deadline, || format!("{url} to load"))?;
        }
        Ok(())
    }

    /// Evaluates the JavaScript expression `js` in the page and returns its
    /// value as JSON; a promise is awaited. `undefined`, and values JSON
    /// cannot hold, come back as [`Value::Null`].
    ///
    /// # Errors
    ///
    /// [`BrowserError::Script`] when it throws or its promise rejects;
    /// [`BrowserError::Timeout`] after [`CALL_TIMEOUT`]; protocol failures.
    pub fn eval(&mut self, js: &str) -> Result<Value, BrowserError> {
        let mut answer = self.command(
            "Runtime.evaluate",
            json!({ "expression": js, "returnByValue": true, "awaitPromise": true }),
        )?;
        if let Some(details) = answer.get("exceptionDetails") {
            let message = details["exception"]["description"]
                .as_str()
                .or_else(|| details["text"].as_str())
                .unwrap_or("an exception without a description");
            return Err(BrowserError::Script {
                message: message.to_owned(),
            });
        }
        Ok(answer["result"]["value"].take())
    }

    /// Evaluates `predicate` (a JavaScript expression) every [`WAIT_POLL`]
    /// until its value is truthy, as JavaScript counts it, and returns that
    /// value. An exception counts as "not yet" (an element the expression
    /// reads may not exist yet).
    ///
    /// # Errors
    ///
    /// [`BrowserError::Timeout`] when `timeout` passes first, quoting the
    /// last value or exception; protocol failures at once.
    pub fn wait_for(&mut self, predicate: &str, timeout: Duration) -> Result<Value, BrowserError> {
        let started = Instant::now();
        loop {
            let last = match self.eval(predicate) {
                Ok(value) if truthy(&value) => return Ok(value),
                Ok(value) => value.to_string(),
                Err(BrowserError::Script { message }) => format!("threw {message}"),
                Err(err) => return Err(err),
            };
            if started.elapsed() >= timeout {
                return Err(BrowserError::Timeout {
                    what: format!("`{predicate}` to be truthy"),
                    waited: started.elapsed(),
                    last,
                });
            }
            thread::sleep(WAIT_POLL);
        }
    }

    /// Writes a PNG of the page's viewport to `path`.
    ///
    /// # Errors
    ///
    /// When Chromium cannot capture the page or the file cannot be
    /// written.
    pub fn screenshot(&mut self, path: impl AsRef<Path>) -> Result<(), BrowserError> {
        let method = "Page.captureScreenshot";
        let answer = self.command(method, json!({ "format": "png" }))?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(string_field(&answer, "data", method)?)
            .map_err(|err| BrowserError::Protocol {
                method: method.to_owned(),
                message: format!("data is not base64: {err}"),
            })?;
        fs::write(path, png).map_err(|source| BrowserError::Io {
            action: "write a screenshot",
            source,
        })
    }

    /// Sends the command `method` (to the page once attached, else to the
    /// browser) and returns its result, noting the events that arrive
    /// meanwhile.
    fn command(&mut self, method: &str, params: Value) -> Result<Value, BrowserError> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            message["sessionId"] = Value::from(self.session.as_str());
        }
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(|source| BrowserError::WebSocket {
                action: "send a command",
                source,
            })?;
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let mut reply = self.receive(deadline, || format!("an answer to {method}"))?;
            if reply["id"] != id {
                continue;
            }
            if let Some(error) = reply.get("error") {
                return Err(BrowserError::Protocol {
                    method: method.to_owned(),
                    message: error.to_string(),
                });
            }
            return Ok(reply["result"].take());
        }
    }

    /// The next message from Chromium, noting the page's load event;
    /// [`BrowserError::Timeout`] naming `what` once `deadline` passes.
    fn receive(
        &mut self,
        deadline: Instant,
        what: impl Fn() -> String,
    ) -> Result<Value, BrowserError> {
        let started = Instant::now();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(BrowserError::Timeout {
                    what: what(),
                    waited: started.elapsed(),
                    last: "nothing".to_owned(),
                });
            }
            self.socket
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(|source| BrowserError::Io {
                    action: "set the DevTools connection's read timeout",
                    source,
                })?;
            let text = match self.socket.read() {
                Ok(Message::Text(text)) => text,
                Ok(Message::Close(_)) | Err(tungstenite::Error::ConnectionClosed) => {
                    return Err(BrowserError::Closed);
                }
                Ok(_) => continue,
                // The read timed out: tungstenite keeps a partial frame.
                Err(tungstenite::Error::Io(err))
                    if matches!(
                        err.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    continue;
                }
                Err(source) => {
                    return Err(BrowserError::WebSocket {
                        action: "read a message",
                        source,
                    });
                }
            };
            let message: Value =
                serde_json::from_str(text.as_str()).map_err(|err| BrowserError::Protocol {
                    method: "(a message)".to_owned(),
                    message: format!("not JSON: {err}"),
                })?;
            if message["method"] == "Page.loadEventFired" && message["sessionId"] == self.session {
                self.loaded = true;
            }
            return Ok(message);
        }
    }
}

/// The Chromium process and its directory (profile and log).
#[derive(Debug)]
struct Chromium {
    child: Child,
    // Declared last: removed after `Drop` killed the process.
    dir: TempDir,
}

impl Chromium {
    fn spawn() -> Result<Self, BrowserError> {
        let io = |action| move |source| BrowserError::Io { action, source };
        let dir = tempfile::Builder::new()
            .prefix("regent-chromium-")
            .tempdir()
            .map_err(io("create a temporary directory for chromium"))?;
        let log = File::create(dir.path().join("chromium.log"))
            .map_err(io("create chromium's log file"))?;
        let overridden = std::env::var_os(BIN_VAR)
            .filter(|path| !path.is_empty())
            .map(PathBuf::from);
        let program = overridden.clone().unwrap_or_else(|| "chromium".into());
        let mut command = Command::new(&program);
        command
            .args(FLAGS)
            .arg("--remote-debugging-port=0")
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("profile").display()
            ))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                log.try_clone().map_err(io("open chromium's log file"))?,
            ))
            .stderr(Stdio::from(log))
            // Its own group: Drop kills the renderers with it.
            .process_group(0);
        let child = command
            .spawn()
            .map_err(|source| match (source.kind(), overridden) {
                (io::ErrorKind::NotFound, Some(path)) => BrowserError::NotInstalledAt { path },
                (io::ErrorKind::NotFound, None) => BrowserError::NotInstalled,
                _ => io("start chromium")(source),
            })?;
        Ok(Self { child, dir })
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("chromium.log")).unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
    }

    /// The browser's WebSocket URL, from the "DevTools listening on" line
    /// of the log.
    fn wait_listening(
        &mut self,
        started: Instant,
        deadline: Instant,
    ) -> Result<String, BrowserError> {
        loop {
            let log = self.log();
            let line = log
                .find(LISTENING)
                .map(|at| &log[at + LISTENING.len()..])
                // Only a whole line: Chromium may be midway through it.
                .and_then(|rest| rest.split_once('\n'))
                .map(|(url, _)| url.trim().to_owned());
            if let Some(url) = line {
                return Ok(url);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(BrowserError::Exited {
                    status,
                    log_tail: self.log_tail(),
                });
            }
            if Instant::now() >= deadline {
                return Err(BrowserError::NotListening {
                    waited: started.elapsed(),
                    log_tail: self.log_tail(),
                });
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let Ok(pid) = i32::try_from(self.child.id()) else {
            return;
        };
        // The group's number is Chromium's PID, and stays taken while any
        // member lives (or Chromium is not reaped), so it names no other
        // processes. kill_tree also reaches any child that left the group.
        regent_proc::kill_tree(pid);
        regent_proc::signal_group(pid, regent_proc::Signal::KILL);
        let _ = self.child.wait();
        // Let the renderers die before their profile is removed.
        let until = Instant::now() + Duration::from_secs(5);
        while !regent_proc::group_members(pid).is_empty() && Instant::now() < until {
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Opens the browser-wide protocol WebSocket at `url` (`ws://HOST:PORT/…`).
fn connect(url: &str, deadline: Instant) -> Result<WebSocket<TcpStream>, BrowserError> {
    let io = |action| move |source| BrowserError::Io { action, source };
    let addr: SocketAddr = url
        .strip_prefix("ws://")
        .and_then(|rest| rest.split('/').next())
        .and_then(|host_port| host_port.parse().ok())
        .ok_or_else(|| BrowserError::Protocol {
            method: "(startup)".to_owned(),
            message: format!("cannot read the address of {url:?}"),
        })?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(100));
    let stream = TcpStream::connect_timeout(&addr, left).map_err(io("connect to chromium"))?;
    stream
        .set_read_timeout(Some(left))
        .map_err(io("set the DevTools connection's read timeout"))?;
    stream
        .set_nodelay(true)
        .map_err(io("set TCP_NODELAY on the DevTools connection"))?;
    let (socket, _) = tungstenite::client(url, stream).map_err(|err| match err {
        tungstenite::HandshakeError::Failure(source) => BrowserError::WebSocket {
            action: "complete the handshake",
            source,
        },
        tungstenite::HandshakeError::Interrupted(_) => BrowserError::Timeout {
            what: "the DevTools WebSocket handshake".to_owned(),
            waited: left,
            last: "nothing".to_owned(),
        },
    })?;
    Ok(socket)
}

/// The string field `name` of `answer`, an answer to `method`.
fn string_field(answer: &Value, name: &str, method: &str) -> Result<String, BrowserError> {
    answer[name]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| BrowserError::Protocol {
            method: method.to_owned(),
            message: format!("answer without {name}: {answer}"),
        })
}

/// Whether JavaScript counts `value` as true.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0 && !n.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthy_as_javascript_counts_it() {
        for value in [json!(null), json!(false), json!(0), json!(0.0), json!("")] {
            assert!(!truthy(&value), "{value}");
        }
        for value in [json!(true), json!(1), json!("a"), json!([]), json!({})] {
            assert!(truthy(&value), "{value}");
        }
    }

    #[test]
    fn browser_is_send() {
        fn send<T: Send>() {}
        send::<Browser>();
    }
}
