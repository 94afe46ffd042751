//! The checks only a race store runs, and only when its harness opts in
//! ([`Harness::checks_retried_acquire_after_a_lost_answer`]) or a test
//! calls [`run_opt_in_checks`](super::run_opt_in_checks): a retried
//! acquire after a lost answer wins.

use std::fmt::Write as _;
use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::harness::{Check, Ctx, Harness, election, ok};
use crate::store::{Acquire, AcquireRequest, LeaseStore};
use crate::types::{ElectionName, LeaderInfo, Lease};

/// The points, in µs after the call, at which the check gives up on the
/// first acquire: from before it is sent (0: it was polled once, which may
/// have sent it) to after a local engine has answered.
const GIVE_UP_AFTER_US: [u64; 9] = [0, 50, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000];

/// How many more points the check tries, each halving the span between
/// the latest point given up and the quickest answer (the time it took,
/// not the point it was given until): the moments just before the answer,
/// when the call has most likely taken effect but its answer has not
/// come. That window is narrow (SQLite: under a millisecond, some 25 ms
/// after the call, when its batch of writes commits; Redis: microseconds)
/// and lies elsewhere on every engine, so it is sought rather than
/// listed.
const CLOSING_IN: u32 = 8;

/// Race stores, opt-in: an acquire whose answer never came (the caller
/// gave up on it: a timeout, a dropped future, or an error after the
/// request went out) may still have won on the server. The same candidate
/// then calls `try_acquire` again, through the same store with the same
/// request, and must *win*: a new term, with a token above every token the
/// lost call could have been given. A store that answers `Held` by the
/// caller itself, the orphan of the lost call, makes the candidate follow
/// its own record, which nobody renews, until it expires: the election has
/// no leader for up to a ttl (and the expiry slack). Another holder's
/// acquire after the retried term was released must win too: the orphan
/// must not stand in its way either.
///
/// For each point of [`GIVE_UP_AFTER_US`], then for [`CLOSING_IN`] points
/// closing in on the moment the answer comes, the check uses an election
/// of its own in which `b` has won and released a term (so that the store
/// has a record and a token floor, and an Azure blob its first term behind
/// it), and gives up on `a`'s acquire at that point: it polls the call,
/// yielding between polls, until the point has passed by the system's
/// clock, and drops it. (Not `tokio::time::timeout`: tokio's timers tick
/// in whole milliseconds, so every point below one gave up at the first
/// tick, by which a local engine had answered; and the spin gives up on
/// time on paused time too.) If the call was answered in time there is
/// nothing to retry; otherwise the check waits a little, so that a request
/// still in flight lands first, reads `current_leader` to learn the
/// orphan's token, if any, and retries. All points are tried; the failure
/// lists the points that failed and what happened at every point.
///
/// Why opt-in: the contract ([`LeaseStore::try_acquire`], "Cancel safety")
/// allows the orphan (it "expires after `ttl`"). Redis, PostgreSQL and
/// SQLite take their own lost wins back (with
/// [`Claims`](crate::store::Claims)) and opt in; Consul and Azure Blob do
/// not pass yet. A store that passes must
/// tell its own lost win from a live lease it answered: contract item 1
/// still wants a second acquire by a holder whose lease lives, and was
/// answered, to be `Held` (`acquire_wins_only_when_free`), and a record of
/// the same holder id written by another process (maybe a live older
/// incarnation) must never be taken over. A store answering in the call's
/// first poll (the memory store with no delay) loses no answer and passes
/// without retrying anything.
pub(super) async fn retried_acquire_after_a_lost_answer_wins<H: Harness>(c: &Ctx<'_, H>) -> Check {
    // Long enough for a request sent before the caller gave up to land on
    // a local engine; short against every ttl, so the orphan still lives.
    let settle = (c.ttl / 10).min(Duration::from_millis(100));
    let mut every = Vec::new();
    let mut failed = Vec::new();
    // The points given up, and how soon answers came, so far.
    let (mut lost, mut answered) = (Vec::new(), Vec::new());
    let mut fixed = GIVE_UP_AFTER_US.map(Duration::from_micros).into_iter();
    let mut closing_in = 0;
    loop {
        let after = match fixed.next() {
            Some(after) => after,
            None => {
                // Halfway between the quickest answer and the latest
                // point given up before it; done when nothing was
                // answered (every point was given up).
                let Some(&hi) = answered.iter().min() else {
                    break;
                };
                let lo = lost
                    .iter()
                    .copied()
                    .filter(|&l| l < hi)
                    .max()
                    .unwrap_or_default();
                let mid = (lo + hi) / 2;
                // Done, or nothing in between (answered at once).
                if closing_in == CLOSING_IN || mid == lo {
                    break;
                }
                closing_in += 1;
                mid
            }
        };
        let e = election(&format!("lost-answer-{}us", after.as_micros()));
        match give_up_and_retry(c, &e, after, settle).await {
            Ok(Point::Answered(took, what)) => {
                every.push(format!("{after:?}: answered in {took:?}: {what}"));
                // (It may have come in the last poll, after the point.)
                answered.push(took.min(after));
            }
            Ok(Point::Retried(what)) => {
                every.push(format!("{after:?}: {what}"));
                lost.push(after);
            }
            Err(why) => {
                every.push(format!("{after:?}: FAILED: {why}"));
                failed.push(after);
                lost.push(after);
            }
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    let mut message = format!(
        "a's acquire retried after its first one's answer was lost must win a new term (held \
         by a itself, the lost call's term, which nobody renews, leaves the election without \
         a leader until it expires), and b must win after a released it; not so when the \
         first was given up after {failed:?}; at every point:"
    );
    for line in &every {
        let _ = write!(message, "\n    {line}");
    }
    Err(message)
}

/// How a point of [`retried_acquire_after_a_lost_answer_wins`] passed.
enum Point {
    /// The first acquire answered in time, after this long: nothing to
    /// retry.
    Answered(Duration, String),
    /// It was given up (or failed), and the retry won.
    Retried(String),
}

/// Polls `call` until it answers or `after` has passed since the first
/// poll, by the system's clock, yielding to the runtime between polls;
/// then drops it unanswered. With the answer, if it came, how long it
/// took.
async fn give_up_after<T>(after: Duration, call: impl Future<Output = T>) -> (Option<T>, Duration) {
    let sent = Instant::now();
    let mut call = pin!(call);
    loop {
        let polled = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        if let Poll::Ready(answer) = polled {
            return (Some(answer), sent.elapsed());
        }
        if sent.elapsed() >= after {
            return (None, sent.elapsed());
        }
        tokio::task::yield_now().await;
    }
}

/// One point of [`retried_acquire_after_a_lost_answer_wins`]: what
/// happened when it passed, why it failed otherwise.
async fn give_up_and_retry<H: Harness>(
    c: &Ctx<'_, H>,
    e: &ElectionName,
    after: Duration,
    settle: Duration,
) -> Result<Point, String> {
    let req = |who: &str| AcquireRequest {
        election: e.clone(),
        ..c.req(who)
    };
    let leader = || async { ok("current_leader", c.store.current_leader(e).await) };

    // A term before: a token floor, and a record the store has written.
    let before = win(c, &req("b"), "b, before").await?;
    ok("release b", c.store.release(&before).await)?;
    let mut floor = before.token;

    let a = req("a");
    let (answer, took) = give_up_after(after, c.store.try_acquire(&a, None)).await;
    let lost = match answer {
        Some(Ok(Acquire::Won(lease))) => {
            ok("release a", c.store.release(&lease).await)?;
            return Ok(Point::Answered(
                took,
                format!("won (token {})", lease.token),
            ));
        }
        Some(Ok(Acquire::Held { leader, .. })) => {
            return Err(format!(
                "a's first acquire, answered in time, was held by {} though nobody led",
                who(leader.as_ref())
            ));
        }
        Some(Err(error)) => format!("answered with an error ({error})"),
        None => "given up".to_owned(),
    };
    tokio::time::sleep(settle).await;
    let orphan = leader().await?;
    if let Some(o) = &orphan {
        floor = floor.max(o.token);
    }
    let seen = match &orphan {
        Some(o) => format!("{lost}; current_leader then showed {}", who(Some(o))),
        None => format!("{lost}; current_leader then showed no leader"),
    };

    let retried = match ok("a's retried acquire", c.store.try_acquire(&a, None).await)? {
        Acquire::Won(lease) => lease,
        Acquire::Held {
            leader: Some(l), ..
        } if l.holder == a.holder => {
            return Err(format!(
                "{seen}; the retry was held by a itself (token {})",
                l.token
            ));
        }
        Acquire::Held { leader, .. } => {
            return Err(format!(
                "{seen}; the retry was held by {} though nobody else acquired",
                who(leader.as_ref())
            ));
        }
    };
    let check = |holds: bool, why: String| if holds { Ok(()) } else { Err(why) };
    check(
        retried.token > floor,
        format!(
            "{seen}; the retry won token {}, not above {floor} (b's term before, or the lost \
             call's): a token handed out twice, or going back",
            retried.token
        ),
    )?;
    let now = leader().await?;
    check(
        now.as_ref().map(|l| (&l.holder, l.token)) == Some((&a.holder, retried.token)),
        format!(
            "{seen}; the retry won token {}, but current_leader shows {}",
            retried.token,
            who(now.as_ref())
        ),
    )?;
    ok("release a's retried term", c.store.release(&retried).await)?;
    let after = match ok(
        "b's acquire after a",
        c.store.try_acquire(&req("b"), None).await,
    )? {
        Acquire::Won(lease) => lease,
        Acquire::Held { leader, .. } => {
            return Err(format!(
                "{seen}; the retry won token {}, but after a released it b was held by {}",
                retried.token,
                who(leader.as_ref())
            ));
        }
    };
    ok("release b", c.store.release(&after).await)?;
    check(
        after.token > retried.token,
        format!(
            "{seen}; b won token {} after a's retried term {}",
            after.token, retried.token
        ),
    )?;
    Ok(Point::Retried(format!(
        "{seen}; the retry won token {}",
        retried.token
    )))
}

/// Wins `req` in an election nobody leads.
async fn win<H: Harness>(
    c: &Ctx<'_, H>,
    req: &AcquireRequest,
    what: &str,
) -> Result<Lease, String> {
    match ok(
        &format!("acquire by {what}"),
        c.store.try_acquire(req, None).await,
    )? {
        Acquire::Won(lease) => Ok(lease),
        Acquire::Held { leader, .. } => Err(format!(
            "{what} should have won a free election, but it is held by {}",
            who(leader.as_ref())
        )),
    }
}

/// A leader as the failures show it.
fn who(leader: Option<&LeaderInfo>) -> String {
    match leader {
        Some(l) => format!("{} (token {})", l.holder, l.token),
        None => "nobody named".to_owned(),
    }
}
