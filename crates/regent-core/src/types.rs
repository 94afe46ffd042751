//! The nouns of leader election: election names, holder ids, fencing tokens,
//! leases and the leader as others see it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::InvalidName;

/// The longest election name accepted, in bytes.
pub const MAX_ELECTION_NAME_LEN: usize = 128;
/// The longest holder id accepted, in bytes.
pub const MAX_HOLDER_ID_LEN: usize = 128;
/// The largest metadata accepted: the sum of key and value lengths, in bytes.
pub const MAX_METADATA_LEN: usize = 4096;

/// The name of one election: every instance that campaigns under the same
/// name, on the same store, competes for one leader.
///
/// Rules, checked by [`ElectionName::new`]: 1 to 128 bytes of ASCII letters,
/// digits, `.`, `_` and `-`, starting with a letter or a digit. The charset is
/// the intersection of what every backend can use verbatim as a key, path
/// segment, blob name or SQL value, so a name never needs escaping and never
/// collides with another after escaping.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ElectionName(Arc<str>);

impl ElectionName {
    /// Validates and wraps an election name.
    ///
    /// # Errors
    ///
    /// [`InvalidName`] naming the rule broken (empty, too long, a character
    /// outside the charset, or a first character that is not alphanumeric).
    pub fn new(name: impl AsRef<str>) -> Result<Self, InvalidName> {
        let name = name.as_ref();
        if name.is_empty() {
            return Err(InvalidName::Empty {
                what: "election name",
            });
        }
        if name.len() > MAX_ELECTION_NAME_LEN {
            return Err(InvalidName::TooLong {
                what: "election name",
                len: name.len(),
                max: MAX_ELECTION_NAME_LEN,
            });
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(InvalidName::BadChar {
                what: "election name",
                c,
                allowed: "ASCII letters, digits, '.', '_' and '-'",
            });
        }
        if !name.as_bytes()[0].is_ascii_alphanumeric() {
            return Err(InvalidName::BadStart {
                what: "election name",
            });
        }
        Ok(Self(name.into()))
    }

