//! Only the scheduler may call the verbs: kube-scheduler reaches the adapter over mutual TLS
//! (the extender's `tlsConfig` with a client certificate, as the Helm chart (`deploy/helm/tandem`) configures it) and
//! binds pods through it, while a client without the scheduler's credential that tries to bind
//! another scheduler's Pending pod gets `401`/`403` and the pod stays unbound. The adapter's
//! certificate is replaced on disk and served without a restart.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use rcgen::ExtendedKeyUsagePurpose;
use rustls::pki_types::pem::PemObject as _;
use serde_json::json;
use tandem_e2e::tls::{Authority, MutualTls, https_client as client};

use crate::cluster::{
    Cluster, Extender, create_gpu_node, ensure_namespace, free_port, scheduler_config_with,
    spawn_logged, wait_for_binding,
};
use crate::extender::{NAMESPACE, SECRET_HEX, SYSTEM, annotation, job_pod};

const SCHEDULER_TOKEN: &str = "e2e-scheduler-token";

#[tokio::test]
async fn only_the_scheduler_may_bind_and_certificates_reload_without_a_restart() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let port = free_port()?;
    let staging = tempfile::tempdir()?;
    let ca = Authority::new("tandem-e2e-ca")?;
    let tls = MutualTls::write(staging.path(), &ca)?;
    let rogue = Authority::new("someone-else")?;
    let (rogue_cert, rogue_key) =
        rogue.sign("kube-scheduler", &[], ExtendedKeyUsagePurpose::ClientAuth)?;
    // `ignorable: false`: nothing is bound without the extender.
    let cluster = Cluster::start(&scheduler_config_with(Some(Extender {
        port,
        tls: Some(&tls),
        ignorable: false,
    })))
    .await?;
    let dir = cluster.dir();
    std::fs::write(dir.join("id-secret"), SECRET_HEX)?;
    std::fs::write(dir.join("scheduler-token"), SCHEDULER_TOKEN)?;
    let log = dir.join("adapter-auth.log");
    let mut command = Command::new(tandem_e2e::program("tandem-kube-adapter")?);
    command
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--namespace", SYSTEM, "--identity", "e2e-auth"])
        .arg("--id-secret-file")
        .arg(dir.join("id-secret"))
        .args(tls.adapter_args())
        .args(cluster.placement_args())
        .arg("--scheduler-token-file")
        .arg(dir.join("scheduler-token"))
        .env(
            "RUST_LOG",
            "tandem_kube_adapter=debug,tandem_kube_common=debug,tandem_adapter_core=info,info",
        );
    let mut adapter = spawn_logged(command, &log)?;
    let result = async {
        let base = format!("https://127.0.0.1:{port}");
        let anonymous = client(ca.pem(), None)?;
        // Probes need no certificate.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            ensure!(
                adapter.is_running(),
                "the adapter exited:\n{}",
                adapter.log_tail(40)
            );
            if let Ok(r) = anonymous.get(format!("{base}/readyz")).send().await
                && r.status().is_success()
            {
                break;
            }
            ensure!(Instant::now() < deadline, "the adapter did not get ready");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        let client = cluster.client().await?;
        ensure_namespace(&client, NAMESPACE).await?;
        ensure_namespace(&client, SYSTEM).await?;
        create_gpu_node(&client, "v100-auth", 1, "Tesla-V100-SXM2-16GB", 16_384).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        // The scheduler authenticates with its certificate: its pod is bound through Tandem
        // (`ignorable: false`, so nothing is bound without the extender).
        pods.create(&PostParams::default(), &job_pod("scheduled", "s", None)?)
            .await?;
        let node = wait_for_binding(&client, NAMESPACE, "scheduled", Duration::from_secs(60)).await;
        println!("the scheduler, over mutual TLS, bound `scheduled` to {node:?}");
        ensure!(node.as_deref() == Some("v100-auth"), "bound to {node:?}");
        ensure!(
            annotation(&pods.get("scheduled").await?).as_deref() == Some("v100-auth/0"),
            "the pod was not bound by Tandem"
        );

        // Another scheduler's pod: nobody schedules it.
        let mut other = job_pod("not-yours", "o", None)?;
        other
            .spec
            .as_mut()
            .context("a pod has a spec")?
            .scheduler_name = Some("another-scheduler".into());
        let other = pods.create(&PostParams::default(), &other).await?;
        let bind = json!({
            "PodName": "not-yours", "PodNamespace": NAMESPACE,
            "PodUID": other.metadata.uid.clone().unwrap_or_default(), "Node": "v100-auth",
        });
        let with_rogue = self::client(ca.pem(), Some((&rogue_cert, &rogue_key)))?;
        let attempts = [
            ("no credential", anonymous.post(format!("{base}/bind"))),
            (
                "a wrong token",
                anonymous
                    .post(format!("{base}/bind"))
                    .bearer_auth("guessed"),
            ),
            (
                "a certificate of another CA",
                with_rogue.post(format!("{base}/bind")),
            ),
        ];
        for (who, request) in attempts {
            match request.json(&bind).send().await {
                Ok(response) => {
                    let status = response.status();
                    let text = response.text().await?;
                    println!("bind with {who} -> {status} {text}");
                    ensure!(
                        status == 401 || status == 403,
                        "bind with {who} answered {status}: {text}"
                    );
                }
                // rustls refuses a certificate it cannot verify during the handshake.
                Err(error) => println!("bind with {who} -> refused: {error}"),
            }
        }
        // The right token admits (a filter, which changes nothing).
        let filter = anonymous
            .post(format!("{base}/filter"))
            .bearer_auth(SCHEDULER_TOKEN)
            .json(&json!({ "Pod": other, "NodeNames": ["v100-auth"] }))
            .send()
            .await?;
        ensure!(
            filter.status() == 200,
            "filter with the token: {}",
            filter.status()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let still = pods.get("not-yours").await?;
        ensure!(
            still
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_none(),
            "the other scheduler's pod was bound"
        );
        let metrics = anonymous
            .get(format!("{base}/metrics"))
            .send()
            .await?
            .text()
            .await?;
        let refused: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("tandem_unauthorized_total"))
            .collect();
        println!("{refused:?}");
        ensure!(!refused.is_empty(), "no refusal counted");

        // A new certificate on disk is served without a restart.
        let healthz = format!("{base}/healthz");
        let served = |client: reqwest::Client| {
            let healthz = healthz.clone();
            async move {
                let response = client.get(healthz).send().await?;
                let info = response
                    .extensions()
                    .get::<reqwest::tls::TlsInfo>()
                    .and_then(|i| i.peer_certificate().map(<[u8]>::to_vec))
                    .context("no TLS info")?;
                anyhow::Ok(info)
            }
        };
        let before = served(self::client(ca.pem(), None)?).await?;
        let (renewed_cert, renewed_key) = ca.sign(
            "tandem-kube-adapter-renewed",
            &["127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        std::fs::write(staging.path().join("tls.key.new"), &renewed_key)?;
        std::fs::write(staging.path().join("tls.crt.new"), &renewed_cert)?;
        std::fs::rename(
            staging.path().join("tls.key.new"),
            staging.path().join("tls.key"),
        )?;
        std::fs::rename(
            staging.path().join("tls.crt.new"),
            staging.path().join("tls.crt"),
        )?;
        let renewed = rustls::pki_types::CertificateDer::from_pem_slice(renewed_cert.as_bytes())
            .context("the renewed certificate")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let now = loop {
            let now = served(self::client(ca.pem(), None)?).await?;
            if now != before || Instant::now() > deadline {
                break now;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        ensure!(
            now == renewed.to_vec(),
            "the renewed certificate is not served"
        );
        ensure!(adapter.is_running(), "the adapter restarted");
        println!("the renewed certificate is served by the same process");
        Ok(())
    }
    .await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!("--- adapter ---\n{}", adapter.log_tail(60));
    }
    result
}
