//! The C ABI as the Go plugin uses it: real engine component, real misbehaving component.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;
use std::time::Duration;

use serde_json::{Value, json};
use tandem_kube_common::placement::{Placement, Signer, Verifier};

use super::*;

/// The placement key of every fixture: its signer and its private key (PEM).
static KEY: LazyLock<(Signer, String)> =
    LazyLock::new(|| Signer::generate().expect("a key pair is generated"));

/// A plugin handle and the directory holding its id secret.
struct Fixture {
    plugin: *mut TandemPlugin,
    _dir: tempfile::TempDir,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // SAFETY: made by tandem_plugin_new, freed once, no call running.
        unsafe { tandem_plugin_free(self.plugin) };
    }
}

/// Calls `f` with an output buffer and returns the status and the buffer as text.
fn call(f: impl FnOnce(*mut TandemBuf) -> TandemStatus) -> (TandemStatus, String) {
    let (status, bytes) = call_bytes(f);
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// Calls `f` with an output buffer and returns the status and the buffer's bytes.
fn call_bytes(f: impl FnOnce(*mut TandemBuf) -> TandemStatus) -> (TandemStatus, Vec<u8>) {
    let mut out = TandemBuf::empty();
    let status = f(&mut out);
    let bytes = if out.ptr.is_null() {
        Vec::new()
    } else {
        // SAFETY: filled by the library: `len` bytes at `ptr`.
        unsafe { std::slice::from_raw_parts(out.ptr, out.len) }.to_vec()
    };
    // SAFETY: filled by the library, freed once.
    unsafe { tandem_buf_free(out) };
    (status, bytes)
}

/// Reads PreFilter's binary answer (`Prepared::encode`) as the Go plugin does, into the shape
/// the tests assert on: `managed`, `generation`, `names` (as sent: empty when the caller held
/// the table), and by node name `scores`, `failed` and `unresolvable`. `table` is the node
/// table to use when the answer leaves it out.
fn decode(bytes: &[u8], table: &[String]) -> Value {
    let mut at = 0;
    let mut take = |n: usize| {
        let slice = &bytes[at..at + n];
        at += n;
        slice
    };
    assert_eq!(take(1)[0], prepared::PREPARED_FORMAT);
    if take(1)[0] == 0 {
        return json!({ "managed": false });
    }
    let generation = u64::from_le_bytes(take(8).try_into().unwrap());
    let u32_at = |slice: &[u8]| u32::from_le_bytes(slice.try_into().unwrap()) as usize;
    let mut names = Vec::new();
    if take(1)[0] == 1 {
        for _ in 0..u32_at(take(4)) {
            let len = u32_at(take(4));
            names.push(String::from_utf8(take(len).to_vec()).unwrap());
        }
    }
    let mut verdicts = Vec::new();
    for _ in 0..u32_at(take(4)) {
        let v = take(4);
        verdicts.push((v[0], v[1], u16::from_le_bytes([v[2], v[3]]) as usize));
    }
    let mut reasons = Vec::new();
    for _ in 0..u32_at(take(4)) {
        let len = u32_at(take(4));
        reasons.push(String::from_utf8(take(len).to_vec()).unwrap());
    }
    assert_eq!(at, bytes.len(), "trailing bytes");
    let table: Vec<String> = if names.is_empty() {
        table.to_vec()
    } else {
        names.clone()
    };
    assert_eq!(table.len(), verdicts.len());
    let (mut scores, mut failed, mut unresolvable) = (json!({}), json!({}), json!({}));
    for (name, (kind, score, reason)) in table.iter().zip(verdicts) {
        match kind {
            0 => scores[name] = json!(score),
            1 => failed[name] = json!(reasons[reason]),
            2 => unresolvable[name] = json!(reasons[reason]),
            other => panic!("unknown verdict kind {other}"),
        }
    }
    json!({ "managed": true, "generation": generation, "names": names, "scores": scores,
            "failed": failed, "unresolvable": unresolvable })
}

fn new_plugin(args: &Value) -> (TandemStatus, String, *mut TandemPlugin) {
    let args = args.to_string();
    let mut plugin = std::ptr::null_mut();
    let (status, text) = call(|out| {
        // SAFETY: valid pointers for the call.
        unsafe {
            tandem_plugin_new(
                args.as_ptr(),
                args.len(),
                std::ptr::null(),
                0,
                &mut plugin,
                out,
            )
        }
    });
    (status, text, plugin)
}

fn fixture(extra: Value) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("id-secret");
    std::fs::write(&secret, "00112233445566778899aabbccddeeff\n").unwrap();
    let key = dir.path().join("placement.key");
    std::fs::write(&key, &KEY.1).unwrap();
    let mut args = json!({ "idSecretFile": secret });
    if extra.get("unsignedPlacements").is_none() {
        args["placementKeyFile"] = json!(key);
    }
    for (key, value) in extra.as_object().unwrap() {
        args[key] = value.clone();
    }
    let (status, text, plugin) = new_plugin(&args);
    assert_eq!(status, TANDEM_OK, "{text}");
    let settings: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(settings["candidateNodes"], 16);
    Fixture { plugin, _dir: dir }
}

