//! How Redis data commands become one Waymark transaction (DESIGN §3): the keys whose current
//! value a reply depends on are read first; the commands are then evaluated in order against
//! those values, giving each command's reply and the transaction's writes; the transaction carries
//! a read check for every key read, so it commits only if those values are still current — and
//! then every reply is exactly what running the commands at the commit point gives.
//!
//! Pure: no IO. The client's run (`run.rs`) does the reads and submits the transaction.

use super::command::DataCmd;
use crate::ids::{Key, Value};
use crate::store::{Write, WriteOp};
use std::collections::{BTreeMap, BTreeSet};
use waymark_resp::Reply;

/// The keys whose current values the commands' replies or writes depend on. `SET` and `MSET`
/// depend on nothing: they are blind writes.
pub fn keys_to_read(cmds: &[DataCmd]) -> BTreeSet<Key> {
    let mut keys = BTreeSet::new();
    for c in cmds {
        match c {
            DataCmd::Get(k) | DataCmd::IncrBy(k, _) | DataCmd::Append(k, _) | DataCmd::StrLen(k) => {
                keys.insert(k.clone());
            }
            DataCmd::Del(ks) | DataCmd::Exists(ks) | DataCmd::MGet(ks) => keys.extend(ks.iter().cloned()),
            DataCmd::Set(..) | DataCmd::MSet(..) => {}
        }
    }
    keys
}

/// The commands of a batch the primaries evaluate under their locks, with no read first
/// (`at_primary[i]`), and the writes they become: every `SET`, `MSET`, `INCRBY`/`DECRBY` and
/// `APPEND` whose keys no other command of the batch names, nor the command twice (a second
/// command on a key would need the first one's result). The other commands are evaluated here,
/// over the keys they read (`evaluate`).
///
/// Why it is the same transaction: such a command, evaluated at its primary under its lock, in a
/// transaction whose read checks are the `WATCH`ed versions and the versions of every key read
/// here, gives the value and the reply that reading the key and evaluating here would, at the
/// same commit point — one read fewer, and no read check to conflict on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtPrimaries {
    pub at_primary: Vec<bool>,
    pub writes: Vec<Write>,
}

pub fn at_primaries(cmds: &[DataCmd]) -> AtPrimaries {
    let mut named: BTreeMap<&Key, usize> = BTreeMap::new();
    for key in cmds.iter().flat_map(keys_of) {
        *named.entry(key).or_default() += 1;
    }
    let alone = |c: &DataCmd| keys_of(c).iter().all(|k| named.get(k) == Some(&1));
    let mut writes = vec![];
    let at_primary = cmds
        .iter()
        .map(|c| {
            let Some(mine) = writes_of(c).filter(|_| alone(c)) else { return false };
            writes.extend(mine);
            true
        })
        .collect();
    AtPrimaries { at_primary, writes }
}

/// The keys a command names, each as often as it names it.
fn keys_of(c: &DataCmd) -> Vec<&Key> {
    match c {
        DataCmd::Get(k) | DataCmd::Set(k, _) | DataCmd::IncrBy(k, _) | DataCmd::Append(k, _) | DataCmd::StrLen(k) => {
            vec![k]
        }
        DataCmd::Del(ks) | DataCmd::Exists(ks) | DataCmd::MGet(ks) => ks.iter().collect(),
        DataCmd::MSet(pairs) => pairs.iter().map(|(k, _)| k).collect(),
    }
}

/// A command as writes a primary can evaluate, if it is one.
fn writes_of(c: &DataCmd) -> Option<Vec<Write>> {
    let write = |key: &Key, op: WriteOp| Write { key: key.clone(), op };
    match c {
        DataCmd::Set(k, v) => Some(vec![write(k, WriteOp::Set(v.clone()))]),
        DataCmd::MSet(pairs) => Some(pairs.iter().map(|(k, v)| write(k, WriteOp::Set(v.clone()))).collect()),
        DataCmd::IncrBy(k, by) => Some(vec![write(k, WriteOp::IncrBy(*by))]),
        DataCmd::Append(k, v) => Some(vec![write(k, WriteOp::Append(v.clone()))]),
        _ => None,
    }
}

