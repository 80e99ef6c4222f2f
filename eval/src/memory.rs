//! Memory prediction (`tandem eval memory`): how well does the engine predict a declared job's peak memory on a GPU
//! model, and does the guard built on it catch every would-be OOM?
//!
//! The data are SchedTune's 240 measurements bundled with the engine (12 CNNs × batch sizes 8,
//! 16, 32, 64 × 5 GPUs). Three ways of holding data out, each row predicted exactly once:
//! - `random`: five folds of a seeded shuffle (SchedTune's protocol is one random split);
//! - `leave-one-gpu-out`: every GPU in turn, predicted from the other four (a GPU model the
//!   cluster never ran on);
//! - `leave-one-model-out`: every network in turn (a model nobody declared before).
//!
//! Three predictors: the engine's forest (`tandem_engine::memory`, the code the component
//! runs, here natively: see the crate docs for why, and for the check that its figures are the
//! component's); a Torchinfo-like sum (parameters + activations + input, the same on every GPU); and a
//! Horus-like linear model (least squares over the model's characteristics, GPU-agnostic).
//!
//! The guard: on each held-out row the engine reserves its prediction times (1 + margin), the
//! margin measured on the training folds alone (each of their GPUs held out in turn, as the
//! engine does when it trains). A would-be OOM is a held-out row whose true peak exceeds the
//! bare prediction; it is caught when the reservation covers the true peak.

use serde::Serialize;
use smartcore::linalg::basic::matrix::DenseMatrix;
use smartcore::linear::linear_regression::{
    LinearRegression, LinearRegressionParameters, LinearRegressionSolverName,
};
use tandem_engine::forest::groups;
use tandem_engine::memory::{self, Forest, Labelled, MemoryError, Row};

use crate::error::Result;
use crate::folds::random_folds;

/// Folds of the random split.
const RANDOM_FOLDS: usize = 5;

/// SchedTune's reported average error on a random split, %.
pub const SCHEDTUNE_AVG_ERROR_PCT: f64 = 1.50;

/// How rows are held out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Split {
    /// Five folds of a seeded shuffle.
    Random,
    /// Each GPU in turn.
    LeaveOneGpuOut,
    /// Each network in turn.
    LeaveOneModelOut,
}

impl Split {
    const ALL: [Split; 3] = [
        Split::Random,
        Split::LeaveOneGpuOut,
        Split::LeaveOneModelOut,
    ];

    /// The split's name, as the reports print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Random => "random",
            Split::LeaveOneGpuOut => "leave-one-gpu-out",
            Split::LeaveOneModelOut => "leave-one-model-out",
        }
    }

    fn folds(self, rows: &[Labelled], seed: u64) -> Vec<Vec<usize>> {
        match self {
            Split::Random => random_folds(rows.len(), RANDOM_FOLDS, seed),
            Split::LeaveOneGpuOut => groups(rows.iter().map(|l| l.gpu)),
            Split::LeaveOneModelOut => groups(rows.iter().map(|l| l.network)),
        }
    }
}

/// Errors of one predictor under one split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// The split.
    pub split: Split,
    /// The predictor.
    pub method: &'static str,
    /// Root mean square error, MiB.
    pub rmse_mib: f64,
    /// Mean absolute error relative to the true peak, %.
    pub avg_error_pct: f64,
    /// Largest absolute error relative to the true peak, %.
    pub max_error_pct: f64,
}

/// The guard under one split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Guard {
    /// The split.
    pub split: Split,
    /// Held-out rows.
    pub rows: usize,
    /// Rows whose true peak exceeds the bare prediction.
    pub would_be_ooms: usize,
    /// Of those, how many the reservation covers.
    pub caught: usize,
    /// Margins used, one per fold: smallest and largest, %.
    pub margin_pct: (f64, f64),
    /// Mean memory reserved beyond the true peak, % of the true peak.
    pub over_reserved_avg_pct: f64,
    /// Mean memory reserved beyond the true peak, MiB.
    pub over_reserved_avg_mib: f64,
}

/// The whole evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Measurements evaluated on.
    pub rows: usize,
    /// Networks and GPUs among them.
    pub networks: usize,
    /// GPUs among them.
    pub gpus: usize,
    /// Seed of the random split.
    pub seed: u64,
    /// Every predictor under every split.
    pub scores: Vec<Score>,
    /// The engine's guard under every split.
    pub guards: Vec<Guard>,
    /// SchedTune's reported average error (random split), %.
    pub schedtune_avg_error_pct: f64,
    /// The margin of the engine's own model, trained on every bundled row, %.
    pub engine_margin_pct: f64,
}

