//! Tandem as a kube-scheduler framework plugin: `tandem-kube-scheduler` (kube-scheduler with
//! the `Tandem` plugin and the engine in-process, `cargo xtask kube-scheduler-plugin`) against
//! a real etcd and kube-apiserver.
//!
//! - a pod lands beside the co-runner the engine prefers (its predictions printed) and the
//!   GPU annotation is written; a pod whose memory fits no GPU stays Pending with Tandem's
//!   reason in its events; restarted, the scheduler resumes from the stored knowledge base
//!   (the memory reason needs the stored profile);
//! - malformed plugin args fail start-up with a message naming the field;
//! - a panicking engine (the misbehaving test component) is an error status for that pod,
//!   and the scheduler keeps running and schedules the next pod;
//! - what pods declare in annotations (docs/DECLARING.md): a declared model whose predicted
//!   memory fits only the A100 lands there, a malformed declaration is refused with the
//!   annotation named in the pod's events, and `cost` goes to the cheaper T4 while `latency`
//!   goes to the faster A100 (prices from the plugin's `gpuPrices`); the plugin's
//!   `/metrics` (on its intake's address) then holds the adapters' Tandem families, counting
//!   that work (decisions and their latency, engine calls, the view's GPUs and rebuilds, the
//!   refused declaration), and kube-scheduler's own `/metrics` none of them;
//! - the plugin learns as the extender does: `tandem-profiler` posts two pods' profiles to the
//!   plugin's intake, and a pod that fitted nowhere without them is then placed by them; pods
//!   that ran alone and then together on one GPU, once finished, teach an outcome, counted in
//!   kube-scheduler's `/metrics` and written to the knowledge base's ConfigMap.
//!
//! - what a tenant may try against it: the poison outcome posted to its intake is refused `400`
//!   naming the field, and the scheduler restarts on what it stored; a pod its owner bound to a
//!   four-GPU node, requesting one GPU and naming all four unsigned, is counted on one GPU, so
//!   three tenants bind beside it (placements signed for their UIDs) and a fourth waits.
//!
//! The first scenario stores a knowledge base in the cluster, in the extender's ConfigMap
//! format, as the extender (or `tandem kb`) would have, and the scheduler reads it at start.

use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tandem_adapter_core::JobKeys;
use tandem_api::{GpuSpec, Outcome, Policy};
use tandem_host::{HostConfig, Runtime};

use crate::cluster::{
    Cluster, Component, create_gpu_node, ensure_namespace, free_port, wait_for_binding,
};
use crate::extender::{
    NAMESPACE, SECRET_HEX, SYSTEM, TOKEN, annotation, events_of, knowledge,
    run_alone_then_together, tandem_event,
};
use tandem_e2e::plugin::*;
use tandem_e2e::scenarios::{declaring, placement, profiler};
use tandem_e2e::{cluster, extender};

