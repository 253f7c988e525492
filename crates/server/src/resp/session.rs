//! One client connection: its protocol version, whether it authenticated, its `MULTI` queue, and
//! the store vnode of this host that coordinates its transactions (any host accepts any key; the
//! near vnode routes to the primaries).
//!
//! Every data command is a serializable transaction, run by the core's transaction client
//! (`waymark_core::client`): it says which reads and commits to send, evaluates the commands,
//! retries conflicts, and gives the reply. The session only carries its requests to the near
//! vnode, sleeps its back-offs, and writes its replies.

use super::command::{self, AclCmd, Cmd, CmdError, DataCmd, Db};
use super::{acl, info, scan};
use crate::command_stats::CallOutcome;
use crate::host::Shared;
use crate::telemetry::{self, Abort};
use crate::vnode::VnodeCmd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use waymark_core::client::{Answer, ClientLimits, Ended, Finished, Step, TxnClient};
use waymark_core::{ClientId, Key, Request, Response, ScanCursor};
use waymark_resp::{Protocol, Reply};

pub struct Session {
    shared: Arc<Shared>,
    pub id: ClientId,
    near: mpsc::Sender<VnodeCmd>,
    next_req: u64,
    pub proto: Protocol,
    pub authenticated: bool,
    /// When the bytes of the command being handled were read (a blocking command's place among
    /// those blocked on its keys, `crate::blocked`).
    pub arrived: std::time::Instant,
    /// The ACL user the connection runs as (`default` until an `AUTH` of another user).
    user: String,
    /// Its entry among the host's connections (`CLIENT LIST`).
    conn: crate::clients::Registration,
    name: Option<Vec<u8>>,
    /// Between `MULTI` and `EXEC`: the queued commands, and whether one of them was refused.
    multi: Option<(Vec<Cmd>, bool)>,
    /// The connection's transactions: its `WATCH`ed keys and the batch in progress.
    client: TxnClient,
    /// A reply was refused for its size (`limits.reply_max_bytes`): the connection closes after it.
    closing: bool,
    /// Where this connection's `SCAN`s stand, by the cursor numbers they were given.
    cursors: scan::Cursors,
    /// The request being handled was refused before it ran (`INFO commandstats`' rejected calls).
    rejected: bool,
    /// The database the connection selected (`SELECT`; `crate::database`).
    db: Db,
    /// Inside `MULTI`: the database the commands queued so far will run in (a queued `SELECT`
    /// changes it for those after it, and for the connection once `EXEC` runs it).
    multi_db: Option<Db>,
}

/// What the connection does after a reply.
pub enum Next {
    Continue,
    Close,
}

fn err(e: impl Into<String>) -> Reply {
    Reply::error(e)
}

/// A text reply: verbatim text in RESP3, a bulk string in RESP2 (as Redis answers `CLIENT LIST`).
fn text(t: String) -> Reply {
    Reply::Verbatim { format: *b"txt", text: t.into_bytes() }
}

impl Session {
    pub fn new(shared: Arc<Shared>, id: ClientId, conn: crate::clients::Registration) -> Self {
        let stores = &shared.stores;
        let near = stores[(id.0 as usize) % stores.len()].1.clone();
        let authenticated = shared.cfg.password.is_none();
        let limits = &shared.cfg.limits;
        let client_limits = ClientLimits {
            value_max_bytes: limits.value_max_bytes,
            reply_max_bytes: limits.reply_max_bytes,
            txn_max_bytes: limits.frame_max_bytes / 2,
            ..ClientLimits::default()
        };
        let client = TxnClient::new(client_limits, shared.cfg.breaks);
        Session {
            shared,
            id,
            near,
            next_req: 0,
            proto: Protocol::Resp2,
            authenticated,
            user: waymark_core::acl::DEFAULT_USER.to_string(),
            conn,
            name: None,
            multi: None,
            arrived: std::time::Instant::now(),
            client,
            closing: false,
            cursors: scan::Cursors::default(),
            rejected: false,
            db: Db::default(),
            multi_db: None,
        }
    }

    /// Handles one request's arguments, and notes in the connection's entry what it ran.
    /// Whether `args` is a command that may block this connection: a blocking list command
    /// outside `MULTI` (the server then watches for the client closing meanwhile).
    pub fn may_block(&self, args: &[Vec<u8>]) -> bool {
        self.multi.is_none()
            && args
                .first()
                .is_some_and(|name| super::list_args::is_blocking(&String::from_utf8_lossy(name).to_lowercase()))
    }

