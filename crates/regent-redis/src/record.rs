//! The lease record as the store reads it, checked: garbage another
//! program wrote is a `Corrupt` error naming the field, never a panic.
//!
//! A script answers with an array whose first element says what it found
//! (`won`, `held`, `none`, `foreign`, …) and whose others are strings,
//! integers or nil; [`Reply`] reads that shape from any reply, and every
//! reply of another shape is `Protocol`.

use redis::Value;
use regent_core::{ErrorKind, FencingToken, HolderId, LeaderInfo, Metadata, StoreError};

/// A script's answer: its tag, then its fields (nil as `None`).
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) tag: String,
    pub(crate) fields: Vec<Option<String>>,
}

impl Reply {
    pub(crate) fn parse(what: &dyn Fn() -> String, value: Value) -> Result<Self, StoreError> {
        let bad = |v: &Value| {
            StoreError::new(
                ErrorKind::Protocol,
                format!("{}: the script answered {v:?}", what()),
            )
        };
        let Value::Array(items) = value else {
            return Err(bad(&value));
        };
        let mut texts = Vec::with_capacity(items.len());
        for item in &items {
            texts.push(match item {
                Value::Nil => None,
                Value::Int(i) => Some(i.to_string()),
                Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                Value::SimpleString(s) => Some(s.clone()),
                other => return Err(bad(other)),
            });
        }
        let mut texts = texts.into_iter();
        match texts.next() {
            Some(Some(tag)) => Ok(Self {
                tag,
                fields: texts.collect(),
            }),
            _ => Err(bad(&Value::Array(items))),
        }
    }

    /// Field `i`, if the script gave it.
    pub(crate) fn field(&self, i: usize) -> Option<&str> {
        self.fields.get(i).and_then(|f| f.as_deref())
    }
}

/// The leader a record names (its `holder`, `token` and `metadata`
/// fields), or why the record is not one of ours.
pub(crate) fn leader(
    what: &dyn Fn() -> String,
    key: &str,
    holder: Option<&str>,
    token: Option<&str>,
    metadata: Option<&str>,
) -> Result<LeaderInfo, StoreError> {
    let bad = |why: String| {
        StoreError::corrupt(format!(
            "{}: the key {key} is a hash regent did not write (another program's?); \
             regent never takes it over: {why}",
            what()
        ))
    };
    let holder = holder.ok_or_else(|| bad("it has no field `holder`".into()))?;
    let holder = HolderId::new(holder)
        .map_err(|e| bad(format!("holder {holder:?} is not a holder id ({e})")))?;
    let token = token.ok_or_else(|| bad("it has no field `token`".into()))?;
    let token =
        parse_token(token).ok_or_else(|| bad(format!("token {token:?} is not a fencing token")))?;
    let metadata = Metadata::from_json(metadata.unwrap_or("{}")).map_err(bad)?;
    Ok(LeaderInfo {
        holder,
        token,
        metadata,
    })
}

/// A token as the scripts write it: a positive decimal integer.
pub(crate) fn parse_token(text: &str) -> Option<FencingToken> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u64>()
        .ok()
        .filter(|t| *t > 0)
        .map(FencingToken::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn what() -> String {
        "redis store: election 'e'".to_owned()
    }

    #[test]
    fn garbage_is_corrupt_naming_the_field() {
        for (holder, token, metadata, says) in [
            (None, Some("1"), None, "no field `holder`"),
            (Some("a b"), Some("1"), None, "holder"),
            (Some("a"), None, None, "no field `token`"),
            (Some("a"), Some("0"), None, "token \"0\""),
            (Some("a"), Some("-5"), None, "token \"-5\""),
            (Some("a"), Some("1e3"), None, "token \"1e3\""),
            (Some("a"), Some("99999999999999999999999"), None, "token"),
            (Some("a"), Some("1"), Some("not json"), "not JSON"),
            (Some("a"), Some("1"), Some("[1]"), "not a JSON object"),
            (Some("a"), Some("1"), Some(r#"{"k": 1}"#), "not a string"),
        ] {
            let e = leader(&what, "k", holder, token, metadata).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt);
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[test]
    fn a_record_of_ours_reads_back() {
        let m = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        let json = m.to_json();
        let l = leader(&what, "k", Some("a-1"), Some("7"), Some(&json)).unwrap();
        assert_eq!(l.holder.as_str(), "a-1");
        assert_eq!(l.token.get(), 7);
        assert_eq!(l.metadata, m);
    }

    #[test]
    fn replies_of_another_shape_are_protocol_errors() {
        for v in [
            Value::Nil,
            Value::Int(1),
            Value::Array(vec![]),
            Value::Array(vec![Value::Nil]),
            Value::Array(vec![Value::Array(vec![])]),
        ] {
            let e = Reply::parse(&what, v).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Protocol);
        }
        let r = Reply::parse(
            &what,
            Value::Array(vec![
                Value::BulkString(b"held".to_vec()),
                Value::Nil,
                Value::Int(5),
            ]),
        )
        .unwrap();
        assert_eq!(r.tag, "held");
        assert_eq!(r.field(0), None);
        assert_eq!(r.field(1), Some("5"));
        assert_eq!(r.field(7), None);
    }
}
