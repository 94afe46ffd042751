//! [`AzblobStore`]'s [`LeaseStore`] contract: acquire, renew, update the
//! metadata, release, read the leader and watch (a poll), each on the
//! election's blob and the term the store keeps of its lease. The
//! requests on blobs are [`crate::blob`]'s, winning a lease
//! [`crate::acquire`]'s, the lease, its handle and its term
//! [`crate::lease`]'s.

use std::time::Duration;

use reqwest::Method;

use regent_core::store::{ExpirySlack, poll_watch};
use regent_core::{
    Acquire, AcquireRequest, Candidacy, ElectionName, ErrorKind, FencingToken, HandOff, HolderId,
    LeaderInfo, LeaderStream, Lease, LeaseStore, Metadata, Renewal, SafetyClass, StoreError,
    StoreInfo, StoreStyle, WatchMode,
};

use crate::acquire::{CLOCK_WAITS, check_record_size, clock_past_creation};
use crate::blob::failed;
use crate::lease::{MAX_TTL, MIN_TTL, handle, lease_seconds, new_lease_id, parse_handle};
use crate::record::{self, LeaseState};
use crate::rest::Request;

// What `target.rs` imports from here.
pub(crate) use crate::blob::AzblobStore;
pub(crate) use crate::builder::{AzblobStoreBuilder, DEFAULT_CALL_TIMEOUT};

/// How much later than its duration the service may free a dead holder's
/// lease: the service ends a lease on its own clock, its duration after
/// the acquire or renew arrived; 1 s covers the whole-second durations and
/// the clocks of the service's front ends. Azurite was measured at under
/// 5 ms.
pub const EXPIRY_SLACK: ExpirySlack = ExpirySlack::fixed(Duration::from_secs(1));

