//! The Consul store over HTTPS and with ACL tokens, against real Consul dev
//! agents secured by the test kit (`Consul::builder`): one serving HTTPS to
//! any client that trusts its CA, one that also requires a client
//! certificate and runs ACLs with `default_policy = "deny"`.
//!
//! The store's operations — acquire, renew, release, watch, expiry, a
//! campaign — over each, as the conformance suite checks them over plain
//! HTTP (`tests/store.rs`); then what TLS and ACLs refuse, and how: a
//! server certificate of a CA the store does not trust, a missing or
//! untrusted client certificate, no token, an unknown token, a read-only
//! token, a token used outside its key prefix, plain HTTP on the HTTPS
//! port. No message ever contains a token.
//!
//! The tests of this binary share each agent while any of them runs (the
//! harness runs them in parallel); each uses a key prefix of its own under
//! [`PREFIX`], the prefix the agent's election token may write.

use std::error::Error as _;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt as _;
use regent_consul::ConsulStore;
use regent_core::{
    Acquire, Candidate, ElectionName, ErrorKind, HolderId, LeaderStream, LeaseStore, Renewal,
    StoreError,
};
use regent_testkit::engines::{Consul, ConsulTls, Engine as _};
use regent_testkit::fixtures::{acquire_request as req, holder};

/// Consul's shortest session TTL.
const TTL: Duration = Duration::from_secs(10);

/// The key prefix the ACL agent's election token may write.
const PREFIX: &str = "regent-tls/";

/// Which secured agent a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Secured {
    /// HTTPS; clients need only trust the CA. No ACLs.
    Https,
    /// HTTPS requiring a client certificate, and ACLs (default deny).
    ClientCertAcl,
}

/// The agents the running tests share; each started by the first test
/// that asks, stopped when the last drops it.
static HTTPS: Mutex<Weak<Consul>> = Mutex::new(Weak::new());
static CLIENT_CERT_ACL: Mutex<Weak<Consul>> = Mutex::new(Weak::new());

async fn agent(secured: Secured) -> Arc<Consul> {
    tokio::task::spawn_blocking(move || {
        let slot = match secured {
            Secured::Https => &HTTPS,
            Secured::ClientCertAcl => &CLIENT_CERT_ACL,
        };
        let mut shared = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(agent) = shared.upgrade() {
            return agent;
        }
        let builder = match secured {
            Secured::Https => Consul::builder().tls(ConsulTls::Server),
            Secured::ClientCertAcl => Consul::builder().tls(ConsulTls::ClientCert).acl(PREFIX),
        };
        let agent = Arc::new(builder.start().unwrap_or_else(|e| {
            panic!("cannot start a secured Consul ({secured:?}) for this test: {e}")
        }));
        *shared = Arc::downgrade(&agent);
        agent
    })
    .await
    .expect("the start task ran")
}

fn read(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// What a test's store presents: the CA it trusts, its client certificate
/// and its token.
#[derive(Debug, Clone, Copy)]
struct Client<'a> {
    ca: Ca,
    cert: Cert,
    token: Option<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ca {
    /// The test CA, which signed the agent's certificate.
    Test,
    /// An unrelated CA.
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cert {
    None,
    /// Signed by the test CA, which the agent trusts.
    Test,
    /// Signed by the other CA.
    Other,
}

impl Client<'_> {
    /// What every store of a test on `secured` presents unless the test is
    /// about what is missing: the test CA, and on the ACL agent the test
    /// client certificate and the election token.
    fn proper(agent: &Consul) -> Client<'_> {
        let acl = agent.acl();
        Client {
            ca: Ca::Test,
            cert: if acl.is_some() {
                Cert::Test
            } else {
                Cert::None
            },
            token: acl.map(|acl| acl.token()),
        }
    }
}

/// A store on `agent`'s HTTPS port under `prefix`, presenting `client`.
fn store(agent: &Consul, prefix: &str, client: Client<'_>) -> ConsulStore {
    let files = agent.tls_files().expect("a secured agent has TLS files");
    let https = agent.https_address().expect("a secured agent serves HTTPS");
    let ca = match client.ca {
        Ca::Test => files.ca_cert(),
        Ca::Other => files.other_ca_cert(),
    };
    let mut builder = ConsulStore::builder(https)
        .prefix(prefix)
        .call_timeout(Duration::from_secs(2))
        .tls_ca_pem(read(ca));
    builder = match client.cert {
        Cert::None => builder,
        Cert::Test => {
            builder.tls_client_identity_pem(read(files.client_cert()), read(files.client_key()))
        }
        Cert::Other => builder.tls_client_identity_pem(
            read(files.other_client_cert()),
            read(files.other_client_key()),
        ),
    };
    if let Some(token) = client.token {
        builder = builder.token(token);
    }
    builder.build().expect("build the store")
}

