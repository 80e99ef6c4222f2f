//! Tandem inside kube-scheduler.
//!
//! `tandem-kube-adapter` is an HTTP [scheduler extender]: kube-scheduler asks it, for every pod
//! that requests a GPU resource Tandem manages, which nodes may take the pod (`filter`: the
//! engine's OOM guard and sharing cap), how good each is (`prioritize`: the engine's
//! interference-aware score) and lets it `bind` the pod, recording the chosen GPU on the pod.
//! The engine is the sandboxed WebAssembly component, embedded through `tandem-host`.
//!
//! The crate is laid out as the request flows:
//!
//! - [`http`]: the endpoints, limits and error answers.
//! - [`extender`]: the protocol's wire types and the three decisions.
//! - [`app`]: shared state — engine, cluster view, bind assumptions, observations.
//! - [`cluster`]: nodes and pods to the engine's GPUs and residents (pure).
//! - [`engine`]: the component behind a lock, with GPU-state deduplication.
//! - [`watch`]: kube-rs watchers feeding the view and reporting finished pods.
//! - [`outcomes`]: how a finished co-location becomes an outcome.
//! - [`store`] and [`leader`]: the knowledge base in a ConfigMap, written by the Lease holder.
//! - [`identity`]: keyed job ids; [`metrics`]: Prometheus.
//!
//! [scheduler extender]: https://github.com/kubernetes/design-proposals-archive/blob/main/scheduling/scheduler_extender.md

pub mod app;
pub mod cluster;
pub mod engine;
pub mod extender;
pub mod http;
pub mod identity;
pub mod leader;
pub mod metrics;
pub mod outcomes;
pub mod store;
pub mod watch;

mod options;
mod run;

pub use options::Options;
pub use run::{EMBEDDED_ENGINE, run, serve_fixed};

/// A signal that the process is shutting down, cheap to clone and wait on.
#[derive(Debug, Clone)]
pub struct Shutdown(tokio::sync::watch::Receiver<bool>);

impl Shutdown {
    /// A shutdown signal and the switch that triggers it.
    pub fn new() -> (tokio::sync::watch::Sender<bool>, Self) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (tx, Self(rx))
    }

    /// Waits until shutdown is triggered (or its switch is dropped).
    pub async fn wait(&mut self) {
        let _ = self.0.wait_for(|down| *down).await;
    }
}
