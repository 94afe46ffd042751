//! The Consul store against a real Consul dev agent: regent's store
//! conformance suite, and what is Consul's own: sessions destroyed and keys
//! deleted, recreated or overwritten by an operator, garbage in the key,
//! ttls Consul refuses.
//!
//! The tests of this binary share one dev agent while any of them runs (the
//! test harness runs them in parallel); each uses elections of its own.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use regent_consul::{ConsulStore, RECORD_FLAGS};
use regent_core::testing::Harness;
use regent_core::{
    Acquire, Candidate, ConfigError, ElectionName, EndReason, ErrorKind, LeaseStore, Renewal,
    SafetyClass, StoreStyle, WatchMode,
};
use regent_testkit::engines::Consul;
use regent_testkit::fixtures::{acquire_request as req, holder};

/// Consul's shortest session TTL.
const TTL: Duration = Duration::from_secs(10);

/// The dev agent the running tests share; started by the first, stopped
/// when the last drops it.
static AGENT: Mutex<Weak<Consul>> = Mutex::new(Weak::new());

async fn agent() -> Arc<Consul> {
    tokio::task::spawn_blocking(|| {
        let mut shared = AGENT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(agent) = shared.upgrade() {
            return agent;
        }
        let agent = Arc::new(
            Consul::start().unwrap_or_else(|e| panic!("cannot start Consul for this test: {e}")),
        );
        *shared = Arc::downgrade(&agent);
        agent
    })
    .await
    .expect("the start task ran")
}

fn store(agent: &Consul) -> ConsulStore {
    ConsulStore::builder(agent.address())
        .call_timeout(Duration::from_secs(2))
        .build()
        .expect("build the store")
}

fn election(name: &str) -> ElectionName {
    ElectionName::new(format!("{name}-{:08x}", salt())).expect("valid election name")
}

fn salt() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u32
}

/// `PUT` on the agent's API as an operator's tool would, from a blocking
/// thread.
async fn put(agent: &Arc<Consul>, path: String, body: Option<String>) -> (u16, String) {
    let agent = agent.clone();
    tokio::task::spawn_blocking(move || {
        let r = agent
            .http_put(&path, body.as_deref())
            .unwrap_or_else(|e| panic!("PUT {path}: {e}"));
        (r.status, r.body)
    })
    .await
    .expect("the request task ran")
}

