//! The per-workload model's arithmetic: `y(i, j) ≈ μ + s_i + a_j + u_i · v_j` fit to the
//! measured ordered pairs by alternating ridge regressions, and the choice, by cross-validation
//! over the pairs, of whether the interaction `u_i · v_j` is fit at all.

/// Rank of the interaction term.
pub const RANK: usize = 2;
/// Ridge penalty of each workload's sensitivity and aggressiveness, in units of one pair's
/// squared error (the interaction's scales with the data: [`interaction_ridge`]).
const RIDGE: f64 = 1.0;
/// Least ridge of the interaction's factors, so that a fit to pairs the additive part explains
/// exactly still has a positive determinant to solve with.
const MIN_RIDGE: f64 = 1e-6;
/// Most alternating sweeps per fit; the fit is small, twenty are plenty.
const SWEEPS: usize = 20;
/// Sweeps of the additive part alone before the interaction is fit: enough to size the
/// interaction's ridge.
const ROUGH_SWEEPS: usize = 5;
/// A fit stops sweeping once no term moved by more than this in a sweep (log slowdown: a
/// millionth of a percent).
const SETTLED: f64 = 1e-8;
/// Least share of the measured pairs taken as left over once the fit's parameters are
/// counted, when its training error is inflated into its error on new pairs ([`fit`]).
const LEFT_FLOOR: f64 = 0.7;
/// Folds of the cross-validation that decides whether the interaction is fit.
const FOLDS: usize = 5;

/// One measured ordered pair: the slowed-down workload, its partner and the mean log slowdown.
pub(super) type Cell = (usize, usize, f64);

/// The fitted terms, one entry per workload.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Factors {
    /// `μ`, the mean log slowdown over the measured pairs.
    pub mean: f64,
    /// `s_i`: how much more than the mean workload `i` is slowed down.
    pub sensitivity: Vec<f64>,
    /// `a_j`: how much more than the mean workload `j` slows its partner down.
    pub aggressiveness: Vec<f64>,
    /// `u_i`: workload `i`'s side of the interaction, as the slowed-down job.
    pub u: Vec<[f64; RANK]>,
    /// `v_j`: workload `j`'s side of the interaction, as the partner.
    pub v: Vec<[f64; RANK]>,
}

impl Factors {
    /// Every term zero, for `n` workloads.
    pub fn zero(n: usize) -> Self {
        Self {
            mean: 0.0,
            sensitivity: vec![0.0; n],
            aggressiveness: vec![0.0; n],
            u: vec![[0.0; RANK]; n],
            v: vec![[0.0; RANK]; n],
        }
    }

    /// The interaction of `i` next to `j`, `u_i · v_j`.
    pub fn dot(&self, i: usize, j: usize) -> f64 {
        dot(&self.u[i], &self.v[j])
    }

    /// The fitted log slowdown of `i` next to `j`.
    pub fn predict(&self, i: usize, j: usize) -> f64 {
        self.mean + self.sensitivity[i] + self.aggressiveness[j] + self.dot(i, j)
    }
}

/// A fit to the measured pairs and its expected squared error on pairs it did not see.
pub(super) struct Fitted {
    /// The fitted terms.
    pub factors: Factors,
    /// Expected squared error of the fit on a pair it did not see.
    pub misfit_var: f64,
}

/// Fits `cells` (of `n` workloads, at least one cell), with or without the interaction, and
/// estimates the fit's squared error on pairs it did not see.
///
/// - With fewer pairs than the interaction would have parameters, it would only fit their
///   scatter: the additive part alone.
/// - With at least `1 / (1 - LEFT_FLOOR)` pairs per parameter, the interaction, and the
///   error on new pairs is its mean squared error on the measured ones divided by the share
///   of pairs left per parameter.
/// - Between the two that share would fall below `LEFT_FLOOR`, where the training error says
///   little of new pairs (the ridge, not the data, holds many parameters; a floor of 0.5
///   overstated the error on new pairs: held-out 90% intervals covered 97.5-98.7% on the
///   milder Gavel catalogs; at 0.7, 89.9-96.8%, docs/EVALUATION.md). There `FOLDS`-fold
///   cross-validation over the unordered pairs (both orders of a pair left out together)
///   decides: the interaction is fit if it predicts the pairs left out clearly better than the
///   additive part alone ([`HeldOut::interaction_wins`]), and the error measured on them is
///   the estimate.
pub(super) fn fit(n: usize, cells: &[Cell]) -> Fitted {
    let active = active(n, cells);
    let pairs = cells.len() as f64;
    let interaction_parameters = 1 + active * (1 + RANK);
    let corrected = |squared: f64, parameters: usize| {
        squared / pairs / (1.0 - parameters as f64 / pairs).max(LEFT_FLOOR)
    };
    if interaction_parameters >= cells.len() {
        let (factors, additive) = fit_factors(n, cells, false);
        let misfit_var = corrected(additive * pairs, 1 + active);
        return Fitted {
            factors,
            misfit_var,
        };
    }
    let (interaction, held_out) = if interaction_parameters as f64 <= (1.0 - LEFT_FLOOR) * pairs {
        (true, None)
    } else {
        let measured = held_out_errors(n, cells);
        let interaction = measured.interaction_wins();
        let error = if interaction {
            measured.with
        } else {
            measured.without
        };
        (interaction, Some(error))
    };
    let (factors, _) = fit_factors(n, cells, interaction);
    let misfit_var = match held_out {
        Some(measured) => measured,
        None => {
            let squared = cells
                .iter()
                .map(|&(i, j, y)| (y - factors.predict(i, j)).powi(2))
                .sum::<f64>();
            corrected(squared, interaction_parameters)
        }
    };
    Fitted {
        factors,
        misfit_var,
    }
}

