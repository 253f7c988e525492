//! What tools ask at connect time, answered the way they expect: `INFO` (a bulk string —
//! redis-cli crashes on any other type), `CONFIG GET save|appendonly` (redis-benchmark reads the
//! second element), `COMMAND` (an array of arrays), `DBSIZE`.

use super::command::commands;
use crate::config::FsyncPolicy;
use crate::encoding_hints::EncodingHints;
use crate::host::Shared;
use waymark_core::acl::table::{Category, Keys};
use waymark_resp::glob::Glob;
use waymark_resp::Reply;

/// The Redis version we speak the protocol of (clients check it for features).
pub const REDIS_VERSION: &str = "7.2.0";

fn bulk(s: impl Into<String>) -> Reply {
    Reply::bulk(s.into().into_bytes())
}

/// `CONFIG GET pattern…`: the few settings tools read, with `*` globs.
/// `CONFIG SET name value …`: `maxmemory` changes live, on this host (its config file keeps the
/// value it starts with); Redis's compact-encoding thresholds are kept for `CONFIG GET` and change
/// nothing (`encoding_hints`); Waymark's other settings live in the node's config file, so they may
/// only be "set" to the value they have (tools and Redis's own test suite restore settings that
/// way). Every pair is checked before any is applied, as Redis does; a refusal says which.
pub fn config_set(shared: &Shared, pairs: &[(Vec<u8>, Vec<u8>)]) -> Reply {
    let current = settings(shared);
    let mut new_limit = None;
    let mut hints = vec![];
    for (name, value) in pairs {
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let failed =
            |why: &str| Reply::error(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"));
        if name == "maxmemory" {
            match crate::memory::parse_memory(&String::from_utf8_lossy(value)) {
                Some(bytes) => new_limit = Some(bytes),
                None => return failed("argument must be a memory value"),
            }
            continue;
        }
        if let Some(hint) = EncodingHints::name(&name) {
            if let Err(e) = EncodingHints::check(value) {
                return failed(&e.to_string());
            }
            hints.push((hint, value));
            continue;
        }
        let same = current.iter().any(|(n, v)| *n == name && v.as_bytes() == value.as_slice());
        if !same {
            return failed("Waymark's settings live in the node's config file; only maxmemory changes live");
        }
    }
    if let Some(bytes) = new_limit {
        shared.memory.set_limit_bytes(bytes);
    }
    for (hint, value) in hints {
        shared.encoding_hints.set(hint, value);
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
        ("databases", waymark_core::database::DATABASES.to_string()),
        ("maxclients", cfg.limits.clients_max.to_string()),
        ("proto-max-bulk-len", cfg.limits.bulk_max_bytes.to_string()),
        ("maxmemory", shared.memory.limit_bytes().to_string()),
        ("maxmemory-policy", "noeviction".to_string()),
    ]
}

pub fn config_get(shared: &Shared, patterns: &[Vec<u8>]) -> Reply {
    let settings = settings(shared);
    // Compiled once; linear in the pattern (a recursive matcher took exponential time on `***…x`).
    let globs: Vec<Glob> = patterns.iter().filter_map(|p| Glob::new(p, true)).collect();
    let mut pairs = vec![];
    let hints = shared.encoding_hints.all();
    for (name, value) in settings.into_iter().chain(hints) {
        if globs.iter().any(|g| g.matches(name.as_bytes())) {
            pairs.push((bulk(name), bulk(value)));
        }
    }
    Reply::Map(pairs)
}

/// `COMMAND`'s entry for a command: its flags and key positions from the ACL table (Redis 7's
/// categories and legacy key specs, `waymark_core::acl::table`), where every command is listed.
fn command_entry(name: &str, arity: i64) -> Reply {
    let acl = waymark_core::acl::COMMANDS.iter().find(|c| c.name == name);
    let write = acl.is_some_and(|c| c.categories.contains(&Category::Write));
    let flags = vec![Reply::Simple(if write { "write" } else { "readonly" }.into())];
    // A container's keys are its subcommands' (`object|encoding`): one argument further.
    let keys = acl.map(|c| c.keys).filter(|k| *k != Keys::None).or_else(|| {
        let sub =
            waymark_core::acl::COMMANDS.iter().find(|c| c.name.strip_prefix(name).is_some_and(|s| s.starts_with('|')));
        sub.map(|c| c.keys)
    });
    let (first, last, step) = match keys {
        Some(Keys::Range { first, last, step }) => (first as i64, last as i64, step as i64),
        _ => (0, 0, 0),
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
    Reply::Array(commands().map(|(n, a)| command_entry(n, *a)).collect())
}

pub fn command_info(names: &[Vec<u8>]) -> Reply {
    let info = |n: &Vec<u8>| {
        let n = String::from_utf8_lossy(n).to_ascii_lowercase();
        commands().find(|(t, _)| *t == n).map_or(Reply::NullArray, |(t, a)| command_entry(t, *a))
    };
    Reply::Array(names.iter().map(info).collect())
}

/// The keys of the whole cluster — Waymark is one database, whichever host is asked (it counted
/// only the asked host's primaries before, as a Redis Cluster node does, and Redis's own units
/// read `DBSIZE` as the whole keyspace).
pub async fn dbsize(shared: &Shared) -> u64 {
    crate::admin::topology::cluster_primary_keys(shared).await
}

/// `DBSIZE` in database `db`: its keys in the whole cluster.
pub async fn dbsize_of(shared: &Shared, db: super::command::Db) -> u64 {
    let dbs = crate::admin::topology::cluster_dbs(shared).await;
    dbs.get(db.index() as usize).map_or(0, |d| d.keys)
}

/// Redis's `_human` form: `1.50M`, `512B`.
fn human_bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    match UNITS.iter().find(|(size, _)| n >= *size) {
        Some((size, unit)) => format!("{:.2}{unit}", n as f64 / *size as f64),
        None => format!("{n}B"),
    }
}

/// `INFO`'s sections, in the order they are written.
const SECTIONS: [&str; 10] = [
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "keyspace",
    "waymark",
];

/// The sections `INFO` with no argument (or `default`) writes: all but the per-command table, as
/// in Redis.
fn in_default(section: &str) -> bool {
    section != "commandstats"
}

/// Which of `SECTIONS` the arguments ask for (lower case): named ones, `default`, `all` or
/// `everything` (Waymark has no modules: the same as `all`); unknown names add nothing.
fn selected(asked: &[String]) -> Vec<&'static str> {
    let wants = |section: &str| match asked {
        [] => in_default(section),
        _ => asked.iter().any(|a| match a.as_str() {
            "all" | "everything" => true,
            "default" => in_default(section),
            named => named == section,
        }),
    };
    SECTIONS.into_iter().filter(|s| wants(s)).collect()
}

