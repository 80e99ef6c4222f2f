//! Converters from the public co-location measurements vendored in `data/` to catalogs.
//!
//! - [`futurewei`]: the Futurewei mini-ML workload set (CentaurusInfra/alnair, Apache-2.0):
//!   twelve TensorFlow jobs on a Tesla P100, alone and in 34 measured pairs, with telemetry for
//!   the jobs that have a matching measured run; and the same jobs and pairs with every job's
//!   telemetry from the table the papers clustered (`futurewei-p100-profiled`).
//! - [`alnair_mps`]: the alnair packing study (PyTorch under NVIDIA MPS, GPU not stated):
//!   time per 10 steps alone and next to another job.
//! - [`gavel`]: Gavel's measured throughputs (stanford-futuredata/gavel, MIT) on K80, P100 and
//!   V100, alone and for every pair of single-GPU job types.
//! - [`schedtune`]: SchedTune's peak memory of 48 declared CNN jobs on five GPUs (MIT): memory
//!   only, for the simulator's OOM scenario.
//!
//! Each converter reads the text of its source files ([`Input`]) and returns a checked
//! [`Catalog`] whose `source` states the provenance and every assumption made.
//! [`convert_all`] runs them on the vendored files; [`write_all`] also writes
//! `data/catalogs/*.json` (what the `tandem-catalog-convert` binary does).

mod alnair_mps;
mod futurewei;
mod gavel;
mod input;
mod schedtune;
mod table;

use std::fs;
use std::path::{Path, PathBuf};

pub use alnair_mps::alnair_mps;
pub use futurewei::{ProfileJoin, futurewei};
pub use gavel::{GAVEL_GPUS, GavelGpu, gavel};
pub use input::Input;
pub use schedtune::schedtune;

use crate::catalog::Catalog;
use crate::error::{Error, Result};

/// A catalog produced by [`convert_all`], with the file name it is kept under.
#[derive(Debug, Clone)]
pub struct Converted {
    /// File name in `data/catalogs/`, such as `gavel-v100.json`.
    pub file_name: String,
    /// The catalog.
    pub catalog: Catalog,
}

/// An [`Input`] over a file read by [`convert_all`]: (origin, text).
fn input(file: &(String, String)) -> Input<'_> {
    Input {
        origin: &file.0,
        text: &file.1,
    }
}

/// Source files, relative to the data folder.
const FUTUREWEI_INDIVIDUAL: &str = "alnair/futurewei_tableII_individual_runtime.csv";
const FUTUREWEI_PAIRS: &str = "alnair/futurewei_tableIII_IV_pair_interference.csv";
const FUTUREWEI_WORKLOAD: &str = "alnair/futurewei_mini_ml_workload.csv";
const FUTUREWEI_CLUSTERING: &str = "alnair/futurewei_clustering_real_and_synthetic.csv";
const MPS_INDIVIDUAL: &str = "alnair/packing_individual.csv";
const MPS_PAIR_TIMES: &str = "alnair/packing_pair_time_per_10_steps_us.csv";
const MPS_SLOWDOWN: &str = "alnair/packing_pair_slowdown_ratio.csv";
const GAVEL_THROUGHPUTS: &str = "gavel/simulation_throughputs.json";
const SCHEDTUNE_STATS: &str = "schedtune/model_stats.csv";

/// Converts every vendored source under `data_dir` (the repository's `data/`) into the
/// catalogs kept in `data/catalogs/`, in a fixed order.
pub fn convert_all(data_dir: &Path) -> Result<Vec<Converted>> {
    let read = |relative: &str| -> Result<(String, String)> {
        let path = data_dir.join(relative);
        let text = fs::read_to_string(&path).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
        Ok((path.display().to_string(), text))
    };

    let mut converted = Vec::new();
    let individual = read(FUTUREWEI_INDIVIDUAL)?;
    let pairs = read(FUTUREWEI_PAIRS)?;
    let workload = read(FUTUREWEI_WORKLOAD)?;
    converted.push(Converted {
        file_name: "futurewei-p100.json".to_owned(),
        catalog: futurewei(
            input(&individual),
            input(&pairs),
            input(&workload),
            ProfileJoin::ModelBatchEpochs,
        )?,
    });
    let clustering = read(FUTUREWEI_CLUSTERING)?;
    converted.push(Converted {
        file_name: "futurewei-p100-profiled.json".to_owned(),
        catalog: futurewei(
            input(&individual),
            input(&pairs),
            input(&workload),
            ProfileJoin::Clustered(input(&clustering)),
        )?,
    });

    let individual = read(MPS_INDIVIDUAL)?;
    let pair_times = read(MPS_PAIR_TIMES)?;
    let slowdown = read(MPS_SLOWDOWN)?;
    converted.push(Converted {
        file_name: "alnair-mps.json".to_owned(),
        catalog: alnair_mps(input(&individual), input(&pair_times), input(&slowdown))?,
    });

    let throughputs = read(GAVEL_THROUGHPUTS)?;
    for gpu in &GAVEL_GPUS {
        let catalog = gavel(input(&throughputs), gpu)?;
        converted.push(Converted {
            file_name: format!("{}.json", catalog.name()),
            catalog,
        });
    }

    let stats = read(SCHEDTUNE_STATS)?;
    converted.push(Converted {
        file_name: "schedtune-memory.json".to_owned(),
        catalog: schedtune(input(&stats))?,
    });
    Ok(converted)
}

/// Converts every vendored source under `data_dir` and writes the catalogs into `out_dir`
/// (each atomically); returns the paths written.
pub fn write_all(data_dir: &Path, out_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for converted in convert_all(data_dir)? {
        let path = out_dir.join(&converted.file_name);
        converted.catalog.write(&path)?;
        written.push(path);
    }
    Ok(written)
}