/// A key prefix of the test's own under [`PREFIX`].
fn prefix(test: &str) -> String {
    format!("{PREFIX}{test}-{:08x}/", salt())
}

fn salt() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u32
}

fn election(name: &str) -> ElectionName {
    ElectionName::new(name).expect("valid election name")
}

/// The error and its sources, as the CLI prints them.
fn chain(e: &StoreError) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(": ");
        s.push_str(&cause.to_string());
        source = cause.source();
    }
    s
}

/// Asserts that no form of `e` shows any of the agent's tokens.
#[track_caller]
fn assert_no_token(agent: &Consul, e: &StoreError) {
    let shown = format!("{} {e:?}", chain(e));
    if let Some(acl) = agent.acl() {
        for token in [acl.master_token(), acl.token(), acl.read_only_token()] {
            assert!(!shown.contains(token), "a token in: {shown}");
        }
    }
}

/// Waits for `watch` to show `want` (a holder, or none), skipping repeats,
/// for at most `within`.
async fn await_leader(
    watch: &mut LeaderStream,
    want: Option<&HolderId>,
    within: Duration,
    what: &str,
) {
    let deadline = tokio::time::Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Err(_) => panic!("the watch did not show {what} within {within:?}; saw {seen:?}"),
            Ok(None) => panic!("the watch ended while waiting for {what}; saw {seen:?}"),
            Ok(Some(Err(e))) => panic!("the watch failed waiting for {what}: {}", chain(&e)),
            Ok(Some(Ok(leader))) => {
                let got = leader.map(|l| l.holder);
                if got.as_ref() == want {
                    return;
                }
                seen.push(got);
            }
        }
    }
}

