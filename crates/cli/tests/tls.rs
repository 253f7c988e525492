//! Issue 36, secure by default: a cluster as `cluster init` writes it serves TLS only, with a
//! password, on every port. The command line `cluster start` prints for each host answers PONG;
//! a plaintext client is refused on the Redis, admin and peer ports — on the peer port even one
//! holding the cluster secret, and a TLS dialer without a certificate of the cluster's CA too;
//! `--insecure` says what it turns off; a node refuses a key file others can read, and a
//! non-loopback address without TLS and a password (protected mode) unless `node.insecure`.

mod common;

use common::{poll, run_waymark, temp_dir, wait_bounded, Cluster, PidFileGuard, Spec};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use waymark_server::net::auth::{self, Identity};
use waymark_server::net::frame;
use waymark_server::net::stream::PeerStream;

/// `cluster start` itself gives up after 60 s.
const START_WITHIN: Duration = Duration::from_secs(90);
const STOP_WITHIN: Duration = Duration::from_secs(60);
const CLI_WITHIN: Duration = Duration::from_secs(20);
const IO_TIMEOUT: Duration = Duration::from_secs(5);

fn dir_args(words: &[&str], cluster: &Cluster) -> Vec<String> {
    words.iter().map(|w| w.to_string()).chain(["--dir".to_string(), cluster.dir().display().to_string()]).collect()
}

/// Runs `line` (a shell command line) with `args` after it; its standard output.
fn shell(line: &str, args: &str) -> (bool, String) {
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("{line} {args}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh");
    let out = wait_bounded(child, CLI_WITHIN, line);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text.trim().to_string())
}

/// What a plaintext client hears after sending `PING` (nothing, if the server closed on it).
fn plaintext_ping(addr: SocketAddr) -> String {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, IO_TIMEOUT) else { return String::new() };
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let _ = s.write_all(b"*1\r\n$4\r\nPING\r\n");
    let mut heard = vec![];
    let _ = s.take(4096).read_to_end(&mut heard);
    String::from_utf8_lossy(&heard).into_owned()
}

