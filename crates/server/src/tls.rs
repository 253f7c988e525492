//! TLS on a host's three ports (issue 36): the settings a node serves and dials with, built once
//! at its start from the files its config names (`[tls]`: the host's certificate and key, the
//! cluster's CA, all written by `cluster init`), and how any caller of a host's admin API speaks
//! to it.
//!
//! - The Redis and admin ports take clients without certificates: a Redis client proves itself
//!   with its password, an admin call with the admin token; TLS keeps both secret on the wire.
//! - The peer port takes only a dialer showing a certificate the cluster's CA signed (mutual TLS),
//!   and the dialer checks the acceptor's certificate names the host it meant to reach. The
//!   secret's handshake and the per-frame MACs (`net/auth.rs`, `net/seal.rs`) run inside, as they
//!   do on a plaintext link: TLS adds secrecy and a second key, it takes nothing away.
//!
//! Every setting trusts the cluster's CA alone, never the system's roots. The crypto is `ring`'s,
//! chosen explicitly (no process-wide default is installed). Certificates are read once, at the
//! node's start: replacing them needs a restart (reloading is issue 36's, not done yet).

use crate::config::TlsFiles;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Pem { path: PathBuf, source: rustls::pki_types::pem::Error },
    #[error("{path} holds no certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path}: {source}")]
    Certificate { path: PathBuf, source: rustls::Error },
    #[error("TLS settings: {0}")]
    Settings(#[from] rustls::Error),
    #[error("the peers' certificate check: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// What a host serves and dials with when its config has `[tls]`.
#[derive(Clone, Debug)]
pub struct HostTls {
    /// The Redis and admin ports: clients show no certificate.
    pub clients: Arc<ServerConfig>,
    /// The peer port: a dialer must show a certificate the cluster's CA signed.
    pub peers: Arc<ServerConfig>,
    /// Dialing peers (showing this host's certificate) and calling other hosts' admin APIs.
    pub dial: Arc<ClientConfig>,
}

/// `ring`'s suites and key exchanges. rustls 0.23.48 deprecates it for lacking post-quantum key
/// exchange, which only `aws-lc-rs` offers; that needs CMake and a long C build on every
/// machine, so Waymark keeps `ring` (X25519 and the NIST curves) until it has a reason to move.
#[allow(deprecated)]
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl HostTls {
    /// Reads the host's certificate chain and key and the cluster's CA.
    pub fn load(files: &TlsFiles) -> Result<HostTls, TlsError> {
        let chain = certificates(&files.cert)?;
        let key = || private_key(&files.key);
        let roots = roots(&files.ca)?;
        let clients = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key()?)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider()).build()?;
        let peers = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key()?)?;
        let dial = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key()?)?;
        Ok(HostTls { clients: Arc::new(clients), peers: Arc::new(peers), dial: Arc::new(dial) })
    }
}

/// A client's settings trusting the CA in `ca` alone, showing no certificate (the CLI's admin
/// calls and Redis probes).
pub fn client_config(ca: &Path) -> Result<Arc<ClientConfig>, TlsError> {
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(ca)?)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |source| TlsError::Pem { path: path.into(), source };
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(path).map_err(pem)?.collect::<Result<_, _>>().map_err(pem)?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: path.into() });
    }
    Ok(chain)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|source| TlsError::Pem { path: path.into(), source })
}

fn roots(ca: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca)? {
        roots.add(cert).map_err(|source| TlsError::Certificate { path: ca.into(), source })?;
    }
    Ok(Arc::new(roots))
}

/// How a process calls hosts' admin APIs: plain HTTP, or HTTPS trusting the cluster's CA alone.
#[derive(Clone, Debug)]
pub struct AdminHttp {
    pub agent: ureq::Agent,
    scheme: &'static str,
}

impl AdminHttp {
    /// Calls that give up after `timeout`; over TLS with `tls` when the cluster has it.
    pub fn new(tls: Option<Arc<ClientConfig>>, timeout: Duration) -> AdminHttp {
        let builder = ureq::AgentBuilder::new().timeout(timeout);
        match tls {
            Some(config) => AdminHttp { agent: builder.tls_config(config).build(), scheme: "https" },
            None => AdminHttp { agent: builder.build(), scheme: "http" },
        }
    }

    /// `http://ADDR/PATH` or `https://…`; `path` starts with `/`.
    pub fn url(&self, addr: SocketAddr, path: &str) -> String {
        format!("{}://{addr}{path}", self.scheme)
    }
}
