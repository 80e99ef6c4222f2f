//! Memory stays bounded under a flood: sixteen 64 MiB bodies at once and a batch of 200,000
//! profiles. What the body budget cannot hold gets `429` before it is read, the oversized batch
//! `413` as it is read, `/healthz` answers throughout, and the adapter's peak RSS stays under
//! [`RSS_BOUND_MIB`] (the bound `docs/RELIABILITY.md` documents).

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use serde_json::json;

use crate::cluster::{free_port, spawn_logged};

/// The adapter's peak resident memory under this load must stay under this (MiB).
const RSS_BOUND_MIB: u64 = 768;
/// Concurrent bodies of the largest size allowed.
const FLOOD: usize = 16;
const BODY_BYTES: usize = 64 << 20;
/// Profiles in the oversized batch.
const BATCH: usize = 200_000;

/// `VmHWM` (peak resident set) of process `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM")
}

#[tokio::test]
async fn a_flood_of_large_bodies_costs_bounded_memory_and_health_stays_up() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("id-secret"), "cd".repeat(32))?;
    std::fs::write(dir.path().join("intake-token"), "load-token")?;
    let node = json!({
        "metadata": { "name": "n1", "labels": { "nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB" } },
        "status": { "allocatable": { "nvidia.com/gpu": "4" } },
    });
    std::fs::write(
        dir.path().join("cluster.json"),
        serde_json::to_vec(&json!({ "nodes": [node], "pods": [] }))?,
    )?;
    let port = free_port()?;
    let mut command = Command::new(tandem_e2e::program("tandem-kube-adapter")?);
    command
        .current_dir(dir.path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args([
            "--cluster-file",
            "cluster.json",
            "--id-secret-file",
            "id-secret",
        ])
        .args([
            "--intake-token-file",
            "intake-token",
            "--request-timeout",
            "30s",
            // A fixed cluster: nothing is bound, so nothing is signed.
            "--unsigned-placements",
        ]);
    let mut adapter = spawn_logged(command, &dir.path().join("adapter.log"))?;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        ensure!(adapter.is_running(), "exited:\n{}", adapter.log_tail(20));
        if let Ok(r) = http.get(format!("{base}/readyz")).send().await
            && r.status().is_success()
        {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "not ready:\n{}",
            adapter.log_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let idle = peak_rss_kib(adapter.id())?;

    // 16 bodies of 64 MiB (a filter request whose node list is that large), all at once.
    let names: Vec<String> = (0..BODY_BYTES / 32)
        .map(|i| format!("node-{i:026}"))
        .collect();
    let mut body = serde_json::to_vec(&json!({ "Pod": {}, "NodeNames": names }))?;
    body.truncate(BODY_BYTES - 1);
    let flood = (0..FLOOD).map(|_| {
        let request = http
            .post(format!("{base}/filter"))
            .header("content-type", "application/json")
            .body(body.clone());
        // A body refused before it is read may reach the client as a closed connection (0)
        // rather than as its 429, depending on how much of it was sent.
        async move { request.send().await.map_or(0, |r| r.status().as_u16()) }
    });
    // And a batch of 200,000 profiles.
    let profiles: Vec<_> = (0..BATCH)
        .map(|i| json!({ "job": format!("{i:032x}"), "profile": {
            "gpu_util_pct": 40.0, "mem_access_pct": 20.0, "mem_used_mib": 2000, "gpu_model": "V100" }}))
        .collect();
    let batch = serde_json::to_vec(&json!({ "profiles": profiles }))?;
    println!(
        "flood: {FLOOD} bodies of {} MiB; batch: {BATCH} profiles, {} MiB",
        body.len() >> 20,
        batch.len() >> 20
    );
    let batch = http
        .post(format!("{base}/v1/profiles"))
        .bearer_auth("load-token")
        .header("content-type", "application/json")
        .body(batch)
        .send();
    let health = async {
        let mut answered = 0;
        for _ in 0..20 {
            let r = http.get(format!("{base}/healthz")).send().await?;
            ensure!(r.status().is_success(), "healthz: {}", r.status());
            answered += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::Ok(answered)
    };
    let (statuses, batch, health) = tokio::join!(futures::future::join_all(flood), batch, health);
    let batch = batch?;
    let batch_status = batch.status().as_u16();
    let batch_text = batch.text().await?;
    let peak = peak_rss_kib(adapter.id())?;
    let refused = statuses.iter().filter(|&&s| s == 429 || s == 0).count();
    println!(
        "flood answers: {statuses:?} ({refused} refused 429); batch -> {batch_status} {batch_text}; \
         healthz answered {} times; peak RSS {} MiB (idle {} MiB)",
        health?,
        peak / 1024,
        idle / 1024
    );
    // The budget (96 MiB) holds one body of 64 MiB at a time.
    ensure!(
        refused >= FLOOD - 2,
        "the budget let {} bodies in",
        FLOOD - refused
    );
    ensure!(statuses.contains(&429), "no 429 among {statuses:?}");
    ensure!(
        statuses.iter().all(|&s| [0, 200, 400, 429].contains(&s)),
        "{statuses:?}"
    );
    ensure!(
        batch_status == 413,
        "the batch got {batch_status}: {batch_text}"
    );
    ensure!(
        peak / 1024 < RSS_BOUND_MIB,
        "peak RSS {} MiB over the bound of {RSS_BOUND_MIB} MiB",
        peak / 1024
    );
    ensure!(
        adapter.is_running(),
        "the adapter died:\n{}",
        adapter.log_tail(20)
    );
    let r = http.get(format!("{base}/healthz")).send().await?;
    ensure!(r.status().is_success());
    Ok(())
}