#[tokio::test]
async fn the_plugin_decides_inside_kube_scheduler_and_resumes_from_the_stored_knowledge()
-> Result<()> {
    cluster::install_crypto_provider();
    let binary = plugin_scheduler().await?;
    let mut cluster = Cluster::start_control_plane().await?;
    let (client, keys) = prepare(&cluster).await?;
    let key = |job: &str| keys.key(NAMESPACE, job);

    // What the extender's intake would have learned: profiles, and outcomes saying p suffers
    // little beside x and a lot beside y.
    let runtime = Runtime::from_bytes(tandem_engine_embedded::COMPONENT, HostConfig::default())?;
    let mut engine = runtime.bootstrap(&Policy::default(), tandem_adapter_core::SEED)?;
    for (job, p) in [
        ("x", profile(35.0, 12.0, 4_000)),
        ("y", profile(92.0, 70.0, 5_000)),
        ("p", profile(45.0, 20.0, 4_500)),
        ("big", profile(60.0, 30.0, 20_000)),
    ] {
        engine.observe_profile(&key(job), &p)?;
    }
    for _ in 0..3 {
        for (partner, colocated) in [("x", [112.0, 110.0]), ("y", [195.0, 160.0])] {
            engine.observe_outcome(&Outcome {
                gpu_model: "V100".into(),
                jobs: vec![key("p"), key(partner)],
                solo_s: vec![100.0, 100.0],
                colocated_s: colocated.to_vec(),
            })?;
        }
    }
    let v100 = GpuSpec::new("V100", 16_384);
    let with_x = engine.predict(
        &[
            tandem_api::Job::new(key("p")),
            tandem_api::Job::new(key("x")),
        ],
        &v100,
    )?;
    let with_y = engine.predict(
        &[
            tandem_api::Job::new(key("p")),
            tandem_api::Job::new(key("y")),
        ],
        &v100,
    )?;
    println!("engine prediction for p beside x on V100: {with_x:?}");
    println!("engine prediction for p beside y on V100: {with_y:?}");
    ensure!(with_x.slowdown_pct[0] < with_y.slowdown_pct[0]);
    store_knowledge(&client, engine.snapshot()?).await?;

    let config = plugin_config(&args(cluster.dir()));
    cluster.start_scheduler_binary(&binary, &config).await?;
    let scenario = async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let params = PostParams::default();
        cluster
            .create_placed(&pods, &job_pod("x-run", "x", Some(("v100-a", "v100-a/0")))?)
            .await?;
        cluster
            .create_placed(&pods, &job_pod("y-run", "y", Some(("v100-b", "v100-b/0")))?)
            .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;

        // Beside x, where the engine predicts p slows down least; the annotation names the GPU.
        pods.create(&params, &job_pod("p-run", "p", None)?).await?;
        let node = wait_for_binding(&client, NAMESPACE, "p-run", Duration::from_secs(60)).await;
        ensure!(node.as_deref() == Some("v100-a"), "p-run went to {node:?}");
        let bound = pods.get("p-run").await?;
        ensure!(
            annotation(&bound).as_deref() == Some("v100-a/0"),
            "p-run's annotation: {:?}",
            annotation(&bound)
        );
        println!("p-run bound to v100-a, annotated v100-a/0");
        // Reserve signed it for the pod, with the key of the plugin's config.
        println!("p-run: {}", extender::signed_placement(&cluster, &bound)?);

        // Fits no GPU: Pending, with the engine's reason in its events.
        pods.create(&params, &job_pod("big-run", "big", None)?)
            .await?;
        let event = tandem_event(&client, "big-run").await?;
        println!("big-run's event: {event}");
        ensure!(event.contains("needs 20000 MiB"), "{event}");
        ensure!(
            pods.get("big-run")
                .await?
                .spec
                .and_then(|s| s.node_name)
                .is_none()
        );

        // Restarted, the scheduler reads the stored knowledge again: big is still refused for
        // its memory (a fresh engine would not know it and give another reason).
        cluster.stop(Component::Scheduler);
        cluster.start_scheduler_binary(&binary, &config).await?;
        pods.create(&params, &job_pod("big-again", "big", None)?)
            .await?;
        let event = tandem_event(&client, "big-again").await?;
        ensure!(
            event.contains("needs 20000 MiB"),
            "after the restart: {event}"
        );
        Ok(())
    };
    let result = scenario.await;
    logged(&cluster, result)
}

#[tokio::test]
async fn malformed_plugin_args_fail_start_up_naming_the_field() -> Result<()> {
    let binary = plugin_scheduler().await?;
    let mut cluster = Cluster::start_control_plane().await?;
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    let mut bad = args(cluster.dir());
    bad["maxJobsPerGpu"] = json!("two");
    let Err(error) = cluster
        .start_scheduler_binary(&binary, &plugin_config(&bad))
        .await
    else {
        anyhow::bail!("tandem-kube-scheduler started with malformed Tandem args");
    };
    let message = format!("{error:#}");
    ensure!(
        message.contains("exited") && message.contains("maxJobsPerGpu"),
        "unexpected error: {message}"
    );
    Ok(())
}

