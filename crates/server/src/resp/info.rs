//! What tools ask at connect time, answered the way they expect: `INFO` (a bulk string —
//! redis-cli crashes on any other type), `CONFIG GET save|appendonly` (redis-benchmark reads the
//! second element), `COMMAND` (an array of arrays), `DBSIZE`.

use super::command::TABLE;
use crate::config::FsyncPolicy;
use crate::host::Shared;
use waymark_resp::glob::Glob;
use waymark_resp::Reply;

/// The Redis version we speak the protocol of (clients check it for features).
pub const REDIS_VERSION: &str = "7.2.0";

fn bulk(s: impl Into<String>) -> Reply {
    Reply::bulk(s.into().into_bytes())
}

/// `CONFIG GET pattern…`: the few settings tools read, with `*` globs.
/// `CONFIG SET name value …`: Waymark's settings live in the node's config file, so a setting
/// may only be "set" to the value it has (tools and Redis's own test suite restore settings that
/// way); anything else is refused, saying where the setting lives.
pub fn config_set(shared: &Shared, pairs: &[(Vec<u8>, Vec<u8>)]) -> Reply {
    let current = settings(shared);
    for (name, value) in pairs {
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let same = current.iter().any(|(n, v)| *n == name && v.as_bytes() == value.as_slice());
        if !same {
            return Reply::error(format!(
                "ERR CONFIG SET {name} is not supported by Waymark: its settings live in the node's config file"
            ));
        }
    }
    Reply::ok()
}

fn settings(shared: &Shared) -> [(&'static str, String); 8] {
    let cfg = &shared.cfg;
    let fsync = cfg.fsync == FsyncPolicy::Always;
    [
        ("save", String::new()),
        ("appendonly", if fsync { "yes" } else { "no" }.to_string()),
        ("appendfsync", if fsync { "always" } else { "no" }.to_string()),
        ("databases", "1".to_string()),
        ("maxclients", cfg.limits.clients_max.to_string()),
        ("proto-max-bulk-len", cfg.limits.bulk_max_bytes.to_string()),
        ("maxmemory", cfg.limits.maxmemory_bytes.to_string()),
        ("maxmemory-policy", "noeviction".to_string()),
    ]
}

pub fn config_get(shared: &Shared, patterns: &[Vec<u8>]) -> Reply {
    let settings = settings(shared);
    // Compiled once; linear in the pattern (a recursive matcher took exponential time on `***…x`).
    let globs: Vec<Glob> = patterns.iter().filter_map(|p| Glob::new(p, true)).collect();
    let mut pairs = vec![];
    for (name, value) in settings {
        if globs.iter().any(|g| g.matches(name.as_bytes())) {
            pairs.push((bulk(name), bulk(value)));
        }
    }
    Reply::Map(pairs)
}

fn command_entry(name: &str, arity: i64) -> Reply {
    let write = [
        "set",
        "del",
        "mset",
        "incr",
        "incrby",
        "decr",
        "decrby",
        "append",
        "setnx",
        "getset",
        "getdel",
        "setrange",
        "incrbyfloat",
        "setbit",
        "msetnx",
        "rename",
        "renamenx",
        "copy",
        "unlink",
        "flushall",
        "flushdb",
    ]
    .contains(&name);
    let flags = vec![Reply::Simple(if write { "write" } else { "readonly" }.into())];
    let keyed = ![
        "multi",
        "exec",
        "discard",
        "unwatch",
        "ping",
        "echo",
        "hello",
        "auth",
        "select",
        "quit",
        "info",
        "dbsize",
        "client",
        "config",
        "command",
        "scan",
        "keys",
        "randomkey",
        "flushall",
        "flushdb",
        "function",
    ]
    .contains(&name);
    let (first, last, step) = match (keyed, name) {
        (false, _) => (0, 0, 0),
        (true, "mset" | "msetnx") => (1, -1, 2),
        (true, "del" | "exists" | "mget" | "watch" | "unlink" | "touch") => (1, -1, 1),
        (true, "rename" | "renamenx" | "copy" | "lcs") => (1, 2, 1),
        (true, _) => (1, 1, 1),
    };
    Reply::Array(vec![
        bulk(name),
        Reply::Integer(arity),
        Reply::Array(flags),
        Reply::Integer(first),
        Reply::Integer(last),
        Reply::Integer(step),
    ])
}

pub fn command_table() -> Reply {
    Reply::Array(TABLE.iter().map(|(n, a)| command_entry(n, *a)).collect())
}

pub fn command_info(names: &[Vec<u8>]) -> Reply {
    let info = |n: &Vec<u8>| {
        let n = String::from_utf8_lossy(n).to_ascii_lowercase();
        TABLE.iter().find(|(t, _)| *t == n).map_or(Reply::NullArray, |(t, a)| command_entry(t, *a))
    };
    Reply::Array(names.iter().map(info).collect())
}

/// The keys of the whole cluster — Waymark is one database, whichever host is asked (it counted
/// only the asked host's primaries before, as a Redis Cluster node does, and Redis's own units
/// read `DBSIZE` as the whole keyspace).
pub async fn dbsize(shared: &Shared) -> u64 {
    crate::admin::topology::cluster_primary_keys(shared).await
}

/// Redis's `_human` form: `1.50M`, `512B`.
fn human_bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    match UNITS.iter().find(|(size, _)| n >= *size) {
        Some((size, unit)) => format!("{:.2}{unit}", n as f64 / *size as f64),
        None => format!("{n}B"),
    }
}

