//! The lease record: what the blob's properties and metadata say, read
//! strictly. The blob holds nothing but the record, so anything else in it
//! is someone else's data and an error, never a takeover.

use base64::Engine as _;
use jiff::Timestamp;
use reqwest::header::HeaderMap;

use regent_core::{ErrorKind, FencingToken, HolderId, LeaderInfo, Metadata, StoreError};

/// The metadata names of the record (`x-ms-meta-NAME`). Lower case without
/// `_`: some proxies drop headers whose names hold one.
pub(crate) const META_RECORD: &str = "regentrecord";
pub(crate) const META_HOLDER: &str = "regentholder";
pub(crate) const META_TOKEN: &str = "regenttoken";
pub(crate) const META_METADATA: &str = "regentmetadata";
/// The successor a hand-over keeps the election for, and until when
/// (milliseconds since 1970 on the service's clock): see the crate docs,
/// "Roster and hand-over".
pub(crate) const META_RESERVED_FOR: &str = "regentreservedfor";
pub(crate) const META_RESERVED_UNTIL: &str = "regentreserveduntil";
/// A roster entry's names: its format, and its ttl in milliseconds (its
/// holder and metadata as in the record).
pub(crate) const META_ROSTER: &str = "regentroster";
pub(crate) const META_TTL: &str = "regentttl";

/// The record format this version writes and reads.
pub(crate) const RECORD_VERSION: &str = "1";

const META_PREFIX: &str = "x-ms-meta-";

/// The blob's lease, as `x-ms-lease-state` and `x-ms-lease-duration` say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeaseState {
    /// Nobody holds it: never leased, expired, released or broken.
    Free,
    /// Held, for a fixed duration or being broken (its holder can no
    /// longer renew it).
    Held,
    /// Held without end: a lease regent never takes, someone else's.
    HeldForever,
}

/// What reading the blob's properties told.
#[derive(Clone, Debug)]
pub(crate) struct BlobState {
    pub(crate) etag: String,
    pub(crate) last_modified: Timestamp,
    pub(crate) lease: LeaseState,
    /// The last leader the record names; `None` for a blob no term has
    /// used yet.
    pub(crate) last: Option<LeaderInfo>,
    /// The successor the record is kept for, and until when (milliseconds
    /// since 1970 on the service's clock), as the last term's hand-over
    /// wrote it.
    pub(crate) reserved: Option<(HolderId, u64)>,
}

impl BlobState {
    /// The leader now: the record's, while the lease is held.
    pub(crate) fn leader(&self) -> Option<LeaderInfo> {
        match self.lease {
            LeaseState::Held => self.last.clone(),
            LeaseState::Free | LeaseState::HeldForever => None,
        }
    }
}

/// Reads a `HEAD` answer of the blob at `place` (`container/blob`, for
/// messages). Every way the blob can be more than a regent record is a
/// `Corrupt` error; an answer that lacks what the service always sends is
/// a `Protocol` one.
pub(crate) fn parse(headers: &HeaderMap, place: &str) -> Result<BlobState, StoreError> {
    parse_text(headers, place).map_err(|(kind, message)| StoreError::new(kind, message))
}

