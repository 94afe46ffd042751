//! A primary with a streaming standby: [`PostgresPair`].

use std::thread;
use std::time::{Duration, Instant};

use super::super::EngineError;
use super::super::process::LOG_TAIL_LINES;
use super::super::timeouts::START_TIMEOUT;
use super::Postgres;

/// How often the kit asks the standby how far it got.
const POLL: Duration = Duration::from_millis(20);

/// A primary ([`Postgres::start`]) and a standby streaming from it
/// asynchronously (a base backup of the primary taken by `pg_basebackup
/// -R -X stream`), each on its own port and directory, both stopped when
/// dropped. See the [module docs](super#a-primary-with-a-streaming-standby).
#[derive(Debug)]
pub struct PostgresPair {
    primary: Postgres,
    standby: Postgres,
    /// The standby's `primary_conninfo` while
    /// [`PostgresPair::disconnect_standby`] has emptied it.
    conninfo: Option<String>,
}

impl PostgresPair {
    /// Starts a primary, takes a base backup of it, starts the standby on
    /// it and waits until the standby has replayed everything the primary
    /// had written.
    ///
    /// # Errors
    ///
    /// As [`Postgres::start`]; [`EngineError::Setup`] when `pg_basebackup`
    /// failed; [`EngineError::NotReady`] when the standby did not catch up
    /// within [`START_TIMEOUT`].
    pub fn start() -> Result<Self, EngineError> {
        let primary = Postgres::start()?;
        let standby = Postgres::standby_of(&primary)?;
        let pair = Self {
            primary,
            standby,
            conninfo: None,
        };
        pair.wait_standby_caught_up()?;
        Ok(pair)
    }

    /// The primary.
    pub fn primary(&self) -> &Postgres {
        &self.primary
    }

    /// The primary, to kill, pause or restart it.
    pub fn primary_mut(&mut self) -> &mut Postgres {
        &mut self.primary
    }

    /// The standby (read-only until promoted).
    pub fn standby(&self) -> &Postgres {
        &self.standby
    }

    /// The standby, to promote, kill, pause or restart it.
    pub fn standby_mut(&mut self) -> &mut Postgres {
        &mut self.standby
    }

    /// The primary's store URL, [`Postgres::store_url`].
    pub fn primary_url(&self) -> String {
        self.primary.store_url()
    }

    /// The standby's store URL, [`Postgres::store_url`]: read-only until
    /// promoted.
    pub fn standby_url(&self) -> String {
        self.standby.store_url()
    }

    /// Waits until the standby has replayed everything the primary had
    /// written when this was called (`pg_last_wal_replay_lsn()` on the
    /// standby reaching `pg_current_wal_lsn()` of the primary).
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`]; [`EngineError::NotReady`], quoting the
    /// standby's log, when it did not catch up within [`START_TIMEOUT`]
    /// (it is disconnected, paused, or the primary is gone).
    pub fn wait_standby_caught_up(&self) -> Result<(), EngineError> {
        let lsn = self.primary.psql("select pg_current_wal_lsn()")?;
        let started = Instant::now();
        let question = format!(
            "select pg_last_wal_replay_lsn() >= '{}'::pg_lsn",
            lsn.trim()
        );
        loop {
            if self.standby.psql(&question)?.trim() == "t" {
                return Ok(());
            }
            if started.elapsed() >= START_TIMEOUT {
                return Err(EngineError::NotReady {
                    instance: format!(
                        "{} (standby), replaying up to {lsn}",
                        self.standby.instance()
                    ),
                    waited: started.elapsed(),
                    log_tail: self.standby.log_tail(LOG_TAIL_LINES),
                });
            }
            thread::sleep(POLL);
        }
    }

    /// Whether the standby's WAL receiver streams from the primary now
    /// (`pg_stat_wal_receiver`).
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`].
    pub fn is_streaming(&self) -> Result<bool, EngineError> {
        let status = self
            .standby
            .psql("select status from pg_stat_wal_receiver")?;
        Ok(status.trim() == "streaming")
    }

    /// Cuts the standby off its primary: its `primary_conninfo` is emptied
    /// (`ALTER SYSTEM`, reloaded), so its WAL receiver stops and nothing
    /// the primary commits from then on reaches it, as an asynchronous
    /// standby that missed its primary's last commits. Returns once the
    /// receiver has stopped. [`PostgresPair::reconnect_standby`] undoes it.
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`]; [`EngineError::NotReady`] when the receiver
    /// did not stop within [`START_TIMEOUT`].
    pub fn disconnect_standby(&mut self) -> Result<(), EngineError> {
        if self.conninfo.is_none() {
            self.conninfo = Some(self.standby.psql("show primary_conninfo")?);
        }
        self.set_conninfo("")?;
        self.wait_receiver("the WAL receiver to stop", |status| status.is_empty())
    }

    /// Connects a standby cut off by [`PostgresPair::disconnect_standby`]
    /// to its primary again and returns once it streams; does nothing for a
    /// standby that was not cut off.
    ///
    /// # Errors
    ///
    /// As [`Postgres::psql`]; [`EngineError::NotReady`] when it did not
    /// stream within [`START_TIMEOUT`] (the primary is not running).
    pub fn reconnect_standby(&mut self) -> Result<(), EngineError> {
        let Some(conninfo) = self.conninfo.take() else {
            return Ok(());
        };
        self.set_conninfo(&conninfo)?;
        self.wait_receiver("the WAL receiver to stream", |status| status == "streaming")
    }

    /// Kills every process of the primary at once ([`Postgres::kill`]),
    /// as a crash would, and promotes the standby ([`Postgres::promote`]):
    /// it returns once the standby takes writes. Replication is
    /// asynchronous: what the primary committed and had not sent yet is
    /// lost (all of it since [`PostgresPair::disconnect_standby`]).
    ///
    /// # Errors
    ///
    /// As [`Postgres::promote`].
    pub fn promote_after_killing_primary(&mut self) -> Result<(), EngineError> {
        self.primary.kill();
        self.standby.promote()
    }

    fn set_conninfo(&self, conninfo: &str) -> Result<(), EngineError> {
        // ALTER SYSTEM runs outside any transaction: a statement of its own.
        self.standby.psql(&format!(
            "alter system set primary_conninfo = '{}'",
            conninfo.replace('\'', "''")
        ))?;
        self.standby.psql("select pg_reload_conf()")?;
        Ok(())
    }

    fn wait_receiver(&self, what: &str, done: impl Fn(&str) -> bool) -> Result<(), EngineError> {
        let started = Instant::now();
        loop {
            let status = self
                .standby
                .psql("select status from pg_stat_wal_receiver")?;
            if done(status.trim()) {
                return Ok(());
            }
            if started.elapsed() >= START_TIMEOUT {
                return Err(EngineError::NotReady {
                    instance: format!("{} (standby): {what}", self.standby.instance()),
                    waited: started.elapsed(),
                    log_tail: self.standby.log_tail(LOG_TAIL_LINES),
                });
            }
            thread::sleep(POLL);
        }
    }
}
