//! Tandem's home for public data: the measured ground truth of GPU co-location (the catalog
//! format and its checks), the simulator's input formats (job traces and cluster files), and
//! every converter that builds them from the public sources vendored in `data/`.
//!
//! A [`Catalog`] lists GPU models, job types (each with its solo throughput or solo completion
//! time per GPU model and, where the source measured it, the black-box
//! [`Profile`](tandem_api::Profile) the engine would see) and measured pairs: for two job types
//! sharing one GPU of a model, each one's *speed*, its co-located throughput divided by its solo
//! throughput. A pair the catalog does not list cannot share a GPU, unless the catalog says
//! otherwise ([`UnmeasuredPairs`]: a source that measured memory alone time-slices them). The evaluation and the simulator look outcomes up here, so that quality is always
//! measured against numbers someone measured, never against numbers the engine produced.
//!
//! The catalogs in `data/catalogs/` are generated from the vendored sources in `data/` by
//! `cargo run -p tandem-catalog --bin tandem-catalog-convert` (see [`convert::catalogs`]); a
//! test checks that the committed files equal a fresh conversion. A [`Trace`] (jobs in arrival
//! order) and a [`Cluster`] (groups of identical GPU nodes) are what the simulator replays;
//! [`convert::traces`] builds them from Gavel's and Alibaba's public traces, or generates one.
//! [`DeclaredModels`] gives job types the models their users declare, from which the engine
//! predicts the utilization the simulator's utilization baselines pack by.
//!
//! **Where a new data set goes:** its files in `data/<source>/`, its converter in
//! `catalog/src/convert/catalogs/` (co-location measurements) or `catalog/src/convert/traces/`
//! (job arrivals, cluster shapes); [`convert`] lists the steps.
//!
//! Modules point one way: [`error`](Error) and [`definitions`](colocated_times) are leaves;
//! the formats ([`Catalog`], [`trace`], [`cluster`], [`declared`]) import only them; the converters import
//! the formats; nothing imports a converter but this root's re-exports.
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
pub mod cluster;
pub mod convert;
mod csv_input;
pub mod declared;
mod definitions;
mod error;
pub mod trace;

pub use catalog::{Catalog, GpuModel, JobType, Pair, UnmeasuredPairs};
pub use cluster::{Cluster, GpuSlot, NodeGroup};
pub use declared::{DeclaredModel, DeclaredModels};
pub use definitions::{colocated_times, individual_slowdown, packing_saving};
pub use error::{Error, Result};
pub use trace::{Trace, TraceJob};