/// The reply of a command `at_primaries` sent to its primary, from the values the commit
/// resolved (`resolved(key)`: a key's value after the transaction).
pub fn reply_at_primary(c: &DataCmd, resolved: impl Fn(&Key) -> Option<Value>) -> Reply {
    let integer = |v: Option<Value>| v.and_then(|v| String::from_utf8(v).ok()?.parse::<i64>().ok());
    match c {
        DataCmd::IncrBy(k, _) => {
            integer(resolved(k)).map_or_else(|| Reply::error("ERR value is not an integer"), Reply::Integer)
        }
        DataCmd::Append(k, _) => Reply::Integer(resolved(k).map_or(0, |v| v.len() as i64)),
        _ => Reply::ok(),
    }
}

/// The replies would be larger than the client may be sent (`limits.reply_max_bytes`).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("ERR the reply would exceed limits.reply_max_bytes ({max} bytes): closing the connection")]
pub struct ReplyTooLarge {
    pub max: usize,
}

/// The commands run in order over the values read.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluated {
    pub replies: Vec<Reply>,
    /// The final value of every key written (`Del` for a key deleted).
    pub writes: Vec<Write>,
}

/// Runs `cmds` over `read` (the current value of every key `keys_to_read` named; `None` if the
/// key does not exist). A command that fails (`INCR` on text, a value grown past the limit)
/// answers with its error and writes nothing, as in Redis; the others go on.
///
/// The values the replies carry are counted before each reply is built: past `reply_max_bytes`
/// nothing more is copied and the whole batch is refused (`ReplyTooLarge`).
pub fn evaluate(
    cmds: &[DataCmd],
    read: &BTreeMap<Key, Option<Value>>,
    value_max_bytes: usize,
    reply_max_bytes: usize,
) -> Result<Evaluated, ReplyTooLarge> {
    let mut state = Overlay { values: read.clone(), written: BTreeSet::new() };
    let mut reply_bytes = 0usize;
    let mut replies = Vec::with_capacity(cmds.len());
    for c in cmds {
        reply_bytes = reply_bytes.saturating_add(state.reply_bytes(c));
        if reply_bytes > reply_max_bytes {
            return Err(ReplyTooLarge { max: reply_max_bytes });
        }
        replies.push(state.run(c, value_max_bytes));
    }
    let writes = state
        .written
        .iter()
        .map(|k| match state.values.get(k).cloned().flatten() {
            Some(v) => Write { key: k.clone(), op: WriteOp::Set(v) },
            None => Write { key: k.clone(), op: WriteOp::Del },
        })
        .collect();
    Ok(Evaluated { replies, writes })
}

struct Overlay {
    values: BTreeMap<Key, Option<Value>>,
    written: BTreeSet<Key>,
}

impl Overlay {
    fn get(&self, k: &Key) -> Option<&Value> {
        debug_assert!(self.values.contains_key(k), "key {k:?} was neither read nor written");
        self.values.get(k).and_then(|v| v.as_ref())
    }

    fn put(&mut self, k: &Key, v: Option<Value>) {
        self.values.insert(k.clone(), v);
        self.written.insert(k.clone());
    }

    /// About how many bytes `c`'s reply takes on the wire, from the values it would carry (each
    /// with a 16-byte header), without building it.
    fn reply_bytes(&self, c: &DataCmd) -> usize {
        let value = |k: &Key| self.get(k).map_or(0, |v| v.len()) + 16;
        match c {
            DataCmd::Get(k) => value(k),
            DataCmd::MGet(ks) => ks.iter().map(value).fold(16, usize::saturating_add),
            _ => 16,
        }
    }

