//! The knowledge base no request can poison or brick, against the real extender and API server:
//!
//! - the poison outcome (alone 1e-300 s, beside its partner 1e300 s: the engine's statistics
//!   overflow, and a knowledge base holding the result cannot be loaded) posted to the intake is
//!   refused `400` naming the field, and the adapter restarts on what it stored;
//! - a node profiler, authenticated by its pod's projected service-account token (reviewed by
//!   the API server, which names the node the token is bound to), may post profiles of the pods
//!   on its own node only: one for a pod on another node is refused `403`, and so is an outcome.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tandem_adapter_core::JobKeys;

use crate::cluster::{Cluster, create_gpu_node, free_port};
use crate::extender::{
    Adapter, NAMESPACE, SYSTEM, TOKEN, knowledge, post, prepare, profile, start_with, wait_ready,
};

/// Runs `scenario` on a fresh control plane (no scheduler: nothing here is scheduled), printing
/// the logs of the cluster and of the adapter (`adapter.log`) when it fails.
pub async fn on_control_plane<F>(scenario: impl FnOnce(Cluster) -> F) -> Result<()>
where
    F: Future<Output = (Cluster, Result<()>)>,
{
    crate::cluster::install_crypto_provider();
    let cluster = Cluster::start_control_plane().await?;
    let (cluster, result) = scenario(cluster).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!(
            "--- adapter ---\n{}",
            crate::cluster::tail(&cluster.dir().join("adapter.log"), 60)
        );
    }
    result
}

/// Posts `body` to the adapter's `path` with bearer `token`: its status and body.
pub async fn post_as(
    adapter: &Adapter,
    token: &str,
    path: &str,
    body: &Value,
) -> Result<(u16, String)> {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", adapter.url))
        .bearer_auth(token)
        .json(body)
        .send()
        .await?;
    Ok((response.status().as_u16(), response.text().await?))
}

/// The adapter, started in `cluster` with `extra` arguments and waited for.
pub async fn adapter(cluster: &Cluster, log: &Path, extra: &[&str]) -> Result<Adapter> {
    let mut adapter = start_with(cluster, free_port()?, log, "e2e-adapter", extra)?;
    wait_ready(&reqwest::Client::new(), &mut adapter).await?;
    Ok(adapter)
}

/// The poisoned-outcome scenario against `cluster`: the refusal names the field, and the
/// adapter restarts on what it stored.
pub async fn poison(cluster: &Cluster) -> Result<()> {
    prepare(cluster).await?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let log = cluster.dir().join("adapter.log");
    let http = reqwest::Client::new();
    let mut first = adapter(cluster, &log, &[]).await?;
    let (a, b) = (keys.key(NAMESPACE, "a"), keys.key(NAMESPACE, "b"));
    post(
        &http,
        &format!("{}/v1/profiles", first.url),
        json!({ "profiles": [
            { "job": a, "profile": profile(30.0, 10.0, 3_000) },
            { "job": b, "profile": profile(50.0, 25.0, 3_000) },
        ]}),
    )
    .await?;
    let before = knowledge(&http, &first.url).await?;
    let poison = json!({ "outcomes": [{ "gpu_model": "V100", "jobs": [a, b],
        "solo_s": [1e-300, 1e-300], "colocated_s": [1e300, 1e300] }] });
    let (status, text) = post_as(&first, TOKEN, "/v1/outcomes", &poison).await?;
    println!("the poison outcome -> {status} {text}");
    ensure!(
        status == 400 && text.contains("outcomes[0].solo_s[0]"),
        "the poison outcome was answered {status}: {text}"
    );
    ensure!(
        knowledge(&http, &first.url).await? == before,
        "the refused outcome changed the knowledge base"
    );
    // What the adapter stored loads: a restart resumes with the same knowledge.
    first.process.terminate(Duration::from_secs(10));
    let again = adapter(cluster, &log, &[])
        .await
        .context("the adapter did not restart")?;
    let after = knowledge(&http, &again.url).await?;
    println!(
        "restarted: {} profiles, {} outcomes (before: {}, {})",
        after["profiles"], after["outcomes"], before["profiles"], before["outcomes"]
    );
    ensure!(
        after == before,
        "the restarted adapter knows {after}, not {before}"
    );
    Ok(())
}

/// The profilers' service account, in the adapter's namespace.
pub const PROFILER_ACCOUNT: &str = "tandem-profiler";

