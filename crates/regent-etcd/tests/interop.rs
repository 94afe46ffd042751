//! Interoperability with etcd's own election (`etcdctl elect`, Go's
//! `concurrency.Election`): one key layout, one line, one leader.

mod common;

use std::process::Stdio;
use std::time::Duration;

use regent_core::{Acquire, Candidate, ElectionName, LeaseStore};
use regent_testkit::engines::Etcd;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use common::{holder, req};

/// The Candidate's ttl: it renews on its own schedule.
const TTL: Duration = Duration::from_secs(2);
/// The ttl of leases this file renews by hand between steps that spawn
/// `etcdctl`: long enough that a loaded host (CI runs the torture campaigns
/// beside this) cannot let one lapse between two renewals. At 2 s the
/// observer test once saw regent's key expire before its first renewal and
/// `etcdctl elect` win, as it should have.
const HAND_TTL: Duration = Duration::from_secs(30);

/// `etcdctl elect ARGS…`, with its stdout to read line by line.
struct Elect {
    child: Child,
    out: Lines<BufReader<ChildStdout>>,
}

impl Elect {
    fn spawn(etcd: &Etcd, args: &[&str]) -> Self {
        let mut cmd = tokio::process::Command::from(etcd.etcdctl_command());
        cmd.arg("elect")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("run etcdctl (see scripts/install-engines): {e}"));
        let out = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        Self { child, out }
    }

    /// The next line etcdctl prints, waiting at most `within`.
    async fn line(&mut self, within: Duration) -> Option<String> {
        match tokio::time::timeout(within, self.out.next_line()).await {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => panic!("read etcdctl's output: {e}"),
            Err(_) => None,
        }
    }

    /// SIGINT: `etcdctl elect` resigns (deletes its key) and exits.
    async fn interrupt(mut self) {
        let pid = self.child.id().expect("etcdctl still runs");
        let status = std::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -INT {pid}");
        let exit = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("etcdctl exits after SIGINT")
            .expect("wait for etcdctl");
        assert!(exit.success(), "etcdctl elect after SIGINT: {exit}");
    }
}

