//! `waymark cluster init|start|stop|status`: a local cluster on 127.0.0.1 in one directory, the way
//! `cockroach demo` or `tiup playground` give one — each host a background `waymark node` process
//! with its config, data, log and pid file under `DIR/<host>/`, one cluster secret in `DIR/secret`.
//!
//! Secure by default (issue 36): `init` also writes a CA and a certificate per host (`certs.rs`)
//! and a client password, so every port speaks TLS and clients `AUTH`; `init --insecure` writes
//! neither, and sets `node.insecure` so the hosts may serve in plaintext.

use super::node::EXIT_PORT_TAKEN;
use anyhow::{bail, Context, Result};
use clap::Subcommand;
use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use waymark_core::{CutStrategy, PartitionId, VnodeId};
use waymark_server::config::{raw, NodeConfig};
use waymark_server::node::LISTENING_FILE;
use waymark_server::topology::Topology;

pub const CONFIG_FILE: &str = "waymark.toml";
const PID_FILE: &str = "node.pid";
pub const LOG_FILE: &str = "node.log";
const START_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// Candidate probe keys tried per primary: each of at most 64 × 64 store vnodes is the primary of
/// about its share of the keys, so a few thousand tries find one; the bound only ends the search.
const PROBE_KEYS_TRIED_MAX: u32 = 1_000_000;

#[derive(Subcommand)]
pub enum ClusterCmd {
    /// Write a ready local cluster: one config per host on 127.0.0.1 with free ports, a secret,
    /// the admin token, a client password, a CA and a certificate per host (TLS on every port).
    Init {
        #[arg(long, default_value_t = 3)]
        hosts: u32,
        #[arg(long)]
        dir: PathBuf,
        /// Copies of each partition, on distinct hosts [default: 2, or 1 for a single host].
        #[arg(long)]
        replicas: Option<usize>,
        #[arg(long, default_value_t = 64)]
        partitions: u32,
        /// Store vnodes per host.
        #[arg(long, default_value_t = 1)]
        stores: u32,
        /// `always` (fsync per group commit) or `never` (tests and benchmarks only).
        #[arg(long, default_value = "always")]
        fsync: String,
        /// How a cut snapshots the cluster: `consistent`, `blocking` or `versions` (`cluster.strategy`).
        #[arg(long, default_value = "consistent")]
        strategy: String,
        /// How often each vnode writes a checkpoint, e.g. "30s".
        #[arg(long, default_value = "30s")]
        checkpoint_every: String,
        /// Plaintext on every port and no client password, as before issue 36 (for tools that
        /// cannot speak TLS, such as Redis's own test units); says what it turns off.
        #[arg(long)]
        insecure: bool,
        /// With `--insecure`, still write a client password (`DIR/password`); clients must
        /// `AUTH` with it. A secure cluster always has one.
        #[arg(long)]
        password: bool,
        /// `cluster.catch_up = false`: a host that comes back stays out of its partitions' chains
        /// and a partition left short of a copy stays so until an operator acts (on by default:
        /// returning hosts catch up and every partition gets its copies back).
        #[arg(long)]
        no_catch_up: bool,
    },
    /// Start every host of DIR in the background; returns once the cluster serves.
    Start {
        #[arg(long)]
        dir: PathBuf,
    },
    /// Stop every host of DIR (SIGTERM, then SIGKILL after 20 s), by the pid each one recorded.
    Stop {
        #[arg(long)]
        dir: PathBuf,
    },
    /// What the running cluster says: each host up or down (asked over its admin API), the root
    /// and its term, and the partitions with fewer live copies than the replica count.
    Status {
        #[arg(long)]
        dir: PathBuf,
        /// Wait, with a progress bar, until every partition has its replica count of live copies
        /// again (after a host came back or was replaced); an error after `--timeout-s`.
        #[arg(long)]
        wait_whole: bool,
        /// How long `--wait-whole` waits, in seconds.
        #[arg(long, default_value_t = 600, requires = "wait_whole")]
        timeout_s: u64,
    },
}

