//! What the kit reads of a member's `/v3/maintenance/status`: [`Status`],
//! whether the member leads and in which Raft term.

/// The part of `/v3/maintenance/status` the kit reads. The JSON gateway
/// writes 64-bit integers as strings and leaves out zero values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Status {
    member_id: u64,
    leader: u64,
    pub(super) raft_term: u64,
}

impl Status {
    pub(super) fn parse(body: &str) -> Option<Self> {
        let json: serde_json::Value = serde_json::from_str(body).ok()?;
        let number = |value: Option<&serde_json::Value>| match value {
            None => Some(0),
            Some(serde_json::Value::String(s)) => s.parse().ok(),
            Some(value) => value.as_u64(),
        };
        Some(Self {
            member_id: number(json.get("header").and_then(|h| h.get("member_id")))?,
            leader: number(json.get("leader"))?,
            raft_term: number(json.get("raftTerm"))?,
        })
    }

    pub(super) fn is_leader(&self) -> bool {
        self.leader != 0 && self.leader == self.member_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_gateway_status() {
        let body = r#"{"header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"1","raft_term":"2"},"version":"3.4.23","dbSize":"20480","leader":"13668033151171901709","raftIndex":"5","raftTerm":"2"}"#;
        let status = Status::parse(body).unwrap();
        assert_eq!(status.member_id, 13_668_033_151_171_901_709);
        assert_eq!(status.raft_term, 2);
        assert!(status.is_leader());
    }

    #[test]
    fn a_member_without_leader_is_not_leader() {
        let status = Status::parse(r#"{"header":{"member_id":"7"},"raftTerm":"3"}"#).unwrap();
        assert_eq!(status.leader, 0);
        assert!(!status.is_leader());
    }
}
