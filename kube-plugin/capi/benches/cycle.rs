//! What one scheduling cycle costs the framework plugin's Rust side, without Kubernetes.
//!
//! `cargo bench -p tandem-kube-capi --bench cycle` builds the plugin's state as
//! `tandem-kube-scheduler` holds it in the throughput benchmark (`kube-adapter/benches/
//! scheduler.rs`: 500 nodes of 4 V100s, one-GPU pods of 50 jobs) and then, pod after pod, runs
//! what the scheduler asks of it: `prefilter` (the verdicts on every node, encoded; for a pod
//! known from its events, as the Go side asks, and for the pod sent whole, as it asks when its
//! events run late), `reserve` on the node it scores best, and the pod event that follows the
//! binding (its placement signed by Reserve and verified by the event). "One cycle" counts the
//! first way. Objects cross as JSON of the fields the Go side
//! sends of a Pod or Node, as `encoding/json` writes them.
//! It prints the median, p99 and mean of each step and their sum, the budget the in-process
//! plugin has per pod: the default scheduler spends about 2 ms of CPU per pod on the same
//! cluster. No assertion is made on time; the numbers are for people.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use serde_json::{Value, json};
use tandem_kube_capi::plugin::Plugin;
use tandem_kube_capi::served::Served;
use tandem_kube_capi::{Config, Reservation};
use tandem_kube_common::decide::Verdict;
use tandem_kube_common::placement::{Placements, Signer};

const NODES: usize = 500;
const PODS: usize = 1_500;

fn node(name: &str) -> Value {
    let resources = json!({ "cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4" });
    json!({
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB",
                "nvidia.com/gpu.memory": "16384",
                "nvidia.com/gpu.count": "4",
            },
        },
        "status": { "capacity": resources, "allocatable": resources },
    })
}

/// Pod `i` of the benchmark, pending, or bound to `node` with Tandem's placement
/// `annotations` (Reserve's, signed).
fn pod(i: usize, bound: Option<(&str, &BTreeMap<String, String>)>) -> Value {
    let mut pod = json!({
        "metadata": {
            "name": format!("job-{i:05}"),
            "namespace": "bench",
            "uid": format!("0000000{i:05}-4b1e-4c2f-9a3d-5e6f7a8b9c0d"),
            "resourceVersion": if bound.is_some() { "2346" } else { "2345" },
            "creationTimestamp": "2026-11-25T09:00:01Z",
            "labels": { "tandem.dev/job": format!("job-{}", i % 50) },
        },
        "spec": {
            "schedulerName": "tandem-plugin-scheduler",
            "priority": 0,
            "containers": [{
                "name": "main",
                "resources": { "limits": { "nvidia.com/gpu": "1" },
                               "requests": { "nvidia.com/gpu": "1" } },
            }],
        },
        "status": { "phase": "Pending" },
    });
    if let Some((node, annotations)) = bound {
        pod["spec"]["nodeName"] = json!(node);
        pod["metadata"]["annotations"] = json!(annotations);
    }
    pod
}

/// Latency statistics of one step.
struct Stats {
    median: Duration,
    p99: Duration,
    mean: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Stats {
        median: at(0.5),
        p99: at(0.99),
        mean: samples.iter().sum::<Duration>() / samples.len() as u32,
    }
}

fn report(step: &str, stats: &Stats) {
    println!(
        "{step:<34} median {:>10.3?}  p99 {:>10.3?}  mean {:>10.3?}",
        stats.median, stats.p99, stats.mean
    );
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let secret = dir.path().join("id-secret");
    std::fs::write(
        &secret,
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
    )?;
    let args = json!({ "idSecretFile": secret }).to_string();
    let config = Config::parse(args.as_bytes())?;
    // The core without a connection: nothing stored, as in the unit tests.
    let served = Served::start(&config, None)?;
    // Reserve signs every placement, as the chart deploys the plugin.
    let (signer, _) = Signer::generate()?;
    let mut plugin = Plugin::new(
        &config,
        Arc::clone(served.core()),
        &served.handle(),
        Arc::new(Placements::signed(signer)),
    );
    for n in 0..NODES {
        plugin.set_node(node(&format!("gpu-node-{n:04}")).to_string().as_bytes())?;
    }
    for i in 0..PODS {
        plugin.set_pod(pod(i, None).to_string().as_bytes())?;
    }
    println!(
        "the framework plugin's Rust side per scheduling cycle: {NODES} nodes x 4 V100, \
         {PODS} one-GPU pods of 50 jobs (JSON as the Go side sends it)"
    );
    let (mut prefilter, mut reserve, mut bound, mut total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut held = 0;
    let mut sent = Vec::new();
    for i in 0..PODS {
        let pending = pod(i, None).to_string();
        let uid = format!("0000000{i:05}-4b1e-4c2f-9a3d-5e6f7a8b9c0d");
        // The way the Go side asks when its events run late: the pod sent whole.
        let started = Instant::now();
        std::hint::black_box(plugin.prefilter(pending.as_bytes())?.encode(held));
        sent.push(started.elapsed());
        // The way it asks as a rule: the pod known from its events.
        let started = Instant::now();
        let prepared = plugin
            .prefilter_known(&uid, "2345")?
            .ok_or_else(|| anyhow::anyhow!("pod {i} not known from its events"))?;
        // What crosses to Go: the verdicts, the node table only when it changed.
        let answer = prepared.encode(held);
        let prefiltered = started.elapsed();
        held = prepared.generation;
        std::hint::black_box(answer);
        let Some(best) = prepared
            .names
            .iter()
            .zip(&prepared.verdicts)
            .filter_map(|(name, verdict)| match verdict {
                Verdict::Fits(score) => Some((*score, std::cmp::Reverse(name))),
                _ => None,
            })
            .max()
            .map(|(_, std::cmp::Reverse(name))| name.clone())
        else {
            anyhow::bail!("pod {i}: no node passed");
        };
        let at = Instant::now();
        let reserved = match plugin.reserve(&uid, &best)? {
            Reservation::Reserved(reserved) => reserved,
            Reservation::Rejected(why) => anyhow::bail!("pod {i}: {why}"),
        };
        let reserved_in = at.elapsed();
        reserved
            .annotations
            .get("tandem.dev/gpu")
            .with_context(|| format!("pod {i}: Reserve wrote no GPU"))?;
        // The event carries the placement Reserve signed, which the plugin trusts as it kept it.
        let event = pod(i, Some((&best, &reserved.annotations))).to_string();
        let at = Instant::now();
        plugin.set_pod(event.as_bytes())?;
        let bound_in = at.elapsed();
        prefilter.push(prefiltered);
        reserve.push(reserved_in);
        bound.push(bound_in);
        total.push(prefiltered + reserved_in + bound_in);
    }
    report("prefilter, pod known from events", &stats(prefilter));
    report("prefilter, pod sent as JSON", &stats(sent));
    report("reserve", &stats(reserve));
    report("pod event after the binding", &stats(bound));
    report("one cycle", &stats(total));
    Ok(())
}