/// A Rust client over TLS (rustls, trusting the cluster's CA alone): `AUTH`, then `PING`.
fn tls_auth_ping(addr: SocketAddr, ca: &std::path::Path, password: &str) -> String {
    let config = waymark_server::tls::client_config(ca).expect("the CA");
    let conn = rustls::ClientConnection::new(config, addr.ip().into()).expect("a TLS client");
    let tcp = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let auth = format!("*2\r\n$4\r\nAUTH\r\n${}\r\n{password}\r\n*1\r\n$4\r\nPING\r\n", password.len());
    tls.write_all(auth.as_bytes()).expect("write over TLS");
    let mut heard = [0; 64];
    let mut got = 0;
    while got < heard.len() && !String::from_utf8_lossy(&heard[..got]).contains("PONG") {
        match tls.read(&mut heard[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    String::from_utf8_lossy(&heard[..got]).into_owned()
}

#[test]
fn a_fresh_cluster_serves_only_tls_with_a_password_on_every_port() {
    let cluster = Cluster::init(&Spec::new(3, 2).fsync_never().secure());
    let mut guard = PidFileGuard::new(&cluster);
    let start = run_waymark(&dir_args(&["cluster", "start"], &cluster), START_WITHIN);
    guard.read();
    let printed = String::from_utf8_lossy(&start.stdout).into_owned();
    assert!(start.status.success(), "cluster start: {}{printed}", String::from_utf8_lossy(&start.stderr));
    let ca = cluster.dir().join("ca.pem");
    let password = std::fs::read_to_string(cluster.dir().join("password")).unwrap().trim().to_string();

    // The printed line of each host answers PONG, and a key written through one host is read
    // through the others (over the peer links, mutual TLS).
    let lines: Vec<String> = cluster
        .hosts
        .iter()
        .map(|h| {
            let start = format!("redis-cli -h 127.0.0.1 -p {} --tls --cacert ", h.redis_addr().port());
            let line = printed.lines().map(str::trim).find(|l| l.starts_with(&start));
            line.unwrap_or_else(|| panic!("cluster start prints no `{start}…` line:\n{printed}")).to_string()
        })
        .collect();
    for line in &lines {
        assert_eq!(shell(line, "PING"), (true, "PONG".to_string()), "{line}");
    }
    assert_eq!(shell(&lines[0], "SET greeting hello"), (true, "OK".to_string()));
    for line in &lines[1..] {
        assert_eq!(shell(line, "GET greeting"), (true, "hello".to_string()), "{line}");
    }
    for h in &cluster.hosts {
        assert!(tls_auth_ping(h.redis_addr(), &ca, &password).contains("+PONG"), "{}: rustls client", h.name);
    }
    // redis-py with ssl=True (Debian's python3-redis, which scripts/test installs).
    let script = format!(
        "import redis\nr = redis.Redis(host='127.0.0.1', port={}, password='{password}', ssl=True, ssl_ca_certs='{}', \
         socket_timeout=5)\nprint(r.ping(), r.get('greeting').decode())",
        cluster.host("node3").redis_addr().port(),
        ca.display()
    );
    let (ok, said) = shell(&format!("/usr/bin/python3 -c \"{script}\""), "");
    assert_eq!((ok, said.as_str()), (true, "True hello"), "redis-py over TLS (is python3-redis installed?)");

    let node2 = cluster.host("node2");
    let port = node2.redis_addr().port().to_string();
    // TLS without the password: refused.
    let (_, heard) = shell(&format!("redis-cli -p {port} --tls --cacert {}", ca.display()), "GET greeting");
    assert!(heard.contains("NOAUTH"), "GET over TLS without AUTH answered: {heard}");
    // Plaintext, with the password or without: refused.
    let (_, heard) = shell(&format!("redis-cli -p {port} --no-auth-warning -a {password}"), "PING");
    assert!(!heard.contains("PONG"), "redis-cli in plaintext got an answer: {heard}");
    let heard = plaintext_ping(node2.redis_addr());
    assert!(!heard.contains("PONG"), "a plaintext PING got an answer: {heard:?}");

    // The admin API: HTTPS with the CA answers, plain HTTP is refused.
    let tls = waymark_server::tls::client_config(&ca).unwrap();
    let https = waymark_server::tls::AdminHttp::new(Some(tls), IO_TIMEOUT);
    let health = https.agent.get(&https.url(node2.admin_addr(), "/health")).call().expect("GET /health over TLS");
    assert_eq!(health.into_string().unwrap(), "ok\n");
    let plain = ureq::get(&format!("http://{}/health", node2.admin_addr())).timeout(IO_TIMEOUT).call();
    assert!(plain.is_err(), "plain HTTP to the admin port was answered");
    // The status page's tree: node2 asks the other hosts' /topology over HTTPS with the CA.
    let url = https.url(node2.admin_addr(), "/topology?scope=cluster");
    // Each peer has 800 ms to answer: on a loaded machine a first try may miss one.
    let tree: serde_json::Value = poll("node2's /topology hears every host", Duration::from_secs(20), || {
        let tree: serde_json::Value =
            https.agent.get(&url).call().map_err(|e| e.to_string())?.into_json().map_err(|e| e.to_string())?;
        match tree["unreachable"] == serde_json::json!([]) {
            true => Ok(tree),
            false => Err(tree.to_string()),
        }
    });
    for h in &cluster.hosts {
        let ids = tree["vnodes"].as_array().unwrap().iter().filter_map(|v| v["id"].as_str());
        assert!(ids.into_iter().any(|id| id.ends_with(&h.name)), "no live vnode of {} in /topology: {tree}", h.name);
    }
    // A snapshot is a cut and every host's export, each asked by the root's host over HTTPS.
    let created = run_waymark(&dir_args(&["snapshot", "create", "s1"], &cluster), Duration::from_secs(60));
    assert!(created.status.success(), "snapshot create: {}", String::from_utf8_lossy(&created.stderr));
    // Restored, it makes a new cluster as secure as `cluster init`'s, with a CA of its own.
    let to = temp_dir();
    let mut restore = dir_args(&["snapshot", "restore", "s1", "--to"], &cluster);
    restore.insert(4, to.path().display().to_string());
    let restored = run_waymark(&restore, Duration::from_secs(60));
    assert!(restored.status.success(), "snapshot restore: {}", String::from_utf8_lossy(&restored.stderr));
    let restored = Cluster::open(to);
    for h in &restored.hosts {
        assert!(
            h.cfg.tls.is_some() && h.cfg.password.is_some() && !h.cfg.insecure,
            "{} of the restored cluster",
            h.name
        );
    }

    peer_port_refuses_plaintext_and_strangers(&cluster);

    let stop = run_waymark(&dir_args(&["cluster", "stop"], &cluster), STOP_WITHIN);
    assert!(stop.status.success(), "cluster stop: {}", String::from_utf8_lossy(&stop.stderr));
}

/// Node2's peer port: a plaintext dialer holding the cluster secret is refused, and so is a TLS
/// dialer that trusts the CA but shows no certificate of its own.
fn peer_port_refuses_plaintext_and_strangers(cluster: &Cluster) {
    let node2 = cluster.host("node2");
    let me =
        Identity { cluster: node2.cfg.cluster.name.clone(), host: "node1".into(), secret: node2.cfg.secret.clone() };
    let addr = node2.peer_addr();
    let ca = cluster.dir().join("ca.pem");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let plain = tokio::net::TcpStream::connect(addr).await.expect("connect to node2's peer port");
        let mut framed = frame::framed(plain, node2.cfg.limits.frame_max_bytes);
        let result = auth::dial(&mut framed, &me, "node2").await;
        assert!(result.is_err(), "a plaintext dialer holding the secret was welcome on the peer port");

        let config: Arc<rustls::ClientConfig> = waymark_server::tls::client_config(&ca).unwrap();
        let connector = tokio_rustls::TlsConnector::from(config);
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect to node2's peer port");
        let name = rustls::pki_types::ServerName::try_from("node2").unwrap();
        // TLS 1.3 ends the client's side of the handshake before the server checks its
        // certificate: the refusal comes as the first read.
        let refused = match connector.connect(name, tcp).await {
            Err(_) => true,
            Ok(tls) => {
                let mut framed = frame::framed(PeerStream::Tls(Box::new(tls.into())), node2.cfg.limits.frame_max_bytes);
                auth::dial(&mut framed, &me, "node2").await.is_err()
            }
        };
        assert!(refused, "a TLS dialer without a certificate of the cluster's CA was welcome");
    });
}

#[test]
fn cluster_init_insecure_says_what_it_turns_off_and_writes_no_certificates() {
    let dir = temp_dir();
    let args: Vec<String> = ["cluster", "init", "--hosts", "1", "--insecure", "--dir"]
        .into_iter()
        .map(String::from)
        .chain([dir.path().display().to_string()])
        .collect();
    let out = run_waymark(&args, CLI_WITHIN);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cluster init --insecure: {}", String::from_utf8_lossy(&out.stderr));
    assert!(printed.contains("--insecure: no TLS"), "{printed}");
    assert!(printed.contains("no client password"), "{printed}");
    assert!(!dir.path().join("ca.pem").exists() && !dir.path().join("password").exists());
    let cluster = Cluster::open(dir);
    let cfg = &cluster.host("node1").cfg;
    assert!(cfg.insecure && cfg.tls.is_none() && cfg.password.is_none());
}

#[test]
fn a_node_refuses_a_key_file_others_can_read_naming_the_file_and_the_fix() {
    let cluster = Cluster::init(&Spec::new(1, 1).fsync_never().secure());
    let key = cluster.host("node1").dir.join("key.pem");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let file = &cluster.host("node1").config_file;
    let out = run_waymark(&["node".into(), "--config".into(), file.display().to_string()], CLI_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "waymark node started with a key file its group can read");
    assert!(stderr.contains("tls.key_file"), "{stderr}");
    assert!(stderr.contains(&format!("chmod 600 {}", key.display())), "{stderr}");
}

/// Protected mode: a host on a non-loopback address needs TLS and a password, or `node.insecure`.
#[test]
fn a_node_refuses_a_non_loopback_address_without_tls_unless_its_config_says_insecure() {
    let mut cluster = Cluster::init(&Spec::new(1, 1).fsync_never());
    cluster.edit_configs(|t| t.replacen("redis = \"127.0.0.1:", "redis = \"0.0.0.0:", 1));
    assert!(cluster.host("node1").cfg.insecure, "--insecure writes node.insecure");
    let file = cluster.host("node1").config_file.clone();
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replacen("insecure = true\n", "", 1)).unwrap();
    let out = run_waymark(&["node".into(), "--config".into(), file.display().to_string()], CLI_WITHIN);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "waymark node listened on 0.0.0.0 in plaintext without a password");
    assert!(stderr.contains("not a loopback address, without TLS and a password"), "{stderr}");
    assert!(stderr.contains("node.insecure = true"), "the message names the way out: {stderr}");
}
