//! Properties of the request parser over random input:
//! * what `encode_command` writes parses back to the same commands, however
//!   the bytes are split into reads;
//! * inline lines of plain words parse back to the same words;
//! * arbitrary bytes never make it panic, every command it returns is within
//!   its limits, and the outcome does not depend on how the bytes were split.

use proptest::prelude::*;
use waymark_resp::{encode_command, Command, Limits, ProtocolError, RequestParser};

/// Feeds `input` cut at `cuts` (positions in any order, clamped to its
/// length), as a server would: appending each read to a buffer and dropping
/// what the parser consumed. Returns the commands up to the first error, and
/// the error.
fn feed(limits: Limits, authenticated: bool, input: &[u8], cuts: &[usize]) -> (Vec<Command>, Option<ProtocolError>) {
    let mut ends: Vec<usize> = cuts.iter().map(|&cut| cut.min(input.len())).collect();
    ends.push(input.len());
    ends.sort_unstable();
    let mut parser = RequestParser::new(limits);
    let mut buffer = Vec::new();
    let mut commands = Vec::new();
    let mut start = 0;
    for end in ends {
        buffer.extend_from_slice(&input[start..end]);
        start = end;
        loop {
            let parsed = match parser.parse(&buffer, authenticated) {
                Ok(parsed) => parsed,
                Err(error) => return (commands, Some(error)),
            };
            assert!(parsed.consumed <= buffer.len(), "consumed {} of {}", parsed.consumed, buffer.len());
            buffer.drain(..parsed.consumed);
            match parsed.command {
                Some(command) => commands.push(command),
                None => break,
            }
        }
    }
    (commands, None)
}

fn commands() -> impl Strategy<Value = Vec<Command>> {
    let arg = proptest::collection::vec(any::<u8>(), 0..200);
    proptest::collection::vec(proptest::collection::vec(arg, 1..20), 1..8)
}

fn cuts() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..40_000, 0..30)
}

fn word() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9]{1,20}"
}

fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        Just(Limits::default()),
        (1usize..40, 0usize..40, 0usize..6).prop_map(|(inline_max_bytes, bulk_max_bytes, args_max)| Limits {
            inline_max_bytes,
            bulk_max_bytes,
            args_max,
            unauthenticated_args_max: args_max / 2,
            unauthenticated_bulk_max_bytes: bulk_max_bytes / 2,
            command_max_bytes: usize::MAX,
        }),
    ]
}

/// Garbage that often looks like a request, so the parser gets past the
/// first byte.
fn garbage() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        3 => proptest::collection::vec(any::<u8>(), 0..20),
        1 => proptest::sample::select(vec![
            b"*".to_vec(), b"$".to_vec(), b"\r\n".to_vec(), b"\n".to_vec(), b"\"".to_vec(), b"'".to_vec(),
            b"\\x4".to_vec(), b"*2\r\n".to_vec(), b"$3\r\n".to_vec(), b"-1".to_vec(), b"0".to_vec(), b" ".to_vec(),
        ]),
    ];
    proptest::collection::vec(piece, 0..60).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn encoded_commands_parse_back_however_they_are_split(commands in commands(), cuts in cuts()) {
        let mut input = Vec::new();
        for command in &commands {
            encode_command(command, &mut input);
        }
        prop_assert_eq!(feed(Limits::default(), true, &input, &cuts), (commands, None));
    }

    #[test]
    fn inline_words_parse_back_however_they_are_split(
        lines in proptest::collection::vec((proptest::collection::vec(word(), 1..20), any::<bool>()), 1..8),
        cuts in cuts(),
    ) {
        let mut input = Vec::new();
        for (words, crlf) in &lines {
            input.extend_from_slice(words.join(" ").as_bytes());
            input.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
        }
        let expected: Vec<Command> =
            lines.iter().map(|(words, _)| words.iter().map(|w| w.as_bytes().to_vec()).collect()).collect();
        prop_assert_eq!(feed(Limits::default(), true, &input, &cuts), (expected, None));
    }

    #[test]
    fn garbage_never_panics_and_stays_within_the_limits(
        input in garbage(),
        cuts in proptest::collection::vec(0usize..1200, 0..20),
        limits in limits(),
        authenticated in any::<bool>(),
    ) {
        let whole = feed(limits, authenticated, &input, &[]);
        let (args_max, bulk_max_bytes) = if authenticated {
            (limits.args_max, limits.bulk_max_bytes)
        } else {
            (limits.unauthenticated_args_max, limits.unauthenticated_bulk_max_bytes)
        };
        for command in &whole.0 {
            prop_assert!(!command.is_empty() && command.len() <= args_max);
            prop_assert!(command.iter().all(|arg| arg.len() <= bulk_max_bytes));
        }
        prop_assert_eq!(feed(limits, authenticated, &input, &cuts), whole);
    }
}
