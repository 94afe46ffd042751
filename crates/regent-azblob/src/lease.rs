//! A blob lease as the store uses it: the durations the service grants,
//! a new lease id, the lease's handle (its id and the ETag of the record
//! its term wrote), and the term a store keeps of each lease it renews,
//! updates or releases, which tells the record that term wrote.

use std::time::Duration;

use regent_core::{ErrorKind, FencingToken, HolderId, Lease, LeaseHandle, Metadata, StoreError};

use crate::record::BlobState;

/// The shortest lease the Blob service grants: 15 s.
pub const MIN_TTL: Duration = Duration::from_secs(15);

/// The longest finite lease the Blob service grants: 60 s.
pub const MAX_TTL: Duration = Duration::from_secs(60);

/// The lease duration for `ttl`: whole seconds, rounded up (granting more
/// is allowed).
pub(crate) fn lease_seconds(ttl: Duration) -> u64 {
    ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)
}

/// A random lease id in the GUID form the service takes.
pub(crate) fn new_lease_id() -> String {
    let n = fastrand::u128(..);
    let h = format!("{n:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// A lease's handle: the lease id and the ETag of the record the term
/// wrote, which every renewal requires unchanged.
pub(crate) fn handle(lease_id: &str, etag: &str) -> LeaseHandle {
    LeaseHandle::new(format!("{lease_id} {etag}"))
}

pub(crate) fn parse_handle(lease: &Lease) -> Result<(&str, &str), StoreError> {
    lease
        .handle
        .as_str()
        .split_once(' ')
        .filter(|(id, etag)| {
            id.len() == 36
                && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
                && !etag.is_empty()
                && etag.bytes().all(|b| b.is_ascii_graphic())
        })
        .ok_or_else(|| {
            StoreError::new(
                ErrorKind::Protocol,
                "azblob store: this lease was not made by an azblob store (its handle is not a \
                 lease id and an ETag)",
            )
        })
}

/// A term as its lease names it: lease id, holder and token. A lease
/// forged from another's id (another holder or token) is another term, so
/// that what it meets never touches the real one's.
pub(crate) type TermKey = (String, HolderId, FencingToken);

/// What a store knows of one of its terms beyond the lease's handle. Its
/// lock makes the term's renewals, metadata updates and release run one at
/// a time: each reads the record's ETag and writes `If-Match` it, and an
/// update changes it.
#[derive(Debug, Default)]
pub(crate) struct Term {
    /// The ETag of the record as this term's last confirmed metadata update
    /// left it; `None`: as the acquire wrote it (the handle's).
    pub(crate) etag: Option<String>,
    /// The metadata of an update sent whose answer never came (dropped,
    /// timed out): the record may show it, under an ETag never learned.
    pub(crate) pending: Option<Metadata>,
}

impl Term {
    /// The ETag under which `state` is the record `lease`'s term last
    /// wrote, or `None` when it is not. `written` is the ETag of the
    /// record the acquire wrote (the handle's).
    ///
    /// Invariant: only this term writes records with its holder and token
    /// (a later term's token is larger), so a record that shows them with
    /// the metadata of an update still `pending` is that update's; its
    /// ETag becomes the one known.
    pub(crate) fn recognise(
        &mut self,
        state: &BlobState,
        lease: &Lease,
        written: &str,
    ) -> Option<String> {
        let known = self.etag.as_deref().unwrap_or(written);
        if is_record_of(state, lease, known) {
            return Some(known.to_owned());
        }
        let last = state.last.as_ref()?;
        let applied = self.pending.as_ref().is_some_and(|pending| {
            last.holder == lease.holder && last.token == lease.token && &last.metadata == pending
        });
        if !applied {
            return None;
        }
        self.etag = Some(state.etag.clone());
        self.pending = None;
        Some(state.etag.clone())
    }
}

pub(crate) fn term_key(lease: &Lease, lease_id: &str) -> TermKey {
    (lease_id.to_owned(), lease.holder.clone(), lease.token)
}

/// Whether `state` is the record `lease`'s term wrote, unchanged since.
fn is_record_of(state: &BlobState, lease: &Lease, etag: &str) -> bool {
    state.etag == etag
        && state
            .last
            .as_ref()
            .is_some_and(|l| l.holder == lease.holder && l.token == lease.token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use regent_core::{ElectionName, LeaderInfo};

    use crate::record::LeaseState;

    #[test]
    fn leases_round_up_to_whole_seconds_and_ids_look_like_guids() {
        assert_eq!(lease_seconds(Duration::from_secs(15)), 15);
        assert_eq!(lease_seconds(Duration::from_millis(15_001)), 16);
        let id = new_lease_id();
        assert_eq!(id.len(), 36);
        assert_eq!(id.matches('-').count(), 4);
        assert_ne!(id, new_lease_id());
    }

    #[test]
    fn a_term_recognises_its_record_and_an_update_whose_answer_never_came() {
        let old = Metadata::new();
        let new = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        let lease = Lease {
            election: ElectionName::new("jobs").unwrap(),
            holder: HolderId::new("a").unwrap(),
            token: FencingToken::new(7),
            ttl: MIN_TTL,
            handle: handle(&new_lease_id(), "\"0x1\""),
        };
        let blob = |etag: &str, holder: &str, token: u64, metadata: &Metadata| BlobState {
            etag: etag.to_owned(),
            last_modified: Timestamp::UNIX_EPOCH,
            lease: LeaseState::Held,
            last: Some(LeaderInfo {
                holder: HolderId::new(holder).unwrap(),
                token: FencingToken::new(token),
                metadata: metadata.clone(),
            }),
            reserved: None,
        };
        let written = "\"0x1\"";
        let mut term = Term::default();
        let seen = |term: &mut Term, state: BlobState| term.recognise(&state, &lease, written);
        assert_eq!(
            seen(&mut term, blob(written, "a", 7, &old)).as_deref(),
            Some(written)
        );
        assert_eq!(
            seen(&mut term, blob("\"0x2\"", "a", 7, &old)),
            None,
            "written meanwhile"
        );

        // An update sent whose answer never came.
        term.pending = Some(new.clone());
        assert_eq!(
            seen(&mut term, blob(written, "a", 7, &old)).as_deref(),
            Some(written),
            "not applied (yet)"
        );
        assert_eq!(seen(&mut term, blob("\"0x3\"", "b", 8, &new)), None);
        assert_eq!(seen(&mut term, blob("\"0x3\"", "a", 6, &new)), None);
        assert_eq!(
            seen(&mut term, blob("\"0x3\"", "a", 7, &new)).as_deref(),
            Some("\"0x3\""),
            "applied: its ETag is the term's now"
        );
        assert!(term.pending.is_none());
        assert_eq!(
            seen(&mut term, blob("\"0x3\"", "a", 7, &new)).as_deref(),
            Some("\"0x3\"")
        );
        assert_eq!(
            seen(&mut term, blob(written, "a", 7, &old)),
            None,
            "the acquire's record is no longer the term's"
        );
    }
}
