//! The ZooKeeper engines of the test kit, against the real ZooKeeper 3.8
//! (installed by `scripts/install-engines`; without it these tests fail,
//! naming that script): a standalone server, an ensemble of three, shares
//! of one server, and the Curator classpath.

mod common;

use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;
use regent_testkit::engines::{
    Engine, EngineError, SharedZooKeeper, Signaled, ZooKeeper, ZooKeeperEnsemble, ZooKeeperMode,
    curator_classpath,
};

use common::{in_child_with_env, stderr, stdout};

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

/// The value of `key` in the answer to `mntr`.
fn mntr(zk: &ZooKeeper, key: &str) -> String {
    let answer = zk.four_letter_word("mntr").expect("mntr answers");
    answer
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix('\t'))
        .unwrap_or_else(|| panic!("no {key} in mntr:\n{answer}"))
        .to_owned()
}

#[test]
fn standalone_server_answers_four_letter_words_and_is_gone_after_drop() {
    let launched = Instant::now();
    let zk = ZooKeeper::start().unwrap();
    eprintln!(
        "standalone server ready {:?} after launch",
        launched.elapsed()
    );
    assert!(zk.is_healthy());
    assert_eq!(zk.mode(), Some(ZooKeeperMode::Standalone));
    assert_eq!(zk.server_id(), None);
    assert_eq!(zk.kind(), "zk");
    assert!(zk.address().starts_with("127.0.0.1:"));
    assert_eq!(zk.store_url(), format!("zk://{}", zk.address()));
    assert_ne!(zk.client_addr().port(), 2181, "not ZooKeeper's default");
    assert_eq!(zk.tick_time(), Duration::from_millis(100));
    assert_eq!(zk.min_ttl(), Duration::from_millis(200));
    assert_eq!(
        zk.max_session_timeout(),
        regent_testkit::engines::zookeeper::DEFAULT_MAX_SESSION_TIMEOUT
    );
    assert_eq!(
        zk.expiry_slack(),
        ExpirySlack::fixed(Duration::from_millis(500))
    );
    assert_eq!(zk.watch_delay(), Duration::ZERO);

    let srvr = zk.four_letter_word("srvr").unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
    assert!(srvr.contains("Zookeeper version: 3.8."), "{srvr}");
    assert_eq!(zk.four_letter_word("ruok").unwrap(), "imok");
    assert_eq!(mntr(&zk, "zk_server_state"), "standalone");
    let config = std::fs::read_to_string(zk.config_path()).unwrap();
    assert!(config.contains("admin.enableServer=false"), "{config}");
    let log = zk.log_tail(200);
    assert!(
        log.contains("minSessionTimeout 200 ms maxSessionTimeout 60000 ms"),
        "{log}"
    );

    let nodes: u64 = mntr(&zk, "zk_znode_count").parse().unwrap();
    assert!(zk.create_node("/regent", b"hello").unwrap());
    assert!(!zk.create_node("/regent", b"again").unwrap(), "exists");
    assert!(zk.create_node("/regent/child", b"").unwrap());
    assert!(zk.create_node("/missing/child", b"").is_err(), "no parent");
    assert_eq!(zk.node_data("/regent").unwrap(), Some(b"hello".to_vec()));
    assert_eq!(zk.node_data("/regent/child").unwrap(), Some(Vec::new()));
    assert_eq!(zk.node_data("/nothing").unwrap(), None);
    assert_eq!(mntr(&zk, "zk_znode_count"), (nodes + 2).to_string());
    // The kit closes its sessions: none is left behind.
    eventually("the kit's sessions to close", || {
        mntr(&zk, "zk_global_sessions") == "0"
    });
    let dump = zk.four_letter_word("dump").unwrap();
    assert!(dump.contains("Sessions with Ephemerals (0):"), "{dump}");

    let pid = zk.pid().expect("running");
    let addr = zk.client_addr();
    let dir = zk.log_path().parent().unwrap().to_owned();
    assert!(
        dir.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("regent-zookeeper-"),
        "{}",
        dir.display()
    );
    drop(zk);
    assert_eq!(state(pid), None, "zookeeper (pid {pid}) outlived drop");
    assert!(TcpStream::connect(addr).is_err(), "{addr} still accepts");
    assert!(!dir.exists(), "{} left behind", dir.display());
}

