//! `tandem kb`: what a knowledge base learns, what it refuses, and what it never stores.

use std::path::Path;

use serde_json::{Value, json};

use super::{stderr, tandem};

/// Job names a user might give, full of things the engine must never see.
const NAMES: [&str; 4] = [
    "alice/resnet50-imagenet-lr0.1",
    "bob/bert-large-finetune-squad",
    "carol/gpt2-medium-openwebtext",
    "dave/yolov5-coco-batch64",
];

fn profiles() -> Value {
    json!([
        {"id": NAMES[0], "profile": {"gpu_util_pct": 92.0, "mem_access_pct": 41.0, "mem_used_mib": 7000, "gpu_model": "V100"}},
        {"id": NAMES[1], "profile": {"gpu_util_pct": 35.0, "mem_access_pct": 12.0, "mem_used_mib": 3000, "gpu_model": "V100"}},
        {"id": NAMES[2], "profile": {"gpu_util_pct": 88.0, "mem_access_pct": 45.0, "mem_used_mib": 9000, "gpu_model": "V100"}},
        {"id": NAMES[3], "profile": {"gpu_util_pct": 30.0, "mem_access_pct": 10.0, "mem_used_mib": 2500, "gpu_model": "V100"}}
    ])
}

fn write(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path.to_str().unwrap().to_owned()
}

