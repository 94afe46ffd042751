//! The memory store's state: each election's live records, its token
//! counter, and the log of every record's life ([`RecordLife`]), with the
//! calls counted ([`CallStats`]).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::types::{
    ElectionName, FencingToken, HolderId, LeaderInfo, Lease, LeaseHandle, Metadata,
};

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) elections: HashMap<ElectionName, Election>,
    pub(super) expiry_held: bool,
    /// When expiry was last let go after a hold: a record whose time passed
    /// during the hold expired then.
    pub(super) expiry_freed_at: Option<Instant>,
    /// How much faster the store's clock runs than tokio's (0.01: 1 %).
    pub(super) clock_drift: f64,
    pub(super) stats: CallStats,
}

impl State {
    /// The election's records with those whose time has passed removed
    /// (and logged as expired), unless expiry is held; and whether any
    /// went.
    pub(super) fn purged(
        &mut self,
        election: &ElectionName,
        now: Instant,
    ) -> (Option<&mut Election>, bool) {
        let (held, freed_at) = (self.expiry_held, self.expiry_freed_at);
        match self.elections.get_mut(election) {
            Some(e) => {
                let changed = !held && e.purge(now, freed_at);
                (Some(e), changed)
            }
            None => (None, false),
        }
    }
}

/// When a record granted `life` (store time) at `now` expires on tokio's
/// clock, with the store's clock `drift` faster.
pub(super) fn expiry(now: Instant, life: Duration, drift: f64) -> Instant {
    if drift == 0.0 {
        now + life
    } else {
        now + life.div_f64(1.0 + drift)
    }
}

#[derive(Debug, Default)]
pub(super) struct Election {
    /// The last token issued. Never reset, so tokens grow across release,
    /// expiry and deletion of records.
    pub(super) counter: u64,
    /// Live records by token. Race style: at most one. Queue style: the
    /// first leads.
    pub(super) records: BTreeMap<u64, Record>,
    pub(super) garbage: bool,
    /// Every record created, in token order (so by creation).
    pub(super) log: Vec<RecordLife>,
    /// Race style: the roster (contract item 10), by holder: each entry's
    /// metadata and expiry.
    pub(super) roster: BTreeMap<HolderId, (Metadata, Instant)>,
    /// Race style: a lease given to a successor (contract item 11), and
    /// until when only it may take the election.
    pub(super) reserved: Option<(HolderId, Instant)>,
}

#[derive(Debug, Clone)]
pub(super) struct Record {
    pub(super) holder: HolderId,
    /// The ttl granted.
    pub(super) ttl: Duration,
    /// The ttl plus the expiry slack: how long after an acquire or renewal
    /// the record really lives.
    pub(super) life: Duration,
    pub(super) expires_at: Instant,
    pub(super) metadata: Metadata,
}

/// How many calls of each kind the store was asked (failed ones included).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallStats {
    /// `try_acquire` calls.
    pub acquires: u64,
    /// `renew` calls.
    pub renews: u64,
    /// `release` calls.
    pub releases: u64,
    /// `update_metadata` calls.
    pub metadata_updates: u64,
}

/// The life of one record on the store, from [`MemoryStore::record_log`](super::MemoryStore::record_log).
///
/// On a race store a record leads from its creation to its end; on a
/// queue store it waits in line until every record with a smaller token
/// has ended, and leads from then to its end. Instants are tokio's clock;
/// a record's expiry already follows the store's clock
/// ([`MemoryStore::set_clock_drift`](super::MemoryStore::set_clock_drift)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordLife {
    /// Whose record.
    pub holder: HolderId,
    /// Its token.
    pub token: FencingToken,
    /// When the store created it.
    pub created: Instant,
    /// When and how it ended; `None` while it lives.
    pub end: Option<RecordEnd>,
}

/// When and how a record ended ([`RecordLife::end`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordEnd {
    /// The first instant at which the store no longer held the record: its
    /// expiry instant (the lease is free from then, whenever the store
    /// noticed), or the instant of the release or deletion.
    pub at: Instant,
    /// How.
    pub cause: RecordEndCause,
}

/// How a record ended ([`RecordEnd::cause`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordEndCause {
    /// Its time passed without a renewal.
    Expired,
    /// A release freed it.
    Released {
        /// Who asked: the holder whose lease the release named (the store
        /// frees only a caller's own record: contract item 4).
        by: HolderId,
    },
    /// [`MemoryStore::delete_records`](super::MemoryStore::delete_records) or [`MemoryStore::put_garbage`](super::MemoryStore::put_garbage)
    /// removed it.
    Deleted,
}

impl Election {
    /// Removes the records whose time has passed at `now` and logs their
    /// end; `freed_at` is when a hold of expiry last ended. Whether any
    /// went.
    pub(super) fn purge(&mut self, now: Instant, freed_at: Option<Instant>) -> bool {
        let expired: Vec<u64> = self
            .records
            .iter()
            .filter(|(_, r)| r.expires_at <= now)
            .map(|(token, _)| *token)
            .collect();
        self.roster.retain(|_, (_, expires_at)| *expires_at > now);
        if self
            .reserved
            .as_ref()
            .is_some_and(|(_, until)| *until <= now)
        {
            self.reserved = None;
        }
        for token in &expired {
            let r = self.records.remove(token).expect("just seen");
            // A record whose time passed while expiry was held went when
            // the hold ended.
            let at = freed_at.map_or(r.expires_at, |f| f.max(r.expires_at));
            self.log_end(*token, at, RecordEndCause::Expired);
        }
        !expired.is_empty()
    }

    /// Adds a record under the next token and logs it; returns the token.
    pub(super) fn insert(&mut self, record: Record, now: Instant) -> u64 {
        self.counter += 1;
        self.log.push(RecordLife {
            holder: record.holder.clone(),
            token: FencingToken::new(self.counter),
            created: now,
            end: None,
        });
        self.records.insert(self.counter, record);
        self.counter
    }

    /// Removes every record, logging each as `cause` at `now`.
    pub(super) fn clear(&mut self, now: Instant) {
        for token in std::mem::take(&mut self.records).into_keys() {
            self.log_end(token, now, RecordEndCause::Deleted);
        }
    }

    pub(super) fn log_end(&mut self, token: u64, at: Instant, cause: RecordEndCause) {
        // The log is in token order: tokens are issued in order of creation.
        if let Ok(i) = self.log.binary_search_by_key(&token, |l| l.token.get())
            && self.log[i].end.is_none()
        {
            self.log[i].end = Some(RecordEnd { at, cause });
        }
    }

    pub(super) fn leader(&self) -> Option<LeaderInfo> {
        self.records.iter().next().map(|(token, r)| LeaderInfo {
            holder: r.holder.clone(),
            token: FencingToken::new(*token),
            metadata: r.metadata.clone(),
        })
    }

    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.records.values().map(|r| r.expires_at).min()
    }
}

pub(super) fn lease_of(election: &ElectionName, token: u64, r: &Record) -> Lease {
    Lease {
        election: election.clone(),
        holder: r.holder.clone(),
        token: FencingToken::new(token),
        ttl: r.ttl,
        handle: LeaseHandle::new(format!("mem-{token}")),
    }
}
