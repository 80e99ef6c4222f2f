//! `tandem eval pairs`: every method scored on measured outcomes, reproducibly, and bad
//! settings refused with exit code 2.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{stderr, tandem};

const METHODS: [&str; 8] = [
    "random",
    "first-come",
    "jrs-ranking",
    "lucid-style",
    "tandem-balanced",
    "tandem-min-slowdown",
    "tandem-max-packing",
    "oracle",
];

fn gavel_v100() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../data/catalogs/gavel-v100.json")
        .to_str()
        .unwrap()
        .to_owned()
}

/// Six job types with measured solo times and utilizations on a T4 (so every method applies),
/// a second GPU model (so `--gpu-model` is required), a self-pair, and pairs left unmeasured
/// (so pairing blindly costs OOMs).
fn tiny_catalog() -> Value {
    let job = |name: &str, solo: f64, util: f64| {
        json!({"name": name, "profile": null, "declared": null,
               "solo_time_s": {"T4": solo}, "gpu_util_pct_approx": util})
    };
    let pair = |a: &str, b: &str, speed_a: f64, speed_b: f64| json!({"gpu_model": "T4", "a": a, "b": b, "speed_a": speed_a, "speed_b": speed_b});
    json!({
        "name": "tiny-t4",
        "source": "hand-written for the tests",
        "gpu_models": [{"model": "T4", "memory_mib": 15360}, {"model": "K80", "memory_mib": 12288}],
        "job_types": [
            job("resnet", 300.0, 85.0), job("bert", 500.0, 70.0), job("lstm", 200.0, 40.0),
            job("dcgan", 250.0, 25.0), job("a3c", 400.0, 15.0), job("vae", 100.0, 10.0),
            {"name": "k80-only", "profile": null, "declared": null, "solo_throughput": {"K80": 1.0}}
        ],
        "pairs": [
            pair("resnet", "vae", 0.9, 0.8), pair("bert", "a3c", 0.85, 0.9),
            pair("lstm", "dcgan", 0.7, 0.75), pair("resnet", "bert", 0.5, 0.45),
            pair("lstm", "vae", 0.95, 0.6), pair("dcgan", "a3c", 0.6, 0.7),
            pair("resnet", "lstm", 0.55, 0.6), pair("bert", "dcgan", 0.8, 0.5),
            {"gpu_model": "T4", "a": "a3c", "b": "vae", "speed_a": 0.9, "speed_b": 0.95,
             "colocated_time_s": [430.0, 110.0]},
            pair("vae", "vae", 0.5, 0.5)
        ]
    })
}

fn write_catalog(dir: &Path, value: &Value) -> String {
    let path = dir.join("catalog.json");
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path.to_str().unwrap().to_owned()
}

fn json_report(args: &[&str]) -> (String, Value) {
    let mut all = vec!["eval", "pairs", "--format", "json"];
    all.extend_from_slice(args);
    let output = tandem(&all);
    assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    let text = String::from_utf8(output.stdout).unwrap();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (text, value)
}

fn method<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["method"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report}"))
}

/// The oracle saves at least as much as any method, and the methods that only pair what was
/// measured never cause an OOM.
fn check_oracle_bounds(report: &Value) {
    let oracle = method(report, "oracle")["packing_saving_pct"]
        .as_f64()
        .unwrap();
    for row in report["methods"].as_array().unwrap() {
        if let Some(saving) = row["packing_saving_pct"].as_f64() {
            assert!(
                saving <= oracle + 1e-9,
                "{} beats the oracle: {row}",
                row["method"]
            );
        }
    }
    for name in ["oracle", "jrs-ranking"] {
        assert_eq!(method(report, name)["ooms"], 0, "{report}");
    }
    assert!(
        (method(report, "oracle")["of_oracle_pct"].as_f64().unwrap() - 100.0).abs() < 1e-9,
        "{report}"
    );
    check_mixed_duration_bounds(report);
}

