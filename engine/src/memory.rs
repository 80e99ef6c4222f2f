//! Peak memory of a declared job on a GPU model it has not run on (SchedTune).
//!
//! A job that declares its model ([`ModelSummary`]) gets a memory prediction for every GPU
//! model before it ever runs: a random forest over the model's characteristics (parameters,
//! activations of one batch, input batch, batch size) and the GPU's (CUDA cores, memory
//! bandwidth, memory clock, tensor cores, SM count), trained on SchedTune's measurements
//! (12 CNNs × 4 batch sizes × 5 GPUs, bundled) and retrained on every peak the host reports
//! ([`crate::Recommender::observe_memory`]).
//!
//! The forest predicts the overhead: the peak minus the model's own footprint (parameters +
//! activations + input, what a Torchinfo-style summary adds up), that is what the CUDA
//! context, the framework's workspaces and the optimizer state add. The overhead varies far
//! less across models than the peak, so the forest, which cannot extrapolate, carries over to
//! models larger than any it was trained on (on the bundled data, predicting the peak itself,
//! its logarithm or its ratio to the footprint all did worse held out; `tandem eval memory`).
//!
//! The guard never trusts a bare prediction: it reserves the prediction plus a margin, the
//! largest relative under-prediction the forest made on held-out data when it was trained
//! (each GPU model of the training set held out in turn, so the margin covers a GPU the forest
//! never saw).

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use tandem_api::{GpuSpec, ModelSummary};

pub use crate::forest::held_out;
use crate::forest::{self, Regressor, index_of};

/// SchedTune's measurements (MIT, see `data/LICENSE-schedtune`).
const SCHEDTUNE_CSV: &str = include_str!("../data/schedtune_model_stats.csv");

/// Fewest rows a forest is trained on; fewer cannot hold anything out.
const MIN_ROWS: usize = 8;

/// Number of features a row has, in the order of [`Row::features`].
pub const FEATURES: usize = 9;

/// Names of the features, in the order of [`Row::features`], for reports.
pub const FEATURE_NAMES: [&str; FEATURES] = [
    "parameters MiB",
    "activations MiB",
    "input MiB",
    "batch size",
    "CUDA cores",
    "memory bandwidth GB/s",
    "memory clock MHz",
    "tensor cores",
    "SM count",
];

/// What memory prediction needs to know about a GPU model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GpuTraits {
    /// CUDA cores.
    pub cuda_cores: f64,
    /// Memory bandwidth, GB/s.
    pub bandwidth_gbps: f64,
    /// Memory clock, MHz (effective, as vendors list it).
    pub mem_clock_mhz: f64,
    /// Tensor cores (0 before Volta).
    pub tensor_cores: f64,
    /// Streaming multiprocessors.
    pub sm_count: f64,
}

/// Public specifications of common data-centre and workstation GPUs, for hosts that know only a
/// GPU's name: `(name as matched, memory MiB, traits)`. Names are matched on the normalized
/// model (see [`known_gpu`]), longest first so `A100` is not taken for `A10`. The first five are
/// the GPUs of SchedTune's measurements, with the figures its table lists.
const KNOWN_GPUS: [(&str, u32, GpuTraits); 10] = [
    ("RTX3090", 24_576, traits(10_496, 935.8, 19_495, 328, 82)),
    ("RTX3070", 8_192, traits(5_888, 512.0, 16_000, 184, 46)),
    ("RTX2070S", 8_192, traits(2_560, 448.0, 14_000, 320, 40)),
    ("V100", 16_384, traits(5_120, 900.0, 1_752, 640, 80)),
    ("K80", 11_441, traits(2_496, 240.6, 5_012, 0, 13)),
    ("A100", 40_960, traits(6_912, 1_555.0, 2_430, 432, 108)),
    ("H100", 81_920, traits(16_896, 3_350.0, 5_230, 528, 132)),
    ("P100", 16_384, traits(3_584, 732.0, 1_430, 0, 56)),
    ("A10", 24_576, traits(9_216, 600.0, 12_500, 288, 72)),
    ("T4", 15_360, traits(2_560, 320.0, 10_000, 320, 40)),
];

const fn traits(cores: u32, bandwidth: f64, clock: u32, tensor: u32, sms: u32) -> GpuTraits {
    GpuTraits {
        cuda_cores: cores as f64,
        bandwidth_gbps: bandwidth,
        mem_clock_mhz: clock as f64,
        tensor_cores: tensor as f64,
        sm_count: sms as f64,
    }
}

