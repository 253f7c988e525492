//! Redis's numbered databases (`SELECT 0`–`15`) over Waymark's one keyspace: a database is a
//! prefix of the stored key. Database 0's keys are stored as given — data written before
//! databases existed is database 0's, and its keys cost nothing more — and those of databases
//! 1–15 under [`PREFIX`] and their number. So a key of one database never reads as another's,
//! a database-0 key that starts with [`PREFIX`] is refused ([`ReservedKey`]).
//!
//! Everything else about a key (its partition, its transactions, expiry, cuts and restores)
//! works on the stored key, unaware of databases; only the front end maps a client's keys in and
//! the keys it lists (`KEYS`, `SCAN`, `RANDOMKEY`) out.
//!
//! Invariant: `Db::user_key(db, db.stored(k)?) == Some(k)`, and `db_of(db.stored(k)?) == db`.

use crate::ids::Key;

/// Databases a client may `SELECT`, as Redis's default `databases 16`.
pub const DATABASES: u8 = 16;

/// What a key of databases 1–15 is stored under, before its database's number (one byte).
/// Two bytes no UTF-8 text starts with, then a name that says what it is to whoever sees it.
pub const PREFIX: &[u8] = b"\xff\xfewaymark-db";

/// A database's number, `0..DATABASES`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Db(u8);

/// A database-0 key that starts with the bytes databases 1–15 are stored under.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ERR keys may not start with the bytes Waymark stores databases 1-15 (\\xff\\xfewaymark-db) or collections' elements (\\xff\\xfcwaymark-el) under")]
pub struct ReservedKey;

impl Db {
    /// Database `n`, if it is one a client may select.
    pub fn new(n: i64) -> Option<Db> {
        u8::try_from(n).ok().filter(|n| *n < DATABASES).map(Db)
    }

    pub fn index(self) -> u8 {
        self.0
    }

    /// The key `key` of this database is stored as.
    pub fn stored(self, mut key: Key) -> Result<Key, ReservedKey> {
        if self.0 == 0 {
            let reserved = key.starts_with(PREFIX) || key.starts_with(crate::collection::ELEMENT_PREFIX);
            return if reserved { Err(ReservedKey) } else { Ok(key) };
        }
        let mut stored = Vec::with_capacity(PREFIX.len() + 1 + key.len());
        stored.extend_from_slice(PREFIX);
        stored.push(self.0);
        stored.append(&mut key);
        Ok(stored)
    }

    /// The client's key a stored key is, if it is one of this database's.
    pub fn user_key(self, stored: &[u8]) -> Option<&[u8]> {
        let of = db_of(stored);
        if of != self {
            return None;
        }
        Some(if of.0 == 0 { stored } else { &stored[PREFIX.len() + 1..] })
    }
}

/// The database a stored key belongs to (a key under [`PREFIX`] with no valid number after it is
/// database 0's: no client could have written it, as database 0 refuses the prefix).
pub fn db_of(stored: &[u8]) -> Db {
    match stored.strip_prefix(PREFIX).and_then(|rest| rest.first()) {
        Some(&n) if (1..DATABASES).contains(&n) => Db(n),
        _ => Db(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_maps_into_its_database_and_back_and_never_into_another() {
        for n in 0..DATABASES {
            let db = Db::new(n.into()).expect("a database");
            let stored = db.stored(b"user:1".to_vec()).expect("a plain key");
            assert_eq!(db_of(&stored), db);
            assert_eq!(db.user_key(&stored), Some(&b"user:1"[..]));
            for other in (0..DATABASES).filter(|o| *o != n) {
                assert_eq!(Db(other).user_key(&stored), None, "db {n}'s key read in db {other}");
            }
        }
        assert_eq!(Db::new(16), None);
        assert_eq!(Db::new(-1), None);
    }

    #[test]
    fn database_zero_refuses_keys_under_the_prefix() {
        let mut sneaky = PREFIX.to_vec();
        sneaky.extend_from_slice(b"\x03user:1");
        assert_eq!(Db(0).stored(sneaky), Err(ReservedKey));
        assert_eq!(Db(0).stored(b"\xff\xfe".to_vec()), Ok(b"\xff\xfe".to_vec()), "only the whole prefix is kept");
    }
}
