//! Interference learned per workload, for jobs that come without telemetry.
//!
//! Many clusters cannot profile every job, and some data sets carry no telemetry at all (none of
//! the bundled catalogs does). What remains is identity: a host keys a recurring job the same
//! way each time it is submitted (HMAC of its image and command, say), so outcomes accumulate per
//! keyed id. This module learns from them the way recommender systems learn from ratings
//! (collaborative filtering, as Paragon and Quasar did for interference): the log slowdown of
//! workload `i` next to workload `j`,
//!
//! ```text
//! y(i, j) = ln(J_c / J_a) ≈ μ + s_i + a_j + u_i · v_j
//! ```
//!
//! with `s_i` how sensitive `i` is, `a_j` how aggressive `j` is and a rank-[`factors::RANK`]
//! interaction `u_i · v_j` for what those two miss. It is fit by alternating ridge regressions
//! over the mean of each measured ordered pair, again at the first prediction after new
//! outcomes (a host that reports a burst of outcomes pays for one fit, not one per outcome);
//! the interaction's ridge scales with what the additive part leaves unexplained, and where the
//! pairs are too few to tell whether the interaction carries to new pairs, cross-validation
//! decides ([`factors::fit`]). Once a workload has been measured next to anyone, its pairs with
//! workloads it never met are predicted too; pairs measured directly blend their own mean in by
//! precision.
//!
//! Log space because slowdowns are heavy-tailed (a job next to a saturating partner can run five
//! times slower): on the Gavel V100 pairs, fitting `ln` keeps one extreme pair from dragging
//! every estimate.
//!
//! Interference differs between GPU models (on Gavel's measurements the same pair can slow down
//! twice as much on a K80 as on a V100), so outcomes are also kept per GPU model
//! ([`OnModel`]): a prediction for one model takes the fit's shift for that model (a ridge
//! mean, so a model with few outcomes keeps the cross-model fit), then the pair's measurements
//! on *other* models, shifted likewise and widened by how much a pair's slowdown was seen to
//! move between models, then the pair's measurements on this model. Evidence transfers across
//! models only as far as it was seen to hold.
//!
//! Memory is the other thing telemetry would have told: two jobs of unknown memory may only
//! share a GPU model they were *observed* sharing ([`Workloads::shared`]), since anything else
//! could run out of memory.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use tandem_api::Outcome;

use crate::identity::workload_of;
use crate::learning::{PairBelief, RunningStats};

mod factors;
mod sharing;

use factors::{Factors, ridge_mean};
use sharing::Sharing;

/// Spread, in log slowdown, of a prediction nothing supports.
pub const PRIOR_LOG_STD: f64 = 0.5;
/// Smallest spread one measured pair claims, so two equal measurements do not claim certainty.
const MIN_LOG_STD: f64 = 0.05;
/// How far, in log slowdown, a pair's slowdown is assumed to move from one GPU model to another
/// until some pair was measured on two.
const TRANSFER_LOG_STD: f64 = 0.25;
/// Log slowdown predicted before any outcome: 50% slower, between no contention and the
/// doubling of two jobs time-slicing a saturated GPU.
const PRIOR_LOG_SLOWDOWN: f64 = 0.405_465_108_108_164_4; // ln 1.5

/// One ordered pair's measurements in the saved form.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CellEntry {
    of: usize,
    next_to: usize,
    #[serde(flatten)]
    log_slowdown: RunningStats,
}

/// One ordered pair's measurements on one GPU model in the saved form.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ModelCellEntry {
    of: usize,
    next_to: usize,
    model: usize,
    #[serde(flatten)]
    log_slowdown: RunningStats,
}

/// One unordered pair's GPU models in the saved form.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SharedEntry {
    a: usize,
    b: usize,
    gpu_models: BTreeSet<String>,
}

