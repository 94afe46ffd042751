//! The checks of contract items 10 and 11: a race store's roster of
//! candidates, and a lease given to a named successor.

use std::time::Duration;

use super::harness::{Check, Ctx, Harness, ensure, holder, ok};
use crate::store::{Acquire, AcquireRequest, HandOff, LeaseStore, StoreStyle};
use crate::types::Metadata;

/// The holders a store lists, with the value each published under `who`.
async fn listed<H: Harness>(c: &Ctx<'_, H>) -> Result<Option<Vec<(String, String)>>, String> {
    Ok(
        ok("candidates", c.store.candidates(&c.election).await)?.map(|list| {
            list.iter()
                .map(|c| {
                    (
                        c.holder.as_str().to_owned(),
                        c.metadata.get("who").unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        }),
    )
}

fn with_who(c: &Ctx<'_, impl Harness>, who: &str, value: &str) -> AcquireRequest {
    AcquireRequest {
        metadata: Metadata::from_pairs([("who", value)]).expect("small"),
        ..c.req(who)
    }
}

/// Item 10 (race stores with a roster): enrolled candidates are listed in
/// holder order with their metadata, whatever the lease does; enrolling
/// again refreshes the metadata; a withdrawn one goes (twice is
/// harmless); an entry not refreshed lapses by its ttl; enrolling never
/// wins or holds the election.
pub(super) async fn roster_lists_the_enrolled<H: Harness>(c: &Ctx<'_, H>) -> Check {
    if c.store.info().style != StoreStyle::Race {
        return Ok(());
    }
    if listed(c).await?.is_none() {
        // This store keeps no roster.
        return Ok(());
    }
    for (who, value) in [("b", "b1"), ("a", "a1"), ("c", "c1")] {
        ok(
            &format!("enroll {who}"),
            c.store.enroll(&with_who(c, who, value)).await,
        )?;
    }
    let list = listed(c).await?;
    let want = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(h, v)| ((*h).to_owned(), (*v).to_owned()))
                .collect::<Vec<_>>(),
        )
    };
    ensure!(
        list == want(&[("a", "a1"), ("b", "b1"), ("c", "c1")]),
        "a, b and c enrolled, but the store listed {list:?}"
    );
    ensure!(c.leader().await?.is_none(), "enrolling made someone leader");
    let lease = c.win("b").await?;
    ok(
        "enroll a again",
        c.store.enroll(&with_who(c, "a", "a2")).await,
    )?;
    ok(
        "withdraw c",
        c.store.withdraw(&c.election, &holder("c")).await,
    )?;
    ok(
        "withdraw c again",
        c.store.withdraw(&c.election, &holder("c")).await,
    )?;
    let list = listed(c).await?;
    ensure!(
        list == want(&[("a", "a2"), ("b", "b1")]),
        "after a enrolled again and c withdrew, the store listed {list:?}"
    );
    ok("renew b", c.store.renew(&lease).await)?;
    ok("release b", c.store.release(&lease).await)?;
    c.wait_expiry().await;
    let list = listed(c).await?;
    ensure!(
        list == want(&[]),
        "entries not refreshed for a ttl should have lapsed, but the store listed {list:?}"
    );
    Ok(())
}

