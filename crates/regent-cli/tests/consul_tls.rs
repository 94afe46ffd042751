//! `regent` on a Consul agent with HTTPS, client certificates and ACLs
//! (default deny), as the test kit secures a dev agent
//! (`Consul::builder().tls(ConsulTls::ClientCert).acl(PREFIX)`): regent's
//! flags and `REGENT_CONSUL_TOKEN`, then Consul's own variables, lead; an
//! untrusted CA, a missing client certificate, no token or a read-only one
//! are exit 2 saying what is wrong; and the token never shows, neither in
//! regent's output at debug level nor in the environment of the command.
//!
//! The tests share one agent while any of them runs, each under a key
//! prefix of its own below [`PREFIX`] (the prefix the agent's election
//! token may write), and talk to its HTTPS port only.

mod common;

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use common::*;
use regent_core::store::ExpirySlack;
use regent_testkit::engines::{Consul, ConsulTls, Engine, EngineError, Signaled};

/// The key prefix the agent's election token may write.
const PREFIX: &str = "regent-tls/";

/// Consul's shortest session ttl.
const TTL: &str = "10s";

/// The agent the running tests share; started by the first, stopped (by
/// its PID) when the last drops it.
static AGENT: Mutex<Weak<Consul>> = Mutex::new(Weak::new());

fn agent() -> Arc<Consul> {
    let mut shared = AGENT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(agent) = shared.upgrade() {
        return agent;
    }
    let agent = Arc::new(
        Consul::builder()
            .tls(ConsulTls::ClientCert)
            .acl(PREFIX)
            .start()
            .unwrap_or_else(|e| panic!("cannot start a secured Consul for this test: {e}")),
    );
    *shared = Arc::downgrade(&agent);
    agent
}

/// A test's share of the agent: its store URL is the agent's HTTPS port
/// under a key prefix of the test's own. The agent is shared, so faults
/// are refused.
#[derive(Debug)]
struct Share {
    agent: Arc<Consul>,
    prefix: String,
}

impl Share {
    fn new(test: &str) -> Self {
        Self {
            agent: agent(),
            prefix: format!("{PREFIX}{test}-{}", std::process::id()),
        }
    }

    fn refuse(&self, what: &str) -> ! {
        panic!("cannot {what} the Consul agent other tests share")
    }

    fn files(&self) -> Files {
        let f = self.agent.tls_files().expect("TLS files");
        let path = |p: &std::path::Path| p.display().to_string();
        Files {
            ca: path(f.ca_cert()),
            cert: path(f.client_cert()),
            key: path(f.client_key()),
            other_ca: path(f.other_ca_cert()),
        }
    }

    fn token(&self) -> String {
        self.agent.acl().expect("ACLs").token().to_owned()
    }

    fn read_only_token(&self) -> String {
        self.agent.acl().expect("ACLs").read_only_token().to_owned()
    }

    /// Every token of the agent: none may show anywhere.
    fn secrets(&self) -> Vec<String> {
        let acl = self.agent.acl().expect("ACLs");
        [acl.master_token(), acl.token(), acl.read_only_token()]
            .map(str::to_owned)
            .to_vec()
    }
}

impl Engine for Share {
    fn start() -> Result<Self, EngineError> {
        Ok(Self::new("share"))
    }

    fn kind(&self) -> &'static str {
        "consul"
    }

    /// `consuls://127.0.0.1:HTTPS/PREFIX`.
    fn store_url(&self) -> String {
        format!(
            "consuls://{}/{}",
            self.agent.https_address().expect("an HTTPS port"),
            self.prefix
        )
    }

    fn pid(&self) -> Option<u32> {
        self.agent.pid()
    }

    fn is_healthy(&self) -> bool {
        self.agent.is_healthy()
    }

    fn kill(&mut self) -> Signaled {
        self.refuse("kill")
    }

    fn pause(&mut self) -> Signaled {
        self.refuse("pause")
    }

    fn resume(&mut self) -> Signaled {
        self.refuse("resume")
    }

    fn stop(&mut self) -> Signaled {
        self.refuse("stop")
    }

    fn restart(&mut self) -> Result<(), EngineError> {
        self.refuse("restart")
    }

    fn log_tail(&self, lines: usize) -> String {
        self.agent.log_tail(lines)
    }

    fn min_ttl(&self) -> Duration {
        Duration::from_secs(10)
    }

    fn expiry_slack(&self) -> ExpirySlack {
        ExpirySlack::proportional(100).at_least(Duration::from_secs(20))
    }
}