/// What is saved of [`Workloads`]: the measurements; the fit is recomputed on load.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Saved {
    ids: Vec<String>,
    cells: Vec<CellEntry>,
    shared: Vec<SharedEntry>,
    /// GPU models outcomes named (absent from states saved before interference was kept per
    /// model: those predict across models, as they did).
    #[serde(default)]
    models: Vec<String>,
    #[serde(default)]
    model_cells: Vec<ModelCellEntry>,
}

/// Which GPU model a prediction is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnModel {
    /// None in particular (a prediction outside any GPU): evidence from every model, pooled.
    Any,
    /// A model some outcome named, by its index.
    Seen(usize),
    /// A model no outcome named yet: everything known transfers, widened.
    Unseen,
}

impl OnModel {
    /// The model as bits, for prediction keys.
    pub(crate) fn key(self) -> u64 {
        match self {
            Self::Any => u64::from(u32::MAX),
            Self::Unseen => u64::from(u32::MAX - 1),
            Self::Seen(m) => m as u64,
        }
    }
}

/// Parameters of the last fit.
#[derive(Debug, Clone, Default, PartialEq)]
struct Fit {
    /// The fitted terms.
    factors: Factors,
    /// Measured pairs each workload is the slowed-down job of, and the partner of.
    as_job: Vec<u32>,
    as_partner: Vec<u32>,
    /// Expected squared error of the fit on a pair it did not see ([`factors::fit`]; at least
    /// `MIN_LOG_STD²`).
    misfit_var: f64,
    /// Run-to-run variance of one measurement, pooled over the pairs measured more than once
    /// (`MIN_LOG_STD²` until there are some).
    noise_var: f64,
    /// How far each GPU model's pairs sit from the cross-model fit, in log slowdown: a ridge
    /// mean of its pairs' residuals, so a model with few outcomes is shifted little.
    model_shift: Vec<f64>,
    /// Variance of one pair's (shifted) mean between GPU models: how far a pair measured on
    /// one model may be on another. `TRANSFER_LOG_STD²` until some pair was measured on two.
    transfer_var: f64,
}

/// Outcomes per keyed job id and the model fit to them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(from = "Saved", into = "Saved")]
pub(crate) struct Workloads {
    ids: Vec<String>,
    /// Index of each id in `ids`: looked up for every job of every request, so hashed.
    index: FxHashMap<String, usize>,
    /// Log slowdown of `of` next to `next_to`, per ordered pair of indexes.
    cells: BTreeMap<(usize, usize), RunningStats>,
    /// GPU models each unordered pair (smaller index first) was observed sharing.
    shared: Sharing,
    /// GPU models outcomes named, and their indexes.
    models: Vec<String>,
    model_index: BTreeMap<String, usize>,
    /// Log slowdown of `of` next to `next_to` on model `model`, per `(of, next_to, model)`:
    /// `cells` split by GPU model.
    model_cells: BTreeMap<(usize, usize, usize), RunningStats>,
    /// The fit to `cells`, computed when first needed after they change: a pure function of
    /// them (fixed start, fixed sweeps), so computing it late changes no prediction.
    fit: OnceLock<Fit>,
}

/// Two knowledge bases are equal when they hold the same measurements; the fit follows.
impl PartialEq for Workloads {
    fn eq(&self, other: &Self) -> bool {
        self.ids == other.ids
            && self.index == other.index
            && self.cells == other.cells
            && self.shared == other.shared
            && self.models == other.models
            && self.model_cells == other.model_cells
    }
}

