//! The Lua scripts: every decision of the store is one script, run
//! atomically by the server (`EVALSHA`, `EVAL` when the server has not
//! cached it yet), on the server's clock (`TIME`, `PEXPIRE`).
//!
//! # Keys of one election `E` (with the default prefix `regent:`)
//!
//! | key | type | what |
//! |---|---|---|
//! | `regent:{E}:lease` | hash, expires (`PEXPIRE`) | `holder`, `token`, `metadata` (a JSON object of strings), `ttl_ms`, `by` (the writing store's incarnation) |
//! | `regent:{E}:token` | string, never expires | the last token issued |
//! | `regent:{E}:reserved` | string, expires | the holder a hand-over reserved the lease for |
//! | `regent:{E}:roster` | hash | holder → metadata of each enrolled candidate |
//! | `regent:{E}:roster-until` | sorted set | holder → until when (server ms) its entry stands |
//!
//! and the channel `regent:{E}:changed`, published on every acquire,
//! release, hand-over and metadata update. The braces make all of one
//! election's keys one hash slot, should they ever live in a cluster.
//!
//! Scripts that read `TIME` and then write replicate their effects, not
//! themselves (`redis.replicate_commands()`, a no-op from Redis 7 on, where
//! that is the only way; before it, Redis 3.2 to 6 need the call): a
//! replica applies the very token the master issued.
//!
//! Every script that acts on a term checks the record's `holder` and
//! `token` against the caller's first, and touches nothing otherwise.

use redis::Script;

/// Takes the lease if it is free and not reserved for someone else, or
/// if it holds a term this very store won for the caller but never handed
/// over (same holder, same `by`, a token other than the one last handed
/// out): one won by a request whose answer never came (a call timeout
/// while the server was paused, a dropped future), which nobody leads
/// with; the new term has a new token. Without that, the caller would
/// follow itself until that term ran out: a ttl with nobody leading.
///
/// KEYS: lease, counter, reserved. ARGV: holder, ttl_ms, metadata,
/// channel, by (the store's incarnation, random per
/// [`RedisStore`](crate::RedisStore): a term another process wrote under
/// the same holder id is never taken, for it may be an older incarnation
/// still leading), the token of the term last handed to the caller (or
/// empty: never taken, its holder may lead with it), and `1` when no other
/// acquire of the caller's through this store is in flight (else nothing
/// is taken over: a term the other won may yet be handed out). Answers
/// `{'won', token}` (and the replaced term's token when it took one of its
/// own), `{'held', holder, token, metadata}`,
/// `{'reserved', holder}`, `{'foreign', type}` (not a hash: another
/// program's key) or `{'counter', value}` (the counter is not a number).
///
/// The token is the larger of the counter plus one and the server's clock
/// in microseconds (see the crate docs). Lua numbers are doubles: exact
/// below 2^53, which the clock reaches in the year 2255.
const ACQUIRE: &str = r"
redis.replicate_commands()
local kind = redis.call('TYPE', KEYS[1])['ok']
local replaced = nil
if kind ~= 'none' then
  if kind ~= 'hash' then return {'foreign', kind} end
  local r = redis.call('HMGET', KEYS[1], 'holder', 'token', 'metadata', 'by')
  if r[1] ~= ARGV[1] or r[4] ~= ARGV[5] or r[2] == ARGV[6] or ARGV[7] ~= '1' then
    return {'held', r[1], r[2], r[3]}
  end
  replaced = r[2]
end
local reserved = redis.call('GET', KEYS[3])
if reserved and reserved ~= ARGV[1] then return {'reserved', reserved} end
local n = 0
local last = redis.call('GET', KEYS[2])
if last then
  n = tonumber(last)
  if not n or n < 0 or n ~= math.floor(n) or n >= 9007199254740991 then
    return {'counter', last}
  end
end
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
if n + 1 > token then token = n + 1 end
local t = string.format('%.0f', token)
redis.call('SET', KEYS[2], t)
if reserved then redis.call('DEL', KEYS[3]) end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', t, 'metadata', ARGV[3], 'ttl_ms', ARGV[2], 'by', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[4], 'acquired')
if replaced then return {'won', t, replaced} end
return {'won', t}
";

/// The caller's own term, or nothing: the prologue of the scripts that
/// act on one (KEYS[1] the lease, ARGV[1] holder, ARGV[2] token).
const OWN: &str = r"
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return 0 end
local r = redis.call('HMGET', KEYS[1], 'holder', 'token')
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] then return 0 end
";

