//! One seeded run: a plan drawn from the seed, candidates that lead for a
//! while and give the term back, fault episodes, and what came of it (the
//! leaders' beliefs and the store's record log) for `check` to judge.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use regent_core::memory::{LostReply, MemoryStore, RecordLife};
use regent_core::testing::Layered;
use regent_core::{
    CampaignError, CancellationToken, Candidate, ElectionName, ExpirySlack, FencingToken, HolderId,
    Leadership, Metadata, StoreStyle, Timing,
};
use tokio::time::{Instant, sleep, sleep_until};

use crate::process::{Frozen, Process, paused, running};

pub(crate) fn election() -> ElectionName {
    ElectionName::new("jobs").unwrap()
}

pub(crate) fn holder(i: usize) -> HolderId {
    HolderId::new(format!("c{i:03}")).unwrap()
}

/// The kinds of fault a run injects. Every kind but the clock drift comes
/// in episodes that are undone at their end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The candidate that believes it leads is cut off from the store.
    PartitionLeader,
    /// A random candidate is cut off from the store.
    PartitionOne,
    /// The next 1–5 calls fail before the store sees them.
    FailCalls,
    /// Every request is slowed (up to 0.4 ttl) and every reply (up to
    /// 0.8 ttl).
    SlowCalls,
    /// The next 1–3 calls the store applies lose their answer: the caller
    /// hears an error, or nothing until its own timeout.
    LostReplies,
    /// One candidate's process is paused (the one that leads, most often).
    Pause,
    /// The store's clock runs faster or slower than the candidates', up to
    /// the 1 % the core's timing allows for: the whole run.
    ClockDrift,
}

impl Fault {
    pub(crate) const ALL: [Fault; 7] = [
        Fault::PartitionLeader,
        Fault::PartitionOne,
        Fault::FailCalls,
        Fault::SlowCalls,
        Fault::LostReplies,
        Fault::Pause,
        Fault::ClockDrift,
    ];

    fn name(self) -> &'static str {
        match self {
            Fault::PartitionLeader => "leader partitions",
            Fault::PartitionOne => "other partitions",
            Fault::FailCalls => "failed-call bursts",
            Fault::SlowCalls => "slow-call episodes",
            Fault::LostReplies => "lost-answer bursts",
            Fault::Pause => "process pauses",
            Fault::ClockDrift => "drifting store clocks",
        }
    }
}

/// How many faults of each kind were injected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FaultCounts([u64; Fault::ALL.len()]);

impl FaultCounts {
    fn add(&mut self, fault: Fault) {
        self.0[fault as usize] += 1;
    }

    pub(crate) fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    pub(crate) fn merge(&mut self, other: &FaultCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }
}

impl fmt::Display for FaultCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, fault) in Fault::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", self.0[i], fault.name())?;
        }
        Ok(())
    }
}

/// A candidate's settings beyond the ttl; `None` takes the default.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Settings {
    pub(crate) renew_every: Option<Duration>,
    pub(crate) renew_deadline: Option<Duration>,
    pub(crate) grace: Option<Duration>,
}

/// Everything a run does, drawn from its seed before it starts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    pub(crate) seed: u64,
    pub(crate) style: StoreStyle,
    pub(crate) ttl: Duration,
    /// One per candidate.
    pub(crate) settings: Vec<Settings>,
    /// How much faster the store's clock runs than the candidates'.
    pub(crate) clock_drift: f64,
    pub(crate) slack: ExpirySlack,
    pub(crate) granted_ttl: Option<Duration>,
    /// No faults first, then fault episodes, then none again.
    pub(crate) calm_first: Duration,
    pub(crate) faults_for: Duration,
    pub(crate) calm_after: Duration,
    /// How long a leader keeps a term at most before it gives it back.
    pub(crate) max_hold: Duration,
    /// The calm between two fault episodes, at most.
    pub(crate) max_gap: Duration,
    pub(crate) max_episode: Duration,
    /// The odds of each kind of episode, in the order of [`Fault::ALL`]
    /// (the clock drift is not an episode).
    pub(crate) odds: [u32; 6],
    /// Leaders proclaim new metadata now and then.
    pub(crate) proclaims: bool,
    /// Broken on purpose: the application neither watches its leadership's
    /// cancellation nor asks the guard after a pause; it believes it leads
    /// until it has held the term as long as it meant to.
    pub(crate) ignores_step_down: bool,
}

fn millis(rng: &mut fastrand::Rng, range: std::ops::RangeInclusive<Duration>) -> Duration {
    let (lo, hi) = (range.start().as_millis(), range.end().as_millis());
    Duration::from_millis(rng.u64(lo as u64..=hi as u64))
}

