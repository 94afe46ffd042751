//! The servers the tests run against, started by the test kit (installed
//! by `scripts/install-engines`).

use std::sync::{Arc, Mutex, PoisonError, Weak};

use regent_testkit::engines::{Redis, RedisBuilder, RedisSentinels};

/// One server for the tests of this binary that do not fault it, started
/// by the first that asks and stopped when the last running one drops its
/// handle (a `static` is never dropped, and the server must not outlive
/// the tests). Each test uses elections of its own.
pub(crate) fn shared() -> Arc<Redis> {
    static SHARED: Mutex<Weak<Redis>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(r) = shared.upgrade() {
        return r;
    }
    let r = Arc::new(own(Redis::builder()));
    *shared = Arc::downgrade(&r);
    r
}

/// A server of the test's own, to fault.
pub(crate) fn own(builder: RedisBuilder) -> Redis {
    tokio::task::block_in_place(|| builder.start())
        .unwrap_or_else(|e| panic!("cannot start redis-server: {e}"))
}

/// A primary, a replica and three Sentinels of the test's own.
pub(crate) fn sentinels() -> RedisSentinels {
    tokio::task::block_in_place(RedisSentinels::start)
        .unwrap_or_else(|e| panic!("cannot start Redis with Sentinels: {e}"))
}

/// The server's URL, for commands behind regent's back.
pub(crate) fn url(r: &Redis) -> String {
    r.store_url()
}
