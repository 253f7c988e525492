use super::*;
use crate::encode_command;

/// A connection as the server holds it: a buffer the parser's consumed
/// bytes are dropped from.
struct Connection {
    parser: RequestParser,
    buffer: Vec<u8>,
    authenticated: bool,
}

impl Connection {
    fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    fn with_limits(limits: Limits) -> Self {
        Connection { parser: RequestParser::new(limits), buffer: Vec::new(), authenticated: true }
    }

    fn anonymous() -> Self {
        Connection { authenticated: false, ..Self::new() }
    }

    /// Appends `bytes` and returns every command they complete.
    fn receive(&mut self, bytes: &[u8]) -> Result<Vec<Command>, ProtocolError> {
        let mut commands = Vec::new();
        self.receive_into(bytes, &mut commands)?;
        Ok(commands)
    }

    /// Appends `bytes` and pushes every command they complete, up to an
    /// error, onto `commands`.
    fn receive_into(&mut self, bytes: &[u8], commands: &mut Vec<Command>) -> Result<(), ProtocolError> {
        self.buffer.extend_from_slice(bytes);
        loop {
            let parsed = self.parser.parse(&self.buffer, self.authenticated)?;
            assert!(parsed.consumed <= self.buffer.len());
            self.buffer.drain(..parsed.consumed);
            match parsed.command {
                Some(command) => commands.push(command),
                None => return Ok(()),
            }
        }
    }
}

/// Feeds `input` in pieces of `chunk` bytes; returns the commands before the
/// first error, and the error.
fn feed_in_chunks(limits: Limits, input: &[u8], chunk: usize) -> (Vec<Command>, Option<ProtocolError>) {
    let mut connection = Connection::with_limits(limits);
    let mut commands = Vec::new();
    for piece in input.chunks(chunk) {
        if let Err(error) = connection.receive_into(piece, &mut commands) {
            return (commands, Some(error));
        }
    }
    (commands, None)
}

fn command(args: &[&str]) -> Command {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

fn multibulk(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_command(args, &mut out);
    out
}

fn first_error(input: &[u8]) -> ProtocolError {
    first_error_with(Limits::default(), input)
}

fn first_error_with(limits: Limits, input: &[u8]) -> ProtocolError {
    match feed_in_chunks(limits, input, input.len().max(1)) {
        (_, Some(error)) => error,
        (commands, None) => panic!("no error for {:?}, got {commands:?}", String::from_utf8_lossy(input)),
    }
}

fn small_limits() -> Limits {
    Limits { inline_max_bytes: 16, bulk_max_bytes: 100, args_max: 5, ..Limits::default() }
}

// Inline commands.

#[test]
fn an_inline_ping_is_a_command() {
    let mut parser = RequestParser::new(Limits::default());
    let parsed = parser.parse(b"PING\r\n", true).unwrap();
    assert_eq!(parsed, Parsed { consumed: 6, command: Some(command(&["PING"])) });
}

#[test]
fn an_inline_line_may_end_in_a_newline_without_a_carriage_return() {
    assert_eq!(Connection::new().receive(b"PING\nECHO hi\n"), Ok(vec![command(&["PING"]), command(&["ECHO", "hi"])]));
}

#[test]
fn an_inline_command_waits_for_its_newline() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"PING\r", true), Ok(Parsed { consumed: 0, command: None }));
    assert_eq!(parser.parse(b"PING\r\n", true), Ok(Parsed { consumed: 6, command: Some(command(&["PING"])) }));
}

#[test]
fn an_inline_command_is_split_like_redis_splits_it() {
    let got = Connection::new().receive(b"SET \"a b\\x21\" 'it\\'s'\r\n");
    assert_eq!(got, Ok(vec![command(&["SET", "a b!", "it's"])]));
}

#[test]
fn a_carriage_return_inside_an_inline_line_separates_arguments() {
    assert_eq!(Connection::new().receive(b"GET\rkey\r\n"), Ok(vec![command(&["GET", "key"])]));
}

