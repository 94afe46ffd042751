//! The memory store's side of the contract: [`LeaseStore`] for
//! [`MemoryStore`], each call applied under its lock through
//! `MemoryStore::call`, which injects the faults.

use tokio::time::Instant;

use super::MemoryStore;
use super::state::{Record, RecordEndCause, expiry, lease_of};
use crate::error::{ErrorKind, StoreError};
use crate::store::{
    Acquire, AcquireRequest, HandOff, LeaderStream, LeaseStore, Renewal, SafetyClass, StoreInfo,
    StoreStyle, TtlGrant, WatchMode,
};
use crate::types::{Candidacy, ElectionName, HolderId, LeaderInfo, Lease, Metadata};
use std::time::Duration;

fn corrupt(election: &ElectionName) -> StoreError {
    StoreError::corrupt(format!(
        "memory store: the record of election '{election}' was not written by regent"
    ))
}

impl LeaseStore for MemoryStore {
    fn info(&self) -> StoreInfo {
        let f = self.faults();
        StoreInfo::new(
            "memory",
            self.inner.style,
            WatchMode::Notify,
            SafetyClass::Ephemeral,
        )
        .with_ttl_range(f.min_ttl, f.max_ttl)
        .with_expiry_slack(f.expiry_slack)
        .with_ttl_grant(if f.granted_ttl.is_some() {
            TtlGrant::Negotiated
        } else {
            TtlGrant::AtLeastAsked
        })
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let style = self.inner.style;
        let (min_ttl, max_ttl, granted, slack) = {
            let f = self.faults();
            (f.min_ttl, f.max_ttl, f.granted_ttl, f.expiry_slack)
        };
        self.call(Some(&req.holder), "acquire", |state, now| {
            if req.ttl < min_ttl || req.ttl > max_ttl {
                return Err(StoreError::new(
                    ErrorKind::Config,
                    format!(
                        "memory store: ttl {:?} of election '{}' is outside the {min_ttl:?}..={max_ttl:?} it honours",
                        req.ttl, req.election
                    ),
                ));
            }
            let (held, freed_at, drift) =
                (state.expiry_held, state.expiry_freed_at, state.clock_drift);
            let e = state.elections.entry(req.election.clone()).or_default();
            let mut changed = !held && e.purge(now, freed_at);
            if e.garbage {
                return Err(corrupt(&req.election));
            }
            let ttl = granted.unwrap_or(req.ttl);
            let life = ttl.saturating_add(slack.for_ttl(ttl));
            let record = Record {
                holder: req.holder.clone(),
                ttl,
                life,
                expires_at: expiry(now, life, drift),
                metadata: req.metadata.clone(),
            };
            match style {
                StoreStyle::Queue => {
                    let ours = queued
                        .filter(|q| q.election == req.election && q.holder == req.holder)
                        .and_then(|q| {
                            let r = e.records.get_mut(&q.token.get())?;
                            (r.holder == q.holder).then_some((q.token.get(), r))
                        });
                    let token = match ours {
                        Some((token, r)) => {
                            // Refresh: a Won answer must restart the TTL.
                            r.expires_at = expiry(now, r.life, drift);
                            r.metadata = req.metadata.clone();
                            token
                        }
                        None => {
                            changed = true;
                            e.insert(record, now)
                        }
                    };
                    let lease = lease_of(&req.election, token, &e.records[&token]);
                    let head = *e.records.keys().next().expect("just inserted");
                    if head == token {
                        Ok((Acquire::Won(lease), changed))
                    } else {
                        Ok((
                            Acquire::Held {
                                leader: e.leader(),
                                queued: Some(lease),
                            },
                            changed,
                        ))
                    }
                }
                _ => {
                    if let Some(leader) = e.leader() {
                        return Ok((
                            Acquire::Held {
                                leader: Some(leader),
                                queued: None,
                            },
                            changed,
                        ));
                    }
                    // Given to a successor that has not taken it yet.
                    if e.reserved.as_ref().is_some_and(|(to, _)| *to != req.holder) {
                        return Ok((
                            Acquire::Held {
                                leader: None,
                                queued: None,
                            },
                            changed,
                        ));
                    }
                    e.reserved = None;
                    let lease = lease_of(&req.election, e.counter + 1, &record);
                    e.insert(record, now);
                    Ok((Acquire::Won(lease), true))
                }
            }
        })
        .await
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        self.call(Some(&lease.holder), "renew", |state, now| {
            let drift = state.clock_drift;
            let (Some(e), changed) = state.purged(&lease.election, now) else {
                return Ok((Renewal::Lost, false));
            };
            if e.garbage {
                return Err(corrupt(&lease.election));
            }
            match e.records.get_mut(&lease.token.get()) {
                Some(r) if r.holder == lease.holder => {
                    r.expires_at = expiry(now, r.life, drift);
                    Ok((Renewal::Renewed, changed))
                }
                _ => Ok((Renewal::Lost, changed)),
            }
        })
        .await
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        self.call(Some(&lease.holder), "update metadata", |state, now| {
            let (Some(e), changed) = state.purged(&lease.election, now) else {
                return Ok((Renewal::Lost, false));
            };
            if e.garbage {
                return Err(corrupt(&lease.election));
            }
            match e.records.get_mut(&lease.token.get()) {
                // The expiry stays: an update is not a renewal.
                Some(r) if r.holder == lease.holder => {
                    let updated = r.metadata != *metadata;
                    r.metadata = metadata.clone();
                    Ok((Renewal::Renewed, changed || updated))
                }
                _ => Ok((Renewal::Lost, changed)),
            }
        })
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.call(Some(&lease.holder), "release", |state, now| {
            let (Some(e), mut changed) = state.purged(&lease.election, now) else {
                return Ok(((), false));
            };
            let token = lease.token.get();
            if e.records
                .get(&token)
                .is_some_and(|r| r.holder == lease.holder)
            {
                e.records.remove(&token);
                let by = lease.holder.clone();
                e.log_end(token, now, RecordEndCause::Released { by });
                changed = true;
            }
            Ok(((), changed))
        })
        .await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.call(None, "read", |state, now| {
            let (Some(e), changed) = state.purged(election, now) else {
                return Ok((None, false));
            };
            if e.garbage {
                return Err(corrupt(election));
            }
            Ok((e.leader(), changed))
        })
        .await
    }

