//! The Azurite engines of the test kit, against the real Azurite 3.35
//! (installed by `scripts/install-engines`; without it these tests fail,
//! naming that script): one of a test's own, and the shared one.
//!
//! The kit signs nothing; these tests sign their few Blob requests
//! themselves (shared key, the development account's well-known key), to
//! see that what the kit promises holds for a client: the connection
//! string works, data survives a restart, shares get containers of their
//! own.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use regent_testkit::engines::azurite::{
    ACCOUNT, ACCOUNT_KEY, AUTOSAVE_INTERVAL, CONTAINER, EXPIRY_SLACK, MIN_TTL, operator_request,
};
use regent_testkit::engines::{Azurite, Engine, EngineError, SharedAzurite, Signaled};

use common::in_child_with_env;

/// The state letter of `/proc/PID/stat` (`T` when stopped), `None` once
/// the process is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

/// Waits with a bound until `check` holds, failing with `what`.
#[track_caller]
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

/// The address in a blob endpoint `http://127.0.0.1:PORT/devstoreaccount1`.
fn addr_of(blob_endpoint: &str) -> SocketAddr {
    blob_endpoint
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix(&format!("/{ACCOUNT}")))
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("not a blob endpoint: {blob_endpoint}"))
}

/// A response: the status, and the headers and body as text.
struct Response {
    status: u16,
    text: String,
}

impl Response {
    /// The value of header `name`, if present.
    fn header(&self, name: &str) -> Option<&str> {
        let head = self.text.split("\r\n\r\n").next()?;
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// `METHOD /devstoreaccount1/PATH?QUERY` without a body, signed with the
/// development account's shared key, as the kit's operator requests send
/// it.
fn signed(
    addr: SocketAddr,
    method: &str,
    path: &str,
    query: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Response {
    let r = operator_request(addr, method, path, query, headers)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let mut text = format!("HTTP/1.1 {}\r\n", r.status);
    for (k, v) in &r.headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(&r.body);
    Response {
        status: r.status,
        text,
    }
}

#[track_caller]
fn expect(status: u16, response: Response) -> Response {
    assert_eq!(response.status, status, "{}", response.text);
    response
}

fn create_container(addr: SocketAddr, container: &str) -> Response {
    signed(
        addr,
        "PUT",
        &format!("/{container}"),
        &[("restype", "container")],
        &[],
    )
}

fn create_blob(addr: SocketAddr, container: &str, blob: &str) -> Response {
    signed(
        addr,
        "PUT",
        &format!("/{container}/{blob}"),
        &[],
        &[("x-ms-blob-type", "BlockBlob")],
    )
}

/// Acquires a lease of `duration` seconds (`-1`: infinite) on a blob.
fn acquire(addr: SocketAddr, container: &str, blob: &str, duration: &str) -> Response {
    signed(
        addr,
        "PUT",
        &format!("/{container}/{blob}"),
        &[("comp", "lease")],
        &[
            ("x-ms-lease-action", "acquire"),
            ("x-ms-lease-duration", duration),
        ],
    )
}

/// The blob's `x-ms-lease-state`, from its properties.
fn lease_state(addr: SocketAddr, container: &str, blob: &str) -> String {
    let properties = expect(
        200,
        signed(addr, "HEAD", &format!("/{container}/{blob}"), &[], &[]),
    );
    properties
        .header("x-ms-lease-state")
        .expect("a lease state")
        .to_owned()
}

#[test]
fn azurite_answers_a_signed_request_of_its_connection_string_and_is_gone_after_drop() {
    let launched = Instant::now();
    let azurite = Azurite::start().unwrap();
    eprintln!("azurite ready {:?} after launch", launched.elapsed());
    assert!(azurite.is_healthy());
    assert_eq!(azurite.kind(), "azblob");
    assert_eq!(azurite.store_url(), format!("azblob://{CONTAINER}"));
    assert_eq!(azurite.container(), CONTAINER);
    assert_eq!(azurite.min_ttl(), MIN_TTL);
    assert_eq!(azurite.expiry_slack(), EXPIRY_SLACK);
    assert_eq!(
        azurite.client_env(),
        [(
            "AZURE_STORAGE_CONNECTION_STRING".to_owned(),
            azurite.connection_string()
        )]
    );
    assert_ne!(azurite.addr().port(), 10000, "not Azurite's default");
    assert_eq!(
        azurite.blob_endpoint(),
        format!("http://{}/devstoreaccount1", azurite.addr())
    );
    assert_eq!(
        azurite.connection_string(),
        format!(
            "DefaultEndpointsProtocol=http;AccountName={};AccountKey={};BlobEndpoint={};",
            azurite.account(),
            azurite.key(),
            azurite.blob_endpoint()
        )
    );

    // Unsigned: refused, even in loose mode. Signed: listed.
    let unsigned = azurite.http_get("/devstoreaccount1?comp=list").unwrap();
    assert_eq!(unsigned.status, 403, "{}", unsigned.body);
    let addr = addr_of(&azurite.blob_endpoint());
    expect(201, create_container(addr, CONTAINER));
    let list = expect(200, signed(addr, "GET", "", &[("comp", "list")], &[]));
    assert!(
        list.text.contains(&format!("<Name>{CONTAINER}</Name>")),
        "{}",
        list.text
    );

    // The PID is node's, working in the engine's directory.
    let pid = azurite.pid().expect("running");
    let dir = azurite.log_path().parent().unwrap().to_owned();
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap(),
        dir,
        "Azurite works in its own directory"
    );
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap()
            .trim(),
        "node"
    );
    assert!(azurite.data_dir().starts_with(&dir));
    assert!(
        azurite.data_dir().join("__azurite_db_blob__.json").exists(),
        "Azurite keeps its metadata on disk"
    );
    if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
        let rss = status.lines().find(|l| l.starts_with("VmRSS"));
        eprintln!("azurite {}", rss.unwrap_or("VmRSS unknown"));
    }

