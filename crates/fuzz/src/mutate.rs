//! The mutations a campaign applies to corpus files: the damage a disk, a network or a hostile
//! peer does, and the edits that reach a decoder's limit checks.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Mutants never grow past this: the targets read small inputs, and a bound keeps each case fast.
const MUTANT_BYTES_MAX: usize = 64 << 10;

/// Values that sit on the edges of length and count checks.
const INTERESTING_U32: [u32; 10] = [0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x7fff_ffff, 0xffff_ffff];

/// Draws mutants of the corpus from a seeded generator.
pub struct Mutator {
    rng: ChaCha8Rng,
}

impl Mutator {
    pub fn new(rng: ChaCha8Rng) -> Mutator {
        Mutator { rng }
    }

    /// A mutant of `seeds[i]` for a random `i`: one to four edits, possibly a splice with another.
    pub fn mutant(&mut self, seeds: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = seeds[self.rng.gen_range(0..seeds.len())].clone();
        for _ in 0..self.rng.gen_range(1..=4) {
            self.edit(&mut bytes, seeds);
        }
        bytes.truncate(MUTANT_BYTES_MAX);
        bytes
    }

    fn edit(&mut self, bytes: &mut Vec<u8>, seeds: &[Vec<u8>]) {
        let len = bytes.len();
        let at = self.rng.gen_range(0..=len);
        match self.rng.gen_range(0..9) {
            // A flipped bit.
            0 if len > 0 => {
                let at = at % len;
                bytes[at] ^= 1 << self.rng.gen_range(0..8);
            }
            // A byte set to an edge value.
            1 if len > 0 => {
                let at = at % len;
                bytes[at] = [0, 1, 0x7f, 0x80, 0xff, b'\r', b'\n', b'$', b'*', b'{', b'"'][self.rng.gen_range(0..11)];
            }
            // Cut short (a torn write).
            2 => bytes.truncate(at),
            // Random bytes inserted.
            3 => {
                let n = self.rng.gen_range(1..=16);
                let fresh: Vec<u8> = (0..n).map(|_| self.rng.gen()).collect();
                bytes.splice(at..at, fresh);
            }
            // A stretch deleted.
            4 if at < len => {
                let end = self.rng.gen_range(at..=len.min(at + 32));
                bytes.drain(at..end);
            }
            // A stretch repeated many times (deep nesting, long runs).
            5 if at < len => {
                let end = self.rng.gen_range(at + 1..=len.min(at + 16));
                let stretch = bytes[at..end].to_vec();
                let times = self.rng.gen_range(1..=256);
                let repeated: Vec<u8> = stretch.iter().copied().cycle().take(stretch.len() * times).collect();
                bytes.splice(at..at, repeated);
            }
            // A length or count field rewritten: an edge value as a u32 (either order), a u64, or a
            // postcard varint.
            6 => {
                let value = INTERESTING_U32[self.rng.gen_range(0..INTERESTING_U32.len())];
                let field: Vec<u8> = match self.rng.gen_range(0..4) {
                    0 => value.to_le_bytes().to_vec(),
                    1 => value.to_be_bytes().to_vec(),
                    2 => u64::from(value).wrapping_mul(0x1_0000_0001).to_le_bytes().to_vec(),
                    _ => varint(u64::from(value)),
                };
                let end = (at + field.len()).min(len);
                bytes.splice(at..end, field);
            }
            // A decimal number rewritten (RESP lengths, JSON numbers).
            7 => {
                let digits = [
                    "0",
                    "-1",
                    "65535",
                    "2147483647",
                    "4294967295",
                    "4294967296",
                    "18446744073709551615",
                    "18446744073709551616",
                    "1e400",
                ];
                let digits = digits[self.rng.gen_range(0..digits.len())].as_bytes();
                // One of the numbers already there, whole (or, if there is none, a new one).
                let starts: Vec<usize> = (0..len)
                    .filter(|&i| bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit()))
                    .collect();
                let at = if starts.is_empty() { at } else { starts[self.rng.gen_range(0..starts.len())] };
                let run = bytes[at..].iter().take_while(|b| b.is_ascii_digit()).count();
                bytes.splice(at..at + run, digits.iter().copied());
            }
            // Spliced: this one's head, another's tail.
            _ => {
                let other = &seeds[self.rng.gen_range(0..seeds.len())];
                let from = self.rng.gen_range(0..=other.len());
                bytes.truncate(at);
                bytes.extend_from_slice(&other[from..]);
            }
        }
    }
}

/// `value` as postcard writes a length: seven bits a byte, low first.
fn varint(mut value: u64) -> Vec<u8> {
    let mut out = vec![];
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_same_seed_draws_the_same_mutants() {
        let seeds = vec![b"hello world".to_vec(), vec![0, 1, 2, 3]];
        let draw = |seed| {
            let mut m = Mutator::new(ChaCha8Rng::seed_from_u64(seed));
            (0..100).map(|_| m.mutant(&seeds)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn a_varint_is_what_postcard_writes() {
        assert_eq!(varint(0), [0]);
        assert_eq!(varint(0x7f), [0x7f]);
        assert_eq!(varint(0x80), [0x80, 0x01]);
        assert_eq!(varint(0xffff_ffff), [0xff, 0xff, 0xff, 0xff, 0x0f]);
    }
}