#[test]
fn standalone_server_pauses_and_keeps_its_nodes_across_kill_stop_and_restart() {
    let mut zk = ZooKeeper::start().unwrap();
    let url = zk.store_url();
    assert!(zk.create_node("/kept", b"by the kit").unwrap());
    let created = zk.cli(["create", "/cli", "by the cli"]).unwrap();
    assert!(created.status.success(), "{}", stderr(&created));
    assert!(
        stderr(&created).contains("Created /cli"),
        "{}",
        stderr(&created)
    );
    let again = zk.cli(["create", "/cli", "twice"]).unwrap();
    assert!(!again.status.success(), "created twice");
    let nodes = mntr(&zk, "zk_znode_count");

    let pid = zk.pid().unwrap();
    assert_eq!(zk.pause(), Signaled::Sent);
    eventually("SIGSTOP to take effect", || state(pid) == Some('T'));
    assert!(!zk.is_healthy(), "a paused server answered");
    assert_eq!(zk.resume(), Signaled::Sent);
    eventually("the server to answer again", || zk.is_healthy());

    assert_eq!(zk.kill(), Signaled::Sent);
    assert_eq!(zk.pid(), None);
    assert_eq!(state(pid), None, "pid {pid} outlived kill");
    assert!(!zk.is_healthy());
    assert_eq!(zk.kill(), Signaled::NotRunning);
    let restarting = Instant::now();
    zk.restart().unwrap();
    eprintln!("restarted after a kill in {:?}", restarting.elapsed());
    assert_eq!(zk.store_url(), url);
    assert_ne!(zk.pid(), Some(pid));
    assert_eq!(zk.node_data("/kept").unwrap(), Some(b"by the kit".to_vec()));
    let get = zk.cli(["get", "/cli"]).unwrap();
    assert!(get.status.success(), "{}", stderr(&get));
    assert!(
        stdout(&get).lines().any(|line| line == "by the cli"),
        "{}",
        stdout(&get)
    );
    assert_eq!(mntr(&zk, "zk_znode_count"), nodes);

    let pid = zk.pid().unwrap();
    assert_eq!(zk.stop(), Signaled::Sent);
    assert_eq!(state(pid), None);
    assert_eq!(zk.stop(), Signaled::NotRunning);
    zk.restart().unwrap();
    assert_eq!(zk.node_data("/kept").unwrap(), Some(b"by the kit".to_vec()));
}

#[test]
fn tick_time_and_max_session_timeout_bound_the_sessions() {
    let zk = ZooKeeper::builder()
        .tick_time(Duration::from_millis(50))
        .max_session_timeout(Duration::from_secs(10))
        .start()
        .unwrap();
    assert_eq!(zk.tick_time(), Duration::from_millis(50));
    assert_eq!(zk.min_ttl(), Duration::from_millis(100));
    assert_eq!(zk.max_session_timeout(), Duration::from_secs(10));
    assert_eq!(
        zk.expiry_slack(),
        ExpirySlack::fixed(Duration::from_millis(400))
    );
    let log = zk.log_tail(200);
    assert!(
        log.contains("tickTime 50 ms minSessionTimeout 100 ms maxSessionTimeout 10000 ms"),
        "{log}"
    );
}

