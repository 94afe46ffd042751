//! A recorder of who believed it led when, and a checker of the election's
//! safety properties over the whole record.
//!
//! Every candidate of a test shares one [`History`] (clones share the record)
//! and records each term it believes it leads: [`History::begin`] when the
//! belief starts, [`History::end`] when it stops. With a
//! [`Leadership`] guard at hand, [`History::begin_leadership`] and
//! [`History::end_leadership`] do the same with the guard's holder, token and
//! end instant.
//!
//! A term is an [`Interval`], half-open: the holder led from `start`
//! (included) to `end` (excluded), or is still leading when `end` is `None`.
//! [`History::check`] verifies, in this order:
//!
//! 1. **Well-formed record.** Every end matches an earlier begin of the same
//!    (holder, token) that has not ended yet ([`Violation::EndWithoutBegin`]),
//!    and no (holder, token) begins twice ([`Violation::BeganTwice`]).
//! 2. **Election safety.** No two intervals overlap ([`Violation::Overlap`]).
//!    An interval that ends where the next starts does not overlap it; a
//!    zero-length interval (`start == end`) overlaps nothing, since its holder
//!    never led for any instant; an interval still open overlaps every
//!    non-empty interval that starts after it.
//! 3. **Fencing.** Ordered by start, fencing tokens grow strictly across all
//!    intervals, whoever holds them ([`Violation::TokenNotIncreasing`]). Equal
//!    tokens are a violation.
//!
//! An end recorded at an instant before its begin (a guard that ended before
//! its holder got round to recording the begin) closes a zero-length interval
//! at the begin: the holder never acted as leader.
//!
//! ```
//! use std::time::Duration;
//! use regent_core::{FencingToken, HolderId};
//! use regent_testkit::History;
//! use tokio::time::Instant;
//!
//! let history = History::new();
//! let (a, b) = (HolderId::new("a")?, HolderId::new("b")?);
//! let t0 = Instant::now();
//! history.begin(&a, FencingToken::new(1), t0);
//! history.end(&a, FencingToken::new(1), t0 + Duration::from_secs(10));
//! history.begin(&b, FencingToken::new(2), t0 + Duration::from_secs(10));
//!
//! let summary = history.assert_ok();
//! assert_eq!(summary.terms, 2);
//! assert_eq!(summary.max_token, Some(FencingToken::new(2)));
//! # Ok::<(), regent_core::InvalidName>(())
//! ```

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use regent_core::{FencingToken, HolderId, Leadership};
use tokio::time::Instant;

/// The shared record of who believed it led when.
///
/// Cheap to clone: clones share one record, so every candidate of a test can
/// hold its own. Recording never fails and never blocks for long; a record
/// whose recorder panicked stays usable.
#[derive(Clone, Default, Debug)]
pub struct History {
    events: Arc<Mutex<Vec<Event>>>,
}

#[derive(Clone, Debug)]
struct Event {
    kind: Kind,
    holder: HolderId,
    token: FencingToken,
    at: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Begin,
    End,
}

/// One term as its holder believed it: leading over `[start, end)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Who believed it led.
    pub holder: HolderId,
    /// The fencing token of the term.
    pub token: FencingToken,
    /// When the belief began (included).
    pub start: Instant,
    /// When the belief ended (excluded); `None` while still leading.
    pub end: Option<Instant>,
}

impl Interval {
    /// Zero-length intervals cover no instant and so overlap nothing.
    fn is_empty(&self) -> bool {
        self.end == Some(self.start)
    }

    fn covers(&self, at: Instant) -> bool {
        self.start <= at && self.end.is_none_or(|end| at < end)
    }
}

/// What a history that passed [`History::check`] contained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The number of terms (intervals), ended or not.
    pub terms: usize,
    /// The number of distinct holders that led at least once.
    pub holders: usize,
    /// The largest fencing token of any term; `None` for an empty history.
    pub max_token: Option<FencingToken>,
}