#[test]
fn empty_inline_lines_are_skipped_without_a_command() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"\r\n\n  \t \r\n", true), Ok(Parsed { consumed: 9, command: None }));
    assert_eq!(Connection::new().receive(b"\r\n\n  \r\nPING\r\n"), Ok(vec![command(&["PING"])]));
}

#[test]
fn unbalanced_quotes_in_an_inline_command_are_refused() {
    assert_eq!(first_error(b"GET \"key\r\n"), ProtocolError::UnbalancedQuotes);
    assert_eq!(first_error(b"GET 'a'b\r\n"), ProtocolError::UnbalancedQuotes);
}

#[test]
fn an_inline_line_at_the_limit_is_accepted() {
    let mut line = vec![b'a'; 15];
    line.push(b'\r');
    line.push(b'\n');
    assert_eq!(feed_in_chunks(small_limits(), &line, 1), (vec![vec![vec![b'a'; 15]]], None));
}

#[test]
fn an_inline_line_past_the_limit_is_refused_before_its_newline_arrives() {
    let mut parser = RequestParser::new(small_limits());
    assert_eq!(parser.parse(&[b'a'; 16], true), Ok(Parsed::default()));
    assert_eq!(parser.parse(&[b'a'; 17], true), Err(ProtocolError::InlineTooBig));
}

#[test]
fn an_inline_line_past_the_limit_is_refused_even_if_its_newline_is_there() {
    let mut line = vec![b'a'; 17];
    line.push(b'\n');
    assert_eq!(first_error_with(small_limits(), &line), ProtocolError::InlineTooBig);
}

#[test]
fn the_default_inline_limit_is_64_kib() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(&vec![b'a'; 64 * 1024], true), Ok(Parsed::default()));
    assert_eq!(parser.parse(&vec![b'a'; 64 * 1024 + 1], true), Err(ProtocolError::InlineTooBig));
}

#[test]
fn an_inline_command_is_held_to_the_argument_limits() {
    assert_eq!(first_error_with(small_limits(), b"a b c d e f\n"), ProtocolError::InvalidMultibulkLength);
    let limits = Limits { inline_max_bytes: 1000, bulk_max_bytes: 3, ..Limits::default() };
    assert_eq!(first_error_with(limits, b"GET abcd\n"), ProtocolError::InvalidBulkLength);
}

// Multibulk requests.

#[test]
fn a_multibulk_request_is_a_command() {
    let mut parser = RequestParser::new(Limits::default());
    let input = b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n";
    let parsed = parser.parse(input, true).unwrap();
    assert_eq!(parsed, Parsed { consumed: input.len(), command: Some(command(&["ECHO", "hello"])) });
}

#[test]
fn a_bulk_string_may_hold_any_bytes_including_crlf() {
    let input = multibulk(&[b"SET", b"k", b"\r\n\0\xff*$"]);
    assert_eq!(
        Connection::new().receive(&input),
        Ok(vec![vec![b"SET".to_vec(), b"k".to_vec(), b"\r\n\0\xff*$".to_vec()]])
    );
}

#[test]
fn an_empty_bulk_string_is_an_empty_argument() {
    assert_eq!(Connection::new().receive(b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n"), Ok(vec![command(&["GET", ""])]));
}

#[test]
fn an_array_of_zero_or_fewer_elements_is_skipped_without_a_command() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"*0\r\n*-1\r\n*-5\r\n", true), Ok(Parsed { consumed: 14, command: None }));
    assert_eq!(Connection::new().receive(b"*0\r\n*1\r\n$4\r\nPING\r\n"), Ok(vec![command(&["PING"])]));
}

