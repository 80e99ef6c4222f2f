//! Learning interference from outcomes: running statistics per cluster pair, and a pair-level
//! predictor of each job's slowdown from the two profiles.
//!
//! A job `a` sharing with `b` is predicted in three layers, each refining the one before:
//! 1. the analytic prior from the two profiles ([`crate::interference`]), with a wide spread
//!    ([`PRIOR_STD`]);
//! 2. the cluster matrix: the mean slowdown measured for jobs of `a`'s cluster next to jobs of
//!    `b`'s cluster, blended with the prior by precision (its variance shrinks as `1/n`), so
//!    where evidence is thin the prior dominates;
//! 3. a residual model: Bayesian linear regression (ridge prior, noise [`NOISE_STD`]) on
//!    features of the pair, trained online on what the matrix got wrong. It captures what
//!    clusters average away — two jobs of the same clusters with different loads.
//!
//! These are the profiles' layers; the per-workload model and each pair's own measurements
//! refine them (the engine's `workloads` module), and every layer speaks a [`PairBelief`]: an
//! estimate of the pair's log slowdown, its variance, and the run-to-run scatter. The uncertainty the engine
//! reports is the predictive standard deviation over [`UNCERTAINTY_LOG_STD`], which [`interval`]
//! turns back into a slowdown interval.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::features::Features;

/// Spread of the analytic prior, as a slowdown fraction.
pub const PRIOR_STD: f64 = 0.5;
/// Measurement noise assumed for one observed slowdown.
pub const NOISE_STD: f64 = 0.1;
/// Smallest spread, as a slowdown fraction, assumed between two different pairs of the same
/// two clusters: a cell measured on one pair only (however often) says nothing of how far
/// another pair of those clusters may land from it.
pub const PAIR_SPREAD_STD: f64 = 0.15;
/// Smallest per-observation spread the matrix assumes, so two equal measurements do not claim
/// certainty.
const MIN_CELL_STD: f64 = 0.05;
/// Ridge prior precision of the residual weights (relative to the noise).
const RIDGE: f64 = 0.25;
/// Number of pair features of the residual model.
const DIM: usize = 9;

/// Log-slowdown spread that an uncertainty of 1 stands for: the engine reports a prediction's
/// uncertainty as its predictive standard deviation in log slowdown, `ln(J_c / J_a)`, over
/// this, capped at 1 (see [`interval`]). A factor `e` either way is as unsure as the planner
/// needs to tell apart: past it the pessimistic slowdown already rules a pairing out.
pub const UNCERTAINTY_LOG_STD: f64 = 1.0;

/// The central interval, as slowdown fractions, that a prediction of `slowdown` (fraction)
/// with `uncertainty` (0..=1, as the engine reports it) gives `z` standard deviations either
/// side: `exp(ln(1 + slowdown) ± z·σ) - 1` with `σ = uncertainty ·` [`UNCERTAINTY_LOG_STD`].
/// `z = 1.645` is the 90% interval the evaluation checks for coverage.
pub fn interval(slowdown: f64, uncertainty: f64, z: f64) -> (f64, f64) {
    let centre = slowdown.max(0.0).ln_1p();
    let half = z * uncertainty * UNCERTAINTY_LOG_STD;
    ((centre - half).exp_m1(), (centre + half).exp_m1())
}

/// What the predictor believes about one job's slowdown next to one partner, in log slowdown
/// `ln(J_c / J_a)` (slowdowns are heavy-tailed and multiply, so their errors are closer to
/// normal there).
///
/// Two spreads, because they shrink differently: `estimate_var` is how far the estimate may be
/// from this pair's true mean — it shrinks with evidence about the pair — while `noise_var` is
/// how far one run scatters around that mean, which no amount of evidence removes. A
/// prediction's error is their sum ([`PairBelief::predictive_var`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairBelief {
    /// Estimated mean log slowdown.
    pub log_mean: f64,
    /// Variance of that estimate.
    pub estimate_var: f64,
    /// Run-to-run variance of one measurement around the pair's mean.
    pub noise_var: f64,
    /// Whether an observed outcome informed the belief (otherwise it is the analytic or
    /// no-evidence prior alone).
    pub learned: bool,
}

impl PairBelief {
    /// Predicted slowdown, as a fraction (never negative: sharing does not speed a job up).
    pub fn slowdown(&self) -> f64 {
        self.log_mean.exp_m1().max(0.0)
    }

    /// Variance of the error of predicting one run's log slowdown.
    pub fn predictive_var(&self) -> f64 {
        self.estimate_var + self.noise_var
    }