/// Acquire, renew, release and watch over `agent`'s HTTPS port, as the
/// conformance suite checks them: the first acquire wins with a token,
/// the others are held by it and see it in `current_leader` and the watch,
/// sixteen concurrent acquires on sixteen connections have one winner,
/// renewals hold, a release frees the election at once (the watch sees
/// it), twice is harmless, and a released lease's renewal is lost.
async fn acquire_renew_release_watch(agent: &Consul, test: &str) {
    let prefix = prefix(test);
    let client = Client::proper(agent);
    let store = store(agent, &prefix, client);
    let e = election("e");
    assert_eq!(store.election_key(&e), format!("{prefix}e"));
    let within = Duration::from_secs(5);

    let mut watch = store.watch(&e).await.expect("watch over HTTPS");
    await_leader(&mut watch, None, within, "no leader at start").await;

    let Acquire::Won(a) = store.try_acquire(&req(&e, "a", TTL), None).await.unwrap() else {
        panic!("a wins a free election");
    };
    assert!(a.token.get() > 0);
    assert_eq!(a.ttl, TTL);
    await_leader(&mut watch, Some(&a.holder), within, "a's acquire").await;
    match store.try_acquire(&req(&e, "b", TTL), None).await.unwrap() {
        Acquire::Held {
            leader: Some(leader),
            queued: None,
        } => {
            assert_eq!((leader.holder, leader.token), (holder("a"), a.token));
            assert_eq!(leader.metadata.get("who"), Some("a"));
        }
        other => panic!("b must see a lead: {other:?}"),
    }
    for _ in 0..3 {
        assert_eq!(store.renew(&a).await.unwrap(), Renewal::Renewed);
    }
    store.release(&a).await.unwrap();
    await_leader(&mut watch, None, within, "a's release").await;
    store
        .release(&a)
        .await
        .expect("a second release is harmless");
    assert_eq!(store.renew(&a).await.unwrap(), Renewal::Lost);

    // Sixteen connections, sixteen handshakes, one winner.
    let stores: Vec<ConsulStore> = (0..16)
        .map(|_| self::store(agent, &prefix, client))
        .collect();
    let requests: Vec<_> = (0..16).map(|i| req(&e, &format!("c{i}"), TTL)).collect();
    let results = futures_util::future::join_all(
        stores
            .iter()
            .zip(&requests)
            .map(|(s, r)| s.try_acquire(r, None)),
    )
    .await;
    let winners: Vec<_> = results
        .into_iter()
        .filter_map(|r| match r.expect("acquire over HTTPS") {
            Acquire::Won(lease) => Some(lease),
            Acquire::Held { .. } => None,
        })
        .collect();
    assert_eq!(winners.len(), 1, "{winners:?}");
    let winner = &winners[0];
    assert!(winner.token > a.token, "{} !> {}", winner.token, a.token);
    await_leader(&mut watch, Some(&winner.holder), within, "the winner").await;
    let leader = store.current_leader(&e).await.unwrap().expect("a leader");
    assert_eq!(
        (&leader.holder, leader.token),
        (&winner.holder, winner.token)
    );
    store.release(winner).await.unwrap();
    await_leader(&mut watch, None, within, "the winner's release").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_release_and_watch_over_https_trusting_the_ca() {
    let agent = agent(Secured::Https).await;
    acquire_renew_release_watch(&agent, "basics-https").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_release_and_watch_with_a_client_certificate_and_an_acl_token() {
    let agent = agent(Secured::ClientCertAcl).await;
    acquire_renew_release_watch(&agent, "basics-acl").await;
}

/// A lease nobody renews expires by Consul's TTL: a blocking query held
/// open over HTTPS sees it without anyone calling, the old holder's
/// renewal is lost, and the next winner's token is larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrenewed_lease_expires_and_the_watch_over_https_sees_it() {
    let agent = agent(Secured::ClientCertAcl).await;
    let store = store(&agent, &prefix("expiry"), Client::proper(&agent));
    let e = election("e");
    let mut watch = store.watch(&e).await.unwrap();
    let Acquire::Won(a) = store.try_acquire(&req(&e, "a", TTL), None).await.unwrap() else {
        panic!("a wins a free election");
    };
    await_leader(&mut watch, Some(&a.holder), Duration::from_secs(5), "a").await;
    // Consul ends a session between one and two TTLs after its last
    // renewal; its blocking query answers within a second or so.
    let started = tokio::time::Instant::now();
    await_leader(
        &mut watch,
        None,
        TTL * 2 + Duration::from_secs(5),
        "a's expiry",
    )
    .await;
    assert!(
        started.elapsed() >= TTL - Duration::from_secs(1),
        "a's lease ended after {:?}, before its ttl",
        started.elapsed()
    );
    assert_eq!(store.renew(&a).await.unwrap(), Renewal::Lost);
    // The session's lock delay (the ttl) keeps the key a while more.
    let until = tokio::time::Instant::now() + TTL + Duration::from_secs(5);
    let b = loop {
        match store.try_acquire(&req(&e, "b", TTL), None).await.unwrap() {
            Acquire::Won(b) => break b,
            _ if tokio::time::Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => panic!("b did not win within the lock delay after a's expiry: {other:?}"),
        }
    };
    assert!(b.token > a.token, "{} !> {}", b.token, a.token);
    store.release(&b).await.unwrap();
}

/// A candidate campaigns, leads and renews over HTTPS with a client
/// certificate and a token, and resigns; a second candidate waiting behind
/// it then leads with a larger token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_campaign_renew_and_resign_over_https_with_a_token() {
    let agent = agent(Secured::ClientCertAcl).await;
    let prefix = prefix("campaign");
    let candidate = |who: &str| {
        Candidate::builder(
            store(&agent, &prefix, Client::proper(&agent)),
            election("e"),
            holder(who),
        )
        .ttl(TTL)
        .renew_every(Duration::from_millis(300))
        .renew_deadline(Duration::from_secs(6))
        .grace(Duration::from_millis(200))
        .build()
        .expect("valid timing")
    };
    let (a, b) = (candidate("a"), candidate("b"));
    let first = a.campaign().await.expect("a leads");
    let waiting = tokio::spawn(async move { (b.campaign().await, b) });
    // Several renewals over HTTPS.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!waiting.is_finished(), "b led while a renews");
    let token = first.token();
    assert_eq!(first.ended(), None, "a still leads after its renewals");
    first.resign().await.expect("a resigns");
    let (second, b) = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("b leads within a few round trips of a's resignation")
        .expect("b's task ran");
    let second = second.expect("b leads");
    assert!(second.token() > token, "{} !> {token}", second.token());
    second.resign().await.expect("b resigns");
    a.shutdown().await;
    b.shutdown().await;
}

