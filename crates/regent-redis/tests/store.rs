//! The Redis store's own promises, against a real server: the ttl rules,
//! garbage on the key never taken over, tokens that outgrow a `FLUSHALL`
//! and a restart without persistence, a term kept across a restart with
//! `appendfsync always`, wake-ups on release, a replica acknowledgement
//! that cannot come, a stopped server, a term won by an acquire whose
//! answer never came, and the errors that name their
//! cause: a wrong password, a database out of range, the ACL of the docs.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use regent_core::{
    Acquire, AcquireRequest, ElectionName, ErrorKind, HolderId, Lease, LeaseStore, Metadata,
    Renewal,
};
use regent_redis::{MIN_TTL, RedisStore, redis};
use regent_testkit::engines::{Redis, RedisPersistence};

use common::{cmd, kit, unique};

fn request(election: &ElectionName, holder: &str, ttl: Duration) -> AcquireRequest {
    AcquireRequest {
        election: election.clone(),
        holder: HolderId::new(holder).unwrap(),
        ttl,
        metadata: Metadata::default(),
    }
}

async fn win(store: &RedisStore, election: &ElectionName, holder: &str) -> Lease {
    match store
        .try_acquire(&request(election, holder, Duration::from_secs(10)), None)
        .await
        .unwrap_or_else(|e| panic!("acquire by {holder}: {e}"))
    {
        Acquire::Won(l) => l,
        other => panic!("{holder} should have won a free election, got {other:?}"),
    }
}

async fn store_on(url: &str) -> RedisStore {
    RedisStore::builder(redis::Client::open(url).unwrap())
        .build()
        .await
        .expect("open the store")
}