    /// A name of regent's own beside `base` (`base` + `suffix`), outside
    /// the charset of [`new`](Self::new) so that no user's election can
    /// take it: the hand-over request record.
    pub(crate) fn derived(base: &ElectionName, suffix: &str) -> Self {
        Self(format!("{base}{suffix}").into())
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ElectionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ElectionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::str::FromStr for ElectionName {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

/// The identity of one candidate: who holds, or wants, the lease.
///
/// Rules, checked by [`HolderId::new`]: 1 to 128 bytes of printable ASCII
/// with no whitespace (`!` to `~`). Ids must be unique among the candidates of
/// one election; two candidates with one id would each believe the other's
/// lease is their own.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HolderId(Arc<str>);

impl HolderId {
    /// Validates and wraps a holder id.
    ///
    /// # Errors
    ///
    /// [`InvalidName`] naming the rule broken.
    pub fn new(id: impl AsRef<str>) -> Result<Self, InvalidName> {
        let id = id.as_ref();
        if id.is_empty() {
            return Err(InvalidName::Empty { what: "holder id" });
        }
        if id.len() > MAX_HOLDER_ID_LEN {
            return Err(InvalidName::TooLong {
                what: "holder id",
                len: id.len(),
                max: MAX_HOLDER_ID_LEN,
            });
        }
        if let Some(c) = id.chars().find(|c| !c.is_ascii_graphic()) {
            return Err(InvalidName::BadChar {
                what: "holder id",
                c,
                allowed: "printable ASCII without whitespace",
            });
        }
        Ok(Self(id.into()))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id as one segment of a key, a blob name or a URL path, for a
    /// store that keeps a record per holder (a race store's roster): ASCII
    /// letters, digits, `-`, `_` and `.` as they are, every other byte —
    /// and a final `.`, so that no id is `.` or `..` — as `~` and two hex
    /// digits. Distinct ids give distinct segments, and a person reads the
    /// holder off it.
    ///
    /// ```
    /// use regent_core::HolderId;
    /// assert_eq!(HolderId::new("web-1.zone_a")?.to_segment(), "web-1.zone_a");
    /// assert_eq!(HolderId::new("a/b")?.to_segment(), "a~2Fb");
    /// assert_eq!(HolderId::new("..")?.to_segment(), ".~2E");
    /// # Ok::<(), regent_core::InvalidName>(())
    /// ```
    pub fn to_segment(&self) -> String {
        let id = self.0.as_bytes();
        let mut out = String::with_capacity(id.len());
        for (i, &b) in id.iter().enumerate() {
            let last = i + 1 == id.len();
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_') || (b == b'.' && !last) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("~{b:02X}"));
            }
        }
        out
    }

    /// `HOSTNAME-PID`, `regent run`'s default `--id`: unique among the
    /// processes of a host, and it says where the leader runs. The host's
    /// name is cut to its printable characters (at most 100); `host` if it
    /// has none.
    ///
    /// ```
    /// let id = regent_core::HolderId::host_pid();
    /// assert!(id.as_str().ends_with(&format!("-{}", std::process::id())));
    /// ```
    pub fn host_pid() -> Self {
        let host: String = host_name()
            .chars()
            .filter(char::is_ascii_graphic)
            .take(100)
            .collect();
        let host = if host.is_empty() { "host".into() } else { host };
        Self(format!("{host}-{}", std::process::id()).into())
    }
}

/// The host's name, as `uname -n` says it.
#[cfg(unix)]
fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

#[cfg(not(unix))]
fn host_name() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_default()
}

impl fmt::Display for HolderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for HolderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::str::FromStr for HolderId {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

/// A fencing token: a number that is strictly greater for every new
/// leadership term of an election than for any term before it, across
/// holders, store restarts and deletion of the lease record.
///
/// The leader passes its token with every write to the resources it
/// coordinates; a resource remembers the largest token it has seen and
/// rejects smaller ones. That, and only that, makes a lease safe against a
/// leader that was paused (GC, SIGSTOP, a slow network) past its lease: the
/// paused leader's writes carry a smaller token than its successor's.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(u64);

impl FencingToken {
    /// Wraps a raw token. Stores create tokens; users compare them.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The raw value, for passing to a resource.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FencingToken({})", self.0)
    }
}

/// Free-form facts a leader publishes about itself (an address to reach it,
/// a version), stored beside the lease and shown to followers and observers.
///
/// At most [`MAX_METADATA_LEN`] bytes of keys and values together.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Metadata(BTreeMap<String, String>);

impl Metadata {
    /// No metadata.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds metadata from pairs, checking the size bound.
    ///
    /// # Errors
    ///
    /// [`InvalidName::TooLong`] when the pairs exceed [`MAX_METADATA_LEN`].
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Result<Self, InvalidName>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let map: BTreeMap<String, String> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let len: usize = map.iter().map(|(k, v)| k.len() + v.len()).sum();
        if len > MAX_METADATA_LEN {
            return Err(InvalidName::TooLong {
                what: "metadata",
                len,
                max: MAX_METADATA_LEN,
            });
        }
        Ok(Self(map))
    }

    /// The metadata as a JSON object of strings, the form the stores that
    /// keep it as text write it in.
    ///
    /// ```
    /// use regent_core::Metadata;
    ///
    /// let m = Metadata::from_pairs([("addr", "10.0.0.5:8080")])?;
    /// assert_eq!(m.to_json(), r#"{"addr":"10.0.0.5:8080"}"#);
    /// assert_eq!(Metadata::from_json(&m.to_json())?, m);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_json(&self) -> String {
        let map: serde_json::Map<String, serde_json::Value> = self
            .iter()
            .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v.to_owned())))
            .collect();
        serde_json::Value::Object(map).to_string()
    }

    /// Reads what [`to_json`](Self::to_json) wrote.
    ///
    /// # Errors
    ///
    /// A message naming what is wrong (not JSON, not an object, a value
    /// that is not a string, too large), for the store's "corrupt record"
    /// error.
    pub fn from_json(json: &str) -> Result<Self, String> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("metadata is not JSON ({e})"))?;
        let serde_json::Value::Object(map) = value else {
            return Err(format!("metadata {json:?} is not a JSON object"));
        };
        let mut pairs = Vec::with_capacity(map.len());
        for (k, v) in map {
            match v {
                serde_json::Value::String(s) => pairs.push((k, s)),
                other => return Err(format!("metadata value of {k:?} is {other}, not a string")),
            }
        }
        Self::from_pairs(pairs).map_err(|e| format!("metadata is too large ({e})"))
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// All pairs, ordered by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Whether there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The same metadata with `key` set to `value`.
    ///
    /// # Errors
    ///
    /// [`InvalidName::TooLong`] when the pairs would exceed
    /// [`MAX_METADATA_LEN`].
    pub fn with(
        &self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<Self, InvalidName> {
        let mut map = self.0.clone();
        map.insert(key.into(), value.into());
        Self::from_pairs(map)
    }

    /// The same metadata without `key`.
    #[must_use]
    pub fn without(&self, key: &str) -> Self {
        let mut map = self.0.clone();
        map.remove(key);
        Self(map)
    }
}