    /// This belief with an independent estimate `(mean, variance)` of the same pair's mean
    /// folded in by precision, as the next, more specific layer of evidence does.
    pub fn refined(self, mean: f64, variance: f64) -> Self {
        let precision = 1.0 / self.estimate_var + 1.0 / variance;
        Self {
            log_mean: (self.log_mean / self.estimate_var + mean / variance) / precision,
            estimate_var: 1.0 / precision,
            learned: true,
            ..self
        }
    }
}

/// Running mean and variance (Welford), mergeable and serializable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunningStats {
    /// Observations folded in.
    pub count: u64,
    /// Their mean.
    pub mean: f64,
    m2: f64,
}

impl RunningStats {
    /// Folds in one observation. A non-finite one is ignored: the engine's inputs are bounded
    /// so none arrives, and one would make every later figure non-finite.
    pub fn push(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        self.count = self.count.saturating_add(1);
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Folds in every observation of `other` (Chan's parallel form: the result is what pushing
    /// them one by one would give, up to rounding).
    pub fn merge(&mut self, other: &RunningStats) {
        if other.count == 0 {
            return;
        }
        let count = self.count.saturating_add(other.count);
        let delta = other.mean - self.mean;
        let weight = other.count as f64 / count as f64;
        self.mean += delta * weight;
        self.m2 += other.m2 + delta * delta * self.count as f64 * weight;
        self.count = count;
    }

    /// These observations with `offset` added to each: the mean moves, the spread does not.
    pub fn shifted(&self, offset: f64) -> RunningStats {
        RunningStats {
            mean: self.mean + offset,
            ..*self
        }
    }

    /// Sample variance, once there are two observations.
    pub fn variance(&self) -> Option<f64> {
        (self.count >= 2).then(|| self.m2 / (self.count - 1) as f64)
    }

    /// A normal belief `(mean, variance)` updated with these observations, weighing each by
    /// precision: the observations' mean counts with variance `spread² / count`, where the
    /// spread is their sample standard deviation but at least `min_std` (so two equal
    /// measurements do not claim certainty). With no observations the belief is unchanged.
    pub fn update(&self, mean: f64, variance: f64, min_std: f64) -> (f64, f64) {
        if self.count == 0 {
            return (mean, variance);
        }
        let per_obs = self.variance().unwrap_or(0.0).max(min_std * min_std);
        let sample_var = per_obs / self.count as f64;
        let precision = 1.0 / variance + 1.0 / sample_var;
        (
            (mean / variance + self.mean / sample_var) / precision,
            1.0 / precision,
        )
    }
}

/// Statistics of one cluster pair.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairCell {
    /// Slowdown (fraction) of a job of the first cluster next to one of the second.
    pub slowdown: RunningStats,
    /// Packing saving (fraction) of such pairs, recorded on the cell with the smaller id first.
    pub saving: RunningStats,
}

/// What was measured between clusters, keyed by `(cluster of the job, cluster of its partner)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairMatrix {
    #[serde(with = "pair_keys")]
    cells: BTreeMap<(u32, u32), PairCell>,
}

impl PairMatrix {
    /// Records the slowdown of a job in cluster `of` next to one in cluster `next_to`.
    pub fn push_slowdown(&mut self, of: u32, next_to: u32, slowdown: f64) {
        self.cells
            .entry((of, next_to))
            .or_default()
            .slowdown
            .push(slowdown);
    }

    /// Records the packing saving of a pair of clusters.
    pub fn push_saving(&mut self, a: u32, b: u32, saving: f64) {
        self.cells
            .entry((a.min(b), a.max(b)))
            .or_default()
            .saving
            .push(saving);
    }

    /// The cell of `(of, next_to)`, if anything was measured there.
    pub fn cell(&self, of: u32, next_to: u32) -> Option<&PairCell> {
        self.cells.get(&(of, next_to))
    }

    /// Every measured cell.
    pub fn cells(&self) -> impl Iterator<Item = (&(u32, u32), &PairCell)> {
        self.cells.iter()
    }

    /// Prior blended with the cell's evidence: `(mean, variance)`.
    pub fn blend(&self, of: Option<u32>, next_to: Option<u32>, prior: f64) -> (f64, f64) {
        let prior_var = PRIOR_STD * PRIOR_STD;
        match of.zip(next_to).and_then(|(a, b)| self.cell(a, b)) {
            None => (prior, prior_var),
            Some(cell) => cell.slowdown.update(prior, prior_var, MIN_CELL_STD),
        }
    }
}

/// JSON maps need string keys: store the cells as a list.
mod pair_keys {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::PairCell;

    #[derive(Serialize, Deserialize)]
    struct Entry {
        of: u32,
        next_to: u32,
        #[serde(flatten)]
        cell: PairCell,
    }

