//! Turning a queue into placements: the memory guard, the per-GPU job cap and the objectives.
//!
//! A plan runs in phases, each in its own module:
//! 1. [`order`]: the objective ([`objective`]) decides which jobs choose their GPUs first
//!    (surest first; largest memory first for `max-packing`).
//! 2. [`pairs`]: under `balanced` or `max-packing` and contention (fewer idle GPUs than queued
//!    jobs) queued jobs are first paired by maximum-weight matching and each pair started on
//!    an idle GPU; where run times are known, partners that finish together are preferred.
//! 3. The rest are placed one at a time on the GPU the objective values most among those the
//!    job may join ([`guard`]: the memory guard and the job cap). Under `balanced`, while idle
//!    GPUs remain for every job, each starts alone; a co-location worth less than running
//!    alone is refused, and the job stays queued rather than wreck its co-runners. A job about
//!    to start alone may instead wait for a busy GPU that would finish it clearly sooner
//!    ([`wait`]).
//! 4. [`trade`]: jobs that started alone on GPUs of different models trade GPUs when that
//!    lowers their total run time.
//!
//! Judging a job against every GPU is most of a plan's work, and two shortcuts keep it from
//! repeating itself without changing any answer: residents of one kind (predicted alike) have
//! a newcomer's pairs with them predicted once per kind, whether the cluster view kept the
//! kinds or the planner sorts the residents it is given ([`forecast::Found`]); and a job seen
//! exactly like one refused since the last placement is refused for the same reason without
//! judging the GPUs again ([`alike`]).
//!
//! [`reasons`] words the answer. Ties go to the first GPU in the order given. With probability
//! `policy.exploration` the choice is instead drawn uniformly among the GPUs the job fits, from
//! an RNG seeded by the recommender's seed and the queue, so the same seed and queue give the
//! same answer.

mod alike;
mod forecast;
mod guard;
mod objective;
mod order;
mod pairs;
mod reasons;
mod resolve;
mod state;
mod trade;
mod wait;

#[cfg(test)]
mod tests;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use smallvec::SmallVec;
use tandem_api::{Fit, Gpu, GpuScore, GpuSpec, Job, Policy, Recommendation, Unplaced};

use self::forecast::NewcomerPairs;
pub(crate) use self::forecast::{PairMemo, Residents, residents_forecast};
pub(crate) use self::guard::cap;
use self::objective::{Effect, Goal};
use self::order::Entry;
use self::resolve::Resolved;
use self::state::{GpuState, Prepared};
use crate::Result;
use crate::knowledge::{JobView, Knowledge};

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
    /// The policy's objective.
    goal: &'static dyn Goal,
    knowledge: &'a Knowledge,
    seed: u64,
    gpus: Vec<GpuState<'a>>,
    /// The distinct GPU models offered, first spec of each name.
    models: Vec<&'a GpuSpec>,
    /// Pair predictions made so far, when the planner judges many GPUs holding the same few
    /// workloads (the cluster view, which keeps them from one call to the next); `None`
    /// otherwise.
    memo: Option<&'a PairMemo>,
    /// The kinds and terms of residents the planner worked out itself.
    found: forecast::Found,
}

