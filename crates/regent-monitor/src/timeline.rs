//! The timeline of an election's terms as one process saw them: who led,
//! with which token, from when to when, why it ended, and how long nobody
//! led before.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use regent_core::{EndReason, FencingToken, HolderId, LeaderInfo};
use tokio::time::Instant;

/// How many terms a timeline keeps (the oldest go first).
pub const MAX_TERMS: usize = 200;

/// One term as this process saw it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct TermRecord {
    /// Who led.
    pub holder: HolderId,
    /// With which fencing token.
    pub token: FencingToken,
    /// Whether this process held the term.
    pub own: bool,
    /// When this process first saw the term (wall clock, for display).
    pub from: SystemTime,
    /// When it saw the term end; `None` while it goes on.
    pub to: Option<SystemTime>,
    /// Why it ended: the reason itself for this process's own terms
    /// ([`EndReason`]'s words); for another holder's, what could be seen —
    /// the record gone (released, or expired), or another holder's term
    /// in its place.
    pub end: Option<String>,
    /// How long nobody led, as this process saw it, before the term began:
    /// `None` for the first term seen (the gap before it is unknown), zero
    /// when one term followed the other with no leaderless moment seen
    /// between them.
    pub gap_before: Option<Duration>,
}

/// What one election's history looks like from this process.
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    pub(crate) terms: VecDeque<TermRecord>,
    /// Since when nobody leads, as seen here (monotonic clock).
    leaderless_since: Option<Instant>,
    /// Whether a leader (or the lack of one) has been seen at all.
    seen_any: bool,
    /// The leader seen now.
    pub(crate) leader: Option<LeaderInfo>,
    /// Terms seen begin.
    pub(crate) changes: u64,
    /// The last gap seen before a term.
    pub(crate) last_gap: Option<Duration>,
}

/// `at` (monotonic) on the wall clock.
pub(crate) fn wall(at: Instant) -> SystemTime {
    let now = Instant::now();
    let sys = SystemTime::now();
    if at <= now {
        sys.checked_sub(now - at).unwrap_or(sys)
    } else {
        sys + (at - now)
    }
}

impl Timeline {
    /// The leader is now `leader` (`None`: nobody), as of `at`.
    pub(crate) fn leader(&mut self, leader: Option<&LeaderInfo>, own: bool, at: Instant) {
        let first = !self.seen_any;
        self.seen_any = true;
        match leader {
            Some(l) => {
                if self
                    .terms
                    .iter()
                    .any(|t| t.token == l.token && t.holder == l.holder && t.to.is_some())
                {
                    // A term that has ended, seen again (a stale status, or
                    // our own record not yet released): not a new term.
                    return;
                }
                if let Some(current) = self.terms.back_mut()
                    && current.to.is_none()
                    && current.token == l.token
                    && current.holder == l.holder
                {
                    // The same term (new metadata, or seen again).
                    current.own |= own;
                    self.leader = Some(l.clone());
                    return;
                }
                let gap = match self.leaderless_since.take() {
                    Some(since) => Some(at.saturating_duration_since(since)),
                    None if first => None,
                    None => Some(Duration::ZERO),
                };
                self.close(at, format!("replaced by {} (token {})", l.holder, l.token));
                if gap.is_some() {
                    self.last_gap = gap;
                }
                self.changes += 1;
                self.terms.push_back(TermRecord {
                    holder: l.holder.clone(),
                    token: l.token,
                    own,
                    from: wall(at),
                    to: None,
                    end: None,
                    gap_before: gap,
                });
                while self.terms.len() > MAX_TERMS {
                    self.terms.pop_front();
                }
                self.leader = Some(l.clone());
            }
            None => {
                self.close(at, "record gone (released or expired)".to_owned());
                self.leader = None;
                self.leaderless_since.get_or_insert(at);
            }
        }
    }

