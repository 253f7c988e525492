//! Hashes as records (`collection`), driven through the transaction client over the core's
//! harness: what is stored, what a read returns with its head, and how a collection's elements
//! go with it.

mod harness;
use harness::Cluster;
use waymark_core::client::command::HashCmd;
use waymark_core::client::{Answer, ClientLimits, DataCmd, TxnClient};
use waymark_core::collection::{element_key, is_element, Kind};
use waymark_core::{Breaks, ClientId, CutStrategy, Key};
use waymark_resp::Reply;

/// Runs one command of client `id` at vnode `near` to its reply, delivering everything.
fn run(c: &mut Cluster, near: usize, id: ClientId, client: &mut TxnClient, cmd: DataCmd) -> Answer {
    let step = client.command(cmd);
    c.drive(near, id, client, step).expect("a command that does not block")
}

fn hash(key: &Key, cmd: HashCmd) -> DataCmd {
    DataCmd::Hash(key.clone(), cmd)
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn one(a: Answer) -> Reply {
    match a {
        Answer::Replies(mut r) if r.len() == 1 => r.remove(0),
        other => panic!("one reply expected, got {other:?}"),
    }
}

/// The live element keys vnode `i` stores.
fn elements_on(c: &Cluster, i: usize) -> Vec<Key> {
    c.vnode(i).store().iter().filter(|(k, e)| is_element(k) && e.value.is_some()).map(|(k, _)| k.clone()).collect()
}

#[test]
fn a_hash_is_a_head_and_one_record_per_field_on_every_replica_and_reads_back_whole() {
    let mut c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default());
    let key = c.key_with_chain(&[1, 2]);
    let mut client = TxnClient::new(ClientLimits::default(), Breaks::default());
    let id = ClientId(7);
    let pairs = vec![(b("name"), b("ada")), (b("born"), b("1815"))];
    let set = run(&mut c, 0, id, &mut client, hash(&key, HashCmd::Set { pairs, ok: false }));
    assert_eq!(one(set), Reply::Integer(2));
    let stored = vec![element_key(&key, Kind::Hash, b"born"), element_key(&key, Kind::Hash, b"name")];
    assert_eq!(elements_on(&c, 1), stored, "the primary holds one record per field");
    assert_eq!(elements_on(&c, 2), stored, "and so does its backup");
    assert!(elements_on(&c, 0).is_empty(), "no other vnode holds them");
    let all = run(&mut c, 0, id, &mut client, hash(&key, HashCmd::GetAll));
    let pairs = [("born", "1815"), ("name", "ada")].map(|(f, v)| (Reply::bulk(f), Reply::bulk(v)));
    assert_eq!(one(all), Reply::Map(pairs.to_vec()));
    let len = run(&mut c, 0, id, &mut client, hash(&key, HashCmd::Len));
    assert_eq!(one(len), Reply::Integer(2));
    let kind = run(&mut c, 0, id, &mut client, DataCmd::Type(key.clone()));
    assert_eq!(one(kind), Reply::Simple("hash".into()));
    let get = run(&mut c, 0, id, &mut client, DataCmd::Get(key.clone()));
    assert!(matches!(get, Answer::Error(e) if e.starts_with("WRONGTYPE")), "GET of a hash");
}

/// Every command that changes one field logs that field and the head, not the hash.
#[test]
fn changing_one_field_of_a_large_hash_writes_that_field_and_the_head() {
    let mut c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default());
    let key = c.key_with_chain(&[1, 2]);
    let mut client = TxnClient::new(ClientLimits::default(), Breaks::default());
    let id = ClientId(7);
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..500).map(|i| (format!("f{i:04}").into_bytes(), vec![b'x'; 100])).collect();
    run(&mut c, 0, id, &mut client, hash(&key, HashCmd::Set { pairs, ok: true }));
    let versions_before: Vec<(Key, u64)> = c.vnode(1).store().iter().map(|(k, e)| (k.clone(), e.version)).collect();
    let one_more = hash(&key, HashCmd::IncrBy(b("f0007"), 0));
    assert!(matches!(one(run(&mut c, 0, id, &mut client, one_more)), Reply::Error(e) if e.contains("not an integer")));
    let set_one = hash(&key, HashCmd::Set { pairs: vec![(b("f0007"), b("new"))], ok: false });
    assert_eq!(one(run(&mut c, 0, id, &mut client, set_one)), Reply::Integer(0));
    let changed: Vec<Key> = c
        .vnode(1)
        .store()
        .iter()
        .filter(|(k, e)| versions_before.iter().find(|(b, _)| b == *k).is_none_or(|(_, v)| *v != e.version))
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(changed, vec![key.clone(), element_key(&key, Kind::Hash, b"f0007")]);
}