/// A broken safety property, found by [`History::check`].
///
/// Each variant carries `origin`, the instant of the first recorded event:
/// the message gives every instant as the time since it (`+1.5s`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    /// Two holders (or one holder in two terms) believed they led at the same
    /// instant.
    #[error(
        "leadership overlapped: {} and {} both believed they led at +{:?}",
        Shown(.first, *.origin),
        Shown(.second, *.origin),
        since(*.origin, .second.start)
    )]
    Overlap {
        /// The interval that started first.
        first: Interval,
        /// The interval that started before `first` ended.
        second: Interval,
        /// The instant of the first recorded event.
        origin: Instant,
    },
    /// A term started later than another but did not carry a larger fencing
    /// token.
    #[error(
        "fencing token did not increase: {} started after {}; \
         tokens must grow strictly in order of start",
        Shown(.later, *.origin),
        Shown(.earlier, *.origin)
    )]
    TokenNotIncreasing {
        /// The interval that started first.
        earlier: Interval,
        /// The interval that started after it, with a token not greater.
        later: Interval,
        /// The instant of the first recorded event.
        origin: Instant,
    },
    /// An end was recorded for a (holder, token) that had no open begin:
    /// it never began, or had already ended.
    #[error(
        "holder {holder} ended token {token} at +{:?}, but had no open begin \
         for that token (it never began, or had already ended)",
        since(*.origin, *.at)
    )]
    EndWithoutBegin {
        /// The holder that recorded the end.
        holder: HolderId,
        /// The token it ended.
        token: FencingToken,
        /// The instant recorded for the end.
        at: Instant,
        /// The instant of the first recorded event.
        origin: Instant,
    },
    /// A (holder, token) began a second time.
    #[error(
        "holder {holder} began token {token} a second time, at +{:?}; \
         a holder begins each token once",
        since(*.origin, *.at)
    )]
    BeganTwice {
        /// The holder that began twice.
        holder: HolderId,
        /// The token it began twice.
        token: FencingToken,
        /// The instant recorded for the second begin.
        at: Instant,
        /// The instant of the first recorded event.
        origin: Instant,
    },
}

fn since(origin: Instant, at: Instant) -> Duration {
    at.saturating_duration_since(origin)
}