pub fn run(cmd: ClusterCmd) -> Result<()> {
    match cmd {
        ClusterCmd::Init {
            hosts,
            dir,
            replicas,
            partitions,
            stores,
            fsync,
            strategy,
            checkpoint_every,
            insecure,
            password,
            no_catch_up,
        } => {
            let replicas = replicas.unwrap_or(2.min(hosts as usize));
            let strategy = strategy.parse()?;
            let spec = Spec {
                hosts,
                replicas,
                partitions,
                stores,
                fsync,
                strategy,
                wal_preallocate: true,
                checkpoint_every,
                password: password || !insecure,
                tls: !insecure,
                maxmemory_bytes: None,
                catch_up: !no_catch_up,
            };
            if insecure {
                say!("--insecure: no TLS on the Redis, admin and peer ports (clients, the admin token and peer");
                say!(
                    "  messages cross the network in plaintext), {}; protected mode off",
                    if password {
                        format!("clients AUTH with {}", dir.join("password").display())
                    } else {
                        "no client password (anyone who reaches a Redis port reads and writes every key)".into()
                    }
                );
            }
            init(&dir, &spec)
        }
        ClusterCmd::Start { dir } => start(&dir),
        ClusterCmd::Stop { dir } => stop(&dir),
        ClusterCmd::Status { dir, wait_whole: false, .. } => super::cluster_status::run(&dir),
        ClusterCmd::Status { dir, wait_whole: true, timeout_s } => {
            super::cluster_status::wait_whole(&dir, std::time::Duration::from_secs(timeout_s))
        }
    }
}

/// What `init` writes.
#[derive(Clone, Debug)]
pub struct Spec {
    pub hosts: u32,
    pub replicas: usize,
    pub partitions: u32,
    pub stores: u32,
    pub fsync: String,
    pub strategy: CutStrategy,
    /// `node.wal_preallocate`: off only to measure what preallocated segments save.
    pub wal_preallocate: bool,
    pub checkpoint_every: String,
    pub password: bool,
    /// A CA and a certificate per host, and `[tls]` in each config; without it the cluster is
    /// written `node.insecure` (plaintext on every port, protected mode off).
    pub tls: bool,
    /// `limits.maxmemory_bytes` when set (else the node's default from the machine's memory).
    pub maxmemory_bytes: Option<u64>,
    /// `cluster.catch_up` (on unless `--no-catch-up`).
    pub catch_up: bool,
}

impl Spec {
    /// `cluster init --insecure`'s defaults for everything but the shape: one store per host,
    /// fsync always, a checkpoint every 30 s, no password, no TLS. The demo, the benchmark and the
    /// nemesis run so: they measure and check the protocols, not TLS.
    pub fn local(hosts: u32, replicas: usize, partitions: u32) -> Spec {
        Spec {
            hosts,
            replicas,
            partitions,
            stores: 1,
            fsync: "always".into(),
            strategy: CutStrategy::Consistent,
            wal_preallocate: true,
            checkpoint_every: "30s".into(),
            password: false,
            tls: false,
            maxmemory_bytes: None,
            catch_up: true,
        }
    }
}

pub fn init(dir: &Path, spec: &Spec) -> Result<()> {
    if spec.hosts == 0 || spec.hosts > 64 {
        bail!("--hosts must be in 1..=64 (got {})", spec.hosts);
    }
    if spec.replicas == 0 || spec.replicas > spec.hosts as usize {
        bail!(
            "--replicas must be in 1..={} (got {}): each copy of a partition needs a host of its own",
            spec.hosts,
            spec.replicas
        );
    }
    let existed = dir.exists();
    if existed && fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?.next().is_some() {
        bail!("{} is not empty: choose a new directory, or remove this one to start over", dir.display());
    }
    let hosts = match write_cluster(dir, spec) {
        Ok(hosts) => hosts,
        Err(e) => {
            // The directory was empty or absent: all of it is ours, and a retry needs it empty.
            undo(dir, existed);
            return Err(e);
        }
    };
    say!(
        "wrote a {}-host cluster to {} (replicas {}, partitions {})",
        spec.hosts,
        dir.display(),
        spec.replicas,
        spec.partitions
    );
    let scheme = if spec.tls { "https" } else { "http" };
    for h in &hosts {
        say!("  {:<8} redis {:<21} admin {scheme}://{}", h.name, h.redis, h.admin);
    }
    if spec.tls {
        say!(
            "TLS on every port (CA {}/{}), clients AUTH with {}/password",
            dir.display(),
            super::certs::CA_FILE,
            dir.display()
        );
    }
    say!("start it with: waymark cluster start --dir {}", dir.display());
    Ok(())
}