/// In the mixed-duration table the oracle saves the most; the oracle over the observed pairs
/// bounds every method that pairs jobs of unknown memory only once seen sharing (Tandem, whose
/// jobs here are known by their ids alone, and the JRS ranking); none of them forms an
/// unmeasured pair.
fn check_mixed_duration_bounds(report: &Value) {
    let rows = report["mixed_durations"]["methods"].as_array().unwrap();
    let saving = |name: &str| -> f64 {
        rows.iter()
            .find(|r| r["method"] == name)
            .unwrap_or_else(|| panic!("no {name} in {rows:?}"))["packing_saving_pct"]
            .as_f64()
            .unwrap()
    };
    let (oracle, observed) = (saving("oracle"), saving("oracle-observed"));
    assert!(observed <= oracle + 1e-9, "{rows:?}");
    for row in rows {
        let name = row["method"].as_str().unwrap();
        let value = row["packing_saving_pct"].as_f64().unwrap();
        assert!(value <= oracle + 1e-9, "{name} beats the oracle: {row}");
        if name.starts_with("tandem-") || name == "oracle-observed" || name == "jrs-ranking" {
            assert!(
                value <= observed + 1e-9,
                "{name} beats the observed pairs: {row}"
            );
            assert_eq!(row["ooms"], 0, "{row}");
        }
    }
}