    fn run(&mut self, c: &DataCmd, value_max_bytes: usize) -> Reply {
        match c {
            DataCmd::Get(k) => self.get(k).map_or(Reply::Null, |v| Reply::bulk(v.clone())),
            DataCmd::Set(k, v) => {
                self.put(k, Some(v.clone()));
                Reply::ok()
            }
            DataCmd::MSet(pairs) => {
                pairs.iter().for_each(|(k, v)| self.put(k, Some(v.clone())));
                Reply::ok()
            }
            DataCmd::Del(ks) => {
                let mut deleted = 0;
                for k in ks {
                    if self.get(k).is_some() {
                        self.put(k, None);
                        deleted += 1;
                    }
                }
                Reply::Integer(deleted)
            }
            DataCmd::Exists(ks) => Reply::Integer(ks.iter().filter(|k| self.get(k).is_some()).count() as i64),
            DataCmd::MGet(ks) => {
                Reply::Array(ks.iter().map(|k| self.get(k).map_or(Reply::Null, |v| Reply::bulk(v.clone()))).collect())
            }
            DataCmd::StrLen(k) => Reply::Integer(self.get(k).map_or(0, |v| v.len() as i64)),
            DataCmd::IncrBy(k, by) => self.incr_by(k, *by),
            DataCmd::Append(k, v) => {
                let mut new = self.get(k).cloned().unwrap_or_default();
                new.extend_from_slice(v);
                if new.len() > value_max_bytes {
                    return Reply::error(format!("ERR string exceeds maximum allowed size ({value_max_bytes} bytes)"));
                }
                let len = new.len() as i64;
                self.put(k, Some(new));
                Reply::Integer(len)
            }
        }
    }

