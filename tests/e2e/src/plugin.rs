//! The framework plugin as the tiers start it: `tandem-kube-scheduler` (kube-scheduler with
//! the `Tandem` plugin and the engine in-process, built by `cargo xtask kube-scheduler-plugin`),
//! its configuration, and the knowledge base it resumes from. The `kube-plugin`, `helm` and
//! `node` tiers start it.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tandem_adapter_core::JobKeys;
use tandem_adapter_core::store::AdapterState;
use tandem_api::Profile;
use tandem_kube_common::store::to_config_map;

use crate::cluster::{Cluster, KUBECONFIG_PLACEHOLDER, create_gpu_node, ensure_namespace};
use crate::extender::{NAMESPACE, SECRET_HEX, SYSTEM};

/// The profile of the plugin's scheduler.
pub const SCHEDULER_NAME: &str = "tandem-plugin-scheduler";

/// The knowledge-base ConfigMap.
pub const KNOWLEDGE: &str = "tandem-knowledge";

/// `tandem-kube-scheduler`, built (or found through `TANDEM_PLUGIN_SCHEDULER`) off the
/// runtime's threads: the first build takes minutes.
pub async fn plugin_scheduler() -> Result<PathBuf> {
    tokio::task::spawn_blocking(|| {
        let root = crate::root();
        tandem_xtask::kube_plugin::plugin_scheduler_from_env(
            &root,
            tandem_xtask::kube_plugin::Profile::Dev,
        )
    })
    .await
    .context("the task building tandem-kube-scheduler panicked")?
}

/// A `KubeSchedulerConfiguration` with one profile running Tandem with `args`, Tandem deciding
/// how many pods share a GPU (the resource fit ignores `nvidia.com/gpu`).
pub fn plugin_config(args: &Value) -> String {
    format!(
        "\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {KUBECONFIG_PLACEHOLDER}
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
profiles:
- schedulerName: {SCHEDULER_NAME}
  plugins:
    multiPoint:
      enabled:
      - name: Tandem
        weight: 10
    bind:
      enabled:
      - name: Tandem
  pluginConfig:
  - name: Tandem
    args: {args}
  - name: NodeResourcesFit
    args:
      ignoredResources: [\"nvidia.com/gpu\"]
"
    )
}

/// The plugin's args for a cluster whose id secret is in `dir`.
pub fn args(dir: &Path) -> Value {
    json!({
        "idSecretFile": dir.join("id-secret"),
        "namespace": SYSTEM,
        "knowledgeConfigMap": KNOWLEDGE,
        "engineDeadlineMs": 2_000,
        // The cluster's placement key, which the harness puts in the scheduler's config.
        "placementKeyFile": crate::cluster::PLACEMENT_KEY_PLACEHOLDER,
    })
}

/// A pod of job `job` for the plugin's scheduler; bound to `at` = (node, gpu) if given.
pub fn job_pod(name: &str, job: &str, at: Option<(&str, &str)>) -> Result<Pod> {
    let mut pod = crate::extender::job_pod(name, job, at)?;
    if at.is_none() {
        pod.spec
            .as_mut()
            .context("a pod has a spec")?
            .scheduler_name = Some(SCHEDULER_NAME.to_owned());
    }
    Ok(pod)
}

/// A profile of `util` % GPU utilization, `access` % memory-access time and `mem` MiB.
pub fn profile(util: f32, access: f32, mem: u32) -> Profile {
    Profile {
        gpu_util_pct: util,
        mem_access_pct: access,
        mem_used_mib: mem,
        gpu_model: "V100".into(),
    }
}

/// Stores `engine` (a snapshot) as the knowledge base, as the extender would have.
pub async fn store_knowledge(client: &kube::Client, engine: &[u8]) -> Result<()> {
    let map = to_config_map(KNOWLEDGE, None, engine, &AdapterState::default())?;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), SYSTEM);
    maps.create(&PostParams::default(), &map).await?;
    Ok(())
}

/// Writes the id secret, creates the namespaces and two one-GPU V100 nodes.
pub async fn prepare(cluster: &Cluster) -> Result<(kube::Client, JobKeys)> {
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    for node in ["v100-a", "v100-b"] {
        create_gpu_node(&client, node, 1, "Tesla-V100-SXM2-16GB", 16_384).await?;
    }
    Ok((client, keys))
}

/// The value of `series` (`name{labels}`, labels sorted by name as the scheduler writes them)
/// in a metrics text; `None` when the scheduler does not export it.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// The family of a sample's `series`: its name without labels, or a histogram's suffix.
pub fn family_of(series: &str) -> &str {
    let name = series.split('{').next().unwrap_or_default();
    ["_bucket", "_count", "_sum"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name)
}

/// `result`, having printed the components' logs if it is an error.
pub fn logged(cluster: &Cluster, result: Result<()>) -> Result<()> {
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
    }
    result
}

/// The node a tenant's forged placement claims, with four GPUs.
pub const FORGED_NODE: &str = "gpu-node-7";

/// The plugin's `/metrics`, served on its intake's address (`intake`, a base URL).
pub async fn plugin_metrics(intake: &str) -> Result<String> {
    Ok(reqwest::get(format!("{intake}/metrics"))
        .await?
        .error_for_status()?
        .text()
        .await?)
}