#[test]
fn the_header_and_complete_bulks_are_consumed_before_the_command_is() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"*2\r\n$3\r\nGET\r\n$5\r\nhel", true), Ok(Parsed { consumed: 17, command: None }));
    assert_eq!(parser.parse(b"hello", true), Ok(Parsed::default()));
    assert_eq!(parser.parse(b"hello\r", true), Ok(Parsed::default()));
    let parsed = parser.parse(b"hello\r\nPING\r\n", true);
    assert_eq!(parsed, Ok(Parsed { consumed: 7, command: Some(command(&["GET", "hello"])) }));
}

#[test]
fn pipelined_commands_in_one_buffer_come_out_one_per_call_in_order() {
    let mut input = multibulk(&[b"SET", b"a", b"1"]);
    input.extend_from_slice(b"PING\r\n");
    input.extend_from_slice(&multibulk(&[b"GET", b"a"]));
    let mut parser = RequestParser::new(Limits::default());
    let mut rest = &input[..];
    let mut commands = Vec::new();
    while let Parsed { consumed, command: Some(cmd) } = parser.parse(rest, true).unwrap() {
        rest = &rest[consumed..];
        commands.push(cmd);
    }
    assert_eq!(commands, vec![command(&["SET", "a", "1"]), command(&["PING"]), command(&["GET", "a"])]);
    assert!(rest.is_empty());
}

#[test]
fn a_request_fed_one_byte_at_a_time_gives_the_same_commands_as_fed_whole() {
    let mut input = multibulk(&[b"SET", b"key", b"v\r\nv"]);
    input.extend_from_slice(b"*0\r\n\r\n PING \r\nECHO \"a\\nb\" 'c d'\n");
    input.extend_from_slice(&multibulk(&[b"MSET", b"", b"x", &[7u8; 300][..]]));
    let whole = feed_in_chunks(Limits::default(), &input, input.len());
    assert_eq!(whole.0.len(), 4);
    assert_eq!(whole.1, None);
    for chunk in [1, 2, 3, 7] {
        assert_eq!(feed_in_chunks(Limits::default(), &input, chunk), whole, "chunk {chunk}");
    }
}

#[test]
fn an_error_is_the_same_whether_the_bytes_come_whole_or_one_at_a_time() {
    let cases: [&[u8]; 5] = [
        b"PING\r\n*1\r\n$4\r\nPINGxx",
        b"*1\r\n:1\r\n",
        b"*2\r\n$3\r\nGET\r\n$-1\r\n",
        b"aaaaaaaaaaaaaaaaaaaaaaa",
        b"*1\r\n$11111111111111111111111\r\n",
    ];
    for input in cases {
        let whole = feed_in_chunks(small_limits(), input, input.len());
        assert!(whole.1.is_some(), "{input:?}");
        assert_eq!(feed_in_chunks(small_limits(), input, 1), whole, "{input:?}");
    }
}

#[test]
fn the_parser_starts_afresh_after_each_command() {
    let mut connection = Connection::new();
    assert_eq!(connection.receive(b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nP"), Ok(vec![command(&["PING"])]));
    assert_eq!(connection.receive(b"ING\r\nPING\r\n"), Ok(vec![command(&["PING"]), command(&["PING"])]));
    assert!(connection.buffer.is_empty());
}

// Protocol errors.

#[test]
fn a_multibulk_count_that_is_not_a_strict_integer_is_invalid() {
    for input in [&b"*abc\r\n"[..], b"*\r\n", b"*01\r\n", b"*+1\r\n", b"* 1\r\n", b"*1 \r\n", b"*-0\r\n"] {
        assert_eq!(first_error(input), ProtocolError::InvalidMultibulkLength, "{input:?}");
    }
}

#[test]
fn a_multibulk_count_that_overflows_is_invalid() {
    assert_eq!(first_error(b"*99999999999999999999\r\n"), ProtocolError::InvalidMultibulkLength);
}

#[test]
fn a_multibulk_header_with_a_bare_carriage_return_is_invalid() {
    assert_eq!(first_error(b"*1\rX$4\r\nPING\r\n"), ProtocolError::InvalidMultibulkLength);
}

#[test]
fn a_multibulk_count_over_the_limit_is_invalid() {
    assert_eq!(first_error_with(small_limits(), b"*6\r\n"), ProtocolError::InvalidMultibulkLength);
    assert_eq!(first_error(b"*1048577\r\n"), ProtocolError::InvalidMultibulkLength);
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"*1048576\r\n", true), Ok(Parsed { consumed: 10, command: None }));
}

