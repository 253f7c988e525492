//! Redis commands as a test writes them — words — sent on a connection, with what a failure
//! looks like in the test's message.

use redis::{Connection, Value};

/// `words` as one command; the reply or the error.
pub fn try_cmd(con: &mut Connection, words: &[&str]) -> redis::RedisResult<Value> {
    let mut c = redis::cmd(words[0]);
    for w in &words[1..] {
        c.arg(*w);
    }
    c.query(con)
}

/// `words`' reply; the test fails on an error.
pub fn cmd(con: &mut Connection, words: &[&str]) -> Value {
    try_cmd(con, words).unwrap_or_else(|e| panic!("{words:?}: {e}"))
}

/// `words`' error, in words; the test fails on any other reply.
pub fn err(con: &mut Connection, words: &[&str]) -> String {
    match try_cmd(con, words) {
        Ok(v) => panic!("{words:?} answered {v:?}, not an error"),
        Err(e) => e.to_string(),
    }
}

pub fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// `SCAN` page by page from `cursor` until the cursor comes back 0, as clients do: the keys, and
/// how many pages it took.
pub fn scan_from(con: &mut Connection, cursor: &str, extra: &[&str]) -> (Vec<String>, usize) {
    let (mut cursor, mut keys, mut pages) = (cursor.to_string(), vec![], 0);
    loop {
        let (next, page): (String, Vec<String>) = redis::cmd("SCAN").arg(&cursor).arg(extra).query(con).expect("SCAN");
        keys.extend(page);
        pages += 1;
        assert!(pages < 10_000, "SCAN never ended");
        if next == "0" {
            return (keys, pages);
        }
        cursor = next;
    }
}

/// A whole `SCAN` from the start.
pub fn scan_all(con: &mut Connection, extra: &[&str]) -> (Vec<String>, usize) {
    scan_from(con, "0", extra)
}
