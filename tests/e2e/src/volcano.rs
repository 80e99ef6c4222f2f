//! Volcano as the tiers start it: vc-scheduler built from Volcano's source with its CRDs, the
//! Volcano adapter as a process beside it, PodGroups, and the Volcano acceptance scenario
//! ([`scenario`]), which the `volcano` tier runs; the `node` tier runs pods through them on
//! real nodes.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use tandem_adapter_core::JobKeys;
use tandem_kube_common::placement::Placement;
use tandem_xtask::volcano::VolcanoBuild;

pub use crate::intake::{Adapter, SECRET_HEX, TOKEN, knowledge, post, profile, wait_ready};
use crate::intake::{expect_bad_requests, predict_v100, teach_p_prefers_x};

use crate::cluster::{
    ChildProcess, Cluster, ensure_namespace, free_ports, insecure_http_client, spawn_logged,
    wait_for_binding,
};

/// The namespace of the tests' pods.
pub const NAMESPACE: &str = "e2e";
/// The namespace Tandem's own objects live in.
pub const SYSTEM: &str = "tandem-system";
/// deploy/helm/tandem/files/volcano-scheduler.conf, with the adapter's URL for this test.
pub fn scheduler_conf(adapter_port: u16) -> String {
    let deployed = include_str!("../../../deploy/helm/tandem/files/volcano-scheduler.conf");
    deployed.replace(
        "http://tandem-volcano-adapter.tandem-system.svc:8888",
        &format!("http://127.0.0.1:{adapter_port}"),
    )
}

/// vc-scheduler: built by xtask, started against `cluster`, waited for until healthy.
pub struct Scheduler {
    /// The vc-scheduler process.
    pub process: ChildProcess,
}

impl Scheduler {
    /// Starts vc-scheduler from `build` against `cluster` with configuration `conf`.
    pub async fn start(cluster: &Cluster, build: &VolcanoBuild, conf: &str) -> Result<Self> {
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
            .arg("--scheduler-name=volcano")
            .arg("--leader-elect=false")
            .arg("--schedule-period=500ms")
            .arg(format!("--listen-address=127.0.0.1:{metrics}"))
            .arg("--enable-healthz=true")
            .arg(format!("--healthz-address=127.0.0.1:{health}"))
            .arg("-v=3");
        let mut process = spawn_logged(command, &cluster.dir().join("vc-scheduler.log"))?;
        let http = insecure_http_client()?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(r) = http
                .get(format!("http://127.0.0.1:{health}/healthz"))
                .send()
                .await
                && r.status().is_success()
            {
                return Ok(Self { process });
            }
            ensure!(
                process.is_running() && Instant::now() < deadline,
                "vc-scheduler did not get healthy:\n{}",
                process.log_tail(40)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.process.log_path()).unwrap_or_default()
    }
}

