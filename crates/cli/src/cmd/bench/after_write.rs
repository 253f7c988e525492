//! `--after-write CMD`: a command sent on the same connection right after every write, its reply
//! checked — how a peer that acknowledges a write before its replica has it is made to wait for
//! the replica, e.g. Valkey's `WAITAOF 1 1 0` (the write fsynced in this server's AOF and in one
//! replica's) or Redis's `WAIT 1 0` (received by one replica, not fsynced). Parsed once; a reply
//! that reports fewer copies than the command asked for counts as an error.

use thiserror::Error;

/// What a reply must report for the write to count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    /// `WAITAOF numlocal numreplicas timeout`: `[local, replicas]`, each at least as asked.
    WaitAof { local: i64, replicas: i64 },
    /// `WAIT numreplicas timeout`: the replicas that acknowledged, at least as asked.
    Wait { replicas: i64 },
    /// Any other command: any reply but an error.
    NoError,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum AfterWriteError {
    #[error("--after-write needs a command")]
    Empty,
    #[error("--after-write {0}: expected {1}")]
    Arguments(String, &'static str),
}

/// The command, parsed once.
#[derive(Clone, Debug)]
pub struct AfterWrite {
    /// As given, for the report.
    pub text: String,
    words: Vec<String>,
    asked: Asked,
}

impl AfterWrite {
    pub fn parse(text: &str) -> Result<AfterWrite, AfterWriteError> {
        let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
        let Some(name) = words.first() else { return Err(AfterWriteError::Empty) };
        let int = |i: usize| words.get(i).and_then(|w| w.parse::<i64>().ok()).filter(|n| *n >= 0);
        let asked = match name.to_ascii_uppercase().as_str() {
            "WAITAOF" => match (int(1), int(2), int(3), words.len()) {
                (Some(local), Some(replicas), Some(_), 4) => Asked::WaitAof { local, replicas },
                _ => return Err(AfterWriteError::Arguments(text.into(), "WAITAOF numlocal numreplicas timeout")),
            },
            "WAIT" => match (int(1), int(2), words.len()) {
                (Some(replicas), Some(_), 3) => Asked::Wait { replicas },
                _ => return Err(AfterWriteError::Arguments(text.into(), "WAIT numreplicas timeout")),
            },
            _ => Asked::NoError,
        };
        Ok(AfterWrite { text: text.trim().to_string(), words, asked })
    }

    pub fn cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd(&self.words[0]);
        for w in &self.words[1..] {
            cmd.arg(w);
        }
        cmd
    }

    /// Whether `reply` reports the copies asked for; why not otherwise.
    pub fn check(&self, reply: &redis::Value) -> Result<(), String> {
        use redis::Value;
        if let Value::ServerError(e) = reply {
            return Err(format!("{}: {e:?}", self.text));
        }
        let short = |got: String| Err(format!("{} answered {got}: fewer copies than asked", self.text));
        match (self.asked, reply) {
            (Asked::NoError, _) => Ok(()),
            (Asked::Wait { replicas }, Value::Int(n)) => {
                if *n >= replicas {
                    Ok(())
                } else {
                    short(n.to_string())
                }
            }
            (Asked::WaitAof { local, replicas }, Value::Array(v)) => match v.as_slice() {
                [Value::Int(l), Value::Int(r)] if *l >= local && *r >= replicas => Ok(()),
                [Value::Int(l), Value::Int(r)] => short(format!("[{l}, {r}]")),
                _ => Err(format!("{}: unexpected reply {reply:?}", self.text)),
            },
            _ => Err(format!("{}: unexpected reply {reply:?}", self.text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn waitaof_counts_both_copies() {
        let a = AfterWrite::parse("WAITAOF 1 1 0").unwrap();
        assert_eq!(a.asked, Asked::WaitAof { local: 1, replicas: 1 });
        assert!(a.check(&Value::Array(vec![Value::Int(1), Value::Int(1)])).is_ok());
        assert!(a.check(&Value::Array(vec![Value::Int(1), Value::Int(0)])).is_err());
        assert!(a.check(&Value::Array(vec![Value::Int(0), Value::Int(1)])).is_err());
        assert!(a.check(&Value::Int(1)).is_err());
    }

    #[test]
    fn wait_and_others() {
        let w = AfterWrite::parse("wait 1 0").unwrap();
        assert!(w.check(&Value::Int(1)).is_ok());
        assert!(w.check(&Value::Int(0)).is_err());
        assert!(AfterWrite::parse("PING").unwrap().check(&Value::SimpleString("PONG".into())).is_ok());
        assert!(matches!(AfterWrite::parse("  "), Err(AfterWriteError::Empty)));
        assert!(AfterWrite::parse("WAITAOF 1 1").is_err());
        assert!(AfterWrite::parse("WAIT x 0").is_err());
    }
}
