//! What a pod tells Tandem in its annotations, and what the cluster teaches it back
//! (docs/DECLARING.md), through the extender inside a real kube-scheduler.
//!
//! Nodes `t4-a`, `t4-b` (Tesla T4, 15,360 MiB, $0.35 an hour) and `a100-a`, `a100-b` (A100,
//! 40,960 MiB, $3.00 an hour), one GPU each; the adapter is given the prices. In order:
//!
//! - a pod declaring VGG-19 at batch 256 (`tandem.dev/model`, a summary inline) lands on an
//!   A100: the memory the engine predicts for it, shown, fits only there;
//! - a pod declaring `tandem.dev/model: resnet50` (neither a summary nor a reference) stays
//!   pending, its events naming the annotation and the value, and the refusal is counted;
//! - pods declaring the same work (`tandem.dev/work`, with reference speeds on both models):
//!   `tandem.dev/priority: cost` lands on a T4 (four times slower, nine times cheaper),
//!   `latency` on an A100;
//! - the node profiler (`tandem-profiler`, replaying a recording of the pod's process) reports
//!   the peak of a declared VGG-19 at batch 64 on a T4 above what the memory model predicted:
//!   the prediction moves toward it (before and after shown, the
//!   refit timed), the guard no longer fits the model on a T4, and the next such pod goes to
//!   an A100;
//! - finished runs of one job on a T4 and on an A100 teach its speeds;
//! - restarted, the adapter still knows what it learned (`GET /v1/knowledge`, per GPU model).

use anyhow::Result;

use crate::cluster::{Cluster, free_port, scheduler_config};
pub(crate) use tandem_e2e::scenarios::declaring::*;

#[tokio::test]
async fn declarations_steer_placement_and_the_cluster_teaches_memory_and_speed() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let port = free_port()?;
    let cluster = Cluster::start(&scheduler_config(Some(port))).await?;
    let adapter_log = cluster.dir().join("adapter.log");
    let result = scenario(&cluster, port, &adapter_log).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!(
            "--- adapter ---\n{}",
            crate::cluster::tail(&adapter_log, 60)
        );
    }
    result
}