impl From<Saved> for Workloads {
    fn from(saved: Saved) -> Self {
        let n = saved.ids.len();
        let models = saved.models.len();
        Self {
            model_index: saved
                .models
                .iter()
                .enumerate()
                .map(|(m, name)| (name.clone(), m))
                .collect(),
            models: saved.models,
            model_cells: saved
                .model_cells
                .into_iter()
                .filter(|c| c.of < n && c.next_to < n && c.model < models)
                .map(|c| ((c.of, c.next_to, c.model), c.log_slowdown))
                .collect(),
            index: saved
                .ids
                .iter()
                .enumerate()
                .map(|(i, id)| (id.clone(), i))
                .collect(),
            ids: saved.ids,
            // Entries pointing past the id table come from a corrupted file: drop them rather
            // than index out of bounds later.
            cells: saved
                .cells
                .into_iter()
                .filter(|c| c.of < n && c.next_to < n)
                .map(|c| ((c.of, c.next_to), c.log_slowdown))
                .collect(),
            shared: saved
                .shared
                .into_iter()
                .filter(|s| s.a <= s.b && s.b < n)
                .fold(Sharing::default(), |mut shared, s| {
                    shared.set(s.a, s.b, s.gpu_models);
                    shared
                }),
            fit: OnceLock::new(),
        }
    }
}

impl From<Workloads> for Saved {
    fn from(workloads: Workloads) -> Self {
        Self {
            cells: workloads
                .cells
                .into_iter()
                .map(|((of, next_to), log_slowdown)| CellEntry {
                    of,
                    next_to,
                    log_slowdown,
                })
                .collect(),
            shared: workloads
                .shared
                .iter()
                .map(|((a, b), gpu_models)| SharedEntry {
                    a,
                    b,
                    gpu_models: gpu_models.clone(),
                })
                .collect(),
            ids: workloads.ids,
            models: workloads.models,
            model_cells: workloads
                .model_cells
                .into_iter()
                .map(|((of, next_to, model), log_slowdown)| ModelCellEntry {
                    of,
                    next_to,
                    model,
                    log_slowdown,
                })
                .collect(),
        }
    }
}

