//! What the ensemble and fault tests share: the candidates' timing, a
//! candidate campaigning in a loop that records every term it leads, and
//! readers of the four-letter words that say which sessions a server
//! holds (`cons`, `dump`, `mntr`).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use regent_core::{
    CampaignError, Candidate, ElectionName, Ended, FencingToken, HolderId, LeaseState, Status,
};
use regent_testkit::History;
use regent_testkit::fixtures::holder;
use regent_zookeeper::ZkStore;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The ttl every candidate asks for, granted as the session timeout (the
/// kit's servers grant 0.2 s to 60 s).
pub(crate) const TTL: Duration = Duration::from_secs(2);
/// A renewal (a read of the leader's own node) every 300 ms...
pub(crate) const RENEW_EVERY: Duration = Duration::from_millis(300);
/// ...and a step-down 1.5 s after the last renewal that succeeded was
/// sent: 0.5 s before the session can expire, five of the kit's ticks
/// (the crate docs ask for more than one).
pub(crate) const RENEW_DEADLINE: Duration = Duration::from_millis(1500);
/// Fits in `ttl × 0.99 − margin − renew_deadline` (0.47 s).
pub(crate) const GRACE: Duration = Duration::from_millis(100);
/// Each ZooKeeper call: below the renew deadline, as the store asks.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// How late a timer may fire, or a JVM answer, on a loaded two-core
/// machine (another build runs beside the tests): the slack on "at its
/// deadline" and "at once".
pub(crate) const LATE: Duration = Duration::from_millis(500);

/// The tests of one binary fault their servers one at a time: a paused
/// server or an ensemble's election is timed to the tick, and two JVMs
/// starting on two cores beside a build would make every timer late.
pub(crate) static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub(crate) fn election(name: &str) -> ElectionName {
    ElectionName::new(name).expect("valid election name")
}

/// A store of its own (so a session of its own) on `servers` under
/// `chroot`, its first session asking for `session_timeout`.
pub(crate) async fn store(servers: &str, chroot: &str, session_timeout: Duration) -> ZkStore {
    ZkStore::builder(servers)
        .chroot(chroot)
        .call_timeout(CALL_TIMEOUT)
        .session_timeout(session_timeout)
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect a store to {servers}: {e}"))
}

/// The timing of a candidate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timing {
    pub(crate) ttl: Duration,
    pub(crate) renew_every: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) grace: Duration,
}

/// The timing of most tests: [`TTL`], [`RENEW_EVERY`], [`RENEW_DEADLINE`],
/// [`GRACE`].
pub(crate) const TIMING: Timing = Timing {
    ttl: TTL,
    renew_every: RENEW_EVERY,
    renew_deadline: RENEW_DEADLINE,
    grace: GRACE,
};

pub(crate) fn candidate(
    store: ZkStore,
    election: &ElectionName,
    who: &str,
    t: Timing,
) -> Candidate<ZkStore> {
    Candidate::builder(store, election.clone(), holder(who))
        .ttl(t.ttl)
        .renew_every(t.renew_every)
        .renew_deadline(t.renew_deadline)
        .grace(t.grace)
        .build()
        .expect("valid timing")
}

/// The term a candidate leads now.
#[derive(Clone, Debug)]
pub(crate) struct Leading {
    pub(crate) token: FencingToken,
    /// The session that holds its node (hex, as the four-letter words show
    /// it) and the node's name.
    pub(crate) session: String,
    pub(crate) node: String,
    /// Its deadlines, moved by every renewal.
    pub(crate) lease_state: watch::Receiver<LeaseState>,
}

/// One term, once it ended.
#[derive(Clone, Debug)]
pub(crate) struct Term {
    pub(crate) holder: HolderId,
    pub(crate) token: FencingToken,
    pub(crate) session: String,
    pub(crate) node: String,
    /// When the guard was in hand.
    pub(crate) start: Instant,
    /// How and when (the instant its cancellation fired) it ended.
    pub(crate) ended: Ended,
    /// When it was due to step down as it ended: the send instant of its
    /// last confirmed renewal (or of the acquire) plus the renew deadline.
    pub(crate) step_down_at: Instant,
}

impl Term {
    /// The send instant of the last request that confirmed the term.
    pub(crate) fn last_confirmed(&self, renew_deadline: Duration) -> Instant {
        self.step_down_at - renew_deadline
    }
}

/// The session id (hex) and node name of a lease's handle: the store
/// writes `SESSION/NAME`.
pub(crate) fn session_and_node(handle: &str) -> (String, String) {
    let (sid, node) = handle
        .split_once('/')
        .unwrap_or_else(|| panic!("a ZooKeeper lease handle is SESSION/NODE: {handle}"));
    (format!("0x{sid}"), node.to_owned())
}

/// The session id as the four-letter words show it.
pub(crate) fn hex(session: i64) -> String {
    format!("0x{session:x}")
}

