//! regent's store conformance suite against a real Redis: one server, and
//! the master three Sentinels name.

#[allow(dead_code, reason = "fixtures shared by several test binaries")]
mod common;

use regent_core::testing::run;

use common::RedisHarness;

#[test]
fn redis_store_conforms() {
    let redis = regent_testkit::engines::Redis::start()
        .unwrap_or_else(|e| panic!("cannot start redis-server: {e}"));
    let url = redis.store_url();
    regent_testkit::block_on_big_stack(2, move || async move {
        run(&RedisHarness {
            direct: url.clone(),
            store_url: url,
        })
        .await;
    });
    drop(redis);
}

#[test]
fn redis_store_conforms_through_sentinels() {
    let sentinels = regent_testkit::engines::RedisSentinels::start()
        .unwrap_or_else(|e| panic!("cannot start Redis with Sentinels: {e}"));
    let direct = format!(
        "redis://{}",
        sentinels
            .master_addr()
            .expect("the Sentinels name a master")
    );
    let store_url = sentinels.store_url();
    regent_testkit::block_on_big_stack(2, move || async move {
        run(&RedisHarness { direct, store_url }).await;
    });
    drop(sentinels);
}
