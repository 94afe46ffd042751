//! The key layout and the value codec, shared with etcd's election recipe.
//!
//! etcd's Go `concurrency.NewElection(session, pfx)` campaigns under the
//! prefix `pfx + "/"` with the key `pfx + "/" + fmt.Sprintf("%x", leaseID)`;
//! `etcdctl elect NAME` passes `NAME` as `pfx`. So election `jobs` lives
//! under `jobs/`, and the candidate holding lease `0x694d77aa9e38260f` writes
//! `jobs/694d77aa9e38260f`.

use regent_core::{ElectionName, FencingToken, HolderId, LeaderInfo, Metadata};
use serde_json::{Map, Value};

/// The longest foreign value copied into a foreign leader's metadata.
const MAX_FOREIGN_VALUE: usize = 1024;

/// The key prefix of `election` under `namespace`: every candidate's key
/// starts with it.
pub(crate) fn election_prefix(namespace: &str, election: &ElectionName) -> String {
    format!("{namespace}{election}/")
}

/// A lease id as Go's `%x` prints an `int64`: lowercase hex, with a minus
/// sign for negative values (etcd never grants those, but the format is
/// fixed by Go, not by us).
pub(crate) fn lease_hex(id: i64) -> String {
    if id < 0 {
        format!("-{:x}", id.unsigned_abs())
    } else {
        format!("{id:x}")
    }
}

/// Parses a handle written by [`lease_hex`].
pub(crate) fn parse_lease_hex(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    i64::from_str_radix(s, 16).ok()
}

/// The key of the candidate holding `lease` in the election under `prefix`.
pub(crate) fn candidate_key(prefix: &str, lease: i64) -> String {
    format!("{prefix}{}", lease_hex(lease))
}

/// The value regent writes: `{"holder": "...", "metadata": {...}}`.
pub(crate) fn encode(holder: &HolderId, metadata: &Metadata) -> Vec<u8> {
    let meta: Map<String, Value> = metadata
        .iter()
        .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
        .collect();
    let mut obj = Map::new();
    obj.insert("holder".into(), Value::String(holder.as_str().to_owned()));
    obj.insert("metadata".into(), Value::Object(meta));
    serde_json::to_vec(&Value::Object(obj)).expect("a JSON object of strings serializes")
}

/// The bounds of the values [`encode`] writes for `holder`, whatever the
/// metadata: every such value `v` has `low < v < high`, and no other value
/// does. For a compare in a transaction, which cannot look into a value:
/// the value starts with `{"holder":HOLDER,` (the object's keys are written
/// in order, `holder` first), `low` is that start and `high` the same with
/// its last byte (the comma) one greater.
pub(crate) fn holder_bounds(holder: &HolderId) -> (Vec<u8>, Vec<u8>) {
    let mut low = br#"{"holder":"#.to_vec();
    low.extend(serde_json::to_vec(holder.as_str()).expect("a string serializes"));
    low.push(b',');
    let mut high = low.clone();
    if let Some(last) = high.last_mut() {
        *last += 1;
    }
    (low, high)
}

/// Reads a value regent wrote; `None` when it is anything else.
pub(crate) fn decode(value: &[u8]) -> Option<(HolderId, Metadata)> {
    let Value::Object(obj) = serde_json::from_slice::<Value>(value).ok()? else {
        return None;
    };
    let holder = HolderId::new(obj.get("holder")?.as_str()?).ok()?;
    let metadata = match obj.get("metadata") {
        None => Metadata::new(),
        Some(Value::Object(m)) => {
            let mut pairs = Vec::with_capacity(m.len());
            for (k, v) in m {
                pairs.push((k.clone(), v.as_str()?.to_owned()));
            }
            Metadata::from_pairs(pairs).ok()?
        }
        Some(_) => return None,
    };
    Some((holder, metadata))
}

