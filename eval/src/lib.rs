//! Tandem's evaluations: how good are the engine's decisions and predictions, judged on numbers
//! someone measured, never on numbers the engine produced. `tandem eval` is a thin front-end
//! over this crate; `docs/EVALUATION.md` is the protocol.
//!
//! - [`pairs`]: pairing quality on a measured catalog. Tandem runs **through the engine
//!   component** (a [`tandem_host::Runtime`] the caller loads, so the figures are those of the
//!   engine that ships), next to baselines and the oracle.
//! - [`memory`] and [`utilization`]: the engine's memory and utilization forests against
//!   simpler estimates, each measurement predicted by models trained without it. These
//!   cross-validate: they retrain the forests on every fold, and training on chosen rows is no
//!   part of the engine's WIT contract. So they run the engine's own code
//!   (`tandem_engine::memory`, `tandem_engine::utilization`, the source the component compiles)
//!   natively. The crate's tests (`tests/all/component.rs`) check that this measures what ships:
//!   the native bundled forests and the component's give the same estimate for every bundled
//!   measurement (memory peak and reservation to the MiB the WIT carries, utilization to the
//!   `f32` it carries), and the same guard margin.
//!
//! Tables for a person are in [`render`]; every report is also `serde::Serialize` for
//! `--format json`.

mod error;
mod folds;
pub mod memory;
pub mod pairs;
pub mod render;
pub mod utilization;

pub use error::{Error, Result};