    pub async fn handle(&mut self, args: Vec<Vec<u8>>) -> (Reply, Next) {
        let cmd = command_name(&args);
        let begun = std::time::Instant::now();
        self.conn.update(|c| {
            (c.cmd, c.last) = (cmd.clone(), begun);
            c.commands += 1;
        });
        self.rejected = false;
        let handled = self.handle_request(args).await;
        let outcome = match &handled.0 {
            _ if self.rejected => CallOutcome::Rejected,
            Reply::Error(_) => CallOutcome::Failed,
            _ => CallOutcome::Done,
        };
        let usec = begun.elapsed().as_micros().try_into().unwrap_or(u64::MAX);
        self.shared.command_stats.record(&cmd, command::known, usec, outcome);
        let (multi, resp) = (self.multi.as_ref().map(|(queue, _)| queue.len()), self.resp_version());
        self.conn.update(|c| (c.multi, c.resp) = (multi, resp));
        handled
    }

    fn resp_version(&self) -> u8 {
        if self.proto == Protocol::Resp3 {
            3
        } else {
            2
        }
    }

    /// Notes the connection's name and user in its entry (after they change).
    fn note_identity(&self) {
        let (name, user) = (self.name.clone(), self.user.clone());
        self.conn.update(|c| (c.name, c.user) = (name, user));
    }

    async fn handle_request(&mut self, args: Vec<Vec<u8>>) -> (Reply, Next) {
        if self.authenticated {
            if let Err((refusal, next)) = self.permitted(&args) {
                self.rejected = true;
                // Inside MULTI a refused command fails the transaction, as in Redis.
                if let Some((_, failed)) = self.multi.as_mut() {
                    *failed = true;
                }
                return (refusal, next);
            }
        }
        let parsed = command::parse(args);
        if !self.authenticated && !matches!(parsed, Ok(Cmd::Auth { .. } | Cmd::Hello { .. } | Cmd::Quit | Cmd::Reset)) {
            self.rejected = true;
            return (err("NOAUTH Authentication required."), Next::Continue);
        }
        let parsed = parsed.and_then(|cmd| self.in_db(cmd));
        if let Some((queue, failed)) = self.multi.as_mut() {
            let full = queue.len() >= self.shared.cfg.limits.multi_queue_max;
            match parsed {
                // As in Redis, `RESET` is not queued either: it ends the transaction.
                Ok(Cmd::Exec | Cmd::Discard | Cmd::Multi | Cmd::Watch(_) | Cmd::Quit | Cmd::Reset) => {}
                Ok(_) if full => {
                    (*failed, self.rejected) = (true, true);
                    let max = self.shared.cfg.limits.multi_queue_max;
                    return (
                        err(format!("ERR MULTI holds at most {max} commands (limits.multi_queue_max)")),
                        Next::Continue,
                    );
                }
                Ok(cmd) => {
                    // As in Redis, a blocking command in a transaction does not block.
                    let cmd = match cmd {
                        Cmd::Blocking { cmd, .. } => Cmd::Data(cmd),
                        other => other,
                    };
                    if let Cmd::Select(n) = &cmd {
                        // As it will run in `EXEC`: for the commands queued after it.
                        self.multi_db = Db::new(*n).or(self.multi_db);
                    }
                    queue.push(cmd);
                    return (Reply::Simple("QUEUED".into()), Next::Continue);
                }
                Err(CmdError(e)) => {
                    (*failed, self.rejected) = (true, true);
                    return (err(e), Next::Continue);
                }
            }
        }
        match parsed {
            Err(CmdError(e)) => {
                self.rejected = true;
                (err(e), Next::Continue)
            }
            Ok(Cmd::Quit) => (Reply::ok(), Next::Close),
            Ok(cmd) => {
                let reply = self.run(cmd).await;
                (reply, if self.closing { Next::Close } else { Next::Continue })
            }
        }
    }

    /// Whether the connection's user may run `args` now (the users as this host holds them: a
    /// user deleted or turned off since its `AUTH` loses the connection, as in Redis).
    fn permitted(&self, args: &[Vec<u8>]) -> Result<(), (Reply, Next)> {
        let users = self.shared.acl.users();
        match users.get(&self.user) {
            Some(u) if u.unrestricted() => Ok(()),
            Some(u) if u.user.enabled => u.check(args).map_err(|denied| (err(denied.to_string()), Next::Continue)),
            _ => Err((err("ERR this connection's user was deleted or disabled"), Next::Close)),
        }
    }

