//! Privacy, end to end: the names, namespaces, images and labels of the pods Tandem places and
//! learns from, and their UIDs, appear nowhere in what the adapter stores (the knowledge
//! base's ConfigMap, decoded), logs (at debug level), exports (`/metrics`), answers
//! (`/v1/knowledge`) or reports (its reasons in the pods' events).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::api::{Api, ListParams, PostParams};
use tandem_adapter_core::JobKeys;

use crate::cluster::{
    Cluster, create_gpu_node, ensure_namespace, free_port, scheduler_config, wait_for_binding,
};
use crate::extender::metric;
use crate::extender::{
    SECRET_HEX, SYSTEM, TOKEN, finish, job_pod, knowledge, post, profile, start, start_adapter,
    wait_ready,
};

/// The string every identifying field of the test's pods carries.
const CANARY: &str = "zqcanary";

#[tokio::test]
async fn no_pod_name_namespace_image_label_or_uid_leaves_the_adapter() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let port = free_port()?;
    let cluster = Cluster::start(&scheduler_config(Some(port))).await?;
    let log = cluster.dir().join("privacy-adapter.log");
    let result = scenario(&cluster, port, &log).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!("--- adapter ---\n{}", crate::cluster::tail(&log, 60));
    }
    result
}

/// A pod of `job` in the canary's colours: its name, job label, another label and its image
/// all carry [`CANARY`].
fn canary_pod(name: &str, job: &str, at: Option<(&str, &str)>) -> Result<Pod> {
    let mut pod = job_pod(name, job, at)?;
    pod.metadata
        .labels
        .get_or_insert_default()
        .insert("team".into(), format!("{CANARY}-team"));
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers[0].image = Some(format!("registry.invalid/{CANARY}-image:v1"));
    }
    Ok(pod)
}

