//! Redis's glob-style patterns (`CONFIG GET`, and later `KEYS`, `SCAN … MATCH`), matched in time
//! proportional to the pattern's length times the subject's, whatever the pattern.
//!
//! Redis's own matcher (`stringmatchlen`) recurses on every `*` and took exponential time on a
//! pattern of many stars (CVE-2022-36021, fixed there by a recursion limit). This one compiles the
//! pattern into single-byte tokens and `*`, and matches greedily, going back only to the last `*`
//! seen: a later star's match supersedes an earlier one's, so nothing before it needs trying again.
//!
//! The syntax is Redis's: `*` any run of bytes, `?` any one byte, `[abc]`, `[^abc]`, `[a-z]` a
//! class, `\x` the byte `x` (also inside a class). A `[` never closed runs to the pattern's end, as
//! in Redis.

/// The longest pattern accepted; a longer one matches nothing. Bounds the compiled pattern's size.
pub const PATTERN_MAX_BYTES: usize = 4_096;

/// One step of a compiled pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    /// `*`: any run of bytes, the empty one included.
    Star,
    /// `?`: any one byte.
    Any,
    Byte(u8),
    /// `[…]`: one byte in (or, `negated`, not in) one of the ranges, each `lo..=hi`.
    Class {
        negated: bool,
        ranges: Vec<(u8, u8)>,
    },
}

/// A pattern compiled once, matched against many subjects.
#[derive(Clone, Debug)]
pub struct Glob {
    tokens: Vec<Token>,
    nocase: bool,
}

impl Glob {
    /// Compiles `pattern`; `None` if it is longer than `PATTERN_MAX_BYTES`. `nocase` folds ASCII
    /// letters, as Redis does for `CONFIG GET`.
    pub fn new(pattern: &[u8], nocase: bool) -> Option<Glob> {
        if pattern.len() > PATTERN_MAX_BYTES {
            return None;
        }
        let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
        let mut tokens = vec![];
        let mut i = 0;
        while i < pattern.len() {
            let token = match pattern[i] {
                b'*' => Token::Star,
                b'?' => Token::Any,
                b'\\' if i + 1 < pattern.len() => {
                    i += 1;
                    Token::Byte(fold(pattern[i]))
                }
                b'[' => {
                    let (class, next) = class(pattern, i + 1, fold);
                    i = next;
                    tokens.push(class);
                    continue;
                }
                b => Token::Byte(fold(b)),
            };
            // A run of stars matches what one star does.
            if !(token == Token::Star && tokens.last() == Some(&Token::Star)) {
                tokens.push(token);
            }
            i += 1;
        }
        Some(Glob { tokens, nocase })
    }

    /// Whether `subject` matches the whole pattern.
    ///
    /// Invariant: at most `(tokens + 1) × (subject + 1)` steps — each step advances the subject,
    /// or a token with the subject standing still, or goes back to the last star with that star's
    /// start one byte further on.
    pub fn matches(&self, subject: &[u8]) -> bool {
        let (mut t, mut s) = (0, 0);
        // The last star seen, and the subject position its match ends at now.
        let mut star: Option<(usize, usize)> = None;
        while s < subject.len() {
            match self.tokens.get(t) {
                Some(Token::Star) => {
                    star = Some((t, s));
                    t += 1;
                }
                Some(token) if self.one(token, subject[s]) => {
                    t += 1;
                    s += 1;
                }
                _ => match star {
                    // Let the last star take one more byte, and go on after it.
                    Some((star_t, star_s)) => {
                        star = Some((star_t, star_s + 1));
                        t = star_t + 1;
                        s = star_s + 1;
                    }
                    None => return false,
                },
            }
        }
        self.tokens[t.min(self.tokens.len())..].iter().all(|token| *token == Token::Star)
    }