    drop(azurite);
    assert_eq!(state(pid), None, "azurite (pid {pid}) outlived drop");
    assert!(TcpStream::connect(addr).is_err(), "{addr} still accepts");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn azurite_pauses_and_keeps_containers_blobs_and_leases_across_stop_and_restart() {
    let mut azurite = Azurite::start().unwrap();
    let url = azurite.store_url();
    let addr = addr_of(&azurite.blob_endpoint());
    expect(201, create_container(addr, "keep"));
    expect(201, create_blob(addr, "keep", "leader"));
    expect(400, acquire(addr, "keep", "leader", "5"));
    expect(201, acquire(addr, "keep", "leader", "15"));
    expect(409, acquire(addr, "keep", "leader", "15"));
    expect(201, create_blob(addr, "keep", "forever"));
    expect(201, acquire(addr, "keep", "forever", "-1"));

    let pid = azurite.pid().unwrap();
    assert_eq!(azurite.pause(), Signaled::Sent);
    eventually("SIGSTOP to take effect", || state(pid) == Some('T'));
    assert!(!azurite.is_healthy(), "a paused Azurite answered");
    assert_eq!(azurite.resume(), Signaled::Sent);
    eventually("Azurite to answer again", || azurite.is_healthy());
    assert_eq!(azurite.pid(), Some(pid));

    let stopping = Instant::now();
    assert_eq!(azurite.stop(), Signaled::Sent);
    eprintln!("azurite stopped {:?} after SIGTERM", stopping.elapsed());
    assert_eq!(azurite.pid(), None);
    assert_eq!(state(pid), None);
    assert!(!azurite.is_healthy());
    assert_eq!(azurite.stop(), Signaled::NotRunning);
    let log = azurite.log_tail(5);
    assert!(log.contains("successfully closed"), "not stopped:\n{log}");

    let restarting = Instant::now();
    azurite.restart().unwrap();
    eprintln!("azurite restarted in {:?}", restarting.elapsed());
    assert!(azurite.is_healthy());
    assert_eq!(azurite.store_url(), url);
    assert_eq!(addr_of(&azurite.blob_endpoint()), addr, "the same port");
    // Same data: the blobs and the infinite lease are there.
    assert_eq!(lease_state(addr, "keep", "forever"), "leased");
    expect(409, acquire(addr, "keep", "forever", "15"));
    // Azurite 3.35 reads a finite lease's expiry back from disk as a
    // string and finds it expired: the restart ended the 15 s lease. (If
    // this fails, Azurite keeps finite leases now: say so in the module
    // docs of `engines::azurite`.)
    assert_eq!(lease_state(addr, "keep", "leader"), "expired");
    expect(201, acquire(addr, "keep", "leader", "15"));

    // A crash: what Azurite saved before it (every AUTOSAVE_INTERVAL) is
    // there after the restart.
    expect(201, create_blob(addr, "keep", "saved"));
    expect(201, acquire(addr, "keep", "saved", "-1"));
    thread::sleep(AUTOSAVE_INTERVAL + Duration::from_secs(1));
    let pid = azurite.pid().unwrap();
    assert_eq!(azurite.kill(), Signaled::Sent);
    assert_eq!(azurite.pid(), None);
    assert_eq!(state(pid), None, "pid {pid} outlived kill");
    assert!(!azurite.is_healthy());
    assert_eq!(azurite.kill(), Signaled::NotRunning);
    azurite.restart().unwrap();
    assert!(azurite.is_healthy());
    assert_eq!(lease_state(addr, "keep", "saved"), "leased");
    assert_eq!(lease_state(addr, "keep", "forever"), "leased");
}

#[test]
fn shared_azurite_gives_each_share_its_own_container_on_one_process() {
    let a = SharedAzurite::get().unwrap();
    let mut b = SharedAzurite::get().unwrap();
    assert_ne!(a.container(), b.container());
    assert_ne!(a.store_url(), b.store_url());
    assert_eq!(a.store_url(), format!("azblob://{}", a.container()));
    for share in [&a, &b] {
        let container = share.container();
        assert!(
            container.starts_with('t')
                && container.contains("-shared-azurite-gives-each-share")
                && container.len() <= 63,
            "{container}"
        );
    }
    assert_eq!(a.pid(), b.pid());
    assert!(a.pid().is_some());
    assert_eq!(a.connection_string(), b.connection_string());
    assert_eq!(a.blob_endpoint(), b.blob_endpoint());
    assert_eq!((a.account(), a.key()), (ACCOUNT, ACCOUNT_KEY));
    assert!(a.is_healthy() && b.is_healthy());
    assert_eq!(a.kind(), "azblob");
    assert_eq!(a.min_ttl(), MIN_TTL);
    assert_eq!(a.client_env(), b.client_env());
    assert_eq!(
        a.client_env(),
        [(
            "AZURE_STORAGE_CONNECTION_STRING".to_owned(),
            a.connection_string().to_owned()
        )]
    );
    assert_eq!(
        a.with_azurite(|azurite| azurite.connection_string()),
        a.connection_string()
    );

    // Valid container names, created side by side.
    let addr = addr_of(a.blob_endpoint());
    expect(201, create_container(addr, a.container()));
    expect(201, create_container(addr, b.container()));

    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.kill()));
    assert!(refused.is_err(), "a share killed the shared Azurite");
    assert!(a.is_healthy());
}