fn ok(args: &[&str]) -> String {
    let output = tandem(args);
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn a_knowledge_base_learns_and_never_stores_names() {
    let dir = tempfile::tempdir().unwrap();
    let kb = dir.path().join("kb.json");
    let kb = kb.to_str().unwrap();
    ok(&["kb", "init", "--kb", kb]);
    let profiles = write(dir.path(), "profiles.json", &profiles());
    let observed = ok(&[
        "kb",
        "observe",
        "--kb",
        kb,
        "--profiles",
        &profiles,
        "--format",
        "json",
    ]);
    let observed: Value = serde_json::from_str(&observed).unwrap();
    assert_eq!(observed["profiles"].as_array().unwrap().len(), 4);

    let outcomes = write(
        dir.path(),
        "outcomes.json",
        &json!([
            {"gpu_model": "V100", "jobs": [NAMES[0], NAMES[2]], "solo_s": [100, 120], "colocated_s": [190, 210]},
            {"gpu_model": "V100", "jobs": [NAMES[1], NAMES[3]], "speeds": [0.95, 0.93]}
        ]),
    );
    ok(&["kb", "observe", "--kb", kb, "--outcomes", &outcomes]);
    let summary: Value =
        serde_json::from_str(&ok(&["kb", "show", "--kb", kb, "--format", "json"])).unwrap();
    assert_eq!(summary["profiles"], 4);
    assert_eq!(summary["outcomes"], 2);
    assert!(!summary["pairs"].as_array().unwrap().is_empty());

    // Privacy: the saved knowledge base names no job, in whole or in part.
    let saved = std::fs::read_to_string(kb).unwrap();
    for name in NAMES {
        for part in name.split(['/', '-']).filter(|p| p.len() >= 4) {
            assert!(
                !saved.contains(part),
                "the knowledge base contains `{part}` of `{name}`"
            );
        }
    }

    // A queue naming a job by its real name finds its observed profile through the key.
    let queue = write(
        dir.path(),
        "queue.json",
        &json!({
            "gpus": [{"id": "g0", "node": "n0", "model": "V100", "memory_mib": 16384, "residents": [NAMES[0]]}],
            "jobs": [{"id": "newcomer", "profile": {"gpu_util_pct": 40.0, "mem_access_pct": 10.0, "mem_used_mib": 10000, "gpu_model": "V100"}}]
        }),
    );
    let answer: Value = serde_json::from_str(&ok(&[
        "recommend",
        "--queue",
        &queue,
        "--kb",
        kb,
        "--format",
        "json",
    ]))
    .unwrap();
    // 7,000 MiB resident + 10,000 MiB newcomer exceed 16,384: known only through the kb.
    assert_eq!(answer["unplaced"][0]["job"], "newcomer", "{answer}");
}

#[test]
fn workloads_without_telemetry_are_learned_from_outcomes_and_then_shared() {
    let dir = tempfile::tempdir().unwrap();
    let kb = dir.path().join("kb.json");
    let kb = kb.to_str().unwrap();
    ok(&["kb", "init", "--kb", kb]);
    let queue = write(
        dir.path(),
        "queue.json",
        &json!({
            "gpus": [{"id": "g0", "node": "n0", "model": "V100", "memory_mib": 16384}],
            "jobs": [{"id": NAMES[0]}, {"id": NAMES[1]}]
        }),
    );
    let recommend = || -> Value {
        serde_json::from_str(&ok(&[
            "recommend",
            "--queue",
            &queue,
            "--kb",
            kb,
            "--format",
            "json",
        ]))
        .unwrap()
    };
    // Memory unknown and never seen together: one runs, the other waits.
    let before = recommend();
    assert_eq!(
        before["placements"][0]["jobs"].as_array().unwrap().len(),
        1,
        "{before}"
    );
    assert_eq!(before["unplaced"].as_array().unwrap().len(), 1, "{before}");

    let outcomes = write(
        dir.path(),
        "outcomes.json",
        &json!([{"gpu_model": "V100", "jobs": [NAMES[0], NAMES[1]], "speeds": [0.9, 0.8]}]),
    );
    // Without --workloads an unprofiled id is refused as a likely typo.
    let refused = tandem(&["kb", "observe", "--kb", kb, "--outcomes", &outcomes]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("--workloads"),
        "{}",
        stderr(&refused)
    );
    ok(&[
        "kb",
        "observe",
        "--kb",
        kb,
        "--outcomes",
        &outcomes,
        "--workloads",
    ]);

    let after = recommend();
    assert_eq!(
        after["placements"][0]["jobs"].as_array().unwrap().len(),
        2,
        "{after}"
    );
    let slowdowns: Vec<f64> = after["placements"][0]["predicted"]["slowdown_pct"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_f64().unwrap())
        .collect();
    // 0.9 and 0.8 of solo speed: about 11% and 25% slower.
    assert!(slowdowns.iter().all(|s| (5.0..35.0).contains(s)), "{after}");
    let saved = std::fs::read_to_string(kb).unwrap();
    assert!(!saved.contains("alice") && !saved.contains("bob"));
}

#[test]
fn bad_observation_files_are_refused_and_nothing_learned_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let kb = dir.path().join("kb.json");
    let kb = kb.to_str().unwrap();
    ok(&["kb", "init", "--kb", kb]);
    let profiles = write(dir.path(), "profiles.json", &profiles());
    ok(&["kb", "observe", "--kb", kb, "--profiles", &profiles]);
    let before = std::fs::read(kb).unwrap();

    let good = json!({"gpu_model": "V100", "jobs": [NAMES[0], NAMES[1]], "solo_s": [100, 100], "colocated_s": [120, 110]});
    let cases: [(&str, String, &str); 5] = [
        ("unknown job", json!([good, {"gpu_model": "V100", "jobs": [NAMES[0], "mallory/ghost"], "solo_s": [1, 1], "colocated_s": [2, 2]}]).to_string(), "[1].jobs: names job `mallory/ghost`"),
        ("negative time", json!([{"gpu_model": "V100", "jobs": [NAMES[0], NAMES[1]], "solo_s": [100, -3], "colocated_s": [120, 110]}]).to_string(), "[0].solo_s[1]"),
        ("NaN", format!(r#"[{{"gpu_model": "V100", "jobs": ["{}", "{}"], "solo_s": [NaN, 1], "colocated_s": [1, 1]}}]"#, NAMES[0], NAMES[1]), "outcomes.json"),
        ("mismatched lengths", json!([{"gpu_model": "V100", "jobs": [NAMES[0], NAMES[1]], "solo_s": [100], "colocated_s": [120, 110]}]).to_string(), "[0].solo_s"),
        ("profile out of range", json!([{"id": "x", "profile": {"gpu_util_pct": 250.0, "mem_access_pct": 1.0, "mem_used_mib": 1, "gpu_model": "V100"}}]).to_string(), "[0].profile.gpu_util_pct"),
    ];
    for (name, text, expected) in cases {
        let path = dir.path().join("outcomes.json");
        std::fs::write(&path, text).unwrap();
        let flag = if name == "profile out of range" {
            "--profiles"
        } else {
            "--outcomes"
        };
        let output = tandem(&["kb", "observe", "--kb", kb, flag, path.to_str().unwrap()]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{name}: {message}");
        assert!(message.contains(expected), "{name}: {message}");
        assert_eq!(
            std::fs::read(kb).unwrap(),
            before,
            "{name}: the knowledge base changed"
        );
    }
}

/// Four `tandem kb observe` started at once, each with jobs of its own: every one of them is in
/// the knowledge base at the end. Each holds the knowledge base's lock from reading it to
/// writing it back; without it, all four read the same file and the last write wins.
#[test]
fn concurrent_observes_never_lose_one_anothers_updates() {
    let dir = tempfile::tempdir().unwrap();
    let kb = dir.path().join("kb.json");
    let kb = kb.to_str().unwrap();
    ok(&["kb", "init", "--kb", kb, "--empty"]);
    let runs: Vec<std::process::Child> = (0..4)
        .map(|run| {
            let jobs: Vec<Value> = (0..3)
                .map(|j| {
                    json!({"id": format!("team-{run}/job-{j}"), "profile": {
                        "gpu_util_pct": 10.0 + (run * 3 + j) as f64 * 5.0,
                        "mem_access_pct": 20.0, "mem_used_mib": 2000, "gpu_model": "V100"}})
                })
                .collect();
            let profiles = write(dir.path(), &format!("profiles-{run}.json"), &json!(jobs));
            std::process::Command::new(env!("CARGO_BIN_EXE_tandem"))
                .args(["kb", "observe", "--kb", kb, "--profiles", &profiles])
                .env_remove("TANDEM_ENGINE")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for run in runs {
        let output = run.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let shown: Value =
        serde_json::from_str(&ok(&["kb", "show", "--kb", kb, "--format", "json"])).unwrap();
    println!(
        "profiles after 4 concurrent observes of 3 jobs each: {}",
        shown["profiles"]
    );
    assert_eq!(shown["profiles"], 12, "{shown}");
}

#[test]
fn an_adapters_report_shows_what_each_gpu_model_taught() {
    let dir = tempfile::tempdir().unwrap();
    let kb = dir.path().join("kb.json");
    let kb = kb.to_str().unwrap();
    ok(&["kb", "init", "--kb", kb]);
    // An adapter's GET /v1/knowledge: the engine's summary, and what the cluster taught.
    let mut report: Value =
        serde_json::from_str(&ok(&["kb", "show", "--kb", kb, "--format", "json"])).unwrap();
    report["gpu_models"] = json!([{
        "gpu_model": "T4", "profiles": 3, "outcomes": 1, "speeds": 2,
        "speed_vs": [{"gpu_model": "A100", "ratio": 0.25, "jobs": 1}],
        "memory": {"peaks": 1, "mean_error_pct": 31.0, "max_under_pct": 44.9,
                   "beyond_reservation": 1, "margin_pct": 22.3,
                   "last": {"measured_mib": 15000, "predicted_before_mib": 10352,
                            "reserved_before_mib": 12660, "predicted_after_mib": 14562,
                            "reserved_after_mib": 17810}}
    }]);
    let file = write(dir.path(), "knowledge.json", &report);
    let shown = ok(&["kb", "show", "--adapter-report", &file]);
    assert!(shown.contains("learned per GPU model"), "{shown}");
    for expected in [
        "T4",
        "0.25x A100 (1 jobs)",
        "31.0",
        "44.9",
        "15000, 10352 -> 14562",
    ] {
        assert!(shown.contains(expected), "{expected:?} missing:\n{shown}");
    }
    let json = ok(&["kb", "show", "--adapter-report", &file, "--format", "json"]);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["gpu_models"][0]["memory"]["peaks"], 1);
    // Not an adapter's answer: named, not shown as an empty report.
    let bad = write(dir.path(), "bad.json", &json!({"gpu_models": 5}));
    let output = tandem(&["kb", "show", "--adapter-report", &bad]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("GET /v1/knowledge"),
        "{}",
        stderr(&output)
    );
}

/// An outcome no run can show (alone 1e-300 s, beside its partner 1e300 s): refused, naming
/// the field, and the knowledge base is still what it was and still loads. Before, it was
/// "learned", and the file saved held `null`s that `tandem kb show` could not load.
#[test]
fn the_poison_outcome_is_refused_and_the_knowledge_base_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let kb = dir.path().join("kb.json");
    let kb = kb.to_str().unwrap();
    ok(&["kb", "init", "--kb", kb]);
    let profiles = write(dir.path(), "profiles.json", &profiles());
    ok(&["kb", "observe", "--kb", kb, "--profiles", &profiles]);
    let before = std::fs::read(kb).unwrap();
    let poison = write(
        dir.path(),
        "poison.json",
        &json!([{"gpu_model": "V100", "jobs": [NAMES[0], NAMES[1]],
                 "solo_s": [1e-300, 1e-300], "colocated_s": [1e300, 1e300]}]),
    );
    let output = tandem(&["kb", "observe", "--kb", kb, "--outcomes", &poison]);
    let message = stderr(&output);
    println!(
        "tandem kb observe of the poison outcome -> {:?}: {message}",
        output.status.code()
    );
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains("[0].solo_s[0]"), "{message}");
    assert_eq!(
        std::fs::read(kb).unwrap(),
        before,
        "the knowledge base changed"
    );
    let shown: Value =
        serde_json::from_str(&ok(&["kb", "show", "--kb", kb, "--format", "json"])).unwrap();
    assert_eq!(shown["profiles"], 4, "{shown}");
    assert_eq!(shown["outcomes"], 0, "{shown}");
}
