//! `LCS`: the longest common subsequence of two values, its length, or the ranges that match —
//! in Redis's replies, ranges listed from the end of the values back, as Redis walks them.
//!
//! The table of lengths takes `(|a| + 1) × (|b| + 1)` cells; past [`TABLE_MAX_CELLS`] the command
//! is refused before anything is allocated (Redis bounds it by its 512 MiB bulk limit, which one
//! client could make every connection spend).

use super::command::LcsAnswer;
use waymark_resp::Reply;

/// The most cells of the table one `LCS` may use (4 bytes each: 64 MiB).
pub const TABLE_MAX_CELLS: u64 = 16 << 20;

/// The reply to `LCS` over `a` and `b`.
pub fn reply(a: &[u8], b: &[u8], answer: LcsAnswer) -> Reply {
    let cells = (a.len() as u64 + 1).saturating_mul(b.len() as u64 + 1);
    if cells > TABLE_MAX_CELLS {
        return Reply::error(format!(
            "ERR Insufficient memory, transient memory for LCS exceeds {} MiB",
            (TABLE_MAX_CELLS * 4) >> 20
        ));
    }
    let table = Table::of(a, b);
    let len = table.at(a.len(), b.len());
    match answer {
        LcsAnswer::Len => Reply::Integer(i64::from(len)),
        LcsAnswer::Text => Reply::bulk(table.walk(a, b, |_| {})),
        LcsAnswer::Ranges { min_len, with_len } => {
            let mut matches = vec![];
            table.walk(a, b, |r: Range| {
                let match_len = (r.a.1 - r.a.0 + 1) as u64;
                if min_len == 0 || match_len >= min_len {
                    let pair = |(s, e): (usize, usize)| Reply::Array(vec![int(s), int(e)]);
                    let mut item = vec![pair(r.a), pair(r.b)];
                    if with_len {
                        item.push(Reply::Integer(match_len as i64));
                    }
                    matches.push(Reply::Array(item));
                }
            });
            let s = |t: &str| Reply::bulk(t.as_bytes().to_vec());
            Reply::Map(vec![(s("matches"), Reply::Array(matches)), (s("len"), Reply::Integer(i64::from(len)))])
        }
    }
}

fn int(n: usize) -> Reply {
    Reply::Integer(n as i64)
}

/// A run of matching bytes: `a[a.0..=a.1]` equals `b[b.0..=b.1]`.
struct Range {
    a: (usize, usize),
    b: (usize, usize),
}

/// `at(i, j)`: the length of the LCS of `a[..i]` and `b[..j]`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    fn of(a: &[u8], b: &[u8]) -> Table {
        let width = b.len() + 1;
        let mut t = Table { cells: vec![0; (a.len() + 1) * width], width };
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let v = if a[i - 1] == b[j - 1] { t.at(i - 1, j - 1) + 1 } else { t.at(i - 1, j).max(t.at(i, j - 1)) };
                t.cells[i * width + j] = v;
            }
        }
        t
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// Walks back from the ends as Redis does: the subsequence, and each range of contiguous
    /// matches handed to `emit` as it closes.
    fn walk(&self, a: &[u8], b: &[u8], mut emit: impl FnMut(Range)) -> Vec<u8> {
        let (mut i, mut j) = (a.len(), b.len());
        let mut text = Vec::with_capacity(self.at(i, j) as usize);
        let mut open: Option<Range> = None;
        while i > 0 && j > 0 {
            let mut close = false;
            if a[i - 1] == b[j - 1] {
                text.push(a[i - 1]);
                match open.as_mut() {
                    None => open = Some(Range { a: (i - 1, i - 1), b: (j - 1, j - 1) }),
                    Some(r) if r.a.0 == i && r.b.0 == j => (r.a.0, r.b.0) = (i - 1, j - 1),
                    Some(_) => close = true,
                }
                if open.as_ref().is_some_and(|r| r.a.0 == 0 || r.b.0 == 0) {
                    close = true;
                }
                (i, j) = (i - 1, j - 1);
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                close = open.is_some();
            }
            if close {
                if let Some(r) = open.take() {
                    emit(r);
                }
            }
        }
        text.reverse();
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subsequence_its_length_and_its_ranges_are_redis_s() {
        let (a, b) = (b"ohmytext".as_slice(), b"mynewtext".as_slice());
        assert_eq!(reply(a, b, LcsAnswer::Text), Reply::bulk("mytext"));
        assert_eq!(reply(a, b, LcsAnswer::Len), Reply::Integer(6));
        // Redis's documented answer: matches [[4,7],[5,8]] and [[2,3],[0,1]], len 6.
        let ranges = reply(a, b, LcsAnswer::Ranges { min_len: 0, with_len: true });
        let pair = |s, e| Reply::Array(vec![Reply::Integer(s), Reply::Integer(e)]);
        let expected = Reply::Array(vec![
            Reply::Array(vec![pair(4, 7), pair(5, 8), Reply::Integer(4)]),
            Reply::Array(vec![pair(2, 3), pair(0, 1), Reply::Integer(2)]),
        ]);
        let Reply::Map(fields) = ranges else { panic!("a map") };
        assert_eq!(fields[0].1, expected);
        assert_eq!(fields[1].1, Reply::Integer(6));
        let Reply::Map(long) = reply(a, b, LcsAnswer::Ranges { min_len: 4, with_len: false }) else { panic!() };
        assert_eq!(long[0].1, Reply::Array(vec![Reply::Array(vec![pair(4, 7), pair(5, 8)])]));
    }

    #[test]
    fn a_table_past_the_limit_is_refused_before_it_is_allocated() {
        let big = vec![b'x'; 5_000];
        assert!(matches!(reply(&big, &big, LcsAnswer::Len), Reply::Error(e) if e.contains("Insufficient memory")));
        assert_eq!(reply(b"", b"abc", LcsAnswer::Text), Reply::bulk(""));
    }
}