async fn scenario(cluster: &Cluster, port: u16, log: &Path) -> Result<()> {
    std::fs::write(cluster.dir().join("id-secret"), SECRET_HEX)?;
    std::fs::write(cluster.dir().join("intake-token"), TOKEN)?;
    let keys = JobKeys::from_file(&cluster.dir().join("id-secret"))?;
    let namespace = format!("{CANARY}-ns");
    let job = |name: &str| format!("{CANARY}-job-{name}");
    let key = |name: &str| keys.key(&namespace, &job(name));
    let client = cluster.client().await?;
    ensure_namespace(&client, &namespace).await?;
    ensure_namespace(&client, SYSTEM).await?;
    create_gpu_node(&client, "v100-a", 2, "Tesla-V100-SXM2-16GB", 16_384).await?;
    let http = reqwest::Client::new();
    let mut adapter = start_adapter(cluster, port, log)?;
    wait_ready(&http, &mut adapter).await?;

    post(
        &http,
        &format!("{}/v1/profiles", adapter.url),
        serde_json::json!({ "profiles": [
            { "job": key("a"), "profile": profile(35.0, 12.0, 4_000) },
            { "job": key("b"), "profile": profile(50.0, 25.0, 5_000) },
            { "job": key("big"), "profile": profile(60.0, 30.0, 20_000) },
        ]}),
    )
    .await?;

    // Finished runs on v100-a/0: a and b alone once each, then together. The adapter learns
    // an outcome from them and keeps every run in its ledger.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let params = PostParams::default();
    let at = crate::extender::seconds_ago();
    let here = Some(("v100-a", "v100-a/0"));
    for (name, of, from, to) in [("a-solo", "a", 4_000, 3_900), ("b-solo", "b", 3_800, 3_750)] {
        let name = format!("{CANARY}-pod-{name}");
        cluster
            .create_placed(&pods, &canary_pod(&name, &job(of), here)?)
            .await?;
        finish(&pods, &name, &at(from), &at(to)).await?;
    }
    let pair = [
        format!("{CANARY}-pod-a-pair"),
        format!("{CANARY}-pod-b-pair"),
    ];
    for (name, of) in pair.iter().zip(["a", "b"]) {
        cluster
            .create_placed(&pods, &canary_pod(name, &job(of), here)?)
            .await?;
        start(&pods, name, &at(1_000)).await?;
    }
    finish(&pods, &pair[0], &at(1_000), &at(850)).await?;
    finish(&pods, &pair[1], &at(1_000), &at(860)).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let learned = loop {
        let learned = metric(&http, &adapter, "tandem_outcomes_learned_total").await?;
        if learned >= 1.0 || Instant::now() > deadline {
            break learned;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    println!("outcomes learned from the finished canary pods: {learned}");
    ensure!(
        learned == 1.0,
        "the adapter learned {learned} outcomes from one shared run"
    );

    // One pod placed through the extender, one refused by it (its memory fits no GPU).
    let placed = format!("{CANARY}-pod-a2");
    pods.create(&params, &canary_pod(&placed, &job("a"), None)?)
        .await?;
    let node = wait_for_binding(&client, &namespace, &placed, Duration::from_secs(30)).await;
    ensure!(
        node.as_deref() == Some("v100-a"),
        "{placed} bound to {node:?}"
    );
    let refused = format!("{CANARY}-pod-big");
    pods.create(&params, &canary_pod(&refused, &job("big"), None)?)
        .await?;
    let reasons = tandem_reasons(&client, &namespace, &refused).await?;
    println!("Tandem's reason for {refused}: {reasons:?}");

    // Everything the adapter wrote or answers, decoded.
    let uids: Vec<String> = pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect();
    ensure!(
        uids.len() == 6,
        "expected 6 pods, found {} UIDs",
        uids.len()
    );
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), SYSTEM);
    let mut stored = String::new();
    for map in maps.list(&ListParams::default()).await?.items {
        for (name, value) in map.data.unwrap_or_default() {
            stored.push_str(&format!("{name}={value}\n"));
        }
        for (name, value) in map.binary_data.unwrap_or_default() {
            stored.push_str(&format!("{name}={}\n", String::from_utf8_lossy(&value.0)));
        }
    }
    // The store does hold what was learned, under keyed ids: a search of it can find things.
    ensure!(
        stored.contains(&key("a")),
        "the stored knowledge base does not hold job a's keyed id"
    );
    let metrics = http
        .get(format!("{}/metrics", adapter.url))
        .send()
        .await?
        .text()
        .await?;
    let answered = knowledge(&http, &adapter.url).await?.to_string();
    let logged = std::fs::read_to_string(log).with_context(|| format!("{}", log.display()))?;
    ensure!(
        logged.lines().count() > 5,
        "the adapter's debug log is nearly empty:\n{logged}"
    );
    let reported = reasons.join("\n");
    for (what, text) in [
        ("the stored knowledge base", &stored),
        ("the debug log", &logged),
        ("/metrics", &metrics),
        ("/v1/knowledge", &answered),
        ("Tandem's reasons in events", &reported),
    ] {
        ensure!(
            !text.contains(CANARY),
            "{what} names a pod, namespace, image or label: {}",
            around(text, CANARY)
        );
        for uid in &uids {
            ensure!(
                !text.contains(uid.as_str()),
                "{what} holds the pod UID {uid}: {}",
                around(text, uid)
            );
        }
        println!("{what}: {} bytes, no canary, no pod UID", text.len());
    }
    Ok(())
}

/// Messages of `pod`'s events that carry Tandem's reason, waiting up to 30 s for one. (The
/// scheduler's own events name the pod, as they do for every pod; Tandem's part of a message
/// is what the adapter controls.)
async fn tandem_reasons(client: &kube::Client, namespace: &str, pod: &str) -> Result<Vec<String>> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reasons: Vec<String> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(pod))
            .filter_map(|e| e.message)
            .filter_map(|m| m.find("Tandem").map(|at| m[at..].to_owned()))
            .collect();
        if !reasons.is_empty() {
            return Ok(reasons);
        }
        ensure!(
            Instant::now() < deadline,
            "no Tandem reason in {pod}'s events"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Up to 60 characters of `text` either side of the first `needle`.
fn around(text: &str, needle: &str) -> String {
    let at = text.find(needle).unwrap_or(0);
    let from = text.floor_char_boundary(at.saturating_sub(60));
    let to = text.ceil_char_boundary((at + needle.len() + 60).min(text.len()));
    format!("…{}…", &text[from..to])
}
