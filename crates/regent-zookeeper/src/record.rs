//! Node names, their order, and what a node's data says: the layout of
//! Apache Curator's `LeaderLatch`, so that regent and Curator candidates
//! queue in one line.
//!
//! `LeaderLatch` (with its default protection) creates, under its latch
//! path, the ephemeral sequential node `_c_{GUID}-latch-{sequence}` holding
//! its participant id, and sorts the children by what follows the last
//! `latch-` in their names (a name without `latch-` sorts by its whole
//! name). The first child leads. regent does the same: election `jobs`
//! under the chroot `/services` is the latch path `/services/jobs`.

use regent_core::{Candidacy, FencingToken, HolderId, LeaderInfo, MAX_HOLDER_ID_LEN, Metadata};
use serde_json::{Map, Value};

/// What Curator's `LeaderLatch` puts between the protection prefix and the
/// sequence number.
pub(crate) const LATCH: &str = "latch-";

/// Curator's protection prefix: `_c_`, then a GUID, then `-`.
const PROTECTED: &str = "_c_";

/// The longest foreign value copied into a foreign leader's metadata.
const MAX_FOREIGN_VALUE: usize = 1024;

/// The version of the UUIDs regent's protection GUIDs are: 8, RFC 9562's
/// version for custom layouts (random bits here). Curator's are version 4
/// (Java's `UUID.randomUUID()`), so a node's name tells whether regent
/// made it: see [`written_by_regent`].
const GUID_VERSION: u8 = 8;

/// A fresh protection GUID (a version-8 UUID of random bits in its usual
/// text form): Curator finds a node whose create answer was lost by it,
/// and so do we; and its version tells regent's nodes from Curator's.
pub(crate) fn new_guid() -> String {
    let mut b: [u8; 16] = std::array::from_fn(|_| fastrand::u8(..));
    b[6] = (b[6] & 0x0f) | (GUID_VERSION << 4);
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The name prefix of a candidate's node: `_c_{guid}-latch-`; ZooKeeper
/// appends the sequence number.
pub(crate) fn node_prefix(guid: &str) -> String {
    format!("{PROTECTED}{guid}-{LATCH}")
}

/// Whether `name` is protected as regent's (and Curator's) nodes are.
pub(crate) fn is_regent_name(name: &str) -> bool {
    name.starts_with(PROTECTED)
}

/// Whether the node `name` holding `data` is one regent made: its name is
/// `_c_{GUID}-latch-{sequence}` with a GUID of regent's (a version-8 UUID:
/// Curator's `LeaderLatch` makes version 4) and its data is regent's. The
/// data alone cannot tell: a `LeaderLatch` participant's id is written
/// bare, as regent writes a holder id without metadata. Nodes of regent
/// releases whose GUIDs were version 4 are not told apart from Curator's.
pub(crate) fn written_by_regent(name: &str, data: &[u8]) -> bool {
    let Some((guid, sequence)) = name
        .strip_prefix(PROTECTED)
        .filter(|rest| rest.is_char_boundary(36))
        .map(|rest| rest.split_at(36))
    else {
        return false;
    };
    let numbered = sequence
        .strip_prefix('-')
        .and_then(|s| s.strip_prefix(LATCH))
        .is_some_and(|n| matches!(n.len(), 10 | 19) && n.bytes().all(|b| b.is_ascii_digit()));
    let shaped = numbered
        && guid.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        });
    shaped && guid.as_bytes()[14] == b'0' + GUID_VERSION && decode(data).is_some()
}

/// Whether `name` is the node created with protection `guid`.
pub(crate) fn is_protected_by(name: &str, guid: &str) -> bool {
    name.strip_prefix(PROTECTED)
        .and_then(|rest| rest.strip_prefix(guid))
        .is_some_and(|rest| rest.starts_with('-'))
}

/// The key `LeaderLatch` sorts children by: what follows the last
/// `latch-`, or the whole name.
pub(crate) fn sort_key(name: &str) -> &str {
    name.rfind(LATCH).map_or(name, |i| &name[i + LATCH.len()..])
}

/// Whether `name` is a candidate's node: its sort key is a sequence
/// number as ZooKeeper appends it (10 digits, or 19 past 2^31). Anything
/// else under an election's path is no candidate's, and `LeaderLatch`
/// would sort it among them by its name.
pub(crate) fn is_candidate(name: &str) -> bool {
    let key = sort_key(name);
    matches!(key.len(), 10 | 19) && key.bytes().all(|b| b.is_ascii_digit())
}

/// Sorts children as `LeaderLatch` does (stable, so ties keep the order
/// the server listed them in, as Java's sort does).
pub(crate) fn sort_children(children: &mut [String]) {
    children.sort_by(|a, b| sort_key(a).cmp(sort_key(b)));
}

/// The data regent writes: the holder id alone, as `LeaderLatch` writes
/// its participant id, so that `LeaderLatch.getLeader()` shows it; with
/// metadata, a newline and the metadata as a JSON object of strings (a
/// holder id has no whitespace, so the two never mix).
pub(crate) fn encode(holder: &HolderId, metadata: &Metadata) -> Vec<u8> {
    let mut data = holder.as_str().as_bytes().to_vec();
    if !metadata.is_empty() {
        data.push(b'\n');
        data.extend(encode_metadata(metadata));
    }
    data
}

