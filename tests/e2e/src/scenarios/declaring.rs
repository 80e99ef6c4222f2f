//! What a pod tells Tandem in its annotations, and what the cluster teaches it back
//! (docs/DECLARING.md), through the extender inside a real kube-scheduler.
//!
//! Nodes `t4-a`, `t4-b` (Tesla T4, 15,360 MiB, $0.35 an hour) and `a100-a`, `a100-b` (A100,
//! 40,960 MiB, $3.00 an hour), one GPU each; the adapter is given the prices. In order:
//!
//! - a pod declaring VGG-19 at batch 256 (`tandem.dev/model`, a summary inline) lands on an
//!   A100: the memory the engine predicts for it, shown, fits only there;
//! - a pod declaring `tandem.dev/model: resnet50` (neither a summary nor a reference) stays
//!   pending, its events naming the annotation and the value, and the refusal is counted;
//! - pods declaring the same work (`tandem.dev/work`, with reference speeds on both models):
//!   `tandem.dev/priority: cost` lands on a T4 (four times slower, nine times cheaper),
//!   `latency` on an A100;
//! - the node profiler (`tandem-profiler`, replaying a recording of the pod's process) reports
//!   the peak of a declared VGG-19 at batch 64 on a T4 above what the memory model predicted:
//!   the prediction moves toward it (before and after shown, the
//!   refit timed), the guard no longer fits the model on a T4, and the next such pod goes to
//!   an A100;
//! - finished runs of one job on a T4 and on an A100 teach its speeds;
//! - restarted, the adapter still knows what it learned (`GET /v1/knowledge`, per GPU model).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tandem_adapter_core::JobKeys;

use crate::cluster::{Cluster, create_gpu_node, ensure_namespace, wait_for_binding};
use crate::extender::metric;
use crate::extender::{
    Adapter, NAMESPACE, SECRET_HEX, SYSTEM, TOKEN, finish, knowledge, post, start_with,
    tandem_event, wait_ready,
};

/// The prices the adapter is given.
pub const PRICES: [&str; 4] = ["--gpu-price", "T4=0.35", "--gpu-price", "A100=3.0"];

/// VGG-19 at batch 256 (`tandem declare` of the torchvision model): the engine predicts about
/// 25 GiB for it, more than a T4 holds.
pub fn vgg19_b256() -> Value {
    json!({ "params_mib": 527.79, "activations_mib": 30545.92, "input_mib": 147.0,
            "batch_size": 256, "gflops": 5016.0, "conv_layers": 16, "linear_layers": 3,
            "activation_layers": 18, "other_layers": 6 })
}

/// VGG-19 at batch 64: about 10 GiB predicted, which a T4 holds.
pub fn vgg19_b64() -> Value {
    json!({ "params_mib": 527.79, "activations_mib": 7636.48, "input_mib": 36.75,
            "batch_size": 64, "gflops": 1254.0, "conv_layers": 16, "linear_layers": 3,
            "activation_layers": 18, "other_layers": 6 })
}

/// ResNet-18 at batch 32: small.
pub fn resnet18() -> Value {
    json!({ "params_mib": 44.59, "activations_mib": 909.25, "input_mib": 18.38,
            "batch_size": 32, "gflops": 58.0, "conv_layers": 20, "linear_layers": 1,
            "activation_layers": 17, "other_layers": 22 })
}

/// A pod of job `job` asking for one GPU with `annotations`; bound to `node`'s GPU 0 if
/// given (placed earlier), else pending.
/// A profiler recording (profiler/src/sample/replay.rs) of one process of pod `uid` on a T4,
/// alone on it, peaking at `peak_mib`.
pub fn learner_recording(uid: &str, peak_mib: u32) -> String {
    let cgroup = format!(
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-5c2e.scope",
        uid.replace('-', "_")
    );
    (0..5u32)
        .map(|tick| {
            let line = json!({
                "t_ms": u64::from(tick) * 1_000,
                "gpu": { "index": 0, "model": "Tesla T4", "memory_total_mib": 15_360 },
                "device": { "sm_util": 70, "mem_util": 40 },
                "processes": [{ "pid": 7_001, "used_memory_mib": peak_mib - (4 - tick) * 500,
                                "cgroup": cgroup }],
            });
            format!("{line}\n")
        })
        .collect()
}