impl Workloads {
    /// Every id some outcome named.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &str> {
        self.ids.iter().map(String::as_str)
    }

    /// Forgets the ids of `gone` and every measurement of a pair one of them was in; the
    /// others keep their measurements (under new indexes) and the fit is made again.
    pub(crate) fn forget(&mut self, gone: &BTreeSet<&str>) {
        if !self.ids.iter().any(|id| gone.contains(id.as_str())) {
            return;
        }
        let saved = Saved::from(std::mem::take(self));
        // Each old index's new one, `None` for a forgotten id.
        let mut kept = Vec::new();
        let mut index = Vec::with_capacity(saved.ids.len());
        for id in saved.ids {
            if gone.contains(id.as_str()) {
                index.push(None);
            } else {
                index.push(Some(kept.len()));
                kept.push(id);
            }
        }
        let new = |i: usize| index.get(i).copied().flatten();
        let pair = |a: usize, b: usize| Some((new(a)?, new(b)?));
        *self = Self::from(Saved {
            ids: kept,
            cells: saved
                .cells
                .into_iter()
                .filter_map(|c| {
                    let (of, next_to) = pair(c.of, c.next_to)?;
                    Some(CellEntry { of, next_to, ..c })
                })
                .collect(),
            shared: saved
                .shared
                .into_iter()
                .filter_map(|s| {
                    let (a, b) = pair(s.a, s.b)?;
                    Some(SharedEntry { a, b, ..s })
                })
                .collect(),
            models: saved.models,
            model_cells: saved
                .model_cells
                .into_iter()
                .filter_map(|c| {
                    let (of, next_to) = pair(c.of, c.next_to)?;
                    Some(ModelCellEntry { of, next_to, ..c })
                })
                .collect(),
        });
    }

    /// The index of a keyed id that some outcome named.
    pub(crate) fn index(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    fn intern(&mut self, id: &str) -> usize {
        if let Some(&i) = self.index.get(id) {
            return i;
        }
        self.ids.push(id.to_owned());
        self.index.insert(id.to_owned(), self.ids.len() - 1);
        self.ids.len() - 1
    }

    /// Which model a prediction on a GPU of `gpu_model` is for.
    pub(crate) fn on_model(&self, gpu_model: &str) -> OnModel {
        self.model_index
            .get(gpu_model)
            .map_or(OnModel::Unseen, |&m| OnModel::Seen(m))
    }

    fn intern_model(&mut self, gpu_model: &str) -> usize {
        if let Some(&m) = self.model_index.get(gpu_model) {
            return m;
        }
        self.models.push(gpu_model.to_owned());
        self.model_index
            .insert(gpu_model.to_owned(), self.models.len() - 1);
        self.models.len() - 1
    }

    /// Learns from a validated outcome: each job's log slowdown, charged in equal shares to its
    /// partners (pairwise effects add up in log space), and that every pair of it fit on the
    /// GPU model.
    pub(crate) fn learn(&mut self, outcome: &Outcome) {
        let members: Vec<usize> = outcome
            .jobs
            .iter()
            .map(|id| self.intern(workload_of(id)))
            .collect();
        let model = self.intern_model(&outcome.gpu_model);
        let partners = (members.len() - 1) as f64;
        for (i, &of) in members.iter().enumerate() {
            let log_slowdown = (outcome.colocated_s[i] / outcome.solo_s[i]).ln() / partners;
            for (j, &next_to) in members.iter().enumerate() {
                if i != j {
                    self.cells
                        .entry((of, next_to))
                        .or_default()
                        .push(log_slowdown);
                    self.model_cells
                        .entry((of, next_to, model))
                        .or_default()
                        .push(log_slowdown);
                    self.shared.insert(of, next_to, &outcome.gpu_model);
                }
            }
        }
        self.fit = OnceLock::new();
    }

    /// Whether workloads `a` and `b` were observed sharing a GPU of `gpu_model`.
    pub(crate) fn shared(&self, a: Option<usize>, b: Option<usize>, gpu_model: &str) -> bool {
        match (a, b) {
            // `a == b`: two instances of one workload, which may share when they were seen to.
            (Some(a), Some(b)) => self
                .shared
                .models(a, b)
                .is_some_and(|models| models.contains(gpu_model)),
            _ => false,
        }
    }

    /// Whether `a` and `b` were observed sharing a GPU of any of `gpu_models`.
    pub(crate) fn shared_on_any<'m>(
        &self,
        a: Option<usize>,
        b: Option<usize>,
        mut gpu_models: impl Iterator<Item = &'m str>,
    ) -> bool {
        gpu_models.any(|model| self.shared(a, b, model))
    }

    /// What is believed before any outcome about a job with no profile: a 50% slowdown, give
    /// or take [`PRIOR_LOG_STD`] in log slowdown.
    pub(crate) fn no_evidence() -> PairBelief {
        PairBelief {
            log_mean: PRIOR_LOG_SLOWDOWN,
            estimate_var: PRIOR_LOG_STD * PRIOR_LOG_STD,
            noise_var: MIN_LOG_STD * MIN_LOG_STD,
            learned: false,
        }
    }

    /// `base` (what the layers below — the profiles' model, or the no-evidence prior — predict
    /// for `of` next to `next_to`) refined by the more specific layers this model holds, for a
    /// GPU of `model`: what the recurring workloads taught (the fitted sensitivities,
    /// aggressiveness and interaction, shifted for the model), weighed by how much each side
    /// was measured; then the measurements of this very pair on other GPU models, as far as
    /// they transfer; then those on this model. Each layer shrinks towards the one below by
    /// its evidence, so a pair measured many times converges to its measured mean on that
    /// model and a pair of workloads never seen keeps `base` untouched.
    pub(crate) fn refine(
        &self,
        of: Option<usize>,
        next_to: Option<usize>,
        model: OnModel,
        base: PairBelief,
    ) -> PairBelief {
        if self.cells.is_empty() {
            return base;
        }
        let fit = self.fit();
        let shift = |m: usize| fit.model_shift.get(m).copied().unwrap_or(0.0);
        let here = match model {
            OnModel::Seen(m) => shift(m),
            OnModel::Any | OnModel::Unseen => 0.0,
        };
        let seen_as_job = of.map_or(0, |i| fit.as_job[i]);
        let seen_as_partner = next_to.map_or(0, |j| fit.as_partner[j]);
        let mut belief = PairBelief {
            // Run-to-run scatter is a property of the GPUs and jobs, learned across every
            // pair measured more than once on one model.
            noise_var: fit.noise_var,
            ..base
        };
        if seen_as_job + seen_as_partner > 0 {
            let f = &fit.factors;
            let mut mean = f.mean + here;
            if let Some(i) = of {
                mean += f.sensitivity[i];
            }
            if let Some(j) = next_to {
                mean += f.aggressiveness[j];
            }
            if let (Some(i), Some(j)) = (of, next_to) {
                mean += f.dot(i, j);
            }
            // The fit's own error on pairs it never saw, widened where either side is thin.
            // The widening scales with that error, not with the no-evidence prior: on catalogs of
            // mild interference a fixed prior term made 90% intervals cover every held-out pair
            // (the evaluation of the layered predictions).
            let thin =
                1.0 / (1.0 + f64::from(seen_as_job)) + 1.0 / (1.0 + f64::from(seen_as_partner));
            let var = fit.misfit_var * (1.0 + thin);
            belief = if base != Self::no_evidence() {
                belief.refined(mean, var)
            } else {
                // With nothing below but the no-evidence prior, the fit's own mean is the
                // better population prior (learned from every pair, not assumed): take the
                // fit as it is rather than pull it towards a 50% guess.
                PairBelief {
                    log_mean: mean,
                    estimate_var: var,
                    learned: true,
                    ..belief
                }
            };
        }
        let Some((i, j)) = of.zip(next_to) else {
            return belief;
        };
        // The pair's measurements, split into this model's and the others' (shifted to this
        // model). A knowledge base saved before models were told apart has only the pooled
        // cell, which then stands for this model's, as it did.
        let (mut others, mut this) = (RunningStats::default(), RunningStats::default());
        let mut per_model = false;
        for (&(_, _, m), stats) in self.model_cells.range((i, j, 0)..=(i, j, usize::MAX)) {
            per_model = true;
            match model {
                OnModel::Seen(target) if target == m => this = *stats,
                OnModel::Any => this.merge(stats),
                OnModel::Seen(_) | OnModel::Unseen => {
                    others.merge(&stats.shifted(here - shift(m)));
                }
            }
        }
        if !per_model && let Some(cell) = self.cells.get(&(i, j)) {
            this = *cell;
        }
        if others.count > 0 {
            // Another model's measurements say what this pair does there: here only as far as
            // pairs were seen to keep their slowdown from one model to another.
            let own = others
                .variance()
                .unwrap_or(0.0)
                .max(MIN_LOG_STD * MIN_LOG_STD);
            belief = belief.refined(others.mean, own / others.count as f64 + fit.transfer_var);
        }
        if this.count > 0 {
            // The pair's own measurements weigh as their own scatter says (at least
            // `MIN_LOG_STD` per run): weighing a measured pair by the pooled scatter let the
            // fit overrule what was measured (the simulator's demo lost 0.7 h of average JCT
            // that way). The pooled scatter still widens the prediction of a pair measured
            // once or twice.
            let own = this
                .variance()
                .unwrap_or(0.0)
                .max(MIN_LOG_STD * MIN_LOG_STD);
            belief = belief.refined(this.mean, own / this.count as f64);
            belief.noise_var = if this.count >= 3 {
                own
            } else {
                own.max(fit.noise_var)
            };
        }
        belief
    }

    /// How uncertain the engine is about a workload as a whole, 0..=1: 1 for one no outcome
    /// named, shrinking with the pairs it was measured in. Orders precedence like the
    /// clustering's assignment uncertainty does for profiled jobs.
    pub(crate) fn uncertainty(&self, workload: Option<usize>) -> f64 {
        workload
            .and_then(|i| self.fit().as_job.get(i))
            .map_or(1.0, |&n| 1.0 / (1.0 + f64::from(n)).sqrt())
    }

    /// The model fit to every measured pair, fit now if the pairs changed since the last one.
    fn fit(&self) -> &Fit {
        self.fit.get_or_init(|| self.refit())
    }

    /// Fits the model to every measured pair.
    fn refit(&self) -> Fit {
        let n = self.ids.len();
        let mut fit = Fit {
            as_job: vec![0; n],
            as_partner: vec![0; n],
            ..Fit::default()
        };
        // Scatter within one model: the pooled cells also mix the models' differences.
        let within_model: Vec<&RunningStats> = if self.model_cells.is_empty() {
            self.cells.values().collect()
        } else {
            self.model_cells.values().collect()
        };
        let (pooled, degrees) = within_model
            .iter()
            .filter_map(|c| Some((c.variance()? * (c.count - 1) as f64, c.count - 1)))
            .fold((0.0, 0), |(sum, n), (m2, d)| (sum + m2, n + d));
        fit.noise_var = if degrees > 0 {
            (pooled / degrees as f64).max(MIN_LOG_STD * MIN_LOG_STD)
        } else {
            MIN_LOG_STD * MIN_LOG_STD
        };
        if self.cells.is_empty() {
            fit.factors = Factors::zero(n);
            fit.misfit_var = PRIOR_LOG_STD * PRIOR_LOG_STD;
            return fit;
        }
        let cells: Vec<factors::Cell> = self
            .cells
            .iter()
            .map(|(&(i, j), stats)| (i, j, stats.mean))
            .collect();
        for &(i, j, _) in &cells {
            fit.as_job[i] += 1;
            fit.as_partner[j] += 1;
        }
        let fitted = factors::fit(n, &cells);
        fit.factors = fitted.factors;
        fit.misfit_var = fitted.misfit_var.max(MIN_LOG_STD * MIN_LOG_STD);
        self.fit_models(&mut fit);
        fit
    }

    /// The per-model part of `fit`: each model's shift from the cross-model fit (a ridge mean
    /// of its pairs' residuals) and how far one pair's shifted mean moves between models.
    fn fit_models(&self, fit: &mut Fit) {
        let predicted = |i: usize, j: usize| fit.factors.predict(i, j);
        let mut residuals = vec![(0.0, 0); self.models.len()];
        for (&(i, j, m), stats) in &self.model_cells {
            residuals[m].0 += stats.mean - predicted(i, j);
            residuals[m].1 += 1;
        }
        fit.model_shift = residuals
            .into_iter()
            .map(|(sum, n)| ridge_mean(std::iter::once(sum), n))
            .collect();
        // Pairs measured on two models or more: the spread of their shifted means, less what
        // run-to-run scatter alone would put there.
        let (mut squared, mut degrees) = (0.0, 0);
        let mut pair_means: Vec<(f64, u64)> = Vec::new();
        let mut cells = self.model_cells.iter().peekable();
        while let Some((&(i, j, m), stats)) = cells.next() {
            pair_means.push((stats.mean - fit.model_shift[m], stats.count));
            if cells
                .peek()
                .is_some_and(|&(&(a, b, _), _)| (a, b) == (i, j))
            {
                continue;
            }
            if pair_means.len() >= 2 {
                let k = pair_means.len() as f64;
                let centre = pair_means.iter().map(|p| p.0).sum::<f64>() / k;
                let noise: f64 = pair_means
                    .iter()
                    .map(|&(_, count)| fit.noise_var / count as f64)
                    .sum::<f64>()
                    / k;
                let spread = pair_means
                    .iter()
                    .map(|p| (p.0 - centre).powi(2))
                    .sum::<f64>()
                    / (k - 1.0);
                squared += (spread - noise) * (k - 1.0);
                degrees += pair_means.len() - 1;
            }
            pair_means.clear();
        }
        fit.transfer_var = if degrees > 0 {
            (squared / degrees as f64).max(MIN_LOG_STD * MIN_LOG_STD)
        } else {
            TRANSFER_LOG_STD * TRANSFER_LOG_STD
        };
    }
}

#[cfg(test)]
mod tests;
