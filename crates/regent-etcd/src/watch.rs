//! Reading an election's line and watching it: the first keys in
//! create-revision order, and the stream of leaders a watch yields, which
//! tells a change of the head alone and learns the key behind a new head a
//! moment later.

use std::time::Duration;

use tokio::time::Instant;

use etcd_client::{GetOptions, KeyValue, SortOrder, SortTarget, WatchOptions};
use regent_core::{Candidacy, ElectionName, LeaderInfo, LeaderStream, StoreError};

use crate::client::EtcdStore;
use crate::record::leader_of;

impl EtcdStore {
    pub(crate) async fn read_head(
        &self,
        election: &ElectionName,
        what: &str,
    ) -> Result<(Option<LeaderInfo>, i64), StoreError> {
        let (mut line, revision) = self.read_line(election, what, 1, true).await?;
        Ok((line.pop().map(|h| h.leader), revision))
    }

    /// Every key of the line, in order (create revision, as the line's
    /// head is read): one range read. Each key's holder is shown as it
    /// would be at the head, a foreign value's too.
    pub(crate) async fn read_candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Vec<Candidacy>, StoreError> {
        // A limit of 0 is no limit to etcd.
        let (line, _) = self
            .read_line(election, "list the candidates", 0, true)
            .await?;
        Ok(line
            .into_iter()
            .map(|k| Candidacy::new(k.leader.holder, k.leader.metadata))
            .collect())
    }

    /// The first `n` keys of the line (every key for `n = 0`), in order,
    /// and the revision they were read at; `together`: sent with the
    /// reads made beside it ([`reads`](crate::reads)).
    async fn read_line(
        &self,
        election: &ElectionName,
        what: &str,
        n: i64,
        together: bool,
    ) -> Result<(Vec<Head>, i64), StoreError> {
        let (kvs, revision) = self.read_keys(election, what, n, together).await?;
        Ok((kvs.iter().map(Head::of).collect(), revision))
    }

    /// The first `n` keys of the line (every key for `n = 0`) as etcd
    /// answered them, in order (create revision), and the revision they
    /// were read at: one range read; `together`: sent with the reads made
    /// beside it ([`reads`](crate::reads)), else at once.
    pub(crate) async fn read_keys(
        &self,
        election: &ElectionName,
        what: &str,
        n: i64,
        together: bool,
    ) -> Result<(Vec<KeyValue>, i64), StoreError> {
        let prefix = self.election_prefix(election);
        let mut client = self.client.clone();
        let options = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(n);
        if together
            && let Some(answer) = self
                .reads
                .read_together(&self.client, self.request_timeout, &prefix, options.clone())
                .await
        {
            return Ok(answer);
        }
        let mut resp = self
            .call(
                election,
                || format!("{what} of election '{election}'"),
                client.get(prefix, Some(options)),
            )
            .await?;
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        Ok((resp.take_kvs(), revision))
    }