impl Fixture {
    fn set(&self, kind: &str, object: &Value) {
        let json = object.to_string();
        let (status, text) = call(|out| {
            // SAFETY: a live handle and valid pointers.
            unsafe {
                match kind {
                    "node" => tandem_plugin_set_node(self.plugin, json.as_ptr(), json.len(), out),
                    _ => tandem_plugin_set_pod(self.plugin, json.as_ptr(), json.len(), out),
                }
            }
        });
        assert_eq!(status, TANDEM_OK, "{text}");
    }

    /// Delivers `pod` as the plugin's watch on pods that started or finished does.
    fn ran(&self, pod: &Value) {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod.clone()).unwrap();
        // SAFETY: a live handle, used while the fixture lives.
        let handle = unsafe { &*self.plugin };
        handle.plugin.lock().app().pod_ran(&pod);
    }

    /// Observes a profile of `job` (namespace `default`) as the intake does: on the core,
    /// acknowledged once applied.
    fn profile(&self, job: &str, util: f32, mem: u32, model: &str) {
        let profile = tandem_api::Profile {
            gpu_util_pct: util,
            mem_access_pct: 10.0,
            mem_used_mib: mem,
            gpu_model: model.into(),
        };
        // SAFETY: a live handle, used while the fixture lives.
        let handle = unsafe { &*self.plugin };
        let core = handle.served.core();
        let id = core.keys.key("default", job);
        handle
            .served
            .block_on(core.observe(move |state| {
                state
                    .recommender()
                    .observe_profile(&id, &profile)
                    .map_err(tandem_adapter_core::engine::failed("observe-profile"))
            }))
            .unwrap();
    }

    fn prefilter_with(&self, pod: &Value, known_generation: u64) -> (TandemStatus, Vec<u8>) {
        let json = pod.to_string();
        call_bytes(|out| {
            // SAFETY: a live handle and valid pointers.
            unsafe {
                tandem_plugin_prefilter(
                    self.plugin,
                    json.as_ptr(),
                    json.len(),
                    known_generation,
                    out,
                )
            }
        })
    }

    fn prefilter(&self, pod: &Value) -> (TandemStatus, String) {
        let (status, bytes) = self.prefilter_with(pod, 0);
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    fn prepared(&self, pod: &Value) -> Value {
        let (status, bytes) = self.prefilter_with(pod, 0);
        assert_eq!(status, TANDEM_OK, "{}", String::from_utf8_lossy(&bytes));
        decode(&bytes, &[])
    }

    /// The plugin's metrics, as its intake's `/metrics` serves them.
    fn metrics(&self) -> String {
        // SAFETY: a live handle, freed only when the fixture is dropped.
        let handle = unsafe { &*self.plugin };
        handle.served.core().metrics.encode()
    }

    /// The value of the sample `series` (name and labels as written) in the plugin's metrics.
    fn sample(&self, series: &str) -> Option<f64> {
        let text = self.metrics();
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
    }

    fn reserve(&self, uid: &str, node: &str) -> (TandemStatus, String) {
        call(|out| {
            // SAFETY: a live handle and valid pointers.
            unsafe {
                tandem_plugin_reserve(
                    self.plugin,
                    uid.as_ptr(),
                    uid.len(),
                    node.as_ptr(),
                    node.len(),
                    out,
                )
            }
        })
    }
}

