//! Redis's collections as records (issue 35): a collection is a *head* under its own key and one
//! *element* record per field or member, so that changing one element logs that element and the
//! head, never the whole collection.
//!
//! - The **head** is the value of the collection's key: [`HEAD_MAGIC`], the kind, and the number
//!   of elements. A string value may not start with [`HEAD_MAGIC`] (the front end refuses one, as
//!   database 0 refuses keys under the databases' prefix), so a value is a head exactly when it
//!   starts with it.
//! - An **element** of collection `k` is stored under [`element_key`]: [`ELEMENT_PREFIX`], `k`'s
//!   length and bytes, the kind's tag, then the member. Its partition is `k`'s ([`routing_key`]),
//!   so a collection and its elements are one partition's, read and written at one primary, and an
//!   element of `k` sorts with `k`'s other elements, in member order.
//!
//! Invariants, which make a collection serializable with one read check, on its head:
//! - every transaction that writes an element of `k` writes `k`'s head too (its length, at least
//!   rewritten), so it holds `k`'s lock and moves `k`'s version;
//! - elements are read only together with their head, at the head's primary, once no prepared
//!   branch writes the head (`txn::read_wait`): what is read is one committed state;
//! - a head replaced by a value that is no head of the same kind (a `SET`, `DEL`, expiry), or
//!   deleted, takes its elements with it: the primary deletes every element of `k` that the same
//!   transaction does not write (`txn::locks`), so no element outlives its collection.

use crate::ids::{Key, Value};

/// What every head starts with: two bytes no UTF-8 text starts with, then a name.
pub const HEAD_MAGIC: &[u8] = b"\xff\xfbwaymark:";
/// What every element's key starts with (database 0 refuses user keys under it).
pub const ELEMENT_PREFIX: &[u8] = b"\xff\xfcwaymark-el";

/// The most elements a transaction drops with their collection (`DEL`, a `SET` over it, its
/// expiry): the primary deletes them in the same transaction, and a larger one would not fit a
/// prepare in time. A larger collection is refused a drop (`AbortReason::CollectionTooLarge`) and a
/// deadline; its elements are removed in batches first (`HDEL`, `SREM`, `SPOP`).
pub const DROP_INLINE_MAX: u64 = 65_536;

/// A collection's kind, as `TYPE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Hash,
    Set,
    List,
}

impl Kind {
    /// The byte a head and an element key carry.
    fn tag(self) -> u8 {
        match self {
            Kind::Hash => b'h',
            Kind::Set => b's',
            Kind::List => b'l',
        }
    }

    fn of_tag(tag: u8) -> Option<Kind> {
        match tag {
            b'h' => Some(Kind::Hash),
            b's' => Some(Kind::Set),
            b'l' => Some(Kind::List),
            _ => None,
        }
    }

    /// What `TYPE` answers.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::List => "list",
        }
    }
}

/// Where a new list's first element goes: pushes on either side have 2⁶² positions of room.
pub const LIST_ORIGIN: u64 = 1 << 62;

/// A collection's head: its kind and how many elements it has (never 0: an emptied collection is
/// deleted, as in Redis).
///
/// A list's elements are stored under their positions (`list_member`): `first` is the head's,
/// and the list holds exactly the positions `first .. first + len`, in order — a push on the left
/// takes `first - 1`, on the right `first + len`. Other kinds have `first` 0 and do not store it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub kind: Kind,
    pub len: u64,
    pub first: u64,
}

impl Head {
    /// The head of a hash or a set of `len` elements.
    pub fn of(kind: Kind, len: u64) -> Head {
        assert!(kind != Kind::List, "a list's head names its first position");
        Head { kind, len, first: 0 }
    }

    /// The bytes stored as the collection key's value.
    pub fn encode(self) -> Value {
        assert!(self.len > 0, "an empty collection is deleted, not stored");
        let mut v = Vec::with_capacity(HEAD_MAGIC.len() + 17);
        v.extend_from_slice(HEAD_MAGIC);
        v.push(self.kind.tag());
        v.extend_from_slice(&self.len.to_le_bytes());
        if self.kind == Kind::List {
            v.extend_from_slice(&self.first.to_le_bytes());
        } else {
            assert_eq!(self.first, 0, "only a list has a first position");
        }
        v
    }

    /// The head a stored value is, if it is one (`None`: a string).
    pub fn decode(value: &[u8]) -> Option<Head> {
        let rest = value.strip_prefix(HEAD_MAGIC)?;
        let (&tag, rest) = rest.split_first()?;
        let kind = Kind::of_tag(tag)?;
        let (len, first) = match kind {
            Kind::List => {
                let (len, first) = rest.split_first_chunk::<8>()?;
                (*len, u64::from_le_bytes(<[u8; 8]>::try_from(first).ok()?))
            }
            Kind::Hash | Kind::Set => (<[u8; 8]>::try_from(rest).ok()?, 0),
        };
        Some(Head { kind, len: u64::from_le_bytes(len), first })
    }

    /// The position of the list element at `index` (0 the first, -1 the last, as Redis counts),
    /// if there is one.
    pub fn list_position(&self, index: i64) -> Option<u64> {
        let i = if index < 0 { index.checked_add(i64::try_from(self.len).ok()?)? } else { index };
        (0..self.len).contains(&u64::try_from(i).ok()?).then(|| self.first + i as u64)
    }
}