fn fraction(rng: &mut fastrand::Rng, lo: f64, hi: f64) -> f64 {
    lo + rng.f64() * (hi - lo)
}

impl Plan {
    /// A small run: 3 to 12 candidates, a ttl of 1 to 30 s, every kind of
    /// fault, timings and store settings drawn within the rules. Even seeds
    /// run on a race store, odd ones on a queue store.
    pub(crate) fn small(seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let style = if seed.is_multiple_of(2) {
            StoreStyle::Race
        } else {
            StoreStyle::Queue
        };
        let ttl = millis(&mut rng, Duration::from_secs(1)..=Duration::from_secs(30));
        let candidates = rng.usize(3..=12);
        let settings = (0..candidates).map(|_| settings(&mut rng, ttl)).collect();
        let clock_drift = match rng.u8(0..10) {
            0..=3 => 0.0,
            4..=5 => 0.01,
            _ => fraction(&mut rng, -0.01, 0.01),
        };
        let slack = if rng.u8(0..10) < 3 {
            ExpirySlack::new(
                Duration::from_millis(rng.u64(0..=2_000)),
                [0, 50, 100][rng.usize(0..3)],
            )
        } else {
            ExpirySlack::NONE
        };
        let grant = rng.u8(0..10) < 2;
        let granted = ttl.mul_f64(fraction(&mut rng, 0.7, 1.0));
        let mut plan = Plan {
            seed,
            style,
            ttl,
            settings,
            clock_drift,
            slack,
            granted_ttl: None,
            calm_first: millis(&mut rng, Duration::ZERO..=ttl),
            faults_for: millis(&mut rng, ttl * 3..=ttl * 10),
            // Time for the last fault's leftovers to expire, then a ttl and
            // a stretch in which someone must lead (`check`).
            calm_after: (ttl + slack.for_ttl(ttl)) * 2 + ttl,
            max_hold: ttl * 5 / 2,
            max_gap: ttl,
            max_episode: ttl * 2,
            odds: [5, 2, 3, 3, 3, 4],
            proclaims: true,
            ignores_step_down: false,
        };
        // A granted ttl the timing rules of every candidate still hold with.
        if grant && (0..candidates).all(|i| plan.timing(i).for_granted(granted).is_ok()) {
            plan.granted_ttl = Some(granted);
        }
        plan
    }

    /// The hundred-candidate run: ttl 10 s, default timing, two minutes
    /// without faults, four with, half a minute without again.
    pub(crate) fn hundred(seed: u64, style: StoreStyle) -> Self {
        let ttl = Duration::from_secs(10);
        Plan {
            seed,
            style,
            ttl,
            settings: vec![Settings::default(); 100],
            clock_drift: 0.0,
            slack: ExpirySlack::NONE,
            granted_ttl: None,
            calm_first: Duration::from_secs(120),
            faults_for: Duration::from_secs(240),
            calm_after: Duration::from_secs(30),
            max_hold: Duration::from_secs(20),
            max_gap: Duration::ZERO,
            max_episode: Duration::from_secs(20),
            odds: [4, 2, 1, 3, 1, 1],
            proclaims: false,
            ignores_step_down: false,
        }
    }

    pub(crate) fn candidates(&self) -> usize {
        self.settings.len()
    }

    /// The timing candidate `i` runs on, as its builder validates it.
    pub(crate) fn timing(&self, i: usize) -> Timing {
        *self
            .candidate(i, MemoryStore::new(self.style), &CancellationToken::new())
            .timing()
    }

    fn candidate<S: regent_core::LeaseStore>(
        &self,
        i: usize,
        store: S,
        stop: &CancellationToken,
    ) -> Candidate<S> {
        let s = self.settings[i];
        let mut b = Candidate::builder(store, election(), holder(i))
            .ttl(self.ttl)
            .shutdown_token(stop.child_token());
        if let Some(every) = s.renew_every {
            b = b.renew_every(every);
        }
        if let Some(deadline) = s.renew_deadline {
            b = b.renew_deadline(deadline);
        }
        if let Some(grace) = s.grace {
            b = b.grace(grace);
        }
        b.build()
            .unwrap_or_else(|e| panic!("seed {}: candidate {i}: {e}", self.seed))
    }
}

