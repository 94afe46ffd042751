//! The Consul engines of the test kit, against the real Consul 1.8
//! (installed by `scripts/install-engines`; without it these tests fail,
//! naming that script): a dev agent, and three servers with client agents.

mod common;

use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use regent_testkit::engines::{
    Consul, ConsulCluster, ConsulRole, Engine, EngineError, HttpResponse, Signaled,
};

use common::{assert_success, in_child_with_env, stdout};

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

#[track_caller]
fn ok(response: std::io::Result<HttpResponse>) -> String {
    let response = response.expect("the agent answers");
    assert_eq!(response.status, 200, "{}", response.body);
    response.body
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|err| panic!("{err}: {body}"))
}

/// Creates a session with a TTL of 10 s (Consul's minimum) and no lock
/// delay through `agent`; returns its ID.
fn create_session(agent: &Consul) -> String {
    let body = ok(agent.http_put(
        "/v1/session/create",
        Some(r#"{"Name":"regent-test","TTL":"10s","LockDelay":"0s"}"#),
    ));
    json(&body)["ID"]
        .as_str()
        .unwrap_or_else(|| panic!("no session ID in {body}"))
        .to_owned()
}

/// `PUT /v1/kv/KEY?acquire=SESSION` with `value`: whether the lock was
/// granted.
fn acquire(agent: &Consul, key: &str, session: &str, value: &str) -> bool {
    let body = ok(agent.http_put(&format!("/v1/kv/{key}?acquire={session}"), Some(value)));
    json(&body).as_bool().expect("true or false")
}

/// The session holding `key`, read through `agent` in `consistent` mode:
/// in the default mode, a leader elected a moment ago may answer before it
/// applied writes its predecessor acknowledged (seen here: 404 for a key
/// acquired just before the leader was killed).
fn holder(agent: &Consul, key: &str) -> Option<String> {
    let body = ok(agent.http_get(&format!("/v1/kv/{key}?consistent")));
    json(&body)[0]["Session"].as_str().map(str::to_owned)
}

#[test]
fn dev_agent_grants_a_lock_to_a_session_and_is_gone_after_drop() {
    let launched = Instant::now();
    let consul = Consul::start().unwrap();
    eprintln!("dev agent ready {:?} after launch", launched.elapsed());
    assert!(consul.is_healthy());
    assert!(consul.is_leader(), "a dev agent leads");
    assert_eq!(consul.role(), ConsulRole::Dev);
    assert_eq!(consul.kind(), "consul");
    assert!(consul.address().starts_with("127.0.0.1:"));
    assert_eq!(consul.store_url(), format!("consul://{}", consul.address()));
    assert_ne!(consul.http_addr().port(), 8500, "not Consul's default");

    let session = create_session(&consul);
    assert!(acquire(&consul, "regent/k", &session, "leader-1"));
    let other = create_session(&consul);
    assert_ne!(other, session);
    assert!(
        !acquire(&consul, "regent/k", &other, "leader-2"),
        "a held lock was granted to another session"
    );
    assert_eq!(holder(&consul, "regent/k"), Some(session));
    assert_eq!(ok(consul.http_get("/v1/kv/regent/k?raw")), "leader-1");
    let get = consul
        .consul_command()
        .args(["kv", "get", "regent/k"])
        .output()
        .unwrap();
    assert_success(&get);
    assert_eq!(stdout(&get).trim(), "leader-1");

    let pid = consul.pid().expect("running");
    let addr = consul.http_addr();
    let dir = consul.log_path().parent().unwrap().to_owned();
    drop(consul);
    assert_eq!(state(pid), None, "consul (pid {pid}) outlived drop");
    assert!(TcpStream::connect(addr).is_err(), "{addr} still accepts");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn dev_agent_pauses_stops_on_sigint_and_restarts_empty_on_the_same_url() {
    let mut consul = Consul::start().unwrap();
    let url = consul.store_url();
    let session = create_session(&consul);
    assert!(acquire(&consul, "regent/k", &session, "leader-1"));

    let pid = consul.pid().unwrap();
    assert_eq!(consul.pause(), Signaled::Sent);
    eventually("SIGSTOP to take effect", || state(pid) == Some('T'));
    assert!(!consul.is_healthy(), "a paused agent answered");
    assert_eq!(consul.resume(), Signaled::Sent);
    eventually("the agent to answer again", || consul.is_healthy());
    assert_eq!(consul.pid(), Some(pid));

    let stopping = Instant::now();
    assert_eq!(consul.stop(), Signaled::Sent);
    eprintln!("dev agent stopped {:?} after SIGINT", stopping.elapsed());
    assert_eq!(consul.pid(), None);
    assert_eq!(state(pid), None);
    assert!(!consul.is_healthy());
    assert_eq!(consul.stop(), Signaled::NotRunning);
    let log = consul.log_tail(40);
    assert!(
        log.contains("Caught") && log.contains("interrupt"),
        "not stopped by SIGINT:\n{log}"
    );

    consul.restart().unwrap();
    assert!(consul.is_healthy());
    assert_eq!(consul.store_url(), url);
    // A dev agent's store lives in memory: the lock and its session are gone.
    let response = consul.http_get("/v1/kv/regent/k").unwrap();
    assert_eq!(response.status, 404, "{}", response.body);
    let sessions = ok(consul.http_get(&format!("/v1/session/info/{session}")));
    assert_eq!(json(&sessions), serde_json::json!([]), "{sessions}");

    let pid = consul.pid().unwrap();
    assert_eq!(consul.kill(), Signaled::Sent);
    assert_eq!(state(pid), None, "pid {pid} outlived kill");
    assert_eq!(consul.kill(), Signaled::NotRunning);
    consul.restart().unwrap();
    assert!(consul.is_healthy());
    assert_ne!(consul.pid(), Some(pid));
}

#[test]
fn cluster_shares_sessions_between_agents_and_elects_a_new_leader_when_the_leader_is_killed() {
    let launched = Instant::now();
    let mut cluster = ConsulCluster::start(2).unwrap();
    eprintln!(
        "3 servers and 2 agents ready {:?} after launch",
        launched.elapsed()
    );
    assert_eq!(cluster.servers().len(), ConsulCluster::SERVERS);
    assert_eq!(cluster.agents().len(), 2);
    let datacenter = cluster.server(0).datacenter().to_owned();
    assert_ne!(datacenter, "dc1", "a datacenter of its own");
    for member in cluster.servers().iter().chain(cluster.agents()) {
        assert!(member.is_healthy(), "{member:?}");
        assert_eq!(member.datacenter(), datacenter);
    }
    assert_eq!(cluster.server(2).role(), ConsulRole::Server);
    assert_eq!(cluster.agent(1).role(), ConsulRole::Client);
    assert_eq!(cluster.agent(1).node(), "a1");
    let addresses = cluster.agent_addresses();
    assert_eq!(addresses.len(), 2);
    assert_ne!(addresses[0], addresses[1]);
    let members = ok(cluster.agent(0).http_get("/v1/catalog/nodes"));
    assert_eq!(
        json(&members).as_array().map(Vec::len),
        Some(5),
        "{members}"
    );

    // A session created through agent 0 belongs to a0 and is seen through
    // agent 1, and so is the lock it holds.
    let session = create_session(cluster.agent(0));
    let info = ok(cluster
        .agent(1)
        .http_get(&format!("/v1/session/info/{session}")));
    assert_eq!(json(&info)[0]["Node"], "a0", "{info}");
    assert!(acquire(cluster.agent(0), "regent/k", &session, "a0"));
    assert_eq!(holder(cluster.agent(1), "regent/k"), Some(session.clone()));

    let old = cluster.wait_for_leader(Duration::from_secs(5)).unwrap();
    assert!(cluster.server(old).is_leader());
    let old_pid = cluster.server(old).pid().unwrap();
    let killed_at = Instant::now();
    assert_eq!(cluster.server_mut(old).kill(), Signaled::Sent);
    assert_eq!(state(old_pid), None);
    assert_eq!(cluster.leader_server(), None, "a killed server leads");
    let new = cluster.wait_for_leader(Duration::from_secs(10)).unwrap();
    eprintln!(
        "new leader s{new} {:?} after the leader s{old} was killed",
        killed_at.elapsed()
    );
    assert_ne!(new, old);
    // The two servers left keep the session and the lock. An agent forwards
    // each request to one server it knows, the killed one included until
    // gossip marks it failed: until then, some requests fail with 500
    // ("connect: connection refused"), and a client must try again.
    let renewing = Instant::now();
    let mut failures = Vec::new();
    eventually("a renewal through agent 1 to succeed", || {
        match cluster
            .agent(1)
            .http_put(&format!("/v1/session/renew/{session}"), None)
        {
            Ok(response) if response.status == 200 => true,
            failed => {
                failures.push(failed);
                false
            }
        }
    });
    eprintln!(
        "renewed through agent 1 {:?} after the new leader was known; failures before: {failures:?}",
        renewing.elapsed()
    );
    assert_eq!(holder(cluster.agent(1), "regent/k"), Some(session.clone()));

    let restarting = Instant::now();
    cluster.server_mut(old).restart().unwrap();
    eprintln!(
        "killed server s{old} rejoined {:?} after its restart",
        restarting.elapsed()
    );
    assert!(cluster.server(old).is_healthy());

    // A hung agent answers nothing until it goes on.
    let pid = cluster.agent(1).pid().unwrap();
    assert_eq!(cluster.agent_mut(1).pause(), Signaled::Sent);
    eventually("SIGSTOP to take effect", || state(pid) == Some('T'));
    assert!(!cluster.agent(1).is_healthy());
    assert_eq!(cluster.agent_mut(1).resume(), Signaled::Sent);
    eventually("agent 1 to answer again", || cluster.agent(1).is_healthy());

    // A crashed agent comes back as the same node and reads the cluster's data.
    assert_eq!(cluster.agent_mut(1).kill(), Signaled::Sent);
    assert!(!cluster.agent(1).is_healthy());
    cluster.agent_mut(1).restart().unwrap();
    assert_eq!(holder(cluster.agent(1), "regent/k"), Some(session.clone()));
    cluster.wait_ready(Duration::from_secs(10)).unwrap();

    // An agent that leaves takes the sessions of its node along: the lock
    // is free at once, not after gossip noticed a failure.
    let leaving = Instant::now();
    cluster.agent_mut(0).leave().unwrap();
    eprintln!("agent 0 left in {:?}", leaving.elapsed());
    assert_eq!(cluster.agent(0).pid(), None);
    assert_eq!(holder(cluster.agent(1), "regent/k"), None);
    let info = ok(cluster
        .agent(1)
        .http_get(&format!("/v1/session/info/{session}?consistent")));
    assert_eq!(json(&info), serde_json::json!([]), "{info}");

    let pids: Vec<u32> = cluster
        .servers()
        .iter()
        .chain(cluster.agents())
        .filter_map(Consul::pid)
        .collect();
    assert_eq!(pids.len(), 4);
    let stopping = Instant::now();
    drop(cluster);
    eprintln!("cluster stopped {:?} after drop began", stopping.elapsed());
    for pid in pids {
        assert_eq!(state(pid), None, "agent (pid {pid}) outlived drop");
    }
}

#[test]
fn missing_consul_is_an_error_naming_the_install_script() {
    in_child_with_env(
        "missing_consul_is_an_error_naming_the_install_script",
        "REGENT_CONSUL_BIN",
        "/nonexistent/consul",
        || {
            for err in [
                Consul::start().unwrap_err(),
                ConsulCluster::start(1).unwrap_err(),
            ] {
                assert!(
                    matches!(
                        err,
                        EngineError::NotInstalledAt {
                            program: "consul",
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
        },
    );
}

#[test]
fn consul_engines_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Consul>();
    assert_send_sync::<ConsulCluster>();
    assert_send_sync::<HttpResponse>();
}
