//! `ACL …` and `AUTH user pass` as Redis answers them, over the users this host holds
//! (`crate::acl`, compiled by `waymark_core::acl`). The replies are made here; a change
//! (`SETUSER`, `DELUSER`) is a new `acl/<user>` record the session proposes through its near
//! vnode (`Request::SetUser`), so every host of the cluster applies it.

use waymark_core::acl::{self, AclError, Category, Users, CATEGORIES, COMMANDS, DEFAULT_USER};
use waymark_resp::Reply;

fn bulk(s: impl Into<String>) -> Reply {
    Reply::bulk(s.into().into_bytes())
}

/// Why a change of users was refused before it was proposed.
#[derive(Debug, thiserror::Error)]
pub enum SetUserError {
    #[error(transparent)]
    Rule(#[from] AclError),
    #[error("ERR The 'default' user is the node's own (node.password_file): ACL cannot change or remove it")]
    Default,
    #[error("ERR the cluster holds {max} ACL users already (waymark_core::acl::USERS_MAX)", max = acl::USERS_MAX)]
    TooManyUsers,
}

/// `ACL SETUSER name rule…`: the user's record after the rules, applied to the user as this host
/// holds it (a new user starts `off`, with nothing), each new password with a fresh salt.
pub fn set_user(users: &Users, name: &[u8], rules: &[Vec<u8>]) -> Result<(String, Vec<u8>), SetUserError> {
    let name = acl::check_name(name)?;
    if name == DEFAULT_USER {
        return Err(SetUserError::Default);
    }
    if rules.len() > acl::RULES_PER_CALL_MAX {
        return Err(AclError::TooManyRules.into());
    }
    let existing = users.get(name);
    if existing.is_none() && users.stored() >= acl::USERS_MAX {
        return Err(SetUserError::TooManyUsers);
    }
    let mut user = existing.map(|c| c.user.clone()).unwrap_or_default();
    for rule in rules {
        user.apply(rule, rand::random())?;
    }
    Ok((name.to_string(), user.encode()))
}

/// `ACL DELUSER name…`: the users to remove (those this host holds; `default` refused).
pub fn users_to_delete(users: &Users, names: &[Vec<u8>]) -> Result<Vec<String>, SetUserError> {
    let mut found = vec![];
    for name in names {
        if name == DEFAULT_USER.as_bytes() {
            return Err(SetUserError::Default);
        }
        let name = String::from_utf8_lossy(name);
        if users.get(&name).is_some() && !found.contains(&name.to_string()) {
            found.push(name.into_owned());
        }
    }
    Ok(found)
}

/// `ACL GETUSER name`: Redis 7's fields (no selectors, no channels in Waymark).
pub fn get_user(users: &Users, name: &[u8]) -> Reply {
    let Some(c) = users.get(&String::from_utf8_lossy(name)) else { return Reply::Null };
    let u = &c.user;
    let mut flags = vec![bulk(if u.enabled { "on" } else { "off" })];
    if u.nopass {
        flags.push(bulk("nopass"));
    }
    let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let passwords = u.passwords.iter().map(|p| bulk(hex(&p.digest))).collect();
    let keys: Vec<String> = u.patterns.iter().map(|p| format!("~{}", String::from_utf8_lossy(p))).collect();
    Reply::Map(vec![
        (bulk("flags"), Reply::Array(flags)),
        (bulk("passwords"), Reply::Array(passwords)),
        (bulk("commands"), bulk(u.commands_text())),
        (bulk("keys"), bulk(keys.join(" "))),
        (bulk("channels"), bulk("")),
        (bulk("selectors"), Reply::Array(vec![])),
    ])
}

/// `ACL LIST`: one line per user, as Redis writes them.
pub fn list(users: &Users) -> Reply {
    Reply::Array(users.iter().map(|(name, c)| bulk(format!("user {name} {}", c.user.describe()))).collect())
}

/// `ACL USERS`: the names.
pub fn names(users: &Users) -> Reply {
    Reply::Array(users.iter().map(|(name, _)| bulk(name.clone())).collect())
}

/// `ACL CAT [category]`: the categories, or the commands of one.
pub fn cat(category: Option<&[u8]>) -> Reply {
    let Some(name) = category else {
        return Reply::Array(CATEGORIES.iter().map(|(_, n)| bulk(*n)).collect());
    };
    let name = String::from_utf8_lossy(name);
    let Some(c) = Category::parse(&name) else { return Reply::error(format!("ERR Unknown category '{name}'")) };
    Reply::Array(COMMANDS.iter().filter(|e| e.categories.contains(&c)).map(|e| bulk(e.name)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users_with(name: &str, rules: &[&str]) -> Users {
        let empty = Users::from_records(std::iter::empty(), false);
        let rules: Vec<Vec<u8>> = rules.iter().map(|r| r.as_bytes().to_vec()).collect();
        let (name, stored) = set_user(&empty, name.as_bytes(), &rules).unwrap();
        let records = [(acl::key(&name), stored)];
        Users::from_records(records.iter().map(|(k, v)| (k, v)), false)
    }

    #[test]
    fn getuser_and_list_show_the_rules() {
        let users = users_with("app", &["on", ">pw", "~app:*", "+@read"]);
        let Reply::Map(fields) = get_user(&users, b"app") else { panic!("a map") };
        assert_eq!(fields[2].1, bulk("-@all +@read"));
        assert_eq!(fields[3].1, bulk("~app:*"));
        assert_eq!(get_user(&users, b"nobody"), Reply::Null);
        let Reply::Array(lines) = list(&users) else { panic!("an array") };
        assert_eq!(lines.len(), 2, "app and default");
        assert!(matches!(set_user(&users, b"default", &[]), Err(SetUserError::Default)));
        assert!(matches!(users_to_delete(&users, &[b"default".to_vec()]), Err(SetUserError::Default)));
        assert_eq!(users_to_delete(&users, &[b"app".to_vec(), b"nobody".to_vec()]).unwrap(), vec!["app"]);
        let Reply::Array(read) = cat(Some(b"read")) else { panic!("an array") };
        assert!(read.contains(&bulk("get")) && !read.contains(&bulk("set")));
    }
}