/// `INFO [section]`: server, clients, memory, persistence, stats, replication, keyspace, and
/// Waymark's own section.
pub async fn info(shared: &Shared, section: Option<&str>) -> Reply {
    let cfg = &shared.cfg;
    let host = cfg.this_host();
    let wants = |s: &str| matches!(section, None | Some("all" | "everything" | "default")) || section == Some(s);
    let mut text = String::new();
    if wants("server") {
        text += &format!(
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nwaymark_version:{}\r\nredis_mode:standalone\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nwaymark_cluster:{}\r\nwaymark_host:{}\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            host.redis.port(),
            shared.started.elapsed().as_secs(),
            cfg.cluster.name,
            cfg.host,
        );
    }
    if wants("clients") {
        let counts = shared.clients.counts();
        text += &format!(
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n\r\n",
            counts.connected, cfg.limits.clients_max
        );
    }
    if wants("memory") {
        let (used, limit) = (shared.memory.used_bytes(), shared.memory.limit_bytes());
        text += &format!(
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nmaxmemory:{limit}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:noeviction\r\n\r\n",
            human_bytes(used),
            human_bytes(limit),
        );
    }
    if wants("persistence") {
        let fsync = if cfg.fsync == FsyncPolicy::Always { "always" } else { "never" };
        text += &format!("# Persistence\r\nloading:0\r\naof_enabled:1\r\nwaymark_fsync:{fsync}\r\nrdb_changes_since_last_save:0\r\n\r\n");
    }
    if wants("stats") {
        let counts = shared.clients.counts();
        text += &format!(
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\r\n",
            counts.received, counts.commands
        );
    }
    if wants("replication") {
        // To a client the host is a primary that takes writes; its copies are the cluster's own
        // (every partition on `cluster.replicas` hosts), not Redis replicas it could list.
        text += &format!(
            "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nwaymark_replicas_per_partition:{}\r\n\r\n",
            cfg.cluster.replicas
        );
    }
    if wants("keyspace") {
        let keys = dbsize(shared).await;
        text += &format!("# Keyspace\r\ndb0:keys={keys},expires=0,avg_ttl=0\r\n\r\n");
    }
    if wants("waymark") {
        let statuses = shared.statuses().await;
        text += "# Waymark\r\n";
        for s in statuses {
            text +=
                &format!("vnode:{},kind={},keys={},parent={}\r\n", s.id, s.kind, s.keys, s.parent.unwrap_or_default());
        }
        text += "\r\n";
    }
    Reply::Verbatim { format: *b"txt", text: text.into_bytes() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_listed_with_its_arity() {
        let Reply::Array(entries) = command_table() else { panic!("an array") };
        assert_eq!(entries.len(), TABLE.len());
        assert!(entries.iter().all(|e| matches!(e, Reply::Array(parts) if parts.len() == 6)));
    }
}