/// A candidate campaigning in a task until it is shut down, recording
/// every term it leads in a [`History`] (begin when the guard is in hand,
/// end at the instant the guard says it ended) and in its own list.
pub(crate) struct Running {
    pub(crate) candidate: Candidate<ZkStore>,
    /// The term it leads now, set once the term's begin is recorded and
    /// cleared once its end is.
    pub(crate) leading: watch::Receiver<Option<Leading>>,
    pub(crate) terms: Arc<Mutex<Vec<Term>>>,
    /// Why its campaign stopped other than by shutdown: a store error the
    /// core took for permanent, which leaves the candidate out of the
    /// election for good.
    pub(crate) failed: watch::Receiver<Option<String>>,
    task: JoinHandle<()>,
}

impl Running {
    pub(crate) fn spawn(candidate: Candidate<ZkStore>, history: &History) -> Self {
        let (c, history) = (candidate.clone(), history.clone());
        let (leading_tx, leading) = watch::channel(None);
        let (failed_tx, failed) = watch::channel(None);
        let terms = Arc::new(Mutex::new(Vec::new()));
        let record = terms.clone();
        let task = tokio::spawn(async move {
            loop {
                match c.campaign().await {
                    Ok(leadership) => {
                        history.begin_leadership(&leadership);
                        let start = Instant::now();
                        let (session, node) = session_and_node(leadership.lease().handle.as_str());
                        leading_tx.send_replace(Some(Leading {
                            token: leadership.token(),
                            session: session.clone(),
                            node: node.clone(),
                            lease_state: leadership.lease_state(),
                        }));
                        let ended = leadership.until_ended().await;
                        history.end_leadership(&leadership);
                        let step_down_at = leadership.lease_state().borrow().step_down_at;
                        lock(&record).push(Term {
                            holder: leadership.holder().clone(),
                            token: leadership.token(),
                            session,
                            node,
                            start,
                            ended,
                            step_down_at,
                        });
                        leading_tx.send_replace(None);
                        // Dropped at once: the work has stopped, and the
                        // node is released before the local deadline.
                        drop(leadership);
                    }
                    Err(CampaignError::Shutdown) => break,
                    Err(e) => {
                        failed_tx.send_replace(Some(format!(
                            "the campaign of {} failed for good at {:?}: {e}",
                            c.holder(),
                            Instant::now()
                        )));
                        break;
                    }
                }
            }
        });
        Self {
            candidate,
            leading,
            terms,
            failed,
            task,
        }
    }

    pub(crate) fn holder(&self) -> &HolderId {
        self.candidate.holder()
    }

    /// The terms that ended so far, in order.
    pub(crate) fn terms(&self) -> Vec<Term> {
        lock(&self.terms).clone()
    }

    /// The term it leads now.
    pub(crate) fn now_leading(&self) -> Option<Leading> {
        self.leading.borrow().clone()
    }

    /// Waits up to `within` until it leads; returns the term.
    ///
    /// # Panics
    ///
    /// With `what` if it does not, or at once if its campaign failed.
    pub(crate) async fn until_leading(&self, within: Duration, what: &str) -> Leading {
        self.until(within, what, Option::is_some)
            .await
            .expect("waited for it")
    }

    /// Waits up to `within` until its term `token` has ended; returns the
    /// term.
    pub(crate) async fn until_term_ends(&self, token: FencingToken, within: Duration) -> Term {
        let what = format!("its term {token} ends");
        self.until(within, &what, |l| {
            l.as_ref().is_none_or(|l| l.token != token)
        })
        .await;
        self.terms()
            .into_iter()
            .find(|t| t.token == token)
            .expect("a term that ended is recorded")
    }

    /// Waits up to `within` until what it leads is `wanted`; returns that.
    ///
    /// # Panics
    ///
    /// With `what` if it does not, or at once if its campaign failed.
    pub(crate) async fn until(
        &self,
        within: Duration,
        what: &str,
        wanted: impl Fn(&Option<Leading>) -> bool,
    ) -> Option<Leading> {
        let (mut leading, mut failed) = (self.leading.clone(), self.failed.clone());
        let ended = || format!("the task of {} ended", self.holder());
        let waited = tokio::time::timeout(within, async {
            // Each `Ref` is copied out at once: held on, it would block the
            // candidate's task, which sends on these channels.
            tokio::select! {
                biased;
                r = failed.wait_for(Option::is_some) => {
                    Err(r.map_or_else(|_| ended(), |f| f.clone().unwrap_or_default()))
                }
                r = leading.wait_for(|l| wanted(l)) => r.map(|l| l.clone()).map_err(|_| ended()),
            }
        })
        .await;
        match waited {
            Ok(Ok(leading)) => leading,
            Ok(Err(failure)) => panic!("{failure} (while waiting until {what})"),
            Err(_) => panic!(
                "{}: not within {within:?}: {what}{}",
                self.holder(),
                self.failure()
                    .map_or_else(String::new, |f| format!("; {f}"))
            ),
        }
    }