/// The agent's node name, regent's default holder id, is read over HTTPS
/// with the election token (`agent:read`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_node_name_is_read_over_https_with_the_token() {
    let agent = agent(Secured::ClientCertAcl).await;
    let s = store(&agent, &prefix("node"), Client::proper(&agent));
    assert_eq!(s.agent_node_name().await.unwrap(), agent.node());
}

/// A server certificate signed by a CA the store does not trust: a
/// configuration error, at once (not retried as unavailable), saying to
/// check the CA and naming the failed verification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_server_certificate_is_a_config_error_naming_verification() {
    for secured in [Secured::Https, Secured::ClientCertAcl] {
        let agent = agent(secured).await;
        let client = Client {
            ca: Ca::Other,
            ..Client::proper(&agent)
        };
        let s = store(&agent, &prefix("untrusted"), client);
        let started = std::time::Instant::now();
        let e = s.current_leader(&election("e")).await.unwrap_err();
        let shown = chain(&e);
        assert_eq!(e.kind(), ErrorKind::Config, "{secured:?}: {shown}");
        assert!(!e.is_transient(), "{shown}");
        assert!(
            shown.contains("TLS failed (check the CA certificate and the server name)")
                && shown.contains("invalid peer certificate")
                && shown.contains("UnknownIssuer"),
            "{secured:?}: {shown}"
        );
        assert!(started.elapsed() < Duration::from_secs(2), "{shown}");
        assert_no_token(&agent, &e);
    }
}

/// The crate docs: the agent refusing the client's certificate, or its
/// absence, is [`ErrorKind::Auth`] and says so.
///
/// Under TLS 1.3 the agent checks the client's certificate once the
/// client has finished its side of the handshake; its alert usually
/// arrives (Auth), but now and then the connection closes before the
/// request is sent, which the client cannot tell from an agent going away
/// (Unavailable, transient; measured: 2 to 8 in 100). A fresh connection
/// or two then sees the alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_client_certificate_or_one_of_another_ca_is_refused_as_auth() {
    let agent = agent(Secured::ClientCertAcl).await;
    for cert in [Cert::None, Cert::Other] {
        let client = Client {
            cert,
            ..Client::proper(&agent)
        };
        let mut closed = Vec::new();
        let refused = loop {
            let s = store(&agent, &prefix("no-cert"), client);
            let e = s.current_leader(&election("e")).await.unwrap_err();
            assert_no_token(&agent, &e);
            match e.kind() {
                ErrorKind::Auth => break chain(&e),
                ErrorKind::Unavailable if closed.len() < 4 => closed.push(chain(&e)),
                _ => panic!("{cert:?}: {} (before: {closed:#?})", chain(&e)),
            }
        };
        assert!(
            refused.contains("the agent refused the client's TLS certificate")
                && refused.contains("received fatal alert"),
            "{cert:?}: {refused}"
        );
    }
    // The same agent serves the same request with the certificate.
    let s = store(&agent, &prefix("no-cert"), Client::proper(&agent));
    assert_eq!(s.current_leader(&election("e")).await.unwrap(), None);
}

/// ACLs deny by default: without a token, with a token Consul does not
/// know, every call is refused as [`ErrorKind::Auth`], naming what the
/// token needs, never a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_an_unknown_token_is_an_auth_error_that_shows_no_token() {
    let agent = agent(Secured::ClientCertAcl).await;
    let unknown = "3f1c7d0e-6a52-4b8e-9d11-0c2f5e7a9b44";
    for token in [None, Some(unknown)] {
        let client = Client {
            token,
            ..Client::proper(&agent)
        };
        let s = store(&agent, &prefix("no-token"), client);
        let e = election("e");
        let errors = [
            s.current_leader(&e).await.unwrap_err(),
            s.try_acquire(&req(&e, "a", TTL), None).await.unwrap_err(),
            s.agent_node_name().await.unwrap_err(),
        ];
        for err in errors {
            let shown = chain(&err);
            assert_eq!(err.kind(), ErrorKind::Auth, "{token:?}: {shown}");
            assert!(
                shown.contains("lacks session:write / key:write"),
                "{token:?}: {shown}"
            );
            assert!(!shown.contains(unknown), "{shown}");
            assert_no_token(&agent, &err);
        }
    }
}

