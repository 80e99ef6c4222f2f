//! End-to-end tests against a real control plane: etcd, kube-apiserver and kube-scheduler
//! built from Kubernetes' Go modules (`cargo xtask kube-bins`; the first build takes minutes)
//! and started per test by [`cluster::Cluster`].

mod auth;
mod backlog;
mod burst;
mod declaring;
mod extender;
mod failover;
mod knowledge;
mod load;
mod placement;
mod poison;
mod privacy;
mod profiler;
mod tls;

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

use cluster::{
    Cluster, Component, create_gpu_node, ensure_namespace, insecure_http_client, scheduler_config,
    spawn_logged, wait_for_binding,
};
use tandem_e2e::cluster;

/// A pod asking for `gpus` whole GPUs. Its image is never pulled: there is no kubelet.
fn gpu_pod(name: &str, gpus: u32) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "containers": [{
                "name": "main",
                "image": "registry.invalid/none",
                // Extended resources are set as limits (requests default to them).
                "resources": { "limits": { "nvidia.com/gpu": gpus.to_string() } },
            }],
        },
    }))?)
}

/// Runs `body` against `cluster`; on failure prints the tail of every component's log (where
/// the reason usually is; the test harness shows it with the failure) before the error.
async fn with_logs_on_failure<F>(cluster: &Cluster, body: F) -> Result<()>
where
    F: Future<Output = Result<()>>,
{
    let result = body.await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
    }
    result
}

/// The harness itself: a plain kube-scheduler binds a pod asking for a GPU to the one GPU
/// node, and the cluster is what the accessors say.
#[tokio::test]
async fn default_scheduler_binds_a_gpu_pod_to_a_node() -> Result<()> {
    let mut cluster = Cluster::start(&scheduler_config(None)).await?;
    with_logs_on_failure(&cluster, async {
        // The apiserver is the release xtask built, reached with the token.
        let version: serde_json::Value = insecure_http_client()?
            .get(format!("{}/version", cluster.server_url()))
            .bearer_auth(cluster.token())
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        ensure!(
            version["gitVersion"] == "v1.35.3",
            "unexpected apiserver version {version}"
        );
        ensure!(cluster.kubeconfig_path().starts_with(cluster.dir()));
        // The scheduler's own metrics, which the throughput benchmark reads its attempt
        // latency from, are reachable.
        let metrics = insecure_http_client()?
            .get(
                cluster
                    .scheduler_metrics_url()
                    .context("the scheduler's metrics endpoint is unknown")?,
            )
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        ensure!(
            metrics.contains("scheduler_scheduling_attempt_duration_seconds")
                || metrics.contains("scheduler_pending_pods"),
            "the scheduler's /metrics lacks its scheduling metrics"
        );
        ensure!(
            cluster
                .logs(Component::ApiServer)
                .contains("Serving securely on 127.0.0.1:"),
            "the apiserver's log does not say where it serves"
        );

        let client = cluster.client().await?;
        create_gpu_node(&client, "gpu-node-1", 4, "NVIDIA-A100-SXM4-80GB", 81_920).await?;
        ensure_namespace(&client, "default").await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        pods.create(&PostParams::default(), &gpu_pod("one-gpu", 1)?)
            .await
            .context("could not create the pod")?;

        let node = wait_for_binding(&client, "default", "one-gpu", Duration::from_secs(60)).await;
        ensure!(
            node.as_deref() == Some("gpu-node-1"),
            "the pod was bound to {node:?}, expected gpu-node-1"
        );
        Ok(())
    })
    .await?;
    ensure!(
        cluster.is_running(Component::Scheduler),
        "kube-scheduler exited:\n{}",
        cluster.log_tails()
    );
    Ok(())
}

/// A component that cannot start fails `Cluster::start` with its name and its log's tail.
#[tokio::test]
async fn a_scheduler_that_cannot_start_is_reported_with_its_log() -> Result<()> {
    let broken = scheduler_config(None).replace("leaderElect: false", "leaderElect: nonsense");
    let Err(error) = Cluster::start(&broken).await else {
        anyhow::bail!("kube-scheduler started with an invalid configuration");
    };
    let message = format!("{error:#}");
    ensure!(
        // The log's tail has the scheduler's own complaint about the field.
        message.contains("kube-scheduler exited") && message.contains("leaderElect"),
        "unexpected error: {message}"
    );
    Ok(())
}

/// The process guard: output goes to the log, `kill_now` takes the whole process group down
/// at once, `terminate` escalates to SIGKILL when SIGTERM is ignored.
#[test]
fn child_processes_log_and_die_with_their_group() -> Result<()> {
    let dir = tempfile::tempdir()?;

    // A shell that starts a grandchild: both are in the guard's process group.
    let log = dir.path().join("shell.log");
    let mut shell = Command::new("sh");
    shell.args([
        "-c",
        "echo started; sleep 600 & echo \"grandchild $!\"; wait",
    ]);
    let mut process = spawn_logged(shell, &log)?;
    ensure!(process.log_path() == log);
    let grandchild = wait_for_line(|| process.log_tail(5), "grandchild ")?;
    ensure!(process.is_running());
    process.kill_now();
    ensure!(!process.is_running());
    ensure!(process.log_tail(5).starts_with("started"));
    // The grandchild got the SIGKILL too (and, orphaned, was reaped by init).
    let deadline = Instant::now() + Duration::from_secs(5);
    while process_exists(&grandchild) {
        ensure!(
            Instant::now() < deadline,
            "the grandchild {grandchild} survived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // A process that ignores SIGTERM is killed after the grace period.
    let stubborn_log = dir.path().join("stubborn.log");
    let mut stubborn = Command::new("sh");
    stubborn.args([
        "-c",
        "trap '' TERM; echo trapped; while :; do sleep 1; done",
    ]);
    let mut stubborn = spawn_logged(stubborn, &stubborn_log)?;
    wait_for_line(|| stubborn.log_tail(5), "trapped")?;
    stubborn.terminate(Duration::from_millis(300));
    ensure!(!stubborn.is_running());
    Ok(())
}

/// Waits up to 10 s for a line starting with `prefix` in `read()`, and returns the rest of it.
fn wait_for_line(read: impl Fn() -> String, prefix: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(rest) = read().lines().find_map(|line| line.strip_prefix(prefix)) {
            return Ok(rest.trim().to_owned());
        }
        ensure!(
            Instant::now() < deadline,
            "no line starting with {prefix:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process with this id exists (`kill -0`).
fn process_exists(pid: &str) -> bool {
    Command::new("kill")
        .args(["-0", pid])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}
