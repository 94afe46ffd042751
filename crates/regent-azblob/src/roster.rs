//! The roster of an election's candidates and the lease kept for a
//! successor (contract items 10 and 11; see the crate docs, "Roster and
//! hand-over"): a blob per roster entry, timed by the service's clock
//! (its `Last-Modified` against the `Date` of the listing), and a
//! reservation written into the election's record under the lease before
//! it is released.

use std::time::Duration;

use jiff::Timestamp;
use reqwest::Method;

use regent_core::{
    AcquireRequest, Candidacy, ElectionName, HandOff, HolderId, Lease, LeaseStore, StoreError,
};

use crate::acquire::check_record_size;
use crate::blob::{AzblobStore, failed};
use crate::lease::parse_handle;
use crate::record::{self, LeaseState};
use crate::rest::{Answer, Request, parse_http_date};

/// Milliseconds of `d`, rounded up.
fn millis_up(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// Milliseconds since 1970 of a time the service stamped.
fn millis(t: Timestamp) -> u64 {
    u64::try_from(t.as_millisecond()).unwrap_or(0)
}

/// One blob of a listing, as far as the roster reads it.
#[derive(Debug, PartialEq, Eq)]
struct Listed {
    name: String,
    /// As `If-Match` takes it (quoted).
    etag: Option<String>,
    last_modified: Timestamp,
    content_length: u64,
    metadata: Vec<(String, String)>,
}

impl AzblobStore {
    /// Where `election`'s roster lives: the election's blob, then
    /// `~roster/` (no election name holds a `~`, so no election's blob
    /// starts so).
    pub fn roster_prefix(&self, election: &ElectionName) -> String {
        format!("{}~roster/", self.blob_name(election))
    }

    /// The blob of `holder`'s entry on `election`'s roster: the
    /// [roster prefix](Self::roster_prefix), then the holder id with every
    /// byte other than ASCII letters, digits, `-`, `_` and `.` (and a
    /// final `.`) written `~XX` in hex.
    pub fn roster_blob(&self, election: &ElectionName, holder: &HolderId) -> String {
        format!("{}{}", self.roster_prefix(election), holder.to_segment())
    }

    /// Contract item 10: the entry's blob written again (Put Blob, empty,
    /// the entry in its metadata), which stamps it with the service's
    /// clock.
    pub(crate) async fn enroll_entry(&self, req: &AcquireRequest) -> Result<(), StoreError> {
        let blob = self.roster_blob(&req.election, &req.holder);
        let headers = record::roster_headers(&req.holder, millis_up(req.ttl), &req.metadata);
        check_record_size(&headers)?;
        let mut request = Request::new(Method::PUT, &self.inner.container, Some(&blob))
            .header("x-ms-blob-type", "BlockBlob");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let what = || format!("enroll '{}' as blob {}", req.holder, self.place(&blob));
        let mut answer = self.inner.client.send(&request, &what).await?;
        if answer.status == 404 {
            self.create_container().await?;
            answer = self.inner.client.send(&request, &what).await?;
        }
        match answer.status {
            201 => Ok(()),
            _ => Err(failed(what(), &answer)),
        }
    }

    /// Contract item 10: the entry's blob deleted; twice is harmless.
    /// The entries of the election whose time has passed (of candidates
    /// that stopped without withdrawing, or crashed) are deleted with it,
    /// each only as listed (`If-Match` its ETag), so that an entry
    /// enrolled again meanwhile stays.
    pub(crate) async fn withdraw_entry(
        &self,
        election: &ElectionName,
        holder: &HolderId,
    ) -> Result<(), StoreError> {
        let blob = self.roster_blob(election, holder);
        self.delete_entry(&blob, None).await?;
        // Best effort: the entry is off the roster already.
        let listing = match self.listing(election).await {
            Ok(listing) => listing,
            Err(e) => {
                tracing::debug!(error = %e, "azblob: lapsed roster entries stay; the next withdrawal deletes them");
                return Ok(());
            }
        };
        for (listed, entry) in listing {
            if let (Ok(None), Some(etag)) = (entry, &listed.etag)
                && let Err(e) = self.delete_entry(&listed.name, Some(etag)).await
            {
                tracing::debug!(error = %e, "azblob: a lapsed roster entry stays; the next withdrawal deletes it");
            }
        }
        Ok(())
    }

    /// Deletes the roster blob `blob` (only as it was when its ETag was
    /// `etag`): gone or changed is no error.
    async fn delete_entry(&self, blob: &str, etag: Option<&String>) -> Result<(), StoreError> {
        let mut request = Request::new(Method::DELETE, &self.inner.container, Some(blob));
        if let Some(etag) = etag {
            request = request.if_match(etag.clone());
        }
        let what = || format!("withdraw: delete blob {}", self.place(blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            202 | 200 | 404 | 412 => Ok(()),
            _ => Err(failed(what(), &answer)),
        }
    }

    /// Contract items 9 and 10: List Blobs under the roster's prefix, with
    /// their metadata (one request per 5,000 entries); the entries whose
    /// `Last-Modified` plus their ttl (and a second, for the whole-second
    /// stamps) is still ahead of the listing's `Date`, in holder order. A
    /// blob that is not a roster entry regent wrote is skipped.
    pub(crate) async fn roster(
        &self,
        election: &ElectionName,
    ) -> Result<Vec<Candidacy>, StoreError> {
        let mut list: Vec<Candidacy> = self
            .listing(election)
            .await?
            .into_iter()
            .filter_map(|(_, entry)| entry.ok().flatten())
            .collect();
        list.sort_by(|a, b| a.holder.cmp(&b.holder));
        Ok(list)
    }

    /// Every blob under `election`'s roster prefix, each with what it
    /// shows: a live entry, one whose time has passed (`None`), or why it
    /// is no entry of regent's (logged, then skipped by the callers).
    async fn listing(
        &self,
        election: &ElectionName,
    ) -> Result<Vec<(Listed, Result<Option<Candidacy>, String>)>, StoreError> {
        let prefix = self.roster_prefix(election);
        let what = || format!("read the roster of election '{election}' (list {prefix}*)");
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut request = Request::new(Method::GET, &self.inner.container, None)
                .query("restype", "container")
                .query("comp", "list")
                .query("prefix", prefix.clone())
                .query("include", "metadata")
                .read_body();
            if let Some(m) = &marker {
                request = request.query("marker", m.clone());
            }
            let answer = self.inner.client.send(&request, &what).await?;
            match answer.status {
                200 => {}
                // No container: nobody enrolled.
                404 => return Ok(Vec::new()),
                _ => return Err(failed(what(), &answer)),
            }
            let protocol = |why: String| {
                StoreError::new(
                    regent_core::ErrorKind::Protocol,
                    format!("{}: {why}", what()),
                )
            };
            let now = answer
                .date()
                .ok_or_else(|| protocol("the service's answer has no readable Date".into()))?;
            let (blobs, next) = parse_listing(&answer)
                .map_err(|why| protocol(format!("the listing cannot be read: {why}")))?;
            for blob in blobs {
                match blob {
                    Ok(listed) => {
                        let entry = self.roster_entry(election, &listed, now);
                        if let Err(why) = &entry {
                            tracing::debug!(
                                why,
                                "azblob: skipped a roster blob that is not regent's"
                            );
                        }
                        out.push((listed, entry));
                    }
                    Err(why) => {
                        tracing::debug!(why, "azblob: skipped a roster blob that is not regent's");
                    }
                }
            }
            match next {
                Some(m) => marker = Some(m),
                None => return Ok(out),
            }
        }
    }

    /// The candidate a listed blob shows at the service's `now`: `None`
    /// when its time has passed, an error when it is not regent's.
    fn roster_entry(
        &self,
        election: &ElectionName,
        blob: &Listed,
        now: Timestamp,
    ) -> Result<Option<Candidacy>, String> {
        let name = regent_core::target::printable(&blob.name);
        if blob.content_length != 0 {
            return Err(format!("blob {name} holds {} bytes", blob.content_length));
        }
        let (holder, metadata, ttl) =
            record::parse_roster(&blob.metadata).map_err(|why| format!("blob {name}: {why}"))?;
        if blob.name != self.roster_blob(election, &holder) {
            return Err(format!("blob {name} names holder '{holder}'"));
        }
        // Written at or after the enroll was sent, stamped in whole
        // seconds (so up to a second early); `now` is whole seconds too, at
        // or before the service's time.
        let until = millis(blob.last_modified)
            .saturating_add(ttl)
            .saturating_add(1000);
        Ok((millis(now) < until).then(|| Candidacy::new(holder, metadata)))
    }

    /// Contract item 11: while the lease is still ours, the record written
    /// again under it with the successor and the end of the window (the
    /// service's `Date`, a second for its whole-second stamp, and the
    /// window), then the lease released.
    pub(crate) async fn release_reserved(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        if window.is_zero() {
            self.release(lease).await?;
            return Ok(HandOff::Released);
        }
        let (lease_id, written) = parse_handle(lease)?;
        let blob = self.blob_name(&lease.election);
        let term = self.term(lease, lease_id);
        let mut term = term.lock().await;
        let found = self.read(&blob).await?;
        let ours = found.and_then(|(state, answer)| {
            let etag = match state.lease {
                LeaseState::Held => term.recognise(&state, lease, written)?,
                LeaseState::Free | LeaseState::HeldForever => return None,
            };
            Some((state.last?, answer, etag))
        });
        let Some((last, answer, etag)) = ours else {
            // Not ours (any more): nothing to give.
            drop(term);
            self.forget_term(lease, lease_id);
            return Ok(HandOff::Released);
        };
        let headers = answer.date().map(|now| {
            let until = millis(now)
                .saturating_add(1000)
                .saturating_add(millis_up(window));
            record::reserved_headers(&last.holder, last.token, &last.metadata, successor, until)
        });
        let Some(headers) = headers.filter(|h| check_record_size(h).is_ok()) else {
            // No clock to time the window by, or no room for it beside the
            // holder's metadata: a plain release.
            let released = self.release_id(&blob, lease_id).await;
            drop(term);
            self.forget_term(lease, lease_id);
            return released.map(|()| HandOff::Released);
        };
        let mut request = Request::new(Method::PUT, &self.inner.container, Some(&blob))
            .query("comp", "metadata")
            .header("x-ms-lease-id", lease_id)
            .if_match(etag);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let what = || {
            format!(
                "keep the lease record of blob {} for '{successor}'",
                self.place(&blob)
            )
        };
        let answer = self.inner.client.send(&request, &what).await?;
        let passed = match answer.status {
            200 => {
                // The record's new ETag, for a release retried after this
                // one's failed.
                term.etag = answer.header("etag").map(str::to_owned);
                self.release_id(&blob, lease_id).await?;
                HandOff::ToSuccessor
            }
            // The lease expired or was broken, or the record changed,
            // since the read: nothing of ours left to give.
            404 | 409 | 412 => HandOff::Released,
            _ => return Err(failed(what(), &answer)),
        };
        drop(term);
        self.forget_term(lease, lease_id);
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            %successor, ?window, ?passed, "azblob: released to a successor"
        );
        Ok(passed)
    }
}

