//! `GET /api/state`: what the live page renders, as JSON (times in Unix
//! milliseconds; the page's header comment lists the fields it reads).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::Shown;

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn span_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The state of every election shown.
pub(super) fn of(source: &str, shown: &[Shown]) -> Value {
    json!({
        "version": 1,
        "now_ms": ms(SystemTime::now()),
        "source": source,
        "elections": shown.iter().map(election).collect::<Vec<_>>(),
    })
}

fn election(shown: &Shown) -> Value {
    let seen = shown.monitor.snapshot();
    let health = shown.monitor.health();
    let (ok, reason) = match &health.live {
        Ok(r) => (true, r),
        Err(r) => (false, r),
    };
    json!({
        "election": seen.election.as_str(),
        "store": shown.store,
        "self": seen.holder.as_ref().map(|h| h.as_str()),
        "leader": seen.leader.as_ref().map(|l| json!({
            "id": l.holder.as_str(),
            "token": l.token.get(),
            "metadata": l.metadata.iter().map(|(k, v)| (k.to_owned(), Value::from(v))).collect::<serde_json::Map<String, Value>>(),
            "since_ms": seen.leader_since.map(ms),
        })),
        "lease_left_ms": seen.lease_left.map(span_ms),
        "candidates": seen.candidates.as_ref().map(|c| c.iter().map(|c| c.holder.as_str()).collect::<Vec<_>>()),
        "priorities": seen.candidates.as_ref().map(|c| c.iter().map(regent_core::Candidacy::priority).collect::<Vec<_>>()),
        "health": {"ok": ok, "reason": reason},
        "error": seen.error,
        "terms": seen.terms.iter().map(|t| json!({
            "holder": t.holder.as_str(),
            "token": t.token.get(),
            "own": t.own,
            "from_ms": ms(t.from),
            "to_ms": t.to.map(ms),
            "end": t.end,
            "gap_before_ms": t.gap_before.map(span_ms),
        })).collect::<Vec<_>>(),
    })
}
