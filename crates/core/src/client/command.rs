//! The data commands the transaction client runs: what a Redis command that reads or writes data
//! asks for, already parsed and checked (arity, integers) by the front end.

use crate::ids::{Key, Value};

/// A command that reads or writes data: these run as one serializable transaction (alone, or
/// together between `MULTI` and `EXEC`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataCmd {
    Get(Key),
    Set(Key, Value),
    Del(Vec<Key>),
    Exists(Vec<Key>),
    MGet(Vec<Key>),
    MSet(Vec<(Key, Value)>),
    IncrBy(Key, i64),
    Append(Key, Value),
    StrLen(Key),
}
