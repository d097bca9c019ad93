//! `strata serve` driven by the stock Redis tools: `redis-cli` (including
//! `--pipe` and `--scan`), `redis-benchmark`, SIGTERM shutdown and restart,
//! and three servers behind twemproxy (`nutcracker`, ketama distribution).
//! Servers listen on ports the kernel picks and report; a missing tool (Debian packages
//! `redis-tools`, `nutcracker`) skips that part with a note, unless
//! `STRATA_REQUIRE_TOOLS=1` (set by `.ci/run`): then it fails the test, since
//! these are the only SIGTERM-restart, INCR-atomicity and sharding checks.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// True when `tool` runs; otherwise panics if `STRATA_REQUIRE_TOOLS=1`, or
/// notes the skip of `what` on stderr.
fn require(tool: &str, package: &str, what: &str) -> bool {
    if have(tool) {
        return true;
    }
    assert!(
        std::env::var("STRATA_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "STRATA_REQUIRE_TOOLS=1 and `{tool}` is missing ({what}): apt-get install {package}"
    );
    eprintln!("note: {tool} not found (apt-get install {package}); skipping {what}");
    false
}

/// A free loopback port for nutcracker (which cannot report a port it
/// picked), never one handed out before in this process. `strata serve`
/// takes `--port 0` instead (see [`serve`]).
fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Whether something listens on `port`. The ports come from the ephemeral range, so a
/// connect to a port nobody listens on yet can pick that same port as its source and connect
/// to itself (TCP simultaneous open): such a connection is not a listener.
fn listening(port: u16) -> bool {
    match std::net::TcpStream::connect(("127.0.0.1", port)) {
        Ok(s) => match (s.local_addr(), s.peer_addr()) {
            (Ok(local), Ok(peer)) => local != peer,
            _ => false,
        },
        Err(_) => false,
    }
}

/// A child process killed (SIGKILL) on drop unless it already exited.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `strata serve` on `dir` on a port the kernel picks (`--port 0`)
/// and returns it with the port it reports on stderr ("serving the Redis
/// protocol on ADDR"): no port is probed, freed and bound again, so no
/// other process can take it in between.
fn serve(dir: &Path) -> (Proc, u16) {
    let log = dir.with_extension("serve.log");
    let child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--dir")
        .arg(dir)
        .args(["serve", "--port", "0"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn strata serve");
    let mut p = Proc(child);
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let port = text
            .lines()
            .filter_map(|l| l.split("serving the Redis protocol on ").nth(1))
            .filter_map(|addr| addr.trim().rsplit(':').next()?.parse::<u16>().ok())
            .next();
        if let Some(port) = port {
            return (p, port);
        }
        if let Ok(Some(status)) = p.0.try_wait() {
            panic!("strata serve exited with {status}: {text}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "strata serve never said where it listens: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts nutcracker in front of the servers on `ports` and returns it
/// with the port it proxies on. It cannot report a port it picked, so its
/// two ports are probed: should another process take one before
/// nutcracker binds it, nutcracker exits and the next attempt takes fresh
/// ones. Its pool's name is new each attempt and its stats port must
/// report it, so a listener that is not this nutcracker is never taken for
/// it.
fn start_nutcracker(tmp: &Path, ports: &[u16]) -> (Proc, u16) {
    for attempt in 0..5 {
        let (proxy_port, stats_port) = (free_port(), free_port());
        let pool = format!("strata{}x{attempt}", std::process::id());
        let conf = tmp.join(format!("nutcracker{attempt}.yml"));
        let mut yml = format!(
            "{pool}:\n  listen: 127.0.0.1:{proxy_port}\n  hash: fnv1a_64\n  distribution: ketama\n  \
             redis: true\n  auto_eject_hosts: false\n  timeout: 5000\n  servers:\n"
        );
        for (i, p) in ports.iter().enumerate() {
            yml.push_str(&format!("   - 127.0.0.1:{p}:1 shard{i}\n"));
        }
        std::fs::write(&conf, yml).expect("write nutcracker.yml");
        let check = Command::new("nutcracker")
            .arg("-t")
            .arg("-c")
            .arg(&conf)
            .output()
            .expect("nutcracker -t");
        assert!(check.status.success(), "bad nutcracker config: {check:?}");
        let mut proxy = Proc(
            Command::new("nutcracker")
                .arg("-c")
                .arg(&conf)
                .args(["-s", &stats_port.to_string(), "-a", "127.0.0.1"])
                .arg("-o")
                .arg(tmp.join(format!("nutcracker{attempt}.log")))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn nutcracker"),
        );
        let start = Instant::now();
        loop {
            if !matches!(proxy.0.try_wait(), Ok(None)) {
                break; // it exited: a port was taken
            }
            if stats(stats_port).contains(&pool) && listening(proxy_port) {
                if matches!(proxy.0.try_wait(), Ok(None)) {
                    return (proxy, proxy_port);
                }
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "nutcracker never listened on {proxy_port} (stats {stats_port})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("nutcracker exited on five pairs of free ports");
}

/// What a nutcracker stats port answers (its JSON), or "" if nothing does.
fn stats(port: u16) -> String {
    use std::io::Read;
    let mut text = String::new();
    if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = s.read_to_string(&mut text);
    }
    text
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// Feeds `input` to `redis-cli` on stdin (one command per line, or raw
/// protocol with --pipe).
fn cli_stdin(port: u16, args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run redis-cli");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("feed redis-cli");
    let out = child.wait_with_output().expect("redis-cli");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn sigterm(p: &mut Proc) {
    let pid = p.0.id().to_string();
    let ok = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill -TERM {pid}");
    let start = Instant::now();
    loop {
        if let Some(status) = p.0.try_wait().expect("wait") {
            assert!(status.success(), "strata serve exited with {status}");
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn redis_cli_and_benchmark() {
    if !require(
        "redis-cli",
        "redis-tools",
        "the redis-cli and SIGTERM checks",
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut server, port) = serve(dir.path());
    assert_eq!(cli(port, &["ping"]), "PONG");
    assert_eq!(cli(port, &["set", "greeting", "hello world"]), "OK");
    assert_eq!(cli(port, &["get", "greeting"]), "hello world");
    assert_eq!(cli(port, &["hset", "h", "f1", "a", "f2", "b"]), "2");
    assert_eq!(cli(port, &["zadd", "z", "1", "one", "2", "two"]), "2");
    assert_eq!(cli(port, &["zrangebyscore", "z", "(1", "+inf"]), "two");
    assert_eq!(cli(port, &["type", "z"]), "zset");
    assert!(cli(port, &["info"]).contains("# Keyspace"));
    assert!(cli(port, &["bogus"]).contains("unknown command"));
    // Commands one per line on stdin.
    let out = cli_stdin(port, &[], b"SET a 1\nINCRBY a 41\nGET a\n");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["OK", "42", "42"]);
    // Mass insertion with --pipe (raw protocol, then an ECHO marker).
    let mut proto = Vec::new();
    for i in 0..1000 {
        let (k, v) = (format!("pipe:{i}"), format!("v{i}"));
        write!(
            proto,
            "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
            k.len(),
            v.len()
        )
        .expect("fmt");
    }
    let out = cli_stdin(port, &["--pipe"], &proto);
    assert!(out.contains("errors: 0, replies: 1000"), "{out}");
    // --scan walks the whole key space with SCAN.
    let keys = cli(port, &["--scan", "--pattern", "pipe:*"]);
    assert_eq!(keys.lines().count(), 1000);
    assert_eq!(cli(port, &["dbsize"]), "1004");

    if require(
        "redis-benchmark",
        "redis-tools",
        "the benchmark and INCR check",
    ) {
        let out = Command::new("redis-benchmark")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args([
                "-t",
                "set,get,incr,hset",
                "-n",
                "5000",
                "-c",
                "20",
                "-P",
                "8",
                "-q",
            ])
            .output()
            .expect("run redis-benchmark");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{out:?}");
        for t in ["SET", "GET", "INCR", "HSET"] {
            assert!(
                text.lines()
                    .any(|l| l.contains(&format!("{t}: ")) && l.contains("requests per second")),
                "no {t} result in:\n{text}"
            );
        }
        // Every INCR of the benchmark landed on its one counter.
        assert_eq!(cli(port, &["get", "counter:__rand_int__"]), "5000");
    }

    // SIGTERM: a clean exit, and everything acknowledged is there after a restart.
    sigterm(&mut server);
    drop(server);
    let (server, port) = serve(dir.path());
    assert_eq!(cli(port, &["get", "greeting"]), "hello world");
    assert_eq!(cli(port, &["get", "pipe:999"]), "v999");
    assert_eq!(cli(port, &["hget", "h", "f2"]), "b");
    drop(server);
}

#[test]
fn three_servers_behind_twemproxy() {
    if !require("redis-cli", "redis-tools", "the twemproxy sharding check")
        || !require("nutcracker", "nutcracker", "the twemproxy sharding check")
    {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (_servers, ports): (Vec<Proc>, Vec<u16>) = (0..3)
        .map(|i| serve(&tmp.path().join(format!("shard{i}"))))
        .unzip();
    let (proxy, proxy_port) = start_nutcracker(tmp.path(), &ports);

    let n = 300;
    let mut cmds = String::new();
    for i in 0..n {
        cmds.push_str(&format!("SET user:{i} value-{i}\n"));
    }
    cmds.push_str("HSET profile:1 name ada\nZADD board 10 ada\nINCR visits\n");
    let out = cli_stdin(proxy_port, &[], cmds.as_bytes());
    assert_eq!(out.lines().filter(|l| *l == "OK").count(), n, "{out}");

    // Every key reads back through the proxy (GETs, and an MGET it splits).
    let mut gets = String::new();
    for i in 0..n {
        gets.push_str(&format!("GET user:{i}\n"));
    }
    let out = cli_stdin(proxy_port, &[], gets.as_bytes());
    let values: Vec<&str> = out.lines().collect();
    assert_eq!(values.len(), n);
    for (i, v) in values.iter().enumerate() {
        assert_eq!(*v, format!("value-{i}"));
    }
    assert_eq!(
        cli(proxy_port, &["mget", "user:0", "user:1", "user:2"]),
        "value-0\nvalue-1\nvalue-2"
    );
    assert_eq!(cli(proxy_port, &["hget", "profile:1", "name"]), "ada");
    assert_eq!(cli(proxy_port, &["zscore", "board", "ada"]), "10");

    // The keys are spread over all three servers (ketama over the names
    // shard0..2 is deterministic: 193/10/100 of these 303 keys).
    let sizes: Vec<usize> = ports
        .iter()
        .map(|p| cli(*p, &["dbsize"]).parse().expect("dbsize"))
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), n + 3, "{sizes:?}");
    for s in &sizes {
        assert!(*s > 0, "a server got no keys: {sizes:?}");
    }
    drop(proxy);
}