    /// This process's own term `token` ended at `at` for `reason`: its
    /// record says so, whatever was seen of the end before.
    pub(crate) fn own_end(&mut self, token: FencingToken, reason: EndReason, at: Instant) {
        if let Some(term) = self.terms.iter_mut().rev().find(|t| t.token == token) {
            term.own = true;
            term.end = Some(reason.to_string());
            term.to = Some(wall(at));
        }
        if self.leader.as_ref().is_some_and(|l| l.token == token) {
            self.leader = None;
            self.leaderless_since.get_or_insert(at);
        }
    }

    fn close(&mut self, at: Instant, end: String) {
        if let Some(current) = self.terms.back_mut()
            && current.to.is_none()
        {
            current.to = Some(wall(at));
            current.end.get_or_insert(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::Metadata;

    fn info(holder: &str, token: u64) -> LeaderInfo {
        LeaderInfo {
            holder: HolderId::new(holder).unwrap(),
            token: FencingToken::new(token),
            metadata: Metadata::default(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn terms_gaps_and_ends_as_seen() {
        let mut t = Timeline::default();
        let t0 = Instant::now();
        t.leader(Some(&info("a", 1)), false, t0);
        t.leader(Some(&info("a", 1)), false, t0 + Duration::from_secs(1));
        t.leader(None, false, t0 + Duration::from_secs(5));
        t.leader(Some(&info("b", 2)), false, t0 + Duration::from_millis(6500));
        t.leader(Some(&info("c", 3)), false, t0 + Duration::from_secs(9));
        let terms: Vec<_> = t.terms.iter().collect();
        assert_eq!(terms.len(), 3);
        assert_eq!(terms[0].gap_before, None, "the first term's gap is unknown");
        assert_eq!(
            terms[0].end.as_deref(),
            Some("record gone (released or expired)")
        );
        assert_eq!(terms[1].gap_before, Some(Duration::from_millis(1500)));
        assert_eq!(terms[1].end.as_deref(), Some("replaced by c (token 3)"));
        assert_eq!(terms[2].gap_before, Some(Duration::ZERO));
        assert_eq!(terms[2].to, None);
        assert_eq!(t.last_gap, Some(Duration::ZERO));
        assert_eq!(t.changes, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn an_own_end_states_its_reason() {
        let mut t = Timeline::default();
        let t0 = Instant::now();
        t.leader(Some(&info("me", 4)), true, t0);
        // The status may say "no leader" before the event says why.
        t.leader(None, false, t0 + Duration::from_secs(1));
        t.own_end(
            FencingToken::new(4),
            EndReason::Unhealthy,
            t0 + Duration::from_secs(1),
        );
        assert_eq!(t.terms[0].end.as_deref(), Some("leader task unhealthy"));
        assert!(t.terms[0].own);
        t.leader(Some(&info("b", 5)), false, t0 + Duration::from_secs(3));
        assert_eq!(t.terms[1].gap_before, Some(Duration::from_secs(2)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_that_ended_is_not_opened_again() {
        let mut t = Timeline::default();
        let t0 = Instant::now();
        t.leader(Some(&info("me", 4)), true, t0);
        t.own_end(
            FencingToken::new(4),
            EndReason::Resigned,
            t0 + Duration::from_secs(1),
        );
        // A stale status, or the store still showing our record.
        t.leader(Some(&info("me", 4)), true, t0 + Duration::from_secs(2));
        assert_eq!(t.terms.len(), 1, "{:?}", t.terms);
        assert_eq!(t.changes, 1);
        assert!(t.leader.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn keeps_the_newest_terms() {
        let mut t = Timeline::default();
        let t0 = Instant::now();
        for i in 0..(MAX_TERMS as u64 + 10) {
            t.leader(Some(&info("a", i + 1)), false, t0);
        }
        assert_eq!(t.terms.len(), MAX_TERMS);
        assert_eq!(
            t.terms.back().unwrap().token,
            FencingToken::new(MAX_TERMS as u64 + 10)
        );
    }
}
