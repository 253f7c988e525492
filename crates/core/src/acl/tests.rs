use super::table::{self, Category, Keys, ALWAYS_ALLOWED, COMMANDS};
use super::*;

const SALT: [u8; 16] = [7; 16];

fn user(rules: &str) -> User {
    let mut u = User::default();
    for r in rules.split(' ') {
        u.apply(r.as_bytes(), SALT).unwrap_or_else(|e| panic!("{r}: {e}"));
    }
    u
}

fn args(words: &str) -> Vec<Vec<u8>> {
    words.split(' ').map(|w| w.as_bytes().to_vec()).collect()
}

fn check(u: &User, words: &str) -> Result<(), Denied> {
    Compiled::new(u.clone()).check(&args(words))
}

#[test]
fn a_reader_of_app_keys_gets_them_and_nothing_else() {
    let u = user("on >secret ~app:* +@read");
    assert_eq!(check(&u, "GET app:x"), Ok(()));
    assert_eq!(check(&u, "MGET app:x app:y"), Ok(()));
    assert_eq!(check(&u, "SET app:x 1"), Err(Denied::Command("set".into())));
    assert_eq!(check(&u, "GET other"), Err(Denied::Key));
    assert_eq!(check(&u, "MGET app:x other"), Err(Denied::Key));
    assert_eq!(
        Denied::Command("set".into()).to_string(),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    assert_eq!(Denied::Key.to_string(), "NOPERM No permissions to access a key");
    // AUTH and HELLO stay open: switching user needs the other user's password.
    assert_eq!(check(&u, "AUTH other pw"), Ok(()));
    assert_eq!(check(&u, "PING"), Err(Denied::Command("ping".into())));
}

#[test]
fn rules_apply_in_order_and_later_ones_win() {
    let u = user("+@all -set");
    assert_eq!(check(&user("allkeys +@all -set"), "GET k"), Ok(()));
    assert_eq!(u.commands_text(), "+@all -set");
    let u = user("allkeys +@write -@string +set");
    assert_eq!(check(&u, "SET k v"), Ok(()));
    assert_eq!(check(&u, "APPEND k v"), Err(Denied::Command("append".into())));
    assert_eq!(check(&u, "DEL k"), Ok(()), "del is @keyspace @write, not @string");
    // `allcommands`/`nocommands` start the list again.
    let u = user("+get -set nocommands +ping");
    assert_eq!(u.commands_text(), "-@all +ping");
    // The same target again replaces its earlier rule.
    let u = user("+get -get +get");
    assert_eq!(u.command_rules, vec!["+get".to_string()]);
}

#[test]
fn a_container_rule_covers_its_subcommands_and_a_subcommand_rule_one() {
    let u = user("allkeys +acl");
    assert_eq!(check(&u, "ACL SETUSER x on"), Ok(()));
    let u = user("allkeys +acl|whoami");
    assert_eq!(check(&u, "ACL WHOAMI"), Ok(()));
    assert_eq!(check(&u, "acl setuser x"), Err(Denied::Command("acl|setuser".into())));
    let u = user("allkeys +@all -@admin");
    assert_eq!(check(&u, "CONFIG GET save"), Err(Denied::Command("config|get".into())));
    assert_eq!(check(&u, "ACL CAT"), Ok(()), "acl|cat is @slow only, as in Redis");
}

#[test]
fn keys_are_found_where_each_command_has_them() {
    let u = user("~a* +@all");
    assert_eq!(check(&u, "MSET a1 x a2 y"), Ok(()), "values are not keys");
    assert_eq!(check(&u, "MSET a1 x b2 y"), Err(Denied::Key));
    assert_eq!(check(&u, "RENAME a1 b1"), Err(Denied::Key));
    assert_eq!(check(&u, "RENAME a1 a2"), Ok(()));
    assert_eq!(check(&u, "SET a1 bbb"), Ok(()));
    assert_eq!(check(&u, "WATCH a1 b"), Err(Denied::Key));
    assert_eq!(check(&u, "KEYS *"), Ok(()), "KEYS has no key arguments");
    let none = user("+@all");
    assert_eq!(check(&none, "GET a"), Err(Denied::Key), "no pattern, no key");
    assert_eq!(check(&none, "PING"), Ok(()));
}

#[test]
fn passwords_are_kept_salted_and_open_only_an_enabled_user() {
    let u = user(">one >two");
    assert_eq!(u.passwords.len(), 2);
    assert!(u.passwords.iter().all(|p| p.digest != Sha256::digest(b"one").as_slice()), "salted, not plain SHA-256");
    assert!(!Compiled::new(u.clone()).opens(b"one"), "off");
    let mut on = u.clone();
    on.apply(b"on", SALT).unwrap();
    let c = Compiled::new(on.clone());
    assert!(c.opens(b"one") && c.opens(b"two") && !c.opens(b"three") && !c.opens(b""));
    on.apply(b"<one", SALT).unwrap();
    assert!(!Compiled::new(on.clone()).opens(b"one"));
    on.apply(b"nopass", SALT).unwrap();
    assert!(Compiled::new(on.clone()).opens(b"anything"));
    on.apply(b"resetpass", SALT).unwrap();
    assert!(!Compiled::new(on).opens(b"anything"), "resetpass: no password opens it");
    let salted = |salt| PasswordHash::new(b"pw", salt);
    assert_ne!(salted([1; 16]), salted([2; 16]), "one password, two salts, two digests");
}

#[test]
fn reset_and_keys_rules() {
    let mut u = user("on nopass allkeys +@all");
    assert_eq!(u.describe(), "on nopass ~* resetchannels +@all");
    u.apply(b"resetkeys", SALT).unwrap();
    u.apply(b"~app:*", SALT).unwrap();
    u.apply(b"~app:*", SALT).unwrap();
    assert_eq!(u.patterns, vec![b"app:*".to_vec()]);
    u.apply(b"RESET", SALT).unwrap();
    assert_eq!(u, User::default());
    assert_eq!(u.describe(), "off resetchannels -@all");
}

#[test]
fn bad_rules_get_redis_errors() {
    let mut u = User::default();
    let e = u.apply(b"+nosuchcmd", SALT).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ERR Error in ACL SETUSER modifier '+nosuchcmd': Unknown command or category name in ACL"
    );
    assert!(matches!(u.apply(b"+@nosuchcat", SALT), Err(AclError::UnknownCommand { .. })));
    assert_eq!(u.apply(b"bogus", SALT), Err(AclError::Syntax { rule: "bogus".into() }));
    assert!(matches!(u.apply(b"#abcd", SALT), Err(AclError::Unsupported { .. })));
    assert!(matches!(u.apply(b"%R~x", SALT), Err(AclError::Unsupported { .. })));
    assert_eq!(u, User::default(), "a refused rule changes nothing");
    assert!(u.apply(b"+@list", SALT).is_ok(), "a Redis category with no Waymark command is taken");
    assert!(u.apply(b"&chan*", SALT).is_ok() && u.apply(b"allchannels", SALT).is_ok());
}

