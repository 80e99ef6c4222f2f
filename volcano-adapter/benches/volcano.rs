//! The Volcano adapter's benchmark, in one run:
//!
//! 1. **Verb latency** on loopback, the adapter in-process on a fixed cluster of 1,000 nodes
//!    of 4 GPUs (every other GPU holding a profiled resident; the `--cluster-file` mode: the
//!    same view, engine and HTTP stack as against an API server, minus the watchers). For each
//!    of `TANDEM_BENCH_TASKS_LATENCY` (default 30) new tasks it sends what vc-scheduler sends in
//!    a session: `predicate` for the task on every node (bodies as Volcano builds them: the
//!    task with its Pod, the NodeInfo with its Node and tasks), then one `prioritize` with all
//!    1,000 nodes. Prints p50/p99 of each verb, and of the first predicate of each task apart
//!    (the one that runs the engine's `score-all`; the others are answered from it).
//! 2. **vc-scheduler's time to schedule N tasks** with and without the adapter: etcd and
//!    kube-apiserver (the e2e suite's build), Volcano's CRDs, `TANDEM_BENCH_NODES` (default
//!    100) GPU nodes and `TANDEM_BENCH_TASKS` (default 200) one-GPU tasks, each in a PodGroup of
//!    its own, created first; then vc-scheduler (deploy/helm/tandem/files/volcano-scheduler.conf, with and
//!    without the `extender` plugin) is started and the clock runs until every pod is bound.
//!    Each configuration gets a fresh control plane. Skipped with `TANDEM_BENCH_SKIP_VOLCANO`.
//!
//! Run: `cargo bench -p tandem-volcano-adapter --bench volcano`; the binaries come from
//! `TANDEM_KUBE_BIN_DIR` and `TANDEM_VC_SCHEDULER`, or are built on first use.

use tandem_e2e::cluster;

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::{Value, json};
use tandem_adapter_core::serve::serve_listener;
use tandem_adapter_core::{CoreConfig, EMBEDDED_ENGINE, EngineState, JobKeys, Shutdown};
use tandem_api::{Policy, Profile};
use tandem_host::{HostConfig, Runtime};
use tandem_kube_common::app::{App, ClusterFile, Source};
use tandem_volcano_adapter::Volcano;
use tandem_xtask::volcano::VolcanoBuild;

use cluster::{Cluster, ensure_namespace, free_port, free_ports, spawn_logged};

const NODES: usize = 1_000;
const GPUS_PER_NODE: u32 = 4;
const NAMESPACE: &str = "bench";
const SECRET_HEX: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const RUN_LIMIT: Duration = Duration::from_secs(300);

fn env_size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A V100 node advertising `units` `nvidia.com/gpu` for `devices` GPUs.
fn node(name: &str, devices: u32, units: u32) -> Value {
    let resources = json!({ "cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": units.to_string() });
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": {
            "kubernetes.io/hostname": name,
            "nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB",
            "nvidia.com/gpu.memory": "16384",
            "nvidia.com/gpu.count": devices.to_string(),
        }},
        "status": { "capacity": resources, "allocatable": resources,
            "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady" }] },
    })
}

/// A one-GPU pod of PodGroup `group`, bound to `at` = (node, gpu) if given.
fn pod(name: &str, group: &str, at: Option<(&str, &str)>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"),
            "labels": { "tandem.dev/job": name },
            "annotations": { "scheduling.k8s.io/group-name": group } },
        "spec": { "schedulerName": "volcano", "containers": [{ "name": "main",
            "image": "registry.invalid/none",
            "resources": { "requests": { "cpu": "100m" }, "limits": { "nvidia.com/gpu": "1" } } }] },
        "status": { "phase": "Pending" },
    });
    if let Some((node, gpu)) = at {
        pod["spec"]["nodeName"] = json!(node);
        pod["metadata"]["annotations"]["tandem.dev/gpu"] = json!(gpu);
    }
    pod
}

fn profile(i: usize) -> Profile {
    Profile {
        gpu_util_pct: (20 + (i * 37) % 70) as f32,
        mem_access_pct: (5 + (i * 13) % 50) as f32,
        mem_used_mib: 1_000 + ((i * 733) % 6_000) as u32,
        gpu_model: "V100".to_owned(),
    }
}

fn percentiles(ms: &mut [f64]) -> (f64, f64) {
    if ms.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    (at(0.50), at(0.99))
}

fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(latency())?;
    if std::env::var_os("TANDEM_BENCH_SKIP_VOLCANO").is_none() {
        runtime.block_on(throughput())?;
    }
    Ok(())
}

