//! The Redis protocol (RESP) for Waymark's server, sans IO.
//!
//! This crate turns request bytes into commands and replies into bytes. It
//! has no sockets, no async runtime and no clock: the server reads from the
//! connection, hands the bytes to a [`RequestParser`], runs the commands and
//! writes what [`Reply::encode`] produced. That keeps every protocol decision
//! testable and fuzzable on plain byte slices.
//!
//! * [`RequestParser`] reads multibulk requests (`*<n>\r\n$<len>\r\n...`)
//!   and inline commands (`PING\r\n`, split like Redis's `sdssplitargs`),
//!   incrementally: it keeps its progress, so a request that arrives one
//!   byte at a time costs no more than one that arrives whole.
//! * [`Reply`] encodes replies in RESP2 or RESP3 ([`Protocol`]). RESP3 only
//!   changes replies; requests are the same in both, so the parser does not
//!   know which one a connection speaks.
//! * [`encode_command`] writes a request, for tests and benchmarks.
//!
//! A connection's read loop, with what the socket has delivered so far:
//!
//! ```
//! use waymark_resp::{Limits, Protocol, Reply, RequestParser};
//!
//! let mut parser = RequestParser::new(Limits::default());
//! let mut buffer = b"*1\r\n$4\r\nPING\r\nECHO hi\r\n*1\r\n$4\r\nPI".to_vec();
//! let mut out = Vec::new();
//! loop {
//!     // On an error: write `-ERR {error}` and close the connection.
//!     let parsed = parser.parse(&buffer, true).unwrap();
//!     buffer.drain(..parsed.consumed);
//!     let Some(command) = parsed.command else {
//!         break; // Wait for more bytes, append them to `buffer`, go on.
//!     };
//!     let reply = match command[0].as_slice() {
//!         b"PING" => Reply::Simple("PONG".into()),
//!         _ => Reply::bulk(command[1].clone()),
//!     };
//!     reply.encode(Protocol::Resp2, &mut out);
//! }
//! assert_eq!(out, b"+PONG\r\n$2\r\nhi\r\n");
//! // The unfinished command's header and first bulk header are consumed and
//! // kept in the parser; only the unfinished payload is left.
//! assert_eq!(buffer, b"PI");
//! ```
//!
//! # Limits
//!
//! A client announces lengths before it sends the bytes (`*<count>`,
//! `$<len>`). A parser that reserves memory for the announced number lets
//! one short line make the server allocate gigabytes: tokio's mini-redis
//! does `Vec::with_capacity(len)` on the client's number and says itself
//! that it is not for production. So every announced length is checked
//! against [`Limits`] (Redis's defaults) before anything is allocated; an
//! argument count reserves at most 1024 slots up front, however large; and a
//! bulk string is allocated only once all its bytes have arrived. Lines
//! (inline commands, headers) are refused as soon as they pass
//! `inline_max_bytes` without a terminator, rather than waiting for one.
//! Before a client has authenticated, the much smaller Redis limits for
//! anonymous clients apply (10 arguments, 16 KiB each).
//!
//! On any [`ProtocolError`] the caller replies `-ERR <error>` and closes the
//! connection: the stream is out of sync and the parser does not recover.
//!
//! The parser never panics on any input: `fuzzing::request_parser` states
//! the contract, `tests/fuzz.rs` runs it over a committed corpus and its
//! mutants in every `cargo test`, and `fuzz/` runs it coverage-guided with
//! cargo-fuzz on nightly.

mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod glob;
mod inline;
mod limits;
mod parse;
mod reply;

pub use error::ProtocolError;
pub use limits::Limits;
pub use parse::{Command, Parsed, RequestParser};
pub use reply::{encode_command, Protocol, Reply};
