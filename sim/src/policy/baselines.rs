//! The baselines Tandem is compared with, each reduced to what the simulated cluster offers.
//!
//! | policy | rule |
//! |---|---|
//! | `exclusive-fifo` | kube-scheduler's default: one job per GPU, jobs in arrival order, first idle GPU(s) in cluster order |
//! | `random` | random co-location: each job to a uniformly drawn GPU that is idle or holds one job it may join (two per GPU) |
//! | `ffd-util` | Horus / Yeung et al.: First-Fit-Decreasing by GPU utilization, at most 3 jobs per GPU, summed utilization ≤ 100%; memory-blind, so OOMs are resubmitted |
//! | `schedtune-min-jct` | SchedTune: each job to the GPU model minimizing its estimated JCT (wait for a GPU of it + solo run time there); exclusive (the catalogs have no memory per model for its memory predictor to act on) |
//! | `jrs-ranking` | JRS / PriRecT ranking: join the resident whose pair has the best observed packing saving (positive only), else an idle GPU |
//! | `lucid-style` | Lucid's packing rule: join the resident of lowest utilization with summed utilization ≤ 100% and memory that fits (two per GPU), else an idle GPU |
//!
//! Multi-GPU jobs, jobs resubmitted after an OOM and jobs not yet profiled take idle GPUs
//! first-fit under every policy.

use std::collections::HashMap;

use rand::Rng as _;
use rand::SeedableRng as _;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::api::{GpuView, Known, MAX_GROUP, Observed, Policy, QueuedJob, Start, View};
use crate::error::Result;

/// The GPUs as a decision changes them: how many jobs each holds and whether it is open to
/// sharing, updated after every start of the decision.
#[derive(Debug)]
pub(crate) struct Board {
    /// Jobs on each GPU.
    pub(crate) count: Vec<usize>,
    /// Whether every job on it may be joined.
    pub(crate) open: Vec<bool>,
    /// Job types on each GPU.
    pub(crate) types: Vec<Vec<usize>>,
    /// Model of each GPU.
    pub(crate) model: Vec<usize>,
}

impl Board {
    pub(crate) fn of(gpus: &[GpuView]) -> Self {
        Self {
            count: gpus.iter().map(|g| g.residents.len()).collect(),
            open: gpus
                .iter()
                .map(|g| g.residents.iter().all(|r| r.shareable))
                .collect(),
            types: gpus
                .iter()
                .map(|g| g.residents.iter().map(|r| r.job_type).collect())
                .collect(),
            model: gpus.iter().map(|g| g.model).collect(),
        }
    }

    fn idle(&self, g: usize) -> bool {
        self.count[g] == 0
    }

    /// Whether a shareable job may join GPU `g` under a cap of `cap` jobs.
    fn joinable(&self, g: usize, cap: usize) -> bool {
        self.count[g] > 0 && self.count[g] < cap.min(MAX_GROUP) && self.open[g]
    }

    /// Starts single-GPU `job` on GPU `g`.
    pub(crate) fn place(&mut self, g: usize, job: &QueuedJob) -> Start {
        self.take(g, job);
        Start {
            job: job.id,
            gpus: vec![g],
        }
    }

    /// The first idle GPU (cluster order) whose model `job` can run on.
    fn first_idle(&self, known: &Known, job: &QueuedJob) -> Option<usize> {
        (0..self.count.len()).find(|&g| self.idle(g) && runs_on(known, self, job, g))
    }

    fn take(&mut self, g: usize, job: &QueuedJob) {
        self.count[g] += 1;
        self.open[g] &= shareable(job);
        self.types[g].push(job.job_type);
    }

    /// Idle GPUs for `job` first-fit in cluster order (all of one model), taken; `None` if no
    /// model has enough.
    pub(crate) fn first_fit(&mut self, job: &QueuedJob, known: &Known) -> Option<Start> {
        let mut by_model: Vec<(usize, Vec<usize>)> = Vec::new();
        for g in 0..self.count.len() {
            let m = self.model[g];
            if !self.idle(g) || !job.may_run_on(known, m) {
                continue;
            }
            let slot = match by_model.iter().position(|(model, _)| *model == m) {
                Some(i) => i,
                None => {
                    by_model.push((m, Vec::new()));
                    by_model.len() - 1
                }
            };
            by_model[slot].1.push(g);
            if by_model[slot].1.len() == job.gpus as usize {
                let gpus = by_model.swap_remove(slot).1;
                for &g in &gpus {
                    self.take(g, job);
                }
                return Some(Start { job: job.id, gpus });
            }
        }
        None
    }
}