#[test]
fn ensemble_elects_a_new_leader_when_the_leader_is_killed_and_the_killed_one_rejoins() {
    let launched = Instant::now();
    let mut ensemble = ZooKeeperEnsemble::start().unwrap();
    eprintln!("ensemble ready {:?} after launch", launched.elapsed());
    assert_eq!(ensemble.len(), ZooKeeperEnsemble::SIZE);
    let addresses: Vec<String> = ensemble.members().iter().map(ZooKeeper::address).collect();
    assert_eq!(ensemble.connect_string(), addresses.join(","));
    assert_eq!(
        ensemble.store_url(),
        format!("zk://{}", ensemble.connect_string())
    );
    for (i, member) in ensemble.members().iter().enumerate() {
        assert_eq!(member.server_id(), Some(i + 1));
        let myid = std::fs::read_to_string(member.data_dir().join("myid")).unwrap();
        assert_eq!(myid.trim(), (i + 1).to_string());
    }

    let old = ensemble.leader_index().expect("a leader once ready");
    for (i, member) in ensemble.members().iter().enumerate() {
        let mode = if i == old {
            ZooKeeperMode::Leader
        } else {
            ZooKeeperMode::Follower
        };
        assert_eq!(member.mode(), Some(mode), "member {i}");
    }
    // A write through a follower is seen through every member.
    let follower = (old + 1) % ZooKeeperEnsemble::SIZE;
    assert!(ensemble.member(follower).create_node("/e", b"1").unwrap());
    for member in ensemble.members() {
        eventually("the write to reach every member", || {
            member.node_data("/e").unwrap() == Some(b"1".to_vec())
        });
    }

    let old_pid = ensemble.member(old).pid().unwrap();
    let killed_at = Instant::now();
    ensemble.kill(old);
    assert_eq!(state(old_pid), None);
    assert_ne!(ensemble.leader_index(), Some(old), "a killed member leads");
    let new = ensemble.wait_for_leader(Duration::from_secs(10)).unwrap();
    eprintln!(
        "new leader server.{} {:?} after the leader server.{} was killed",
        new + 1,
        killed_at.elapsed(),
        old + 1
    );
    assert_ne!(new, old);
    assert_eq!(ensemble.member(new).mode(), Some(ZooKeeperMode::Leader));
    assert!(ensemble.member(new).create_node("/after", b"2").unwrap());

    let restarting = Instant::now();
    ensemble.restart(old).unwrap();
    eprintln!(
        "killed server.{} rejoined {:?} after its restart",
        old + 1,
        restarting.elapsed()
    );
    assert_eq!(
        ensemble.member(old).mode(),
        Some(ZooKeeperMode::Follower),
        "the old leader rejoins as a follower"
    );
    assert_eq!(ensemble.leader_index(), Some(new));
    ensemble.wait_ready(Duration::from_secs(5)).unwrap();
    eventually("the restarted member to catch up", || {
        ensemble.member(old).node_data("/after").unwrap() == Some(b"2".to_vec())
    });

    let pids: Vec<u32> = ensemble
        .members()
        .iter()
        .filter_map(ZooKeeper::pid)
        .collect();
    assert_eq!(pids.len(), 3);
    drop(ensemble);
    for pid in pids {
        assert_eq!(state(pid), None, "member (pid {pid}) outlived drop");
    }
}

#[test]
fn shared_zookeeper_gives_each_share_its_own_chroot_on_one_server() {
    let a = SharedZooKeeper::get().unwrap();
    let mut b = SharedZooKeeper::get().unwrap();
    assert_ne!(a.chroot(), b.chroot());
    assert_eq!(a.store_url(), format!("zk://{}{}", a.address(), a.chroot()));
    for share in [&a, &b] {
        let chroot = share.chroot();
        assert!(
            chroot.starts_with("/t") && chroot.contains("-shared_zookeeper_gives_each_share"),
            "{chroot}"
        );
        // The chroot's node is there, as `/` is on a server of one's own.
        let data = share.with_server(|zk| zk.node_data(chroot).unwrap());
        assert_eq!(data, Some(Vec::new()), "{chroot}");
    }
    assert_eq!(a.pid(), b.pid());
    assert!(a.pid().is_some());
    assert!(a.is_healthy() && b.is_healthy());
    assert_eq!(a.kind(), "zk");
    assert_eq!(a.min_ttl(), Duration::from_millis(200));
    assert_eq!(
        a.expiry_slack(),
        ExpirySlack::fixed(Duration::from_millis(500))
    );

    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.kill()));
    assert!(refused.is_err(), "a share killed the shared server");
    assert!(a.is_healthy());
}