impl<'a> Planner<'a> {
    /// A planner over `gpus`, resolving jobs on the models among them.
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
    /// resolved on `models`, as the cluster view keeps them.
    pub(crate) fn over(
        policy: &'a Policy,
        knowledge: &'a Knowledge,
        seed: u64,
        gpus: Vec<(&'a Gpu, Option<Residents<'a>>)>,
        models: Vec<&'a GpuSpec>,
        memo: Option<&'a PairMemo>,
    ) -> Self {
        // GPUs given with their residents alone have them sorted into kinds here (numbered as
        // they come), unless other GPUs came with kinds of their caller's numbering.
        let finds = shortcuts() && gpus.iter().all(|(_, resolved)| resolved.is_none());
        let mut found = forecast::Found::default();
        let gpus: Vec<GpuState<'a>> = gpus
            .into_iter()
            .map(|(gpu, resolved)| {
                let model = resolved.map_or_else(
                    || {
                        models
                            .iter()
                            .position(|m| m.model == gpu.spec.model)
                            .unwrap_or_default()
                    },
                    |r| r.model,
                );
                let mut state = GpuState {
                    gpu,
                    model,
                    members: SmallVec::new(),
                    residents: gpu.residents.len(),
                    used_mib: 0,
                    unknown_memory: None,
                    time_saved: 0.0,
                    cap: cap(policy, &gpu.spec.model),
                    prepared: None,
                };
                match resolved {
                    Some(Residents {
                        views,
                        kinds,
                        terms,
                        time_saved,
                        ..
                    }) => {
                        for (resident, view) in gpu.residents.iter().zip(views) {
                            state.add(&resident.id, *view);
                        }
                        state.time_saved = time_saved;
                        state.prepared = Some(Prepared::Kept { kinds, terms });
                    }
                    None => {
                        for resident in &gpu.residents {
                            state.add(
                                &resident.id,
                                knowledge.view_on(resident, &gpu.spec, &models),
                            );
                        }
                        if finds && !state.members.is_empty() {
                            let (from, time_saved) =
                                found.residents(knowledge, memo, &state.members);
                            state.time_saved = time_saved;
                            state.prepared = Some(Prepared::Found(from));
                        } else {
                            state.time_saved =
                                forecast::predict(knowledge, memo, &state.members, None).time_saved;
                        }
                    }
                }
                state
            })
            .collect();
        Self {
            policy,
            goal: objective::goal(policy.objective),
            knowledge,
            seed,
            gpus,
            models,
            memo,
            found,
        }
    }

    /// Seconds until each GPU is free for a newcomer: its residents' longest run time left
    /// (work over speed), `None` where unknown. Only a plan needs it (a job may wait for a
    /// busy GPU), so scoring does not pay for it.
    fn free_in(&self) -> Vec<Option<f64>> {
        self.gpus
            .iter()
            .map(|state| {
                state.gpu.residents.iter().try_fold(0.0_f64, |longest, r| {
                    let speed = self.knowledge.speed(&r.id, &state.gpu.spec.model)?;
                    Some(longest.max(r.work? / speed))
                })
            })
            .collect()
    }

    /// `job` on every model of the request.
    fn resolve(&self, job: &Job) -> Resolved {
        resolve::resolve(self.knowledge, &self.models, job)
    }

    /// Groups queued jobs and places each group on one GPU (the phases of the module docs).
    pub(crate) fn recommend(mut self, queue: &'a [Job]) -> Recommendation {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed ^ queue_fingerprint(queue));
        let entries: Vec<Entry> = queue
            .iter()
            .enumerate()
            .map(|(i, job)| (i, self.resolve(job)))
            .collect();
        let exploration = f64::from(self.policy.exploration);
        let mut order = self.goal.order(entries, queue, exploration, &mut rng);

        let mut placed_on: Vec<Vec<&str>> = vec![Vec::new(); self.gpus.len()];
        // Sharing pays for itself only under contention: while idle GPUs remain for every job
        // still to place, `balanced` starts each alone, since any slowdown is then pure loss
        // to its user. `max-packing` packs regardless (the provider's view: GPU time saved).
        let mut idle_left = self.gpus.iter().filter(|s| s.is_idle()).count();
        if self.goal.pairs_first()
            && self.policy.max_jobs_anywhere() >= 2
            && order.len() > idle_left
        {
            order = pairs::place_matched_pairs(
                self.goal,
                self.knowledge,
                self.memo,
                &mut self.gpus,
                queue,
                order,
                &mut placed_on,
            );
            idle_left = self.gpus.iter().filter(|s| s.is_idle()).count();
        }
        // What queued jobs waiting for a GPU will take is booked on it as they wait. Only a
        // job under the `latency` priority may wait, so it is worked out at the first one.
        let mut free_in: Option<Vec<Option<f64>>> = None;
        let mut jobs_left = order.len();
        // Each with its place in the queue, the order they are reported in.
        let mut unplaced: Vec<(usize, Unplaced)> = Vec::new();
        // Jobs started alone on an idle GPU: once all are placed, they may trade GPUs.
        let mut alone: Vec<trade::Alone<'a>> = Vec::new();
        // Jobs refused since the last placement: a job seen alike is refused alike.
        let mut refused = alike::Refused::default();
        for (i, resolved) in order {
            let job = &queue[i];
            let contention = jobs_left > idle_left;
            jobs_left -= 1;
            let given = refused
                .reason_for(&resolved, contention)
                .filter(|_| shortcuts());
            let (chosen, judged) = match given {
                Some(reason) => (Err(reason.to_owned()), false),
                None => (self.choose_for(&resolved, contention, &mut rng), true),
            };
            let best = match chosen {
                Ok(best) => best,
                Err(reason) => {
                    if judged {
                        refused.remember(resolved, contention, &reason);
                    }
                    unplaced.push((
                        i,
                        Unplaced {
                            job: job.id.clone(),
                            reason,
                        },
                    ));
                    continue;
                }
            };
            if self.gpus[best].is_idle()
                && resolved.latency
                && let Some(wait) = wait::for_faster(
                    &self.gpus,
                    free_in.get_or_insert_with(|| self.free_in()),
                    &resolved,
                    best,
                )
            {
                unplaced.push((
                    i,
                    Unplaced {
                        job: job.id.clone(),
                        reason: reasons::waits(
                            &self.gpus[wait.gpu].gpu.id,
                            wait.later_s,
                            &self.gpus[best].gpu.id,
                            wait.now_s,
                        ),
                    },
                ));
                continue;
            }
            refused.forget();
            let state = &mut self.gpus[best];
            let was_idle = state.is_idle();
            if was_idle {
                idle_left -= 1;
            }
            state.add(&job.id, resolved.views[state.model]);
            state.time_saved =
                forecast::predict(self.knowledge, self.memo, &state.members, None).time_saved;
            placed_on[best].push(&job.id);
            if was_idle {
                alone.push((best, &job.id, resolved));
            }
        }
        trade::trade_gpus(&mut self.gpus, alone, &mut placed_on);

        let placements = self
            .gpus
            .iter()
            .zip(placed_on)
            .filter(|(_, placed)| !placed.is_empty())
            .map(|(state, placed)| {
                reasons::placement(self.knowledge, self.memo, self.policy, state, &placed)
            })
            .collect();
        // Report unplaced jobs in queue order, whatever order they were tried in.
        unplaced.sort_by_key(|&(i, _)| i);
        Recommendation {
            placements,
            unplaced: unplaced.into_iter().map(|(_, u)| u).collect(),
        }
    }