fn parse_text(headers: &HeaderMap, place: &str) -> Result<BlobState, (ErrorKind, String)> {
    let protocol = |why: &str| (ErrorKind::Protocol, format!("reading blob {place}: {why}"));
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let not_ours = |why: String| {
        format!(
            "the blob {place} is not a regent lease record: {why}; regent keeps nothing but its \
             lease in the blob, so name a blob of its own (or delete this one if it is a \
             leftover)"
        )
    };
    let etag = text("etag")
        .filter(|e| e.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or_else(|| protocol("the service's answer has no usable ETag"))?
        .to_owned();
    let last_modified = text("last-modified")
        .and_then(crate::rest::parse_http_date)
        .ok_or_else(|| protocol("the service's answer has no readable Last-Modified"))?;
    let not_ours = |why: String| (ErrorKind::Corrupt, not_ours(why));
    let length = text("content-length").unwrap_or("0");
    if length != "0" {
        return Err(not_ours(format!("it holds {length} bytes of content")));
    }
    let mut meta: Vec<(&str, &str)> = Vec::new();
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix(META_PREFIX) else {
            continue;
        };
        let value = value
            .to_str()
            .map_err(|_| not_ours(format!("its metadata '{key}' is not ASCII")))?;
        if ![
            META_RECORD,
            META_HOLDER,
            META_TOKEN,
            META_METADATA,
            META_RESERVED_FOR,
            META_RESERVED_UNTIL,
        ]
        .contains(&key)
        {
            return Err(not_ours(format!("it has metadata '{key}'")));
        }
        meta.push((key, value));
    }
    let get = |k: &str| meta.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    let lease = lease_state(text("x-ms-lease-state"), text("x-ms-lease-duration"))
        .map_err(|why| protocol(&why))?;
    let corrupt = |why: String| {
        (
            ErrorKind::Corrupt,
            format!("the lease record in blob {place} is corrupt: {why}"),
        )
    };
    let last = match get(META_RECORD) {
        // An empty blob without metadata: made by regent's blob creation
        // in an older form, by the reference sample, or by hand. Unclaimed.
        None if meta.is_empty() => None,
        None => {
            return Err(corrupt(format!(
                "it has regent's metadata but no '{META_RECORD}'"
            )));
        }
        Some(v) if v != RECORD_VERSION => {
            return Err((
                ErrorKind::Corrupt,
                format!(
                    "the lease record in blob {place} has format '{}', which this regent does not \
                 know (it writes '{RECORD_VERSION}'): a newer regent uses this election",
                    regent_core::target::printable(v)
                ),
            ));
        }
        Some(_) => match (get(META_HOLDER), get(META_TOKEN)) {
            (None, None) => None,
            (Some(holder), Some(token)) => Some(LeaderInfo {
                holder: HolderId::new(holder).map_err(|e| corrupt(format!("its holder: {e}")))?,
                token: parse_token(token).ok_or_else(|| {
                    corrupt(format!(
                        "its token '{}' is not a number",
                        regent_core::target::printable(token)
                    ))
                })?,
                metadata: match get(META_METADATA) {
                    None => Metadata::new(),
                    Some(m) => decode_metadata(m).map_err(corrupt)?,
                },
            }),
            _ => {
                return Err(corrupt(format!(
                    "it has one of '{META_HOLDER}' and '{META_TOKEN}' without the other"
                )));
            }
        },
    };
    let reserved = match (get(META_RESERVED_FOR), get(META_RESERVED_UNTIL)) {
        (None, None) => None,
        (Some(to), Some(until)) if last.is_some() => Some((
            HolderId::new(to).map_err(|e| corrupt(format!("its successor: {e}")))?,
            parse_token(until).map(FencingToken::get).ok_or_else(|| {
                corrupt(format!(
                    "its '{META_RESERVED_UNTIL}' '{}' is not a number",
                    regent_core::target::printable(until)
                ))
            })?,
        )),
        _ => {
            return Err(corrupt(format!(
                "it has one of '{META_RESERVED_FOR}' and '{META_RESERVED_UNTIL}' without the \
                 other, or without a holder"
            )));
        }
    };
    Ok(BlobState {
        etag,
        last_modified,
        lease,
        last,
        reserved,
    })
}

fn lease_state(state: Option<&str>, duration: Option<&str>) -> Result<LeaseState, String> {
    match state {
        Some("available" | "expired" | "broken") => Ok(LeaseState::Free),
        Some("breaking") => Ok(LeaseState::Held),
        Some("leased") => match duration {
            Some("infinite") => Ok(LeaseState::HeldForever),
            _ => Ok(LeaseState::Held),
        },
        Some(other) => Err(format!(
            "the service reports lease state '{}', which regent does not know",
            regent_core::target::printable(other)
        )),
        None => Err("the service's answer has no x-ms-lease-state".into()),
    }
}

