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
//! chosen explicitly (no process-wide default is installed).
//!
//! The host's certificate and key are read again when either file changes (`HostCert`: looked at
//! on a handshake, at most once per `RELOAD_CHECK_EVERY`), so a renewed certificate is served and
//! shown to peers without a restart; a file that does not load keeps the one in use (logged).
//! The CA is read at start only: replacing it needs a restart of every host.

use crate::config::TlsFiles;
use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often a handshake may look whether the host's certificate or key file changed.
pub const RELOAD_CHECK_EVERY: Duration = Duration::from_secs(1);

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
        let cert = Arc::new(HostCert::load(files)?);
        let roots = roots(&files.ca)?;
        let clients = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(cert.clone());
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider()).build()?;
        let peers = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(cert.clone());
        let dial = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_cert_resolver(cert);
        Ok(HostTls { clients: Arc::new(clients), peers: Arc::new(peers), dial: Arc::new(dial) })
    }
}

/// The host's certificate chain and key, as last read from their files.
#[derive(Debug)]
struct HostCert {
    cert: PathBuf,
    key: PathBuf,
    loaded: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    certified: Arc<CertifiedKey>,
    /// The files' modification times and sizes when they were last looked at.
    stamp: Stamp,
    checked: Instant,
}

type Stamp = [Option<(SystemTime, u64)>; 2];

impl HostCert {
    fn load(files: &TlsFiles) -> Result<HostCert, TlsError> {
        let stamp = stamp(&files.cert, &files.key);
        let certified = Arc::new(certified_key(&files.cert, &files.key)?);
        let loaded = Mutex::new(Loaded { certified, stamp, checked: Instant::now() });
        Ok(HostCert { cert: files.cert.clone(), key: files.key.clone(), loaded })
    }

    /// The certificate to show now: read again first if a file changed since it was read.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if loaded.checked.elapsed() >= RELOAD_CHECK_EVERY {
            loaded.checked = Instant::now();
            let stamp = stamp(&self.cert, &self.key);
            if stamp != loaded.stamp {
                // Remembered either way: a file that does not load is reported once per change.
                loaded.stamp = stamp;
                match certified_key(&self.cert, &self.key) {
                    Ok(certified) => {
                        loaded.certified = Arc::new(certified);
                        tracing::info!(cert = %self.cert.display(), "TLS certificate read again");
                    }
                    Err(e) => tracing::warn!("TLS certificate not reloaded, the one in use stays: {e}"),
                }
            }
        }
        loaded.certified.clone()
    }
}

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let of = |path: &Path| std::fs::metadata(path).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
    [of(cert), of(key)]
}

fn certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let chain = certificates(cert)?;
    CertifiedKey::from_der(chain, private_key(key)?, &provider())
        .map_err(|source| TlsError::Certificate { path: key.into(), source })
}

impl ResolvesServerCert for HostCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl ResolvesClientCert for HostCert {
    fn resolve(&self, _: &[&[u8]], _: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }

    fn has_certs(&self) -> bool {
        true
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA in `dir/ca.pem`, and its signer.
    fn ca(dir: &Path) -> (rcgen::Certificate, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join("ca.pem"), cert.pem()).unwrap();
        (cert, key)
    }

    /// A new certificate for host `a` (and its key) written over `files`; its DER.
    fn write_host_cert(files: &TlsFiles, ca: &(rcgen::Certificate, rcgen::KeyPair)) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a".to_string()]).unwrap().signed_by(&key, &ca.0, &ca.1).unwrap();
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        cert.der().to_vec()
    }

    /// The certificate the host's client port shows to a client trusting the CA: a handshake in
    /// memory, in a bounded number of flights.
    fn served(tls: &HostTls, ca: &Path) -> Vec<u8> {
        let name = rustls::pki_types::ServerName::try_from("a").unwrap();
        let client = rustls::ClientConnection::new(client_config(ca).unwrap(), name).unwrap();
        let server = rustls::ServerConnection::new(tls.clients.clone()).unwrap();
        let (mut client, mut server) = (rustls::Connection::Client(client), rustls::Connection::Server(server));
        fn pass(from: &mut rustls::Connection, to: &mut rustls::Connection) {
            let mut bytes = vec![];
            while from.wants_write() {
                from.write_tls(&mut bytes).unwrap();
            }
            if !bytes.is_empty() {
                to.read_tls(&mut &bytes[..]).unwrap();
                to.process_new_packets().unwrap();
            }
        }
        for _ in 0..8 {
            pass(&mut client, &mut server);
            pass(&mut server, &mut client);
            if !client.is_handshaking() && !server.is_handshaking() {
                break;
            }
        }
        client.peer_certificates().expect("the server's certificate")[0].to_vec()
    }

    #[test]
    fn a_renewed_certificate_is_served_without_a_restart_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let ca = ca(dir.path());
        let files = TlsFiles {
            cert: dir.path().join("a.pem"),
            key: dir.path().join("a-key.pem"),
            ca: dir.path().join("ca.pem"),
        };
        let first = write_host_cert(&files, &ca);
        let tls = HostTls::load(&files).unwrap();
        assert_eq!(served(&tls, &files.ca), first);

        let renewed = write_host_cert(&files, &ca);
        std::thread::sleep(RELOAD_CHECK_EVERY + Duration::from_millis(100));
        assert_eq!(served(&tls, &files.ca), renewed, "the renewed certificate is not served");

        // A key that does not match the certificate: the renewed pair stays in use.
        std::fs::write(&files.key, rcgen::KeyPair::generate().unwrap().serialize_pem()).unwrap();
        std::thread::sleep(RELOAD_CHECK_EVERY + Duration::from_millis(100));
        assert_eq!(served(&tls, &files.ca), renewed);
    }
}
