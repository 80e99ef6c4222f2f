//! The random forest behind both predictions from a declared model: memory per GPU model
//! ([`crate::memory`]) and GPU utilization ([`crate::utilization`]).
//!
//! smartcore's regressor (pure Rust, compiles to wasm32), with every feature a split candidate
//! as in scikit-learn's regressor: smartcore's default, √features, nearly doubled the held-out
//! error on both bundled tables.

use smartcore::ensemble::random_forest_regressor::{
    RandomForestRegressor, RandomForestRegressorParameters,
};
use smartcore::linalg::basic::matrix::DenseMatrix;

/// Trees in a forest: past about 100 the held-out error stops improving on the bundled data.
const TREES: usize = 100;
/// Seed of every forest: the same rows always give the same forest on one target (the
/// component's forests differ from native ones: smartcore's `SmallRng` is 32-bit on wasm32).
const FOREST_SEED: u64 = 0x5EED_7A4D;

/// A trained regression forest over `N` features.
#[derive(Debug)]
pub(crate) struct Regressor<const N: usize> {
    inner: RandomForestRegressor<f64, f64, DenseMatrix<f64>, Vec<f64>>,
}

impl<const N: usize> Regressor<N> {
    /// Trains on `x` (finite features) and `y`; the error says what smartcore refused.
    pub(crate) fn fit(x: &[[f64; N]], y: Vec<f64>) -> Result<Self, String> {
        let parameters = RandomForestRegressorParameters::default()
            .with_n_trees(TREES)
            .with_m(N)
            .with_seed(FOREST_SEED);
        let inner =
            RandomForestRegressor::fit(&matrix(x)?, &y, parameters).map_err(|e| e.to_string())?;
        Ok(Self { inner })
    }

    /// Predictions for `x`, NaN for all when smartcore cannot predict (it never should on a
    /// matrix of the trained width).
    pub(crate) fn predict(&self, x: &[[f64; N]]) -> Vec<f64> {
        matrix(x)
            .ok()
            .and_then(|m| self.inner.predict(&m).ok())
            .unwrap_or_else(|| vec![f64::NAN; x.len()])
    }
}

fn matrix<const N: usize>(x: &[[f64; N]]) -> Result<DenseMatrix<f64>, String> {
    let data: Vec<Vec<f64>> = x.iter().map(|r| r.to_vec()).collect();
    DenseMatrix::from_2d_vec(&data).map_err(|e| e.to_string())
}

/// Held-out predictions: `folds` lists the rows held out together; each is predicted by a model
/// `fit` on all the other rows. Rows in no fold are predicted as NaN.
pub fn held_out<R: Clone, M, E>(
    rows: &[R],
    folds: &[Vec<usize>],
    fit: impl Fn(&[R]) -> Result<M, E>,
    predict: impl Fn(&M, &[R]) -> Vec<f64>,
) -> Result<Vec<f64>, E> {
    let mut predictions = vec![f64::NAN; rows.len()];
    for fold in folds {
        let train: Vec<R> = (0..rows.len())
            .filter(|i| !fold.contains(i))
            .map(|i| rows[i].clone())
            .collect();
        let test: Vec<R> = fold.iter().map(|&i| rows[i].clone()).collect();
        let model = fit(&train)?;
        for (&i, prediction) in fold.iter().zip(predict(&model, &test)) {
            predictions[i] = prediction;
        }
    }
    Ok(predictions)
}

/// Groups indices by `key`, in order of first appearance.
pub fn groups<K: PartialEq>(keys: impl IntoIterator<Item = K>) -> Vec<Vec<usize>> {
    let mut seen: Vec<K> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, key) in keys.into_iter().enumerate() {
        let g = index_of(&mut seen, key);
        if g == groups.len() {
            groups.push(Vec::new());
        }
        groups[g].push(i);
    }
    groups
}

/// Position of `value` in `seen`, appending it when new.
pub(crate) fn index_of<T: PartialEq>(seen: &mut Vec<T>, value: T) -> usize {
    seen.iter().position(|v| *v == value).unwrap_or_else(|| {
        seen.push(value);
        seen.len() - 1
    })
}