/// Metadata as regent's nodes carry it: a JSON object of strings.
pub(crate) fn encode_metadata(metadata: &Metadata) -> Vec<u8> {
    let meta: Map<String, Value> = metadata
        .iter()
        .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
        .collect();
    serde_json::to_vec(&Value::Object(meta)).unwrap_or_default()
}

/// Reads metadata written by [`encode_metadata`]; `None` for anything else.
pub(crate) fn decode_metadata(data: &[u8]) -> Option<Metadata> {
    let Value::Object(m) = serde_json::from_slice::<Value>(data).ok()? else {
        return None;
    };
    let mut pairs = Vec::with_capacity(m.len());
    for (k, v) in m {
        pairs.push((k, v.as_str()?.to_owned()));
    }
    Metadata::from_pairs(pairs).ok()
}

/// Reads data regent wrote; `None` when it is anything else.
pub(crate) fn decode(data: &[u8]) -> Option<(HolderId, Metadata)> {
    let text = std::str::from_utf8(data).ok()?;
    let (holder, rest) = match text.split_once('\n') {
        Some((h, rest)) => (h, Some(rest)),
        None => (text, None),
    };
    let holder = HolderId::new(holder).ok()?;
    let metadata = match rest {
        None => Metadata::new(),
        Some(json) => decode_metadata(json.as_bytes())?,
    };
    Some((holder, metadata))
}

/// The fencing token of a node: its czxid, the id of the transaction that
/// created it. ZooKeeper's transaction ids only grow, across every node of
/// the ensemble, so a later node of the queue always has a larger one.
pub(crate) fn token_of(czxid: i64) -> FencingToken {
    FencingToken::new(u64::try_from(czxid).unwrap_or(0))
}

/// The leader as regent shows it, from the first child of an election.
///
/// Data regent did not write belongs to a legitimate foreign candidate (a
/// Curator `LeaderLatch` participant): it leads like any other. Its holder
/// id is the data when that is a valid [`HolderId`] (a participant id);
/// otherwise the data with every byte outside `!`..`~` replaced by `_` (at
/// most 128 bytes); empty data becomes the node's name. Its metadata
/// carries `zk.node` and `zk.data` (at most 1 KiB).
pub(crate) fn leader_of(node: &str, data: &[u8], czxid: i64) -> LeaderInfo {
    let token = token_of(czxid);
    if let Some((holder, metadata)) = decode(data) {
        return LeaderInfo {
            holder,
            token,
            metadata,
        };
    }
    let holder = foreign_holder(node, data);
    let text = String::from_utf8_lossy(data);
    let mut shown = String::new();
    for c in text.chars() {
        if shown.len() + c.len_utf8() > MAX_FOREIGN_VALUE {
            break;
        }
        shown.push(c);
    }
    let node: String = node.chars().take(512).collect();
    let metadata =
        Metadata::from_pairs([("zk.node", node), ("zk.data", shown)]).unwrap_or_default();
    LeaderInfo {
        holder,
        token,
        metadata,
    }
}

/// The holder of node `node` holding `data`, as [`leader_of`] shows it.
#[cfg(test)]
pub(crate) fn holder_of(node: &str, data: &[u8]) -> HolderId {
    candidacy_of(node, data).holder
}

/// A candidate's node as the line lists it: regent's with its metadata
/// (its priority among them), a foreign one with none.
pub(crate) fn candidacy_of(node: &str, data: &[u8]) -> Candidacy {
    match decode(data) {
        Some((holder, metadata)) => Candidacy::new(holder, metadata),
        None => Candidacy::new(foreign_holder(node, data), Metadata::new()),
    }
}

/// The holder id of a foreign candidate: see [`leader_of`].
fn foreign_holder(node: &str, data: &[u8]) -> HolderId {
    let text = String::from_utf8_lossy(data);
    HolderId::new(&*text).unwrap_or_else(|_| {
        let sanitized: String = data
            .iter()
            .take(MAX_HOLDER_ID_LEN)
            .map(|&b| if b.is_ascii_graphic() { b as char } else { '_' })
            .collect();
        let name: String = node
            .chars()
            .map(|c| if c.is_ascii_graphic() { c } else { '_' })
            .take(MAX_HOLDER_ID_LEN)
            .collect();
        HolderId::new(&sanitized)
            .or_else(|_| HolderId::new(name))
            .or_else(|_| HolderId::new("zk-node"))
            .unwrap_or_else(|_| unreachable!("a constant is a valid holder id"))
    })
}

