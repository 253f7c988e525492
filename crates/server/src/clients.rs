//! The Redis connections this host serves, for `CLIENT LIST`, `CLIENT INFO` and `CLIENT KILL`: each
//! connection registers when it opens and is removed when it closes (its `Registration` drops),
//! and notes what changed in its own entry as it runs (its lock, not the registry's: connections
//! do not contend per command). A killed connection is told by its token and closes after the
//! command it runs. Bounded by `limits.clients_max`: a connection registers only once it holds a
//! slot.
//!
//! A line says only what Waymark knows of a connection — Redis's buffer and memory fields
//! (`qbuf`, `omem`, `tot-mem`, …) are left out rather than made up.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the registry holds of one connection.
#[derive(Clone, Debug)]
pub struct Conn {
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub opened: Instant,
    /// When its last command arrived.
    pub last: Instant,
    /// Its last command, as Redis names it (`client|list`).
    pub cmd: String,
    pub name: Option<Vec<u8>>,
    pub user: String,
    pub resp: u8,
    /// The database it selected.
    pub db: u8,
    /// Commands queued since `MULTI`, or `None` outside one.
    pub multi: Option<usize>,
    pub lib_name: Option<Vec<u8>>,
    pub lib_ver: Option<Vec<u8>>,
    /// Commands it sent.
    pub commands: u64,
    /// Waiting in a blocking command for an element to take.
    pub blocked: bool,
    kill: CancellationToken,
}

/// `CLIENT KILL`'s filters (all given must match).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KillFilter {
    pub id: Option<u64>,
    pub addr: Option<String>,
    pub laddr: Option<String>,
    pub user: Option<String>,
    /// `TYPE`: Waymark's connections are all `normal`; any other type matches none.
    pub normal: bool,
    /// `SKIPME yes` (the default of the filter form): the caller is not killed.
    pub skip_me: bool,
}

type Entry = Arc<Mutex<Conn>>;

#[derive(Default)]
pub struct Clients {
    conns: Mutex<BTreeMap<u64, Entry>>,
    /// Connections registered since the host started (`INFO stats`).
    received: AtomicU64,
    /// Commands of the connections that closed (those open count their own).
    closed_commands: AtomicU64,
    /// The order connections blocked on lists in (`BLPOP`, …).
    pub blocked: Arc<crate::blocked::BlockedQueues>,
}

/// `INFO`'s counts of the host's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub connected: usize,
    /// Connections waiting in a blocking command (`BLPOP`, …).
    pub blocked: usize,
    pub received: u64,
    pub commands: u64,
}

/// A connection's place in the registry: removed when dropped (the connection ended, however).
pub struct Registration {
    clients: Arc<Clients>,
    id: u64,
    entry: Entry,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let commands = lock(&self.entry).commands;
        self.clients.closed_commands.fetch_add(commands, Ordering::Relaxed);
        self.clients.lock().remove(&self.id);
    }
}

impl Registration {
    /// Notes a change of the connection.
    pub fn update(&self, change: impl FnOnce(&mut Conn)) {
        change(&mut lock(&self.entry));
    }

    /// `CLIENT INFO`'s line.
    pub fn line(&self) -> String {
        line(self.id, &lock(&self.entry), Instant::now())
    }
}