    /// The GPU a queued job goes to, or why it goes nowhere. Without `contention` (idle GPUs
    /// left for every job still to place) an objective that shares only under contention
    /// judges idle GPUs first, and the busy ones (a pair prediction each) only if none fits.
    fn choose_for(
        &self,
        resolved: &Resolved,
        contention: bool,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<usize, String> {
        let mut candidates = if self.goal.idle_first() && !contention {
            let idle = self.candidates_among(resolved, |state| state.is_idle());
            if idle.is_empty() {
                self.candidates(resolved)
            } else {
                idle
            }
        } else {
            self.candidates(resolved)
        };
        let too_harmful = self.drop_harmful(&mut candidates);
        self.choose(&candidates, rng)
            .ok_or_else(|| match too_harmful {
                Some(worst) => reasons::too_harmful(worst),
                None => reasons::unplaceable(self.knowledge, self.policy, &self.gpus, resolved),
            })
    }

    /// Whether `job` may join each GPU, and why not where it may not.
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
            .map(|state| {
                guard::fits(
                    self.knowledge,
                    self.policy,
                    state,
                    &resolved.views[state.model],
                )
                .err()
            })
            .collect()
    }

    /// Why the job may not join each GPU of `on` now, in order: `None` where it may. Each
    /// entry is a GPU and the index of the planner's GPU that stands for it (the cluster view
    /// judges one GPU per state for all the GPUs it sees alike). The guard runs once per
    /// planner GPU; the words are each GPU's own, since GPUs seen alike hold different jobs
    /// and a reason may name one.
    pub(crate) fn refusals_on(&self, job: &Job, on: &[(usize, &Gpu)]) -> Vec<Option<String>> {
        let resolved = self.resolve(job);
        let refusals: Vec<Option<guard::Refusal>> = self
            .gpus
            .iter()
            .map(|state| guard::refusal(self.knowledge, state, &resolved.views[state.model]))
            .collect();
        on.iter()
            .map(|&(i, gpu)| {
                let refusal = refusals[i]?;
                let state = &self.gpus[i];
                let unknown = match refusal {
                    guard::Refusal::BesideUnknownMemory => self.unknown_memory_resident(gpu),
                    _ => "",
                };
                Some(refusal.describe(self.policy, state, &resolved.views[state.model], unknown))
            })
            .collect()
    }

