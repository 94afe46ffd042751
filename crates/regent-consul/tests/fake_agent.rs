//! The store against a scripted fake agent: what a real Consul does only
//! in a failure (a 500 while its server is gone, an index that goes
//! backwards, an answer that is not JSON), reproduced exactly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use regent_consul::{ConsulStore, RECORD_FLAGS, WATCH_MIN_INTERVAL};
use regent_core::{ElectionName, ErrorKind, LeaseStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// One scripted answer: status, `X-Consul-Index`, body.
type Reply = (u16, Option<u64>, String);

/// A request as the fake agent saw it: the request line and the headers.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    head: String,
    at: Instant,
}

/// Serves `replies` in order (the last one again once they run out), one
/// per connection, and records every request.
async fn fake_agent(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                }
            }
            let head = String::from_utf8_lossy(&buf).into_owned();
            log.lock().unwrap().push(Seen {
                line: head.lines().next().unwrap_or_default().to_owned(),
                head: head.clone(),
                at: Instant::now(),
            });
            let (status, index, body) = replies[n.min(replies.len() - 1)].clone();
            n += 1;
            let index = index.map_or(String::new(), |i| format!("X-Consul-Index: {i}\r\n"));
            let response = format!(
                "HTTP/1.1 {status} X\r\n{index}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(response.as_bytes()).await;
            let _ = conn.shutdown().await;
        }
    });
    (address, seen)
}

fn store(address: &str) -> ConsulStore {
    ConsulStore::builder(address)
        .call_timeout(Duration::from_millis(800))
        .token("t0ken-s3cret")
        .build()
        .expect("build")
}

fn election() -> ElectionName {
    ElectionName::new("jobs").unwrap()
}

#[tokio::test]
async fn a_500_from_an_agent_whose_server_died_is_retried_within_the_call_timeout() {
    let (address, seen) = fake_agent(vec![
        (500, None, "rpc error making call: EOF".into()),
        (500, None, "No cluster leader".into()),
        (404, Some(7), String::new()),
    ])
    .await;
    assert_eq!(
        store(&address).current_leader(&election()).await.unwrap(),
        None
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        seen[0]
            .line
            .starts_with("GET /v1/kv/regent/jobs?consistent "),
        "{seen:?}"
    );
    // The token goes in its header, every time.
    assert!(
        seen.iter().all(|s| s
            .head
            .to_ascii_lowercase()
            .contains("x-consul-token: t0ken-s3cret")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_500_that_persists_is_unavailable_once_the_call_timeout_has_passed() {
    let (address, _) = fake_agent(vec![(500, None, "No cluster leader".into())]).await;
    let started = Instant::now();
    let e = store(&address)
        .current_leader(&election())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let shown = format!("{e} {:?}", std::error::Error::source(&e));
    assert!(shown.contains("No cluster leader"), "{shown}");
}

#[tokio::test]
async fn a_refusal_is_not_retried_and_never_shows_the_token() {
    for (status, body, kind) in [
        (500, "No path to datacenter", ErrorKind::Config),
        (403, "Permission denied", ErrorKind::Auth),
        (500, "ACL not found", ErrorKind::Auth),
    ] {
        let (address, seen) = fake_agent(vec![(status, None, body.into())]).await;
        let e = store(&address)
            .current_leader(&election())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), kind, "{body}: {e}");
        assert_eq!(seen.lock().unwrap().len(), 1, "{body}: retried");
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains("t0ken"), "{shown}");
    }
}

#[tokio::test]
async fn answers_that_are_not_consuls_are_errors_not_panics() {
    let value = "aGVsbG8=";
    for (body, kind) in [
        ("not json", ErrorKind::Protocol),
        ("[{\"Key\": 7}]", ErrorKind::Protocol),
        (
            "[{\"Key\":\"other\",\"ModifyIndex\":1}]",
            ErrorKind::Protocol,
        ),
        (
            &*format!(
                "[{{\"Key\":\"regent/jobs\",\"Flags\":{RECORD_FLAGS},\"Value\":\"%%%\",\"Session\":\"s\",\"ModifyIndex\":3}}]"
            ),
            ErrorKind::Corrupt,
        ),
        (
            &*format!(
                "[{{\"Key\":\"regent/jobs\",\"Flags\":1,\"Value\":\"{value}\",\"Session\":\"s\",\"ModifyIndex\":3}}]"
            ),
            ErrorKind::Corrupt,
        ),
    ] {
        let (address, _) = fake_agent(vec![(200, Some(3), body.to_owned())]).await;
        let e = store(&address)
            .current_leader(&election())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), kind, "{body}: {e}");
    }
}

#[tokio::test]
async fn blocking_queries_follow_consuls_index_rules() {
    let locked = format!(
        "[{{\"Key\":\"regent/jobs\",\"Flags\":{RECORD_FLAGS},\"Value\":\"YQ==\",\"Session\":\"s\",\"ModifyIndex\":12}}]"
    );
    let (address, seen) = fake_agent(vec![
        // The watch's first, consistent read.
        (404, Some(10), String::new()),
        // The index went backwards: reset.
        (404, Some(5), String::new()),
        // An index of 0: never block on 0.
        (404, Some(0), String::new()),
        (200, Some(12), locked),
    ])
    .await;
    let mut watch = store(&address).watch(&election()).await.unwrap();
    assert_eq!(watch.next().await.unwrap().unwrap(), None);
    let leader = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("a change")
        .unwrap()
        .unwrap()
        .expect("a leader");
    assert_eq!((leader.holder.as_str(), leader.token.get()), ("a", 12));
    let seen = seen.lock().unwrap();
    let lines: Vec<&str> = seen.iter().map(|s| s.line.as_str()).collect();
    assert!(lines[1].contains("index=10&wait=30s"), "{lines:?}");
    assert!(lines[2].contains("index=1&"), "reset: {lines:?}");
    assert!(lines[3].contains("index=1&"), "never 0: {lines:?}");
    // Rate-limited: queries that return at once do not spin.
    for pair in seen[1..].windows(2) {
        assert!(
            pair[1].at - pair[0].at >= WATCH_MIN_INTERVAL,
            "{:?}",
            pair[1].at - pair[0].at
        );
    }
}