/// A List Blobs page: its blobs (each read, or why it cannot be) and the
/// marker of the next page.
type Page = (Vec<Result<Listed, String>>, Option<String>);

/// Reads a List Blobs page.
fn parse_listing(answer: &Answer) -> Result<Page, String> {
    let xml = std::str::from_utf8(&answer.body).map_err(|_| "it is not UTF-8".to_owned())?;
    if !xml.contains("<EnumerationResults") {
        return Err("it is not an EnumerationResults document".into());
    }
    let mut blobs = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find("<Blob>") {
        let after = &rest[start + "<Blob>".len()..];
        let end = after
            .find("</Blob>")
            .ok_or_else(|| "a <Blob> is not closed".to_owned())?;
        blobs.push(parse_blob(&after[..end]));
        rest = &after[end + "</Blob>".len()..];
    }
    let next = element(rest, "NextMarker")
        .map(unescape)
        .transpose()?
        .filter(|m| !m.is_empty());
    Ok((blobs, next))
}

fn parse_blob(xml: &str) -> Result<Listed, String> {
    let name = unescape(element(xml, "Name").ok_or("a blob without a <Name>")?)?;
    let shown = regent_core::target::printable(&name);
    let last_modified = element(xml, "Last-Modified")
        .and_then(parse_http_date)
        .ok_or_else(|| format!("blob {shown} has no readable Last-Modified"))?;
    // Quoted as in the ETag header, whether or not the listing quotes it.
    let etag = element(xml, "Etag")
        .map(str::trim)
        .filter(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_graphic()))
        .map(|e| {
            if e.starts_with('"') {
                e.to_owned()
            } else {
                format!("\"{e}\"")
            }
        });
    let content_length = element(xml, "Content-Length")
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("blob {shown} has no readable Content-Length"))?;
    let metadata = match element(xml, "Metadata") {
        None => Vec::new(),
        Some(inner) => children(inner).map_err(|why| format!("blob {shown}: {why}"))?,
    };
    Ok(Listed {
        name,
        etag,
        last_modified,
        content_length,
        metadata,
    })
}