    /// The command with the client's keys stored in its database (`crate::database`): the one
    /// selected, or the one `MULTI`'s queue will run in. `MOVE` and `COPY … DB` become the data
    /// command over both databases' keys.
    fn in_db(&self, cmd: Cmd) -> Result<Cmd, CmdError> {
        let db = self.multi_db.unwrap_or(self.db);
        let stored = |db: Db, key: Key| db.stored(key).map_err(|e| CmdError(e.to_string()));
        Ok(match cmd {
            Cmd::Data(_) if matches!(&cmd, Cmd::Data(d) if d.forges_head()) => {
                return Err(CmdError(waymark_core::client::evaluate::FORGED_HEAD.into()))
            }
            Cmd::Data(mut d) => {
                for key in d.keys_mut() {
                    *key = stored(db, std::mem::take(key))?;
                }
                Cmd::Data(d)
            }
            Cmd::Blocking { mut cmd, timeout_ms } => {
                for key in cmd.keys_mut() {
                    *key = stored(db, std::mem::take(key))?;
                }
                Cmd::Blocking { cmd, timeout_ms }
            }
            Cmd::Watch(keys) => Cmd::Watch(keys.into_iter().map(|k| stored(db, k)).collect::<Result<_, _>>()?),
            Cmd::ObjectEncoding(key) => Cmd::ObjectEncoding(stored(db, key)?),
            Cmd::ObjectRefcount(key) => Cmd::ObjectRefcount(stored(db, key)?),
            Cmd::Move { db: to, .. } if to == db => {
                return Err(CmdError("ERR source and destination objects are the same".into()))
            }
            Cmd::Move { key, db: to } => {
                Cmd::Data(DataCmd::Move { from: stored(db, key.clone())?, to: stored(to, key)? })
            }
            Cmd::CopyToDb { from, to, db: to_db, replace } => {
                Cmd::Data(DataCmd::Copy { from: stored(db, from)?, to: stored(to_db, to)?, replace })
            }
            other => other,
        })
    }

