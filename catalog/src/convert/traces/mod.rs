//! Converters from public job traces (and a generator) to the simulator's input formats,
//! [`Trace`](crate::Trace) and [`Cluster`](crate::Cluster).
//!
//! - [`gavel`]: Gavel's Philly-derived job traces, whose job types and step counts are those of
//!   the Gavel catalogs, so they convert one to one ([`gavel_trace`]; several merged into one
//!   by [`gavel_traces`], the 15,264-job benchmark).
//! - [`alibaba`]: Alibaba's cluster-trace-gpu-v2023: its node list becomes a cluster of the
//!   GPU models the catalogs measured ([`alibaba_cluster`]); its pod list a trace whose
//!   pods get a job type drawn from the catalogs and their observed run time as work
//!   ([`alibaba_trace`], then [`scale_to_steps`]).
//! - [`synthetic`]: Poisson arrivals of a weighted job mix ([`synthetic_trace`]), for loads and
//!   mixes no recorded trace has.
//!
//! Conventions shared by all three: converted traces satisfy every rule of the trace format (sorted
//! arrivals, positive work, at least one GPU), so [`Trace::to_csv`](crate::Trace::to_csv) writes a
//! file that [`Trace::parse`](crate::Trace::parse) reads back unchanged. A job's `lines` entry is
//! its line in the source file when it has one (a Gavel line, an Alibaba pod), so errors about it
//! point there; otherwise (merged or generated traces, clusters built from groups of nodes) it is
//! the job's row in the result's own CSV form. Every random draw is seeded, so a seed names one
//! result.
//!
//! [`edit`] holds what every converted trace may go through after conversion (a rescaled
//! clock, the first jobs only, no jobs above a length). The demo inputs in `sim/data/` are made
//! here too ([`demo`]: [`demo_trace`], [`demo_cluster`]); a test fails if the committed files
//! differ from a fresh conversion.
//!
//! This module only declares and re-exports; shared helpers live in leaf modules ([`edit`],
//! `draw`), so no converter imports a module that imports it back.

pub mod alibaba;
pub mod demo;
mod draw;
pub mod edit;
pub mod gavel;
pub mod synthetic;

pub use alibaba::{
    AlibabaClusterSummary, AlibabaTraceSummary, ModelTally, alibaba_cluster, alibaba_trace,
    catalog_model, scale_to_steps,
};
pub use demo::{DEMO_MAX_SOLO_S, DEMO_SOURCE, DEMO_TIME_SCALE, demo_cluster, demo_trace};
pub use edit::{keep_shorter_than, rescale, take_first};
pub use gavel::{gavel_trace, gavel_traces};
pub use synthetic::{SyntheticSpec, synthetic_trace};
