//! The Azure Blob store against Azurite: regent's store conformance suite,
//! and what is the Blob service's own: leases broken, blobs deleted or
//! written by an operator, foreign acquires, garbage in the record, ttls
//! the service refuses.
//!
//! The tests of this binary share one Azurite (the test kit's
//! [`SharedAzurite`]), each in a container of its own, and run in
//! parallel: blob leases last 15 s at least.

use std::time::{Duration, Instant};

use regent_azblob::{AzblobStore, MIN_TTL, StorageAccount, TOKENS_PER_SECOND};
use regent_core::testing::Harness;
use regent_core::{
    Acquire, Candidate, ConfigError, ElectionName, EndReason, ErrorKind, LeaseStore, Renewal,
    SafetyClass, StoreStyle, WatchMode,
};
use regent_testkit::engines::SharedAzurite;
use regent_testkit::engines::azurite::operator_request;

mod common;
use common::{break_lease, election, operator, share, store};
use regent_testkit::fixtures::{acquire_request as req, holder};

/// Breaks the blob's lease, if any, and deletes the blob.
async fn delete_blob(share: &SharedAzurite, blob: &str) {
    break_lease(share, blob).await;
    let r = operator(share, "DELETE", blob, &[], vec![]).await;
    assert!(matches!(r.status, 202 | 404), "delete {blob}: {r:?}");
}