/// A pod of job `job` asking for one GPU with `annotations` (its declaration), bound to `node`
/// if given.
pub fn declaring_pod(name: &str, job: &str, annotations: Value, node: Option<&str>) -> Result<Pod> {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": { "tandem.dev/job": job },
                      "annotations": annotations },
        "spec": {
            "containers": [{
                "name": "main",
                "image": "registry.invalid/none",
                "resources": { "limits": { "nvidia.com/gpu": "1" } },
            }],
        },
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
        pod["metadata"]["annotations"]["tandem.dev/gpu"] = json!(format!("{node}/0"));
    }
    Ok(serde_json::from_value(pod)?)
}

/// What the engine expects of `declared` alone on a T4 and on an A100 (`POST /v1/estimate`).
pub async fn estimate(
    http: &reqwest::Client,
    adapter: &Adapter,
    job: Option<&str>,
    declared: Option<Value>,
    work: Option<f64>,
) -> Result<Value> {
    let mut body = json!({ "gpus": [
        { "model": "T4", "memory_mib": 15_360, "price_per_hour": 0.35 },
        { "model": "A100", "memory_mib": 40_960, "price_per_hour": 3.0 },
    ]});
    if let Some(job) = job {
        body["job"] = json!(job);
    }
    if let Some(declared) = declared {
        body["declared"] = declared;
    }
    if let Some(work) = work {
        body["work"] = json!(work);
    }
    post(http, &format!("{}/v1/estimate", adapter.url), body).await
}

/// The per-GPU-model report of `model` in `GET /v1/knowledge`.
pub fn model_report<'a>(knowledge: &'a Value, model: &str) -> Option<&'a Value> {
    knowledge["gpu_models"]
        .as_array()?
        .iter()
        .find(|m| m["gpu_model"] == model)
}

