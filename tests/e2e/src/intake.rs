//! A Tandem adapter as the end-to-end suites talk to it: its process, its readiness, and its
//! HTTP intake as a node profiler holding the cluster's secret and token uses it.
//!
//! The Kubernetes extender and the Volcano adapter serve the same intake (`/v1/profiles`,
//! `/v1/outcomes`, `/v1/predict`, `/v1/knowledge`) on one core, so their suites teach the engine
//! and read back what it learned through these helpers.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use serde_json::{Value, json};

use crate::cluster::ChildProcess;

/// The intake's bearer token the suites write for the adapter to read.
pub const TOKEN: &str = "e2e-intake-token";
/// The cluster secret (hex) that keys job names, written for the adapter to read.
pub const SECRET_HEX: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// An adapter process and the URL it serves on.
pub struct Adapter {
    /// The process, stopped when dropped.
    pub process: ChildProcess,
    /// `http://host:port`, without a trailing slash.
    pub url: String,
}

/// Waits up to 60 s for the adapter's `/readyz`; fails at once, with its log's tail, when the
/// process exits.
pub async fn wait_ready(http: &reqwest::Client, adapter: &mut Adapter) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        ensure!(
            adapter.process.is_running(),
            "the adapter exited:\n{}",
            adapter.process.log_tail(40)
        );
        if let Ok(r) = http.get(format!("{}/readyz", adapter.url)).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "the adapter did not get ready:\n{}",
            adapter.process.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Posts `body` as a profiler would: a 503 (no leader elected yet, right after a start) is
/// retried for a while, anything else is final.
pub async fn post(http: &reqwest::Client, url: &str, body: Value) -> Result<Value> {
    retrying_unavailable(url, || http.post(url).json(&body)).await
}

/// What the knowledge base of the adapter at `url` holds. A 503 (the engine busy past the
/// wait, as right after a restart on a loaded machine) is retried for a while, as an operator
/// would.
pub async fn knowledge(http: &reqwest::Client, url: &str) -> Result<Value> {
    let url = format!("{url}/v1/knowledge");
    retrying_unavailable(&url, || http.get(&url)).await
}

/// Sends the request `request` builds with the intake's token, again every 200 ms for up to
/// 30 s while the adapter answers 503, and returns the final answer's JSON; any other failure
/// is final and names `url`.
async fn retrying_unavailable(
    url: &str,
    request: impl Fn() -> reqwest::RequestBuilder,
) -> Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = request().bearer_auth(TOKEN).send().await?;
        let status = response.status();
        let text = response.text().await?;
        if status == reqwest::StatusCode::SERVICE_UNAVAILABLE && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        ensure!(status.is_success(), "{url}: {status}: {text}");
        return Ok(serde_json::from_str(&text)?);
    }
}

/// A V100 profile: utilization and memory-access share in %, memory used in MiB.
pub fn profile(util: f32, access: f32, mem: u32) -> Value {
    json!({ "gpu_util_pct": util, "mem_access_pct": access, "mem_used_mib": mem, "gpu_model": "V100" })
}

/// Posts each `(verb, body, expected)` to the adapter's scheduler endpoint `/<verb>` and checks
/// that it answers `400` with a message naming `expected` (the field at fault); `label` tags
/// the lines printed.
pub async fn expect_bad_requests(
    http: &reqwest::Client,
    adapter: &Adapter,
    label: &str,
    cases: &[(&str, &str, &str)],
) -> Result<()> {
    for &(verb, body, expect) in cases {
        let response = http
            .post(format!("{}/{verb}", adapter.url))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        println!("{label} POST /{verb} {body:?} -> {status} {text}");
        ensure!(
            status == 400,
            "/{verb} with {body:?} answered {status}: {text}"
        );
        ensure!(
            text.contains(expect),
            "/{verb}: {text:?} does not name {expect:?}"
        );
    }
    Ok(())
}

/// Teaches the adapter at `url`, as the node profiler would, that `p` suffers little beside `x`
/// and a lot beside `y` on a V100: profiles of x, y, p and `big` (which needs 20,000 MiB, more
/// than a V100 has) and of `more`, then three measured outcomes of each pair. `key` keys a job
/// name as the cluster secret does. Checks, and prints, that the engine now predicts p slows
/// down less beside x; returns that prediction of p beside x, for later comparisons.
pub async fn teach_p_prefers_x(
    http: &reqwest::Client,
    url: &str,
    key: impl Fn(&str) -> String,
    more: &[(&str, Value)],
) -> Result<Value> {
    let mut profiles = vec![
        json!({ "job": key("x"), "profile": profile(35.0, 12.0, 4_000) }),
        json!({ "job": key("y"), "profile": profile(92.0, 70.0, 5_000) }),
        json!({ "job": key("p"), "profile": profile(45.0, 20.0, 4_500) }),
        json!({ "job": key("big"), "profile": profile(60.0, 30.0, 20_000) }),
    ];
    profiles.extend(
        more.iter()
            .map(|(job, profile)| json!({ "job": key(job), "profile": profile })),
    );
    post(
        http,
        &format!("{url}/v1/profiles"),
        json!({ "profiles": profiles }),
    )
    .await?;
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        outcomes.push(json!({ "gpu_model": "V100", "jobs": [key("p"), key("x")], "solo_s": [100.0, 100.0], "colocated_s": [112.0, 110.0] }));
        outcomes.push(json!({ "gpu_model": "V100", "jobs": [key("p"), key("y")], "solo_s": [100.0, 100.0], "colocated_s": [195.0, 160.0] }));
    }
    post(
        http,
        &format!("{url}/v1/outcomes"),
        json!({ "outcomes": outcomes }),
    )
    .await?;
    let with_x = predict_v100(http, url, json!([key("p"), key("x")])).await?;
    let with_y = predict_v100(http, url, json!([key("p"), key("y")])).await?;
    println!("(b) engine prediction for p beside x on V100: {with_x}");
    println!("(b) engine prediction for p beside y on V100: {with_y}");
    let slowdown = |v: &Value| v["slowdown_pct"][0].as_f64().unwrap_or(f64::NAN);
    ensure!(
        slowdown(&with_x) < slowdown(&with_y),
        "the engine should predict p slows down less beside x"
    );
    Ok(with_x)
}

/// The engine's prediction (`/v1/predict`) for the keyed `jobs` sharing a V100.
pub async fn predict_v100(http: &reqwest::Client, url: &str, jobs: Value) -> Result<Value> {
    post(
        http,
        &format!("{url}/v1/predict"),
        json!({ "jobs": jobs, "gpu": { "model": "V100", "memory_mib": 16_384 } }),
    )
    .await
}