/// The agent's certificates and keys, as paths.
struct Files {
    ca: String,
    cert: String,
    key: String,
    other_ca: String,
}

fn sandbox(test: &str) -> Sandbox {
    Sandbox::with_engine(Box::new(Share::new(test)))
}

fn share(sb: &Sandbox) -> &Share {
    sb.engine()
        .downcast_ref()
        .expect("a secured Consul sandbox")
}

/// `regent run` of the sandbox's task on the sandbox's store, with `flags`
/// and `env` (REGENT_LOG=debug on top), as the fixture `name`.
fn candidate(sb: &mut Sandbox, name: &str, flags: &[&str], env: &[(&str, &str)]) -> usize {
    let store = sb.store();
    candidate_on(sb, &store, name, flags, env)
}

/// [`candidate`] on the store URL `store`.
fn candidate_on(
    sb: &mut Sandbox,
    store: &str,
    name: &str,
    flags: &[&str],
    env: &[(&str, &str)],
) -> usize {
    let mut all = vec!["--ttl", TTL];
    all.extend_from_slice(flags);
    let task = sb.task_cmd();
    let task: Vec<&str> = task.iter().map(String::as_str).collect();
    let args = run_args_on(store, &all, &task);
    let mut env = env.to_vec();
    env.push(("REGENT_LOG", "debug"));
    sb.spawn_env(name, std::path::Path::new(REGENT), &args, &env)
}

/// `regent status --json` on `store` with `flags` and `env`: its output.
fn status(store: &str, flags: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec!["status", "--store", store, "--election", ELECTION, "--json"];
    args.extend_from_slice(flags);
    let mut env = env.to_vec();
    env.push(("REGENT_LOG", "debug"));
    let out = run_bounded_env(&args, &env, Duration::from_secs(30));
    no_panic(&out);
    out
}

