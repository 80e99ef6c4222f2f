//! The node profiler feeds the adapter: `tandem-profiler`, replaying recorded samples of two
//! pods' GPU processes, attributes them through the API server (the pods' UIDs are in the
//! recorded cgroups), posts their profiles to the running adapter's intake, and the adapter's
//! next decision uses them.
//!
//! One node `v100-p` with two V100s: a pod of job `alpha` on GPU 0 and one of job `beta` on
//! GPU 1 (the recording's two pods). A second pod of `beta`:
//! - before the profiler runs, fits nowhere: neither job has a profile, and Tandem shares a
//!   GPU only with evidence (its reason in the pod's events);
//! - after, it is bound beside `alpha` on GPU 0 — and not beside the other `beta` on GPU 1,
//!   whose 11,000 MiB (the profile's memory) leave no room for a second.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use clap::Parser as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use tandem_adapter_core::JobKeys;

use crate::cluster::{Cluster, create_gpu_node, ensure_namespace, wait_for_binding};
use crate::extender::{
    NAMESPACE, SECRET_HEX, SYSTEM, TOKEN, annotation, job_pod, knowledge, start_adapter,
    tandem_event, wait_ready,
};

/// The profiler's recording, and the pod UIDs in it (replaced by the real pods' UIDs).
pub const RECORDING: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../profiler/testdata/two-jobs.jsonl"
);
/// The recorded pod of job alpha.
pub const RECORDED_ALPHA: &str = "aaaaaaaa-0000-4000-8000-00000000000a";
/// The recorded pod of job beta.
pub const RECORDED_BETA: &str = "bbbbbbbb-0000-4000-8000-00000000000b";

/// The profiler scenario against `cluster`, its adapter on `port`.
pub async fn scenario(cluster: &Cluster, port: u16, adapter_log: &Path) -> Result<()> {
    let dir = cluster.dir();
    std::fs::write(dir.join("id-secret"), SECRET_HEX)?;
    std::fs::write(dir.join("intake-token"), TOKEN)?;
    let keys = JobKeys::from_file(&dir.join("id-secret"))?;
    let client = cluster.client().await?;
    let (alpha, beta) = the_recorded_pods(cluster, &client).await?;
    let http = reqwest::Client::new();
    let mut adapter = start_adapter(cluster, port, adapter_log)?;
    wait_ready(&http, &mut adapter).await?;
    let before = knowledge(&http, &adapter.url).await?;

    // Without profiles, a second beta fits nowhere, and the pod's events say why.
    fits_nowhere_without_profiles(&client, job_pod("beta-early", "beta", None)?).await?;

    // The profiler on this node, replaying the recording of the two pods' processes.
    let replay = recording_for(dir, &alpha, &beta)?;
    let mut posted = profile_once(cluster, &adapter.url, &replay, "v100-p").await?;
    posted.sort_by_key(|(_, p)| p.mem_used_mib);
    for (job, profile) in &posted {
        println!("(profiler) posted {job}: {profile:?}");
    }
    ensure!(posted.len() == 2, "two profiles expected: {posted:?}");
    ensure!(
        posted[0].0 == keys.key(NAMESPACE, "alpha") && posted[1].0 == keys.key(NAMESPACE, "beta"),
        "the profiles should be alpha's and beta's, keyed as the adapter keys pods"
    );
    ensure!(posted[1].1.mem_used_mib == 11_000 && posted[1].1.gpu_model == "V100");
    let after = knowledge(&http, &adapter.url).await?;
    println!(
        "(intake) knowledge profiles: {} before the profiler, {} after",
        before["profiles"], after["profiles"]
    );
    ensure!(
        after["profiles"].as_u64() == before["profiles"].as_u64().map(|n| n + 2),
        "the intake did not file both profiles"
    );

    // With them, the next beta is placed: beside alpha, where its memory fits.
    the_next_beta_joins_alpha(&client, job_pod("beta-2", "beta", None)?).await?;
    ensure!(adapter.process.is_running(), "the adapter exited");
    Ok(())
}

