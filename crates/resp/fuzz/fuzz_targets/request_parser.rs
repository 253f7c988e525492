//! Feeds arbitrary bytes to the request parser in two reads, split at a
//! point taken from the input, as an authenticated and as an anonymous
//! client. It must never panic, never claim to consume more than it was
//! given, and every command it returns must be within its limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use waymark_resp::{Limits, RequestParser};

fuzz_target!(|data: &[u8]| {
    // The first two bytes pick the split point and whether small limits are
    // used, so the limit checks are reached with short inputs too.
    let Some((&[selector, split], bytes)) = data.split_first_chunk::<2>() else {
        return;
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
    for authenticated in [true, false] {
        feed(limits, authenticated, &bytes[..split], &bytes[split..]);
    }
});

/// Feeds `first` then `second` as a server would: appending each read to a
/// buffer, dropping what the parser consumed, stopping at the first error.
fn feed(limits: Limits, authenticated: bool, first: &[u8], second: &[u8]) {
    let (args_max, bulk_max_bytes) = if authenticated {
        (limits.args_max, limits.bulk_max_bytes)
    } else {
        (limits.args_max.min(limits.unauthenticated_args_max), limits.bulk_max_bytes.min(limits.unauthenticated_bulk_max_bytes))
    };
    let mut parser = RequestParser::new(limits);
    let mut buffer = Vec::new();
    for read in [first, second] {
        buffer.extend_from_slice(read);
        loop {
            let Ok(parsed) = parser.parse(&buffer, authenticated) else {
                return;
            };
            assert!(parsed.consumed <= buffer.len());
            buffer.drain(..parsed.consumed);
            let Some(command) = parsed.command else {
                break;
            };
            assert!(!command.is_empty() && command.len() <= args_max);
            assert!(command.iter().all(|arg| arg.len() <= bulk_max_bytes));
            assert!(command.iter().map(Vec::len).sum::<usize>() <= limits.command_max_bytes.max(limits.inline_max_bytes));
        }
    }
}
