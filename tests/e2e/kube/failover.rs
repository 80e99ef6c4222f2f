//! Nothing learned is lost when the leader dies: two replicas share the knowledge base; the
//! leader is SIGKILLed while the second pod of a sharing pair finishes, and the replica that
//! takes over learns that pair's outcome — exactly once — from the pods it finds finished.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::{Value, json};
use tandem_adapter_core::JobKeys;

use crate::cluster::{Cluster, create_gpu_node, ensure_namespace, free_ports, scheduler_config};
use crate::extender::metric;
use crate::extender::{
    Adapter, NAMESPACE, SECRET_HEX, SYSTEM, TOKEN, finish, job_pod, knowledge, post, profile,
    start, start_replica, wait_ready,
};

/// Whether `adapter` leads (its `tandem_leader` gauge).
async fn leads(http: &reqwest::Client, adapter: &Adapter) -> bool {
    metric(http, adapter, "tandem_leader").await.unwrap_or(0.0) == 1.0
}

#[tokio::test]
async fn a_new_leader_learns_what_finished_as_the_old_one_died() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let cluster = Cluster::start(&scheduler_config(None)).await?;
    let result = scenario(&cluster).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        for log in ["replica-a.log", "replica-b.log"] {
            eprintln!(
                "--- {log} ---\n{}",
                crate::cluster::tail(&cluster.dir().join(log), 40)
            );
        }
    }
    result
}

async fn scenario(cluster: &Cluster) -> Result<()> {
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    std::fs::write(cluster.dir().join("intake-token"), TOKEN)?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    create_gpu_node(&client, "v100-f", 1, "Tesla-V100-SXM2-16GB", 16_384).await?;
    let http = reqwest::Client::new();
    let [port_a, port_b] = free_ports()?;
    let mut a = start_replica(
        cluster,
        port_a,
        &cluster.dir().join("replica-a.log"),
        "replica-a",
    )?;
    wait_ready(&http, &mut a).await?;
    // Let a take the Lease before b exists.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !leads(&http, &a).await {
        ensure!(Instant::now() < deadline, "replica a never led");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut b = start_replica(
        cluster,
        port_b,
        &cluster.dir().join("replica-b.log"),
        "replica-b",
    )?;
    wait_ready(&http, &mut b).await?;
    ensure!(!leads(&http, &b).await, "two leaders");

    post(
        &http,
        &format!("{}/v1/profiles", a.url),
        json!({ "profiles": [
            { "job": keys.key(NAMESPACE, "a"), "profile": profile(30.0, 10.0, 3_000) },
            { "job": keys.key(NAMESPACE, "b"), "profile": profile(50.0, 25.0, 3_000) },
        ]}),
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let at = crate::extender::seconds_ago();
    let here = Some(("v100-f", "v100-f/0"));
    // Each job runs alone once: the leader learns their solo times.
    for (pod, job, from, to) in [("a-solo", "a", 4_000, 3_900), ("b-solo", "b", 3_800, 3_750)] {
        cluster
            .create_placed(&pods, &job_pod(pod, job, here)?)
            .await?;
        finish(&pods, pod, &at(from), &at(to)).await?;
    }
    // Then together; the first of the pair finishes while a leads.
    for (pod, job) in [("a-pair", "a"), ("b-pair", "b")] {
        cluster
            .create_placed(&pods, &job_pod(pod, job, here)?)
            .await?;
    }
    start(&pods, "a-pair", &at(1_000)).await?;
    start(&pods, "b-pair", &at(1_000)).await?;
    finish(&pods, "a-pair", &at(1_000), &at(850)).await?;
    // The leader has written the solo runs (b follows the stored knowledge base).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stored = metric(&http, &a, "tandem_runs_learned_total").await?;
        if stored >= 2.0 {
            break;
        }
        ensure!(Instant::now() < deadline, "the solo runs were not learned");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let before: Value = knowledge(&http, &a.url).await?;

    // The leader dies as the second pod of the pair finishes.
    a.process.kill_now();
    let killed = Instant::now();
    finish(&pods, "b-pair", &at(1_000), &at(860)).await?;

    let deadline = killed + Duration::from_secs(30);
    let after = loop {
        let now = knowledge(&http, &b.url).await?;
        if now["outcomes"] != before["outcomes"] {
            break now;
        }
        ensure!(
            Instant::now() < deadline,
            "the new leader learned nothing within 30 s of the kill (it leads: {})",
            leads(&http, &b).await
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let took = killed.elapsed();
    println!(
        "the new leader learned the pair {took:?} after the old one was killed: outcomes {} -> {}",
        before["outcomes"], after["outcomes"]
    );
    ensure!(
        after["outcomes"].as_u64() == before["outcomes"].as_u64().map(|n| n + 1),
        "outcomes went from {} to {}",
        before["outcomes"],
        after["outcomes"]
    );
    ensure!(leads(&http, &b).await, "b learned without leading");
    // And only once: another catch-up (they run every minute, and on demand) adds nothing.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let later = knowledge(&http, &b.url).await?;
    ensure!(later["outcomes"] == after["outcomes"], "counted twice");
    ensure!(metric(&http, &b, "tandem_outcomes_learned_total").await? == 1.0);
    Ok(())
}