#[test]
fn the_table_has_a_row_for_every_method_and_the_learning_curve() {
    let output = tandem(&["eval", "pairs", "--catalog", &gavel_v100()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(
        table.starts_with("catalog gavel-v100 (") && table.contains("GPU model V100"),
        "{table}"
    );
    assert!(
        table.contains("200 queues of 16 distinct job types, seed 1"),
        "{table}"
    );
    for name in METHODS {
        assert!(
            table.lines().any(|l| l.starts_with(&format!("│ {name} "))),
            "no row for {name} in\n{table}"
        );
    }
    // Gavel gives no utilization: Lucid's rule is shown as not applicable, with the reason.
    let lucid = table
        .lines()
        .find(|l| l.starts_with("│ lucid-style"))
        .unwrap();
    assert!(lucid.contains("n/a"), "{table}");
    assert!(table.contains("lucid-style: not applicable: needs each job type's GPU utilization"));
    assert!(table.contains("learning curve"), "{table}");
    for share in ["0.00", "0.10", "0.25", "0.50", "0.75", "0.90"] {
        assert!(
            table
                .lines()
                .any(|l| l.starts_with(&format!("│ {share:>11} "))),
            "no curve row for {share} in\n{table}"
        );
    }
}

#[test]
fn gavel_json_respects_the_oracle_and_the_measured_table() {
    let (_, report) = json_report(&["--catalog", &gavel_v100(), "--queues", "40"]);
    assert_eq!(report["catalog"]["name"], "gavel-v100");
    let settings = &report["settings"];
    assert_eq!(settings["gpu_model"], "V100");
    assert_eq!(settings["job_types"], 26);
    assert_eq!(settings["queue_size"], 16);
    assert_eq!(settings["queues"], 40);
    assert_eq!(
        settings["training_pairs"].as_u64().unwrap() + settings["held_out_pairs"].as_u64().unwrap(),
        settings["measured_pairs"].as_u64().unwrap()
    );
    let names: Vec<&str> = report["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(names, METHODS);
    check_oracle_bounds(&report);
    let lucid = method(&report, "lucid-style");
    assert_eq!(lucid["applicable"], false);
    assert!(lucid["reason"].as_str().unwrap().contains("utilization"));
    assert!(lucid["packing_saving_pct"].is_null());
    // Tandem saw every training outcome it was given.
    let training = &method(&report, "tandem-balanced")["engine"];
    assert_eq!(training["outcomes_observed"], settings["training_pairs"]);
    let curve = report["learning_curve"].as_array().unwrap();
    assert_eq!(curve.len(), 6);
    assert_eq!(curve[0]["train_share"], 0.0);
    assert_eq!(curve[0]["training_pairs"], 0);
    assert!(curve[0]["naive_slowdown_mae_pp"].is_null());
    for row in curve {
        assert_eq!(
            row["training_pairs"].as_u64().unwrap() + row["held_out_pairs"].as_u64().unwrap(),
            settings["measured_pairs"].as_u64().unwrap()
        );
    }
}

#[test]
fn a_hand_written_catalog_runs_every_method_including_lucid() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = write_catalog(dir.path(), &tiny_catalog());
    // Two thirds of the types by default, so that queues differ.
    let (_, default) = json_report(&["--catalog", &catalog, "--gpu-model", "T4", "--queues", "1"]);
    assert_eq!(default["settings"]["queue_size"], 4);
    let (_, report) = json_report(&[
        "--catalog",
        &catalog,
        "--gpu-model",
        "T4",
        "--queues",
        "30",
        "--queue-size",
        "6",
    ]);
    let settings = &report["settings"];
    // The K80-only type has no solo data on the T4; the self-pair is left out.
    assert_eq!(settings["job_types"], 6);
    assert_eq!(settings["queue_size"], 6);
    assert_eq!(settings["measured_pairs"], 9);
    assert_eq!(settings["self_pairs_skipped"], 1);
    assert_eq!(settings["solo_times_measured"], true);
    check_oracle_bounds(&report);
    let lucid = method(&report, "lucid-style");
    assert_eq!(lucid["applicable"], true, "{report}");
    assert!(lucid["packing_saving_pct"].as_f64().is_some());
    // Every queue holds all six types: first-come always pairs the same three, and the oracle
    // always finds the same best matching.
    assert_eq!(method(&report, "first-come")["pairs_per_queue"], 3.0);
    assert_eq!(method(&report, "oracle")["pairs_per_queue"], 3.0);
    assert!(
        method(&report, "oracle")["packing_saving_pct"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn the_profiled_futurewei_catalog_adds_the_profile_path() {
    let profiled = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../data/catalogs/futurewei-p100-profiled.json");
    let profiled = profiled.to_str().unwrap();
    let args = ["--catalog", profiled, "--queues", "30"];
    let (first, report) = json_report(&args);
    assert_eq!(
        first,
        json_report(&args).0,
        "the profile path is reproducible"
    );
    let path = &report["profile_path"];
    assert_eq!(path["clusters"].as_array().unwrap().len(), 12, "{path}");
    let rows = path["methods"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["method"].as_str().unwrap()).collect();
    assert_eq!(names[0], "jrs-clusters warm");
    for objective in ["balanced", "min-slowdown", "max-packing"] {
        for phase in ["cold", "warm", "recurring"] {
            let name = format!("tandem-{objective} {phase}");
            assert!(names.contains(&name.as_str()), "{name} missing: {names:?}");
        }
    }
    let oracle = method(&report, "oracle")["packing_saving_pct"]
        .as_f64()
        .unwrap();
    for row in rows {
        assert!(
            row["packing_saving_pct"].as_f64().unwrap() <= oracle + 1e-9,
            "{row}"
        );
        assert!(row["of_oracle_pct"].as_f64().is_some(), "{row}");
    }
    // The warm engines observed every training pair.
    let warm = rows
        .iter()
        .find(|r| r["method"] == "tandem-balanced warm")
        .unwrap();
    assert_eq!(
        warm["engine"]["outcomes_observed"],
        report["settings"]["training_pairs"]
    );
    // The curve's training sets are the phases': nothing observed is cold, the train share is
    // warm.
    let curve = path["curve"].as_array().unwrap();
    assert_eq!(curve.len(), 6);
    let cold = rows
        .iter()
        .find(|r| r["method"] == "tandem-balanced cold")
        .unwrap();
    for (point, phase) in [(&curve[0], cold), (&curve[3], warm)] {
        for figure in ["packing_saving_pct", "slowdown_p95_pct", "ooms"] {
            assert_eq!(
                point[figure], phase[figure],
                "{figure}: {point} against {phase}"
            );
        }
    }
    assert_eq!(curve[0]["held_out"]["pairs"], 34);
    // Every measured pair is in exactly one cluster pair, and in `within` or `across`.
    let count = |rows: &Value| -> u64 {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r["pairs"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(count(&path["cluster_pairs"]), 34);
    assert_eq!(count(&path["within_across"]), 34);
    // The catalog without profiles has no profile path.
    let plain = profiled.replace("-profiled", "");
    let (_, report) = json_report(&["--catalog", &plain, "--queues", "5"]);
    assert!(report.get("profile_path").is_none(), "{report}");
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = write_catalog(dir.path(), &tiny_catalog());
    let tiny = [
        "--catalog",
        &catalog,
        "--gpu-model",
        "T4",
        "--queues",
        "20",
        "--queue-size",
        "5",
    ];
    let (first, _) = json_report(&tiny);
    let (again, _) = json_report(&tiny);
    assert_eq!(first, again);
    let mut other_seed = tiny.to_vec();
    other_seed.extend(["--seed", "2"]);
    let (_, other) = json_report(&other_seed);
    let first: Value = serde_json::from_str(&first).unwrap();
    assert_ne!(
        method(&first, "random"),
        method(&other, "random"),
        "another seed draws other queues and another random pairing"
    );

    let gavel = ["--catalog", &gavel_v100(), "--queues", "20", "--seed", "9"];
    assert_eq!(json_report(&gavel).0, json_report(&gavel).0);
}

#[test]
fn bad_settings_exit_2_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = write_catalog(dir.path(), &tiny_catalog());
    let missing = dir.path().join("missing.json");
    let missing = missing.to_str().unwrap();
    let gavel = gavel_v100();
    // A declared-models file naming none of the catalog's job types.
    let models = dir.path().join("models.csv");
    std::fs::write(
        &models,
        "job_type,batch_size,params_mib,activations_mib,input_mib,gflops,conv_layers,\
         linear_layers,activation_layers,other_layers\nNoSuchNet,32,10,20,1,5,3,1,3,1\n",
    )
    .unwrap();
    let models = models.to_str().unwrap();
    let cases: [(&[&str], &[&str]); 8] = [
        (
            &["--catalog", missing],
            &["missing.json", "cannot read the file"],
        ),
        (
            &["--catalog", &gavel, "--queue-size", "27"],
            &["--queue-size 27", "at most 26"],
        ),
        (
            &["--catalog", &gavel, "--queue-size", "1"],
            &["--queue-size 1"],
        ),
        (
            &["--catalog", &gavel, "--train-share", "1.5"],
            &["--train-share 1.5", "0..=1"],
        ),
        (
            &["--catalog", &gavel, "--gpu-model", "A100"],
            &["--gpu-model A100", "no such GPU model", "V100"],
        ),
        (&["--catalog", &tiny], &["--gpu-model", "T4, K80"]),
        (&["--catalog", &gavel, "--queues", "0"], &["--queues 0"]),
        (
            &["--catalog", &gavel, "--models", models],
            &["--models", "models.csv", "names none of the 26 job types"],
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["eval", "pairs"];
        all.extend_from_slice(args);
        let output = tandem(&all);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {message}");
        for part in expected {
            assert!(message.contains(part), "{args:?}: {message}");
        }
    }
    // A catalog that is not one names the file too.
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"name\": ").unwrap();
    let output = tandem(&["eval", "pairs", "--catalog", broken.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("broken.json"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn declared_models_reach_the_engine() {
    let models =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/utilization/gavel_models.csv");
    let models = models.to_str().unwrap();
    let plain = ["--catalog", &gavel_v100(), "--queues", "20"];
    let (_, without) = json_report(&plain);
    let mut declaring = plain.to_vec();
    declaring.extend_from_slice(&["--models", models]);
    let (_, with) = json_report(&declaring);
    assert_eq!(without["settings"]["declared_models"], 0);
    assert_eq!(
        with["settings"]["declared_models"], 26,
        "{}",
        with["settings"]
    );
    // Told the models, the engine predicts the pairs it never observed from them: its
    // held-out predictions change, and so do the pairs it forms.
    let curve = |report: &Value| report["learning_curve"][3]["slowdown_mae_pp"].clone();
    assert_ne!(curve(&without), curve(&with));
    let max_packing =
        |report: &Value| method(report, "tandem-max-packing")["pairs_per_queue"].clone();
    assert_ne!(max_packing(&without), max_packing(&with));
}
