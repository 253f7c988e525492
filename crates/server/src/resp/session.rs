//! One client connection: its protocol version, whether it authenticated, its `MULTI` queue and
//! `WATCH`ed keys, and the store vnode of this host that coordinates its transactions (any host
//! accepts any key; the near vnode routes to the primaries).
//!
//! Every data command is a serializable transaction (`exec.rs`): the keys a reply depends on are
//! read, the commands are evaluated, and the transaction commits only if what was read is still
//! current. A conflict with another transaction (a lock held, a read value changed) is retried a
//! bounded number of times with back-off; only a `WATCH`ed key that changed makes `EXEC` return nil.

use super::command::{self, Cmd, CmdError, DataCmd};
use super::exec;
use super::info;
use crate::host::Shared;
use crate::telemetry::{self, Abort};
use crate::vnode::VnodeCmd;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use waymark_core::{AbortReason, ClientId, Key, ReadCheck, Request, Response, Value, Version, Write, WriteOp};
use waymark_resp::{Protocol, Reply};

/// Attempts of one transaction that conflicts with others before the client hears of it.
const CONFLICT_RETRIES_MAX: u32 = 16;
const CONFLICT_BACKOFF_MIN: Duration = Duration::from_micros(500);
const CONFLICT_BACKOFF_MAX: Duration = Duration::from_millis(50);

pub struct Session {
    shared: Arc<Shared>,
    pub id: ClientId,
    near: mpsc::Sender<VnodeCmd>,
    next_req: u64,
    pub proto: Protocol,
    pub authenticated: bool,
    name: Option<Vec<u8>>,
    /// Between `MULTI` and `EXEC`: the queued commands, and whether one of them was refused.
    multi: Option<(Vec<Cmd>, bool)>,
    /// `WATCH`ed keys and the version each had when watched.
    watched: BTreeMap<Key, Version>,
    /// A reply was refused for its size (`limits.reply_max_bytes`): the connection closes after it.
    closing: bool,
}

/// What the connection does after a reply.
pub enum Next {
    Continue,
    Close,
}

/// The outcome of one transaction attempt.
enum Attempt {
    Done(Vec<Reply>),
    /// A `WATCH`ed key changed: `EXEC` answers nil.
    WatchFailed,
    /// Another transaction was in the way: try again.
    Conflict(String),
}

fn err(e: impl Into<String>) -> Reply {
    Reply::error(e)
}

impl Session {
    pub fn new(shared: Arc<Shared>, id: ClientId) -> Self {
        let stores = &shared.stores;
        let near = stores[(id.0 as usize) % stores.len()].1.clone();
        let authenticated = shared.cfg.password.is_none();
        Session {
            shared,
            id,
            near,
            next_req: 0,
            proto: Protocol::Resp2,
            authenticated,
            name: None,
            multi: None,
            watched: BTreeMap::new(),
            closing: false,
        }
    }

    /// Handles one request's arguments.
    pub async fn handle(&mut self, args: Vec<Vec<u8>>) -> (Reply, Next) {
        let parsed = command::parse(args);
        if !self.authenticated && !matches!(parsed, Ok(Cmd::Auth { .. } | Cmd::Hello { .. } | Cmd::Quit)) {
            return (err("NOAUTH Authentication required."), Next::Continue);
        }
        if let Some((queue, failed)) = self.multi.as_mut() {
            let full = queue.len() >= self.shared.cfg.limits.multi_queue_max;
            match parsed {
                Ok(Cmd::Exec | Cmd::Discard | Cmd::Multi | Cmd::Watch(_) | Cmd::Quit) => {}
                Ok(_) if full => {
                    *failed = true;
                    let max = self.shared.cfg.limits.multi_queue_max;
                    return (
                        err(format!("ERR MULTI holds at most {max} commands (limits.multi_queue_max)")),
                        Next::Continue,
                    );
                }
                Ok(cmd) => {
                    queue.push(cmd);
                    return (Reply::Simple("QUEUED".into()), Next::Continue);
                }
                Err(CmdError(e)) => {
                    *failed = true;
                    return (err(e), Next::Continue);
                }
            }
        }
        match parsed {
            Err(CmdError(e)) => (err(e), Next::Continue),
            Ok(Cmd::Quit) => (Reply::ok(), Next::Close),
            Ok(cmd) => {
                let reply = self.run(cmd).await;
                (reply, if self.closing { Next::Close } else { Next::Continue })
            }
        }
    }