/// A token that may read the election's keys but write nothing: the
/// leader is seen, a campaign is refused as [`ErrorKind::Auth`] naming
/// the permissions it needs, and no session or lock is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_token_sees_the_leader_but_cannot_campaign() {
    let agent = agent(Secured::ClientCertAcl).await;
    let acl = agent.acl().expect("ACLs");
    let prefix = prefix("read-only");
    let writer = store(&agent, &prefix, Client::proper(&agent));
    let reader = store(
        &agent,
        &prefix,
        Client {
            token: Some(acl.read_only_token()),
            ..Client::proper(&agent)
        },
    );
    let (led, free) = (election("led"), election("free"));
    let Acquire::Won(a) = writer
        .try_acquire(&req(&led, "a", TTL), None)
        .await
        .unwrap()
    else {
        panic!("a wins a free election");
    };
    let leader = reader.current_leader(&led).await.unwrap().expect("a leads");
    assert_eq!((leader.holder, leader.token), (holder("a"), a.token));
    assert_eq!(reader.agent_node_name().await.unwrap(), agent.node());
    // Held: reading suffices.
    assert!(matches!(
        reader
            .try_acquire(&req(&led, "b", TTL), None)
            .await
            .unwrap(),
        Acquire::Held { .. }
    ));
    let e = reader
        .try_acquire(&req(&free, "b", TTL), None)
        .await
        .unwrap_err();
    let shown = chain(&e);
    assert_eq!(e.kind(), ErrorKind::Auth, "{shown}");
    assert!(
        shown.contains("lacks session:write / key:write on the election's key")
            && shown.contains("Permission denied"),
        "{shown}"
    );
    assert_no_token(&agent, &e);
    assert_eq!(writer.current_leader(&free).await.unwrap(), None);
    // Renewing or releasing someone else's lease needs writing too.
    let e = reader.renew(&a).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth, "{}", chain(&e));
    assert_no_token(&agent, &e);
    assert_eq!(writer.renew(&a).await.unwrap(), Renewal::Renewed);
    writer.release(&a).await.unwrap();
}

/// The election token may write only under its key prefix: an election
/// elsewhere is refused as [`ErrorKind::Auth`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_election_token_is_refused_outside_its_key_prefix() {
    let agent = agent(Secured::ClientCertAcl).await;
    let s = store(&agent, "elsewhere/", Client::proper(&agent));
    let e = election(&format!("outside-{:08x}", salt()));
    let err = s.try_acquire(&req(&e, "a", TTL), None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{}", chain(&err));
    assert_no_token(&agent, &err);
    // Asked with the master token (the kit's): no key was written.
    let seen = agent
        .http_get(&format!("/v1/kv/elsewhere/{e}"))
        .expect("the agent answers");
    assert_eq!(
        seen.status, 404,
        "the refused acquire left a key: {}",
        seen.body
    );
}

/// `consul://` (plain HTTP) on the agent's HTTPS port: Go's TLS server
/// answers HTTP 400, a configuration error at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_on_the_https_port_is_a_config_error() {
    let agent = agent(Secured::Https).await;
    let s = ConsulStore::builder(agent.https_address().unwrap())
        .call_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let e = s.current_leader(&election("e")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{}", chain(&e));
    assert!(chain(&e).contains("HTTP 400"), "{}", chain(&e));
}

/// The kit's agents are what the tests above assume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secured_agents_serve_their_store_urls() {
    let https = agent(Secured::Https).await;
    assert_eq!(https.tls(), Some(ConsulTls::Server));
    assert!(https.acl().is_none());
    let acl = agent(Secured::ClientCertAcl).await;
    assert_eq!(acl.tls(), Some(ConsulTls::ClientCert));
    assert_eq!(acl.acl().unwrap().key_prefix(), PREFIX);
    for agent in [&https, &acl] {
        let address = agent.https_address().unwrap();
        assert_eq!(agent.store_url(), format!("consuls://{address}"));
        assert_ne!(address, agent.address(), "HTTPS has a port of its own");
    }
}