/// ARGV[3]: ttl_ms. Answers 1 when renewed, 0 when not ours.
const RENEW: &str = r"
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
";

/// ARGV[3]: metadata, ARGV[4]: channel. The expiry stays as it is.
const UPDATE_METADATA: &str = r"
redis.call('HSET', KEYS[1], 'metadata', ARGV[3])
redis.call('PUBLISH', ARGV[4], 'metadata')
return 1
";

/// ARGV[3]: channel.
const RELEASE: &str = r"
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], 'released')
return 1
";

/// KEYS[2]: reserved. ARGV[3]: successor, ARGV[4]: window_ms, ARGV[5]:
/// channel.
const RELEASE_TO: &str = r"
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
redis.call('PUBLISH', ARGV[5], 'released')
return 1
";

/// Reads the lease. KEYS: lease. Answers `{'none'}`, `{'foreign', type}`
/// or `{'held', holder, token, metadata}`.
const LEADER: &str = r"
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return {'none'} end
if kind ~= 'hash' then return {'foreign', kind} end
local r = redis.call('HMGET', KEYS[1], 'holder', 'token', 'metadata')
return {'held', r[1], r[2], r[3]}
";

/// The server's clock in whole milliseconds, rounded up (an entry is
/// never listed for less than its ttl after the call was sent).
const NOW_MS: &str = r"
redis.replicate_commands()
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.ceil(tonumber(now[2]) / 1000)
";

/// KEYS: roster, until. ARGV: holder, ttl_ms, metadata. Lapsed entries
/// go; both keys expire with the last entry.
const ENROLL: &str = r"
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', ms))
for _, h in ipairs(gone) do redis.call('HDEL', KEYS[1], h) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', ms))
redis.call('ZADD', KEYS[2], string.format('%.0f', ms + tonumber(ARGV[2])), ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
local keep = string.format('%.0f', tonumber(last[2]) - ms + 1000)
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
return 1
";

/// KEYS: roster, until. ARGV: holder.
const WITHDRAW: &str = r"
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
";

/// KEYS: roster, until. Answers `{'roster', holder, metadata, …}` for the
/// entries that stand.
const CANDIDATES: &str = r"
local live = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. string.format('%.0f', ms), '+inf')
local out = {'roster'}
for _, h in ipairs(live) do
  table.insert(out, h)
  table.insert(out, redis.call('HGET', KEYS[1], h))
end
return out
";

/// The scripts, made (and hashed) once per store.
pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) renew: Script,
    pub(crate) update_metadata: Script,
    pub(crate) release: Script,
    pub(crate) release_to: Script,
    pub(crate) leader: Script,
    pub(crate) enroll: Script,
    pub(crate) withdraw: Script,
    pub(crate) candidates: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        let own = |body: &str| Script::new(&format!("{OWN}{body}"));
        let timed = |body: &str| Script::new(&format!("{NOW_MS}{body}"));
        Self {
            acquire: Script::new(ACQUIRE),
            renew: own(RENEW),
            update_metadata: own(UPDATE_METADATA),
            release: own(RELEASE),
            release_to: own(RELEASE_TO),
            leader: Script::new(LEADER),
            enroll: timed(ENROLL),
            withdraw: Script::new(WITHDRAW),
            candidates: timed(CANDIDATES),
        }
    }
}

/// The keys and the channel of one election.
pub(crate) struct Keys {
    pub(crate) lease: String,
    pub(crate) counter: String,
    pub(crate) reserved: String,
    pub(crate) roster: String,
    pub(crate) until: String,
    pub(crate) channel: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str, election: &str) -> Self {
        let base = format!("{prefix}{{{election}}}");
        Self {
            lease: format!("{base}:lease"),
            counter: format!("{base}:token"),
            reserved: format!("{base}:reserved"),
            roster: format!("{base}:roster"),
            until: format!("{base}:roster-until"),
            channel: channel(prefix, election),
        }
    }
}

/// The channel the scripts publish `election`'s changes on.
pub(crate) fn channel(prefix: &str, election: &str) -> String {
    format!("{prefix}{{{election}}}:changed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_election_is_one_hash_slot_and_keys_read_plainly() {
        let k = Keys::new("regent:", "jobs");
        assert_eq!(k.lease, "regent:{jobs}:lease");
        assert_eq!(k.counter, "regent:{jobs}:token");
        assert_eq!(k.channel, "regent:{jobs}:changed");
        assert_eq!(k.until, "regent:{jobs}:roster-until");
    }
}
