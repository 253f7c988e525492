//! The bodies of the core's fuzz targets, defined once: the cargo-fuzz targets (`fuzz/`, nightly,
//! coverage-guided) and the stable tests (`tests/fuzz.rs`, a seeded mutation run over
//! `fuzz/corpus/<target>/`) both call them. Not an API: hidden from the docs, and they panic on
//! purpose when a decoder breaks its contract. Each answers whether the input decoded to a value.

use crate::alter::{AlterMsg, AlterRecord};
use crate::{Body, Envelope, Record, RecordView};

/// `peer_message`: the postcard payload of a peer frame, decoded as the link does (an
/// [`Envelope`]), with a relay's carried message opened as the tree does. Contract: an error or a
/// value, never a panic, an abort (a stack overflow) or an allocation sized by a claimed length;
/// a decoded envelope encodes and decodes back to itself; a relay never opens to a relay.
pub fn peer_message(data: &[u8]) -> bool {
    let Ok(envelope) = postcard::from_bytes::<Envelope>(data) else {
        return false;
    };
    round_trips(&envelope);
    if let Body::Alter(AlterMsg::Relay { msg, .. }) = &envelope.body {
        match msg.open() {
            Some(AlterMsg::Relay { .. }) => panic!("a relay opened to a relay"),
            Some(inner) => round_trips(&inner),
            None => {}
        }
    }
    true
}

/// `wal_record`: a log frame's kind (the first byte) and payload (the rest), decoded both ways
/// production does — [`Record::decode`] (recovery) and [`RecordView::decode`] (a snapshot's
/// restore) — and an alteration's bytes as the tree reads them back. Contract: both decoders
/// agree (the same record, or both an error), a decoded record is of the frame's kind and
/// round-trips, never a panic.
pub fn wal_record(data: &[u8]) -> bool {
    let Some((&kind, payload)) = data.split_first() else {
        return false;
    };
    let record = Record::decode(kind, payload);
    let view = RecordView::decode(kind, payload);
    match (&record, &view) {
        (Ok(record), Ok(view)) => {
            assert_eq!(&RecordView::of(record), view, "the restore's view differs from the record");
            assert_eq!(record.kind(), kind);
            assert_eq!(&Record::decode(kind, &record.encode()).expect("a decoded record re-encodes"), record);
            if let Record::Alteration { bytes, .. } = record {
                let _ = AlterRecord::decode(bytes);
            }
            true
        }
        (Err(_), Err(_)) => false,
        _ => panic!(
            "the record decoder and the restore's view disagree on a frame of kind {kind}: {record:?} / {view:?}"
        ),
    }
}

/// A decoded value encodes, and its encoding decodes to it.
fn round_trips<T>(value: &T)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let bytes = postcard::to_allocvec(value).expect("a decoded value encodes");
    let again: T = postcard::from_bytes(&bytes).expect("an encoded value decodes");
    assert_eq!(&again, value, "a value changed through encoding and decoding");
}