/// The traits of a well-known GPU model named `model` (`Tesla V100-SXM2-16GB`, `v100`,
/// `GeForce RTX 3090` all match), if it is one.
pub fn known_gpu(model: &str) -> Option<GpuTraits> {
    let normalized: String = model
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_uppercase()
        .replace("SUPER", "S");
    let mut known: Vec<&(&str, u32, GpuTraits)> = KNOWN_GPUS.iter().collect();
    known.sort_by_key(|(name, _, _)| std::cmp::Reverse(name.len()));
    known
        .into_iter()
        .find(|(name, _, _)| normalized.contains(name))
        .map(|&(_, _, traits)| traits)
}

impl GpuTraits {
    /// The traits of `spec`: its own figures where the host gave all five, else those of the
    /// well-known model its name matches; `None` when neither is available.
    pub fn of(spec: &GpuSpec) -> Option<Self> {
        match (
            spec.cuda_cores,
            spec.mem_bandwidth_gbps,
            spec.mem_clock_mhz,
            spec.tensor_cores,
            spec.sm_count,
        ) {
            (Some(cores), Some(bandwidth), Some(clock), Some(tensor), Some(sms)) => Some(Self {
                cuda_cores: f64::from(cores),
                bandwidth_gbps: f64::from(bandwidth),
                mem_clock_mhz: f64::from(clock),
                tensor_cores: f64::from(tensor),
                sm_count: f64::from(sms),
            }),
            _ => known_gpu(&spec.model),
        }
    }
}

/// One measured peak: a model's characteristics, the GPU's, and the peak memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Parameters, MiB.
    pub params_mib: f64,
    /// Activations of one batch, MiB.
    pub activations_mib: f64,
    /// One input batch, MiB.
    pub input_mib: f64,
    /// Batch size.
    pub batch_size: f64,
    /// The GPU.
    pub gpu: GpuTraits,
    /// Peak device memory measured, MiB.
    pub peak_mib: f64,
}

impl Row {
    /// A row for a declared model on a GPU, with the peak still to measure (0).
    pub fn declared(summary: &ModelSummary, gpu: GpuTraits) -> Self {
        Self {
            params_mib: f64::from(summary.params_mib),
            activations_mib: f64::from(summary.activations_mib),
            input_mib: f64::from(summary.input_mib),
            batch_size: f64::from(summary.batch_size),
            gpu,
            peak_mib: 0.0,
        }
    }

    /// The features, in the order of [`FEATURE_NAMES`].
    pub fn features(&self) -> [f64; FEATURES] {
        [
            self.params_mib,
            self.activations_mib,
            self.input_mib,
            self.batch_size,
            self.gpu.cuda_cores,
            self.gpu.bandwidth_gbps,
            self.gpu.mem_clock_mhz,
            self.gpu.tensor_cores,
            self.gpu.sm_count,
        ]
    }

    /// What a Torchinfo-style summary estimates: parameters + activations + input, MiB.
    pub fn footprint_mib(&self) -> f64 {
        self.params_mib + self.activations_mib + self.input_mib
    }
}

/// A bundled measurement with the labels evaluations split on (indices, never names: the
/// engine has no use for them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Labelled {
    /// The measurement.
    pub row: Row,
    /// Which of the measured networks it is, 0-based in order of first appearance.
    pub network: usize,
    /// Which of the measured GPUs it is, 0-based in order of first appearance.
    pub gpu: usize,
}

/// SchedTune's 240 measurements, in file order.
pub fn bundled() -> Vec<Labelled> {
    let mut networks: Vec<&str> = Vec::new();
    let mut gpus: Vec<[u64; FEATURES - 4]> = Vec::new();
    let mut rows = Vec::new();
    for line in SCHEDTUNE_CSV
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.split(',').collect();
        // The bundled file is fixed and checked by a test; a malformed line is a build error.
        let number = |i: usize| -> f64 { fields[i].trim().parse().unwrap_or(f64::NAN) };
        let row = Row {
            batch_size: number(1),
            activations_mib: number(2),
            params_mib: number(3),
            input_mib: number(4),
            peak_mib: number(5),
            gpu: GpuTraits {
                cuda_cores: number(6),
                bandwidth_gbps: number(7),
                mem_clock_mhz: number(8),
                tensor_cores: number(9),
                sm_count: number(10),
            },
        };
        let network = index_of(&mut networks, fields[0]);
        let gpu = index_of(&mut gpus, gpu_key(&row));
        rows.push(Labelled { row, network, gpu });
    }
    rows
}

