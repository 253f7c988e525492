//! The nemesis's hosts: one `waymark node` per network namespace, which it kills and restarts,
//! pauses and resumes. Only the processes it started, by the handles it holds; all of them are
//! resumed and killed when `Hosts` is dropped.

use super::net::Net;
use crate::cmd::cluster::{CONFIG_FILE, LOG_FILE};
use anyhow::{bail, Context, Result};
use std::fs;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a host may take to answer PING after it was started.
const SERVE_TIMEOUT: Duration = Duration::from_secs(60);
/// Between two PINGs of a host that does not answer yet.
const SERVE_POLL: Duration = Duration::from_millis(100);

/// One host: its directory, namespace and Redis address, and its node if it runs.
pub struct Host {
    pub name: String,
    dir: PathBuf,
    namespace: String,
    pub redis: SocketAddr,
    /// Its admin API (`/status`).
    pub admin: SocketAddr,
    child: Option<Child>,
    paused: bool,
}

pub struct Hosts {
    pub hosts: Vec<Host>,
    exe: PathBuf,
}

/// The Redis port every host listens on inside its namespace (each has an address of its own).
pub const REDIS_PORT: u16 = 6379;
const PEER_PORT: u16 = 7000;
const ADMIN_PORT: u16 = 8080;

impl Hosts {
    /// The hosts of the cluster written in `dir` (by `cluster init`), moved to `net`'s addresses.
    pub fn place(dir: &Path, net: &Net) -> Result<Hosts> {
        crate::cmd::cluster::readdress(dir, |i, h| {
            let addr = net.addr(i);
            (h.peer, h.redis, h.admin) =
                (format!("{addr}:{PEER_PORT}"), format!("{addr}:{REDIS_PORT}"), format!("{addr}:{ADMIN_PORT}"));
            Ok(())
        })?;
        let hosts = crate::cmd::cluster::hosts_of(dir)?
            .into_iter()
            .enumerate()
            .map(|(i, (host_dir, cfg))| Host {
                name: cfg.host.clone(),
                dir: host_dir,
                namespace: net.namespace(i),
                redis: SocketAddr::from((net.addr(i), REDIS_PORT)),
                admin: SocketAddr::from((net.addr(i), ADMIN_PORT)),
                child: None,
                paused: false,
            })
            .collect();
        let exe = std::env::current_exe().context("locating the waymark binary")?;
        Ok(Hosts { hosts, exe })
    }

    /// Starts host `h`'s node in its namespace (`ip netns exec` execs it: the child is the node).
    pub fn start(&mut self, h: usize) -> Result<()> {
        let host = &mut self.hosts[h];
        if host.child.is_some() {
            bail!("{} runs already", host.name);
        }
        let log = fs::OpenOptions::new().create(true).append(true).open(host.dir.join(LOG_FILE))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &host.namespace])
            .arg(&self.exe)
            .arg("node")
            .arg("--config")
            .arg(host.dir.join(CONFIG_FILE))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0) // the nemesis handles Ctrl-C and stops its hosts itself
            .spawn()
            .with_context(|| format!("starting {} in namespace {}", host.name, host.namespace))?;
        host.child = Some(child);
        host.paused = false;
        Ok(())
    }

    /// Waits until every running host answers PING, or fails naming the ones that do not.
    pub fn wait_serving(&mut self) -> Result<()> {
        let deadline = Instant::now() + SERVE_TIMEOUT;
        for h in 0..self.hosts.len() {
            while !self.answers(h) {
                if let Some(status) = self.hosts[h].child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                    bail!(
                        "{} exited ({status}): see {}",
                        self.hosts[h].name,
                        self.hosts[h].dir.join(LOG_FILE).display()
                    );
                }
                if Instant::now() > deadline {
                    bail!("{} did not answer PING within {SERVE_TIMEOUT:?}", self.hosts[h].name);
                }
                std::thread::sleep(SERVE_POLL);
            }
        }
        Ok(())
    }

    fn answers(&self, h: usize) -> bool {
        let Ok(mut con) = crate::cmd::bank::connect(self.hosts[h].redis) else { return false };
        redis::cmd("PING").query::<String>(&mut con).is_ok()
    }

    /// SIGKILL, and reaped.
    pub fn kill(&mut self, h: usize) -> Result<()> {
        let host = &mut self.hosts[h];
        let Some(mut child) = host.child.take() else { bail!("{} does not run", host.name) };
        child.kill().with_context(|| format!("killing {}", host.name))?;
        child.wait()?;
        host.paused = false;
        Ok(())
    }

    /// Starts host `h` again if its node stopped by itself (a full disk ends a node); true if it did.
    pub fn restart_if_stopped(&mut self, h: usize) -> Result<bool> {
        let host = &mut self.hosts[h];
        let exited = match host.child.as_mut() {
            Some(child) => child.try_wait()?.is_some(),
            None => false,
        };
        if exited {
            host.child = None;
            self.start(h)?;
        }
        Ok(exited)
    }

    /// Every host whose node stopped by itself (not by the nemesis), started again: its name,
    /// its exit status and the last line of its log (why it stopped).
    pub fn restart_stopped(&mut self) -> Result<Vec<(String, String, String)>> {
        let mut stopped = vec![];
        for h in 0..self.hosts.len() {
            let status = match self.hosts[h].child.as_mut() {
                Some(child) => child.try_wait()?,
                None => None,
            };
            if let Some(status) = status {
                let log = fs::read_to_string(self.hosts[h].dir.join(LOG_FILE)).unwrap_or_default();
                let why = log.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default().trim().to_string();
                stopped.push((self.hosts[h].name.clone(), status.to_string(), why));
                self.hosts[h].child = None;
                self.start(h)?;
            }
        }
        Ok(stopped)
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`).
    pub fn pause(&mut self, h: usize, pause: bool) -> Result<()> {
        let host = &mut self.hosts[h];
        let Some(child) = host.child.as_ref() else { bail!("{} does not run", host.name) };
        let signal = if pause { libc::SIGSTOP } else { libc::SIGCONT };
        if unsafe { libc::kill(child.id() as libc::pid_t, signal) } != 0 {
            bail!("signalling {}: {}", host.name, std::io::Error::last_os_error());
        }
        host.paused = pause;
        Ok(())
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for h in &mut self.hosts {
            if let Some(mut child) = h.child.take() {
                if h.paused {
                    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) };
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
