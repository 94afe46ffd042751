//! The Redis engines of the test kit, against Debian's Redis 7.0 and Redis
//! Sentinel (installed by `scripts/install-engines`; without them these
//! tests fail, naming that script): a server and its faults, persistence
//! across restarts, an ACL user, and a primary with a replica and three
//! Sentinels that fail over.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use regent_testkit::engines::redis::{CLI_VAR, MASTER_NAME, SERVER_VAR};
use regent_testkit::engines::{
    Engine, EngineError, Redis, RedisBuilder, RedisPersistence, RedisSentinels, Signaled,
};

use common::in_child_with_env;

/// The state letter of `/proc/PID/stat` (`T` when stopped), `None` once
/// the process is gone.
fn state(pid: u32) -> Option<char> {
    regent_proc::stat(i32::try_from(pid).ok()?)
        .map(|s| s.state)
        .filter(|&s| s != 'Z')
}

/// Waits with a bound until `check` holds, failing with `what`.
#[track_caller]
fn eventually(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let until = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn accepts_tcp(addr: SocketAddr) -> bool {
    TcpStream::connect(addr).is_ok()
}

/// `redis-cli -h 127.0.0.1 -p PORT ARGS…` without logging in, as a
/// stranger would: what it printed to standard output and error.
fn anonymous_cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The server's temporary directory: the parent of its data directory.
fn server_dir(redis: &Redis) -> PathBuf {
    let dir = redis.cli(&["CONFIG", "GET", "dir"]).unwrap();
    let data = dir.lines().nth(1).expect("CONFIG GET dir: name and value");
    PathBuf::from(data).parent().unwrap().to_owned()
}

#[test]
fn a_server_answers_ping_and_leaves_nothing_after_drop() {
    let launched = Instant::now();
    let redis = Redis::start().unwrap();
    eprintln!("redis ready {:?} after the call", launched.elapsed());

    assert!(redis.is_healthy());
    assert_ne!(redis.port(), 6379, "not Redis's default port");
    assert_eq!(
        redis.addr(),
        SocketAddr::from(([127, 0, 0, 1], redis.port()))
    );
    assert_eq!(redis.kind(), "redis");
    assert_eq!(
        Engine::store_url(&redis),
        format!("redis://127.0.0.1:{}", redis.port())
    );
    assert_eq!(redis.credentials(), None);
    assert_eq!(redis.cli(&["PING"]).unwrap(), "PONG");
    assert_eq!(redis.cli(&["SET", "k", "v"]).unwrap(), "OK");
    assert_eq!(redis.cli(&["GET", "k"]).unwrap(), "v");
    assert_eq!(
        redis.cli(&["CONFIG", "GET", "bind"]).unwrap(),
        "bind\n127.0.0.1"
    );
    assert_eq!(
        redis
            .cli(&["CONFIG", "GET", "notify-keyspace-events"])
            .unwrap(),
        "notify-keyspace-events\nAKE"
    );

    let err = redis.cli(&["NO-SUCH-COMMAND", "x"]).unwrap_err();
    assert!(
        matches!(err, EngineError::Setup { .. })
            && err.to_string().contains("redis-cli NO-SUCH-COMMAND x")
            && err.to_string().contains("unknown command"),
        "{err}"
    );

    let pid = redis.pid().unwrap();
    let (addr, dir) = (redis.addr(), server_dir(&redis));
    assert!(dir.join("redis.conf").is_file() && dir.join("redis.log").is_file());
    drop(redis);
    assert_eq!(state(pid), None, "redis-server {pid} outlived drop");
    assert!(!accepts_tcp(addr), "{addr} still accepts");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn faults_and_without_persistence_a_restart_starts_empty() {
    let mut redis = Redis::start().unwrap();
    assert_eq!(redis.persistence(), RedisPersistence::None);
    let port = redis.port();
    redis.cli(&["SET", "k", "v"]).unwrap();

    let pid = redis.pid().unwrap();
    assert_eq!(redis.pause(), Signaled::Sent);
    eventually("SIGSTOP", Duration::from_secs(5), || {
        state(pid) == Some('T')
    });
    assert!(!redis.is_healthy(), "a paused server answers nothing");
    assert!(accepts_tcp(redis.addr()), "a paused server keeps its port");
    assert_eq!(redis.resume(), Signaled::Sent);
    assert!(redis.is_healthy());
    assert_eq!(redis.cli(&["GET", "k"]).unwrap(), "v", "kept while paused");

    assert_eq!(redis.kill(), Signaled::Sent);
    assert_eq!(redis.pid(), None);
    assert_eq!(state(pid), None, "killed and reaped");
    assert!(!redis.is_healthy());
    assert_eq!(redis.kill(), Signaled::NotRunning);
    assert_eq!(redis.pause(), Signaled::NotRunning);

    redis.restart().unwrap();
    assert!(redis.is_healthy());
    assert_eq!(redis.port(), port, "same port");
    assert_eq!(redis.cli(&["GET", "k"]).unwrap(), "", "gone after a kill");

    redis.cli(&["SET", "k", "again"]).unwrap();
    assert_eq!(redis.stop(), Signaled::Sent);
    assert_eq!(redis.pid(), None);
    redis.restart().unwrap();
    assert_eq!(
        redis.cli(&["GET", "k"]).unwrap(),
        "",
        "gone after a graceful stop too: no save points"
    );
    assert!(redis.log_tail(50).contains("Ready to accept connections"));
}

#[test]
fn a_paused_server_still_stops_and_drops() {
    let mut redis = Redis::start().unwrap();
    let pid = redis.pid().unwrap();
    redis.pause();
    eventually("SIGSTOP", Duration::from_secs(5), || {
        state(pid) == Some('T')
    });
    assert_eq!(redis.stop(), Signaled::Sent);
    assert_eq!(state(pid), None, "stopped and reaped");
    assert_eq!(redis.stop(), Signaled::NotRunning);

    redis.restart().unwrap();
    let pid = redis.pid().unwrap();
    redis.pause();
    eventually("SIGSTOP", Duration::from_secs(5), || {
        state(pid) == Some('T')
    });
    drop(redis);
    assert_eq!(state(pid), None, "a paused server outlived drop");
}

#[test]
fn append_always_keeps_every_write_across_a_kill_and_a_stop() {
    let mut redis = Redis::builder()
        .persistence(RedisPersistence::AppendAlways)
        .start()
        .unwrap();
    assert_eq!(
        redis.cli(&["CONFIG", "GET", "appendfsync"]).unwrap(),
        "appendfsync\nalways"
    );
    redis.cli(&["SET", "k", "v"]).unwrap();
    redis.cli(&["INCR", "n"]).unwrap();
    redis.kill();
    redis.restart().unwrap();
    assert_eq!(redis.cli(&["GET", "k"]).unwrap(), "v");
    assert_eq!(redis.cli(&["INCR", "n"]).unwrap(), "2");

    redis.stop();
    redis.restart().unwrap();
    assert_eq!(redis.cli(&["GET", "n"]).unwrap(), "2");
}

#[test]
fn an_acl_user_is_the_only_way_in() {
    let mut redis = Redis::builder()
        .user("app", "right horse \"battery\"")
        .start()
        .unwrap();
    assert!(redis.is_healthy(), "the health check logs in");
    assert_eq!(
        redis.credentials(),
        Some(("app", "right horse \"battery\""))
    );
    assert_eq!(
        Engine::store_url(&redis),
        format!("redis://127.0.0.1:{}", redis.port()),
        "no credentials in the URL"
    );
    assert_eq!(redis.cli(&["ACL", "WHOAMI"]).unwrap(), "app");
    assert_eq!(redis.cli(&["SET", "k", "v"]).unwrap(), "OK");

    let stranger = anonymous_cli(redis.port(), &["GET", "k"]);
    assert!(stranger.contains("NOAUTH"), "{stranger}");
    let wrong = anonymous_cli(
        redis.port(),
        &[
            "--user",
            "app",
            "--pass",
            "wrong",
            "--no-auth-warning",
            "GET",
            "k",
        ],
    );
    assert!(wrong.contains("WRONGPASS"), "{wrong}");

    // The user survives a restart: it is in redis.conf.
    redis.restart().unwrap();
    assert_eq!(redis.cli(&["ACL", "WHOAMI"]).unwrap(), "app");
}

#[test]
fn a_missing_program_names_the_install_script() {
    in_child_with_env(
        "a_missing_program_names_the_install_script",
        SERVER_VAR,
        "/nonexistent/redis-server",
        || {
            let err = Redis::start().unwrap_err();
            assert!(
                matches!(
                    err,
                    EngineError::NotInstalledAt {
                        program: "redis-server",
                        ..
                    }
                ),
                "{err:?}"
            );
            assert!(
                err.to_string().contains("run scripts/install-engines"),
                "{err}"
            );
        },
    );
}

#[test]
fn a_missing_cli_names_the_install_script() {
    in_child_with_env(
        "a_missing_cli_names_the_install_script",
        CLI_VAR,
        "/nonexistent/redis-cli",
        || {
            let redis = Redis::start().unwrap();
            let err = redis.cli(&["PING"]).unwrap_err();
            assert!(
                matches!(
                    err,
                    EngineError::NotInstalledAt {
                        program: "redis-cli",
                        ..
                    }
                ),
                "{err:?}"
            );
            assert!(
                err.to_string().contains("run scripts/install-engines"),
                "{err}"
            );
        },
    );
}

#[test]
fn the_sentinels_promote_the_replica_when_the_primary_dies() {
    let launched = Instant::now();
    let mut group = RedisSentinels::start().unwrap();
    eprintln!("sentinels ready {:?} after the call", launched.elapsed());

    assert_eq!(group.kind(), "redis-sentinel");
    assert_eq!(group.master_name(), MASTER_NAME);
    let sentinels = group.sentinel_addrs();
    assert_eq!(sentinels.len(), 3);
    assert_eq!(
        Engine::store_url(&group),
        format!(
            "redis+sentinel://{},{},{}/mymaster",
            sentinels[0], sentinels[1], sentinels[2]
        )
    );
    let (primary, replica) = (group.primary().addr(), group.replica().addr());
    assert_ne!(primary, replica);
    assert_eq!(group.master_addr().unwrap(), primary);
    assert_eq!(group.pid(), group.primary().pid());
    assert!(group.is_healthy());
    assert!(group.replica().cli(&["ROLE"]).unwrap().starts_with("slave"));

    group.primary().cli(&["SET", "k", "v"]).unwrap();
    let old_pid = group.primary().pid().unwrap();
    let promoted = group.fail_over(Duration::from_secs(30)).unwrap();
    eprintln!("failover took {:?}", launched.elapsed());
    assert_eq!(promoted, replica);
    assert_eq!(group.master_addr().unwrap(), replica);
    assert_eq!(group.primary().addr(), replica);
    assert_eq!(group.replica().addr(), primary, "the old primary");
    assert_eq!(group.replica().pid(), None, "the old primary stays down");
    assert_eq!(state(old_pid), None);
    assert!(
        group
            .primary()
            .cli(&["ROLE"])
            .unwrap()
            .starts_with("master")
    );
    assert_eq!(group.primary().cli(&["GET", "k"]).unwrap(), "v");
    assert_eq!(group.primary().cli(&["SET", "k", "w"]).unwrap(), "OK");
    assert!(group.is_healthy());
    assert_eq!(group.pid(), group.primary().pid());

    let pid = group.primary().pid().unwrap();
    drop(group);
    assert_eq!(state(pid), None, "the primary {pid} outlived drop");
    for sentinel in sentinels {
        assert!(!accepts_tcp(sentinel), "Sentinel {sentinel} outlived drop");
    }
}

#[test]
fn a_replica_paused_during_writes_misses_them_after_its_promotion() {
    let mut group = RedisSentinels::start().unwrap();
    group.primary().cli(&["SET", "before", "1"]).unwrap();
    // The replica has it before it is paused.
    let replica = group.replica();
    eventually("the replica's copy", Duration::from_secs(5), || {
        replica.cli(&["GET", "before"]).is_ok_and(|v| v == "1")
    });

    let replica_pid = group.replica().pid().unwrap();
    assert_eq!(group.pause_replica(), Signaled::Sent);
    eventually("SIGSTOP", Duration::from_secs(5), || {
        state(replica_pid) == Some('T')
    });
    for i in 0..20 {
        group
            .primary()
            .cli(&["SET", &format!("during-{i}"), "x"])
            .unwrap();
    }
    group.primary().cli(&["INCR", "counter"]).unwrap();

    let promoted = group.fail_over(Duration::from_secs(30)).unwrap();
    assert_eq!(promoted, group.primary().addr());
    assert_eq!(group.primary().pid(), Some(replica_pid));
    assert_ne!(state(replica_pid), Some('T'), "resumed by fail_over");
    let new = group.primary();
    assert_eq!(new.cli(&["GET", "before"]).unwrap(), "1");
    assert_eq!(new.cli(&["GET", "during-0"]).unwrap(), "", "missed");
    assert_eq!(new.cli(&["GET", "during-19"]).unwrap(), "", "missed");
    assert_eq!(new.cli(&["GET", "counter"]).unwrap(), "", "missed");
    assert_eq!(new.cli(&["DBSIZE"]).unwrap(), "1");
}

#[test]
fn a_replica_resumed_while_the_primary_lives_catches_up() {
    let mut group = RedisSentinels::start().unwrap();
    assert_eq!(group.pause_replica(), Signaled::Sent);
    group.primary().cli(&["SET", "during", "x"]).unwrap();
    assert_eq!(group.resume_replica(), Signaled::Sent);
    let replica = group.replica();
    eventually("the replica catching up", Duration::from_secs(10), || {
        replica.cli(&["GET", "during"]).is_ok_and(|v| v == "x")
    });
}

#[test]
fn the_group_as_an_engine_faults_its_primary_and_the_sentinels_fail_over() {
    let mut group: Box<dyn Engine> = Box::new(RedisSentinels::start().unwrap());
    let sentinels = group.downcast_ref::<RedisSentinels>().unwrap();
    let (primary, replica) = (sentinels.primary().addr(), sentinels.replica().addr());
    let pid = group.pid().unwrap();

    assert_eq!(group.kill(), Signaled::Sent);
    assert_eq!(state(pid), None);
    assert_eq!(
        group.pid(),
        None,
        "the killed primary, as the kit saw it last"
    );
    eventually(
        "the Sentinels' own failover",
        Duration::from_secs(30),
        || {
            let group = group.downcast_ref::<RedisSentinels>().unwrap();
            group.master_addr().is_ok_and(|m| m == replica) && group.is_healthy()
        },
    );

    // Back on its port and configuration file (Sentinel makes it a replica
    // of the new primary on its own schedule, about 8 s later).
    group.restart().unwrap();
    let group = group.downcast_mut::<RedisSentinels>().unwrap();
    assert_eq!(group.primary().addr(), primary);
    assert!(group.primary().is_healthy());
    assert_ne!(group.primary().pid(), Some(pid));
    // A fault now hits the primary the Sentinels name.
    let new_pid = Engine::pid(group);
    assert_eq!(Engine::pause(group), Signaled::Sent);
    assert_eq!(group.primary().addr(), replica);
    assert_ne!(Engine::pid(group), new_pid);
    let paused = Engine::pid(group).unwrap();
    eventually("SIGSTOP", Duration::from_secs(5), || {
        state(paused) == Some('T')
    });
    assert_eq!(Engine::resume(group), Signaled::Sent);
}

#[test]
fn engines_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Redis>();
    assert_send_sync::<RedisBuilder>();
    assert_send_sync::<RedisSentinels>();
}
