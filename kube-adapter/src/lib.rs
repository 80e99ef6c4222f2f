//! Tandem inside kube-scheduler.
//!
//! `tandem-kube-adapter` is an HTTP [scheduler extender]: kube-scheduler asks it, for every pod
//! that requests a GPU resource Tandem manages, which nodes may take the pod (`filter`: the
//! engine's OOM guard and sharing cap), how good each is (`prioritize`: the engine's
//! interference-aware score) and lets it `bind` the pod, recording the chosen GPU on the pod.
//!
//! It is a front-end on [`tandem_adapter_core`], which holds the engine (on its own thread,
//! with the cluster view fed by deltas), the knowledge base, the intake and the metrics, and on
//! [`tandem_kube_common`], which holds what every Kubernetes front-end shares (the cluster view,
//! the watchers, the ConfigMap store, the election and the decisions). What is the extender's
//! alone lives here, laid out as a request flows:
//!
//! - [`http`]: the extender verbs (the core serves the rest).
//! - [`extender`]: the protocol's wire types.
//! - [`frontend`]: the extender's state beside the shared one (which nodes `filter` passes, the
//!   scores kept for `prioritize`) and its [`tandem_adapter_core::Frontend`] implementation.
//!
//! [scheduler extender]: https://github.com/kubernetes/design-proposals-archive/blob/main/scheduling/scheduler_extender.md

pub mod extender;
pub mod frontend;
pub mod http;

mod options;

use std::sync::Arc;

pub use frontend::Extender;
pub use options::Options;
pub use tandem_adapter_core::{EMBEDDED_ENGINE, Shutdown};

/// Runs the kube-scheduler extender until SIGTERM or Ctrl-C.
pub async fn run(options: Options) -> anyhow::Result<()> {
    let started = tandem_kube_common::start(&options.kube).await?;
    let extender = Arc::new(Extender::new(
        Arc::clone(&started.app),
        options.filter_passes,
    ));
    started.serve(extender).await
}
