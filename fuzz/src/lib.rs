//! `tandem-fuzz`: what Tandem's fuzz targets do with an input, as a library.
//!
//! Each module is one target: its `run` feeds one input to a parser (and checks what the
//! parser promises: an error names its input, what is written back reads back the same, …).
//! Two drivers call them:
//!
//! - `cargo xtask fuzz` builds the binaries of `targets/` (feature `libfuzzer`) with coverage
//!   instrumentation, and libFuzzer explores;
//! - the ordinary test build replays every target's seeds and the corpus earlier fuzzing
//!   kept (`tests/replay.rs`), so `cargo xtask test` checks each known input without the
//!   instrumented build.

pub mod catalog;
pub mod cluster;
pub mod contract;
pub mod extender;
pub mod intake;
pub mod kb;
pub mod node;
pub mod onnx;
pub mod queue;
pub mod slurm;
pub mod snapshot;
pub mod summary;
pub mod trace;

/// What a target does with one input.
pub type Run = fn(&[u8]);

/// Every target by name (the names of `cargo xtask fuzz`).
pub const TARGETS: &[(&str, Run)] = &[
    ("catalog", catalog::run as Run),
    ("trace", trace::run as Run),
    ("cluster", cluster::run as Run),
    ("onnx", onnx::run as Run),
    ("summary", summary::run as Run),
    ("snapshot", snapshot::run as Run),
    ("contract", contract::run as Run),
    ("extender", extender::run as Run),
    ("intake", intake::run as Run),
    ("slurm", slurm::run as Run),
    ("queue", queue::run as Run),
    ("kb", kb::run as Run),
    ("node", node::run as Run),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Run> {
    TARGETS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, run)| *run)
}