#[test]
fn a_bulk_length_that_is_negative_or_not_a_strict_integer_is_invalid() {
    for header in [&b"$-1"[..], b"$abc", b"$", b"$01", b"$+3", b"$3 ", b"$99999999999999999999"] {
        let mut input = b"*1\r\n".to_vec();
        input.extend_from_slice(header);
        input.extend_from_slice(b"\r\nabc\r\n");
        assert_eq!(first_error(&input), ProtocolError::InvalidBulkLength, "{header:?}");
    }
    assert_eq!(first_error(b"*1\r\n$3\rXabc\r\n"), ProtocolError::InvalidBulkLength);
}

#[test]
fn a_bulk_longer_than_the_limit_is_refused_before_its_bytes_arrive() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"*1\r\n$536870913\r\n", true), Err(ProtocolError::InvalidBulkLength));
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"*1\r\n$536870912\r\n", true), Ok(Parsed { consumed: 16, command: None }));
}

#[test]
fn an_argument_that_does_not_start_with_a_dollar_is_refused_at_its_first_byte() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(parser.parse(b"*1\r\n:", true), Err(ProtocolError::ExpectedBulk { got: b':' }));
}

#[test]
fn a_bulk_not_followed_by_crlf_is_refused() {
    assert_eq!(first_error(b"*1\r\n$4\r\nPINGxx"), ProtocolError::BulkNotTerminated);
    assert_eq!(first_error(b"*1\r\n$4\r\nPING\n\r"), ProtocolError::BulkNotTerminated);
}

#[test]
fn a_header_line_past_the_limit_is_refused_before_its_crlf_arrives() {
    let mut mbulk = b"*".to_vec();
    mbulk.extend_from_slice(&[b'1'; 15]);
    assert_eq!(RequestParser::new(small_limits()).parse(&mbulk, true), Ok(Parsed::default()));
    mbulk.push(b'1');
    assert_eq!(RequestParser::new(small_limits()).parse(&mbulk, true), Err(ProtocolError::MultibulkCountTooBig));

    let mut bulk = b"*1\r\n$".to_vec();
    bulk.extend_from_slice(&[b'1'; 15]);
    assert_eq!(RequestParser::new(small_limits()).parse(&bulk, true), Ok(Parsed { consumed: 4, command: None }));
    bulk.push(b'1');
    assert_eq!(first_error_with(small_limits(), &bulk), ProtocolError::BulkCountTooBig);
}

#[test]
fn after_authentication_the_full_limits_apply() {
    let mut big = vec![b"MSET".as_slice(); 11];
    big.push(&[b'v'; 20_000]);
    assert_eq!(Connection::new().receive(&multibulk(&big)).map(|c| c.len()), Ok(1));
}

#[test]
fn an_anonymous_client_may_send_ten_arguments_but_not_eleven() {
    assert_eq!(Connection::anonymous().receive(&multibulk(&[b"x".as_slice(); 10])).map(|c| c.len()), Ok(1));
    assert_eq!(Connection::anonymous().receive(b"*11\r\n"), Err(ProtocolError::UnauthenticatedMultibulkLength));
}

#[test]
fn an_anonymous_client_may_send_16_kib_arguments_but_not_more() {
    assert_eq!(Connection::anonymous().receive(&multibulk(&[&[b'v'; 16384]])).map(|c| c.len()), Ok(1));
    let refused = Connection::anonymous().receive(b"*1\r\n$16385\r\n");
    assert_eq!(refused, Err(ProtocolError::UnauthenticatedBulkLength));
}

