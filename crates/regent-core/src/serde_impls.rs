//! `serde` for the public value types (feature `serde`): what a service
//! puts in its `/leader` JSON or its own messages.
//!
//! Names and ids are strings, checked again on the way in (a name that
//! [`ElectionName::new`] refuses does not deserialize); a token is its
//! number; metadata is an object of strings within [`MAX_METADATA_LEN`];
//! a [`Status`] is an object tagged by its state:
//!
//! ```
//! use regent_core::{FencingToken, HolderId, LeaderInfo, Metadata, Status};
//!
//! let leader = LeaderInfo {
//!     holder: HolderId::new("web-1")?,
//!     token: FencingToken::new(7),
//!     metadata: Metadata::from_pairs([("addr", "10.0.0.1:8080")])?,
//! };
//! let json = serde_json::to_string(&Status::Leader { leader: leader.clone() })?;
//! assert_eq!(
//!     json,
//!     r#"{"state":"leader","leader":{"holder":"web-1","token":7,"metadata":{"addr":"10.0.0.1:8080"}}}"#
//! );
//! assert_eq!(serde_json::from_str::<Status>(&json)?, Status::Leader { leader });
//! assert!(serde_json::from_str::<HolderId>(r#""has space""#).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`MAX_METADATA_LEN`]: crate::MAX_METADATA_LEN
//! [`Status`]: crate::Status

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::types::{ElectionName, FencingToken, HolderId, Metadata};

impl Serialize for ElectionName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ElectionName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ElectionName::new(s).map_err(D::Error::custom)
    }
}

impl Serialize for HolderId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for HolderId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        HolderId::new(s).map_err(D::Error::custom)
    }
}

impl Serialize for FencingToken {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.get())
    }
}

impl<'de> Deserialize<'de> for FencingToken {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u64::deserialize(d).map(FencingToken::new)
    }
}

impl Serialize for Metadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, String>::deserialize(d)?;
        Metadata::from_pairs(map).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use crate::{ElectionName, MAX_METADATA_LEN, Metadata, Status};

    #[test]
    fn refused_values_do_not_deserialize() {
        assert!(serde_json::from_str::<ElectionName>(r#""-bad""#).is_err());
        let big = format!(r#"{{"k":"{}"}}"#, "x".repeat(MAX_METADATA_LEN));
        let e = serde_json::from_str::<Metadata>(&big).unwrap_err();
        assert!(e.to_string().contains("metadata"), "{e}");
        let status: Status = serde_json::from_str(r#"{"state":"follower","leader":null}"#).unwrap();
        assert_eq!(status, Status::Follower { leader: None });
        assert_eq!(
            serde_json::to_string(&Status::Starting).unwrap(),
            r#"{"state":"starting"}"#
        );
    }
}
