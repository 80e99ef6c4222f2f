//! Every converter of public data, in one place: [`catalogs`] turns measured co-location data
//! into catalogs, [`traces`] turns job-arrival traces into the simulator's trace and cluster
//! files.
//!
//! # Adding a data set
//!
//! 1. Vendor its files, unmodified, under `data/<source>/` with the source's licence, and add
//!    a section to `data/README.md` (origin, licence, what changed).
//! 2. Write its converter here, next to its kind: measured co-locations (solo and paired
//!    throughputs or times, memory) in `catalogs/<source>.rs`, returning a
//!    [`Catalog`](crate::Catalog), and listed in [`convert_all`] so `tandem-catalog-convert`
//!    writes `data/catalogs/<source>.json`; job arrivals or cluster shapes in `traces/<source>.rs`,
//!    returning a [`Trace`](crate::Trace) or [`Cluster`](crate::Cluster) (the `tandem trace`
//!    command is the entry that runs those).
//! 3. Add a test that the committed output equals a fresh conversion, as the existing ones do.
//!
//! Imports point one way: the helpers converters share live in leaf modules
//! (`catalogs::input`, `catalogs::table`, `traces::edit`, `traces::draw`), so no converter
//! imports a module that imports it back.

pub mod catalogs;
pub mod traces;

pub use catalogs::{
    Converted, GAVEL_GPUS, GavelGpu, Input, ProfileJoin, alnair_mps, convert_all, futurewei, gavel,
    schedtune, write_all,
};
