//! Keys and values as one bulk of bytes in serde (`serialize_bytes`), not as a sequence of `u8`.
//! In postcard (records, peer frames, checkpoints) both are the same bytes — a varint length,
//! then the bytes — so the format does not change; but a sequence is encoded and decoded one
//! element at a time, which was the largest cost of replaying a log of 4 kB values.
//! Formats that write bytes as a sequence (JSON) are read back too (`visit_seq`).

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        // The hint comes from the input: cap what it may make us reserve.
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element()? {
            out.push(b);
        }
        Ok(out)
    }
}

/// A borrowed byte string that serializes as bytes.
pub(crate) struct AsBytes<'a>(pub(crate) &'a [u8]);

impl Serialize for AsBytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// An owned byte string read as bytes.
struct ByteBuf(Vec<u8>);

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_byte_buf(BytesVisitor).map(ByteBuf)
    }
}

/// `#[serde(with = "crate::bytes::vec")]` on a `Vec<u8>`.
pub mod vec {
    use super::*;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        AsBytes(v).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        ByteBuf::deserialize(d).map(|b| b.0)
    }
}

/// `#[serde(with = "crate::bytes::option")]` on an `Option<Vec<u8>>` (how values were encoded
/// before deadlines: the tests check that `cell` reads it).
#[cfg(test)]
pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_some(&AsBytes(v)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Option::<ByteBuf>::deserialize(d).map(|o| o.map(|b| b.0))
    }
}

/// A value with its deadline, as one field: `Option<bytes>`'s two tags when there is no deadline,
/// so records, pages and checkpoints written before deadlines existed read unchanged (postcard
/// writes an `Option`'s tag and an enum's variant index alike, as one byte for 0 and 1), and two
/// more for a value with a deadline and for a tombstone with the time it expired at.
pub mod cell {
    use super::*;

    #[derive(Serialize)]
    enum CellRef<'a> {
        Absent,
        Present(AsBytes<'a>),
        Expiring(AsBytes<'a>, u64),
        Expired(u64),
    }

    #[derive(Deserialize)]
    enum CellOwned {
        Absent,
        Present(ByteBuf),
        Expiring(ByteBuf, u64),
        Expired(u64),
    }

    /// A borrowed value and deadline that serializes as one cell.
    pub struct Cell<'a>(pub Option<&'a [u8]>, pub Option<u64>);

    impl Serialize for Cell<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match (self.0, self.1) {
                (None, None) => CellRef::Absent,
                (Some(v), None) => CellRef::Present(AsBytes(v)),
                (Some(v), Some(d)) => CellRef::Expiring(AsBytes(v), d),
                (None, Some(d)) => CellRef::Expired(d),
            }
            .serialize(s)
        }
    }

    /// An owned value and deadline read from one cell.
    pub struct Owned(pub Option<Vec<u8>>, pub Option<u64>);

    impl<'de> Deserialize<'de> for Owned {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            Ok(match CellOwned::deserialize(d)? {
                CellOwned::Absent => Owned(None, None),
                CellOwned::Present(v) => Owned(Some(v.0), None),
                CellOwned::Expiring(v, at) => Owned(Some(v.0), Some(at)),
                CellOwned::Expired(at) => Owned(None, Some(at)),
            })
        }
    }

    /// A value and deadline borrowed from the bytes read (`record_view`).
    #[derive(Deserialize)]
    pub enum Borrowed<'a> {
        Absent,
        Present(&'a [u8]),
        Expiring(&'a [u8], u64),
        Expired(u64),
    }

    impl<'a> Borrowed<'a> {
        pub fn parts(self) -> (Option<&'a [u8]>, Option<u64>) {
            match self {
                Borrowed::Absent => (None, None),
                Borrowed::Present(v) => (Some(v), None),
                Borrowed::Expiring(v, at) => (Some(v), Some(at)),
                Borrowed::Expired(at) => (None, Some(at)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct AsSeq {
        key: Vec<u8>,
        value: Option<Vec<u8>>,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct AsBulk {
        #[serde(with = "super::vec")]
        key: Vec<u8>,
        #[serde(with = "super::option")]
        value: Option<Vec<u8>>,
    }

    /// The log and the peer links keep their format: old records read with the new types.
    #[test]
    fn postcard_bytes_are_those_of_a_sequence() {
        for (key, value) in [(vec![], None), (b"k".to_vec(), Some(vec![])), (vec![7; 300], Some(vec![9; 5000]))] {
            let seq = postcard::to_allocvec(&AsSeq { key: key.clone(), value: value.clone() }).unwrap();
            let bulk = postcard::to_allocvec(&AsBulk { key: key.clone(), value: value.clone() }).unwrap();
            assert_eq!(seq, bulk);
            assert_eq!(postcard::from_bytes::<AsBulk>(&seq).unwrap(), AsBulk { key, value });
        }
    }

    /// A value and a version as `ResolvedWrite` was encoded before deadlines existed.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct WriteBefore34 {
        #[serde(with = "super::vec")]
        key: Vec<u8>,
        #[serde(with = "super::option")]
        value: Option<Vec<u8>>,
        version: u64,
    }

    /// Records, pages and checkpoints written before deadlines read unchanged, and a write without
    /// a deadline is written as it was then; one with a deadline reads back whole.
    #[test]
    fn writes_without_deadlines_keep_their_bytes_and_deadlines_read_back() {
        use crate::record_view::WriteRef;
        use crate::store::ResolvedWrite;
        for value in [None, Some(vec![]), Some(vec![9; 300])] {
            let old = WriteBefore34 { key: b"k".to_vec(), value: value.clone(), version: 7 };
            let bytes = postcard::to_allocvec(&old).unwrap();
            let new = ResolvedWrite { key: b"k".to_vec(), value: value.clone(), version: 7, deadline_ms: None };
            assert_eq!(postcard::from_bytes::<ResolvedWrite>(&bytes).unwrap(), new);
            assert_eq!(postcard::to_allocvec(&new).unwrap(), bytes);
            assert_eq!(postcard::from_bytes::<WriteRef>(&bytes).unwrap(), WriteRef::from(&new));
        }
        for (value, deadline_ms) in [(Some(b"v".to_vec()), Some(1_796_000_000_000)), (None, Some(5))] {
            let w = ResolvedWrite { key: b"k".to_vec(), value, version: 3, deadline_ms };
            let bytes = postcard::to_allocvec(&w).unwrap();
            assert_eq!(postcard::from_bytes::<ResolvedWrite>(&bytes).unwrap(), w);
            assert_eq!(postcard::from_bytes::<WriteRef>(&bytes).unwrap(), WriteRef::from(&w));
            assert!(postcard::from_bytes::<WriteBefore34>(&bytes).is_err(), "an old reader refuses, never misreads");
        }
    }
}
