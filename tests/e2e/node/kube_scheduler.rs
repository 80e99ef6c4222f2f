//! The `node` tier: the GPU Tandem chooses is the GPU the container gets, on real nodes.
//!
//! Two nodes (`tandem-a`, `tandem-b`: containerd with NRI, runc and a kubelet each, four fake
//! V100s shared four ways, tandem-e2e's [`Nodes`]) run `tandem-node`, Tandem's NRI plugin,
//! beside a real control plane. Pods really run: each prints what it sees of the GPUs
//! (`NVIDIA_VISIBLE_DEVICES`, the `/dev/nvidia*` device nodes, `CUDA_*` variables) and the
//! test reads it back as `kubectl logs` would.
//!
//! The cluster is filled the same way for each scheduler: six pods of a memory-hungry job hold
//! every GPU but `tandem-a/2` and `tandem-b/3`; `x` runs on `tandem-a/2`, `y` on `tandem-b/3`.
//! The knowledge base says `p` suffers little beside `x` and much beside `y`, and `w` the
//! reverse. Then:
//!
//! - (a) through `tandem-kube-scheduler` (the framework plugin): `p` is paired with `x` on
//!   `tandem-a/2` and both containers see GPU 2's UUID and its device node; `w`, kept apart
//!   from `x`, sees `tandem-b/3`'s;
//!   (f) tandem-node on `tandem-a` is killed: a pod placed meanwhile that requires it
//!   (`required-plugins.noderesource.dev`) is not created — containerd's validator says so
//!   in its events — and runs with its GPU once tandem-node is back; the running containers
//!   are the same containers, never restarted, still seeing their GPU;
//! - (b) the same through kube-scheduler with the Tandem extender, where
//!   (c) `tandem-a` runs in MPS mode: `p` gets `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` with the
//!   MiB the guard reserved (the pod's `tandem.dev/gpu-memory-mib`);
//!   (e) pods that exit 0 become knowledge through the adapter's watch: two solo runs, then a
//!   pair Tandem put on one GPU, and the knowledge base counts one more outcome;
//!   (d) with the adapter down, the scheduler's fallback binds GPU pods without Tandem's
//!   annotation: on `tandem-a` (policy `leave`) the pod runs as the device plugin left it, on
//!   `tandem-b` (policy `refuse`) its container is refused with the reason in its events;
//!   each node's metrics count its case;
//! - (g) on one node, the placements a tenant can write itself — a one-GPU pod bound by its own
//!   `spec.nodeName` and annotated with every GPU, unsigned, with another pod's signature, or
//!   signed by the cluster's key for four GPUs; a copy of a victim's whole placement — are each
//!   refused at the node with the reason in the pod's events, and a pod that asks for no GPU
//!   but sets `NVIDIA_VISIBLE_DEVICES=all` runs seeing `void`.
//!
//! Every placement is signed, as Tandem's schedulers sign it: the schedulers with the
//! cluster's key, the residents by the test ([`Cluster::create_placed`]); each `tandem-node`
//! verifies with the cluster's public key.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use tandem_adapter_core::JobKeys;
use tandem_api::{Outcome, Policy};
use tandem_e2e::nodes::{self, NodeSpec, Nodes, component_metrics, container_of, metric};
use tandem_e2e::pairing::{self, NODE_A, NODE_B, P_GOES_TO, W_GOES_TO};
use tandem_host::{HostConfig, Runtime};

use crate::cluster::{Cluster, ensure_namespace, free_port, scheduler_config};
use crate::extender::{NAMESPACE, SECRET_HEX, SYSTEM, knowledge, post, profile};

/// How long a pod may take to be scheduled, started and print (a kubelet's first pod on a
/// busy two-core machine takes seconds).
const RUNS_WITHIN: Duration = Duration::from_secs(90);

