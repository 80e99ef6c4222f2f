//! `tandem kb synthesize`: the vendored Futurewei runs in, a judged and augmented set out.

use std::path::PathBuf;

use super::{stderr, tandem};

fn futurewei() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/alnair/futurewei_mini_ml_workload.csv")
}

#[test]
fn the_futurewei_runs_are_judged_and_augmented() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("augmented.csv");
    let data = futurewei();
    let output = tandem(&[
        "kb",
        "synthesize",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).unwrap();
    // Names are put back for display; the row of a judged workload ends with its best method
    // and what was generated.
    let best_of = |workload: &str| {
        let row = table
            .lines()
            .find(|line| line.contains(workload))
            .unwrap_or_else(|| panic!("no row for {workload} in\n{table}"));
        let cells: Vec<&str> = row.split('┆').map(|c| c.trim()).collect();
        cells[cells.len() - 2].to_owned()
    };
    assert!(
        ["MobileNet / GTSRB", "ResNet50 / GTSRB", "DCGAN / MNIST"]
            .iter()
            .any(|w| ["pchip", "linear"].contains(&best_of(w).as_str())),
        "{table}"
    );
    // The five oxford_iiit_pet/3.2.x rows are one workload of five batch sizes.
    assert!(
        table.contains("Image Segmentation / oxford_iiit_pet") && !table.contains("3.2.1"),
        "{table}"
    );

    let written = std::fs::read_to_string(&out).unwrap();
    let mut lines = written.lines();
    assert_eq!(
        lines.next(),
        Some("workload,batch_size,MGUP,MGMAP,MGTSAMP,synthetic")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let measured = rows.iter().filter(|r| r[5] == "false").count();
    let synthetic = rows.iter().filter(|r| r[5] == "true").count();
    // 49 runs at 49 distinct (workload, batch size) pairs in the vendored file.
    assert_eq!(measured, 49, "{written}");
    assert!(synthetic > 0, "{written}");
    for row in &rows {
        assert_eq!(row.len(), 6, "{row:?}");
        for value in &row[2..5] {
            let value: f64 = value.parse().unwrap();
            assert!((0.0..=100.0).contains(&value), "{row:?}");
        }
    }
    assert!(
        rows.iter()
            .any(|r| r[0] == "MobileNet / GTSRB" && r[1] == "64" && r[5] == "true"),
        "{written}"
    );
    assert!(
        table.contains(&format!("{measured} measured and {synthetic} synthetic")),
        "{table}"
    );
}

#[test]
fn the_json_output_names_workloads_and_features() {
    let data = futurewei();
    let output = tandem(&[
        "kb",
        "synthesize",
        "--data",
        data.to_str().unwrap(),
        "--points-per-gap",
        "1",
        "--format",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["features"],
        serde_json::json!(["MGUP", "MGMAP", "MGTSAMP"])
    );
    assert_eq!(report["best"][0]["workload"], "MobileNet / GTSRB");
    // Four MobileNet gaps, one point each.
    assert_eq!(
        report["generated"][0]["samples"].as_array().unwrap().len(),
        4
    );
    let methods: Vec<&str> = report["scores"]
        .as_array()
        .unwrap()
        .iter()
        .take(4)
        .map(|s| s["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["linear", "pchip", "cubic-spline", "barycentric"]);
}

#[test]
fn a_bad_csv_exits_2_naming_the_line_and_column_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("augmented.csv");
    let cases = [
        (
            "Model,Dataset,BS,MGUP,MGMAP,MaGTSAMP\nA,B,32,10,20,30\nA,B,64,ten,20,30\n",
            "line 3, column MGUP: `ten` is not a number",
        ),
        (
            "Model,Dataset,BS,MGUP,MGMAP\nA,B,32,10,20\n",
            "line 1, column MaGTSAMP: missing from the header",
        ),
    ];
    for (text, problem) in cases {
        let data = dir.path().join("runs.csv");
        std::fs::write(&data, text).unwrap();
        let output = tandem(&[
            "kb",
            "synthesize",
            "--data",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(
            message.contains(&format!("runs.csv: {problem}")),
            "{message}"
        );
        assert!(!out.exists());
    }
}
