//! The election key's record: Consul's KV entry as the HTTP API shows it,
//! and the value regent writes into it.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use regent_core::{FencingToken, HolderId, LeaderInfo, Metadata};
use serde::{Deserialize, Serialize};

/// The KV flags regent writes with every election record. A record with
/// other flags is not regent's: never taken over, reported as
/// [`Corrupt`](regent_core::ErrorKind::Corrupt). (Consul's own Go lock
/// marks its keys with flags the same way.) The bytes spell `regent` and
/// a format version.
pub const RECORD_FLAGS: u64 = 0x7265_6765_6e74_0001;

/// One KV entry, as `GET /v1/kv/KEY` and the transaction endpoint show it.
/// Unknown fields are ignored; a missing or mistyped field we use is a
/// decoding error, reported as `Corrupt` by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct KvEntry {
    pub(crate) key: String,
    #[serde(default)]
    pub(crate) flags: u64,
    /// Base64, or null for an empty value (and in a transaction's write
    /// results).
    #[serde(default)]
    pub(crate) value: Option<String>,
    /// The session holding the lock, if any.
    #[serde(default)]
    pub(crate) session: Option<String>,
    pub(crate) modify_index: u64,
}

impl KvEntry {
    /// The session that holds the key's lock, if any.
    pub(crate) fn holder_session(&self) -> Option<&str> {
        self.session.as_deref().filter(|s| !s.is_empty())
    }

    /// The value's bytes.
    pub(crate) fn value_bytes(&self) -> Result<Vec<u8>, String> {
        match &self.value {
            None => Ok(Vec::new()),
            Some(v) => BASE64
                .decode(v)
                .map_err(|e| format!("its value is not valid base64 ({e})")),
        }
    }

    /// Whether the key is regent's and locked by `session` with the value
    /// of `holder`, at `token` (never a key kept for a successor).
    pub(crate) fn is_held_by(&self, session: &str, holder: &HolderId, token: FencingToken) -> bool {
        self.holder_session() == Some(session)
            && self.flags == RECORD_FLAGS
            && self
                .record()
                .is_ok_and(|r| &r.holder == holder && r.token == token && r.reserved_for.is_none())
    }

    /// The record in the value, with the fencing token of its term: the
    /// one the value carries (written by a metadata update), else the
    /// `ModifyIndex`, which is the index the lock was taken at until the
    /// holder updates its metadata.
    ///
    /// # Errors
    ///
    /// Why the value is not a regent record, for a `Corrupt` error.
    pub(crate) fn record(&self) -> Result<Decoded, String> {
        let value = decode_value(&self.value_bytes()?)?;
        // Invariant: a token in the value was copied from the lock's index
        // by a later write of the same term, so it is below the index of
        // that write. One that is not was not written by regent.
        let token = match value.token {
            None => self.modify_index,
            Some(t) if t > 0 && t < self.modify_index => t,
            Some(t) => {
                return Err(format!(
                    "its value names token {t}, but a term's token is above 0 and below the \
                     key's ModifyIndex ({})",
                    self.modify_index
                ));
            }
        };
        Ok(Decoded {
            holder: value.holder,
            metadata: value.metadata,
            token: FencingToken::new(token),
            reserved_for: value.reserved_for,
        })
    }

    /// The successor this entry is kept for: `Some` while a reservation
    /// session locks a record that names one (see the crate docs,
    /// "Roster and hand-over").
    ///
    /// # Errors
    ///
    /// Why the entry is not a regent record, for a `Corrupt` error.
    pub(crate) fn reserved_for(&self) -> Result<Option<HolderId>, String> {
        self.check_ours()?;
        if self.holder_session().is_none() {
            return Ok(None);
        }
        Ok(self.record()?.reserved_for)
    }

    /// The leader this entry shows: `None` when no session holds the lock,
    /// or when the session that does keeps it for a successor.
    ///
    /// # Errors
    ///
    /// Why the entry is not a regent record (foreign flags, a value that
    /// does not decode), for a `Corrupt` error.
    pub(crate) fn leader(&self) -> Result<Option<LeaderInfo>, String> {
        self.check_ours()?;
        if self.holder_session().is_none() {
            return Ok(None);
        }
        let record = self.record()?;
        if record.reserved_for.is_some() {
            return Ok(None);
        }
        Ok(Some(LeaderInfo {
            holder: record.holder,
            token: record.token,
            metadata: record.metadata,
        }))
    }

    /// Checks that regent wrote this entry (flags and value), whether or
    /// not it is locked.
    pub(crate) fn check_ours(&self) -> Result<(), String> {
        if self.flags != RECORD_FLAGS {
            return Err(format!(
                "it has flags {:#x}, not regent's {RECORD_FLAGS:#x}: it was not written by \
                 regent (delete the key if nothing else uses it)",
                self.flags
            ));
        }
        self.record().map(|_| ())
    }
}

/// A record read from an entry: its holder, metadata and term's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub(crate) holder: HolderId,
    pub(crate) metadata: Metadata,
    pub(crate) token: FencingToken,
    /// The successor a hand-over keeps the key for, while the record's
    /// lock stands.
    pub(crate) reserved_for: Option<HolderId>,
}

