//! Splitting an inline command line into arguments, as Redis's
//! `sdssplitargs` does, so that `redis-cli`-style lines typed over telnet and
//! `redis-benchmark`'s `PING_INLINE` mean here what they mean to Redis.
//!
//! * Arguments are separated by whitespace.
//! * `"..."` understands `\n \r \t \b \a \\ \" \xHH`; any other `\c` is `c`.
//! * `'...'` understands only `\'`.
//! * A quote may start in the middle of an argument (`a"b c"` is `ab c`), but
//!   a closing quote must be followed by whitespace or the end of the line.
//!
//! One deliberate difference: Redis works on a C string, so a NUL byte ends
//! the line there; here NUL is an ordinary byte.

use crate::ProtocolError;

/// Splits `line` (without its line terminator) into arguments. A line of
/// only whitespace has none.
pub(crate) fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut args = Vec::new();
    let mut at = 0;
    loop {
        while line.get(at).is_some_and(|&b| is_space(b)) {
            at += 1;
        }
        if at >= line.len() {
            return Ok(args);
        }
        let (arg, next) = split_one(line, at)?;
        args.push(arg);
        at = next;
    }
}

/// C's `isspace`, which Redis uses to skip blanks and to check what follows
/// a closing quote.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Reads the argument starting at `line[at]` (not whitespace). Returns it and
/// where to continue.
fn split_one(line: &[u8], mut at: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
    let mut arg = Vec::new();
    loop {
        match line.get(at) {
            None => return Ok((arg, at)),
            // Redis ends an unquoted argument only on these four, not on
            // every `isspace` byte: `\v` and `\f` stay inside it.
            Some(b' ' | b'\n' | b'\r' | b'\t') => return Ok((arg, at + 1)),
            Some(b'"') => return read_double_quoted(line, at + 1, arg),
            Some(b'\'') => return read_single_quoted(line, at + 1, arg),
            Some(&b) => {
                arg.push(b);
                at += 1;
            }
        }
    }
}

/// Reads from just after an opening `"` up to and including its closing
/// `"`, appending to `arg`.
fn read_double_quoted(line: &[u8], mut at: usize, mut arg: Vec<u8>) -> Result<(Vec<u8>, usize), ProtocolError> {
    loop {
        match (line.get(at), line.get(at + 1)) {
            (None, _) => return Err(ProtocolError::UnbalancedQuotes),
            (Some(b'\\'), Some(b'x')) => match hex_byte(line.get(at + 2), line.get(at + 3)) {
                Some(byte) => {
                    arg.push(byte);
                    at += 4;
                }
                // Not two hex digits: an ordinary escape of `x`.
                None => {
                    arg.push(b'x');
                    at += 2;
                }
            },
            (Some(b'\\'), Some(&escaped)) => {
                arg.push(unescape(escaped));
                at += 2;
            }
            (Some(b'"'), _) => return closing_quote(line, at, arg),
            (Some(&b), _) => {
                arg.push(b);
                at += 1;
            }
        }
    }
}

/// Reads from just after an opening `'` up to and including its closing
/// `'`, appending to `arg`.
fn read_single_quoted(line: &[u8], mut at: usize, mut arg: Vec<u8>) -> Result<(Vec<u8>, usize), ProtocolError> {
    loop {
        match (line.get(at), line.get(at + 1)) {
            (None, _) => return Err(ProtocolError::UnbalancedQuotes),
            (Some(b'\\'), Some(b'\'')) => {
                arg.push(b'\'');
                at += 2;
            }
            (Some(b'\''), _) => return closing_quote(line, at, arg),
            (Some(&b), _) => {
                arg.push(b);
                at += 1;
            }
        }
    }
}

/// Ends an argument at the closing quote `line[at]`, which must be followed
/// by whitespace or the end of the line: `"a"b` is refused rather than
/// guessed at.
fn closing_quote(line: &[u8], at: usize, arg: Vec<u8>) -> Result<(Vec<u8>, usize), ProtocolError> {
    match line.get(at + 1) {
        Some(&b) if !is_space(b) => Err(ProtocolError::UnbalancedQuotes),
        _ => Ok((arg, at + 1)),
    }
}

fn unescape(escaped: u8) -> u8 {
    match escaped {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        other => other,
    }
}

fn hex_byte(high: Option<&u8>, low: Option<&u8>) -> Option<u8> {
    let digit = |b: Option<&u8>| b.and_then(|&b| char::from(b).to_digit(16));
    let value = digit(high)? * 16 + digit(low)?;
    u8::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Result<Vec<Vec<u8>>, ProtocolError> {
        split_args(line.as_bytes())
    }

    fn args(list: &[&[u8]]) -> Vec<Vec<u8>> {
        list.iter().map(|a| a.to_vec()).collect()
    }

    #[test]
    fn words_are_separated_by_any_run_of_whitespace() {
        assert_eq!(split("  set\tkey \x0b value  "), Ok(args(&[b"set", b"key", b"value"])));
    }

    #[test]
    fn a_line_of_only_whitespace_has_no_arguments() {
        assert_eq!(split(""), Ok(vec![]));
        assert_eq!(split(" \t \x0c "), Ok(vec![]));
    }

    #[test]
    fn vertical_tab_and_form_feed_stay_inside_an_unquoted_word() {
        assert_eq!(split("a\x0bb c\x0cd"), Ok(args(&[b"a\x0bb", b"c\x0cd"])));
    }

    #[test]
    fn double_quotes_keep_spaces_and_understand_escapes() {
        assert_eq!(
            split(r#"set "a b" "\n\r\t\b\a\\\"\q\x41\x4a\xzz""#),
            Ok(args(&[b"set", b"a b", b"\n\r\t\x08\x07\\\"qAJxzz"]))
        );
    }

    #[test]
    fn single_quotes_understand_only_an_escaped_single_quote() {
        assert_eq!(split(r"'it\'s' '\n\x41'"), Ok(args(&[b"it's", br"\n\x41"])));
    }

    #[test]
    fn empty_quotes_are_an_empty_argument() {
        assert_eq!(split(r#"set "" ''"#), Ok(args(&[b"set", b"", b""])));
    }

    #[test]
    fn a_quote_may_start_inside_a_word() {
        assert_eq!(split(r#"ab"c d" x'y z'"#), Ok(args(&[b"abc d", b"xy z"])));
    }

    #[test]
    fn nul_is_an_ordinary_byte() {
        assert_eq!(split("a\0b \"\0\""), Ok(args(&[b"a\0b", b"\0"])));
    }

    #[test]
    fn an_unclosed_quote_is_unbalanced() {
        for line in [r#"get "key"#, "get 'key", r#"get "key\"#, r#"get "\x4"#, r"get 'key\'"] {
            assert_eq!(split(line), Err(ProtocolError::UnbalancedQuotes), "{line}");
        }
    }

    #[test]
    fn a_closing_quote_must_be_followed_by_whitespace() {
        assert_eq!(split(r#"get "a"b"#), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(split("get 'a'b"), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(split("get \"a\"\x0bb"), Ok(args(&[b"get", b"a", b"b"])));
    }
}