/// Default timing, timing that steps down a millisecond before the local
/// lease deadline (where a drifting store clock bites first), or timing
/// drawn anywhere within the rules.
fn settings(rng: &mut fastrand::Rng, ttl: Duration) -> Settings {
    let usable = Timing::new(ttl).usable();
    let ms = Duration::from_millis(1);
    match rng.u8(0..10) {
        0..=3 => Settings::default(),
        4..=6 => {
            let deadline = usable - ms;
            Settings {
                renew_every: Some(deadline.mul_f64(fraction(rng, 0.1, 0.8))),
                renew_deadline: Some(deadline),
                grace: Some(usable - deadline),
            }
        }
        _ => {
            let every = ttl.mul_f64(fraction(rng, 0.05, 0.3));
            let lowest = every * 6 / 5 + ms;
            let deadline = lowest + (usable - ms - lowest).mul_f64(rng.f64());
            Settings {
                renew_every: Some(every),
                renew_deadline: Some(deadline),
                grace: Some((usable - deadline).mul_f64(rng.f64())),
            }
        }
    }
}

/// One term as its holder believed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Belief {
    pub(crate) holder: HolderId,
    pub(crate) token: FencingToken,
    /// When the application had the guard in hand.
    pub(crate) start: Instant,
    /// When it stopped acting as leader: when the term ended, or when its
    /// process was paused if the guard refused at the resume. `None`: it
    /// never stopped (its task died).
    pub(crate) end: Option<Instant>,
    /// When it learned that the term was over: a paused process learns at
    /// the resume. `None` as `end`.
    pub(crate) noticed: Option<Instant>,
}

/// What a run left behind.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) plan: Plan,
    pub(crate) start: Instant,
    /// When the last fault episode ended.
    pub(crate) faults_end: Instant,
    /// When the candidates were told to stop.
    pub(crate) stop: Instant,
    pub(crate) beliefs: Vec<Belief>,
    pub(crate) log: Vec<RecordLife>,
    pub(crate) faults: FaultCounts,
    /// Candidates whose task failed or panicked.
    pub(crate) failures: Vec<String>,
    pub(crate) calls: regent_core::memory::CallStats,
}

impl Outcome {
    /// Every instant as the time since the start, for messages and for
    /// comparing two runs of one seed (each runtime has its own clock).
    pub(crate) fn since(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.start)
    }

    /// The run, step by step: the plan, the beliefs and the store's log.
    pub(crate) fn story(&self) -> String {
        use fmt::Write as _;
        let p = &self.plan;
        let mut s = format!(
            "seed {} on a {:?} store, ttl {:?}; store clock drift {}, {:?}, granted ttl {:?}\n\
             calm {:?}, faults {:?}, calm {:?}; leaders hold up to {:?}{}{}\n",
            p.seed,
            p.style,
            p.ttl,
            p.clock_drift,
            p.slack,
            p.granted_ttl,
            p.calm_first,
            p.faults_for,
            p.calm_after,
            p.max_hold,
            if p.proclaims { ", proclaim" } else { "" },
            if p.ignores_step_down {
                ", ignore their step-down"
            } else {
                ""
            },
        );
        for i in 0..p.candidates() {
            let t = p.timing(i);
            writeln!(
                s,
                "  {}: renew every {:?}, step down after {:?}, grace {:?}",
                holder(i),
                t.renew_every,
                t.renew_deadline,
                t.grace
            )
            .unwrap();
        }
        writeln!(s, "faults: {}", self.faults).unwrap();
        let t =
            |at: Option<Instant>| at.map_or("-".to_owned(), |at| format!("+{:?}", self.since(at)));
        writeln!(s, "beliefs (holder, token, from, stopped acting, noticed):").unwrap();
        for b in &self.beliefs {
            writeln!(
                s,
                "  {} {} {} {} {}",
                b.holder,
                b.token,
                t(Some(b.start)),
                t(b.end),
                t(b.noticed)
            )
            .unwrap();
        }
        writeln!(s, "store records (holder, token, created, ended, how):").unwrap();
        for l in &self.log {
            let (end, how) = match &l.end {
                Some(e) => (Some(e.at), format!("{:?}", e.cause)),
                None => (None, "live".to_owned()),
            };
            writeln!(
                s,
                "  {} {} {} {} {how}",
                l.holder,
                l.token,
                t(Some(l.created)),
                t(end)
            )
            .unwrap();
        }
        write!(
            s,
            "faults end +{:?}, stop +{:?}",
            self.since(self.faults_end),
            self.since(self.stop)
        )
        .unwrap();
        s
    }
}