/// Part 1: predicate and prioritize latency with 1,000 nodes.
async fn latency() -> Result<()> {
    let keys = JobKeys::new(vec![9; 32])?;
    let engine_runtime = Runtime::from_bytes(EMBEDDED_ENGINE, HostConfig::default())?;
    let mut recommender = engine_runtime.bootstrap(&Policy::default(), 1)?;
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    // Each node's residents as Volcano's NodeInfo lists them.
    let mut node_infos = Vec::new();
    for n in 0..NODES {
        let name = format!("gpu-node-{n:04}");
        let node_json = node(&name, GPUS_PER_NODE, GPUS_PER_NODE * 2);
        let mut tasks = serde_json::Map::new();
        for g in (0..GPUS_PER_NODE).step_by(2) {
            let resident = format!("resident-{}", pods.len());
            let p = pod(&resident, "pg", Some((&name, &format!("{name}/{g}"))));
            recommender.observe_profile(&keys.key(NAMESPACE, &resident), &profile(pods.len()))?;
            tasks.insert(
                format!("uid-{resident}"),
                json!({ "UID": format!("uid-{resident}"), "Name": resident, "Pod": p }),
            );
            pods.push(serde_json::from_value::<Pod>(p)?);
        }
        node_infos.push(json!({ "Name": name, "Node": node_json, "Tasks": tasks,
            "Idle": { "MilliCPU": 64000.0, "Memory": 2.7e11 } }));
        nodes.push(serde_json::from_value::<Node>(node_json)?);
    }
    let core = Arc::new(
        CoreConfig::new(EngineState::new(engine_runtime, recommender), keys.clone())
            .queue(1024)
            .start()?,
    );
    let app = Arc::new(App::new(
        Arc::clone(&core),
        "nvidia.com/gpu".to_owned(),
        Duration::from_secs(2),
        Source::Fixed(ClusterFile { nodes, pods }),
    ));
    let volcano = Arc::new(Volcano::new(app, 10.0));
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, shutdown) = Shutdown::new();
    let router = tandem_adapter_core::http::router(core, volcano);
    let server = tokio::spawn(serve_listener(router, listener, shutdown));
    let client = reqwest::Client::new();
    let send = |verb: &'static str, body: Vec<u8>| {
        let request = client
            .post(format!("{base}/{verb}"))
            .header("content-type", "application/json")
            .body(body);
        async move {
            let started = Instant::now();
            let response = request.send().await?;
            ensure!(
                response.status().is_success(),
                "{verb}: {}",
                response.status()
            );
            let answer: Value = response.json().await?;
            Ok::<_, anyhow::Error>((started.elapsed().as_secs_f64() * 1e3, answer))
        }
    };
    let tasks = env_size("TANDEM_BENCH_TASKS_LATENCY", 30);
    let (mut predicate, mut first, mut prioritize) = (Vec::new(), Vec::new(), Vec::new());
    let mut passed = 0;
    let mut body_bytes = 0;
    for t in 0..tasks {
        let name = format!("pending-{t}");
        let task = json!({ "UID": format!("uid-{name}"), "Job": format!("{NAMESPACE}/pg-{name}"),
            "Name": name, "Namespace": NAMESPACE, "Pod": pod(&name, &format!("pg-{name}"), None) });
        send("onSessionOpen", serde_json::to_vec(&json!({ "Jobs": {} }))?).await?;
        for (i, info) in node_infos.iter().enumerate() {
            let body = serde_json::to_vec(&json!({ "task": task, "node": info }))?;
            body_bytes = body.len();
            let (ms, answer) = send("predicate", body).await?;
            if answer["status"] == "" {
                passed += 1;
            }
            if i == 0 {
                first.push(ms);
            } else {
                predicate.push(ms);
            }
        }
        let body = serde_json::to_vec(&json!({ "task": task, "nodes": node_infos }))?;
        let (ms, answer) = send("prioritize", body).await?;
        ensure!(
            answer["nodeScore"]
                .as_object()
                .is_some_and(|s| s.len() == NODES)
        );
        prioritize.push(ms);
        send("onSessionClose", b"{}".to_vec()).await?;
    }
    let _ = stop.send(true);
    let _ = server.await;
    let (p50, p99) = percentiles(&mut predicate);
    let (f50, f99) = percentiles(&mut first);
    let (r50, r99) = percentiles(&mut prioritize);
    println!(
        "volcano extender verbs, loopback, {NODES} nodes x {GPUS_PER_NODE} GPUs, {tasks} tasks (predicate body ~{} KiB; {passed} of {} predicates passed)",
        body_bytes / 1024,
        tasks * NODES
    );
    println!(
        "  predicate (cached score)  p50 {p50:.3} ms  p99 {p99:.3} ms  ({} calls)",
        predicate.len()
    );
    println!(
        "  predicate (first of task) p50 {f50:.3} ms  p99 {f99:.3} ms  ({} calls: one score-all over 4,000 GPUs)",
        first.len()
    );
    println!(
        "  prioritize ({NODES} nodes)   p50 {r50:.3} ms  p99 {r99:.3} ms  ({} calls)",
        prioritize.len()
    );
    Ok(())
}

