//! ACL users as Redis 6+ has them, for Waymark's commands (issue 36, item 4): who may run which
//! command on which keys. Pure: the caller gives the salt of a new password, reads users from the
//! cluster metadata (`acl/<user>` records, `alter::cluster`) and proposes them as alterations,
//! so every host of the cluster holds the same users.
//!
//! - `User` is what the metadata stores (postcard), changed by `User::apply`, one `ACL SETUSER`
//!   rule at a time (`on`, `off`, `>pass`, `<pass`, `nopass`, `resetpass`, `~pattern`,
//!   `allkeys`, `resetkeys`, `+cmd`, `-cmd`, `+@cat`, `-@cat`, `allcommands`, `nocommands`,
//!   `reset`; channel rules are taken and grant nothing: Waymark has no pub/sub).
//! - `Users` is every user compiled for checks: each command rule resolved against the
//!   command table (`table.rs`), each key pattern compiled once (`waymark_resp::glob`, time
//!   bounded by pattern × key length, the pattern by `PATTERN_MAX_BYTES`).
//! - Passwords are kept as salted SHA-256 (`PasswordHash`), compared in constant time.
//!
//! The `default` user is not stored: it is the node's client password (`node.password_file`),
//! or no password, with every right — as before ACL users existed.

pub mod proposals;
pub mod table;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use waymark_resp::glob::Glob;

pub use table::{Category, CommandAcl, CATEGORIES, COMMANDS};

/// The metadata key prefix of users: `acl/<user>`.
pub const KEY_PREFIX: &str = "acl/";
/// Users the metadata holds at most (the default user not counted).
pub const USERS_MAX: usize = 1_024;
/// Command rules a user keeps at most (after `allcommands`/`nocommands`, which restart the list).
pub const COMMAND_RULES_MAX: usize = 256;
/// Key patterns a user holds at most.
pub const PATTERNS_MAX: usize = 64;
/// The longest key pattern: a key check costs at most this times the key's length per pattern.
pub const PATTERN_MAX_BYTES: usize = 512;
/// Passwords a user holds at most.
pub const PASSWORDS_MAX: usize = 16;
/// Rules one `ACL SETUSER` takes at most.
pub const RULES_PER_CALL_MAX: usize = 512;
/// The longest user name.
pub const NAME_MAX_BYTES: usize = 128;
/// The name of the user the node's config defines.
pub const DEFAULT_USER: &str = "default";

/// The metadata key of user `name`.
pub fn key(name: &str) -> String {
    format!("{KEY_PREFIX}{name}")
}

/// Why a rule or a name was refused, with Redis's words where Redis has them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    #[error("ERR Error in ACL SETUSER modifier '{rule}': Syntax error")]
    Syntax { rule: String },
    #[error("ERR Error in ACL SETUSER modifier '{rule}': Unknown command or category name in ACL")]
    UnknownCommand { rule: String },
    #[error("ERR Error in ACL SETUSER modifier '{rule}': {what} is not supported by Waymark")]
    Unsupported { rule: String, what: &'static str },
    #[error("ERR Error in ACL SETUSER modifier '{rule}': {what} (at most {max})")]
    TooMany { rule: String, what: &'static str, max: usize },
    #[error("ERR ACL SETUSER takes at most {RULES_PER_CALL_MAX} rules")]
    TooManyRules,
    #[error("ERR Usernames can't contain spaces or null characters, and are at most {NAME_MAX_BYTES} bytes")]
    BadName,
}

/// A password as the metadata keeps it: SHA-256 of a per-password random salt and the password.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PasswordHash {
    pub salt: [u8; 16],
    pub digest: [u8; 32],
}

impl PasswordHash {
    pub fn new(password: &[u8], salt: [u8; 16]) -> Self {
        PasswordHash { salt, digest: salted(&salt, password) }
    }

    /// Whether `password` is this one; the digests are compared in constant time.
    pub fn matches(&self, password: &[u8]) -> bool {
        constant_time_eq(&salted(&self.salt, password), &self.digest)
    }
}