#[tokio::test]
async fn a_panicking_engine_fails_that_pod_and_the_next_pod_is_scheduled() -> Result<()> {
    cluster::install_crypto_provider();
    let binary = plugin_scheduler().await?;
    let mut cluster = Cluster::start_control_plane().await?;
    let (client, keys) = prepare(&cluster).await?;
    // The misbehaving component's knowledge is one id per line; one observed on GPU model
    // `panic` makes it panic whenever that job is scored.
    let snapshot = format!(
        "panic:{}\n{}",
        keys.key(NAMESPACE, "bad"),
        keys.key(NAMESPACE, "good")
    );
    store_knowledge(&client, snapshot.as_bytes()).await?;
    let mut with_misbehaving = args(cluster.dir());
    with_misbehaving["engine"] = json!(tandem_tests::components::MISBEHAVING);
    cluster
        .start_scheduler_binary(&binary, &plugin_config(&with_misbehaving))
        .await?;
    let scenario = async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let params = PostParams::default();
        pods.create(&params, &job_pod("bad-run", "bad", None)?)
            .await?;
        let event = tandem_event(&client, "bad-run").await?;
        println!("bad-run's event: {event}");
        ensure!(event.contains("panicked"), "{event}");
        pods.create(&params, &job_pod("good-run", "good", None)?)
            .await?;
        let node = wait_for_binding(&client, NAMESPACE, "good-run", Duration::from_secs(60)).await;
        ensure!(
            node.is_some(),
            "good-run was not scheduled: {:?}",
            events_of(&client, "good-run").await?
        );
        ensure!(
            pods.get("bad-run")
                .await?
                .spec
                .and_then(|s| s.node_name)
                .is_none()
        );
        Ok(())
    };
    let result = scenario.await;
    logged(&cluster, result)?;
    ensure!(
        cluster.is_running(Component::Scheduler),
        "tandem-kube-scheduler exited:\n{}",
        cluster.log_tails()
    );
    Ok(())
}

