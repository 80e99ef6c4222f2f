//! GPU utilization of a declared job before it runs (Yeung et al.).
//!
//! A job that declares its model ([`ModelSummary`]) gets a predicted peak GPU utilization
//! before any profiling: a random forest over what the summary says of the model's graph
//! (batch size, forward GFLOPs of a batch, parameters, activations and input, and the
//! convolution, linear, activation and other layer counts), trained on the Futurewei runs:
//! 49 TensorFlow training runs of 15 networks (CNNs, small BERTs, a DCGAN, a U-Net, a DQN) at
//! batch sizes 2-7000, each with its measured maximum utilization (MGUP) on one Tesla P100
//! (bundled, Apache-2.0; `data/utilization/` rebuilds the networks and derives the table with
//! Tandem's own declared mode).
//!
//! The forest predicts `ln(1 + utilization %)`: that is the error the evaluation scores
//! (RMSLE), and on the bundled runs it held out better than the utilization itself.
//! Predictions are for the GPU the runs were measured on; utilization on another model scales
//! with that model's speed, which the engine does not yet fold in.

use std::sync::{Arc, OnceLock};

use tandem_api::ModelSummary;

use crate::forest::{Regressor, index_of};

/// The Futurewei runs with their declared summaries (see `data/LICENSE-alnair`).
const FUTUREWEI_CSV: &str = include_str!("../data/futurewei_utilization.csv");

/// Fewest rows a forest is trained on.
const MIN_ROWS: usize = 8;

/// Number of features a row has, in the order of [`Row::features`].
pub const FEATURES: usize = 9;

/// Names of the features, in the order of [`Row::features`], for reports.
pub const FEATURE_NAMES: [&str; FEATURES] = [
    "batch size",
    "forward GFLOPs of a batch",
    "parameters MiB",
    "activations MiB",
    "input MiB",
    "convolution layers",
    "linear layers",
    "activation layers",
    "other layers",
];

/// One measured run: the declared model and its maximum GPU utilization.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// The features, in the order of [`FEATURE_NAMES`].
    pub features: [f64; FEATURES],
    /// Maximum GPU utilization measured, percent (0 for a row still to measure).
    pub util_pct: f64,
}

impl Row {
    /// A row for a declared model, with the utilization still to measure.
    pub fn declared(s: &ModelSummary) -> Self {
        Self {
            features: [
                f64::from(s.batch_size),
                f64::from(s.gflops),
                f64::from(s.params_mib),
                f64::from(s.activations_mib),
                f64::from(s.input_mib),
                f64::from(s.conv_layers),
                f64::from(s.linear_layers),
                f64::from(s.activation_layers),
                f64::from(s.other_layers),
            ],
            util_pct: 0.0,
        }
    }

    /// The features, in the order of [`FEATURE_NAMES`].
    pub fn features(&self) -> [f64; FEATURES] {
        self.features
    }
}

/// A bundled run with the labels evaluations split on and report by (the public networks the
/// runs trained, never a job's: the engine itself has no use for them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Labelled {
    /// The run.
    pub row: Row,
    /// The network's name in the bundled table (for example `resnet50`).
    pub name: &'static str,
    /// Which of the 15 networks it trained, 0-based in order of first appearance.
    pub network: usize,
    /// Which family of networks: the networks, except that the small BERTs (layers × width
    /// variants of one architecture) are one family.
    pub family: usize,
}

/// The 49 Futurewei runs, in file order.
pub fn bundled() -> Vec<Labelled> {
    let mut networks: Vec<&str> = Vec::new();
    let mut families: Vec<&str> = Vec::new();
    let mut rows = Vec::new();
    for line in FUTUREWEI_CSV
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.split(',').collect();
        // The bundled file is generated and checked by a test; a malformed line is a build
        // error, and NaN makes training fail loudly.
        let number = |i: usize| -> f64 { fields[i].trim().parse().unwrap_or(f64::NAN) };
        let mut features = [0.0; FEATURES];
        for (k, feature) in features.iter_mut().enumerate() {
            *feature = number(k + 1);
        }
        let row = Row {
            features,
            util_pct: number(FEATURES + 1),
        };
        let name = fields[0];
        let family = name.split("_L-").next().unwrap_or(name);
        rows.push(Labelled {
            row,
            name,
            network: index_of(&mut networks, name),
            family: index_of(&mut families, family),
        });
    }
    rows
}

/// A random forest predicting a declared model's maximum GPU utilization.
#[derive(Debug)]
pub struct Forest {
    inner: Regressor<FEATURES>,
}

impl Forest {
    /// Trains a forest on `rows` (at least 8, every figure finite, utilization 0-100).
    pub fn fit(rows: &[Row]) -> Result<Self, UtilizationError> {
        if rows.len() < MIN_ROWS {
            return Err(UtilizationError::Training(format!(
                "{} rows, at least {MIN_ROWS} are needed",
                rows.len()
            )));
        }
        if let Some(bad) = rows.iter().position(|r| {
            !(0.0..=100.0).contains(&r.util_pct) || r.features.iter().any(|x| !x.is_finite())
        }) {
            return Err(UtilizationError::Training(format!(
                "row {bad} is not finite, or its utilization is outside 0-100"
            )));
        }
        let x: Vec<_> = rows.iter().map(Row::features).collect();
        let y = rows.iter().map(|r| r.util_pct.ln_1p()).collect();
        let inner = Regressor::fit(&x, y).map_err(UtilizationError::Training)?;
        Ok(Self { inner })
    }

    /// Predicted maximum utilization of each row, percent, within 0-100.
    pub fn predict(&self, rows: &[Row]) -> Vec<f64> {
        let x: Vec<_> = rows.iter().map(Row::features).collect();
        self.inner
            .predict(&x)
            .into_iter()
            .map(|y| y.exp_m1().clamp(0.0, 100.0))
            .collect()
    }
}

