//! What a grouping of one queue achieved under the measured table, and the statistics the
//! evaluation reports (mean, p95, Spearman's rank correlation).
//!
//! Pure functions over plain numbers, so each figure in `docs/EVALUATION.md` can be checked by
//! hand on a small example (see the tests).

use tandem_catalog::individual_slowdown;

/// Slowdown above which a co-location counts as harmful (the shared DESIGN's threshold).
pub(crate) const HIGH_SLOWDOWN: f64 = 0.5;

/// What one queue's grouping achieved.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct QueueOutcome {
    /// Σ solo time of every job of the queue (seconds): the time of running them one after
    /// another.
    pub solo_total_s: f64,
    /// Σ over groups of (Σ solo time − group makespan): time saved against running serially.
    pub saved_s: f64,
    /// Pairs the method formed, OOMs included.
    pub pairs: usize,
    /// Pairs the method formed that were never measured (treated as out of memory).
    pub ooms: usize,
    /// IndSD (fraction) of every job that shared a GPU in a measured pair.
    pub slowdowns: Vec<f64>,
    /// Per measured pair, the larger IndSD of its two jobs.
    pub worst_slowdowns: Vec<f64>,
}

impl QueueOutcome {
    /// Queue-level packing saving: `saved / Σ solo`, a fraction.
    pub(crate) fn packing_saving(&self) -> f64 {
        if self.solo_total_s > 0.0 {
            self.saved_s / self.solo_total_s
        } else {
            0.0
        }
    }
}

/// Scores a grouping of one queue.
///
/// `solo_s[i]` is the solo time of the queue's job `i`; `pairs` hold positions in the queue
/// (every other job runs alone); `colocated(i, j)` is the measured completion time of jobs `i`
/// and `j` started together, in that order, or `None` if the pair was never measured — it then
/// counts as an OOM: it saves nothing (the two jobs end up running one after the other) and has
/// no slowdown to report.
pub(crate) fn queue_outcome(
    solo_s: &[f64],
    pairs: &[(usize, usize)],
    colocated: impl Fn(usize, usize) -> Option<[f64; 2]>,
) -> QueueOutcome {
    let mut outcome = QueueOutcome {
        solo_total_s: solo_s.iter().sum(),
        pairs: pairs.len(),
        ..QueueOutcome::default()
    };
    for &(a, b) in pairs {
        let Some(times) = colocated(a, b) else {
            outcome.ooms += 1;
            continue;
        };
        let solo = [solo_s[a], solo_s[b]];
        outcome.saved_s += solo[0] + solo[1] - times[0].max(times[1]);
        let slowdowns = [
            individual_slowdown(solo[0], times[0]),
            individual_slowdown(solo[1], times[1]),
        ];
        outcome.slowdowns.extend(slowdowns);
        outcome.worst_slowdowns.push(slowdowns[0].max(slowdowns[1]));
    }
    outcome
}

/// A method's saving relative to the oracle's, in %, when both are known and the oracle saves.
pub(crate) fn of_oracle(saving: Option<f64>, oracle: Option<f64>) -> Option<f64> {
    match (saving, oracle) {
        (Some(method), Some(best)) if best > 0.0 => Some(100.0 * method / best),
        _ => None,
    }
}

/// Mean, or `None` for no values.
pub(crate) fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The `share`-quantile (0..=1) by the nearest-rank method: the smallest value with at least
/// `share` of the values at or below it. Always one of the values (no interpolation), so a
/// reported p95 slowdown is one some job really suffered. `None` for no values.
pub(crate) fn percentile(values: &[f64], share: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (share * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Spearman's rank correlation of paired values (ties get their average rank). `None` with
/// fewer than two pairs or when either side is constant (the correlation is undefined).
pub(crate) fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    assert_eq!(x.len(), y.len(), "spearman needs paired values");
    if x.len() < 2 {
        return None;
    }
    pearson(&ranks(x), &ranks(y))
}

/// Ranks 1..=n, ties sharing the average of the ranks they span.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // Positions start..end hold equal values: ranks start+1 ..= end, averaged.
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}

