//! A host's configuration: one TOML file per host (DESIGN §7). It describes the whole cluster —
//! every host and its addresses, partitions, replicas, the tree's fan-out — so that every host
//! derives the same tree, placement and genesis metadata from it (`topology.rs`), plus this host's
//! own settings: its name, data directory, fsync policy, secret and password files, limits.
//!
//! Every bad field gets an error naming the field and the file. Secrets never appear on a command
//! line or in the file itself: the file names files that hold them.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use waymark_core::{CutStrategy, UnknownStrategy};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {file}: {source}")]
    Read { file: PathBuf, source: std::io::Error },
    #[error("config file {file} is not valid: {source}")]
    Syntax { file: PathBuf, source: toml::de::Error },
    #[error("config file {file}: field `{field}`: {problem}")]
    Field { file: PathBuf, field: String, problem: String },
    #[error("config file {file}: field `{field}`: {source}")]
    Strategy { file: PathBuf, field: String, source: UnknownStrategy },
    #[error("config file {file}: field `{field}`: `{text}` is not a duration like \"30s\" or \"5ms\": {source}")]
    Duration { file: PathBuf, field: String, text: String, source: humantime::DurationError },
    #[error("config file {file}: field `{field}`: cannot read {path}: {source}")]
    ReadFile { file: PathBuf, field: String, path: PathBuf, source: std::io::Error },
    #[error(
        "config file {file}: field `{field}`: {path} is open to group or others (mode {mode:03o}); \
         a secret must be readable by its owner only: run `chmod 600 {path}`"
    )]
    OpenSecret { file: PathBuf, field: String, path: PathBuf, mode: u32 },
    #[error(
        "config file {file}: host `{host}` would listen on {port}, which is not a loopback \
         address, without {missing}: anyone who reaches it could {risk}. Give the host `[tls]` and \
         `node.password_file` (`waymark cluster init` writes both), or set `node.insecure = true` \
         to serve in plaintext on purpose"
    )]
    Protected {
        file: PathBuf,
        host: String,
        /// The address and what listens there, e.g. `0.0.0.0:7000 (redis clients)`.
        port: String,
        missing: &'static str,
        risk: &'static str,
    },
}

/// The files of a host's TLS (`[tls]`), resolved against the config's directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// This host's certificate chain, PEM.
    pub cert: PathBuf,
    /// Its private key, PEM: refused if open to group or others, as the secret files are.
    pub key: PathBuf,
    /// The cluster's CA certificate, PEM: the only root every port and every dial trusts.
    pub ca: PathBuf,
}

/// When the WAL makes appended records durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// One `fdatasync` per group commit before anything that depends on the records leaves.
    Always,
    /// Records are handed to the OS only: a machine crash can lose acknowledged commits. For
    /// tests and benchmarks; never the default.
    Never,
}

#[derive(Clone, Debug)]
pub struct HostConfig {
    pub name: String,
    /// Where peers reach this host.
    pub peer: SocketAddr,
    /// Where Redis clients connect.
    pub redis: SocketAddr,
    /// The admin HTTP API.
    pub admin: SocketAddr,
    /// How many store vnodes run on the host.
    pub stores: u32,
}

/// The most partitions a cluster has (`cluster.partitions`); a snapshot's manifest claiming more
/// is not one a cluster wrote.
pub const PARTITIONS_MAX: u32 = 65_536;

#[derive(Clone, Debug)]
pub struct ClusterConfig {
    pub name: String,
    pub partitions: u32,
    pub replicas: usize,
    pub fanout: usize,
    pub real_time_safety: bool,
    /// Whether the tree's root promotes replicas when a host stops answering (`cluster.failover`,
    /// on by default; the core's `alter::promote`).
    pub failover: bool,
    /// Writes to a partition with fewer replicas in its chain are refused with `NOREPLICAS`
    /// (`cluster.min_copies`, default 1: a partition serves while one copy lives).
    pub min_copies: usize,
    /// Whether hosts that come back catch up on their partitions and partitions short of
    /// `replicas` copies get new ones (`cluster.catch_up`; off unless the config says so, which
    /// `cluster init` writes; the core's `catch_up`).
    pub catch_up: bool,
    /// How long a partition stays short of copies before one is made on a host that holds others
    /// (`cluster.replace_after`, default 60s).
    pub replace_after: Duration,
    /// How fast a store vnode catching up copies partitions, in bytes of keys and values per
    /// second (`cluster.copy_bytes_per_s`, default 64 MiB/s).
    pub copy_bytes_per_s: u64,
    /// How a cut snapshots the cluster (`cluster.strategy`, the same on every host).
    pub strategy: CutStrategy,
    /// The tree's time unit: heartbeats every 20 hops, branch deadlines of a few hops per level.
    pub hop: Duration,
    pub hosts: Vec<HostConfig>,
}