fn salted(salt: &[u8; 16], password: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"waymark-acl-v1");
    h.update(salt);
    h.update(password);
    h.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal bytes, in time that depends on the lengths only.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A user as the metadata stores it. A new user is `off`, with no password, no keys, no commands.
///
/// Invariant: `command_rules` holds at most `COMMAND_RULES_MAX` rules, each `+name`, `-name`,
/// `+@cat` or `-@cat` of a known command or category, lowercase; `patterns` at most
/// `PATTERNS_MAX`, each at most `PATTERN_MAX_BYTES`; `passwords` at most `PASSWORDS_MAX`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct User {
    pub enabled: bool,
    pub nopass: bool,
    pub passwords: Vec<PasswordHash>,
    /// Since the last `allcommands`/`nocommands`: whether it started from every command.
    pub all_commands_base: bool,
    pub command_rules: Vec<String>,
    pub patterns: Vec<Vec<u8>>,
}

impl User {
    /// Applies one `ACL SETUSER` rule; `salt` is used if the rule adds a password.
    pub fn apply(&mut self, rule: &[u8], salt: [u8; 16]) -> Result<(), AclError> {
        let text = String::from_utf8_lossy(rule).into_owned();
        let syntax = || AclError::Syntax { rule: text.clone() };
        let lower = text.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "allkeys" => self.patterns = vec![b"*".to_vec()],
            "resetkeys" => self.patterns.clear(),
            "allcommands" | "+@all" => self.reset_commands(true),
            "nocommands" | "-@all" => self.reset_commands(false),
            "allchannels" | "resetchannels" => {}
            "reset" => *self = User::default(),
            _ => match rule.first() {
                Some(b'>') => self.add_password(&rule[1..], salt, &text)?,
                Some(b'<') => self.passwords.retain(|p| !p.matches(&rule[1..])),
                Some(b'~') => self.add_pattern(&rule[1..], &text)?,
                Some(b'&') => {} // a channel pattern: no pub/sub in Waymark
                Some(b'+' | b'-') => self.add_command_rule(&lower)?,
                Some(b'#' | b'!') => return Err(AclError::Unsupported { rule: text, what: "a password given hashed" }),
                Some(b'%') => return Err(AclError::Unsupported { rule: text, what: "a read or write key pattern" }),
                Some(b'(') => return Err(AclError::Unsupported { rule: text, what: "a selector" }),
                _ => return Err(syntax()),
            },
        }
        Ok(())
    }

    fn add_password(&mut self, password: &[u8], salt: [u8; 16], rule: &str) -> Result<(), AclError> {
        if self.passwords.iter().any(|p| p.matches(password)) {
            return Ok(());
        }
        if self.passwords.len() >= PASSWORDS_MAX {
            return Err(AclError::TooMany { rule: rule.into(), what: "too many passwords", max: PASSWORDS_MAX });
        }
        self.nopass = false;
        self.passwords.push(PasswordHash::new(password, salt));
        Ok(())
    }

    fn add_pattern(&mut self, pattern: &[u8], rule: &str) -> Result<(), AclError> {
        if pattern.len() > PATTERN_MAX_BYTES {
            return Err(AclError::TooMany { rule: rule.into(), what: "pattern too long", max: PATTERN_MAX_BYTES });
        }
        if self.patterns.iter().any(|p| p == pattern || p == b"*") {
            return Ok(());
        }
        if self.patterns.len() >= PATTERNS_MAX {
            return Err(AclError::TooMany { rule: rule.into(), what: "too many key patterns", max: PATTERNS_MAX });
        }
        self.patterns.push(pattern.to_vec());
        Ok(())
    }

    fn reset_commands(&mut self, all: bool) {
        self.all_commands_base = all;
        self.command_rules.clear();
    }

    /// `+name`, `-name`, `+@cat`, `-@cat` (lowercase), checked against the table.
    fn add_command_rule(&mut self, rule: &str) -> Result<(), AclError> {
        let target = &rule[1..];
        let known = match target.strip_prefix('@') {
            Some(cat) => Category::parse(cat).is_some(),
            None => table::index_of(target).is_some(),
        };
        if !known {
            return Err(AclError::UnknownCommand { rule: rule.into() });
        }
        // The same rule again, or its opposite, supersedes the earlier one.
        self.command_rules.retain(|r| r[1..] != *target);
        if self.command_rules.len() >= COMMAND_RULES_MAX {
            return Err(AclError::TooMany {
                rule: rule.into(),
                what: "too many command rules",
                max: COMMAND_RULES_MAX,
            });
        }
        self.command_rules.push(rule.to_string());
        Ok(())
    }

    /// Which entries of `COMMANDS` the rules allow, by index.
    pub fn allowed(&self) -> Vec<bool> {
        let mut allowed = vec![self.all_commands_base; COMMANDS.len()];
        for rule in &self.command_rules {
            let on = rule.starts_with('+');
            let Some(target) = rule.get(1..) else { continue };
            for (i, c) in COMMANDS.iter().enumerate() {
                let hit = match target.strip_prefix('@') {
                    Some(cat) => Category::parse(cat).is_some_and(|cat| c.categories.contains(&cat)),
                    // `+acl` is every `acl|…` too; `+acl|cat` that one.
                    None => c.name == target || c.name.strip_prefix(target).is_some_and(|r| r.starts_with('|')),
                };
                if hit {
                    allowed[i] = on;
                }
            }
        }
        allowed
    }

    /// The user's rules as `ACL LIST` shows them, without `user <name>`.
    pub fn describe(&self) -> String {
        let mut words = vec![if self.enabled { "on" } else { "off" }.to_string()];
        if self.nopass {
            words.push("nopass".into());
        }
        words.extend(self.passwords.iter().map(|p| format!("#{}", hex(&p.digest))));
        words.extend(self.patterns.iter().map(|p| format!("~{}", String::from_utf8_lossy(p))));
        words.push("resetchannels".into());
        words.push(self.commands_text());
        words.join(" ")
    }

    /// The command rules as Redis shows them: `+@all`, or `-@all` and the rules after it.
    pub fn commands_text(&self) -> String {
        let base = if self.all_commands_base { "+@all" } else { "-@all" };
        std::iter::once(base.to_string()).chain(self.command_rules.iter().cloned()).collect::<Vec<_>>().join(" ")
    }

    /// The bytes of the `acl/<user>` record.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(&(1u8, self)).expect("users always serialize")
    }

    /// A user read from the metadata; `None` if the bytes are no user (then it grants nothing).
    /// Its invariant is checked, as for any input: a record that breaks it is no user.
    pub fn decode(bytes: &[u8]) -> Option<User> {
        match postcard::from_bytes::<(u8, User)>(bytes).ok()? {
            (1, user) if user.holds_its_invariant() => Some(user),
            _ => None,
        }
    }

    fn holds_its_invariant(&self) -> bool {
        let rule_ok = |r: &String| {
            let mut probe = User::default();
            r.starts_with(['+', '-']) && *r == r.to_ascii_lowercase() && probe.add_command_rule(r).is_ok()
        };
        self.command_rules.len() <= COMMAND_RULES_MAX
            && self.command_rules.iter().all(rule_ok)
            && self.patterns.len() <= PATTERNS_MAX
            && self.patterns.iter().all(|p| p.len() <= PATTERN_MAX_BYTES)
            && self.passwords.len() <= PASSWORDS_MAX
    }
}

