//! Mutual TLS between kube-scheduler and the Tandem extender, as the Helm chart sets it up by
//! default: a CA of the release, a serving certificate for the adapter and a client
//! certificate for the scheduler, all signed by it.
//!
//! The mode matters beyond security: over HTTPS kube-scheduler's extender client speaks
//! HTTP/2 and sends every call over one connection, while over plain HTTP/1.1 it keeps at most
//! two idle connections (Go's default) and dials a new one for each call beyond them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// A CA, and the certificates it signs.
pub struct Authority {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Result<Self> {
        let mut params = CertificateParams::new(Vec::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA's certificate (PEM).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A certificate for `names` (IP addresses or DNS names) and its key, as PEM.
    pub fn sign(
        &self,
        common_name: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<(String, String)> {
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.extended_key_usages.push(usage);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// The files of mutual TLS in one directory, under the names the chart's secrets use:
/// `ca.crt`; the adapter's `tls.crt` and `tls.key` (for `127.0.0.1`); the scheduler's
/// `scheduler.crt` and `scheduler.key`.
pub struct MutualTls {
    dir: PathBuf,
}

impl MutualTls {
    /// Signs the adapter's and the scheduler's certificates with `ca` and writes all five files
    /// into `dir`.
    pub fn write(dir: &Path, ca: &Authority) -> Result<Self> {
        let (server_cert, server_key) = ca.sign(
            "tandem-kube-adapter",
            &["127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let (scheduler_cert, scheduler_key) =
            ca.sign("kube-scheduler", &[], ExtendedKeyUsagePurpose::ClientAuth)?;
        for (name, text) in [
            ("ca.crt", ca.pem()),
            ("tls.crt", &server_cert),
            ("tls.key", &server_key),
            ("scheduler.crt", &scheduler_cert),
            ("scheduler.key", &scheduler_key),
        ] {
            std::fs::write(dir.join(name), text)?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    /// The path of one of the files (`ca.crt`, `tls.crt`, ...).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `tandem-kube-adapter`'s options to serve HTTPS and admit only the scheduler's
    /// certificate on the verbs.
    pub fn adapter_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        for (flag, name) in [
            ("--tls-cert", "tls.crt"),
            ("--tls-key", "tls.key"),
            ("--client-ca", "ca.crt"),
        ] {
            args.push(flag.into());
            args.push(self.file(name).into_os_string());
        }
        args
    }

    /// An HTTPS client that trusts the CA and presents no certificate: enough for the
    /// adapter's probes and `/metrics`.
    pub fn probe_client(&self) -> Result<reqwest::Client> {
        https_client(&std::fs::read_to_string(self.file("ca.crt"))?, None)
    }
}

/// An HTTPS client trusting `ca` (PEM), presenting `identity` (certificate and key, PEM) if
/// given. rustls needs the process's crypto provider installed first
/// (`cluster::install_crypto_provider`).
pub fn https_client(ca: &str, identity: Option<(&str, &str)>) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes())?)
        .tls_info(true)
        .timeout(Duration::from_secs(10));
    if let Some((cert, key)) = identity {
        builder = builder.identity(reqwest::Identity::from_pem(
            format!("{cert}{key}").as_bytes(),
        )?);
    }
    Ok(builder.build()?)
}