#[derive(Clone, Debug)]
pub struct Limits {
    pub clients_max: usize,
    /// Largest value a client may write (it must fit a WAL record and a peer frame).
    pub value_max_bytes: usize,
    /// Largest bulk string the RESP parser accepts (Redis's `proto-max-bulk-len`).
    pub bulk_max_bytes: usize,
    /// Largest frame on a peer link; checked before the frame is read.
    pub frame_max_bytes: usize,
    /// Frames waiting to be written to one peer; beyond it envelopes are dropped like a broken
    /// connection would (`net/outgoing.rs`).
    pub peer_queue_max: usize,
    /// Commands queued for one vnode.
    pub vnode_queue_max: usize,
    /// Keys in one transaction, a collection's elements included (an `HSET` of a thousand fields
    /// writes a thousand and one keys).
    pub txn_keys_max: usize,
    /// Largest reply to one command (an `EXEC`'s replies together): a larger one is refused and
    /// the client disconnected, as Redis's `client-output-buffer-limit` does, so that one client
    /// repeating a key in an `MGET` cannot make the node copy a value a million times.
    pub reply_max_bytes: usize,
    /// Commands queued between `MULTI` and `EXEC`; past it the transaction is refused at `EXEC`.
    pub multi_queue_max: usize,
    /// Redis's `maxmemory` with `noeviction`: once this host's data (`memory.rs`) reaches it, its
    /// primaries refuse writes that store a value (`-OOM …`); reads and deletes go on. 0: no
    /// limit. Default: half the machine's memory, shared by the cluster's hosts on this machine.
    pub maxmemory_bytes: u64,
}

#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The file this came from; relative paths in it are relative to its directory.
    pub file: PathBuf,
    pub cluster: ClusterConfig,
    /// This host's name: one of `cluster.hosts`.
    pub host: String,
    pub data_dir: PathBuf,
    pub fsync: FsyncPolicy,
    /// `waymark_wal::Options::preallocate` for every vnode's log.
    pub wal_preallocate: bool,
    pub secret: Vec<u8>,
    pub password: Option<Vec<u8>>,
    /// The file `password` was read from (`cluster start` prints a command line that reads it).
    pub password_file: Option<PathBuf>,
    pub checkpoint_every: Duration,
    /// Where snapshots are written (`waymark snapshot …`); shared by the hosts of one machine.
    pub snapshot_dir: PathBuf,
    /// The token every mutating admin call must carry (`Authorization: Bearer …`); without one,
    /// mutating calls are refused.
    pub admin_token: Option<Vec<u8>>,
    /// How long a client waits for a transaction's outcome before it is told it is unknown.
    pub client_timeout: Duration,
    /// A client connection that sends nothing for this long is closed (Redis's `timeout`); zero
    /// keeps idle connections for ever.
    pub idle_timeout: Duration,
    /// A connection that has not authenticated this long after it opened is closed, so that
    /// anonymous connections cannot hold the `limits.clients_max` slots (with a password only).
    pub auth_timeout: Duration,
    pub limits: Limits,
    pub schedule: Option<Schedule>,
    /// `[tls]`: TLS on the Redis, admin and peer ports (mutual TLS on the peer port); `None`
    /// serves all three in plaintext.
    pub tls: Option<TlsFiles>,
    /// `node.insecure`: the host may listen on a non-loopback address without TLS or a password
    /// (protected mode is off). `cluster init --insecure` sets it.
    pub insecure: bool,
    /// `node.breaks`: deliberate protocol bugs, for tests only.
    pub breaks: waymark_core::Breaks,
}

/// Snapshots taken by the node itself: an increment every `every`, a new full snapshot (a new
/// chain, `auto-<unix seconds>`) every `full_every`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub every: Duration,
    pub full_every: Duration,
}