/// The environment of process `pid`, as `NAME=VALUE` strings.
fn environ(pid: i32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_else(|e| panic!("read the environment of {pid}: {e}"));
    raw.split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

#[track_caller]
fn assert_no_secret(share: &Share, what: &str, text: &str) {
    for secret in share.secrets() {
        assert!(
            !text.contains(&secret),
            "a token of the agent in {what}:\n{text}"
        );
    }
}

/// Checks the leader's term: the command runs without the token in its
/// environment (nor its shim), and nobody's output shows it.
fn assert_token_hidden(sb: &mut Sandbox, regent: usize, term: &Event) {
    let share_secrets = share(sb).secrets();
    let shim = sb
        .regent(regent)
        .shim()
        .unwrap_or_else(|| panic!("no shim\n{}", sb.report()));
    for (what, pid) in [("the command", term.pid), ("the shim", shim)] {
        let env = environ(pid);
        assert!(
            !env.iter().any(|v| v.starts_with("REGENT_CONSUL_TOKEN=")),
            "{what} got REGENT_CONSUL_TOKEN: {env:?}"
        );
        let joined = env.join("\n");
        for secret in &share_secrets {
            assert!(
                !joined.contains(secret),
                "{what} got a token in its environment: {env:?}"
            );
        }
    }
    let name = sb.regent(regent).name.clone();
    let out = std::fs::read_to_string(sb.path(&format!("{name}.out"))).unwrap_or_default();
    let err = sb.regent(regent).stderr();
    assert!(
        err.contains("DEBUG"),
        "regent logged nothing at debug level:\n{err}"
    );
    assert_no_secret(share(sb), "regent's stdout", &out);
    assert_no_secret(share(sb), "regent's stderr", &err);
}

/// regent's own flags for the CA and the client certificate, the token in
/// `REGENT_CONSUL_TOKEN`: the candidate leads over HTTPS, `status` names
/// it, and the token is nowhere to be seen: not in regent's output at
/// debug level, not in the command's environment.
#[test]
fn flags_and_regent_consul_token_lead_over_https_and_the_token_stays_hidden() {
    let mut sb = sandbox("flags");
    let (files, token) = (share(&sb).files(), share(&sb).token());
    let flags = [
        "--consul-cacert",
        files.ca.as_str(),
        "--consul-cert",
        files.cert.as_str(),
        "--consul-key",
        files.key.as_str(),
    ];
    let env = [("REGENT_CONSUL_TOKEN", token.as_str())];
    let mut with_id = vec!["--id", "c1"];
    with_id.extend_from_slice(&flags);
    let c1 = candidate(&mut sb, "c1", &with_id, &env);
    let term = sb.first_start(Duration::from_secs(15));
    assert_eq!(term.id, "c1", "{}", sb.report());

    let out = status(&sb.store(), &flags, &env);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    assert_eq!(v["leader"]["id"], "c1", "{v}");
    assert_eq!(v["leader"]["token"], term.token, "{v}");
    assert_no_secret(
        share(&sb),
        "status' output",
        &format!("{}{}", out.stdout, out.stderr),
    );

    assert_token_hidden(&mut sb, c1, &term);
}

/// Consul's own variables: `CONSUL_CACERT`, `CONSUL_CLIENT_CERT`,
/// `CONSUL_CLIENT_KEY` and `CONSUL_HTTP_TOKEN` for `run` without `--id`
/// (the holder is the agent's node name, read over HTTPS with the token);
/// `CONSUL_HTTP_TOKEN_FILE` and `CONSUL_HTTP_ADDR` (`consuls:///PREFIX`
/// names no host) for `status`. Consul's variables are the user's
/// environment for Consul's tools, which regent leaves to the command
/// (documented at `regent_consul::KIND`); regent's own never reaches it.
#[test]
fn consuls_own_variables_lead_over_https() {
    let mut sb = sandbox("consul-vars");
    let (files, token) = (share(&sb).files(), share(&sb).token());
    let env = [
        ("CONSUL_CACERT", files.ca.as_str()),
        ("CONSUL_CLIENT_CERT", files.cert.as_str()),
        ("CONSUL_CLIENT_KEY", files.key.as_str()),
        ("CONSUL_HTTP_TOKEN", token.as_str()),
    ];
    let noid = candidate(&mut sb, "noid", &[], &env);
    let term = sb.first_start(Duration::from_secs(15));
    let node = share(&sb).agent.node().to_owned();
    assert_eq!(term.id, node, "{}", sb.report());

    let token_file = sb.path("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let token_file = token_file.display().to_string();
    let https = format!(
        "https://{}",
        share(&sb).agent.https_address().expect("HTTPS")
    );
    let store = format!("consuls:///{}", share(&sb).prefix);
    let out = status(
        &store,
        &[],
        &[
            env[0],
            env[1],
            env[2],
            ("CONSUL_HTTP_TOKEN_FILE", token_file.as_str()),
            ("CONSUL_HTTP_ADDR", https.as_str()),
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("JSON");
    assert_eq!(v["leader"]["id"], node.as_str(), "{v}");
    assert_eq!(v["leader"]["token"], term.token, "{v}");

    let err = sb.regent(noid).stderr();
    assert!(err.contains("DEBUG"), "{err}");
    assert_no_secret(share(&sb), "regent's stderr", &err);
    let command = environ(term.pid);
    assert!(
        command
            .iter()
            .any(|v| *v == format!("CONSUL_HTTP_TOKEN={token}")),
        "the command lost the user's CONSUL_HTTP_TOKEN: {command:?}"
    );
}

/// A server certificate from a CA regent was not told to trust: exit 2 at
/// once (a configuration error, not an unreachable store retried for the
/// start window), naming the failed verification.
#[test]
fn an_untrusted_ca_is_exit_2_at_once() {
    let share = Share::new("untrusted");
    let (files, token) = (share.files(), share.token());
    let env = [("REGENT_CONSUL_TOKEN", token.as_str())];
    let flags = [
        "--consul-cacert",
        files.other_ca.as_str(),
        "--consul-cert",
        files.cert.as_str(),
        "--consul-key",
        files.key.as_str(),
    ];
    let out = status(&share.store_url(), &flags, &env);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("TLS failed (check the CA certificate and the server name)")
            && out
                .stderr
                .contains("invalid peer certificate: UnknownIssuer")
            && !out.stderr.contains("retrying"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("hint: regent trusts only the CA of --consul-cacert"),
        "{}",
        out.stderr
    );
    assert!(out.took < Duration::from_secs(5), "{:?}", out.took);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_no_secret(&share, "regent's stderr", &out.stderr);
}

/// No client certificate where the agent requires one: exit 2 saying the
/// agent refused it. (Now and then the TLS 1.3 alert loses the race with
/// the closing connection; regent retries that as unavailable, and a
/// later attempt sees the refusal.)
#[test]
fn no_client_certificate_is_exit_2_saying_the_agent_refused_it() {
    let share = Share::new("no-cert");
    let (files, token) = (share.files(), share.token());
    let env = [("REGENT_CONSUL_TOKEN", token.as_str())];
    let out = status(&share.store_url(), &["--consul-cacert", &files.ca], &env);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("the agent refused the client's TLS certificate")
            && out
                .stderr
                .contains("hint: regent presented no client certificate"),
        "{}",
        out.stderr
    );
    assert_no_secret(&share, "regent's stderr", &out.stderr);
}

/// A token that may read the election but not write it: `status` works,
/// `run` cannot campaign and exits 2, naming the permissions the token
/// needs and never the token. Without any token, even `status` is refused
/// (ACLs deny by default).
#[test]
fn a_token_without_permission_is_exit_2_naming_what_to_grant() {
    let share = Share::new("read-only");
    let (files, read_only) = (share.files(), share.read_only_token());
    let flags = [
        "--consul-cacert",
        files.ca.as_str(),
        "--consul-cert",
        files.cert.as_str(),
        "--consul-key",
        files.key.as_str(),
    ];
    let env = [("REGENT_CONSUL_TOKEN", read_only.as_str())];
    let store = share.store_url();
    let out = status(&store, &flags, &env);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("\"leader\":null"), "{}", out.stdout);

    let mut with_ttl = vec!["--ttl", TTL];
    with_ttl.extend_from_slice(&flags);
    let args = run_args_on(&store, &with_ttl, &["true"]);
    let mut debug = env.to_vec();
    debug.push(("REGENT_LOG", "debug"));
    let out = run_owned(&args, &debug, Duration::from_secs(30));
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("campaign on")
            && out
                .stderr
                .contains("lacks session:write / key:write on the election's key")
            && out.stderr.contains("Permission denied"),
        "{}",
        out.stderr
    );
    let grant = format!(
        "hint: the token needs a policy with key_prefix \"{}/\" {{ policy = \"write\" }}",
        share.prefix
    );
    assert!(out.stderr.contains(&grant), "{grant}\n{}", out.stderr);
    assert_no_secret(&share, "regent's stderr", &out.stderr);
    assert_no_secret(&share, "regent's stdout", &out.stdout);

    let out = status(&store, &flags, &[]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("the ACL token")
            && out.stderr.contains("Permission denied")
            && out.stderr.contains("hint: no ACL token was given"),
        "{}",
        out.stderr
    );
}