/// Whether `name` can name a user: not empty, at most `NAME_MAX_BYTES`, no spaces, control
/// characters or `/`.
pub fn check_name(name: &[u8]) -> Result<&str, AclError> {
    let ok = !name.is_empty() && name.len() <= NAME_MAX_BYTES && !name.iter().any(|b| *b <= b' ' || *b == 0x7f);
    std::str::from_utf8(name).ok().filter(|_| ok).ok_or(AclError::BadName)
}

/// A user compiled for checks.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub user: User,
    allowed: Vec<bool>,
    globs: Vec<Glob>,
    all_keys: bool,
}

impl Compiled {
    pub fn new(user: User) -> Self {
        let allowed = user.allowed();
        let all_keys = user.patterns.iter().any(|p| p == b"*");
        let globs = user.patterns.iter().filter_map(|p| Glob::new(p, false)).collect();
        Compiled { user, allowed, globs, all_keys }
    }

    /// Whether the user may run every command on every key: no request needs checking.
    pub fn unrestricted(&self) -> bool {
        self.all_keys && self.allowed.iter().all(|a| *a)
    }

    /// Whether `password` opens this user (an `off` user opens to none).
    pub fn opens(&self, password: &[u8]) -> bool {
        // Every hash is tried, so the time does not say which one matched.
        let matched = self.user.passwords.iter().fold(false, |any, p| p.matches(password) | any);
        self.user.enabled && (self.user.nopass || matched)
    }

