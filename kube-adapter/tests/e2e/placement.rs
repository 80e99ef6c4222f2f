//! A forged placement against the real extender: a pod whose owner bound it to a node himself
//! (`spec.nodeName`), requesting one GPU and naming all four of the node's GPUs in Tandem's
//! annotation, without Tandem's signature.
//!
//! The extender's view must count the forger as a pod bound without Tandem's record (on one
//! GPU, the emptiest, for the one GPU it requests), not on the four it names: three more
//! one-GPU pods then bind beside it, each with a placement signed for its own UID that verifies
//! with the cluster's public key; a fourth finds no idle GPU (the forger still holds one).
//! Trusting the annotation, the node would look full and none would bind.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;
use tandem_kube_common::placement::{GPU_ANNOTATION, Placement};

use crate::cluster::{Cluster, create_gpu_node, free_port, scheduler_config, wait_for_binding};
use crate::extender::{NAMESPACE, job_pod, prepare, start_with, tandem_event, wait_ready};

/// The node the forger claims, with four GPUs.
const NODE: &str = "gpu-node-7";

#[tokio::test]
async fn a_forged_placement_is_not_counted_on_the_gpus_it_names() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let port = free_port()?;
    let cluster = Cluster::start(&scheduler_config(Some(port))).await?;
    let log = cluster.dir().join("placement-adapter.log");
    let result = scenario(&cluster, port, &log).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!("--- adapter ---\n{}", crate::cluster::tail(&log, 60));
    }
    result
}

async fn scenario(cluster: &Cluster, port: u16, log: &Path) -> Result<()> {
    let client = prepare(cluster).await?;
    create_gpu_node(&client, NODE, 4, "Tesla-V100-SXM2-16GB", 16_384).await?;
    let http = reqwest::Client::new();
    // One pod per GPU: a GPU the forger is counted on takes no one else.
    let mut adapter = start_with(
        cluster,
        port,
        log,
        "e2e-placement",
        &["--max-jobs-per-gpu", "1"],
    )?;
    wait_ready(&http, &mut adapter).await?;

    // The forger: bound by its owner, one GPU requested, all four named, no signature.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let all = (0..4)
        .map(|i| format!("{NODE}/{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let forger: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "forger",
            "annotations": { GPU_ANNOTATION: all, "tandem.dev/gpu-memory-mib": "16384" },
        },
        "spec": {
            "nodeName": NODE,
            "containers": [{
                "name": "main",
                "image": "registry.invalid/none",
                "resources": { "limits": { "nvidia.com/gpu": "1" } },
            }],
        },
    }))?;
    let forger = pods.create(&PostParams::default(), &forger).await?;
    println!(
        "the forger was created, bound to {NODE} with {GPU_ANNOTATION}={:?}",
        annotation(&forger)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Three tenants, each asking for one GPU through Tandem.
    let verifier = cluster.placement_verifier();
    let mut taken = Vec::new();
    for i in 0..3 {
        let name = format!("tenant-{i}");
        pods.create(&PostParams::default(), &job_pod(&name, &name, None)?)
            .await?;
        let node = wait_for_binding(&client, NAMESPACE, &name, Duration::from_secs(30)).await;
        if node.is_none() {
            let why = tandem_event(&client, &name).await.unwrap_or_default();
            anyhow::bail!(
                "{name} was not bound: the extender's view counts the forger on every GPU it \
                 names ({why})"
            );
        }
        let bound = pods.get(&name).await?;
        let annotations = bound.metadata.annotations.clone().unwrap_or_default();
        let placement = Placement::read(|key| annotations.get(key).map(String::as_str))?
            .context("a pod the extender bound carries Tandem's placement")?;
        let uid = bound.metadata.uid.as_deref().unwrap_or_default();
        let key = verifier
            .verify(uid, &placement)
            .map_err(|e| anyhow::anyhow!("{name}'s placement does not verify: {e}"))?;
        println!(
            "{name} was bound to {node:?} on {} (signed with key {key})",
            placement.gpu_list()
        );
        taken.push(placement.gpu_list());
    }
    let mut distinct = taken.clone();
    distinct.sort();
    distinct.dedup();
    ensure!(
        distinct.len() == 3,
        "the tenants share GPUs under a cap of one: {taken:?}"
    );

    // The forger still holds one GPU: a fourth tenant finds none idle.
    pods.create(
        &PostParams::default(),
        &job_pod("tenant-3", "tenant-3", None)?,
    )
    .await?;
    let why = tandem_event(&client, "tenant-3").await?;
    println!("tenant-3 stays pending: {why}");
    ensure!(
        wait_for_binding(&client, NAMESPACE, "tenant-3", Duration::from_secs(3))
            .await
            .is_none(),
        "tenant-3 was bound: the forger was counted on no GPU at all"
    );
    let logged = std::fs::read_to_string(log)?;
    let warned = logged
        .lines()
        .find(|line| line.contains("does not vouch for"))
        .context("the adapter did not warn about the forged placement")?;
    println!("the adapter logged: {warned}");
    Ok(())
}

fn annotation(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GPU_ANNOTATION).cloned())
}