/// `SET` over a hash (a blind write: the client never read it) and `DEL` of one: the primary
/// deletes its field records on every replica, and a new hash under the key starts empty.
#[test]
fn a_hash_replaced_or_deleted_takes_its_fields_with_it() {
    let mut c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default());
    let key = c.key_with_chain(&[1, 2]);
    let mut client = TxnClient::new(ClientLimits::default(), Breaks::default());
    let id = ClientId(7);
    let fill = |n: &str| hash(&key, HashCmd::Set { pairs: vec![(b(n), b("1")), (b("shared"), b("1"))], ok: false });
    run(&mut c, 0, id, &mut client, fill("a"));
    assert_eq!(elements_on(&c, 1).len(), 2);
    assert_eq!(one(run(&mut c, 0, id, &mut client, DataCmd::Set(key.clone(), b("text")))), Reply::ok());
    assert!(elements_on(&c, 1).is_empty() && elements_on(&c, 2).is_empty(), "SET dropped the fields everywhere");
    run(&mut c, 0, id, &mut client, DataCmd::Del(vec![key.clone()]));
    run(&mut c, 0, id, &mut client, fill("b"));
    let keys = run(&mut c, 0, id, &mut client, hash(&key, HashCmd::Keys));
    assert_eq!(one(keys), Reply::Array(vec![Reply::bulk("b"), Reply::bulk("shared")]), "nothing of the old hash");
    assert_eq!(one(run(&mut c, 0, id, &mut client, DataCmd::Del(vec![key.clone()]))), Reply::Integer(1));
    assert!(elements_on(&c, 1).is_empty() && elements_on(&c, 2).is_empty(), "DEL dropped the fields everywhere");
}

/// `RENAME` of a hash carries its fields, and those of the hash it replaces go.
#[test]
fn a_renamed_hash_keeps_its_fields_and_replaces_the_target_whole() {
    let mut c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default());
    let (from, to) = (c.key_with_chain(&[1, 2]), c.key_with_chain(&[2, 0]));
    let mut client = TxnClient::new(ClientLimits::default(), Breaks::default());
    let id = ClientId(7);
    let set = |k: &Key, f: &str| hash(k, HashCmd::Set { pairs: vec![(b(f), b(f))], ok: false });
    run(&mut c, 0, id, &mut client, set(&from, "x"));
    run(&mut c, 0, id, &mut client, set(&to, "old"));
    let renamed = run(&mut c, 0, id, &mut client, DataCmd::Rename { from: from.clone(), to: to.clone(), nx: false });
    assert_eq!(one(renamed), Reply::ok());
    let all = run(&mut c, 0, id, &mut client, hash(&to, HashCmd::GetAll));
    assert_eq!(one(all), Reply::Map(vec![(Reply::bulk("x"), Reply::bulk("x"))]));
    assert_eq!(one(run(&mut c, 0, id, &mut client, DataCmd::Exists(vec![from.clone()]))), Reply::Integer(0));
    for i in 0..3 {
        let left: Vec<Key> = elements_on(&c, i);
        assert!(left.iter().all(|k| k == &element_key(&to, Kind::Hash, b"x")), "node00{i} holds {left:?}");
    }
}

/// A hash of more elements than a transaction drops is refused a `DEL` and a deadline with an
/// error that says why, and stays whole; once trimmed below the bound, it is deleted.
#[test]
fn a_hash_too_large_to_drop_at_once_is_refused_a_delete_and_a_deadline_and_loses_nothing() {
    use waymark_core::client::command::{ExpireIf, Expiry};
    use waymark_core::collection::DROP_INLINE_MAX;
    let mut c = Cluster::new(3, 2, CutStrategy::Consistent, Breaks::default());
    let key = c.key_with_chain(&[1, 2]);
    let mut client = TxnClient::new(ClientLimits::default(), Breaks::default());
    let id = ClientId(7);
    let n = DROP_INLINE_MAX + 1;
    let field = |i: u64| format!("f{i:06}").into_bytes();
    for part in [0..n / 2, n / 2..n] {
        let pairs = part.map(|i| (field(i), b"v".to_vec())).collect();
        run(&mut c, 0, id, &mut client, hash(&key, HashCmd::Set { pairs, ok: true }));
    }
    let del = run(&mut c, 0, id, &mut client, DataCmd::Del(vec![key.clone()]));
    assert!(matches!(&del, Answer::Error(e) if e.contains("more than 65536 elements")), "{del:?}");
    let expire = DataCmd::Expire(key.clone(), Expiry::In(1_000), ExpireIf::Always);
    assert!(matches!(one(run(&mut c, 0, id, &mut client, expire)), Reply::Error(e) if e.contains("deadline")));
    assert_eq!(one(run(&mut c, 0, id, &mut client, hash(&key, HashCmd::Len))), Reply::Integer(n as i64));
    assert_eq!(elements_on(&c, 2).len() as u64, n, "the backup lost nothing");
    run(&mut c, 0, id, &mut client, hash(&key, HashCmd::Del(vec![field(0), field(1)])));
    assert_eq!(one(run(&mut c, 0, id, &mut client, DataCmd::Del(vec![key.clone()]))), Reply::Integer(1));
    assert!(elements_on(&c, 1).is_empty() && elements_on(&c, 2).is_empty());
}