    async fn run(&mut self, cmd: Cmd) -> Reply {
        match cmd {
            Cmd::Data(d) => self.single(d).await,
            Cmd::Multi if self.multi.is_some() => err("ERR MULTI calls can not be nested"),
            Cmd::Multi => {
                self.multi = Some((vec![], false));
                Reply::ok()
            }
            Cmd::Exec => self.exec().await,
            Cmd::Discard => match self.multi.take() {
                Some(_) => {
                    self.watched.clear();
                    Reply::ok()
                }
                None => err("ERR DISCARD without MULTI"),
            },
            Cmd::Watch(_) if self.multi.is_some() => err("ERR WATCH inside MULTI is not allowed"),
            Cmd::Watch(keys) => self.watch(keys).await,
            Cmd::Unwatch => {
                self.watched.clear();
                Reply::ok()
            }
            other => self.connection(other).await,
        }
    }

    /// Commands about the connection and the server, not the data.
    async fn connection(&mut self, cmd: Cmd) -> Reply {
        match cmd {
            Cmd::Ping(None) => Reply::Simple("PONG".into()),
            Cmd::Ping(Some(m)) | Cmd::Echo(m) => Reply::bulk(m),
            Cmd::Hello { proto, auth, name } => self.hello(proto, auth, name),
            Cmd::Auth { user, password } => self.auth(user.as_deref(), &password),
            Cmd::Select(0) => Reply::ok(),
            Cmd::Select(_) => err("ERR Waymark has a single database: only SELECT 0 is supported"),
            Cmd::ClientSetName(n) => {
                self.name = Some(n);
                Reply::ok()
            }
            Cmd::ClientGetName => self.name.clone().map_or(Reply::Null, Reply::bulk),
            Cmd::ClientSetInfo => Reply::ok(),
            Cmd::ClientId => Reply::Integer(self.id.0 as i64),
            Cmd::ConfigGet(patterns) => info::config_get(&self.shared, &patterns),
            Cmd::Command => info::command_table(),
            Cmd::CommandCount => Reply::Integer(command::TABLE.len() as i64),
            Cmd::CommandDocs => Reply::Map(vec![]),
            Cmd::CommandInfo(names) => info::command_info(&names),
            Cmd::Info(section) => info::info(&self.shared, section.as_deref()).await,
            Cmd::DbSize => Reply::Integer(info::dbsize(&self.shared).await as i64),
            other => err(format!("ERR {other:?} cannot be used here")),
        }
    }

    fn hello(&mut self, proto: Option<u8>, auth: Option<(Vec<u8>, Vec<u8>)>, name: Option<Vec<u8>>) -> Reply {
        if let Some((user, password)) = auth {
            if let Reply::Error(e) = self.auth(Some(&user), &password) {
                return Reply::Error(e);
            }
        }
        if !self.authenticated {
            return err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        }
        match proto {
            Some(3) => self.proto = Protocol::Resp3,
            Some(_) => self.proto = Protocol::Resp2,
            None => {}
        }
        if name.is_some() {
            self.name = name;
        }
        let s = |v: &str| Reply::bulk(v.as_bytes().to_vec());
        Reply::Map(vec![
            (s("server"), s("redis")),
            (s("version"), s(info::REDIS_VERSION)),
            (s("proto"), Reply::Integer(if self.proto == Protocol::Resp3 { 3 } else { 2 })),
            (s("id"), Reply::Integer(self.id.0 as i64)),
            (s("mode"), s("standalone")),
            (s("role"), s("master")),
            (s("modules"), Reply::Array(vec![])),
        ])
    }

    fn auth(&mut self, user: Option<&[u8]>, password: &[u8]) -> Reply {
        let Some(expected) = self.shared.cfg.password.as_deref() else {
            return err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        };
        let user_ok = user.is_none_or(|u| u == b"default");
        if user_ok && constant_time_eq(password, expected) {
            self.authenticated = true;
            Reply::ok()
        } else {
            err("WRONGPASS invalid username-password pair or user is disabled.")
        }
    }

    async fn watch(&mut self, keys: Vec<Key>) -> Reply {
        match self.read_all(&keys).await {
            Ok(read) => self.watched.extend(keys.into_iter().zip(read).map(|(key, (_, version))| (key, version))),
            Err(e) => return e,
        }
        Reply::ok()
    }

