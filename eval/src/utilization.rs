//! Utilization prediction (`tandem eval utilization`): how well does the engine predict a declared job's GPU
//! utilization before it runs (Yeung et al.)?
//!
//! The data are the 49 Futurewei training runs bundled with the engine (15 networks, batch
//! sizes 2-7000, maximum GPU utilization measured on a Tesla P100), each described only by the
//! summary Tandem's declared mode computes from the network's ONNX graph. Three ways of holding
//! data out, each run predicted exactly once:
//! - `leave-one-model-out`: every network in turn (Yeung et al.'s question: a model nobody
//!   submitted before);
//! - `leave-one-family-out`: the same, but the seven small BERTs (one architecture at several
//!   depths and widths) go out together, so no BERT is predicted from another;
//! - `random`: five folds of a seeded shuffle.
//!
//! Three predictors: the engine's forest (`tandem_engine::utilization`, the code the component
//! runs, here natively: see the crate docs for why, and for the check that its figures are the
//! component's); the mean of the training runs (in log space, what RMSLE rewards); and a FLOPs-only
//! log-log line. Scores: RMSLE on utilization in percent (`ln(1 + %)`), RMSLE on utilization as
//! a fraction (`ln(1 + u)`, u in 0..1; Yeung et al.'s paper does not say which unit its 0.154
//! is in, and the two differ a lot), and the mean absolute error in percentage points.

use serde::Serialize;
use tandem_engine::forest::{groups, held_out};
use tandem_engine::utilization::{self, Forest, Labelled, Row, UtilizationError};

use crate::error::Result;
use crate::folds::random_folds;

/// Folds of the random split.
const RANDOM_FOLDS: usize = 5;

/// Yeung et al.'s reported RMSLE with a random forest.
pub const YEUNG_RMSLE: f64 = 0.154;

/// How runs are held out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Split {
    /// Each network in turn.
    LeaveOneModelOut,
    /// Each family of networks in turn (the small BERTs together).
    LeaveOneFamilyOut,
    /// Five folds of a seeded shuffle.
    Random,
}

impl Split {
    const ALL: [Split; 3] = [
        Split::LeaveOneModelOut,
        Split::LeaveOneFamilyOut,
        Split::Random,
    ];

    /// The split's name, as the reports print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Split::LeaveOneModelOut => "leave-one-model-out",
            Split::LeaveOneFamilyOut => "leave-one-family-out",
            Split::Random => "random",
        }
    }

    fn folds(self, rows: &[Labelled], seed: u64) -> Vec<Vec<usize>> {
        match self {
            Split::LeaveOneModelOut => groups(rows.iter().map(|l| l.network)),
            Split::LeaveOneFamilyOut => groups(rows.iter().map(|l| l.family)),
            Split::Random => random_folds(rows.len(), RANDOM_FOLDS, seed),
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
    /// RMSLE of utilization in percent.
    pub rmsle_pct: f64,
    /// RMSLE of utilization as a fraction of 1.
    pub rmsle_fraction: f64,
    /// Mean absolute error, percentage points.
    pub mae_points: f64,
}

/// The engine's forest on one held-out network (leave-one-model-out).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkScore {
    /// The network.
    pub network: &'static str,
    /// Its runs.
    pub runs: usize,
    /// Measured maximum utilization of its runs, percent: smallest and largest.
    pub measured_pct: (f64, f64),
    /// RMSLE of utilization in percent over its runs.
    pub rmsle_pct: f64,
    /// Mean absolute error over its runs, percentage points.
    pub mae_points: f64,
}

/// The whole evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Runs evaluated on.
    pub runs: usize,
    /// Networks among them.
    pub networks: usize,
    /// Families among them.
    pub families: usize,
    /// Seed of the random split.
    pub seed: u64,
    /// Every predictor under every split.
    pub scores: Vec<Score>,
    /// The forest per held-out network.
    pub per_network: Vec<NetworkScore>,
    /// Yeung et al.'s reported RMSLE.
    pub yeung_rmsle: f64,
}

