//! Measured ground truth for GPU co-location: the catalog format, its checks, and the converters
//! that build catalogs from public measurements.
//!
//! A [`Catalog`] lists GPU models, job types (each with its solo throughput or solo completion
//! time per GPU model and, where the source measured it, the black-box
//! [`Profile`](tandem_api::Profile) the engine would see) and measured pairs: for two job types
//! sharing one GPU of a model, each one's *speed*, its co-located throughput divided by its solo
//! throughput. The evaluation and the simulator look outcomes up here, so that quality is always
//! measured against numbers someone measured, never against numbers the engine produced.
//!
//! The catalogs in `data/catalogs/` are generated from the vendored sources in `data/` by
//! `cargo run -p tandem-catalog --bin tandem-catalog-convert` (see [`convert`]); a test checks
//! that the committed files equal a fresh conversion.
//!
//! ```no_run
//! use tandem_catalog::{Catalog, colocated_times, individual_slowdown};
//!
//! # fn main() -> Result<(), tandem_catalog::Error> {
//! let catalog = Catalog::read("data/catalogs/gavel-v100.json")?;
//! let a = "ResNet-18 (batch size 16)";
//! let b = "ResNet-50 (batch size 16)";
//! if let Some((speed_a, speed_b)) = catalog.pair("V100", a, b) {
//!     // Two jobs that would take 3600 s and 7200 s alone.
//!     let together = colocated_times([3600.0, 7200.0], [speed_a, speed_b]);
//!     println!("slowdown of {a}: {:.1}%", 100.0 * individual_slowdown(3600.0, together[0]));
//! }
//! # Ok(())
//! # }
//! ```

mod catalog;
pub mod convert;
mod definitions;
mod error;

pub use catalog::{Catalog, GpuModel, JobType, Pair};
pub use definitions::{colocated_times, individual_slowdown, packing_saving};
pub use error::{Error, Result};