/// Root mean squared logarithmic error, `sqrt(mean((ln(1 + p) - ln(1 + t))²))`, of
/// predictions against truths in the same unit (rows with a NaN prediction are skipped).
pub fn rmsle(predicted: &[f64], truth: &[f64]) -> f64 {
    let errors: Vec<f64> = predicted
        .iter()
        .zip(truth)
        .filter(|(p, _)| p.is_finite())
        .map(|(p, t)| (p.ln_1p() - t.ln_1p()).powi(2))
        .collect();
    (errors.iter().sum::<f64>() / errors.len().max(1) as f64).sqrt()
}

/// The forest trained on the bundled runs.
#[derive(Debug)]
pub struct UtilizationModel {
    forest: Forest,
    rows: usize,
}

impl UtilizationModel {
    /// Trains the forest on `rows`.
    pub fn train(rows: &[Row]) -> Result<Self, UtilizationError> {
        Ok(Self {
            forest: Forest::fit(rows)?,
            rows: rows.len(),
        })
    }

    /// The model trained on the bundled runs (trained once per process).
    pub fn bundled() -> Arc<Self> {
        static BUNDLED: OnceLock<Arc<UtilizationModel>> = OnceLock::new();
        BUNDLED
            .get_or_init(|| {
                let rows: Vec<Row> = bundled().into_iter().map(|l| l.row).collect();
                // The bundled rows are fixed and a test trains on them.
                Arc::new(Self::train(&rows).unwrap_or_else(|e| unreachable!("{e}")))
            })
            .clone()
    }

    /// Rows it was trained on.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Predicted maximum GPU utilization of a declared model, percent (0-100).
    pub fn predict(&self, summary: &ModelSummary) -> f64 {
        self.forest.predict(&[Row::declared(summary)])[0]
    }
}

/// Why a forest could not be trained.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UtilizationError {
    /// Too few rows, or rows that are not finite and in range.
    #[error("cannot train the utilization model: {0}")]
    Training(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forest::{groups, held_out};

    #[test]
    fn the_bundled_table_is_read_whole() {
        let rows = bundled();
        assert_eq!(rows.len(), 49);
        assert_eq!(rows.iter().map(|r| r.network).max(), Some(14));
        // The seven small BERTs are one family: 15 networks, 9 families.
        assert_eq!(rows.iter().map(|r| r.family).max(), Some(8));
        for r in &rows {
            assert!(r.row.features.iter().all(|x| x.is_finite() && *x >= 0.0));
            assert!((0.0..=100.0).contains(&r.row.util_pct));
        }
    }

    #[test]
    fn held_out_networks_are_predicted_better_than_the_mean() {
        let labelled = bundled();
        let rows: Vec<Row> = labelled.iter().map(|l| l.row).collect();
        let truth: Vec<f64> = rows.iter().map(|r| r.util_pct).collect();
        let folds = groups(labelled.iter().map(|l| l.network));
        let forest = held_out(&rows, &folds, Forest::fit, Forest::predict).unwrap();
        // The mean of the other networks' runs (in log space), for every held-out run.
        let mean = held_out(
            &rows,
            &folds,
            |train: &[Row]| -> Result<f64, UtilizationError> {
                Ok(train.iter().map(|r| r.util_pct.ln_1p()).sum::<f64>() / train.len() as f64)
            },
            |m, test| vec![m.exp_m1(); test.len()],
        )
        .unwrap();
        let (f, m) = (rmsle(&forest, &truth), rmsle(&mean, &truth));
        assert!(f < 0.8 * m, "forest {f:.3}, mean {m:.3}");
    }

    #[test]
    fn the_bundled_model_predicts_within_range_and_more_for_more_work() {
        let model = UtilizationModel::bundled();
        assert_eq!(model.rows(), 49);
        let small = ModelSummary {
            params_mib: 0.02,
            activations_mib: 0.04,
            input_mib: 0.001,
            batch_size: 32,
            gflops: 0.0004,
            linear_layers: 3,
            activation_layers: 2,
            ..ModelSummary::default()
        };
        let large = ModelSummary {
            params_mib: 90.0,
            activations_mib: 100_000.0,
            input_mib: 600.0,
            batch_size: 1024,
            gflops: 7900.0,
            conv_layers: 53,
            linear_layers: 1,
            activation_layers: 49,
            other_layers: 21,
        };
        let (s, l) = (model.predict(&small), model.predict(&large));
        assert!((0.0..=100.0).contains(&s) && (0.0..=100.0).contains(&l));
        assert!(l > 2.0 * s, "small {s:.1}%, large {l:.1}%");
    }

    #[test]
    fn too_few_or_broken_rows_are_refused() {
        let row = bundled()[0].row;
        assert!(Forest::fit(&[row; 3]).is_err());
        let mut bad = vec![row; 10];
        bad[4].util_pct = 140.0;
        let err = Forest::fit(&bad).unwrap_err();
        assert!(err.to_string().contains("row 4"), "{err}");
        bad[4].util_pct = 10.0;
        bad[5].features[1] = f64::NAN;
        assert!(Forest::fit(&bad).unwrap_err().to_string().contains("row 5"));
    }

    #[test]
    fn rmsle_is_zero_for_exact_predictions_and_grows_with_error() {
        assert_eq!(rmsle(&[10.0, 50.0], &[10.0, 50.0]), 0.0);
        let e = rmsle(&[20.0], &[10.0]);
        assert!((e - (21f64.ln() - 11f64.ln())).abs() < 1e-12);
        assert_eq!(rmsle(&[f64::NAN, 10.0], &[5.0, 10.0]), 0.0);
    }
}