/// [`pairing::PAIRS`] as outcomes between keyed ids, each observed [`pairing::OBSERVED`] times.
fn outcomes(key: &dyn Fn(&str) -> String) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for _ in 0..pairing::OBSERVED {
        for (a, b, colocated) in pairing::PAIRS {
            outcomes.push(Outcome {
                gpu_model: "V100".into(),
                jobs: vec![key(a), key(b)],
                solo_s: vec![100.0, 100.0],
                colocated_s: colocated.to_vec(),
            });
        }
    }
    outcomes
}

/// `tandem-node`, as `cargo xtask e2e node` built it.
fn node_binary() -> Result<PathBuf> {
    let path = std::env::var_os(tandem_xtask::tasks::NODE_BIN_VAR).with_context(|| {
        format!(
            "{} is not set: run the node tier with `cargo xtask e2e node`",
            tandem_xtask::tasks::NODE_BIN_VAR
        )
    })?;
    Ok(PathBuf::from(path))
}

/// A test pod of job `job` ([`nodes::gpu_pod`]), sleeping `seconds`, for `scheduler`.
fn job_pod(name: &str, job: &str, seconds: u32, scheduler: Option<&str>) -> Result<Pod> {
    let mut pod = nodes::gpu_pod(name, 1, seconds);
    pod["metadata"]["labels"] = json!({"tandem.dev/job": job});
    if let Some(scheduler) = scheduler {
        pod["spec"]["schedulerName"] = json!(scheduler);
    }
    Ok(serde_json::from_value(pod)?)
}

/// `pod` as a test writes a placement of Tandem's on it: `gpus` (`<node>/<index>,…`) and,
/// for a one-GPU placement, `reserved_mib` ([`Cluster::create_placed`] signs it).
fn at(mut pod: Pod, gpus: &str, reserved_mib: Option<u32>) -> Pod {
    let annotations = pod.metadata.annotations.get_or_insert_default();
    annotations.insert("tandem.dev/gpu".into(), gpus.into());
    if let Some(mib) = reserved_mib {
        annotations.insert("tandem.dev/gpu-memory-mib".into(), mib.to_string());
    }
    pod
}

/// Starts two real nodes and tandem-node on each, with `a_args` and `b_args`.
async fn start_nodes(
    cluster: &Cluster,
    a_args: &[&str],
    b_args: &[&str],
) -> Result<(Nodes, BTreeMap<&'static str, u16>)> {
    let mut nodes =
        Nodes::start(cluster, &[NodeSpec::v100(NODE_A), NodeSpec::v100(NODE_B)]).await?;
    let binary = node_binary()?;
    let mut ports = BTreeMap::new();
    for (name, args) in [(NODE_A, a_args), (NODE_B, b_args)] {
        let port = free_port()?;
        ports.insert(name, port);
        nodes
            .node(name)?
            .start_component(&binary, cluster, port, args)
            .await?;
    }
    Ok((nodes, ports))
}

/// Places [`pairing::RESIDENTS`] as earlier decisions of Tandem's (signed with the cluster's
/// key, each reserving its job's memory) and waits until each runs and sees the GPU its
/// annotation names.
async fn place_residents(
    cluster: &Cluster,
    client: &kube::Client,
    nodes: &mut Nodes,
) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    for (name, job, node, index) in pairing::RESIDENTS {
        let pod = job_pod(name, job, 3_600, None)?;
        let reserved = Some(pairing::reserved_mib(job));
        cluster
            .create_placed(&pods, &at(pod, &format!("{node}/{index}"), reserved))
            .await?;
    }
    for (name, _, node, index) in pairing::RESIDENTS {
        let seen = nodes::seen(client, NAMESPACE, name, RUNS_WITHIN).await?;
        nodes.expect_gpu(name, &seen, node, *index)?;
    }
    println!(
        "residents: fill on every GPU but {NODE_A}/2 and {NODE_B}/3; x on {NODE_A}/2, y on {NODE_B}/3"
    );
    Ok(())
}