impl LeaseStore for AzblobStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "azblob",
            StoreStyle::Race,
            WatchMode::Poll(self.inner.poll_interval),
            SafetyClass::Consensus,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL)
        .with_expiry_slack(EXPIRY_SLACK)
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        _queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        if !self.info().ttl_in_range(req.ttl) {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "azblob store: a blob lease lasts 15 to 60 s; the ttl {:?} is outside",
                    req.ttl
                ),
            ));
        }
        let seconds = lease_seconds(req.ttl);
        let blob = self.blob_name(&req.election);
        // The largest record this holder can write (the longest token),
        // within the service's limit, before anything is sent.
        check_record_size(&record::record_headers(
            &req.holder,
            FencingToken::new(u64::MAX),
            &req.metadata,
        ))?;
        let (mut state, mut answer) = self.read_or_create(&blob).await?;
        // A blob's first term waits for the service's clock here, before
        // its lease runs (see the crate docs, Fencing tokens).
        let mut waits = 0;
        while state.last.is_none()
            && state.lease == LeaseState::Free
            && !answer
                .date()
                .is_some_and(|now| clock_past_creation(&state, now))
        {
            if waits == CLOCK_WAITS {
                return Err(StoreError::unavailable(format!(
                    "the service's clock ({}) does not pass the creation of blob {} ({}) by two \
                     seconds: the first token of a blob is taken from it",
                    answer.header("date").unwrap_or("no Date"),
                    self.place(&blob),
                    state.last_modified
                )));
            }
            waits += 1;
            tokio::time::sleep(Duration::from_millis(500)).await;
            (state, answer) = self.read_or_create(&blob).await?;
        }
        self.refuse_forever(&state, &blob)?;
        if state.lease == LeaseState::Held {
            return Ok(Acquire::Held {
                leader: state.leader(),
                queued: None,
            });
        }
        // Kept for a successor, by the service's clock (see the crate
        // docs, "Roster and hand-over"). The acquire below is on this
        // ETag: a reservation written since is never missed.
        if let Some((successor, until)) = &state.reserved
            && *successor != req.holder
        {
            let now = answer.date().ok_or_else(|| {
                StoreError::new(
                    ErrorKind::Protocol,
                    format!(
                        "reading blob {}: the service's answer has no readable Date",
                        self.place(&blob)
                    ),
                )
            })?;
            if u64::try_from(now.as_millisecond()).is_ok_and(|now| now < *until) {
                return Ok(Acquire::Held {
                    leader: None,
                    queued: None,
                });
            }
        }
        // Acquire only the blob as read: a record written meanwhile (by a
        // winner's first steps) makes the service refuse.
        let lease_id = new_lease_id();
        let request = self
            .lease_request(&blob, "acquire")
            .header("x-ms-lease-duration", seconds.to_string())
            .header("x-ms-proposed-lease-id", lease_id.clone())
            .if_match(state.etag.clone());
        // From here on, whatever does not end in a term gives back the
        // lease ours may hold: an answer lost or busy may hide an acquire
        // that was applied all the same.
        match self.win(req, &blob, &state, &request, &lease_id).await {
            Ok(Some((etag, token))) => Ok(Acquire::Won(Lease {
                election: req.election.clone(),
                holder: req.holder.clone(),
                token,
                ttl: Duration::from_secs(seconds),
                handle: handle(&lease_id, &etag),
            })),
            Ok(None) => {
                self.abandon(&blob, &lease_id).await;
                Ok(Acquire::Held {
                    leader: self.leader_now(&blob).await.unwrap_or(None),
                    queued: None,
                })
            }
            Err(e) => {
                self.abandon(&blob, &lease_id).await;
                Err(e)
            }
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let (lease_id, written) = parse_handle(lease)?;
        let blob = self.blob_name(&lease.election);
        let term = self.term(lease, lease_id);
        let mut term = term.lock().await;
        // The service renews an expired lease that nobody took since: read
        // first, so that an expired lease is never revived. (A renewal that
        // arrives within the milliseconds between this read and the lease
        // running out revives it still; nobody led meanwhile, and a
        // candidate steps down long before.)
        let found = self.read(&blob).await?;
        let etag = match &found {
            Some((state, _)) if state.lease == LeaseState::Held => {
                term.recognise(state, lease, written)
            }
            _ => None,
        };
        let Some(etag) = etag else {
            tracing::info!(
                blob = %self.place(&blob),
                state = ?found.map(|(s, _)| s.lease),
                "azblob: the lease is lost (expired, broken, or the record changed)"
            );
            drop(term);
            self.forget_term(lease, lease_id);
            return Ok(Renewal::Lost);
        };
        // Renewed only while the record is the one this term wrote: Azurite
        // (3.35) renews even a lease whose blob was written meanwhile.
        let request = self
            .lease_request(&blob, "renew")
            .header("x-ms-lease-id", lease_id)
            .if_match(etag.clone());
        let what = || format!("renew the lease on blob {}", self.place(&blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            200 if answer.header("etag").is_none_or(|e| e == etag) => Ok(Renewal::Renewed),
            200 | 404 | 409 | 412 => {
                tracing::info!(answer = %answer.describe(), blob = %self.place(&blob), "azblob: the lease is lost");
                drop(term);
                self.forget_term(lease, lease_id);
                Ok(Renewal::Lost)
            }
            _ => Err(failed(what(), &answer)),
        }
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let (lease_id, written) = parse_handle(lease)?;
        let blob = self.blob_name(&lease.election);
        let headers = record::record_headers(&lease.holder, lease.token, metadata);
        check_record_size(&headers)?;
        let term = self.term(lease, lease_id);
        let mut term = term.lock().await;
        // Read first, as renew does: Set Blob Metadata under an expired
        // lease must not write a record nobody holds.
        let etag = match self.read(&blob).await? {
            Some((state, _)) if state.lease == LeaseState::Held => {
                term.recognise(&state, lease, written)
            }
            _ => None,
        };
        let Some(etag) = etag else {
            drop(term);
            self.forget_term(lease, lease_id);
            return Ok(Renewal::Lost);
        };
        // The whole record again (Set Blob Metadata replaces all of it),
        // under our lease and only on the record as read. Until its answer
        // comes, the record may show it under an ETag this store does not
        // know: `pending` lets the next call recognise it.
        term.pending = Some(metadata.clone());
        let mut request = Request::new(Method::PUT, &self.inner.container, Some(&blob))
            .query("comp", "metadata")
            .header("x-ms-lease-id", lease_id)
            .if_match(etag);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let what = || format!("update the lease record of blob {}", self.place(&blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            200 => {
                let etag = answer.header("etag").ok_or_else(|| {
                    StoreError::new(
                        ErrorKind::Protocol,
                        format!("{}: the service's answer has no ETag", what()),
                    )
                })?;
                term.etag = Some(etag.to_owned());
                term.pending = None;
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                    "azblob: updated the metadata"
                );
                Ok(Renewal::Renewed)
            }
            // The lease expired or was broken, or the record changed, since
            // the read.
            404 | 409 | 412 => {
                tracing::info!(answer = %answer.describe(), blob = %self.place(&blob), "azblob: the lease is lost");
                drop(term);
                self.forget_term(lease, lease_id);
                Ok(Renewal::Lost)
            }
            _ => Err(failed(what(), &answer)),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let (lease_id, written) = parse_handle(lease)?;
        let blob = self.blob_name(&lease.election);
        let term = self.term(lease, lease_id);
        let mut term = term.lock().await;
        // Only the record this lease wrote: its holder, its token, its
        // ETag. Anything else is not ours to free.
        let released = match self.read(&blob).await {
            Ok(Some((state, _))) if term.recognise(&state, lease, written).is_some() => {
                self.release_id(&blob, lease_id).await
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        // The term is over, released or not: it expires by its duration.
        drop(term);
        self.forget_term(lease, lease_id);
        released
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.leader_now(&self.blob_name(election)).await
    }

    /// The roster: one List Blobs of the entries' blobs (see the crate
    /// docs, "Roster and hand-over").
    async fn candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Option<Vec<Candidacy>>, StoreError> {
        self.roster(election).await.map(Some)
    }

    /// The entry's blob written again: one Put Blob.
    async fn enroll(&self, req: &AcquireRequest) -> Result<(), StoreError> {
        self.enroll_entry(req).await
    }

    async fn withdraw(&self, election: &ElectionName, holder: &HolderId) -> Result<(), StoreError> {
        self.withdraw_entry(election, holder).await
    }

    /// The record kept for the successor under the lease, then the lease
    /// released; the successor's record clears it.
    async fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        self.release_reserved(lease, successor, window).await
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        poll_watch(self.clone(), election.clone(), self.inner.poll_interval).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::StorageAccount;
    use crate::builder::DEFAULT_POLL_INTERVAL;

    fn store() -> AzblobStoreBuilder {
        AzblobStore::builder(StorageAccount::development(), "leases")
    }

    #[test]
    fn info_declares_the_service_range() {
        let info = store().build().unwrap().info();
        assert_eq!((info.min_ttl, info.max_ttl), (MIN_TTL, MAX_TTL));
        assert!(!info.ttl_in_range(Duration::from_secs(14)));
        assert!(info.ttl_in_range(Duration::from_secs(60)));
        assert_eq!(info.watch, WatchMode::Poll(DEFAULT_POLL_INTERVAL));
    }
}