fn lease_key(election: &ElectionName) -> String {
    format!("regent:{{{election}}}:lease")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_outside_the_range_is_refused_and_the_server_times_the_lease() {
    let server = kit::shared();
    let url = kit::url(&server);
    let store = store_on(&url).await;
    let election = unique("ttl");
    for ttl in [
        Duration::ZERO,
        MIN_TTL - Duration::from_millis(1),
        regent_core::MAX_TTL + Duration::from_millis(1),
    ] {
        let e = store
            .try_acquire(&request(&election, "a", ttl), None)
            .await
            .expect_err("a ttl out of range");
        assert_eq!(e.kind(), ErrorKind::Config, "{ttl:?}: {e}");
    }
    assert_eq!(store.current_leader(&election).await.unwrap(), None);

    // A ttl of a fraction of a millisecond is rounded up, never down.
    let ttl = Duration::from_micros(1_500_300);
    let Acquire::Won(lease) = store
        .try_acquire(&request(&election, "a", ttl), None)
        .await
        .unwrap()
    else {
        panic!("a free election was not won");
    };
    assert!(lease.ttl >= ttl, "granted {:?} for {ttl:?}", lease.ttl);
    let pttl = cmd(&url, redis::cmd("PTTL").arg(lease_key(&election))).await;
    let redis::Value::Int(ms) = pttl else {
        panic!("PTTL answered {pttl:?}");
    };
    assert!((1..=1501).contains(&ms), "the key expires in {ms} ms");
    // A renewal sets the server's expiry anew.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(store.renew(&lease).await.unwrap(), Renewal::Renewed);
    let redis::Value::Int(ms) = cmd(&url, redis::cmd("PTTL").arg(lease_key(&election))).await
    else {
        panic!("no PTTL");
    };
    assert!(ms > 1000, "after a renewal the key expires in {ms} ms");
    // A metadata update leaves the expiry alone.
    let m = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
    assert_eq!(
        store.update_metadata(&lease, &m).await.unwrap(),
        Renewal::Renewed
    );
    let redis::Value::Int(after) = cmd(&url, redis::cmd("PTTL").arg(lease_key(&election))).await
    else {
        panic!("no PTTL");
    };
    assert!(
        after <= ms,
        "the update moved the expiry from {ms} to {after} ms"
    );
    store.release(&lease).await.unwrap();
}

/// Another program's lock string, a key of another type, a hash that is
/// not regent's, and a counter that is not a number: each is a `Corrupt`
/// error naming the key, never a win; renewing through it is `Lost`;
/// nothing regent does changes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_key_is_corrupt_and_left_alone() {
    let server = kit::shared();
    let url = kit::url(&server);
    let store = store_on(&url).await;

    /// Writes garbage on a key.
    type Put = fn(&str) -> redis::Cmd;
    let cases: [(&str, Put); 3] = [
        ("a lock string", |k| {
            let mut c = redis::cmd("SET");
            c.arg(k).arg("f3a9c-redlock-value").arg("PX").arg(60_000);
            c
        }),
        ("a list", |k| {
            let mut c = redis::cmd("RPUSH");
            c.arg(k).arg("x");
            c
        }),
        ("a hash of someone else's", |k| {
            let mut c = redis::cmd("HSET");
            c.arg(k).arg("owner").arg("cron-7");
            c
        }),
    ];
    for (what, put) in cases {
        let election = unique("garbage");
        let key = lease_key(&election);
        let holder_lease = win(&store, &election, "a").await;
        cmd(&url, redis::cmd("DEL").arg(&key)).await;
        cmd(&url, &put(&key)).await;
        let before = cmd(&url, redis::cmd("DUMP").arg(&key)).await;

        let e = store
            .try_acquire(&request(&election, "b", Duration::from_secs(5)), None)
            .await
            .expect_err(what);
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
        assert!(e.to_string().contains(&key), "{what}: {e}");
        let e = store.current_leader(&election).await.expect_err(what);
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{what}: {e}");
        assert_eq!(
            store.renew(&holder_lease).await.unwrap(),
            Renewal::Lost,
            "{what}"
        );
        store.release(&holder_lease).await.unwrap();
        assert_eq!(
            store
                .update_metadata(&holder_lease, &Metadata::default())
                .await
                .unwrap(),
            Renewal::Lost
        );
        assert_eq!(
            cmd(&url, redis::cmd("DUMP").arg(&key)).await,
            before,
            "{what} was changed"
        );
    }

    // A counter that is not one of ours: no token is issued.
    let election = unique("garbage-counter");
    cmd(
        &url,
        redis::cmd("SET")
            .arg(format!("regent:{{{election}}}:token"))
            .arg("not-a-number"),
    )
    .await;
    let e = store
        .try_acquire(&request(&election, "a", Duration::from_secs(5)), None)
        .await
        .expect_err("a garbage counter");
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_grow_across_a_flushall() {
    let server = kit::own(Redis::builder());
    let url = kit::url(&server);
    let store = store_on(&url).await;
    let election = unique("flushall");
    let mut last = win(&store, &election, "a").await.token;
    for round in 0..3 {
        cmd(&url, &redis::cmd("FLUSHALL")).await;
        let lease = win(&store, &election, "b").await;
        assert!(
            lease.token > last,
            "round {round}: {} after {} across a FLUSHALL",
            lease.token,
            last
        );
        last = lease.token;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_grow_across_a_restart_without_persistence() {
    let mut server = kit::own(Redis::builder().persistence(RedisPersistence::None));
    let url = kit::url(&server);
    let store = store_on(&url).await;
    let election = unique("restart");
    let first = win(&store, &election, "a").await;
    tokio::task::block_in_place(|| server.restart()).expect("restart");
    // The term is gone with the data, and the counter too.
    let after = loop {
        match store
            .try_acquire(&request(&election, "b", Duration::from_secs(10)), None)
            .await
        {
            Ok(Acquire::Won(l)) => break l,
            Ok(other) => panic!("after a restart without persistence: {other:?}"),
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(
        after.token > first.token,
        "{} after {} across a restart",
        after.token,
        first.token
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_survives_a_restart_with_appendfsync_always() {
    let mut server = kit::own(Redis::builder().persistence(RedisPersistence::AppendAlways));
    let url = kit::url(&server);
    let store = store_on(&url).await;
    let election = unique("aof");
    let first = win(&store, &election, "a").await;
    tokio::task::block_in_place(|| server.restart()).expect("restart");
    let leader = loop {
        match store.current_leader(&election).await {
            Ok(l) => break l,
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(leader.map(|l| l.token), Some(first.token));
    assert_eq!(store.renew(&first).await.unwrap(), Renewal::Renewed);
}

/// A release wakes a watch at once, though it polls only every minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_watchers_at_once() {
    let server = kit::shared();
    let url = kit::url(&server);
    let store = RedisStore::builder(redis::Client::open(url.as_str()).unwrap())
        .poll_interval(Duration::from_secs(60))
        .build()
        .await
        .unwrap();
    let election = unique("wake");
    let lease = win(&store, &election, "a").await;
    let mut watch = store.watch(&election).await.unwrap();
    let first = watch.next().await.unwrap().unwrap();
    assert_eq!(first.map(|l| l.token), Some(lease.token));
    let released = Instant::now();
    store.release(&lease).await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("woken within 5 s, not at the next poll")
        .unwrap()
        .unwrap();
    assert_eq!(next, None);
    assert!(released.elapsed() < Duration::from_secs(5));
    let b = win(&store, &election, "b").await;
    let next = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("woken by the acquire")
        .unwrap()
        .unwrap();
    assert_eq!(next.map(|l| l.token), Some(b.token));
}

/// `WAIT` for a replica that a lone server does not have: the term is
/// given back and the acquire fails as transient.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacknowledged_term_is_given_back() {
    let server = kit::shared();
    let url = kit::url(&server);
    let store = RedisStore::builder(redis::Client::open(url.as_str()).unwrap())
        .wait_replicas(1, Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let election = unique("wait");
    let e = store
        .try_acquire(&request(&election, "a", Duration::from_secs(10)), None)
        .await
        .expect_err("no replica to acknowledge");
    assert!(e.is_transient(), "{e}");
    assert!(e.to_string().contains("0 of 1 replicas"), "{e}");
    assert_eq!(store.current_leader(&election).await.unwrap(), None);
}

/// A wrong password is `Auth`, at once, and says which settings to check;
/// no password where one is needed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_an_auth_error() {
    let server = kit::own(Redis::builder().user("app", "right-horse-battery"));
    let addr = server.addr();
    for (user, password) in [("app", Some("wrong")), ("app", None), ("nobody", Some("x"))] {
        let mut options = regent_core::target::Options::new();
        options.set(&regent_redis::KIND, "user", user).unwrap();
        if let Some(p) = password {
            options.set(&regent_redis::KIND, "password", p).unwrap();
        }
        let target = (regent_redis::KIND.parse)(&format!("redis://{addr}"), &options, &|_| None)
            .expect("the URL parses");
        let e = target
            .connect(Duration::from_secs(2))
            .await
            .expect_err("a wrong password");
        assert_eq!(e.kind(), ErrorKind::Auth, "{user}/{password:?}: {e}");
        assert!(!e.to_string().contains("wrong"), "{e}");
    }
    // The right one works.
    let mut options = regent_core::target::Options::new();
    options.set(&regent_redis::KIND, "user", "app").unwrap();
    options
        .set(&regent_redis::KIND, "password", "right-horse-battery")
        .unwrap();
    let target = (regent_redis::KIND.parse)(&format!("redis://{addr}"), &options, &|_| None)
        .expect("the URL parses");
    let store = target.connect(Duration::from_secs(2)).await.unwrap();
    let election = unique("auth");
    assert!(store.current_leader(&election).await.unwrap().is_none());
}

/// A database the server does not have is `Config`, not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_out_of_range_is_a_config_error() {
    let server = kit::shared();
    let e = RedisStore::builder(redis::Client::open(format!("{}/999", kit::url(&server))).unwrap())
        .build()
        .await
        .expect_err("database 999");
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
}

/// A stopped server (SIGSTOP) is a transient error within the call
/// timeout, and the store works again once the server does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_is_transient_and_the_store_recovers() {
    let mut server = kit::own(Redis::builder());
    let url = kit::url(&server);
    let store = RedisStore::builder(redis::Client::open(url.as_str()).unwrap())
        .call_timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let election = unique("paused");
    let lease = win(&store, &election, "a").await;
    let _ = server.pause();
    let asked = Instant::now();
    let e = store.renew(&lease).await.expect_err("a stopped server");
    assert!(e.is_transient(), "{e}");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    let _ = server.resume();
    let start = Instant::now();
    loop {
        match store.renew(&lease).await {
            Ok(r) => {
                assert_eq!(r, Renewal::Renewed);
                break;
            }
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                assert!(start.elapsed() < Duration::from_secs(10), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// An acquire sent to a stopped server times out, and the server runs it
/// when it resumes: a term its caller never heard of. The caller's next
/// acquire takes that term over at once, with a greater token; it had
/// followed itself until the term ran out, a ttl with nobody leading (a
/// torture campaign's store stops showed it: every gap a ttl longer than
/// the stop). Another store under the same holder id (another process,
/// maybe an older incarnation still leading) does not take it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_won_unanswered_is_taken_over_by_its_own_store_alone() {
    let mut server = kit::own(Redis::builder());
    let url = kit::url(&server);
    let store = RedisStore::builder(redis::Client::open(url.as_str()).unwrap())
        .call_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
    let other = store_on(&url).await;
    let election = unique("unanswered");
    let req = request(&election, "a", Duration::from_secs(60));
    // The server caches the acquire script first: a paused server would
    // answer a first `EVALSHA` with NOSCRIPT, and the `EVAL` would never
    // be sent.
    let warm = unique("warm-up");
    let warm_lease = win(&store, &warm, "a").await;
    store.release(&warm_lease).await.unwrap();

    let _ = server.pause();
    let e = store
        .try_acquire(&req, None)
        .await
        .expect_err("a stopped server");
    assert!(e.is_transient(), "{e}");
    let _ = server.resume();
    // The server runs the acquire it had queued: the term shows.
    let start = Instant::now();
    let orphan = loop {
        if let Ok(Some(l)) = other.current_leader(&election).await {
            break l;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no term showed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(orphan.holder.as_str(), "a");

    match other.try_acquire(&req, None).await.unwrap() {
        Acquire::Held {
            leader: Some(l), ..
        } => assert_eq!(l.token, orphan.token, "{l:?}"),
        got => panic!("another store took a's term over: {got:?}"),
    }

    let lease = loop {
        match store.try_acquire(&req, None).await {
            Ok(Acquire::Won(lease)) => break lease,
            Ok(got) => panic!("a's store did not take its own term over: {got:?}"),
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                assert!(start.elapsed() < Duration::from_secs(10), "{e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert!(lease.token > orphan.token, "{lease:?} after {orphan:?}");
    assert_eq!(store.renew(&lease).await.unwrap(), Renewal::Renewed);
    // A term it handed over is never taken again: a leads with it.
    match store.try_acquire(&req, None).await.unwrap() {
        Acquire::Held {
            leader: Some(l), ..
        } => assert_eq!(l.token, lease.token, "{l:?}"),
        got => panic!("a's store took over the term it handed out: {got:?}"),
    }
    let now = other.current_leader(&election).await.unwrap().unwrap();
    assert_eq!(now.token, lease.token);
    // The term the unanswered acquire made is over: renewing it is lost.
    let stale = Lease {
        token: orphan.token,
        ..lease.clone()
    };
    assert_eq!(store.renew(&stale).await.unwrap(), Renewal::Lost);
}

/// The ACL rule of the crate docs grants everything the store does:
/// acquire, renew, metadata, roster, hand-over, release, watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acl_of_the_docs_is_enough() {
    let server = kit::own(Redis::builder());
    let rule = [
        "ACL",
        "SETUSER",
        "regent-app",
        "on",
        ">acl-pw",
        "~regent:*",
        "&regent:*",
        "+@scripting",
        "+@read",
        "+@write",
        "+@pubsub",
        "+time",
        "+ping",
        "+wait",
    ];
    tokio::task::block_in_place(|| server.cli(&rule)).expect("ACL SETUSER");
    let client =
        redis::Client::open(format!("redis://regent-app:acl-pw@{}/0", server.addr())).unwrap();
    let store = RedisStore::builder(client).build().await.expect("log in");
    let election = unique("acl");
    let mut watch = store.watch(&election).await.expect("watch");
    assert_eq!(watch.next().await.unwrap().unwrap(), None);
    store
        .enroll(&request(&election, "b", Duration::from_secs(5)))
        .await
        .expect("enroll");
    let lease = win(&store, &election, "a").await;
    assert_eq!(store.renew(&lease).await.unwrap(), Renewal::Renewed);
    assert_eq!(
        store
            .update_metadata(&lease, &Metadata::from_pairs([("k", "v")]).unwrap())
            .await
            .unwrap(),
        Renewal::Renewed
    );
    assert_eq!(store.candidates(&election).await.unwrap().unwrap().len(), 1);
    store
        .release_to(&lease, &HolderId::new("b").unwrap(), Duration::from_secs(1))
        .await
        .expect("hand over");
    let b = win(&store, &election, "b").await;
    store.release(&b).await.expect("release");
    store
        .withdraw(&election, &HolderId::new("b").unwrap())
        .await
        .expect("withdraw");
    // And nothing outside the prefix.
    let denied = RedisStore::builder(
        redis::Client::open(format!("redis://regent-app:acl-pw@{}/0", server.addr())).unwrap(),
    )
    .prefix("other:")
    .build()
    .await
    .unwrap();
    let e = denied
        .current_leader(&election)
        .await
        .expect_err("a key outside the ACL's pattern");
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
}
