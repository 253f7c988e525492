//! A wrong config field gets an error naming the file and the field; a good one parses.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use waymark_server::config::{NodeConfig, Schedule};

const GOOD: &str = r#"
[cluster]
name = "test"
partitions = 8
replicas = 2

[[cluster.hosts]]
name = "node1"
peer = "127.0.0.1:7001"
redis = "127.0.0.1:6001"
admin = "127.0.0.1:8001"

[[cluster.hosts]]
name = "node2"
peer = "127.0.0.1:7002"
redis = "127.0.0.1:6002"
admin = "127.0.0.1:8002"

[node]
host = "node1"
data_dir = "data"
secret_file = "secret"
admin_token_file = "token"

[snapshots]
every = "1s"
full_every = "1h"
"#;

/// A directory with the secret and token files, and the path a config in it would have.
fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    write_owner_only(&dir.path().join("secret"), "0123456789abcdef0123456789abcdef\n");
    write_owner_only(&dir.path().join("token"), "fedcba9876543210fedcba9876543210\n");
    let file = dir.path().join("waymark.toml");
    (dir, file)
}

/// A secret file as `cluster init` writes one: mode 0600.
fn write_owner_only(path: &Path, text: &str) {
    std::fs::write(path, text).expect("a secret file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod 600");
}

