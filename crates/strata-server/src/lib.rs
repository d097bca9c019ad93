//! A Redis-protocol (RESP2) server in front of a strata engine: the
//! `strata serve` command. See docs/SERVER.md for the commands and how
//! Redis types are laid out on the ordered key space (`keys`).
//!
//! One tokio task per connection parses as many requests as the input
//! buffer holds, runs them in order and writes all replies at once
//! (pipelining). Engine calls are short and run on the worker threads.

pub mod cmd;
mod expiry;
#[doc(hidden)]
pub mod fuzzing;
pub mod keys;
pub mod resp;

pub use expiry::{server_options, ExpiredStrings};

use cmd::{Data, Session};
use resp::{Limits, Reply};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use strata::KvStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The Redis version the server reports (clients pick features by it).
pub const REDIS_VERSION: &str = "7.0.0";
/// Redis' default `proto-max-bulk-len`: 512 MB.
pub const DEFAULT_MAX_BULK: usize = 512 * 1024 * 1024;

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind; loopback by default.
    pub bind: String,
    /// TCP port; 0 picks a free one.
    pub port: u16,
    /// Password clients must AUTH with.
    pub requirepass: Option<String>,
    /// Largest bulk string a client may send (default 512 MB).
    pub max_bulk_len: usize,
    /// Most arguments of one request (default 1M, as Redis).
    pub max_multibulk_len: usize,
    /// Longest inline command (default 64 KiB, as Redis).
    pub max_inline_len: usize,
    /// Close a client idle this long (None: never, as Redis' `timeout 0`).
    pub idle_timeout: Option<Duration>,
    /// Close a client that does not take a reply within this time.
    pub write_timeout: Duration,
    /// Worker threads of the runtime (`serve_blocking`).
    pub threads: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6380,
            requirepass: None,
            max_bulk_len: DEFAULT_MAX_BULK,
            max_multibulk_len: 1024 * 1024,
            max_inline_len: 64 * 1024,
            idle_timeout: None,
            write_timeout: Duration::from_secs(60),
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
                .max(2),
        }
    }
}

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    data: Arc<Data>,
    cfg: Config,
}

impl Server {
    /// Binds `cfg.bind:cfg.port` (must be called inside a tokio runtime).
    pub async fn bind(store: Arc<dyn KvStore>, cfg: Config) -> std::io::Result<Server> {
        let listener = TcpListener::bind((cfg.bind.as_str(), cfg.port)).await?;
        let port = listener.local_addr()?.port();
        let data = Arc::new(Data::new(store, cfg.requirepass.clone(), port));
        Ok(Server {
            listener,
            data,
            cfg,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then stops accepting, lets every
    /// connection finish the requests it has read (for up to 5 s), and
    /// flushes and closes the store.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> strata::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let limits = Limits {
            max_bulk_len: self.cfg.max_bulk_len,
            max_multibulk_len: self.cfg.max_multibulk_len,
            max_inline_len: self.cfg.max_inline_len,
        };
        let sweeper = spawn_sweeper(self.data.clone(), stop_rx.clone());
        let mut tasks = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((sock, _)) => {
                        let _ = sock.set_nodelay(true);
                        let data = self.data.clone();
                        let cfg = self.cfg.clone();
                        let stop = stop_rx.clone();
                        tasks.spawn(async move {
                            data.connections.fetch_add(1, Ordering::Relaxed);
                            data.connected.fetch_add(1, Ordering::Relaxed);
                            let _ = connection(sock, &data, &cfg, limits, stop).await;
                            data.connected.fetch_sub(1, Ordering::Relaxed);
                        });
                    }
                    // Out of file descriptors and the like: back off, go on.
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        drop(self.listener);
        let _ = stop_tx.send(true);
        let drain = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(5), drain)
            .await
            .is_err()
        {
            tasks.abort_all();
        }
        let _ = sweeper.await;
        let store = self.data.store().clone();
        tokio::task::spawn_blocking(move || {
            store.flush()?;
            store.close()
        })
        .await
        .unwrap_or(Err(strata::Error::Closed))
    }
}

/// Deletes expired keys in the background (every 100 ms, up to 1000 a round).
fn spawn_sweeper(data: Arc<Data>, mut stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            let d = data.clone();
            let _ = tokio::task::spawn_blocking(move || d.sweep_expired(1000)).await;
        }
    })
}