/// Whether a queued job may share a GPU once started.
pub(crate) fn shareable(job: &QueuedJob) -> bool {
    job.gpus == 1 && job.profiled && !job.alone
}

/// The loop every sharing baseline shares: jobs in `order`; one that may not share takes idle
/// GPUs first-fit, one that may goes to the GPU `pick` chooses (or waits when it chooses none).
fn place_each<'q>(
    view: &View<'_>,
    order: impl IntoIterator<Item = &'q QueuedJob>,
    mut pick: impl FnMut(&Board, &QueuedJob) -> Option<usize>,
) -> Vec<Start> {
    let mut board = Board::of(view.gpus);
    let mut starts = Vec::new();
    for job in order {
        if !shareable(job) {
            starts.extend(board.first_fit(job, view.known));
        } else if let Some(g) = pick(&board, job) {
            starts.push(board.place(g, job));
        }
    }
    starts
}

/// Whether `job` can run on GPU `g`'s model.
fn runs_on(known: &Known, board: &Board, job: &QueuedJob, g: usize) -> bool {
    job.may_run_on(known, board.model[g])
}

/// kube-scheduler's default: one job per GPU.
#[derive(Debug, Default)]
pub struct ExclusiveFifo;

impl Policy for ExclusiveFifo {
    fn name(&self) -> &str {
        "exclusive-fifo"
    }

    fn decide(&mut self, view: &View<'_>) -> Result<Vec<Start>> {
        let mut board = Board::of(view.gpus);
        Ok(view
            .queue
            .iter()
            .filter_map(|job| board.first_fit(job, view.known))
            .collect())
    }
}

/// Random co-location, two jobs per GPU at most.
#[derive(Debug)]
pub struct RandomColocation {
    rng: Xoshiro256PlusPlus,
}

impl RandomColocation {
    /// A random policy drawing from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5241_4e44),
        }
    }
}

impl Policy for RandomColocation {
    fn name(&self) -> &str {
        "random"
    }

    fn decide(&mut self, view: &View<'_>) -> Result<Vec<Start>> {
        let rng = &mut self.rng;
        Ok(place_each(view, view.queue, |board, job| {
            let candidates: Vec<usize> = (0..board.count.len())
                .filter(|&g| runs_on(view.known, board, job, g))
                .filter(|&g| board.idle(g) || board.joinable(g, 2))
                .collect();
            (!candidates.is_empty()).then(|| candidates[rng.gen_range(0..candidates.len())])
        }))
    }
}

/// Every job type's utilization (measured, else predicted from a declared model), or which
/// type lacks one.
fn utilizations(known: &Known) -> Result<Vec<f32>, String> {
    known
        .types
        .iter()
        .map(|t| {
            t.util_pct.or(t.predicted_util_pct).ok_or_else(|| {
                format!(
                    "needs each job type's GPU utilization; the catalogs measured none for `{}` \
                     and no declared model predicts one",
                    t.name
                )
            })
        })
        .collect()
}

/// Horus-style First-Fit-Decreasing on GPU utilization, at most 3 jobs per GPU.
#[derive(Debug)]
pub struct FfdUtilization {
    util: Vec<f32>,
}

impl FfdUtilization {
    /// Jobs per GPU at most.
    pub const CAP: usize = 3;

    /// The policy, or why it cannot run (a job type with neither a measured nor a predicted
    /// utilization).
    pub fn new(known: &Known) -> Result<Self, String> {
        Ok(Self {
            util: utilizations(known)?,
        })
    }
}

impl Policy for FfdUtilization {
    fn name(&self) -> &str {
        "ffd-util"
    }

