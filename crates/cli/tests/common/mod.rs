//! The harness of the tests that run real `waymark node` processes: a cluster written by
//! `waymark cluster init` into a temporary directory (with the free 127.0.0.1 ports it picked),
//! its hosts spawned, killed and restarted by name, polls that wait — within a time and a count —
//! until a host serves or the cluster has settled, and what a test reads: Redis connections, each
//! host's `/status`, whether a partition's replicas agree.
//!
//! A `Cluster` owns every process it spawned: its `Drop` SIGKILLs and reaps them all, also when the
//! test panics (and then prints the tail of each host's log).

// Each test file uses a different part of the harness.
#![allow(dead_code)]

pub mod bank;
pub mod words;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use waymark_core::PartitionId;
use waymark_server::config::NodeConfig;
use waymark_server::topology::Topology;

pub const WAYMARK: &str = env!("CARGO_BIN_EXE_waymark");

/// How long a host may take to serve after it is spawned (a debug build on 2 shared cores).
pub const SERVING_WITHIN: Duration = Duration::from_secs(30);
/// How long the cluster may take to settle once the clients stopped.
pub const SETTLED_WITHIN: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(100);
const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Most a raw client reads from one connection: replies here are short.
const RAW_READ_MAX_BYTES: usize = 1 << 20;
const IO_TIMEOUT: Duration = Duration::from_secs(5);
const LOG_TAIL_LINES: usize = 40;
/// `cluster init` writes at most 64 hosts.
const HOSTS_MAX: u32 = 64;
/// Clusters `Cluster::start` writes and starts before giving up on finding its ports free.
const START_ATTEMPTS_MAX: usize = 3;
/// A node's exit status when one of its ports is taken (`waymark node`'s `EXIT_PORT_TAKEN`).
const EXIT_PORT_TAKEN: i32 = 98;