fn node(name: &str) -> Value {
    json!({
        "metadata": { "name": name, "labels": {
            "nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB", "nvidia.com/gpu.memory": "16384" } },
        "status": { "allocatable": { "nvidia.com/gpu": "1" } },
    })
}

/// A pod of one GPU; bound to `node` with Tandem's placement on `gpu` (signed with the
/// fixtures' key) when given.
fn pod(name: &str, node: Option<&str>, gpu: Option<&str>) -> Value {
    let mut pod = json!({
        "metadata": { "name": name, "namespace": "default", "uid": format!("uid-{name}") },
        "spec": { "containers": [{ "name": "main",
            "resources": { "limits": { "nvidia.com/gpu": "1" } } }] },
        "status": { "phase": "Pending" },
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    if let Some(gpu) = gpu {
        let placement = Placement::decided(&[gpu.to_owned()], None).unwrap();
        let signed = KEY.0.signed(&format!("uid-{name}"), placement);
        pod["metadata"]["annotations"] = json!(signed.annotations());
    }
    pod
}

/// Two one-GPU nodes: `x` (light) runs on a, `y` (saturating) on b.
fn cluster(plugin: &Fixture) {
    for (job, util, mem) in [
        ("x", 30.0, 3_000),
        ("y", 95.0, 3_000),
        ("p", 40.0, 3_000),
        ("q", 40.0, 3_000),
    ] {
        plugin.profile(job, util, mem, "V100");
    }
    plugin.profile("big", 60.0, 20_000, "V100");
    plugin.set("node", &node("a"));
    plugin.set("node", &node("b"));
    plugin.set("pod", &pod("x", Some("a"), Some("a/0")));
    plugin.set("pod", &pod("y", Some("b"), Some("b/0")));
}

#[test]
fn a_bad_declaration_is_refused_everywhere_and_counted_by_field() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    let refused = |field: &str| {
        plugin.sample(&format!(
            "tandem_declarations_refused_total{{field=\"{field}\"}}"
        ))
    };
    assert_eq!(refused("model"), Some(0.0));
    let mut bad = pod("p", None, None);
    bad["metadata"]["annotations"] = json!({ "tandem.dev/model": "resnet50" });
    let prepared = plugin.prepared(&bad);
    assert_eq!(refused("model"), Some(1.0));
    assert_eq!(refused("priority"), Some(0.0));
    for node in ["a", "b"] {
        let why = prepared["unresolvable"][node].as_str().unwrap_or_default();
        assert!(
            why.contains("tandem.dev/model") && why.contains("resnet50"),
            "{prepared}"
        );
    }
    plugin.prepared(&pod("q", None, None));
    assert_eq!(refused("model"), Some(1.0));
}

#[test]
fn the_plugins_work_is_counted_in_the_adapters_metric_families() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    let sample = |series: &str| plugin.sample(series).unwrap_or(-1.0);
    // Before any pod: the fail-opens the plugin never has, at zero; no view yet.
    assert_eq!(sample(r#"tandem_fail_opens_total{verb="prefilter"}"#), 0.0);
    assert_eq!(sample("tandem_view_rebuilds_total"), 0.0);
    assert_eq!(
        sample(r#"tandem_engine_call_seconds_count{call="observe"}"#),
        5.0
    );

    plugin.prepared(&pod("p", None, None));
    assert_eq!(plugin.reserve("uid-p", "a").0, TANDEM_OK);
    // a holds x and p: the cap turns q away there.
    plugin.prepared(&pod("q", None, None));
    assert_eq!(plugin.reserve("uid-q", "a").0, TANDEM_REFUSED);
    // Unreadable, and Reserve without PreFilter: the scheduler's requests, rejected.
    assert_eq!(plugin.prefilter(&json!({ "metadata": 7 })).0, TANDEM_ERROR);
    assert_eq!(plugin.reserve("uid-other", "b").0, TANDEM_ERROR);
    // Not Tandem's pod: no decision of Tandem's.
    let cpu_pod = json!({ "metadata": { "name": "web", "uid": "w" },
        "spec": { "containers": [{ "name": "main" }] } });
    assert_eq!(plugin.prepared(&cpu_pod)["managed"], false);

    for (series, want) in [
        (
            r#"tandem_decisions_total{verb="prefilter",result="ok"}"#,
            2.0,
        ),
        (
            r#"tandem_decisions_total{verb="prefilter",result="rejected"}"#,
            1.0,
        ),
        (r#"tandem_decisions_total{verb="reserve",result="ok"}"#, 1.0),
        (
            r#"tandem_decisions_total{verb="reserve",result="rejected"}"#,
            2.0,
        ),
        (
            r#"tandem_request_latency_seconds_count{verb="prefilter"}"#,
            3.0,
        ),
        (
            r#"tandem_request_latency_seconds_count{verb="reserve"}"#,
            3.0,
        ),
        (r#"tandem_engine_call_seconds_count{call="prefilter"}"#, 2.0),
        (r#"tandem_engine_call_seconds_count{call="reserve"}"#, 2.0),
        ("tandem_engine_errors_total", 0.0),
        ("tandem_view_gpus", 2.0),
        // Built once at the first PreFilter; Reserve records its choice in the engine
        // without rebuilding the view.
        ("tandem_view_rebuilds_total", 1.0),
        ("tandem_store_writes_total", 0.0),
    ] {
        assert_eq!(sample(series), want, "{series} in\n{}", plugin.metrics());
    }
    let bucket = r#"tandem_request_latency_seconds_bucket{le="+Inf",verb="prefilter"}"#;
    assert_eq!(sample(bucket), 3.0);
    assert!(sample(r#"tandem_request_latency_seconds_sum{verb="prefilter"}"#) > 0.0);

    // A node coming makes the next PreFilter rebuild the view.
    plugin.set("node", &node("c"));
    plugin.prepared(&pod("q", None, None));
    assert_eq!(sample("tandem_view_rebuilds_total"), 2.0);
    assert_eq!(sample("tandem_view_gpus"), 3.0);

    assert!(plugin.metrics().ends_with("# EOF\n"));
}

#[test]
fn a_pod_goes_beside_the_co_runner_the_engine_prefers_and_gets_the_annotation() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    let prepared = plugin.prepared(&pod("p", None, None));
    assert_eq!(prepared["managed"], true);
    let (a, b) = (
        prepared["scores"]["a"].as_u64().unwrap(),
        prepared["scores"]["b"].as_u64().unwrap(),
    );
    assert!(a > b, "beside the light job: {prepared}");
    let (status, text) = plugin.reserve("uid-p", "a");
    assert_eq!(status, TANDEM_OK, "{text}");
    let reserved: Value = serde_json::from_str(&text).unwrap();
    let annotations = &reserved["annotations"];
    assert_eq!(annotations["tandem.dev/gpu"], "a/0", "{reserved}");
    // p was profiled at 3,000 MiB on a V100: what the guard reserves there, and says so.
    assert_eq!(
        annotations["tandem.dev/gpu-memory-mib"], "3000",
        "{reserved}"
    );
    // The cap (two per GPU) now refuses node a for the next pod, from the engine's own record
    // of the choice, before any pod event confirms it.
    let next = plugin.prepared(&pod("q", None, None));
    assert!(next["failed"]["a"].is_string(), "{next}");
    assert!(next["scores"]["b"].is_u64(), "{next}");
}

#[test]
fn reserve_signs_the_placement_for_the_pod_and_a_forged_one_holds_no_gpu() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    let verifier = Verifier::from_pem(KEY.0.public_key_pem().as_bytes()).unwrap();
    plugin.prepared(&pod("p", None, None));
    let (status, text) = plugin.reserve("uid-p", "a");
    assert_eq!(status, TANDEM_OK, "{text}");
    let reserved: Value = serde_json::from_str(&text).unwrap();
    let annotations: BTreeMap<String, String> =
        serde_json::from_value(reserved["annotations"].clone()).unwrap();
    let placement = Placement::read(|key| annotations.get(key).map(String::as_str))
        .unwrap()
        .unwrap();
    assert_eq!(verifier.verify("uid-p", &placement), Ok(KEY.0.key_id()));
    // The same annotations do not hold for another pod.
    assert!(verifier.verify("uid-q", &placement).is_err());

    // A pod its owner bound to a four-GPU node, requesting one GPU and naming all four
    // without Tandem's signature. Trusting every annotation, the node has no idle GPU left for
    // a two-GPU pod; with signed placements, the forger holds one GPU and the pod fits.
    let mut forged = pod("forger", Some("quad"), None);
    forged["metadata"]["annotations"] = json!({ "tandem.dev/gpu": "quad/0,quad/1,quad/2,quad/3" });
    let mut pair = pod("pair", None, None);
    pair["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = json!("2");
    let mut quad = node("quad");
    quad["status"]["allocatable"]["nvidia.com/gpu"] = json!("4");
    for (extra, fits) in [
        (json!({ "unsignedPlacements": true }), false),
        (json!({}), true),
    ] {
        let plugin = fixture(extra.clone());
        plugin.set("node", &quad);
        plugin.set("pod", &forged);
        let prepared = plugin.prepared(&pair);
        assert_eq!(
            prepared["scores"]["quad"].is_u64(),
            fits,
            "{extra}: {prepared}"
        );
    }
}

#[test]
fn the_node_table_is_sent_again_only_when_nodes_come_or_go() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    let first = plugin.prepared(&pod("p", None, None));
    assert_eq!(first["names"], json!(["a", "b"]));
    let generation = first["generation"].as_u64().unwrap();
    // The caller holds this table: the answer leaves the names out, the verdicts follow it.
    let (status, bytes) = plugin.prefilter_with(&pod("p", None, None), generation);
    assert_eq!(status, TANDEM_OK);
    let table = ["a".to_owned(), "b".to_owned()];
    let again = decode(&bytes, &table);
    assert_eq!(again["names"], json!([]));
    assert_eq!(again["scores"], first["scores"]);
    // A label change keeps the table; a new node makes a new one, sent whole.
    plugin.set("node", &node("a"));
    let (_, bytes) = plugin.prefilter_with(&pod("p", None, None), generation);
    assert_eq!(decode(&bytes, &table)["names"], json!([]));
    plugin.set("node", &node("c"));
    let (_, bytes) = plugin.prefilter_with(&pod("p", None, None), generation);
    let grown = decode(&bytes, &table);
    assert_eq!(grown["names"], json!(["a", "b", "c"]));
    assert!(grown["generation"].as_u64().unwrap() > generation);
}

impl Fixture {
    fn prefilter_known(&self, uid: &str, version: &str) -> (TandemStatus, Value) {
        let (status, bytes) = call_bytes(|out| {
            // SAFETY: a live handle and valid pointers.
            unsafe {
                tandem_plugin_prefilter_known(
                    self.plugin,
                    uid.as_ptr(),
                    uid.len(),
                    version.as_ptr(),
                    version.len(),
                    0,
                    out,
                )
            }
        });
        let answer = if status == TANDEM_OK {
            decode(&bytes, &[])
        } else {
            json!(String::from_utf8_lossy(&bytes))
        };
        (status, answer)
    }
}

#[test]
fn a_pod_seen_in_its_events_is_judged_without_being_sent_again() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    let mut pending = pod("p", None, None);
    pending["metadata"]["resourceVersion"] = json!("7");
    plugin.set("pod", &pending);
    let (status, known) = plugin.prefilter_known("uid-p", "7");
    assert_eq!(status, TANDEM_OK, "{known}");
    assert_eq!(known, plugin.prepared(&pending));
    // A version the events have not brought yet, or a pod never seen: the pod must be sent.
    assert_eq!(plugin.prefilter_known("uid-p", "8").0, TANDEM_UNSEEN);
    assert_eq!(plugin.prefilter_known("uid-nobody", "1").0, TANDEM_UNSEEN);
    // A pod without GPUs, seen: not Tandem's.
    let cpu_pod = json!({
        "metadata": { "name": "web", "namespace": "default", "uid": "uid-web",
                      "resourceVersion": "3" },
        "spec": { "containers": [{ "name": "main" }] },
    });
    plugin.set("pod", &cpu_pod);
    assert_eq!(
        plugin.prefilter_known("uid-web", "3"),
        (TANDEM_OK, json!({ "managed": false }))
    );
    // Gone: unseen again.
    let uid = "uid-web";
    let (status, text) = call(|out| {
        // SAFETY: a live handle and valid pointers.
        unsafe { tandem_plugin_delete_pod(plugin.plugin, uid.as_ptr(), uid.len(), out) }
    });
    assert_eq!(status, TANDEM_OK, "{text}");
    assert_eq!(plugin.prefilter_known("uid-web", "3").0, TANDEM_UNSEEN);
}

#[test]
fn unreserve_gives_the_gpu_back() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    plugin.prepared(&pod("p", None, None));
    assert_eq!(plugin.reserve("uid-p", "a").0, TANDEM_OK);
    let uid = "uid-p";
    let (status, text) = call(|out| {
        // SAFETY: a live handle and valid pointers.
        unsafe { tandem_plugin_unreserve(plugin.plugin, uid.as_ptr(), uid.len(), out) }
    });
    assert_eq!(status, TANDEM_OK, "{text}");
    let next = plugin.prepared(&pod("q", None, None));
    assert!(next["scores"]["a"].is_u64(), "{next}");
}

#[test]
fn a_pod_that_fits_no_gpu_gets_the_engines_reason_and_others_are_ignored() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    let prepared = plugin.prepared(&pod("big", None, None));
    assert_eq!(prepared["scores"], json!({}));
    let reason = prepared["failed"]["a"].as_str().unwrap();
    assert!(reason.contains("needs 20000 MiB"), "{reason}");
    // Reserve without its PreFilter is an error, not a guess.
    let (status, text) = plugin.reserve("uid-other", "a");
    assert_eq!(status, TANDEM_ERROR);
    assert!(text.contains("without its PreFilter"), "{text}");
    let cpu_pod = json!({ "metadata": { "name": "web", "uid": "w" },
        "spec": { "containers": [{ "name": "main" }] } });
    assert_eq!(plugin.prepared(&cpu_pod)["managed"], false);
}

/// Posts `body` to `path` of the intake at `address` with `token`; the status line and body.
fn post(address: std::net::SocketAddr, path: &str, token: &str, body: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: tandem\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn a_profile_posted_to_the_plugins_intake_decides_the_next_pod() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let tokens = tempfile::tempdir().unwrap();
    let token_file = tokens.path().join("token");
    std::fs::write(&token_file, "intake-s3cret\n").unwrap();
    let plugin = fixture(json!({ "intakeAddress": address, "intakeTokenFile": token_file }));
    plugin.set("node", &node("a"));
    // Before: nothing is known of `big`, which may go anywhere.
    assert!(plugin.prepared(&pod("big", None, None))["scores"]["a"].is_u64());

    // SAFETY: a live handle, used while the fixture lives.
    let job = unsafe { &*plugin.plugin }
        .served
        .core()
        .keys
        .key("default", "big");
    // A pod beside which `big`'s measured memory (a V100 holds 16,384 MiB) does not fit.
    plugin.set("pod", &pod("small", Some("a"), Some("a/0")));
    // SAFETY: a live handle, used while the fixture lives.
    let small = unsafe { &*plugin.plugin }
        .served
        .core()
        .keys
        .key("default", "small");
    let body = json!({ "profiles": [
        { "job": small, "profile": {
            "gpu_util_pct": 20.0, "mem_access_pct": 10.0, "mem_used_mib": 3_000, "gpu_model": "V100" } },
        { "job": job, "profile": {
            "gpu_util_pct": 60.0, "mem_access_pct": 30.0, "mem_used_mib": 15_000, "gpu_model": "V100" } },
    ] })
    .to_string();
    let refused = post(address, "/v1/profiles", "wrong", &body);
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    let answer = post(address, "/v1/profiles", "intake-s3cret", &body);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let prepared = plugin.prepared(&pod("big", None, None));
    let reason = prepared["failed"]["a"].as_str().unwrap_or_default();
    assert!(reason.contains("needs 15000 MiB"), "{prepared}");
}

/// A pod of `job` on GPU `node`/0, with its kubelet's status: running since `start`, or
/// finished at `end` (times in minutes past ten).
fn run_on(node: &str, name: &str, job: &str, start: u32, end: Option<u32>) -> Value {
    let mut pod = pod(name, Some(node), Some(&format!("{node}/0")));
    pod["metadata"]["labels"] = json!({ "tandem.dev/job": job });
    let at = |minute: u32| format!("2026-11-28T{:02}:{:02}:00Z", 10 + minute / 60, minute % 60);
    let (phase, state) = match end {
        Some(end) => (
            "Succeeded",
            json!({ "terminated": { "exitCode": 0, "startedAt": at(start), "finishedAt": at(end) } }),
        ),
        None => ("Running", json!({ "running": { "startedAt": at(start) } })),
    };
    pod["status"] = json!({
        "phase": phase, "startTime": at(start),
        "containerStatuses": [{ "name": "main", "ready": false, "restartCount": 0,
            "image": "i", "imageID": "", "state": state }],
    });
    pod
}

/// Delivers, as the plugin's watch does, pods of jobs p and q on `node`'s GPU: each alone
/// once, then the two together.
fn ran_alone_then_together(plugin: &Fixture, node: &str) {
    plugin.ran(&run_on(node, "p-solo", "p", 0, Some(10)));
    plugin.ran(&run_on(node, "q-solo", "q", 20, Some(25)));
    plugin.ran(&run_on(node, "p-pair", "p", 60, None));
    plugin.ran(&run_on(node, "q-pair", "q", 60, None));
    plugin.ran(&run_on(node, "p-pair", "p", 60, Some(75)));
    plugin.ran(&run_on(node, "q-pair", "q", 60, Some(74)));
}

/// Waits for the plugin's learning task to count `outcomes`, then asserts it and `runs`.
fn assert_learned(plugin: &Fixture, outcomes: f64, runs: f64) {
    let learned = |plugin: &Fixture| plugin.sample("tandem_outcomes_learned_total");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while learned(plugin) != Some(outcomes) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(learned(plugin), Some(outcomes), "{}", plugin.metrics());
    assert_eq!(plugin.sample("tandem_runs_learned_total"), Some(runs));
}

#[test]
fn finished_pods_that_ran_alone_then_together_teach_an_outcome() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    ran_alone_then_together(&plugin, "a");
    assert_learned(&plugin, 1.0, 3.0);
}

#[test]
fn finished_pods_seen_before_their_node_teach_once_it_comes() {
    let plugin = fixture(json!({}));
    cluster(&plugin);
    // The plugin's watch delivered them all before the scheduler's informer delivered node
    // `c`: nothing can be learned yet (a run names its GPU model), nothing is lost.
    ran_alone_then_together(&plugin, "c");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(plugin.sample("tandem_runs_learned_total"), Some(0.0));
    plugin.set("node", &node("c"));
    assert_learned(&plugin, 1.0, 3.0);
}

#[test]
fn malformed_args_fail_naming_the_field() {
    for (args, field) in [
        (
            json!({ "idSecretFile": "/x", "maxJobsPerGpu": "two" }),
            "maxJobsPerGpu",
        ),
        (
            json!({ "idSecretFile": "/x", "maxJobsPerGPU": 2 }),
            "maxJobsPerGPU",
        ),
        (
            json!({ "idSecretFile": "/x", "objective": "fastest" }),
            "objective",
        ),
        (
            json!({ "idSecretFile": "/x", "modelCaps": [{ "gpuModel": "K80", "maxJobs": 0 }] }),
            "modelCaps[0].maxJobs",
        ),
        (json!({ "maxJobsPerGpu": 2 }), "idSecretFile"),
        (
            json!({ "idSecretFile": "/nonexistent/secret", "unsignedPlacements": true }),
            // The cause chain, each cause once.
            "idSecretFile: cannot read the id secret /nonexistent/secret: No such file",
        ),
        (json!({ "idSecretFile": "/x" }), "placementKeyFile"),
        (
            json!({ "idSecretFile": "/x", "placementKeyFile": "/nonexistent/key" }),
            "placementKeyFile: cannot read the placement key /nonexistent/key",
        ),
        (
            json!({ "idSecretFile": "/x", "placementKeyFile": "/k", "unsignedPlacements": true }),
            "unsignedPlacements",
        ),
        (
            json!({ "idSecretFile": "/x", "intakeAddress": "127.0.0.1:0" }),
            "intakeAddress",
        ),
        (
            json!({ "idSecretFile": "/x", "intakeAddress": "nowhere" }),
            "intakeAddress",
        ),
        (
            json!({ "idSecretFile": "/x", "intakeTlsCertFile": "/c.pem" }),
            "intakeTlsCertFile",
        ),
    ] {
        let (status, text, plugin) = new_plugin(&args);
        assert_eq!(status, TANDEM_ERROR, "{args}");
        assert!(plugin.is_null());
        assert!(text.contains(field), "{args}: {text}");
    }
}

fn misbehaving(deadline_ms: u64) -> Fixture {
    let path = Path::new(tandem_tests::components::MISBEHAVING);
    fixture(json!({ "engine": path, "engineDeadlineMs": deadline_ms }))
}

#[test]
fn a_panic_inside_the_engine_is_an_error_for_that_pod_and_the_next_pod_is_served() {
    let plugin = misbehaving(2_000);
    plugin.set("node", &node("a"));
    plugin.profile("bad", 50.0, 1_000, "panic");
    let (status, text) = plugin.prefilter(&pod("bad", None, None));
    assert_eq!(status, TANDEM_ERROR);
    assert!(text.contains("panicked"), "{text}");
    let next = plugin.prepared(&pod("good", None, None));
    assert_eq!(next["scores"]["a"], 50, "{next}");
    for (series, want) in [
        ("tandem_engine_errors_total", 1.0),
        (
            r#"tandem_decisions_total{verb="prefilter",result="error"}"#,
            1.0,
        ),
        (
            r#"tandem_decisions_total{verb="prefilter",result="ok"}"#,
            1.0,
        ),
        (r#"tandem_fail_opens_total{verb="prefilter"}"#, 0.0),
    ] {
        assert_eq!(plugin.sample(series), Some(want), "{series}");
    }
}

#[test]
fn a_looping_engine_is_interrupted_and_the_next_pod_is_served() {
    let plugin = misbehaving(100);
    plugin.set("node", &node("a"));
    plugin.profile("spin", 50.0, 1_000, "loop");
    let (status, text) = plugin.prefilter(&pod("spin", None, None));
    assert_eq!(status, TANDEM_ERROR);
    assert!(text.contains("deadline"), "{text}");
    let next = plugin.prepared(&pod("good", None, None));
    assert_eq!(next["scores"]["a"], 50, "{next}");
}

#[test]
fn a_rust_panic_and_a_null_handle_are_error_values() {
    let (status, text) = call(|out| guarded(out, || panic!("on purpose")));
    assert_eq!(status, TANDEM_ERROR);
    assert!(
        text.contains("panicked") && text.contains("on purpose"),
        "{text}"
    );
    let json = b"{}";
    let (status, text) = call(|out| {
        // SAFETY: a null handle is allowed and refused.
        unsafe { tandem_plugin_set_node(std::ptr::null(), json.as_ptr(), json.len(), out) }
    });
    assert_eq!(status, TANDEM_ERROR);
    assert!(text.contains("null handle"), "{text}");
    let plugin = fixture(json!({}));
    let bad = b"{\"metadata\": 7}";
    let (status, text) = call(|out| {
        // SAFETY: a live handle and valid pointers.
        unsafe { tandem_plugin_set_pod(plugin.plugin, bad.as_ptr(), bad.len(), out) }
    });
    assert_eq!(status, TANDEM_ERROR);
    assert!(text.contains("metadata"), "{text}");
}
