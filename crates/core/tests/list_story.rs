//! Lists as records (`collection`: a head naming the first position and the length, one record
//! per element under its position), driven through the transaction client over the core's
//! harness: pushes and pops touch only the ends, the rest of Redis's list commands answer as
//! Redis does, and no element outlives its list.

mod harness;
use harness::Cluster;
use waymark_core::client::command::{End, ListCmd};
use waymark_core::client::{Answer, ClientLimits, DataCmd, TxnClient};
use waymark_core::collection::{element_key, is_element, list_member, Kind, LIST_ORIGIN};
use waymark_core::{Breaks, ClientId, CutStrategy, Key};
use waymark_resp::Reply;

/// Runs one command, or several as `MULTI`/`EXEC`, of client `id` at vnode `near` to its
/// replies, delivering everything.
fn run_all(c: &mut Cluster, near: usize, id: ClientId, client: &mut TxnClient, mut cmds: Vec<DataCmd>) -> Answer {
    let step = match cmds.len() {
        1 => client.command(cmds.remove(0)),
        _ => client.exec(cmds),
    };
    c.drive(near, id, client, step).expect("a batch that does not block")
}

struct Story {
    c: Cluster,
    client: TxnClient,
    key: Key,
}

impl Story {
    fn new() -> Story {
        let c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default());
        let key = c.key_with_chain(&[1, 2]);
        Story { c, client: TxnClient::new(ClientLimits::default(), Breaks::default()), key }
    }

    fn on(&mut self, cmds: Vec<DataCmd>) -> Vec<Reply> {
        match run_all(&mut self.c, 0, ClientId(7), &mut self.client, cmds) {
            Answer::Replies(r) => r,
            other => panic!("replies expected, got {other:?}"),
        }
    }

    fn one(&mut self, cmd: ListCmd) -> Reply {
        let key = self.key.clone();
        self.on(vec![DataCmd::List(key, cmd)]).remove(0)
    }

    fn range(&mut self) -> Vec<String> {
        match self.one(ListCmd::Range(0, -1)) {
            Reply::Array(items) => items.into_iter().map(text).collect(),
            other => panic!("an array expected, got {other:?}"),
        }
    }

    /// The live element keys vnode `i` stores.
    fn elements_on(&self, i: usize) -> Vec<Key> {
        let store = self.c.vnode(i).store();
        store.iter().filter(|(k, e)| is_element(k) && e.value.is_some()).map(|(k, _)| k.clone()).collect()
    }
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn text(r: Reply) -> String {
    match r {
        Reply::Bulk(v) => String::from_utf8(v).unwrap(),
        other => panic!("a bulk string expected, got {other:?}"),
    }
}

fn push(end: End, values: &[&str]) -> ListCmd {
    ListCmd::Push { end, values: values.iter().map(|v| b(v)).collect(), only_existing: false }
}

#[test]
fn pushes_on_both_ends_keep_the_order_and_pops_take_from_the_ends() {
    let mut s = Story::new();
    assert_eq!(s.one(push(End::Right, &["c", "d"])), Reply::Integer(2));
    assert_eq!(s.one(push(End::Left, &["b", "a"])), Reply::Integer(4));
    assert_eq!(s.range(), ["a", "b", "c", "d"]);
    assert_eq!(s.one(ListCmd::Index(-1)), Reply::bulk(b("d")));
    assert_eq!(s.one(ListCmd::Index(4)), Reply::Null);
    assert_eq!(s.one(ListCmd::Pop(End::Left, None)), Reply::bulk(b("a")));
    assert_eq!(s.one(ListCmd::Pop(End::Right, Some(2))), Reply::Array(vec![Reply::bulk(b("d")), Reply::bulk(b("c"))]));
    assert_eq!(s.one(ListCmd::Len), Reply::Integer(1));
    assert_eq!(s.one(ListCmd::Pop(End::Right, Some(5))), Reply::Array(vec![Reply::bulk(b("b"))]));
    assert_eq!(s.one(ListCmd::Pop(End::Right, Some(5))), Reply::NullArray, "an emptied list is deleted");
    for i in 0..3 {
        assert!(s.elements_on(i).is_empty(), "vnode {i} keeps a popped element");
    }
}

/// A pop reads the head, then the one element at the position it names — not the list — and
/// logs that element and the head.
#[test]
fn a_pop_off_a_long_list_reads_and_writes_only_its_end() {
    let mut s = Story::new();
    let values: Vec<String> = (0..2_000).map(|i| format!("v{i:05}")).collect();
    let key = s.key.clone();
    s.on(vec![DataCmd::List(key.clone(), push(End::Right, &values.iter().map(String::as_str).collect::<Vec<_>>()))]);
    let before: Vec<(Key, u64)> = s.c.vnode(1).store().iter().map(|(k, e)| (k.clone(), e.version)).collect();
    assert_eq!(s.one(ListCmd::Pop(End::Right, None)), Reply::bulk(b("v01999")));
    let changed: Vec<Key> =
        s.c.vnode(1)
            .store()
            .iter()
            .filter(|(k, e)| before.iter().find(|(b, _)| b == *k).is_none_or(|(_, v)| *v != e.version))
            .map(|(k, _)| k.clone())
            .collect();
    let last = element_key(&key, Kind::List, &list_member(LIST_ORIGIN + 1_999));
    assert_eq!(changed, vec![key.clone(), last]);
    assert_eq!(s.one(ListCmd::Range(1, 2)), Reply::Array(vec![Reply::bulk(b("v00001")), Reply::bulk(b("v00002"))]));
}

