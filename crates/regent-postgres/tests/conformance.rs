//! regent's store conformance suite against a real PostgreSQL: directly,
//! and through PgBouncer in transaction pooling mode.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use std::time::Duration;

use regent_core::ElectionName;
use regent_core::testing::{Harness, run};
use regent_postgres::PostgresStore;

struct PgHarness {
    /// Where the store connects (the server, or PgBouncer in front of it).
    url: String,
    /// The server itself: the LISTEN connection, and the operator's SQL.
    direct: String,
}

impl Harness for PgHarness {
    type Store = PostgresStore;

    async fn store(&self) -> PostgresStore {
        // A watch polls too; at the suite's short ttl it must poll often to
        // see a change the notifications do not carry (an expiry).
        PostgresStore::builder(self.url.parse().expect("a URL"))
            .poll_interval(Duration::from_millis(100))
            .listen_on(Some(self.direct.parse().expect("a URL")))
            .build()
            .await
            .expect("open the store")
    }

    async fn unreachable_store(&self) -> PostgresStore {
        let port = regent_testkit::ports::free_ports(1).expect("a free port")[0];
        let mut config: regent_postgres::Config =
            format!("postgres://postgres@127.0.0.1:{port}/postgres")
                .parse()
                .expect("a URL");
        config.connect_timeout(Duration::from_secs(1));
        PostgresStore::builder(config)
            .lazy(true)
            .build()
            .await
            .expect("a lazy store builds")
    }

    fn ttl(&self) -> Duration {
        Duration::from_secs(1)
    }

    /// An acquire takes over a term its own store won unanswered.
    fn checks_retried_acquire_after_a_lost_answer(&self) -> bool {
        true
    }

    async fn delete_records(&self, election: &ElectionName) {
        common::sql_at(
            &self.direct,
            &format!("DELETE FROM regent_leases WHERE election = '{election}'"),
        )
        .await;
    }

    async fn put_garbage(&self, election: &ElectionName) {
        common::sql_at(
            &self.direct,
            &format!(
                "INSERT INTO regent_leases (election, holder, token, expires_at, ttl_ms, metadata)
                 VALUES ('{election}', 'not a holder!', -1, now() + interval '1 hour', 1000, 'garbage')
                 ON CONFLICT (election) DO UPDATE SET holder = excluded.holder, token = excluded.token,
                     expires_at = excluded.expires_at, metadata = excluded.metadata"
            ),
        )
        .await;
    }
}

#[test]
fn postgres_store_conforms() {
    let pg = common::server();
    let url = pg.url();
    regent_testkit::block_on_big_stack(2, move || async move {
        run(&PgHarness {
            direct: url.clone(),
            url,
        })
        .await;
    });
    drop(pg);
}

#[test]
fn postgres_store_conforms_through_pgbouncer_in_transaction_mode() {
    let both = common::behind_pgbouncer();
    let (url, direct) = (both.pgbouncer().store_url(), both.postgres().store_url());
    regent_testkit::block_on_big_stack(2, move || async move {
        run(&PgHarness { url, direct }).await;
    });
    drop(both);
}