    /// The first of `gpu`'s residents whose memory the engine does not know on `gpu`'s model
    /// (the one a GPU's state records, [`GpuState::unknown_memory`]).
    fn unknown_memory_resident<'g>(&self, gpu: &'g Gpu) -> &'g str {
        gpu.residents
            .iter()
            .find(|r| {
                self.knowledge
                    .view_on(r, &gpu.spec, &self.models)
                    .memory_mib
                    .is_none()
            })
            .map_or("", |r| r.id.as_str())
    }

    /// `job`'s score on each GPU, by GPU id.
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

    fn candidates(&self, resolved: &Resolved) -> Vec<Candidate> {
        self.candidates_among(resolved, |_| true)
    }

    /// The candidates among the GPUs `keep` selects, in GPU order.
    fn candidates_among(
        &self,
        resolved: &Resolved,
        keep: impl Fn(&GpuState<'_>) -> bool,
    ) -> Vec<Candidate> {
        let mut pairs = NewcomerPairs::default();
        self.gpus
            .iter()
            .enumerate()
            .filter(|(_, state)| keep(state))
            .filter(|(_, state)| {
                guard::refusal(self.knowledge, state, &resolved.views[state.model]).is_none()
            })
            .map(|(gpu, state)| {
                let view = &resolved.views[state.model];
                self.evaluate(gpu, state, view, resolved.slowness[state.model], &mut pairs)
            })
            .collect()
    }

    /// Under an objective that refuses harm (`balanced`), a co-location worth less than
    /// running alone (its slowdown penalty outweighs the time it saves) is not an option: the
    /// job waits for a better slot rather than wreck its co-runners. Returns the smallest worst
    /// slowdown among the dropped candidates when that left none.
    fn drop_harmful(&self, candidates: &mut Vec<Candidate>) -> Option<f64> {
        if !self.goal.refuses_harm() {
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

    /// What the objective makes of the job seen as `view` joining `state`; `pairs` keeps the
    /// job's pairs with the kinds of residents judged so far.
    fn evaluate(
        &self,
        gpu: usize,
        state: &GpuState<'_>,
        view: &JobView,
        slowness: f64,
        pairs: &mut NewcomerPairs,
    ) -> Candidate {
        let prepared = match state.prepared {
            Some(Prepared::Kept { kinds, terms }) => Some((kinds, terms)),
            Some(Prepared::Found(from)) => Some(self.found.of(from, state.residents)),
            None => None,
        };
        let after = match prepared {
            // The residents alone (no job placed by this plan yet): their terms are kept.
            Some((kinds, terms)) if state.members.len() == state.residents => forecast::join(
                self.knowledge,
                self.memo,
                &state.members,
                terms,
                kinds,
                view,
                pairs,
            ),
            _ => forecast::predict(self.knowledge, self.memo, &state.members, Some(view)),
        };
        // A job of unknown memory fills the GPU as far as packing can tell.
        let left = view
            .memory_mib
            .filter(|_| state.unknown_memory.is_none())
            .map_or(0, |mib| state.free_mib().saturating_sub(u64::from(mib)));
        let effect = Effect {
            time_gained: after.time_saved - state.time_saved,
            worst_slowdown: after.worst(),
            uncertainty: after.uncertainty,
            free_share: left as f64 / state.capacity() as f64,
        };
        let value = self.goal.value(&effect);
        // Scores follow the choice: the objective's value less the model's slowness.
        let score = self.goal.score(&effect, value, slowness);
        Candidate {
            gpu,
            value,
            worst_slowdown: effect.worst_slowdown,
            slowness,
            // A GPU the job fits never scores 0: 0 means "does not fit".
            score: score.round().clamp(1.0, 100.0) as u8,
        }
    }

    /// The candidate's GPU with the highest merit (the first among equals), or with
    /// probability `policy.exploration` a candidate drawn at random.
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
}

#[cfg(test)]
thread_local! {
    /// Whether the planner takes its shortcuts (a refusal given again to a job seen alike,
    /// residents sorted into kinds), which tests turn off to check they change no answer.
    static SHORTCUTS: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Whether the planner takes its shortcuts: always, but in tests that compare answers without.
fn shortcuts() -> bool {
    #[cfg(test)]
    return SHORTCUTS.with(std::cell::Cell::get);
    #[cfg(not(test))]
    true
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
