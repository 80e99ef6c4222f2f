//! A compute node's profiler, authenticated by MUNGE: `tandem-profiler --intake-auth munge`
//! (the real one, replaying a recording of a process in a Slurm job's cgroup) presents root's
//! credential encoded on this node, and the service files the profile of a job placed on the
//! node. A profile of a job not placed there, a user's credential and a credential made for
//! another request are refused.

use std::path::Path;

use anyhow::{Context as _, ensure};
use serde_json::json;

use super::{Cluster, metric, request, wait_for, wait_state};

/// A recording (profiler/src/sample/replay.rs) of one process of Slurm job `job` on GPU 0.
fn recording(job: u64) -> String {
    let cgroup = format!("0::/system.slice/slurmstepd.scope/job_{job}/step_batch/user/task_0");
    (0..4u32)
        .map(|tick| {
            let line = json!({
                "t_ms": u64::from(tick) * 1_000,
                "gpu": { "index": 0, "model": "Tesla V100-SXM2-16GB", "memory_total_mib": 16_384 },
                "device": { "sm_util": 33, "mem_util": 12 },
                "processes": [{ "pid": 7_001, "used_memory_mib": 2_000 + tick * 100,
                                "cgroup": cgroup }],
            });
            format!("{line}\n")
        })
        .collect()
}

/// Runs the profiler on `replay` against the service, with MUNGE; its summary's keyed ids.
fn profile(cluster: &Cluster, replay: &Path) -> anyhow::Result<Vec<String>> {
    let url = format!("http://127.0.0.1:{}", cluster.port);
    let socket = cluster.munge_socket();
    let secret = cluster.dir.join("secret");
    let options = <tandem_profiler::Options as clap::Parser>::try_parse_from([
        "tandem-profiler".as_ref(),
        "--replay".as_ref(),
        replay.as_os_str(),
        "--adapter".as_ref(),
        url.as_ref(),
        "--intake-auth".as_ref(),
        "munge".as_ref(),
        "--munge-socket".as_ref(),
        socket.as_os_str(),
        "--id-secret-file".as_ref(),
        secret.as_os_str(),
        "--window-seconds".as_ref(),
        "1".as_ref(),
        "--attempts".as_ref(),
        "1".as_ref(),
        // This machine's /proc has no such pids: every process comes from the recording.
        "--proc".as_ref(),
        cluster.dir.as_os_str(),
    ]
        as [&std::ffi::OsStr; 17])?;
    let summary = tokio::runtime::Runtime::new()?.block_on(tandem_profiler::run(options))?;
    Ok(summary.posted.into_iter().map(|r| r.job).collect())
}

/// Runs the scenario; the service runs with `--auth munge`.
pub fn run(cluster: &Cluster) -> anyhow::Result<()> {
    let job = Cluster::job_id(&cluster.sbatch(
        &["--tandem", "--tandem-name=p", "--gres=shard:1"],
        "profiled",
        "sleep 300",
    ))?;
    wait_state(cluster, job, &["RUNNING"])?;
    wait_for(
        "the profiled job to start placed",
        std::time::Duration::from_secs(20),
        || Ok(cluster.placement_of(job).is_ok()),
    )?;
    let keys = tandem_adapter_core::JobKeys::new((0..32).map(|i| ((i % 16) * 17) as u8).collect())?;

    // Its node's profiler files its profile, as `slurm/<job id>`.
    let replay = cluster.dir.join("profiled.jsonl");
    std::fs::write(&replay, recording(u64::from(job)))?;
    let posted = profile(cluster, &replay).context("the node's profiler")?;
    let expected = keys.key("slurm", &job.to_string());
    println!("(i) the node's profiler, with root's MUNGE credential, filed {posted:?}");
    ensure!(
        posted == [expected.clone()],
        "the profile of job {job} ({expected}) was not filed: {posted:?}"
    );

    // A job that is not placed on this node: the profiler's post is refused.
    let refused_before = metric(cluster, "tandem_unauthorized_total")?;
    let stray = cluster.dir.join("stray.jsonl");
    std::fs::write(&stray, recording(999_999))?;
    let stray_posted = profile(cluster, &stray);
    println!("(i) the profiler's post for a job not on its node: {stray_posted:?}");
    ensure!(
        stray_posted.is_err() && metric(cluster, "tandem_unauthorized_total")? > refused_before,
        "a profile of a job not on the node was not refused: {stray_posted:?}"
    );
    let body = json!({"profiles": [{"job": keys.key("slurm", "999999"), "profile": {
        "gpu_util_pct": 30.0, "mem_access_pct": 10.0, "mem_used_mib": 2000, "gpu_model": "V100"}}]})
    .to_string();
    let root = cluster.credential(None, "POST", "/v1/profiles", "")?;
    let got = request(
        cluster.port,
        "POST",
        "/v1/profiles",
        &body,
        &[&format!("MUNGE {root}")],
    )?;
    println!("(i) root's credential, a profile of a job not on the node: {got:?}");
    ensure!(
        got.0 == 403
            && got
                .1
                .contains("may post profiles of its own node's jobs only"),
        "{got:?}"
    );

    // Credentials a profiler's must not be mistaken for.
    let ok_body = json!({"profiles": [{"job": expected, "profile": {
        "gpu_util_pct": 30.0, "mem_access_pct": 10.0, "mem_used_mib": 2000, "gpu_model": "V100"}}]})
    .to_string();
    super::attacks::user(super::attacks::ATTACKER)?;
    let user = cluster.credential(Some(super::attacks::ATTACKER), "POST", "/v1/profiles", "")?;
    let got = request(
        cluster.port,
        "POST",
        "/v1/profiles",
        &ok_body,
        &[&format!("MUNGE {user}")],
    )?;
    println!("(i) a user's credential: {got:?}");
    ensure!(got.0 == 403 && got.1.contains("root's"), "{got:?}");
    let other = cluster.credential(None, "POST", "/v1/slurm/finish", "")?;
    let got = request(
        cluster.port,
        "POST",
        "/v1/profiles",
        &ok_body,
        &[&format!("MUNGE {other}")],
    )?;
    println!("(i) root's credential made for another request: {got:?}");
    ensure!(
        got.0 == 401 && got.1.contains("made for another request"),
        "{got:?}"
    );
    cluster.slurm("scancel", &[&job.to_string()]);
    wait_state(cluster, job, &["GONE", "CANCELLED", "COMPLETED"])?;
    Ok(())
}
