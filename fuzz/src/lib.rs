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

/// Every target by name (the names of `cargo xtask fuzz`).
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("catalog", catalog::run as fn(&[u8])),
    ("trace", trace::run as fn(&[u8])),
    ("cluster", cluster::run as fn(&[u8])),
    ("onnx", onnx::run as fn(&[u8])),
    ("summary", summary::run as fn(&[u8])),
    ("snapshot", snapshot::run as fn(&[u8])),
    ("contract", contract::run as fn(&[u8])),
    ("extender", extender::run as fn(&[u8])),
    ("intake", intake::run as fn(&[u8])),
    ("slurm", slurm::run as fn(&[u8])),
    ("queue", queue::run as fn(&[u8])),
    ("kb", kb::run as fn(&[u8])),
    ("node", node::run as fn(&[u8])),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, run)| *run)
}
