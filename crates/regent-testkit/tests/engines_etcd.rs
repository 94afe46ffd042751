//! The etcd engines of the test kit, against the real etcd and etcdctl
//! (installed by `scripts/install-engines`; without them these tests fail,
//! naming that script).

mod common;

use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use regent_testkit::engines::{EngineError, Etcd, EtcdBuilder, EtcdCluster, EtcdTls, EtcdTlsFiles};

use common::{assert_success, in_child_with_env, stdout};

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn single_member_serves_etcdctl_and_is_gone_after_drop() {
    let etcd = Etcd::start().unwrap();
    assert!(etcd.is_healthy());
    assert!(etcd.is_leader(), "a single member leads its cluster");
    assert_eq!(etcd.endpoints(), vec![etcd.endpoint()]);
    assert!(etcd.endpoint().starts_with("127.0.0.1:"));
    assert_eq!(etcd.client_url(), format!("http://{}", etcd.endpoint()));
    assert!(
        etcd.data_dir().join("member").is_dir(),
        "etcd wrote its data dir"
    );

    assert_success(&etcd.etcdctl(["put", "regent/greeting", "hello"]));
    let get = etcd.etcdctl(["get", "regent/greeting", "--print-value-only"]);
    assert_success(&get);
    assert_eq!(stdout(&get).trim(), "hello");

    let pid = etcd.pid().expect("running");
    let data_dir = etcd.data_dir();
    let addr = etcd.client_addr();
    assert!(process_exists(pid));
    drop(etcd);
    assert!(
        !process_exists(pid),
        "etcd (pid {pid}) still exists after drop"
    );
    assert!(TcpStream::connect(addr).is_err(), "{addr} still accepts");
    assert!(!data_dir.exists(), "data dir left behind");
}

#[test]
fn stop_and_restart_keep_the_data() {
    let mut etcd = Etcd::start().unwrap();
    assert_success(&etcd.etcdctl(["put", "k", "v"]));
    let pid = etcd.pid().unwrap();
    etcd.stop();
    assert_eq!(etcd.pid(), None);
    assert!(!process_exists(pid));
    assert!(!etcd.is_healthy());

    etcd.restart().unwrap();
    assert!(etcd.is_healthy());
    let get = etcd.etcdctl(["get", "k", "--print-value-only"]);
    assert_success(&get);
    assert_eq!(stdout(&get).trim(), "v");
}

#[test]
fn cluster_of_three_elects_a_new_leader_when_the_leader_is_killed() {
    let mut cluster = EtcdCluster::start(3).unwrap();
    assert_eq!(cluster.len(), 3);
    let endpoints = cluster.endpoints();
    assert_eq!(endpoints.len(), 3);
    for (i, endpoint) in endpoints.iter().enumerate() {
        assert_eq!(&cluster.member(i).endpoint(), endpoint);
        assert!(cluster.member(i).is_healthy(), "member {i} not healthy");
    }
    let list = cluster.etcdctl(["member", "list"]);
    assert_success(&list);
    assert_eq!(stdout(&list).lines().count(), 3, "{}", stdout(&list));

    let old = cluster.wait_for_leader(Duration::from_secs(5)).unwrap();
    assert_success(&cluster.etcdctl(["put", "before", "1"]));
    let old_pid = cluster.member(old).pid().unwrap();

    let killed_at = Instant::now();
    cluster.kill(old);
    assert!(!process_exists(old_pid));
    assert!(!cluster.member(old).is_running());
    assert_eq!(cluster.running_endpoints().len(), 2);

    let new = cluster.wait_for_leader(Duration::from_secs(5)).unwrap();
    let elected_after = killed_at.elapsed();
    assert_ne!(new, old);
    assert!(cluster.member(new).is_leader());

    // The two survivors still have a quorum and keep the data.
    assert_success(&cluster.etcdctl(["put", "after", "2"]));
    let get = cluster.etcdctl(["get", "before", "--print-value-only"]);
    assert_success(&get);
    assert_eq!(stdout(&get).trim(), "1");

    // The killed member rejoins with its data dir.
    cluster.restart(old).unwrap();
    assert!(cluster.member(old).is_healthy());
    assert_eq!(cluster.running_endpoints().len(), 3);
    eprintln!("new leader elected {elected_after:?} after the old one was killed");

    let pids: Vec<u32> = cluster.members().iter().filter_map(|m| m.pid()).collect();
    assert_eq!(pids.len(), 3);
    drop(cluster);
    for pid in pids {
        assert!(
            !process_exists(pid),
            "member (pid {pid}) still exists after drop"
        );
    }
}

/// Fails unless `err` says `program` is not where its override variable
/// points, naming the install script.
#[track_caller]
fn assert_not_installed_at(err: &EngineError, program: &str) {
    assert!(
        matches!(err, EngineError::NotInstalledAt { program: p, .. } if *p == program),
        "{err:?}"
    );
    assert_names_install_script(err);
}

/// Fails unless `err`'s message tells to run the install script.
#[track_caller]
fn assert_names_install_script(err: &EngineError) {
    assert!(
        err.to_string().contains("run scripts/install-engines"),
        "{err}"
    );
}

#[test]
fn missing_etcd_is_an_error_naming_the_install_script() {
    in_child_with_env(
        "missing_etcd_is_an_error_naming_the_install_script",
        "REGENT_ETCD_BIN",
        "/nonexistent/etcd",
        missing_etcd_checks,
    );
}

fn missing_etcd_checks() {
    let err = Etcd::start().unwrap_err();
    assert_not_installed_at(&err, "etcd");
    assert!(err.to_string().contains("etcd not found"), "{err}");

    let err = EtcdCluster::start(3).unwrap_err();
    assert_names_install_script(&err);

    let err = Etcd::builder()
        .tls(EtcdTls::ClientCert)
        .auth("root", "secret")
        .start()
        .unwrap_err();
    assert_names_install_script(&err);
}

/// As [`missing_etcd_is_an_error_naming_the_install_script`], for the
/// etcdctl that enabling authentication runs.
#[test]
fn missing_etcdctl_for_auth_is_an_error_naming_the_install_script() {
    in_child_with_env(
        "missing_etcdctl_for_auth_is_an_error_naming_the_install_script",
        "REGENT_ETCDCTL_BIN",
        "/nonexistent/etcdctl",
        || {
            let err = Etcd::builder().auth("root", "secret").start().unwrap_err();
            assert_not_installed_at(&err, "etcdctl");
        },
    );
}

#[test]
fn not_installed_names_the_install_script() {
    let err = EngineError::NotInstalled { program: "etcd" };
    assert_eq!(
        err.to_string(),
        "etcd not found on PATH; run scripts/install-engines"
    );
}

#[test]
fn engines_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Etcd>();
    assert_send_sync::<EtcdCluster>();
    assert_send_sync::<EtcdBuilder>();
    assert_send_sync::<EtcdTlsFiles>();
    assert_send_sync::<EngineError>();
}
