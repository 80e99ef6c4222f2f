//! The random forest behind both predictions from a declared model: memory per GPU model
//! ([`crate::memory`]) and GPU utilization ([`crate::utilization`]).
//!
//! Our own forest of CART regression trees (`forest/tree.rs`), not a library's, so that it is the same
//! forest on every target: smartcore's, used before, drew its bootstrap samples from `rand`'s
//! `SmallRng`, a 64-bit generator natively and a 32-bit one on wasm32, so `tandem eval` (native)
//! measured other forests than the component ships. Here the samples come from
//! `Xoshiro256PlusPlus` drawing `u64`s (never `usize`, whose width differs between targets), and
//! each node's order of features is drawn from the same generator. As in scikit-learn's regressor, every feature is
//! a split candidate at every node (√features, smartcore's default, nearly doubled the held-out
//! error on both bundled tables) and trees grow until their leaves are pure.

mod tree;

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::SeedableRng;

use tree::{Presorted, Tree};

/// Trees in a forest: past about 100 the held-out error stops improving on the bundled data.
const TREES: usize = 100;
/// Seed of every forest: the same rows always give the same forest, on every target.
const FOREST_SEED: u64 = 0x5EED_7A4D;

/// A trained regression forest over `N` features.
#[derive(Debug)]
pub(crate) struct Regressor<const N: usize> {
    trees: Vec<Tree>,
}

impl<const N: usize> Regressor<N> {
    /// Trains on `x` (finite features) and `y`, one bootstrap sample of the rows per tree; the
    /// error says why the rows cannot be trained on.
    pub(crate) fn fit(x: &[[f64; N]], y: Vec<f64>) -> Result<Self, String> {
        if x.is_empty() || x.len() != y.len() {
            return Err(format!(
                "{} feature rows and {} targets: both must be equal and not zero",
                x.len(),
                y.len()
            ));
        }
        let n = x.len() as u64;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(FOREST_SEED);
        let presorted = Presorted::new(x);
        let mut sample = vec![0; x.len()];
        let trees = (0..TREES)
            .map(|_| {
                for row in sample.iter_mut() {
                    // `u64`, not `usize`: the draw must not depend on the target's word size.
                    *row = rng.gen_range(0..n) as usize;
                }
                Tree::grow(x, &y, &presorted, &sample, &mut rng)
            })
            .collect();
        Ok(Self { trees })
    }

    /// The forest's prediction for each row of `x`: the mean of its trees'.
    pub(crate) fn predict(&self, x: &[[f64; N]]) -> Vec<f64> {
        x.iter()
            .map(|row| {
                let sum: f64 = self.trees.iter().map(|tree| tree.predict(row)).sum();
                sum / self.trees.len() as f64
            })
            .collect()
    }
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