    async fn exec(&mut self) -> Reply {
        let Some((queue, failed)) = self.multi.take() else {
            return err("ERR EXEC without MULTI");
        };
        let watched = std::mem::take(&mut self.watched);
        if failed {
            return err("EXECABORT Transaction discarded because of previous errors.");
        }
        let data: Vec<DataCmd> =
            queue.iter().filter_map(|c| if let Cmd::Data(d) = c { Some(d.clone()) } else { None }).collect();
        let started = Instant::now();
        let outcome = self.transaction(&data, &watched, &watched).await;
        count(started, &outcome);
        let mut data_replies = match outcome {
            Ok(Some(replies)) => replies.into_iter(),
            Ok(None) => return Reply::NullArray,
            Err(e) => return e,
        };
        let mut replies = vec![];
        for c in queue {
            match c {
                Cmd::Data(_) => replies.push(data_replies.next().expect("one reply per data command")),
                other => replies.push(self.connection(other).await),
            }
        }
        Reply::Array(replies)
    }

    /// A data command outside `MULTI`: blind writes and `INCRBY`/`APPEND` go straight to the
    /// primaries (their reply comes from the commit); a single `GET` is one read; the rest read first.
    async fn single(&mut self, cmd: DataCmd) -> Reply {
        let direct = match &cmd {
            DataCmd::Get(k) => {
                return self.read(k).await.map_or_else(|e| e, |(v, _)| v.map_or(Reply::Null, Reply::bulk))
            }
            DataCmd::Set(k, v) => Some(vec![Write { key: k.clone(), op: WriteOp::Set(v.clone()) }]),
            DataCmd::MSet(pairs) => {
                Some(pairs.iter().map(|(k, v)| Write { key: k.clone(), op: WriteOp::Set(v.clone()) }).collect())
            }
            DataCmd::IncrBy(k, by) => Some(vec![Write { key: k.clone(), op: WriteOp::IncrBy(*by) }]),
            DataCmd::Append(k, v) => Some(vec![Write { key: k.clone(), op: WriteOp::Append(v.clone()) }]),
            _ => None,
        };
        let started = Instant::now();
        let result = match direct {
            Some(writes) => self.direct(&cmd, writes).await,
            None => {
                let seen = self.watched.clone();
                let one = std::slice::from_ref(&cmd);
                self.transaction(one, &BTreeMap::new(), &seen).await.map(|r| r.map(|mut r| r.remove(0)))
            }
        };
        count(started, &result);
        match result {
            Ok(Some(reply)) => reply,
            Ok(None) => Reply::NullArray,
            Err(e) => e,
        }
    }

    /// Writes that need no read: the primary evaluates `INCRBY`/`APPEND` under its lock.
    async fn direct(&mut self, cmd: &DataCmd, writes: Vec<Write>) -> Result<Option<Reply>, Reply> {
        self.check_sizes(&writes)?;
        for attempt in 0..CONFLICT_RETRIES_MAX {
            let request = Request::Txn { reads: vec![], writes: writes.clone() };
            match self.call(request).await? {
                Response::Committed { writes: resolved, .. } => {
                    let value = |k: &Key| resolved.iter().find(|w| &w.key == k).and_then(|w| w.value.clone());
                    return Ok(Some(match cmd {
                        DataCmd::IncrBy(k, _) => Reply::Integer(integer_of(value(k))),
                        DataCmd::Append(k, _) => Reply::Integer(value(k).map_or(0, |v| v.len() as i64)),
                        _ => Reply::ok(),
                    }));
                }
                Response::Aborted { reason: AbortReason::NotAnInteger { .. }, .. } => {
                    return Err(err("ERR value is not an integer or out of range"))
                }
                other => {
                    let why = self.failure(other)?;
                    backoff(attempt, &why).await;
                }
            }
        }
        Err(conflicts_exhausted())
    }

    /// Reads what the commands depend on, evaluates them, and commits if what was read is still
    /// current (`None`: a `WATCH`ed key changed).
    /// `seen`: versions this session read before (its `WATCH`), which can spare a read-only
    /// transaction its commit (`attempt`).
    async fn transaction(
        &mut self,
        cmds: &[DataCmd],
        watched: &BTreeMap<Key, Version>,
        seen: &BTreeMap<Key, Version>,
    ) -> Result<Option<Vec<Reply>>, Reply> {
        for attempt in 0..CONFLICT_RETRIES_MAX {
            match self.attempt(cmds, watched, seen).await? {
                Attempt::Done(replies) => return Ok(Some(replies)),
                Attempt::WatchFailed => return Ok(None),
                Attempt::Conflict(why) => backoff(attempt, &why).await,
            }
        }
        Err(conflicts_exhausted())
    }

