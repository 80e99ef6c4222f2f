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

use anyhow::Result;

use crate::cluster::{Cluster, free_port, scheduler_config};
pub(crate) use tandem_e2e::scenarios::profiler::*;

#[tokio::test]
async fn profiles_from_the_node_profiler_decide_where_a_pod_goes() -> Result<()> {
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