/// Writes the secret (and password) and every host's checked config into `dir`.
fn write_cluster(dir: &Path, spec: &Spec) -> Result<Vec<raw::Host>> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write_secret(&dir.join("secret"))?;
    write_secret(&dir.join("admin-token"))?;
    if spec.password {
        write_secret(&dir.join("password"))?;
    }
    let ports = pick_ports(3 * spec.hosts as usize)?;
    let hosts: Vec<raw::Host> = (0..spec.hosts as usize)
        .map(|i| raw::Host {
            name: format!("node{}", i + 1),
            peer: format!("127.0.0.1:{}", ports[3 * i]),
            redis: format!("127.0.0.1:{}", ports[3 * i + 1]),
            admin: format!("127.0.0.1:{}", ports[3 * i + 2]),
            stores: Some(spec.stores),
        })
        .collect();
    for h in &hosts {
        let host_dir = dir.join(&h.name);
        fs::create_dir_all(&host_dir)?;
    }
    if spec.tls {
        super::certs::write(dir, "local", &hosts)?;
    }
    for h in &hosts {
        let file = dir.join(&h.name).join(CONFIG_FILE);
        let text = config_text(spec, &hosts, &h.name)?;
        fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        NodeConfig::load(&file).with_context(|| format!("checking {}", file.display()))?;
    }
    Ok(hosts)
}

/// Removes what a failed `init` wrote into `dir` (and `dir` itself if it did not exist before).
fn undo(dir: &Path, existed: bool) {
    if !existed {
        let _ = fs::remove_dir_all(dir);
        return;
    }
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let _ = if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
    }
}

fn config_text(spec: &Spec, hosts: &[raw::Host], me: &str) -> Result<String> {
    let cfg = raw::Config {
        cluster: raw::Cluster {
            name: "local".into(),
            partitions: Some(spec.partitions),
            replicas: Some(spec.replicas),
            fanout: None,
            real_time_safety: Some(true),
            failover: None,
            min_copies: None,
            catch_up: Some(spec.catch_up),
            replace_after: None,
            copy_bytes_per_s: None,
            strategy: Some(spec.strategy.to_string()),
            hop: None,
            hosts: hosts.to_vec(),
        },
        node: raw::Node {
            host: me.into(),
            data_dir: "data".into(),
            secret_file: "../secret".into(),
            password_file: spec.password.then(|| "../password".into()),
            fsync: Some(spec.fsync.clone()),
            // Written only when off, so a default config does not spell out the default.
            wal_preallocate: (!spec.wal_preallocate).then_some(false),
            checkpoint_every: Some(spec.checkpoint_every.clone()),
            client_timeout: None,
            idle_timeout: None,
            auth_timeout: None,
            snapshot_dir: Some("../snapshots".into()),
            admin_token_file: Some("../admin-token".into()),
            insecure: (!spec.tls).then_some(true),
            breaks: None,
        },
        limits: raw::Limits { maxmemory_bytes: spec.maxmemory_bytes, ..Default::default() },
        snapshots: Default::default(),
        tls: spec.tls.then(|| raw::Tls {
            cert_file: super::certs::CERT_FILE.into(),
            key_file: super::certs::KEY_FILE.into(),
            ca_file: format!("../{}", super::certs::CA_FILE),
        }),
    };
    let header = format!("# Waymark host `{me}` of a local cluster written by `waymark cluster init`.\n\n");
    Ok(header + &toml::to_string(&cfg).context("rendering the config")?)
}

