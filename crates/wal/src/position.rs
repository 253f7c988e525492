//! Positions name records in the log.
//!
//! A position is `(segment base, byte offset within that segment file)`.
//! Segment bases are themselves global byte offsets: the next segment's base
//! is the previous base plus the previous segment's file length. So ordering
//! positions lexicographically (derived `Ord`) is the same as ordering them by
//! their global byte offset, and positions only ever grow as the log grows.

use std::fmt;

/// Where a record starts (or where the log ends) in a segmented log.
///
/// Invariant: for positions produced by the log, `segment` is the base of an
/// existing (or since-removed) segment file and `offset` lies within that
/// file, so `(a < b) == (a.global() < b.global())`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// Base of the segment file: its first global byte offset (also its name).
    pub segment: u64,
    /// Byte offset inside the segment file, counting the segment header.
    pub offset: u64,
}

impl Position {
    /// The very beginning of a log whose first segment has base 0.
    pub const ZERO: Position = Position { segment: 0, offset: 0 };

    /// Builds a position from a segment base and an offset inside it.
    pub const fn new(segment: u64, offset: u64) -> Position {
        Position { segment, offset }
    }

    /// The global byte offset of this position (segment base + offset).
    pub const fn global(self) -> u64 {
        self.segment + self.offset
    }
}

impl fmt::Display for Position {
    /// Same zero-padded base as the segment file name, so a position can be
    /// matched to its file by eye: `00000000000000000000:1234`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:020}:{}", self.segment, self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_padded_base_and_offset() {
        assert_eq!(Position::new(0, 1234).to_string(), "00000000000000000000:1234");
        assert_eq!(Position::new(4096, 24).to_string(), "00000000000000004096:24");
    }

    #[test]
    fn order_matches_global_offset_across_segments() {
        let end_of_first = Position::new(0, 4096);
        let start_of_second = Position::new(4096, 24);
        assert!(end_of_first < start_of_second);
        assert!(end_of_first.global() < start_of_second.global());
        assert!(Position::new(0, 10) < Position::new(0, 11));
    }
}