/// The metadata key under which a candidate publishes its priority: a
/// decimal `i32`, higher leads ([`handover`](crate::handover)).
pub const PRIORITY_KEY: &str = "regent.priority";

/// One candidate of an election as a store lists it
/// ([`LeaseStore::candidates`](crate::LeaseStore::candidates)): a queue
/// store's place in line, or a race store's roster entry
/// ([`LeaseStore::enroll`](crate::LeaseStore::enroll)).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Candidacy {
    /// Who stands.
    pub holder: HolderId,
    /// What it published: on a queue store its record's metadata, on a race
    /// store its enrollment's. A participant that is not regent's (an
    /// `etcdctl elect`, a Curator latch) shows what the store shows of it.
    pub metadata: Metadata,
}

impl Candidacy {
    /// A candidate and its metadata.
    pub fn new(holder: HolderId, metadata: Metadata) -> Self {
        Self { holder, metadata }
    }

    /// The priority it published ([`PRIORITY_KEY`]),
    /// `None` when it published none (a participant that is not regent's,
    /// or a value that is not a number).
    pub fn priority(&self) -> Option<i32> {
        self.metadata.get(PRIORITY_KEY)?.trim().parse().ok()
    }
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.0.iter()).finish()
    }
}

/// The leader of an election, as the store shows it to everyone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LeaderInfo {
    /// Who leads.
    pub holder: HolderId,
    /// The fencing token of its term.
    pub token: FencingToken,
    /// What it published about itself.
    pub metadata: Metadata,
}

/// An opaque, store-specific handle of a lease record: an etcd lease id, a
/// Consul session id, an Azure lease id. The core never looks inside.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct LeaseHandle(Arc<str>);

impl LeaseHandle {
    /// Wraps a store's handle.
    pub fn new(handle: impl Into<Arc<str>>) -> Self {
        Self(handle.into())
    }

    /// The handle as the store wrote it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LeaseHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// A lease record that a store granted to one holder: either the election's
/// lease itself (after [`Acquire::Won`](crate::Acquire::Won)) or, on a queue
/// store, the holder's place in line (after
/// [`Acquire::Held`](crate::Acquire::Held)).
///
/// Holding a `Lease` value proves nothing by itself: leadership is the
/// [`Leadership`](crate::Leadership) guard, which tracks the local deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The election.
    pub election: ElectionName,
    /// The holder the record belongs to.
    pub holder: HolderId,
    /// The fencing token of the record.
    pub token: FencingToken,
    /// The time to live the store guarantees at least, from the instant the
    /// granting or renewing request was sent.
    pub ttl: Duration,
    /// The store's own handle of the record.
    pub handle: LeaseHandle,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn election_name_rules() {
        assert!(ElectionName::new("jobs-scheduler.v2_eu").is_ok());
        assert!(ElectionName::new("a").is_ok());
        assert!(matches!(
            ElectionName::new(""),
            Err(InvalidName::Empty { .. })
        ));
        assert!(matches!(
            ElectionName::new("a".repeat(129)),
            Err(InvalidName::TooLong { len: 129, .. })
        ));
        assert!(ElectionName::new("a".repeat(128)).is_ok());
        assert!(matches!(
            ElectionName::new("a/b"),
            Err(InvalidName::BadChar { c: '/', .. })
        ));
        assert!(matches!(
            ElectionName::new("-a"),
            Err(InvalidName::BadStart { .. })
        ));
        assert!(matches!(
            ElectionName::new("é"),
            Err(InvalidName::BadChar { .. })
        ));
        let err = ElectionName::new("a b").unwrap_err().to_string();
        assert!(err.contains("election name"), "{err}");
    }

    #[test]
    fn holder_id_rules() {
        assert!(HolderId::new("host-1:4242").is_ok());
        assert!(HolderId::new("").is_err());
        assert!(HolderId::new("a b").is_err());
        assert!(HolderId::new("a\n").is_err());
        assert!(HolderId::new("x".repeat(129)).is_err());
    }

    #[test]
    fn metadata_is_bounded() {
        assert!(Metadata::from_pairs([("addr", "10.0.0.1:80")]).is_ok());
        let big = "v".repeat(MAX_METADATA_LEN);
        assert!(Metadata::from_pairs([("k", big)]).is_err());
    }

    #[test]
    fn tokens_order_by_value() {
        assert!(FencingToken::new(2) > FencingToken::new(1));
        assert_eq!(FencingToken::new(7).get(), 7);
    }
}
