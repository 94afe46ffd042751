//! The PostgreSQL engines of the test kit, against Debian's PostgreSQL 15
//! and PgBouncer 1.18 (installed by `scripts/install-engines`; without
//! them these tests fail, naming that script): a server and its faults,
//! PgBouncer in front of it, and a primary with a streaming standby.

mod common;

use std::io;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;
use regent_testkit::engines::postgres::{DATABASE, DEFAULT_BINDIR};
use regent_testkit::engines::{
    Engine, EngineError, PgBouncer, Postgres, PostgresBehindPgBouncer, PostgresPair, Signaled,
};

use common::in_child_with_env;

/// The state letter of `/proc/PID/stat` (`T` when stopped), `None` once
/// the process is gone; a zombie (`Z`) has exited.
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat[stat.rfind(')')? + 2..].chars().next()?;
    (state != 'Z').then_some(state)
}

/// The postmaster and every process under it.
fn server_processes(postmaster: u32) -> Vec<i32> {
    let pid = i32::try_from(postmaster).unwrap();
    let mut all = vec![pid];
    all.extend(regent_proc::descendants(pid));
    all
}

/// The real user id of `pid`.
fn uid(pid: i32) -> u32 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits with a bound until `check` holds, failing with `what`.
#[track_caller]
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn accepts_tcp(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

fn is_timeout(err: &EngineError) -> bool {
    matches!(err, EngineError::Io { source, .. } if source.kind() == io::ErrorKind::TimedOut)
}

#[test]
fn a_server_answers_sql_as_an_unprivileged_user_and_leaves_no_process_after_drop() {
    let launched = Instant::now();
    let pg = Postgres::start().unwrap();
    eprintln!("postgres ready {:?} after the call", launched.elapsed());

    assert!(pg.is_healthy());
    assert_ne!(pg.port(), 5432, "not PostgreSQL's default port");
    assert_eq!(
        pg.store_url(),
        format!("postgres://postgres@127.0.0.1:{}/{DATABASE}", pg.port())
    );
    assert!(
        pg.socket_dir()
            .join(format!(".s.PGSQL.{}", pg.port()))
            .exists()
    );
    let postmaster = pg.pid().unwrap();
    if rustix::process::geteuid().is_root() {
        assert_ne!(uid(postmaster as i32), 0, "the server does not run as root");
    }
    assert_eq!(
        pg.psql("select current_user, current_database(), current_setting('fsync')")
            .unwrap(),
        format!("postgres|{DATABASE}|off")
    );
    assert_eq!(
        pg.psql("select setting from pg_settings where name = 'listen_addresses'")
            .unwrap(),
        "127.0.0.1"
    );
    pg.psql("create table t (id int primary key, note text)")
        .unwrap();
    pg.psql("insert into t values (1, 'one'), (2, 'two')")
        .unwrap();
    assert_eq!(
        pg.psql("select id, note from t order by id").unwrap(),
        "1|one\n2|two"
    );
    let err = pg.psql("select * from no_such_table").unwrap_err();
    assert!(
        matches!(err, EngineError::Setup { .. }) && err.to_string().contains("no_such_table"),
        "{err}"
    );

    let processes = server_processes(postmaster);
    assert!(
        processes.len() > 3,
        "a postmaster and its children: {processes:?}"
    );
    let (dir, port) = (pg.socket_dir().to_owned(), pg.port());
    drop(pg);
    for pid in processes {
        assert_eq!(
            state(pid),
            None,
            "process {pid} of the server outlived drop"
        );
    }
    assert!(!dir.exists(), "{} outlived drop", dir.display());
    assert!(!accepts_tcp(port));
}

#[test]
fn pause_makes_a_query_time_out_and_resume_answers_again() {
    let mut pg = Postgres::start().unwrap();
    pg.psql("create table t (id int)").unwrap();
    let processes = server_processes(pg.pid().unwrap());

    assert_eq!(pg.pause(), Signaled::Sent);
    for &pid in &processes {
        // The kit's own psql's backend may have exited meanwhile.
        assert!(
            matches!(state(pid), Some('T') | None),
            "process {pid} of the server not stopped: {:?}",
            state(pid)
        );
    }
    assert!(!pg.is_healthy());
    let asked = Instant::now();
    let err = pg
        .psql_within("insert into t values (1)", Duration::from_secs(1))
        .unwrap_err();
    assert!(is_timeout(&err), "{err}");
    assert!(asked.elapsed() < Duration::from_secs(3));

    assert_eq!(pg.resume(), Signaled::Sent);
    for &pid in &processes {
        assert_ne!(state(pid), Some('T'), "process {pid} still stopped");
    }
    assert!(pg.is_healthy());
    pg.psql("insert into t values (2)").unwrap();
    assert_eq!(
        pg.psql("select id from t").unwrap(),
        "2",
        "the timed-out insert never ran"
    );

    // A paused server still stops, quickly, and leaves nothing.
    pg.pause();
    let stopping = Instant::now();
    drop(pg);
    assert!(
        stopping.elapsed() < Duration::from_secs(4),
        "{:?}",
        stopping.elapsed()
    );
    for pid in processes {
        assert_eq!(
            state(pid),
            None,
            "process {pid} outlived drop of a paused server"
        );
    }
}

#[test]
fn kill_is_a_crash_of_every_process_and_restart_recovers_on_the_same_url() {
    let mut pg = Postgres::start().unwrap();
    let url = pg.store_url();
    pg.psql("create table t (id int)").unwrap();
    pg.psql("insert into t values (1)").unwrap();
    let processes = server_processes(pg.pid().unwrap());

    assert_eq!(pg.kill(), Signaled::Sent);
    for &pid in &processes {
        assert_eq!(state(pid), None, "process {pid} outlived kill");
    }
    assert_eq!(pg.pid(), None);
    assert!(!pg.is_healthy());
    assert!(!accepts_tcp(pg.port()));
    assert_eq!(pg.kill(), Signaled::NotRunning);
    assert_eq!(pg.pause(), Signaled::NotRunning);

    let restarted = Instant::now();
    pg.restart().unwrap();
    eprintln!("postgres recovered {:?} after a kill", restarted.elapsed());
    assert_eq!(pg.store_url(), url);
    assert_eq!(
        pg.psql("select id from t").unwrap(),
        "1",
        "a committed row survives a kill"
    );
    assert!(
        pg.log_tail(50).contains("database system was interrupted"),
        "{}",
        pg.log_tail(50)
    );

    // A graceful restart keeps the data too.
    pg.psql("insert into t values (2)").unwrap();
    let pid = pg.pid();
    pg.restart().unwrap();
    assert_ne!(pg.pid(), pid);
    assert_eq!(pg.psql("select count(*) from t").unwrap(), "2");

    assert_eq!(pg.stop(), Signaled::Sent);
    assert_eq!(pg.stop(), Signaled::NotRunning);
    assert!(
        pg.data_dir().join("PG_VERSION").exists(),
        "the data stays after stop"
    );
}

#[test]
fn terminate_backends_ends_every_client_connection_but_the_kits() {
    let pg = Postgres::start().unwrap();
    let psql = Path::new(DEFAULT_BINDIR).join("psql");
    let mut client = Command::new(&psql)
        .args(["-X", "-d", &pg.store_url(), "-c", "select pg_sleep(60)"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the client's session", || {
        pg.psql("select count(*) from pg_stat_activity where query like '%pg_sleep(60)%' and pid <> pg_backend_pid()")
            .unwrap()
            == "1"
    });
    assert_eq!(pg.terminate_backends().unwrap(), 1);
    let status = client.wait().unwrap();
    assert!(!status.success(), "the client's query was cut off");
    assert_eq!(pg.terminate_backends().unwrap(), 0);
}

#[test]
fn sql_goes_through_pgbouncer_in_transaction_mode_and_across_its_restart() {
    let mut pg = Postgres::start().unwrap();
    let launched = Instant::now();
    let mut pgbouncer = PgBouncer::start(&pg).unwrap();
    eprintln!("pgbouncer ready {:?} after the call", launched.elapsed());

    assert!(pgbouncer.is_healthy());
    assert_ne!(pgbouncer.port(), pg.port());
    assert_ne!(pgbouncer.port(), 6432, "not PgBouncer's default port");
    assert_eq!(pgbouncer.server_port(), pg.port());
    assert_eq!(
        pgbouncer.store_url(),
        format!(
            "postgres://postgres@127.0.0.1:{}/{DATABASE}",
            pgbouncer.port()
        )
    );
    let pid = pgbouncer.pid().unwrap() as i32;
    if rustix::process::geteuid().is_root() {
        assert_ne!(uid(pid), 0, "pgbouncer does not run as root");
    }

    pgbouncer.psql("create table t (id int)").unwrap();
    pgbouncer.psql("insert into t values (1)").unwrap();
    assert_eq!(pg.psql("select id from t").unwrap(), "1");
    assert_eq!(pgbouncer.psql("select count(*) from t").unwrap(), "1");
    let config = pgbouncer.console("show config").unwrap();
    assert!(
        config
            .lines()
            .any(|l| l.starts_with("pool_mode|transaction|")),
        "{config}"
    );
    let pools = pgbouncer.console("show pools").unwrap();
    assert!(
        pools.lines().any(|l| l.starts_with("regent|postgres|")),
        "{pools}"
    );

    // The server restarts under the pooler; the pooler's URL works again.
    pg.restart().unwrap();
    eventually(
        "a query through pgbouncer after the server's restart",
        || {
            pgbouncer
                .psql("select count(*) from t")
                .is_ok_and(|n| n == "1")
        },
    );

    let restarted = Instant::now();
    pgbouncer.restart().unwrap();
    eprintln!("pgbouncer restarted in {:?}", restarted.elapsed());
    assert_ne!(pgbouncer.pid(), Some(pid as u32));
    assert_eq!(state(pid), None);
    assert_eq!(pgbouncer.psql("select count(*) from t").unwrap(), "1");

    let pid = pgbouncer.pid().unwrap() as i32;
    let port = pgbouncer.port();
    drop(pgbouncer);
    assert_eq!(state(pid), None, "pgbouncer outlived drop");
    assert!(!accepts_tcp(port));
    assert!(pg.is_healthy(), "the server is not the pooler's to stop");
}

#[test]
fn a_server_behind_pgbouncer_is_one_engine_whose_faults_hit_the_server() {
    let engine = PostgresBehindPgBouncer::start().unwrap();
    let mut engine: Box<dyn Engine> = Box::new(engine);
    assert_eq!(engine.kind(), "postgres");
    assert!(engine.is_healthy());
    assert_eq!(engine.min_ttl(), Duration::from_millis(100));
    assert_eq!(engine.expiry_slack(), ExpirySlack::NONE);
    assert_eq!(engine.watch_delay(), Duration::from_millis(500));
    let both = engine.downcast_ref::<PostgresBehindPgBouncer>().unwrap();
    assert_eq!(engine.store_url(), both.pgbouncer().store_url());
    assert_eq!(engine.pid(), both.postgres().pid());
    let pooler = both.pgbouncer().pid().unwrap() as i32;

    assert_eq!(engine.kill(), Signaled::Sent);
    assert!(!engine.is_healthy());
    assert_ne!(state(pooler), None, "the pooler stays up");
    engine.restart().unwrap();
    assert!(engine.is_healthy());
    let both = engine.downcast_ref::<PostgresBehindPgBouncer>().unwrap();
    eventually("a query through pgbouncer after the server's crash", || {
        both.pgbouncer()
            .psql("select 1")
            .is_ok_and(|one| one == "1")
    });
    let server = server_processes(engine.pid().unwrap());
    drop(engine);
    assert_eq!(state(pooler), None);
    for pid in server {
        assert_eq!(state(pid), None);
    }
}

#[test]
fn the_standby_follows_the_primary_and_takes_writes_once_promoted() {
    let launched = Instant::now();
    let mut pair = PostgresPair::start().unwrap();
    eprintln!(
        "primary and standby ready {:?} after the call",
        launched.elapsed()
    );

    let (primary, standby) = (pair.primary(), pair.standby());
    assert_ne!(primary.port(), standby.port());
    assert_eq!(pair.standby_url(), standby.store_url());
    assert!(!primary.is_in_recovery().unwrap());
    assert!(standby.is_in_recovery().unwrap());
    assert!(pair.is_streaming().unwrap());

    primary.psql("create table t (id int)").unwrap();
    primary.psql("insert into t values (1)").unwrap();
    eventually("the standby to see the committed row", || {
        standby.psql("select id from t").is_ok_and(|id| id == "1")
    });
    let err = standby.psql("insert into t values (2)").unwrap_err();
    assert!(err.to_string().contains("read-only transaction"), "{err}");

    let primary_processes = server_processes(primary.pid().unwrap());
    let promoting = Instant::now();
    pair.promote_after_killing_primary().unwrap();
    eprintln!(
        "standby promoted {:?} after the primary's kill",
        promoting.elapsed()
    );
    for pid in primary_processes {
        assert_eq!(
            state(pid),
            None,
            "process {pid} of the primary outlived the kill"
        );
    }
    let standby = pair.standby();
    assert!(!standby.is_in_recovery().unwrap());
    standby.psql("insert into t values (2)").unwrap();
    assert_eq!(
        standby.psql("select id from t order by id").unwrap(),
        "1\n2"
    );
}

#[test]
fn a_disconnected_standby_misses_the_primarys_last_commits() {
    let mut pair = PostgresPair::start().unwrap();
    pair.primary().psql("create table t (id int)").unwrap();
    pair.primary().psql("insert into t values (1)").unwrap();
    pair.wait_standby_caught_up().unwrap();

    pair.disconnect_standby().unwrap();
    assert!(!pair.is_streaming().unwrap());
    pair.primary().psql("insert into t values (2)").unwrap();
    thread::sleep(Duration::from_millis(200));
    assert_eq!(pair.standby().psql("select count(*) from t").unwrap(), "1");

    pair.reconnect_standby().unwrap();
    pair.wait_standby_caught_up().unwrap();
    assert_eq!(pair.standby().psql("select count(*) from t").unwrap(), "2");

    pair.disconnect_standby().unwrap();
    pair.primary().psql("insert into t values (3)").unwrap();
    pair.promote_after_killing_primary().unwrap();
    assert_eq!(
        pair.standby().psql("select id from t order by id").unwrap(),
        "1\n2",
        "the commit after the disconnection is lost"
    );
}

#[test]
fn a_missing_postgres_is_an_error_naming_install_engines() {
    in_child_with_env(
        "a_missing_postgres_is_an_error_naming_install_engines",
        "REGENT_POSTGRES_BINDIR",
        "/nonexistent/regent-postgres-bin",
        || {
            let err = Postgres::start().unwrap_err();
            assert!(matches!(err, EngineError::NotInstalledAt { .. }), "{err:?}");
            assert!(err.to_string().contains("scripts/install-engines"), "{err}");
            let err = PostgresPair::start().unwrap_err();
            assert!(err.to_string().contains("scripts/install-engines"), "{err}");
            let err = PostgresBehindPgBouncer::start().unwrap_err();
            assert!(err.to_string().contains("scripts/install-engines"), "{err}");
        },
    );
}

#[test]
fn a_missing_pgbouncer_is_an_error_naming_install_engines() {
    in_child_with_env(
        "a_missing_pgbouncer_is_an_error_naming_install_engines",
        "REGENT_PGBOUNCER_BIN",
        "/nonexistent/pgbouncer",
        || {
            let pg = Postgres::start().unwrap();
            let err = PgBouncer::start(&pg).unwrap_err();
            assert!(matches!(err, EngineError::NotInstalledAt { .. }), "{err:?}");
            assert!(err.to_string().contains("scripts/install-engines"), "{err}");
        },
    );
}