/// `INFO [section …]`: server, clients, memory, persistence, stats, replication, cpu,
/// commandstats, keyspace, and Waymark's own section; each at most once.
pub async fn info(shared: &Shared, asked: &[String]) -> Reply {
    let mut text = String::new();
    for section in selected(asked) {
        text += &match section {
            "server" => server_section(shared),
            "clients" => clients_section(shared),
            "memory" => memory_section(shared),
            "persistence" => persistence_section(shared),
            "stats" => stats_section(shared),
            "replication" => replication_section(shared),
            "cpu" => cpu_section(),
            "commandstats" => commandstats_section(shared),
            "keyspace" => keyspace_section(shared).await,
            _ => waymark_section(shared).await,
        };
        text += "\r\n";
    }
    Reply::Verbatim { format: *b"txt", text: text.into_bytes() }
}

fn server_section(shared: &Shared) -> String {
    let cfg = &shared.cfg;
    format!(
        "# Server\r\nredis_version:{REDIS_VERSION}\r\nwaymark_version:{}\r\nredis_mode:standalone\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{}\r\nwaymark_cluster:{}\r\nwaymark_host:{}\r\n",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        cfg.this_host().redis.port(),
        shared.started.elapsed().as_secs(),
        cfg.cluster.name,
        cfg.host,
    )
}

fn clients_section(shared: &Shared) -> String {
    let counts = shared.clients.counts();
    format!(
        "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:{}\r\n",
        counts.connected, shared.cfg.limits.clients_max, counts.blocked
    )
}

fn memory_section(shared: &Shared) -> String {
    let (used, limit) = (shared.memory.used_bytes(), shared.memory.limit_bytes());
    format!(
        "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nmaxmemory:{limit}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:noeviction\r\n",
        human_bytes(used),
        human_bytes(limit),
    )
}

