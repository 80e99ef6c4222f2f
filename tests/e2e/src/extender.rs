//! The extender adapter as the tiers start it (`tandem-kube-adapter`, a process beside
//! kube-scheduler), with what its scenarios post and read: the namespaces, the cluster secret
//! and intake token, pods of a job (pending or placed), profiles, knowledge, events and metrics;
//! and the extender's acceptance scenario ([`scenario`]), which the `kube` tier runs.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tandem_adapter_core::JobKeys;
use tandem_kube_common::placement::{Placement, SIGNATURE_ANNOTATION};

pub use crate::intake::{Adapter, SECRET_HEX, TOKEN, knowledge, post, profile, wait_ready};
use crate::intake::{expect_bad_requests, predict_v100, teach_p_prefers_x};

use crate::cluster::{Cluster, create_gpu_node, ensure_namespace, spawn_logged, wait_for_binding};

/// The namespace of the tests' pods.
pub const NAMESPACE: &str = "e2e";
/// The namespace Tandem's own objects live in (its knowledge base, its Lease).
pub const SYSTEM: &str = "tandem-system";

/// Starts the extender adapter on `port`, logging to `log`, as the one replica `e2e-adapter`.
pub fn start_adapter(cluster: &Cluster, port: u16, log: &Path) -> Result<Adapter> {
    start_replica(cluster, port, log, "e2e-adapter")
}

/// [`start_adapter`] with the replica identity `identity` (its name in the Lease).
pub fn start_replica(cluster: &Cluster, port: u16, log: &Path, identity: &str) -> Result<Adapter> {
    start_with(cluster, port, log, identity, &[])
}

/// [`start_replica`] with more arguments for the adapter (`--gpu-price`, ...).
pub fn start_with(
    cluster: &Cluster,
    port: u16,
    log: &Path,
    identity: &str,
    extra: &[&str],
) -> Result<Adapter> {
    let dir = cluster.dir();
    let mut command = Command::new(crate::program("tandem-kube-adapter")?);
    command
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--namespace", SYSTEM, "--identity", identity])
        .arg("--id-secret-file")
        .arg(dir.join("id-secret"))
        .arg("--intake-token-file")
        .arg(dir.join("intake-token"))
        .args(cluster.placement_args())
        .args(extra)
        .env(
            "RUST_LOG",
            "tandem_kube_adapter=debug,tandem_kube_common=debug,info",
        );
    Ok(Adapter {
        process: spawn_logged(command, log)?,
        url: format!("http://127.0.0.1:{port}"),
    })
}

/// Writes the cluster secret and the intake token the adapter reads, and creates the test's
/// namespaces; returns a client of the cluster.
pub async fn prepare(cluster: &Cluster) -> Result<kube::Client> {
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    std::fs::write(cluster.dir().join("intake-token"), TOKEN)?;
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    Ok(client)
}

/// A pod of job `job` asking for one GPU; bound to `at` = (node, gpu) if given (a pod placed
/// earlier: create it with [`Cluster::create_placed`], which signs the placement), else
/// pending.
pub fn job_pod(name: &str, job: &str, at: Option<(&str, &str)>) -> Result<Pod> {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": { "tandem.dev/job": job } },
        "spec": {
            "containers": [{
                "name": "main",
                "image": "registry.invalid/none",
                "resources": { "limits": { "nvidia.com/gpu": "1" } },
            }],
        },
    });
    if let Some((node, gpu)) = at {
        pod["spec"]["nodeName"] = json!(node);
        pod["metadata"]["annotations"] = json!({ "tandem.dev/gpu": gpu });
    }
    Ok(serde_json::from_value(pod)?)
}

/// The placement `pod` carries, checked to be signed for it with `cluster`'s placement key (as
/// a node checks it): what it names and the key that signed it, for the test's output.
pub fn signed_placement(cluster: &Cluster, pod: &Pod) -> Result<String> {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let placement = Placement::read(|key| annotations.get(key).map(String::as_str))?
        .context("the pod carries no placement")?;
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let verifier = cluster.placement_verifier();
    let key = verifier
        .verify(uid, &placement)
        .map_err(|e| anyhow::anyhow!("the placement of pod {uid} does not verify: {e}"))?;
    Ok(format!(
        "{SIGNATURE_ANNOTATION} verifies for the pod's UID and {}: signed with key {key}",
        placement.gpu_list()
    ))
}

/// The GPU placement annotation `pod` carries, if any.
pub fn annotation(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("tandem.dev/gpu").cloned())
}

/// Scheduling events of `pod` (core/v1 view), newest last.
pub async fn events_of(client: &kube::Client, pod: &str) -> Result<Vec<String>> {
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(pod))
        .filter_map(|e| e.message)
        .collect())
}

