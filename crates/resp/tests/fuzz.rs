//! The request parser under the stable-toolchain fuzzer (`waymark_fuzz`): a mutation-based random
//! tester over the committed corpus `fuzz/corpus/request_parser/`, seeded and bounded — not
//! coverage-guided. The coverage-guided run of the same body is nightly-only:
//! `cd crates/resp/fuzz && cargo +nightly fuzz run request_parser corpus/request_parser`.
//! Each corpus file is two selector bytes (split point, small limits) and then the stream.

use waymark_fuzz::{corpus_dir, BoundedAlloc, Campaign};
use waymark_resp::encode_command;
use waymark_resp::fuzzing::request_parser;

/// A parser of a few KiB of input has no reason to hold more than this.
#[global_allocator]
static ALLOC: BoundedAlloc = BoundedAlloc::new(64 << 20, 1 << 30);

fn campaign() -> Campaign {
    Campaign::new("request_parser", corpus_dir(env!("CARGO_MANIFEST_DIR"), "request_parser")).mutants(300_000)
}

#[test]
fn requests_of_any_bytes_are_parsed_or_refused_never_a_crash() {
    let summary = campaign().run(request_parser);
    assert!(summary.accepted > 0, "no case parsed at all: the mutants never reach a command");
}

/// The seed corpus: real encodings from `encode_command` and the edges of the grammar, each behind
/// its selector bytes. `cargo test -p waymark-resp --test fuzz -- --ignored` rewrites it.
#[test]
#[ignore]
fn writes_the_seed_corpus() {
    let dir = corpus_dir(env!("CARGO_MANIFEST_DIR"), "request_parser");
    std::fs::create_dir_all(&dir).unwrap();
    let encoded = |cmds: &[&[&[u8]]]| {
        let mut out = vec![];
        for cmd in cmds {
            encode_command(cmd, &mut out);
        }
        out
    };
    let files: Vec<(&str, u8, Vec<u8>)> = vec![
        ("valid-set", 0, encoded(&[&[b"SET", b"key", b"value"]])),
        ("valid-pipeline", 0, encoded(&[&[b"AUTH", b"secret"], &[b"MULTI"], &[b"INCRBY", b"n", b"-3"], &[b"EXEC"]])),
        ("valid-binary-argument", 0, encoded(&[&[b"SET", b"k", b"\r\n\0\xff$*"]])),
        ("valid-small-limits", 1, encoded(&[&[b"GET", b"k"]])),
        ("valid-inline", 0, b"SET k \"a b\\x41\" 'c d'\r\nPING\n".to_vec()),
        ("over-small-limits", 1, encoded(&[&[b"MSET", b"a", b"1", b"b", b"2", b"c", b"0123456789abcdefghij"]])),
        ("huge-counts", 0, b"*4294967296\r\n$18446744073709551616\r\n".to_vec()),
        ("negative-and-empty", 0, b"*-1\r\n*0\r\n$-1\r\n*1\r\n$0\r\n\r\n".to_vec()),
        ("unterminated", 0, b"*2\r\n$3\r\nGET\r\n$5\r\nab".to_vec()),
        ("bad-line-ends", 0, b"*1\n$4\r\nPING\n\r\r\n".to_vec()),
        ("inline-quotes", 1, b"\"unterminated 'quote\r\n\"\\xzz\"\r\n".to_vec()),
    ];
    for (name, selector, stream) in files {
        // Split in the middle: the corpus also checks that two reads parse as one.
        let mut bytes = vec![128, selector];
        bytes.extend_from_slice(&stream);
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