/// A pod on `node`: a profiler pod running as [`PROFILER_ACCOUNT`], or (with `job`) a pod of
/// that job asking for a GPU.
pub fn pod_on(name: &str, node: &str, job: Option<&str>) -> Result<Pod> {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "nodeName": node,
            "containers": [{ "name": "main", "image": "registry.invalid/none" }],
        },
    });
    match job {
        Some(job) => {
            pod["metadata"]["labels"] = json!({ "tandem.dev/job": job });
            pod["spec"]["containers"][0]["resources"] =
                json!({ "limits": { "nvidia.com/gpu": "1" } });
        }
        None => pod["spec"]["serviceAccountName"] = json!(PROFILER_ACCOUNT),
    }
    Ok(serde_json::from_value(pod)?)
}

/// What the kubelet mounts in the profiler pod `pod` (a projected `serviceAccountToken` volume
/// with audience `tandem-intake`): a token of [`PROFILER_ACCOUNT`] bound to the pod, from the
/// TokenRequest API.
pub async fn projected_token(client: &kube::Client, pod: &Pod) -> Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), SYSTEM);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec!["tandem-intake".to_owned()],
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Pod".to_owned()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
            expiration_seconds: Some(3_600),
        },
        ..TokenRequest::default()
    };
    let issued = accounts
        .create_token_request(PROFILER_ACCOUNT, &PostParams::default(), &request)
        .await
        .context("the TokenRequest for the profiler's pod was refused")?;
    Ok(issued.status.context("no token issued")?.token)
}

/// The node-scoped intake scenario: a node's profiler may post profiles only for pods on its
/// own node.
pub async fn node_scoped(cluster: &Cluster) -> Result<()> {
    let client = prepare(cluster).await?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    for node in ["node-a", "node-b"] {
        create_gpu_node(&client, node, 1, "Tesla-V100-SXM2-16GB", 16_384).await?;
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), SYSTEM);
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": PROFILER_ACCOUNT } }))?,
        )
        .await?;
    let system: Api<Pod> = Api::namespaced(client.clone(), SYSTEM);
    let profiler_a = system
        .create(
            &PostParams::default(),
            &pod_on("profiler-a", "node-a", None)?,
        )
        .await?;
    let jobs: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for (pod, node, job) in [
        ("train-a-0", "node-a", "train-a"),
        ("train-b-0", "node-b", "train-b"),
    ] {
        jobs.create(&PostParams::default(), &pod_on(pod, node, Some(job))?)
            .await?;
    }
    let token = projected_token(&client, &profiler_a).await?;
    let log = cluster.dir().join("adapter.log");
    let account = format!("{SYSTEM}/{PROFILER_ACCOUNT}");
    let adapter = adapter(cluster, &log, &["--profiler-service-account", &account]).await?;
    let http = reqwest::Client::new();
    let before = knowledge(&http, &adapter.url).await?;
    let (ours, theirs) = (
        keys.key(NAMESPACE, "train-a"),
        keys.key(NAMESPACE, "train-b"),
    );
    let of =
        |job: &str| json!({ "profiles": [{ "job": job, "profile": profile(40.0, 10.0, 3_000) }] });

    // Node a's profiler posts a profile of the pod on node b.
    let (status, text) = post_as(&adapter, &token, "/v1/profiles", &of(&theirs)).await?;
    println!("node a's profiler, a profile of node b's pod -> {status} {text}");
    ensure!(
        status == 403 && text.contains(&format!("job {theirs} has no pod on node node-a")),
        "a profile of another node's pod was answered {status}: {text}"
    );
    // An outcome is not a profiler's to post.
    let outcome = json!({ "outcomes": [{ "gpu_model": "V100", "jobs": [ours, theirs],
        "solo_s": [100.0, 90.0], "colocated_s": [120.0, 130.0] }] });
    let (status, text) = post_as(&adapter, &token, "/v1/outcomes", &outcome).await?;
    println!("node a's profiler, an outcome -> {status} {text}");
    ensure!(
        status == 403,
        "an outcome from a profiler was answered {status}: {text}"
    );
    ensure!(
        knowledge(&http, &adapter.url).await? == before,
        "a refused post changed the knowledge base"
    );
    // Its own node's pod: the API server's review named node a, and the profile is learned.
    let (status, text) = post_as(&adapter, &token, "/v1/profiles", &of(&ours)).await?;
    println!("node a's profiler, a profile of its own node's pod -> {status} {text}");
    ensure!(
        status == 200,
        "its own node's profile was answered {status}: {text}"
    );
    let after = knowledge(&http, &adapter.url).await?;
    ensure!(
        after["profiles"].as_u64() == before["profiles"].as_u64().map(|n| n + 1),
        "the profile was not learned: {after}"
    );
    // A token for another audience (the API server's own) is not a profiler's.
    let (status, text) = post_as(&adapter, "e30.e30.e30", "/v1/profiles", &of(&ours)).await?;
    ensure!(
        status == 401,
        "a forged token was answered {status}: {text}"
    );
    Ok(())
}
