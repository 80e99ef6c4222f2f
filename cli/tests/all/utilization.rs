//! The engine's bundled utilization table is what `tandem declare` makes of the networks the
//! Futurewei runs trained, and the declared models of Gavel's job types are what it makes of
//! the networks Gavel trained: both are derived, never typed in.

use std::collections::HashMap;
use std::path::Path;

use super::tandem;

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The table from the measured runs and the ONNX files, as the engine's CSV.
fn derive_table() -> String {
    let mut networks = HashMap::new();
    let mut reader = csv::Reader::from_path(repo("data/utilization/networks.csv")).unwrap();
    for record in reader.records() {
        let record = record.unwrap();
        networks.insert(record[0].to_owned(), record[1].to_owned());
    }
    let mut out = String::from(
        "network,batch_size,params_mib,activations_mib,input_mib,gflops,conv_layers,\
         linear_layers,activation_layers,other_layers,max_gpu_util_pct\n",
    );
    let mut reader =
        csv::Reader::from_path(repo("data/alnair/futurewei_mini_ml_workload.csv")).unwrap();
    let headers = reader.headers().unwrap().clone();
    let column = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (model, batch, mgup) = (column("Model"), column("BS"), column("MGUP"));
    for record in reader.records() {
        let record = record.unwrap();
        // The source spells some names with stray spaces ("small_bert/ bert_..._A-2 ").
        let name: String = record[model]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let name = name.replace("/ ", "/");
        let network = networks
            .get(&name)
            .unwrap_or_else(|| panic!("no network for model {name:?}"));
        let batch_size: u32 = record[batch].trim().parse().unwrap();
        let onnx = std::fs::read(repo(&format!("data/utilization/onnx/{network}.onnx"))).unwrap();
        let s = tandem_declare::summarize(&onnx, Some(batch_size)).unwrap();
        out.push_str(&format!(
            "{network},{},{:.4},{:.4},{:.6},{:.6},{},{},{},{},{}\n",
            s.batch_size,
            s.params_mib,
            s.activations_mib,
            s.input_mib,
            s.gflops,
            s.conv_layers,
            s.linear_layers,
            s.activation_layers,
            s.other_layers,
            record[mgup].trim(),
        ));
    }
    out
}

/// The file at `rel` (from the repository root), which must be `derived` byte for byte;
/// `TANDEM_BLESS=1` writes `derived` there first.
fn checked_in(rel: &str, derived: &str) -> String {
    let path = repo(rel);
    if std::env::var_os("TANDEM_BLESS").is_some() {
        std::fs::write(&path, derived).unwrap();
    }
    let bundled = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        bundled, derived,
        "{rel} is stale; regenerate it with \
         TANDEM_BLESS=1 cargo test -p tandem-cli --test all utilization"
    );
    bundled
}

#[test]
fn the_bundled_utilization_table_is_derived_from_the_onnx_files() {
    let derived = derive_table();
    let bundled = checked_in("engine/data/futurewei_utilization.csv", &derived);
    assert_eq!(bundled.lines().count(), 1 + 49);
}

/// The declared models of Gavel's job types, from the job-type map and the ONNX files, in the
/// simulator's declared-models format.
fn derive_gavel_models() -> String {
    let mut out = String::from(
        "job_type,batch_size,params_mib,activations_mib,input_mib,gflops,conv_layers,\
         linear_layers,activation_layers,other_layers\n",
    );
    let mut reader = csv::Reader::from_path(repo("data/utilization/gavel_job_types.csv")).unwrap();
    for record in reader.records() {
        let record = record.unwrap();
        let (job_type, network) = (&record[0], &record[1]);
        let batch_size: u32 = record[2].parse().unwrap();
        let onnx = std::fs::read(repo(&format!("data/utilization/onnx/{network}.onnx"))).unwrap();
        let s = tandem_declare::summarize(&onnx, Some(batch_size)).unwrap();
        // Job types hold commas only inside quotes, which Gavel's names never need.
        assert!(!job_type.contains(','), "{job_type}");
        out.push_str(&format!(
            "{job_type},{},{:.4},{:.4},{:.6},{:.6},{},{},{},{}\n",
            s.batch_size,
            s.params_mib,
            s.activations_mib,
            s.input_mib,
            s.gflops,
            s.conv_layers,
            s.linear_layers,
            s.activation_layers,
            s.other_layers,
        ));
    }
    out
}

#[test]
fn gavels_declared_models_are_derived_from_the_onnx_files() {
    let derived = derive_gavel_models();
    let bundled = checked_in("data/utilization/gavel_models.csv", &derived);
    // Every job type of Gavel's catalogs, each once.
    let declared = tandem_catalog::DeclaredModels::parse(&bundled, "gavel_models.csv").unwrap();
    let catalog = tandem_catalog::Catalog::read(repo("data/catalogs/gavel-v100.json")).unwrap();
    let mut declared_types: Vec<&str> = declared
        .models
        .iter()
        .map(|m| m.job_type.as_str())
        .collect();
    let mut catalog_types: Vec<&str> = catalog
        .job_types()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    declared_types.sort_unstable();
    catalog_types.sort_unstable();
    assert_eq!(declared_types, catalog_types);
}

#[test]
fn declare_prints_what_the_engine_is_told() {
    let file = repo("data/utilization/onnx/resnet50.onnx");
    let output = tandem(&[
        "declare",
        file.to_str().unwrap(),
        "--batch-size",
        "32",
        "--format",
        "json",
    ]);
    assert!(output.status.success(), "{}", super::stderr(&output));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // ResNet-50 with a 43-class head: 23.5 M float parameters; ~7.7 GFLOPs a 224×224 image.
    let params = summary["params_mib"].as_f64().unwrap();
    assert!((89.0..91.0).contains(&params), "{params}");
    let gflops = summary["gflops"].as_f64().unwrap();
    assert!((7.5 * 32.0..8.0 * 32.0).contains(&gflops), "{gflops}");
    assert_eq!(summary["conv_layers"], 53);
    assert_eq!(summary["batch_size"], 32);
    // What `declare` prints is a valid `declared` object.
    tandem_declare::read_summary_json(std::str::from_utf8(&output.stdout).unwrap()).unwrap();

    let output = tandem(&["declare", file.to_str().unwrap()]);
    assert!(
        output.status.success(),
        "a fixed batch needs no --batch-size"
    );
    let missing = tandem(&["declare", "no/such/model.onnx"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(super::stderr(&missing).contains("no/such/model.onnx"));
    let junk = tandem(&[
        "declare",
        repo("data/utilization/networks.csv").to_str().unwrap(),
    ]);
    assert_eq!(junk.status.code(), Some(2));
    assert!(
        super::stderr(&junk).contains("networks.csv"),
        "{}",
        super::stderr(&junk)
    );
}