/// The keys under `election/`, oldest first: (key, value, create revision).
async fn keys(etcd: &Etcd, election: &ElectionName) -> Vec<(String, String, i64)> {
    let mut resp = common::raw(&etcd.endpoints())
        .await
        .get(
            format!("{election}/"),
            Some(etcd_client::GetOptions::new().with_prefix().with_sort(
                etcd_client::SortTarget::Create,
                etcd_client::SortOrder::Ascend,
            )),
        )
        .await
        .expect("list the election's keys");
    resp.take_kvs()
        .into_iter()
        .map(|kv| {
            (
                String::from_utf8_lossy(kv.key()).into_owned(),
                String::from_utf8_lossy(kv.value()).into_owned(),
                kv.create_revision(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regent_queues_behind_etcdctl_elect_and_wins_after_it_resigns() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let election = common::election("interop-queue");

    let mut elect = Elect::spawn(&etcd, &[election.as_str(), "etcdctl-host-1"]);
    // Once elected, etcdctl prints its key and its value.
    let key = elect
        .line(Duration::from_secs(10))
        .await
        .expect("etcdctl elect is elected in an empty election");
    assert_eq!(
        elect.line(Duration::from_secs(5)).await.as_deref(),
        Some("etcdctl-host-1")
    );
    // etcd's layout: the name, a slash, the lease id in lowercase hex.
    let suffix = key
        .strip_prefix(&format!("{election}/"))
        .unwrap_or_else(|| panic!("etcdctl's key {key:?} is not under '{election}/'"));
    assert!(
        !suffix.is_empty()
            && suffix
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "etcdctl's key suffix {suffix:?} is not a lowercase hex lease id"
    );

    let leader = store
        .current_leader(&election)
        .await
        .unwrap()
        .expect("regent sees etcdctl's candidate lead");
    assert_eq!(leader.holder.as_str(), "etcdctl-host-1");
    let etcdctl_token = leader.token;

    // A regent candidate queues behind it, with our layout.
    let Acquire::Held {
        leader: Some(l),
        queued: Some(place),
    } = store
        .try_acquire(&req(&election, "regent-1", HAND_TTL), None)
        .await
        .unwrap()
    else {
        panic!("regent must queue behind etcdctl's leader");
    };
    assert_eq!(l.holder.as_str(), "etcdctl-host-1");
    let listed = keys(&etcd, &election).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(listed[0].0, key);
    assert_eq!(listed[1].0, format!("{election}/{}", place.handle.as_str()));
    assert_eq!(u64::try_from(listed[1].2).unwrap(), place.token.get());
    assert!(place.token > etcdctl_token);

    // The Candidate follows the line: it must not win while etcdctl leads.
    let candidate = Candidate::builder(store.clone(), election.clone(), holder("regent-2"))
        .ttl(TTL)
        .renew_every(Duration::from_millis(500))
        .renew_deadline(Duration::from_millis(1500))
        .grace(Duration::from_millis(100))
        .build()
        .expect("valid timing");
    let campaign = tokio::spawn(async move {
        let leadership = candidate.campaign().await;
        (candidate, leadership)
    });
    // The store-level place keeps its lease alive meanwhile.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            store.renew(&place).await.unwrap(),
            regent_core::Renewal::Renewed
        );
        assert!(!campaign.is_finished(), "regent won while etcdctl leads");
    }

    elect.interrupt().await;
    // regent-1 is next in line: its queued place wins with its token.
    let Acquire::Won(won) = store
        .try_acquire(&req(&election, "regent-1", HAND_TTL), Some(&place))
        .await
        .unwrap()
    else {
        panic!("regent-1 is first in line after etcdctl resigned");
    };
    assert_eq!(won.token, place.token);
    let leader = store.current_leader(&election).await.unwrap().unwrap();
    assert_eq!(leader.holder.as_str(), "regent-1");
    assert_eq!(leader.token, won.token);

    // Then the Candidate behind it, once regent-1 releases.
    assert!(!campaign.is_finished());
    store.release(&won).await.unwrap();
    let (candidate, leadership) = tokio::time::timeout(Duration::from_secs(10), campaign)
        .await
        .expect("the candidate wins after the line ahead of it left")
        .unwrap();
    let leadership = leadership.expect("campaign");
    assert!(leadership.token() > won.token);
    leadership.resign().await.unwrap();
    candidate.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_observes_regents_leader_and_queues_behind_it() {
    let etcd = common::start_etcd().await;
    let store = common::store(etcd.endpoints()).await;
    let election = common::election("interop-observe");

    let Acquire::Won(lease) = store
        .try_acquire(&req(&election, "regent-1", HAND_TTL), None)
        .await
        .unwrap()
    else {
        panic!("regent wins an empty election");
    };

    // `etcdctl elect -l` prints the leader's key and value.
    let mut observer = Elect::spawn(&etcd, &["-l", election.as_str()]);
    let key = observer
        .line(Duration::from_secs(10))
        .await
        .expect("observer prints the key");
    assert_eq!(key, format!("{election}/{}", lease.handle.as_str()));
    let value = observer
        .line(Duration::from_secs(5))
        .await
        .expect("observer prints the value");
    let json: serde_json::Value = serde_json::from_str(&value).expect("regent's value is JSON");
    assert_eq!(json["holder"], "regent-1");
    assert_eq!(json["metadata"]["who"], "regent-1");

    // A metadata update is etcd's Proclaim: the observer sees the new value
    // on the same key.
    let metadata =
        regent_core::Metadata::from_pairs([("who", "regent-1"), ("addr", "10.0.0.1:80")]).unwrap();
    assert_eq!(
        store.update_metadata(&lease, &metadata).await.unwrap(),
        regent_core::Renewal::Renewed
    );
    assert_eq!(
        observer.line(Duration::from_secs(5)).await.as_deref(),
        Some(key.as_str()),
        "the observer sees the proclaimed value on the leader's key"
    );
    let value = observer
        .line(Duration::from_secs(5))
        .await
        .expect("observer prints the new value");
    let json: serde_json::Value = serde_json::from_str(&value).expect("regent's value is JSON");
    assert_eq!(json["holder"], "regent-1");
    assert_eq!(json["metadata"]["addr"], "10.0.0.1:80");

    // An etcdctl candidate queues behind regent's leader.
    let mut elect = Elect::spawn(&etcd, &[election.as_str(), "etcdctl-host-2"]);
    for _ in 0..3 {
        assert_eq!(
            elect.line(Duration::from_millis(700)).await,
            None,
            "etcdctl was elected while regent leads"
        );
        assert_eq!(
            store.renew(&lease).await.unwrap(),
            regent_core::Renewal::Renewed
        );
    }
    let listed = keys(&etcd, &election).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    let etcdctl_rev = listed[1].2;

    // regent resigns: etcdctl is elected, and the observer sees it.
    store.release(&lease).await.unwrap();
    let key = elect
        .line(Duration::from_secs(10))
        .await
        .expect("etcdctl is elected after regent resigned");
    assert_eq!(key, listed[1].0);
    assert_eq!(
        observer.line(Duration::from_secs(10)).await.as_deref(),
        Some(key.as_str())
    );
    assert_eq!(
        observer.line(Duration::from_secs(5)).await.as_deref(),
        Some("etcdctl-host-2")
    );
    let leader = store.current_leader(&election).await.unwrap().unwrap();
    assert_eq!(leader.holder.as_str(), "etcdctl-host-2");
    assert_eq!(i64::try_from(leader.token.get()).unwrap(), etcdctl_rev);
    assert!(leader.token > lease.token, "tokens never go backwards");

    elect.interrupt().await;
    observer.interrupt().await;
    assert_eq!(store.current_leader(&election).await.unwrap(), None);
}