fn lock(entry: &Entry) -> std::sync::MutexGuard<'_, Conn> {
    entry.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.conns.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers connection `id`; its token is cancelled when a `CLIENT KILL` names it.
    pub fn register(
        self: &Arc<Self>,
        id: u64,
        addr: SocketAddr,
        laddr: SocketAddr,
    ) -> (Registration, CancellationToken) {
        let kill = CancellationToken::new();
        let now = Instant::now();
        let conn = Conn {
            addr,
            laddr,
            opened: now,
            last: now,
            cmd: "NULL".into(),
            name: None,
            user: waymark_core::acl::DEFAULT_USER.into(),
            resp: 2,
            db: 0,
            multi: None,
            lib_name: None,
            lib_ver: None,
            commands: 0,
            blocked: false,
            kill: kill.clone(),
        };
        self.received.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(Mutex::new(conn));
        self.lock().insert(id, entry.clone());
        (Registration { clients: self.clone(), id, entry }, kill)
    }

    /// How many connections are open, were received, and the commands they sent.
    pub fn counts(&self) -> Counts {
        let conns = self.lock();
        let open: u64 = conns.values().map(|c| lock(c).commands).sum();
        Counts {
            connected: conns.len(),
            blocked: conns.values().filter(|c| lock(c).blocked).count(),
            received: self.received.load(Ordering::Relaxed),
            commands: open + self.closed_commands.load(Ordering::Relaxed),
        }
    }

    /// `CLIENT LIST`: a line per connection, or of those whose id is in `ids` when given.
    pub fn list(&self, ids: Option<&[u64]>) -> String {
        let now = Instant::now();
        let conns = self.lock();
        let chosen = conns.iter().filter(|(id, _)| ids.is_none_or(|ids| ids.contains(id)));
        chosen.map(|(id, c)| line(*id, &lock(c), now) + "\n").collect()
    }

    /// Kills the connections `filter` matches (`me` is the caller); how many.
    pub fn kill(&self, filter: &KillFilter, me: u64) -> usize {
        let conns = self.lock();
        let matches = |id: u64, c: &Conn| {
            filter.normal
                && filter.id.is_none_or(|want| want == id)
                && filter.addr.as_ref().is_none_or(|a| *a == c.addr.to_string())
                && filter.laddr.as_ref().is_none_or(|a| *a == c.laddr.to_string())
                && filter.user.as_ref().is_none_or(|u| *u == c.user)
                && !(filter.skip_me && id == me)
        };
        let mut killed = 0;
        for (id, entry) in conns.iter() {
            let c = lock(entry);
            if matches(*id, &c) {
                c.kill.cancel();
                killed += 1;
            }
        }
        killed
    }
}

/// One connection as `CLIENT LIST` shows it.
fn line(id: u64, c: &Conn, now: Instant) -> String {
    let text = |b: &Option<Vec<u8>>| b.as_deref().map(String::from_utf8_lossy).unwrap_or_default().into_owned();
    let mut out = String::new();
    let _ = write!(
        out,
        "id={id} addr={} laddr={} name={} age={} idle={} flags={} db={} multi={} cmd={} user={} lib-name={} lib-ver={} resp={}",
        c.addr,
        c.laddr,
        text(&c.name),
        now.duration_since(c.opened).as_secs(),
        now.duration_since(c.last).as_secs(),
        if c.multi.is_some() { "x" } else { "N" },
        c.db,
        c.multi.map_or(-1, |n| n as i64),
        c.cmd,
        c.user,
        text(&c.lib_name),
        text(&c.lib_ver),
        c.resp
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_connection_is_listed_while_registered_and_gone_once_dropped() {
        let clients = Arc::new(Clients::default());
        let (reg, _) = clients.register(7, addr(5000), addr(6379));
        reg.update(|c| c.name = Some(b"app".to_vec()));
        assert_eq!(reg.line() + "\n", clients.list(Some(&[7])));
        let list = clients.list(None);
        assert!(list.starts_with("id=7 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 name=app "), "{list}");
        assert!(list.ends_with("resp=2\n"), "{list}");
        reg.update(|c| c.commands += 2);
        assert_eq!(clients.counts(), Counts { connected: 1, blocked: 0, received: 1, commands: 2 });
        drop(reg);
        assert_eq!(clients.list(None), "");
        assert_eq!(
            clients.counts(),
            Counts { connected: 0, blocked: 0, received: 1, commands: 2 },
            "a closed one's commands stay counted"
        );
    }

    #[test]
    fn kill_cancels_only_what_every_filter_matches_and_skips_the_caller() {
        let clients = Arc::new(Clients::default());
        let (_a, kill_a) = clients.register(1, addr(5001), addr(6379));
        let (_b, kill_b) = clients.register(2, addr(5002), addr(6379));
        let by_laddr =
            KillFilter { laddr: Some("127.0.0.1:6379".into()), normal: true, skip_me: true, ..Default::default() };
        assert_eq!(clients.kill(&by_laddr, 1), 1);
        assert!(!kill_a.is_cancelled() && kill_b.is_cancelled());
        let other_type = KillFilter { id: Some(1), normal: false, ..Default::default() };
        assert_eq!(clients.kill(&other_type, 2), 0);
        assert!(!kill_a.is_cancelled());
    }
}