    pub(super) fn serialize<S: Serializer>(
        cells: &BTreeMap<(u32, u32), PairCell>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let entries: Vec<Entry> = cells
            .iter()
            .map(|(&(of, next_to), cell)| Entry {
                of,
                next_to,
                cell: cell.clone(),
            })
            .collect();
        entries.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<(u32, u32), PairCell>, D::Error> {
        let entries = Vec::<Entry>::deserialize(deserializer)?;
        Ok(entries
            .into_iter()
            .map(|e| ((e.of, e.next_to), e.cell))
            .collect())
    }
}

/// Features of an ordered pair for the residual model.
fn pair_features(a: &Features, b: &Features) -> [f64; DIM] {
    [
        1.0,
        a[0],
        b[0],
        a[1],
        b[1],
        a[2],
        b[2],
        a[0] * b[0],
        a[1] * b[1],
    ]
}

/// Online Bayesian linear regression of the matrix's error on pair features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResidualModel {
    /// Inverse of the posterior precision (in noise units), kept by rank-one updates.
    covariance: [[f64; DIM]; DIM],
    /// Sum of `features * target`.
    moment: [f64; DIM],
    /// Posterior mean of the weights.
    weights: [f64; DIM],
    /// Outcomes learned from.
    pub observations: u64,
}

impl Default for ResidualModel {
    fn default() -> Self {
        let mut covariance = [[0.0; DIM]; DIM];
        for (i, row) in covariance.iter_mut().enumerate() {
            row[i] = 1.0 / RIDGE;
        }
        Self {
            covariance,
            moment: [0.0; DIM],
            weights: [0.0; DIM],
            observations: 0,
        }
    }
}

impl ResidualModel {
    /// Learns that the matrix was off by `residual` for this ordered pair.
    ///
    /// The update is made on a copy and kept only if every figure stays finite and its
    /// denominator `1 + φᵀΣφ` positive: bounded inputs keep them so, and an update that rounding
    /// broke is one observation lost rather than a model that predicts NaN.
    pub fn learn(&mut self, a: &Features, b: &Features, residual: f64) {
        let phi = pair_features(a, b);
        let sphi = mat_vec(&self.covariance, &phi);
        let denominator = 1.0 + dot(&phi, &sphi);
        if !(denominator.is_finite() && denominator > 0.0 && residual.is_finite()) {
            return;
        }
        let mut covariance = self.covariance;
        let mut moment = self.moment;
        for i in 0..DIM {
            for j in 0..DIM {
                covariance[i][j] -= sphi[i] * sphi[j] / denominator;
            }
            moment[i] += phi[i] * residual;
        }
        let weights = mat_vec(&covariance, &moment);
        let finite = |v: &[f64; DIM]| v.iter().all(|x| x.is_finite());
        if !(covariance.iter().all(finite) && finite(&moment) && finite(&weights)) {
            return;
        }
        self.covariance = covariance;
        self.moment = moment;
        self.weights = weights;
        self.observations = self.observations.saturating_add(1);
    }

    /// Predicted residual and the variance of that prediction.
    pub fn predict(&self, a: &Features, b: &Features) -> (f64, f64) {
        let (mean, variance, _) = self.predict_with_prior(a, b);
        (mean, variance)
    }

    /// Predicted residual, its variance, and the variance it had before any observation
    /// ([`ResidualModel::prior_variance`]), from one set of pair features: the planner asks
    /// this for every job and GPU.
    pub fn predict_with_prior(&self, a: &Features, b: &Features) -> (f64, f64, f64) {
        let phi = pair_features(a, b);
        // φᵀΣφ over the upper triangle: the covariance is symmetric.
        let mut quadratic = 0.0;
        for i in 0..DIM {
            let row = &self.covariance[i];
            let mut off_diagonal = 0.0;
            for j in i + 1..DIM {
                off_diagonal += row[j] * phi[j];
            }
            quadratic += phi[i] * (row[i] * phi[i] + 2.0 * off_diagonal);
        }
        let noise = NOISE_STD * NOISE_STD;
        (
            dot(&self.weights, &phi),
            noise * quadratic,
            noise * dot(&phi, &phi) / RIDGE,
        )
    }

    /// The prediction variance before any observation, for normalizing uncertainty.
    pub fn prior_variance(a: &Features, b: &Features) -> f64 {
        let phi = pair_features(a, b);
        NOISE_STD * NOISE_STD * dot(&phi, &phi) / RIDGE
    }
}

