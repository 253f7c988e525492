//! Talking to a running cluster's admin API: which hosts to ask (from a `cluster init` directory,
//! or one `--admin ADDR`), with which token (the cluster's `admin-token` file, or `--token-file`),
//! over TLS trusting the cluster's CA when the cluster has one (its hosts' `[tls]`, or `--cacert`).

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// How to reach the cluster.
#[derive(Args, Clone, Debug)]
pub struct Target {
    /// A host's admin address, e.g. 127.0.0.1:7001 (else every host of --dir is tried in turn).
    #[arg(long)]
    admin: Option<String>,
    /// The file holding the admin token [default: DIR/admin-token with --dir].
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// The cluster's CA certificate, to call --admin over TLS [default: the CA of --dir's hosts,
    /// if they have `[tls]`].
    #[arg(long)]
    cacert: Option<PathBuf>,
}

/// Admin addresses to try in order, and the token.
pub struct Admin {
    pub addrs: Vec<String>,
    token: String,
    /// TLS settings trusting the cluster's CA, for a cluster whose hosts have `[tls]`.
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl Target {
    pub fn resolve(&self, dir: Option<&PathBuf>) -> Result<Admin> {
        let hosts = match dir {
            Some(d) => super::cluster::hosts_of(d)?,
            None => vec![],
        };
        let addrs = match (&self.admin, dir) {
            (Some(a), _) => vec![a.clone()],
            (None, Some(_)) => hosts.iter().map(|(_, c)| c.this_host().admin.to_string()).collect(),
            (None, None) => bail!("which cluster? give --dir DIR of a `cluster init` directory, or --admin ADDR"),
        };
        let ca = self.cacert.clone().or_else(|| hosts.iter().find_map(|(_, c)| c.tls.as_ref().map(|t| t.ca.clone())));
        let tls = match ca {
            Some(ca) => Some(waymark_server::tls::client_config(&ca)?),
            None => None,
        };
        let token_file = match (&self.token_file, dir) {
            (Some(f), _) => f.clone(),
            (None, Some(d)) => d.join("admin-token"),
            (None, None) => bail!("give --token-file FILE (the cluster's admin token) with --admin"),
        };
        refuse_open_to_others(&token_file)?;
        let token = std::fs::read_to_string(&token_file)
            .with_context(|| format!("reading the admin token from {}", token_file.display()))?;
        Ok(Admin { addrs, token: token.trim().to_string(), tls })
    }
}

impl Admin {
    /// The TLS settings its calls use (trusting the cluster's CA), if the cluster has TLS.
    pub fn tls(&self) -> Option<std::sync::Arc<rustls::ClientConfig>> {
        self.tls.clone()
    }

    /// Every host of a `cluster init` directory, with its admin token.
    pub fn for_cluster(dir: &std::path::Path) -> Result<Admin> {
        Target { admin: None, token_file: None, cacert: None }.resolve(Some(&dir.to_path_buf()))
    }

    /// POSTs `body` to `path` on the first host that accepts it. A host that answers 503 (e.g. it
    /// runs no manager vnode) or cannot be reached is skipped; any other refusal is the answer.
    pub fn post<B: Serialize, R: DeserializeOwned>(&self, path: &str, body: &B, timeout: Duration) -> Result<R> {
        self.post_at(path, body, timeout).map(|(_, r)| r)
    }

    /// `post`, and the host that answered is asked first next time (a benchmark's cuts then time
    /// one round trip, not the refusals of hosts that run no manager).
    pub fn post_sticky<B: Serialize, R: DeserializeOwned>(
        &mut self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<R> {
        let (answered, r) = self.post_at(path, body, timeout)?;
        self.addrs[..=answered].rotate_right(1);
        Ok(r)
    }

    /// `post`, and which of `addrs` answered.
    fn post_at<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<(usize, R)> {
        let http = waymark_server::tls::AdminHttp::new(self.tls.clone(), timeout);
        let mut skipped = vec![];
        for (i, addr) in self.addrs.iter().enumerate() {
            let url = match addr.parse() {
                Ok(addr) => http.url(addr, path),
                Err(_) => bail!("--admin {addr} is not an address like 127.0.0.1:7001"),
            };
            let sent = http.agent.post(&url).set("Authorization", &format!("Bearer {}", self.token)).send_json(body);
            match sent {
                Ok(resp) => return Ok((i, resp.into_json().with_context(|| format!("{url}: unreadable answer"))?)),
                Err(ureq::Error::Status(503, resp)) => skipped.push(format!("{addr}: {}", text(resp))),
                Err(ureq::Error::Status(code, resp)) => bail!("{url} refused ({code}): {}", text(resp)),
                Err(e) => skipped.push(format!("{addr}: {e}")),
            }
        }
        bail!("no host could do it:\n  {}", skipped.join("\n  "))
    }
}

fn text(resp: ureq::Response) -> String {
    resp.into_string().unwrap_or_default().trim().to_string()
}

/// A token readable by group or others is no secret: refused, as a node refuses its secret files.
fn refuse_open_to_others(file: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(file).with_context(|| format!("reading the admin token from {}", file.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "{} is open to group or others (mode {mode:o}); a secret must be readable by its owner only: run `chmod 600 {}`",
            file.display(),
            file.display()
        );
    }
    Ok(())
}