fn error_of(text: &str) -> String {
    let (_dir, file) = setup();
    match NodeConfig::parse(&file, text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_good_config_parses_with_its_schedule_and_token() {
    let (dir, file) = setup();
    let cfg = NodeConfig::parse(&file, GOOD).expect("a good config");
    assert_eq!(
        cfg.schedule,
        Some(Schedule { every: std::time::Duration::from_secs(1), full_every: std::time::Duration::from_secs(3600) })
    );
    assert_eq!(cfg.admin_token.as_deref(), Some(&b"fedcba9876543210fedcba9876543210"[..]));
    assert_eq!(cfg.snapshot_dir, dir.path().join("snapshots"));
}

#[test]
fn a_schedule_whose_full_snapshots_come_more_often_than_increments_is_refused() {
    let e = error_of(&GOOD.replace(r#"full_every = "1h""#, r#"full_every = "100ms""#));
    assert!(e.contains("snapshots.full_every") && e.contains("waymark.toml"), "{e}");
}

#[test]
fn a_duration_that_does_not_parse_names_its_field() {
    let e = error_of(&GOOD.replace(r#"every = "1s""#, r#"every = "soon""#));
    assert!(e.contains("snapshots.every") && e.contains("soon"), "{e}");
}

#[test]
fn an_unknown_field_is_refused() {
    let e = error_of(&GOOD.replace("[snapshots]", "[snapshots]\nkeep = 3"));
    assert!(e.contains("keep"), "{e}");
}

#[test]
fn a_short_admin_token_is_refused() {
    let (_dir, file) = setup();
    std::fs::write(file.parent().expect("dir").join("token"), "short").expect("token");
    let e = NodeConfig::parse(&file, GOOD).map(drop).expect_err("a short token");
    assert!(e.to_string().contains("node.admin_token_file"), "{e}");
}

#[test]
fn the_cut_strategy_is_read_by_name_and_an_unknown_one_lists_the_valid_ones() {
    let (_dir, file) = setup();
    let with = |s: &str| GOOD.replace("replicas = 2", &format!("replicas = 2\nstrategy = \"{s}\""));
    let cfg = NodeConfig::parse(&file, &with("consistent")).expect("consistent");
    assert_eq!(cfg.cluster.strategy, waymark_core::CutStrategy::Consistent);
    let e = error_of(&with("stop-the-world"));
    assert!(e.contains("cluster.strategy") && e.contains("consistent, blocking"), "{e}");
}

#[test]
fn every_strategy_is_a_cluster_setting() {
    let (_dir, file) = setup();
    let with = |s: &str| GOOD.replace("replicas = 2", &format!("replicas = 2\nstrategy = \"{s}\""));
    for strategy in waymark_core::CutStrategy::names() {
        let cfg = NodeConfig::parse(&file, &with(strategy)).expect("every strategy runs on a node");
        assert_eq!(cfg.cluster.strategy.name(), strategy);
    }
}

#[test]
fn a_break_is_named_in_node_breaks_and_an_unknown_one_is_refused() {
    let (_dir, file) = setup();
    let with = |breaks: &str| {
        GOOD.replace("admin_token_file = \"token\"", &format!("admin_token_file = \"token\"\nbreaks = {breaks}"))
    };
    let cfg = NodeConfig::parse(&file, &with("[\"skip-lock\"]")).expect("a known break");
    assert!(cfg.breaks.skip_lock);
    assert_eq!(NodeConfig::parse(&file, GOOD).expect("no break").breaks, waymark_core::Breaks::default());
    let e = error_of(&with("[\"skip-everything\"]"));
    assert!(e.contains("node.breaks") && e.contains("skip-everything"), "{e}");
}

/// Anyone else who can read the cluster secret can join the cluster; one who can read the token
/// can export its data; one who can read the password can use it.
#[test]
fn a_secret_file_readable_by_group_or_others_is_refused_naming_the_file_and_the_fix() {
    let with_password = GOOD.replace("admin_token_file", "password_file = \"password\"\nadmin_token_file");
    for (name, field, mode) in [
        ("secret", "node.secret_file", 0o644),
        ("token", "node.admin_token_file", 0o640),
        ("password", "node.password_file", 0o604),
    ] {
        let (dir, file) = setup();
        write_owner_only(&dir.path().join("password"), "a password\n");
        let path = dir.path().join(name);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let e = match NodeConfig::parse(&file, &with_password) {
            Ok(_) => panic!("a {name} file of mode {mode:o} was accepted"),
            Err(e) => e.to_string(),
        };
        let fix = format!("chmod 600 {}", path.display());
        assert!(e.contains(field) && e.contains(&fix), "the message does not name {field} and `{fix}`: {e}");
    }
}

/// Protected mode: node1's and node2's ports moved to `ip`, with `node` added to `[node]` (a
/// password, `node.insecure`) and `[tls]` if `tls`, parsed in a directory holding the files named.
fn protected(ip: &str, node: &str, tls: bool) -> Result<NodeConfig, String> {
    let (dir, file) = setup();
    write_owner_only(&dir.path().join("password"), "p4ssw0rd\n");
    write_owner_only(&dir.path().join("key.pem"), "not read by the parser\n");
    std::fs::write(dir.path().join("cert.pem"), "").unwrap();
    std::fs::write(dir.path().join("ca.pem"), "").unwrap();
    let text = GOOD.replace("\"127.0.0.1:", &format!("\"{ip}:")).replace("[node]\n", &format!("[node]\n{node}"));
    let text = if tls { text + TLS } else { text };
    NodeConfig::parse(&file, &text).map_err(|e| e.to_string())
}

const TLS: &str = "\n[tls]\ncert_file = \"cert.pem\"\nkey_file = \"key.pem\"\nca_file = \"ca.pem\"\n";
const PASSWORD: &str = "password_file = \"password\"\n";
const INSECURE: &str = "insecure = true\n";

#[test]
fn protected_mode_refuses_a_non_loopback_host_without_tls_and_a_password_unless_insecure() {
    let refused = |node: &str, tls: bool, missing: &str| {
        let e = protected("0.0.0.0", node, tls).expect_err(missing);
        assert!(e.contains(&format!("not a loopback address, without {missing}:")), "{e}");
        assert!(e.contains("node.insecure = true"), "{e}");
    };
    refused("", false, "TLS and a password");
    refused(PASSWORD, false, "TLS");
    refused("", true, "a password");
    let secure = protected("0.0.0.0", PASSWORD, true).expect("TLS and a password");
    assert!(secure.tls.is_some() && secure.password.is_some() && !secure.insecure);
    let insecure = protected("0.0.0.0", INSECURE, false).expect("node.insecure");
    assert!(insecure.insecure && insecure.tls.is_none());
    // On loopback nothing is asked.
    protected("127.0.0.1", "", false).expect("loopback, plaintext, no password");
}

#[test]
fn a_tls_key_file_others_can_read_is_refused_naming_the_field_and_the_fix() {
    let (dir, file) = setup();
    let key = dir.path().join("key.pem");
    std::fs::write(&key, "").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o604)).unwrap();
    std::fs::write(dir.path().join("cert.pem"), "").unwrap();
    std::fs::write(dir.path().join("ca.pem"), "").unwrap();
    let e = NodeConfig::parse(&file, &format!("{GOOD}{TLS}")).expect_err("a key others can read").to_string();
    assert!(e.contains("tls.key_file") && e.contains(&format!("chmod 600 {}", key.display())), "{e}");
}