/// The metadata node of node `name` of the election at `dir`
/// (`ROOT/ELECTION`): `ROOT/_regent_metadata/ELECTION/NAME`.
pub(crate) fn meta_path(dir: &str, name: &str) -> String {
    let (root, election) = dir.rsplit_once('/').unwrap_or(("", dir));
    format!("{root}/_regent_metadata/{election}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_leader_latch() {
        let g = new_guid();
        assert_eq!(g.len(), 36);
        assert_eq!(g.as_bytes()[14], b'8', "{g}");
        let p = node_prefix(&g);
        assert!(p.starts_with("_c_") && p.ends_with("-latch-"), "{p}");
        let name = format!("{p}0000000042");
        assert!(is_protected_by(&name, &g));
        assert!(!is_protected_by(&name, &new_guid()));
        assert_eq!(sort_key(&name), "0000000042");
        assert_eq!(sort_key("foreign"), "foreign");
        assert!(is_candidate(&name));
        assert!(is_candidate("_c_x-latch-0000000000000000042"));
        assert!(!is_candidate("garbage"));
        assert!(!is_candidate("n-0000000001"));
        assert!(!is_candidate("_c_x-latch-12"));
    }

    #[test]
    fn regent_s_nodes_are_told_from_curator_s_by_their_guid() {
        let name = format!("{}0000000007", node_prefix(&new_guid()));
        assert!(written_by_regent(&name, b"host-1"));
        assert!(written_by_regent(&name, b"host-1\n{\"k\":\"v\"}"));
        // Data regent cannot have written.
        assert!(!written_by_regent(&name, b"my host\n\xff"));
        // Curator's LeaderLatch: a version-4 UUID, whatever its data.
        let curator = "_c_2f3a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b-latch-0000000007";
        assert!(is_candidate(curator));
        assert!(!written_by_regent(curator, b"host-1"));
        for other in [
            "_c_2f3a9c1e-5b7d-8e8f-9a0b-1c2d3e4f5a6b-latch-12",
            "_c_2f3a9c1e-5b7d-8e8f-9a0b-1c2d3e4f5a6-latch-0000000007",
            "_c_2F3A9C1E-5B7D-8E8F-9A0B-1C2D3E4F5A6B-latch-0000000007",
            "_c_2f3a9c1e-5b7d-8e8f-9a0b-1c2d3e4f5a6b-x-latch-0000000007",
            "n-0000000007",
            "latch-0000000007",
            "_c_",
        ] {
            assert!(!written_by_regent(other, b"host-1"), "{other}");
        }
        assert!(written_by_regent(
            "_c_2f3a9c1e-5b7d-8e8f-9a0b-1c2d3e4f5a6b-latch-0000000007",
            b"host-1"
        ));
    }

    #[test]
    fn children_sort_by_sequence_whatever_the_guid() {
        let mut c = vec![
            "_c_ffff-latch-0000000003".to_owned(),
            "_c_0000-latch-0000000010".to_owned(),
            "_c_aaaa-latch-0000000001".to_owned(),
        ];
        sort_children(&mut c);
        assert_eq!(
            c,
            [
                "_c_aaaa-latch-0000000001",
                "_c_ffff-latch-0000000003",
                "_c_0000-latch-0000000010"
            ]
        );
    }

    #[test]
    fn data_round_trips_and_is_the_bare_id_without_metadata() {
        let h = HolderId::new("host-1:80").unwrap();
        assert_eq!(encode(&h, &Metadata::new()), b"host-1:80");
        assert_eq!(decode(b"host-1:80"), Some((h.clone(), Metadata::new())));
        let m = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        assert_eq!(decode(&encode(&h, &m)), Some((h, m)));
    }

    #[test]
    fn foreign_data_leads_under_a_derived_holder() {
        let l = leader_of("_c_x-latch-0000000001", b"my host\n\xff", 7);
        assert_eq!(l.holder.as_str(), "my_host__");
        assert_eq!(l.token, FencingToken::new(7));
        assert_eq!(l.metadata.get("zk.node"), Some("_c_x-latch-0000000001"));
        let l = leader_of("n-0000000001", b"", 8);
        assert_eq!(l.holder.as_str(), "n-0000000001");
        let long = vec![b'x'; 5000];
        let l = leader_of("n", &long, 9);
        assert_eq!(l.holder.as_str().len(), 128);
        assert_eq!(l.metadata.get("zk.data").unwrap().len(), MAX_FOREIGN_VALUE);
        // A Curator participant id that is a valid holder id is the holder.
        let l = leader_of("_c_x-latch-0000000002", b"curator-1", 10);
        assert_eq!(l.holder.as_str(), "curator-1");
        assert!(l.metadata.is_empty());
    }

    #[test]
    fn a_node_s_holder_is_the_one_its_leader_shows() {
        let h = HolderId::new("host-1").unwrap();
        let m = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        let cases: [(&str, Vec<u8>); 5] = [
            ("_c_x-latch-0000000001", encode(&h, &m)),
            ("_c_x-latch-0000000002", b"curator-1".to_vec()),
            ("_c_x-latch-0000000003", b"my host\n\xff".to_vec()),
            ("n-0000000004", Vec::new()),
            ("garbage", b"\x00\xff not regent".to_vec()),
        ];
        for (node, data) in cases {
            assert_eq!(
                holder_of(node, &data),
                leader_of(node, &data, 1).holder,
                "{node}"
            );
        }
    }
}
