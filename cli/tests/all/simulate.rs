//! `tandem simulate` and `tandem trace` as a user runs them.

use super::{stderr, tandem};

#[test]
fn a_synthetic_trace_replays_under_chosen_policies_with_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.csv");
    let report = dir.path().join("report.html");
    let made = tandem(&[
        "trace",
        "synthetic",
        "--jobs",
        "60",
        "--mean-interarrival-s",
        "120",
        "--seed",
        "3",
        "--out",
        trace.to_str().unwrap(),
    ]);
    assert!(made.status.success(), "{}", stderr(&made));
    let cluster = dir.path().join("cluster.csv");
    std::fs::write(
        &cluster,
        "nodes,gpus_per_node,gpu_model\n2,4,V100\n2,4,K80\n",
    )
    .unwrap();
    let run = tandem(&[
        "simulate",
        "--trace",
        trace.to_str().unwrap(),
        "--cluster",
        cluster.to_str().unwrap(),
        "--policies",
        "exclusive-fifo,tandem-balanced",
        "--format",
        "json",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let policies = json["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 2);
    assert!(policies.iter().all(|p| p["jobs"] == 60), "{json}");
    assert!(
        json["command"]
            .as_str()
            .unwrap()
            .starts_with("tandem simulate --trace")
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&report).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "a report is for sharing");
    }
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("tandem-balanced") && html.matches("<svg").count() >= 3);
}

#[test]
fn bad_inputs_exit_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.csv");
    let path = trace.to_str().unwrap();
    for (text, expected) in [
        (
            "arrival_s,job_type,gpus\n0,A3C,1\n",
            "bad.csv:1: missing column `steps`",
        ),
        (
            "arrival_s,job_type,gpus,steps\n5,A3C,1,10\n3,A3C,1,10\n",
            "bad.csv:3: arrivals must be sorted",
        ),
        (
            "arrival_s,job_type,gpus,steps\n0,A3C,1,10\n1,Nope,1,10\n",
            "bad.csv:3: unknown job type `Nope`",
        ),
        (
            "arrival_s,job_type,gpus,steps\n-4,A3C,1,10\n",
            "bad.csv:2: `arrival_s` must be a time ≥ 0",
        ),
    ] {
        std::fs::write(&trace, text).unwrap();
        let run = tandem(&["simulate", "--trace", path, "--policies", "exclusive-fifo"]);
        assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
        assert!(stderr(&run).contains(expected), "{}", stderr(&run));
    }
    let run = tandem(&["simulate", "--policies", "fifo"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        stderr(&run).contains("unknown policy `fifo`"),
        "{}",
        stderr(&run)
    );
    let cluster = dir.path().join("c.csv");
    std::fs::write(&cluster, "nodes,gpus_per_node,gpu_model\n1,4,H100\n").unwrap();
    let run = tandem(&["simulate", "--cluster", cluster.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        stderr(&run).contains("c.csv:2: GPU model `H100` is not in the catalogs"),
        "{}",
        stderr(&run)
    );
    let run = tandem(&["simulate", "--history-share", "2"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(stderr(&run).contains("history-share"), "{}", stderr(&run));
}
