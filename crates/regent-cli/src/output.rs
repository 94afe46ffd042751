//! How regent prints a leader, for `status`, `watch` and their `--peer`
//! forms: the documented JSON object, or one line for a person.

use regent_core::{ElectionName, LeaderInfo};
use serde_json::{Value, json};

/// The documented JSON object:
/// `{"election": NAME, "leader": null | {"id": ID, "token": N, "metadata": {...}}}`.
pub(crate) fn to_json(election: &ElectionName, leader: Option<&LeaderInfo>) -> Value {
    json!({
        "election": election.as_str(),
        "leader": leader.map(|l| json!({
            "id": l.holder.as_str(),
            "token": l.token.get(),
            "metadata": l.metadata.iter().map(|(k, v)| (k.to_owned(), Value::from(v))).collect::<serde_json::Map<String, Value>>(),
        })),
    })
}

fn human(election: &ElectionName, leader: Option<&LeaderInfo>) -> String {
    match leader {
        Some(l) => format!(
            "election {election}: leader {} (token {})",
            l.holder, l.token
        ),
        None => format!("election {election}: no leader"),
    }
}

pub(crate) fn print(json: bool, election: &ElectionName, leader: Option<&LeaderInfo>) {
    use std::io::Write as _;
    let line = if json {
        to_json(election, leader).to_string()
    } else {
        human(election, leader)
    };
    // Whoever read our output is gone (`regent watch | head -1`): done.
    if writeln!(std::io::stdout(), "{line}").is_err() {
        std::process::exit(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::{FencingToken, HolderId, Metadata};

    #[test]
    fn json_shape_is_the_documented_one() {
        let e = ElectionName::new("jobs").unwrap();
        assert_eq!(
            to_json(&e, None).to_string(),
            r#"{"election":"jobs","leader":null}"#
        );
        let l = LeaderInfo {
            holder: HolderId::new("a-1").unwrap(),
            token: FencingToken::new(7),
            metadata: Metadata::from_pairs([("addr", "x")]).unwrap(),
        };
        assert_eq!(
            to_json(&e, Some(&l)),
            json!({"election": "jobs", "leader": {"id": "a-1", "token": 7, "metadata": {"addr": "x"}}})
        );
    }
}