/// Installs every CRD of Volcano's source and waits until each is established.
pub async fn install_crds(client: &kube::Client, dir: &Path) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("no CRDs in {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text)
            .with_context(|| format!("{} is not a CRD", path.display()))?;
        names.push(crd.metadata.name.clone().unwrap_or_default());
        crds.create(&PostParams::default(), &crd)
            .await
            .with_context(|| format!("could not create the CRD of {}", path.display()))?;
    }
    ensure!(!names.is_empty(), "no CRDs in {}", dir.display());
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in names {
        loop {
            let crd = crds.get(&name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            ensure!(Instant::now() < deadline, "CRD {name} not established");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Starts the Volcano adapter on `port`, logging to `log`.
pub fn start_adapter(cluster: &Cluster, port: u16, log: &Path) -> Result<Adapter> {
    let dir = cluster.dir();
    let mut command = Command::new(crate::program("tandem-volcano-adapter")?);
    command
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--namespace", SYSTEM, "--identity", "e2e-volcano-adapter"])
        .arg("--id-secret-file")
        .arg(dir.join("id-secret"))
        .arg("--intake-token-file")
        .arg(dir.join("intake-token"))
        .args(cluster.placement_args())
        // Prices for the `cost` priority of (g); every model of the cluster has one.
        .args(["--gpu-price", "V100=2.48", "--gpu-price", "T4=0.35"])
        .args(["--gpu-price", "A100=3.0"])
        .env(
            "RUST_LOG",
            "tandem_volcano_adapter=debug,tandem_kube_common=debug,info",
        );
    Ok(Adapter {
        process: spawn_logged(command, log)?,
        url: format!("http://127.0.0.1:{port}"),
    })
}

/// A node of scenario `scenario` with one V100 advertised as two `nvidia.com/gpu` units
/// (time-slicing; `nvidia.com/gpu.count` says one device), so Volcano's own resource check
/// lets two tasks share it and Tandem decides whether they do.
pub async fn create_node(client: &kube::Client, name: &str, scenario: &str) -> Result<()> {
    create_node_of(client, name, scenario, "Tesla-V100-SXM2-16GB", 16_384).await
}

/// [`create_node`] with a GPU of another product and memory (MiB).
pub async fn create_node_of(
    client: &kube::Client,
    name: &str,
    scenario: &str,
    product: &str,
    memory_mib: u32,
) -> Result<()> {
    create_node_with(client, name, scenario, product, memory_mib, 1).await
}

/// [`create_node_of`] with `gpus` GPUs in Tandem's view (`nvidia.com/gpu.count`).
pub async fn create_node_with(
    client: &kube::Client,
    name: &str,
    scenario: &str,
    product: &str,
    memory_mib: u32,
    gpus: u32,
) -> Result<()> {
    let resources = json!({ "cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "2" });
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "tandem-e2e/scenario": scenario,
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.memory": memory_mib.to_string(),
                "nvidia.com/gpu.count": gpus.to_string(),
            },
        },
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "tandem-e2e: no kubelet, the test says so" }],
        },
    }))?;
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .with_context(|| format!("could not create node {name}"))?;
    Ok(())
}

/// The API resource of Volcano's PodGroups.
pub fn podgroup_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        "podgroups",
    )
}

/// A PodGroup of `min_member` in the default queue.
pub async fn create_podgroup(client: &kube::Client, name: &str, min_member: u32) -> Result<()> {
    create_podgroup_annotated(client, name, min_member, json!({})).await
}

/// A PodGroup of `min_member` in the default queue, with `annotations`.
pub async fn create_podgroup_annotated(
    client: &kube::Client,
    name: &str,
    min_member: u32,
    annotations: Value,
) -> Result<()> {
    let resource = podgroup_resource();
    let podgroups: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let podgroup: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": { "name": name, "namespace": NAMESPACE, "annotations": annotations },
        "spec": { "minMember": min_member, "queue": "default" },
    }))?;
    podgroups
        .create(&PostParams::default(), &podgroup)
        .await
        .with_context(|| format!("could not create PodGroup {name}"))?;
    Ok(())
}

/// A pod of job `job` in PodGroup `group` asking for one GPU on the nodes of `scenario`, for
/// vc-scheduler; bound to `at` = (node, gpu) if given (a co-runner placed earlier).
pub fn task_pod(
    name: &str,
    job: &str,
    group: &str,
    scenario: &str,
    at: Option<(&str, &str)>,
) -> Result<Pod> {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": { "tandem.dev/job": job },
            "annotations": { "scheduling.k8s.io/group-name": group },
        },
        "spec": {
            "schedulerName": "volcano",
            "nodeSelector": { "tandem-e2e/scenario": scenario },
            "containers": [{
                "name": "main",
                "image": "registry.invalid/none",
                "resources": {
                    "requests": { "cpu": "100m" },
                    "limits": { "nvidia.com/gpu": "1" },
                },
            }],
        },
    });
    if let Some((node, gpu)) = at {
        pod["spec"]["nodeName"] = json!(node);
        pod["metadata"]["annotations"]["tandem.dev/gpu"] = json!(gpu);
    }
    Ok(serde_json::from_value(pod)?)
}

/// The GPU placement annotation `pod` carries, if any.
pub fn annotation(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("tandem.dev/gpu").cloned())
}