/// Replaces the blob (or creates it, and its container) with an empty one
/// carrying `metadata`.
async fn put_blob(share: &SharedAzurite, blob: &str, metadata: &[(&'static str, &str)]) {
    let addr = share.addr();
    let container = format!("/{}", share.container());
    let r = tokio::task::spawn_blocking(move || {
        operator_request(addr, "PUT", &container, &[("restype", "container")], &[])
            .expect("create the container")
    })
    .await
    .unwrap();
    assert!(matches!(r.status, 201 | 409), "create the container: {r:?}");
    let mut headers = vec![("x-ms-blob-type", "BlockBlob".to_owned())];
    headers.extend(metadata.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let r = operator(share, "PUT", blob, &[], headers).await;
    assert_eq!(r.status, 201, "put {blob}: {r:?}");
}

struct ConformanceHarness {
    share: SharedAzurite,
}

impl Harness for ConformanceHarness {
    type Store = AzblobStore;

    async fn store(&self) -> AzblobStore {
        store(&self.share)
    }

    async fn unreachable_store(&self) -> AzblobStore {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let account = StorageAccount::development()
            .with_endpoint(&format!("http://127.0.0.1:{port}/devstoreaccount1"))
            .expect("a valid endpoint");
        AzblobStore::builder(account, self.share.container())
            .call_timeout(Duration::from_secs(2))
            .build()
            .expect("building sends nothing")
    }

    fn ttl(&self) -> Duration {
        MIN_TTL
    }

    async fn delete_records(&self, election: &ElectionName) {
        delete_blob(&self.share, election.as_str()).await;
    }

    async fn put_garbage(&self, election: &ElectionName) {
        put_blob(
            &self.share,
            election.as_str(),
            &[
                ("x-ms-meta-regentrecord", "1"),
                ("x-ms-meta-regentholder", "someone"),
                ("x-ms-meta-regenttoken", "not-a-number"),
            ],
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn azblob_store_conforms() {
    let harness = ConformanceHarness { share: share() };
    regent_core::testing::run(&harness).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_declares_the_lease_range_and_a_ttl_outside_is_refused() {
    let share = share();
    let info = store(&share).info();
    assert_eq!(info.name, "azblob");
    assert_eq!(info.style, StoreStyle::Race);
    assert_eq!(info.watch, WatchMode::Poll(Duration::from_secs(1)));
    assert_eq!(info.safety, SafetyClass::Consensus);
    assert_eq!(
        (info.min_ttl, info.max_ttl),
        (Duration::from_secs(15), Duration::from_secs(60))
    );
    let err = Candidate::builder(store(&share), election("short"), holder("a"))
        .ttl(Duration::from_secs(10))
        .build()
        .expect_err("blob leases last 15 s at least");
    assert!(
        matches!(
            err,
            ConfigError::TtlBelowStoreMinimum {
                store: "azblob",
                ..
            }
        ),
        "{err:?}"
    );
    let err = Candidate::builder(store(&share), election("long"), holder("a"))
        .ttl(Duration::from_secs(61))
        .build()
        .expect_err("blob leases last 60 s at most");
    assert!(
        matches!(err, ConfigError::TtlAboveStoreMaximum { .. }),
        "{err:?}"
    );
    // A ttl in range but not whole seconds is granted rounded up.
    let lease = match store(&share)
        .try_acquire(
            &req(&election("round"), "a", Duration::from_millis(15_500)),
            None,
        )
        .await
        .unwrap()
    {
        Acquire::Won(lease) => lease,
        other => panic!("a free election: {other:?}"),
    };
    assert_eq!(lease.ttl, Duration::from_secs(16));
    store(&share).release(&lease).await.unwrap();
}

fn candidate(store: AzblobStore, election: &ElectionName, who: &str) -> Candidate<AzblobStore> {
    Candidate::builder(store, election.clone(), holder(who))
        .ttl(MIN_TTL)
        .renew_every(Duration::from_secs(1))
        .retry_every(Duration::from_millis(500))
        .grace(Duration::from_millis(200))
        .build()
        .expect("valid timing")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_broken_from_outside_ends_leadership_at_the_next_renewal() {
    let share = share();
    let e = election("broken");
    let a = candidate(store(&share), &e, "a");
    let leadership = a.campaign().await.expect("a leads");
    let token = leadership.token();

    // A foreign acquire while a leads: the service refuses it.
    let foreign = operator(
        &share,
        "PUT",
        e.as_str(),
        &[("comp", "lease")],
        vec![
            ("x-ms-lease-action", "acquire".into()),
            ("x-ms-lease-duration", "15".into()),
        ],
    )
    .await;
    assert_eq!(foreign.status, 409, "{foreign:?}");
    assert!(leadership.check().is_ok());

    let broken = Instant::now();
    let r = break_lease(&share, e.as_str()).await;
    assert_eq!(r.status, 202, "{r:?}");
    let ended = tokio::time::timeout(Duration::from_secs(10), leadership.until_ended())
        .await
        .expect("leadership ends after the break");
    let took = broken.elapsed();
    eprintln!("leadership ended {took:?} after the break: {ended:?}");
    assert!(
        matches!(ended.reason, EndReason::Lost),
        "a break is a lost lease: {ended:?}"
    );
    // One renew interval (1 s) and one call (2 s at most).
    assert!(took < Duration::from_secs(3), "{took:?}");

    // b takes over at once, with a larger token; a follows.
    let b = candidate(store(&share), &e, "b");
    let b_leads = tokio::time::timeout(Duration::from_secs(5), b.campaign())
        .await
        .expect("b leads at once")
        .expect("b leads");
    assert!(b_leads.token() > token);
    b_leads.resign().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn break_lease_is_the_operators_break() {
    let share = share();
    let e = election("break-api");
    let s = store(&share);
    assert!(
        !s.break_lease(&e, Duration::ZERO).await.unwrap(),
        "no blob, no lease"
    );
    let lease = match s.try_acquire(&req(&e, "a", MIN_TTL), None).await.unwrap() {
        Acquire::Won(lease) => lease,
        other => panic!("{other:?}"),
    };
    assert!(s.break_lease(&e, Duration::ZERO).await.unwrap());
    assert_eq!(s.renew(&lease).await.unwrap(), Renewal::Lost);
    assert_eq!(s.current_leader(&e).await.unwrap(), None);
    let err = s
        .break_lease(&e, Duration::from_millis(1500))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_written_behind_an_expired_lease_is_not_renewed() {
    // The service renews an expired lease nobody took since; Azurite even
    // after the blob was written meanwhile. regent's renewal requires the
    // record its term wrote.
    let share = share();
    let e = election("rewritten");
    let s = store(&share);
    let lease = match s.try_acquire(&req(&e, "a", MIN_TTL), None).await.unwrap() {
        Acquire::Won(lease) => lease,
        other => panic!("{other:?}"),
    };
    tokio::time::sleep(MIN_TTL + Duration::from_millis(500)).await;
    // Free now: anyone may write it without a lease id.
    let r = operator(
        &share,
        "PUT",
        e.as_str(),
        &[("comp", "metadata")],
        vec![
            ("x-ms-meta-regentrecord", "1".into()),
            ("x-ms-meta-regentholder", "intruder".into()),
            ("x-ms-meta-regenttoken", (lease.token.get() + 5).to_string()),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(s.renew(&lease).await.unwrap(), Renewal::Lost);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_that_is_not_a_record_is_an_error_never_a_takeover() {
    let share = share();
    let s = store(&share);
    for (name, metadata, want) in [
        (
            "foreign-meta",
            vec![("x-ms-meta-owner", "ops")],
            "metadata 'owner'",
        ),
        (
            "bad-token",
            vec![
                ("x-ms-meta-regentrecord", "1"),
                ("x-ms-meta-regentholder", "x"),
                ("x-ms-meta-regenttoken", "07"),
            ],
            "not a number",
        ),
        (
            "newer",
            vec![("x-ms-meta-regentrecord", "9")],
            "newer regent",
        ),
    ] {
        let e = election(name);
        put_blob(&share, name, &metadata).await;
        let err = s
            .try_acquire(&req(&e, "a", MIN_TTL), None)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{name}: {err}");
        let text = err.to_string();
        assert!(text.contains(want) && text.contains(name), "{name}: {text}");
        let err = s.current_leader(&e).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt, "{name}: {err}");
        // Nothing was taken: the blob has no lease.
        let props = operator(&share, "HEAD", name, &[], vec![]).await;
        assert_eq!(
            props.header("x-ms-lease-state"),
            Some("available"),
            "{name}"
        );
    }

    // An infinite lease is someone else's: named, not waited on silently.
    let e = election("forever");
    put_blob(&share, "forever", &[]).await;
    let r = operator(
        &share,
        "PUT",
        "forever",
        &[("comp", "lease")],
        vec![
            ("x-ms-lease-action", "acquire".into()),
            ("x-ms-lease-duration", "-1".into()),
        ],
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    let err = s
        .try_acquire(&req(&e, "a", MIN_TTL), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("infinite lease"), "{err}");

    // An empty blob without metadata (the reference sample's, or one made
    // by hand) is adopted.
    let e = election("unclaimed");
    put_blob(&share, "unclaimed", &[]).await;
    match s.try_acquire(&req(&e, "a", MIN_TTL), None).await.unwrap() {
        Acquire::Won(lease) => s.release(&lease).await.unwrap(),
        other => panic!("an unclaimed blob: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_grow_across_a_blob_made_again_within_the_same_second() {
    let share = share();
    let e = election("remade");
    let s = store(&share);
    let mut last = 0;
    for round in 0..3 {
        let lease = match s.try_acquire(&req(&e, "a", MIN_TTL), None).await.unwrap() {
            Acquire::Won(lease) => lease,
            other => panic!("round {round}: {other:?}"),
        };
        assert!(
            lease.token.get() > last,
            "round {round}: {} !> {last}",
            lease.token
        );
        assert!(lease.token.get() >= 1_700_000_000 * TOKENS_PER_SECOND);
        last = lease.token.get();
        // The blob deleted and made again at once, by an operator.
        delete_blob(&share, e.as_str()).await;
        put_blob(&share, e.as_str(), &[]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_blob_and_a_prefix_name_the_blob() {
    let share = share();
    let account = StorageAccount::from_connection_string(share.connection_string()).unwrap();
    let fixed = AzblobStore::builder(account.clone(), share.container())
        .blob("MyLeaderCoordinatorTask")
        .build()
        .unwrap();
    let e = election("anything");
    let lease = match fixed
        .try_acquire(&req(&e, "a", MIN_TTL), None)
        .await
        .unwrap()
    {
        Acquire::Won(lease) => lease,
        other => panic!("{other:?}"),
    };
    let props = operator(&share, "HEAD", "MyLeaderCoordinatorTask", &[], vec![]).await;
    assert_eq!(props.header("x-ms-lease-state"), Some("leased"));
    assert_eq!(props.header("x-ms-meta-regentholder"), Some("a"));
    fixed.release(&lease).await.unwrap();

    let prefixed = AzblobStore::builder(account, share.container())
        .blob_prefix("team/a/")
        .build()
        .unwrap();
    let lease = match prefixed
        .try_acquire(&req(&e, "b", MIN_TTL), None)
        .await
        .unwrap()
    {
        Acquire::Won(lease) => lease,
        other => panic!("{other:?}"),
    };
    let props = operator(&share, "HEAD", "team/a/anything", &[], vec![]).await;
    assert_eq!(
        props.header("x-ms-meta-regentholder"),
        Some("b"),
        "{props:?}"
    );
    prefixed.release(&lease).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_is_an_auth_error_that_names_no_secret() {
    let share = share();
    let account = StorageAccount::with_key("devstoreaccount1", "d3Jvbmcta2V5")
        .unwrap()
        .with_endpoint(share.blob_endpoint())
        .unwrap();
    let s = AzblobStore::builder(account, share.container())
        .build()
        .unwrap();
    let err = s
        .try_acquire(&req(&election("auth"), "a", MIN_TTL), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    let text = format!("{err} {err:?}");
    assert!(
        !text.contains("d3Jvbmcta2V5") && !text.contains("SharedKey"),
        "{text}"
    );
}

/// An account SAS for the development account, signed with its key as
/// `az storage account generate-sas` does: blob service, every resource
/// type, `permissions`, valid until 2099.
fn account_sas(permissions: &str) -> String {
    use base64::Engine as _;
    let (version, expiry) = ("2021-12-02", "2099-01-01T00:00:00Z");
    let to_sign = format!(
        "{}\n{permissions}\nb\nsco\n\n{expiry}\n\nhttps,http\n{version}\n\n",
        regent_azblob::DEVELOPMENT_ACCOUNT
    );
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = ring::hmac::Key::new(
        ring::hmac::HMAC_SHA256,
        &b64.decode(regent_azblob::DEVELOPMENT_KEY).unwrap(),
    );
    let sig = b64.encode(ring::hmac::sign(&key, to_sign.as_bytes()));
    let sig: String = sig
        .chars()
        .map(|c| match c {
            '+' => "%2B".to_owned(),
            '/' => "%2F".to_owned(),
            '=' => "%3D".to_owned(),
            c => c.to_string(),
        })
        .collect();
    format!("sv={version}&ss=b&srt=sco&sp={permissions}&se={expiry}&spr=https,http&sig={sig}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sas_token_authorizes_the_store_and_a_read_only_one_is_refused() {
    let share = share();
    let e = election("sas");
    let connection = |sas: &str| {
        format!(
            "BlobEndpoint={};SharedAccessSignature={sas}",
            share.blob_endpoint()
        )
    };
    let account =
        StorageAccount::from_connection_string(&connection(&account_sas("rwdlac"))).unwrap();
    assert!(!account.uses_shared_key());
    let s = AzblobStore::builder(account, share.container())
        .build()
        .unwrap();
    let lease = match s.try_acquire(&req(&e, "a", MIN_TTL), None).await.unwrap() {
        Acquire::Won(lease) => lease,
        other => panic!("{other:?}"),
    };
    assert_eq!(s.renew(&lease).await.unwrap(), Renewal::Renewed);
    s.release(&lease).await.unwrap();

    let account = StorageAccount::from_connection_string(&connection(&account_sas("rl"))).unwrap();
    let read_only = AzblobStore::builder(account, share.container())
        .build()
        .unwrap();
    let err = read_only
        .try_acquire(&req(&e, "b", MIN_TTL), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(!err.to_string().contains("sig="), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_endpoint_is_transient_and_never_shows_the_sas() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let account = StorageAccount::from_connection_string(&format!(
        "BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;SharedAccessSignature=sv=2021-12-02&sig=topsecret"
    ))
    .unwrap();
    let s = AzblobStore::builder(account, "leases").build().unwrap();
    let e = election("nowhere");
    let err = s
        .try_acquire(&req(&e, "a", MIN_TTL), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let err = s.current_leader(&e).await.unwrap_err();
    let mut text = format!("{err} {err:?}");
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        text.push_str(&s.to_string());
        source = s.source();
    }
    assert!(
        !text.contains("topsecret") && !text.contains("sig="),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_too_large_for_a_blob_is_refused_before_anything_is_sent() {
    // Nothing listens there: a Config error proves nothing was sent.
    let account = StorageAccount::development()
        .with_endpoint("http://127.0.0.1:9/devstoreaccount1")
        .unwrap();
    let s = AzblobStore::builder(account, "leases").build().unwrap();
    let metadata =
        regent_core::Metadata::from_pairs((0..700).map(|i| (format!("k{i:03}"), "\"".to_owned())))
            .expect("within the core's bound");
    let mut request = req(&election("big"), "a", MIN_TTL);
    request.metadata = metadata;
    let err = s.try_acquire(&request, None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(err.to_string().contains("8192 bytes"), "{err}");
    // And a metadata update, for a lease of any term.
    let lease = regent_core::Lease {
        election: election("big"),
        holder: holder("a"),
        token: regent_core::FencingToken::new(1),
        ttl: MIN_TTL,
        handle: regent_core::LeaseHandle::new("00000000-0000-0000-0000-000000000000 \"0x1\""),
    };
    let err = s
        .update_metadata(&lease, &request.metadata)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(err.to_string().contains("8192 bytes"), "{err}");
}

/// A metadata update gives the record a new ETag, which renewals must send
/// (`If-Match`): renewals and updates of one term sent together on one
/// store (the candidate's renewal loop and the leader's task) all succeed,
/// and the record ends with the update's metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn renewals_and_updates_of_one_term_racing_keep_the_lease() {
    let share = share();
    let s = store(&share);
    let e = election("race-update");
    let Acquire::Won(a) = s.try_acquire(&req(&e, "a", MIN_TTL), None).await.unwrap() else {
        panic!("a wins an empty election");
    };
    for round in 0..10 {
        let m = regent_core::Metadata::from_pairs([("round", round.to_string())]).unwrap();
        let (updated, renewed, again) =
            tokio::join!(s.update_metadata(&a, &m), s.renew(&a), s.renew(&a));
        assert_eq!(updated.unwrap(), Renewal::Renewed, "round {round}");
        assert_eq!(renewed.unwrap(), Renewal::Renewed, "round {round}");
        assert_eq!(again.unwrap(), Renewal::Renewed, "round {round}");
        let leader = s.current_leader(&e).await.unwrap().expect("a leads");
        assert_eq!((&leader.holder, leader.token), (&a.holder, a.token));
        assert_eq!(leader.metadata, m);
    }
    s.release(&a).await.unwrap();
    assert_eq!(s.current_leader(&e).await.unwrap(), None, "released");
}

fn who(value: &str) -> regent_core::Metadata {
    regent_core::Metadata::from_pairs([("who", value)]).unwrap()
}

/// What a store lists of `e`'s roster: holders and their `who`.
async fn listed(s: &AzblobStore, e: &ElectionName) -> Vec<(String, String)> {
    s.candidates(e)
        .await
        .expect("garbage is skipped, not an error")
        .expect("a roster")
        .into_iter()
        .map(|c| {
            let w = c.metadata.get("who").unwrap_or_default().to_owned();
            (c.holder.as_str().to_owned(), w)
        })
        .collect()
}

/// Blobs under an election's roster that are not regent's entries
/// (foreign metadata, a ttl that is no number, metadata that is not
/// base64, a holder other than the blob's name) are skipped, never a
/// panic nor an error; an id that is no plain blob name round-trips;
/// another connection sees the entries and withdraws them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_roster_skips_blobs_that_are_not_regents() {
    let share = share();
    let (one, two) = (store(&share), store(&share));
    let e = election("roster-garbage");
    let mut a = req(&e, "a", MIN_TTL);
    a.metadata = who("a1");
    one.enroll(&a).await.unwrap();
    let mut odd = req(&e, "n/1.", MIN_TTL);
    odd.metadata = who("n1");
    one.enroll(&odd).await.unwrap();
    let prefix = one.roster_prefix(&e);
    assert_eq!(prefix, "roster-garbage~roster/");
    assert_eq!(
        one.roster_blob(&e, &holder("n/1.")),
        format!("{prefix}n~2F1~2E")
    );
    let entry = |h: &'static str, ttl: &'static str| {
        vec![
            ("x-ms-meta-regentroster", "1"),
            ("x-ms-meta-regentholder", h),
            ("x-ms-meta-regentttl", ttl),
        ]
    };
    put_blob(
        &share,
        &format!("{prefix}mallory"),
        &[("x-ms-meta-owner", "ops")],
    )
    .await;
    put_blob(&share, &format!("{prefix}eve"), &entry("b", "15000")).await;
    put_blob(&share, &format!("{prefix}bad"), &entry("bad", "soon")).await;
    let mut meta = entry("meta", "15000");
    meta.push(("x-ms-meta-regentmetadata", "!!"));
    put_blob(&share, &format!("{prefix}meta"), &meta).await;
    let want = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(h, w)| ((*h).to_owned(), (*w).to_owned()))
            .collect()
    };
    assert_eq!(listed(&two, &e).await, want(&[("a", "a1"), ("n/1.", "n1")]));
    two.withdraw(&e, &holder("n/1.")).await.unwrap();
    two.withdraw(&e, &holder("n/1.")).await.unwrap();
    assert_eq!(listed(&one, &e).await, want(&[("a", "a1")]));

    // An entry whose ttl has passed on the service's clock is no longer
    // listed, and the next withdrawal deletes its blob (the garbage stays:
    // not regent's).
    one.enroll(&req(&e, "old", Duration::from_millis(1)))
        .await
        .unwrap();
    // Its ttl, and the second of the service's whole-second stamps.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(listed(&one, &e).await, want(&[("a", "a1")]));
    two.withdraw(&e, &holder("a")).await.unwrap();
    let old = one.roster_blob(&e, &holder("old"));
    assert_eq!(
        operator(&share, "HEAD", &old, &[], vec![]).await.status,
        404
    );
    let mallory = format!("{prefix}mallory");
    assert_eq!(
        operator(&share, "HEAD", &mallory, &[], vec![]).await.status,
        200
    );
    assert_eq!(listed(&one, &e).await, want(&[]));
    // An election nobody enrolled in, in a container that may not exist.
    assert_eq!(listed(&one, &election("nobody")).await, want(&[]));
}

/// A lease given to a successor is kept for it on the service: another
/// connection's acquire (a store that knows nothing of the hand-over) is
/// held off and sees no leader; the successor wins through a third, with a
/// greater token, and its record no longer keeps the election for anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_is_honoured_by_another_connection() {
    let share = share();
    let (one, two) = (store(&share), store(&share));
    let e = election("reserved");
    let Acquire::Won(a) = one.try_acquire(&req(&e, "a", MIN_TTL), None).await.unwrap() else {
        panic!("a wins an empty election");
    };
    let passed = one
        .release_to(&a, &holder("b"), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(passed, regent_core::HandOff::ToSuccessor);
    let props = operator(&share, "HEAD", e.as_str(), &[], vec![]).await;
    assert_eq!(props.header("x-ms-lease-state"), Some("available"));
    assert_eq!(props.header("x-ms-meta-regentreservedfor"), Some("b"));
    assert_eq!(two.current_leader(&e).await.unwrap(), None);
    for who in ["c", "a"] {
        match two.try_acquire(&req(&e, who, MIN_TTL), None).await.unwrap() {
            Acquire::Held { leader: None, .. } => {}
            other => panic!("{who} must be held off while the lease is b's: {other:?}"),
        }
    }
    let Acquire::Won(b) = store(&share)
        .try_acquire(&req(&e, "b", MIN_TTL), None)
        .await
        .unwrap()
    else {
        panic!("b takes the lease kept for it");
    };
    assert!(b.token > a.token, "{} !> {}", b.token, a.token);
    let leader = one.current_leader(&e).await.unwrap().expect("b leads");
    assert_eq!((leader.holder, leader.token), (holder("b"), b.token));
    let props = operator(&share, "HEAD", e.as_str(), &[], vec![]).await;
    assert_eq!(props.header("x-ms-meta-regentreservedfor"), None);
    assert_eq!(two.renew(&b).await.unwrap(), Renewal::Renewed);
    // Given by a lease no longer its own: nothing happens.
    assert_eq!(
        one.release_to(&a, &holder("c"), Duration::from_secs(10))
            .await
            .unwrap(),
        regent_core::HandOff::Released
    );
    two.release(&b).await.unwrap();
    assert_eq!(one.current_leader(&e).await.unwrap(), None);
}
