//! A cluster without MUNGE: the service serves HTTPS and admits callers by client certificate
//! (`--auth client-certificate`), job_submit.lua (LuaSec) and the SPANK plugin (rustls) present
//! the certificate the cluster's CA signed for Slurm, and a job is placed and started through
//! them; a caller without a certificate, or with one of another CA, is refused.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::{Cluster, exchange, output_of, script, wait_for, wait_state};

/// A CA, and the certificates it signs.
struct Authority {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    fn new(name: &str) -> anyhow::Result<Self> {
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

    /// A certificate for `names` and its key, as PEM.
    fn sign(
        &self,
        common_name: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> anyhow::Result<(String, String)> {
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

/// An HTTPS client of the service: trusts `ca`, presents `identity` if given.
fn client(
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots);
    Ok(Arc::new(match identity {
        Some((cert, key)) => builder.with_client_auth_cert(
            CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?,
            PrivateKeyDer::from_pem_file(key)?,
        )?,
        None => builder.with_no_client_auth(),
    }))
}

/// One HTTPS request; (status, body).
fn https(
    config: &Arc<rustls::ClientConfig>,
    port: u16,
    method: &str,
    path: &str,
    body: &str,
) -> anyhow::Result<(u16, String)> {
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let connection =
        rustls::ClientConnection::new(Arc::clone(config), ServerName::try_from("127.0.0.1")?)?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    exchange(&mut stream, method, path, body, &[])
}

/// Runs the scenario on `cluster`, whose service is restarted for it.
pub fn run(cluster: &mut Cluster) -> anyhow::Result<()> {
    let dir = cluster.dir.join("tls");
    std::fs::create_dir_all(&dir)?;
    let ca = Authority::new("tandem-slurm test CA")?;
    let (service_cert, service_key) = ca.sign(
        "tandem-slurm-adapter",
        &["127.0.0.1"],
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let (slurm_cert, slurm_key) = ca.sign("slurm", &[], ExtendedKeyUsagePurpose::ClientAuth)?;
    let stranger = Authority::new("another CA")?;
    let (other_cert, other_key) =
        stranger.sign("mallory", &[], ExtendedKeyUsagePurpose::ClientAuth)?;
    let file = |name: &str| -> PathBuf { dir.join(name) };
    for (name, text) in [
        ("ca.crt", ca.pem.as_str()),
        ("service.crt", &service_cert),
        ("service.key", &service_key),
        ("slurm.crt", &slurm_cert),
        ("slurm.key", &slurm_key),
        ("other.crt", &other_cert),
        ("other.key", &other_key),
    ] {
        std::fs::write(file(name), text)?;
    }

    cluster.stop_service();
    let auth: Vec<std::ffi::OsString> = vec![
        "--auth".into(),
        "client-certificate".into(),
        "--tls-cert".into(),
        file("service.crt").into(),
        "--tls-key".into(),
        file("service.key").into(),
        "--client-ca".into(),
        file("ca.crt").into(),
    ];
    cluster.spawn_service(&auth)?;
    let slurm = client(
        &file("ca.crt"),
        Some((&file("slurm.crt"), &file("slurm.key"))),
    )?;
    let anonymous = client(&file("ca.crt"), None)?;
    let other = client(
        &file("ca.crt"),
        Some((&file("other.crt"), &file("other.key"))),
    )?;
    let port = cluster.port;
    wait_for("the service over HTTPS", Duration::from_secs(60), || {
        Ok(https(&anonymous, port, "GET", "/readyz", "")?.0 == 200)
    })?;

    // The plugin (read again by every slurmstepd) and the hook (slurmctld started again, for
    // its environment) present Slurm's certificate.
    let service = format!("127.0.0.1:{port}");
    std::fs::write(
        cluster.dir.join("etc/plugstack.conf"),
        format!(
            "required {} service={service} timeout_ms=1000 auth=certificate tls_ca={} \
             tls_cert={} tls_key={}\n",
            cluster.plugin.display(),
            file("ca.crt").display(),
            file("slurm.crt").display(),
            file("slurm.key").display()
        ),
    )?;
    let status = Command::new(script())
        .args(["restart-ctld", &cluster.dir.display().to_string()])
        .env("TANDEM_SERVICE", &service)
        .env("TANDEM_AUTH", "certificate")
        .env("TANDEM_TLS_CA", file("ca.crt"))
        .env("TANDEM_TLS_CERT", file("slurm.crt"))
        .env("TANDEM_TLS_KEY", file("slurm.key"))
        .status()?;
    ensure!(status.success(), "cluster.sh restart-ctld failed");
    wait_for("slurmctld again", Duration::from_secs(60), || {
        let out = cluster.slurm("sinfo", &["-h", "-o", "%T"]);
        Ok(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("idle"))
    })?;

    let job = Cluster::job_id(&cluster.sbatch(
        &["--tandem", "--tandem-name=p", "--gres=shard:1"],
        "tls",
        "echo CVD=$CUDA_VISIBLE_DEVICES",
    ))?;
    wait_state(cluster, job, &["COMPLETED", "GONE"])?;
    wait_for("the TLS job's output", Duration::from_secs(20), || {
        Ok(output_of(cluster, "tls").contains("CVD="))
    })?;
    let (status, listed) = https(&slurm, port, "GET", "/v1/slurm/placements", "")?;
    ensure!(
        status == 200,
        "placements over mutual TLS: {status} {listed}"
    );
    let all: serde_json::Value = serde_json::from_str(&listed)?;
    let placement = all["placements"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["slurm_job"].as_u64() == Some(u64::from(job)))
        .cloned()
        .with_context(|| format!("job {job} was not placed over mutual TLS: {all}"))?;
    let log = std::fs::read_to_string(cluster.dir.join("log/slurmctld.log"))?;
    let hook = log
        .lines()
        .rev()
        .find(|l| l.contains("tandem: placed on"))
        .unwrap_or_default()
        .to_owned();
    let index = placement["index"].as_u64().unwrap_or(99);
    let printed = output_of(cluster, "tls");
    ensure!(
        printed.contains(&format!("CVD={index}\n")) && !placement["end"].is_null(),
        "job {job} printed {printed:?}; its placement {placement}"
    );
    println!(
        "(h) mutual TLS: job {job} placed by the hook ({hook}), started and finished by the \
         plugin on GPU {index}"
    );

    // Without Slurm's certificate.
    let (status, said) = https(&anonymous, port, "POST", "/v1/slurm/finish", "job=1\n")?;
    println!("(h) no client certificate: {status} {said}");
    ensure!(
        status == 401 && said.contains("need a client certificate"),
        "a caller without a certificate: {status} {said}"
    );
    let refused = https(&other, port, "POST", "/v1/slurm/finish", "job=1\n");
    println!("(h) a certificate of another CA: {refused:?}");
    ensure!(
        refused.is_err(),
        "a certificate of another CA was admitted: {refused:?}"
    );
    Ok(())
}
