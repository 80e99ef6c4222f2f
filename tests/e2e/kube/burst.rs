//! A burst of pods that fills every GPU, through the extender as the chart configures it
//! (`ignorable`, the GPU resource left to the extender): every pod must get a GPU of its own,
//! named on the pod.
//!
//! kube-scheduler binds asynchronously and filters its next pods meanwhile, and with the GPU
//! resource ignored by the scheduler, Tandem alone counts GPUs: what `filter` passed must count
//! for the next `filter` before its `bind` arrives. Otherwise two pods chase the last GPU of a
//! node, Tandem refuses the second `bind`, and the scheduler, skipping an ignorable extender
//! that failed, binds that pod itself on the full node with no GPU named.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::cluster::{
    Cluster, create_gpu_node, free_port, install_crypto_provider, scheduler_config,
};
use crate::extender::{NAMESPACE, prepare, start_adapter, wait_ready};

/// Nodes, GPUs on each: every GPU is taken by one pod of the burst.
const NODES: usize = 12;
const GPUS: u32 = 2;

#[tokio::test]
async fn a_burst_that_fills_every_gpu_gives_each_pod_a_gpu_of_its_own() -> Result<()> {
    install_crypto_provider();
    let port = free_port()?;
    let mut cluster = Cluster::start_control_plane().await?;
    let log = cluster.dir().join("adapter.log");
    let result = scenario(&mut cluster, port, &log).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!("--- adapter ---\n{}", crate::cluster::tail(&log, 60));
    }
    result
}

async fn scenario(cluster: &mut Cluster, port: u16, log: &Path) -> Result<()> {
    let client = prepare(cluster).await?;
    for n in 0..NODES {
        let name = format!("burst-{n:02}");
        create_gpu_node(&client, &name, GPUS, "Tesla-V100-SXM2-16GB", 16_384).await?;
    }
    // Jobs Tandem knows nothing of: each takes a GPU alone (unknown memory).
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let total = NODES * GPUS as usize;
    futures::stream::iter(0..total)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": { "name": format!("burst-{i:02}"),
                                  "labels": { "tandem.dev/job": format!("burst-{}", i % 5) } },
                    "spec": { "containers": [{
                        "name": "main", "image": "registry.invalid/none",
                        "resources": { "limits": { "nvidia.com/gpu": "1" } },
                    }]},
                }))?;
                pods.create(&PostParams::default(), &pod).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(8)
        .try_collect::<Vec<_>>()
        .await?;
    let http = reqwest::Client::new();
    let mut adapter = start_adapter(cluster, port, log)?;
    wait_ready(&http, &mut adapter).await?;
    // The scheduler starts with the whole burst pending, and goes through it at its own pace.
    cluster
        .start_scheduler(&scheduler_config(Some(port)))
        .await?;

    let deadline = Instant::now() + Duration::from_secs(90);
    let bound = loop {
        let listed = pods.list(&ListParams::default()).await?.items;
        let bound: Vec<Pod> = listed
            .into_iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .collect();
        if bound.len() == total {
            break bound;
        }
        ensure!(
            Instant::now() < deadline,
            "only {} of {total} pods were bound after 90 s",
            bound.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unnamed = Vec::new();
    for pod in &bound {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let gpu = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("tandem.dev/gpu"));
        match gpu {
            None => unnamed.push(format!("{name} on {}", node.unwrap_or_default())),
            Some(gpu) => {
                ensure!(
                    gpu.split_once('/').map(|(on, _)| on) == node.as_deref(),
                    "{name} is on {node:?} but its annotation names {gpu}"
                );
                holders.entry(gpu.clone()).or_default().push(name);
            }
        }
    }
    ensure!(
        unnamed.is_empty(),
        "{} of {total} pods were bound without a GPU named (the scheduler bound them itself after \
         Tandem refused): {unnamed:?}",
        unnamed.len()
    );
    let shared: Vec<_> = holders
        .iter()
        .filter(|(_, names)| names.len() > 1)
        .collect();
    ensure!(
        shared.is_empty(),
        "GPUs given to more than one pod of unknown memory: {shared:?}"
    );
    ensure!(
        holders.len() == total,
        "{} GPUs named for {total} pods",
        holders.len()
    );
    Ok(())
}