/// Bit patterns of a row's GPU traits: rows on one GPU share them exactly.
fn gpu_key(row: &Row) -> [u64; FEATURES - 4] {
    let f = row.features();
    [f[4], f[5], f[6], f[7], f[8]].map(f64::to_bits)
}

/// Why a forest could not be trained.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MemoryError {
    /// Too few rows, or rows that are not finite and positive.
    #[error("cannot train the memory model: {0}")]
    Training(String),
}

/// A random forest predicting a model's peak memory on a GPU.
#[derive(Debug)]
pub struct Forest {
    inner: Regressor<FEATURES>,
}

impl Forest {
    /// Trains a forest on `rows` (at least 8, every figure finite, footprints positive).
    pub fn fit(rows: &[Row]) -> Result<Self, MemoryError> {
        if rows.len() < MIN_ROWS {
            return Err(MemoryError::Training(format!(
                "{} rows, at least {MIN_ROWS} are needed",
                rows.len()
            )));
        }
        if let Some(bad) = rows.iter().position(|r| {
            !(r.footprint_mib() > 0.0 && r.peak_mib > 0.0)
                || r.features().iter().any(|x| !x.is_finite())
        }) {
            return Err(MemoryError::Training(format!(
                "row {bad} is not finite and positive"
            )));
        }
        let x: Vec<_> = rows.iter().map(Row::features).collect();
        // The overhead over the footprint (module docs).
        let y: Vec<f64> = rows
            .iter()
            .map(|r| r.peak_mib - r.footprint_mib())
            .collect();
        let inner = Regressor::fit(&x, y).map_err(MemoryError::Training)?;
        Ok(Self { inner })
    }

    /// Predicted peak memory of each row, MiB.
    pub fn predict(&self, rows: &[Row]) -> Vec<f64> {
        let x: Vec<_> = rows.iter().map(Row::features).collect();
        rows.iter()
            .zip(self.inner.predict(&x))
            .map(|(row, overhead)| row.footprint_mib() + overhead)
            .collect()
    }
}

/// Groups row indices by GPU (rows with identical traits), in order of first appearance.
pub fn by_gpu(rows: &[Row]) -> Vec<Vec<usize>> {
    forest::groups(rows.iter().map(gpu_key))
}

/// The guard's margin for a forest trained on `rows`: the largest relative under-prediction
/// (`true / predicted - 1`, at least 0) on held-out data, each GPU held out in turn (a single GPU
/// in the rows: five random folds instead).
pub fn margin(rows: &[Row]) -> Result<f64, MemoryError> {
    let mut folds = by_gpu(rows);
    if folds.len() < 2 {
        folds = (0..5)
            .map(|k| (k..rows.len()).step_by(5).collect())
            .collect();
    }
    let predictions = held_out(rows, &folds, Forest::fit, Forest::predict)?;
    Ok(rows
        .iter()
        .zip(predictions)
        .map(|(row, predicted)| row.peak_mib / predicted - 1.0)
        .filter(|e| e.is_finite())
        .fold(0.0, f64::max))
}

/// What the guard expects of a declared job on one GPU model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryEstimate {
    /// Predicted peak, MiB.
    pub peak_mib: f64,
    /// What the guard reserves: the peak plus the margin, MiB.
    pub reserved_mib: f64,
}

/// Model characteristics among [`Row::features`]: parameters, activations, input, batch size.
const MODEL_FEATURES: usize = 4;

/// A trained forest with its guard margin.
#[derive(Debug)]
pub struct MemoryModel {
    forest: Forest,
    margin: f64,
    rows: usize,
    /// The largest of each model characteristic among the rows it was trained on.
    reach: [f64; MODEL_FEATURES],
}

impl MemoryModel {
    /// Trains the forest and measures its margin.
    pub fn train(rows: &[Row]) -> Result<Self, MemoryError> {
        let mut reach = [0.0_f64; MODEL_FEATURES];
        for row in rows {
            for (most, x) in reach.iter_mut().zip(row.features()) {
                *most = most.max(x);
            }
        }
        Ok(Self {
            forest: Forest::fit(rows)?,
            margin: margin(rows)?,
            rows: rows.len(),
            reach,
        })
    }

