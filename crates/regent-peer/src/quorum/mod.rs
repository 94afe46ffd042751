//! Quorum mode: a node leads only while a majority of the configured
//! members has granted it a lease, and steps down on its own clock when
//! the grants stop.
//!
//! [`Quorum`] wraps any of the algorithms. The algorithm inside still
//! decides *who* should lead, exactly as alone; the wrapper decides
//! *whether* that node may act as leader now. With it, a partition cannot
//! give two leaders at the same time: the side without a majority has a
//! candidate at most, never a leader, and a leader cut off from the
//! majority stops leading by its own clock before the other side can
//! start.
//!
//! # The protocol (a Raft-style leader lease)
//!
//! * **Ask.** While the inner algorithm leads in term `E`, the node sends
//!   ASK `{E, id}` to every other member every `heartbeat_interval`, and at
//!   once when the term begins. It remembers the instant it *sent* each
//!   ask.
//! * **Grant, and the promise.** A member that gets an ASK from node `L`
//!   and has promised no other node answers GRANT `{E, id, lease}` and
//!   promises `L` — that life of `L`, named by the ask's incarnation: a
//!   restarted `L` is another asker. It grants no *other* asker for its
//!   configured
//!   [`Config::lease`], measured on its own clock **from when it grants**
//!   (never before it got the ask). Renewals by `L` extend the promise. A
//!   member that has promised another node keeps the ask (the newest
//!   term's, if several nodes ask) and grants it the moment that promise
//!   runs out, if that is within a heartbeat interval of the ask;
//!   otherwise it stays silent. A node
//!   counts itself as a member: its own ask is granted locally under the
//!   same rule, so a node that has promised another cannot count itself
//!   until that promise ends, and a leader's promise to itself outlives its
//!   lease.
//! * **The lease.** A grant of `lease` from member `m` for an ask sent at
//!   `t` lets the leader count on `m` until
//!   `t + lease × (1 − clock_drift) − lease_margin` on its own clock
//!   ([`Config::leader_lease`] for its own lease). Keeping the latest such
//!   end per member, itself included, the leader's lease runs until the
//!   majority-th latest: a majority of the configured members
//!   (`members / 2 + 1`) each stand behind it.
//! * **Leadership.** [`Machine::leadership`] is the inner algorithm's
//!   token only while the inner algorithm leads *and* the lease runs at the
//!   last `now` handled. [`Machine::next_deadline`] includes the end of the
//!   lease, so a driver is woken to step down exactly then, and
//!   [`Machine::lease_until`] says when that is, for a driver that must
//!   stop acting even if it is not called in time. The leader view
//!   ([`Machine::leader`], [`Output::LeaderChanged`]) is the inner
//!   algorithm's, except that this node never names itself without a
//!   valid lease.
//!
//! # Why two nodes never hold a lease at the same instant
//!
//! Suppose `A` holds a lease at instant `x`, and so does `B ≠ A` (another
//! node, or another life of the same node: promises bind a life). Each
//! lease stands on a majority of the same configured membership, each
//! member of which gave it a grant that counts until past `x`; so some
//! member `m` (possibly `A` or `B`) gave both such grants, and both before
//! `x`, since a lease counts a grant only once it has arrived. Say `m`
//! granted `A` first, at `g`, for an ask `A` sent at `t ≤ g`, promising
//! `d`. Then `m` granted `B` only once its own clock had measured `d` from
//! `g` (the promise to `A`, perhaps extended since, had to run out), and
//! before `x`. `A` counts on that grant only until its own clock has
//! measured `d × (1 − clock_drift) − lease_margin` from `t`; and by the
//! drift bound, when `m`'s clock has measured `d` from `g ≥ t`, `A`'s has
//! measured at least `d × (1 − clock_drift)` from `t`. So the grant no
//! longer counted for `A` when `m` granted `B`, before `x`: a
//! contradiction. The same holds with `A` and `B` swapped.
//!
//! The argument rests on these, and nothing else:
//!
//! * **Bounded drift**: over any stretch of time, a member's clock
//!   measures at least `1 − clock_drift` of what another's measures.
//!   Clocks are monotonic (`tokio::time::Instant`), never wall clocks.
//! * **Promises survive a restart**: a node that starts knows nothing of
//!   the promises of its previous life, so it grants nothing, not even to
//!   itself, for `lease` after it starts; by then every promise it made
//!   before has run out. (A machine is created when its node starts. A
//!   node restarted with a *shorter* lease than its previous life's must
//!   stay down for the difference.)
//! * **Asks are not mistaken across lives**: a grant names its ask by the
//!   asker's incarnation and a counter ([`AskId`]), so a grant sent to a
//!   node's previous life cannot be credited to a later ask of the new
//!   life — provided each start of a node has its own
//!   [`incarnation`](crate::ConfigBuilder::incarnation), as a random `u64`
//!   gives. With the same incarnation at every start, a grant delayed
//!   across a restart could lend the new life a lease that the member no
//!   longer promises.
//! * **Every member is configured with the same membership.** The leases
//!   may differ (a rolling change): each grant says how long it promises.
//!
//! A GOODBYE ([`Input::Left`]) carries no incarnation: it ends the promise
//! to whichever life of its sender was promised. A life sends it only once
//! it has stopped acting as leader, so that is right unless a crashed life
//! (which said nothing) is followed by a new one that leaves again within
//! a lease of the crash: then the promise to the crashed life ends early,
//! and what bounds that life's command is its shim, which stops it as soon
//! as the crashed process dies (SIGTERM, then SIGKILL after the grace),
//! not the lease.
//!
//! It does not rest on message delays, loss, duplication, order, the inner
//! algorithm, or the epochs: a stale or copied ask only makes a member
//! promise, and a grant is only ever credited to the send instant of the
//! ask it answers.
//!
//! # What a lease does not do
//!
//! A lease bounds *when* a node may act as leader; it does not stop what
//! the leader started from landing later (a write in flight, a request
//! queued in a socket). A process paused past [`Machine::lease_until`]
//! (GC, SIGSTOP) resumes believing it leads until it handles its next
//! input: the driver must check `lease_until` against its clock before it
//! acts, and the resource should still check the fencing token. Quorum
//! mode makes two leaders at once impossible; fencing makes a late write
//! of an old leader harmless.
//!
//! # Cost
//!
//! * **Messages**: `n − 1` ASKs and up to `n − 1` GRANTs per
//!   `heartbeat_interval` from the leader, on top of the algorithm's own.
//! * **Failover.** A new leader needs grants from a majority, and a member
//!   that promised the old leader grants only once that promise has run
//!   out, `lease` after the old leader's last ask reached it. So after a
//!   leader stops (crash, partition, pause) at `c`, its successor leads at
//!   the latest at `max(c + F, c + d + lease / (1 − clock_drift)) +
//!   heartbeat_interval + 2d`, where `F` is the inner algorithm's failover
//!   and `d` the longest message delay: a member grants a deferred ask
//!   the moment its promise ends, and the heartbeat interval covers an ask
//!   that missed that moment. In the worst case that is about
//!   `failure_timeout + lease`; because `lease ≤ failure_timeout`
//!   (validated), the wait for the promises mostly runs during the
//!   failure detection instead, and costs little more than a round trip.
//!   A member that has just started grants nothing for `lease`, so a group
//!   that restarts wholesale waits that long. After a partition heals, a
//!   node that led on the minority side keeps asking until the inner
//!   algorithm demotes it, and members may promise it meanwhile: add a
//!   `lease` to the inner algorithm's agreement time. The tests
//!   `tests/quorum_*.rs` measure these.
//! * **Availability**: a node leads only with a majority up and connected
//!   to it; a group of `n` survives `⌈n / 2⌉ − 1` failures, and a group of
//!   two none.
//!
//! # Wire
//!
//! [`Message`] travels through [`codec`](crate::codec) under its own
//! algorithm byte, the inner algorithm's with the high bit set (`0x81`
//! lowest-ID, `0x82` Bully, `0x83` Ring), so a quorum-mode node and a
//! plain one refuse each other's frames. The inner messages keep their
//! kinds, which must stay below `0x80`; ASK is `0x81` with the epoch, the
//! incarnation and the counter, and GRANT `0x82` with those and the lease
//! in nanoseconds, all `u64` big-endian.
//!
//! [`Config::lease`]: crate::Config::lease
//! [`Config::leader_lease`]: crate::Config::leader_lease
//! [`Machine::leadership`]: crate::Machine::leadership
//! [`Machine::next_deadline`]: crate::Machine::next_deadline
//! [`Machine::lease_until`]: crate::Machine::lease_until
//! [`Machine::leader`]: crate::Machine::leader
//! [`Output::LeaderChanged`]: crate::Output::LeaderChanged
//! [`Input::Left`]: crate::Input::Left

mod message;
mod node;
mod wire;

pub use message::{AskId, Message};
pub use node::Quorum;