impl NodeConfig {
    pub fn this_host(&self) -> &HostConfig {
        self.cluster.hosts.iter().find(|h| h.name == self.host).expect("validated: the host is listed")
    }

    /// Reads and validates a config file.
    pub fn load(file: &Path) -> Result<NodeConfig, ConfigError> {
        let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Read { file: file.into(), source })?;
        Self::parse(file, &text)
    }

    /// Validates config text as if read from `file` (which names the directory for relative paths).
    pub fn parse(file: &Path, text: &str) -> Result<NodeConfig, ConfigError> {
        let raw: raw::Config =
            toml::from_str(text).map_err(|source| ConfigError::Syntax { file: file.into(), source })?;
        Checker { file }.config(raw)
    }
}

/// The file as written: every field optional where a default exists, unknown fields refused.
/// `cluster init` builds these and writes them out.
pub mod raw {
    use serde::{Deserialize, Serialize};

    #[derive(Deserialize, Serialize, Clone, Debug)]
    #[serde(deny_unknown_fields)]
    pub struct Config {
        pub cluster: Cluster,
        pub node: Node,
        #[serde(default)]
        pub limits: Limits,
        #[serde(default)]
        pub snapshots: Snapshots,
        /// Absent: plaintext on every port.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tls: Option<Tls>,
    }

    /// `[tls]`: paths relative to the config's directory.
    #[derive(Deserialize, Serialize, Clone, Debug)]
    #[serde(deny_unknown_fields)]
    pub struct Tls {
        pub cert_file: String,
        pub key_file: String,
        pub ca_file: String,
    }

    /// `[snapshots]`: a schedule, run by the host of the tree's root.
    #[derive(Deserialize, Serialize, Clone, Debug, Default)]
    #[serde(deny_unknown_fields)]
    pub struct Snapshots {
        pub every: Option<String>,
        pub full_every: Option<String>,
    }

    #[derive(Deserialize, Serialize, Clone, Debug)]
    #[serde(deny_unknown_fields)]
    pub struct Cluster {
        pub name: String,
        pub partitions: Option<u32>,
        pub replicas: Option<usize>,
        pub fanout: Option<usize>,
        pub real_time_safety: Option<bool>,
        /// Promote replicas of a host that stopped answering (default true).
        pub failover: Option<bool>,
        /// Refuse writes to a partition left with fewer copies than this (default 1).
        pub min_copies: Option<usize>,
        /// Catch returning hosts up and restore `replicas` copies (default false; `cluster init`
        /// writes true).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub catch_up: Option<bool>,
        /// How long a partition stays short of copies before it gets one on a busy host (60s).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub replace_after: Option<String>,
        /// How fast a host catching up copies, bytes per second (64 MiB/s).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub copy_bytes_per_s: Option<u64>,
        /// `consistent` (the default) or `blocking`.
        pub strategy: Option<String>,
        pub hop: Option<String>,
        pub hosts: Vec<Host>,
    }

    #[derive(Deserialize, Serialize, Clone, Debug)]
    #[serde(deny_unknown_fields)]
    pub struct Host {
        pub name: String,
        pub peer: String,
        pub redis: String,
        pub admin: String,
        pub stores: Option<u32>,
    }

    #[derive(Deserialize, Serialize, Clone, Debug)]
    #[serde(deny_unknown_fields)]
    pub struct Node {
        pub host: String,
        pub data_dir: String,
        pub secret_file: String,
        pub password_file: Option<String>,
        pub fsync: Option<String>,
        /// Preallocate each WAL segment (default true); off only to measure what it saves.
        pub wal_preallocate: Option<bool>,
        pub checkpoint_every: Option<String>,
        pub client_timeout: Option<String>,
        pub idle_timeout: Option<String>,
        pub auth_timeout: Option<String>,
        pub snapshot_dir: Option<String>,
        pub admin_token_file: Option<String>,
        /// Serve without TLS or a password on a non-loopback address (protected mode off).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub insecure: Option<bool>,
        /// Deliberate protocol bugs (`waymark_core::Breaks::NAMES`), to see the tests catch them
        /// (`waymark nemesis --break`). Never in a cluster that holds data anyone needs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub breaks: Option<Vec<String>>,
    }