#[test]
fn shared_zookeeper_is_stopped_and_removed_when_the_test_process_exits() {
    const VAR: &str = "REGENT_TESTKIT_SHARED_ZOOKEEPER_CHILD";
    let name = "shared_zookeeper_is_stopped_and_removed_when_the_test_process_exits";
    if std::env::var_os(VAR).is_some() {
        let share = SharedZooKeeper::get().unwrap();
        let (pid, dir) = share.with_server(|zk| {
            (
                zk.pid().unwrap(),
                zk.log_path().parent().unwrap().to_owned(),
            )
        });
        println!("shared zookeeper {pid} {}", dir.display());
        return;
    }
    let child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture"])
        .env(VAR, "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stdout).into_owned();
    assert!(child.status.success(), "child test failed:\n{out}");
    let line = out
        .lines()
        .find_map(|line| line.strip_prefix("shared zookeeper "))
        .unwrap_or_else(|| panic!("the child named no server:\n{out}"));
    let (pid, dir) = line.split_once(' ').unwrap();
    let pid: u32 = pid.parse().unwrap();
    let dir = Path::new(dir);
    eventually("the watchman to stop the shared server", || {
        state(pid).is_none() && !dir.exists()
    });
}

/// A Curator `LeaderLatch` participant: connects to `args[0]`, joins the
/// latch `/latch` as `args[1]`, and prints who leads once it does.
const LATCH_JAVA: &str = r#"
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.retry.RetryOneTime;

public class Latch {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(args[0]).sessionTimeoutMs(1000).connectionTimeoutMs(2000)
            .retryPolicy(new RetryOneTime(100)).build();
        client.start();
        if (!client.blockUntilConnected(5, TimeUnit.SECONDS)) throw new IllegalStateException("not connected");
        LeaderLatch latch = new LeaderLatch(client, "/latch", args[1]);
        latch.start();
        if (!latch.await(5, TimeUnit.SECONDS)) throw new IllegalStateException("not leader");
        System.out.println("leader " + latch.getLeader().getId());
        latch.close();
        client.close();
    }
}
"#;

#[test]
fn curator_classpath_compiles_and_runs_a_leader_latch() {
    let classpath = curator_classpath().unwrap();
    for jar in [
        "curator-recipes.jar",
        "curator-framework.jar",
        "zookeeper.jar",
    ] {
        assert!(classpath.contains(jar), "{classpath}");
    }
    let zk = ZooKeeper::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Latch.java"), LATCH_JAVA).unwrap();
    let javac = Command::new("javac")
        .arg("-cp")
        .arg(&classpath)
        .arg("-d")
        .arg(dir.path())
        .arg(dir.path().join("Latch.java"))
        .output()
        .expect("javac runs (scripts/install-engines installs it)");
    assert!(javac.status.success(), "{}", stderr(&javac));
    let run = Command::new("java")
        .arg("-cp")
        .arg(format!("{}:{classpath}", dir.path().display()))
        .arg("Latch")
        .arg(zk.address())
        .arg("curator-1")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}{}", stdout(&run), stderr(&run));
    assert_eq!(stdout(&run).trim(), "leader curator-1");
    // The latch stays; the participant's node went with its session.
    assert!(zk.node_data("/latch").unwrap().is_some());
    eventually("the participant's session to close", || {
        mntr(&zk, "zk_ephemerals_count") == "0"
    });
}

#[test]
fn missing_java_is_an_error_naming_the_install_script() {
    in_child_with_env(
        "missing_java_is_an_error_naming_the_install_script",
        "REGENT_JAVA_BIN",
        "/nonexistent/java",
        || {
            for err in [
                ZooKeeper::start().unwrap_err(),
                ZooKeeperEnsemble::start().unwrap_err(),
                SharedZooKeeper::get().unwrap_err(),
            ] {
                assert!(
                    matches!(
                        err,
                        EngineError::NotInstalledAt {
                            program: "java",
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
fn missing_zookeeper_jar_is_an_error_naming_the_install_script() {
    in_child_with_env(
        "missing_zookeeper_jar_is_an_error_naming_the_install_script",
        "REGENT_ZOOKEEPER_CLASSPATH",
        "/nonexistent/zookeeper.jar",
        || {
            for err in [
                ZooKeeper::start().unwrap_err(),
                ZooKeeperEnsemble::start().unwrap_err(),
            ] {
                assert!(
                    matches!(
                        &err,
                        EngineError::JarNotFound {
                            classpath: "zookeeper",
                            var: "REGENT_ZOOKEEPER_CLASSPATH",
                            jar,
                        } if jar == Path::new("/nonexistent/zookeeper.jar")
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
fn zookeeper_engines_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ZooKeeper>();
    assert_send_sync::<ZooKeeperEnsemble>();
    assert_send_sync::<SharedZooKeeper>();
}
