//! Tandem inside Volcano.
//!
//! `tandem-volcano-adapter` answers the verbs of vc-scheduler's `extender` plugin (Volcano
//! v1.15.1; wire format in [`wire`]) with the engine's decisions: `predicate` (the engine's
//! OOM guard and sharing cap, once per task and node, answered from a per-task cache in
//! microseconds), `prioritize` (the engine's interference-aware score, weighted to sit among
//! Volcano's node-order plugins), `allocate`/`deallocate` (the chosen GPU recorded in the
//! engine at once and written on the pod as `tandem.dev/gpu`), and `onSessionOpen`/
//! `onSessionClose` (the session's gang sizes; caches). Gang members and multi-GPU tasks never
//! share a GPU.
//!
//! It is a thin front-end: the engine, knowledge base, intake and metrics are
//! [`tandem_adapter_core`]'s, and the Kubernetes side (watchers of Nodes and Pods, the GPU
//! annotation, the knowledge base in a ConfigMap written by the Lease holder) is
//! [`tandem_kube_common`]'s (as it is the kube-scheduler extender's), started by
//! [`tandem_kube_common::start`]. So a cluster that runs
//! both kube-scheduler's and Volcano's adapter keeps one knowledge base: the same ConfigMap,
//! one writer elected by the same Lease, the same identities of jobs.
//!
//! - [`wire`]: Volcano's request and response types.
//! - [`frontend`]: the front-end's state (session, caches, placements) and its decisions, made through `tandem_kube_common::decide`.
//! - [`http`]: the verbs as routes.
//!
//! **Failing open.** With `extender.ignorable: true` (deploy/helm/tandem/files/volcano-scheduler.conf)
//! vc-scheduler passes every node and ignores scores while the adapter is unreachable; the
//! adapter itself fails open when its engine fails or is late (see [`http`]). Either way tasks
//! keep being scheduled, without Tandem's GPU record (counted as
//! `tandem_binds_without_tandem_total` once the watcher sees them bound).

pub mod frontend;
pub mod http;
pub mod wire;

mod options;

use std::sync::Arc;

pub use frontend::Volcano;
pub use options::Options;

/// Runs the adapter until SIGTERM or Ctrl-C.
pub async fn run(options: Options) -> anyhow::Result<()> {
    let started = tandem_kube_common::start(&options.kube).await?;
    let volcano = Arc::new(Volcano::new(Arc::clone(&started.app), options.score_weight));
    started.serve(volcano).await
}
