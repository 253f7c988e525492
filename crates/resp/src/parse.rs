//! The incremental request parser.
//!
//! The caller owns the bytes; the parser owns the progress. Each call to
//! [`RequestParser::parse`] gets the caller's unconsumed bytes (what was left
//! last time, plus what has arrived since), consumes what it can, and says
//! how much. Whatever it consumed is in its state, so no byte is looked at
//! twice except a line whose end has not arrived yet, and even that is
//! searched only from where the last search stopped.
//!
//! A bulk string is consumed only once its payload and CRLF are all present,
//! so memory for an argument is allocated only for bytes that exist.

use crate::inline::split_args;
use crate::{Limits, ProtocolError};

/// A command: its name and arguments, as sent.
pub type Command = Vec<Vec<u8>>;

/// The outcome of one [`RequestParser::parse`] call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    /// Bytes at the front of the input that the parser has taken; the caller
    /// drops them before the next call.
    pub consumed: usize,
    /// A complete command, or `None` when everything usable was consumed and
    /// more bytes are needed.
    pub command: Option<Command>,
}

/// Most argument slots reserved up front, whatever the header claims: a
/// claimed count costs nothing until its arguments actually arrive.
const ARGS_PREALLOCATED_MAX: usize = 1024;

/// Parses a client's request stream into commands.
///
/// Contract: after each call the caller drops `consumed` bytes from the
/// front of its buffer and passes the rest, unchanged, plus any new bytes, to
/// the next call. On an error the stream is out of sync: the caller replies
/// with the error and closes the connection; the parser is not to be used
/// again.
#[derive(Debug)]
pub struct RequestParser {
    limits: Limits,
    /// The multibulk command whose header has been consumed.
    pending: Option<Multibulk>,
    /// How many bytes at the front of the next input were already searched
    /// for a line terminator without finding one. Only an unfinished line
    /// leaves this above zero.
    line_scanned: usize,
}

/// A multibulk command in progress.
#[derive(Debug)]
struct Multibulk {
    args: Command,
    /// Arguments still to come. Invariant: `remaining > 0`, and
    /// `args.len() + remaining` is the count the header claimed.
    remaining: usize,
    /// Length from a consumed `$<len>` header whose payload is not complete.
    bulk_len: Option<usize>,
    /// Bytes of the arguments announced so far (`args` and `bulk_len`).
    /// Invariant: at most `limits.command_max_bytes`.
    bytes: usize,
}

/// What one step of parsing did with the bytes in front of it.
#[derive(Debug)]
enum Step {
    /// Took this many bytes; no command is complete yet.
    Consumed(usize),
    /// Took this many bytes, completing a command.
    Command(usize, Command),
    /// Needs more bytes; `line_scanned` bytes of an unfinished line were
    /// searched.
    NeedMore { line_scanned: usize },
}

impl RequestParser {
    /// A parser between two commands.
    pub fn new(limits: Limits) -> Self {
        RequestParser { limits, pending: None, line_scanned: 0 }
    }

    /// The limits this parser enforces.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Parses the front of `input` into at most one command. Empty inline
    /// lines and `*0` (or negative) arrays are skipped, as Redis does.
    /// `authenticated` selects the limits checked for headers read in this
    /// call.
    pub fn parse(&mut self, input: &[u8], authenticated: bool) -> Result<Parsed, ProtocolError> {
        let mut consumed = 0;
        loop {
            let rest = input.get(consumed..).unwrap_or_default();
            let step = match self.pending.as_mut() {
                Some(multibulk) => multibulk.step(rest, &self.limits, authenticated, self.line_scanned)?,
                None => self.start_request(rest, authenticated)?,
            };
            match step {
                Step::Consumed(taken) => {
                    consumed += taken;
                    self.line_scanned = 0;
                }
                Step::Command(taken, command) => {
                    self.pending = None;
                    self.line_scanned = 0;
                    return Ok(Parsed { consumed: consumed + taken, command: Some(command) });
                }
                Step::NeedMore { line_scanned } => {
                    self.line_scanned = line_scanned;
                    return Ok(Parsed { consumed, command: None });
                }
            }
        }
    }