    async fn attempt(
        &mut self,
        cmds: &[DataCmd],
        watched: &BTreeMap<Key, Version>,
        seen: &BTreeMap<Key, Version>,
    ) -> Result<Attempt, Reply> {
        if let Some(writes) = exec::direct_writes(cmds) {
            if let Some(done) = self.attempt_direct(cmds, writes, watched).await? {
                return Ok(done);
            }
        }
        let keys: Vec<Key> = exec::keys_to_read(cmds).into_iter().collect();
        let mut values = BTreeMap::new();
        let mut checks: BTreeMap<Key, Version> = watched.clone();
        for (key, (value, version)) in keys.iter().zip(self.read_all(&keys).await?) {
            if watched.get(key).is_some_and(|w| *w != version) {
                return Ok(Attempt::WatchFailed);
            }
            checks.insert(key.clone(), version);
            values.insert(key.clone(), value);
        }
        let limits = &self.shared.cfg.limits;
        let evaluated = match exec::evaluate(cmds, &values, limits.value_max_bytes, limits.reply_max_bytes) {
            Ok(evaluated) => evaluated,
            Err(too_large) => {
                tracing::warn!(client = self.id.0, "{too_large}");
                self.closing = true;
                return Err(err(too_large.to_string()));
            }
        };
        // One key read and nothing written: the read alone was atomic.
        if evaluated.writes.is_empty() && checks.len() <= 1 && watched.is_empty() {
            return Ok(Attempt::Done(evaluated.replies));
        }
        if evaluated.writes.is_empty() && unchanged_since_seen(&keys, &checks, watched, seen) {
            return Ok(Attempt::Done(evaluated.replies));
        }
        self.check_sizes(&evaluated.writes)?;
        let reads = checks.into_iter().map(|(key, version)| ReadCheck { key, version }).collect();
        match self.call(Request::Txn { reads, writes: evaluated.writes }).await? {
            Response::Committed { .. } => Ok(Attempt::Done(evaluated.replies)),
            Response::Aborted { reason: AbortReason::WatchFailed { key }, .. } if watched.contains_key(&key) => {
                Ok(Attempt::WatchFailed)
            }
            other => self.failure(other).map(Attempt::Conflict),
        }
    }

    /// Commands that need no read (`exec::direct_writes`), committed with the `WATCH`ed versions
    /// as read checks. `None`: a command failed at a primary (`INCRBY` on text), and the caller
    /// evaluates them the slow way, where the failing command answers an error and the others
    /// still apply, as in Redis.
    async fn attempt_direct(
        &mut self,
        cmds: &[DataCmd],
        writes: Vec<Write>,
        watched: &BTreeMap<Key, Version>,
    ) -> Result<Option<Attempt>, Reply> {
        self.check_sizes(&writes)?;
        let reads = watched.iter().map(|(key, version)| ReadCheck { key: key.clone(), version: *version }).collect();
        match self.call(Request::Txn { reads, writes }).await? {
            Response::Committed { writes: resolved, .. } => {
                let value = |k: &Key| resolved.iter().find(|w| &w.key == k).and_then(|w| w.value.clone());
                Ok(Some(Attempt::Done(exec::direct_replies(cmds, value))))
            }
            Response::Aborted { reason: AbortReason::NotAnInteger { .. }, .. } => Ok(None),
            Response::Aborted { reason: AbortReason::WatchFailed { key }, .. } if watched.contains_key(&key) => {
                Ok(Some(Attempt::WatchFailed))
            }
            other => self.failure(other).map(|why| Some(Attempt::Conflict(why))),
        }
    }