/// The declaring scenario against `cluster`, its adapter on `port`.
pub async fn scenario(cluster: &Cluster, port: u16, adapter_log: &Path) -> Result<()> {
    let dir = cluster.dir();
    std::fs::write(dir.join("id-secret"), SECRET_HEX)?;
    std::fs::write(dir.join("intake-token"), TOKEN)?;
    let keys = JobKeys::from_file(&dir.join("id-secret"))?;
    let key = |job: &str| keys.key(NAMESPACE, job);
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    for name in ["t4-a", "t4-b"] {
        create_gpu_node(&client, name, 1, "Tesla-T4", 15_360).await?;
    }
    for name in ["a100-a", "a100-b"] {
        create_gpu_node(&client, name, 1, "NVIDIA-A100-SXM4-40GB", 40_960).await?;
    }
    let http = reqwest::Client::new();
    let mut adapter = start_with(cluster, port, adapter_log, "e2e-adapter", &PRICES)?;
    wait_ready(&http, &mut adapter).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let params = PostParams::default();
    let bound =
        |pod: &'static str| wait_for_binding(&client, NAMESPACE, pod, Duration::from_secs(30));

    // A declared model whose predicted memory fits only the larger GPU.
    let predicted = estimate(&http, &adapter, None, Some(vgg19_b256()), None).await?;
    let figure = |at: usize, field: &str| predicted[at][field].as_u64().unwrap_or(0);
    println!(
        "(model) VGG-19 b256 predicted: T4 peak {} MiB, reserved {} of 15360; A100 peak {} MiB, reserved {} of 40960",
        figure(0, "peak_mem_mib"),
        figure(0, "reserved_mib"),
        figure(1, "peak_mem_mib"),
        figure(1, "reserved_mib"),
    );
    ensure!(
        figure(0, "reserved_mib") > 15_360 && (1..40_960).contains(&figure(1, "reserved_mib")),
        "the prediction should fit the A100 only: {predicted}"
    );
    let model = |summary: Value| json!({ "tandem.dev/model": summary.to_string() });
    pods.create(
        &params,
        &declaring_pod("vgg-big", "vgg-big", model(vgg19_b256()), None)?,
    )
    .await?;
    let node = bound("vgg-big").await;
    println!("(model) vgg-big was bound to {node:?}");
    ensure!(
        node.as_deref().is_some_and(|n| n.starts_with("a100-")),
        "vgg-big should land on an A100, got {node:?}"
    );

    // A malformed declaration: refused at the first call, named, counted.
    pods.create(
        &params,
        &declaring_pod(
            "bad-model",
            "bad-model",
            json!({ "tandem.dev/model": "resnet50" }),
            None,
        )?,
    )
    .await?;
    let refused = tandem_event(&client, "bad-model").await?;
    println!("(refusal) bad-model's event: {refused}");
    ensure!(
        refused.contains("tandem.dev/model") && refused.contains("resnet50"),
        "the event should name the annotation and the value: {refused}"
    );
    ensure!(
        pods.get("bad-model")
            .await?
            .spec
            .and_then(|s| s.node_name)
            .is_none(),
        "a refused pod was bound"
    );
    let counted = metric(
        &http,
        &adapter,
        "tandem_declarations_refused_total{field=\"model\"}",
    )
    .await?;
    println!("(refusal) tandem_declarations_refused_total{{field=\"model\"}} {counted}");
    ensure!(counted >= 1.0, "the refusal was not counted");

    // The same work on both models, by priority: cost goes to the cheaper T4, latency to the
    // faster A100.
    let work = "1000 steps at 20/s on A100, 5/s on T4";
    for (pod, priority, expect) in [("thrifty", "cost", "t4-"), ("urgent", "latency", "a100-")] {
        let annotations = json!({
            "tandem.dev/priority": priority,
            "tandem.dev/work": work,
            "tandem.dev/model": resnet18().to_string(),
        });
        pods.create(&params, &declaring_pod(pod, pod, annotations, None)?)
            .await?;
        let node = bound(pod).await;
        let seen = estimate(&http, &adapter, Some(&key(pod)), None, Some(1000.0)).await?;
        println!(
            "(priority) {pod} ({priority}): bound to {node:?}; run time T4 {} s (${:.3}), A100 {} s (${:.3})",
            seen[0]["solo_s"],
            seen[0]["cost"].as_f64().unwrap_or(f64::NAN),
            seen[1]["solo_s"],
            seen[1]["cost"].as_f64().unwrap_or(f64::NAN),
        );
        ensure!(
            node.as_deref().is_some_and(|n| n.starts_with(expect)),
            "{pod} ({priority}) should land on {expect}*, got {node:?}"
        );
    }

    // The node profiler measures a declared job's peak above the prediction (a replay of its
    // process on t4-b's GPU): the memory model learns it off the decision path.
    let learner = declaring_pod("learner", "learner", model(vgg19_b64()), Some("t4-b"))?;
    let learner = cluster.create_placed(&pods, &learner).await?;
    let before = estimate(&http, &adapter, None, Some(vgg19_b64()), None).await?;
    let measured = 15_000;
    let replay = dir.join("learner.jsonl");
    std::fs::write(
        &replay,
        learner_recording(
            learner
                .metadata
                .uid
                .as_deref()
                .context("a pod without a UID")?,
            measured,
        ),
    )?;
    // The adapter meets the pod's declaration in its watch: until then a peak teaches nothing
    // (the profile is filed; the profiler runs again, as it does every window).
    let deadline = Instant::now() + Duration::from_secs(30);
    let (posted, peaks) = loop {
        let posted =
            crate::scenarios::profiler::profile_once(cluster, &adapter.url, &replay, "t4-b")
                .await?;
        let taught = knowledge(&http, &adapter.url).await?;
        let peaks =
            model_report(&taught, "T4").map_or(0, |t| t["memory"]["peaks"].as_u64().unwrap_or(0));
        if peaks >= 1 || Instant::now() >= deadline {
            break (posted, peaks);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!("(profiler) posted for t4-b: {posted:?}");
    ensure!(
        posted.len() == 1 && posted[0].0 == key("learner") && posted[0].1.mem_used_mib == measured,
        "the profiler should post the learner's peak, keyed as the adapter keys pods: {posted:?}"
    );
    ensure!(peaks == 1, "the peak was not learned ({peaks} peaks on T4)");
    let after = estimate(&http, &adapter, None, Some(vgg19_b64()), None).await?;
    let refits = metric(&http, &adapter, "tandem_retrain_seconds_count").await?;
    let refit_s = metric(&http, &adapter, "tandem_retrain_seconds_sum").await?;
    let (peak_before, reserved_before) = (
        before[0]["peak_mem_mib"].as_u64().unwrap_or(0),
        before[0]["reserved_mib"].as_u64().unwrap_or(0),
    );
    let (peak_after, reserved_after) = (
        after[0]["peak_mem_mib"].as_u64().unwrap_or(0),
        after[0]["reserved_mib"].as_u64().unwrap_or(0),
    );
    println!(
        "(learning) VGG-19 b64 on T4: measured {measured} MiB; predicted {peak_before} -> {peak_after} MiB, reserved {reserved_before} -> {reserved_after} MiB (fits a T4: {} -> {}); {refits} refits, {:.2} s in all",
        before[0]["fits_empty"], after[0]["fits_empty"], refit_s
    );
    ensure!(
        peak_before < u64::from(measured) && peak_after > peak_before,
        "the prediction should move toward the measured peak"
    );
    ensure!(
        before[0]["fits_empty"] == true && after[0]["fits_empty"] == false,
        "the guard should no longer fit VGG-19 b64 on a T4: {after}"
    );
    ensure!(
        reserved_after >= u64::from(measured),
        "the guard should now reserve at least the measured peak: {after}"
    );
    let taught = knowledge(&http, &adapter.url).await?;
    let t4 = model_report(&taught, "T4").context("no T4 in the knowledge report")?;
    println!("(learning) GET /v1/knowledge, T4: {t4}");
    ensure!(t4["memory"]["peaks"] == 1 && t4["memory"]["beyond_reservation"] == 1);
    ensure!(t4["memory"]["last"]["predicted_after_mib"].as_u64() == Some(peak_after));
    // The same in the metrics, which the chart's alert on memory peaks reads.
    let over = metric(
        &http,
        &adapter,
        r#"tandem_peaks_over_reservation_total{gpu_model="T4"}"#,
    )
    .await?;
    ensure!(
        over == 1.0,
        "tandem_peaks_over_reservation_total on T4 is {over}"
    );
    // A measured pair through the intake: the engine's prediction for it, before learning it,
    // and what was observed, land in the slowdown histograms.
    post(
        &http,
        &format!("{}/v1/profiles", adapter.url),
        json!({ "profiles": [
            { "job": key("pair-a"), "profile": crate::extender::profile(40.0, 15.0, 3_000) },
            { "job": key("pair-b"), "profile": crate::extender::profile(80.0, 60.0, 3_000) },
        ]}),
    )
    .await?;
    post(
        &http,
        &format!("{}/v1/outcomes", adapter.url),
        json!({ "outcomes": [{ "gpu_model": "V100", "jobs": [key("pair-a"), key("pair-b")],
            "solo_s": [100.0, 100.0], "colocated_s": [130.0, 115.0] }] }),
    )
    .await?;
    let observed = metric(
        &http,
        &adapter,
        r#"tandem_slowdown_observed_count{gpu_model="V100"}"#,
    )
    .await?;
    ensure!(
        observed == 2.0,
        "{observed} observed slowdowns on V100, not 2"
    );
    // By now the adapter has decided, refused a declaration, learned a peak and an outcome:
    // every metric the chart's dashboard and alerts query is in its /metrics.
    let scrape = http
        .get(format!("{}/metrics", adapter.url))
        .send()
        .await?
        .text()
        .await?;
    crate::dashboard::check_dashboard_queries(&scrape)?;
    // The next pod of that model is not put on a T4, where it would risk running out.
    pods.create(
        &params,
        &declaring_pod("vgg-next", "vgg-next", model(vgg19_b64()), None)?,
    )
    .await?;
    let node = bound("vgg-next").await;
    println!("(learning) vgg-next (VGG-19 b64) was bound to {node:?}");
    ensure!(
        node.as_deref().is_some_and(|n| n.starts_with("a100-")),
        "after learning, VGG-19 b64 should no longer go to a T4, got {node:?}"
    );

    // Finished runs teach speeds: one job, 1000 steps, 200 s on a T4 and 50 s on an A100.
    create_gpu_node(&client, "t4-c", 1, "Tesla-T4", 15_360).await?;
    create_gpu_node(&client, "a100-c", 1, "NVIDIA-A100-SXM4-40GB", 40_960).await?;
    let at = crate::extender::seconds_ago();
    let steady = json!({ "tandem.dev/work": "1000 steps" });
    for (pod, node, start, end) in [
        ("steady-t4", "t4-c", 1_000, 800),
        ("steady-a100", "a100-c", 500, 450),
    ] {
        cluster
            .create_placed(
                &pods,
                &declaring_pod(pod, "steady", steady.clone(), Some(node))?,
            )
            .await?;
        finish(&pods, pod, &at(start), &at(end)).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let learned = loop {
        let now = knowledge(&http, &adapter.url).await?;
        let ratio = model_report(&now, "A100")
            .and_then(|a| a["speed_vs"].as_array()?.first().cloned())
            .filter(|r| r["gpu_model"] == "T4");
        if let Some(ratio) = ratio {
            break (now, ratio);
        }
        ensure!(
            Instant::now() < deadline,
            "no speed ratio learned from the finished pods: {now}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let (taught, ratio) = learned;
    println!("(speed) A100 vs T4 learned from steady's runs: {ratio}");
    ensure!(
        (ratio["ratio"].as_f64().unwrap_or(0.0) - 4.0).abs() < 0.05,
        "A100 should be 4x a T4 for steady: {ratio}"
    );
    let steady_now = estimate(&http, &adapter, Some(&key("steady")), None, Some(1000.0)).await?;
    println!(
        "(speed) steady's speeds now: T4 {} steps/s, A100 {} steps/s",
        steady_now[0]["speed"], steady_now[1]["speed"]
    );
    ensure!((steady_now[0]["speed"].as_f64().unwrap_or(0.0) - 5.0).abs() < 0.05);
    ensure!(
        !taught.to_string().contains(&key("steady")),
        "the knowledge report names a job"
    );

    // Restarted, the adapter knows it all still: stored with the knowledge base.
    adapter.process.kill_now();
    let mut adapter = start_with(
        cluster,
        port,
        &dir.join("adapter-2.log"),
        "e2e-adapter",
        &PRICES,
    )?;
    wait_ready(&http, &mut adapter).await?;
    // What the killed adapter had not written yet (a write waits for its load-back) it learns
    // again from the finished pods at its first catch-up, a couple of seconds after start.
    let deadline = Instant::now() + Duration::from_secs(20);
    let restarted = loop {
        let now = knowledge(&http, &adapter.url).await?;
        if now["gpu_models"] == taught["gpu_models"] || Instant::now() >= deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let again = estimate(&http, &adapter, None, Some(vgg19_b64()), None).await?;
    println!(
        "(restart) T4 peaks {} / speeds {}; VGG-19 b64 on T4 predicted {} MiB (before the restart {peak_after})",
        model_report(&restarted, "T4").map_or(Value::Null, |t| t["memory"]["peaks"].clone()),
        model_report(&restarted, "T4").map_or(Value::Null, |t| t["speeds"].clone()),
        again[0]["peak_mem_mib"]
    );
    ensure!(
        restarted["gpu_models"] == taught["gpu_models"],
        "what was learned changed across the restart: {} before, {} after",
        taught["gpu_models"],
        restarted["gpu_models"]
    );
    ensure!(again[0]["peak_mem_mib"].as_u64() == Some(peak_after));
    ensure!(adapter.process.is_running(), "the adapter exited");
    Ok(())
}