    /// Whether the user may run the request `args` (its name first): `Ok`, or Redis's refusal.
    pub fn check(&self, args: &[Vec<u8>]) -> Result<(), Denied> {
        let Some(i) = table::entry_for(args) else { return Ok(()) };
        let entry = &COMMANDS[i];
        if !self.allowed[i] && !table::ALWAYS_ALLOWED.contains(&entry.name) {
            return Err(Denied::Command(entry.name.to_string()));
        }
        if self.all_keys {
            return Ok(());
        }
        for k in table::keys_of(entry, args) {
            if !self.globs.iter().any(|g| g.matches(k)) {
                return Err(Denied::Key);
            }
        }
        Ok(())
    }

    /// Whether the user may run every command of `category` (the admin API asks `@admin`).
    pub fn has_category(&self, category: Category) -> bool {
        COMMANDS.iter().zip(&self.allowed).filter(|(c, _)| c.categories.contains(&category)).all(|(_, a)| *a)
    }
}

/// A refusal, with Redis's error reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("NOPERM this user has no permissions to run the '{0}' command")]
    Command(String),
    #[error("NOPERM No permissions to access a key")]
    Key,
}

/// The users of the cluster, as one copy of the metadata holds them, plus `default`.
#[derive(Clone, Debug)]
pub struct Users {
    users: BTreeMap<String, Compiled>,
}

impl Users {
    /// The users of `records` (the metadata's `acl/<name>` records; others are skipped), and
    /// `default`: every right, with a password when `default_password` (the node's config).
    pub fn from_records<'a>(
        records: impl IntoIterator<Item = (&'a String, &'a Vec<u8>)>,
        default_password: bool,
    ) -> Users {
        let mut users: BTreeMap<String, Compiled> = records
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(KEY_PREFIX)?.to_string(), Compiled::new(User::decode(v)?))))
            .filter(|(name, _)| name != DEFAULT_USER)
            .take(USERS_MAX)
            .collect();
        users.insert(DEFAULT_USER.into(), Compiled::new(default_user(default_password)));
        Users { users }
    }

    pub fn get(&self, name: &str) -> Option<&Compiled> {
        self.users.get(name)
    }

    /// Every user, `default` included, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Compiled)> {
        self.users.iter()
    }

    /// Stored users (`default` not counted).
    pub fn stored(&self) -> usize {
        self.users.len() - 1
    }
}

/// The `default` user: on, every command and key; `nopass` unless the node has a password
/// (which the session checks itself, as before ACL users).
pub fn default_user(password: bool) -> User {
    User {
        enabled: true,
        nopass: !password,
        passwords: vec![],
        all_commands_base: true,
        command_rules: vec![],
        patterns: vec![b"*".to_vec()],
    }
}

#[cfg(test)]
mod tests;
