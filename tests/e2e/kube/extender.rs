//! Tandem inside a real kube-scheduler: the acceptance scenarios of the kube adapter.
//!
//! One control plane (etcd, kube-apiserver, kube-scheduler with Tandem as extender) and the
//! adapter binary as a separate process, then, in order:
//!
//! - (e) malformed extender requests get `400` with the bad field named, and the adapter stays up;
//! - the test, acting as a node profiler holding the cluster secret, posts keyed profiles and
//!   outcomes to the intake;
//! - (b)+(c) a pending pod with two candidate GPUs lands beside the co-runner the engine
//!   predicts it suffers least with, and the bind annotation names the GPU;
//! - (a) a pod whose memory fits no GPU stays unscheduled, the filter's reason in its events;
//! - (d) with the adapter killed, the scheduler keeps scheduling (ignorable extender, logged);
//!   restarted, the adapter resumes from the knowledge base stored in the cluster with nothing
//!   learned lost;
//! - finished pods become knowledge: two solo runs, then a pair that shared a GPU, give the
//!   engine one more outcome (the test writes the pods' statuses, as a kubelet would).

use std::path::PathBuf;

use anyhow::Result;

pub(crate) use tandem_e2e::intake::{
    Adapter, SECRET_HEX, TOKEN, knowledge, post, profile, wait_ready,
};

use crate::cluster::{Cluster, free_port, scheduler_config};
pub(crate) use tandem_e2e::extender::*;

#[tokio::test]
async fn tandem_decides_inside_a_real_kube_scheduler() -> Result<()> {
    crate::cluster::install_crypto_provider();
    let port = free_port()?;
    let cluster = Cluster::start(&scheduler_config(Some(port))).await?;
    let adapter_log: PathBuf = cluster.dir().join("adapter.log");
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
