//! Encoding replies in RESP2 or RESP3, and requests for tests and tools.
//!
//! A [`Reply`] says what to answer; [`Protocol`] (chosen by the client with
//! `HELLO`) says how to spell it. RESP3 types have a RESP2 spelling, as Redis
//! gives them, so command code builds one reply for both.

use std::fmt::Display;
use std::io::Write;

/// The reply protocol a connection speaks. Requests are the same in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// What every connection starts with.
    #[default]
    Resp2,
    /// After `HELLO 3`.
    Resp3,
}

/// A reply to one command.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text`; `\r` and `\n` are sent as spaces.
    Simple(String),
    /// `-text`, sent as given (the caller writes the `ERR ` / `WRONGTYPE `
    /// prefix); `\r` and `\n` are sent as spaces.
    Error(String),
    /// `:n`
    Integer(i64),
    /// `$len` and the bytes.
    Bulk(Vec<u8>),
    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    Null,
    /// A missing array: `*-1` in RESP2, `_` in RESP3.
    NullArray,
    /// `*n` and the elements.
    Array(Vec<Reply>),
    /// RESP3 `%n` and the pairs; in RESP2 a flat array of `2n` elements.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~n`; in RESP2 an array.
    Set(Vec<Reply>),
    /// Pairs as RESP3 lists them where order matters (`HRANDFIELD … WITHVALUES`): an array of
    /// two-element arrays; in RESP2 a flat array of `2n` elements, as a `Map`.
    Pairs(Vec<(Reply, Reply)>),
    /// RESP3 `,`; in RESP2 a bulk string of the same text.
    Double(f64),
    /// RESP3 `#t` / `#f`; in RESP2 the integer 1 / 0.
    Boolean(bool),
    /// RESP3 `=` with a three-letter format such as `txt`; in RESP2 a bulk
    /// string of the text alone.
    Verbatim {
        /// The format, e.g. `*b"txt"` or `*b"mkd"`.
        format: [u8; 3],
        /// The text without the format prefix.
        text: Vec<u8>,
    },
}

impl Reply {
    /// `+OK`
    pub fn ok() -> Self {
        Reply::Simple("OK".to_owned())
    }

    /// An error reply with the message as given, prefix included
    /// (`Reply::error("ERR unknown command")`).
    pub fn error(message: impl Into<String>) -> Self {
        Reply::Error(message.into())
    }

    /// A bulk string.
    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Self {
        Reply::Bulk(bytes.into())
    }

    /// Appends this reply to `out` as `proto` spells it.
    pub fn encode(&self, proto: Protocol, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(text) => push_line(out, b'+', text),
            Reply::Error(text) => push_line(out, b'-', text),
            Reply::Integer(n) => push_header(out, b':', n),
            Reply::Bulk(bytes) => push_bulk(out, bytes),
            Reply::Null | Reply::NullArray if proto == Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Null => out.extend_from_slice(b"$-1\r\n"),
            Reply::NullArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => push_aggregate(out, b'*', items, proto),
            Reply::Map(pairs) => encode_map(pairs, proto, out),
            Reply::Pairs(pairs) if proto == Protocol::Resp3 => {
                push_header(out, b'*', pairs.len());
                for (a, b) in pairs {
                    push_header(out, b'*', 2);
                    a.encode(proto, out);
                    b.encode(proto, out);
                }
            }
            Reply::Pairs(pairs) => encode_map(pairs, proto, out),
            Reply::Set(items) => {
                let kind = if proto == Protocol::Resp3 { b'~' } else { b'*' };
                push_aggregate(out, kind, items, proto);
            }
            Reply::Double(value) => encode_double(*value, proto, out),
            Reply::Boolean(value) => encode_boolean(*value, proto, out),
            Reply::Verbatim { format, text } => encode_verbatim(format, text, proto, out),
        }
    }
}

/// Appends a multibulk request (`*n` and one bulk string per argument), as a
/// client would send it.
pub fn encode_command(args: &[impl AsRef<[u8]>], out: &mut Vec<u8>) {
    push_header(out, b'*', args.len());
    for arg in args {
        push_bulk(out, arg.as_ref());
    }
}

/// Appends `<kind><value>\r\n`.
fn push_header(out: &mut Vec<u8>, kind: u8, value: impl Display) {
    out.push(kind);
    // Writing into a Vec cannot fail: its io::Write only grows the vector.
    let _ = write!(out, "{value}\r\n");
}

/// Appends a simple string or error line. A CR or LF inside would end the
/// line early and the client would read the rest as the next reply, putting
/// every later reply out of step (and letting text that echoes user input
/// inject replies), so they become spaces, as Redis does for errors.
fn push_line(out: &mut Vec<u8>, kind: u8, text: &str) {
    out.push(kind);
    out.extend(text.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
    out.extend_from_slice(b"\r\n");
}

fn push_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    push_header(out, b'$', bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

fn push_aggregate(out: &mut Vec<u8>, kind: u8, items: &[Reply], proto: Protocol) {
    push_header(out, kind, items.len());
    for item in items {
        item.encode(proto, out);
    }
}

fn encode_map(pairs: &[(Reply, Reply)], proto: Protocol, out: &mut Vec<u8>) {
    match proto {
        Protocol::Resp3 => push_header(out, b'%', pairs.len()),
        Protocol::Resp2 => push_header(out, b'*', pairs.len() * 2),
    }
    for (key, value) in pairs {
        key.encode(proto, out);
        value.encode(proto, out);
    }
}

fn encode_double(value: f64, proto: Protocol, out: &mut Vec<u8>) {
    let text = double_text(value);
    match proto {
        Protocol::Resp3 => push_header(out, b',', text),
        Protocol::Resp2 => push_bulk(out, text.as_bytes()),
    }
}

fn encode_boolean(value: bool, proto: Protocol, out: &mut Vec<u8>) {
    match proto {
        Protocol::Resp3 => out.extend_from_slice(if value { b"#t\r\n" } else { b"#f\r\n" }),
        Protocol::Resp2 => push_header(out, b':', i64::from(value)),
    }
}

fn encode_verbatim(format: &[u8; 3], text: &[u8], proto: Protocol, out: &mut Vec<u8>) {
    match proto {
        Protocol::Resp3 => {
            push_header(out, b'=', text.len() + 4);
            out.extend_from_slice(format);
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        Protocol::Resp2 => push_bulk(out, text),
    }
}

/// A double as Redis's `d2string` writes it: `nan`, `inf`, `-inf`, `-0`, an
/// integer when the value is one that an `i64` holds exactly (|v| <= 2^62,
/// Redis's bound), otherwise the shortest text that reads back as the same
/// double (Rust's `{:?}`, e.g. `1.5`, `1e-7`, `1e300`; Redis writes `1e+300`,
/// which clients parse alike).
fn double_text(value: f64) -> String {
    const EXACT_INTEGER_MAX: f64 = 4_611_686_018_427_387_904.0; // 2^62
    if value.is_nan() {
        "nan".to_owned()
    } else if value.is_infinite() {
        if value < 0.0 { "-inf" } else { "inf" }.to_owned()
    } else if value == 0.0 {
        if value.is_sign_negative() { "-0" } else { "0" }.to_owned()
    } else if value.fract() == 0.0 && value.abs() <= EXACT_INTEGER_MAX {
        // In range, so the cast is exact.
        (value as i64).to_string()
    } else {
        format!("{value:?}")
    }
}

#[cfg(test)]
#[path = "reply_tests.rs"]
mod tests;