/// A token as written: decimal digits, no sign, no leading zero.
fn parse_token(s: &str) -> Option<FencingToken> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok().map(FencingToken::new)
}

/// The metadata headers of a term's record.
pub(crate) fn record_headers(
    holder: &HolderId,
    token: FencingToken,
    metadata: &Metadata,
) -> Vec<(String, String)> {
    let mut headers = vec![
        (
            format!("{META_PREFIX}{META_RECORD}"),
            RECORD_VERSION.to_owned(),
        ),
        (
            format!("{META_PREFIX}{META_HOLDER}"),
            holder.as_str().to_owned(),
        ),
        (
            format!("{META_PREFIX}{META_TOKEN}"),
            token.get().to_string(),
        ),
    ];
    if !metadata.is_empty() {
        headers.push((
            format!("{META_PREFIX}{META_METADATA}"),
            encode_metadata(metadata),
        ));
    }
    headers
}

/// The metadata headers of a term's record kept for `successor` until
/// `until` (milliseconds since 1970, the service's clock).
pub(crate) fn reserved_headers(
    holder: &HolderId,
    token: FencingToken,
    metadata: &Metadata,
    successor: &HolderId,
    until: u64,
) -> Vec<(String, String)> {
    let mut headers = record_headers(holder, token, metadata);
    headers.push((
        format!("{META_PREFIX}{META_RESERVED_FOR}"),
        successor.as_str().to_owned(),
    ));
    headers.push((
        format!("{META_PREFIX}{META_RESERVED_UNTIL}"),
        until.to_string(),
    ));
    headers
}

/// The metadata headers of a roster entry.
pub(crate) fn roster_headers(
    holder: &HolderId,
    ttl_ms: u64,
    metadata: &Metadata,
) -> Vec<(String, String)> {
    let mut headers = vec![
        (
            format!("{META_PREFIX}{META_ROSTER}"),
            RECORD_VERSION.to_owned(),
        ),
        (
            format!("{META_PREFIX}{META_HOLDER}"),
            holder.as_str().to_owned(),
        ),
        (format!("{META_PREFIX}{META_TTL}"), ttl_ms.to_string()),
    ];
    if !metadata.is_empty() {
        headers.push((
            format!("{META_PREFIX}{META_METADATA}"),
            encode_metadata(metadata),
        ));
    }
    headers
}

/// A roster entry as a blob's metadata (names without `x-ms-meta-`, as
/// List Blobs shows them) says it: holder, metadata and ttl in
/// milliseconds.
///
/// # Errors
///
/// Why the metadata is not a roster entry regent wrote; never panics.
pub(crate) fn parse_roster(meta: &[(String, String)]) -> Result<(HolderId, Metadata, u64), String> {
    let get = |k: &str| {
        meta.iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.as_str())
    };
    if let Some((key, _)) = meta.iter().find(|(key, _)| {
        ![META_ROSTER, META_HOLDER, META_TTL, META_METADATA]
            .iter()
            .any(|k| key.eq_ignore_ascii_case(k))
    }) {
        return Err(format!(
            "it has metadata '{}'",
            regent_core::target::printable(key)
        ));
    }
    if get(META_ROSTER) != Some(RECORD_VERSION) {
        return Err(format!("its '{META_ROSTER}' is not '{RECORD_VERSION}'"));
    }
    let holder = HolderId::new(get(META_HOLDER).unwrap_or_default())
        .map_err(|e| format!("its holder: {e}"))?;
    let ttl = get(META_TTL)
        .and_then(parse_token)
        .ok_or_else(|| format!("its '{META_TTL}' is not a number"))?
        .get();
    let metadata = match get(META_METADATA) {
        None => Metadata::new(),
        Some(m) => decode_metadata(m)?,
    };
    Ok((holder, metadata, ttl))
}

/// The most metadata the service keeps on a blob, names and values: 8 KiB.
pub(crate) const MAX_METADATA_BYTES: usize = 8 * 1024;