/// Polls `probe` until it answers `Ok`, at most for `within` and `within / POLL_INTERVAL` tries;
/// panics with `what` and the last answer if it never does.
pub fn poll<T>(what: &str, within: Duration, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + within;
    let tries_max = (within.as_millis() / POLL_INTERVAL.as_millis()).max(1) + 1;
    let mut last = String::from("never tried");
    for _ in 0..tries_max {
        match probe() {
            Ok(v) => return v,
            Err(e) => last = e,
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    panic!("{what}: not within {within:?}; last: {last}");
}

/// What `waymark cluster init` is asked for.
#[derive(Clone, Debug)]
pub struct Spec {
    pub hosts: u32,
    pub replicas: usize,
    pub partitions: u32,
    /// `"always"` or `"never"`.
    pub fsync: &'static str,
    pub password: bool,
    /// `cluster init --insecure`: plaintext on every port. The harness speaks plaintext only, so
    /// every test that is not about TLS runs so (`tls.rs` runs secure clusters).
    pub insecure: bool,
    /// How often each vnode writes a checkpoint (`cluster init`'s default: 30s).
    pub checkpoint_every: &'static str,
    /// `cluster.catch_up` (on, `cluster init`'s default; off: `--no-catch-up`).
    pub catch_up: bool,
}

impl Spec {
    /// `hosts` hosts, `replicas` copies of each of 16 partitions, fsync always, insecure (no TLS)
    /// and no password, checkpoints every 30 s.
    pub fn new(hosts: u32, replicas: usize) -> Spec {
        Spec {
            hosts,
            replicas,
            partitions: 16,
            fsync: "always",
            password: false,
            insecure: true,
            checkpoint_every: "30s",
            catch_up: true,
        }
    }

    /// `cluster init`'s default: TLS on every port and a client password. `Cluster::start`,
    /// `redis` and `status` cannot talk to it: start it with `waymark cluster start`.
    pub fn secure(mut self) -> Spec {
        self.insecure = false;
        self
    }

    /// For tests where durability is not what is tested.
    pub fn fsync_never(mut self) -> Spec {
        self.fsync = "never";
        self
    }

    pub fn with_password(mut self) -> Spec {
        self.password = true;
        self
    }

    pub fn checkpoint_every(mut self, every: &'static str) -> Spec {
        self.checkpoint_every = every;
        self
    }

    fn args(&self, dir: &Path) -> Vec<String> {
        let mut args: Vec<String> = ["cluster", "init", "--dir"].map(String::from).into();
        args.push(dir.display().to_string());
        for (flag, value) in [
            ("--hosts", self.hosts.to_string()),
            ("--replicas", self.replicas.to_string()),
            ("--partitions", self.partitions.to_string()),
            ("--fsync", self.fsync.to_string()),
            ("--checkpoint-every", self.checkpoint_every.to_string()),
        ] {
            args.extend([flag.to_string(), value]);
        }
        if self.password {
            args.push("--password".into());
        }
        if self.insecure {
            args.push("--insecure".into());
        }
        if !self.catch_up {
            args.push("--no-catch-up".into());
        }
        args
    }
}

/// One host of the cluster: its directory and its validated config.
pub struct Host {
    pub name: String,
    pub dir: PathBuf,
    pub config_file: PathBuf,
    pub cfg: NodeConfig,
}

impl Host {
    pub fn redis_addr(&self) -> SocketAddr {
        self.cfg.this_host().redis
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.cfg.this_host().admin
    }

    pub fn peer_addr(&self) -> SocketAddr {
        self.cfg.this_host().peer
    }

    /// With the client password in it, if the cluster has one.
    pub fn redis_url(&self) -> String {
        match &self.cfg.password {
            Some(p) => format!("redis://:{}@{}/", String::from_utf8_lossy(p), self.redis_addr()),
            None => format!("redis://{}/", self.redis_addr()),
        }
    }

    pub fn log_file(&self) -> PathBuf {
        self.dir.join("node.log")
    }
}

pub struct Cluster {
    /// Removed last, after every process is gone (fields drop after `Drop::drop`).
    dir: tempfile::TempDir,
    pub hosts: Vec<Host>,
    /// The running process of each host (same order as `hosts`), if it runs.
    nodes: Vec<Option<Child>>,
}

impl Cluster {
    /// Writes the cluster with `waymark cluster init`; starts nothing.
    pub fn init(spec: &Spec) -> Cluster {
        let dir = temp_dir();
        let out = run_waymark(&spec.args(dir.path()), Duration::from_secs(30));
        assert!(out.status.success(), "cluster init failed: {}", String::from_utf8_lossy(&out.stderr));
        Cluster::open(dir)
    }

    /// The cluster `waymark cluster init` wrote into `dir` (hosts `node1`, `node2`, …); starts nothing.
    pub fn open(dir: tempfile::TempDir) -> Cluster {
        let mut hosts = vec![];
        for i in 1..=HOSTS_MAX {
            let name = format!("node{i}");
            let host_dir = dir.path().join(&name);
            let config_file = host_dir.join("waymark.toml");
            if !config_file.exists() {
                break;
            }
            let cfg = NodeConfig::load(&config_file).unwrap_or_else(|e| panic!("cluster init wrote a bad config: {e}"));
            hosts.push(Host { name, dir: host_dir, config_file, cfg });
        }
        assert!(!hosts.is_empty(), "{} holds no host", dir.path().display());
        let nodes = hosts.iter().map(|_| None).collect();
        Cluster { dir, hosts, nodes }
    }

    /// Writes the cluster, spawns every host and waits until each one serves.
    ///
    /// `cluster init` picks ports that were free when it looked; tests run in parallel, and
    /// another process (a connection's ephemeral port, another test's cluster) can take one
    /// before the node binds it. A host that then cannot listen exits at once: the whole cluster
    /// is stopped and written again on new ports, at most `START_ATTEMPTS_MAX` times.
    pub fn start(spec: &Spec) -> Cluster {
        for attempt in 1..=START_ATTEMPTS_MAX {
            let mut cluster = Cluster::init(spec);
            let names: Vec<String> = cluster.hosts.iter().map(|h| h.name.clone()).collect();
            for name in &names {
                cluster.spawn(name);
            }
            match names.iter().find_map(|name| cluster.wait_serving_unless_port_taken(name)) {
                None => return cluster,
                Some(taken) => eprintln!("attempt {attempt}: {taken}; starting the cluster again on new ports"),
            }
        }
        panic!("{START_ATTEMPTS_MAX} clusters in a row found a port taken")
    }

    /// `wait_serving`, except that a host which exited because a port of its was taken gives
    /// back what it said instead of failing the test.
    fn wait_serving_unless_port_taken(&mut self, name: &str) -> Option<String> {
        let keys = self.key_per_primary();
        let addr = self.host(name).redis_addr();
        let password = self.host(name).cfg.password.clone();
        poll(&format!("{name} serves"), SERVING_WITHIN, || {
            if let Some(taken) = self.port_taken() {
                return Ok(Some(taken));
            }
            self.assert_running(name);
            // Until the node says it holds its ports, the Redis port may be another program's.
            if self.listening_pid(name) != Some(self.pid(name)) {
                return Err(format!("{name} does not hold its ports yet"));
            }
            probe_gets(addr, password.as_deref(), &keys).map(|()| None)
        })
    }

    /// The pid `name`'s node wrote into its data directory once it held its three ports.
    fn listening_pid(&self, name: &str) -> Option<u32> {
        let file = self.host(name).cfg.data_dir.join(waymark_server::node::LISTENING_FILE);
        let text = fs::read_to_string(file).ok()?;
        text.lines().next()?.strip_prefix("pid ")?.trim().parse().ok()
    }

    /// A host that exited because another program holds one of its ports (the node's exit status
    /// 98, `EXIT_PORT_TAKEN`): its log's line.
    fn port_taken(&mut self) -> Option<String> {
        for i in 0..self.hosts.len() {
            let taken = self.nodes[i]
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(Some(status)) if status.code() == Some(EXIT_PORT_TAKEN)));
            if !taken {
                continue;
            }
            self.nodes[i] = None;
            let log = fs::read_to_string(self.hosts[i].log_file()).unwrap_or_default();
            let line = log.lines().rev().find(|l| l.contains("cannot listen on")).unwrap_or("exit status 98");
            return Some(format!("{}: {line}", self.hosts[i].name));
        }
        None
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Changes every host's config file with `edit` (before the hosts start), and reads them again.
    pub fn edit_configs(&mut self, edit: impl Fn(String) -> String) {
        for h in &self.hosts {
            let text = fs::read_to_string(&h.config_file).expect("the host's config");
            fs::write(&h.config_file, edit(text)).expect("the edited config");
        }
        self.reload_configs();
    }

    /// Reads every host's config again (after `cluster start` moved the cluster to new ports).
    pub fn reload_configs(&mut self) {
        for h in &mut self.hosts {
            h.cfg = NodeConfig::load(&h.config_file).unwrap_or_else(|e| panic!("{} is not valid: {e}", h.name));
        }
    }

    pub fn host(&self, name: &str) -> &Host {
        &self.hosts[self.index(name)]
    }

    fn index(&self, name: &str) -> usize {
        self.hosts.iter().position(|h| h.name == name).unwrap_or_else(|| panic!("no host {name}"))
    }

    /// The cluster secret as the nodes read it (without the trailing newline).
    pub fn secret(&self) -> Vec<u8> {
        read_trimmed(&self.dir().join("secret"))
    }

    /// The client password `cluster init --password` wrote.
    pub fn password(&self) -> String {
        String::from_utf8(read_trimmed(&self.dir().join("password"))).expect("a hex password")
    }

    /// Spawns `waymark node --config …` for `name` (which must not be running); its output goes to
    /// a log file in the host's directory.
    pub fn spawn(&mut self, name: &str) {
        let i = self.index(name);
        assert!(self.nodes[i].is_none(), "{name} already runs");
        let host = &self.hosts[i];
        let log = fs::OpenOptions::new().create(true).append(true).open(host.log_file()).expect("the node's log file");
        let mut command = Command::new(WAYMARK);
        command
            .arg("node")
            .arg("--config")
            .arg(&host.config_file)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log file, twice"))
            .stderr(log);
        // Should the test process die without unwinding (a CI timeout kills it), the kernel kills
        // the node. The signal follows the spawning thread — the test's own, where the `Cluster`
        // lives and is dropped anyway.
        // SAFETY: the closure runs between fork and exec and only calls prctl(2), which is
        // async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot spawn {WAYMARK}: {e}"));
        self.nodes[i] = Some(child);
    }

    /// SIGKILLs `name` and reaps it.
    pub fn kill(&mut self, name: &str) {
        let i = self.index(name);
        let mut child = self.nodes[i].take().unwrap_or_else(|| panic!("{name} does not run"));
        child.kill().unwrap_or_else(|e| panic!("cannot kill {name}: {e}"));
        child.wait().unwrap_or_else(|e| panic!("cannot reap {name}: {e}"));
    }

    /// The pid of `name`'s process.
    pub fn pid(&self, name: &str) -> u32 {
        self.nodes[self.index(name)].as_ref().unwrap_or_else(|| panic!("{name} does not run")).id()
    }

    /// Panics, with the host's log, if `name`'s process exited.
    pub fn assert_running(&mut self, name: &str) {
        let i = self.index(name);
        let child = self.nodes[i].as_mut().unwrap_or_else(|| panic!("{name} was not started"));
        if let Ok(Some(status)) = child.try_wait() {
            self.nodes[i] = None;
            panic!("{name} exited ({status}); its log:\n{}", log_tail(&self.hosts[i].log_file()));
        }
    }

    /// Waits until `name` answers a `GET` of a key of every primary: its vnodes recovered, and it
    /// reaches every primary over its peer links.
    pub fn wait_serving(&mut self, name: &str) {
        if let Some(taken) = self.wait_serving_unless_port_taken(name) {
            panic!("{taken}");
        }
    }

    /// The topology every host derives from the config.
    pub fn topology(&self) -> Topology {
        Topology::new(&self.hosts[0].cfg.cluster).expect("the cluster's topology")
    }

    /// For every store vnode that is a primary, a key of its partitions.
    pub fn key_per_primary(&self) -> Vec<String> {
        let topology = self.topology();
        let placement = &topology.placement;
        let primaries: BTreeSet<String> =
            (0..placement.partitions()).map(|p| placement.primary(PartitionId(p)).to_string()).collect();
        primaries.iter().map(|v| key_with_primary(&topology, "probe", v)).collect()
    }

    /// A synchronous Redis connection to `name` (authenticated, if the cluster has a password).
    pub fn redis(&self, name: &str) -> redis::Connection {
        let client = redis::Client::open(self.host(name).redis_url()).expect("a redis url");
        let con = client.get_connection_with_timeout(IO_TIMEOUT).unwrap_or_else(|e| panic!("connect to {name}: {e}"));
        con.set_read_timeout(Some(IO_TIMEOUT)).expect("a read timeout");
        con.set_write_timeout(Some(IO_TIMEOUT)).expect("a write timeout");
        con
    }

    /// `name`'s `GET /status`.
    pub fn status(&self, name: &str) -> Result<serde_json::Value, String> {
        let body = http_get(self.host(name).admin_addr(), "/status")?;
        serde_json::from_str(&body).map_err(|e| format!("/status of {name} is not JSON: {e}"))
    }

    /// The store vnodes of every host, from their `/status`.
    pub fn store_vnodes(&self) -> Result<Vec<serde_json::Value>, String> {
        let hosts: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
        self.store_vnodes_of(&hosts)
    }

    /// The store vnodes of `hosts`, from their `/status`.
    pub fn store_vnodes_of(&self, hosts: &[&str]) -> Result<Vec<serde_json::Value>, String> {
        let mut out = vec![];
        for h in hosts {
            let status = self.status(h)?;
            let vnodes = status["vnodes"].as_array().ok_or_else(|| format!("/status of {h} has no vnodes"))?;
            out.extend(vnodes.iter().filter(|v| v["kind"] == "store").cloned());
        }
        Ok(out)
    }

    /// Waits until no store vnode holds a prepared transaction and the copies of every partition
    /// agree: every in-doubt transaction resolved, every replica caught up. A failover may have
    /// left a partition fewer copies than the replica count (a host that was down long enough
    /// returns holding none of the partitions it lost): every partition still has one.
    pub fn settled(&self, within: Duration) {
        let partitions = self.hosts[0].cfg.cluster.partitions;
        poll("the cluster settles (nothing prepared, copies agree)", within, || {
            replicas_agree_live(&self.store_vnodes()?, partitions)
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (host, node) in self.hosts.iter().zip(&mut self.nodes) {
            if let Some(mut child) = node.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            if std::thread::panicking() {
                eprintln!("--- log of {} ---\n{}", host.name, log_tail(&host.log_file()));
            }
        }
    }
}

/// A fresh temporary directory, removed when dropped.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("waymark-test-").tempdir().expect("a temporary directory")
}

/// Every partition is held by `replicas` store vnodes, and their digests are equal.
pub fn replicas_agree(stores: &[serde_json::Value], replicas: usize) -> Result<(), String> {
    let mut held: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for v in stores {
        let id = v["id"].as_str().ok_or("a vnode without an id")?.to_string();
        let partitions = v["partitions"].as_object().ok_or_else(|| format!("{id} reports no partitions"))?;
        for (p, digest) in partitions {
            let digest = digest.as_str().ok_or_else(|| format!("{id}: digest of {p} is not text"))?;
            held.entry(p.clone()).or_default().push((id.clone(), digest.to_string()));
        }
    }
    let mut problems = vec![];
    for (p, copies) in &held {
        if copies.len() != replicas {
            problems.push(format!("partition {p} has {} replicas, expected {replicas}: {copies:?}", copies.len()));
        } else if copies.iter().any(|(_, d)| *d != copies[0].1) {
            problems.push(format!("partition {p}'s replicas differ: {copies:?}"));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("; ")),
    }
}

/// After a failover: no store vnode among `stores` holds a prepared transaction, every partition is
/// held by at least one of them (by the placement each routes by), and its copies agree.
pub fn replicas_agree_live(stores: &[serde_json::Value], partitions: u32) -> Result<(), String> {
    let mut held: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut problems = vec![];
    for v in stores {
        let id = v["id"].as_str().ok_or("a vnode without an id")?.to_string();
        if v["prepared"].as_u64() != Some(0) {
            problems.push(format!("{id} has {} prepared", v["prepared"]));
        }
        let partitions = v["partitions"].as_object().ok_or_else(|| format!("{id} reports no partitions"))?;
        for (p, digest) in partitions {
            let digest = digest.as_str().ok_or_else(|| format!("{id}: digest of {p} is not text"))?;
            held.entry(p.clone()).or_default().push((id.clone(), digest.to_string()));
        }
    }
    if held.len() != partitions as usize {
        problems.push(format!("{} of {partitions} partitions are held by the vnodes asked", held.len()));
    }
    for (p, copies) in &held {
        if copies.iter().any(|(_, d)| *d != copies[0].1) {
            problems.push(format!("partition {p}'s copies differ: {copies:?}"));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("; ")),
    }
}

/// The first `<prefix>-<i>` whose primary is `primary` (`kind@host`).
pub fn key_with_primary(topology: &Topology, prefix: &str, primary: &str) -> String {
    (0..100_000)
        .map(|i| format!("{prefix}-{i}"))
        .find(|k| topology.placement.primary_of(&k.as_bytes().to_vec()).to_string() == primary)
        .unwrap_or_else(|| panic!("no key of prefix {prefix} has primary {primary}"))
}

/// `GET` of each key answers a value or nil (not an error), over a fresh connection.
fn probe_gets(addr: SocketAddr, password: Option<&[u8]>, keys: &[String]) -> Result<(), String> {
    let mut s = RawClient::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    if let Some(password) = password {
        s.send(&resp_command(&["AUTH", &String::from_utf8_lossy(password)])).map_err(|e| e.to_string())?;
        let line = s.read_line().map_err(|e| e.to_string())?;
        if line != "+OK" {
            return Err(format!("AUTH: {line}"));
        }
    }
    for key in keys {
        s.send(&resp_command(&["GET", key])).map_err(|e| e.to_string())?;
        let line = s.read_line().map_err(|e| e.to_string())?;
        if line.starts_with('-') {
            return Err(format!("GET {key}: {line}"));
        }
        if let Some(len) = line.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
            s.read_exact(len + 2).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// A request as a RESP array of bulk strings.
pub fn resp_command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// A client speaking raw bytes, for what a well-behaved client library never sends.
pub struct RawClient {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawClient {
    pub fn connect(addr: SocketAddr) -> std::io::Result<RawClient> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(RawClient { stream, buf: vec![] })
    }

    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next line the server sent, without its CRLF.
    pub fn read_line(&mut self) -> std::io::Result<String> {
        while self.buf.len() <= RAW_READ_MAX_BYTES {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..at]).into_owned();
                self.buf.drain(..at + 2);
                return Ok(line);
            }
            if self.fill()? == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed before a full line"));
            }
        }
        Err(std::io::Error::other(format!("no line end in {RAW_READ_MAX_BYTES} bytes")))
    }

    fn read_exact(&mut self, n: usize) -> std::io::Result<Vec<u8>> {
        if n > RAW_READ_MAX_BYTES {
            return Err(std::io::Error::other(format!("a reply of {n} bytes")));
        }
        while self.buf.len() < n {
            if self.fill()? == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed in a bulk string"));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    fn fill(&mut self) -> std::io::Result<usize> {
        let mut chunk = [0u8; 4096];
        let n = self.stream.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Whether the server closed the connection (after anything still unread), within the read
    /// timeout. A reset counts as closed.
    pub fn is_closed_by_server(&mut self) -> bool {
        while self.buf.len() <= RAW_READ_MAX_BYTES {
            match self.fill() {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
        false
    }
}

/// A bare HTTP/1.0 `GET`: the body of a 200 answer.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| e.to_string())?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).map_err(|e| e.to_string())?;
    let mut answer = vec![];
    s.read_to_end(&mut answer).map_err(|e| format!("GET {path} from {addr}: {e}"))?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(|| format!("GET {path}: no end of headers"))?;
    let status_line = head.lines().next().unwrap_or_default();
    if !status_line.contains(" 200 ") {
        return Err(format!("GET {path} from {addr}: {status_line}"));
    }
    Ok(body.to_string())
}

/// Runs `waymark ARGS` to its end, killing it if it takes longer than `within`.
pub fn run_waymark(args: &[String], within: Duration) -> Output {
    let child = Command::new(WAYMARK)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {WAYMARK}: {e}"));
    wait_bounded(child, within, &format!("waymark {}", args.join(" ")))
}

/// `waymark WORDS…` run to its end within `within`: whether it succeeded, and what it printed
/// (stdout, then stderr).
pub fn waymark_said(words: &[&str], within: Duration) -> (bool, String) {
    let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    let out = run_waymark(&args, within);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Restores snapshot `name` of the cluster in `dir` onto `hosts` new plaintext hosts, starts
/// them, and waits until each serves: the restored cluster (stopped when it is dropped).
pub fn restore_and_start(dir: &str, name: &str, hosts: usize, within: Duration) -> Cluster {
    let to = temp_dir();
    let target = to.path().display().to_string();
    let count = hosts.to_string();
    let words = ["snapshot", "restore", name, "--to", &target, "--hosts", &count, "--insecure", "--dir", dir];
    let (ok, said) = waymark_said(&words, within);
    assert!(ok, "restore of snapshot {name} onto {hosts} hosts:\n{said}");
    let mut restored = Cluster::open(to);
    let names: Vec<String> = (1..=hosts).map(|i| format!("node{i}")).collect();
    for name in &names {
        restored.spawn(name);
    }
    for name in &names {
        restored.wait_serving(name);
    }
    restored
}

/// Waits for `child` to exit and collects its output, killing it after `within`.
pub fn wait_bounded(mut child: Child, within: Duration, what: &str) -> Output {
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let stdout = std::thread::spawn(move || read_all(out.as_mut()));
    let stderr = std::thread::spawn(move || read_all(err.as_mut()));
    let deadline = Instant::now() + within;
    let tries_max = within.as_millis() / EXIT_POLL_INTERVAL.as_millis() + 1;
    let mut status = None;
    for _ in 0..tries_max {
        status = child.try_wait().expect("try_wait");
        if status.is_some() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(EXIT_POLL_INTERVAL);
    }
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what} did not exit within {within:?}");
    };
    let stdout = stdout.join().expect("stdout reader");
    let stderr = stderr.join().expect("stderr reader");
    Output { status, stdout, stderr }
}

fn read_all(r: Option<&mut impl Read>) -> Vec<u8> {
    let mut bytes = vec![];
    if let Some(r) = r {
        let _ = r.read_to_end(&mut bytes);
    }
    bytes
}

fn read_trimmed(file: &Path) -> Vec<u8> {
    let mut bytes = fs::read(file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    bytes
}

pub fn log_tail(file: &Path) -> String {
    let text = fs::read_to_string(file).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

/// Whether `pid` runs (a zombie has ended: it is only waiting for its parent).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.contains(") Z "),
        Err(_) => false,
    }
}

/// Whether `pid` is a `waymark node` of one of this cluster's config files.
fn is_our_node(pid: u32, configs: &[PathBuf]) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline);
    configs.iter().any(|c| cmdline.contains(&*c.to_string_lossy()))
}