    /// Whether the single-byte `token` (not a star) takes `byte`.
    fn one(&self, token: &Token, byte: u8) -> bool {
        let byte = if self.nocase { byte.to_ascii_lowercase() } else { byte };
        match token {
            Token::Star => false,
            Token::Any => true,
            Token::Byte(b) => *b == byte,
            Token::Class { negated, ranges } => ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&byte)) != *negated,
        }
    }
}

/// The class whose body starts at `start` (after `[`): the token, and where the pattern goes on.
fn class(pattern: &[u8], start: usize, fold: impl Fn(u8) -> u8) -> (Token, usize) {
    let mut i = start;
    let negated = pattern.get(i) == Some(&b'^');
    if negated {
        i += 1;
    }
    let mut ranges = vec![];
    while i < pattern.len() && pattern[i] != b']' {
        let mut lo = pattern[i];
        if lo == b'\\' && i + 1 < pattern.len() {
            i += 1;
            lo = pattern[i];
        }
        if pattern.get(i + 1) == Some(&b'-') && i + 2 < pattern.len() && pattern[i + 2] != b']' {
            let (a, b) = (fold(lo), fold(pattern[i + 2]));
            ranges.push((a.min(b), a.max(b)));
            i += 3;
        } else {
            ranges.push((fold(lo), fold(lo)));
            i += 1;
        }
    }
    // Past the `]`, or past the end when it never came.
    (Token::Class { negated, ranges }, i + 1)
}

/// Whether `subject` matches `pattern` (compiled for this one use).
pub fn matches(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
    Glob::new(pattern, nocase).is_some_and(|g| g.matches(subject))
}

#[cfg(test)]
mod tests {
    use super::matches;

    fn m(p: &str, s: &str) -> bool {
        matches(p.as_bytes(), s.as_bytes(), false)
    }

    #[test]
    fn stars_and_question_marks_match_as_in_redis() {
        assert!(m("*", ""));
        assert!(m("*", "appendonly"));
        assert!(m("append*", "appendfsync"));
        assert!(m("*fsync", "appendfsync"));
        assert!(m("a*d*c", "appendfsync"));
        assert!(m("?ave", "save"));
        assert!(!m("?ave", "ave"));
        assert!(!m("save", "appendonly"));
        assert!(!m("a*x", "appendfsync"));
        assert!(m("h*llo", "hllo") && m("h*llo", "heeeello"));
        assert!(m("**a**", "banana"));
    }

    #[test]
    fn classes_ranges_negations_and_escapes_match_as_in_redis() {
        assert!(m("h[ae]llo", "hello") && m("h[ae]llo", "hallo") && !m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo") && !m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo") && !m("h[a-b]llo", "hcllo"));
        assert!(m("h[b-a]llo", "hallo"), "a range written backwards");
        assert!(m("h\\*llo", "h*llo") && !m("h\\*llo", "hello"));
        assert!(m("[\\]]", "]"));
        assert!(m("a[bc", "ab"), "a class never closed runs to the end");
    }

    #[test]
    fn case_is_folded_only_when_asked() {
        assert!(matches(b"APPEND*", b"appendonly", true));
        assert!(!matches(b"APPEND*", b"appendonly", false));
        assert!(matches(b"[A-C]x", b"bx", true));
    }

    /// CVE-2022-36021's pattern: a recursive matcher tries every way of splitting the subject
    /// among the stars and never ends. This one takes stars × bytes steps.
    #[test]
    fn a_pattern_of_many_stars_is_matched_without_backtracking_over_every_split() {
        let pattern = format!("{}x", "*a".repeat(2_000));
        let subject = "a".repeat(4_000);
        assert!(!matches(pattern.as_bytes(), subject.as_bytes(), false));
        let pattern = format!("{}x", "*".repeat(63));
        assert!(!matches(pattern.as_bytes(), b"proto-max-bulk-len", true));
    }

    #[test]
    fn a_pattern_longer_than_the_limit_matches_nothing() {
        let long = "*".repeat(super::PATTERN_MAX_BYTES + 1);
        assert!(!matches(long.as_bytes(), b"anything", false));
    }
}
