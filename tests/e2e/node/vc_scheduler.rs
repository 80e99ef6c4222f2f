//! The `node` tier through Volcano: tasks vc-scheduler places with the Tandem extender run on
//! real nodes (tandem-e2e's [`Nodes`]: containerd with NRI, runc, a kubelet, four fake V100s
//! each) and see the GPU Tandem chose.
//!
//! The Volcano adapter annotates a task's pod in `allocate`, before vc-scheduler binds it at
//! the end of the session, so the annotation is on the pod before the kubelet sees it and
//! `tandem-node` reads it when the container is created. The scenario is tandem-e2e's
//! [`pairing`]: `p` is paired with `x` on `tandem-a/2` (both containers see GPU 2's UUID and
//! device node, `p` with the memory the guard reserved), `w` is kept apart on `tandem-b/3`.

use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tandem_adapter_core::JobKeys;
use tandem_e2e::nodes::{self, NodeSpec, Nodes};
use tandem_e2e::pairing::{self, NODE_A, NODE_B, P_GOES_TO, W_GOES_TO};
use tandem_xtask::volcano::VolcanoBuild;

use crate::cluster::{Cluster, ensure_namespace, free_port};
use crate::volcano::{
    NAMESPACE, SECRET_HEX, SYSTEM, Scheduler, TOKEN, create_podgroup, install_crds, post, profile,
    scheduler_conf, start_adapter, wait_ready,
};

/// How long a task may take to be scheduled, started and print.
const RUNS_WITHIN: Duration = Duration::from_secs(90);

/// A test pod of job `job` in PodGroup `group` for vc-scheduler.
fn task_pod(name: &str, job: &str, group: &str) -> Result<Pod> {
    let mut pod = nodes::gpu_pod(name, 1, 3_600);
    pod["metadata"]["labels"] = json!({"tandem.dev/job": job});
    pod["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": group});
    pod["spec"]["schedulerName"] = json!("volcano");
    pod["spec"]["containers"][0]["resources"]["requests"] = json!({"cpu": "100m"});
    Ok(serde_json::from_value(pod)?)
}

#[tokio::test]
async fn through_vc_scheduler_containers_see_the_gpu_tandem_chose() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let root = tandem_e2e::root();
    let build = tokio::task::spawn_blocking(move || VolcanoBuild::from_env(&root)).await??;
    let cluster = Cluster::start_control_plane_for_nodes(&[NODE_A, NODE_B]).await?;
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    std::fs::write(cluster.dir().join("intake-token"), TOKEN)?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let key = |job: &str| keys.key(NAMESPACE, job);
    let client = cluster.client().await?;
    install_crds(&client, &build.crds()).await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    let http = reqwest::Client::new();
    let port = free_port()?;
    let adapter_log = cluster.dir().join("adapter.log");
    let mut adapter = start_adapter(&cluster, port, &adapter_log)?;
    wait_ready(&http, &mut adapter).await?;

    let profiles: Vec<Value> = pairing::PROFILES
        .iter()
        .map(|(job, util, access, mem)| {
            json!({"job": key(job), "profile": profile(*util, *access, *mem)})
        })
        .collect();
    post(
        &http,
        &format!("{}/v1/profiles", adapter.url),
        json!({"profiles": profiles}),
    )
    .await?;
    let mut outcomes = Vec::new();
    for _ in 0..pairing::OBSERVED {
        for (a, b, colocated) in pairing::PAIRS {
            outcomes.push(json!({"gpu_model": "V100", "jobs": [key(a), key(b)],
                "solo_s": [100.0, 100.0], "colocated_s": colocated}));
        }
    }
    post(
        &http,
        &format!("{}/v1/outcomes", adapter.url),
        json!({"outcomes": outcomes}),
    )
    .await?;

    let mut nodes =
        Nodes::start(&cluster, &[NodeSpec::v100(NODE_A), NodeSpec::v100(NODE_B)]).await?;
    let binary = std::path::PathBuf::from(
        std::env::var_os(tandem_xtask::tasks::NODE_BIN_VAR)
            .ok_or_else(|| anyhow::anyhow!("run the node tier with `cargo xtask e2e node`"))?,
    );
    for name in [NODE_A, NODE_B] {
        let listen = free_port()?;
        nodes
            .node(name)?
            .start_component(&binary, &cluster, listen, &["--memory-limit", "hami-core"])
            .await?;
    }
    let scheduler = Scheduler::start(&cluster, &build, &scheduler_conf(port)).await?;

    let scenario = async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        // Earlier decisions of Tandem's, signed with the cluster's key.
        for (name, job, node, index) in pairing::RESIDENTS {
            create_podgroup(&client, name, 1).await?;
            let mut pod = task_pod(name, job, name)?;
            let annotations = pod.metadata.annotations.get_or_insert_default();
            annotations.insert("tandem.dev/gpu".into(), format!("{node}/{index}"));
            annotations.insert(
                "tandem.dev/gpu-memory-mib".into(),
                pairing::reserved_mib(job).to_string(),
            );
            cluster.create_placed(&pods, &pod).await?;
        }
        for (name, _, node, index) in pairing::RESIDENTS {
            let seen = nodes::seen(&client, NAMESPACE, name, RUNS_WITHIN).await?;
            nodes.expect_gpu(name, &seen, node, *index)?;
        }
        for (name, job, goes_to) in [("p-run", "p", P_GOES_TO), ("w-run", "w", W_GOES_TO)] {
            create_podgroup(&client, name, 1).await?;
            pods.create(&PostParams::default(), &task_pod(name, job, name)?)
                .await?;
            let (node, index, annotations) =
                nodes::placement(&client, NAMESPACE, name, RUNS_WITHIN).await?;
            ensure!(
                (node.as_str(), index) == goes_to,
                "{name} should go to {goes_to:?}, went to {node}/{index}"
            );
            let seen = nodes::seen(&client, NAMESPACE, name, RUNS_WITHIN).await?;
            nodes.expect_gpu(name, &seen, node.as_str(), index)?;
            let reserved = annotations
                .get("tandem.dev/gpu-memory-mib")
                .cloned()
                .unwrap_or_default();
            let limit = format!("CUDA_DEVICE_MEMORY_LIMIT_0={reserved}m");
            ensure!(
                seen.env.contains(&limit),
                "{name} should see {limit}: {seen:?}"
            );
            println!(
                "(b, Volcano) {name} placed on {node}/{index}, reserved {reserved} MiB; saw {seen:?}"
            );
        }
        let x = nodes::seen(&client, NAMESPACE, "x-run", RUNS_WITHIN).await?;
        let p = nodes::seen(&client, NAMESPACE, "p-run", RUNS_WITHIN).await?;
        ensure!(x.visible == p.visible, "x and p share a GPU: {x:?} {p:?}");
        Ok(())
    };
    let result: Result<()> = scenario.await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!("{}", nodes.log_tails());
        eprintln!("--- vc-scheduler ---\n{}", scheduler.process.log_tail(60));
        eprintln!("--- adapter ---\n{}", adapter.process.log_tail(60));
    }
    Nodes::delete_pods(&client, NAMESPACE).await.ok();
    drop(scheduler);
    result
}
