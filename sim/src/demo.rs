//! The built-in demo: what `tandem simulate` replays when given no inputs.
//!
//! The three Gavel catalogs (K80, P100 and V100 measurements), the demo trace (a Philly-derived
//! Gavel trace, see `sim/data/README.md`), the demo cluster (48 GPUs, 16 of each model) and
//! the models Gavel's job types declare (`data/utilization/gavel_models.csv`, from which the
//! engine predicts the utilization the utilization baselines pack by), all compiled into the
//! binary so the demo runs on a machine with nothing but the binary.

use tandem_catalog::{Catalog, Cluster, DeclaredModels, Trace};

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
const DECLARED_MODELS: &str = include_str!("../../data/utilization/gavel_models.csv");

/// Where the demo trace lives in the repository (its name in reports).
pub const TRACE_PATH: &str = "sim/data/demo-trace.csv";
/// Where the demo cluster lives in the repository.
pub const CLUSTER_PATH: &str = "sim/data/demo-cluster.csv";
/// Where the declared models of Gavel's job types live in the repository.
pub const DECLARED_MODELS_PATH: &str = "data/utilization/gavel_models.csv";

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

/// The models Gavel's job types declare: every job type of the demo's catalogs, summarized by
/// `tandem declare` from ONNX graphs of the networks Gavel trained.
pub fn declared_models() -> Result<DeclaredModels> {
    Ok(DeclaredModels::parse(
        DECLARED_MODELS,
        DECLARED_MODELS_PATH,
    )?)
}
