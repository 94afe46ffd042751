//! Interoperability with Apache Curator's `LeaderLatch`: a regent candidate
//! and a Curator participant on one latch path queue in one line and agree
//! on one leader; `LeaderLatch.getLeader()` shows regent's holder id and
//! regent shows the Curator participant's id.
//!
//! The participant is regent-testkit's `LatchParticipant` (its Java source
//! beside the kit's ZooKeeper engine), compiled at test time by the
//! installed JDK against the kit's Curator classpath and driven line by
//! line over its stdin. A missing JDK or jar fails the test with a message
//! naming `scripts/install-engines`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::time::Duration;

use regent_core::{
    Acquire, AcquireRequest, Candidate, ElectionName, HolderId, LeaseStore, Metadata, Status,
};
use regent_testkit::engines::{LatchParticipant, ZooKeeper};
use regent_zookeeper::ZkStore;
use tokio::sync::mpsc::{self, UnboundedReceiver, error::TryRecvError};

/// Every election of these tests lives under it: election `jobs` is the
/// latch path `/curator-interop/jobs`.
const CHROOT: &str = "/curator-interop";

/// regent's ttl, and its session's timeout: Curator's sessions are as long.
const TTL: Duration = Duration::from_secs(2);

/// The bound on every wait for something that must happen.
const WAIT: Duration = Duration::from_secs(10);

/// The bound on a participant's start: a JVM, then Curator's connection.
const LAUNCH: Duration = Duration::from_secs(30);

/// Compiles the participant.
fn compile() -> LatchParticipant {
    LatchParticipant::compile()
        .unwrap_or_else(|e| panic!("cannot compile the Curator participant: {e}"))
}

/// A ZooKeeper of the test's own and the compiled participant, made side
/// by side.
async fn setup() -> (ZooKeeper, LatchParticipant) {
    let compiled = tokio::task::spawn_blocking(compile);
    let zookeeper = common::start_zookeeper().await;
    let compiled = compiled
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    (zookeeper, compiled)
}

async fn store(zookeeper: &ZooKeeper) -> ZkStore {
    common::store_builder(&zookeeper.address(), CHROOT)
        .session_timeout(TTL)
        .connect()
        .await
        .expect("connect regent's store")
}

fn election(name: &str) -> ElectionName {
    ElectionName::new(name).expect("a valid election name")
}

fn candidate(store: &ZkStore, election: &ElectionName, holder: &str) -> Candidate<ZkStore> {
    Candidate::builder(
        store.clone(),
        election.clone(),
        HolderId::new(holder).expect("a valid holder id"),
    )
    .ttl(TTL)
    .renew_every(Duration::from_millis(500))
    .renew_deadline(Duration::from_millis(1500))
    .grace(Duration::from_millis(100))
    .build()
    .expect("valid timing")
}

/// A request without metadata: its node holds the bare holder id.
fn bare_req(election: &ElectionName, holder: &str) -> AcquireRequest {
    AcquireRequest {
        election: election.clone(),
        holder: HolderId::new(holder).expect("a valid holder id"),
        ttl: TTL,
        metadata: Metadata::new(),
    }
}

