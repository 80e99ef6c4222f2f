//! What every Kubernetes front-end of Tandem shares: the kube-scheduler extender
//! (`tandem-kube-adapter`), the Volcano extender (`tandem-volcano-adapter`) and the
//! kube-scheduler framework plugin's library (`tandem-kube-capi`).
//!
//! On top of [`tandem_adapter_core`] (the engine, the knowledge base, the intake, the metrics),
//! this is the Kubernetes layer, laid out as a pod flows through it:
//!
//! - [`cluster`]: nodes and pods to the engine's GPUs and residents (pure); [`placement`]: the
//!   annotations a placement writes on a pod, signed, and which placements the view trusts;
//!   [`lean`] decodes pods with only the fields Tandem reads.
//! - [`decide`]: Tandem's decisions on nodes for a pod, which each front-end puts in its
//!   scheduler's words.
//! - [`app`]: a front-end's state (cluster view, placements not yet confirmed, declared
//!   models read, learning from finished pods) over the core; [`assumed`]: the placements
//!   the engine made before the watchers show them; [`runs`] reads pods as runs.
//! - [`watch`]: kube-rs watchers feeding the view and reporting finished pods; [`pushed`]: the
//!   cluster a scheduler pushes instead (kube-scheduler's informers, to the framework plugin).
//! - [`store`] and [`leader`]: the knowledge base in ConfigMaps, written by the Lease holder;
//!   [`follow`]: the election and the follower every front-end runs over them.
//! - [`intake`]: node profilers admitted by their projected service-account tokens (a
//!   `TokenReview`), each for its own node's pods.
//! - [`start`] ([`Options`]): the start-up every Kubernetes front-end shares — engine resumed
//!   or bootstrapped, store, watchers, election, follower — then [`Started::serve`] with the
//!   front-end's verbs.

pub mod app;
pub mod assumed;
pub mod cluster;
pub mod decide;
pub mod follow;
pub mod intake;
pub mod leader;
pub mod lean;
pub mod placement;
pub mod pushed;
pub mod runs;
pub mod store;
pub mod watch;

mod options;
mod start;

pub use options::Options;
pub use start::{Started, start};