async fn delete_key(agent: &Arc<Consul>, key: &str) {
    let ops = format!(r#"[{{"KV":{{"Verb":"delete","Key":"{key}"}}}}]"#);
    let (status, body) = put(agent, "/v1/txn".into(), Some(ops)).await;
    assert_eq!(status, 200, "delete {key}: {body}");
}

struct ConformanceHarness {
    agent: Arc<Consul>,
}

impl Harness for ConformanceHarness {
    type Store = ConsulStore;

    async fn store(&self) -> ConsulStore {
        store(&self.agent)
    }

    async fn unreachable_store(&self) -> ConsulStore {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        ConsulStore::builder(format!("127.0.0.1:{port}"))
            .call_timeout(Duration::from_secs(2))
            .build()
            .expect("building sends nothing")
    }

    fn ttl(&self) -> Duration {
        TTL
    }

    async fn delete_records(&self, election: &ElectionName) {
        let key = store(&self.agent).election_key(election);
        delete_key(&self.agent, &key).await;
    }

    async fn put_garbage(&self, election: &ElectionName) {
        let key = store(&self.agent).election_key(election);
        let (status, body) = put(
            &self.agent,
            format!("/v1/kv/{key}?flags={RECORD_FLAGS}"),
            Some("{\"holder\": not json".into()),
        )
        .await;
        assert_eq!(status, 200, "put garbage: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consul_store_conforms() {
    let harness = ConformanceHarness {
        agent: agent().await,
    };
    regent_core::testing::run(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_declares_consuls_ttl_range_and_slack() {
    let agent = agent().await;
    let info = store(&agent).info();
    assert_eq!(info.name, "consul");
    assert_eq!(info.style, StoreStyle::Race);
    assert_eq!(info.watch, WatchMode::Notify);
    assert_eq!(info.safety, SafetyClass::Consensus);
    assert_eq!(
        (info.min_ttl, info.max_ttl),
        (TTL, Duration::from_secs(86_400))
    );
    // By default the lock delay is the ttl and sessions last max(10 s,
    // ttl/2): freed up to two session TTLs plus the ttl after the last
    // renewal.
    assert_eq!(info.expiry_slack_for(TTL), Duration::from_secs(20));
    assert_eq!(
        info.expiry_slack_for(Duration::from_secs(60)),
        Duration::from_secs(60)
    );
    let delayed = ConsulStore::builder(agent.address())
        .lock_delay(Duration::from_secs(3))
        .build()
        .unwrap();
    assert_eq!(
        delayed.info().expiry_slack_for(TTL),
        TTL + Duration::from_secs(3)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_below_ten_seconds_is_refused_at_build() {
    let agent = agent().await;
    let err = Candidate::builder(store(&agent), election("short"), holder("a"))
        .ttl(Duration::from_secs(5))
        .build()
        .expect_err("Consul refuses TTLs below 10 s");
    assert!(
        matches!(
            err,
            ConfigError::TtlBelowStoreMinimum { min, store: "consul", .. } if min == TTL
        ),
        "{err:?}"
    );
    // And a single acquire refuses it too, as Config, without a session.
    let e = store(&agent)
        .try_acquire(
            &req(&election("short"), "a", Duration::from_millis(9_999)),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
}

fn candidate(store: ConsulStore, election: &ElectionName, who: &str) -> Candidate<ConsulStore> {
    Candidate::builder(store, election.clone(), holder(who))
        .ttl(TTL)
        .renew_every(Duration::from_millis(500))
        .renew_deadline(Duration::from_secs(6))
        .grace(Duration::from_millis(200))
        .build()
        .expect("valid timing")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_destroyed_by_an_operator_is_lost() {
    let agent = agent().await;
    let store = store(&agent);
    let e = election("destroy");
    let c = candidate(store.clone(), &e, "a");
    let leadership = c.campaign().await.expect("a wins");
    let session = leadership.lease().handle.as_str().to_owned();

    let (status, body) = put(&agent, format!("/v1/session/destroy/{session}"), None).await;
    assert_eq!(status, 200, "{body}");
    let ended = tokio::time::timeout(Duration::from_secs(3), leadership.until_ended())
        .await
        .expect("leadership ends within a renew interval or two");
    assert_eq!(ended.reason, EndReason::Lost);
    assert_eq!(
        store.renew(leadership.lease()).await.unwrap(),
        Renewal::Lost
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_deleted_then_recreated_still_gives_a_larger_token() {
    let agent = agent().await;
    let store = store(&agent);
    let e = election("recreate");
    let key = store.election_key(&e);
    let Acquire::Won(a) = store.try_acquire(&req(&e, "a", TTL), None).await.unwrap() else {
        panic!("a wins an empty election");
    };
    // Deleted under a's lease: a's renewal finds it lost.
    delete_key(&agent, &key).await;
    assert_eq!(store.renew(&a).await.unwrap(), Renewal::Lost);
    // Recreated (Consul's LockIndex starts again at 1): the token, the
    // key's ModifyIndex at acquisition, still grows.
    let Acquire::Won(b) = store.try_acquire(&req(&e, "b", TTL), None).await.unwrap() else {
        panic!("b wins after the key was deleted");
    };
    assert!(b.token > a.token, "{} !> {}", b.token, a.token);
    store.release(&b).await.unwrap();
    delete_key(&agent, &key).await;
    let Acquire::Won(c) = store.try_acquire(&req(&e, "c", TTL), None).await.unwrap() else {
        panic!("c wins after the key was deleted");
    };
    assert!(c.token > b.token, "{} !> {}", c.token, b.token);
    store.release(&c).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_overwritten_by_an_operator_is_lost_and_not_taken_over() {
    let agent = agent().await;
    let store = store(&agent);
    let e = election("overwrite");
    let key = store.election_key(&e);
    let c = candidate(store.clone(), &e, "a");
    let leadership = c.campaign().await.expect("a wins");
    // `consul kv put KEY mallory`: Consul keeps the lock, the value and
    // flags are someone else's.
    let (status, body) = put(&agent, format!("/v1/kv/{key}"), Some("mallory".into())).await;
    assert_eq!(status, 200, "{body}");
    let ended = tokio::time::timeout(Duration::from_secs(3), leadership.until_ended())
        .await
        .expect("leadership ends within a renew interval or two");
    assert_eq!(ended.reason, EndReason::Lost);
    c.shutdown().await;
    let err = store
        .try_acquire(&req(&e, "b", TTL), None)
        .await
        .expect_err("a foreign record is not taken over");
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_in_the_key_is_a_clear_error() {
    let agent = agent().await;
    let store = store(&agent);
    for (name, flags, body) in [
        ("json", RECORD_FLAGS, "{\"holder\": 7}"),
        ("bytes", RECORD_FLAGS, "two words"),
        ("flags", 0, "host-1"),
    ] {
        let e = election(name);
        let key = store.election_key(&e);
        let (status, text) = put(
            &agent,
            format!("/v1/kv/{key}?flags={flags}"),
            Some(body.into()),
        )
        .await;
        assert_eq!(status, 200, "{text}");
        let err = store
            .try_acquire(&req(&e, "a", TTL), None)
            .await
            .expect_err("garbage is not taken over");
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{name}: {err}");
        assert!(err.to_string().contains(&key), "{name}: {err}");
        let err = store
            .current_leader(&e)
            .await
            .expect_err("garbage is no leader");
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{name}: {err}");
        // The failed acquire left no session holding the key.
        let (_, kv) = put(
            &agent,
            "/v1/txn".into(),
            Some(format!(r#"[{{"KV":{{"Verb":"get","Key":"{key}"}}}}]"#)),
        )
        .await;
        assert!(!kv.contains("\"Session\""), "{name}: {kv}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_sent_and_never_shown() {
    let agent = agent().await;
    let e = election("token");
    let with_token = ConsulStore::builder(agent.address())
        .token("00000000-0000-0000-0000-000000000001")
        .build()
        .unwrap();
    // The dev agent has ACLs off: a token is sent and ignored.
    assert_eq!(with_token.current_leader(&e).await.unwrap(), None);
    assert!(!format!("{with_token:?}").contains("0001"));
}

/// Regression: on a key that existed, the transaction's first result is
/// the key as its check-index saw it, and the token was that old index;
/// the holder's renewals then reported lost and its release freed nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_of_a_lock_on_an_existing_key_is_the_locks_index_regression() {
    let agent = agent().await;
    // No lock delay: b takes the key at once after a's session ends.
    let store = ConsulStore::builder(agent.address())
        .lock_delay(Duration::ZERO)
        .build()
        .unwrap();
    let e = election("existing");
    let Acquire::Won(a) = store.try_acquire(&req(&e, "a", TTL), None).await.unwrap() else {
        panic!("a wins an empty election");
    };
    let (status, body) = put(
        &agent,
        format!("/v1/session/destroy/{}", a.handle.as_str()),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let Acquire::Won(b) = store.try_acquire(&req(&e, "b", TTL), None).await.unwrap() else {
        panic!("b wins once a's session is gone");
    };
    let leader = store.current_leader(&e).await.unwrap().expect("b leads");
    assert_eq!((leader.holder, leader.token), (b.holder.clone(), b.token));
    assert_eq!(store.renew(&b).await.unwrap(), Renewal::Renewed);
    store.release(&b).await.unwrap();
    assert_eq!(store.current_leader(&e).await.unwrap(), None);
    let Acquire::Won(d) = store.try_acquire(&req(&e, "d", TTL), None).await.unwrap() else {
        panic!("d wins after b released");
    };
    assert!(d.token > b.token && b.token > a.token);
    store.release(&d).await.unwrap();
}

/// The key's `ModifyIndex`, as an operator's `consul kv get -detailed`
/// shows it.
async fn modify_index(agent: &Arc<Consul>, key: &str) -> u64 {
    let (status, body) = put(
        agent,
        "/v1/txn".into(),
        Some(format!(r#"[{{"KV":{{"Verb":"get","Key":"{key}"}}}}]"#)),
    )
    .await;
    assert_eq!(status, 200, "get {key}: {body}");
    let json: serde_json::Value = serde_json::from_str(&body).expect("Consul answers JSON");
    json["Results"][0]["KV"]["ModifyIndex"]
        .as_u64()
        .unwrap_or_else(|| panic!("no ModifyIndex in {body}"))
}

/// A metadata update writes the key, which moves its `ModifyIndex`, the
/// token of a record that has none of its own: the token must stay the
/// lock's index, and the next term's must still be larger than every
/// index of the term before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_update_moves_the_index_but_not_the_token() {
    let agent = agent().await;
    // No lock delay: b takes the key at once after a's session ends.
    let store = ConsulStore::builder(agent.address())
        .lock_delay(Duration::ZERO)
        .build()
        .unwrap();
    let e = election("update");
    let key = store.election_key(&e);
    let Acquire::Won(a) = store.try_acquire(&req(&e, "a", TTL), None).await.unwrap() else {
        panic!("a wins an empty election");
    };
    assert_eq!(modify_index(&agent, &key).await, a.token.get());
    let mut last_index = a.token.get();
    for addr in ["10.0.0.1:80", "10.0.0.2:80"] {
        let m = regent_core::Metadata::from_pairs([("addr", addr)]).unwrap();
        assert_eq!(
            store.update_metadata(&a, &m).await.unwrap(),
            Renewal::Renewed
        );
        let index = modify_index(&agent, &key).await;
        assert!(index > last_index, "the update wrote the key");
        last_index = index;
        let leader = store.current_leader(&e).await.unwrap().expect("a leads");
        assert_eq!((&leader.holder, leader.token), (&a.holder, a.token));
        assert_eq!(leader.metadata.get("addr"), Some(addr));
        assert_eq!(store.renew(&a).await.unwrap(), Renewal::Renewed);
    }

    let (status, body) = put(
        &agent,
        format!("/v1/session/destroy/{}", a.handle.as_str()),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let m = regent_core::Metadata::from_pairs([("addr", "late")]).unwrap();
    assert_eq!(store.update_metadata(&a, &m).await.unwrap(), Renewal::Lost);
    let Acquire::Won(b) = store.try_acquire(&req(&e, "b", TTL), None).await.unwrap() else {
        panic!("b wins once a's session is gone");
    };
    assert!(b.token.get() > last_index, "{} !> {last_index}", b.token);
    let leader = store.current_leader(&e).await.unwrap().expect("b leads");
    assert_eq!((leader.holder, leader.token), (b.holder.clone(), b.token));

    // An operator's overwrite after an update still ends the term.
    let m = regent_core::Metadata::from_pairs([("addr", "b")]).unwrap();
    assert_eq!(
        store.update_metadata(&b, &m).await.unwrap(),
        Renewal::Renewed
    );
    let (status, body) = put(&agent, format!("/v1/kv/{key}"), Some("mallory".into())).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(store.renew(&b).await.unwrap(), Renewal::Lost);
    assert_eq!(store.update_metadata(&b, &m).await.unwrap(), Renewal::Lost);
    delete_key(&agent, &key).await;
}

/// `GET` on the agent's API, from a blocking thread.
async fn get(agent: &Arc<Consul>, path: String) -> (u16, String) {
    let agent = agent.clone();
    tokio::task::spawn_blocking(move || {
        let r = agent
            .http_get(&path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        (r.status, r.body)
    })
    .await
    .expect("the request task ran")
}

/// Whether Consul knows `session`.
async fn session_exists(agent: &Arc<Consul>, session: &str) -> bool {
    let (status, body) = get(agent, format!("/v1/session/info/{session}")).await;
    assert_eq!(status, 200, "{body}");
    body.contains(session)
}

/// Many elections of one store share one session (issue 15, item 3): each
/// renews, the session ends only with its last key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elections_of_one_store_share_one_session() {
    let agent = agent().await;
    let store = store(&agent);
    let elections: Vec<_> = (0..5).map(|i| election(&format!("shared-{i}"))).collect();
    let mut leases = Vec::new();
    for e in &elections {
        let Acquire::Won(l) = store.try_acquire(&req(e, "a", TTL), None).await.unwrap() else {
            panic!("a wins {e}")
        };
        leases.push(l);
    }
    let session = leases[0].handle.as_str().to_owned();
    assert!(
        leases.iter().all(|l| l.handle.as_str() == session),
        "one session for all"
    );
    let renewals = futures_util::future::join_all(leases.iter().map(|l| store.renew(l))).await;
    for (l, r) in leases.iter().zip(renewals) {
        assert_eq!(r.unwrap(), Renewal::Renewed, "{}", l.election);
    }
    // One deleted by an operator: lost at its next renewal, the others not.
    delete_key(&agent, &store.election_key(&elections[1])).await;
    assert_eq!(store.renew(&leases[1]).await.unwrap(), Renewal::Lost);
    assert_eq!(store.renew(&leases[2]).await.unwrap(), Renewal::Renewed);
    // Released one by one: the session lives until the last.
    for l in [&leases[0], &leases[2], &leases[3]] {
        store.release(l).await.unwrap();
        assert_eq!(store.current_leader(&l.election).await.unwrap(), None);
    }
    assert!(session_exists(&agent, &session).await);
    assert_eq!(store.renew(&leases[4]).await.unwrap(), Renewal::Renewed);
    store.release(&leases[4]).await.unwrap();
    assert!(
        !session_exists(&agent, &session).await,
        "ended with its last key"
    );
}

/// A shared session must not keep the lock of an election whose holder
/// stopped renewing while others renew: it is unlocked when a session of
/// its own would have let it go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrenewed_lock_on_a_shared_session_goes_at_its_ttl() {
    let agent = agent().await;
    let store = store(&agent);
    let idle = election("shared-idle");
    let busy = election("shared-busy");
    let Acquire::Won(i) = store
        .try_acquire(&req(&idle, "a", TTL), None)
        .await
        .unwrap()
    else {
        panic!("a wins {idle}")
    };
    let Acquire::Won(b) = store
        .try_acquire(&req(&busy, "a", TTL), None)
        .await
        .unwrap()
    else {
        panic!("a wins {busy}")
    };
    assert_eq!(i.handle, b.handle, "one session");
    let start = tokio::time::Instant::now();
    let mut idle_gone = None;
    while start.elapsed() < TTL + TTL / 2 {
        tokio::time::sleep(TTL / 5).await;
        assert_eq!(store.renew(&b).await.unwrap(), Renewal::Renewed);
        if idle_gone.is_none() && store.current_leader(&idle).await.unwrap().is_none() {
            idle_gone = Some(start.elapsed());
        }
    }
    let gone = idle_gone.expect("the idle election's lock went");
    assert!(gone >= TTL, "gone after {gone:?}, before its ttl");
    assert_eq!(store.renew(&i).await.unwrap(), Renewal::Lost);
    // Unlocked, not ended: free at once, no lock delay.
    let Acquire::Won(c) = store
        .try_acquire(&req(&idle, "c", TTL), None)
        .await
        .unwrap()
    else {
        panic!("c wins {idle} at once")
    };
    store.release(&c).await.unwrap();
    store.release(&b).await.unwrap();
}

/// The watches of one election through one store share one blocking
/// query: 300 of them waiting at once, more connections than the agent
/// serves one client (200), all see the leader come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_of_one_election_share_one_blocking_query() {
    use futures_util::StreamExt as _;
    let agent = agent().await;
    let store = store(&agent);
    let e = election("watched-by-many");
    let mut waiting = tokio::task::JoinSet::new();
    for _ in 0..300 {
        let mut watch = store.watch(&e).await.expect("watch");
        let first = watch.next().await.expect("a first item").expect("no error");
        assert_eq!(first, None, "no leader yet");
        waiting.spawn(async move { watch.next().await });
    }
    let Acquire::Won(lease) = store.try_acquire(&req(&e, "a", TTL), None).await.unwrap() else {
        panic!("a wins {e}")
    };
    let mut seen = 0;
    while let Some(next) = tokio::time::timeout(TTL, waiting.join_next())
        .await
        .expect("every watch sees the change within a ttl")
    {
        let leader = next
            .expect("the task ran")
            .expect("an item")
            .expect("no error")
            .expect("a leader");
        assert_eq!(leader.holder, holder("a"));
        seen += 1;
    }
    assert_eq!(seen, 300);
    store.release(&lease).await.unwrap();
}

/// Creates a session as an operator's tool would (`TTL` 30 s, deleting
/// its keys when it ends), and locks `key` with `value` and `flags` under
/// it.
async fn lock_by_hand(agent: &Arc<Consul>, key: &str, flags: u64, value: &str) {
    let (status, body) = put(
        agent,
        "/v1/session/create".into(),
        Some(r#"{"TTL": "30s", "Behavior": "delete", "LockDelay": "0s"}"#.into()),
    )
    .await;
    assert_eq!(status, 200, "create a session: {body}");
    let json: serde_json::Value = serde_json::from_str(&body).expect("Consul answers JSON");
    let session = json["ID"].as_str().expect("a session id").to_owned();
    let (status, body) = put(
        agent,
        format!("/v1/kv/{key}?acquire={session}&flags={flags}"),
        Some(value.into()),
    )
    .await;
    assert_eq!((status, body.trim()), (200, "true"), "lock {key}");
}

fn who(value: &str) -> regent_core::Metadata {
    regent_core::Metadata::from_pairs([("who", value)]).unwrap()
}

/// Keys under an election's roster that are not regent's entries (not
/// JSON, foreign flags, a value naming another holder than its key) are
/// skipped, never a panic nor an error; a second connection enrolling the
/// same holder takes its entry over; a ttl Consul cannot give a session is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_roster_skips_what_is_not_regents_and_moves_between_connections() {
    use regent_consul::ROSTER_FLAGS;
    let agent = agent().await;
    let (one, two) = (store(&agent), store(&agent));
    let e = election("roster-garbage");
    let mut a = req(&e, "a", TTL);
    a.metadata = who("a1");
    one.enroll(&a).await.unwrap();
    let prefix = one.roster_prefix(&e);
    assert_eq!(one.roster_key(&e, &holder("a")), format!("{prefix}a"));
    lock_by_hand(
        &agent,
        &format!("{prefix}mallory"),
        ROSTER_FLAGS,
        "{\"holder\": no",
    )
    .await;
    lock_by_hand(
        &agent,
        &format!("{prefix}bytes"),
        ROSTER_FLAGS,
        "\u{1}\u{2}",
    )
    .await;
    lock_by_hand(
        &agent,
        &format!("{prefix}flags"),
        0,
        r#"{"holder": "flags"}"#,
    )
    .await;
    lock_by_hand(
        &agent,
        &format!("{prefix}eve"),
        ROSTER_FLAGS,
        r#"{"holder": "b"}"#,
    )
    .await;
    // Unlocked: a session that ended, not a live entry.
    let (status, body) = put(
        &agent,
        format!("/v1/kv/{prefix}idle?flags={ROSTER_FLAGS}"),
        Some(r#"{"holder": "idle"}"#.into()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let listed = |store: ConsulStore| {
        let e = e.clone();
        async move {
            store
                .candidates(&e)
                .await
                .expect("garbage is skipped, not an error")
                .expect("a roster")
                .into_iter()
                .map(|c| {
                    let w = c.metadata.get("who").unwrap_or_default().to_owned();
                    (c.holder.as_str().to_owned(), w)
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listed(one.clone()).await,
        [("a".to_owned(), "a1".to_owned())]
    );

    // Another connection enrolls a too (a restarted process): it knows
    // nothing of the first's session, and takes the entry over.
    a.metadata = who("a2");
    two.enroll(&a).await.unwrap();
    assert_eq!(
        listed(two.clone()).await,
        [("a".to_owned(), "a2".to_owned())]
    );
    // The first renews its own session, which no longer holds the key,
    // and takes it back with its metadata.
    a.metadata = who("a3");
    one.enroll(&a).await.unwrap();
    assert_eq!(
        listed(two.clone()).await,
        [("a".to_owned(), "a3".to_owned())]
    );
    // Withdrawn through the other connection: gone, whoever's session.
    two.withdraw(&e, &holder("a")).await.unwrap();
    two.withdraw(&e, &holder("a")).await.unwrap();
    assert_eq!(listed(one.clone()).await, []);

    let err = one
        .enroll(&req(&e, "b", Duration::from_secs(5)))
        .await
        .expect_err("Consul gives no session of 5 s");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
}

/// A lease given to a successor is kept for it on the server: another
/// connection's acquire is held off and sees no leader, the successor wins
/// through yet another; and a reservation nobody takes ends with its
/// window, well before the shortest session Consul gives (10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_is_honoured_through_another_connection() {
    let agent = agent().await;
    let (one, two) = (store(&agent), store(&agent));
    let e = election("reserved");
    let Acquire::Won(a) = one.try_acquire(&req(&e, "a", TTL), None).await.unwrap() else {
        panic!("a wins an empty election");
    };
    let passed = one
        .release_to(&a, &holder("b"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(passed, regent_core::HandOff::ToSuccessor);
    assert_eq!(two.current_leader(&e).await.unwrap(), None);
    for who in ["c", "a"] {
        match two.try_acquire(&req(&e, who, TTL), None).await.unwrap() {
            Acquire::Held { leader: None, .. } => {}
            other => panic!("{who} must be held off while the lease is b's: {other:?}"),
        }
    }
    let Acquire::Won(b) = store(&agent)
        .try_acquire(&req(&e, "b", TTL), None)
        .await
        .unwrap()
    else {
        panic!("b takes the lease kept for it");
    };
    assert!(b.token > a.token, "{} !> {}", b.token, a.token);
    let leader = one.current_leader(&e).await.unwrap().expect("b leads");
    assert_eq!((leader.holder, leader.token), (holder("b"), b.token));
    assert_eq!(two.renew(&b).await.unwrap(), Renewal::Renewed);

    // Kept for a, who never comes: free again once the window is over.
    let passed = two
        .release_to(&b, &holder("a"), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(passed, regent_core::HandOff::ToSuccessor);
    let start = tokio::time::Instant::now();
    let c = loop {
        match one.try_acquire(&req(&e, "c", TTL), None).await.unwrap() {
            Acquire::Won(c) => break c,
            Acquire::Held { leader: None, .. } => {}
            other => panic!("nobody leads a kept lease: {other:?}"),
        }
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "the reservation outlived its window"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "{:?}",
        start.elapsed()
    );
    assert!(c.token > b.token);
    one.release(&c).await.unwrap();
}
