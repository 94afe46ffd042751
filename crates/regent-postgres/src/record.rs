//! A lease row as the store reads it, checked: garbage an operator or
//! another program wrote is a `Corrupt` error naming the column, never a
//! panic.

use regent_core::{FencingToken, HolderId, LeaderInfo, Metadata, StoreError};

/// The leader a row names, or why the row is not one of ours.
pub(crate) fn leader(
    what: &dyn Fn() -> String,
    holder: &str,
    token: i64,
    metadata: &str,
) -> Result<LeaderInfo, StoreError> {
    let bad = |why: String| StoreError::corrupt(format!("{}: {why}", what()));
    let holder = HolderId::new(holder)
        .map_err(|e| bad(format!("holder {holder:?} is not a holder id ({e})")))?;
    let token = u64::try_from(token)
        .ok()
        .filter(|t| *t > 0)
        .map(FencingToken::new)
        .ok_or_else(|| bad(format!("token {token} is not a fencing token")))?;
    let metadata = Metadata::from_json(metadata).map_err(bad)?;
    Ok(LeaderInfo {
        holder,
        token,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn what() -> String {
        "postgres store: election 'e'".to_owned()
    }

    #[test]
    fn garbage_is_corrupt_naming_the_column() {
        for (holder, token, metadata, says) in [
            ("", 1, "{}", "holder"),
            ("a b", 1, "{}", "holder"),
            ("a", 0, "{}", "token 0"),
            ("a", -5, "{}", "token -5"),
            ("a", 1, "not json", "not JSON"),
            ("a", 1, "[1]", "not a JSON object"),
            ("a", 1, r#"{"k": 1}"#, "not a string"),
        ] {
            let e = leader(&what, holder, token, metadata).unwrap_err();
            assert_eq!(e.kind(), regent_core::ErrorKind::Corrupt);
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[test]
    fn a_row_of_ours_reads_back() {
        let m = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        let l = leader(&what, "a-1", 7, &m.to_json()).unwrap();
        assert_eq!(l.holder.as_str(), "a-1");
        assert_eq!(l.token.get(), 7);
        assert_eq!(l.metadata, m);
    }
}
