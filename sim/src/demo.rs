//! The built-in demo: what `tandem simulate` replays when given no inputs.
//!
//! The three Gavel catalogs (K80, P100 and V100 measurements), the demo trace (a Philly-derived
//! Gavel trace, see `sim/data/README.md`) and the demo cluster (48 GPUs, 16 of each model), all
//! compiled into the binary so the demo runs on a machine with nothing but the binary.

use tandem_catalog::{Catalog, Cluster, Trace};

use crate::error::Result;

const CATALOGS: [(&str, &str); 3] = [
    (
        "data/catalogs/gavel-k80.json",
        include_str!("../../data/catalogs/gavel-k80.json"),
    ),
    (
        "data/catalogs/gavel-p100.json",
        include_str!("../../data/catalogs/gavel-p100.json"),
    ),
    (
        "data/catalogs/gavel-v100.json",
        include_str!("../../data/catalogs/gavel-v100.json"),
    ),
];
const TRACE: &str = include_str!("../data/demo-trace.csv");
const CLUSTER: &str = include_str!("../data/demo-cluster.csv");

/// Where the demo trace lives in the repository (its name in reports).
pub const TRACE_PATH: &str = "sim/data/demo-trace.csv";
/// Where the demo cluster lives in the repository.
pub const CLUSTER_PATH: &str = "sim/data/demo-cluster.csv";

/// The demo's catalogs: Gavel's measurements on K80, P100 and V100.
pub fn catalogs() -> Result<Vec<Catalog>> {
    CATALOGS
        .iter()
        .map(|(path, text)| Ok(Catalog::parse(text, path)?))
        .collect()
}

/// The demo trace.
pub fn trace() -> Result<Trace> {
    Ok(Trace::parse(TRACE, TRACE_PATH)?)
}

/// The demo cluster.
pub fn cluster() -> Result<Cluster> {
    Ok(Cluster::parse(CLUSTER, CLUSTER_PATH)?)
}