    /// The leaders of `election`, from the one read now to each new head
    /// of its line: [`LeaseStore::watch`](regent_core::LeaseStore::watch).
    pub(crate) async fn leader_stream(
        &self,
        election: &ElectionName,
    ) -> Result<LeaderStream, StoreError> {
        let (keys, revision) = self.read_line(election, "watch", 2, false).await?;
        let mut line = Line::default();
        line.read(keys, revision);
        let prefix = self.election_prefix(election);
        let mut client = self.client.clone();
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(revision + 1);
        let stream = self
            .call(
                election,
                || format!("watch election '{election}'"),
                client.watch(prefix, Some(options)),
            )
            .await?;
        struct State {
            store: EtcdStore,
            election: ElectionName,
            stream: Option<etcd_client::WatchStream>,
            line: Line,
            /// What to yield before anything else: the leader as read.
            first: Option<Option<LeaderInfo>>,
            /// When the line behind the head is to be read (`Read::Refill`).
            refill_at: Option<tokio::time::Instant>,
        }
        let state = State {
            store: self.clone(),
            election: election.clone(),
            stream: Some(stream),
            first: Some(line.head.as_ref().map(|h| h.leader.clone())),
            line,
            refill_at: None,
        };
        let leaders = futures_util::stream::unfold(state, |mut s| async move {
            if let Some(head) = s.first.take() {
                return Some((Ok(head), s));
            }
            loop {
                // The key behind a new head is learnt a moment later, at a
                // time of this watch's own: every follower of a crowd
                // reading at the instant of a hand-over made the new
                // leader's acquire wait behind their reads (1,000
                // candidates: 0.71 s).
                let due = match s.line.read {
                    Some(Read::First) => true,
                    Some(Read::Refill) => {
                        let at = *s
                            .refill_at
                            .get_or_insert_with(|| tokio::time::Instant::now() + refill_delay());
                        tokio::time::Instant::now() >= at
                    }
                    None => false,
                };
                if let (Some(read), true) = (s.line.read, due) {
                    s.refill_at = None;
                    // The leader's key went and which key is next takes a
                    // read (First), or the next key leads now and the one
                    // behind it is to be learnt (Refill).
                    let before = s.line.head.as_ref().map(|h| h.key.clone());
                    match s.store.read_line(&s.election, "watch", 2, false).await {
                        Ok((keys, revision)) => {
                            s.line.read(keys, revision);
                            let after = s.line.head.as_ref();
                            if read == Read::First || after.map(|h| &h.key) != before.as_ref() {
                                let leader = after.map(|h| h.leader.clone());
                                return Some((Ok(leader), s));
                            }
                        }
                        Err(e) if read == Read::First => {
                            s.line.read = None;
                            return Some((Err(e), s));
                        }
                        Err(e) => {
                            // The head is known: the next key stays
                            // unknown, and the watch goes on.
                            tracing::debug!(election = %s.election, error = %e, "etcd: reading the line behind the head failed");
                            s.line.read = None;
                        }
                    }
                    continue;
                }
                let refill_at = s.line.read.and(s.refill_at);
                let stream = s.stream.as_mut()?;
                let message = tokio::select! {
                    m = stream.message() => m,
                    () = sleep_until_some(refill_at) => continue,
                };
                match message {
                    Ok(Some(resp)) if resp.canceled() => {
                        // Compacted past our revision, or cancelled by the
                        // server: the caller opens a new watch.
                        tracing::debug!(
                            election = %s.election, reason = resp.cancel_reason(),
                            "etcd: watch cancelled"
                        );
                        return None;
                    }
                    Ok(Some(resp)) => {
                        let changes = resp.events().iter().filter_map(|e| {
                            let kv = e.kv()?;
                            Some(Change {
                                deleted: e.event_type() == etcd_client::EventType::Delete,
                                key: kv.key(),
                                value: kv.value(),
                                lease: kv.lease(),
                                create_revision: kv.create_revision(),
                                mod_revision: kv.mod_revision(),
                            })
                        });
                        if let Some(leader) = s.line.apply(changes) {
                            return Some((Ok(leader), s));
                        }
                    }
                    Ok(None) => return None,
                    Err(e) => {
                        s.stream = None;
                        let what = format!("watch election '{}'", s.election);
                        let err = s.store.error(&s.election, &what, e);
                        return Some((Err(err), s));
                    }
                }
            }
        });
        Ok(Box::pin(leaders))
    }
}

/// A key of an election's line: its key, its create revision (the term's
/// token, when it heads the line) and the leader it names.
#[derive(Debug, Clone)]
struct Head {
    key: Vec<u8>,
    create_revision: i64,
    leader: LeaderInfo,
}

impl Head {
    fn of(kv: &KeyValue) -> Self {
        Self {
            key: kv.key().to_vec(),
            create_revision: kv.create_revision(),
            leader: leader_of(kv.key(), kv.value(), kv.lease(), kv.create_revision()),
        }
    }
}

/// What a watch knows of its election's line: the head and, when known, the
/// key next in line, as of a revision.
///
/// Only a change of the head is news. A candidate queueing behind, or
/// leaving from behind the head, costs the line's watchers nothing (they
/// read the head on every event before, so with N candidates each one
/// joining cost N reads). When the head's key goes and the next key is
/// known, the next leads at once: the follower that is next learns it from
/// the event alone and goes straight to its acquire, as a Go `Election`'s
/// follower waits on the key just ahead of it. The next key is read again
/// afterwards, when the stream is next polled. Only when it is not known
/// (it left, or the line was not read since) does the head's deletion need
/// a read first.
#[derive(Debug, Default)]
struct Line {
    head: Option<Head>,
    /// The key behind the head: `None` when not known, `Some(None)` when
    /// the line holds the head alone.
    next: Option<Option<Head>>,
    /// The revision the line was read at: older events are in it already.
    as_of: i64,
    /// Read the line before anything else: the head's key was deleted and
    /// which key is next is not known (`Read::First`), or the head came
    /// from the next key and the one behind it is to be learnt
    /// (`Read::Refill`).
    read: Option<Read>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// The head is not known: the read's head is news.
    First,
    /// The head is known: the read's head is news only if it differs.
    Refill,
}