/// Item 11: a lease given to a named successor goes to it alone. A race
/// store that reserves: until the window passes nobody else wins (`Held`,
/// no leader), the successor wins with a greater token, and a reservation
/// its successor never took lapses after the window. A queue store whose
/// line holds regent's records only must hand over: the successor is next
/// once the leader's record went, and the candidates that stood between
/// queue again behind it. A race store that answers `Released` (it keeps
/// no reservation) freed the lease as `release` does.
pub(super) async fn release_to_gives_the_lease_to_the_successor<H: Harness>(
    c: &Ctx<'_, H>,
) -> Check {
    if c.store.info().style == StoreStyle::Queue {
        return queue_release_to(c).await;
    }
    let a = c.win("a").await?;
    let window = c.ttl;
    let passed = ok(
        "release_to b",
        c.store.release_to(&a, &holder("b"), window).await,
    )?;
    if passed == HandOff::Released {
        // A store with a roster takes part in hand-overs: it must reserve.
        let roster = ok("candidates", c.store.candidates(&c.election).await)?;
        ensure!(
            roster.is_none(),
            "a race store with a roster should keep the lease for b, but release_to answered Released"
        );
        let b = c.win("b").await?;
        return ok("release b", c.store.release(&b).await);
    }
    ensure!(
        c.leader().await?.is_none(),
        "a lease given to b shows a leader"
    );
    match c.acquire("c").await? {
        Acquire::Held { leader: None, .. } => {}
        other => {
            return Err(format!(
                "c should be held off while the lease is b's to take, got {other:?}"
            ));
        }
    }
    let b = c.win("b").await?;
    ensure!(
        b.token > a.token,
        "b's token {} should be greater than a's {}",
        b.token.get(),
        a.token.get()
    );
    // A reservation nobody takes lapses after its window.
    let window = Duration::from_millis(300).min(c.ttl / 2);
    ok(
        "release_to a",
        c.store.release_to(&b, &holder("a"), window).await,
    )?;
    match c.acquire("c").await? {
        Acquire::Held { leader: None, .. } => {}
        other => {
            return Err(format!(
                "c should be held off while the lease is a's to take, got {other:?}"
            ));
        }
    }
    c.wait_expiry().await;
    let c_lease = c
        .win("c")
        .await
        .map_err(|e| format!("after the window passed: {e}"))?;
    // Giving what is no longer ours gives nothing.
    ok(
        "release_to by b, no longer b's",
        c.store.release_to(&b, &holder("a"), c.ttl).await,
    )?;
    ensure!(
        c.leader().await?.is_some_and(|l| l.holder.as_str() == "c"),
        "b gave away c's lease"
    );
    ok("release c", c.store.release(&c_lease).await)
}

async fn queue_release_to<H: Harness>(c: &Ctx<'_, H>) -> Check {
    let a = c.win("a").await?;
    let mut places = Vec::new();
    for who in ["b", "c", "d"] {
        match c.acquire(who).await? {
            Acquire::Held {
                queued: Some(q), ..
            } => places.push(q),
            other => return Err(format!("{who} should be queued, got {other:?}")),
        }
    }
    let passed = ok(
        "release_to d",
        c.store.release_to(&a, &holder("d"), c.ttl).await,
    )?;
    // Every record in line is regent's: nothing stops the hand-over.
    ensure!(
        passed == HandOff::ToSuccessor,
        "a line of regent's records only should pass the lease to d, but release_to answered {passed:?}"
    );
    let d_place = places.pop().expect("three queued");
    match c.store.try_acquire(&c.req("d"), Some(&d_place)).await {
        Ok(Acquire::Won(d)) => {
            ensure!(d.token > a.token, "d's token should be greater than a's");
            // b and c queue again, behind d.
            for q in &places {
                match c
                    .store
                    .try_acquire(&c.req(q.holder.as_str()), Some(q))
                    .await
                {
                    Ok(Acquire::Held {
                        leader: Some(l),
                        queued: Some(again),
                    }) if l.holder.as_str() == "d" => {
                        ensure!(
                            again.token > d.token,
                            "{}'s new place ({}) should stand behind d's ({})",
                            q.holder,
                            again.token.get(),
                            d.token.get()
                        );
                        ok("release a new place", c.store.release(&again).await)?;
                    }
                    other => {
                        return Err(format!("{} should queue behind d, got {other:?}", q.holder));
                    }
                }
            }
            ok("release d", c.store.release(&d).await)?;
        }
        other => {
            return Err(format!("after release_to d, d's acquire got {other:?}"));
        }
    }
    c.wait_expiry().await;
    Ok(())
}