    fn decide(&mut self, view: &View<'_>) -> Result<Vec<Start>> {
        let mut order: Vec<&QueuedJob> = view.queue.iter().collect();
        // Decreasing utilization; the sort is stable, so ties keep arrival order.
        order.sort_by(|a, b| self.util[b.job_type].total_cmp(&self.util[a.job_type]));
        let util = &self.util;
        Ok(place_each(view, order, |board, job| {
            let u = util[job.job_type];
            (0..board.count.len()).find(|&g| {
                runs_on(view.known, board, job, g)
                    && (board.idle(g)
                        || (board.joinable(g, Self::CAP)
                            && board.types[g].iter().map(|&t| util[t]).sum::<f32>() + u <= 100.0))
            })
        }))
    }
}

/// Lucid's packing rule: join the lowest-utilization resident that fits, two per GPU.
#[derive(Debug)]
pub struct LucidStyle {
    util: Vec<f32>,
    memory: Vec<Option<u32>>,
}

impl LucidStyle {
    /// The policy, or why it cannot run (a job type with neither a measured nor a predicted
    /// utilization).
    pub fn new(known: &Known) -> Result<Self, String> {
        Ok(Self {
            util: utilizations(known)?,
            memory: known
                .types
                .iter()
                .map(|t| t.profile.as_ref().map(|p| p.mem_used_mib))
                .collect(),
        })
    }
}

impl Policy for LucidStyle {
    fn name(&self) -> &str {
        "lucid-style"
    }

    fn decide(&mut self, view: &View<'_>) -> Result<Vec<Start>> {
        let (util, memory) = (&self.util, &self.memory);
        Ok(place_each(view, view.queue, |board, job| {
            let u = util[job.job_type];
            let partner = (0..board.count.len())
                .filter(|&g| runs_on(view.known, board, job, g) && board.joinable(g, 2))
                .filter(|&g| {
                    let resident = board.types[g][0];
                    let memory_fits = match (memory[resident], memory[job.job_type]) {
                        (Some(a), Some(b)) => {
                            u64::from(a) + u64::from(b)
                                <= u64::from(view.known.models[board.model[g]].memory_mib)
                        }
                        _ => true,
                    };
                    util[resident] + u <= 100.0 && memory_fits
                })
                .min_by(|&a, &b| util[board.types[a][0]].total_cmp(&util[board.types[b][0]]));
            partner.or_else(|| board.first_idle(view.known, job))
        }))
    }
}

/// SchedTune's heterogeneity-aware placement: the GPU model of least estimated JCT.
#[derive(Debug, Default)]
pub struct SchedTuneMinJct;

impl Policy for SchedTuneMinJct {
    fn name(&self) -> &str {
        "schedtune-min-jct"
    }

    fn decide(&mut self, view: &View<'_>) -> Result<Vec<Start>> {
        let known = view.known;
        let mut board = Board::of(view.gpus);
        // Estimated time until each GPU is free: its residents' remaining solo time there.
        let release: Vec<f64> = view
            .gpus
            .iter()
            .map(|g| {
                g.residents
                    .iter()
                    .map(|r| {
                        known
                            .solo_s(r.job_type, g.model, r.steps_left, 1)
                            .unwrap_or(0.0)
                    })
                    .fold(0.0, f64::max)
            })
            .collect();
        let mut starts = Vec::new();
        for job in view.queue {
            // Per model: (estimated JCT, GPUs to take now if the wait is zero).
            let mut best: Option<(f64, usize)> = None;
            for m in 0..known.models.len() {
                if !job.may_run_on(known, m) {
                    continue;
                }
                let Some(run) = known.solo_s(job.job_type, m, job.steps, job.gpus) else {
                    continue;
                };
                let mut waits: Vec<f64> = (0..board.count.len())
                    .filter(|&g| board.model[g] == m)
                    .map(|g| if board.idle(g) { 0.0 } else { release[g] })
                    .collect();
                if waits.len() < job.gpus as usize {
                    continue;
                }
                waits.sort_by(f64::total_cmp);
                let jct = waits[job.gpus as usize - 1] + run;
                if best.is_none_or(|(b, _)| jct < b) {
                    best = Some((jct, m));
                }
            }
            let Some((_, model)) = best else { continue };
            let idle: Vec<usize> = (0..board.count.len())
                .filter(|&g| board.model[g] == model && board.idle(g))
                .take(job.gpus as usize)
                .collect();
            // Waiting for a faster model beats starting now on a slower one.
            if idle.len() == job.gpus as usize {
                for &g in &idle {
                    board.take(g, job);
                }
                starts.push(Start {
                    job: job.id,
                    gpus: idle,
                });
            }
        }
        Ok(starts)
    }
}