    /// Queue style: the live records in token order (so the order they
    /// queued). Race style: the roster, in holder order. Through the
    /// faults like any read.
    async fn candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Option<Vec<Candidacy>>, StoreError> {
        let queue = self.inner.style == StoreStyle::Queue;
        self.call(None, "read", |state, now| {
            let (Some(e), changed) = state.purged(election, now) else {
                return Ok((Some(Vec::new()), false));
            };
            if e.garbage {
                return Err(corrupt(election));
            }
            let list = if queue {
                e.records
                    .values()
                    .map(|r| Candidacy::new(r.holder.clone(), r.metadata.clone()))
                    .collect()
            } else {
                e.roster
                    .iter()
                    .map(|(holder, (metadata, _))| Candidacy::new(holder.clone(), metadata.clone()))
                    .collect()
            };
            Ok((Some(list), changed))
        })
        .await
    }

    /// Race style: the roster entry, timed like a record (the expiry slack
    /// included). Queue style: nothing, the line is the roster.
    async fn enroll(&self, req: &AcquireRequest) -> Result<(), StoreError> {
        if self.inner.style == StoreStyle::Queue {
            return Ok(());
        }
        let slack = self.faults().expiry_slack;
        self.call(Some(&req.holder), "enroll", |state, now| {
            let drift = state.clock_drift;
            let (_, changed) = state.purged(&req.election, now);
            let e = state.elections.entry(req.election.clone()).or_default();
            let life = req.ttl.saturating_add(slack.for_ttl(req.ttl));
            e.roster.insert(
                req.holder.clone(),
                (req.metadata.clone(), expiry(now, life, drift)),
            );
            Ok(((), changed))
        })
        .await
    }