    /// A response that is not a commit: a conflict worth retrying (`Ok`, why), or the error the
    /// client gets.
    fn failure(&self, r: Response) -> Result<String, Reply> {
        let show = |k: &Key| String::from_utf8_lossy(k).into_owned();
        match r {
            Response::Aborted { reason: AbortReason::LockConflict { key }, .. } => Ok(format!("lock conflict on '{}'", show(&key))),
            Response::Aborted { reason: AbortReason::WatchFailed { key }, .. } => Ok(format!("'{}' changed", show(&key))),
            Response::Aborted { reason: AbortReason::PresumedAbort, .. } => Ok("aborted by recovery".into()),
            Response::Aborted { reason: AbortReason::SnapshotOrder { key }, .. } => Ok(format!("'{}' is on the other side of a snapshot", show(&key))),
            Response::Aborted { reason: AbortReason::CutMarkerWritten, .. } => Ok("a blocking snapshot was being written".into()),
            Response::Aborted { reason: AbortReason::StalePlacement, .. } => Ok("a partition moved to another replica".into()),
            Response::Aborted { reason: AbortReason::FailingOver, .. } => Ok("a partition is failing over".into()),
            Response::Aborted { reason: AbortReason::Timeout, .. } => {
                Err(err("ERR transaction aborted: a participant did not answer in time (nothing was written)"))
            }
            Response::Aborted { reason: AbortReason::NotAnInteger { .. }, .. } => Err(err("ERR value is not an integer or out of range")),
            Response::Unknown { .. } => Err(err("ERR the outcome of this transaction is unknown: a replica did not answer in time; read the keys to find out")),
            // Redis Cluster's code for "retry in a moment": clients know it.
            // Redis's code for too few replicas to write (`min-replicas-to-write`): `min_copies`.
            Response::Unavailable { why } if why.starts_with("TRYAGAIN") || why.starts_with("NOREPLICAS") => {
                Err(err(why))
            }
            Response::Unavailable { why } => Err(err(format!("ERR unavailable: {why}"))),
            other => Err(err(format!("ERR unexpected response {other:?}"))),
        }
    }

    fn check_sizes(&self, writes: &[Write]) -> Result<(), Reply> {
        let max = self.shared.cfg.limits.value_max_bytes;
        let size = |w: &Write| match &w.op {
            WriteOp::Set(v) | WriteOp::Append(v) => v.len(),
            _ => 0,
        };
        if writes.iter().any(|w| size(w) > max) {
            return Err(err(format!("ERR string exceeds maximum allowed size ({max} bytes)")));
        }
        let total: usize = writes.iter().map(|w| size(w) + w.key.len()).sum();
        if total > self.shared.cfg.limits.frame_max_bytes / 2 {
            return Err(err("ERR transaction too large: its values exceed half of limits.frame_max_bytes"));
        }
        Ok(())
    }

    /// The current value and version of `key`, as its primary holds it.
    async fn read(&mut self, key: &Key) -> Result<(Option<Value>, Version), Reply> {
        let mut read = self.read_all(std::slice::from_ref(key)).await?;
        Ok(read.remove(0))
    }

    /// The current value and version of every key of `keys`, in order: the reads are sent
    /// together, so they cost one round trip to the primaries, not one each.
    async fn read_all(&mut self, keys: &[Key]) -> Result<Vec<(Option<Value>, Version)>, Reply> {
        let mut pending = Vec::with_capacity(keys.len());
        for key in keys {
            pending.push(self.send(Request::Get { key: key.clone() }).await?);
        }
        let mut read = Vec::with_capacity(keys.len());
        for rx in pending {
            read.push(match self.answer(rx).await? {
                Response::Value { value, version } => (value, version),
                Response::Unavailable { why } => return Err(err(format!("ERR unavailable: {why}"))),
                other => return Err(err(format!("ERR unexpected response {other:?}"))),
            });
        }
        Ok(read)
    }

    /// Hands a request to this connection's near vnode and waits for its answer.
    async fn call(&mut self, request: Request) -> Result<Response, Reply> {
        let rx = self.send(request).await?;
        self.answer(rx).await
    }

    /// Hands a request to this connection's near vnode; its answer comes on the channel returned.
    async fn send(&mut self, request: Request) -> Result<oneshot::Receiver<Response>, Reply> {
        self.next_req += 1;
        let (reply, rx) = oneshot::channel();
        let cmd = VnodeCmd::Client { client: self.id, req: self.next_req, request, reply };
        if self.near.send(cmd).await.is_err() {
            return Err(err("ERR the node is shutting down"));
        }
        Ok(rx)
    }

    /// Waits for the answer to a request `send` handed over, at most `client_timeout`.
    async fn answer(&self, rx: oneshot::Receiver<Response>) -> Result<Response, Reply> {
        match tokio::time::timeout(self.shared.cfg.client_timeout, rx).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(err("ERR the node is shutting down (a write in flight may or may not have committed)")),
            Err(_) => Err(err(
                "ERR timed out waiting for the cluster (a write may or may not have committed; a read can be retried)",
            )),
        }
    }
}

