//! Tandem inside a real vc-scheduler: the acceptance scenarios of the Volcano adapter.
//!
//! One control plane with Volcano's CRDs, vc-scheduler configured as
//! deploy/helm/tandem/files/volcano-scheduler.conf configures it (the extender `ignorable`), and the
//! adapter as a separate process; then, in order, each scenario on nodes of its own (pods
//! select them by label):
//!
//! - (f) malformed verb bodies get `400` with the field named, and the adapter stays up;
//! - the test, acting as a node profiler holding the cluster secret, posts keyed profiles and
//!   outcomes to the intake;
//! - (b)+(c) a task with two candidate GPUs lands beside the co-runner the engine predicts it
//!   suffers least with (both predictions printed), and the pod's annotation names the GPU;
//! - (a) a task whose memory fits no GPU stays Pending, Tandem's reason in its PodGroup's
//!   condition or events;
//! - (e) a gang of two one-GPU tasks lands on two different idle GPUs, not beside a co-runner;
//! - (d) with the adapter killed, vc-scheduler keeps scheduling (`ignorable: true`); restarted,
//!   the adapter resumes from the knowledge base stored in the cluster with nothing lost;
//! - (g) what pods declare (docs/DECLARING.md), on a T4 node and an A100 node: a task
//!   declaring VGG-19 at batch 256 (`tandem.dev/model`) lands on the A100, the only GPU its
//!   predicted memory fits; `tandem.dev/model: resnet50` is refused, the annotation and value
//!   in the PodGroup's condition or events; `tandem.dev/priority: cost` on a pod goes to the
//!   cheaper T4 and `latency` on a PodGroup (its pod declaring nothing) to the faster A100
//!   (prices from `--gpu-price`);
//! - (r) every placement allocate writes is signed for its pod (checked as a node checks it);
//!   the pod's owner re-patching it breaks the signature, and the view no longer counts the pod
//!   where the re-patch says.

use std::path::PathBuf;

use anyhow::Result;
use tandem_xtask::volcano::VolcanoBuild;

use crate::cluster::{Cluster, free_port, tail};
use tandem_e2e::cluster;
use tandem_e2e::volcano::*;

#[tokio::test]
async fn tandem_decides_inside_a_real_vc_scheduler() -> Result<()> {
    cluster::install_crypto_provider();
    let root = tandem_e2e::root();
    let build = tokio::task::spawn_blocking(move || VolcanoBuild::from_env(&root)).await??;
    let port = free_port()?;
    let cluster = Cluster::start_control_plane().await?;
    let adapter_log: PathBuf = cluster.dir().join("adapter.log");
    let mut scheduler = None;
    let result = scenario(&cluster, &build, port, &adapter_log, &mut scheduler).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        // vc-scheduler logs its configuration at every session (each second): leave those
        // lines out, or they are all the tail shows.
        let scheduler_log =
            std::fs::read_to_string(cluster.dir().join("vc-scheduler.log")).unwrap_or_default();
        let lines: Vec<&str> = scheduler_log
            .lines()
            .filter(|l| !l.contains("Finished loading scheduler config"))
            .collect();
        eprintln!(
            "--- vc-scheduler ---\n{}",
            lines[lines.len().saturating_sub(80)..].join("\n")
        );
        eprintln!("--- adapter ---\n{}", tail(&adapter_log, 60));
        let restarted = cluster.dir().join("adapter-2.log");
        if restarted.exists() {
            eprintln!("--- adapter, restarted ---\n{}", tail(&restarted, 60));
        }
    }
    drop(scheduler);
    result
}
