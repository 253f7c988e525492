//! The body of the `request_parser` fuzz target, defined once: the cargo-fuzz target
//! (`fuzz/fuzz_targets/request_parser.rs`, nightly, coverage-guided) and the stable test
//! (`tests/fuzz.rs`, a seeded mutation run over `fuzz/corpus/request_parser/`) both call it.
//! Not an API: hidden from the docs, and it panics on purpose when the parser breaks its contract.

use crate::{Command, Limits, ProtocolError, RequestParser};

/// Feeds arbitrary bytes to the request parser as a server would, as an authenticated and as an
/// anonymous client, in one read and in two reads split at a point taken from the input. The
/// parser must never panic, never claim to consume more than it was given, return only commands
/// within its limits, and answer the same commands (and the same error, if any) however the
/// stream is split into reads. Answers whether any command was parsed.
///
/// The first byte picks the split point, the second whether small limits are used (so the limit
/// checks are reached with short inputs too).
pub fn request_parser(data: &[u8]) -> bool {
    let Some((&[split, selector], bytes)) = data.split_first_chunk::<2>() else {
        return false;
    };
    let limits = if selector & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            inline_max_bytes: 32,
            bulk_max_bytes: 16,
            args_max: 4,
            unauthenticated_args_max: 2,
            unauthenticated_bulk_max_bytes: 8,
            command_max_bytes: 48,
        }
    };
    let split = usize::from(split) * bytes.len() / 255;
    let mut any = false;
    for authenticated in [true, false] {
        let whole = feed(limits, authenticated, &[bytes]);
        let in_two = feed(limits, authenticated, &[&bytes[..split], &bytes[split..]]);
        assert_eq!(whole, in_two, "the commands depend on where the stream was split ({split})");
        any |= !whole.0.is_empty();
    }
    any
}

/// Feeds `reads` in turn as a server would: appending each to a buffer, dropping what the parser
/// consumed, stopping at the first error. Returns the commands and the error.
fn feed(limits: Limits, authenticated: bool, reads: &[&[u8]]) -> (Vec<Command>, Option<ProtocolError>) {
    let (args_max, bulk_max_bytes) = if authenticated {
        (limits.args_max, limits.bulk_max_bytes)
    } else {
        (
            limits.args_max.min(limits.unauthenticated_args_max),
            limits.bulk_max_bytes.min(limits.unauthenticated_bulk_max_bytes),
        )
    };
    let mut parser = RequestParser::new(limits);
    let mut buffer = Vec::new();
    let mut commands = vec![];
    for read in reads {
        buffer.extend_from_slice(read);
        loop {
            let parsed = match parser.parse(&buffer, authenticated) {
                Ok(parsed) => parsed,
                Err(e) => return (commands, Some(e)),
            };
            assert!(parsed.consumed <= buffer.len(), "consumed {} of {} bytes", parsed.consumed, buffer.len());
            buffer.drain(..parsed.consumed);
            let Some(command) = parsed.command else {
                break;
            };
            assert!(!command.is_empty() && command.len() <= args_max, "a command of {} arguments", command.len());
            assert!(command.iter().all(|arg| arg.len() <= bulk_max_bytes), "an argument over the limit");
            let total: usize = command.iter().map(Vec::len).sum();
            assert!(total <= limits.command_max_bytes.max(limits.inline_max_bytes), "a command of {total} bytes");
            commands.push(command);
        }
    }
    (commands, None)
}