/// Part 2: vc-scheduler's time to schedule N tasks, without and with the adapter.
async fn throughput() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let build = tokio::task::spawn_blocking(move || VolcanoBuild::from_env(&root)).await??;
    let nodes = env_size("TANDEM_BENCH_NODES", 100);
    let tasks = env_size("TANDEM_BENCH_TASKS", 200);
    println!(
        "vc-scheduler, {nodes} nodes x 4 V100 (8 units), {tasks} one-GPU tasks in PodGroups of one, created before it starts"
    );
    let mut baseline = None;
    for with_tandem in [false, true] {
        let (seconds, annotated) = schedule(&build, nodes, tasks, with_tandem).await?;
        let label = if with_tandem {
            "with the Tandem extender"
        } else {
            "without an extender"
        };
        print!(
            "  {label:<26} {seconds:>7.2} s  {:>7.1} tasks/s  {annotated:>4} with tandem.dev/gpu",
            tasks as f64 / seconds
        );
        match baseline {
            None => {
                baseline = Some(seconds);
                println!();
            }
            Some(base) => println!("  ({:.2}x the time without)", seconds / base),
        }
    }
    Ok(())
}

/// One run on a fresh control plane: seconds from vc-scheduler's start until every task is
/// bound, and how many carry Tandem's GPU record.
async fn schedule(
    build: &VolcanoBuild,
    nodes: usize,
    tasks: usize,
    with_tandem: bool,
) -> Result<(f64, usize)> {
    let cluster = Cluster::start_control_plane().await?;
    let client = cluster.client().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for entry in std::fs::read_dir(build.crds())? {
        let path = entry?.path();
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&std::fs::read_to_string(&path)?)
                .with_context(|| format!("{} is not a CRD", path.display()))?;
        crds.create(&PostParams::default(), &crd).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, "tandem-system").await?;
    let node_api: Api<Node> = Api::all(client.clone());
    for n in 0..nodes {
        let node: Node = serde_json::from_value(node(&format!("gpu-node-{n:04}"), 4, 8))?;
        node_api.create(&PostParams::default(), &node).await?;
    }
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        "podgroups",
    );
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for t in 0..tasks {
        let name = format!("task-{t:04}");
        let group: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": { "name": format!("pg-{name}"), "namespace": NAMESPACE },
            "spec": { "minMember": 1, "queue": "default" },
        }))?;
        groups.create(&PostParams::default(), &group).await?;
        let mut p = pod(&name, &format!("pg-{name}"), None);
        p["metadata"]
            .as_object_mut()
            .context("metadata")?
            .remove("uid");
        pods.create(&PostParams::default(), &serde_json::from_value(p)?)
            .await?;
    }
    let adapter_port = free_port()?;
    let mut conf = include_str!("../../deploy/helm/tandem/files/volcano-scheduler.conf").replace(
        "http://tandem-volcano-adapter.tandem-system.svc:8888",
        &format!("http://127.0.0.1:{adapter_port}"),
    );
    let _adapter = if with_tandem {
        std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
        let mut command = Command::new(env!("CARGO_BIN_EXE_tandem-volcano-adapter"));
        command
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig_path())
            .args(["--listen", &format!("127.0.0.1:{adapter_port}")])
            .arg("--id-secret-file")
            .arg(cluster.dir().join("id-secret"));
        let adapter = spawn_logged(command, &cluster.dir().join("adapter.log"))?;
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !http
            .get(format!("http://127.0.0.1:{adapter_port}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            ensure!(Instant::now() < deadline, "the adapter did not get ready");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Some(adapter)
    } else {
        // The same conf without the extender plugin.
        let at = conf
            .find("  - name: extender")
            .context("no extender in the conf")?;
        conf.truncate(at);
        None
    };
    let conf_path = cluster.dir().join("volcano-scheduler.conf");
    std::fs::write(&conf_path, conf)?;
    let [metrics, health] = free_ports()?;
    let mut command = Command::new(&build.scheduler);
    command
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .arg(format!("--scheduler-conf={}", conf_path.display()))
        .args([
            "--scheduler-name=volcano",
            "--leader-elect=false",
            "--schedule-period=500ms",
        ])
        .arg(format!("--listen-address=127.0.0.1:{metrics}"))
        .arg(format!("--healthz-address=127.0.0.1:{health}"));
    let started = Instant::now();
    let _scheduler = spawn_logged(command, &cluster.dir().join("vc-scheduler.log"))?;
    loop {
        let list = pods.list(&ListParams::default()).await?;
        let bound = list
            .items
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .count();
        if bound == tasks {
            let seconds = started.elapsed().as_secs_f64();
            let annotated = list
                .items
                .iter()
                .filter(|p| {
                    p.metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key("tandem.dev/gpu"))
                })
                .count();
            return Ok((seconds, annotated));
        }
        ensure!(
            started.elapsed() < RUN_LIMIT,
            "{bound} of {tasks} tasks bound after {RUN_LIMIT:?}:\n{}",
            cluster::tail(&cluster.dir().join("vc-scheduler.log"), 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