async fn placement(
    client: &kube::Client,
    name: &str,
) -> Result<(String, u32, BTreeMap<String, String>)> {
    nodes::placement(client, NAMESPACE, name, RUNS_WITHIN).await
}

async fn event_with(client: &kube::Client, name: &str, needle: &str) -> Result<String> {
    nodes::event_with(client, NAMESPACE, name, needle, RUNS_WITHIN).await
}

/// Places `p` and `w` through the scheduler and checks what their containers see: `p` beside
/// `x` on a/2, `w` beside `y` on b/3. Returns `p`'s annotations.
async fn pair_and_keep_apart(
    client: &kube::Client,
    nodes: &mut Nodes,
    scheduler: Option<&str>,
    label: &str,
) -> Result<BTreeMap<String, String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    pods.create(
        &PostParams::default(),
        &job_pod("p-run", "p", 3_600, scheduler)?,
    )
    .await?;
    let (node, index, annotations) = placement(client, "p-run").await?;
    ensure!(
        (node.as_str(), index) == P_GOES_TO,
        "{label}: p should pair with x on {P_GOES_TO:?}, went to {node}/{index}"
    );
    let p = nodes::seen(client, NAMESPACE, "p-run", RUNS_WITHIN).await?;
    nodes.expect_gpu("p-run", &p, P_GOES_TO.0, P_GOES_TO.1)?;
    let x = nodes::seen(client, NAMESPACE, "x-run", RUNS_WITHIN).await?;
    ensure!(
        x.visible == p.visible,
        "x and p should share a GPU: {x:?} {p:?}"
    );
    println!("({label}) p-run annotated {node}/{index}; x-run saw {x:?}; p-run saw {p:?}");

    pods.create(
        &PostParams::default(),
        &job_pod("w-run", "w", 3_600, scheduler)?,
    )
    .await?;
    let (node, index, _) = placement(client, "w-run").await?;
    ensure!(
        (node.as_str(), index) == W_GOES_TO,
        "{label}: w should be kept apart from x, beside y on {W_GOES_TO:?}; went to {node}/{index}"
    );
    let w = nodes::seen(client, NAMESPACE, "w-run", RUNS_WITHIN).await?;
    nodes.expect_gpu("w-run", &w, W_GOES_TO.0, W_GOES_TO.1)?;
    ensure!(w.visible != p.visible);
    println!("({label}) w-run kept apart: annotated {node}/{index}, saw {w:?}");
    Ok(annotations)
}

/// Prints the control plane's and the nodes' logs when `result` is an error.
fn report(result: &Result<()>, cluster: &Cluster, nodes: &mut Nodes) {
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!("{}", nodes.log_tails());
    }
}

