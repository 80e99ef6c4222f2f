//! A forged placement against the real extender: a pod whose owner bound it to a node himself
//! (`spec.nodeName`), requesting one GPU and naming all four of the node's GPUs in Tandem's
//! annotation, without Tandem's signature.
//!
//! The extender's view must count the forger as a pod bound without Tandem's record (on one
//! GPU, the emptiest, for the one GPU it requests), not on the four it names: three more
//! one-GPU pods then bind beside it, each with a placement signed for its own UID that verifies
//! with the cluster's public key; a fourth finds no idle GPU (the forger still holds one).
//! Trusting the annotation, the node would look full and none would bind.

use anyhow::Result;

use crate::cluster::{Cluster, free_port, scheduler_config};
pub(crate) use tandem_e2e::scenarios::placement::*;

#[tokio::test]
async fn a_forged_placement_is_not_counted_on_the_gpus_it_names() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let port = free_port()?;
    let cluster = Cluster::start(&scheduler_config(Some(port))).await?;
    let log = cluster.dir().join("placement-adapter.log");
    let result = scenario(&cluster, port, &log).await;
    if result.is_err() {
        eprintln!("{}", cluster.log_tails());
        eprintln!("--- adapter ---\n{}", crate::cluster::tail(&log, 60));
    }
    result
}