/// Runs the evaluation on the bundled measurements.
pub fn run(seed: u64) -> Result<Report> {
    let labelled = memory::bundled();
    let rows: Vec<Row> = labelled.iter().map(|l| l.row).collect();
    let mut scores = Vec::new();
    let mut guards = Vec::new();
    for split in Split::ALL {
        let folds = split.folds(&labelled, seed);
        let forest = memory::held_out(&rows, &folds, Forest::fit, Forest::predict)?;
        let sum: Vec<f64> = rows.iter().map(Row::footprint_mib).collect();
        let linear = memory::held_out(&rows, &folds, Linear::fit, Linear::predict)?;
        for (method, predictions) in [
            ("tandem-forest", &forest),
            ("torchinfo-sum", &sum),
            ("horus-linear", &linear),
        ] {
            scores.push(score(split, method, &rows, predictions));
        }
        guards.push(guard(split, &rows, &folds, &forest)?);
    }
    Ok(Report {
        rows: rows.len(),
        networks: labelled.iter().map(|l| l.network + 1).max().unwrap_or(0),
        gpus: labelled.iter().map(|l| l.gpu + 1).max().unwrap_or(0),
        seed,
        scores,
        guards,
        schedtune_avg_error_pct: SCHEDTUNE_AVG_ERROR_PCT,
        engine_margin_pct: memory::MemoryModel::bundled().margin() * 100.0,
    })
}

fn score(split: Split, method: &'static str, rows: &[Row], predictions: &[f64]) -> Score {
    let n = rows.len() as f64;
    let squared: f64 = rows
        .iter()
        .zip(predictions)
        .map(|(r, p)| (p - r.peak_mib).powi(2))
        .sum();
    let relative: Vec<f64> = rows
        .iter()
        .zip(predictions)
        .map(|(r, p)| (p - r.peak_mib).abs() / r.peak_mib * 100.0)
        .collect();
    Score {
        split,
        method,
        rmse_mib: (squared / n).sqrt(),
        avg_error_pct: relative.iter().sum::<f64>() / n,
        max_error_pct: relative.iter().copied().fold(0.0, f64::max),
    }
}

fn guard(split: Split, rows: &[Row], folds: &[Vec<usize>], forest: &[f64]) -> Result<Guard> {
    let mut margins = Vec::new();
    let (mut would_be, mut caught, mut over_pct, mut over_mib, mut held) = (0, 0, 0.0, 0.0, 0);
    for fold in folds {
        let train: Vec<Row> = (0..rows.len())
            .filter(|i| !fold.contains(i))
            .map(|i| rows[i])
            .collect();
        let margin = memory::margin(&train)?;
        margins.push(margin * 100.0);
        for &i in fold {
            let (truth, predicted) = (rows[i].peak_mib, forest[i]);
            let reserved = predicted * (1.0 + margin);
            held += 1;
            if truth > predicted {
                would_be += 1;
                if reserved >= truth {
                    caught += 1;
                }
            }
            over_pct += (reserved - truth) / truth * 100.0;
            over_mib += reserved - truth;
        }
    }
    let min = margins.iter().copied().fold(f64::INFINITY, f64::min);
    let max = margins.iter().copied().fold(0.0, f64::max);
    Ok(Guard {
        split,
        rows: held,
        would_be_ooms: would_be,
        caught,
        margin_pct: (min, max),
        over_reserved_avg_pct: over_pct / held as f64,
        over_reserved_avg_mib: over_mib / held as f64,
    })
}

/// The Horus-like baseline: least squares over the model's characteristics alone.
struct Linear(LinearRegression<f64, f64, DenseMatrix<f64>, Vec<f64>>);

impl Linear {
    fn features(rows: &[Row]) -> Result<DenseMatrix<f64>, MemoryError> {
        let data: Vec<Vec<f64>> = rows
            .iter()
            .map(|r| vec![r.params_mib, r.activations_mib, r.input_mib, r.batch_size])
            .collect();
        DenseMatrix::from_2d_vec(&data).map_err(|e| MemoryError::Training(e.to_string()))
    }

    fn fit(rows: &[Row]) -> Result<Self, MemoryError> {
        let y: Vec<f64> = rows.iter().map(|r| r.peak_mib).collect();
        let parameters =
            LinearRegressionParameters::default().with_solver(LinearRegressionSolverName::QR);
        LinearRegression::fit(&Self::features(rows)?, &y, parameters)
            .map(Self)
            .map_err(|e| MemoryError::Training(e.to_string()))
    }

    fn predict(&self, rows: &[Row]) -> Vec<f64> {
        Self::features(rows)
            .ok()
            .and_then(|x| self.0.predict(&x).ok())
            .unwrap_or_else(|| vec![f64::NAN; rows.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_split_predicts_every_row_once() {
        let rows = memory::bundled();
        for split in Split::ALL {
            assert!(
                crate::folds::each_once(split.folds(&rows, 3), rows.len()),
                "{split:?}"
            );
        }
        assert_eq!(Split::LeaveOneGpuOut.folds(&rows, 3).len(), 5);
        assert_eq!(Split::LeaveOneModelOut.folds(&rows, 3).len(), 12);
    }
}