/// One event of a watch: a key put or deleted.
struct Change<'a> {
    deleted: bool,
    key: &'a [u8],
    value: &'a [u8],
    lease: i64,
    create_revision: i64,
    mod_revision: i64,
}

impl Change<'_> {
    fn head(&self) -> Head {
        Head {
            key: self.key.to_vec(),
            create_revision: self.create_revision,
            leader: leader_of(self.key, self.value, self.lease, self.create_revision),
        }
    }
}

impl Line {
    /// The line as read at `revision`: its first two keys at most.
    fn read(&mut self, mut keys: Vec<Head>, revision: i64) {
        keys.truncate(2);
        let mut keys = keys.into_iter();
        self.head = keys.next();
        self.next = Some(keys.next());
        self.as_of = revision;
        self.read = None;
    }

    /// Applies one watch response's changes in order; the leader to report
    /// if the head changed.
    fn apply<'a>(
        &mut self,
        changes: impl IntoIterator<Item = Change<'a>>,
    ) -> Option<Option<LeaderInfo>> {
        let mut news = None;
        for kv in changes {
            if kv.mod_revision <= self.as_of {
                continue;
            }
            let is_head = self.head.as_ref().is_some_and(|h| h.key == kv.key);
            let is_next = matches!(&self.next, Some(Some(n)) if n.key == kv.key);
            if kv.deleted {
                if is_head {
                    match self.next.take() {
                        Some(next) => {
                            // The next key leads; what is behind it is
                            // learnt by a read once this news is out.
                            self.head = next;
                            self.read = self.head.is_some().then_some(Read::Refill);
                            self.next = if self.head.is_some() {
                                None
                            } else {
                                Some(None)
                            };
                            news = Some(self.head.as_ref().map(|h| h.leader.clone()));
                        }
                        None => {
                            self.head = None;
                            self.read = Some(Read::First);
                            // What came after is in the read.
                            return None;
                        }
                    }
                } else if is_next {
                    self.next = None;
                }
                continue;
            }
            if is_head {
                // New metadata on the leader's key (Proclaim).
                self.head = Some(kv.head());
                news = Some(Some(kv.head().leader));
                continue;
            }
            if is_next {
                self.next = Some(Some(kv.head()));
                continue;
            }
            match &self.head {
                None => {
                    // A key in an empty line: it leads, and it is alone.
                    self.head = Some(kv.head());
                    self.next = Some(None);
                    news = Some(Some(kv.head().leader));
                }
                Some(h) if kv.create_revision < h.create_revision => {
                    // Ahead of the head as we knew it (a read older than
                    // the line): it leads; what is behind is not known.
                    self.head = Some(kv.head());
                    self.next = None;
                    news = Some(Some(kv.head().leader));
                }
                Some(_) => {
                    if matches!(self.next, Some(None)) {
                        // The head was alone: a new key is the next (a key
                        // created later is behind every key already there).
                        self.next = Some(Some(kv.head()));
                    }
                }
            }
        }
        news
    }
}

/// How long a watch waits before it reads the key behind a new head: a
/// random time of up to [`REFILL_SPREAD`], so that a crowd's watches read
/// one after another rather than all at the hand-over.
fn refill_delay() -> Duration {
    use std::hash::{BuildHasher, Hasher};
    // A hasher of a new `RandomState` is seeded at random: no dependency
    // for a jitter.
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let spread = u64::try_from(REFILL_SPREAD.as_micros()).unwrap_or(u64::MAX);
    Duration::from_micros(r % spread.max(1))
}

/// Sleeps until `at`, or for ever.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Over how long a crowd's watches spread their reads of the key behind a
/// new head.
const REFILL_SPREAD: Duration = Duration::from_millis(500);

#[cfg(test)]
mod line_tests {
    use super::*;

    fn put<'a>(key: &'a str, value: &'a str, created: i64, modified: i64) -> Change<'a> {
        Change {
            deleted: false,
            key: key.as_bytes(),
            value: value.as_bytes(),
            lease: 1,
            create_revision: created,
            mod_revision: modified,
        }
    }