    fn incr_by(&mut self, k: &Key, by: i64) -> Reply {
        let current = match self.get(k) {
            None => 0,
            Some(v) => match std::str::from_utf8(v).ok().and_then(|s| s.parse::<i64>().ok()) {
                Some(n) => n,
                None => return Reply::error("ERR value is not an integer or out of range"),
            },
        };
        let Some(new) = current.checked_add(by) else {
            return Reply::error("ERR increment or decrement would overflow");
        };
        self.put(k, Some(new.to_string().into_bytes()));
        Reply::Integer(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Key {
        s.as_bytes().to_vec()
    }

    fn read(pairs: &[(&str, Option<&str>)]) -> BTreeMap<Key, Option<Value>> {
        pairs.iter().map(|(key, v)| (k(key), v.map(|v| v.as_bytes().to_vec()))).collect()
    }

    #[test]
    fn a_transaction_sees_its_own_writes_in_order() {
        let cmds = vec![
            DataCmd::IncrBy(k("a"), 5),
            DataCmd::IncrBy(k("a"), 1),
            DataCmd::Set(k("b"), k("x")),
            DataCmd::Get(k("b")),
            DataCmd::Del(vec![k("b"), k("b"), k("c")]),
        ];
        assert_eq!(keys_to_read(&cmds), [k("a"), k("b"), k("c")].into_iter().collect());
        let e = evaluate(&cmds, &read(&[("a", Some("10")), ("b", None), ("c", None)]), 1 << 20, usize::MAX)
            .expect("within the reply limit");
        assert_eq!(
            e.replies,
            vec![Reply::Integer(15), Reply::Integer(16), Reply::ok(), Reply::bulk("x"), Reply::Integer(1)]
        );
        assert_eq!(
            e.writes,
            vec![Write { key: k("a"), op: WriteOp::Set(k("16")) }, Write { key: k("b"), op: WriteOp::Del }]
        );
    }

    #[test]
    fn a_failing_command_answers_its_error_and_writes_nothing_while_the_others_apply() {
        let cmds = vec![DataCmd::IncrBy(k("t"), 1), DataCmd::Append(k("t"), k("!"))];
        let e = evaluate(&cmds, &read(&[("t", Some("text"))]), 1 << 20, usize::MAX).expect("within the reply limit");
        assert_eq!(e.replies, vec![Reply::error("ERR value is not an integer or out of range"), Reply::Integer(5)]);
        assert_eq!(e.writes, vec![Write { key: k("t"), op: WriteOp::Set(k("text!")) }]);
    }

    #[test]
    fn blind_writes_need_no_read_and_counts_follow_redis() {
        let cmds = vec![DataCmd::MSet(vec![(k("a"), k("1"))]), DataCmd::Exists(vec![k("a"), k("a"), k("z")])];
        assert_eq!(keys_to_read(&cmds), [k("a"), k("z")].into_iter().collect());
        let e =
            evaluate(&cmds, &read(&[("a", None), ("z", None)]), 1 << 20, usize::MAX).expect("within the reply limit");
        assert_eq!(e.replies, vec![Reply::ok(), Reply::Integer(2)]);
    }

    #[test]
    fn overflow_and_size_limits_are_errors() {
        let e = evaluate(&[DataCmd::IncrBy(k("n"), 1)], &read(&[("n", Some("9223372036854775807"))]), 16, usize::MAX)
            .expect("within the reply limit");
        assert_eq!(e.replies, vec![Reply::error("ERR increment or decrement would overflow")]);
        let e = evaluate(&[DataCmd::Append(k("s"), vec![b'x'; 20])], &read(&[("s", None)]), 16, usize::MAX)
            .expect("within the reply limit");
        assert!(matches!(&e.replies[0], Reply::Error(m) if m.contains("maximum allowed size")));
        assert!(e.writes.is_empty());
    }

    #[test]
    fn increments_and_blind_writes_of_distinct_keys_need_no_read() {
        let cmds = vec![DataCmd::IncrBy(k("a"), -5), DataCmd::IncrBy(k("b"), 5), DataCmd::Set(k("c"), k("x"))];
        let split = at_primaries(&cmds);
        assert_eq!(split.at_primary, vec![true, true, true]);
        assert_eq!(split.writes[0], Write { key: k("a"), op: WriteOp::IncrBy(-5) });
        let after = read(&[("a", Some("95")), ("b", Some("105")), ("c", Some("x"))]);
        let replies: Vec<Reply> =
            cmds.iter().map(|c| reply_at_primary(c, |key| after.get(key).cloned().flatten())).collect();
        // The same replies as reading first and evaluating here.
        let e = evaluate(&cmds, &read(&[("a", Some("100")), ("b", Some("100"))]), 1 << 20, usize::MAX)
            .expect("within the reply limit");
        assert_eq!(replies, e.replies);
        assert_eq!(replies, vec![Reply::Integer(95), Reply::Integer(105), Reply::ok()]);
    }

    #[test]
    fn a_key_named_twice_keeps_its_commands_here_and_the_others_still_go_to_the_primaries() {
        let twice = at_primaries(&[DataCmd::IncrBy(k("a"), 1), DataCmd::IncrBy(k("a"), 1)]);
        assert_eq!(twice.at_primary, vec![false, false]);
        let read_then_write = at_primaries(&[DataCmd::Get(k("a")), DataCmd::Set(k("a"), k("x"))]);
        assert_eq!(read_then_write.at_primary, vec![false, false]);
        let mixed = at_primaries(&[DataCmd::Get(k("l1")), DataCmd::Append(k("l2"), k("7,"))]);
        assert_eq!(mixed.at_primary, vec![false, true]);
        assert_eq!(mixed.writes, vec![Write { key: k("l2"), op: WriteOp::Append(k("7,")) }]);
        let mset_twice = at_primaries(&[DataCmd::MSet(vec![(k("a"), k("1")), (k("a"), k("2"))])]);
        assert_eq!(mset_twice.at_primary, vec![false]);
    }

    /// `MGET k k k …`: one value read, repeated in the reply. Counted before it is copied.
    #[test]
    fn a_reply_past_the_limit_is_refused_before_its_values_are_copied() {
        let repeats = vec![k("big"); 1_000];
        let cmds = vec![DataCmd::MGet(repeats)];
        let read: BTreeMap<Key, Option<Value>> = [(k("big"), Some(vec![b'v'; 4096]))].into_iter().collect();
        assert_eq!(evaluate(&cmds, &read, 1 << 20, 1 << 20), Err(ReplyTooLarge { max: 1 << 20 }));
        let e = evaluate(&cmds, &read, 1 << 20, 8 << 20).expect("within 8 MiB");
        assert!(matches!(&e.replies[0], Reply::Array(values) if values.len() == 1_000));
    }
}
