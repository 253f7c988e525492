//! The certificates of a secure local cluster (issue 36), written by `cluster init`: one CA for
//! the cluster, and per host a certificate the CA signed, naming the host (for its peers, which
//! dial it by name) and each address it listens on (for clients, which dial an address). Private
//! keys are written readable by their owner only from their creation, as the secret files are.
//!
//! `DIR/ca.pem` (the CA every host and client trusts), `DIR/ca-key.pem` (to sign a host added
//! later; no node reads it), `DIR/<host>/cert.pem` and `DIR/<host>/key.pem`.

use anyhow::{Context, Result};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};
use waymark_server::config::raw;

pub const CA_FILE: &str = "ca.pem";
pub const CA_KEY_FILE: &str = "ca-key.pem";
pub const CERT_FILE: &str = "cert.pem";
pub const KEY_FILE: &str = "key.pem";
/// How long the certificates `cluster init` writes are valid, from the start of this year.
const VALID_YEARS: i32 = 10;

/// Writes the CA into `dir` and a certificate and key into each host's directory (`dir/<name>`,
/// which must exist).
pub fn write(dir: &Path, cluster: &str, hosts: &[raw::Host]) -> Result<()> {
    let year = this_year();
    let ca_key = KeyPair::generate().context("generating the CA's key")?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name = name(&format!("Waymark cluster {cluster} CA"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    ca.not_before = date_time_ymd(year, 1, 1);
    ca.not_after = date_time_ymd(year + VALID_YEARS, 1, 1);
    let ca_cert = ca.self_signed(&ca_key).context("signing the CA")?;
    super::cluster::write_new_file(&dir.join(CA_FILE), ca_cert.pem().as_bytes(), 0o644)?;
    super::cluster::write_new_file(&dir.join(CA_KEY_FILE), ca_key.serialize_pem().as_bytes(), 0o600)?;
    for h in hosts {
        let key = KeyPair::generate().with_context(|| format!("generating {}'s key", h.name))?;
        let mut params = CertificateParams::new(subject_alt_names(h)).with_context(|| format!("{}'s names", h.name))?;
        params.distinguished_name = name(&h.name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        // Servers on all three ports, and a client when it dials a peer.
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = date_time_ymd(year, 1, 1);
        params.not_after = date_time_ymd(year + VALID_YEARS, 1, 1);
        let cert =
            params.signed_by(&key, &ca_cert, &ca_key).with_context(|| format!("signing {}'s certificate", h.name))?;
        let host_dir = dir.join(&h.name);
        super::cluster::write_new_file(&host_dir.join(CERT_FILE), cert.pem().as_bytes(), 0o644)?;
        super::cluster::write_new_file(&host_dir.join(KEY_FILE), key.serialize_pem().as_bytes(), 0o600)?;
    }
    Ok(())
}

/// The host's name (its peers check it), `localhost`, and every address it listens on.
fn subject_alt_names(h: &raw::Host) -> Vec<String> {
    let mut names = vec![h.name.clone(), "localhost".to_string()];
    let ips: BTreeSet<IpAddr> = [&h.peer, &h.redis, &h.admin]
        .iter()
        .filter_map(|a| a.parse::<std::net::SocketAddr>().ok())
        .map(|a| a.ip())
        .collect();
    names.extend(ips.iter().map(|ip| ip.to_string()));
    names
}

fn name(common: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common);
    dn
}

/// The current year (UTC), near enough for a validity period that starts on January 1st.
fn this_year() -> i32 {
    const SECONDS_PER_YEAR: u64 = 31_556_952; // 365.2425 days
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    1970 + (secs / SECONDS_PER_YEAR) as i32
}
