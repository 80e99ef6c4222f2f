//! Turning a queue into placements: the memory guard, the per-GPU job cap and the objectives.
//!
//! Under `balanced`, sharing is for contention: while there are idle GPUs enough for every
//! queued job, each starts alone. Otherwise queued jobs are first paired by maximum-weight
//! matching and each pair started on an idle GPU ([`Planner::place_matched_pairs`]). Then jobs are placed one at a time
//! (surest first, see below; largest memory first for `max-packing`) on the GPU that the
//! objective values most among those the job fits:
//! - `balanced`: the marginal time saved by sharing (in solo-time units), minus a penalty once
//!   the group's worst predicted slowdown, raised in proportion to the prediction's
//!   uncertainty, passes [`SLOWDOWN_TOLERANCE`]; a co-location worth
//!   less than running alone is refused, and the job stays queued rather than wreck its
//!   co-runners;
//! - `min-slowdown`: the smallest worst predicted slowdown (an idle GPU is best);
//! - `max-packing`: best fit, the least memory left over.
//!
//! A job of unknown memory (no profile, none observed under its id) may run alone on an idle GPU,
//! or share one with exactly one job it was observed sharing a GPU of that model with: an
//! outcome proves the two fit together, and nothing else would. A GPU holding such a job is
//! closed to everyone else.
//!
//! Ties go to the first GPU in the order given. With probability `policy.exploration` the
//! choice is instead drawn uniformly among the GPUs the job fits, from an RNG seeded by the
//! recommender's seed and the queue, so the same seed and queue give the same answer.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use smallvec::SmallVec;
use tandem_api::{
    Fit, Gpu, GpuScore, GpuSpec, Job, Objective, Placement, Policy, Prediction, Recommendation,
    Unplaced,
};

use crate::Result;
use crate::heterogeneity::priority_weights;
use crate::knowledge::{JobView, Knowledge, Slowdowns};
use crate::{grouping, interference};

/// Worst individual slowdown `balanced` accepts without penalty (50%, the threshold the
/// evaluation counts as a bad pairing).
pub const SLOWDOWN_TOLERANCE: f64 = 0.5;
/// Value `balanced` loses per unit of slowdown beyond the tolerance.
const SLOWDOWN_PENALTY: f64 = 1.0;
/// Slowdown added, per unit of uncertainty (0..=1), to the worst predicted slowdown before the
/// penalty applies.
const RISK_AVERSION: f64 = 0.5;
/// How much sooner a job must finish on a busy GPU, waiting for it, than on the idle GPU it
/// could start on now, for the planner to keep it queued: estimates of when a GPU frees up are
/// optimistic (they assume its residents run at their solo speed), so waiting must clearly pay.
pub const WAIT_GAIN: f64 = 0.25;
/// Most queued jobs `balanced` pairs by matching; above it (the edges grow as n²) it places
/// jobs greedily only.
pub const PAIRING_LIMIT: usize = 600;

struct Member<'a> {
    id: &'a str,
    view: JobView,
}

/// A queued job as seen on each GPU model of the request.
#[derive(Debug, Clone)]
struct Resolved {
    /// The job on each model (index into [`Planner::models`]): the memory the guard reserves
    /// differs by model, the rest does not.
    views: SmallVec<[JobView; 4]>,
    /// What running there costs beyond the job's best model, as a fraction of the best: run
    /// time, weighted by price or power under a `cost` or `energy` priority. 0 on the best
    /// model, and everywhere when the engine knows no speed of the job.
    slowness: SmallVec<[f64; 4]>,
    /// Run time alone on each model, s, when the job's work and speed there are known.
    solo_s: SmallVec<[Option<f64>; 4]>,
    /// Whether its user cares about finishing soon (`latency`, the default) rather than cost
    /// or energy, which waiting for a faster GPU does not lower.
    latency: bool,
}

impl Resolved {
    /// The job as every model sees it alike (features, cluster, workload).
    fn any(&self) -> &JobView {
        &self.views[0]
    }
}

/// What running `a` on model `ma` and `b` on model `mb` costs together: the sum of their run
/// times when both want latency and both are known (what average JCT adds up), else of their
/// slownesses (weighted by their priorities).
fn pair_cost(a: &Resolved, ma: usize, b: &Resolved, mb: usize) -> f64 {
    match (a.solo_s[ma], b.solo_s[mb]) {
        (Some(ta), Some(tb)) if a.latency && b.latency => ta + tb,
        _ => a.slowness[ma] + b.slowness[mb],
    }
}

/// One GPU as the plan fills it.
struct GpuState<'a> {
    gpu: &'a Gpu,
    /// Index of its model in [`Planner::models`].
    model: usize,
    /// Residents first, then jobs placed by this plan.
    members: SmallVec<[Member<'a>; 2]>,
    /// How many of `members` are residents.
    residents: usize,
    /// Memory of the members whose memory is known.
    used_mib: u64,
    /// A member whose memory is unknown: the GPU's free memory is unknown with it.
    unknown_memory: Option<&'a str>,
    /// Time the current members save by sharing, in solo-time units.
    time_saved: f64,
    /// Most members it may hold: the policy's cap for its model.
    cap: usize,
}

impl GpuState<'_> {
    fn capacity(&self) -> u64 {
        u64::from(self.gpu.spec.memory_mib)
    }

    /// Free memory; none while a member's memory is unknown.
    fn free_mib(&self) -> u64 {
        if self.unknown_memory.is_some() {
            return 0;
        }
        self.capacity().saturating_sub(self.used_mib)
    }

    /// Memory the group holds, the whole GPU while a member's memory is unknown.
    fn peak_mib(&self) -> u64 {
        if self.unknown_memory.is_some() {
            self.capacity()
        } else {
            self.used_mib
        }
    }

    fn jobs(&self) -> usize {
        self.members.len()
    }

    fn is_idle(&self) -> bool {
        self.members.is_empty()
    }
}

impl<'a> GpuState<'a> {
    /// Empties a GPU without residents and starts `id` alone on it.
    fn reset_alone(&mut self, id: &'a str, view: JobView) {
        self.members.clear();
        self.used_mib = 0;
        self.unknown_memory = None;
        self.time_saved = 0.0;
        self.add(id, view);
    }

    /// Adds a member, keeping the memory bookkeeping.
    fn add(&mut self, id: &'a str, view: JobView) {
        match view.memory_mib {
            Some(mib) => self.used_mib += u64::from(mib),
            None => {
                self.unknown_memory.get_or_insert(id);
            }
        }
        self.members.push(Member { id, view });
    }
}

/// What placing one job on one GPU would lead to.
struct Candidate {
    gpu: usize,
    /// What the objective thinks of it; higher is better.
    value: f64,
    /// Worst predicted slowdown in the group, the newcomer included.
    worst_slowdown: f64,
    /// The job's slowness on this GPU's model (see [`Resolved::slowness`]).
    slowness: f64,
    score: u8,
}

