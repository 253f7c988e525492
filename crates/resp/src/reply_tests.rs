use super::*;

fn resp2(reply: &Reply) -> Vec<u8> {
    let mut out = Vec::new();
    reply.encode(Protocol::Resp2, &mut out);
    out
}

fn resp3(reply: &Reply) -> Vec<u8> {
    let mut out = Vec::new();
    reply.encode(Protocol::Resp3, &mut out);
    out
}

/// Asserts the bytes of `reply` in RESP2 and in RESP3.
#[track_caller]
fn spelled(reply: Reply, in_resp2: &[u8], in_resp3: &[u8]) {
    assert_eq!(resp2(&reply), in_resp2, "RESP2 {reply:?}: {:?}", String::from_utf8_lossy(&resp2(&reply)));
    assert_eq!(resp3(&reply), in_resp3, "RESP3 {reply:?}: {:?}", String::from_utf8_lossy(&resp3(&reply)));
}

#[test]
fn ok_is_a_simple_string() {
    spelled(Reply::ok(), b"+OK\r\n", b"+OK\r\n");
}

#[test]
fn an_error_is_sent_with_the_prefix_the_caller_gave() {
    spelled(
        Reply::error("ERR unknown command 'FOO'"),
        b"-ERR unknown command 'FOO'\r\n",
        b"-ERR unknown command 'FOO'\r\n",
    );
    spelled(Reply::error("WRONGTYPE wrong kind"), b"-WRONGTYPE wrong kind\r\n", b"-WRONGTYPE wrong kind\r\n");
}

#[test]
fn line_breaks_in_simple_strings_and_errors_become_spaces() {
    spelled(Reply::error("ERR a\r\n+OK\r\n"), b"-ERR a  +OK  \r\n", b"-ERR a  +OK  \r\n");
    spelled(Reply::Simple("two\nlines".into()), b"+two lines\r\n", b"+two lines\r\n");
}

#[test]
fn an_integer_is_the_same_in_both_protocols() {
    spelled(Reply::Integer(0), b":0\r\n", b":0\r\n");
    spelled(Reply::Integer(i64::MIN), b":-9223372036854775808\r\n", b":-9223372036854775808\r\n");
}

#[test]
fn a_bulk_string_carries_any_bytes() {
    spelled(Reply::bulk("hello"), b"$5\r\nhello\r\n", b"$5\r\nhello\r\n");
    spelled(Reply::bulk(b"\r\n\0".to_vec()), b"$3\r\n\r\n\0\r\n", b"$3\r\n\r\n\0\r\n");
    spelled(Reply::bulk(""), b"$0\r\n\r\n", b"$0\r\n\r\n");
}

#[test]
fn null_is_a_null_bulk_in_resp2_and_underscore_in_resp3() {
    spelled(Reply::Null, b"$-1\r\n", b"_\r\n");
}

#[test]
fn a_null_array_is_a_null_array_in_resp2_and_underscore_in_resp3() {
    spelled(Reply::NullArray, b"*-1\r\n", b"_\r\n");
}

#[test]
fn an_array_nests_its_elements_in_the_same_protocol() {
    let reply = Reply::Array(vec![Reply::bulk("a"), Reply::Integer(1), Reply::Null, Reply::Array(vec![])]);
    spelled(reply, b"*4\r\n$1\r\na\r\n:1\r\n$-1\r\n*0\r\n", b"*4\r\n$1\r\na\r\n:1\r\n_\r\n*0\r\n");
}

#[test]
fn a_map_is_a_flat_array_in_resp2() {
    let reply = Reply::Map(vec![(Reply::bulk("k1"), Reply::Integer(1)), (Reply::bulk("k2"), Reply::Boolean(true))]);
    spelled(reply, b"*4\r\n$2\r\nk1\r\n:1\r\n$2\r\nk2\r\n:1\r\n", b"%2\r\n$2\r\nk1\r\n:1\r\n$2\r\nk2\r\n#t\r\n");
}

#[test]
fn a_set_is_an_array_in_resp2() {
    spelled(Reply::Set(vec![Reply::bulk("x")]), b"*1\r\n$1\r\nx\r\n", b"~1\r\n$1\r\nx\r\n");
}

#[test]
fn a_double_is_a_bulk_string_in_resp2() {
    spelled(Reply::Double(1.5), b"$3\r\n1.5\r\n", b",1.5\r\n");
    spelled(Reply::Double(-0.25), b"$5\r\n-0.25\r\n", b",-0.25\r\n");
}

#[test]
fn a_double_is_spelled_as_redis_spells_it() {
    let cases: [(f64, &str); 11] = [
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
        (f64::NAN, "nan"),
        (-f64::NAN, "nan"),
        (0.0, "0"),
        (-0.0, "-0"),
        (3.0, "3"),
        (-42.0, "-42"),
        (4_611_686_018_427_387_904.0, "4611686018427387904"),
        (1e300, "1e300"),
        (1e-7, "1e-7"),
    ];
    for (value, text) in cases {
        assert_eq!(resp3(&Reply::Double(value)), format!(",{text}\r\n").into_bytes(), "{value}");
    }
}

#[test]
fn a_double_reads_back_as_the_same_value() {
    for value in [0.1, 1.0 / 3.0, 123_456.789, f64::MAX, f64::MIN_POSITIVE, 9.3e18] {
        let text = double_text(value);
        assert_eq!(text.parse::<f64>(), Ok(value), "{text}");
    }
}

#[test]
fn a_boolean_is_one_or_zero_in_resp2() {
    spelled(Reply::Boolean(true), b":1\r\n", b"#t\r\n");
    spelled(Reply::Boolean(false), b":0\r\n", b"#f\r\n");
}

#[test]
fn a_verbatim_string_is_its_text_alone_in_resp2() {
    let reply = Reply::Verbatim { format: *b"txt", text: b"Some string".to_vec() };
    spelled(reply, b"$11\r\nSome string\r\n", b"=15\r\ntxt:Some string\r\n");
}

#[test]
fn encoding_appends_to_what_is_already_in_the_buffer() {
    let mut out = b"+OK\r\n".to_vec();
    Reply::Integer(7).encode(Protocol::Resp3, &mut out);
    assert_eq!(out, b"+OK\r\n:7\r\n");
}

#[test]
fn a_command_is_encoded_as_a_multibulk_request() {
    let mut out = Vec::new();
    encode_command(&["SET", "key", ""], &mut out);
    assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n");
    let mut out = Vec::new();
    encode_command(&[] as &[&[u8]], &mut out);
    assert_eq!(out, b"*0\r\n");
}

#[test]
fn pairs_are_nested_in_resp3_and_flat_in_resp2() {
    let reply = Reply::Pairs(vec![(Reply::bulk("f"), Reply::bulk("v"))]);
    let (mut two, mut three) = (vec![], vec![]);
    reply.encode(Protocol::Resp2, &mut two);
    reply.encode(Protocol::Resp3, &mut three);
    assert_eq!(two, b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
    assert_eq!(three, b"*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
}
