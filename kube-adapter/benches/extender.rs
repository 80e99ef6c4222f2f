//! Load benchmark of the extender on loopback: `filter` + `prioritize` with 1,000-node
//! requests, as kube-scheduler sends them (`nodeCacheCapable`: node names only).
//!
//! The adapter runs in-process on a fixed cluster (the `--cluster-file` mode: the same view,
//! engine and HTTP stack as against an API server, minus the watchers). The cluster: 1,000
//! nodes of 4 GPUs (V100, P100 and K80 nodes in turn); every other GPU holds one profiled
//! resident, so half the GPUs are distinct states. Clients send pairs of requests
//! (filter, then prioritize) for pending pods of one profiled job, each pair for a new pod
//! (a new UID, as kube-scheduler sends: the adapter computes the pod's scores in `filter` and
//! reuses them in `prioritize`, never across pods), at a fixed offered rate for a fixed time;
//! the benchmark prints achieved throughput and p50/p99 latency per verb, then the same with no
//! rate limit (the saturation throughput); all along, a prober asks `/healthz` every 20 ms and
//! its p99 is printed too (a liveness probe must not starve behind decisions).
//!
//! Run: `cargo bench -p tandem-kube-adapter --bench extender` (or `cargo xtask bench`).
//! Target (DESIGN.md §5): p99 under 10 ms at 1,000 requests/s.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tandem_adapter_core::identity::JOB_LABEL;
use tandem_adapter_core::serve::serve_listener;
use tandem_adapter_core::{CoreConfig, EMBEDDED_ENGINE, EngineState, JobKeys, Limits, Shutdown};
use tandem_api::{Policy, Profile};
use tandem_host::{HostConfig, Runtime};
use tandem_kube_adapter::Extender;
use tandem_kube_common::app::{App, ClusterFile, Source};
use tandem_kube_common::cluster::{GPU_ANNOTATION, MEMORY_LABEL, PRODUCT_LABEL};
use tandem_kube_common::decide::FilterPasses;

const NODES: usize = 1_000;
const GPUS_PER_NODE: u32 = 4;
const MODELS: [(&str, u32); 3] = [
    ("Tesla-V100-SXM2-16GB", 16_384),
    ("Tesla-P100-PCIE-16GB", 16_384),
    ("Tesla-K80", 11_441),
];
const RESOURCE: &str = "nvidia.com/gpu";
/// The saturation throughput docs/BENCHMARKS.md records for commit `cb786d6`, before the
/// cluster view and the engine thread, on the same harness (requests/s).
const SATURATION_BEFORE: f64 = 70.0;

fn node(i: usize) -> Node {
    let (product, memory) = MODELS[i % MODELS.len()];
    let mut node = Node::default();
    node.metadata.name = Some(format!("gpu-node-{i:04}"));
    node.metadata.labels = Some(BTreeMap::from([
        (PRODUCT_LABEL.to_owned(), product.to_owned()),
        (MEMORY_LABEL.to_owned(), memory.to_string()),
    ]));
    node.status = Some(NodeStatus {
        allocatable: Some(BTreeMap::from([(
            RESOURCE.to_owned(),
            Quantity(GPUS_PER_NODE.to_string()),
        )])),
        ..NodeStatus::default()
    });
    node
}

fn pod(name: &str, bound: Option<(String, String)>) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_owned());
    pod.metadata.labels = Some(BTreeMap::from([(JOB_LABEL.to_owned(), name.to_owned())]));
    pod.metadata.namespace = Some("bench".to_owned());
    pod.metadata.uid = Some(format!("uid-{name}"));
    pod.spec = Some(PodSpec {
        containers: vec![Container {
            name: "main".to_owned(),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([(
                    RESOURCE.to_owned(),
                    Quantity("1".into()),
                )])),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        }],
        ..PodSpec::default()
    });
    if let Some((node, gpu)) = bound {
        pod.spec.as_mut().unwrap().node_name = Some(node);
        pod.metadata.annotations = Some(BTreeMap::from([(GPU_ANNOTATION.to_owned(), gpu)]));
    }
    pod
}