/// The first event of `pod` that gives Tandem's reason, waiting up to 30 s for the scheduler
/// to record it.
pub async fn tandem_event(client: &kube::Client, pod: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = events_of(client, pod).await?;
        if let Some(event) = events.iter().find(|m| m.contains("Tandem")) {
            return Ok(event.clone());
        }
        ensure!(
            Instant::now() < deadline,
            "no Tandem reason in {pod}'s events: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The extender's acceptance scenario against `cluster`, its adapter on `port` (see the kube
/// tier's `extender` tests).
pub async fn scenario(cluster: &Cluster, port: u16, adapter_log: &Path) -> Result<()> {
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    std::fs::write(cluster.dir().join("intake-token"), TOKEN)?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let key = |job: &str| keys.key(NAMESPACE, job);
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    create_gpu_node(&client, "v100-a", 1, "Tesla-V100-SXM2-16GB", 16_384).await?;
    create_gpu_node(&client, "v100-b", 1, "Tesla-V100-SXM2-16GB", 16_384).await?;
    let http = reqwest::Client::new();
    let mut adapter = start_adapter(cluster, port, adapter_log)?;
    wait_ready(&http, &mut adapter).await?;

    // (e) Malformed requests: 400 naming what is wrong, and the adapter keeps serving.
    expect_bad_requests(
        &http,
        &adapter,
        "(e)",
        &[
            ("filter", "{\"Pod\": 5}", "Pod"),
            ("prioritize", "not json", "prioritize"),
            ("bind", "{\"PodName\": \"x\"}", "PodNamespace"),
            (
                "filter",
                "{\"Pod\": {\"metadata\": {\"name\": 7}}}",
                "Pod.metadata.name",
            ),
        ],
    )
    .await?;
    wait_ready(&http, &mut adapter).await?;

    // The test plays the node profiler: p suffers little beside x and a lot beside y.
    let with_x = teach_p_prefers_x(&http, &adapter.url, key, &[]).await?;

    // (b) x runs on v100-a, y on v100-b (placed earlier); p is the pending pod.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let params = PostParams::default();
    cluster
        .create_placed(&pods, &job_pod("x-run", "x", Some(("v100-a", "v100-a/0")))?)
        .await?;
    cluster
        .create_placed(&pods, &job_pod("y-run", "y", Some(("v100-b", "v100-b/0")))?)
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    pods.create(&params, &job_pod("p-run", "p", None)?).await?;
    let node = wait_for_binding(&client, NAMESPACE, "p-run", Duration::from_secs(30)).await;
    println!("(b) p-run was bound to {node:?}");
    ensure!(
        node.as_deref() == Some("v100-a"),
        "p-run should share with x on v100-a, got {node:?}"
    );

    // (c) The annotation names the GPU.
    let bound = pods.get("p-run").await?;
    println!(
        "(c) p-run annotation tandem.dev/gpu = {:?}",
        annotation(&bound)
    );
    ensure!(annotation(&bound).as_deref() == Some("v100-a/0"));
    println!("(c) {}", signed_placement(cluster, &bound)?);

    // (a) big needs 20,000 MiB: no GPU fits; it stays Pending, unbound, the reason in its events.
    pods.create(&params, &job_pod("big-run", "big", None)?)
        .await?;
    let reason = tandem_event(&client, "big-run").await?;
    println!("(a) big-run event: {reason}");
    ensure!(
        reason.contains("needs 20000 MiB"),
        "the reason should give the memory: {reason}"
    );
    ensure!(
        pods.get("big-run")
            .await?
            .spec
            .and_then(|s| s.node_name)
            .is_none()
    );

    // (d) Kill the adapter: the scheduler goes on without it (ignorable) and logs that.
    let before = knowledge(&http, &adapter.url).await?;
    let stored: Api<ConfigMap> = Api::namespaced(client.clone(), SYSTEM);
    ensure!(
        stored.get_opt("tandem-knowledge").await?.is_some(),
        "no knowledge base in the cluster"
    );
    adapter.process.kill_now();
    pods.create(&params, &job_pod("q-run", "q", None)?).await?;
    let node = wait_for_binding(&client, NAMESPACE, "q-run", Duration::from_secs(60)).await;
    println!("(d) with the adapter down, q-run was bound to {node:?}");
    ensure!(
        node.is_some(),
        "the scheduler did not schedule without the adapter"
    );
    let scheduler_log = cluster.logs(crate::cluster::Component::Scheduler);
    let skipped = scheduler_log
        .lines()
        .find(|l| l.contains("Skipping extender") || l.contains("ignorable"))
        .unwrap_or_default();
    println!("(d) scheduler log: {skipped}");
    ensure!(
        !skipped.is_empty(),
        "the scheduler did not log skipping the extender"
    );

    // Restarted, it resumes from the ConfigMap: the same knowledge, nothing lost.
    let mut adapter = start_adapter(cluster, port, &cluster.dir().join("adapter-2.log"))?;
    wait_ready(&http, &mut adapter).await?;
    let after = knowledge(&http, &adapter.url).await?;
    for field in ["profiles", "outcomes", "residual_observations"] {
        println!(
            "(d) knowledge {field}: before kill {} / after restart {}",
            before[field], after[field]
        );
        ensure!(
            before[field] == after[field],
            "{field} changed across the restart"
        );
    }
    ensure!(
        before["pairs"] == after["pairs"],
        "learned pairs changed across the restart"
    );
    let again = predict_v100(&http, &adapter.url, json!([key("p"), key("x")])).await?;
    ensure!(
        again == with_x,
        "the restarted engine predicts differently: {again} vs {with_x}"
    );

    // Finished pods teach: a and b each run alone once, then together on one GPU.
    create_gpu_node(&client, "v100-c", 1, "Tesla-V100-SXM2-16GB", 16_384).await?;
    post(
        &http,
        &format!("{}/v1/profiles", adapter.url),
        json!({ "profiles": [
            { "job": key("a"), "profile": profile(30.0, 10.0, 3_000) },
            { "job": key("b"), "profile": profile(50.0, 25.0, 3_000) },
        ]}),
    )
    .await?;
    run_alone_then_together(cluster, &pods, ("v100-c", "v100-c/0")).await?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let learned = loop {
        let now = knowledge(&http, &adapter.url).await?;
        if now["outcomes"] != after["outcomes"] {
            break now;
        }
        ensure!(
            Instant::now() < deadline,
            "no outcome learned from the finished pods"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    println!(
        "(outcomes) finished pods: outcomes {} -> {} (a: solo 100 s, beside b 150 s; b: solo 50 s, beside a 140 s)",
        after["outcomes"], learned["outcomes"]
    );
    ensure!(learned["outcomes"].as_u64() == after["outcomes"].as_u64().map(|n| n + 1));
    // The engine shows the outcome as soon as it has it; the counter moves once the
    // knowledge base is written, a moment later.
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = loop {
        let metrics = http
            .get(format!("{}/metrics", adapter.url))
            .send()
            .await?
            .text()
            .await?;
        let line = metrics
            .lines()
            .find(|l| l.starts_with("tandem_outcomes_learned_total"))
            .unwrap_or_default()
            .to_owned();
        if line.ends_with(" 1") || Instant::now() >= deadline {
            break line;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("(outcomes) {line}");
    ensure!(line.ends_with(" 1"), "metrics: {line:?}");
    Ok(())
}

/// A clock read once: the RFC 3339 time `ago` seconds before now, for pods' start and finish
/// times that must keep their distances to each other exactly.
pub fn seconds_ago() -> impl Fn(i64) -> String {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    move |ago| {
        k8s_openapi::jiff::Timestamp::from_second(now - ago)
            .expect("a recent time")
            .to_string()
    }
}

/// Pods of jobs `a` and `b` on `gpu` (node, GPU), as their kubelet reports them: each runs
/// alone once (a 100 s, b 50 s), then both run together (a 150 s, b 140 s) and finish, the
/// last of them ten minutes ago. What learning from finished pods pairs into one outcome.
/// Placed as Tandem places pods, with `cluster`'s placement key.
pub async fn run_alone_then_together(
    cluster: &Cluster,
    pods: &Api<Pod>,
    gpu: (&str, &str),
) -> Result<()> {
    let at = seconds_ago();
    for (pod, job, start, end) in [("a-solo", "a", 4_000, 3_900), ("b-solo", "b", 3_800, 3_750)] {
        cluster
            .create_placed(pods, &job_pod(pod, job, Some(gpu))?)
            .await?;
        finish(pods, pod, &at(start), &at(end)).await?;
    }
    for (pod, job) in [("a-pair", "a"), ("b-pair", "b")] {
        cluster
            .create_placed(pods, &job_pod(pod, job, Some(gpu))?)
            .await?;
    }
    start(pods, "a-pair", &at(1_000)).await?;
    start(pods, "b-pair", &at(1_000)).await?;
    finish(pods, "a-pair", &at(1_000), &at(850)).await?;
    finish(pods, "b-pair", &at(1_000), &at(860)).await?;
    Ok(())
}

/// The container status a kubelet would write.
pub fn container(state: Value) -> Value {
    json!([{ "name": "main", "image": "registry.invalid/none", "imageID": "", "ready": false,
             "restartCount": 0, "state": state }])
}

/// Marks `pod` running since `started` (RFC 3339), as its kubelet would.
pub async fn start(pods: &Api<Pod>, pod: &str, started: &str) -> Result<()> {
    let status = json!({ "status": { "phase": "Running", "startTime": started,
        "containerStatuses": container(json!({ "running": { "startedAt": started } })) } });
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Marks `pod` succeeded, having run from `started` to `finished`.
pub async fn finish(pods: &Api<Pod>, pod: &str, started: &str, finished: &str) -> Result<()> {
    let status = json!({ "status": { "phase": "Succeeded", "startTime": started,
        "containerStatuses": container(json!({ "terminated": {
            "exitCode": 0, "startedAt": started, "finishedAt": finished } })) } });
    pods.patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// The value of metric `name` (a counter's `_total` line) at `adapter`, 0 if absent.
pub async fn metric(http: &reqwest::Client, adapter: &Adapter, name: &str) -> Result<f64> {
    let text = http
        .get(format!("{}/metrics", adapter.url))
        .send()
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0))
}