    async fn withdraw(&self, election: &ElectionName, holder: &HolderId) -> Result<(), StoreError> {
        if self.inner.style == StoreStyle::Queue {
            return Ok(());
        }
        self.call(Some(holder), "withdraw", |state, now| {
            let (e, changed) = state.purged(election, now);
            if let Some(e) = e {
                e.roster.remove(holder);
            }
            Ok(((), changed))
        })
        .await
    }

    /// Race style: the record freed and reserved for the successor. Queue
    /// style: the records between ours and the successor's first taken out
    /// with ours; released plainly when the successor is not behind us.
    async fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        let queue = self.inner.style == StoreStyle::Queue;
        self.call(Some(&lease.holder), "release", |state, now| {
            let drift = state.clock_drift;
            let (Some(e), mut changed) = state.purged(&lease.election, now) else {
                return Ok((HandOff::Released, false));
            };
            let token = lease.token.get();
            if e.records
                .get(&token)
                .is_none_or(|r| r.holder != lease.holder)
            {
                // Not ours (any more): nothing to give.
                return Ok((HandOff::Released, changed));
            }
            let mut passed = HandOff::Released;
            if queue {
                let next = e
                    .records
                    .range(token + 1..)
                    .find(|(_, r)| r.holder == *successor)
                    .map(|(t, _)| *t);
                if let Some(next) = next {
                    let between: Vec<u64> =
                        e.records.range(token + 1..next).map(|(t, _)| *t).collect();
                    for t in between {
                        e.records.remove(&t);
                        e.log_end(t, now, RecordEndCause::Deleted);
                    }
                    passed = HandOff::ToSuccessor;
                }
            } else {
                e.reserved = Some((successor.clone(), expiry(now, window, drift)));
                passed = HandOff::ToSuccessor;
            }
            e.records.remove(&token);
            let by = lease.holder.clone();
            e.log_end(token, now, RecordEndCause::Released { by });
            changed = true;
            Ok((passed, changed))
        })
        .await
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        // Opening a watch is a call like any other: it can fail.
        self.call(None, "watch", |_, _| Ok(((), false))).await?;
        let store = self.clone();
        let election = election.clone();
        let stream = futures_util::stream::unfold(
            (store, election, None::<Option<LeaderInfo>>),
            |(store, election, last)| async move {
                loop {
                    let news = {
                        // Registered before the state is read: a change made
                        // after the read wakes it.
                        let changed = store.inner.changed.notified();
                        tokio::pin!(changed);
                        changed.as_mut().enable();
                        let (now_leader, next_expiry) = {
                            let mut state = store.state();
                            let held = state.expiry_held;
                            match state.purged(&election, Instant::now()).0 {
                                None => (Ok(None), None),
                                Some(e) if e.garbage => (Err(corrupt(&election)), None),
                                Some(e) => (Ok(e.leader()), e.next_expiry().filter(|_| !held)),
                            }
                        };
                        match now_leader {
                            Ok(leader) if last.as_ref() == Some(&leader) => {
                                let expiry = async {
                                    match next_expiry {
                                        Some(at) => tokio::time::sleep_until(at).await,
                                        None => std::future::pending().await,
                                    }
                                };
                                // Either way the state is read again.
                                tokio::select! {
                                    biased;
                                    () = changed => {}
                                    () = expiry => {}
                                }
                                None
                            }
                            news => Some(news),
                        }
                    };
                    match news {
                        None => {}
                        Some(Err(e)) => return Some((Err(e), (store, election, last))),
                        Some(Ok(leader)) => {
                            let item = Ok(leader.clone());
                            return Some((item, (store, election, Some(leader))));
                        }
                    }
                }
            },
        );
        Ok(Box::pin(stream))
    }
}