    #[derive(Deserialize, Serialize, Clone, Debug, Default)]
    #[serde(deny_unknown_fields)]
    pub struct Limits {
        pub clients_max: Option<usize>,
        pub value_max_bytes: Option<usize>,
        pub bulk_max_bytes: Option<usize>,
        pub frame_max_bytes: Option<usize>,
        pub peer_queue_max: Option<usize>,
        pub vnode_queue_max: Option<usize>,
        pub txn_keys_max: Option<usize>,
        pub reply_max_bytes: Option<usize>,
        pub multi_queue_max: Option<usize>,
        pub maxmemory_bytes: Option<u64>,
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            clients_max: 10_000,
            value_max_bytes: 4 << 20,
            // As large as a value, no larger: Redis's 512 MiB let a client make the node read
            // 512 MiB before the 4 MiB value limit refused it.
            bulk_max_bytes: 4 << 20,
            frame_max_bytes: 64 << 20,
            peer_queue_max: 65_536,
            vnode_queue_max: 65_536,
            txn_keys_max: 65_536,
            reply_max_bytes: 256 << 20,
            multi_queue_max: 100_000,
            maxmemory_bytes: 0,
        }
    }
}

struct Checker<'a> {
    file: &'a Path,
}

impl Checker<'_> {
    fn bad(&self, field: impl Into<String>, problem: impl Into<String>) -> ConfigError {
        ConfigError::Field { file: self.file.into(), field: field.into(), problem: problem.into() }
    }

    fn config(&self, raw: raw::Config) -> Result<NodeConfig, ConfigError> {
        let cluster = self.cluster(raw.cluster)?;
        let maxmemory_set = raw.limits.maxmemory_bytes.is_some();
        let mut limits = self.limits(raw.limits)?;
        let schedule = self.schedule(&raw.snapshots)?;
        let n = raw.node;
        if !cluster.hosts.iter().any(|h| h.name == n.host) {
            let known: Vec<&str> = cluster.hosts.iter().map(|h| h.name.as_str()).collect();
            return Err(
                self.bad("node.host", format!("`{}` is not one of cluster.hosts ({})", n.host, known.join(", ")))
            );
        }
        if !maxmemory_set {
            let here = cluster.hosts.iter().find(|h| h.name == n.host).map(|h| h.redis.ip());
            let hosts_here = cluster.hosts.iter().filter(|h| Some(h.redis.ip()) == here).count();
            limits.maxmemory_bytes = crate::memory::default_limit_bytes(hosts_here).unwrap_or(0);
        }
        let secret = self.secret(&n.secret_file)?;
        let password = n.password_file.as_deref().map(|p| self.password(p)).transpose()?;
        let admin_token = n.admin_token_file.as_deref().map(|p| self.admin_token(p)).transpose()?;
        let tls = raw.tls.map(|t| self.tls(t)).transpose()?;
        let insecure = n.insecure.unwrap_or(false);
        if !insecure {
            self.protected(&cluster, &n.host, tls.is_some(), password.is_some())?;
        }
        let fsync = match n.fsync.as_deref().unwrap_or("always") {
            "always" => FsyncPolicy::Always,
            "never" => FsyncPolicy::Never,
            other => return Err(self.bad("node.fsync", format!("`{other}` is neither \"always\" nor \"never\""))),
        };
        let mut breaks = waymark_core::Breaks::default();
        for name in n.breaks.iter().flatten() {
            if !breaks.enable(name) {
                return Err(self.bad("node.breaks", format!("`{name}` is no break (see waymark-sim --help)")));
            }
        }
        Ok(NodeConfig {
            breaks,
            file: self.file.into(),
            data_dir: self.relative(&n.data_dir),
            checkpoint_every: self.duration("node.checkpoint_every", n.checkpoint_every.as_deref(), "30s")?,
            client_timeout: self.duration("node.client_timeout", n.client_timeout.as_deref(), "5s")?,
            idle_timeout: self.duration("node.idle_timeout", n.idle_timeout.as_deref(), "1h")?,
            auth_timeout: self.positive_duration("node.auth_timeout", n.auth_timeout.as_deref(), "10s")?,
            snapshot_dir: self.relative(n.snapshot_dir.as_deref().unwrap_or("snapshots")),
            admin_token,
            host: n.host,
            cluster,
            fsync,
            wal_preallocate: n.wal_preallocate.unwrap_or(true),
            secret,
            password,
            password_file: n.password_file.as_deref().map(|p| self.relative(p)),
            limits,
            schedule,
            tls,
            insecure,
        })
    }

    /// Protected mode, as Redis's: a host whose ports are reachable from elsewhere must encrypt
    /// them and ask for a password, unless its config says `node.insecure`.
    fn protected(&self, cluster: &ClusterConfig, me: &str, tls: bool, password: bool) -> Result<(), ConfigError> {
        let Some(host) = cluster.hosts.iter().find(|h| h.name == me) else { return Ok(()) };
        let missing = match (tls, password) {
            (true, true) => return Ok(()),
            (false, false) => "TLS and a password",
            (false, true) => "TLS",
            (true, false) => "a password",
        };
        let ports = [
            (host.redis, "redis clients", "read and write every key"),
            (host.admin, "admin http", "read the cluster's state and, with a sniffed token, snapshot it"),
            (host.peer, "peer links", "read every message between hosts"),
        ];
        // Without a password only the Redis port is open to anyone; without TLS, all three are
        // read on the wire.
        let exposed =
            ports.iter().find(|(addr, what, _)| !addr.ip().is_loopback() && (!tls || *what == "redis clients"));
        match exposed {
            Some(&(addr, what, risk)) => {
                let port = format!("{addr} ({what})");
                Err(ConfigError::Protected { file: self.file.into(), host: me.into(), port, missing, risk })
            }
            None => Ok(()),
        }
    }

    /// `[tls]`: the files must exist, and the key must be its owner's alone.
    fn tls(&self, t: raw::Tls) -> Result<TlsFiles, ConfigError> {
        let exists = |field: &str, path: &str| -> Result<PathBuf, ConfigError> {
            let full = self.relative(path);
            std::fs::metadata(&full).map_err(|source| ConfigError::ReadFile {
                file: self.file.into(),
                field: field.into(),
                path: full.clone(),
                source,
            })?;
            Ok(full)
        };
        let cert = exists("tls.cert_file", &t.cert_file)?;
        let ca = exists("tls.ca_file", &t.ca_file)?;
        let key = self.private_file("tls.key_file", &t.key_file)?;
        Ok(TlsFiles { cert, key, ca })
    }

    fn cluster(&self, c: raw::Cluster) -> Result<ClusterConfig, ConfigError> {
        if !is_name(&c.name) {
            return Err(self.bad("cluster.name", "must be 1-64 letters, digits, '-' or '_'"));
        }
        let hosts = self.hosts(c.hosts)?;
        let partitions = c.partitions.unwrap_or(64);
        if !(1..=PARTITIONS_MAX).contains(&partitions) {
            return Err(self.bad("cluster.partitions", format!("{partitions} is not in 1..={PARTITIONS_MAX}")));
        }
        let replicas = c.replicas.unwrap_or(2.min(hosts.len()));
        if replicas == 0 {
            return Err(self.bad("cluster.replicas", "must be at least 1"));
        }
        if replicas > hosts.len() {
            let problem = format!("{replicas} replicas need as many hosts (there are {})", hosts.len());
            return Err(self.bad("cluster.replicas", problem));
        }
        let fanout = c.fanout.unwrap_or(16);
        if !(2..=64).contains(&fanout) {
            return Err(self.bad("cluster.fanout", format!("{fanout} is not in 2..=64")));
        }
        let hop = self.duration("cluster.hop", c.hop.as_deref(), "5ms")?;
        if hop < Duration::from_millis(1) {
            return Err(self.bad("cluster.hop", "must be at least 1ms"));
        }
        let real_time_safety = c.real_time_safety.unwrap_or(true);
        let failover = c.failover.unwrap_or(true);
        let min_copies = c.min_copies.unwrap_or(1);
        if !(1..=replicas).contains(&min_copies) {
            return Err(self.bad("cluster.min_copies", format!("{min_copies} is not in 1..={replicas} (the replicas)")));
        }
        let strategy = self.strategy(c.strategy.as_deref())?;
        let catch_up = c.catch_up.unwrap_or(false);
        if catch_up && !failover {
            return Err(
                self.bad("cluster.catch_up", "needs cluster.failover (a copy is replaced only through failover)")
            );
        }
        let replace_after = self.duration("cluster.replace_after", c.replace_after.as_deref(), "60s")?;
        let copy_bytes_per_s = c.copy_bytes_per_s.unwrap_or(64 << 20);
        if copy_bytes_per_s < 64 << 10 {
            return Err(self.bad("cluster.copy_bytes_per_s", format!("{copy_bytes_per_s} is below 65536 (64 KiB/s)")));
        }
        Ok(ClusterConfig {
            name: c.name,
            partitions,
            replicas,
            fanout,
            real_time_safety,
            failover,
            min_copies,
            catch_up,
            replace_after,
            copy_bytes_per_s,
            strategy,
            hop,
            hosts,
        })
    }

    /// `consistent` and `blocking` run as the tree's alterations (DESIGN §6); `versions` (seed
    /// 002) runs on the cut coordinator, the cluster's first store vnode, which gathers every
    /// vnode's versions and hands the map back (seed 002's distributed process).
    fn strategy(&self, raw: Option<&str>) -> Result<CutStrategy, ConfigError> {
        raw.unwrap_or("consistent").parse().map_err(|source| ConfigError::Strategy {
            file: self.file.into(),
            field: "cluster.strategy".into(),
            source,
        })
    }

    fn hosts(&self, raw: Vec<raw::Host>) -> Result<Vec<HostConfig>, ConfigError> {
        if raw.is_empty() {
            return Err(self.bad("cluster.hosts", "at least one host is needed"));
        }
        let mut names = BTreeSet::new();
        let mut addrs = BTreeSet::new();
        let mut hosts = vec![];
        for (i, h) in raw.into_iter().enumerate() {
            let field = |f: &str| format!("cluster.hosts[{i}].{f}");
            if !is_name(&h.name) || !names.insert(h.name.clone()) {
                return Err(
                    self.bad(field("name"), format!("`{}` is not a unique name of letters, digits, '-', '_'", h.name))
                );
            }
            let mut addr = |f: &str, text: &str| -> Result<SocketAddr, ConfigError> {
                let a: SocketAddr = text
                    .parse()
                    .map_err(|_| self.bad(field(f), format!("`{text}` is not an address like 127.0.0.1:7000")))?;
                if !addrs.insert(a) {
                    return Err(self.bad(field(f), format!("{a} is used twice")));
                }
                Ok(a)
            };
            let (peer, redis, admin) = (addr("peer", &h.peer)?, addr("redis", &h.redis)?, addr("admin", &h.admin)?);
            let stores = h.stores.unwrap_or(1);
            if !(1..=64).contains(&stores) {
                return Err(self.bad(field("stores"), format!("{stores} is not in 1..=64")));
            }
            hosts.push(HostConfig { name: h.name, peer, redis, admin, stores });
        }
        Ok(hosts)
    }

    fn limits(&self, l: raw::Limits) -> Result<Limits, ConfigError> {
        let d = Limits::default();
        let limits = Limits {
            clients_max: l.clients_max.unwrap_or(d.clients_max),
            value_max_bytes: l.value_max_bytes.unwrap_or(d.value_max_bytes),
            bulk_max_bytes: l.bulk_max_bytes.unwrap_or(d.bulk_max_bytes),
            frame_max_bytes: l.frame_max_bytes.unwrap_or(d.frame_max_bytes),
            peer_queue_max: l.peer_queue_max.unwrap_or(d.peer_queue_max),
            vnode_queue_max: l.vnode_queue_max.unwrap_or(d.vnode_queue_max),
            txn_keys_max: l.txn_keys_max.unwrap_or(d.txn_keys_max),
            reply_max_bytes: l.reply_max_bytes.unwrap_or(d.reply_max_bytes),
            multi_queue_max: l.multi_queue_max.unwrap_or(d.multi_queue_max),
            maxmemory_bytes: l.maxmemory_bytes.unwrap_or(d.maxmemory_bytes),
        };
        let positive = [
            ("limits.clients_max", limits.clients_max),
            ("limits.value_max_bytes", limits.value_max_bytes),
            ("limits.bulk_max_bytes", limits.bulk_max_bytes),
            ("limits.peer_queue_max", limits.peer_queue_max),
            ("limits.vnode_queue_max", limits.vnode_queue_max),
            ("limits.txn_keys_max", limits.txn_keys_max),
            ("limits.multi_queue_max", limits.multi_queue_max),
        ];
        if let Some((field, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(self.bad(*field, "must be greater than 0"));
        }
        if limits.reply_max_bytes < limits.value_max_bytes.saturating_add(64 << 10) {
            return Err(
                self.bad("limits.reply_max_bytes", "must leave room for one value (limits.value_max_bytes + 64 KiB)")
            );
        }
        // A transaction's prepare carries its values: one value must fit a frame with room to spare.
        if limits.frame_max_bytes < limits.value_max_bytes.saturating_mul(2).max(64 << 10) {
            return Err(
                self.bad("limits.frame_max_bytes", "must be at least twice limits.value_max_bytes (and 64 KiB)")
            );
        }
        Ok(limits)
    }

    fn schedule(&self, s: &raw::Snapshots) -> Result<Option<Schedule>, ConfigError> {
        let Some(every) = s.every.as_deref() else {
            if s.full_every.is_some() {
                return Err(self.bad("snapshots.full_every", "needs snapshots.every (how often to take one)"));
            }
            return Ok(None);
        };
        let every = self.duration("snapshots.every", Some(every), "1s")?;
        let full_every = self.duration("snapshots.full_every", s.full_every.as_deref(), "1h")?;
        if every < Duration::from_millis(50) {
            return Err(self.bad("snapshots.every", "must be at least 50ms"));
        }
        if full_every < every {
            return Err(self.bad("snapshots.full_every", "must be at least snapshots.every"));
        }
        Ok(Some(Schedule { every, full_every }))
    }

    fn duration(&self, field: &str, text: Option<&str>, default: &str) -> Result<Duration, ConfigError> {
        let text = text.unwrap_or(default);
        humantime::parse_duration(text).map_err(|source| ConfigError::Duration {
            file: self.file.into(),
            field: field.into(),
            text: text.into(),
            source,
        })
    }

    fn positive_duration(&self, field: &str, text: Option<&str>, default: &str) -> Result<Duration, ConfigError> {
        let d = self.duration(field, text, default)?;
        if d.is_zero() {
            return Err(self.bad(field, "must be longer than zero"));
        }
        Ok(d)
    }

    fn relative(&self, path: &str) -> PathBuf {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        dir.join(path)
    }

    fn secret(&self, path: &str) -> Result<Vec<u8>, ConfigError> {
        let secret = self.read_trimmed("node.secret_file", path)?;
        if secret.len() < 16 {
            let problem = format!("the secret in {path} is {} bytes; at least 16 are needed", secret.len());
            return Err(self.bad("node.secret_file", problem));
        }
        Ok(secret)
    }

    fn password(&self, path: &str) -> Result<Vec<u8>, ConfigError> {
        let password = self.read_trimmed("node.password_file", path)?;
        if password.is_empty() {
            return Err(self.bad("node.password_file", format!("{path} is empty")));
        }
        Ok(password)
    }

    fn admin_token(&self, path: &str) -> Result<Vec<u8>, ConfigError> {
        let token = self.read_trimmed("node.admin_token_file", path)?;
        if token.len() < 16 {
            let problem = format!("the token in {path} is {} bytes; at least 16 are needed", token.len());
            return Err(self.bad("node.admin_token_file", problem));
        }
        Ok(token)
    }

    /// The full path of a file that must be readable by its owner only (a secret or a private
    /// key); refused if anyone else may read or write it.
    fn private_file(&self, field: &str, path: &str) -> Result<PathBuf, ConfigError> {
        let full = self.relative(path);
        let read_error =
            |source| ConfigError::ReadFile { file: self.file.into(), field: field.into(), path: full.clone(), source };
        let mode = std::fs::metadata(&full).map_err(read_error)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(ConfigError::OpenSecret {
                file: self.file.into(),
                field: field.into(),
                path: full.clone(),
                mode,
            });
        }
        Ok(full)
    }

    /// A secret file's content without the trailing newline editors add; refused if anyone but
    /// its owner may read it (whoever can read the cluster secret can join the cluster).
    fn read_trimmed(&self, field: &str, path: &str) -> Result<Vec<u8>, ConfigError> {
        let full = self.private_file(field, path)?;
        let read_error =
            |source| ConfigError::ReadFile { file: self.file.into(), field: field.into(), path: full.clone(), source };
        let mut bytes = std::fs::read(&full).map_err(read_error)?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        Ok(bytes)
    }
}

/// Names of clusters and hosts: they appear in vnode names (`kind@host`) and file names.
fn is_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