fn persistence_section(shared: &Shared) -> String {
    let fsync = if shared.cfg.fsync == FsyncPolicy::Always { "always" } else { "never" };
    format!("# Persistence\r\nloading:0\r\naof_enabled:1\r\nwaymark_fsync:{fsync}\r\nrdb_changes_since_last_save:0\r\n")
}

fn stats_section(shared: &Shared) -> String {
    let counts = shared.clients.counts();
    // Error replies of the commands counted (an unknown command's are not, as it has no entry).
    let errors: u64 = shared.command_stats.snapshot().values().map(|s| s.rejected_calls + s.failed_calls).sum();
    format!(
        "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ntotal_error_replies:{errors}\r\n",
        counts.received, counts.commands
    )
}

/// To a client the host is a primary that takes writes; its copies are the cluster's own (every
/// partition on `cluster.replicas` hosts), not Redis replicas it could list. Its replication
/// offset is what its vnodes appended to their logs, the stream its chains replicate.
fn replication_section(shared: &Shared) -> String {
    let offset = shared.log_appended_bytes.load(std::sync::atomic::Ordering::Relaxed);
    format!(
        "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_repl_offset:{offset}\r\nwaymark_replicas_per_partition:{}\r\n",
        shared.cfg.cluster.replicas
    )
}

fn cpu_section() -> String {
    let (own, children) = (crate::cpu::cpu_times(false), crate::cpu::cpu_times(true));
    format!(
        "# CPU\r\nused_cpu_sys:{:.6}\r\nused_cpu_user:{:.6}\r\nused_cpu_sys_children:{:.6}\r\nused_cpu_user_children:{:.6}\r\n",
        own.sys_s, own.user_s, children.sys_s, children.user_s
    )
}

/// One line per command called since the host started, as Redis writes them.
fn commandstats_section(shared: &Shared) -> String {
    let mut text = "# Commandstats\r\n".to_string();
    for (name, s) in shared.command_stats.snapshot() {
        let per_call = if s.calls == 0 { 0.0 } else { s.usec as f64 / s.calls as f64 };
        text += &format!(
            "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            s.calls, s.usec, s.rejected_calls, s.failed_calls
        );
    }
    text
}

/// A line per database that holds keys, as Redis writes them: its keys, those with a deadline,
/// and their mean time left in ms (from the primaries' tallies of deadlines).
async fn keyspace_section(shared: &Shared) -> String {
    let mut text = "# Keyspace\r\n".to_string();
    let now_ms = crate::clock::now_ms();
    let dbs = crate::admin::topology::cluster_dbs(shared).await;
    for (db, d) in dbs.iter().enumerate().filter(|(_, d)| d.keys > 0) {
        text += &format!("db{db}:keys={},expires={},avg_ttl={}\r\n", d.keys, d.expires, d.avg_ttl_ms(now_ms));
    }
    text
}

async fn waymark_section(shared: &Shared) -> String {
    let mut text = "# Waymark\r\n".to_string();
    for s in shared.statuses().await {
        text += &format!("vnode:{},kind={},keys={},parent={}\r\n", s.id, s.kind, s.keys, s.parent.unwrap_or_default());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_listed_with_its_arity() {
        let Reply::Array(entries) = command_table() else { panic!("an array") };
        assert_eq!(entries.len(), commands().count());
        assert!(entries.iter().all(|e| matches!(e, Reply::Array(parts) if parts.len() == 6)));
    }

    #[test]
    fn info_sections_are_chosen_as_redis_chooses_them_each_once() {
        let asked = |a: &[&str]| selected(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(!asked(&[]).contains(&"commandstats") && asked(&[]).contains(&"cpu"));
        assert_eq!(asked(&["default"]), asked(&[]));
        assert_eq!(asked(&["cpu"]), ["cpu"]);
        assert_eq!(asked(&["cpu", "sentinel"]), ["cpu"], "an unknown section adds nothing");
        assert_eq!(asked(&["cpu", "all"]), SECTIONS.to_vec(), "all, with cpu once");
        assert_eq!(asked(&["everything"]), SECTIONS.to_vec());
        assert!(asked(&["commandstats"]) == ["commandstats"]);
    }
}