/// The member a list element at position `pos` is stored as: big-endian, so that elements sort
/// in list order.
pub fn list_member(pos: u64) -> Vec<u8> {
    pos.to_be_bytes().to_vec()
}

/// Whether a write that takes a key from value `before` to `after` drops the collection it held:
/// `before` is a head, and `after` is none, a string, or a head of another kind.
pub fn drops(before: Option<&[u8]>, after: Option<&[u8]>) -> bool {
    let Some(kind) = before.and_then(Head::decode).map(|h| h.kind) else { return false };
    after.and_then(Head::decode).is_none_or(|h| h.kind != kind)
}

/// Whether a stored value is a collection's head.
pub fn is_head(value: &[u8]) -> bool {
    value.starts_with(HEAD_MAGIC)
}

/// What the keys of `collection`'s elements of `kind` start with.
pub fn element_prefix(collection: &[u8], kind: Kind) -> Key {
    let mut k = owner_prefix(collection);
    k.push(kind.tag());
    k
}

/// What the keys of every element of `collection`, of any kind, start with.
pub fn owner_prefix(collection: &[u8]) -> Key {
    let len = u32::try_from(collection.len()).expect("keys are far shorter than 4 GiB");
    let mut k = Vec::with_capacity(ELEMENT_PREFIX.len() + 5 + collection.len());
    k.extend_from_slice(ELEMENT_PREFIX);
    k.extend_from_slice(&len.to_be_bytes());
    k.extend_from_slice(collection);
    k
}

/// The key member `member` of `collection` (of `kind`) is stored under.
pub fn element_key(collection: &[u8], kind: Kind, member: &[u8]) -> Key {
    let mut k = element_prefix(collection, kind);
    k.extend_from_slice(member);
    k
}

/// An element key's collection, kind and member, if `key` is an element's.
pub fn split_element(key: &[u8]) -> Option<(&[u8], Kind, &[u8])> {
    let rest = key.strip_prefix(ELEMENT_PREFIX)?;
    let (len, rest) = rest.split_first_chunk::<4>()?;
    let len = u32::from_be_bytes(*len) as usize;
    if rest.len() <= len {
        return None;
    }
    let (collection, rest) = rest.split_at(len);
    let (&tag, member) = rest.split_first()?;
    Some((collection, Kind::of_tag(tag)?, member))
}

/// Whether `key` is an element's (not a key a client named).
pub fn is_element(key: &[u8]) -> bool {
    key.starts_with(ELEMENT_PREFIX)
}

/// The key whose partition `key` belongs to: its collection's for an element, else itself.
pub fn routing_key(key: &[u8]) -> &[u8] {
    match is_element(key) {
        true => split_element(key).map_or(key, |(collection, ..)| collection),
        false => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_reads_back_and_no_string_without_the_magic_is_a_head() {
        let head = Head::of(Kind::Hash, 1_000_000);
        assert_eq!(Head::decode(&head.encode()), Some(head));
        assert!(is_head(&head.encode()));
        let list = Head { kind: Kind::List, len: 3, first: LIST_ORIGIN - 1 };
        assert_eq!(Head::decode(&list.encode()), Some(list));
        assert_eq!(Head::decode(&list.encode()[..list.encode().len() - 1]), None, "a list head cut short");
        for s in [&b""[..], b"hash", b"\xff\xfbwaymark", b"\xff\xfbwaymark:"] {
            assert_eq!(Head::decode(s), None, "{s:?}");
        }
    }

    #[test]
    fn an_element_key_names_its_collection_and_routes_with_it() {
        for (collection, member) in [(&b"user:1"[..], &b"name"[..]), (b"", b""), (b"k\xff", b"\x00\x01")] {
            let key = element_key(collection, Kind::Hash, member);
            assert_eq!(split_element(&key), Some((collection, Kind::Hash, member)));
            assert_eq!(routing_key(&key), collection);
            assert!(key.starts_with(&element_prefix(collection, Kind::Hash)));
            assert!(key.starts_with(&owner_prefix(collection)));
        }
        assert_eq!(routing_key(b"plain"), b"plain");
    }

    #[test]
    fn list_indexes_count_from_either_end_within_the_list() {
        let list = Head { kind: Kind::List, len: 3, first: 10 };
        let at = |i| list.list_position(i);
        assert_eq!([at(0), at(2), at(-1), at(-3)], [Some(10), Some(12), Some(12), Some(10)]);
        assert_eq!([at(3), at(-4), at(i64::MIN), at(i64::MAX)], [None; 4]);
        assert!(list_member(9) < list_member(10) && list_member(255) < list_member(256));
    }

    /// Elements of one collection sort together, in member order, apart from another collection's
    /// whose name extends the first's.
    #[test]
    fn elements_sort_by_collection_then_member() {
        let a1 = element_key(b"a", Kind::Hash, b"1");
        let a2 = element_key(b"a", Kind::Hash, b"2");
        let ab = element_key(b"ab", Kind::Hash, b"0");
        assert!(a1 < a2);
        assert!(!ab.starts_with(&owner_prefix(b"a")));
    }
}