    /// Reads the start of a request: a multibulk header if it begins with
    /// `*`, otherwise a whole inline line.
    fn start_request(&mut self, rest: &[u8], authenticated: bool) -> Result<Step, ProtocolError> {
        match rest.first() {
            None => Ok(Step::NeedMore { line_scanned: 0 }),
            Some(b'*') => self.start_multibulk(rest, authenticated),
            Some(_) => inline_command(rest, &self.limits, authenticated, self.line_scanned),
        }
    }

    /// Reads `*<count>\r\n`, checking the count before reserving anything.
    fn start_multibulk(&mut self, rest: &[u8], authenticated: bool) -> Result<Step, ProtocolError> {
        let (count, taken) = match header_line(rest, HeaderKind::Multibulk, &self.limits, self.line_scanned)? {
            Header::Complete { value, taken } => (value, taken),
            Header::NotYet { scanned } => return Ok(Step::NeedMore { line_scanned: scanned }),
        };
        let Ok(count) = usize::try_from(count) else {
            // Zero or negative: Redis skips the request without a reply.
            return Ok(Step::Consumed(taken));
        };
        self.limits.check_arg_count(count, authenticated)?;
        if count > 0 {
            let args = Vec::with_capacity(count.min(ARGS_PREALLOCATED_MAX));
            self.pending = Some(Multibulk { args, remaining: count, bulk_len: None, bytes: 0 });
        }
        Ok(Step::Consumed(taken))
    }
}

impl Multibulk {
    /// Reads the next `$<len>\r\n` header, or the payload it announced.
    fn step(
        &mut self,
        rest: &[u8],
        limits: &Limits,
        authenticated: bool,
        line_scanned: usize,
    ) -> Result<Step, ProtocolError> {
        let Some(len) = self.bulk_len else {
            return self.read_bulk_header(rest, limits, authenticated, line_scanned);
        };
        // A length near usize::MAX is possible only with bulk_max_bytes
        // raised that far; it can never be complete.
        let Some(end) = len.checked_add(2) else {
            return Ok(Step::NeedMore { line_scanned: 0 });
        };
        let (Some(payload), Some(terminator)) = (rest.get(..len), rest.get(len..end)) else {
            return Ok(Step::NeedMore { line_scanned: 0 });
        };
        if terminator != b"\r\n" {
            return Err(ProtocolError::BulkNotTerminated);
        }
        debug_assert!(self.remaining > 0, "a multibulk with nothing remaining is complete");
        self.args.push(payload.to_vec());
        self.bulk_len = None;
        self.remaining -= 1;
        if self.remaining == 0 {
            Ok(Step::Command(end, std::mem::take(&mut self.args)))
        } else {
            Ok(Step::Consumed(end))
        }
    }

    fn read_bulk_header(
        &mut self,
        rest: &[u8],
        limits: &Limits,
        authenticated: bool,
        line_scanned: usize,
    ) -> Result<Step, ProtocolError> {
        // Checked before the line is complete: a wrong first byte is wrong
        // however the line ends, so there is no reason to wait for it.
        match rest.first() {
            None => return Ok(Step::NeedMore { line_scanned: 0 }),
            Some(b'$') => {}
            Some(&got) => return Err(ProtocolError::ExpectedBulk { got }),
        }
        let (len, taken) = match header_line(rest, HeaderKind::Bulk, limits, line_scanned)? {
            Header::Complete { value, taken } => (value, taken),
            Header::NotYet { scanned } => return Ok(Step::NeedMore { line_scanned: scanned }),
        };
        let len = usize::try_from(len).map_err(|_| ProtocolError::InvalidBulkLength)?;
        limits.check_arg_bytes(len, authenticated)?;
        limits.check_command_bytes(self.bytes, len)?;
        self.bytes += len;
        self.bulk_len = Some(len);
        Ok(Step::Consumed(taken))
    }
}

/// Reads one inline line and splits it into a command. An empty line is
/// consumed without a command.
fn inline_command(
    rest: &[u8],
    limits: &Limits,
    authenticated: bool,
    line_scanned: usize,
) -> Result<Step, ProtocolError> {
    let newline = match find_line_end(rest, b'\n', limits.inline_max_bytes, line_scanned) {
        LineEnd::Found(at) => at,
        LineEnd::NotYet { scanned } => return Ok(Step::NeedMore { line_scanned: scanned }),
        LineEnd::TooLong => return Err(ProtocolError::InlineTooBig),
    };
    let line = rest.get(..newline).unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let args = split_args(line)?;
    let taken = newline + 1;
    if args.is_empty() {
        return Ok(Step::Consumed(taken));
    }
    limits.check_arg_count(args.len(), authenticated)?;
    for arg in &args {
        limits.check_arg_bytes(arg.len(), authenticated)?;
    }
    Ok(Step::Command(taken, args))
}

