//! Winning a blob's lease: the fencing token of a new term (see the crate
//! docs, "Fencing tokens"), sending the acquire and writing the term's
//! record under the new lease, and giving back a lease won but not used.

use jiff::Timestamp;
use reqwest::Method;

use regent_core::{AcquireRequest, ErrorKind, FencingToken, StoreError};

use crate::blob::{AzblobStore, failed};
use crate::record::{self, BlobState};
use crate::rest::Request;

/// A fencing token is `second × TOKENS_PER_SECOND + n`: see [the crate
/// docs](crate#fencing-tokens).
pub const TOKENS_PER_SECOND: u64 = 1_000_000;

/// How many times (half a second each) a first term on a blob waits,
/// before it acquires the lease, for the service's clock to pass the
/// blob's creation by two seconds (see [the crate
/// docs](crate#fencing-tokens)).
pub(crate) const CLOCK_WAITS: u32 = 6;

impl AzblobStore {
    /// The token of a term that began on the service's clock at `now` on a
    /// blob in `state`: see [the crate docs](crate#fencing-tokens). `None`
    /// for a blob's first term while `now` is not two seconds past the
    /// blob's creation.
    fn next_token(
        &self,
        blob: &str,
        state: &BlobState,
        now: Timestamp,
    ) -> Result<Option<FencingToken>, StoreError> {
        let floor = u64::try_from(now.as_second())
            .ok()
            .and_then(|s| s.checked_mul(TOKENS_PER_SECOND));
        let token = match &state.last {
            Some(last) => last
                .token
                .get()
                .checked_add(1)
                .and_then(|next| floor.map(|f| next.max(f))),
            None if !clock_past_creation(state, now) => return Ok(None),
            None => floor,
        };
        token.map(|t| Some(FencingToken::new(t))).ok_or_else(|| {
            StoreError::corrupt(format!(
                "the fencing token of blob {} cannot grow any more",
                self.place(blob)
            ))
        })
    }

    /// Sends the acquire `request` of `lease_id` on `blob` (read as
    /// `state`) and writes the term's record under it: the record's ETag
    /// and the token, or `None` when a race was lost (the blob leased or
    /// changed meanwhile, or the acquire answered by a clock behind the
    /// one that made the blob).
    pub(crate) async fn win(
        &self,
        req: &AcquireRequest,
        blob: &str,
        state: &BlobState,
        request: &Request<'_>,
        lease_id: &str,
    ) -> Result<Option<(String, FencingToken)>, StoreError> {
        let what = || format!("acquire the lease on blob {}", self.place(blob));
        let answer = self.inner.client.send(request, &what).await?;
        match answer.status {
            201 | 200 => {}
            // Leased by someone else, changed since read, or deleted.
            409 | 412 | 404 => {
                tracing::debug!(answer = %answer.describe(), "azblob: acquire lost a race");
                return Ok(None);
            }
            _ => return Err(failed(what(), &answer)),
        }
        let now = answer.date().ok_or_else(|| no_date(&what()))?;
        let Some(token) = self.next_token(blob, state, now)? else {
            return Ok(None);
        };
        // The record, written under the new lease and only on the blob as
        // read: the token is final once this succeeds.
        let mut request = Request::new(Method::PUT, &self.inner.container, Some(blob))
            .query("comp", "metadata")
            .header("x-ms-lease-id", lease_id)
            .if_match(state.etag.clone());
        for (name, value) in record::record_headers(&req.holder, token, &req.metadata) {
            request = request.header(name, value);
        }
        let what = || format!("write the lease record of blob {}", self.place(blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            200 => {}
            // The lease was broken, or the blob changed, since we won it.
            409 | 412 | 404 => {
                tracing::debug!(answer = %answer.describe(), "azblob: the lease went before its record was written");
                return Ok(None);
            }
            _ => return Err(failed(what(), &answer)),
        }
        let etag = answer.header("etag").ok_or_else(|| {
            StoreError::new(
                ErrorKind::Protocol,
                format!("{}: the service's answer has no ETag", what()),
            )
        })?;
        Ok(Some((etag.to_owned(), token)))
    }

    /// Gives back a lease won but not used, by its id; errors only logged
    /// (it expires by its duration).
    pub(crate) async fn abandon(&self, blob: &str, lease_id: &str) {
        if let Err(e) = self.release_id(blob, lease_id).await {
            tracing::warn!(error = %e, "azblob: could not give back a lease won but not used; it expires by its duration");
        }
    }
}

/// Refuses a record the service would not keep, before anything is sent.
pub(crate) fn check_record_size(headers: &[(String, String)]) -> Result<(), StoreError> {
    let size = record::metadata_size(headers);
    if size > record::MAX_METADATA_BYTES {
        return Err(StoreError::new(
            ErrorKind::Config,
            format!(
                "azblob store: the holder's metadata takes {size} bytes in the lease record \
                 (base64 of its JSON), more than the {} bytes of metadata a blob can have",
                record::MAX_METADATA_BYTES
            ),
        ));
    }
    Ok(())
}

fn no_date(what: &str) -> StoreError {
    StoreError::new(
        ErrorKind::Protocol,
        format!("{what}: the service's answer has no readable Date"),
    )
}

/// Whether the service's clock at `now` is two seconds past the second
/// the blob in `state` was last written (made, for a blob without a
/// record): then a first token taken from `now` exceeds every token of an
/// earlier blob of that name.
pub(crate) fn clock_past_creation(state: &BlobState, now: Timestamp) -> bool {
    now.as_second() > state.last_modified.as_second() + 1
}