/// What the client hears when conflicting transactions were in the way of every attempt.
/// Whether a read-only transaction's reads (`keys`, at the versions in `checks`) are atomic
/// without a commit: every key `WATCH`ed was read now, and every key read now was read before by
/// this session (`seen`) at the version read now.
///
/// Why that is enough: versions only grow, so key k held one value from its earlier read (at
/// instant s_k) to its read now (r_k). Every earlier read ended before any read now began, so
/// at t = min(r_k) — an instant inside this command — every key held the value read: the reads
/// are one snapshot, at t, as the commit's read checks would have shown. Nothing is revealed
/// that this client was not answered before, so real-time safety holds as for the reads.
fn unchanged_since_seen(
    keys: &[Key],
    checks: &BTreeMap<Key, Version>,
    watched: &BTreeMap<Key, Version>,
    seen: &BTreeMap<Key, Version>,
) -> bool {
    let read_now = |key: &Key| keys.contains(key);
    let as_seen = |key: &Key| checks.get(key).is_some_and(|v| seen.get(key) == Some(v));
    !keys.is_empty() && watched.keys().all(read_now) && keys.iter().all(as_seen)
}

fn conflicts_exhausted() -> Reply {
    err(format!("ERR transaction aborted {CONFLICT_RETRIES_MAX} times by conflicting transactions; try again"))
}

/// Counts a client's transaction where its reply is produced: `None` is a failed `WATCH`.
fn count<T>(started: Instant, outcome: &Result<Option<T>, Reply>) {
    match outcome {
        Ok(Some(_)) => telemetry::transaction_committed(started),
        Ok(None) => telemetry::transaction_aborted(Abort::Watch),
        Err(e) if *e == conflicts_exhausted() => telemetry::transaction_aborted(Abort::Conflict),
        Err(_) => telemetry::transaction_aborted(Abort::Failed),
    }
}

fn integer_of(v: Option<Value>) -> i64 {
    v.and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok()).unwrap_or(0)
}

/// Capped doubling back-off with jitter, so conflicting clients do not retry in lock-step.
async fn backoff(attempt: u32, why: &str) {
    let base = CONFLICT_BACKOFF_MIN.saturating_mul(1 << attempt.min(10)).min(CONFLICT_BACKOFF_MAX);
    let jitter = rand::random::<f64>();
    tracing::trace!(attempt, "transaction conflict ({why}); retrying");
    telemetry::transaction_retried();
    tokio::time::sleep(base.mul_f64(0.5 + jitter)).await;
}

/// Compares a password without leaking, through timing, how many leading bytes were right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(pairs: &[(&str, Version)]) -> BTreeMap<Key, Version> {
        pairs.iter().map(|(k, v)| (k.as_bytes().to_vec(), *v)).collect()
    }

    fn keys(names: &[&str]) -> Vec<Key> {
        names.iter().map(|k| k.as_bytes().to_vec()).collect()
    }

    #[test]
    fn reads_of_keys_unchanged_since_the_watch_need_no_commit() {
        let seen = versions(&[("a", 3), ("b", 7)]);
        assert!(unchanged_since_seen(&keys(&["a", "b"]), &versions(&[("a", 3), ("b", 7)]), &BTreeMap::new(), &seen));
    }

    #[test]
    fn a_key_moved_or_never_seen_needs_the_commit() {
        let seen = versions(&[("a", 3), ("b", 7)]);
        let none = BTreeMap::new();
        assert!(!unchanged_since_seen(&keys(&["a", "b"]), &versions(&[("a", 3), ("b", 8)]), &none, &seen));
        assert!(!unchanged_since_seen(&keys(&["a", "c"]), &versions(&[("a", 3), ("c", 1)]), &none, &seen));
        assert!(!unchanged_since_seen(&[], &none, &none, &seen));
    }

    #[test]
    fn a_watched_key_not_read_again_needs_the_commit() {
        // WATCH a b; MULTI; GET b; EXEC — `a` may have moved: only the commit's check tells.
        let watched = versions(&[("a", 3), ("b", 7)]);
        let checks = versions(&[("a", 3), ("b", 7)]);
        assert!(!unchanged_since_seen(&keys(&["b"]), &checks, &watched, &watched));
    }
}