/// A running `LatchParticipant`. Its stdout is read by a thread: event
/// lines to `events`, every other line (an answer) to `answers`. Killed
/// when dropped.
struct Participant {
    id: String,
    child: Child,
    stdin: ChildStdin,
    answers: UnboundedReceiver<String>,
    events: UnboundedReceiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Participant {
    /// Starts participant `id` on `latch_path` and waits until it is
    /// connected (`READY`). Its latch is not started.
    async fn launch(
        compiled: &LatchParticipant,
        servers: &str,
        latch_path: &str,
        id: &str,
    ) -> Self {
        let mut child = compiled
            .command(servers, latch_path, id)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} for the Curator participant ({e}): run scripts/install-engines",
                    compiled.java().display()
                )
            });
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (answer_tx, answers) = mpsc::unbounded_channel();
        let (event_tx, events) = mpsc::unbounded_channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let to = if line.starts_with("EVENT ") {
                    &event_tx
                } else {
                    &answer_tx
                };
                if to.send(line).is_err() {
                    break;
                }
            }
        });
        let mut participant = Self {
            id: id.to_owned(),
            child,
            stdin,
            answers,
            events,
            reader: Some(reader),
        };
        let ready = participant.answer(LAUNCH).await;
        assert_eq!(ready, "READY", "participant {id} did not connect");
        participant
    }

    /// The next answer, within `within`.
    async fn answer(&mut self, within: Duration) -> String {
        match tokio::time::timeout(within, self.answers.recv()).await {
            Ok(Some(line)) => line,
            Ok(None) => panic!("participant {} exited", self.id),
            Err(_) => panic!("participant {} said nothing within {within:?}", self.id),
        }
    }

    /// Sends `command` and returns its answer; an `ERROR` fails the test.
    async fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("write {command:?} to participant {}: {e}", self.id));
        let answer = self.answer(WAIT).await;
        assert!(
            !answer.starts_with("ERROR"),
            "participant {} failed {command:?}: {answer}",
            self.id
        );
        answer
    }

    /// Asks `command` until it answers `expected`, for at most [`WAIT`].
    async fn ask_until(&mut self, command: &str, expected: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let answer = self.ask(command).await;
            if answer == expected {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "participant {} still answers {command:?} with {answer:?}, not {expected:?}",
                self.id
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for the latch's next event and checks it is `event`.
    async fn expect_event(&mut self, event: &str) {
        match tokio::time::timeout(WAIT, self.events.recv()).await {
            Ok(Some(line)) => assert_eq!(line, format!("EVENT {event}"), "participant {}", self.id),
            Ok(None) => panic!("participant {} exited", self.id),
            Err(_) => panic!("participant {} saw no {event} within {WAIT:?}", self.id),
        }
    }

    /// Checks that the latch has reported no event since the last one
    /// looked at.
    fn expect_no_event(&mut self) {
        match self.events.try_recv() {
            Err(TryRecvError::Empty) => {}
            other => panic!("participant {}: unexpected {other:?}", self.id),
        }
    }

    /// `exit`: closes the client (its session, and the node if it stands)
    /// and waits for the process to end.
    async fn exit(mut self) {
        writeln!(self.stdin, "exit")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("write exit to participant {}: {e}", self.id));
        // The reader ends, and drops the channels, when the process exits.
        match tokio::time::timeout(WAIT, self.answers.recv()).await {
            Ok(None) => {}
            Ok(Some(line)) => panic!("participant {} said {line:?} on exit", self.id),
            Err(_) => panic!("participant {} did not exit within {WAIT:?}", self.id),
        }
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// A Curator participant leads; a regent candidate queues behind it and
/// leads when the participant closes its latch, and Curator shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regent_queues_behind_a_curator_leader_and_leads_after_it_closes() {
    let (zookeeper, compiled) = setup().await;
    let store = store(&zookeeper).await;
    let election = election("jobs");
    let latch = store.election_path(&election);
    assert_eq!(latch, "/curator-interop/jobs");

    let mut curator =
        Participant::launch(&compiled, &zookeeper.address(), &latch, "curator-1").await;
    assert_eq!(curator.ask("start").await, "STARTED");
    curator.expect_event("isLeader").await;
    assert_eq!(curator.ask("leader?").await, "LEADER curator-1");

    // regent shows the participant's id as the leader's holder id.
    let leader = store
        .current_leader(&election)
        .await
        .unwrap()
        .expect("regent sees the Curator participant lead");
    assert_eq!(leader.holder.as_str(), "curator-1");
    assert!(leader.metadata.is_empty(), "{leader:?}");
    let curator_token = leader.token;

    // A single attempt queues behind it, and Curator sees that place in
    // its own line, second.
    let Acquire::Held {
        leader: Some(ahead),
        queued: Some(place),
    } = store
        .try_acquire(&bare_req(&election, "regent-probe"), None)
        .await
        .unwrap()
    else {
        panic!("regent must queue behind Curator's leader");
    };
    assert_eq!(ahead.holder.as_str(), "curator-1");
    assert_eq!(ahead.token, curator_token);
    assert!(place.token > curator_token);
    assert_eq!(
        curator.ask("participants?").await,
        "PARTICIPANTS curator-1 regent-probe"
    );
    store.release(&place).await.unwrap();
    assert_eq!(curator.ask("participants?").await, "PARTICIPANTS curator-1");

    // A candidate follows Curator's leader and waits behind it.
    let candidate = candidate(&store, &election, "regent-1");
    let mut status = candidate.status();
    let campaign = tokio::spawn(async move {
        let leadership = candidate.campaign().await;
        (candidate, leadership)
    });
    tokio::time::timeout(
        WAIT,
        status.wait_for(|s| {
            matches!(s, Status::Follower { leader: Some(l) }
                if l.holder.as_str() == "curator-1" && l.token == curator_token)
        }),
    )
    .await
    .expect("the candidate follows Curator's leader")
    .expect("the candidate's status");
    curator
        .ask_until("participants?", "PARTICIPANTS curator-1 regent-1")
        .await;
    assert_eq!(curator.ask("has?").await, "HAS true");
    assert!(!campaign.is_finished(), "regent won while Curator leads");
    let leader = store.current_leader(&election).await.unwrap().unwrap();
    assert_eq!(leader.holder.as_str(), "curator-1");

    // Curator closes its latch: regent-1 is next in line and leads.
    assert_eq!(curator.ask("close").await, "CLOSED");
    curator.expect_event("notLeader").await;
    let (candidate, leadership) = tokio::time::timeout(WAIT, campaign)
        .await
        .expect("regent leads once Curator's participant left")
        .unwrap();
    let leadership = leadership.expect("campaign");
    assert!(leadership.token() > curator_token);
    let leader = store.current_leader(&election).await.unwrap().unwrap();
    assert_eq!(leader.holder.as_str(), "regent-1");
    assert_eq!(leader.token, leadership.token());
    // Curator shows regent's holder id as the leader's participant id.
    assert_eq!(curator.ask("leader?").await, "LEADER regent-1");
    assert_eq!(curator.ask("has?").await, "HAS false");

    leadership.resign().await.unwrap();
    candidate.shutdown().await;
    assert_eq!(curator.ask("leader?").await, "LEADER -");
    assert_eq!(store.current_leader(&election).await.unwrap(), None);
    curator.expect_no_event();
    curator.exit().await;
}

/// regent leads; a Curator participant queues behind it, shows regent's
/// holder id as the leader, and leads when regent resigns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_queues_behind_a_regent_leader_and_leads_after_it_resigns() {
    let (zookeeper, compiled) = setup().await;
    let store = store(&zookeeper).await;
    let election = election("jobs");
    let latch = store.election_path(&election);

    let candidate = candidate(&store, &election, "regent-1");
    let leadership = tokio::time::timeout(WAIT, candidate.campaign())
        .await
        .expect("regent leads an empty election")
        .expect("campaign");
    let regent_token = leadership.token();

    let mut curator =
        Participant::launch(&compiled, &zookeeper.address(), &latch, "curator-1").await;
    assert_eq!(curator.ask("leader?").await, "LEADER regent-1");
    assert_eq!(curator.ask("start").await, "STARTED");
    // The latch creates its node in the background: wait until it stands.
    curator
        .ask_until("participants?", "PARTICIPANTS regent-1 curator-1")
        .await;
    assert_eq!(curator.ask("has?").await, "HAS false");
    assert_eq!(curator.ask("leader?").await, "LEADER regent-1");
    curator.expect_no_event();

    // regent still leads, with its token, and sees Curator's place.
    assert!(leadership.check().is_ok());
    let leader = store.current_leader(&election).await.unwrap().unwrap();
    assert_eq!(leader.holder.as_str(), "regent-1");
    assert_eq!(leader.token, regent_token);

    // regent resigns (deletes its node): Curator's watch on it fires.
    leadership.resign().await.unwrap();
    curator.expect_event("isLeader").await;
    assert_eq!(curator.ask("has?").await, "HAS true");
    assert_eq!(curator.ask("leader?").await, "LEADER curator-1");
    let leader = store.current_leader(&election).await.unwrap().unwrap();
    assert_eq!(leader.holder.as_str(), "curator-1");
    assert!(leader.token > regent_token, "tokens never go backwards");
    candidate.shutdown().await;

    assert_eq!(curator.ask("close").await, "CLOSED");
    curator.expect_event("notLeader").await;
    assert_eq!(store.current_leader(&election).await.unwrap(), None);
    curator.exit().await;
}

