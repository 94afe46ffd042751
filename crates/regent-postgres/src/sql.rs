//! The statements, each one statement in autocommit: atomic by itself,
//! one round trip, no session state, nothing prepared by name — so that
//! they work through PgBouncer's transaction pooling as they do directly.
//!
//! Every decision about time is the server's: `clock_timestamp()` inside
//! the statement. The clients' clocks are never compared.

/// The channel of the notifications that wake watches: its payload is
/// `SCHEMA/ELECTION`.
pub(crate) const CHANNEL: &str = "regent_leases";

/// How long adding a column to a table of an earlier build waits for
/// the table's lock: the store's statements queue behind it meanwhile.
pub(crate) const MIGRATION_LOCK_TIMEOUT: std::time::Duration =
    std::time::Duration::from_millis(100);

/// The tables' names, schema-qualified and quoted.
#[derive(Clone, Debug)]
pub(crate) struct Tables {
    pub(crate) leases: String,
    pub(crate) tokens: String,
    /// The roster: one row per enrolled candidate (contract item 10).
    pub(crate) roster: String,
    /// Leases kept for a successor (contract item 11).
    pub(crate) reserved: String,
    /// `pg_notify(...)` of a change to the election in column `election`
    /// (the schema is a checked identifier: a literal is safe).
    notify: String,
}

impl Tables {
    pub(crate) fn in_schema(schema: &str) -> Self {
        Self {
            leases: format!("\"{schema}\".\"regent_leases\""),
            tokens: format!("\"{schema}\".\"regent_tokens\""),
            roster: format!("\"{schema}\".\"regent_roster\""),
            reserved: format!("\"{schema}\".\"regent_reserved\""),
            notify: format!("pg_notify('{CHANNEL}', '{schema}/' || election)"),
        }
    }