#[test]
fn an_anonymous_inline_command_is_held_to_the_anonymous_limits() {
    let eleven = b"a a a a a a a a a a a\r\n";
    assert_eq!(Connection::anonymous().receive(eleven), Err(ProtocolError::UnauthenticatedMultibulkLength));
    let mut long = b"AUTH ".to_vec();
    long.extend_from_slice(&[b'p'; 16385]);
    long.push(b'\n');
    assert_eq!(Connection::anonymous().receive(&long), Err(ProtocolError::UnauthenticatedBulkLength));
}

#[test]
fn the_general_limit_is_reported_before_the_anonymous_one() {
    let mut connection = Connection { authenticated: false, ..Connection::with_limits(small_limits()) };
    assert_eq!(connection.receive(b"*6\r\n"), Err(ProtocolError::InvalidMultibulkLength));
}

#[test]
fn the_limits_follow_authentication_from_one_command_to_the_next() {
    let mut connection = Connection::anonymous();
    assert_eq!(connection.receive(b"AUTH secret\r\n"), Ok(vec![command(&["AUTH", "secret"])]));
    connection.authenticated = true;
    assert_eq!(connection.receive(&multibulk(&[b"x".as_slice(); 11])).map(|c| c.len()), Ok(1));
}

#[test]
fn errors_read_as_redis_writes_them() {
    let texts = [
        (ProtocolError::InvalidMultibulkLength, "Protocol error: invalid multibulk length"),
        (ProtocolError::InvalidBulkLength, "Protocol error: invalid bulk length"),
        (ProtocolError::ExpectedBulk { got: b'x' }, "Protocol error: expected '$', got 'x'"),
        (ProtocolError::ExpectedBulk { got: b'\r' }, "Protocol error: expected '$', got '\\x0d'"),
        (ProtocolError::InlineTooBig, "Protocol error: too big inline request"),
        (ProtocolError::MultibulkCountTooBig, "Protocol error: too big mbulk count string"),
        (ProtocolError::BulkCountTooBig, "Protocol error: too big bulk count string"),
        (ProtocolError::UnbalancedQuotes, "Protocol error: unbalanced quotes in request"),
        (ProtocolError::BulkNotTerminated, "Protocol error: bulk string not followed by CRLF"),
        (ProtocolError::UnauthenticatedMultibulkLength, "Protocol error: unauthenticated multibulk length"),
        (ProtocolError::UnauthenticatedBulkLength, "Protocol error: unauthenticated bulk length"),
    ];
    for (error, text) in texts {
        assert_eq!(error.to_string(), text);
    }
}

#[test]
fn lengths_are_parsed_as_strictly_as_redis_string2ll() {
    assert_eq!(parse_length(b"0"), Some(0));
    assert_eq!(parse_length(b"-12"), Some(-12));
    assert_eq!(parse_length(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(parse_length(b"-9223372036854775808"), Some(i64::MIN));
    for bad in [&b""[..], b"-", b"-0", b"00", b"+1", b" 1", b"1a", b"9223372036854775808", b"\xff"] {
        assert_eq!(parse_length(bad), None, "{bad:?}");
    }
}

#[test]
fn a_command_whose_arguments_add_up_past_the_limit_is_refused_on_the_header_that_crosses_it() {
    let limits = Limits { command_max_bytes: 10, ..Limits::default() };
    let mut parser = RequestParser::new(limits);
    assert_eq!(parser.parse(b"*3\r\n$4\r\nabcd\r\n$6\r\nefghij\r\n", true).map(|p| p.command), Ok(None));
    let mut parser = RequestParser::new(limits);
    // 4 + 6 = 10 bytes fit; the third argument's header asks for one more, before its bytes come.
    let err = parser.parse(b"*3\r\n$4\r\nabcd\r\n$6\r\nefghij\r\n$1\r\n", true).err();
    assert_eq!(err, Some(ProtocolError::CommandTooBig));
}