/// A regent leader with metadata: Curator shows its holder id, a newline
/// and the metadata as JSON (the crate docs' one difference).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_shows_a_regent_leaders_metadata_after_its_holder_id() {
    let (zookeeper, compiled) = setup().await;
    let store = store(&zookeeper).await;
    let election = election("jobs");
    let latch = store.election_path(&election);

    let req = AcquireRequest {
        metadata: Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap(),
        ..bare_req(&election, "regent-1")
    };
    let Acquire::Won(lease) = store.try_acquire(&req, None).await.unwrap() else {
        panic!("regent wins an empty election");
    };
    let mut curator =
        Participant::launch(&compiled, &zookeeper.address(), &latch, "curator-1").await;
    // The participant escapes the newline as `\n`.
    assert_eq!(
        curator.ask("leader?").await,
        r#"LEADER regent-1\n{"addr":"10.0.0.1:80"}"#
    );
    store.release(&lease).await.unwrap();
    assert_eq!(curator.ask("leader?").await, "LEADER -");
    curator.exit().await;
}

/// Regression: a regent leader proclaims new metadata while a Curator
/// participant waits right behind it, then resigns: the participant must
/// lead.
///
/// `LeaderLatch` watches the data of the node ahead of its own and acts on
/// `NodeDeleted` only. A proclaim was a `setData` on that node; it fired
/// the one-shot watch with `NodeDataChanged`, which Curator ignores
/// without watching again, so it never heard of the delete: it did not
/// lead (`hasLeadership()` false, no `isLeader`) while `getLeader()` and
/// regent's `current_leader` both named it, until its connection was
/// reset. Proclaimed metadata now lives apart from the election's node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_leads_after_a_regent_leader_that_proclaimed_resigns() {
    let (zookeeper, compiled) = setup().await;
    let store = store(&zookeeper).await;
    let election = election("jobs");
    let latch = store.election_path(&election);
    let candidate = candidate(&store, &election, "regent-1");
    let leadership = tokio::time::timeout(WAIT, candidate.campaign())
        .await
        .expect("regent leads an empty election")
        .expect("campaign");
    let mut curator =
        Participant::launch(&compiled, &zookeeper.address(), &latch, "curator-1").await;
    assert_eq!(curator.ask("start").await, "STARTED");
    curator
        .ask_until("participants?", "PARTICIPANTS regent-1 curator-1")
        .await;

    leadership
        .proclaim(Metadata::from_pairs([("addr", "10.0.0.2:80")]).unwrap())
        .await
        .unwrap();
    // The node Curator reads keeps its data; regent's readers see the
    // proclaimed metadata.
    assert_eq!(curator.ask("leader?").await, "LEADER regent-1");
    let seen = store
        .current_leader(&election)
        .await
        .unwrap()
        .expect("regent-1 leads");
    assert_eq!(seen.metadata.get("addr"), Some("10.0.0.2:80"));
    leadership.resign().await.unwrap();
    curator.expect_event("isLeader").await;
    assert_eq!(curator.ask("has?").await, "HAS true");
    candidate.shutdown().await;
    curator.exit().await;
}