/// The JSON form of a record, for holders with metadata and for records a
/// metadata update wrote.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    holder: String,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    /// The term's fencing token, written by a metadata update: the update
    /// moves the key's `ModifyIndex`, which is the token of a record
    /// without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
    /// The successor a hand-over keeps the key for: written with the lock
    /// of a reservation session (see the crate docs, "Roster and
    /// hand-over"). No one leads such a record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reserved_for: Option<String>,
}

/// What a value says, before the entry's index is looked at.
struct Value {
    holder: HolderId,
    metadata: Metadata,
    token: Option<u64>,
    reserved_for: Option<HolderId>,
}

/// The value regent writes: the holder id alone (the ClientID of Consul's
/// leader-election guide) when there is no metadata, else a JSON object
/// `{"holder": …, "metadata": {…}}`. A holder id never holds whitespace,
/// so a bare id starting with `{` is written as JSON to stay unambiguous.
pub(crate) fn encode(holder: &HolderId, metadata: &Metadata) -> Vec<u8> {
    if metadata.is_empty() && !holder.as_str().starts_with('{') {
        return holder.as_str().as_bytes().to_vec();
    }
    json_record(holder, metadata, None, None)
}

/// The value a metadata update writes: always the JSON object, with the
/// term's token, which the key's `ModifyIndex` no longer is once written.
pub(crate) fn encode_update(
    holder: &HolderId,
    metadata: &Metadata,
    token: FencingToken,
) -> Vec<u8> {
    json_record(holder, metadata, Some(token.get()), None)
}

/// The value a hand-over writes with the lock of its reservation session:
/// the last leader's record, kept for `successor`.
pub(crate) fn encode_reserved(
    holder: &HolderId,
    metadata: &Metadata,
    successor: &HolderId,
) -> Vec<u8> {
    json_record(holder, metadata, None, Some(successor))
}

fn json_record(
    holder: &HolderId,
    metadata: &Metadata,
    token: Option<u64>,
    reserved_for: Option<&HolderId>,
) -> Vec<u8> {
    let record = Record {
        holder: holder.as_str().to_owned(),
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        token,
        reserved_for: reserved_for.map(|h| h.as_str().to_owned()),
    };
    serde_json::to_vec(&record).unwrap_or_default()
}

/// The holder, metadata and (if written by an update) token of a value
/// regent wrote.
///
/// # Errors
///
/// Why the value is not one (for a `Corrupt` error); never panics.
fn decode_value(value: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(value).map_err(|_| "its value is not UTF-8".to_owned())?;
    if text.starts_with('{') {
        let record: Record = serde_json::from_str(text)
            .map_err(|e| format!("its value is not a regent record ({e})"))?;
        let holder = HolderId::new(&record.holder)
            .map_err(|e| format!("its value names an invalid holder ({e})"))?;
        let metadata = Metadata::from_pairs(record.metadata)
            .map_err(|e| format!("its value holds invalid metadata ({e})"))?;
        let reserved_for = record
            .reserved_for
            .map(HolderId::new)
            .transpose()
            .map_err(|e| format!("its value reserves the key for an invalid holder ({e})"))?;
        return Ok(Value {
            holder,
            metadata,
            token: record.token,
            reserved_for,
        });
    }
    let holder = HolderId::new(text)
        .map_err(|e| format!("its value is neither a holder id nor a regent record ({e})"))?;
    Ok(Value {
        holder,
        metadata: Metadata::new(),
        token: None,
        reserved_for: None,
    })
}

/// The value of a roster entry: always the JSON object
/// `{"holder": …, "metadata": {…}}`.
pub(crate) fn encode_roster(holder: &HolderId, metadata: &Metadata) -> Vec<u8> {
    json_record(holder, metadata, None, None)
}

/// The holder and metadata of a roster entry's value.
///
/// # Errors
///
/// Why the value is not one regent wrote; never panics.
pub(crate) fn decode_roster(value: &[u8]) -> Result<(HolderId, Metadata), String> {
    if !value.starts_with(b"{") {
        return Err("its value is not a regent roster entry (not a JSON object)".into());
    }
    let v = decode_value(value)?;
    if v.token.is_some() || v.reserved_for.is_some() {
        return Err("its value is a lease record, not a roster entry".into());
    }
    Ok((v.holder, v.metadata))
}