/// Creates `pod` (`beta-2`, a pod of job `beta` for the scheduler under test) once both
/// profiles are known and checks where it goes: node `v100-p`, GPU 0 beside alpha (beta's
/// 11,000 MiB twice do not fit GPU 1).
pub async fn the_next_beta_joins_alpha(client: &kube::Client, pod: Pod) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    pods.create(&PostParams::default(), &pod).await?;
    let node = wait_for_binding(client, NAMESPACE, "beta-2", Duration::from_secs(30)).await;
    let bound = pods.get("beta-2").await?;
    println!(
        "(after) beta-2 was bound to {node:?}, GPU {:?}",
        annotation(&bound)
    );
    ensure!(node.as_deref() == Some("v100-p"), "beta-2 was not bound");
    ensure!(
        annotation(&bound).as_deref() == Some("v100-p/0"),
        "beta-2 should share GPU 0 with alpha (beta's 11,000 MiB twice do not fit GPU 1)"
    );
    Ok(())
}

/// The namespaces, node `v100-p` with two V100s, and the recording's two pods on it: a pod of
/// job `alpha` on GPU 0 and one of `beta` on GPU 1.
pub async fn the_recorded_pods(cluster: &Cluster, client: &kube::Client) -> Result<(Pod, Pod)> {
    ensure_namespace(client, NAMESPACE).await?;
    ensure_namespace(client, SYSTEM).await?;
    create_gpu_node(client, "v100-p", 2, "Tesla-V100-SXM2-16GB", 16_384).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let alpha = cluster
        .create_placed(
            &pods,
            &job_pod("alpha-1", "alpha", Some(("v100-p", "v100-p/0")))?,
        )
        .await?;
    let beta = cluster
        .create_placed(
            &pods,
            &job_pod("beta-1", "beta", Some(("v100-p", "v100-p/1")))?,
        )
        .await?;
    Ok((alpha, beta))
}

/// Creates `pod` (a second `beta`, before the profiler ran), checks that it fits nowhere with
/// the missing profile as the reason in its events, and deletes it.
pub async fn fits_nowhere_without_profiles(client: &kube::Client, pod: Pod) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let name = pod.metadata.name.clone().context("a pod without a name")?;
    pods.create(&PostParams::default(), &pod).await?;
    let unprofiled = tandem_event(client, &name).await?;
    println!("(before) {name}, no profiles yet: {unprofiled}");
    ensure!(
        unprofiled.contains("no known profile") || unprofiled.contains("has no profile"),
        "the reason should be the missing profile: {unprofiled}"
    );
    pods.delete(&name, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(())
}

/// The profiler's recording of two pods' processes, written in `dir` with the UIDs of `alpha`
/// and `beta` in place of the recorded ones: its path.
pub fn recording_for(dir: &Path, alpha: &Pod, beta: &Pod) -> Result<std::path::PathBuf> {
    let uid = |pod: &Pod| pod.metadata.uid.clone().context("a pod without a UID");
    let (alpha_uid, beta_uid) = (uid(alpha)?, uid(beta)?);
    let recording = std::fs::read_to_string(RECORDING)?
        .replace(RECORDED_ALPHA, &alpha_uid)
        .replace(
            &RECORDED_ALPHA.replace('-', "_"),
            &alpha_uid.replace('-', "_"),
        )
        .replace(RECORDED_BETA, &beta_uid)
        .replace(
            &RECORDED_BETA.replace('-', "_"),
            &beta_uid.replace('-', "_"),
        );
    let replay = dir.join("two-jobs.jsonl");
    std::fs::write(&replay, recording)?;
    Ok(replay)
}

/// One window of `tandem-profiler` on `node`, replaying `replay`, posting to the intake at
/// `intake` (an adapter's URL, or the framework plugin's intake): the profiles it posted.
pub async fn profile_once(
    cluster: &Cluster,
    intake: &str,
    replay: &Path,
    node: &str,
) -> Result<Vec<(String, tandem_api::Profile)>> {
    let dir = cluster.dir();
    let options = tandem_profiler::Options::try_parse_from([
        "tandem-profiler".as_ref(),
        "--replay".as_ref(),
        replay.as_os_str(),
        "--adapter".as_ref(),
        intake.as_ref(),
        "--intake-token-file".as_ref(),
        dir.join("intake-token").as_os_str(),
        "--id-secret-file".as_ref(),
        dir.join("id-secret").as_os_str(),
        "--node".as_ref(),
        node.as_ref(),
        "--kubeconfig".as_ref(),
        cluster.kubeconfig_path().as_os_str(),
        // The proc of this machine has no such pids: every process comes from the recording.
        "--proc".as_ref(),
        dir.as_os_str(),
    ] as [&std::ffi::OsStr; 15])?;
    let summary = tandem_profiler::run(options)
        .await
        .context("the profiler failed")?;
    Ok(summary
        .posted
        .iter()
        .map(|r| (r.job.clone(), r.profile.clone()))
        .collect())
}