async fn connection(
    mut sock: TcpStream,
    data: &Data,
    cfg: &Config,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut session = Session {
        authenticated: data.requirepass.is_none(),
        quit: false,
    };
    let cap = resp::max_request_bytes(&limits);
    let mut inbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        // Run every complete request in the buffer.
        let mut used = 0;
        loop {
            match resp::parse(&inbuf[used..], &limits) {
                Ok(Some((args, n))) => {
                    used += n;
                    if args.is_empty() {
                        continue;
                    }
                    data.exec(&mut session, &args).encode(&mut out);
                    if session.quit {
                        break;
                    }
                    if out.len() >= 1 << 20 {
                        write(&mut sock, &out, cfg).await?;
                        out.clear();
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    Reply::Error(format!("ERR {e}")).encode(&mut out);
                    write(&mut sock, &out, cfg).await?;
                    return Ok(());
                }
            }
        }
        inbuf.drain(..used);
        if !out.is_empty() {
            write(&mut sock, &out, cfg).await?;
            out.clear();
            if out.capacity() > 1 << 20 {
                out.shrink_to(16 * 1024);
            }
        }
        if session.quit || *stop.borrow() {
            return Ok(());
        }
        if inbuf.len() > cap {
            // Cannot happen with a well-formed request under the limits.
            return Ok(());
        }
        if inbuf.is_empty() && inbuf.capacity() > 1 << 20 {
            inbuf.shrink_to(16 * 1024);
        }
        let read = async {
            match cfg.idle_timeout {
                Some(t) => tokio::time::timeout(t, sock.read(&mut chunk))
                    .await
                    .unwrap_or(Ok(0)),
                None => sock.read(&mut chunk).await,
            }
        };
        let n = tokio::select! {
            r = read => r?,
            _ = stop.changed() => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
        inbuf.extend_from_slice(&chunk[..n]);
    }
}

async fn write(sock: &mut TcpStream, out: &[u8], cfg: &Config) -> std::io::Result<()> {
    match tokio::time::timeout(cfg.write_timeout, sock.write_all(out)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "client does not read its replies",
        )),
    }
}

/// Serves `store` on a new multi-threaded runtime until SIGINT or SIGTERM,
/// then shuts down gracefully. Prints the address it listens on.
pub fn serve_blocking(store: Arc<dyn KvStore>, cfg: Config) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    rt.block_on(async move {
        let server = Server::bind(store, cfg.clone())
            .await
            .map_err(|e| format!("bind {}:{}: {e}", cfg.bind, cfg.port))?;
        let addr = server.local_addr().map_err(|e| e.to_string())?;
        eprintln!("strata: serving the Redis protocol on {addr}");
        let signal = async {
            #[cfg(unix)]
            {
                use tokio::signal::unix::{signal, SignalKind};
                match signal(SignalKind::terminate()) {
                    Ok(mut term) => {
                        tokio::select! {
                            _ = tokio::signal::ctrl_c() => {}
                            _ = term.recv() => {}
                        }
                    }
                    Err(_) => {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            }
            #[cfg(not(unix))]
            {
                let _ = tokio::signal::ctrl_c().await;
            }
        };
        let r = server.run(signal).await.map_err(|e| e.to_string());
        eprintln!("strata: shut down");
        r
    })
}

/// A server on a background thread (for tests and embedding).
pub struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<strata::Result<()>>>,
}

impl Running {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// Shuts down gracefully and waits; returns the store's close result.
    pub fn stop(mut self) -> strata::Result<()> {
        self.shutdown()
    }
    fn shutdown(&mut self) -> strata::Result<()> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match self.thread.take() {
            Some(t) => t.join().unwrap_or(Err(strata::Error::Closed)),
            None => Ok(()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Starts a server on its own thread and runtime; returns once it listens.
pub fn spawn(store: Arc<dyn KvStore>, cfg: Config) -> std::io::Result<Running> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.threads.clamp(1, 4))
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = tx.send(Err(e));
                return Ok(());
            }
        };
        rt.block_on(async move {
            let server = match Server::bind(store, cfg).await {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return Ok(());
                }
            };
            let _ = tx.send(server.local_addr());
            server
                .run(async {
                    let _ = stop_rx.await;
                })
                .await
        })
    });
    let addr = rx
        .recv()
        .map_err(|_| std::io::Error::other("server thread died"))??;
    Ok(Running {
        addr,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}