    /// The model trained on the bundled measurements alone (trained once per process).
    pub fn bundled() -> Arc<Self> {
        static BUNDLED: OnceLock<Arc<MemoryModel>> = OnceLock::new();
        BUNDLED
            .get_or_init(|| {
                let rows: Vec<Row> = bundled().into_iter().map(|l| l.row).collect();
                // The bundled rows are fixed and a test trains on them.
                Arc::new(Self::train(&rows).unwrap_or_else(|e| unreachable!("{e}")))
            })
            .clone()
    }

    /// The guard's margin, as a fraction of the prediction.
    pub fn margin(&self) -> f64 {
        self.margin
    }

    /// Rows it was trained on.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Whether the model's predictions vouch for `summary`: none of its parameters,
    /// activations, input batch or batch size exceeds the largest the model was trained on. A
    /// forest does not extrapolate: beyond them it predicts the largest peaks it saw, and its
    /// margin, measured within them, does not cover what it misses there (Gavel's ResNet-50 at
    /// batch 128, past SchedTune's batch 64, ran out of memory beside jobs the prediction left
    /// room for).
    pub fn vouches_for(&self, summary: &ModelSummary) -> bool {
        let model = [
            f64::from(summary.params_mib),
            f64::from(summary.activations_mib),
            f64::from(summary.input_mib),
            f64::from(summary.batch_size),
        ];
        model.iter().zip(&self.reach).all(|(x, most)| x <= most)
    }

    /// Prediction and reservation for a declared model on a GPU.
    pub fn estimate(&self, summary: &ModelSummary, gpu: GpuTraits) -> MemoryEstimate {
        let peak_mib = self.forest.predict(&[Row::declared(summary, gpu)])[0];
        MemoryEstimate {
            peak_mib,
            reserved_mib: peak_mib * (1.0 + self.margin),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_table_is_read_whole() {
        let rows = bundled();
        assert_eq!(rows.len(), 240);
        assert_eq!(rows.iter().map(|l| l.network).max(), Some(11));
        assert_eq!(rows.iter().map(|l| l.gpu).max(), Some(4));
        assert!(
            rows.iter()
                .all(|l| l.row.features().iter().all(|x| x.is_finite()))
        );
        assert_eq!(
            by_gpu(&rows.iter().map(|l| l.row).collect::<Vec<_>>()).len(),
            5
        );
    }

    #[test]
    fn known_gpus_match_their_common_names() {
        let v100 = known_gpu("V100").map(|t| t.sm_count);
        assert_eq!(known_gpu("Tesla V100-SXM2-16GB").map(|t| t.sm_count), v100);
        assert_eq!(
            known_gpu("NVIDIA A100-SXM4-40GB").map(|t| t.sm_count),
            Some(108.0)
        );
        assert_eq!(known_gpu("A10").map(|t| t.sm_count), Some(72.0));
        assert_eq!(
            known_gpu("GeForce RTX 2070 SUPER").map(|t| t.sm_count),
            Some(40.0)
        );
        assert_eq!(known_gpu("Radeon"), None);
    }

    #[test]
    fn the_bundled_model_predicts_and_reserves_above_its_prediction() {
        let model = MemoryModel::bundled();
        assert!(
            model.margin() > 0.0 && model.margin() < 1.0,
            "{}",
            model.margin()
        );
        let row = bundled()[0].row;
        let summary = ModelSummary {
            params_mib: row.params_mib as f32,
            activations_mib: row.activations_mib as f32,
            input_mib: row.input_mib as f32,
            batch_size: row.batch_size as u32,
            ..ModelSummary::default()
        };
        let estimate = model.estimate(&summary, row.gpu);
        assert!(
            (estimate.peak_mib / row.peak_mib - 1.0).abs() < 0.1,
            "{estimate:?}"
        );
        assert!(estimate.reserved_mib > estimate.peak_mib);
    }

    #[test]
    fn too_few_or_broken_rows_are_refused() {
        let row = bundled()[0].row;
        assert!(Forest::fit(&[row; 3]).is_err());
        let broken = Row {
            peak_mib: f64::NAN,
            ..row
        };
        assert!(Forest::fit(&[broken; 10]).is_err());
    }
}
