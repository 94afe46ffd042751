//! Smoke test: regent's `Candidate` on the SQLite store campaigns, leads
//! past its ttl by renewing, resigns, and a waiting candidate takes over.

mod common;

use std::time::Duration;

use regent_core::{Candidate, LeaseStore, Status};
use regent_sqlite::SqliteStore;

use common::{election, holder};

/// Bounds every wait, so that a bug fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_candidate_leads_resigns_and_another_takes_over() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("regent.db");
    let ttl = Duration::from_millis(600);
    let e = election("smoke");
    // Two stores: two connections, as two processes would have.
    let a = Candidate::builder(
        SqliteStore::open(&path).await.expect("open"),
        e.clone(),
        holder("a"),
    )
    .ttl(ttl)
    .build()
    .expect("valid timing");
    let b = Candidate::builder(
        SqliteStore::open(&path).await.expect("open"),
        e.clone(),
        holder("b"),
    )
    .ttl(ttl)
    .build()
    .expect("valid timing");

    let a_leads = tokio::time::timeout(PATIENCE, a.campaign())
        .await
        .expect("campaign ends")
        .expect("a wins the free election");
    let b_campaign = tokio::spawn({
        let b = b.clone();
        async move { b.campaign().await }
    });
    // b follows a.
    let mut b_status = b.status();
    tokio::time::timeout(
        PATIENCE,
        b_status.wait_for(
            |s| matches!(s, Status::Follower { leader: Some(l) } if l.holder == holder("a")),
        ),
    )
    .await
    .expect("b sees a lead")
    .expect("status channel open");

    // a keeps the lease past its ttl by renewing it.
    tokio::time::sleep(ttl * 2).await;
    assert!(a_leads.check().is_ok(), "a still leads");
    let leader = a.store().current_leader(&e).await.expect("read");
    assert_eq!(
        leader.map(|l| (l.holder, l.token)),
        Some((holder("a"), a_leads.token()))
    );
    assert!(!b_campaign.is_finished(), "b must not win while a leads");

    let a_token = a_leads.token();
    a_leads.resign().await.expect("resign releases the lease");
    // The lease was released, not left to expire: the election is free (or
    // b has it) the moment resign returns.
    let after = a.store().current_leader(&e).await.expect("read");
    assert!(
        after.as_ref().is_none_or(|l| l.holder == holder("b")),
        "{after:?}"
    );
    let b_leads = tokio::time::timeout(PATIENCE, b_campaign)
        .await
        .expect("b takes over soon after a resigns")
        .expect("join")
        .expect("b wins");
    assert!(b_leads.token() > a_token);
    b_leads.resign().await.expect("resign");
    a.shutdown().await;
    b.shutdown().await;
    assert_eq!(b.store().current_leader(&e).await.expect("read"), None);
}