/// `bytes` in base64, as the transaction endpoint takes values.
pub(crate) fn base64(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(s: &str) -> HolderId {
        HolderId::new(s).unwrap()
    }

    fn decode(value: &[u8]) -> Result<(HolderId, Metadata), String> {
        decode_value(value).map(|v| (v.holder, v.metadata))
    }

    #[test]
    fn bare_ids_without_metadata_json_otherwise() {
        let none = Metadata::new();
        assert_eq!(encode(&holder("node-1"), &none), b"node-1");
        assert_eq!(decode(b"node-1").unwrap(), (holder("node-1"), none.clone()));
        let meta = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        let v = encode(&holder("node-1"), &meta);
        assert!(v.starts_with(b"{"));
        assert_eq!(decode(&v).unwrap(), (holder("node-1"), meta));
        let braced = encode(&holder("{x"), &none);
        assert!(braced.starts_with(b"{\""));
        assert_eq!(decode(&braced).unwrap().0, holder("{x"));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            &b""[..],
            b"\xff\xfe",
            b"two words",
            b"{",
            b"{\"holder\": 7}",
            b"{\"holder\": \"a b\"}",
            b"{\"holder\": \"a\", \"extra\": 1}",
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
        // Any printable word is a bare holder id.
        assert!(decode(b"[1,2]").is_ok());
    }

    #[test]
    fn an_updated_record_keeps_its_terms_token_past_the_modify_index() {
        let meta = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        let entry = KvEntry {
            key: "regent/e".into(),
            flags: RECORD_FLAGS,
            value: Some(base64(&encode_update(
                &holder("a"),
                &meta,
                FencingToken::new(9),
            ))),
            session: Some("s1".into()),
            modify_index: 12,
        };
        let leader = entry.leader().unwrap().unwrap();
        assert_eq!(
            (leader.holder.as_str(), leader.token.get(), &leader.metadata),
            ("a", 9, &meta)
        );
        assert!(entry.is_held_by("s1", &holder("a"), FencingToken::new(9)));
        assert!(!entry.is_held_by("s1", &holder("a"), FencingToken::new(12)));
        // A token in the value at or above the index was not written by a
        // later write of its term.
        for bad in [12, 13, 0] {
            let forged = KvEntry {
                value: Some(base64(&encode_update(
                    &holder("a"),
                    &meta,
                    FencingToken::new(bad),
                ))),
                ..entry.clone()
            };
            assert!(
                forged.leader().unwrap_err().contains("ModifyIndex"),
                "{bad}"
            );
            assert!(!forged.is_held_by("s1", &holder("a"), FencingToken::new(bad)));
        }
    }

    #[test]
    fn a_kept_key_shows_no_leader_and_roster_values_are_strict() {
        let meta = Metadata::from_pairs([("who", "a")]).unwrap();
        let kept = KvEntry {
            key: "regent/e".into(),
            flags: RECORD_FLAGS,
            value: Some(base64(&encode_reserved(&holder("a"), &meta, &holder("b")))),
            session: Some("r1".into()),
            modify_index: 12,
        };
        assert_eq!(kept.leader().unwrap(), None);
        assert_eq!(kept.reserved_for().unwrap(), Some(holder("b")));
        assert!(!kept.is_held_by("r1", &holder("a"), FencingToken::new(12)));
        // Unlocked (its reservation session ended): free, kept for nobody.
        let lapsed = KvEntry {
            session: None,
            ..kept.clone()
        };
        assert_eq!(lapsed.reserved_for().unwrap(), None);
        assert!(lapsed.check_ours().is_ok());
        let forged = KvEntry {
            value: Some(base64(br#"{"holder": "a", "reserved_for": "b c"}"#)),
            ..kept
        };
        assert!(
            forged
                .reserved_for()
                .unwrap_err()
                .contains("invalid holder")
        );

        let v = encode_roster(&holder("n1"), &meta);
        assert_eq!(decode_roster(&v).unwrap(), (holder("n1"), meta.clone()));
        assert_eq!(
            decode_roster(&encode_roster(&holder("n1"), &Metadata::new())).unwrap(),
            (holder("n1"), Metadata::new())
        );
        for bad in [
            &b"n1"[..],
            b"{",
            b"\xff",
            br#"{"holder": "a", "token": 3}"#,
            br#"{"holder": "a", "reserved_for": "b"}"#,
            br#"{"holder": "a", "extra": 1}"#,
        ] {
            assert!(decode_roster(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn entries_decode_and_check_their_flags() {
        let json = format!(
            r#"[{{"LockIndex":1,"Key":"regent/e","Flags":{RECORD_FLAGS},"Value":"{}","Session":"s1","CreateIndex":5,"ModifyIndex":9}}]"#,
            base64(b"a")
        );
        let entries: Vec<KvEntry> = serde_json::from_str(&json).unwrap();
        let leader = entries[0].leader().unwrap().unwrap();
        assert_eq!((leader.holder.as_str(), leader.token.get()), ("a", 9));
        assert!(entries[0].is_held_by("s1", &holder("a"), FencingToken::new(9)));
        assert!(!entries[0].is_held_by("s1", &holder("a"), FencingToken::new(10)));
        assert!(!entries[0].is_held_by("s2", &holder("a"), FencingToken::new(9)));

        let foreign = KvEntry {
            flags: 0,
            ..entries[0].clone()
        };
        assert!(
            foreign
                .leader()
                .unwrap_err()
                .contains("not written by regent")
        );
        let bad64 = KvEntry {
            value: Some("!!".into()),
            ..entries[0].clone()
        };
        assert!(bad64.leader().unwrap_err().contains("base64"));
        let free = KvEntry {
            session: None,
            ..entries[0].clone()
        };
        assert_eq!(free.leader().unwrap(), None);
    }
}