fn dot(a: &[f64; DIM], b: &[f64; DIM]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn mat_vec(m: &[[f64; DIM]; DIM], v: &[f64; DIM]) -> [f64; DIM] {
    let mut out = [0.0; DIM];
    for (o, row) in out.iter_mut().zip(m) {
        *o = dot(row, v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_centred_in_log_space_and_widen_with_uncertainty() {
        let (low, high) = interval(0.5, 0.0, 1.645);
        assert!((low - 0.5).abs() < 1e-12 && (high - 0.5).abs() < 1e-12);
        let (low, high) = interval(0.5, 0.2, 1.645);
        // Symmetric in ln(1 + s): (1 + low)(1 + high) = (1.5)².
        assert!(((1.0 + low) * (1.0 + high) - 2.25).abs() < 1e-9);
        let (wider_low, wider_high) = interval(0.5, 0.4, 1.645);
        assert!(wider_low < low && wider_high > high && wider_low > -1.0);
    }

    #[test]
    fn a_refined_belief_moves_towards_the_more_precise_estimate() {
        let prior = PairBelief {
            log_mean: 0.0,
            estimate_var: 1.0,
            noise_var: 0.01,
            learned: false,
        };
        let refined = prior.refined(1.0, 0.25);
        assert!((refined.log_mean - 0.8).abs() < 1e-12);
        assert!((refined.estimate_var - 0.2).abs() < 1e-12);
        assert!(refined.learned && refined.noise_var == 0.01);
    }

    #[test]
    fn running_stats_match_the_textbook() {
        let mut s = RunningStats::default();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            s.push(x);
        }
        assert_eq!(s.count, 8);
        assert!((s.mean - 5.0).abs() < 1e-12);
        assert!((s.variance().unwrap() - 32.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn merging_equals_pushing_one_by_one() {
        let (mut left, mut right, mut all) = Default::default();
        for (i, x) in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
            .into_iter()
            .enumerate()
        {
            let part: &mut RunningStats = if i < 3 { &mut left } else { &mut right };
            part.push(x);
            RunningStats::push(&mut all, x);
        }
        left.merge(&right);
        assert_eq!(left.count, all.count);
        assert!((left.mean - all.mean).abs() < 1e-12);
        assert!((left.variance().unwrap() - all.variance().unwrap()).abs() < 1e-12);
        let moved = all.shifted(1.5);
        assert!((moved.mean - 6.5).abs() < 1e-12 && moved.variance() == all.variance());
    }

    #[test]
    fn the_matrix_overrides_the_prior_as_evidence_grows() {
        let mut m = PairMatrix::default();
        let (mean0, var0) = m.blend(Some(0), Some(1), 0.8);
        assert_eq!((mean0, var0), (0.8, PRIOR_STD * PRIOR_STD));
        let mut last_var = var0;
        for _ in 0..20 {
            m.push_slowdown(0, 1, 0.1);
            let (mean, var) = m.blend(Some(0), Some(1), 0.8);
            assert!(var < last_var);
            last_var = var;
            assert!(mean < 0.8);
        }
        let (mean, _) = m.blend(Some(0), Some(1), 0.8);
        assert!((mean - 0.1).abs() < 0.01, "{mean}");
    }

    #[test]
    fn the_symmetric_shortcut_matches_the_full_quadratic_form() {
        let mut model = ResidualModel::default();
        for i in 0..50 {
            let x = f64::from(i) / 50.0;
            model.learn(&[x, 0.3, 0.1], &[0.5, x, 0.2], x * 0.4 - 0.1);
        }
        let (a, b) = ([0.7, 0.2, 0.4], [0.3, 0.6, 0.1]);
        let phi = pair_features(&a, &b);
        let full = NOISE_STD * NOISE_STD * dot(&phi, &mat_vec(&model.covariance, &phi));
        let (_, variance, prior) = model.predict_with_prior(&a, &b);
        assert!(
            (variance - full).abs() < 1e-12 * full.max(1.0),
            "{variance} vs {full}"
        );
        assert_eq!(prior, ResidualModel::prior_variance(&a, &b));
    }

    #[test]
    fn the_residual_model_learns_a_linear_effect_and_grows_confident() {
        let mut model = ResidualModel::default();
        let a = [0.9, 0.5, 0.3];
        let (_, var_before) = model.predict(&a, &[0.2, 0.2, 0.2]);
        // The truth: residual = 0.5 * util of the partner.
        for i in 0..200 {
            let partner = [f64::from(i % 10) / 10.0, 0.3, 0.2];
            model.learn(&a, &partner, 0.5 * partner[0]);
        }
        let (predicted, var_after) = model.predict(&a, &[0.6, 0.3, 0.2]);
        assert!((predicted - 0.3).abs() < 0.05, "{predicted}");
        assert!(var_after < var_before / 10.0);
    }
}