fn profile(i: usize) -> Profile {
    let model = ["V100", "P100", "K80"][i % 3];
    Profile {
        gpu_util_pct: (20 + (i * 37) % 70) as f32,
        mem_access_pct: (5 + (i * 13) % 50) as f32,
        mem_used_mib: 1_000 + ((i * 733) % 6_000) as u32,
        gpu_model: model.to_owned(),
    }
}

fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let keys = JobKeys::new(vec![9; 32])?;
    let nodes: Vec<Node> = (0..NODES).map(node).collect();
    let mut pods = Vec::new();
    let runtime = Runtime::from_bytes(EMBEDDED_ENGINE, HostConfig::default())?;
    let mut recommender = runtime.bootstrap(&Policy::default(), 1)?;
    for n in 0..NODES {
        for g in (0..GPUS_PER_NODE).step_by(2) {
            let i = pods.len();
            let name = format!("resident-{i}");
            let node = format!("gpu-node-{n:04}");
            pods.push(pod(&name, Some((node.clone(), format!("{node}/{g}")))));
            let mut p = profile(n);
            p.mem_used_mib = 1_000 + ((i * 733) % 6_000) as u32;
            recommender.observe_profile(&keys.key("bench", &name), &p)?;
        }
    }
    let pending = pod("pending", None);
    recommender.observe_profile(&keys.key("bench", "pending"), &profile(0))?;
    let limits = Limits {
        request_timeout: Duration::from_secs(4),
        ..Limits::default()
    };
    let core = Arc::new(
        CoreConfig::new(EngineState::new(runtime, recommender), keys)
            .limits(limits)
            .queue(1024)
            .start()?,
    );
    let app = Arc::new(App::new(
        Arc::clone(&core),
        RESOURCE.to_owned(),
        Duration::from_secs(2),
        Source::Fixed(ClusterFile { nodes, pods }),
    ));
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let names: Vec<String> = (0..NODES).map(|i| format!("gpu-node-{i:04}")).collect();
    let body = serde_json::to_vec(&serde_json::json!({
        "Pod": pending,
        "Nodes": null,
        "NodeNames": names,
    }))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let (stop, shutdown) = Shutdown::new();
        let extender = Arc::new(Extender::new(app, FilterPasses::default()));
        let router = tandem_adapter_core::http::router(core, extender);
        let server = tokio::spawn(serve_listener(router, listener, shutdown));
        let client = reqwest::Client::builder().pool_max_idle_per_host(64).build()?;
        let base = format!("http://{addr}");
        // Warm up (the first request builds the view; connections get pooled).
        for _ in 0..20 {
            pair(&client, &base, &body).await?;
        }
        println!("extender load, loopback, {NODES} nodes x {GPUS_PER_NODE} GPUs per request ({} KiB body)", body.len() / 1024);
        println!(
            "{:>16} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10} {:>13} {:>12}",
            "offered req/s", "seconds", "achieved", "filter p50", "filter p99", "prio p50", "prio p99", "failed pairs", "healthz p99"
        );
        for rate in [50.0, 100.0, 200.0, 1_000.0, f64::INFINITY] {
            let report = load(&client, &base, &body, rate, Duration::from_secs(4)).await?;
            println!(
                "{:>16} {:>10.1} {:>12.0} {:>9.2}ms {:>9.2}ms {:>9.2}ms {:>9.2}ms {:>13} {:>10.2}ms",
                if rate.is_finite() { format!("{rate:.0}") } else { "unlimited".into() },
                report.seconds,
                report.achieved,
                report.filter.0,
                report.filter.1,
                report.prioritize.0,
                report.prioritize.1,
                report.failed,
                report.healthz_p99,
            );
            if !rate.is_finite() {
                println!(
                    "saturation: {:.0} req/s, {:.0}x the ~70 req/s recorded at cb786d6 (WIT 0.3.0, engine behind a mutex)",
                    report.achieved,
                    report.achieved / SATURATION_BEFORE
                );
            }
            // Let a backlog drain before the next rate.
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        let _ = stop.send(true);
        let _ = server.await;
        anyhow::Ok(())
    })?;
    Ok(())
}

