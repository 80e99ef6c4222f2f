//! The C ABI as the Go plugin uses it: real engine component, real misbehaving component.

use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};

use super::*;

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
    assert_eq!(take(1)[0], plugin::PREPARED_FORMAT);
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
        unsafe { tandem_plugin_new(args.as_ptr(), args.len(), &mut plugin, out) }
    });
    (status, text, plugin)
}

fn fixture(extra: Value) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("id-secret");
    std::fs::write(&secret, "00112233445566778899aabbccddeeff\n").unwrap();
    let mut args = json!({ "idSecretFile": secret });
    for (key, value) in extra.as_object().unwrap() {
        args[key] = value.clone();
    }
    let (status, text, plugin) = new_plugin(&args);
    assert_eq!(status, TANDEM_OK, "{text}");
    let settings: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(settings["knowledgeConfigMap"], "tandem-knowledge");
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

    fn profile(&self, job: &str, util: f32, mem: u32, model: &str) {
        let profile = json!({
            "gpu_util_pct": util, "mem_access_pct": 10.0, "mem_used_mib": mem, "gpu_model": model,
        })
        .to_string();
        let (ns, job) = ("default", job);
        let (status, text) = call(|out| {
            // SAFETY: a live handle and valid pointers.
            unsafe {
                tandem_plugin_observe_profile(
                    self.plugin,
                    ns.as_ptr(),
                    ns.len(),
                    job.as_ptr(),
                    job.len(),
                    profile.as_ptr(),
                    profile.len(),
                    out,
                )
            }
        });
        assert_eq!(status, TANDEM_OK, "{text}");
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

    /// The plugin's metrics, as the Go side reads them.
    fn metrics(&self) -> String {
        let (status, text) = call(|out| {
            // SAFETY: a live handle and a valid buffer.
            unsafe { tandem_plugin_metrics(self.plugin, out) }
        });
        assert_eq!(status, TANDEM_OK, "{text}");
        text
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

/// A pod of one GPU; bound to `node` with Tandem's annotation `gpu` when given.
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
        pod["metadata"]["annotations"] = json!({ "tandem.dev/gpu": gpu });
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
        sample(r#"tandem_engine_call_seconds_count{call="observe-profile"}"#),
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

    // The knowledge base, once written, is counted with its size.
    let (status, snapshot) = call(|out| {
        // SAFETY: a live handle and a valid buffer.
        unsafe { tandem_plugin_snapshot(plugin.plugin, out) }
    });
    assert_eq!(status, TANDEM_OK, "{snapshot}");
    assert_eq!(sample("tandem_store_writes_total"), 0.0);
    let version = "7";
    let (status, text) = call(|out| {
        // SAFETY: a live handle and valid pointers.
        unsafe { tandem_plugin_stored(plugin.plugin, version.as_ptr(), version.len(), out) }
    });
    assert_eq!(status, TANDEM_OK, "{text}");
    assert_eq!(sample("tandem_store_writes_total"), 1.0);
    assert!(
        sample("tandem_store_bytes") > 1_000.0,
        "{}",
        plugin.metrics()
    );
    // A write the Go side could not finish is counted as the adapters count theirs.
    assert_eq!(sample("tandem_store_errors_total"), 0.0);
    let (status, text) = call(|out| {
        // SAFETY: a live handle and a valid buffer.
        unsafe { tandem_plugin_store_failed(plugin.plugin, out) }
    });
    assert_eq!(status, TANDEM_OK, "{text}");
    assert_eq!(sample("tandem_store_errors_total"), 1.0);
    assert_eq!(sample("tandem_store_writes_total"), 1.0);
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
            json!({ "idSecretFile": "/nonexistent/secret" }),
            "idSecretFile",
        ),
    ] {
        let (status, text, plugin) = new_plugin(&args);
        assert_eq!(status, TANDEM_ERROR, "{args}");
        assert!(plugin.is_null());
        assert!(text.contains(field), "{args}: {text}");
    }
}

#[test]
fn the_knowledge_base_survives_a_restart_through_its_config_map() {
    let first = fixture(json!({}));
    cluster(&first);
    let (status, snapshot) = call(|out| {
        // SAFETY: a live handle and a valid buffer.
        unsafe { tandem_plugin_snapshot(first.plugin, out) }
    });
    assert_eq!(status, TANDEM_OK, "{snapshot}");
    let write: Value = serde_json::from_str(&snapshot).unwrap();
    // A small knowledge base: whole in the head, no shard to create or collect.
    assert_eq!(write["shards"], json!([]));
    assert_eq!(write["collect"], json!([]));
    let mut map = write["head"].clone();
    assert_eq!(map["data"]["format"], "tandem-kube-kb/1");
    // As the API server hands it back once written.
    map["metadata"]["resourceVersion"] = json!("42");
    let map = map.to_string();

    let second = fixture(json!({}));
    second.set("node", &node("a"));
    // Before: the fresh engine does not know `big` and lets it in.
    assert!(second.prepared(&pod("big", None, None))["scores"]["a"].is_u64());
    for expected in ["true", "false"] {
        let (status, text) = call(|out| {
            // SAFETY: a live handle and valid pointers.
            unsafe { tandem_plugin_restore(second.plugin, map.as_ptr(), map.len(), out) }
        });
        assert_eq!((status, text.as_str()), (TANDEM_OK, expected));
    }
    let prepared = second.prepared(&pod("big", None, None));
    assert!(
        prepared["failed"]["a"]
            .as_str()
            .unwrap()
            .contains("needs 20000 MiB"),
        "{prepared}"
    );
}

