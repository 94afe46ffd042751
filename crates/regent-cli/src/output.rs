//! How regent prints a leader, for `status`, `watch` and their `--peer`
//! forms: the documented JSON object, or one line for a person.

use regent_core::{Candidacy, ElectionName, LeaderInfo};
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
    use regent_core::handover::{ANSWERED_KEY, LEAVING_KEY};
    match leader {
        Some(l) => {
            let mut line = format!(
                "election {election}: leader {} (token {})",
                l.holder, l.token
            );
            if let Some(p) = regent_core::handover::priority_of(&l.metadata) {
                line.push_str(&format!(", priority {p}"));
            }
            if l.metadata.get(ANSWERED_KEY).is_some() {
                line.push_str(", handed the lead on request");
            }
            if let Some((why, to)) = l.metadata.get(LEAVING_KEY).and_then(|v| v.split_once(' ')) {
                let why = if why == "preferred" {
                    "a candidate of higher priority"
                } else {
                    "requested"
                };
                line.push_str(&format!("; handing over to {to} ({why})"));
            }
            line
        }
        None => format!("election {election}: no leader"),
    }
}

/// The candidates a store lists, for `status`: `[{"id", "priority"}]` in
/// JSON, one line for a person.
pub(crate) fn candidates_json(list: &[Candidacy]) -> Value {
    Value::Array(
        list.iter()
            .map(|c| json!({"id": c.holder.as_str(), "priority": c.priority()}))
            .collect(),
    )
}

fn candidates_human(list: &[Candidacy]) -> String {
    if list.is_empty() {
        return "  candidates: none listed".to_owned();
    }
    let names: Vec<String> = list
        .iter()
        .map(|c| match c.priority() {
            Some(p) => format!("{} (priority {p})", c.holder),
            None => c.holder.to_string(),
        })
        .collect();
    format!("  candidates: {}", names.join(", "))
}

/// `status --json` (and `/leader`): [`to_json`], with `"candidates"`
/// where the store lists them.
pub(crate) fn status_json(
    election: &ElectionName,
    leader: Option<&LeaderInfo>,
    candidates: Option<&[Candidacy]>,
) -> Value {
    let mut v = to_json(election, leader);
    if let (Some(list), Some(obj)) = (candidates, v.as_object_mut()) {
        obj.insert("candidates".into(), candidates_json(list));
    }
    v
}

/// `status` on a store: the leader, and the candidates where the store
/// lists them (`"candidates"` in JSON, absent where it lists none).
pub(crate) fn print_status(
    json: bool,
    election: &ElectionName,
    leader: Option<&LeaderInfo>,
    candidates: Option<&[Candidacy]>,
) {
    let text = if json {
        status_json(election, leader, candidates).to_string()
    } else {
        match candidates {
            Some(list) => format!("{}\n{}", human(election, leader), candidates_human(list)),
            None => human(election, leader),
        }
    };
    write_line(&text);
}

pub(crate) fn print(json: bool, election: &ElectionName, leader: Option<&LeaderInfo>) {
    let line = if json {
        to_json(election, leader).to_string()
    } else {
        human(election, leader)
    };
    write_line(&line);
}

fn write_line(line: &str) {
    use std::io::Write as _;
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
