//! A start among thousands of completed pods: the adapter is ready at once and learns from
//! them in one batch, with one knowledge-base write rather than one per pod; restarted, it
//! counts none of them again and writes nothing.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use crate::cluster::{Cluster, create_gpu_node, free_port, scheduler_config};
use crate::extender::metric;
use crate::extender::{NAMESPACE, finish, job_pod, prepare, start_replica};

/// Completed GPU pods present before the adapter starts.
const PODS: usize = 2_000;
/// Nodes of 8 GPUs they ran on.
const NODES: usize = 10;
/// Recurring jobs they are runs of.
const JOBS: usize = 500;

#[tokio::test]
async fn thousands_of_completed_pods_cost_one_write_and_no_wait() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let cluster = Cluster::start(&scheduler_config(None)).await?;
    let result = scenario(&cluster).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        for log in ["backlog-1.log", "backlog-2.log"] {
            eprintln!(
                "--- {log} ---\n{}",
                crate::cluster::tail(&cluster.dir().join(log), 40)
            );
        }
    }
    result
}

async fn scenario(cluster: &Cluster) -> Result<()> {
    let client = prepare(cluster).await?;
    for n in 0..NODES {
        create_gpu_node(
            &client,
            &format!("done-{n}"),
            8,
            "Tesla-V100-SXM2-16GB",
            16_384,
        )
        .await?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let at = crate::extender::seconds_ago();
    let gpus = NODES * 8;
    let created = Instant::now();
    futures::stream::iter(0..PODS)
        .map(|i| {
            let pods = pods.clone();
            // One after another on each GPU, 100 s apart: every run is a solo run.
            let (gpu, slot) = (i % gpus, (i / gpus) as i64);
            let node = format!("done-{}", gpu / 8);
            let annotation = format!("{node}/{}", gpu % 8);
            let (from, to) = (at(10_000 - slot * 100), at(10_000 - slot * 100 - 50));
            async move {
                let name = format!("done-{i:04}");
                let pod = job_pod(
                    &name,
                    &format!("job-{}", i % JOBS),
                    Some((&node, &annotation)),
                )?;
                cluster.create_placed(&pods, &pod).await?;
                finish(&pods, &name, &from, &to).await
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    println!(
        "created {PODS} completed GPU pods in {:?}",
        created.elapsed()
    );

    let http = reqwest::Client::new();
    let port = free_port()?;
    let mut adapter = start_replica(
        cluster,
        port,
        &cluster.dir().join("backlog-1.log"),
        "backlog",
    )?;
    let (serving, ready) = wait_serving_then_ready(&http, &mut adapter).await?;
    println!("serving after {serving:?}; ready {ready:?} later");
    ensure!(
        ready <= Duration::from_secs(10),
        "not ready within 10 s of serving among {PODS} completed pods: {ready:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let learned = loop {
        let learned = metric(&http, &adapter, "tandem_runs_learned_total").await?;
        if learned >= PODS as f64 || Instant::now() > deadline {
            break learned;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let writes = metric(&http, &adapter, "tandem_store_writes_total").await?;
    println!("{PODS} completed pods: {learned} runs learned, {writes} knowledge-base write(s)");
    ensure!(
        learned == PODS as f64,
        "learned from {learned} of {PODS} pods"
    );
    ensure!(
        writes >= 1.0 && writes <= learned,
        "{writes} writes for {learned} runs learned"
    );
    ensure!(
        writes <= 2.0,
        "{writes} writes: the backlog was not learned in one batch"
    );

    // Restarted, it finds them all counted: nothing learned, nothing written.
    adapter.process.terminate(Duration::from_secs(10));
    let log = cluster.dir().join("backlog-2.log");
    let mut again = start_replica(cluster, port, &log, "backlog")?;
    wait_serving_then_ready(&http, &mut again).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)?.contains("caught up with finished pods") {
        ensure!(
            Instant::now() < deadline,
            "the restarted adapter never caught up"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let learned = metric(&http, &again, "tandem_runs_learned_total").await?;
    let writes = metric(&http, &again, "tandem_store_writes_total").await?;
    println!("restarted: {learned} runs learned again, {writes} writes");
    ensure!(
        learned == 0.0 && writes == 0.0,
        "{learned} learned, {writes} written"
    );
    Ok(())
}

/// Waits until `adapter` answers `/healthz` (the engine is loaded and it serves), then until
/// `/readyz` says ready; returns how long each took.
async fn wait_serving_then_ready(
    http: &reqwest::Client,
    adapter: &mut crate::extender::Adapter,
) -> Result<(Duration, Duration)> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    let mut serving = None;
    loop {
        ensure!(
            adapter.process.is_running(),
            "the adapter exited:\n{}",
            adapter.process.log_tail(40)
        );
        let path = if serving.is_none() {
            "healthz"
        } else {
            "readyz"
        };
        if let Ok(r) = http.get(format!("{}/{path}", adapter.url)).send().await
            && r.status().is_success()
        {
            match serving {
                None => serving = Some(Instant::now()),
                Some(at) => return Ok((at - started, at.elapsed())),
            }
            continue;
        }
        ensure!(Instant::now() < deadline, "the adapter did not get ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
