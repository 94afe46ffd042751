//! Fault proxies for `store-cut` and `store-delay`: one TCP proxy on
//! `127.0.0.1` per candidate and store endpoint, so that one candidate's
//! traffic to the store can be held (a partition: nothing is lost, the
//! bytes wait as in a network that stopped delivering) or slowed, while
//! the others' flows.
//!
//! Store-agnostic: a URL `scheme://[userinfo@]h1:p1,h2:p2[/rest]` has each
//! `host:port` of its authority replaced by a proxy's address. An endpoint
//! without an explicit port cannot be proxied (its default port is the
//! store's business); a TLS store whose certificate names a host other
//! than `127.0.0.1` cannot be either.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// What a proxy does to the bytes it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Pass,
    /// Hold every byte, and new connections, until the mode changes.
    Cut,
    /// Hold every chunk this long before passing it on.
    Delay(Duration),
}

/// The URL split around its authority's endpoints: `(before, endpoints,
/// after)`, or `None` if it has no authority or an endpoint lacks a port.
pub(crate) fn split_url(url: &str) -> Option<(String, Vec<String>, String)> {
    let scheme_end = url.find("://")? + 3;
    let rest = &url[scheme_end..];
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..auth_end];
    let hosts_start = authority.rfind('@').map_or(0, |at| at + 1);
    let endpoints: Vec<String> = authority[hosts_start..]
        .split(',')
        .map(str::to_owned)
        .collect();
    let has_port = |e: &String| {
        let host_end = if e.starts_with('[') {
            e.find(']')? + 1
        } else {
            e.rfind(':')?
        };
        let port = e.get(host_end..)?.strip_prefix(':')?;
        (host_end > 0 && port.parse::<u16>().is_ok()).then_some(())
    };
    if endpoints.iter().any(|e| has_port(e).is_none()) {
        return None;
    }
    Some((
        url[..scheme_end + hosts_start].to_owned(),
        endpoints,
        rest[auth_end..].to_owned(),
    ))
}

/// A proxy to one endpoint; it stops when dropped.
pub(crate) struct Proxy {
    pub(crate) addr: SocketAddr,
    mode: watch::Sender<Mode>,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The accept task owns the connections' JoinSet: aborting it ends
        // them all.
        self.task.abort();
    }
}

impl Proxy {
    /// Listens on a free port of `127.0.0.1`, forwarding to `upstream`.
    ///
    /// # Errors
    ///
    /// When no socket can be bound.
    pub(crate) fn start(upstream: String) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let addr = listener.local_addr()?;
        let (mode, watching) = watch::channel(Mode::Pass);
        let task = tokio::spawn(accept(listener, upstream, watching));
        Ok(Self { addr, mode, task })
    }

    pub(crate) fn set(&self, mode: Mode) {
        let _ = self.mode.send(mode);
    }
}

async fn accept(listener: TcpListener, upstream: String, mode: watch::Receiver<Mode>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    connections.spawn(pipe(client, upstream.clone(), mode.clone()));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Waits while the proxy is cut; false if the proxy is gone.
async fn open(mode: &mut watch::Receiver<Mode>) -> bool {
    while *mode.borrow_and_update() == Mode::Cut {
        if mode.changed().await.is_err() {
            return false;
        }
    }
    true
}

async fn pipe(client: TcpStream, upstream: String, mut mode: watch::Receiver<Mode>) {
    if !open(&mut mode).await {
        return;
    }
    let Ok(server) = TcpStream::connect(&upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::join!(copy(cr, sw, mode.clone()), copy(sr, cw, mode));
}

async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if !open(&mut mode).await {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        // Bytes that arrived as the cut began wait for its end too.
        if !open(&mut mode).await {
            return;
        }
        let delay = match *mode.borrow() {
            Mode::Delay(d) => d,
            _ => Duration::ZERO,
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_around_their_endpoints() {
        let s = |u: &str| split_url(u);
        assert_eq!(
            s("x://h1:1,h2:2/p?q").unwrap(),
            (
                "x://".into(),
                vec!["h1:1".into(), "h2:2".into()],
                "/p?q".into()
            )
        );
        assert_eq!(
            s("xs://u@[::1]:5").unwrap(),
            ("xs://u@".into(), vec!["[::1]:5".into()], String::new())
        );
        assert_eq!(s("x://h1:1,h2/p"), None);
        assert_eq!(s("x://[::1]/p"), None);
        assert_eq!(s("file:/tmp/x.db"), None);
        assert_eq!(s("x://h:99999"), None);
    }

    #[tokio::test]
    async fn bytes_written_during_a_cut_arrive_after_it() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = upstream.local_addr().unwrap().to_string();
        let echo = tokio::spawn(async move {
            let (mut s, _) = upstream.accept().await.unwrap();
            let mut b = [0u8; 4];
            loop {
                if s.read_exact(&mut b).await.is_err() {
                    return;
                }
                s.write_all(&b).await.unwrap();
            }
        });
        let proxy = Proxy::start(up).unwrap();
        let mut c = TcpStream::connect(proxy.addr).await.unwrap();
        let mut b = [0u8; 4];
        c.write_all(b"ping").await.unwrap();
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"ping");
        proxy.set(Mode::Cut);
        c.write_all(b"held").await.unwrap();
        proxy.set(Mode::Pass);
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"held");
        drop(proxy);
        echo.abort();
    }
}