#[tokio::test]
async fn the_plugin_reads_what_pods_declare() -> Result<()> {
    cluster::install_crypto_provider();
    let binary = plugin_scheduler().await?;
    let mut cluster = Cluster::start_control_plane().await?;
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    for node in ["t4-a", "t4-b"] {
        create_gpu_node(&client, node, 1, "Tesla-T4", 15_360).await?;
    }
    for node in ["a100-a", "a100-b"] {
        create_gpu_node(&client, node, 1, "NVIDIA-A100-SXM4-40GB", 40_960).await?;
    }
    // The plugin's metrics are served on its intake's address.
    std::fs::write(cluster.dir().join("intake-token"), TOKEN)?;
    let port = free_port()?;
    let intake = format!("http://127.0.0.1:{port}");
    let mut priced = args(cluster.dir());
    priced["gpuPrices"] = json!({ "T4": 0.35, "NVIDIA-A100-SXM4-40GB": 3.0 });
    priced["intakeAddress"] = json!(format!("127.0.0.1:{port}"));
    priced["intakeTokenFile"] = json!(cluster.dir().join("intake-token"));
    cluster
        .start_scheduler_binary(&binary, &plugin_config(&priced))
        .await?;
    let scenario = async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let params = PostParams::default();
        let declaring = |name: &str, annotations: Value| -> Result<Pod> {
            let mut pod = job_pod(name, name, None)?;
            pod.metadata.annotations = Some(serde_json::from_value(annotations)?);
            Ok(pod)
        };
        let bound =
            |pod: &'static str| wait_for_binding(&client, NAMESPACE, pod, Duration::from_secs(60));

        // The prediction, from the same engine the plugin embeds.
        let runtime =
            Runtime::from_bytes(tandem_engine_embedded::COMPONENT, HostConfig::default())?;
        let mut engine = runtime.bootstrap(&Policy::default(), tandem_adapter_core::SEED)?;
        let vgg: tandem_api::ModelSummary = serde_json::from_value(declaring::vgg19_b256())?;
        let estimates = engine.estimate(
            &tandem_api::Job {
                declared: Some(vgg),
                ..tandem_api::Job::new("vgg")
            },
            &[GpuSpec::new("T4", 15_360), GpuSpec::new("A100", 40_960)],
        )?;
        for estimate in &estimates {
            println!(
                "VGG-19 b256 on {}: predicted {:?} MiB, reserved {:?} MiB, fits {}",
                estimate.gpu_model,
                estimate.peak_mem_mib,
                estimate.reserved_mib,
                estimate.fits_empty
            );
        }
        ensure!(!estimates[0].fits_empty && estimates[1].fits_empty);
        let model = |summary: Value| json!({ "tandem.dev/model": summary.to_string() });
        pods.create(
            &params,
            &declaring("vgg-big", model(declaring::vgg19_b256()))?,
        )
        .await?;
        let node = bound("vgg-big").await;
        println!("vgg-big was bound to {node:?}");
        ensure!(
            node.as_deref().is_some_and(|n| n.starts_with("a100-")),
            "vgg-big should land on an A100, got {node:?}"
        );

        pods.create(
            &params,
            &declaring("bad-model", json!({ "tandem.dev/model": "resnet50" }))?,
        )
        .await?;
        let event = tandem_event(&client, "bad-model").await?;
        println!("bad-model's event: {event}");
        ensure!(
            event.contains("tandem.dev/model") && event.contains("resnet50"),
            "{event}"
        );
        for (pod, priority, expect) in [("thrifty", "cost", "t4-"), ("urgent", "latency", "a100-")]
        {
            let annotations = json!({
                "tandem.dev/priority": priority,
                "tandem.dev/work": "1000 steps at 20/s on A100, 5/s on T4",
                "tandem.dev/model": declaring::resnet18().to_string(),
            });
            pods.create(&params, &declaring(pod, annotations)?).await?;
            let node = bound(pod).await;
            println!("{pod} ({priority}) was bound to {node:?}");
            ensure!(
                node.as_deref().is_some_and(|n| n.starts_with(expect)),
                "{pod} ({priority}) should land on {expect}*, got {node:?}"
            );
        }

        // The work above, counted in the plugin's /metrics (on its intake's address) in the
        // families every adapter serves: three pods placed (each judged by PreFilter, its GPU
        // chosen by Reserve), bad-model judged and refused at least once, four GPUs in the
        // view.
        let metrics = plugin_metrics(&intake).await?;
        let placed = 3.0;
        let at_least = [
            (
                r#"tandem_decisions_total{verb="prefilter",result="ok"}"#,
                placed + 1.0,
            ),
            (
                r#"tandem_decisions_total{verb="reserve",result="ok"}"#,
                placed,
            ),
            (
                r#"tandem_request_latency_seconds_count{verb="prefilter"}"#,
                placed + 1.0,
            ),
            (
                r#"tandem_request_latency_seconds_bucket{le="+Inf",verb="reserve"}"#,
                placed,
            ),
            (
                r#"tandem_engine_call_seconds_count{call="prefilter"}"#,
                placed + 1.0,
            ),
            (
                r#"tandem_engine_call_seconds_count{call="reserve"}"#,
                placed,
            ),
            (r#"tandem_declarations_refused_total{field="model"}"#, 1.0),
            ("tandem_view_rebuilds_total", 1.0),
        ];
        let exactly = [
            ("tandem_view_gpus", 4.0),
            ("tandem_engine_errors_total", 0.0),
            (
                r#"tandem_declarations_refused_total{field="priority"}"#,
                0.0,
            ),
            (r#"tandem_fail_opens_total{verb="prefilter"}"#, 0.0),
        ];
        let mut families = std::collections::BTreeSet::new();
        for (series, least) in at_least {
            let value = sample(&metrics, series);
            println!("the plugin's /metrics: {series} {value:?}");
            ensure!(
                value.is_some_and(|v| v >= least),
                "{series} is {value:?}, want at least {least}"
            );
            families.insert(family_of(series));
        }
        for (series, want) in exactly {
            let value = sample(&metrics, series);
            println!("the plugin's /metrics: {series} {value:?}");
            ensure!(value == Some(want), "{series} is {value:?}, want {want}");
            families.insert(family_of(series));
        }
        ensure!(families.len() >= 5, "{families:?}");
        // The time the answers took is real time, not zero.
        let latency = sample(
            &metrics,
            r#"tandem_request_latency_seconds_sum{verb="prefilter"}"#,
        );
        ensure!(
            latency.is_some_and(|seconds| seconds > 0.0),
            "prefilter latency sum {latency:?}"
        );
        let help = "# HELP tandem_decisions Requests answered, per verb and result.";
        ensure!(
            metrics.contains(help),
            "no help for tandem_decisions:\n{metrics}"
        );
        // kube-scheduler's own /metrics keeps its families: Tandem's are exported once.
        let scheduler = cluster.scheduler_metrics().await?;
        ensure!(
            scheduler.contains("scheduler_scheduling_attempt_duration_seconds")
                && !scheduler.contains("tandem_decisions"),
            "kube-scheduler's /metrics should hold its own families alone"
        );
        println!("Tandem families read: {families:?}");
        Ok(())
    };
    let result = scenario.await;
    logged(&cluster, result)
}

#[tokio::test]
async fn the_plugin_learns_from_the_node_profiler_and_from_finished_pods() -> Result<()> {
    cluster::install_crypto_provider();
    let binary = plugin_scheduler().await?;
    let mut cluster = Cluster::start_control_plane().await?;
    let dir = cluster.dir().to_path_buf();
    std::fs::write(dir.join("id-secret"), SECRET_HEX)?;
    std::fs::write(dir.join("intake-token"), TOKEN)?;
    let keys = JobKeys::from_file(&dir.join("id-secret"))?;
    let client = cluster.client().await?;
    let (alpha, beta) = profiler::the_recorded_pods(&cluster, &client).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let port = free_port()?;
    let intake = format!("http://127.0.0.1:{port}");
    let mut with_intake = args(&dir);
    with_intake["intakeAddress"] = json!(format!("127.0.0.1:{port}"));
    with_intake["intakeTokenFile"] = json!(dir.join("intake-token"));
    cluster
        .start_scheduler_binary(&binary, &plugin_config(&with_intake))
        .await?;
    let scenario = async {
        let http = reqwest::Client::new();
        let before = knowledge(&http, &intake).await?;

        // Without profiles, a second beta fits nowhere, and the pod's events say why.
        profiler::fits_nowhere_without_profiles(&client, job_pod("beta-early", "beta", None)?)
            .await?;

        // The node profiler posts both pods' profiles to the plugin's intake.
        let replay = profiler::recording_for(&dir, &alpha, &beta)?;
        let posted = profiler::profile_once(&cluster, &intake, &replay, "v100-p").await?;
        ensure!(posted.len() == 2, "two profiles expected: {posted:?}");
        ensure!(
            posted
                .iter()
                .any(|(job, p)| *job == keys.key(NAMESPACE, "beta") && p.mem_used_mib == 11_000),
            "beta's profile, keyed as the plugin keys pods: {posted:?}"
        );
        let after = knowledge(&http, &intake).await?;
        println!(
            "(intake) the plugin's knowledge: {} profiles before the profiler, {} after",
            before["profiles"], after["profiles"]
        );
        ensure!(after["profiles"].as_u64() == before["profiles"].as_u64().map(|n| n + 2));

        // With them, the next beta is placed beside alpha, where its memory fits.
        profiler::the_next_beta_joins_alpha(&client, job_pod("beta-2", "beta", None)?).await?;

        // Finished pods teach: a and b each run alone once, then together on one GPU.
        create_gpu_node(&client, "v100-c", 1, "Tesla-V100-SXM2-16GB", 16_384).await?;
        extender::post(
            &http,
            &format!("{intake}/v1/profiles"),
            json!({ "profiles": [
                { "job": keys.key(NAMESPACE, "a"), "profile": profile(30.0, 10.0, 3_000) },
                { "job": keys.key(NAMESPACE, "b"), "profile": profile(50.0, 25.0, 3_000) },
            ]}),
        )
        .await?;
        run_alone_then_together(&cluster, &pods, ("v100-c", "v100-c/0")).await?;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let learned = loop {
            let now = knowledge(&http, &intake).await?;
            if now["outcomes"] != after["outcomes"] {
                break now;
            }
            if std::time::Instant::now() >= deadline {
                let metrics = plugin_metrics(&intake).await?;
                let learning: Vec<&str> = metrics
                    .lines()
                    .filter(|l| l.starts_with("tandem_outcomes") || l.starts_with("tandem_runs"))
                    .collect();
                anyhow::bail!("no outcome learned from the finished pods: {learning:#?}");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        println!(
            "(outcomes) finished pods: outcomes {} -> {}",
            after["outcomes"], learned["outcomes"]
        );
        ensure!(learned["outcomes"].as_u64() == after["outcomes"].as_u64().map(|n| n + 1));

        // Counted in the plugin's /metrics, and kept in the knowledge base's ConfigMap.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let (outcomes, writes) = loop {
            let metrics = plugin_metrics(&intake).await?;
            let outcomes = sample(&metrics, "tandem_outcomes_learned_total");
            let writes = sample(&metrics, "tandem_store_writes_total");
            if outcomes == Some(1.0) || std::time::Instant::now() >= deadline {
                break (outcomes, writes);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        println!(
            "the plugin's /metrics: tandem_outcomes_learned_total {outcomes:?}, tandem_store_writes_total {writes:?}"
        );
        ensure!(outcomes == Some(1.0), "outcomes learned: {outcomes:?}");
        ensure!(writes.is_some_and(|w| w >= 2.0), "store writes: {writes:?}");
        let maps: Api<ConfigMap> = Api::namespaced(client.clone(), SYSTEM);
        ensure!(
            maps.get_opt(KNOWLEDGE).await?.is_some(),
            "the plugin stored no knowledge base"
        );
        Ok(())
    };
    let result = scenario.await;
    logged(&cluster, result)
}

#[tokio::test]
async fn neither_a_forged_placement_nor_the_poison_outcome_bends_or_breaks_the_plugin() -> Result<()>
{
    cluster::install_crypto_provider();
    let binary = plugin_scheduler().await?;
    let mut cluster = Cluster::start_control_plane().await?;
    let dir = cluster.dir().to_path_buf();
    std::fs::write(dir.join("id-secret"), SECRET_HEX)?;
    std::fs::write(dir.join("intake-token"), TOKEN)?;
    let keys = JobKeys::from_file(&dir.join("id-secret"))?;
    let client = cluster.client().await?;
    ensure_namespace(&client, NAMESPACE).await?;
    ensure_namespace(&client, SYSTEM).await?;
    create_gpu_node(&client, FORGED_NODE, 4, "Tesla-V100-SXM2-16GB", 16_384).await?;
    let port = free_port()?;
    let intake = format!("http://127.0.0.1:{port}");
    let mut with_intake = args(&dir);
    with_intake["intakeAddress"] = json!(format!("127.0.0.1:{port}"));
    with_intake["intakeTokenFile"] = json!(dir.join("intake-token"));
    // One pod per GPU: a GPU the forger is counted on takes no one else.
    with_intake["maxJobsPerGpu"] = json!(1);
    let config = plugin_config(&with_intake);
    cluster.start_scheduler_binary(&binary, &config).await?;
    let scenario = async {
        let http = reqwest::Client::new();
        // The poison outcome, with the intake token every node profiler of old held: alone
        // 1e-300 s, beside its partner 1e300 s (statistics that overflow to what no snapshot
        // can hold).
        let (a, b) = (keys.key(NAMESPACE, "a"), keys.key(NAMESPACE, "b"));
        extender::post(
            &http,
            &format!("{intake}/v1/profiles"),
            json!({ "profiles": [
                { "job": a, "profile": profile(30.0, 10.0, 3_000) },
                { "job": b, "profile": profile(50.0, 25.0, 3_000) },
            ]}),
        )
        .await?;
        let before = knowledge(&http, &intake).await?;
        let poison = json!({ "outcomes": [{ "gpu_model": "V100", "jobs": [a, b],
            "solo_s": [1e-300, 1e-300], "colocated_s": [1e300, 1e300] }] });
        let answer = http
            .post(format!("{intake}/v1/outcomes"))
            .bearer_auth(TOKEN)
            .json(&poison)
            .send()
            .await?;
        let (status, text) = (answer.status().as_u16(), answer.text().await?);
        println!("(poison) the plugin's intake answered the poison outcome {status} {text}");
        ensure!(
            status == 400 && text.contains("outcomes[0].solo_s[0]"),
            "the poison outcome was answered {status}: {text}"
        );
        // Restarted, the scheduler loads what it stored and schedules again.
        cluster.stop(Component::Scheduler);
        cluster
            .start_scheduler_binary(&binary, &config)
            .await
            .context("the plugin's scheduler did not come back after the poison outcome")?;
        let after = knowledge(&http, &intake).await?;
        println!(
            "(poison) restarted: {} profiles, {} outcomes (before: {}, {})",
            after["profiles"], after["outcomes"], before["profiles"], before["outcomes"]
        );
        ensure!(
            after == before,
            "the restarted plugin knows {after}, not {before}"
        );

        // A pod its owner bound to a four-GPU node, naming all four unsigned: counted on one.
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        placement::create_forger(&pods, FORGED_NODE).await?;
        placement::tenants_bind_beside_the_forger(
            &cluster,
            &client,
            |name| job_pod(name, name, None),
            "plugin",
        )
        .await?;
        Ok(())
    };
    let result = scenario.await;
    logged(&cluster, result)
}
