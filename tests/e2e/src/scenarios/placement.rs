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

use crate::cluster::{Cluster, create_gpu_node, wait_for_binding};
use crate::extender::{NAMESPACE, job_pod, prepare, start_with, tandem_event, wait_ready};

/// The node the forger claims, with four GPUs.
pub const NODE: &str = "gpu-node-7";

/// The forged-placement scenario against `cluster`, its adapter on `port`.
pub async fn scenario(cluster: &Cluster, port: u16, log: &Path) -> Result<()> {
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

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    create_forger(&pods, NODE).await?;
    tenants_bind_beside_the_forger(
        cluster,
        &client,
        |name| job_pod(name, name, None),
        "extender",
    )
    .await?;
    let logged = std::fs::read_to_string(log)?;
    let warned = logged
        .lines()
        .find(|line| line.contains("does not vouch for"))
        .context("the adapter did not warn about the forged placement")?;
    println!("the adapter logged: {warned}");
    Ok(())
}

/// Creates the forger in `pods`: a pod its owner bound to `node` (four GPUs) himself, one GPU
/// requested, all four named with a GPU's whole memory reserved, no signature.
pub async fn create_forger(pods: &Api<Pod>, node: &str) -> Result<()> {
    let all = (0..4)
        .map(|i| format!("{node}/{i}"))
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
            "nodeName": node,
            "containers": [{
                "name": "main",
                "image": "registry.invalid/none",
                "resources": { "limits": { "nvidia.com/gpu": "1" } },
            }],
        },
    }))?;
    let forger = pods.create(&PostParams::default(), &forger).await?;
    println!(
        "the forger was created, bound to {node} with {GPU_ANNOTATION}={:?}",
        annotation(&forger)
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

/// Three tenants (`tenant(name)`: a one-GPU pod for the scheduler under test, `what`) bind
/// beside the forger, each on a GPU of its own with a placement signed for its UID that
/// verifies with the cluster's public key; a fourth finds no idle GPU (the forger holds one).
pub async fn tenants_bind_beside_the_forger(
    cluster: &Cluster,
    client: &kube::Client,
    tenant: impl Fn(&str) -> Result<Pod>,
    what: &str,
) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let verifier = cluster.placement_verifier();
    let mut taken = Vec::new();
    for i in 0..3 {
        let name = format!("tenant-{i}");
        pods.create(&PostParams::default(), &tenant(&name)?).await?;
        let node = wait_for_binding(client, NAMESPACE, &name, Duration::from_secs(30)).await;
        if node.is_none() {
            let why = tandem_event(client, &name).await.unwrap_or_default();
            anyhow::bail!(
                "{name} was not bound: the {what}'s view counts the forger on every GPU it \
                 names ({why})"
            );
        }
        let bound = pods.get(&name).await?;
        let annotations = bound.metadata.annotations.clone().unwrap_or_default();
        let placement = Placement::read(|key| annotations.get(key).map(String::as_str))?
            .with_context(|| format!("a pod the {what} bound carries Tandem's placement"))?;
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
    pods.create(&PostParams::default(), &tenant("tenant-3")?)
        .await?;
    let why = tandem_event(client, "tenant-3").await?;
    println!("tenant-3 stays pending: {why}");
    ensure!(
        wait_for_binding(client, NAMESPACE, "tenant-3", Duration::from_secs(3))
            .await
            .is_none(),
        "tenant-3 was bound: the forger was counted on no GPU at all"
    );
    Ok(())
}

/// The GPU placement annotation `pod` carries, if any.
pub fn annotation(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GPU_ANNOTATION).cloned())
}