impl Candidate {
    /// What the choice maximizes: the objective's value less what the GPU model costs the job.
    fn merit(&self) -> f64 {
        self.value - self.slowness
    }
}

/// Plans placements against one snapshot of the GPUs.
pub(crate) struct Planner<'a> {
    policy: &'a Policy,
    knowledge: &'a Knowledge,
    seed: u64,
    gpus: Vec<GpuState<'a>>,
    /// The distinct GPU models offered, first spec of each name.
    models: Vec<&'a GpuSpec>,
    /// Seconds until each GPU is free for a newcomer: its residents' longest run time left
    /// (work over speed), plus what queued jobs waiting for it will take. `None` where
    /// unknown.
    free_in: Vec<Option<f64>>,
    /// Pair predictions made so far, when the planner judges many GPUs holding the same few
    /// workloads (the cluster view); `None` otherwise.
    memo: Option<PairMemo>,
}

impl<'a> Planner<'a> {
    pub(crate) fn new(
        policy: &'a Policy,
        knowledge: &'a Knowledge,
        seed: u64,
        gpus: &'a [Gpu],
    ) -> Self {
        let mut models: Vec<&'a GpuSpec> = Vec::new();
        for gpu in gpus {
            if !models.iter().any(|m| m.model == gpu.spec.model) {
                models.push(&gpu.spec);
            }
        }
        let gpus = gpus.iter().map(|gpu| (gpu, None)).collect();
        Self::over(policy, knowledge, seed, gpus, models, None)
    }