/// Rows and columns with a measurement: workloads measured as the slowed-down job, plus those
/// measured as the partner.
fn active(n: usize, cells: &[Cell]) -> usize {
    let (mut as_job, mut as_partner) = (vec![false; n], vec![false; n]);
    for &(i, j, _) in cells {
        as_job[i] = true;
        as_partner[j] = true;
    }
    as_job
        .iter()
        .chain(&as_partner)
        .filter(|&&seen| seen)
        .count()
}

/// What cross-validation over `FOLDS` folds of the unordered pairs measured of the fit with the
/// interaction against its additive part alone.
struct HeldOut {
    /// Mean squared error on the pairs left out, with the interaction.
    with: f64,
    /// The same, of the additive part alone.
    without: f64,
    /// Standard error of the mean of their difference, pair by pair.
    difference_error: f64,
}

impl HeldOut {
    /// Whether the interaction predicts the pairs left out better by more than the standard
    /// error of the difference (the one-standard-error rule: the simpler fit unless the other
    /// is clearly better, as a difference of that size arises from which pairs fell in which
    /// fold alone).
    fn interaction_wins(&self) -> bool {
        self.with + self.difference_error < self.without
    }
}

/// Cross-validates the fit to `cells` with and without the interaction.
fn held_out_errors(n: usize, cells: &[Cell]) -> HeldOut {
    // Each unordered pair's fold, by its rank among them (sorted, so reproducible).
    let mut pairs: Vec<(usize, usize)> = cells
        .iter()
        .map(|&(i, j, _)| (i.min(j), i.max(j)))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let fold_of = |i: usize, j: usize| {
        pairs
            .binary_search(&(i.min(j), i.max(j)))
            .map_or(0, |k| k % FOLDS)
    };
    let mut differences = Vec::with_capacity(cells.len());
    let (mut with, mut without) = (0.0, 0.0);
    for fold in 0..FOLDS {
        let (held, kept): (Vec<Cell>, Vec<Cell>) =
            cells.iter().partition(|&&(i, j, _)| fold_of(i, j) == fold);
        let (joint, _) = fit_factors(n, &kept, true);
        let (additive, _) = fit_factors(n, &kept, false);
        for &(i, j, y) in &held {
            let (a, b) = (
                (y - joint.predict(i, j)).powi(2),
                (y - additive.predict(i, j)).powi(2),
            );
            with += a;
            without += b;
            differences.push(a - b);
        }
    }
    let count = cells.len() as f64;
    let mean = differences.iter().sum::<f64>() / count;
    let spread =
        differences.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (count - 1.0).max(1.0);
    HeldOut {
        with: with / count,
        without: without / count,
        difference_error: (spread / count).sqrt(),
    }
}

/// Fits the factors to `cells` (possibly none): the additive part first, then, if
/// `interaction`, all terms together from there, the interaction's ridge set by what the
/// additive part left ([`interaction_ridge`]). Returns the factors and the additive part's
/// mean squared error.
fn fit_factors(n: usize, cells: &[Cell], interaction: bool) -> (Factors, f64) {
    let mut f = Factors::zero(n);
    if !cells.is_empty() {
        f.mean = cells.iter().map(|c| c.2).sum::<f64>() / cells.len() as f64;
    }
    // Each pair's log slowdown less the mean, the first thing every sweep takes off it.
    let mut by_job: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    let mut by_partner: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    for &(i, j, y) in cells {
        by_job[i].push((j, y - f.mean));
        by_partner[j].push((i, y - f.mean));
    }
    // With the interaction to fit, the additive part only sets its ridge, and the sweeps of
    // all terms together refine it further.
    let sweeps = if interaction { ROUGH_SWEEPS } else { SWEEPS };
    for _ in 0..sweeps {
        if sweep_additive(&mut f, &by_job, &by_partner) <= SETTLED {
            break;
        }
    }
    let additive = if cells.is_empty() {
        0.0
    } else {
        cells
            .iter()
            .map(|&(i, j, y)| (y - f.predict(i, j)).powi(2))
            .sum::<f64>()
            / cells.len() as f64
    };
    if !interaction {
        return (f, additive);
    }
    let jobs = by_job
        .iter()
        .filter(|pairs| !pairs.is_empty())
        .count()
        .max(1);
    let ridge = interaction_ridge(additive, cells.len() as f64 / jobs as f64);
    // A fixed, asymmetric start: alternating least squares needs one that is not a saddle
    // point, and a fixed one keeps fits reproducible.
    f.u = (0..n).map(|i| start(i, 1)).collect();
    f.v = (0..n).map(|i| start(i, 2)).collect();
    for _ in 0..SWEEPS {
        let mut moved = sweep_additive(&mut f, &by_job, &by_partner);
        for (i, pairs) in by_job.iter().enumerate() {
            let rows = pairs.iter().map(|&(j, centred)| {
                let r = centred - f.sensitivity[i] - f.aggressiveness[j];
                (f.v[j], r)
            });
            moved = moved.max(replace(&mut f.u[i], ridge_solve(rows, ridge)));
        }
        for (j, pairs) in by_partner.iter().enumerate() {
            let rows = pairs.iter().map(|&(i, centred)| {
                let r = centred - f.sensitivity[i] - f.aggressiveness[j];
                (f.u[i], r)
            });
            moved = moved.max(replace(&mut f.v[j], ridge_solve(rows, ridge)));
        }
        if moved <= SETTLED {
            break;
        }
    }
    (f, additive)
}