/// An interval as a message shows it, times relative to `origin`.
struct Shown<'a>(&'a Interval, Instant);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Shown(interval, origin) = *self;
        write!(
            f,
            "holder {} with token {} over [+{:?}, ",
            interval.holder,
            interval.token,
            since(origin, interval.start)
        )?;
        match interval.end {
            Some(end) => write!(f, "+{:?})", since(origin, end)),
            None => f.write_str("still leading)"),
        }
    }
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `holder` believes it leads with `token` from `at`.
    pub fn begin(&self, holder: &HolderId, token: FencingToken, at: Instant) {
        self.record(Kind::Begin, holder, token, at);
    }

    /// Records that the belief of `holder` that it leads with `token` ended
    /// at `at`.
    pub fn end(&self, holder: &HolderId, token: FencingToken, at: Instant) {
        self.record(Kind::End, holder, token, at);
    }

    /// Records that `leadership` begins now: call it as soon as the guard is
    /// in hand, before any work as leader.
    pub fn begin_leadership(&self, leadership: &Leadership) {
        self.begin(leadership.holder(), leadership.token(), Instant::now());
    }

    /// Records that `leadership` ended: at the instant it ended if it has
    /// ([`Leadership::ended`]), else now (for a guard given up before its end
    /// was published).
    pub fn end_leadership(&self, leadership: &Leadership) {
        let at = leadership
            .ended()
            .map_or_else(Instant::now, |ended| ended.at);
        self.end(leadership.holder(), leadership.token(), at);
    }

    /// Every interval recorded so far, ordered by start, then token.
    ///
    /// Malformed records are left out here (an end without an open begin, a
    /// second begin of one token); [`check`](Self::check) reports them.
    pub fn intervals(&self) -> Vec<Interval> {
        Record::build(&self.snapshot()).intervals
    }

    /// The intervals that cover `at`: `start <= at < end`, an open interval
    /// counting as endless. Ordered by start, then token; more than one means
    /// the history is unsafe.
    pub fn leaders_at(&self, at: Instant) -> Vec<Interval> {
        let mut intervals = self.intervals();
        intervals.retain(|interval| interval.covers(at));
        intervals
    }

    /// Checks the history for the properties in the [module docs](self).
    ///
    /// # Errors
    ///
    /// The first [`Violation`] found, checking the properties in their
    /// documented order and each in order of start.
    #[allow(
        clippy::result_large_err,
        reason = "checked once per test; a violation carries both intervals to explain itself"
    )]
    pub fn check(&self) -> Result<Summary, Violation> {
        Record::build(&self.snapshot()).check()
    }

    /// Checks the history and returns its summary.
    ///
    /// # Panics
    ///
    /// If [`check`](Self::check) finds a violation, with its message and
    /// every recorded interval.
    #[track_caller]
    pub fn assert_ok(&self) -> Summary {
        let record = Record::build(&self.snapshot());
        match record.check() {
            Ok(summary) => summary,
            Err(violation) => panic!(
                "leadership history is unsafe: {violation}\n{}",
                record.dump()
            ),
        }
    }

    fn record(&self, kind: Kind, holder: &HolderId, token: FencingToken, at: Instant) {
        self.lock().push(Event {
            kind,
            holder: holder.clone(),
            token,
            at,
        });
    }

    /// One consistent copy, so that a check and its dump see the same events
    /// while candidates keep recording.
    fn snapshot(&self) -> Vec<Event> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Event>> {
        // A candidate that panicked mid-test must not hide the history from
        // the check that explains why; a push cannot leave the Vec torn.
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Intervals built from events, with the first malformed event found.
struct Record {
    intervals: Vec<Interval>,
    malformed: Option<Violation>,
    origin: Instant,
}

impl Record {
    fn build(events: &[Event]) -> Self {
        // Any instant will do for an empty history: nothing is shown.
        let origin = events
            .iter()
            .map(|e| e.at)
            .min()
            .unwrap_or_else(Instant::now);
        let mut intervals: Vec<Interval> = Vec::new();
        let mut begun: HashMap<(HolderId, FencingToken), usize> = HashMap::new();
        let mut malformed = None;
        for event in events {
            let key = (event.holder.clone(), event.token);
            match event.kind {
                Kind::Begin => match begun.entry(key) {
                    Entry::Occupied(_) => {
                        malformed.get_or_insert_with(|| Violation::BeganTwice {
                            holder: event.holder.clone(),
                            token: event.token,
                            at: event.at,
                            origin,
                        });
                    }
                    Entry::Vacant(slot) => {
                        slot.insert(intervals.len());
                        intervals.push(Interval {
                            holder: event.holder.clone(),
                            token: event.token,
                            start: event.at,
                            end: None,
                        });
                    }
                },
                Kind::End => match begun.get(&key).map(|&i| &mut intervals[i]) {
                    Some(interval) if interval.end.is_none() => {
                        interval.end = Some(event.at.max(interval.start));
                    }
                    _ => {
                        malformed.get_or_insert_with(|| Violation::EndWithoutBegin {
                            holder: event.holder.clone(),
                            token: event.token,
                            at: event.at,
                            origin,
                        });
                    }
                },
            }
        }
        // Stable: intervals alike in start and token keep recording order.
        intervals.sort_by_key(|interval| (interval.start, interval.token));
        Self {
            intervals,
            malformed,
            origin,
        }
    }

    #[allow(clippy::result_large_err, reason = "as History::check")]
    fn check(&self) -> Result<Summary, Violation> {
        if let Some(violation) = &self.malformed {
            return Err(violation.clone());
        }
        let origin = self.origin;

        // Invariant: the non-empty intervals before `last` are disjoint and
        // end no later than `last` starts, so `last` reaches furthest.
        let mut last: Option<&Interval> = None;
        for interval in self.intervals.iter().filter(|i| !i.is_empty()) {
            if let Some(previous) = last
                && previous.end.is_none_or(|end| interval.start < end)
            {
                return Err(Violation::Overlap {
                    first: previous.clone(),
                    second: interval.clone(),
                    origin,
                });
            }
            last = Some(interval);
        }

        for pair in self.intervals.windows(2) {
            let [earlier, later] = pair else {
                unreachable!("windows(2) yields pairs")
            };
            if later.token <= earlier.token {
                return Err(Violation::TokenNotIncreasing {
                    earlier: earlier.clone(),
                    later: later.clone(),
                    origin,
                });
            }
        }

        Ok(Summary {
            terms: self.intervals.len(),
            holders: self
                .intervals
                .iter()
                .map(|i| &i.holder)
                .collect::<HashSet<_>>()
                .len(),
            max_token: self.intervals.iter().map(|i| i.token).max(),
        })
    }

    fn dump(&self) -> String {
        let mut out = format!(
            "{} recorded interval(s), by start, times since the first event:",
            self.intervals.len()
        );
        for interval in &self.intervals {
            let _ = write!(out, "\n  {}", Shown(interval, self.origin));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use regent_core::{Candidate, ElectionName, EndReason, memory::MemoryStore};

    fn holder(id: &str) -> HolderId {
        HolderId::new(id).unwrap()
    }

    fn token(value: u64) -> FencingToken {
        FencingToken::new(value)
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A history with one closed interval per `(holder, token, start, end)`
    /// in seconds after `t0`, recorded in the order given.
    fn closed(t0: Instant, terms: &[(&str, u64, u64, u64)]) -> History {
        let history = History::new();
        for &(id, value, start, end) in terms {
            history.begin(&holder(id), token(value), t0 + secs(start));
            history.end(&holder(id), token(value), t0 + secs(end));
        }
        history
    }

    fn is_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        is_send_sync::<History>();
        is_send_sync::<Interval>();
        is_send_sync::<Summary>();
        is_send_sync::<Violation>();
    }

    #[test]
    fn empty_history_is_ok() {
        let summary = History::new().assert_ok();
        assert_eq!(
            summary,
            Summary {
                terms: 0,
                holders: 0,
                max_token: None,
            }
        );
        assert!(History::new().intervals().is_empty());
    }

    #[test]
    fn valid_multi_term_history() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10), ("b", 4, 12, 20)]);
        history.begin(&holder("a"), token(7), t0 + secs(30));

        let summary = history.assert_ok();
        assert_eq!(
            summary,
            Summary {
                terms: 3,
                holders: 2,
                max_token: Some(token(7)),
            }
        );
        let intervals = history.intervals();
        assert_eq!(
            intervals
                .iter()
                .map(|i| (i.holder.as_str(), i.token.get()))
                .collect::<Vec<_>>(),
            [("a", 1), ("b", 4), ("a", 7)]
        );
        assert_eq!(intervals[1].start, t0 + secs(12));
        assert_eq!(intervals[1].end, Some(t0 + secs(20)));
        assert_eq!(intervals[2].end, None);
    }

    #[test]
    fn intervals_are_ordered_by_start_not_by_recording() {
        let t0 = Instant::now();
        let history = closed(t0, &[("b", 2, 10, 20), ("a", 1, 0, 10)]);
        let starts: Vec<_> = history.intervals().iter().map(|i| i.start).collect();
        assert_eq!(starts, [t0, t0 + secs(10)]);
        history.assert_ok();
    }

    #[test]
    fn back_to_back_intervals_do_not_overlap() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10), ("b", 2, 10, 20), ("a", 3, 20, 30)]);
        assert_eq!(history.assert_ok().terms, 3);
    }

    #[test]
    fn zero_length_interval_overlaps_nothing() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10), ("b", 2, 5, 5), ("c", 3, 10, 20)]);
        // A zero-length term right where another begins, and one inside an
        // open term.
        history.begin(&holder("d"), token(4), t0 + secs(20));
        history.end(&holder("d"), token(4), t0 + secs(20));
        history.begin(&holder("e"), token(5), t0 + secs(20));
        history.begin(&holder("f"), token(6), t0 + secs(25));
        history.end(&holder("f"), token(6), t0 + secs(25));
        assert_eq!(history.assert_ok().terms, 6);
    }

    #[test]
    fn overlapping_closed_intervals_are_a_violation() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10), ("b", 2, 5, 15)]);
        match history.check() {
            Err(Violation::Overlap { first, second, .. }) => {
                assert_eq!((first.holder.as_str(), first.token), ("a", token(1)));
                assert_eq!((second.holder.as_str(), second.token), ("b", token(2)));
            }
            other => panic!("expected an overlap, got {other:?}"),
        }
    }

    #[test]
    fn open_interval_followed_by_another_start_is_an_overlap() {
        let t0 = Instant::now();
        let history = History::new();
        history.begin(&holder("a"), token(1), t0);
        history.begin(&holder("b"), token(2), t0 + secs(60));
        history.end(&holder("b"), token(2), t0 + secs(61));
        match history.check() {
            Err(Violation::Overlap { first, second, .. }) => {
                assert_eq!(first.end, None);
                assert_eq!(second.holder.as_str(), "b");
            }
            other => panic!("expected an overlap, got {other:?}"),
        }
    }

    #[test]
    fn overlap_is_found_past_a_short_interval_inside_a_long_one() {
        // b lies inside a; c starts after b ended but while a still leads.
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 100), ("b", 2, 10, 20), ("c", 3, 30, 40)]);
        match history.check() {
            Err(Violation::Overlap { first, second, .. }) => {
                assert_eq!(first.holder.as_str(), "a");
                assert_eq!(second.holder.as_str(), "b");
            }
            other => panic!("expected an overlap, got {other:?}"),
        }
    }

    #[test]
    fn same_holder_overlapping_itself_is_a_violation() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10), ("a", 2, 9, 20)]);
        assert!(matches!(history.check(), Err(Violation::Overlap { .. })));
    }

    #[test]
    fn equal_tokens_are_a_violation() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10), ("b", 1, 10, 20)]);
        match history.check() {
            Err(Violation::TokenNotIncreasing { earlier, later, .. }) => {
                assert_eq!(earlier.holder.as_str(), "a");
                assert_eq!(later.holder.as_str(), "b");
                assert_eq!(later.token, token(1));
            }
            other => panic!("expected a token violation, got {other:?}"),
        }
    }

    #[test]
    fn decreasing_token_is_a_violation_even_for_zero_length_terms() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 5, 0, 10), ("b", 4, 10, 10)]);
        match history.check() {
            Err(Violation::TokenNotIncreasing { earlier, later, .. }) => {
                assert_eq!(earlier.token, token(5));
                assert_eq!(later.token, token(4));
            }
            other => panic!("expected a token violation, got {other:?}"),
        }
    }

    #[test]
    fn end_without_begin_is_a_violation() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10)]);
        history.end(&holder("b"), token(2), t0 + secs(15));
        match history.check() {
            Err(Violation::EndWithoutBegin {
                holder: h,
                token: t,
                at,
                ..
            }) => {
                assert_eq!(h, holder("b"));
                assert_eq!(t, token(2));
                assert_eq!(at, t0 + secs(15));
            }
            other => panic!("expected an end without begin, got {other:?}"),
        }
        // The malformed end is left out of the intervals.
        assert_eq!(history.intervals().len(), 1);
    }

    #[test]
    fn second_end_is_an_end_without_begin() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10)]);
        history.end(&holder("a"), token(1), t0 + secs(11));
        assert!(matches!(
            history.check(),
            Err(Violation::EndWithoutBegin { .. })
        ));
        assert_eq!(history.intervals()[0].end, Some(t0 + secs(10)));
    }

    #[test]
    fn end_recorded_before_its_begin_is_an_end_without_begin() {
        let t0 = Instant::now();
        let history = History::new();
        history.end(&holder("a"), token(1), t0 + secs(10));
        history.begin(&holder("a"), token(1), t0);
        assert!(matches!(
            history.check(),
            Err(Violation::EndWithoutBegin { .. })
        ));
    }

    #[test]
    fn began_twice_is_a_violation() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10)]);
        history.begin(&holder("a"), token(1), t0 + secs(20));
        match history.check() {
            Err(Violation::BeganTwice {
                holder: h,
                token: t,
                at,
                ..
            }) => {
                assert_eq!(h, holder("a"));
                assert_eq!(t, token(1));
                assert_eq!(at, t0 + secs(20));
            }
            other => panic!("expected a second begin, got {other:?}"),
        }
    }

    #[test]
    fn end_before_begin_instant_closes_a_zero_length_interval() {
        let t0 = Instant::now();
        let history = History::new();
        history.begin(&holder("a"), token(1), t0 + secs(10));
        history.end(&holder("a"), token(1), t0 + secs(5));
        assert_eq!(history.intervals()[0].end, Some(t0 + secs(10)));
        history.assert_ok();
    }

    #[test]
    fn leaders_at_is_half_open() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10), ("b", 2, 10, 20), ("c", 3, 25, 25)]);
        history.begin(&holder("d"), token(4), t0 + secs(30));
        let leaders = |s: u64| -> Vec<String> {
            history
                .leaders_at(t0 + secs(s))
                .iter()
                .map(|i| i.holder.to_string())
                .collect()
        };
        assert_eq!(leaders(0), ["a"]);
        assert_eq!(leaders(9), ["a"]);
        assert_eq!(leaders(10), ["b"]);
        assert!(leaders(20).is_empty());
        assert!(leaders(25).is_empty(), "zero-length covers nothing");
        assert_eq!(leaders(30), ["d"]);
        assert_eq!(leaders(10_000), ["d"]);
        assert!(
            history
                .leaders_at(t0 + Duration::from_millis(9_999))
                .iter()
                .all(|i| i.holder.as_str() == "a")
        );
    }

    #[test]
    fn messages_name_holders_tokens_and_relative_instants() {
        let t0 = Instant::now();
        let overlap = closed(t0, &[("node-a", 1, 0, 10), ("node-b", 2, 5, 15)])
            .check()
            .unwrap_err()
            .to_string();
        assert_eq!(
            overlap,
            "leadership overlapped: holder node-a with token 1 over [+0ns, +10s) \
             and holder node-b with token 2 over [+5s, +15s) both believed they led at +5s"
        );

        let tokens = closed(t0, &[("node-a", 3, 0, 10), ("node-b", 3, 10, 20)])
            .check()
            .unwrap_err()
            .to_string();
        assert_eq!(
            tokens,
            "fencing token did not increase: holder node-b with token 3 over [+10s, +20s) \
             started after holder node-a with token 3 over [+0ns, +10s); \
             tokens must grow strictly in order of start"
        );

        let history = History::new();
        history.begin(&holder("node-a"), token(1), t0);
        history.end(
            &holder("node-b"),
            token(9),
            t0 + Duration::from_millis(1500),
        );
        let end = history.check().unwrap_err().to_string();
        assert!(
            end.contains("holder node-b ended token 9 at +1.5s"),
            "{end}"
        );

        history.begin(&holder("node-a"), token(1), t0 + secs(2));
        // The first malformed event is reported.
        assert_eq!(history.check().unwrap_err().to_string(), end);

        let twice = History::new();
        twice.begin(&holder("node-a"), token(1), t0);
        twice.begin(&holder("node-a"), token(1), t0 + secs(2));
        let message = twice.check().unwrap_err().to_string();
        assert!(
            message.contains("holder node-a began token 1 a second time, at +2s"),
            "{message}"
        );
    }

    #[test]
    #[should_panic(expected = "leadership history is unsafe: leadership overlapped")]
    fn assert_ok_panics_on_a_violation() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10)]);
        history.begin(&holder("b"), token(2), t0 + secs(5));
        history.assert_ok();
    }

    #[test]
    fn assert_ok_panic_lists_every_interval() {
        let t0 = Instant::now();
        let history = closed(t0, &[("a", 1, 0, 10)]);
        history.begin(&holder("b"), token(2), t0 + secs(5));
        let panic = std::panic::catch_unwind(|| history.assert_ok()).unwrap_err();
        let message = panic.downcast_ref::<String>().expect("a formatted message");
        assert!(
            message.ends_with(
                "2 recorded interval(s), by start, times since the first event:\n  \
                 holder a with token 1 over [+0ns, +10s)\n  \
                 holder b with token 2 over [+5s, still leading)"
            ),
            "{message}"
        );
    }

    #[test]
    fn clones_share_one_record_across_threads() {
        let history = History::new();
        let t0 = Instant::now();
        let threads: Vec<_> = (0..8u64)
            .map(|n| {
                let history = history.clone();
                std::thread::spawn(move || {
                    let id = holder(&format!("h{n}"));
                    history.begin(&id, token(n + 1), t0 + secs(n * 10));
                    history.end(&id, token(n + 1), t0 + secs(n * 10 + 10));
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let summary = history.assert_ok();
        assert_eq!((summary.terms, summary.holders), (8, 8));
        assert_eq!(summary.max_token, Some(token(8)));
    }

    #[tokio::test(start_paused = true)]
    async fn records_leadership_guards_of_a_real_candidate() {
        let store = MemoryStore::race();
        let election = ElectionName::new("history").unwrap();
        let candidate = |id: &str| {
            Candidate::builder(store.clone(), election.clone(), holder(id))
                .ttl(secs(10))
                .build()
                .unwrap()
        };
        let (a, b) = (candidate("a"), candidate("b"));
        let history = History::new();

        let first = a.campaign().await.unwrap();
        history.begin_leadership(&first);
        tokio::time::sleep(secs(3)).await;
        a.shutdown().await;
        let ended = first.until_ended().await;
        assert_eq!(ended.reason, EndReason::Shutdown);
        // Recorded late, but at the instant leadership ended.
        tokio::time::sleep(secs(1)).await;
        history.end_leadership(&first);
        drop(first);

        let second = b.campaign().await.unwrap();
        history.begin_leadership(&second);
        let intervals = history.intervals();
        assert!(second.token() > intervals[0].token);
        assert_eq!(intervals[0].end, Some(ended.at));
        assert_eq!(intervals[1].end, None);
        let summary = history.assert_ok();
        assert_eq!((summary.terms, summary.holders), (2, 2));
        assert_eq!(summary.max_token, Some(second.token()));

        // Still leading: ends now.
        let before = Instant::now();
        history.end_leadership(&second);
        assert!(history.intervals()[1].end >= Some(before));
        b.shutdown().await;
        history.assert_ok();
    }
}