#[test]
fn a_knowledge_base_past_one_config_map_is_written_and_read_in_shards() {
    let first = fixture(json!({}));
    // Past one ConfigMap's 1 MiB: about 8,500 profiles. Observed one by one the engine's
    // saved copy is rewritten per profile, so they are added to its snapshot instead.
    let (status, snapshot) = call(|out| {
        // SAFETY: a live handle and a valid buffer.
        unsafe { tandem_plugin_snapshot(first.plugin, out) }
    });
    assert_eq!(status, TANDEM_OK, "{snapshot}");
    let write: Value = serde_json::from_str(&snapshot).unwrap();
    let small: ConfigMap = serde_json::from_value(write["head"].clone()).unwrap();
    let mut engine: Value =
        serde_json::from_slice(&small.binary_data.unwrap()["engine"].0).unwrap();
    let profiles = engine["knowledge"]["profiles"].as_object_mut().unwrap();
    for n in 0..10_000u32 {
        profiles.insert(
            format!("{n:032x}"),
            json!({ "gpu_util_pct": 5 + n * 37 % 90, "mem_access_pct": 10.0,
                    "mem_used_mib": 600 + n * 733 % 9_000, "gpu_model": "V100" }),
        );
    }
    let big = json!({
        "metadata": { "name": "tandem-knowledge", "resourceVersion": "1" },
        "data": { "format": "tandem-kube-kb/1" },
        "binaryData": { "engine": ByteString(serde_json::to_vec(&engine).unwrap()) },
    });
    let (status, text) = call(|out| {
        let big = big.to_string();
        // SAFETY: a live handle and valid pointers.
        unsafe { tandem_plugin_restore(first.plugin, big.as_ptr(), big.len(), out) }
    });
    assert_eq!((status, text.as_str()), (TANDEM_OK, "true"));
    let (status, snapshot) = call(|out| {
        // SAFETY: a live handle and a valid buffer.
        unsafe { tandem_plugin_snapshot(first.plugin, out) }
    });
    assert_eq!(status, TANDEM_OK, "{snapshot}");
    let write: Value = serde_json::from_str(&snapshot).unwrap();
    let mut head = write["head"].clone();
    assert_eq!(head["data"]["format"], "tandem-kube-kb/2");
    let mut shards = write["shards"].as_array().unwrap().clone();
    assert!(shards.len() >= 2, "{} shards", shards.len());
    // As the API server hands them back once written.
    for (n, shard) in shards.iter_mut().enumerate() {
        assert_eq!(shard["immutable"], true);
        shard["metadata"]["uid"] = json!(format!("uid-{n}"));
    }
    head["metadata"]["resourceVersion"] = json!("42");

    let second = fixture(json!({}));
    let restore = |knowledge: &Value| {
        let knowledge = knowledge.to_string();
        call(|out| {
            // SAFETY: a live handle and valid pointers.
            unsafe {
                tandem_plugin_restore(second.plugin, knowledge.as_ptr(), knowledge.len(), out)
            }
        })
    };
    // The head alone: the plugin names the shards to fetch.
    let (status, text) = restore(&head);
    assert_eq!(status, TANDEM_OK, "{text}");
    let wanted: Value = serde_json::from_str(&text).unwrap();
    let names: Vec<&Value> = shards.iter().map(|s| &s["metadata"]["name"]).collect();
    assert_eq!(
        wanted["shards"].as_array().unwrap().len(),
        names.len(),
        "{text}"
    );
    // The same as Go sends it before any shard is fetched (a nil slice is `null`).
    let (status, same) = restore(&json!({ "head": head, "shards": null }));
    assert_eq!((status, &same), (TANDEM_OK, &text));
    let with_shards = json!({ "head": head, "shards": shards });
    for expected in ["true", "false"] {
        let (status, text) = restore(&with_shards);
        assert_eq!((status, text.as_str()), (TANDEM_OK, expected));
    }
    // What it holds is what was written: its own write reuses every shard.
    let (status, again) = call(|out| {
        // SAFETY: a live handle and a valid buffer.
        unsafe { tandem_plugin_snapshot(second.plugin, out) }
    });
    assert_eq!(status, TANDEM_OK, "{again}");
    let again: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["head"]["data"], head["data"]);
    assert_eq!(again["shards"], json!([]));
    assert_eq!(again["collect"], json!([]));
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