/// The text of the first `<NAME>…</NAME>` in `xml`; `""` for `<NAME />`.
fn element<'x>(xml: &'x str, name: &str) -> Option<&'x str> {
    let open = format!("<{name}>");
    let empty = [format!("<{name} />"), format!("<{name}/>")];
    let at = xml.find(&open);
    let empty_at = empty.iter().filter_map(|e| xml.find(e.as_str())).min();
    match (at, empty_at) {
        (Some(a), Some(e)) if e < a => Some(""),
        (None, Some(_)) => Some(""),
        (None, None) => None,
        (Some(a), _) => {
            let start = a + open.len();
            let len = xml[start..].find(&format!("</{name}>"))?;
            Some(&xml[start..start + len])
        }
    }
}

/// The child elements of a `<Metadata>`: names and unescaped texts.
fn children(mut xml: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    loop {
        xml = xml.trim_start();
        if xml.is_empty() {
            return Ok(out);
        }
        let tag_and_rest = xml
            .strip_prefix('<')
            .ok_or("its metadata holds text outside an element")?;
        let end = tag_and_rest
            .find('>')
            .ok_or("its metadata has an element not closed")?;
        let tag = &tag_and_rest[..end];
        xml = &tag_and_rest[end + 1..];
        if let Some(name) = tag.strip_suffix('/') {
            out.push((name.trim().to_owned(), String::new()));
            continue;
        }
        if tag.is_empty() || tag.contains(|c: char| c.is_whitespace() || c == '/') {
            return Err(format!(
                "its metadata has an element '{}'",
                regent_core::target::printable(tag)
            ));
        }
        let close = format!("</{tag}>");
        let len = xml
            .find(&close)
            .ok_or("its metadata has an element not closed")?;
        out.push((tag.to_owned(), unescape(&xml[..len])?));
        xml = &xml[len + close.len()..];
    }
}

