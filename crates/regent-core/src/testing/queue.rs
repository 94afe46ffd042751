//! The checks only a queue store runs: its line passes to the next in
//! place, a win restarts the ttl, a retried acquire queues once.

use std::time::Duration;

use super::harness::{Check, Ctx, Harness, ensure, ok};
use crate::store::{Acquire, LeaseStore, Renewal};

/// Queue stores: a `Won` for a queued place restarts its ttl in the same
/// call, as the contract requires (the holder measures from that call).
pub(super) async fn queue_win_restarts_the_ttl<H: Harness>(c: &Ctx<'_, H>) -> Check {
    let a = c.win("a").await?;
    let Acquire::Held {
        queued: Some(qb), ..
    } = c.acquire("b").await?
    else {
        return Err("b was not queued".into());
    };
    tokio::time::sleep(c.ttl.mul_f64(0.6)).await;
    ok("release a", c.store.release(&a).await)?;
    let Acquire::Won(b) = ok(
        "acquire by b",
        c.store.try_acquire(&c.req("b"), Some(&qb)).await,
    )?
    else {
        return Err("b did not win after a left".into());
    };
    tokio::time::sleep(c.ttl.mul_f64(0.6)).await;
    let r = ok("renew b", c.store.renew(&b).await)?;
    ensure!(
        r == Renewal::Renewed,
        "b's lease lapsed 1.2 ttl after queueing: Won did not restart the ttl"
    );
    ok("release b", c.store.release(&b).await)
}

/// Queue stores: an acquire whose answer never came (the caller gave up on
/// it: a timeout, a dropped future) may still have made a place in line;
/// the acquire retried after it queues once. Had the lost one left a
/// second place, the holder would still stand in line after releasing its
/// lease: the lost place would lead, for nobody, until it lapsed.
pub(super) async fn retried_acquire_queues_once<H: Harness>(c: &Ctx<'_, H>) -> Check {
    let mut a = c.win("a").await?;
    // Give up on b's first acquire at points from before it sends to after
    // it is answered.
    for after_us in [0_u64, 50, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000] {
        let first = tokio::time::timeout(
            Duration::from_micros(after_us),
            c.store.try_acquire(&c.req("b"), None),
        )
        .await;
        if let Ok(answered) = first {
            // Answered in time: an ordinary place, given back.
            if let Ok(Acquire::Held {
                queued: Some(q), ..
            }) = answered
            {
                ok("release b's answered place", c.store.release(&q).await)?;
            }
            continue;
        }
        let Acquire::Held {
            queued: Some(qb), ..
        } = c.acquire("b").await?
        else {
            return Err("b's retried acquire was not queued behind a".into());
        };
        ok("release a", c.store.release(&a).await)?;
        let b = match ok(
            "acquire by b",
            c.store.try_acquire(&c.req("b"), Some(&qb)).await,
        )? {
            Acquire::Won(b) => b,
            Acquire::Held { leader, .. } => {
                return Err(format!(
                    "b did not lead after a left (given up after {after_us} µs): held by {:?}; \
                     the lost acquire's place stands before b's",
                    leader.map(|l| (l.holder, l.token))
                ));
            }
        };
        ok("release b", c.store.release(&b).await)?;
        if let Some(l) = c.leader().await? {
            return Err(format!(
                "after b released (its first acquire given up after {after_us} µs), {} leads \
                 with token {}: the lost acquire queued a second place",
                l.holder, l.token
            ));
        }
        a = c.win("a").await?;
    }
    // A store that answers within the first poll (the memory store, with
    // no delay set) loses no answer, and there is nothing to retry; a store
    // on the network never does (etcd and ZooKeeper gave up at 0 µs).
    ok("release a", c.store.release(&a).await)
}

/// Queue stores: when the head leaves, the next in line wins with the token
/// of its queued record; the one behind it stays queued.
pub(super) async fn queue_passes_to_next_in_line<H: Harness>(c: &Ctx<'_, H>) -> Check {
    let a = c.win("a").await?;
    let mut places = Vec::new();
    for who in ["b", "c"] {
        match c.acquire(who).await? {
            Acquire::Held {
                queued: Some(q), ..
            } => places.push(q),
            other => return Err(format!("{who} should be queued, got {other:?}")),
        }
    }
    ok("release a", c.store.release(&a).await)?;
    let b = match ok(
        "acquire by b",
        c.store.try_acquire(&c.req("b"), Some(&places[0])).await,
    )? {
        Acquire::Won(l) => l,
        other => return Err(format!("b is next in line but got {other:?}")),
    };
    ensure!(
        b.token == places[0].token && b.token > a.token,
        "b's token {} (queued {}, a {})",
        b.token,
        places[0].token,
        a.token
    );
    match ok(
        "acquire by c",
        c.store.try_acquire(&c.req("c"), Some(&places[1])).await,
    )? {
        Acquire::Held { leader, .. } => ensure!(
            leader.map(|l| l.holder) == Some(b.holder.clone()),
            "c must see b lead"
        ),
        other => return Err(format!("c is behind b but got {other:?}")),
    }
    ok("release b", c.store.release(&b).await)?;
    ok("release c", c.store.release(&places[1]).await)
}