/// 32 random bytes, hex, in a new file readable by its owner only from its creation: a file
/// written first and restricted after is open to anyone in between, and whoever opened it then
/// can read it after. A file that exists already is refused, never overwritten.
fn write_secret(file: &Path) -> Result<()> {
    let bytes: [u8; 32] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    write_new_file(file, (hex + "\n").as_bytes(), 0o600)
}

/// Writes `bytes` into a new file with `mode` from its creation (a private key's 0600 is never
/// looser for a moment); a file that exists already is refused, never overwritten.
pub fn write_new_file(file: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(file)
        .with_context(|| format!("creating {}", file.display()))?;
    f.write_all(bytes).with_context(|| format!("writing {}", file.display()))?;
    Ok(())
}

/// Where `cluster init` looks for ports when the kernel's ephemeral range cannot be read.
const EPHEMERAL_LOW_DEFAULT: u16 = 32_768;
/// The lowest port `cluster init` gives out: above the registered ports most services use.
const PICKED_PORT_MIN: u16 = 10_000;
/// Random candidates tried before `pick_ports` gives up (each one costs a bind).
const PORT_CANDIDATES_MAX: usize = 10_000;

/// `n` distinct ports free now, drawn at random below the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`). A port from that range can be taken at any moment by any
/// program's outgoing connection, and `bind(0)` hands the same ones to everybody; below it, only
/// a program that chose the very same port could, so clusters and tests started at once on one
/// machine rarely meet, and `cluster start` moves a cluster that does (`EXIT_PORT_TAKEN`).
/// All listeners are held until every port is chosen, so none repeats.
pub fn pick_ports(n: usize) -> Result<Vec<u16>> {
    let ephemeral_low = ephemeral_range_low().unwrap_or(EPHEMERAL_LOW_DEFAULT);
    if ephemeral_low <= PICKED_PORT_MIN + 1_000 {
        // Almost every port is ephemeral here: let the kernel choose, as before.
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0"))
            .collect::<std::io::Result<_>>()
            .context("finding free ports")?;
        return listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect();
    }
    let mut held: Vec<TcpListener> = vec![];
    for _ in 0..PORT_CANDIDATES_MAX {
        if held.len() == n {
            break;
        }
        let port = rand::Rng::gen_range(&mut rand::thread_rng(), PICKED_PORT_MIN..ephemeral_low);
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            held.push(listener);
        }
    }
    if held.len() < n {
        bail!("found only {} free ports of {n} in {PICKED_PORT_MIN}..{ephemeral_low}", held.len());
    }
    held.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// The first port of the kernel's ephemeral range, if it can be read.