/// XML text with its five entities and character references replaced.
fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let end = after.find(';').ok_or("an '&' without ';'")?;
        let entity = &after[..end];
        let c = match entity {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => entity
                .strip_prefix("#x")
                .map(|h| u32::from_str_radix(h, 16))
                .or_else(|| entity.strip_prefix('#').map(str::parse))
                .and_then(Result::ok)
                .and_then(char::from_u32)
                .ok_or_else(|| {
                    format!(
                        "an unknown entity '&{};'",
                        regent_core::target::printable(entity)
                    )
                })?,
        };
        out.push(c);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::StorageAccount;
    use reqwest::header::HeaderMap;

    #[test]
    fn holders_make_plain_blob_names() {
        let h = |s: &str| HolderId::new(s).unwrap().to_segment();
        assert_eq!(h("node-1.example_2"), "node-1.example_2");
        assert_eq!(h("a/b"), "a~2Fb");
        assert_eq!(h("."), "~2E");
        assert_eq!(h(".."), ".~2E");
        assert_eq!(h("~%?#"), "~7E~25~3F~23");
        let store = AzblobStore::builder(StorageAccount::development(), "leases")
            .blob_prefix("team/")
            .build()
            .unwrap();
        let e = ElectionName::new("jobs").unwrap();
        assert_eq!(store.roster_prefix(&e), "team/jobs~roster/");
        assert_eq!(
            store.roster_blob(&e, &HolderId::new("n/1").unwrap()),
            "team/jobs~roster/n~2F1"
        );
    }

    fn listing(xml: &str) -> Answer {
        Answer {
            status: 200,
            headers: HeaderMap::new(),
            code: None,
            message: None,
            body: xml.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_listing_reads_its_blobs_and_garbage_never_panics() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="http://x/" ContainerName="c"><Prefix>e~roster/</Prefix><Blobs>
<Blob><Name>e~roster/a</Name><Properties><Etag>0x1</Etag><Last-Modified>Sun, 22 Nov 2026 10:00:07 GMT</Last-Modified><Content-Length>0</Content-Length></Properties><Metadata><regentroster>1</regentroster><regentholder>a&amp;b</regentholder><empty /></Metadata></Blob>
<Blob><Name>e~roster/b</Name><Properties><Last-Modified>Sun, 22 Nov 2026 10:00:07 GMT</Last-Modified><Content-Length>3</Content-Length></Properties><Metadata /></Blob>
<Blob><Name>e~roster/c</Name><Properties><Last-Modified>later</Last-Modified></Properties></Blob>
<Blob><Name>e~roster/d</Name><Properties><Last-Modified>Sun, 22 Nov 2026 10:00:07 GMT</Last-Modified><Content-Length>0</Content-Length></Properties><Metadata><x y="1">v</x></Metadata></Blob>
</Blobs><NextMarker>2!e~roster/d</NextMarker></EnumerationResults>"#;
        let (blobs, next) = parse_listing(&listing(xml)).unwrap();
        assert_eq!(next.as_deref(), Some("2!e~roster/d"));
        assert_eq!(blobs.len(), 4);
        let a = blobs[0].as_ref().unwrap();
        assert_eq!(a.name, "e~roster/a");
        assert_eq!(a.etag.as_deref(), Some("\"0x1\""));
        assert_eq!(
            a.metadata,
            [
                ("regentroster".to_owned(), "1".to_owned()),
                ("regentholder".to_owned(), "a&b".to_owned()),
                ("empty".to_owned(), String::new()),
            ]
        );
        assert_eq!(blobs[1].as_ref().unwrap().content_length, 3);
        assert!(blobs[1].as_ref().unwrap().metadata.is_empty());
        assert!(blobs[2].is_err());
        assert!(blobs[3].is_err());
        let (_, next) = parse_listing(&listing(
            "<EnumerationResults><Blobs /><NextMarker /></EnumerationResults>",
        ))
        .unwrap();
        assert_eq!(next, None);
        for bad in ["", "<html>busy</html>", "<EnumerationResults><Blob>"] {
            assert!(parse_listing(&listing(bad)).is_err(), "{bad}");
        }
        for bad in ["&", "&bogus;", "&#xZZ;", "&#1114112;"] {
            assert!(unescape(bad).is_err(), "{bad}");
        }
        assert_eq!(
            unescape("&#65;&#x42;&lt;&gt;&quot;&apos;").unwrap(),
            "AB<>\"'"
        );
    }
}
