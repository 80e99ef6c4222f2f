//! The adapter binary on its own (no control plane): HTTPS with the operator's certificate, as
//! kube-scheduler's `enableHTTPS` expects, serving a fixed cluster file.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::json;

use crate::cluster::{free_port, insecure_http_client, spawn_logged};

#[tokio::test]
async fn the_adapter_serves_https_with_the_given_certificate() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])?;
    std::fs::write(dir.path().join("tls.crt"), cert.cert.pem())?;
    std::fs::write(dir.path().join("tls.key"), cert.signing_key.serialize_pem())?;
    std::fs::write(dir.path().join("id-secret"), "ab".repeat(32))?;
    let node = json!({
        "metadata": { "name": "k80-node", "labels": { "nvidia.com/gpu.product": "Tesla-K80" } },
        "status": { "allocatable": { "nvidia.com/gpu": "2" } },
    });
    std::fs::write(
        dir.path().join("cluster.json"),
        serde_json::to_vec(&json!({ "nodes": [node], "pods": [] }))?,
    )?;
    let port = free_port()?;
    let mut command = Command::new(tandem_e2e::program("tandem-kube-adapter")?);
    command
        .current_dir(dir.path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--tls-cert", "tls.crt", "--tls-key", "tls.key"])
        .args([
            "--cluster-file",
            "cluster.json",
            "--id-secret-file",
            "id-secret",
            // A fixed cluster: nothing is bound, so nothing is signed.
            "--unsigned-placements",
        ]);
    let mut adapter = spawn_logged(command, &dir.path().join("adapter.log"))?;
    let client = insecure_http_client()?;
    let base = format!("https://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        ensure!(
            adapter.is_running(),
            "adapter exited:\n{}",
            adapter.log_tail(20)
        );
        if let Ok(response) = client.get(format!("{base}/readyz")).send().await {
            ensure!(
                response.status().is_success(),
                "readyz: {}",
                response.status()
            );
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "no HTTPS answer:\n{}",
            adapter.log_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A pod with no known profile may take an idle GPU: the node passes.
    let pod = json!({
        "metadata": { "name": "p", "namespace": "default", "uid": "u1" },
        "spec": { "containers": [{ "name": "main",
            "resources": { "limits": { "nvidia.com/gpu": "1" } } }] },
    });
    let answer: serde_json::Value = client
        .post(format!("{base}/filter"))
        .json(&json!({ "Pod": pod, "NodeNames": ["k80-node", "elsewhere"] }))
        .send()
        .await?
        .json()
        .await?;
    println!("filter over HTTPS: {answer}");
    ensure!(answer["NodeNames"] == json!(["k80-node"]), "{answer}");
    // The pod goes to the node that passed: the other's reason is left out.
    ensure!(
        answer["FailedAndUnresolvableNodes"]
            .as_object()
            .is_none_or(|nodes| nodes.is_empty()),
        "{answer}"
    );
    // Where no node passes, each gets its reason.
    let answer: serde_json::Value = client
        .post(format!("{base}/filter"))
        .json(&json!({ "Pod": pod, "NodeNames": ["elsewhere"] }))
        .send()
        .await?
        .json()
        .await?;
    ensure!(
        answer["FailedAndUnresolvableNodes"]["elsewhere"]
            .as_str()
            .is_some_and(|why| why.contains("not seen this node")),
        "{answer}"
    );
    // Plain HTTP on the TLS port gets no answer.
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await;
    ensure!(
        plain.map(|r| !r.status().is_success()).unwrap_or(true),
        "plain HTTP was served on the TLS port"
    );
    Ok(())
}