#[test]
fn sizes_are_bounded() {
    let mut u = User::default();
    for i in 0..PATTERNS_MAX {
        u.apply(format!("~p{i}").as_bytes(), SALT).unwrap();
    }
    assert!(matches!(u.apply(b"~one-more", SALT), Err(AclError::TooMany { .. })));
    for i in 0..PASSWORDS_MAX {
        u.apply(format!(">p{i}").as_bytes(), SALT).unwrap();
    }
    assert!(matches!(u.apply(b">one-more", SALT), Err(AclError::TooMany { .. })));
    let long = format!("~{}", "x".repeat(PATTERN_MAX_BYTES + 1));
    assert!(matches!(u.apply(long.as_bytes(), SALT), Err(AclError::TooMany { .. })));
    // Alternating rules replace each other: the list stays short.
    for _ in 0..10 * COMMAND_RULES_MAX {
        u.apply(b"+get", SALT).unwrap();
        u.apply(b"-get", SALT).unwrap();
    }
    assert_eq!(u.command_rules.len(), 1);
    assert_eq!(check_name(b"app user"), Err(AclError::BadName));
    assert_eq!(check_name(&[b'a'; NAME_MAX_BYTES + 1]), Err(AclError::BadName));
    assert_eq!(check_name(b"app"), Ok("app"));
}