/// The size the service counts of `headers` (names without `x-ms-meta-`).
pub(crate) fn metadata_size(headers: &[(String, String)]) -> usize {
    headers
        .iter()
        .map(|(k, v)| k.len() - META_PREFIX.len() + v.len())
        .sum()
}

/// The metadata header of a blob created for a record no term has used.
pub(crate) fn fresh_headers() -> Vec<(String, String)> {
    vec![(
        format!("{META_PREFIX}{META_RECORD}"),
        RECORD_VERSION.to_owned(),
    )]
}

/// Base64 of a JSON object: metadata values are ASCII header values, the
/// holder's metadata any UTF-8.
fn encode_metadata(metadata: &Metadata) -> String {
    let map: serde_json::Map<String, serde_json::Value> = metadata
        .iter()
        .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v.to_owned())))
        .collect();
    let json = serde_json::Value::Object(map).to_string();
    base64::engine::general_purpose::STANDARD.encode(json)
}

fn decode_metadata(s: &str) -> Result<Metadata, String> {
    let json = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|_| format!("its '{META_METADATA}' is not base64"))?;
    let value: serde_json::Value =
        serde_json::from_slice(&json).map_err(|_| format!("its '{META_METADATA}' is not JSON"))?;
    let serde_json::Value::Object(map) = value else {
        return Err(format!("its '{META_METADATA}' is not a JSON object"));
    };
    let mut pairs = Vec::with_capacity(map.len());
    for (k, v) in map {
        let serde_json::Value::String(v) = v else {
            return Err(format!(
                "its '{META_METADATA}' has a value that is not a string (key '{}')",
                regent_core::target::printable(&k)
            ));
        };
        pairs.push((k, v));
    }
    Metadata::from_pairs(pairs).map_err(|e| format!("its '{META_METADATA}': {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert("etag", "\"0x1\"".parse().unwrap());
        map.insert(
            "last-modified",
            "Sun, 22 Nov 2026 10:00:07 GMT".parse().unwrap(),
        );
        map.insert("content-length", "0".parse().unwrap());
        map.insert("x-ms-lease-state", "leased".parse().unwrap());
        map.insert("x-ms-lease-duration", "fixed".parse().unwrap());
        for (k, v) in pairs {
            map.insert(
                reqwest::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let holder = HolderId::new("node-1").unwrap();
        let metadata = Metadata::from_pairs([("addr", "10.0.0.1:80"), ("note", "é")]).unwrap();
        let written = record_headers(&holder, FencingToken::new(1_795_341_607_000_001), &metadata);
        let pairs: Vec<(&str, &str)> = written
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let state = parse(&headers(&pairs), "c/b").unwrap();
        let leader = state.leader().unwrap();
        assert_eq!(leader.holder, holder);
        assert_eq!(leader.token.get(), 1_795_341_607_000_001);
        assert_eq!(leader.metadata, metadata);
        assert_eq!(state.etag, "\"0x1\"");
    }

    #[test]
    fn unclaimed_and_fresh_blobs_have_no_leader() {
        assert!(parse(&headers(&[]), "c/b").unwrap().last.is_none());
        let fresh: Vec<(String, String)> = fresh_headers();
        let state = parse(&headers(&[(&fresh[0].0, &fresh[0].1)]), "c/b").unwrap();
        assert!(state.last.is_none() && state.leader().is_none());
    }

    #[test]
    fn garbage_is_an_error_that_names_the_blob() {
        for (pairs, want) in [
            (vec![("x-ms-meta-owner", "ops")], "metadata 'owner'"),
            (vec![("content-length", "12")], "12 bytes"),
            (vec![("x-ms-meta-regentholder", "a")], "no 'regentrecord'"),
            (vec![("x-ms-meta-regentrecord", "2")], "format '2'"),
            (
                vec![
                    ("x-ms-meta-regentrecord", "1"),
                    ("x-ms-meta-regentholder", "a"),
                ],
                "without the other",
            ),
            (
                vec![
                    ("x-ms-meta-regentrecord", "1"),
                    ("x-ms-meta-regentholder", "a"),
                    ("x-ms-meta-regenttoken", "-3"),
                ],
                "not a number",
            ),
            (
                vec![
                    ("x-ms-meta-regentrecord", "1"),
                    ("x-ms-meta-regentholder", "a"),
                    ("x-ms-meta-regenttoken", "3"),
                    ("x-ms-meta-regentmetadata", "!!"),
                ],
                "not base64",
            ),
            (vec![("x-ms-lease-state", "pondering")], "'pondering'"),
        ] {
            let e = parse(&headers(&pairs), "leases/jobs")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(want) && e.contains("leases/jobs"),
                "{pairs:?}: {e}"
            );
        }
        for t in ["", "01", "+1", "18446744073709551616"] {
            assert!(parse_token(t).is_none(), "{t}");
        }
    }

    #[test]
    fn a_reservation_reads_back_and_half_of_one_is_corrupt() {
        let holder = HolderId::new("a").unwrap();
        let written = reserved_headers(
            &holder,
            FencingToken::new(7),
            &Metadata::new(),
            &HolderId::new("b").unwrap(),
            1_795_341_607_300,
        );
        let pairs: Vec<(&str, &str)> = written
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let state = parse(&headers(&pairs), "c/b").unwrap();
        let (to, until) = state.reserved.unwrap();
        assert_eq!((to.as_str(), until), ("b", 1_795_341_607_300));
        assert_eq!(state.last.unwrap().holder, holder);
        for bad in [
            vec![
                ("x-ms-meta-regentrecord", "1"),
                ("x-ms-meta-regentholder", "a"),
                ("x-ms-meta-regenttoken", "3"),
                ("x-ms-meta-regentreservedfor", "b"),
            ],
            vec![
                ("x-ms-meta-regentrecord", "1"),
                ("x-ms-meta-regentholder", "a"),
                ("x-ms-meta-regenttoken", "3"),
                ("x-ms-meta-regentreservedfor", "b"),
                ("x-ms-meta-regentreserveduntil", "soon"),
            ],
            vec![
                ("x-ms-meta-regentrecord", "1"),
                ("x-ms-meta-regentreservedfor", "b"),
                ("x-ms-meta-regentreserveduntil", "5"),
            ],
        ] {
            let e = parse(&headers(&bad), "c/b").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt, "{bad:?}: {e}");
        }
    }

    #[test]
    fn roster_entries_read_back_and_garbage_is_an_error() {
        let holder = HolderId::new("node-1").unwrap();
        let metadata = Metadata::from_pairs([("who", "a")]).unwrap();
        let meta: Vec<(String, String)> = roster_headers(&holder, 15_000, &metadata)
            .into_iter()
            .map(|(k, v)| (k[META_PREFIX.len()..].to_owned(), v))
            .collect();
        assert_eq!(parse_roster(&meta).unwrap(), (holder, metadata, 15_000));
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        for bad in [
            pairs(&[]),
            pairs(&[("regentroster", "1"), ("regentholder", "a")]),
            pairs(&[
                ("regentroster", "1"),
                ("regentholder", "a b"),
                ("regentttl", "1"),
            ]),
            pairs(&[
                ("regentroster", "1"),
                ("regentholder", "a"),
                ("regentttl", "-1"),
            ]),
            pairs(&[
                ("regentroster", "1"),
                ("regentholder", "a"),
                ("regentttl", "1"),
                ("owner", "ops"),
            ]),
            pairs(&[
                ("regentroster", "1"),
                ("regentholder", "a"),
                ("regentttl", "1"),
                ("regentmetadata", "!!"),
            ]),
        ] {
            assert!(parse_roster(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lease_states() {
        assert_eq!(
            lease_state(Some("leased"), Some("infinite")),
            Ok(LeaseState::HeldForever)
        );
        assert_eq!(
            lease_state(Some("breaking"), Some("fixed")),
            Ok(LeaseState::Held)
        );
        for free in ["available", "expired", "broken"] {
            assert_eq!(lease_state(Some(free), None), Ok(LeaseState::Free));
        }
    }
}
