//! What the tests share: the conformance harness over any Redis URL, raw
//! commands behind regent's back, and unique names.

use std::time::Duration;

use regent_core::ElectionName;
use regent_core::testing::Harness;
use regent_redis::{RedisStore, redis};

/// The conformance harness on the Redis at `url` (no credentials), or
/// the master `sentinels` name.
pub(crate) struct RedisHarness {
    /// The server itself, for commands behind regent's back.
    pub(crate) direct: String,
    /// How the store connects (the same server, or its Sentinels).
    pub(crate) store_url: String,
}

impl Harness for RedisHarness {
    type Store = RedisStore;

    async fn store(&self) -> RedisStore {
        // A watch polls too; at the suite's short ttl it must poll often to
        // see an expiry, which publishes nothing.
        RedisStore::builder_for(&self.store_url)
            .expect("a URL")
            .poll_interval(Duration::from_millis(100))
            .build()
            .await
            .expect("open the store")
    }

    async fn unreachable_store(&self) -> RedisStore {
        let port = free_port();
        RedisStore::builder(
            redis::Client::open(format!("redis://127.0.0.1:{port}")).expect("a URL"),
        )
        .call_timeout(Duration::from_secs(1))
        .lazy(true)
        .build()
        .await
        .expect("a lazy store builds")
    }

    /// The store takes a term it won for a caller who never heard of it
    /// back (`scripts::ACQUIRE`): held to it.
    fn checks_retried_acquire_after_a_lost_answer(&self) -> bool {
        true
    }

    fn ttl(&self) -> Duration {
        Duration::from_millis(500)
    }

    async fn delete_records(&self, election: &ElectionName) {
        // As an operator would: everything of the election, the counter
        // included.
        cmd(
            &self.direct,
            redis::cmd("DEL")
                .arg(format!("regent:{{{election}}}:lease"))
                .arg(format!("regent:{{{election}}}:token")),
        )
        .await;
    }

    async fn put_garbage(&self, election: &ElectionName) {
        // Another program's lock on our key: a string with an expiry.
        cmd(
            &self.direct,
            redis::cmd("SET")
                .arg(format!("regent:{{{election}}}:lease"))
                .arg("another-program-lock-4f1c")
                .arg("PX")
                .arg(3_600_000),
        )
        .await;
    }
}

/// A port nothing listens on.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Runs `command` on the server at `url`, behind regent's back.
pub(crate) async fn cmd(url: &str, command: &redis::Cmd) -> redis::Value {
    let client = redis::Client::open(url).expect("a URL");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect as the test");
    command
        .query_async::<redis::Value>(&mut conn)
        .await
        .expect("the test's command")
}

/// `name` with a suffix of its own: tests share a server, and a run must
/// not meet the keys of the last.
pub(crate) fn unique(name: &str) -> ElectionName {
    ElectionName::new(format!(
        "{name}-{}-{:08x}",
        std::process::id(),
        fastrand_u32()
    ))
    .expect("a valid name")
}

fn fastrand_u32() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    nanos ^ std::process::id().rotate_left(16)
}

pub(crate) mod kit;