#[test]
fn shared_azurite_is_stopped_and_removed_when_the_test_process_exits() {
    const VAR: &str = "REGENT_TESTKIT_SHARED_AZURITE_CHILD";
    let name = "shared_azurite_is_stopped_and_removed_when_the_test_process_exits";
    if std::env::var_os(VAR).is_some() {
        let share = SharedAzurite::get().unwrap();
        let (pid, dir) = share.with_azurite(|azurite| {
            (
                azurite.pid().unwrap(),
                azurite.log_path().parent().unwrap().to_owned(),
            )
        });
        println!("shared azurite {pid} {}", dir.display());
        return;
    }
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture"])
        .env(VAR, "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stdout).into_owned();
    assert!(child.status.success(), "child test failed:\n{out}");
    let line = out
        .lines()
        .find_map(|line| line.strip_prefix("shared azurite "))
        .unwrap_or_else(|| panic!("the child named no Azurite:\n{out}"));
    let (pid, dir) = line.split_once(' ').unwrap();
    let pid: u32 = pid.parse().unwrap();
    let dir = Path::new(dir);
    eventually("the watchman to stop the shared Azurite", || {
        state(pid).is_none() && !dir.exists()
    });
}

#[test]
fn missing_azurite_is_an_error_naming_the_install_script() {
    in_child_with_env(
        "missing_azurite_is_an_error_naming_the_install_script",
        "REGENT_AZURITE_BIN",
        "/nonexistent/azurite-blob",
        || {
            // The first share tries, and fails as Azurite::start does; the
            // next fails without trying, quoting the first.
            for err in [
                Azurite::start().unwrap_err(),
                SharedAzurite::get().unwrap_err(),
            ] {
                assert!(
                    matches!(
                        err,
                        EngineError::NotInstalledAt {
                            program: "azurite-blob",
                            ..
                        }
                    ),
                    "{err:?}"
                );
                assert!(
                    err.to_string().contains("run scripts/install-engines"),
                    "{err}"
                );
            }
            let again = SharedAzurite::get().unwrap_err();
            assert!(
                matches!(
                    again,
                    EngineError::SharedFailed {
                        engine: "azurite",
                        ..
                    }
                ),
                "{again:?}"
            );
            assert!(
                again.to_string().contains("run scripts/install-engines"),
                "{again}"
            );
        },
    );
}

#[test]
fn azurite_engines_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Azurite>();
    assert_send_sync::<SharedAzurite>();
}
