//! Tandem inside kube-scheduler.
//!
//! `tandem-kube-adapter` is an HTTP [scheduler extender]: kube-scheduler asks it, for every pod
//! that requests a GPU resource Tandem manages, which nodes may take the pod (`filter`: the
//! engine's OOM guard and sharing cap), how good each is (`prioritize`: the engine's
//! interference-aware score) and lets it `bind` the pod, recording the chosen GPU on the pod.
//!
//! It is a front-end on [`tandem_adapter_core`], which holds the engine (on its own thread,
//! with the cluster view fed by deltas), the knowledge base, the intake and the metrics. What
//! is Kubernetes' lives here, laid out as a request flows:
//!
//! - [`http`]: the extender verbs (the core serves the rest).
//! - [`extender`]: the protocol's wire types and the decisions.
//! - [`app`]: the front-end's state — cluster view, bind assumptions, scores kept for
//!   `prioritize` — and its [`tandem_adapter_core::Frontend`] implementation.
//! - [`cluster`]: nodes and pods to the engine's GPUs and residents (pure).
//! - [`watch`]: kube-rs watchers feeding the view and reporting finished pods; [`lean`]
//!   decodes their pods (and the extender's) with only the fields Tandem reads.
//! - [`store`] and [`leader`]: the knowledge base in a ConfigMap, written by the Lease holder.
//!
//! [scheduler extender]: https://github.com/kubernetes/design-proposals-archive/blob/main/scheduling/scheduler_extender.md

pub mod app;
pub mod cluster;
pub mod extender;
pub mod http;
pub mod leader;
pub mod lean;
pub mod store;
pub mod watch;

mod options;
mod run;

pub use options::Options;
pub use run::{Started, run, start};
pub use tandem_adapter_core::{EMBEDDED_ENGINE, Shutdown};