/// Pods sent so far: each pair of requests is for a new pod.
static PODS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One filter then one prioritize for a new pod (a fresh UID in `template`); their latencies
/// in ms. A request answered with an error status (the adapter's request timeout under
/// overload) is an `Err`, counted by the caller.
async fn pair(client: &reqwest::Client, base: &str, template: &[u8]) -> anyhow::Result<(f64, f64)> {
    let n = PODS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let body = String::from_utf8_lossy(template)
        .replace("uid-pending", &format!("uid-pending-{n:09}"))
        .into_bytes();
    let mut times = [0.0; 2];
    for (i, verb) in ["filter", "prioritize"].iter().enumerate() {
        let started = Instant::now();
        let response = client
            .post(format!("{base}/{verb}"))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "{verb}: {}",
            response.status()
        );
        let _ = response.bytes().await?;
        times[i] = started.elapsed().as_secs_f64() * 1e3;
    }
    Ok((times[0], times[1]))
}

struct Report {
    seconds: f64,
    achieved: f64,
    /// Pairs with a request that failed (timed out under overload).
    failed: usize,
    filter: (f64, f64),
    prioritize: (f64, f64),
    /// p99 of `/healthz` asked every 20 ms during the run, ms.
    healthz_p99: f64,
}

/// Offers `rate` requests/s (pairs at half that) for `length`, open loop: each pair starts at
/// its scheduled time whatever the others do, so queueing shows in the latencies.
async fn load(
    client: &reqwest::Client,
    base: &str,
    body: &[u8],
    rate: f64,
    length: Duration,
) -> anyhow::Result<Report> {
    let started = Instant::now();
    let probe = {
        let (client, url) = (client.clone(), format!("{base}/healthz"));
        tokio::spawn(async move {
            let mut times = Vec::new();
            while started.elapsed() < length {
                let asked = Instant::now();
                let ok = client
                    .get(&url)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                // A failed probe counts as the whole run: it would have failed the liveness check.
                times.push(if ok {
                    asked.elapsed().as_secs_f64() * 1e3
                } else {
                    f64::INFINITY
                });
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            times
        })
    };
    let mut tasks = Vec::new();
    if rate.is_finite() {
        let interval = Duration::from_secs_f64(2.0 / rate);
        let mut next = started;
        while next < started + length {
            tokio::time::sleep_until(next.into()).await;
            let (client, base, body) = (client.clone(), base.to_owned(), body.to_vec());
            tasks.push(tokio::spawn(async move {
                pair(&client, &base, &body).await.map(|p| vec![p])
            }));
            next += interval;
        }
    } else {
        // Closed loop with 4 clients: the most the adapter sustains.
        for _ in 0..4 {
            let (client, base, body) = (client.clone(), base.to_owned(), body.to_vec());
            tasks.push(tokio::spawn(async move {
                let mut all = Vec::new();
                while started.elapsed() < length {
                    all.push(pair(&client, &base, &body).await?);
                }
                anyhow::Ok(all)
            }));
        }
    }
    let mut filter = Vec::new();
    let mut prioritize = Vec::new();
    let mut failed = 0;
    for task in tasks {
        match task.await? {
            Ok(pairs) => {
                for (f, p) in pairs {
                    filter.push(f);
                    prioritize.push(p);
                }
            }
            Err(_) => failed += 1,
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut healthz = probe.await?;
    Ok(Report {
        healthz_p99: percentiles(&mut healthz).1,
        seconds,
        achieved: (filter.len() + prioritize.len()) as f64 / seconds,
        failed,
        filter: percentiles(&mut filter),
        prioritize: percentiles(&mut prioritize),
    })
}

fn percentiles(ms: &mut [f64]) -> (f64, f64) {
    if ms.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    (at(0.50), at(0.99))
}