/// What a person sees of why `pod` of PodGroup `group` waits: the PodGroup's condition
/// messages and the events of both.
pub async fn reasons(client: &kube::Client, pod: &str, group: &str) -> Result<Vec<String>> {
    let resource = podgroup_resource();
    let podgroups: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let mut found: Vec<String> = podgroups
        .get(group)
        .await?
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c["message"]
                .as_str()
                .map(|m| format!("PodGroup condition: {m}"))
        })
        .collect();
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    found.extend(
        events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(
                |e| matches!(e.involved_object.name.as_deref(), Some(n) if n == pod || n == group),
            )
            .filter_map(|e| e.message.map(|m| format!("event: {m}"))),
    );
    Ok(found)
}

/// The Volcano acceptance scenario (see the volcano tier).
pub async fn scenario(
    cluster: &Cluster,
    build: &VolcanoBuild,
    port: u16,
    adapter_log: &Path,
    scheduler: &mut Option<Scheduler>,
) -> Result<()> {
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    std::fs::write(cluster.dir().join("intake-token"), TOKEN)?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let key = |job: &str| keys.key(NAMESPACE, job);
    let client = cluster.client().await?;
    install_crds(&client, &build.crds()).await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    let http = reqwest::Client::new();
    let mut adapter = start_adapter(cluster, port, adapter_log)?;
    wait_ready(&http, &mut adapter).await?;
    *scheduler = Some(Scheduler::start(cluster, build, &scheduler_conf(port)).await?);

    // (f) Malformed verb bodies: 400 naming the field, and the adapter keeps serving.
    expect_bad_requests(
        &http,
        &adapter,
        "(f)",
        &[
            ("predicate", r#"{"task": {"UID": 5}}"#, "task.UID"),
            ("predicate", r#"{"task": {"UID": "u", "Pod": {}}}"#, "node"),
            (
                "prioritize",
                r#"{"task": {"UID": "u", "Pod": {}}, "nodes": "n1"}"#,
                "nodes",
            ),
            (
                "allocate",
                r#"{"task": {"UID": "u", "Pod": {"metadata": {"name": 7}}}}"#,
                "task.Pod",
            ),
            (
                "onSessionOpen",
                r#"{"Jobs": {"ns/pg": {"MinAvailable": "two"}}}"#,
                "Jobs.ns/pg.MinAvailable",
            ),
            ("deallocate", "not json", "deallocate"),
        ],
    )
    .await?;
    wait_ready(&http, &mut adapter).await?;

    // The test plays the node profiler: p suffers little beside x and a lot beside y; big
    // needs more memory than a V100 has. q is bound while the adapter is down (d); its profile
    // lets the restarted adapter place p beside it (a job of unknown memory shares with
    // nothing).
    let with_x = teach_p_prefers_x(
        &http,
        &adapter.url,
        key,
        &[
            ("g", profile(40.0, 20.0, 3_000)),
            ("q", profile(30.0, 10.0, 3_000)),
        ],
    )
    .await?;

    // (b) x runs on b-1, y on b-2 (placed earlier); p is the pending task.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let params = PostParams::default();
    for (node, scenario) in [
        ("b-1", "b"),
        ("b-2", "b"),
        ("a-1", "a"),
        ("e-1", "e"),
        ("e-2", "e"),
        ("e-3", "e"),
        ("d-1", "d"),
    ] {
        create_node(&client, node, scenario).await?;
    }
    cluster
        .create_placed(
            &pods,
            &task_pod("x-run", "x", "pg-x", "b", Some(("b-1", "b-1/0")))?,
        )
        .await?;
    cluster
        .create_placed(
            &pods,
            &task_pod("y-run", "y", "pg-y", "b", Some(("b-2", "b-2/0")))?,
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    create_podgroup(&client, "pg-p", 1).await?;
    pods.create(&params, &task_pod("p-run", "p", "pg-p", "b", None)?)
        .await?;
    let node = wait_for_binding(&client, NAMESPACE, "p-run", Duration::from_secs(60)).await;
    println!("(b) p-run was bound to {node:?}");
    ensure!(
        node.as_deref() == Some("b-1"),
        "p-run should share with x on b-1, got {node:?}"
    );

    // (c) The annotation names the GPU.
    let bound = pods.get("p-run").await?;
    println!(
        "(c) p-run annotation tandem.dev/gpu = {:?}",
        annotation(&bound)
    );
    ensure!(annotation(&bound).as_deref() == Some("b-1/0"));
    // Signed for the pod, as tandem-node checks it.
    let (placement, uid) = placement_of(&bound)?;
    let verifier = cluster.placement_verifier();
    let signer = verifier
        .verify(&uid, &placement)
        .map_err(|e| anyhow::anyhow!("p-run's placement does not verify: {e}"))?;
    println!("(c) p-run's tandem.dev/placement-signature verifies (key {signer})");

    // (a) big needs 20,000 MiB: no GPU fits; it stays Pending with Tandem's reason shown.
    create_podgroup(&client, "pg-big", 1).await?;
    pods.create(&params, &task_pod("big-run", "big", "pg-big", "a", None)?)
        .await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let reason = loop {
        let found = reasons(&client, "big-run", "pg-big").await?;
        if let Some(reason) = found.iter().find(|m| m.contains("Tandem")) {
            break reason.clone();
        }
        ensure!(
            Instant::now() < deadline,
            "no Tandem reason for big-run: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!("(a) big-run: {reason}");
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

    // (e) A gang of two: e-1's GPU holds a co-runner, e-2 and e-3 are idle. Volcano alone
    // could put both members on one GPU (each node advertises two units); Tandem gives each
    // an idle GPU of its own.
    cluster
        .create_placed(
            &pods,
            &task_pod("x-e", "x", "pg-xe", "e", Some(("e-1", "e-1/0")))?,
        )
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    create_podgroup(&client, "pg-gang", 2).await?;
    for member in ["gang-0", "gang-1"] {
        pods.create(&params, &task_pod(member, "g", "pg-gang", "e", None)?)
            .await?;
    }
    let mut gpus = Vec::new();
    for member in ["gang-0", "gang-1"] {
        let node = wait_for_binding(&client, NAMESPACE, member, Duration::from_secs(60)).await;
        let gpu = annotation(&pods.get(member).await?);
        println!("(e) {member} was bound to {node:?}, tandem.dev/gpu = {gpu:?}");
        ensure!(node.is_some(), "{member} was not scheduled");
        gpus.push(gpu.context("a gang member has no GPU record")?);
    }
    ensure!(gpus[0] != gpus[1], "the gang members share {}", gpus[0]);
    ensure!(
        !gpus.contains(&"e-1/0".to_owned()),
        "a gang member shares with x-e: {gpus:?}"
    );

    // (d) Kill the adapter: vc-scheduler goes on without it (ignorable).
    let before = knowledge(&http, &adapter.url).await?;
    let stored: Api<ConfigMap> = Api::namespaced(client.clone(), SYSTEM);
    ensure!(
        stored.get_opt("tandem-knowledge").await?.is_some(),
        "no knowledge base in the cluster"
    );
    adapter.process.kill_now();
    create_podgroup(&client, "pg-q", 1).await?;
    pods.create(&params, &task_pod("q-run", "q", "pg-q", "d", None)?)
        .await?;
    let node = wait_for_binding(&client, NAMESPACE, "q-run", Duration::from_secs(60)).await;
    println!("(d) with the adapter down, q-run was bound to {node:?}");
    ensure!(
        node.is_some(),
        "vc-scheduler did not schedule without the adapter"
    );
    let log = scheduler.as_ref().map(Scheduler::log).unwrap_or_default();
    let failed_call = log
        .lines()
        .find(|l| l.contains("failed with error") && l.contains("connection refused"))
        .unwrap_or_default();
    println!("(d) vc-scheduler log: {failed_call}");
    ensure!(
        !failed_call.is_empty(),
        "vc-scheduler did not log the failed extender call"
    );

    // Restarted, it resumes from the ConfigMap: the same knowledge, nothing lost.
    let mut adapter = start_adapter(cluster, port, &cluster.dir().join("adapter-2.log"))?;
    wait_ready(&http, &mut adapter).await?;
    let after = knowledge(&http, &adapter.url).await?;
    for field in ["profiles", "outcomes", "residual_observations", "pairs"] {
        println!(
            "(d) knowledge {field}: before kill {} / after restart {}",
            before[field], after[field]
        );
        ensure!(
            before[field] == after[field],
            "{field} changed across the restart"
        );
    }
    let again = predict_v100(&http, &adapter.url, json!([key("p"), key("x")])).await?;
    ensure!(
        again == with_x,
        "the restarted engine predicts differently: {again} vs {with_x}"
    );
    // And it decides again: a task on d-1 (its GPU holds q-run, bound while Tandem was down)
    // gets Tandem's GPU record.
    create_podgroup(&client, "pg-p2", 1).await?;
    pods.create(&params, &task_pod("p2-run", "p", "pg-p2", "d", None)?)
        .await?;
    let node = wait_for_binding(&client, NAMESPACE, "p2-run", Duration::from_secs(60)).await;
    let gpu = annotation(&pods.get("p2-run").await?);
    println!("(d) after the restart, p2-run was bound to {node:?}, tandem.dev/gpu = {gpu:?}");
    ensure!(
        gpu.as_deref() == Some("d-1/0"),
        "the restarted adapter did not record p2-run's GPU"
    );
    declarations(&client).await?;
    repatched(cluster, &client).await
}

/// (r) The placement allocate writes is signed for the pod; its owner re-patching it (here,
/// to claim both GPUs of the node) breaks the signature, and the adapter's view no longer
/// counts the pod where the re-patch says but, as a pod bound without Tandem's record, on
/// one GPU for the one it requests: the next task still finds the other GPU idle.
pub async fn repatched(cluster: &Cluster, client: &kube::Client) -> Result<()> {
    create_node_with(client, "r-1", "r", "Tesla-V100-SXM2-16GB", 16_384, 2).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let params = PostParams::default();
    let verifier = cluster.placement_verifier();
    create_podgroup(client, "pg-r-own", 1).await?;
    pods.create(&params, &task_pod("r-own", "r-own", "pg-r-own", "r", None)?)
        .await?;
    let node = wait_for_binding(client, NAMESPACE, "r-own", Duration::from_secs(60)).await;
    ensure!(node.as_deref() == Some("r-1"), "r-own went to {node:?}");
    let own = pods.get("r-own").await?;
    let (placement, uid) = placement_of(&own)?;
    let key = verifier
        .verify(&uid, &placement)
        .map_err(|e| anyhow::anyhow!("allocate's placement does not verify: {e}"))?;
    println!(
        "(r) r-own was allocated {} on r-1, signed with key {key}",
        placement.gpu_list()
    );

    // The pod's owner claims both GPUs, keeping Tandem's signature.
    let claim = json!({ "metadata": { "annotations": { "tandem.dev/gpu": "r-1/0,r-1/1" } } });
    pods.patch("r-own", &PatchParams::default(), &Patch::Merge(&claim))
        .await?;
    let (forged, _) = placement_of(&pods.get("r-own").await?)?;
    let broken = verifier
        .verify(&uid, &forged)
        .err()
        .context("the re-patched placement still verifies")?;
    println!(
        "(r) the owner re-patched it to {}: {broken}",
        forged.gpu_list()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    create_podgroup(client, "pg-r-next", 1).await?;
    pods.create(
        &params,
        &task_pod("r-next", "r-next", "pg-r-next", "r", None)?,
    )
    .await?;
    let node = wait_for_binding(client, NAMESPACE, "r-next", Duration::from_secs(60)).await;
    let why = reasons(client, "r-next", "pg-r-next")
        .await
        .unwrap_or_default();
    ensure!(
        node.as_deref() == Some("r-1"),
        "r-next was not bound to r-1 ({node:?}): the view counts r-own on both GPUs its \
         re-patched placement names ({why:?})"
    );
    let next = pods.get("r-next").await?;
    let (placement, uid) = placement_of(&next)?;
    verifier
        .verify(&uid, &placement)
        .map_err(|e| anyhow::anyhow!("r-next's placement does not verify: {e}"))?;
    println!(
        "(r) r-next was bound to r-1 on {}, signed for it",
        placement.gpu_list()
    );
    Ok(())
}

/// The placement `pod` carries and its UID.
pub fn placement_of(pod: &Pod) -> Result<(Placement, String)> {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let placement = Placement::read(|key| annotations.get(key).map(String::as_str))?
        .context("the pod carries no placement")?;
    Ok((placement, pod.metadata.uid.clone().unwrap_or_default()))
}

/// VGG-19 at batch 256 and ResNet-18 at batch 32, as `tandem declare --format json` prints
/// them: the engine predicts about 25 GiB for the first (more than a T4's 15), 2 for the second.
pub const VGG19_B256: &str = r#"{"params_mib": 527.79, "activations_mib": 30545.92, "input_mib": 147.0, "batch_size": 256, "gflops": 5016.0, "conv_layers": 16, "linear_layers": 3, "activation_layers": 18, "other_layers": 6}"#;
/// A declared model summary of ResNet-18 at batch 32.
pub const RESNET18: &str = r#"{"params_mib": 44.59, "activations_mib": 909.25, "input_mib": 18.38, "batch_size": 32, "gflops": 58.0, "conv_layers": 20, "linear_layers": 1, "activation_layers": 17, "other_layers": 22}"#;

/// (g) What tasks declare in their pods' annotations, on nodes of scenario `g`.
pub async fn declarations(client: &kube::Client) -> Result<()> {
    // Two GPUs each: vgg-big, a model past the memory model's training data, shares its GPU
    // with nothing it was not seen beside, and the tasks after it still find a GPU free on
    // either node, so their priorities alone choose.
    create_node_with(client, "g-t4", "g", "Tesla-T4", 15_360, 2).await?;
    create_node_with(client, "g-a100", "g", "NVIDIA-A100-SXM4-40GB", 40_960, 2).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let params = PostParams::default();
    let declaring = |name: &str, annotations: Value| -> Result<Pod> {
        let mut pod = task_pod(name, name, &format!("pg-{name}"), "g", None)?;
        let map = pod.metadata.annotations.get_or_insert_default();
        for (key, value) in annotations.as_object().into_iter().flatten() {
            map.insert(key.clone(), value.as_str().unwrap_or_default().to_owned());
        }
        Ok(pod)
    };

    create_podgroup(client, "pg-vgg-big", 1).await?;
    pods.create(
        &params,
        &declaring("vgg-big", json!({ "tandem.dev/model": VGG19_B256 }))?,
    )
    .await?;
    let node = wait_for_binding(client, NAMESPACE, "vgg-big", Duration::from_secs(60)).await;
    println!("(g) vgg-big (VGG-19 b256, ~25 GiB predicted) was bound to {node:?}");
    ensure!(
        node.as_deref() == Some("g-a100"),
        "vgg-big should land on the A100, got {node:?}"
    );

    create_podgroup(client, "pg-bad-model", 1).await?;
    pods.create(
        &params,
        &declaring("bad-model", json!({ "tandem.dev/model": "resnet50" }))?,
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let refused = loop {
        let found = reasons(client, "bad-model", "pg-bad-model").await?;
        if let Some(reason) = found.iter().find(|r| r.contains("tandem.dev/model")) {
            break reason.clone();
        }
        ensure!(
            Instant::now() < deadline,
            "no refusal naming the annotation for bad-model: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!("(g) bad-model: {refused}");
    ensure!(refused.contains("resnet50"), "{refused}");
    ensure!(
        pods.get("bad-model")
            .await?
            .spec
            .and_then(|s| s.node_name)
            .is_none(),
        "a refused task was bound"
    );

    // The same declarations on the pod (thrifty) and on its PodGroup (urgent).
    for (pod, priority, expect, on_group) in [
        ("thrifty", "cost", "g-t4", false),
        ("urgent", "latency", "g-a100", true),
    ] {
        let annotations = json!({
            "tandem.dev/priority": priority,
            "tandem.dev/work": "1000 steps at 20/s on A100, 5/s on T4",
            "tandem.dev/model": RESNET18,
        });
        let group = format!("pg-{pod}");
        if on_group {
            create_podgroup_annotated(client, &group, 1, annotations).await?;
            pods.create(&params, &declaring(pod, json!({}))?).await?;
        } else {
            create_podgroup(client, &group, 1).await?;
            pods.create(&params, &declaring(pod, annotations)?).await?;
        }
        let node = wait_for_binding(client, NAMESPACE, pod, Duration::from_secs(60)).await;
        let carrier = if on_group { "its PodGroup" } else { "the pod" };
        println!("(g) {pod} ({priority}, declared on {carrier}) was bound to {node:?}");
        ensure!(
            node.as_deref() == Some(expect),
            "{pod} ({priority}, declared on {carrier}) should land on {expect}, got {node:?}"
        );
    }
    Ok(())
}