/// The nodes `cluster start` left running are not this test's children: if the test fails, this
/// SIGKILLs each one its pid file (or an earlier read of it) names, and waits until it is gone.
pub struct PidFileGuard {
    hosts: Vec<PathBuf>,
    configs: Vec<PathBuf>,
    seen: Vec<u32>,
}

impl PidFileGuard {
    pub fn new(cluster: &Cluster) -> PidFileGuard {
        let hosts = cluster.hosts.iter().map(|h| h.dir.clone()).collect();
        let configs = cluster.hosts.iter().map(|h| h.config_file.clone()).collect();
        PidFileGuard { hosts, configs, seen: vec![] }
    }

    /// The pids the hosts' pid files name now (also remembered for the clean-up).
    pub fn read(&mut self) -> Vec<u32> {
        let pids: Vec<u32> = self
            .hosts
            .iter()
            .filter_map(|h| std::fs::read_to_string(h.join("node.pid")).ok()?.trim().parse().ok())
            .collect();
        self.seen.extend(&pids);
        pids
    }
}

impl Drop for PidFileGuard {
    fn drop(&mut self) {
        let mut pids = self.read();
        pids.extend(&self.seen);
        for pid in pids {
            if alive(pid) && is_our_node(pid, &self.configs) {
                // SAFETY: kill(2) on a pid checked above to be one of this test's nodes.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                for _ in 0..200 {
                    if !alive(pid) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(25));
                }
            }
        }
    }
}