fn ephemeral_range_low() -> Option<u16> {
    let text = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Gives every host of the cluster in `dir` new ports and rewrites its config. Only for a cluster
/// none of whose hosts runs, and whose hosts all listen on 127.0.0.1 (the clusters `init` writes):
/// every host's config names every host's ports, and a running host would keep the old ones.
fn move_to_new_ports(dir: &Path) -> Result<()> {
    let ports = pick_ports(3 * hosts_of(dir)?.len())?;
    readdress(dir, |i, h| {
        for addr in [&h.peer, &h.redis, &h.admin] {
            if !addr.starts_with("127.0.0.1:") {
                bail!("host {} listens on {addr}, not 127.0.0.1: choose its ports by hand", h.name);
            }
        }
        h.peer = format!("127.0.0.1:{}", ports[3 * i]);
        h.redis = format!("127.0.0.1:{}", ports[3 * i + 1]);
        h.admin = format!("127.0.0.1:{}", ports[3 * i + 2]);
        Ok(())
    })
}

/// Turns the deliberate protocol bugs `breaks` on in every host's config in `dir` (`node.breaks`,
/// checked by loading each config).
pub fn set_breaks(dir: &Path, breaks: &[String]) -> Result<()> {
    for (host_dir, _) in &hosts_of(dir)? {
        let file = host_dir.join(CONFIG_FILE);
        let text = fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let mut cfg: raw::Config = toml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        cfg.node.breaks = Some(breaks.to_vec());
        fs::write(&file, toml::to_string(&cfg).context("rendering the config")?)?;
        NodeConfig::load(&file).with_context(|| format!("checking {}", file.display()))?;
    }
    Ok(())
}

/// Rewrites every host's config in `dir` with `set` applied to each host entry (the `i`th in the
/// config's order), keeping the header, and checks each result. For a cluster none of whose hosts
/// runs: every config names every host's addresses.
pub fn readdress(dir: &Path, mut set: impl FnMut(usize, &mut raw::Host) -> Result<()>) -> Result<()> {
    for (host_dir, _) in &hosts_of(dir)? {
        let file = host_dir.join(CONFIG_FILE);
        let text = fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let mut cfg: raw::Config = toml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
        for (i, h) in cfg.cluster.hosts.iter_mut().enumerate() {
            set(i, h).with_context(|| file.display().to_string())?;
        }
        let header: String =
            text.lines().take_while(|l| l.starts_with('#') || l.is_empty()).map(|l| l.to_owned() + "\n").collect();
        let body = toml::to_string(&cfg).context("rendering the config")?;
        fs::write(&file, header + &body).with_context(|| format!("writing {}", file.display()))?;
        NodeConfig::load(&file).with_context(|| format!("checking {}", file.display()))?;
    }
    Ok(())
}

/// The hosts of a cluster directory, with their configs, in name order.
pub fn hosts_of(dir: &Path) -> Result<Vec<(PathBuf, NodeConfig)>> {
    let mut out = vec![];
    let entries = fs::read_dir(dir).with_context(|| format!("{} is not a cluster directory", dir.display()))?;
    for entry in entries {
        let host_dir = entry?.path();
        let file = host_dir.join(CONFIG_FILE);
        if file.is_file() {
            out.push((host_dir, NodeConfig::load(&file)?));
        }
    }
    if out.is_empty() {
        bail!(
            "{} holds no host (no */{CONFIG_FILE}): run `waymark cluster init --dir {}` first",
            dir.display(),
            dir.display()
        );
    }
    out.sort_by(|a, b| a.1.host.cmp(&b.1.host));
    Ok(out)
}

/// How many times `start` writes a cluster again on new ports when one of its ports was taken.
const START_ATTEMPTS_MAX: u32 = 5;

pub fn start(dir: &Path) -> Result<()> {
    let dir = dir.canonicalize().with_context(|| format!("{} does not exist", dir.display()))?;
    for attempt in 1..=START_ATTEMPTS_MAX {
        match start_once(&dir) {
            Err(e) if attempt < START_ATTEMPTS_MAX => match e.downcast_ref::<PortTaken>() {
                // A port can only be changed while no host runs: each host's config names them all.
                Some(taken) if hosts_of(&dir)?.iter().all(|(host_dir, _)| running_pid(host_dir).is_none()) => {
                    say!(
                        "  {taken}; moving the cluster to new ports (attempt {} of {START_ATTEMPTS_MAX})",
                        attempt + 1
                    );
                    move_to_new_ports(&dir)?;
                }
                _ => return Err(e),
            },
            result => return result,
        }
    }
    unreachable!("the last attempt returns")
}

/// A host exited because another program holds one of its ports (`EXIT_PORT_TAKEN`).
#[derive(Debug, thiserror::Error)]
#[error("{host} could not listen: {line}")]
pub struct PortTaken {
    pub host: String,
    /// The node's own words, from its log.
    pub line: String,
}

/// Starts every host of `dir` that does not run, and waits until each serves.
fn start_once(dir: &Path) -> Result<()> {
    let hosts = hosts_of(dir)?;
    let exe = std::env::current_exe().context("locating the waymark binary")?;
    // The nodes this call starts, by host: their handles tell at once (and for sure) if one exits.
    let mut started: Vec<Option<Child>> = vec![];
    for (host_dir, cfg) in &hosts {
        if let Some(pid) = running_pid(host_dir) {
            say!("  {:<8} already running (pid {pid})", cfg.host);
            started.push(None);
            continue;
        }
        match spawn_node(&exe, host_dir) {
            Ok(child) => started.push(Some(child)),
            Err(e) => {
                kill_all(&mut started);
                return Err(e);
            }
        }
    }
    let deadline = Instant::now() + START_TIMEOUT;
    let mut starting: Vec<Starting> = hosts
        .iter()
        .zip(&mut started)
        .map(|((host_dir, cfg), child)| Starting { host_dir, cfg, child: child.as_mut() })
        .collect();
    if let Err(e) = wait_all_serving(&mut starting, deadline) {
        drop(starting);
        kill_all(&mut started);
        for (host_dir, _) in &hosts {
            if running_pid(host_dir).is_none() {
                let _ = fs::remove_file(host_dir.join(PID_FILE));
            }
        }
        return Err(e);
    }
    say!("cluster in {} serves:", dir.display());
    for (host_dir, cfg) in &hosts {
        let h = cfg.this_host();
        let pid = running_pid(host_dir).unwrap_or_default();
        let scheme = if cfg.tls.is_some() { "https" } else { "http" };
        say!("  {:<8} admin {scheme}://{:<21} pid {pid}", cfg.host, h.admin);
        say!("           {}", redis_cli_line(cfg));
    }
    say!("logs: {}/<host>/{LOG_FILE}; stop with: waymark cluster stop --dir {}", dir.display(), dir.display());
    Ok(())
}

/// The `redis-cli` command line that connects to the host: with TLS and the cluster's CA, and the
/// password read from its file (so the line shows none), when the host has them.
pub fn redis_cli_line(cfg: &NodeConfig) -> String {
    let h = cfg.this_host();
    let mut line = format!("redis-cli -h {} -p {}", h.redis.ip(), h.redis.port());
    if let Some(tls) = &cfg.tls {
        line += &format!(" --tls --cacert {}", shell_word(&absolute(&tls.ca)));
    }
    if let Some(file) = &cfg.password_file {
        line += &format!(" --no-auth-warning -a \"$(cat {})\"", shell_word(&absolute(file)));
    }
    line
}

fn absolute(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// `path` quoted for a POSIX shell.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+:@".contains(&b)) {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// SIGKILLs and reaps the nodes this `start` spawned.
fn kill_all(started: &mut [Option<Child>]) {
    for child in started.iter_mut().flatten() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

pub fn spawn_node(exe: &Path, host_dir: &Path) -> Result<Child> {
    let log = fs::OpenOptions::new().create(true).append(true).open(host_dir.join(LOG_FILE))?;
    let child = Command::new(exe)
        .arg("node")
        .arg("--config")
        .arg(host_dir.join(CONFIG_FILE))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0) // not stopped by the terminal's Ctrl-C: `cluster stop` stops it
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    fs::write(host_dir.join(PID_FILE), format!("{}\n", child.id()))?;
    Ok(child)
}

/// A host `start` waits for: `child` is its node if this `start` spawned it.
pub struct Starting<'a> {
    pub host_dir: &'a Path,
    pub cfg: &'a NodeConfig,
    pub child: Option<&'a mut Child>,
}

impl Starting<'_> {
    /// Fails if the node is gone: a `PortTaken` if it exited with `EXIT_PORT_TAKEN`. Else its pid.
    /// The child's handle, not `running_pid`, says whether a spawned node exited: just after a
    /// spawn, `/proc/<pid>/cmdline` can still be empty and a live node would look gone.
    fn running(&mut self) -> Result<u32> {
        let Some(child) = self.child.as_mut() else {
            return running_pid(self.host_dir).with_context(|| {
                format!("{} stopped while starting; its log:\n{}", self.host_dir.display(), log_tail(self.host_dir))
            });
        };
        let Some(status) = child.try_wait()? else { return Ok(child.id()) };
        if status.code() == Some(EXIT_PORT_TAKEN) {
            let log = fs::read_to_string(self.host_dir.join(LOG_FILE)).unwrap_or_default();
            let line = log.lines().rev().find(|l| l.contains("cannot listen on")).unwrap_or("a port is taken");
            return Err(PortTaken { host: self.cfg.host.clone(), line: line.trim().to_string() }.into());
        }
        bail!("{} exited while starting ({status}); its log:\n{}", self.host_dir.display(), log_tail(self.host_dir))
    }
}