#[test]
fn set_trim_remove_insert_and_pos_answer_as_redis() {
    let mut s = Story::new();
    s.one(push(End::Right, &["a", "b", "a", "c", "a"]));
    assert_eq!(s.one(ListCmd::Set(1, b("B"))), Reply::ok());
    assert!(matches!(s.one(ListCmd::Set(9, b("x"))), Reply::Error(e) if e == "ERR index out of range"));
    let pos = |element: &str, rank, count| ListCmd::Pos { element: b(element), rank, count, maxlen: 0 };
    assert_eq!(s.one(pos("a", 1, None)), Reply::Integer(0));
    assert_eq!(s.one(pos("a", -1, None)), Reply::Integer(4));
    assert_eq!(s.one(pos("a", 2, Some(0))), Reply::Array(vec![Reply::Integer(2), Reply::Integer(4)]));
    assert_eq!(s.one(pos("z", 1, None)), Reply::Null);
    assert_eq!(s.one(ListCmd::Rem(-2, b("a"))), Reply::Integer(2));
    assert_eq!(s.range(), ["a", "B", "c"]);
    let insert = |before, pivot: &str, value: &str| ListCmd::Insert { before, pivot: b(pivot), value: b(value) };
    assert_eq!(s.one(insert(true, "c", "x")), Reply::Integer(4));
    assert_eq!(s.one(insert(false, "nope", "x")), Reply::Integer(-1));
    assert_eq!(s.range(), ["a", "B", "x", "c"]);
    assert_eq!(s.one(ListCmd::Trim(1, -2)), Reply::ok());
    assert_eq!(s.range(), ["B", "x"]);
    assert_eq!(s.elements_on(1).len(), 2, "trimmed and removed elements are gone from the replica");
    assert_eq!(s.one(ListCmd::Trim(5, 10)), Reply::ok());
    assert_eq!(s.one(ListCmd::Len), Reply::Integer(0), "a trim that keeps nothing deletes the list");
    assert!(s.elements_on(1).is_empty());
}

/// `DEL` then `RPUSH` of the same key in one batch: the new list must not inherit the old one's
/// elements (the batch reads the old list whole to delete them), and `LMOVE` rotates a list.
#[test]
fn a_list_dropped_and_made_again_in_one_batch_starts_empty_and_lmove_rotates() {
    let mut s = Story::new();
    s.one(push(End::Right, &["1", "2", "3"]));
    let key = s.key.clone();
    let replies = s.on(vec![DataCmd::Del(vec![key.clone()]), DataCmd::List(key.clone(), push(End::Right, &["new"]))]);
    assert_eq!(replies, vec![Reply::Integer(1), Reply::Integer(1)]);
    assert_eq!(s.range(), ["new"]);
    assert_eq!(s.elements_on(1).len(), 1);
    s.one(push(End::Right, &["x", "y"]));
    let rotate = DataCmd::LMove { from: key.clone(), to: key.clone(), from_end: End::Right, to_end: End::Left };
    assert_eq!(s.on(vec![rotate]), vec![Reply::bulk(b("y"))]);
    assert_eq!(s.range(), ["y", "new", "x"]);
    let other = b("elsewhere");
    let lmpop = DataCmd::LMPop { keys: vec![other, key.clone()], end: End::Left, count: Some(2) };
    let popped =
        Reply::Array(vec![Reply::bulk(key.clone()), Reply::Array(vec![Reply::bulk(b("y")), Reply::bulk(b("new"))])]);
    assert_eq!(s.on(vec![lmpop]), vec![popped]);
}

/// `BLPOP` on an empty list blocks (it looks again and again, finding nothing), and takes what
/// another client pushes; `BLMOVE` likewise moves it.
#[test]
fn a_blocked_pop_takes_what_another_client_pushes() {
    let mut s = Story::new();
    let key = s.key.clone();
    let mut waiting = TxnClient::new(ClientLimits::default(), Breaks::default());
    let waiter = ClientId(8);
    let blpop = DataCmd::LMPop { keys: vec![b("empty"), key.clone()], end: End::Left, count: None };
    let step = waiting.blocking(blpop, 0);
    assert_eq!(s.c.drive(1, waiter, &mut waiting, step), None, "blocked on empty lists");
    let step = waiting.resume();
    assert_eq!(s.c.drive(1, waiter, &mut waiting, step), None, "still nothing to take");
    s.one(push(End::Right, &["job"]));
    let step = waiting.resume();
    let taken = Reply::Array(vec![Reply::bulk(key.clone()), Reply::bulk(b("job"))]);
    assert_eq!(s.c.drive(1, waiter, &mut waiting, step), Some(Answer::Replies(vec![taken])));
    assert_eq!(s.one(ListCmd::Len), Reply::Integer(0));
}