#[tokio::test]
async fn through_the_framework_plugin_containers_see_the_gpu_tandem_chose() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let binary = crate::plugin::plugin_scheduler().await?;
    let mut cluster = Cluster::start_control_plane_for_nodes(&[NODE_A, NODE_B]).await?;
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let key = |job: &str| keys.key(NAMESPACE, job);
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;

    // The knowledge base, as the extender's intake would have stored it.
    let runtime = Runtime::from_bytes(tandem_engine_embedded::COMPONENT, HostConfig::default())?;
    let mut engine = runtime.bootstrap(&Policy::default(), tandem_adapter_core::SEED)?;
    for (job, util, access, mem) in pairing::PROFILES {
        engine.observe_profile(
            &key(job),
            &tandem_api::Profile {
                gpu_util_pct: *util,
                mem_access_pct: *access,
                mem_used_mib: *mem,
                gpu_model: "V100".into(),
            },
        )?;
    }
    for outcome in outcomes(&key) {
        engine.observe_outcome(&outcome)?;
    }
    crate::plugin::store_knowledge(&client, engine.snapshot()?).await?;
    let config = crate::plugin::plugin_config(&crate::plugin::args(cluster.dir()));
    cluster.start_scheduler_binary(&binary, &config).await?;

    let (mut nodes, _ports) = start_nodes(&cluster, &[], &[]).await?;
    let scheduler = Some(crate::plugin::SCHEDULER_NAME);
    let scenario = async {
        place_residents(&cluster, &client, &mut nodes).await?;
        // (a)
        pair_and_keep_apart(&client, &mut nodes, scheduler, "a").await?;

        // (f) tandem-node on tandem-a crashes. One GPU is freed for a new pod.
        let before = [
            container_of(&client, NAMESPACE, "x-run").await?,
            container_of(&client, NAMESPACE, "p-run").await?,
        ];
        nodes.node(NODE_A)?.kill_component();
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        pods.delete("fill-a-0", &DeleteParams::default().grace_period(0))
            .await?;
        let mut late = job_pod("late-run", "x", 3_600, scheduler)?;
        late.metadata.annotations = Some(BTreeMap::from([(
            "required-plugins.noderesource.dev".to_owned(),
            r#"["tandem-node"]"#.to_owned(),
        )]));
        pods.create(&PostParams::default(), &late).await?;
        let (node, index, _) = placement(&client, "late-run").await?;
        ensure!(
            (node.as_str(), index) == (NODE_A, 0),
            "late-run went to {node}/{index}"
        );
        let refused = event_with(&client, "late-run", "tandem-node").await?;
        println!("(f) while tandem-node is down, late-run's container is not created: {refused}");
        // Back: the kubelet's next try creates it with its GPU.
        let port = free_port()?;
        nodes
            .node(NODE_A)?
            .start_component(&node_binary()?, &cluster, port, &[])
            .await?;
        let late = nodes::seen(&client, NAMESPACE, "late-run", Duration::from_secs(180)).await?;
        nodes.expect_gpu("late-run", &late, NODE_A, 0)?;
        println!("(f) tandem-node restarted; late-run saw {late:?}");
        let after = [
            container_of(&client, NAMESPACE, "x-run").await?,
            container_of(&client, NAMESPACE, "p-run").await?,
        ];
        ensure!(
            before == after,
            "running containers changed: {before:?} -> {after:?}"
        );
        ensure!(after.iter().all(|(_, restarts)| *restarts == 0));
        let p = nodes::seen(&client, NAMESPACE, "p-run", RUNS_WITHIN).await?;
        nodes.expect_gpu("p-run", &p, P_GOES_TO.0, P_GOES_TO.1)?;
        println!("(f) x-run and p-run: same containers {after:?}, never restarted");
        let metrics = component_metrics(port).await?;
        ensure!(
            metric(
                &metrics,
                r#"tandem_node_containers_total{case="placed",action="assigned"}"#
            ) >= 1.0,
            "{metrics}"
        );
        Ok(())
    };
    let result = scenario.await;
    report(&result, &cluster, &mut nodes);
    Nodes::delete_pods(&client, NAMESPACE).await.ok();
    result
}