/// Waits until the host answers a read through the cluster (its vnodes booted, its peers linked).
pub fn wait_serving(host_dir: &Path, cfg: &NodeConfig, child: Option<&mut Child>, deadline: Instant) -> Result<()> {
    wait_all_serving(&mut [Starting { host_dir, cfg, child }], deadline)
}

/// Waits until every host answers a read through the cluster, failing as soon as one is gone.
///
/// A host is probed only once its `LISTENING_FILE` names its own pid: until then its Redis port
/// may belong to another program, whose answer would say nothing of this host.
pub fn wait_all_serving(hosts: &mut [Starting], deadline: Instant) -> Result<()> {
    let keys = match hosts.first() {
        Some(h) => probe_keys(h.cfg)?,
        None => return Ok(()),
    };
    let mut serving = vec![false; hosts.len()];
    let mut last = String::from("no answer yet");
    while Instant::now() < deadline {
        for (host, served) in hosts.iter_mut().zip(&mut serving) {
            let pid = host.running()?;
            if !*served && listening_pid(host.cfg) == Some(pid) {
                match probe(host.cfg, &keys) {
                    Ok(()) => *served = true,
                    Err(e) => last = format!("{}: {e}", host.cfg.host),
                }
            }
        }
        if serving.iter().all(|s| *s) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let waiting: Vec<&Starting> = hosts.iter().zip(&serving).filter(|(_, s)| !**s).map(|(h, _)| h).collect();
    let logs: String =
        waiting.iter().map(|h| format!("--- {} ---\n{}\n", h.host_dir.display(), log_tail(h.host_dir))).collect();
    let names: Vec<&str> = waiting.iter().map(|h| h.cfg.host.as_str()).collect();
    bail!("{} did not serve within {START_TIMEOUT:?} ({last}); logs:\n{logs}", names.join(", "))
}

/// The pid the node wrote into its data directory once it held its ports.
fn listening_pid(cfg: &NodeConfig) -> Option<u32> {
    let text = fs::read_to_string(cfg.data_dir.join(LISTENING_FILE)).ok()?;
    text.lines().next()?.strip_prefix("pid ")?.trim().parse().ok()
}

/// For each store vnode that is a primary, a key of its partitions: reading them all through a host
/// shows that the host reaches every primary.
fn probe_keys(cfg: &NodeConfig) -> Result<Vec<String>> {
    let topology = Topology::new(&cfg.cluster)?;
    let placement = &topology.placement;
    let primaries: BTreeSet<&VnodeId> =
        (0..placement.partitions()).map(|p| placement.primary(PartitionId(p))).collect();
    let key_of = |primary: &VnodeId| {
        (0..PROBE_KEYS_TRIED_MAX)
            .map(|i| format!("waymark:probe:{i}"))
            .find(|k| placement.primary_of(&k.as_bytes().to_vec()) == primary)
            .with_context(|| format!("no probe key has its primary on {primary}"))
    };
    primaries.into_iter().map(key_of).collect()
}

/// `GET` of each key answers a value (or nil), not an error — over TLS with the cluster's CA and
/// after `AUTH`, if the host asks for them.
fn probe(cfg: &NodeConfig, keys: &[String]) -> Result<()> {
    let redis = cfg.this_host().redis;
    let s = TcpStream::connect_timeout(&redis, Duration::from_millis(500))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    s.set_write_timeout(Some(Duration::from_secs(3)))?;
    match &cfg.tls {
        None => probe_on(&mut BufReader::new(s), cfg, keys),
        Some(files) => {
            let tls = waymark_server::tls::client_config(&files.ca)?;
            let conn = rustls::ClientConnection::new(tls, redis.ip().into())?;
            probe_on(&mut BufReader::new(rustls::StreamOwned::new(conn, s)), cfg, keys)
        }
    }
}

fn probe_on<S: Read + Write>(stream: &mut BufReader<S>, cfg: &NodeConfig, keys: &[String]) -> Result<()> {
    if let Some(password) = &cfg.password {
        request(stream, &[b"AUTH", password])?;
    }
    for key in keys {
        request(stream, &[b"GET", key.as_bytes()])?;
    }
    Ok(())
}

/// Sends one command and reads its reply, which must be a status, nil or a bulk string.
fn request<S: Read + Write>(reader: &mut BufReader<S>, args: &[&[u8]]) -> Result<()> {
    let mut req = vec![];
    waymark_resp::encode_command(args, &mut req);
    reader.get_mut().write_all(&req)?;
    reader.get_mut().flush()?;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if line.starts_with('-') || line.is_empty() {
        bail!("{}", line.trim());
    }
    if let Some(len) = line.trim_end().strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
        let mut payload = vec![0; len + 2];
        reader.read_exact(&mut payload)?;
    }
    Ok(())
}

