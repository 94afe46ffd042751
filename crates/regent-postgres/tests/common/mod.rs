//! The servers the tests run against, started by the test kit (installed
//! by `scripts/install-engines`).

use regent_testkit::engines::{Postgres, PostgresBehindPgBouncer};

/// A PostgreSQL server of a test's own, stopped when dropped.
pub(crate) struct Server {
    pg: Postgres,
}

/// A server of its own.
pub(crate) fn server() -> Server {
    Server {
        pg: Postgres::start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}")),
    }
}

/// A server behind PgBouncer in transaction pooling mode.
pub(crate) fn behind_pgbouncer() -> PostgresBehindPgBouncer {
    PostgresBehindPgBouncer::start()
        .unwrap_or_else(|e| panic!("cannot start PostgreSQL behind PgBouncer: {e}"))
}

impl Server {
    /// Its URL, as the superuser.
    pub(crate) fn url(&self) -> String {
        self.pg.store_url()
    }

    /// Runs `sql` as the superuser.
    pub(crate) async fn sql(&self, sql: &str) {
        sql_at(&self.url(), sql).await;
    }
}

/// Runs `sql` on the database of `url`.
pub(crate) async fn sql_at(url: &str, sql: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect as the test");
    tokio::spawn(conn);
    client.batch_execute(sql).await.expect("the test's SQL");
}

/// `name` with a suffix of its own: tests share a server, and a run must
/// not meet the rows of the last.
pub(crate) fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{name}_{}_{nanos}", std::process::id())
}