    /// The keys of a page that are the connection's database's, as the client named them.
    fn of_db(&self, stored: Vec<Key>) -> impl Iterator<Item = Key> + '_ {
        stored.into_iter().filter_map(|k| self.db.user_key(&k).map(<[u8]>::to_vec))
    }

    async fn run(&mut self, cmd: Cmd) -> Reply {
        match cmd {
            Cmd::Data(d) => self.single(d).await,
            Cmd::Blocking { cmd, timeout_ms } => self.blocking(cmd, timeout_ms).await,
            Cmd::Multi if self.multi.is_some() => err("ERR MULTI calls can not be nested"),
            Cmd::Multi => {
                (self.multi, self.multi_db) = (Some((vec![], false)), Some(self.db));
                Reply::ok()
            }
            Cmd::Exec => self.exec().await,
            Cmd::Discard => match self.multi.take() {
                Some(_) => {
                    self.multi_db = None;
                    self.client.unwatch();
                    Reply::ok()
                }
                None => err("ERR DISCARD without MULTI"),
            },
            Cmd::Watch(_) if self.multi.is_some() => err("ERR WATCH inside MULTI is not allowed"),
            Cmd::Watch(keys) => self.watch(keys).await,
            Cmd::Unwatch => {
                self.client.unwatch();
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
            Cmd::Time => {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                let (s, us) = (now.as_secs().to_string(), now.subsec_micros().to_string());
                Reply::Array(vec![Reply::bulk(s.into_bytes()), Reply::bulk(us.into_bytes())])
            }
            Cmd::Hello { proto, auth, name } => self.hello(proto, auth, name),
            Cmd::Auth { user, password } => self.auth(user.as_deref(), &password),
            Cmd::Select(n) => match Db::new(n) {
                Some(db) => {
                    self.db = db;
                    self.conn.update(|c| c.db = db.index());
                    Reply::ok()
                }
                None => err("ERR DB index is out of range"),
            },
            Cmd::SwapDb => err(
                "ERR SWAPDB is not supported by Waymark: its databases are key prefixes, and swapping two would rewrite every key of both in one transaction",
            ),
            Cmd::ClientSetName(n) => {
                self.name = Some(n);
                self.note_identity();
                Reply::ok()
            }
            Cmd::ClientGetName => self.name.clone().map_or(Reply::Null, Reply::bulk),
            Cmd::ClientSetInfo { lib_ver, value } => {
                self.conn.update(|c| *if lib_ver { &mut c.lib_ver } else { &mut c.lib_name } = Some(value));
                Reply::ok()
            }
            Cmd::ClientId => Reply::Integer(self.id.0 as i64),
            Cmd::ClientInfo => text(self.conn.line() + "\n"),
            Cmd::ClientList(ids) => text(self.shared.clients.list(ids.as_deref())),
            Cmd::ClientKillAddr(addr) => {
                let filter = crate::clients::KillFilter { addr: Some(addr), normal: true, ..Default::default() };
                match self.shared.clients.kill(&filter, self.id.0) {
                    0 => err("ERR No such client"),
                    _ => Reply::ok(),
                }
            }
            Cmd::ClientKill(filter) => Reply::Integer(self.shared.clients.kill(&filter, self.id.0) as i64),
            Cmd::ClientNoEvict => Reply::ok(),
            Cmd::Reset => self.reset(),
            Cmd::ObjectEncoding(key) => match self.single(DataCmd::Type(key)).await {
                // Waymark keeps every string as the bytes it was given (no `int` or `embstr`),
                // and a collection as a head and one record per element (`collection`): no
                // `listpack` or `hashtable`.
                Reply::Simple(t) if t == "string" => Reply::bulk(b"raw".to_vec()),
                Reply::Simple(t) if t == "none" => Reply::Null,
                Reply::Simple(_) => Reply::bulk(b"records".to_vec()),
                other => other,
            },
            Cmd::ObjectRefcount(key) => match self.single(DataCmd::Exists(vec![key])).await {
                Reply::Integer(1) => Reply::Integer(1),
                Reply::Integer(_) => Reply::Null,
                other => other,
            },
            Cmd::ObjectHelp => Reply::Array(
                [
                    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "ENCODING <key>",
                    "    Return the kind of internal representation used in order to store the value",
                    "    associated with a <key>.",
                    "REFCOUNT <key>",
                    "    Return the number of references of the value associated with the specified",
                    "    <key> (1: Waymark shares no value between keys).",
                    "HELP",
                    "    Print this help.",
                ]
                .iter()
                .map(|l| Reply::Simple(l.to_string()))
                .collect(),
            ),
            Cmd::ConfigGet(patterns) => info::config_get(&self.shared, &patterns),
            Cmd::ConfigSet(pairs) => info::config_set(&self.shared, &pairs),
            Cmd::ConfigResetStat => {
                self.shared.command_stats.reset();
                Reply::ok()
            }
            Cmd::FunctionFlush => Reply::ok(),
            Cmd::Command => info::command_table(),
            Cmd::CommandCount => Reply::Integer(command::commands().count() as i64),
            Cmd::CommandDocs => Reply::Map(vec![]),
            Cmd::CommandInfo(names) => info::command_info(&names),
            Cmd::Info(sections) => info::info(&self.shared, &sections).await,
            Cmd::DbSize => Reply::Integer(info::dbsize_of(&self.shared, self.db).await as i64),
            Cmd::Scan { cursor, pattern, count, kind } => self.scan(cursor, pattern, count, kind).await,
            Cmd::Keys(pattern) => self.keys(&pattern).await,
            Cmd::RandomKey => self.random_key().await,
            Cmd::Flush { all } => self.flush(all).await,
            Cmd::Acl(acl) => self.acl(acl).await,
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
            self.note_identity();
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

    /// `RESET`: the connection as it was opened — out of `MULTI`, nothing watched, RESP2, no name,
    /// the `default` user, and not authenticated if the node asks for a password.
    fn reset(&mut self) -> Reply {
        (self.multi, self.multi_db, self.db) = (None, None, Db::default());
        self.conn.update(|c| c.db = 0);
        self.client.unwatch();
        self.proto = Protocol::Resp2;
        self.name = None;
        self.user = waymark_core::acl::DEFAULT_USER.to_string();
        self.authenticated = self.shared.cfg.password.is_none();
        self.note_identity();
        self.conn.update(|c| (c.lib_name, c.lib_ver) = (None, None));
        Reply::Simple("RESET".into())
    }

    /// `AUTH [user] password`: the `default` user by the node's password (as before ACL users),
    /// any other by the cluster's ACL users.
    fn auth(&mut self, user: Option<&[u8]>, password: &[u8]) -> Reply {
        if let Some(name) = user.filter(|u| *u != waymark_core::acl::DEFAULT_USER.as_bytes()) {
            return self.auth_user(name, password);
        }
        let Some(expected) = self.shared.cfg.password.as_deref() else {
            return err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
        };
        let user_ok = user.is_none_or(|u| u == b"default");
        if user_ok && constant_time_eq(password, expected) {
            self.authenticated = true;
            self.user = waymark_core::acl::DEFAULT_USER.to_string();
            self.note_identity();
            Reply::ok()
        } else {
            err("WRONGPASS invalid username-password pair or user is disabled.")
        }
    }

    fn auth_user(&mut self, name: &[u8], password: &[u8]) -> Reply {
        let users = self.shared.acl.users();
        let name = String::from_utf8_lossy(name);
        match users.get(&name) {
            Some(u) if u.opens(password) => {
                self.authenticated = true;
                self.user = name.into_owned();
                self.note_identity();
                Reply::ok()
            }
            found => {
                // A user that does not exist costs a hash too: the time does not tell it apart.
                if found.is_none() {
                    let _ = waymark_core::acl::PasswordHash::new(password, [0; 16]);
                }
                err("WRONGPASS invalid username-password pair or user is disabled.")
            }
        }
    }

    /// `ACL …`: answered from the users this host holds; changes proposed to the whole cluster.
    async fn acl(&mut self, cmd: AclCmd) -> Reply {
        let users = self.shared.acl.users();
        match cmd {
            AclCmd::WhoAmI => Reply::bulk(self.user.clone().into_bytes()),
            AclCmd::Cat(category) => acl::cat(category.as_deref()),
            AclCmd::List => acl::list(&users),
            AclCmd::Users => acl::names(&users),
            AclCmd::GetUser(name) => acl::get_user(&users, &name),
            AclCmd::SetUser { name, rules } => match acl::set_user(&users, &name, &rules) {
                Ok((name, stored)) => self.alter_user(name, stored).await,
                Err(e) => err(e.to_string()),
            },
            AclCmd::DelUser(names) => {
                let names = match acl::users_to_delete(&users, &names) {
                    Ok(names) => names,
                    Err(e) => return err(e.to_string()),
                };
                let count = names.len();
                for name in names {
                    if let Reply::Error(e) = self.alter_user(name, vec![]).await {
                        return Reply::Error(e);
                    }
                }
                Reply::Integer(count as i64)
            }
        }
    }

    /// Proposes `acl/<user>` = `stored` through the near vnode and waits for the cluster's word,
    /// then (a while at most) for this host to apply it: the client's next `AUTH` here sees it.
    async fn alter_user(&mut self, user: String, stored: Vec<u8>) -> Reply {
        let reply = self.propose_user(user.clone(), stored.clone()).await;
        if reply == Reply::ok() {
            let applied = |users: &waymark_core::acl::Users| {
                users.get(&user).map(|c| c.user.encode()) == (!stored.is_empty()).then(|| stored.clone())
            };
            for _ in 0..APPLIED_HERE_POLLS_MAX {
                if applied(&self.shared.acl.users()) {
                    break;
                }
                tokio::time::sleep(APPLIED_HERE_POLL).await;
            }
        }
        reply
    }

    async fn propose_user(&mut self, user: String, stored: Vec<u8>) -> Reply {
        let answers = match self.send_all(vec![Request::SetUser { user, stored }]).await {
            Ok(answers) => answers,
            Err(e) => return err(e.to_string()),
        };
        match answers.into_iter().next().flatten() {
            Some(Response::Altered { ok: true }) => Reply::ok(),
            Some(Response::Altered { ok: false }) => {
                err("ERR the cluster did not take the ACL change (no root, or the user limit): try again")
            }
            Some(Response::Unavailable { why }) => err(why),
            Some(other) => err(format!("ERR unexpected answer to an ACL change: {other:?}")),
            None => err("ERR no answer within node.client_timeout: the ACL change may or may not be in force"),
        }
    }

    async fn watch(&mut self, keys: Vec<Key>) -> Reply {
        let step = self.client.watch(keys);
        match self.drive(step).await {
            Ok(Finished { answer: Answer::Error(e), .. }) => err(e),
            Ok(_) => Reply::ok(),
            Err(e) => err(e.to_string()),
        }
    }

    async fn exec(&mut self) -> Reply {
        let Some((queue, failed)) = self.multi.take() else {
            return err("ERR EXEC without MULTI");
        };
        self.multi_db = None;
        if failed {
            self.client.unwatch();
            return err("EXECABORT Transaction discarded because of previous errors.");
        }
        let data: Vec<DataCmd> =
            queue.iter().filter_map(|c| if let Cmd::Data(d) = c { Some(d.clone()) } else { None }).collect();
        let step = self.client.exec(data);
        let mut data_replies = match self.finish(step).await {
            Answer::Replies(replies) => replies.into_iter(),
            Answer::WatchFailed => return Reply::NullArray,
            Answer::Error(e) => return err(e),
            Answer::Keys { .. } => unreachable!("EXEC runs no scan"),
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

    /// A data command outside `MULTI`.
    async fn single(&mut self, cmd: DataCmd) -> Reply {
        let step = self.client.command(cmd);
        self.reply_of(step).await
    }

    /// A blocking command outside `MULTI`: it looks for an element (the transaction client's
    /// `Step::Blocked` between looks) only while it is the first of this host's connections
    /// blocked on one of its keys (`crate::blocked`), so they are served in the order they
    /// blocked; the others wait for it to leave, or for their own time-out.
    async fn blocking(&mut self, cmd: DataCmd, timeout_ms: u64) -> Reply {
        let keys: Vec<Key> = match &cmd {
            DataCmd::LMove { from, .. } => vec![from.clone()],
            other => other.keys().into_iter().cloned().collect(),
        };
        let turn = self.shared.clients.blocked.join(self.id.0, self.arrived, keys);
        let started = Instant::now();
        let timeout = (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms));
        // Not even a first look while others blocked first on its keys: an element pushed now is
        // theirs (Redis serves them before it runs the next command).
        if !turn.is_first() {
            self.conn.update(|c| c.blocked = true);
        }
        while !turn.is_first() && timeout.is_none_or(|t| started.elapsed() < t) {
            turn.wait(Duration::from_millis(10)).await;
        }
        let mut step = self.client.blocking(cmd, timeout_ms);
        loop {
            step = match self.drive_to_block(step).await {
                Ok(step) => step,
                Err(e) => return err(e.to_string()),
            };
            let Step::Blocked { poll_us } = step else { break };
            // Blocked from its first look that found nothing to its reply, its looks included.
            self.conn.update(|c| c.blocked = true);
            let poll = Duration::from_micros(poll_us);
            loop {
                if turn.is_first() {
                    tokio::time::sleep(poll).await;
                    break;
                }
                if timeout.is_some_and(|t| started.elapsed() >= t) {
                    break; // it looks once more, and answers nil
                }
                turn.wait(poll.max(Duration::from_millis(10))).await;
            }
            step = self.client.resume();
        }
        self.conn.update(|c| c.blocked = false);
        let reply = self.reply_of(step).await;
        drop(turn);
        reply
    }

    /// The reply of a data command outside `MULTI`, from its first step.
    async fn reply_of(&mut self, step: Step) -> Reply {
        match self.finish(step).await {
            Answer::Replies(mut replies) => replies.remove(0),
            Answer::WatchFailed => Reply::NullArray,
            Answer::Error(e) => err(e),
            Answer::Keys { .. } => unreachable!("a data command is no scan"),
        }
    }

    /// One page of the keyspace from `cursor`: its keys, or the error the client hears.
    async fn page(&mut self, cursor: ScanCursor, count: u32) -> Result<(Vec<Key>, Option<ScanCursor>), String> {
        let step = self.client.scan(cursor, count);
        match self.drive(step).await {
            Ok(Finished { answer: Answer::Keys { keys, next }, .. }) => Ok((keys, next)),
            Ok(Finished { answer: Answer::Error(e), .. }) => Err(e),
            Ok(other) => Err(format!("ERR unexpected answer to a scan: {:?}", other.answer)),
            Err(e) => Err(e.to_string()),
        }
    }

    /// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: one page (`resp/scan.rs`).
    async fn scan(&mut self, cursor: u64, pattern: Option<Vec<u8>>, count: u32, kind: Option<String>) -> Reply {
        let Some(glob) = scan::glob(pattern.as_deref()) else {
            return Reply::Array(vec![Reply::bulk("0"), Reply::Array(vec![])]);
        };
        let from = self.cursors.resume(cursor);
        let (keys, next) = match self.page(from, count).await {
            Ok(page) => page,
            Err(e) => return err(e),
        };
        let mut keys: Vec<Key> = self.of_db(keys).filter(|k| glob.as_ref().is_none_or(|g| g.matches(k))).collect();
        if let Some(kind) = kind {
            keys = match self.of_type(keys, &kind).await {
                Ok(keys) => keys,
                Err(e) => return err(e),
            };
        }
        let cursor = next.map_or(0, |n| self.cursors.keep(n));
        Reply::Array(vec![Reply::bulk(cursor.to_string()), Reply::Array(keys.into_iter().map(Reply::bulk).collect())])
    }

    /// The keys (of the connection's database) whose `TYPE` is `kind`: one read each.
    async fn of_type(&mut self, keys: Vec<Key>, kind: &str) -> Result<Vec<Key>, String> {
        let mut kept = vec![];
        for key in keys {
            let stored = self.db.stored(key.clone()).map_err(|e| e.to_string())?;
            match self.single(DataCmd::Type(stored)).await {
                Reply::Simple(t) if t.eq_ignore_ascii_case(kind) => kept.push(key),
                Reply::Simple(_) => {}
                Reply::Error(e) => return Err(e),
                other => return Err(format!("ERR unexpected TYPE reply {other:?}")),
            }
        }
        Ok(kept)
    }

    /// `KEYS pattern`: every matching key, within the reply limit.
    async fn keys(&mut self, pattern: &[u8]) -> Reply {
        let Some(glob) = scan::glob(Some(pattern)) else { return Reply::Array(vec![]) };
        let max_bytes = self.shared.cfg.limits.reply_max_bytes;
        let (mut found, mut bytes) = (vec![], 0usize);
        let mut cursor = ScanCursor::default();
        for _ in 0..scan::WHOLE_PAGES_MAX {
            let (keys, next) = match self.page(cursor, scan::WHOLE_PAGE_KEYS).await {
                Ok(page) => page,
                Err(e) => return err(e),
            };
            let matching: Vec<Key> = self.of_db(keys).filter(|k| glob.as_ref().is_none_or(|g| g.matches(k))).collect();
            for k in matching {
                bytes = bytes.saturating_add(k.len() + 16);
                found.push(k);
            }
            if bytes > max_bytes {
                return err(format!("ERR the reply would exceed limits.reply_max_bytes ({max_bytes} bytes): use SCAN"));
            }
            match next {
                Some(n) => cursor = n,
                None => return Reply::Array(found.into_iter().map(Reply::bulk).collect()),
            }
        }
        err(scan::too_many_pages())
    }

    /// `RANDOMKEY`: a key of the first partition holding one, from a random partition on.
    async fn random_key(&mut self) -> Reply {
        let start = rand::random::<u32>() % self.shared.cfg.cluster.partitions.max(1);
        let mut cursor = ScanCursor { partition: start, after: None };
        // Whether the scan went past the last partition and on from the first, up to `start`.
        let mut around = false;
        for _ in 0..scan::WHOLE_PAGES_MAX {
            let (keys, next) = match self.page(cursor.clone(), scan::RANDOM_PAGE_KEYS).await {
                Ok(page) => page,
                Err(e) => return err(e),
            };
            let keys: Vec<Key> = self.of_db(keys).collect();
            if !keys.is_empty() {
                let at = rand::random::<usize>() % keys.len();
                return Reply::bulk(keys[at].clone());
            }
            cursor = match next {
                Some(n) if around && n.partition >= start => return Reply::Null,
                Some(n) => n,
                None if !around && start > 0 => {
                    around = true;
                    ScanCursor::default()
                }
                None => return Reply::Null,
            };
        }
        Reply::Null
    }

    /// `FLUSHALL` (`all`: every database's keys) or `FLUSHDB` (the connection's database's): the
    /// keys deleted a page at a time, each page one transaction — not one transaction for the
    /// whole keyspace (`resp/scan.rs`).
    async fn flush(&mut self, all: bool) -> Reply {
        let mut cursor = ScanCursor::default();
        for _ in 0..scan::WHOLE_PAGES_MAX {
            let (mut keys, next) = match self.page(cursor, scan::FLUSH_PAGE_KEYS).await {
                Ok(page) => page,
                Err(e) => return err(e),
            };
            if !all {
                keys.retain(|k| waymark_core::database::db_of(k) == self.db);
            }
            if !keys.is_empty() {
                if let Reply::Error(e) = self.single(DataCmd::Del(keys)).await {
                    return Reply::Error(e);
                }
            }
            match next {
                Some(n) => cursor = n,
                None => return Reply::ok(),
            }
        }
        err(scan::too_many_pages())
    }

    /// Drives a data batch to its end, counting it and closing the connection after a reply
    /// refused for its size.
    async fn finish(&mut self, step: Step) -> Answer {
        let started = Instant::now();
        match self.drive(step).await {
            Ok(finished) => {
                count(started, finished.ended);
                if finished.close {
                    tracing::warn!(client = self.id.0, "{:?}", finished.answer);
                    self.closing = true;
                }
                finished.answer
            }
            Err(e) => {
                count(started, Ended::Failed);
                Answer::Error(e.to_string())
            }
        }
    }

    /// Carries out the client's steps until its batch is done: its requests to the near vnode,
    /// its back-offs. `Err`: the node is stopping, and the batch was given up.
    async fn drive(&mut self, mut step: Step) -> Result<Finished, Stopping> {
        loop {
            step = match self.drive_to_block(step).await? {
                Step::Done(finished) => return Ok(finished),
                // A blocking command's waits are `blocking`'s; no other batch blocks.
                Step::Blocked { poll_us } => {
                    tokio::time::sleep(Duration::from_micros(poll_us)).await;
                    self.client.resume()
                }
                other => unreachable!("drive_to_block stops only when done or blocked, not at {other:?}"),
            }
        }
    }

    /// Carries out the client's requests and back-offs until its batch is done or blocked.
    async fn drive_to_block(&mut self, mut step: Step) -> Result<Step, Stopping> {
        loop {
            step = match step {
                Step::Send(requests) => match self.send_all(requests).await {
                    Ok(answers) => self.client.on_answers(answers),
                    Err(e) => {
                        self.client.abandon();
                        return Err(e);
                    }
                },
                Step::Backoff { base_us, why } => {
                    backoff(base_us, &why).await;
                    self.client.resume()
                }
                Step::Blocked { .. } | Step::Done(_) => return Ok(step),
            }
        }
    }

    /// Hands requests to this connection's near vnode together, so reads cost one round trip to
    /// the primaries, not one each; then waits for their answers until `client_timeout` from now
    /// (`None`: not answered by then).
    async fn send_all(&mut self, requests: Vec<Request>) -> Result<Vec<Option<Response>>, Stopping> {
        let mut pending = Vec::with_capacity(requests.len());
        for request in requests {
            self.next_req += 1;
            let (reply, rx) = oneshot::channel();
            let cmd = VnodeCmd::Client { client: self.id, req: self.next_req, request, reply };
            if self.near.send(cmd).await.is_err() {
                return Err(Stopping::Unsent);
            }
            pending.push(rx);
        }
        let deadline = tokio::time::Instant::now() + self.shared.cfg.client_timeout;
        let mut answers = Vec::with_capacity(pending.len());
        for rx in pending {
            answers.push(match tokio::time::timeout_at(deadline, rx).await {
                Ok(Ok(response)) => Some(response),
                Ok(Err(_)) => return Err(Stopping::InFlight),
                Err(_) => None,
            });
        }
        Ok(answers)
    }
}

/// How often, and how many times, an ACL change the cluster took is looked for among this host's
/// users before the client is answered (2 s at most: the change is in force cluster-wide anyway).
const APPLIED_HERE_POLL: Duration = Duration::from_millis(5);
const APPLIED_HERE_POLLS_MAX: usize = 400;

/// The node stopped under a batch: its requests could not be handed over, or their answers will
/// not come.
#[derive(Debug, thiserror::Error)]
enum Stopping {
    #[error("ERR the node is shutting down")]
    Unsent,
    #[error("ERR the node is shutting down (a write in flight may or may not have committed)")]
    InFlight,
}

/// Counts a client's transaction where its reply is produced.
fn count(started: Instant, ended: Ended) {
    match ended {
        Ended::Committed => telemetry::transaction_committed(started),
        Ended::WatchFailed => telemetry::transaction_aborted(Abort::Watch),
        Ended::Conflicts => telemetry::transaction_aborted(Abort::Conflict),
        Ended::Failed => telemetry::transaction_aborted(Abort::Failed),
        Ended::NoTransaction => {}
    }
}

/// The client's back-off, with jitter (between half and one and a half times `base_us`), so
/// conflicting clients do not retry in lock-step.
async fn backoff(base_us: u64, why: &str) {
    let jitter = rand::random::<f64>();
    tracing::trace!("transaction conflict ({why}); retrying");
    telemetry::transaction_retried();
    tokio::time::sleep(Duration::from_micros(base_us).mul_f64(0.5 + jitter)).await;
}

/// Compares a password without leaking, through timing, how many leading bytes were right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A request's command as `CLIENT LIST` names it: `get`, or `client|list` for a subcommand.
fn command_name(args: &[Vec<u8>]) -> String {
    const CONTAINERS: [&str; 7] = ["client", "config", "acl", "object", "memory", "command", "function"];
    let Some(name) = args.first() else { return "NULL".into() };
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    match args.get(1) {
        Some(sub) if CONTAINERS.contains(&name.as_str()) => {
            format!("{name}|{}", String::from_utf8_lossy(sub).to_ascii_lowercase())
        }
        _ => name,
    }
}