/// One sweep over the sensitivities, then the aggressivenesses, the interaction held;
/// returns the largest change of a term. `by_job[i]` holds `(j, y - μ)` for each pair `i`
/// was measured in as the slowed-down job, `by_partner[j]` the same by partner.
fn sweep_additive(
    f: &mut Factors,
    by_job: &[Vec<(usize, f64)>],
    by_partner: &[Vec<(usize, f64)>],
) -> f64 {
    let mut moved: f64 = 0.0;
    for (i, pairs) in by_job.iter().enumerate() {
        let residuals = pairs
            .iter()
            .map(|&(j, centred)| centred - f.aggressiveness[j] - dot(&f.u[i], &f.v[j]));
        let s = ridge_mean(residuals, pairs.len());
        moved = moved.max((s - f.sensitivity[i]).abs());
        f.sensitivity[i] = s;
    }
    for (j, pairs) in by_partner.iter().enumerate() {
        let residuals = pairs
            .iter()
            .map(|&(i, centred)| centred - f.sensitivity[i] - dot(&f.u[i], &f.v[j]));
        let a = ridge_mean(residuals, pairs.len());
        moved = moved.max((a - f.aggressiveness[j]).abs());
        f.aggressiveness[j] = a;
    }
    moved
}

/// Sets `factor` to `new`; returns the largest change of a coordinate.
fn replace(factor: &mut [f64; RANK], new: [f64; RANK]) -> f64 {
    let moved = factor
        .iter()
        .zip(&new)
        .fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
    *factor = new;
    moved
}

fn start(i: usize, salt: usize) -> [f64; RANK] {
    let mut out = [0.0; RANK];
    for (k, x) in out.iter_mut().enumerate() {
        let h = (i * 31 + k * 17 + salt * 7 + 3) % 11;
        *x = (h as f64 / 11.0 - 0.5) * 0.2;
    }
    out
}

fn dot(a: &[f64; RANK], b: &[f64; RANK]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Ridge estimate of a shared offset: `Σ r / (n + λ)`.
pub(super) fn ridge_mean(residuals: impl Iterator<Item = f64>, n: usize) -> f64 {
    residuals.sum::<f64>() / (n as f64 + RIDGE)
}

/// The ridge of the interaction's factors, from the mean square `additive_var` of what the
/// additive part leaves unexplained over the measured pairs and the pairs measured per
/// workload, `per_job`: `√(additive_var · per_job)`. A ridge `λ` on both factors shrinks each
/// singular value of the interaction by `λ` and drops those below it, and scatter of that size
/// spread over `per_job` entries per row makes singular values of about that much: the
/// interaction is kept where it stands out of the scatter, whatever the scale of the slowdowns
/// (a fixed ridge dropped every interaction on the milder catalogs, and with it a quarter of
/// the held-out accuracy: docs/EVALUATION.md).
fn interaction_ridge(additive_var: f64, per_job: f64) -> f64 {
    (additive_var * per_job).sqrt()
}

/// Ridge regression `argmin_w Σ (r - x·w)² + λ|w|²` for the rank-sized `w`, `λ` = `ridge`.
fn ridge_solve(rows: impl Iterator<Item = ([f64; RANK], f64)>, ridge: f64) -> [f64; RANK] {
    // The Gram matrix is symmetric: its three distinct entries, then the moments.
    let (mut aa, mut ab, mut bb) = (0.0, 0.0, 0.0);
    let (mut ar, mut br) = (0.0, 0.0);
    for ([a, b], r) in rows {
        ar += a * r;
        br += b * r;
        aa += a * a;
        ab += a * b;
        bb += b * b;
    }
    let ridge = ridge.max(MIN_RIDGE);
    let (aa, bb) = (aa + ridge, bb + ridge);
    // Two unknowns: Cramer's rule; the ridge keeps the determinant positive.
    let det = aa * bb - ab * ab;
    [(ar * bb - br * ab) / det, (aa * br - ab * ar) / det]
}