/// Runs `plan` on a fresh paused-time runtime of its own, with the core's
/// random generator (fastrand's, on this thread) seeded from the plan's
/// seed.
pub(crate) fn run(plan: Plan) -> Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    // The core's jitter draws from fastrand's generator of this thread.
    fastrand::seed(plan.seed ^ 0x5eed_c0de_5eed_c0de);
    runtime.block_on(simulate(plan))
}

/// What the candidates share with the run.
#[derive(Default)]
struct Record {
    beliefs: Vec<Belief>,
    /// Which candidates believe they lead now.
    leading: Vec<bool>,
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Record>>);

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Record> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn begin(&self, i: usize, l: &Leadership) -> usize {
        let mut r = self.lock();
        r.leading[i] = true;
        r.beliefs.push(Belief {
            holder: l.holder().clone(),
            token: l.token(),
            start: Instant::now(),
            end: None,
            noticed: None,
        });
        r.beliefs.len() - 1
    }

    fn end(&self, i: usize, belief: usize, end: Instant, noticed: Instant) {
        let mut r = self.lock();
        r.leading[i] = false;
        r.beliefs[belief].end = Some(end);
        r.beliefs[belief].noticed = Some(noticed);
    }

    fn leader(&self) -> Option<usize> {
        self.lock().leading.iter().position(|l| *l)
    }
}

async fn simulate(plan: Plan) -> Outcome {
    let mut rng = fastrand::Rng::with_seed(plan.seed.rotate_left(17) ^ 0xa076_1d64_78bd_642f);
    let store = MemoryStore::new(plan.style);
    let mut faults = FaultCounts::default();
    if plan.clock_drift != 0.0 {
        store.set_clock_drift(plan.clock_drift);
        faults.add(Fault::ClockDrift);
    }
    store.set_expiry_slack(plan.slack);
    store.set_granted_ttl(plan.granted_ttl);
    let shared = Shared::default();
    shared.lock().leading = vec![false; plan.candidates()];
    let stop = CancellationToken::new();
    let pauses: Vec<Frozen> = (0..plan.candidates()).map(|_| Frozen::default()).collect();

    let start = Instant::now();
    let tasks: Vec<_> = (0..plan.candidates())
        .map(|i| {
            let frozen = pauses[i].clone();
            let process: Process<MemoryStore> = Layered::new(store.clone(), frozen.clone());
            let app = App {
                i,
                shared: shared.clone(),
                frozen,
                rng: rng.fork(),
                max_hold: plan.max_hold,
                proclaims: plan.proclaims,
                ignores_step_down: plan.ignores_step_down,
                stop: stop.clone(),
            };
            let candidate = plan.candidate(i, process, &stop);
            tokio::spawn(app.run(candidate))
        })
        .collect();

    sleep(plan.calm_first).await;
    let until = Instant::now() + plan.faults_for;
    inject(
        &plan,
        &store,
        &pauses,
        &shared,
        rng.fork(),
        until,
        &mut faults,
    )
    .await;
    let faults_end = Instant::now();
    sleep(plan.calm_after).await;

    let stop_at = Instant::now();
    stop.cancel();
    let mut failures = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{}: {e}", holder(i))),
            Err(e) => failures.push(format!("{}: task {e}", holder(i))),
        }
    }
    let beliefs = std::mem::take(&mut shared.lock().beliefs);
    Outcome {
        log: store.record_log(&election()),
        calls: store.stats(),
        plan,
        start,
        faults_end,
        stop: stop_at,
        beliefs,
        faults,
        failures,
    }
}

/// One candidate's application: campaigns, leads for a while, gives the
/// term back (resigns, or drops the guard), and again, until the stop.
struct App {
    i: usize,
    shared: Shared,
    frozen: Frozen,
    rng: fastrand::Rng,
    max_hold: Duration,
    proclaims: bool,
    ignores_step_down: bool,
    stop: CancellationToken,
}

impl App {
    async fn run(mut self, candidate: Candidate<Process<MemoryStore>>) -> Result<(), String> {
        loop {
            let l = match candidate.campaign().await {
                Ok(l) => l,
                Err(CampaignError::Shutdown) => return Ok(()),
                Err(e) => return Err(format!("campaign failed: {}", regent_core::report(&e))),
            };
            let belief = self.shared.begin(self.i, &l);
            let hold = millis(&mut self.rng, Duration::ZERO..=self.max_hold);
            let proclaim = (self.proclaims && self.rng.bool())
                .then(|| Instant::now() + millis(&mut self.rng, Duration::ZERO..=hold));
            let (end, noticed) = self.lead(&l, hold, proclaim).await;
            self.shared.end(self.i, belief, end, noticed);
            if self.rng.bool() {
                let _ = l.resign().await;
            } else {
                drop(l);
            }
        }
    }

