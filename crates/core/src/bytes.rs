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
struct AsBytes<'a>(&'a [u8]);

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

/// `#[serde(with = "crate::bytes::option")]` on an `Option<Vec<u8>>`.
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
}