    fn del(key: &str, modified: i64) -> Change<'_> {
        Change {
            deleted: true,
            key: key.as_bytes(),
            value: b"",
            lease: 0,
            create_revision: 0,
            mod_revision: modified,
        }
    }

    fn holder(news: Option<Option<LeaderInfo>>) -> Option<Option<String>> {
        news.map(|l| l.map(|l| l.holder.as_str().to_owned()))
    }

    /// A line as a watch reads it, at `revision`.
    fn read(keys: &[Change<'_>], revision: i64) -> Line {
        let mut line = Line::default();
        line.read(keys.iter().map(Change::head).collect(), revision);
        line
    }

    #[test]
    fn only_a_change_of_the_head_is_news() {
        let mut line = read(&[], 4);
        // An empty line: the first key leads.
        assert_eq!(
            holder(line.apply([put("e/a", "a", 5, 5)])),
            Some(Some("a".into()))
        );
        // Queueing behind, and leaving from behind, is no news.
        assert_eq!(
            holder(line.apply([put("e/b", "b", 6, 6), put("e/c", "c", 7, 7)])),
            None
        );
        assert_eq!(holder(line.apply([del("e/c", 8)])), None);
        assert_eq!(line.read, None);
        // New metadata on the head's key is.
        let news = line.apply([put("e/a", r#"{"holder":"a","metadata":{"k":"v"}}"#, 5, 9)]);
        let leader = news.flatten().expect("the head, with its new value");
        assert_eq!(leader.metadata.get("k"), Some("v"));
        assert_eq!(leader.token.get(), 5);
    }

    #[test]
    fn the_next_key_leads_from_the_event_alone_and_is_read_behind_afterwards() {
        let mut line = read(&[put("e/a", "a", 5, 5), put("e/b", "b", 6, 6)], 6);
        // New metadata of the next key is kept for when it leads.
        assert_eq!(
            holder(line.apply([put("e/b", r#"{"holder":"b","metadata":{"k":"v"}}"#, 6, 7)])),
            None
        );
        let news = line.apply([del("e/a", 8), put("e/d", "d", 9, 9)]);
        let leader = news.flatten().expect("b leads, with no read");
        assert_eq!(leader.holder.as_str(), "b");
        assert_eq!(leader.token.get(), 6);
        assert_eq!(leader.metadata.get("k"), Some("v"));
        // Who is behind b takes a read, which is no news unless the head
        // changed meanwhile.
        assert_eq!(line.read, Some(Read::Refill));
        assert!(line.next.is_none());
    }

    #[test]
    fn the_heads_deletion_needs_a_read_when_the_next_key_is_not_known() {
        let mut line = read(&[put("e/a", "a", 5, 5), put("e/b", "b", 6, 6)], 6);
        // The next key leaves: who is behind it is not known.
        assert_eq!(holder(line.apply([del("e/b", 7)])), None);
        assert_eq!(line.read, None, "no read while the head stays");
        assert_eq!(
            holder(line.apply([del("e/a", 8), put("e/c", "c", 9, 9)])),
            None,
            "what came after is left to the read"
        );
        assert_eq!(line.read, Some(Read::First));
        assert!(line.head.is_none());
    }

    #[test]
    fn a_lone_heads_deletion_empties_the_line_and_a_key_behind_it_is_next() {
        let mut line = read(&[put("e/a", "a", 5, 5)], 5);
        assert_eq!(holder(line.apply([put("e/b", "b", 6, 6)])), None);
        assert_eq!(holder(line.apply([del("e/a", 7)])), Some(Some("b".into())));
        // b was alone behind a: it leads alone, and its deletion empties
        // the line with no read.
        line.read(vec![line.head.clone().unwrap()], 7);
        assert_eq!(holder(line.apply([del("e/b", 8)])), Some(None));
        assert_eq!(line.read, None);
    }

    #[test]
    fn events_the_read_already_saw_are_skipped() {
        let mut line = read(&[put("e/b", "b", 6, 6)], 20);
        // A late copy of an old value of the head, and the deletion of a
        // key the read no longer saw.
        assert_eq!(
            holder(line.apply([put("e/b", "old", 6, 7), del("e/a", 10)])),
            None
        );
        assert_eq!(line.read, None);
        assert_eq!(
            line.head.as_ref().map(|h| h.key.clone()),
            Some(b"e/b".to_vec())
        );
    }
}