/// Pearson's correlation; `None` when either side has no variance.
fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let (mx, my) = (mean(x)?, mean(y)?);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn queue_packing_saving_on_a_hand_computed_queue() {
        // Four jobs: 100 s, 50 s, 40 s, 100 s alone. Jobs 0 and 1 share a GPU and finish at
        // 131.25 s and 62.5 s (the catalog's own example); jobs 2 and 3 time-slice and finish
        // at 80 s and 140 s (no saving). Saved: 150 - 131.25 = 18.75 s of 290 s.
        let solo = [100.0, 50.0, 40.0, 100.0];
        let table = |a: usize, b: usize| match (a, b) {
            (0, 1) => Some([131.25, 62.5]),
            (2, 3) => Some([80.0, 140.0]),
            _ => None,
        };
        let outcome = queue_outcome(&solo, &[(0, 1), (2, 3)], table);
        assert!(close(outcome.solo_total_s, 290.0));
        assert!(close(outcome.saved_s, 18.75));
        assert!(close(outcome.packing_saving(), 18.75 / 290.0));
        assert_eq!((outcome.pairs, outcome.ooms), (2, 0));
        let expected = [0.3125, 0.25, 1.0, 0.4];
        for (got, want) in outcome.slowdowns.iter().zip(expected) {
            assert!(close(*got, want), "{:?}", outcome.slowdowns);
        }
        assert_eq!(outcome.worst_slowdowns.len(), 2);
        assert!(close(outcome.worst_slowdowns[0], 0.3125));
        assert!(close(outcome.worst_slowdowns[1], 1.0));
        assert!(close(mean(&outcome.slowdowns).unwrap(), 0.490625));
    }

    #[test]
    fn unmeasured_pairs_are_ooms_that_save_nothing_and_singletons_save_nothing() {
        let solo = [100.0, 50.0, 40.0, 100.0, 10.0];
        let table = |a: usize, b: usize| (a, b).eq(&(0, 1)).then_some([131.25, 62.5]);
        // (2, 3) was never measured; job 4 runs alone.
        let outcome = queue_outcome(&solo, &[(0, 1), (2, 3)], table);
        assert_eq!((outcome.pairs, outcome.ooms), (2, 1));
        assert!(close(outcome.saved_s, 18.75));
        assert!(close(outcome.packing_saving(), 18.75 / 300.0));
        assert_eq!(outcome.slowdowns.len(), 2);
        // Nobody shares: nothing saved, nothing slowed.
        let alone = queue_outcome(&solo, &[], table);
        assert_eq!(alone.packing_saving(), 0.0);
        assert!(alone.slowdowns.is_empty());
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&hundred, 0.95), Some(95.0));
        let twenty: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        assert_eq!(percentile(&twenty, 0.95), Some(19.0));
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 0.95), Some(3.0));
        assert_eq!(percentile(&[7.0], 0.95), Some(7.0));
        assert_eq!(percentile(&[4.0, 8.0], 0.0), Some(4.0));
        assert_eq!(percentile(&[], 0.95), None);
    }

    #[test]
    fn spearman_ranks_with_ties() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert!(close(
            spearman(&x, &[10.0, 20.0, 30.0, 40.0, 50.0]).unwrap(),
            1.0
        ));
        // Any monotone map is a perfect rank correlation, even a non-linear one.
        assert!(close(
            spearman(&x, &[1.0, 4.0, 9.0, 16.0, 1e6]).unwrap(),
            1.0
        ));
        assert!(close(
            spearman(&x, &[5.0, 4.0, 3.0, 2.0, 1.0]).unwrap(),
            -1.0
        ));
        // Ties: y ranks are 1, 2.5, 2.5, 4; x ranks 1..4. Pearson of those: 4.5 / sqrt(5 * 4.5).
        let rho = spearman(&[1.0, 2.0, 3.0, 4.0], &[1.0, 2.0, 2.0, 3.0]).unwrap();
        assert!(close(rho, 4.5 / (5.0_f64 * 4.5).sqrt()), "{rho}");
        // Undefined: constant side, or too few pairs.
        assert_eq!(spearman(&x, &[1.0; 5]), None);
        assert_eq!(spearman(&[1.0], &[2.0]), None);
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 3.0]), vec![3.5, 1.0, 3.5, 2.0]);
    }

    #[test]
    fn mean_of_nothing_is_none() {
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
    }
}