/// Which header line is being read; they differ only in their errors.
#[derive(Debug, Clone, Copy)]
enum HeaderKind {
    /// `*<count>\r\n`
    Multibulk,
    /// `$<len>\r\n`
    Bulk,
}

impl HeaderKind {
    fn too_long(self) -> ProtocolError {
        match self {
            HeaderKind::Multibulk => ProtocolError::MultibulkCountTooBig,
            HeaderKind::Bulk => ProtocolError::BulkCountTooBig,
        }
    }

    fn invalid(self) -> ProtocolError {
        match self {
            HeaderKind::Multibulk => ProtocolError::InvalidMultibulkLength,
            HeaderKind::Bulk => ProtocolError::InvalidBulkLength,
        }
    }
}

/// A header line at the front of the input.
enum Header {
    /// The number in the line, and the whole line's length with its CRLF.
    Complete { value: i64, taken: usize },
    /// Not all there yet; `scanned` bytes were searched.
    NotYet { scanned: usize },
}

/// Reads the header line at the front of `rest` (which starts with its
/// type byte) and the number in it.
fn header_line(rest: &[u8], kind: HeaderKind, limits: &Limits, line_scanned: usize) -> Result<Header, ProtocolError> {
    let cr = match find_line_end(rest, b'\r', limits.inline_max_bytes, line_scanned) {
        LineEnd::Found(at) => at,
        LineEnd::NotYet { scanned } => return Ok(Header::NotYet { scanned }),
        LineEnd::TooLong => return Err(kind.too_long()),
    };
    match rest.get(cr + 1) {
        // The CR is found again at once when the LF arrives.
        None => Ok(Header::NotYet { scanned: cr }),
        Some(b'\n') => {
            let digits = rest.get(1..cr).unwrap_or_default();
            let value = parse_length(digits).ok_or(kind.invalid())?;
            Ok(Header::Complete { value, taken: cr + 2 })
        }
        // A bare CR: Redis would not look at the byte after it, but a line
        // that does not end in CRLF is not a header.
        Some(_) => Err(kind.invalid()),
    }
}

/// Where a line ends, looked for only within its first `max_bytes + 1`
/// bytes, so the answer does not depend on how the bytes were split into
/// reads.
enum LineEnd {
    /// Index of the terminator byte.
    Found(usize),
    /// No terminator among the `scanned` bytes present, and they are within
    /// the limit.
    NotYet { scanned: usize },
    /// More than `max_bytes` bytes and no terminator among them.
    TooLong,
}

/// Searches `buf` for `terminator`, skipping the `scanned` bytes a previous
/// call already searched.
fn find_line_end(buf: &[u8], terminator: u8, max_bytes: usize, scanned: usize) -> LineEnd {
    let window = buf.get(..max_bytes.saturating_add(1)).unwrap_or(buf);
    let from = scanned.min(window.len());
    let unsearched = window.get(from..).unwrap_or_default();
    match unsearched.iter().position(|&b| b == terminator) {
        Some(offset) => LineEnd::Found(from + offset),
        None if buf.len() > max_bytes => LineEnd::TooLong,
        None => LineEnd::NotYet { scanned: window.len() },
    }
}

/// Parses a decimal length as strictly as Redis's `string2ll`: an optional
/// `-`, then digits without a leading zero (except `0` itself), no spaces,
/// no `+`, and nothing that overflows an `i64`.
fn parse_length(digits: &[u8]) -> Option<i64> {
    let (negative, magnitude) = match digits.strip_prefix(b"-") {
        Some(magnitude) => (true, magnitude),
        None => (false, digits),
    };
    match magnitude {
        [] => return None,
        [b'0'] if !negative => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    let mut value: i64 = 0;
    for &b in magnitude {
        let digit = i64::from(char::from(b).to_digit(10)?);
        // Accumulating negatively reaches i64::MIN, as string2ll does.
        value = value.checked_mul(10)?;
        value = if negative { value.checked_sub(digit)? } else { value.checked_add(digit)? };
    }
    Some(value)
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