/// Runs the evaluation on the bundled runs.
pub fn run(seed: u64) -> Result<Report> {
    let labelled = utilization::bundled();
    let rows: Vec<Row> = labelled.iter().map(|l| l.row).collect();
    let truth: Vec<f64> = rows.iter().map(|r| r.util_pct).collect();
    let mut scores = Vec::new();
    let mut per_network = Vec::new();
    for split in Split::ALL {
        let folds = split.folds(&labelled, seed);
        let forest = held_out(&rows, &folds, Forest::fit, Forest::predict)?;
        let mean = held_out(&rows, &folds, fit_mean, |m: &f64, test| {
            vec![m.exp_m1(); test.len()]
        })?;
        let flops = held_out(&rows, &folds, FlopsLine::fit, FlopsLine::predict)?;
        for (method, predictions) in [
            ("tandem-forest", &forest),
            ("training-mean", &mean),
            ("flops-loglinear", &flops),
        ] {
            scores.push(score(split, method, predictions, &truth));
        }
        if split == Split::LeaveOneModelOut {
            for fold in &folds {
                let p: Vec<f64> = fold.iter().map(|&i| forest[i]).collect();
                let t: Vec<f64> = fold.iter().map(|&i| truth[i]).collect();
                per_network.push(NetworkScore {
                    network: labelled[fold[0]].name,
                    runs: fold.len(),
                    measured_pct: (
                        t.iter().copied().fold(f64::INFINITY, f64::min),
                        t.iter().copied().fold(0.0, f64::max),
                    ),
                    rmsle_pct: utilization::rmsle(&p, &t),
                    mae_points: mae(&p, &t),
                });
            }
        }
    }
    Ok(Report {
        runs: rows.len(),
        networks: labelled.iter().map(|l| l.network + 1).max().unwrap_or(0),
        families: labelled.iter().map(|l| l.family + 1).max().unwrap_or(0),
        seed,
        scores,
        per_network,
        yeung_rmsle: YEUNG_RMSLE,
    })
}

fn score(split: Split, method: &'static str, predicted: &[f64], truth: &[f64]) -> Score {
    let fraction = |v: &[f64]| v.iter().map(|x| x / 100.0).collect::<Vec<_>>();
    Score {
        split,
        method,
        rmsle_pct: utilization::rmsle(predicted, truth),
        rmsle_fraction: utilization::rmsle(&fraction(predicted), &fraction(truth)),
        mae_points: mae(predicted, truth),
    }
}

fn mae(predicted: &[f64], truth: &[f64]) -> f64 {
    let n = truth.len().max(1) as f64;
    predicted
        .iter()
        .zip(truth)
        .map(|(p, t)| (p - t).abs())
        .sum::<f64>()
        / n
}

/// The mean of the training runs' `ln(1 + %)`.
fn fit_mean(train: &[Row]) -> Result<f64, UtilizationError> {
    if train.is_empty() {
        return Err(UtilizationError::Training("no rows".into()));
    }
    Ok(train.iter().map(|r| r.util_pct.ln_1p()).sum::<f64>() / train.len() as f64)
}

/// `ln(1 + %)` as a straight line in `ln(1 + GFLOPs of a batch)`, by least squares: the
/// "more work keeps the GPU busier" rule with nothing else of the model.
struct FlopsLine {
    intercept: f64,
    slope: f64,
}

impl FlopsLine {
    fn x(row: &Row) -> f64 {
        row.features[1].ln_1p()
    }

    fn fit(train: &[Row]) -> Result<Self, UtilizationError> {
        let n = train.len() as f64;
        let (mx, my) = train.iter().fold((0.0, 0.0), |(x, y), r| {
            (x + Self::x(r) / n, y + r.util_pct.ln_1p() / n)
        });
        let (sxy, sxx) = train.iter().fold((0.0, 0.0), |(sxy, sxx), r| {
            let dx = Self::x(r) - mx;
            (sxy + dx * (r.util_pct.ln_1p() - my), sxx + dx * dx)
        });
        if sxx.is_nan() || sxx <= 0.0 {
            return Err(UtilizationError::Training("FLOPs do not vary".into()));
        }
        let slope = sxy / sxx;
        Ok(Self {
            intercept: my - slope * mx,
            slope,
        })
    }

    fn predict(&self, test: &[Row]) -> Vec<f64> {
        test.iter()
            .map(|r| {
                (self.intercept + self.slope * Self::x(r))
                    .exp_m1()
                    .clamp(0.0, 100.0)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_split_predicts_every_run_once() {
        let rows = utilization::bundled();
        for split in Split::ALL {
            assert!(
                crate::folds::each_once(split.folds(&rows, 3), rows.len()),
                "{split:?}"
            );
        }
        assert_eq!(Split::LeaveOneModelOut.folds(&rows, 3).len(), 15);
        assert_eq!(Split::LeaveOneFamilyOut.folds(&rows, 3).len(), 9);
    }

    #[test]
    fn the_flops_line_recovers_a_line() {
        let rows: Vec<Row> = (1..10)
            .map(|k| {
                let mut features = [0.0; utilization::FEATURES];
                features[1] = f64::from(k * 10);
                let util = (0.5 + 0.25 * features[1].ln_1p()).exp_m1();
                Row {
                    features,
                    util_pct: util,
                }
            })
            .collect();
        let line = FlopsLine::fit(&rows).unwrap();
        assert!((line.slope - 0.25).abs() < 1e-9 && (line.intercept - 0.5).abs() < 1e-9);
    }
}