fn log_tail(host_dir: &Path) -> String {
    let text = fs::read_to_string(host_dir.join(LOG_FILE)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// The pid recorded for a host, if that process still runs and is this host's `waymark node`.
pub fn running_pid(host_dir: &Path) -> Option<u32> {
    let pid: u32 = fs::read_to_string(host_dir.join(PID_FILE)).ok()?.trim().parse().ok()?;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let config = host_dir.join(CONFIG_FILE);
    let ours = String::from_utf8_lossy(&cmdline).contains(&*config.to_string_lossy());
    let zombie = fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "));
    (ours && !zombie).then_some(pid)
}

pub fn stop(dir: &Path) -> Result<()> {
    let dir = dir.canonicalize().with_context(|| format!("{} does not exist", dir.display()))?;
    for (host_dir, cfg) in hosts_of(&dir)? {
        match running_pid(&host_dir) {
            Some(pid) => {
                let how = terminate(pid, &host_dir);
                say!("  {:<8} stopped (pid {pid}, {how})", cfg.host);
            }
            None => say!("  {:<8} was not running", cfg.host),
        }
        let _ = fs::remove_file(host_dir.join(PID_FILE));
    }
    Ok(())
}

/// SIGTERM, wait; SIGKILL if it does not stop in time. Says which ended it.
fn terminate(pid: u32, host_dir: &Path) -> &'static str {
    signal(pid, libc::SIGTERM);
    let deadline = Instant::now() + STOP_TIMEOUT;
    while Instant::now() < deadline {
        if running_pid(host_dir) != Some(pid) {
            return "SIGTERM";
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    kill_and_wait(pid, host_dir);
    "SIGKILL after 20 s"
}

pub fn kill_and_wait(pid: u32, host_dir: &Path) {
    signal(pid, libc::SIGKILL);
    let deadline = Instant::now() + STOP_TIMEOUT;
    while running_pid(host_dir) == Some(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) with a pid we recorded and checked is ours; it has no memory effects.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A file someone else created first may be open in their hands: writing the secret into it
    /// and then changing its mode would hand them the secret.
    #[test]
    fn a_secret_file_that_already_exists_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        fs::write(&file, "").unwrap();
        let mut theirs = fs::File::open(&file).unwrap();
        assert!(write_secret(&file).is_err(), "write_secret wrote into a file that existed");
        let mut read = String::new();
        theirs.read_to_string(&mut read).unwrap();
        assert_eq!(read, "", "the file's earlier opener can read the secret");
    }

    #[test]
    fn a_secret_file_is_readable_by_its_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        write_secret(&file).unwrap();
        assert_eq!(fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_to_string(&file).unwrap().trim().len(), 64, "32 bytes in hex");
    }
}