    /// Why its campaign failed, if it did.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failed.borrow().clone()
    }
}

/// Shuts every candidate down at once and waits for their tasks (each
/// bounded).
pub(crate) async fn shut_down(running: Vec<Running>) {
    for r in &running {
        r.candidate.shutdown_token().cancel();
    }
    let failures: Vec<String> = running.iter().filter_map(Running::failure).collect();
    for r in running {
        let holder = r.holder().clone();
        tokio::time::timeout(Duration::from_secs(10), r.task)
            .await
            .unwrap_or_else(|_| panic!("{holder} did not stop within 10 s"))
            .unwrap_or_else(|e| panic!("the task of {holder} failed: {e}"));
    }
    assert!(
        failures.is_empty(),
        "a campaign stopped on an error the core took for permanent: {failures:#?}"
    );
}

/// Waits up to `within` until one of `running` leads; returns its index
/// and term.
///
/// # Panics
///
/// With `what` if none does, or at once if a campaign failed.
pub(crate) async fn first_leading(
    running: &[Running],
    within: Duration,
    what: &str,
) -> (usize, Leading) {
    let waits = running.iter().enumerate().map(|(i, r)| {
        Box::pin(async move {
            let leading = r.until(within, what, Option::is_some).await;
            (i, leading.expect("waited for it"))
        })
    });
    let (first, _, _) = futures_util::future::select_all(waits).await;
    first
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `at` relative to `origin`, signed, for messages.
pub(crate) fn since(origin: Instant, at: Instant) -> String {
    match at.checked_duration_since(origin) {
        Some(after) => format!("+{after:.3?}"),
        None => format!("-{:.3?}", origin - at),
    }
}

/// The sessions of the client connections a `cons` answer lists (its own
/// connection has none), hex as `0x…`.
pub(crate) fn sessions_in_cons(cons: &str) -> BTreeSet<String> {
    cons.lines()
        .filter_map(|line| {
            let rest = &line[line.find("sid=")? + 4..];
            let end = rest.find([',', ')']).unwrap_or(rest.len());
            Some(rest[..end].to_owned())
        })
        .collect()
}

/// The ephemeral nodes of each session a `dump` answer lists (a standalone
/// server's or an ensemble leader's): `Sessions with Ephemerals (N):`, then
/// each session (`0x…:`) with its nodes on tab-indented lines.
pub(crate) fn ephemerals_in_dump(dump: &str) -> BTreeMap<String, Vec<String>> {
    let mut sessions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut inside = false;
    for line in dump.lines() {
        if line.starts_with("Sessions with Ephemerals") {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some(path) = line.strip_prefix('\t') {
            if let Some(s) = &current {
                sessions
                    .entry(s.clone())
                    .or_default()
                    .push(path.trim().to_owned());
            }
        } else if let Some(sid) = line.strip_suffix(':').filter(|l| l.starts_with("0x")) {
            current = Some(sid.to_owned());
            sessions.entry(sid.to_owned()).or_default();
        } else {
            // The next section (`Connections dump:`, …).
            inside = false;
        }
    }
    sessions
}

/// The value of `key` in a `mntr` answer.
pub(crate) fn mntr_value(mntr: &str, key: &str) -> Option<String> {
    mntr.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix('\t'))
        .map(str::to_owned)
}

/// Waits until `deadline` for a renewal sent after `after` to be confirmed
/// (the step-down instant moves past `after + renew_deadline`), or for the
/// term to end; returns the term's state then.
pub(crate) async fn until_renewed_after(
    lease_state: &watch::Receiver<LeaseState>,
    after: Instant,
    renew_deadline: Duration,
    deadline: Instant,
) -> LeaseState {
    let mut state = lease_state.clone();
    let _ = tokio::time::timeout_at(deadline, async {
        // The `Ref` is dropped at once: held, it would block the renewals.
        let _ = state
            .wait_for(|s| s.ended.is_some() || s.step_down_at > after + renew_deadline)
            .await
            .map(|s| *s);
    })
    .await;
    *lease_state.borrow()
}

/// Waits until `follower` follows the term `token` (its status names it).
pub(crate) async fn until_following(follower: &Running, token: FencingToken) {
    let mut status = follower.candidate.status();
    let followed = tokio::time::timeout(
        TTL * 2,
        status.wait_for(|s| matches!(s, Status::Follower { leader: Some(l) } if l.token == token)),
    )
    .await;
    assert!(
        matches!(followed, Ok(Ok(_))),
        "{} does not follow term {token}: {:?}{}",
        follower.holder(),
        *follower.candidate.status().borrow(),
        follower
            .failure()
            .map_or_else(String::new, |f| format!("; {f}"))
    );
}
