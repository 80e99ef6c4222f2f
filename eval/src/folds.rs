//! The seeded random split the bundled-table evaluations share.

use rand::SeedableRng as _;
use rand::seq::SliceRandom as _;
use rand_xoshiro::Xoshiro256PlusPlus;

/// `folds` folds of a seeded shuffle of `0..rows`, every row in exactly one (the random split
/// of `eval memory` and `eval utilization`).
pub(crate) fn random_folds(rows: usize, folds: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..rows).collect();
    order.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(seed));
    (0..folds)
        .map(|k| order.iter().copied().skip(k).step_by(folds).collect())
        .collect()
}

/// Whether `folds` hold out each of `0..rows` exactly once (for the splits' tests).
#[cfg(test)]
pub(crate) fn each_once(folds: Vec<Vec<usize>>, rows: usize) -> bool {
    let mut seen: Vec<usize> = folds.into_iter().flatten().collect();
    seen.sort_unstable();
    seen == (0..rows).collect::<Vec<_>>()
}