    /// A planner over `gpus` that resolves jobs on `models` (the first spec of each GPU model
    /// in the cluster, which may hold more GPUs than `gpus`): a job's slowness on a model is
    /// relative to its best model among these, so the same job gets the same answer on a GPU
    /// whichever other GPUs are judged with it. A GPU may come with its residents already
    /// resolved on `models` (in its residents' order), as the cluster view keeps them.
    pub(crate) fn over(
        policy: &'a Policy,
        knowledge: &'a Knowledge,
        seed: u64,
        gpus: Vec<(&'a Gpu, Option<&[JobView]>)>,
        models: Vec<&'a GpuSpec>,
        memo: Option<PairMemo>,
    ) -> Self {
        let gpus: Vec<GpuState<'a>> = gpus
            .into_iter()
            .map(|(gpu, resolved)| {
                let model = models
                    .iter()
                    .position(|m| m.model == gpu.spec.model)
                    .unwrap_or_default();
                let mut state = GpuState {
                    gpu,
                    model,
                    members: SmallVec::new(),
                    residents: gpu.residents.len(),
                    used_mib: 0,
                    unknown_memory: None,
                    time_saved: 0.0,
                    cap: policy.max_jobs_on(&gpu.spec.model) as usize,
                };
                match resolved {
                    Some(views) => {
                        for (resident, view) in gpu.residents.iter().zip(views) {
                            state.add(&resident.id, *view);
                        }
                    }
                    None => {
                        for resident in &gpu.residents {
                            state.add(
                                &resident.id,
                                knowledge.view_on(resident, &gpu.spec, &models),
                            );
                        }
                    }
                }
                state.time_saved =
                    predict(knowledge, memo.as_ref(), &state.members, None).time_saved;
                state
            })
            .collect();
        let free_in = gpus
            .iter()
            .map(|state| {
                state.gpu.residents.iter().try_fold(0.0_f64, |longest, r| {
                    let speed = knowledge.speeds.speed(&r.id, &state.gpu.spec.model)?;
                    Some(longest.max(r.work? / speed))
                })
            })
            .collect();
        Self {
            policy,
            knowledge,
            seed,
            gpus,
            models,
            free_in,
            memo,
        }
    }

    /// JCT-aware placement (SchedTune): a job under the `latency` priority about to start alone on idle GPU `now` whose
    /// estimated completion would come clearly sooner ([`WAIT_GAIN`]) by waiting for a busy GPU
    /// — running there after the residents and after the queued jobs already waiting for it —
    /// waits for it instead. Returns the GPU waited for and the two estimates, after booking
    /// the job's run time on it.
    fn wait_for_faster(&mut self, resolved: &Resolved, now: usize) -> Option<(usize, f64, f64)> {
        if !resolved.latency {
            return None;
        }
        let start_now = resolved.solo_s[self.gpus[now].model]?;
        let (gpu, later) = self
            .gpus
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_idle())
            .filter(|(_, s)| {
                resolved.views[s.model]
                    .memory_mib
                    .is_none_or(|mib| u64::from(mib) <= s.capacity())
            })
            .filter_map(|(g, s)| Some((g, self.free_in[g]? + resolved.solo_s[s.model]?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))?;
        if later >= start_now * (1.0 - WAIT_GAIN) {
            return None;
        }
        let run = resolved.solo_s[self.gpus[gpu].model]?;
        if let Some(free) = &mut self.free_in[gpu] {
            *free += run;
        }
        Some((gpu, later, start_now))
    }

    /// `job` on every model of the request.
    fn resolve(&self, job: &Job) -> Resolved {
        let views = if self.models.is_empty() {
            smallvec::smallvec![self.knowledge.view_of(job)]
        } else {
            self.models
                .iter()
                .map(|spec| self.knowledge.view_on(job, spec, &self.models))
                .collect()
        };
        let weights = priority_weights(job.priority, &self.models);
        let times: SmallVec<[Option<f64>; 4]> = self
            .models
            .iter()
            .map(|spec| self.knowledge.speeds.speed(&job.id, &spec.model))
            .map(|speed| speed.map(|s| 1.0 / s))
            .collect();
        // A model without a speed for the job counts as its slowest known one: never preferred
        // on a guess. Without any speed, run time is taken to be the same everywhere.
        let slowest = times.iter().flatten().copied().fold(f64::NAN, f64::max);
        let costs: SmallVec<[f64; 4]> = times
            .iter()
            .zip(&weights)
            .map(|(time, weight)| {
                let time = time.unwrap_or(if slowest.is_nan() { 1.0 } else { slowest });
                time * weight
            })
            .collect();
        let best = costs.iter().copied().fold(f64::INFINITY, f64::min);
        let slowness = costs.iter().map(|c| c / best - 1.0).collect();
        let solo_s = times
            .iter()
            .map(|time| job.work.zip(*time).map(|(work, time)| work * time))
            .collect();
        Resolved {
            views,
            slowness,
            solo_s,
            latency: matches!(job.priority, None | Some(tandem_api::Priority::Latency)),
        }
    }

    pub(crate) fn recommend(mut self, queue: &'a [Job]) -> Recommendation {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed ^ queue_fingerprint(queue));
        let mut unplaced = Vec::new();
        let mut order: Vec<(usize, Resolved)> = queue
            .iter()
            .enumerate()
            .map(|(i, job)| (i, self.resolve(job)))
            .collect();
        match self.policy.objective {
            // First-fit decreasing: the largest jobs first, as bin packing does; a job of
            // unknown memory takes a GPU of its own, so it counts as the largest.
            Objective::MaxPacking => {
                order.sort_by_key(|(_, r)| {
                    let largest = r
                        .views
                        .iter()
                        .map(|v| v.memory_mib.unwrap_or(u32::MAX))
                        .max();
                    std::cmp::Reverse(largest)
                });
            }
            // Jobs the knowledge base is surest about choose first (JRS); with probability
            // `exploration` a job's precedence is drawn at random instead, so uncertain jobs
            // also get good slots and produce the outcomes that make them certain.
            Objective::Balanced | Objective::MinSlowdown => {
                let exploration = f64::from(self.policy.exploration);
                let mut keyed: Vec<(f64, f64, (usize, Resolved))> = order
                    .into_iter()
                    .map(|entry| {
                        let key = if exploration > 0.0 && rng.r#gen::<f64>() < exploration {
                            rng.r#gen::<f64>()
                        } else {
                            entry.1.any().assignment_uncertainty
                        };
                        (key, queue[entry.0].submitted_at_s, entry)
                    })
                    .collect();
                keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
                order = keyed.into_iter().map(|(_, _, entry)| entry).collect();
            }
        }

        let mut placed_on: Vec<Vec<&str>> = vec![Vec::new(); self.gpus.len()];
        // Sharing pays for itself only under contention: while idle GPUs remain for every job
        // still to place, `balanced` starts each alone, since any slowdown is then pure loss
        // to its user. `max-packing` packs regardless (the provider's view: whole GPUs freed).
        let mut idle_left = self.gpus.iter().filter(|s| s.is_idle()).count();
        let mut jobs_left = order.len();
        let balanced = self.policy.objective == Objective::Balanced;
        if balanced && self.policy.max_jobs_anywhere() >= 2 && jobs_left > idle_left {
            order = self.place_matched_pairs(queue, order, &mut placed_on);
            idle_left = self.gpus.iter().filter(|s| s.is_idle()).count();
            jobs_left = order.len();
        }
        // Jobs started alone on an idle GPU: once all are placed, they may trade GPUs.
        let mut alone: Vec<(usize, &'a str, Resolved)> = Vec::new();
        for (i, resolved) in order {
            let job = &queue[i];
            // Without contention `balanced` keeps only idle GPUs when the job fits one: judge
            // those first, and the busy ones (a pair prediction each) only if none fits.
            let mut candidates = if balanced && jobs_left <= idle_left {
                let idle = self.candidates_among(&resolved, |state| state.is_idle());
                if idle.is_empty() {
                    self.candidates(&resolved)
                } else {
                    idle
                }
            } else {
                self.candidates(&resolved)
            };
            jobs_left -= 1;
            let too_slow = self.drop_harmful(&mut candidates);
            let Some(best) = self.choose(&candidates, &mut rng) else {
                let reason = match too_slow {
                    Some(worst) => format!(
                        "every GPU it fits would mean a predicted worst slowdown of at least {:.0}%, \
                         beyond what sharing saves under the balanced objective; left queued for a better slot",
                        worst * 100.0
                    ),
                    None => self.why_unplaceable(&resolved),
                };
                unplaced.push(Unplaced {
                    job: job.id.clone(),
                    reason,
                });
                continue;
            };
            if self.gpus[best].is_idle()
                && let Some((gpu, later, now)) = self.wait_for_faster(&resolved, best)
            {
                unplaced.push(Unplaced {
                    job: job.id.clone(),
                    reason: format!(
                        "waits for {}: estimated to finish in {later:.0} s there (after the jobs \
                         before it) against {now:.0} s on {} now",
                        self.gpus[gpu].gpu.id, self.gpus[best].gpu.id
                    ),
                });
                continue;
            }
            let state = &mut self.gpus[best];
            let was_idle = state.is_idle();
            if was_idle {
                idle_left -= 1;
            }
            state.add(&job.id, resolved.views[state.model]);
            state.time_saved =
                predict(self.knowledge, self.memo.as_ref(), &state.members, None).time_saved;
            placed_on[best].push(&job.id);
            if was_idle {
                alone.push((best, &job.id, resolved));
            }
        }
        self.trade_gpus(alone, &mut placed_on);

        let placements = self
            .gpus
            .iter()
            .zip(placed_on)
            .filter(|(_, placed)| !placed.is_empty())
            .map(|(state, placed)| self.placement(state, &placed))
            .collect();
        // Report unplaced jobs in queue order, whatever order they were tried in.
        let position = |id: &str| queue.iter().position(|j| j.id == id);
        unplaced.sort_by_key(|u| position(&u.job));
        Recommendation {
            placements,
            unplaced,
        }
    }

    /// Jobs placed one at a time take the best GPU left for them, so an early job may hold a
    /// fast GPU that a later job would gain more from. Two jobs that each run alone on a GPU of
    /// a different model trade GPUs when that lowers the sum of their run times (of their
    /// slownesses, without run times) and each fits the other's GPU; repeated until no trade
    /// helps (a few passes: each trade strictly lowers the total).
    fn trade_gpus(
        &mut self,
        alone: Vec<(usize, &'a str, Resolved)>,
        placed_on: &mut [Vec<&'a str>],
    ) {
        let mut alone: Vec<(usize, &'a str, Resolved)> = alone
            .into_iter()
            .filter(|(g, _, _)| self.gpus[*g].jobs() == 1)
            .collect();
        let fits = |state: &GpuState<'_>, view: &JobView| {
            view.memory_mib
                .is_none_or(|mib| u64::from(mib) <= state.capacity())
        };
        const PASSES: usize = 4;
        for _ in 0..PASSES {
            let mut traded = false;
            for a in 0..alone.len() {
                for b in a + 1..alone.len() {
                    let (ga, gb) = (alone[a].0, alone[b].0);
                    let (ma, mb) = (self.gpus[ga].model, self.gpus[gb].model);
                    if ma == mb {
                        continue;
                    }
                    let (ra, rb) = (&alone[a].2, &alone[b].2);
                    let before = pair_cost(ra, ma, rb, mb);
                    let after = pair_cost(ra, mb, rb, ma);
                    if after >= before * (1.0 - 1e-9)
                        || !fits(&self.gpus[gb], &ra.views[mb])
                        || !fits(&self.gpus[ga], &rb.views[ma])
                    {
                        continue;
                    }
                    let (ida, idb) = (alone[a].1, alone[b].1);
                    let (va, vb) = (ra.views[mb], rb.views[ma]);
                    self.gpus[ga].reset_alone(idb, vb);
                    self.gpus[gb].reset_alone(ida, va);
                    placed_on[ga] = vec![idb];
                    placed_on[gb] = vec![ida];
                    alone[a].0 = gb;
                    alone[b].0 = ga;
                    traded = true;
                }
            }
            if !traded {
                break;
            }
        }
    }

    /// `balanced`, first phase: pair queued jobs by maximum-weight matching (see
    /// [`grouping`]) and start each pair on an idle GPU, best fit by memory, surest jobs' pairs
    /// first. An edge's weight is what the pair is worth on its own GPU — time saved minus the
    /// slowdown penalty — so only pairs better than running alone are formed. Returns the jobs
    /// still to place (unpaired, or paired but left without an idle GPU big enough), in order;
    /// the greedy phase places them, on GPUs with residents too.
    fn place_matched_pairs<'q>(
        &mut self,
        queue: &'q [Job],
        order: Vec<(usize, Resolved)>,
        placed_on: &mut [Vec<&'q str>],
    ) -> Vec<(usize, Resolved)>
    where
        'q: 'a,
    {
        // Only an idle GPU whose cap admits two can take a pair.
        let pairable = |s: &GpuState<'_>| s.is_idle() && s.cap >= 2;
        // The largest such GPU of each model.
        let mut roomiest: SmallVec<[Option<u64>; 4]> = smallvec::smallvec![None; self.models.len()];
        for s in self.gpus.iter().filter(|s| pairable(s)) {
            let room = &mut roomiest[s.model];
            *room = (*room).max(Some(s.capacity()));
        }
        if roomiest.iter().all(Option::is_none) {
            return order;
        }
        if order.len() > PAIRING_LIMIT {
            return order;
        }
        let mut idle_models: Vec<&str> = self
            .gpus
            .iter()
            .filter(|s| pairable(s))
            .map(|s| s.gpu.spec.model.as_str())
            .collect();
        idle_models.sort_unstable();
        idle_models.dedup();
        let mut edges = Vec::new();
        for a in 0..order.len() {
            for b in a + 1..order.len() {
                let (ra, rb) = (&order[a].1, &order[b].1);
                let (va, vb) = (ra.any(), rb.any());
                // Two profiled jobs may pair wherever their memory fits (the profiles predict
                // their interference); any other pair only if it was seen sharing (an outcome
                // is the only evidence it fits and how it interferes).
                let profiled = va.features.is_some() && vb.features.is_some();
                let fits = (profiled
                    && roomiest.iter().enumerate().any(|(m, room)| {
                        room.is_some_and(|room| {
                            pair_memory(&ra.views[m], &rb.views[m]).is_some_and(|mib| mib <= room)
                        })
                    }))
                    || self
                        .knowledge
                        .shared_on_any(va, vb, idle_models.iter().copied());
                if !fits {
                    continue;
                }
                let (slowdowns, uncertainty) = self.knowledge.predict(&[va, vb]);
                let worst = slowdowns.iter().fold(0.0_f64, |m, s| m.max(*s));
                let value =
                    interference::time_saved(&slowdowns) - slowdown_penalty(worst, uncertainty);
                if value > 0.0 {
                    edges.push(grouping::Edge { a, b, value });
                }
            }
        }
        let mut pairs = grouping::best_pairs(order.len(), &edges);
        // Pairs holding the jobs of highest precedence choose their GPUs first.
        pairs.sort_by_key(|&(a, b)| a.min(b));
        let mut placed = vec![false; order.len()];
        for (a, b) in pairs {
            let (ra, rb) = (&order[a].1, &order[b].1);
            // The idle GPU whose model suits the pair best (least slowness), then best fit by
            // memory.
            let best_fit = self
                .gpus
                .iter()
                .enumerate()
                .filter(|(_, s)| pairable(s))
                .filter_map(|(g, s)| {
                    let (va, vb) = (&ra.views[s.model], &rb.views[s.model]);
                    let left = match pair_memory(va, vb) {
                        Some(memory) => (s.free_mib() >= memory).then(|| s.free_mib() - memory),
                        // Unknown memory: any GPU of a model the two were seen sharing.
                        None => self
                            .knowledge
                            .shared(va, vb, &s.gpu.spec.model)
                            .then_some(s.free_mib()),
                    }?;
                    Some((g, ra.slowness[s.model] + rb.slowness[s.model], left))
                })
                .min_by(|x, y| x.1.total_cmp(&y.1).then(x.2.cmp(&y.2)))
                .map(|(g, _, _)| g);
            let Some(g) = best_fit else { continue };
            let model = self.gpus[g].model;
            for &member in &[a, b] {
                let (i, ref resolved) = order[member];
                self.gpus[g].add(&queue[i].id, resolved.views[model]);
                placed_on[g].push(&queue[i].id);
                placed[member] = true;
            }
            let state = &mut self.gpus[g];
            state.time_saved =
                predict(self.knowledge, self.memo.as_ref(), &state.members, None).time_saved;
        }
        order
            .into_iter()
            .zip(placed)
            .filter(|(_, placed)| !placed)
            .map(|(entry, _)| entry)
            .collect()
    }

    pub(crate) fn filter(&self, job: &Job) -> Result<Vec<Fit>> {
        Ok(self
            .gpus
            .iter()
            .zip(self.refusals(job))
            .map(|(state, reason)| Fit {
                gpu: state.gpu.id.clone(),
                fits: reason.is_none(),
                reason: reason.unwrap_or_default(),
            })
            .collect())
    }

    /// Why the job may not join each GPU now, in order: `None` where it may.
    pub(crate) fn refusals(&self, job: &Job) -> Vec<Option<String>> {
        let resolved = self.resolve(job);
        self.gpus
            .iter()
            .map(|state| self.fits(state, &resolved.views[state.model]).err())
            .collect()
    }

    pub(crate) fn score(&self, job: &Job) -> Result<Vec<GpuScore>> {
        Ok(self
            .gpus
            .iter()
            .zip(self.scores(job))
            .map(|(state, score)| GpuScore {
                gpu: state.gpu.id.clone(),
                score,
            })
            .collect())
    }

    /// The job's score on each GPU, in order: 0 where it does not fit.
    pub(crate) fn scores(&self, job: &Job) -> Vec<u8> {
        let resolved = self.resolve(job);
        let mut scores = vec![0; self.gpus.len()];
        for candidate in self.candidates(&resolved) {
            scores[candidate.gpu] = candidate.score;
        }
        scores
    }

    /// Why the job seen as `view` may not join `state` now, if it may not, for a person.
    fn fits(&self, state: &GpuState<'_>, view: &JobView) -> Result<(), String> {
        match self.refusal(state, view) {
            None => Ok(()),
            Some(refusal) => Err(refusal.describe(self.policy, state, view)),
        }
    }

    /// Whether the job seen as `view` may join `state` now. Allocation-free: it runs for
    /// every job and GPU, and the reason is spelled out only when someone reads it.
    fn refusal(&self, state: &GpuState<'_>, view: &JobView) -> Option<Refusal> {
        if state.jobs() >= state.cap {
            return Some(Refusal::Cap);
        }
        let model = &state.gpu.spec.model;
        if state.unknown_memory.is_some() {
            // Only one job it was seen sharing this model with may join it.
            let only = &state.members[0].view;
            if state.jobs() > 1 || !self.knowledge.shared(only, view, model) {
                return Some(Refusal::BesideUnknownMemory);
            }
            return None;
        }
        if state.used_mib > state.capacity() {
            // Residents reported over the GPU's memory: the figures are wrong or the GPU is
            // about to fail; either way nothing more goes there.
            return Some(Refusal::Overfull);
        }
        let Some(needed) = view.memory_mib.map(u64::from) else {
            return match state.members.as_slice() {
                [] => None,
                [only] if self.knowledge.shared(&only.view, view, model) => None,
                _ => Some(Refusal::UnknownMemory),
            };
        };
        if needed > state.free_mib() {
            return Some(Refusal::Memory);
        }
        // Memory known from a declared model says nothing of interference: a job without a
        // profile (or beside one) shares only with a job it was seen sharing this model with,
        // as a job of unknown memory does.
        let unprofiled =
            view.features.is_none() || state.members.iter().any(|m| m.view.features.is_none());
        match state.members.as_slice() {
            [] => None,
            _ if !unprofiled => None,
            [only] if self.knowledge.shared(&only.view, view, model) => None,
            _ => Some(Refusal::NoEvidence),
        }
    }

    fn candidates(&self, resolved: &Resolved) -> Vec<Candidate> {
        self.candidates_among(resolved, |_| true)
    }

    /// The candidates among the GPUs `keep` selects, in GPU order.
    fn candidates_among(
        &self,
        resolved: &Resolved,
        keep: impl Fn(&GpuState<'_>) -> bool,
    ) -> Vec<Candidate> {
        self.gpus
            .iter()
            .enumerate()
            .filter(|(_, state)| keep(state))
            .filter(|(_, state)| self.refusal(state, &resolved.views[state.model]).is_none())
            .map(|(gpu, state)| {
                let view = &resolved.views[state.model];
                self.evaluate(gpu, state, view, resolved.slowness[state.model])
            })
            .collect()
    }

    /// Under `balanced`, a co-location worth less than running alone (its slowdown penalty
    /// outweighs the time it saves) is not an option: the job waits for a better slot rather
    /// than wreck its co-runners. Returns the smallest worst slowdown among the dropped
    /// candidates when that left none.
    fn drop_harmful(&self, candidates: &mut Vec<Candidate>) -> Option<f64> {
        if self.policy.objective != Objective::Balanced {
            return None;
        }
        let least_harmful = candidates
            .iter()
            .filter(|c| c.value < 0.0)
            .map(|c| c.worst_slowdown)
            .min_by(f64::total_cmp);
        candidates.retain(|c| c.value >= 0.0);
        least_harmful.filter(|_| candidates.is_empty())
    }

    fn evaluate(
        &self,
        gpu: usize,
        state: &GpuState<'_>,
        view: &JobView,
        slowness: f64,
    ) -> Candidate {
        let after = predict(
            self.knowledge,
            self.memo.as_ref(),
            &state.members,
            Some(view),
        );
        let worst = after.slowdowns.iter().fold(0.0_f64, |m, s| m.max(*s));
        // A job of unknown memory fills the GPU as far as packing can tell.
        let left = view
            .memory_mib
            .filter(|_| state.unknown_memory.is_none())
            .map_or(0, |mib| state.free_mib().saturating_sub(u64::from(mib)));
        let free_share = left as f64 / state.capacity() as f64;
        let value = match self.policy.objective {
            Objective::Balanced => {
                after.time_saved - state.time_saved - slowdown_penalty(worst, after.uncertainty)
            }
            Objective::MinSlowdown => -worst,
            Objective::MaxPacking => -free_share,
        };
        // Scores follow the choice: the objective's value less the model's slowness.
        let score = match self.policy.objective {
            Objective::Balanced => 50.0 + 50.0 * (value - slowness).clamp(-1.0, 1.0),
            Objective::MinSlowdown => 100.0 * (1.0 - (worst + slowness).min(1.0)),
            Objective::MaxPacking => 100.0 * (1.0 - (free_share + slowness).min(1.0)),
        };
        Candidate {
            gpu,
            value,
            worst_slowdown: worst,
            slowness,
            // A GPU the job fits never scores 0: 0 means "does not fit".
            score: score.round().clamp(1.0, 100.0) as u8,
        }
    }

    fn choose(&self, candidates: &[Candidate], rng: &mut Xoshiro256PlusPlus) -> Option<usize> {
        if candidates.is_empty() {
            return None;
        }
        let exploration = f64::from(self.policy.exploration);
        if exploration > 0.0 && rng.r#gen::<f64>() < exploration {
            return Some(candidates[rng.gen_range(0..candidates.len())].gpu);
        }
        // `max_by` keeps the last of equal values; iterate in reverse so ties go to the first GPU.
        candidates
            .iter()
            .rev()
            .max_by(|a, b| a.merit().total_cmp(&b.merit()))
            .map(|c| c.gpu)
    }

    fn why_unplaceable(&self, resolved: &Resolved) -> String {
        if self.gpus.is_empty() {
            return "no GPUs were offered".into();
        }
        if resolved.views.iter().all(|v| v.memory_mib.is_none()) {
            return "it has no known profile and no declared model (unknown memory): it runs \
                    alone on an idle GPU or beside one job it was observed sharing that GPU \
                    model with, and no GPU offers either"
                .into();
        }
        // The GPU that comes closest: the least memory missing for the job on its model.
        let open = self
            .gpus
            .iter()
            .filter(|s| s.jobs() < s.cap && s.unknown_memory.is_none())
            .filter_map(|s| Some((s, u64::from(resolved.views[s.model].memory_mib?))));
        match open.min_by_key(|(s, needed)| needed.saturating_sub(s.free_mib())) {
            // Memory is not what stops it there: say what does.
            Some((closest, needed)) if needed <= closest.free_mib() => {
                let view = &resolved.views[closest.model];
                let why = self.fits(closest, view).err().unwrap_or_default();
                format!("{}: {why}", closest.gpu.id)
            }
            Some((closest, needed)) => format!(
                "needs {needed} MiB on a {} ({} MiB free on {}, the closest fit under the job cap)",
                closest.gpu.spec.model,
                closest.free_mib(),
                closest.gpu.id
            ),
            None if self.gpus.iter().any(|s| s.jobs() < s.cap) => {
                "every GPU under its job cap runs a resident of unknown memory".into()
            }
            None => "every GPU already holds as many jobs as its cap allows (max-jobs-per-gpu, \
                     or policy.model-caps for its model)"
                .into(),
        }
    }

    fn placement(&self, state: &GpuState<'_>, placed: &[&str]) -> Placement {
        let group = predict(self.knowledge, self.memo.as_ref(), &state.members, None);
        let slowdown_pct = state.members[state.residents..]
            .iter()
            .zip(&group.slowdowns[state.residents..])
            .map(|(_, s)| (s * 100.0) as f32)
            .collect();
        let worst = group.slowdowns.iter().fold(0.0_f64, |m, s| m.max(*s));
        let saving = interference::packing_saving(&group.slowdowns);
        let gpu = &state.gpu.id;
        let memory = match state.unknown_memory {
            None => format!("{} of {} MiB", state.used_mib, state.capacity()),
            Some(_) => format!("unknown memory, up to {} MiB", state.capacity()),
        };
        let reason = if state.members.len() == 1 {
            format!(
                "alone on {gpu} ({memory}): the {} objective found no better co-runner",
                self.policy.objective
            )
        } else {
            let evidence = if group.uncertainty < 1.0 {
                "learned from observed outcomes"
            } else if state.members.iter().all(|m| m.view.features.is_some()) {
                "analytic prior from the profiles"
            } else {
                "no evidence yet"
            };
            format!(
                "{} jobs share {gpu} ({memory}): predicted packing saving {:.0}%, worst slowdown {:.0}% ({evidence}, {} objective)",
                state.members.len(),
                saving * 100.0,
                worst * 100.0,
                self.policy.objective
            )
        };
        Placement {
            jobs: placed.iter().map(|id| (*id).to_owned()).collect(),
            residents: state.members[..state.residents]
                .iter()
                .map(|m| m.id.to_owned())
                .collect(),
            gpu: gpu.clone(),
            predicted: Prediction {
                slowdown_pct,
                packing_saving_pct: (saving * 100.0) as f32,
                uncertainty: group.uncertainty as f32,
                peak_mem_mib: u32::try_from(state.peak_mib()).unwrap_or(u32::MAX),
            },
            reason,
        }
    }
}

/// Why a job may not join a GPU (see [`Planner::refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The GPU holds `max-jobs-per-gpu` jobs.
    Cap,
    /// A job of unknown memory is on it, and the newcomer was never seen sharing with it.
    BesideUnknownMemory,
    /// Its residents are reported over its memory.
    Overfull,
    /// The newcomer's memory is unknown and it was never seen sharing with what runs there.
    UnknownMemory,
    /// Not enough free memory.
    Memory,
    /// The newcomer or a member has no profile, and the two were never seen sharing.
    NoEvidence,
}

impl Refusal {
    fn describe(self, policy: &Policy, state: &GpuState<'_>, view: &JobView) -> String {
        let model = &state.gpu.spec.model;
        match self {
            Self::Cap => format!(
                "already holds {} job(s), the cap for a {model} is {}{}",
                state.jobs(),
                state.cap,
                if policy.model_caps.iter().any(|c| &c.gpu_model == model) {
                    " (policy.model-caps)"
                } else {
                    " (max-jobs-per-gpu)"
                }
            ),
            Self::BesideUnknownMemory => format!(
                "`{}` on it has no known profile (unknown memory), and the job was never \
                 observed sharing a {model} with it",
                state.unknown_memory.unwrap_or_default()
            ),
            Self::Overfull => format!(
                "its residents already use {} MiB, more than its {} MiB",
                state.used_mib,
                state.capacity()
            ),
            Self::UnknownMemory => format!(
                "the job has no known profile (unknown memory): it may share a GPU only with \
                 one job it was observed sharing a {model} with, and this GPU holds {} other(s)",
                state.jobs()
            ),
            Self::NoEvidence => format!(
                "the job or a job on it has no profile, so nothing predicts how they would \
                 interfere, and they were never observed sharing a {model}; it may share only \
                 with a job it was seen sharing one with"
            ),
            Self::Memory => format!(
                "needs {} MiB but only {} of {} MiB are free",
                view.memory_mib.unwrap_or_default(),
                state.free_mib(),
                state.capacity()
            ),
        }
    }
}

/// Pair predictions already made by one planner, by the two jobs as the predictor sees them:
/// on a cluster view most GPUs hold instances of a few workloads, so judging one job against
/// every state repeats the same few pairs.
#[derive(Default)]
pub(crate) struct PairMemo(RefCell<PairTable>);

/// Predictions by the pair's key (see `JobView::prediction_key`): `(mean, variance, no-evidence variance)`.
type PairTable = HashMap<[u64; 10], (f64, f64, f64), BuildHasherDefault<KeyHasher>>;

/// A multiply-rotate hasher for keys that are already well-spread bit patterns (SipHash,
/// the default, costs as much as the prediction it would save).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl PairMemo {
    fn pair(&self, knowledge: &Knowledge, a: &JobView, b: &JobView) -> (f64, f64, f64) {
        let key = {
            let (ka, kb) = (a.prediction_key(), b.prediction_key());
            let mut key = [0; 10];
            key[..5].copy_from_slice(&ka);
            key[5..].copy_from_slice(&kb);
            key
        };
        if let Some(&hit) = self.0.borrow().get(&key) {
            return hit;
        }
        let value = knowledge.predict_pair(a, b);
        self.0.borrow_mut().insert(key, value);
        value
    }
}

struct GroupForecast {
    slowdowns: Slowdowns,
    uncertainty: f64,
    time_saved: f64,
}

fn predict(
    knowledge: &Knowledge,
    memo: Option<&PairMemo>,
    members: &[Member<'_>],
    joining: Option<&JobView>,
) -> GroupForecast {
    let mut views: SmallVec<[&JobView; 4]> = members.iter().map(|m| &m.view).collect();
    views.extend(joining);
    let (slowdowns, uncertainty) = match memo {
        Some(memo) => Knowledge::predict_by(&views, |a, b| memo.pair(knowledge, a, b)),
        None => knowledge.predict(&views),
    };
    GroupForecast {
        time_saved: interference::time_saved(&slowdowns),
        slowdowns,
        uncertainty,
    }
}

/// What `balanced` charges for a group whose worst predicted slowdown is `worst`: nothing up to
/// [`SLOWDOWN_TOLERANCE`], then [`SLOWDOWN_PENALTY`] per unit beyond it. The slowdown is taken
/// pessimistically — raised by [`RISK_AVERSION`] times the prediction's uncertainty — so a
/// pairing the knowledge base knows little about must promise more before it is made, and
/// the outcome it then produces makes the next decision surer.
fn slowdown_penalty(worst: f64, uncertainty: f64) -> f64 {
    let pessimistic = worst + RISK_AVERSION * uncertainty;
    SLOWDOWN_PENALTY * (pessimistic - SLOWDOWN_TOLERANCE).max(0.0)
}

/// Memory two jobs need together, if both are known.
fn pair_memory(a: &JobView, b: &JobView) -> Option<u64> {
    Some(u64::from(a.memory_mib?) + u64::from(b.memory_mib?))
}

/// FNV-1a over the queue's ids, so exploration draws differ between queues but not between
/// runs.
fn queue_fingerprint(queue: &[Job]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for job in queue {
        for byte in job.id.bytes().chain([0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use tandem_api::{GpuSpec, ModelCap, Profile};

    use super::*;
    use crate::Recommender;

    fn profile(util: f32, mem: u32) -> Profile {
        Profile {
            gpu_util_pct: util,
            mem_access_pct: util / 2.0,
            mem_used_mib: mem,
            gpu_model: "V100".into(),
        }
    }

    fn gpu(id: &str, memory: u32, residents: Vec<Job>) -> Gpu {
        Gpu {
            id: id.into(),
            node: "n".into(),
            spec: GpuSpec::new("V100", memory),
            residents,
        }
    }

    prop_compose! {
        fn arb_job(i: usize)(util in 0.0f32..=100.0, mem in 0u32..20_000) -> Job {
            Job::profiled(format!("j{i}"), profile(util, mem))
        }
    }

    fn arb_queue(max: usize) -> impl Strategy<Value = Vec<Job>> {
        (0..=max).prop_flat_map(|n| (0..n).map(arb_job).collect::<Vec<_>>())
    }

    fn arb_gpus(max: usize) -> impl Strategy<Value = Vec<Gpu>> {
        prop::collection::vec((1u32..40_000, 0u32..12_000, any::<bool>()), 0..=max).prop_map(
            |specs| {
                specs
                    .into_iter()
                    .enumerate()
                    .map(|(g, (memory, resident_mem, has_resident))| {
                        let residents = if has_resident {
                            vec![Job::profiled(format!("r{g}"), profile(30.0, resident_mem))]
                        } else {
                            Vec::new()
                        };
                        gpu(&format!("g{g}"), memory, residents)
                    })
                    .collect()
            },
        )
    }

    fn arb_policy() -> impl Strategy<Value = Policy> {
        (
            0usize..3,
            1u32..5,
            0.0f32..=1.0,
            proptest::option::of(1u32..4),
        )
            .prop_map(|(o, cap, exploration, test_cap)| Policy {
                objective: Objective::ALL[o],
                max_jobs_per_gpu: cap,
                exploration,
                // The test GPUs are all V100s: a cap of their own overrides `cap`.
                model_caps: test_cap
                    .map(|max_jobs| ModelCap {
                        gpu_model: "V100".into(),
                        max_jobs,
                    })
                    .into_iter()
                    .collect(),
            })
    }

    proptest! {
        #[test]
        fn no_placement_exceeds_gpu_memory_or_the_job_cap(
            queue in arb_queue(30), gpus in arb_gpus(12), policy in arb_policy(), seed in any::<u64>()
        ) {
            let cap = policy.max_jobs_on("V100") as usize;
            let answer = Recommender::new(policy, seed).unwrap().recommend(&queue, &gpus).unwrap();
            let mem_of = |id: &str| queue.iter().find(|j| j.id == id).and_then(|j| j.profile.as_ref()).map_or(0, |p| u64::from(p.mem_used_mib));
            for placement in &answer.placements {
                let gpu = gpus.iter().find(|g| g.id == placement.gpu).unwrap();
                let resident_mem: u64 = gpu.residents.iter().map(|r| u64::from(r.profile.as_ref().unwrap().mem_used_mib)).sum();
                let placed_mem: u64 = placement.jobs.iter().map(|id| mem_of(id)).sum();
                prop_assert!(resident_mem + placed_mem <= u64::from(gpu.spec.memory_mib));
                prop_assert!(gpu.residents.len() + placement.jobs.len() <= cap);
            }
            let placed: usize = answer.placements.iter().map(|p| p.jobs.len()).sum();
            prop_assert_eq!(placed + answer.unplaced.len(), queue.len());
        }

        #[test]
        fn the_same_seed_gives_the_same_answer(
            queue in arb_queue(20), gpus in arb_gpus(8), policy in arb_policy(), seed in any::<u64>()
        ) {
            let engine = Recommender::new(policy, seed).unwrap();
            prop_assert_eq!(engine.recommend(&queue, &gpus).unwrap(), engine.recommend(&queue, &gpus).unwrap());
        }
    }

    #[test]
    fn zero_one_and_ten_thousand_jobs_are_grouped_without_panic() {
        let engine = Recommender::bootstrap(Policy::default(), 3).unwrap();
        let gpus: Vec<Gpu> = (0..100)
            .map(|g| gpu(&format!("g{g}"), 16_384, vec![]))
            .collect();
        assert!(engine.recommend(&[], &gpus).unwrap().placements.is_empty());
        let one = [Job::profiled("only", profile(50.0, 1_000))];
        assert_eq!(engine.recommend(&one, &gpus).unwrap().placements.len(), 1);
        let many: Vec<Job> = (0..10_000)
            .map(|i| {
                Job::profiled(
                    format!("j{i}"),
                    profile((i % 97) as f32, 500 + (i % 13) as u32 * 700),
                )
            })
            .collect();
        let answer = engine.recommend(&many, &gpus).unwrap();
        let placed: usize = answer.placements.iter().map(|p| p.jobs.len()).sum();
        assert_eq!(placed + answer.unplaced.len(), many.len());
        assert!(placed <= 200);
    }

    #[test]
    fn matching_pairs_complementary_jobs() {
        // Two compute-heavy and two light jobs, two idle GPUs: pairing heavy with light saves
        // the most time and keeps slowdowns low; heavy with heavy would time-slice.
        let queue = [
            Job::profiled("heavy-1", profile(95.0, 2_000)),
            Job::profiled("heavy-2", profile(90.0, 2_000)),
            Job::profiled("light-1", profile(10.0, 2_000)),
            Job::profiled("light-2", profile(8.0, 2_000)),
        ];
        let gpus = [gpu("g0", 16_384, vec![]), gpu("g1", 16_384, vec![])];
        let answer = Recommender::new(Policy::default(), 0)
            .unwrap()
            .recommend(&queue, &gpus)
            .unwrap();
        assert_eq!(answer.placements.len(), 2, "{answer:?}");
        for placement in &answer.placements {
            let heavy = placement
                .jobs
                .iter()
                .filter(|j| j.starts_with("heavy"))
                .count();
            assert_eq!(heavy, 1, "{answer:?}");
        }
    }

    #[test]
    fn an_unknown_resident_closes_its_gpu() {
        let engine = Recommender::new(Policy::default(), 0).unwrap();
        let gpus = [gpu("g0", 16_384, vec![Job::new("mystery")])];
        let answer = engine
            .recommend(&[Job::profiled("a", profile(10.0, 10))], &gpus)
            .unwrap();
        assert!(answer.placements.is_empty());
        assert!(
            answer.unplaced[0].reason.contains("unknown memory"),
            "{answer:?}"
        );
        let fits = engine
            .filter(&Job::profiled("a", profile(10.0, 10)), &gpus)
            .unwrap();
        assert!(
            !fits[0].fits && fits[0].reason.contains("mystery"),
            "{fits:?}"
        );
    }

    fn outcome(a: &str, b: &str, model: &str) -> tandem_api::Outcome {
        tandem_api::Outcome {
            gpu_model: model.into(),
            jobs: vec![a.into(), b.into()],
            solo_s: vec![100.0, 100.0],
            colocated_s: vec![120.0, 130.0],
        }
    }

    #[test]
    fn jobs_of_unknown_memory_share_only_with_an_observed_co_runner_on_that_model() {
        let mut engine = Recommender::bootstrap(Policy::default(), 0).unwrap();
        let queue = [Job::new("a"), Job::new("b")];
        let one_gpu = [gpu("g0", 16_384, vec![])];
        // Never seen together: one runs alone, the other waits.
        let answer = engine.recommend(&queue, &one_gpu).unwrap();
        assert_eq!(answer.placements.len(), 1);
        assert_eq!(answer.placements[0].jobs.len(), 1);
        assert_eq!(answer.placements[0].predicted.peak_mem_mib, 16_384);
        assert!(
            answer.unplaced[0].reason.contains("unknown memory"),
            "{answer:?}"
        );
        // Seen sharing a K80 says nothing about a V100.
        engine.observe_outcome(&outcome("a", "b", "K80")).unwrap();
        let answer = engine.recommend(&queue, &one_gpu).unwrap();
        assert_eq!(answer.unplaced.len(), 1, "{answer:?}");
        // Seen sharing a V100: they may share one again, with the learned prediction.
        engine.observe_outcome(&outcome("a", "b", "V100")).unwrap();
        let answer = engine.recommend(&queue, &one_gpu).unwrap();
        assert!(answer.unplaced.is_empty(), "{answer:?}");
        assert_eq!(answer.placements[0].jobs.len(), 2);
        let slowdowns = &answer.placements[0].predicted.slowdown_pct;
        assert!(
            slowdowns.iter().all(|s| (15.0..35.0).contains(s)),
            "{slowdowns:?}"
        );
        // A third job of unknown memory never joins them, whatever the cap.
        engine
            .set_policy(Policy {
                max_jobs_per_gpu: 4,
                ..Policy::default()
            })
            .unwrap();
        let busy = [gpu("g0", 16_384, vec![Job::new("a")])];
        let fits = engine.filter(&Job::new("b"), &busy).unwrap();
        assert!(fits[0].fits, "{fits:?}");
        let fits = engine.filter(&Job::new("c"), &busy).unwrap();
        assert!(!fits[0].fits && fits[0].reason.contains("`a`"), "{fits:?}");
        let profiled = engine
            .filter(&Job::profiled("d", profile(10.0, 10)), &busy)
            .unwrap();
        assert!(!profiled[0].fits, "{profiled:?}");
    }

    #[test]
    fn instances_of_one_workload_share_what_it_learned() {
        let mut engine = Recommender::bootstrap(Policy::default(), 0).unwrap();
        let one_gpu = [gpu("g0", 16_384, vec![])];
        let queue = [Job::new("w~1"), Job::new("w~2"), Job::new("v~1")];
        // Nothing learned yet: two instances are strangers of unknown memory.
        let answer = engine.recommend(&queue[..2], &one_gpu).unwrap();
        assert_eq!(answer.unplaced.len(), 1, "{answer:?}");
        // Two instances of `w` were seen sharing a V100 (outcomes name any instances).
        engine
            .observe_outcome(&outcome("w~7", "w~8", "V100"))
            .unwrap();
        let answer = engine.recommend(&queue[..2], &one_gpu).unwrap();
        assert!(answer.unplaced.is_empty(), "{answer:?}");
        // But not beside `v`, which no outcome named.
        let busy = [gpu("g0", 16_384, vec![Job::new("w~1")])];
        assert!(engine.filter(&Job::new("w~3"), &busy).unwrap()[0].fits);
        assert!(!engine.filter(&queue[2], &busy).unwrap()[0].fits);
        // A profile observed for one instance serves every instance.
        engine.observe_profile("v~1", profile(10.0, 1_000)).unwrap();
        assert_eq!(
            engine
                .predict(&[Job::new("v~9")], &one_gpu[0].spec)
                .unwrap()
                .peak_mem_mib,
            1_000
        );
    }

    #[test]
    fn objectives_choose_differently() {
        // g0 already runs a light job; g1 is idle and larger.
        let resident = Job::profiled("r", profile(20.0, 2_000));
        let gpus = [gpu("g0", 16_384, vec![resident]), gpu("g1", 32_768, vec![])];
        let newcomer = [Job::profiled("a", profile(30.0, 4_000))];
        let choice = |objective| {
            let policy = Policy {
                objective,
                ..Policy::default()
            };
            Recommender::new(policy, 0)
                .unwrap()
                .recommend(&newcomer, &gpus)
                .unwrap()
                .placements[0]
                .gpu
                .clone()
        };
        // Packing fills g0 beside the light job.
        assert_eq!(choice(Objective::MaxPacking), "g0");
        // Only an idle GPU means no slowdown at all.
        assert_eq!(choice(Objective::MinSlowdown), "g1");
        // With an idle GPU for every queued job, sharing would only slow someone down.
        assert_eq!(choice(Objective::Balanced), "g1");
        // Under contention (two jobs, one idle GPU) balanced shares, since sharing light
        // jobs saves time: both start now, on a shared GPU.
        let two = [
            Job::profiled("a", profile(30.0, 4_000)),
            Job::profiled("b", profile(25.0, 3_000)),
        ];
        let answer = Recommender::new(Policy::default(), 0)
            .unwrap()
            .recommend(&two, &gpus)
            .unwrap();
        assert!(answer.unplaced.is_empty(), "{answer:?}");
        assert!(
            answer
                .placements
                .iter()
                .any(|p| p.jobs.len() + p.residents.len() == 2),
            "{answer:?}"
        );
    }

    #[test]
    fn balanced_leaves_a_job_queued_rather_than_wreck_its_co_runner() {
        // The only GPU with room runs a job that saturates it; sharing would slow both by
        // far more than it saves.
        let hog = Job::profiled("hog", profile(100.0, 2_000));
        let gpus = [gpu("g0", 16_384, vec![hog])];
        let newcomer = [Job::profiled("a", profile(95.0, 2_000))];
        let answer = Recommender::new(Policy::default(), 0)
            .unwrap()
            .recommend(&newcomer, &gpus)
            .unwrap();
        assert!(answer.placements.is_empty(), "{answer:?}");
        assert!(
            answer.unplaced[0].reason.contains("better slot"),
            "{answer:?}"
        );
        // max-packing, the provider's view, shares anyway.
        let packing = Policy {
            objective: Objective::MaxPacking,
            ..Policy::default()
        };
        let answer = Recommender::new(packing, 0)
            .unwrap()
            .recommend(&newcomer, &gpus)
            .unwrap();
        assert_eq!(answer.placements.len(), 1);
    }

    #[test]
    fn scores_are_zero_exactly_where_the_job_does_not_fit() {
        let engine = Recommender::new(Policy::default(), 0).unwrap();
        let gpus = [gpu("small", 1_000, vec![]), gpu("big", 16_384, vec![])];
        let job = Job::profiled("a", profile(50.0, 4_000));
        let scores = engine.score(&job, &gpus).unwrap();
        assert_eq!(scores[0].score, 0);
        assert!(scores[1].score > 0);
    }
}
