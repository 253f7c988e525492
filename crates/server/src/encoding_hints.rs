//! Redis's thresholds for its compact encodings (`hash-max-listpack-entries`, …): tools and
//! Redis's own tests set them with `CONFIG SET` and read them back. Waymark keeps every collection
//! as a head and one record per element whatever its size (`waymark_core::collection`), so these
//! change nothing it does: a host keeps what was set, for `CONFIG GET`, and says so in the docs.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The thresholds and Redis 7's defaults (the `ziplist` names are the older aliases).
const DEFAULTS: [(&str, &str); 14] = [
    ("hash-max-listpack-entries", "128"),
    ("hash-max-listpack-value", "64"),
    ("hash-max-ziplist-entries", "128"),
    ("hash-max-ziplist-value", "64"),
    ("set-max-intset-entries", "512"),
    ("set-max-listpack-entries", "128"),
    ("set-max-listpack-value", "64"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("zset-max-ziplist-entries", "128"),
    ("zset-max-ziplist-value", "64"),
    ("list-max-listpack-size", "-2"),
    ("list-max-ziplist-size", "-2"),
    ("list-compress-depth", "0"),
];

/// This host's values of the thresholds.
#[derive(Debug)]
pub struct EncodingHints {
    values: Mutex<BTreeMap<&'static str, String>>,
}

impl Default for EncodingHints {
    fn default() -> Self {
        EncodingHints { values: Mutex::new(DEFAULTS.iter().map(|(n, v)| (*n, v.to_string())).collect()) }
    }
}

/// Why a threshold's value was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("argument couldn't be parsed into an integer")]
pub struct NotAnInteger;

impl EncodingHints {
    /// The threshold `name` (lower case), if it is one.
    pub fn name(name: &str) -> Option<&'static str> {
        DEFAULTS.iter().map(|(n, _)| *n).find(|n| *n == name)
    }

    /// Checks `value` as Redis checks these (an integer), without keeping it.
    pub fn check(value: &[u8]) -> Result<(), NotAnInteger> {
        std::str::from_utf8(value).ok().and_then(|s| s.parse::<i64>().ok()).map(drop).ok_or(NotAnInteger)
    }

    pub fn set(&self, name: &'static str, value: &[u8]) {
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        values.insert(name, String::from_utf8_lossy(value).into_owned());
    }

    /// Every threshold and its value.
    pub fn all(&self) -> Vec<(&'static str, String)> {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        values.iter().map(|(n, v)| (*n, v.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threshold_set_reads_back_and_text_is_refused() {
        let hints = EncodingHints::default();
        let name = EncodingHints::name("hash-max-ziplist-value").expect("a threshold");
        assert_eq!(EncodingHints::check(b"ten"), Err(NotAnInteger));
        assert_eq!(EncodingHints::check(b"10"), Ok(()));
        hints.set(name, b"10");
        assert!(hints.all().contains(&("hash-max-ziplist-value", "10".to_string())));
        assert_eq!(EncodingHints::name("maxmemory"), None);
    }
}