    /// Creates the tables if they are not there: what an administrator
    /// runs for a role that may not create them (`docs` quote it).
    pub(crate) fn create(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {leases} (
                 election   text PRIMARY KEY,
                 holder     text NOT NULL,
                 token      bigint NOT NULL,
                 expires_at timestamptz NOT NULL,
                 ttl_ms     bigint NOT NULL,
                 metadata   text NOT NULL DEFAULT '{{}}',
                 incarnation text
             );
             CREATE TABLE IF NOT EXISTS {tokens} (
                 election text PRIMARY KEY,
                 last     bigint NOT NULL
             );
             CREATE TABLE IF NOT EXISTS {roster} (
                 election   text NOT NULL,
                 holder     text NOT NULL,
                 expires_at timestamptz NOT NULL,
                 metadata   text NOT NULL DEFAULT '{{}}',
                 PRIMARY KEY (election, holder)
             );
             CREATE TABLE IF NOT EXISTS {reserved} (
                 election text PRIMARY KEY,
                 holder   text NOT NULL,
                 until    timestamptz NOT NULL
             );",
            leases = self.leases,
            tokens = self.tokens,
            roster = self.roster,
            reserved = self.reserved
        )
    }

    /// Adds `incarnation` to a `regent_leases` made by a build before it
    /// (`ADD COLUMN IF NOT EXISTS`: a catalog change, no rewrite; older
    /// builds name their columns, and go on working). It needs the
    /// table's lock, which every statement on the table waits behind
    /// while it waits: `lock_timeout` bounds that (`SET LOCAL`: this
    /// transaction's alone, as PgBouncer's transaction mode needs).
    pub(crate) fn add_incarnation(&self) -> String {
        format!(
            "SET LOCAL lock_timeout = '{ms}ms';
             ALTER TABLE {leases} ADD COLUMN IF NOT EXISTS incarnation text",
            ms = MIGRATION_LOCK_TIMEOUT.as_millis(),
            leases = self.leases
        )
    }

    /// `$1` election, `$2` holder, `$3` ttl in ms, `$4` metadata: the
    /// candidate's roster row, expiring `$3` ms from the server's now.
    pub(crate) fn enroll(&self) -> String {
        format!(
            "INSERT INTO {roster} (election, holder, expires_at, metadata)
             VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond', $4)
             ON CONFLICT (election, holder) DO UPDATE SET
                 expires_at = excluded.expires_at, metadata = excluded.metadata",
            roster = self.roster
        )
    }

    /// `$1` election, `$2` holder: the candidate's roster row gone, and
    /// the election's rows that lapsed with it.
    pub(crate) fn withdraw(&self) -> String {
        format!(
            "DELETE FROM {roster}
             WHERE election = $1 AND (holder = $2 OR expires_at <= clock_timestamp())",
            roster = self.roster
        )
    }

    /// `$1` election: the live roster rows, in holder order (bytewise, as
    /// regent sorts ids, whatever the database's collation).
    pub(crate) fn candidates(&self) -> String {
        format!(
            "SELECT holder, metadata FROM {roster}
             WHERE election = $1 AND expires_at > clock_timestamp()
             ORDER BY holder COLLATE \"C\"",
            roster = self.roster
        )
    }

    /// `$1` election, `$2` holder, `$3` token, `$4` successor, `$5` window
    /// in ms: deletes our own record and keeps the election for the
    /// successor until `$5` ms from the server's now, in one statement;
    /// wakes the watches. Returns a row if our record was there.
    pub(crate) fn release_to(&self) -> String {
        format!(
            "WITH d AS (
                 DELETE FROM {leases} WHERE election = $1 AND holder = $2 AND token = $3
                 RETURNING election
             ),
             r AS (
                 INSERT INTO {reserved} AS k (election, holder, until)
                 SELECT election, $4, clock_timestamp() + $5 * interval '1 millisecond' FROM d
                 ON CONFLICT (election) DO UPDATE SET holder = excluded.holder, until = excluded.until
                 RETURNING election
             )
             SELECT {notify}, (SELECT count(*) FROM r) AS kept FROM d",
            leases = self.leases,
            reserved = self.reserved,
            notify = self.notify
        )
    }

    /// `$1` election, `$2` holder, `$3` ttl in ms, `$4` metadata, `$5` the
    /// store's incarnation, `$6` the token of the term last handed to the
    /// caller (NULL: none), `$7` whether no other acquire of the caller's
    /// through this store is in flight (else nothing is taken over: a term
    /// the other won may yet be handed out). Returns one row: `won` (the new token, or
    /// NULL), the live record that stood (holder, token, metadata), if
    /// any, and `replaced`, the token of a term of the caller's own that
    /// it took over (see below).
    ///
    /// The token is the larger of the election's counter plus one and the
    /// server's clock in microseconds since the epoch (see the crate docs:
    /// a standby promoted after missing the last commits has an older
    /// counter, but its clock has moved on past every token the lost
    /// commits issued). Two acquires racing for a free election both read
    /// it free; the upsert's `WHERE` is evaluated again on the row the
    /// other one committed, so only one wins (the loser's counter bump is
    /// a gap, which tokens may have).
    ///
    /// A live record is free to the caller (`orphan`) when this very store
    /// won it for the caller by a request whose answer never came (a call
    /// given up on, a dropped future): same holder, `incarnation` naming
    /// this store and the record's own token, and a token other than the
    /// one last handed out. Nobody leads with it; without the takeover the
    /// caller would follow itself until it expired. The new term's token
    /// is greater (the counter passed the orphan's). Binding the
    /// incarnation to the token keeps a record an older build wrote over
    /// one of ours (it updates the other columns, and leaves
    /// `incarnation` as it was) from passing for ours. The upsert takes
    /// over only the very term it read: of two acquires racing for one
    /// orphan, one wins.
    pub(crate) fn acquire(&self) -> String {
        format!(
            "WITH now AS (SELECT clock_timestamp() AS t),
             live AS (
                 SELECT holder, token, metadata, incarnation FROM {leases}
                 WHERE election = $1 AND expires_at > (SELECT t FROM now)
             ),
             orphan AS (
                 SELECT token FROM live
                 WHERE $7 AND holder = $2 AND incarnation = $5 || '/' || token
                   AND token IS DISTINCT FROM $6
             ),
             kept AS (
                 SELECT 1 FROM {reserved}
                 WHERE election = $1 AND until > (SELECT t FROM now) AND holder <> $2
             ),
             bump AS (
                 INSERT INTO {tokens} AS c (election, last)
                 SELECT $1, (extract(epoch FROM (SELECT t FROM now)) * 1000000)::bigint
                 WHERE (NOT EXISTS (SELECT 1 FROM live) OR EXISTS (SELECT 1 FROM orphan))
                   AND NOT EXISTS (SELECT 1 FROM kept)
                 ON CONFLICT (election) DO UPDATE SET last = greatest(c.last + 1, excluded.last)
                 RETURNING last
             ),
             won AS (
                 INSERT INTO {leases} AS l
                     (election, holder, token, expires_at, ttl_ms, metadata, incarnation)
                 SELECT $1, $2, last, (SELECT t FROM now) + $3 * interval '1 millisecond', $3, $4,
                        $5 || '/' || last
                 FROM bump
                 ON CONFLICT (election) DO UPDATE SET
                     holder = excluded.holder, token = excluded.token,
                     expires_at = excluded.expires_at, ttl_ms = excluded.ttl_ms,
                     metadata = excluded.metadata, incarnation = excluded.incarnation
                 WHERE l.expires_at <= (SELECT t FROM now)
                    OR (l.holder = $2 AND l.token = (SELECT token FROM orphan)
                        AND l.incarnation = $5 || '/' || l.token)
                 RETURNING token, election
             ),
             cleared AS (
                 DELETE FROM {reserved} WHERE election = $1 AND EXISTS (SELECT 1 FROM won)
                 RETURNING 1
             )
             SELECT (SELECT token FROM won) AS won, live.holder, live.token, live.metadata,
                    (SELECT token FROM orphan) AS replaced,
                    (SELECT count({notify}) FROM won) AS notified,
                    (SELECT count(*) FROM cleared) AS cleared
             FROM (SELECT 1) AS one LEFT JOIN live ON true",
            leases = self.leases,
            tokens = self.tokens,
            reserved = self.reserved,
            notify = self.notify
        )
    }

    /// `$1` election, `$2` holder, `$3` token, `$4` the lease's ttl in
    /// milliseconds: extends our own live record by that ttl from the
    /// server's now. Returns a row if it did. The ttl is the lease's, never
    /// the row's `ttl_ms`: a row rewritten to a ttl of zero or less would
    /// be left expired by a renewal that said it renewed, and another
    /// candidate could win while we believe we lead.
    pub(crate) fn renew(&self) -> String {
        format!(
            "UPDATE {leases}
             SET expires_at = clock_timestamp() + $4 * interval '1 millisecond', ttl_ms = $4
             WHERE election = $1 AND holder = $2 AND token = $3
               AND expires_at > clock_timestamp()
             RETURNING 1",
            leases = self.leases
        )
    }

    /// `$1` election, `$2` holder, `$3` token, `$4` metadata: replaces the
    /// metadata of our own live record. Returns a row if it did.
    pub(crate) fn update_metadata(&self) -> String {
        format!(
            "WITH u AS (
                 UPDATE {leases} SET metadata = $4
                 WHERE election = $1 AND holder = $2 AND token = $3
                   AND expires_at > clock_timestamp()
                 RETURNING election
             )
             SELECT {notify} FROM u",
            leases = self.leases,
            notify = self.notify
        )
    }

    /// `$1` election, `$2` holder, `$3` token: deletes our own record, and
    /// wakes the watches of the election.
    pub(crate) fn release(&self) -> String {
        format!(
            "WITH d AS (
                 DELETE FROM {leases} WHERE election = $1 AND holder = $2 AND token = $3
                 RETURNING election
             )
             SELECT {notify} FROM d",
            leases = self.leases,
            notify = self.notify
        )
    }

    /// `$1` election: the live record, if any.
    pub(crate) fn leader(&self) -> String {
        format!(
            "SELECT holder, token, metadata FROM {leases}
             WHERE election = $1 AND expires_at > clock_timestamp()",
            leases = self.leases
        )
    }
}