#[test]
fn a_user_round_trips_through_its_metadata_record() {
    let u = user("on >pw ~app:* +@read -strlen");
    assert_eq!(User::decode(&u.encode()), Some(u));
    assert_eq!(User::decode(b"\x09garbage"), None);
    let broken = User { command_rules: vec![String::new(), "+nosuch".into()], ..User::default() };
    assert_eq!(User::decode(&broken.encode()), None, "a record that breaks the invariant is no user");
    let records = [(key("app"), user("on >pw ~app:* +@read").encode()), ("config/x".into(), b"on".to_vec())];
    let users = Users::from_records(records.iter().map(|(k, v)| (k, v)), true);
    assert_eq!(users.stored(), 1);
    assert!(users.get("app").is_some_and(|u| u.opens(b"pw")));
    let default = users.get(DEFAULT_USER).expect("always there");
    assert!(!default.opens(b"x"), "with a node password the session checks it, not this user");
    assert!(default.has_category(Category::Admin) && default.check(&args("FLUSHALL")).is_ok());
}

/// The table follows Redis 7's `COMMAND INFO` for the commands Waymark has.
#[test]
fn the_category_table_is_redis_s() {
    let cats = |name: &str| COMMANDS[table::index_of(name).expect(name)].categories.to_vec();
    use Category::*;
    assert_eq!(cats("get"), vec![Read, String, Fast]);
    assert_eq!(cats("set"), vec![Write, String, Slow]);
    assert_eq!(cats("del"), vec![Keyspace, Write, Slow]);
    assert_eq!(cats("keys"), vec![Keyspace, Read, Slow, Dangerous]);
    assert_eq!(cats("flushall"), vec![Keyspace, Write, Slow, Dangerous]);
    assert_eq!(cats("exec"), vec![Slow, Transaction]);
    assert_eq!(cats("ping"), vec![Fast, Connection]);
    assert_eq!(cats("config|set"), vec![Admin, Slow, Dangerous]);
    assert_eq!(cats("acl|setuser"), vec![Admin, Slow, Dangerous]);
    assert_eq!(cats("getbit"), vec![Read, Bitmap, Fast]);
    // Every read is not a write, every data command touches keys or the keyspace.
    for c in COMMANDS {
        assert!(!(c.categories.contains(&Read) && c.categories.contains(&Write)), "{}", c.name);
        assert!(c.name == c.name.to_ascii_lowercase());
        if let Some((container, _)) = c.name.split_once('|') {
            assert!(table::index_of(container).is_some(), "{} has no container", c.name);
        }
        if c.keys != Keys::None {
            assert!(c.categories.iter().any(|k| [Read, Write, Transaction].contains(k)), "{}", c.name);
        }
    }
    let mut names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), COMMANDS.len(), "names are unique");
    assert!(ALWAYS_ALLOWED.iter().all(|n| table::index_of(n).is_some()));
    assert_eq!(CATEGORIES.len(), 21, "Redis 7 has 21 categories");
}

/// A key pattern's check is bounded by pattern × key, whatever the pattern (no backtracking over
/// every split of the key among the stars).
#[test]
fn a_hostile_key_pattern_costs_pattern_times_key_at_most() {
    let pattern = format!("~{}b", "*a".repeat(PATTERN_MAX_BYTES / 2 - 1));
    let u = user(&format!("{pattern} +@all"));
    let key = "a".repeat(64 << 10);
    let started = std::time::Instant::now();
    assert_eq!(check(&u, &format!("GET {key}")), Err(Denied::Key));
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
}