#[tokio::test]
async fn through_the_extender_containers_see_the_gpu_and_memory_limit_tandem_chose() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let port = free_port()?;
    let mut cluster = Cluster::start_control_plane_for_nodes(&[NODE_A, NODE_B]).await?;
    cluster
        .start_scheduler(&scheduler_config(Some(port)))
        .await?;
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    std::fs::write(cluster.dir().join("intake-token"), crate::extender::TOKEN)?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let key = |job: &str| keys.key(NAMESPACE, job);
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    let http = reqwest::Client::new();
    let adapter_log = cluster.dir().join("adapter.log");
    let mut adapter = crate::extender::start_adapter(&cluster, port, &adapter_log)?;
    crate::extender::wait_ready(&http, &mut adapter).await?;

    let profiles: Vec<Value> = pairing::PROFILES
        .iter()
        .map(|(job, util, access, mem)| json!({"job": key(job), "profile": profile(*util, *access, *mem)}))
        .collect();
    post(
        &http,
        &format!("{}/v1/profiles", adapter.url),
        json!({"profiles": profiles}),
    )
    .await?;
    let outcomes: Vec<Value> = outcomes(&key)
        .into_iter()
        .map(|o| json!({"gpu_model": o.gpu_model, "jobs": o.jobs, "solo_s": o.solo_s, "colocated_s": o.colocated_s}))
        .collect();
    post(
        &http,
        &format!("{}/v1/outcomes", adapter.url),
        json!({"outcomes": outcomes}),
    )
    .await?;

    let (mut nodes, ports) = start_nodes(
        &cluster,
        &["--memory-limit", "mps"],
        &["--without-annotation", "refuse"],
    )
    .await?;
    let scenario = async {
        place_residents(&cluster, &client, &mut nodes).await?;
        // (b) and (c)
        let annotations = pair_and_keep_apart(&client, &mut nodes, None, "b").await?;
        let reserved = annotations
            .get("tandem.dev/gpu-memory-mib")
            .context("p-run carries no memory reservation")?;
        let p = nodes::seen(&client, NAMESPACE, "p-run", RUNS_WITHIN).await?;
        let limit = format!("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0={reserved}M");
        ensure!(p.env.contains(&limit), "p-run should see {limit}: {p:?}");
        println!(
            "(c) p-run reserved {reserved} MiB; its container (MPS node) saw {:?}",
            p.env
        );

        // (e) Runs that exit 0 teach the adapter, through its watch of the pods.
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        pods.delete("fill-a-0", &DeleteParams::default().grace_period(0))
            .await?;
        let before = knowledge(&http, &adapter.url).await?;
        for (name, job) in [("s-solo", "s"), ("t-solo", "t")] {
            pods.create(&PostParams::default(), &job_pod(name, job, 4, None)?)
                .await?;
            nodes::wait_for_phase(&client, NAMESPACE, name, "Succeeded", RUNS_WITHIN).await?;
        }
        for (name, job) in [("s-pair", "s"), ("t-pair", "t")] {
            pods.create(&PostParams::default(), &job_pod(name, job, 10, None)?)
                .await?;
        }
        let (s_node, s_index, _) = placement(&client, "s-pair").await?;
        let (t_node, t_index, _) = placement(&client, "t-pair").await?;
        ensure!(
            (s_node.as_str(), s_index) == (t_node.as_str(), t_index),
            "s-pair and t-pair should share the only free GPU: {s_node}/{s_index} {t_node}/{t_index}"
        );
        for name in ["s-pair", "t-pair"] {
            nodes::wait_for_phase(&client, NAMESPACE, name, "Succeeded", RUNS_WITHIN).await?;
        }
        let outcomes_before = before["outcomes"].as_u64().unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(60);
        let after = loop {
            let now = knowledge(&http, &adapter.url).await?;
            if now["outcomes"].as_u64().unwrap_or(0) > outcomes_before {
                break now;
            }
            if Instant::now() > deadline {
                bail!(
                    "the pair's outcome was not learned: {}\n{}",
                    now["outcomes"],
                    crate::cluster::tail(&adapter_log, 40)
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        println!(
            "(e) solo runs and a pair on {s_node}/{s_index} exited 0; the knowledge base went \
             from {} to {} outcomes, {} to {} workloads with a speed",
            outcomes_before, after["outcomes"], before["speed_workloads"], after["speed_workloads"]
        );

        // (d) The adapter is down: the scheduler binds GPU pods itself, without Tandem's
        // annotation. tandem-a leaves them as they are, tandem-b refuses them.
        adapter.process.kill_now();
        for (name, node) in [("fallback-a", NODE_A), ("fallback-b", NODE_B)] {
            let mut pod = job_pod(name, "fb", 3_600, None)?;
            pod.spec.as_mut().context("spec")?.node_selector = Some(BTreeMap::from([(
                "kubernetes.io/hostname".to_owned(),
                node.to_owned(),
            )]));
            pods.create(&PostParams::default(), &pod).await?;
        }
        let left = nodes::seen(&client, NAMESPACE, "fallback-a", RUNS_WITHIN).await?;
        println!(
            "(d) fallback-a, bound without Tandem on {NODE_A} (policy leave), runs and saw {left:?}"
        );
        let refused = event_with(&client, "fallback-b", "placed without Tandem").await?;
        println!("(d) fallback-b on {NODE_B} (policy refuse): {refused}");
        let a = component_metrics(ports[NODE_A]).await?;
        let b = component_metrics(ports[NODE_B]).await?;
        let series = |action: &str| {
            format!(
                r#"tandem_node_containers_total{{case="without_annotation",action="{action}"}}"#
            )
        };
        ensure!(metric(&a, &series("left")) >= 1.0, "{a}");
        ensure!(metric(&b, &series("refused")) >= 1.0, "{b}");
        println!(
            "(d) {NODE_A} counts {} left, {NODE_B} counts {} refused",
            metric(&a, &series("left")),
            metric(&b, &series("refused"))
        );
        ensure!(
            metric(&a, r#"tandem_node_memory_limits_total{mode="mps"}"#) >= 1.0,
            "{a}"
        );
        Ok(())
    };
    let result = scenario.await;
    report(&result, &cluster, &mut nodes);
    if result.is_err() {
        eprintln!(
            "--- adapter ---\n{}",
            crate::cluster::tail(&adapter_log, 60)
        );
    }
    Nodes::delete_pods(&client, NAMESPACE).await.ok();
    result
}

/// How long an attack pod may take to be refused or to run.
const ATTACK_WITHIN: Duration = Duration::from_secs(90);

/// Attacks on the placement, each made on a real node against the real `tandem-node`: pods a
/// tenant can create (`spec.nodeName` set, annotations of its own choosing), and one the test
/// signs with the cluster's trusted key, to show that a valid signature does not lift the
/// node's own checks. Each must be refused at the node with its reason in the pod's events; a
/// pod that asks for no GPU yet sets `NVIDIA_VISIBLE_DEVICES=all` must run seeing none. Every
/// attack is tried before the test fails, so its message lists each one that went through.
#[tokio::test]
async fn placements_tandem_did_not_make_are_refused_at_the_node() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let cluster = Cluster::start_control_plane_for_nodes(&[NODE_A]).await?;
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    let mut nodes = Nodes::start(&cluster, &[NodeSpec::v100(NODE_A)]).await?;
    let port = free_port()?;
    nodes
        .node(NODE_A)?
        .start_component(&node_binary()?, &cluster, port, &["--memory-limit", "mps"])
        .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let every_gpu: Vec<String> = (0..nodes::GPUS_PER_NODE)
        .map(|index| format!("{NODE_A}/{index}"))
        .collect();
    let scenario = async {
        // The victim: a pod Tandem placed on tandem-a/2, signed as a scheduler signs.
        let victim: Pod = serde_json::from_value(nodes::gpu_pod("victim", 1, 3_600))?;
        let victim = cluster
            .create_placed(&pods, &at(victim, &format!("{NODE_A}/2"), Some(4_000)))
            .await?;
        let seen = nodes::seen(&client, NAMESPACE, "victim", RUNS_WITHIN).await?;
        nodes.expect_gpu("victim", &seen, NODE_A, 2)?;
        let placed = victim.metadata.annotations.clone().unwrap_or_default();
        let signature = placed
            .get("tandem.dev/placement-signature")
            .context("the victim's placement is not signed")?
            .clone();
        println!("victim runs on {NODE_A}/2 and saw {seen:?}");

        // Tenants' pods: each requests one GPU and binds itself (`spec.nodeName`), annotated
        // as it likes.
        let grab = every_gpu.join(",");
        let tenants = [
            // (1) Every GPU, no memory reservation, no signature.
            (
                "grab-unsigned",
                json!({"tandem.dev/gpu": grab}),
                "not signed",
            ),
            // (2) The same with the victim's signature copied onto it.
            (
                "grab-copied",
                json!({"tandem.dev/gpu": grab, "tandem.dev/placement-signature": signature}),
                "does not match the pod and its placement",
            ),
            // (2') The victim's whole placement copied, to run beside it.
            (
                "beside-victim",
                json!(placed),
                "does not match the pod and its placement",
            ),
        ];
        for (name, annotations, _) in &tenants {
            let mut pod = nodes::gpu_pod(name, 1, 3_600);
            pod["spec"]["nodeName"] = json!(NODE_A);
            pod["metadata"]["annotations"] = annotations.clone();
            pods.create(&PostParams::default(), &serde_json::from_value(pod)?)
                .await?;
        }
        // (3) A valid signature of the cluster's own key, for every GPU, on a one-GPU pod.
        let signed: Pod = serde_json::from_value(nodes::gpu_pod("grab-signed", 1, 3_600))?;
        cluster
            .create_placed(&pods, &at(signed, &grab, None))
            .await?;

        let mut went_through = Vec::new();
        let expected = tenants
            .iter()
            .map(|(name, _, refusal)| (*name, *refusal))
            .chain([("grab-signed", "requests 1")]);
        for (name, refusal) in expected {
            match nodes::fate(&client, NAMESPACE, name, refusal, ATTACK_WITHIN).await? {
                nodes::Fate::Refused(message) => println!("{name} refused at the node: {message}"),
                nodes::Fate::Ran(seen) => {
                    went_through.push(format!("{name} runs and sees {seen:?}"))
                }
            }
        }

        // (4) A pod that asks for no GPU and sets NVIDIA_VISIBLE_DEVICES=all itself.
        let mut sneak = nodes::gpu_pod("sneak-all", 0, 3_600);
        sneak["spec"]["nodeName"] = json!(NODE_A);
        sneak["spec"]["containers"][0]["resources"] = json!({});
        sneak["spec"]["containers"][0]["env"] =
            json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]);
        pods.create(&PostParams::default(), &serde_json::from_value(sneak)?)
            .await?;
        let seen = nodes::seen(&client, NAMESPACE, "sneak-all", RUNS_WITHIN).await?;
        if seen.visible == "void" {
            println!("sneak-all (no GPU requested, NVIDIA_VISIBLE_DEVICES=all) saw {seen:?}");
        } else {
            went_through.push(format!("sneak-all asked for no GPU and sees {seen:?}"));
        }
        ensure!(
            went_through.is_empty(),
            "attacks that went through:\n  {}",
            went_through.join("\n  ")
        );

        let metrics = component_metrics(port).await?;
        for (case, count) in [
            ("unsigned", 1.0),
            ("bad_signature", 2.0),
            ("gpu_count", 1.0),
        ] {
            let series =
                format!(r#"tandem_node_containers_total{{case="{case}",action="refused"}}"#);
            ensure!(
                metric(&metrics, &series) >= count,
                "{series} should count {count}: {metrics}"
            );
        }
        println!(
            "the node refused {} unsigned, {} with a bad signature, {} of the wrong GPU count; \
             {} of its containers' pods were not in its watch yet (a GET)",
            metric(
                &metrics,
                r#"tandem_node_containers_total{case="unsigned",action="refused"}"#
            ),
            metric(
                &metrics,
                r#"tandem_node_containers_total{case="bad_signature",action="refused"}"#
            ),
            metric(
                &metrics,
                r#"tandem_node_containers_total{case="gpu_count",action="refused"}"#
            ),
            metric(&metrics, "tandem_node_pod_cache_misses_total"),
        );
        // The victim still has its GPU to itself.
        let seen = nodes::seen(&client, NAMESPACE, "victim", RUNS_WITHIN).await?;
        nodes.expect_gpu("victim", &seen, NODE_A, 2)?;
        Ok(())
    };
    let result = scenario.await;
    report(&result, &cluster, &mut nodes);
    Nodes::delete_pods(&client, NAMESPACE).await.ok();
    result
}