    /// Leads for `hold`, or until leadership ends; returns when it stopped
    /// acting as leader and when it noticed the end (see [`Belief`]).
    async fn lead(
        &self,
        l: &Leadership,
        hold: Duration,
        proclaim_at: Option<Instant>,
    ) -> (Instant, Instant) {
        enum Step {
            Ended,
            Held,
            Paused,
            Proclaimed,
        }
        let until = Instant::now() + hold;
        let cancelled = l.cancellation();
        let watch_end = !self.ignores_step_down;
        let mut proclaiming = proclaim_at.is_some();
        let proclaim = async {
            if let Some(at) = proclaim_at {
                sleep_until(at).await;
                let m = Metadata::from_pairs([("state", "proclaimed")]).unwrap();
                let _ = l.proclaim(m).await;
            }
        };
        let mut proclaim = std::pin::pin!(proclaim);
        loop {
            let step = tokio::select! {
                biased;
                () = cancelled.cancelled(), if watch_end => Step::Ended,
                () = self.stop.cancelled(), if !watch_end => Step::Held,
                () = paused(&self.frozen) => Step::Paused,
                () = &mut proclaim, if proclaiming => Step::Proclaimed,
                () = sleep_until(until) => Step::Held,
            };
            match step {
                Step::Ended => {
                    let now = Instant::now();
                    return (l.ended().map_or(now, |e| e.at), now);
                }
                Step::Held => {
                    let now = Instant::now();
                    return (now, now);
                }
                Step::Paused => {
                    let froze = Instant::now();
                    running(&self.frozen).await;
                    // Back from a pause, the guard is asked before anything
                    // else is done as leader.
                    if watch_end && l.check().is_err() {
                        return (froze, Instant::now());
                    }
                }
                Step::Proclaimed => proclaiming = false,
            }
        }
    }
}

/// Fault episodes until `until`: a calm gap, then one fault for a while,
/// undone at its end.
async fn inject(
    plan: &Plan,
    store: &MemoryStore,
    pauses: &[Frozen],
    shared: &Shared,
    mut rng: fastrand::Rng,
    until: Instant,
    faults: &mut FaultCounts,
) {
    let n = plan.candidates();
    let total: u32 = plan.odds.iter().sum();
    loop {
        let gap = millis(&mut rng, Duration::ZERO..=plan.max_gap);
        sleep_until((Instant::now() + gap).min(until)).await;
        let now = Instant::now();
        if now >= until {
            return;
        }
        let episode = millis(&mut rng, Duration::ZERO..=plan.max_episode).min(until - now);
        let mut pick = rng.u32(0..total);
        let fault = Fault::ALL
            .into_iter()
            .zip(plan.odds)
            .find(|(_, odds)| {
                let hit = pick < *odds;
                pick = pick.saturating_sub(*odds);
                hit
            })
            .map(|(fault, _)| fault)
            .expect("odds add up");
        let leader = shared.leader();
        let anyone = rng.usize(0..n);
        let ttl_part =
            |rng: &mut fastrand::Rng, f: f64| millis(rng, Duration::ZERO..=plan.ttl.mul_f64(f));
        match fault {
            Fault::PartitionLeader | Fault::PartitionOne => {
                let cut = match fault {
                    Fault::PartitionLeader => leader.unwrap_or(anyone),
                    _ => anyone,
                };
                store.partition(&holder(cut));
                sleep(episode).await;
                store.heal(&holder(cut));
            }
            Fault::FailCalls => {
                store.fail_next(rng.u32(1..=5));
                sleep(episode).await;
                store.fail_next(0);
            }
            Fault::SlowCalls => {
                store.set_request_delay(ttl_part(&mut rng, 0.4));
                store.set_reply_delay(ttl_part(&mut rng, 0.8));
                sleep(episode).await;
                store.set_request_delay(Duration::ZERO);
                store.set_reply_delay(Duration::ZERO);
            }
            Fault::LostReplies => {
                let how = if rng.bool() {
                    LostReply::Fail
                } else {
                    LostReply::Hang
                };
                store.lose_next_replies(rng.u32(1..=3), how);
                sleep(episode).await;
                store.lose_next_replies(0, how);
            }
            Fault::Pause => {
                let who = match leader {
                    Some(leader) if rng.u8(0..10) < 8 => leader,
                    _ => anyone,
                };
                pauses[who].set(true);
                sleep(episode).await;
                pauses[who].set(false);
            }
            Fault::ClockDrift => unreachable!("not an episode"),
        }
        faults.add(fault);
    }
}
