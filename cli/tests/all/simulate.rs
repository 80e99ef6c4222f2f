//! `tandem simulate` and `tandem trace` as a user runs them.

use super::{stderr, tandem};

#[test]
fn a_synthetic_trace_replays_under_chosen_policies_with_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.csv");
    let report = dir.path().join("report.html");
    let jobs = dir.path().join("jobs.csv");
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
        "--jobs",
        jobs.to_str().unwrap(),
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
    // Every job of every policy, once, finishing after it arrived, on a GPU of the cluster.
    let jobs = std::fs::read_to_string(&jobs).unwrap();
    let mut lines = jobs.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("policy,job,job_type,gpus,gpu_model,")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 120, "{jobs}");
    for policy in ["exclusive-fifo", "tandem-balanced"] {
        let mut seen: Vec<usize> = rows
            .iter()
            .filter(|r| r[0] == policy)
            .map(|r| r[1].parse().unwrap())
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..60).collect::<Vec<_>>(), "{policy}");
    }
    for row in &rows {
        let (arrival, finish): (f64, f64) = (row[5].parse().unwrap(), row[8].parse().unwrap());
        assert!(finish > arrival, "{row:?}");
        assert!(["V100", "K80"].contains(&row[4]), "{row:?}");
    }
    // FIFO never shares.
    assert!(
        rows.iter()
            .filter(|r| r[0] == "exclusive-fifo")
            .all(|r| r[10] == "false")
    );
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

/// A job the world makes run alone (its type not profiled yet) is placed among idle GPUs,
/// under every Tandem objective: `max-packing`'s best fit would put it beside a resident,
/// where the world cannot start it, and it would wait for the resident to finish.
#[test]
fn a_new_type_starts_on_an_idle_gpu_under_every_objective() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let catalog = root.join("data/catalogs/schedtune-memory.json");
    let cluster = dir.path().join("cluster.csv");
    std::fs::write(&cluster, "nodes,gpus_per_node,gpu_model\n1,2,V100\n").unwrap();
    // A long job, profiled after its first 300 s; then a short job of a new, declared type.
    let resident_s = 36_000.0;
    let trace = dir.path().join("trace.csv");
    std::fs::write(
        &trace,
        format!(
            "arrival_s,job_type,gpus,steps\n0,resnet18-b8,1,{resident_s}\n600,resnet34-b8,1,600\n"
        ),
    )
    .unwrap();
    let run = tandem(&[
        "simulate",
        "--catalog",
        catalog.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--cluster",
        cluster.to_str().unwrap(),
        "--policies",
        "tandem-balanced,tandem-min-slowdown,tandem-max-packing",
        "--format",
        "json",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    for policy in json["policies"].as_array().unwrap() {
        let queued_s = policy["queueing_s"]["mean"].as_f64().unwrap();
        // Nothing keeps the new job from the idle GPU: it waits for no decision of the
        // resident's run.
        assert!(
            queued_s < resident_s / 10.0 && policy["ooms"] == 0,
            "{}: waited {queued_s} s on average, {} OOMs",
            policy["policy"],
            policy["ooms"]
        );
    }
}
