//! The `tandem` binary as a user runs it: real files in, exit codes and output out.

mod errors;
mod eval;
mod kb;
mod predict;
mod readme;
mod simulate;
mod synthesize;
mod utilization;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn tandem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .env_remove("TANDEM_ENGINE")
        .output()
        .expect("tandem runs")
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every placement respects GPU memory (residents included) and the per-GPU cap, and every
/// queued job is reported exactly once.
fn check_invariants(queue: &Value, answer: &Value) {
    let cap = queue["policy"]["max_jobs_per_gpu"].as_u64().unwrap_or(2) as usize;
    let mem_of = |id: &str| {
        queue["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .map(|j| j["profile"]["mem_used_mib"].as_u64().unwrap())
            .unwrap()
    };
    for placement in answer["placements"].as_array().unwrap() {
        let gpu = queue["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["id"] == placement["gpu"])
            .expect("placements name known GPUs");
        let residents: Vec<&str> = gpu["residents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let placed: Vec<&str> = placement["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j.as_str().unwrap())
            .collect();
        let used: u64 = residents.iter().chain(&placed).map(|id| mem_of(id)).sum();
        assert!(used <= gpu["memory_mib"].as_u64().unwrap(), "{placement}");
        assert!(residents.len() + placed.len() <= cap, "{placement}");
        assert_eq!(
            placement["predicted"]["slowdown_pct"]
                .as_array()
                .unwrap()
                .len(),
            placed.len()
        );
        assert_eq!(
            placement["predicted"]["peak_mem_mib"].as_u64().unwrap(),
            used
        );
    }
    let mut reported: Vec<&str> = answer["placements"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            p["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j.as_str().unwrap())
        })
        .chain(
            answer["unplaced"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u["job"].as_str().unwrap()),
        )
        .collect();
    reported.sort_unstable();
    let mut queued: Vec<&str> = queue["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j.get("running_on").is_none())
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    queued.sort_unstable();
    assert_eq!(reported, queued);
}

#[test]
fn the_example_queue_is_placed_within_memory_and_cap_for_every_objective() {
    let path = example("queue.json");
    let queue: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for objective in ["balanced", "min-slowdown", "max-packing"] {
        let output = tandem(&[
            "recommend",
            "--queue",
            path.to_str().unwrap(),
            "--objective",
            objective,
            "--format",
            "json",
        ]);
        assert!(output.status.success(), "{}", stderr(&output));
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert!(!answer["placements"].as_array().unwrap().is_empty());
        check_invariants(&queue, &answer);
    }
}

#[test]
fn the_table_names_every_placed_gpu() {
    let path = example("queue.json");
    let output = tandem(&["recommend", "--queue", path.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(
        table.contains("node-a/0") && table.contains("packing saving %"),
        "{table}"
    );
}

#[test]
fn version_names_the_wit_contract() {
    let output = tandem(&["--version"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("tandem 0.1.0")
            && text.contains(&format!("WIT tandem:engine@{}", tandem_api::WIT_VERSION)),
        "{text}"
    );
}

/// A valid queue to break one field at a time.
fn base_queue() -> Value {
    serde_json::json!({
        "gpus": [
            {"id": "node-a/0", "node": "node-a", "model": "V100", "memory_mib": 16384, "residents": ["r-1"]},
            {"id": "node-a/1", "node": "node-a", "model": "V100", "memory_mib": 16384, "residents": []}
        ],
        "policy": {"objective": "balanced", "max_jobs_per_gpu": 2},
        "jobs": [
            {"id": "job-1", "profile": {"gpu_util_pct": 64.7, "mem_access_pct": 29.4, "mem_used_mib": 5106, "gpu_model": "V100"}},
            {"id": "job-2", "profile": {"gpu_util_pct": 30.0, "mem_access_pct": 10.0, "mem_used_mib": 2000, "gpu_model": "V100"}},
            {"id": "r-1", "running_on": "node-a/0", "profile": {"gpu_util_pct": 20.0, "mem_access_pct": 5.0, "mem_used_mib": 1000, "gpu_model": "V100"}}
        ]
    })
}

fn run_queue(queue: &Value) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.json");
    std::fs::write(&path, serde_json::to_string_pretty(queue).unwrap()).unwrap();
    tandem(&[
        "recommend",
        "--queue",
        path.to_str().unwrap(),
        "--format",
        "json",
    ])
}

#[test]
fn the_base_queue_is_valid() {
    let output = run_queue(&base_queue());
    assert!(output.status.success(), "{}", stderr(&output));
    check_invariants(
        &base_queue(),
        &serde_json::from_slice(&output.stdout).unwrap(),
    );
}

#[test]
fn malformed_queues_exit_2_naming_the_field() {
    type Breakage = fn(&mut Value);
    let cases: [(&str, Breakage, &str); 9] = [
        (
            "wrong type",
            |q| q["jobs"][0]["profile"]["gpu_util_pct"] = "high".into(),
            "jobs[0].profile.gpu_util_pct",
        ),
        (
            "missing field",
            |q| {
                q["gpus"][1].as_object_mut().unwrap().remove("memory_mib");
            },
            "memory_mib",
        ),
        (
            "negative memory",
            |q| q["jobs"][1]["profile"]["mem_used_mib"] = (-512).into(),
            "jobs[1].profile.mem_used_mib",
        ),
        (
            "zero GPU memory",
            |q| q["gpus"][0]["memory_mib"] = 0.into(),
            "gpus[0].memory_mib",
        ),
        (
            "unknown objective",
            |q| q["policy"]["objective"] = "fastest".into(),
            "policy.objective",
        ),
        (
            "duplicate job id",
            |q| q["jobs"][1]["id"] = "job-1".into(),
            "jobs[1].id",
        ),
        (
            "unknown GPU for a resident",
            |q| q["jobs"][2]["running_on"] = "node-z/9".into(),
            "jobs[2].running_on",
        ),
        (
            "resident listed on another GPU",
            |q| q["gpus"][1]["residents"] = serde_json::json!(["r-1"]),
            "gpus[1].residents[0]",
        ),
        (
            "percentage out of range",
            |q| q["jobs"][0]["profile"]["mem_access_pct"] = 140.0.into(),
            "jobs[0].profile.mem_access_pct",
        ),
    ];
    for (name, breakage, field) in cases {
        let mut queue = base_queue();
        breakage(&mut queue);
        let output = run_queue(&queue);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{name}: {message}");
        assert!(
            message.contains("queue.json") && message.contains(field),
            "{name}: {message}"
        );
        assert!(!message.contains("panicked"), "{name}: {message}");
    }
}

#[test]
fn a_missing_file_and_invalid_json_exit_2_naming_the_file() {
    let output = tandem(&["recommend", "--queue", "/nonexistent/queue.json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("/nonexistent/queue.json"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.json");
    std::fs::write(&path, "{\"gpus\": [").unwrap();
    let output = tandem(&["recommend", "--queue", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("broken.json"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_engine_file_that_is_not_a_component_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.wasm");
    std::fs::write(&path, b"\0asm\x01\0\0\0").unwrap();
    let output = tandem(&["--engine", path.to_str().unwrap(), "--version"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("core WebAssembly module"),
        "{}",
        stderr(&output)
    );
}