/// What JRS / PriRecT ranks a pair by: its packing saving and the worse individual slowdown
/// of its two jobs, both as the catalog defines them ([`tandem_catalog::packing_saving`],
/// [`tandem_catalog::individual_slowdown`]). The simulator's `jrs-ranking` policy and
/// `tandem eval pairs` both rank with it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JrsScore {
    /// Packing saving, a fraction.
    pub packing_saving: f64,
    /// The larger IndSD of the two jobs, a fraction.
    pub worst_slowdown: f64,
}

impl JrsScore {
    /// The score of two jobs taking `solo` seconds alone and `colocated` seconds together.
    pub fn of(solo: [f64; 2], colocated: [f64; 2]) -> Self {
        Self {
            packing_saving: tandem_catalog::packing_saving(solo, colocated),
            worst_slowdown: tandem_catalog::individual_slowdown(solo[0], colocated[0])
                .max(tandem_catalog::individual_slowdown(solo[1], colocated[1])),
        }
    }

    /// Whether the pair is worth forming at all: a pair the ranking's own record says loses
    /// time never is.
    pub fn saves_time(&self) -> bool {
        self.packing_saving > 0.0
    }

    /// JRS's order, better first: higher packing saving, then the lower worst slowdown.
    pub fn rank(&self, other: &Self) -> std::cmp::Ordering {
        other
            .packing_saving
            .total_cmp(&self.packing_saving)
            .then(self.worst_slowdown.total_cmp(&other.worst_slowdown))
    }
}

/// What JRS's ranking knows of a pair: the sum of the scores of its observations.
#[derive(Debug, Clone, Copy, Default)]
struct PairStats {
    saving_sum: f64,
    worst_slowdown_sum: f64,
    n: f64,
}

/// JRS / PriRecT ranking over observed pairs.
#[derive(Debug, Default)]
pub struct JrsRanking {
    /// (model, lower type, higher type) -> observations.
    pairs: HashMap<(usize, usize, usize), PairStats>,
}

impl Policy for JrsRanking {
    fn name(&self) -> &str {
        "jrs-ranking"
    }

    fn learn(&mut self, observed: &Observed) -> Result<()> {
        let [a, b] = observed.types;
        let [sa, sb] = observed.speeds;
        let stats = self
            .pairs
            .entry((observed.model, a.min(b), a.max(b)))
            .or_default();
        // Two jobs of equal work (1 s alone) at these speeds.
        let score = JrsScore::of(
            [1.0; 2],
            tandem_catalog::colocated_times([1.0; 2], [sa, sb]),
        );
        stats.saving_sum += score.packing_saving;
        stats.worst_slowdown_sum += score.worst_slowdown;
        stats.n += 1.0;
        Ok(())
    }

    fn decide(&mut self, view: &View<'_>) -> Result<Vec<Start>> {
        let pairs = &self.pairs;
        Ok(place_each(view, view.queue, |board, job| {
            let mut best: Option<(JrsScore, usize)> = None;
            for g in 0..board.count.len() {
                if !(runs_on(view.known, board, job, g) && board.joinable(g, 2)) {
                    continue;
                }
                let r = board.types[g][0];
                let key = (board.model[g], r.min(job.job_type), r.max(job.job_type));
                let Some(stats) = pairs.get(&key) else {
                    continue;
                };
                let score = JrsScore {
                    packing_saving: stats.saving_sum / stats.n,
                    worst_slowdown: stats.worst_slowdown_sum / stats.n,
                };
                if score.saves_time()
                    && best.is_none_or(|(b, _)| score.rank(&b) == std::cmp::Ordering::Less)
                {
                    best = Some((score, g));
                }
            }
            best.map(|(_, g)| g)
                .or_else(|| board.first_idle(view.known, job))
        }))
    }
}