/// The leader as regent shows it, from the head key of an election.
///
/// A value regent did not write belongs to a legitimate foreign candidate
/// (`etcdctl elect NAME VALUE`, a Go program using `concurrency.Election`):
/// it leads like any other. Its holder id is the value itself when that is
/// a valid [`HolderId`]; otherwise the value with every byte outside `!`..`~`
/// replaced by `_` (at most 128 bytes); an empty value becomes
/// `etcd-lease-<hex>`. Its metadata carries `etcd.key` and `etcd.value`
/// (the value, at most 1 KiB).
pub(crate) fn leader_of(key: &[u8], value: &[u8], lease: i64, create_revision: i64) -> LeaderInfo {
    let token = FencingToken::new(u64::try_from(create_revision).unwrap_or(0));
    if let Some((holder, metadata)) = decode(value) {
        return LeaderInfo {
            holder,
            token,
            metadata,
        };
    }
    let text = String::from_utf8_lossy(value);
    let holder = HolderId::new(&*text).unwrap_or_else(|_| {
        let sanitized: String = value
            .iter()
            .take(regent_core::MAX_HOLDER_ID_LEN)
            .map(|&b| if b.is_ascii_graphic() { b as char } else { '_' })
            .collect();
        HolderId::new(&sanitized)
            .or_else(|_| HolderId::new(format!("etcd-lease-{}", lease_hex(lease))))
            .expect("a hex lease id is a valid holder id")
    });
    let mut shown: String = String::new();
    for c in text.chars() {
        if shown.len() + c.len_utf8() > MAX_FOREIGN_VALUE {
            break;
        }
        shown.push(c);
    }
    let key = String::from_utf8_lossy(key);
    let key: String = key.chars().take(512).collect();
    let metadata =
        Metadata::from_pairs([("etcd.key", key), ("etcd.value", shown)]).unwrap_or_default();
    LeaderInfo {
        holder,
        token,
        metadata,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_layout_matches_go_election() {
        let e = ElectionName::new("jobs").unwrap();
        let p = election_prefix("", &e);
        assert_eq!(p, "jobs/");
        assert_eq!(
            candidate_key(&p, 0x694d_77aa_9e38_260f),
            "jobs/694d77aa9e38260f"
        );
        assert_eq!(election_prefix("/svc/", &e), "/svc/jobs/");
        assert_eq!(lease_hex(-255), "-ff");
        assert_eq!(lease_hex(10), "a");
    }

    #[test]
    fn lease_hex_round_trips() {
        for id in [1, 0xff, i64::MAX, -1, i64::MIN] {
            assert_eq!(parse_lease_hex(&lease_hex(id)), Some(id), "{id}");
        }
        assert_eq!(parse_lease_hex(""), None);
        assert_eq!(parse_lease_hex("FF"), None);
        assert_eq!(parse_lease_hex("+1"), None);
        assert_eq!(parse_lease_hex("mem-1"), None);
    }

    #[test]
    fn a_holders_values_and_only_they_lie_within_its_bounds() {
        let metadatas = [
            Metadata::new(),
            Metadata::from_pairs([("zone".to_owned(), "eu\"1,}".to_owned())]).unwrap(),
        ];
        for name in ["a", "node-1", "b.c_d", "ab"] {
            let holder = HolderId::new(name).unwrap();
            let (low, high) = holder_bounds(&holder);
            for m in &metadatas {
                let v = encode(&holder, m);
                assert!(
                    low < v && v < high,
                    "{name}: {}",
                    String::from_utf8_lossy(&v)
                );
            }
            for other in ["a", "node-1", "b.c_d", "ab"]
                .into_iter()
                .filter(|o| *o != name)
            {
                let v = encode(&HolderId::new(other).unwrap(), &metadatas[1]);
                assert!(
                    !(low < v && v < high),
                    "{other}'s value within {name}'s bounds"
                );
            }
        }
    }

    #[test]
    fn value_round_trips() {
        let h = HolderId::new("host-1:80").unwrap();
        let m = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        assert_eq!(decode(&encode(&h, &m)), Some((h, m)));
    }

    #[test]
    fn foreign_values_lead_under_a_derived_holder() {
        let l = leader_of(b"e/1a", b"host-7", 0x1a, 42);
        assert_eq!(l.holder.as_str(), "host-7");
        assert_eq!(l.token, FencingToken::new(42));
        assert_eq!(l.metadata.get("etcd.value"), Some("host-7"));
        assert_eq!(l.metadata.get("etcd.key"), Some("e/1a"));

        let l = leader_of(b"e/1a", b"my host\n\xff", 0x1a, 43);
        assert_eq!(l.holder.as_str(), "my_host__");

        let l = leader_of(b"e/1a", b"", 0x1a, 44);
        assert_eq!(l.holder.as_str(), "etcd-lease-1a");

        let long = vec![b'x'; 5000];
        let l = leader_of(b"e/1a", &long, 0x1a, 45);
        assert_eq!(l.holder.as_str().len(), 128);
        assert_eq!(
            l.metadata.get("etcd.value").unwrap().len(),
            MAX_FOREIGN_VALUE
        );

        // JSON that is not regent's shape is a foreign value too.
        let l = leader_of(b"e/1a", br#"{"holder": 5}"#, 0x1a, 46);
        assert_eq!(l.holder.as_str(), r#"{"holder":_5}"#);
    }
}
