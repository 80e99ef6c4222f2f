//! `tandem predict` and `tandem eval memory`: declared models (summaries and ONNX files the
//! test writes), speeds, priorities, and the memory evaluation.

use std::path::Path;

use serde_json::{Value, json};

use super::{stderr, tandem};

/// A cluster of one small and one large GPU, with prices and powers.
fn gpus() -> Value {
    json!([
        {"id": "small/0", "node": "small", "model": "RTX 2070 Super", "memory_mib": 8192,
         "residents": [], "price_per_hour": 0.4, "power_watts": 215},
        {"id": "big/0", "node": "big", "model": "V100", "memory_mib": 16384,
         "residents": [], "price_per_hour": 3.0, "power_watts": 300}
    ])
}

fn write_queue(dir: &Path, jobs: Value) -> std::path::PathBuf {
    let path = dir.join("queue.json");
    let queue = json!({"gpus": gpus(), "jobs": jobs});
    std::fs::write(&path, serde_json::to_string_pretty(&queue).unwrap()).unwrap();
    path
}

fn json_out(args: &[&str]) -> Value {
    let output = tandem(args);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn predict_memory_reads_declared_summaries_and_onnx_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lenet.onnx"),
        tandem_declare::onnx::build::lenet(None),
    )
    .unwrap();
    let queue = write_queue(
        dir.path(),
        json!([
            {"id": "vgg", "declared": {"params_mib": 527.79, "activations_mib": 7636.48,
             "input_mib": 36.75, "batch_size": 64, "gflops": 0, "conv_layers": 16,
             "linear_layers": 3, "activation_layers": 18, "other_layers": 6}},
            {"id": "lenet", "onnx": {"file": "lenet.onnx", "batch_size": 32}},
            {"id": "mystery"}
        ]),
    );
    let queue = queue.to_str().unwrap();
    let rows = json_out(&["predict", "memory", "--queue", queue, "--format", "json"]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let vgg = &rows[0]["estimates"];
    assert_eq!(vgg[0]["memory_source"], "declared");
    assert_eq!(vgg[0]["fits_empty"], false, "{vgg}");
    assert_eq!(vgg[1]["fits_empty"], true, "{vgg}");
    assert!(vgg[0]["reserved_mib"].as_u64() > vgg[0]["peak_mem_mib"].as_u64());
    let lenet = &rows[1]["estimates"];
    assert_eq!(lenet[0]["memory_source"], "declared");
    assert_eq!(lenet[0]["fits_empty"], true, "{lenet}");
    assert_eq!(rows[2]["estimates"][0]["memory_source"], "unknown");

    // The table names the source and the reservation against the GPU's memory.
    let output = tandem(&["predict", "memory", "--queue", queue]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(
        table.contains("declared") && table.contains("/ 8192"),
        "{table}"
    );

    // And recommend keeps the large model off the small GPU.
    let answer = json_out(&["recommend", "--queue", queue, "--format", "json"]);
    let vgg_gpu = answer["placements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["jobs"].as_array().unwrap().iter().any(|j| j == "vgg"))
        .map(|p| p["gpu"].clone());
    assert_eq!(vgg_gpu, Some(json!("big/0")), "{answer}");
}

#[test]
fn predict_runtime_and_priorities_follow_the_reported_speeds() {
    let dir = tempfile::tempdir().unwrap();
    let job = |id: &str, priority: &str| {
        json!({"id": id, "priority": priority, "work": 3600,
               "speeds": {"RTX 2070 Super": 1.0, "V100": 2.0}})
    };
    let queue = write_queue(dir.path(), json!([job("fast", "latency")]));
    let rows = json_out(&[
        "predict",
        "runtime",
        "--queue",
        queue.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let e = &rows[0]["estimates"];
    // 3600 s at 1/s for 0.40 an hour, 1800 s at 2/s for 3.00 an hour.
    assert_eq!(e[0]["solo_s"], 3600.0);
    assert_eq!(e[1]["solo_s"], 1800.0);
    assert!((e[0]["cost"].as_f64().unwrap() - 0.4).abs() < 1e-6, "{e}");
    assert!((e[1]["cost"].as_f64().unwrap() - 1.5).abs() < 1e-6, "{e}");
    for (priority, expected) in [("latency", "big/0"), ("cost", "small/0")] {
        let queue = write_queue(dir.path(), json!([job("j", priority)]));
        let answer = json_out(&[
            "recommend",
            "--queue",
            queue.to_str().unwrap(),
            "--format",
            "json",
        ]);
        assert_eq!(
            answer["placements"][0]["gpu"], expected,
            "{priority}: {answer}"
        );
    }
}

#[test]
fn bad_declarations_are_reported_with_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.onnx"), b"not a model at all").unwrap();
    let cases = [
        (
            json!([{"id": "a", "onnx": {"file": "junk.onnx", "batch_size": 8}}]),
            "jobs[0].onnx.file",
        ),
        (
            json!([{"id": "a", "onnx": {"file": "missing.onnx"}}]),
            "cannot read",
        ),
        (
            json!([{"id": "a", "declared": {"params_mib": -1, "activations_mib": 1,
                     "input_mib": 1, "batch_size": 8, "gflops": 0, "conv_layers": 0,
                     "linear_layers": 0, "activation_layers": 0, "other_layers": 0}}]),
            "jobs[0].declared",
        ),
        (json!([{"id": "a", "work": -5}]), "jobs[0].work"),
        (
            json!([{"id": "a", "speeds": {"V100": 0}}]),
            "jobs[0].speeds.V100",
        ),
        (
            json!([{"id": "a", "priority": "speed"}]),
            "jobs[0].priority",
        ),
    ];
    for (jobs, expected) in cases {
        let queue = write_queue(dir.path(), jobs);
        let output = tandem(&["predict", "memory", "--queue", queue.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        assert!(
            stderr(&output).contains(expected),
            "{expected}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn eval_memory_reports_every_split_and_catches_every_would_be_oom_on_a_new_gpu() {
    let report = json_out(&["eval", "memory", "--format", "json"]);
    assert_eq!(report["rows"], 240);
    let scores = report["scores"].as_array().unwrap();
    assert_eq!(scores.len(), 9);
    for method in ["tandem-forest", "torchinfo-sum", "horus-linear"] {
        assert!(scores.iter().any(|s| s["method"] == method), "{method}");
    }
    let guards = report["guards"].as_array().unwrap();
    let gpu_out = guards
        .iter()
        .find(|g| g["split"] == "leave-one-gpu-out")
        .unwrap();
    assert!(gpu_out["would_be_ooms"].as_u64().unwrap() > 0);
    assert_eq!(gpu_out["caught"], gpu_out["would_be_ooms"], "{gpu_out}");
    // The forest beats the Torchinfo-like sum on every split.
    for split in ["random", "leave-one-gpu-out", "leave-one-model-out"] {
        let error = |method: &str| {
            scores
                .iter()
                .find(|s| s["split"] == split && s["method"] == method)
                .unwrap()["avg_error_pct"]
                .as_f64()
                .unwrap()
        };
        assert!(error("tandem-forest") < error("torchinfo-sum"), "{split}");
    }
}

#[test]
fn predict_utilization_measures_profiled_jobs_and_predicts_declared_ones() {
    let dir = tempfile::tempdir().unwrap();
    let onnx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/utilization/onnx");
    let queue = write_queue(
        dir.path(),
        json!([
            {"id": "resnet", "onnx": {"file": onnx.join("resnet50.onnx"), "batch_size": 256}},
            {"id": "dqn", "onnx": {"file": onnx.join("dqn_cartpole.onnx"), "batch_size": 1024}},
            {"id": "seen", "profile": {"gpu_util_pct": 42.0, "mem_access_pct": 10.0,
             "mem_used_mib": 900, "gpu_model": "V100"}},
            {"id": "mystery"}
        ]),
    );
    let queue = queue.to_str().unwrap();
    let rows = json_out(&[
        "predict",
        "utilization",
        "--queue",
        queue,
        "--format",
        "json",
    ]);
    let util = |i: usize| rows[i]["estimates"][0]["utilization_pct"].as_f64();
    let (resnet, dqn) = (util(0).unwrap(), util(1).unwrap());
    assert!(
        resnet > 60.0 && dqn < 20.0,
        "ResNet-50 {resnet}%, DQN {dqn}%"
    );
    assert_eq!(util(2), Some(42.0));
    assert_eq!(util(3), None);
    let output = tandem(&["predict", "utilization", "--queue", queue]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(
        table.contains("peak GPU utilization %") && table.contains("42.0"),
        "{table}"
    );
}

#[test]
fn model_caps_in_a_queue_file_are_checked_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.json");
    let write = |caps: Value| {
        let queue = json!({"gpus": gpus(), "jobs": [{"id": "a"}],
                           "policy": {"max_jobs_per_gpu": 3, "model_caps": caps}});
        std::fs::write(&path, queue.to_string()).unwrap();
    };
    write(json!([{"gpu_model": "K80", "max_jobs": 0}]));
    let output = tandem(&["recommend", "--queue", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("policy.model_caps[0].max_jobs"),
        "{}",
        stderr(&output)
    );
    write(json!([{"gpu_model": "K80", "max_jobs": 1}, {"gpu_model": "K80", "max_jobs": 2}]));
    let output = tandem(&["recommend", "--queue", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("policy.model_caps[1].gpu_model"),
        "{}",
        stderr(&output)
    );
    write(json!([{"gpu_model": "K80", "max_jobs": 1}]));
    let output = tandem(&["recommend", "--queue", path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("at most 3 job(s) per GPU, 1 on a K80"),
        "{text}"
    );
}

#[test]
fn eval_utilization_beats_the_baselines_on_networks_it_never_saw() {
    let report = json_out(&["eval", "utilization", "--format", "json"]);
    assert_eq!(report["runs"], 49);
    assert_eq!(report["networks"], 15);
    let scores = report["scores"].as_array().unwrap();
    assert_eq!(scores.len(), 9);
    let score = |split: &str, method: &str, field: &str| {
        scores
            .iter()
            .find(|s| s["split"] == split && s["method"] == method)
            .unwrap()[field]
            .as_f64()
            .unwrap()
    };
    for split in ["leave-one-model-out", "leave-one-family-out", "random"] {
        for baseline in ["training-mean", "flops-loglinear"] {
            for field in ["rmsle_pct", "rmsle_fraction", "mae_points"] {
                assert!(
                    score(split, "tandem-forest", field) < score(split, baseline, field),
                    "{split} {baseline} {field}"
                );
            }
        }
    }
    // Yeung et al.'s 0.154, read as utilization in 0..1 (see docs/UTILIZATION.md for the
    // percent reading, which it does not meet).
    let lomo = score("leave-one-model-out", "tandem-forest", "rmsle_fraction");
    assert!(lomo < 0.154, "{lomo}");
    assert_eq!(report["per_network"].as_array().unwrap().len(), 15);
}

#[test]
fn the_heterogeneous_example_places_each_priority_on_its_best_gpu() {
    let example = super::example("heterogeneous.json");
    let answer = json_out(&[
        "recommend",
        "--queue",
        example.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let gpu_of = |job: &str| {
        answer["placements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["jobs"].as_array().unwrap().iter().any(|j| j == job))
            .map(|p| p["gpu"].as_str().unwrap().to_owned())
    };
    // Fastest (and the only GPU with room enough besides the T4), cheapest, least energy.
    assert_eq!(
        gpu_of("urgent-vgg").as_deref(),
        Some("fast-0/0"),
        "{answer}"
    );
    assert_eq!(
        gpu_of("thrifty-resnet").as_deref(),
        Some("old-0/0"),
        "{answer}"
    );
    assert_eq!(
        gpu_of("green-resnet").as_deref(),
        Some("edge-0/0"),
        "{answer}"
    );
}
