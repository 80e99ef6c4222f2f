//! The cluster view a recommender keeps (WIT 0.4.0): GPUs by handle, fed by the host's
//! changes, judged per distinct state.
//!
//! Hosts describe the cluster once and then send what changes ([`ClusterChange`]); decisions
//! name a job, never GPU records. Two GPUs of one model and memory whose residents the engine
//! sees alike (features, cluster, workload and reserved memory of each) get the same fit and
//! score, so the view groups GPUs into *states* and judges each state once. Answers are kept
//! per *job class* — what a job's answer depends on: its id's workload, its profile, its
//! declared model and its priority — and per state: a change moves a GPU from one state to
//! another (leaving every other answer valid), and only states no class has seen yet are
//! judged on the next call. A reason is judged per state too, but worded per GPU: it may name
//! a resident, and the GPUs of one state hold different jobs. What the engine knows (an observation, the policy) changes every
//! answer, so it drops them all and re-derives the states.
//!
//! A mostly busy cluster costs what an idle one does once its states were judged for a class:
//! a call is then a copy of one byte per GPU.

use std::collections::{BTreeMap, HashMap, VecDeque};

use tandem_api::{
    Choice, ClusterChange, ClusterSummary, EngineError, Gpu, GpuSpec, GpuTable, Job, Policy,
};

use crate::Result;
use crate::identity::workload_of;
use crate::knowledge::{JobView, Knowledge, PartnerTerms};
use crate::placement::{PairMemo, Planner, Residents, cap, residents_forecast};

/// A handle without a GPU.
const NO_STATE: u32 = u32::MAX;
/// A score not computed yet (scores are 0..=100).
const UNKNOWN: u8 = u8::MAX;
/// Job classes whose answers are kept; the oldest is dropped beyond it.
const CLASSES: usize = 256;

/// The GPUs a recommender judges by handle, and what it derived from them.
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    table: GpuTable,
    /// States and answers; `None` until needed after what the engine knows changed.
    derived: Option<Derived>,
}

impl PartialEq for View {
    /// Two views are equal when they hold the same GPUs: the rest is derived from them.
    fn eq(&self, other: &Self) -> bool {
        self.table == other.table
    }
}

/// GPUs of one state.
#[derive(Debug, Clone)]
struct State {
    key: Vec<u64>,
    /// Index of its GPU model in the view's models (the key's first word).
    model: usize,
    /// One GPU of the state, judged for all of them.
    gpu: Gpu,
    /// Its residents as the predictor sees them on its model, in its residents' order.
    residents: Vec<JobView>,
    /// Each resident's kind ([`Kinds`]).
    kinds: Vec<u32>,
    /// Each resident's predicted terms from the others ([`residents_forecast`]).
    terms: Vec<PartnerTerms>,
    /// Time they save by sharing the GPU ([`residents_forecast`]).
    time_saved: f64,
    /// GPUs in the state; 0 for a free slot.
    gpus: u32,
}

#[derive(Debug, Clone, Default)]
struct Derived {
    /// The first spec of each GPU model, in handle order, and how many GPUs have it.
    models: Vec<(GpuSpec, u32)>,
    /// State of each handle ([`NO_STATE`] without a GPU).
    state_of: Vec<u32>,
    /// Node of each handle's GPU (empty without a GPU).
    node_of: Vec<String>,
    states: Vec<State>,
    index: HashMap<Vec<u64>, u32>,
    free: Vec<u32>,
    /// Handles of each node's GPUs, increasing.
    nodes: BTreeMap<String, Vec<u32>>,
    /// Scores per job class and state ([`UNKNOWN`] until judged).
    answers: HashMap<String, Vec<u8>>,
    /// Classes by age, for eviction.
    classes: VecDeque<String>,
    /// Pair predictions made while judging classes: a class judged again (states it has
    /// not seen) predicts none of its pairs with the residents twice.
    memo: PairMemo,
    kinds: Kinds,
}

/// Residents by kind: residents predicted alike (the same `JobView::prediction_key`, which
/// includes the GPU model) share a small number, so judging a job predicts its pairs once per
/// kind, looked up without hashing. A kind lives while a state holds a resident of it: the
/// numbers stay as few as the kinds on the GPUs.
#[derive(Debug, Clone, Default)]
struct Kinds {
    by_key: HashMap<[u64; 5], u32>,
    /// Residents of each kind among the states (0 for a free number).
    residents: Vec<u32>,
    free: Vec<u32>,
}

impl Kinds {
    /// The kind of a resident seen as `view`, counting one more resident of it.
    fn enter(&mut self, view: &JobView) -> u32 {
        let key = view.prediction_key();
        let kind = match self.by_key.get(&key) {
            Some(&kind) => kind,
            None => {
                let kind = self.free.pop().unwrap_or_else(|| {
                    self.residents.push(0);
                    self.residents.len() as u32 - 1
                });
                self.by_key.insert(key, kind);
                kind
            }
        };
        self.residents[kind as usize] += 1;
        kind
    }

    /// Counts one resident of `kind`, seen as `view`, fewer.
    fn leave(&mut self, kind: u32, view: &JobView) {
        let count = &mut self.residents[kind as usize];
        *count -= 1;
        if *count == 0 {
            self.by_key.remove(&view.prediction_key());
            self.free.push(kind);
        }
    }
}

impl View {
    /// The largest memory, in MiB, among the view's GPUs of model `gpu_model`, if it holds one.
    pub(crate) fn largest_memory_of(&self, gpu_model: &str) -> Option<u32> {
        self.table
            .iter()
            .filter(|(_, gpu)| gpu.spec.model == gpu_model)
            .map(|(_, gpu)| gpu.spec.memory_mib)
            .max()
    }

    /// Drops what was derived: what the engine knows or its policy changed.
    pub(crate) fn invalidate(&mut self) {
        self.derived = None;
    }

    /// Applies the host's changes, all or nothing; `check` validates each GPU and job record
    /// first (the engine's contract checks).
    pub(crate) fn update(
        &mut self,
        changes: &[ClusterChange],
        knowledge: &Knowledge,
        check: impl Fn(&ClusterChange, usize) -> Result<()>,
    ) -> Result<ClusterSummary> {
        for (i, change) in changes.iter().enumerate() {
            check(change, i)?;
        }
        let touched = self.table.apply(changes)?;
        if let Some(derived) = &mut self.derived
            && !derived.update(&self.table, &touched, knowledge)
        {
            self.derived = None;
        }
        Ok(self.summary(knowledge))
    }

    /// What the view holds.
    pub(crate) fn summary(&mut self, knowledge: &Knowledge) -> ClusterSummary {
        let handles = self.table.handles();
        let gpus = self.table.len() as u32;
        let derived = self.derived(knowledge);
        ClusterSummary {
            gpus,
            nodes: derived.nodes.len() as u32,
            // A state that lost its last GPU is on the free list until reused: no pass over
            // every state per pod event.
            states: (derived.states.len() - derived.free.len()) as u32,
            handles,
        }
    }

    fn derived(&mut self, knowledge: &Knowledge) -> &mut Derived {
        let table = &self.table;
        self.derived
            .get_or_insert_with(|| Derived::build(table, knowledge))
    }

    /// The job's score on every handle (0 where it does not fit or no GPU is).
    pub(crate) fn score_all(
        &mut self,
        job: &Job,
        policy: &Policy,
        knowledge: &Knowledge,
        seed: u64,
    ) -> Vec<u8> {
        let handles = self.table.handles() as usize;
        let derived = self.derived(knowledge);
        let class = derived.judge_all(job, policy, knowledge, seed);
        let cells = &derived.answers[&class];
        // The one pass over every GPU: a lookup each, [`NO_STATE`] out of the cells' range.
        let mut scores: Vec<u8> = derived
            .state_of
            .iter()
            .take(handles)
            .map(|&state| cells.get(state as usize).copied().unwrap_or(0))
            .collect();
        scores.resize(handles, 0);
        scores
    }

    /// Why the job may not join each of `handles` (empty where it may).
    pub(crate) fn explain(
        &mut self,
        job: &Job,
        handles: &[u32],
        policy: &Policy,
        knowledge: &Knowledge,
        seed: u64,
    ) -> Result<Vec<String>> {
        let table = &self.table;
        let gpus = handles
            .iter()
            .enumerate()
            .map(|(i, &handle)| {
                table.get(handle).ok_or_else(|| {
                    EngineError::InvalidInput(format!("gpus[{i}]: no GPU has handle {handle}"))
                })
            })
            .collect::<Result<Vec<&Gpu>>>()?;
        let derived = self
            .derived
            .get_or_insert_with(|| Derived::build(table, knowledge));
        let mut states: Vec<u32> = handles
            .iter()
            .map(|&h| derived.state_of[h as usize])
            .collect();
        states.sort_unstable();
        states.dedup();
        // Each state is judged once, but worded for each GPU: a reason may name a resident,
        // and the GPUs of one state hold different jobs.
        let on: Vec<(usize, &Gpu)> = handles
            .iter()
            .zip(gpus)
            .map(|(&h, gpu)| {
                let state = derived.state_of[h as usize];
                (states.partition_point(|&s| s < state), gpu)
            })
            .collect();
        let reasons = derived
            .planner(states.iter().map(|&s| s as usize), policy, knowledge, seed)
            .refusals_on(job, &on);
        Ok(reasons.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// The best GPU of `node` for the job (ties to the lowest handle), or why none fits.
    pub(crate) fn choose(
        &mut self,
        job: &Job,
        node: &str,
        policy: &Policy,
        knowledge: &Knowledge,
        seed: u64,
    ) -> Result<Choice> {
        let derived = self.derived(knowledge);
        let Some(handles) = derived.nodes.get(node).cloned() else {
            return Err(EngineError::InvalidInput(format!(
                "node `{node}` has no GPU in the cluster view"
            )));
        };
        let class = derived.judge_all(job, policy, knowledge, seed);
        let cells = &derived.answers[&class];
        let best = handles
            .iter()
            .map(|&h| (h, cells[derived.state_of[h as usize] as usize]))
            .filter(|&(_, score)| score > 0)
            // Highest score, lowest handle among equals (`max_by_key` keeps the last maximum).
            .max_by_key(|&(h, score)| (score, std::cmp::Reverse(h)));
        if let Some((handle, score)) = best {
            return Ok(Choice {
                gpu: Some(handle),
                score,
                reason: String::new(),
            });
        }
        let reasons = self.explain(job, &handles, policy, knowledge, seed)?;
        let reason = handles
            .iter()
            .zip(reasons)
            .map(|(&h, why)| {
                let id = self.table.get(h).map_or("?", |g| g.id.as_str());
                format!("GPU {id}: {why}")
            })
            .collect::<Vec<_>>()
            .join("; ");
        Ok(Choice {
            gpu: None,
            score: 0,
            reason,
        })
    }
}

impl Derived {
    fn build(table: &GpuTable, knowledge: &Knowledge) -> Self {
        let mut derived = Self::default();
        for (_, gpu) in table.iter() {
            match derived
                .models
                .iter_mut()
                .find(|(m, _)| m.model == gpu.spec.model)
            {
                Some((_, count)) => *count += 1,
                None => derived.models.push((gpu.spec.clone(), 1)),
            }
        }
        derived.state_of = vec![NO_STATE; table.handles() as usize];
        derived.node_of = vec![String::new(); table.handles() as usize];
        for (handle, gpu) in table.iter() {
            derived.enter(handle, gpu, knowledge);
        }
        derived
    }

    fn model_specs(&self) -> Vec<&GpuSpec> {
        self.models.iter().map(|(spec, _)| spec).collect()
    }

    /// A planner over one GPU of each of `states`, their residents already resolved, pair
    /// predictions memoized from one call to the next (the states share a few workloads).
    fn planner<'a>(
        &'a self,
        states: impl Iterator<Item = usize>,
        policy: &'a Policy,
        knowledge: &'a Knowledge,
        seed: u64,
    ) -> Planner<'a> {
        let gpus = states
            .map(|s| {
                let state = &self.states[s];
                let residents = Residents {
                    model: state.model,
                    views: &state.residents,
                    kinds: &state.kinds,
                    terms: &state.terms,
                    time_saved: state.time_saved,
                };
                (&state.gpu, Some(residents))
            })
            .collect();
        Planner::over(
            policy,
            knowledge,
            seed,
            gpus,
            self.model_specs(),
            Some(&self.memo),
        )
    }

    /// Follows the changes of `touched` handles; `false` when the set of GPU models changed
    /// (every job's slowness is relative to its best model among them: all answers change).
    fn update(&mut self, table: &GpuTable, touched: &[u32], knowledge: &Knowledge) -> bool {
        let handles = table.handles() as usize;
        if self.state_of.len() < handles {
            self.state_of.resize(handles, NO_STATE);
            self.node_of.resize(handles, String::new());
        }
        for &handle in touched {
            let after = table.get(handle);
            if let Some(gpu) = after
                && !self.models.iter().any(|(m, _)| m.model == gpu.spec.model)
            {
                return false;
            }
            self.leave(handle);
            if let Some(gpu) = after {
                if let Some((_, count)) = self
                    .models
                    .iter_mut()
                    .find(|(m, _)| m.model == gpu.spec.model)
                {
                    *count += 1;
                }
                self.enter(handle, gpu, knowledge);
            }
        }
        self.state_of.truncate(handles);
        self.node_of.truncate(handles);
        self.models.iter().all(|(_, count)| *count > 0)
    }

    /// Takes `handle` out of its state (if it has one).
    fn leave(&mut self, handle: u32) {
        let slot = handle as usize;
        let Some(&state) = self.state_of.get(slot) else {
            return;
        };
        if state == NO_STATE {
            return;
        }
        self.state_of[slot] = NO_STATE;
        let node = std::mem::take(&mut self.node_of[slot]);
        if let Some(list) = self.nodes.get_mut(&node) {
            if let Ok(at) = list.binary_search(&handle) {
                list.remove(at);
            }
            if list.is_empty() {
                self.nodes.remove(&node);
            }
        }
        let entry = &mut self.states[state as usize];
        entry.gpus -= 1;
        if let Some((_, count)) = self
            .models
            .iter_mut()
            .find(|(m, _)| m.model == entry.gpu.spec.model)
        {
            *count -= 1;
        }
        if entry.gpus == 0 {
            self.index.remove(&entry.key);
            for (&kind, view) in entry.kinds.iter().zip(&entry.residents) {
                self.kinds.leave(kind, view);
            }
            self.free.push(state);
        }
    }

    /// Files `handle` under the state of `gpu`, creating it if new.
    fn enter(&mut self, handle: u32, gpu: &Gpu, knowledge: &Knowledge) {
        let (key, residents) = self.key(gpu, knowledge);
        let state = match self.index.get(&key) {
            Some(&state) => {
                self.states[state as usize].gpus += 1;
                state
            }
            None => {
                let (terms, time_saved) = residents_forecast(knowledge, &residents);
                let fresh = State {
                    model: key[0] as usize,
                    key: key.clone(),
                    gpu: gpu.clone(),
                    kinds: residents.iter().map(|r| self.kinds.enter(r)).collect(),
                    terms,
                    time_saved,
                    residents,
                    gpus: 1,
                };
                let state = match self.free.pop() {
                    Some(state) => {
                        self.states[state as usize] = fresh;
                        state
                    }
                    None => {
                        self.states.push(fresh);
                        self.states.len() as u32 - 1
                    }
                };
                // Nothing was judged of this state yet, whatever its slot held before.
                for cells in self.answers.values_mut() {
                    if let Some(cell) = cells.get_mut(state as usize) {
                        *cell = UNKNOWN;
                    }
                }
                self.index.insert(key, state);
                state
            }
        };
        self.state_of[handle as usize] = state;
        self.node_of[handle as usize].clone_from(&gpu.node);
        let list = self.nodes.entry(gpu.node.clone()).or_default();
        if let Err(at) = list.binary_search(&handle) {
            list.insert(at, handle);
        }
    }

    /// What a job's answer on `gpu` depends on: the model, the memory and each resident as the
    /// predictor sees it there, residents in a canonical order; and the residents' views.
    fn key(&self, gpu: &Gpu, knowledge: &Knowledge) -> (Vec<u64>, Vec<JobView>) {
        let models = self.model_specs();
        let model = models
            .iter()
            .position(|m| m.model == gpu.spec.model)
            .unwrap_or_default();
        let views: Vec<JobView> = gpu
            .residents
            .iter()
            .map(|r| knowledge.view_on(r, &gpu.spec, &models))
            .collect();
        let mut members: Vec<[u64; 6]> = views.iter().map(view_key).collect();
        members.sort_unstable();
        let mut key = Vec::with_capacity(2 + 6 * members.len());
        key.push(model as u64);
        key.push(u64::from(gpu.spec.memory_mib));
        key.extend(members.into_iter().flatten());
        (key, views)
    }

    /// Makes the answers of the job's class cover every state (judging the states it has not
    /// seen) and returns the class.
    fn judge_all(
        &mut self,
        job: &Job,
        policy: &Policy,
        knowledge: &Knowledge,
        seed: u64,
    ) -> String {
        let class = class_of(job);
        if !self.answers.contains_key(&class) {
            if self.classes.len() >= CLASSES
                && let Some(oldest) = self.classes.pop_front()
            {
                self.answers.remove(&oldest);
            }
            self.classes.push_back(class.clone());
        }
        let states = self.states.len();
        let known = self.answers.get(&class).map_or(&[][..], Vec::as_slice);
        // Most busy states of a cluster hold as many jobs as the policy lets a GPU hold: no
        // class may join them (they score 0), so they are not judged.
        let caps: Vec<usize> = self
            .models
            .iter()
            .map(|(spec, _)| cap(policy, &spec.model))
            .collect();
        let mut full = Vec::new();
        let mut missing = Vec::new();
        for (s, state) in self.states.iter().enumerate() {
            if state.gpus == 0 || known.get(s).is_some_and(|&c| c != UNKNOWN) {
                continue;
            }
            if state.residents.len() >= caps[state.model] {
                full.push(s);
            } else {
                missing.push(s);
            }
        }
        let scores = if missing.is_empty() {
            Vec::new()
        } else {
            self.planner(missing.iter().copied(), policy, knowledge, seed)
                .scores(job)
        };
        let cells = self.answers.entry(class.clone()).or_default();
        cells.resize(states, UNKNOWN);
        for (s, score) in missing.into_iter().zip(scores) {
            cells[s] = score;
        }
        for s in full {
            cells[s] = 0;
        }
        class
    }
}

/// A resident as the state key records it: what its predictions depend on, and its reserved
/// memory.
fn view_key(view: &JobView) -> [u64; 6] {
    let [util, access, share, cluster, workload] = view.prediction_key();
    [
        util,
        access,
        share,
        cluster,
        workload,
        // An extrapolated figure fits alike but shares otherwise.
        view.memory_mib.map_or(u64::MAX, |mib| {
            u64::from(mib) | u64::from(view.memory_extrapolated) << 32
        }),
    ]
}

/// What a job's answers depend on, as a key: its workload, profile, declared model and
/// priority (not its submission time or work left, which judging one GPU does not use).
fn class_of(job: &Job) -> String {
    // Serializing plain records cannot fail; floats keep every bit (`float_roundtrip`).
    serde_json::to_string(&(
        workload_of(&job.id),
        &job.profile,
        &job.declared,
        job.priority,
    ))
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use tandem_api::{Binding, GpuSpec, Profile, Unbinding, ViewGpu};

    use crate::Recommender;

    use super::*;

    const MODELS: [(&str, u32); 3] = [("V100", 16_384), ("P100", 16_384), ("K80", 11_441)];

    fn profiled(id: String, util: f32, mem: u32) -> Job {
        Job::profiled(
            id,
            Profile {
                gpu_util_pct: util,
                mem_access_pct: util / 3.0,
                mem_used_mib: mem,
                gpu_model: "V100".into(),
            },
        )
    }

    fn gpu(handle: u32, model: usize, residents: Vec<Job>) -> Gpu {
        let (name, memory) = MODELS[model];
        Gpu {
            id: format!("n{}/{}", handle / 4, handle % 4),
            node: format!("n{}", handle / 4),
            spec: GpuSpec::new(name, memory),
            residents,
        }
    }

    /// What the stateless calls say about `job` on the view's GPUs, by handle.
    fn stateless(engine: &Recommender, job: &Job, table: &GpuTable) -> (Vec<u8>, Vec<String>) {
        let gpus: Vec<Gpu> = table.iter().map(|(_, g)| g.clone()).collect();
        let mut scores = vec![0; table.handles() as usize];
        let mut reasons = vec![String::new(); table.handles() as usize];
        let fits = engine.filter(job, &gpus).unwrap();
        for (((handle, _), score), fit) in table
            .iter()
            .zip(engine.score(job, &gpus).unwrap())
            .zip(fits)
        {
            scores[handle as usize] = score.score;
            reasons[handle as usize] = fit.reason;
        }
        (scores, reasons)
    }

    /// One step of a random history: which change, on which handle, with which numbers.
    #[derive(Debug, Clone)]
    enum Step {
        Set(u32, usize),
        Remove(u32),
        Bind(u32, f32, u32),
        Unbind(u32),
        Observe(f32),
    }

    fn arb_step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u32..12, 0usize..3).prop_map(|(h, m)| Step::Set(h, m)),
            (0u32..12).prop_map(Step::Remove),
            (0u32..12, 1.0f32..99.0, 500u32..9_000).prop_map(|(h, u, m)| Step::Bind(h, u, m)),
            (0u32..12).prop_map(Step::Unbind),
            (1.0f32..99.0).prop_map(Step::Observe),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn the_view_answers_what_the_stateless_calls_answer(
            steps in prop::collection::vec(arb_step(), 1..40),
            util in 1.0f32..99.0,
            mem in 500u32..12_000,
            objective in 0usize..3,
        ) {
            let policy = Policy { objective: tandem_api::Objective::ALL[objective], ..Policy::default() };
            let mut engine = Recommender::bootstrap(policy, 3).unwrap();
            let mut table = GpuTable::default();
            let job = profiled("newcomer".into(), util, mem);
            // Two classes: the job itself, and a job of the same workload as the residents
            // named `w~…` (whose profile the engine learns in `Observe`).
            let other = Job::new("w~new");
            for (n, step) in steps.into_iter().enumerate() {
                let change = match step {
                    Step::Set(h, m) => ClusterChange::SetGpu(ViewGpu { handle: h, gpu: gpu(h, m, Vec::new()) }),
                    Step::Remove(h) if table.get(h).is_some() => ClusterChange::RemoveGpu(h),
                    Step::Bind(h, u, m) if table.get(h).is_some() => {
                        let resident = if n % 3 == 0 {
                            Job::new(format!("w~{n}"))
                        } else {
                            profiled(format!("r{n}"), u, m)
                        };
                        ClusterChange::Bind(Binding { gpu: h, job: resident })
                    }
                    Step::Unbind(h) => match table.get(h).and_then(|g| g.residents.first()) {
                        Some(r) => ClusterChange::Unbind(Unbinding { gpu: h, job: r.id.clone() }),
                        None => continue,
                    },
                    Step::Observe(u) => {
                        engine.observe_profile("w", Profile {
                            gpu_util_pct: u, mem_access_pct: 10.0, mem_used_mib: 3_000,
                            gpu_model: "V100".into(),
                        }).unwrap();
                        continue;
                    }
                    _ => continue,
                };
                let changes = [change];
                let summary = engine.update_cluster(&changes).unwrap();
                table.apply(&changes).unwrap();
                prop_assert_eq!(summary.gpus as usize, table.len());
                prop_assert!(summary.states <= summary.gpus);
                // What the updates kept is what a view derived from scratch counts.
                let mut rebuilt = engine.clone();
                rebuilt.set_policy(rebuilt.policy().clone()).unwrap();
                prop_assert_eq!(rebuilt.cluster_summary(), summary);
                for probe in [&job, &other] {
                    let (scores, reasons) = stateless(&engine, probe, &table);
                    prop_assert_eq!(&engine.score_all(probe).unwrap(), &scores);
                    let handles: Vec<u32> = table.iter().map(|(h, _)| h).collect();
                    let explained = engine.explain(probe, &handles).unwrap();
                    for (h, why) in handles.iter().zip(explained) {
                        // Word for word: a reason names its own GPU's residents, whichever
                        // GPU of its state was judged.
                        prop_assert_eq!(&why, &reasons[*h as usize]);
                    }
                }
            }
        }
    }

    /// A recommender over 96 GPUs, two of three busy with up to three instances of eight
    /// profiled workloads.
    fn busy(policy: &Policy) -> Recommender {
        let mut engine = Recommender::bootstrap(policy.clone(), 5).unwrap();
        for w in 0..8u16 {
            let profile = Profile {
                gpu_util_pct: 10.0 + f32::from(w) * 9.0,
                mem_access_pct: 5.0 + f32::from(w) * 4.0,
                mem_used_mib: 1_000 + u32::from(w) * 600,
                gpu_model: "V100".into(),
            };
            engine.observe_profile(&format!("w{w}"), profile).unwrap();
        }
        let changes: Vec<ClusterChange> = (0..96u32)
            .map(|h| {
                let residents = (0..h % 4)
                    .map(|r| Job::new(format!("w{}~{h}-{r}", (h * 7 + r * 3) % 8)))
                    .collect();
                ClusterChange::SetGpu(ViewGpu {
                    handle: h,
                    gpu: gpu(h, (h / 4 % 3) as usize, residents),
                })
            })
            .collect();
        engine.update_cluster(&changes).unwrap();
        engine
    }

    #[test]
    fn a_class_gets_the_same_answer_cold_warm_and_after_other_classes() {
        for objective in tandem_api::Objective::ALL {
            for max_jobs_per_gpu in [1, 2, 3] {
                let policy = Policy {
                    objective,
                    max_jobs_per_gpu,
                    ..Policy::default()
                };
                // One recommender judges every class in turn (its caches fill); each class is
                // also judged by a recommender that never saw another.
                let mut shared = busy(&policy);
                for i in 0..12u16 {
                    let job = profiled(
                        format!("j{i}"),
                        5.0 + f32::from(i) * 8.0,
                        500 + u32::from(i) * 700,
                    );
                    let cold = shared.score_all(&job).unwrap();
                    assert_eq!(shared.score_all(&job).unwrap(), cold, "warm, {policy:?}");
                    assert_eq!(busy(&policy).score_all(&job).unwrap(), cold, "{policy:?}");
                    assert!(cold.iter().any(|&s| s > 0), "{policy:?}: {cold:?}");
                }
            }
        }
    }

    #[test]
    fn each_gpu_of_a_state_is_explained_by_its_own_residents() {
        let mut engine = Recommender::bootstrap(Policy::default(), 1).unwrap();
        // Two GPUs of one model, each running a different job of unknown memory: the engine
        // sees the residents alike, so the GPUs share one state.
        let changes: Vec<ClusterChange> = ["alpha", "beta"]
            .into_iter()
            .enumerate()
            .map(|(h, resident)| {
                let h = h as u32;
                ClusterChange::SetGpu(ViewGpu {
                    handle: h,
                    gpu: gpu(h, 0, vec![Job::new(resident)]),
                })
            })
            .collect();
        assert_eq!(engine.update_cluster(&changes).unwrap().states, 1);
        let newcomer = Job::new("gamma");
        // Whichever GPU of the state is asked about first, each reason names its own resident.
        for handles in [[0, 1], [1, 0]] {
            let reasons = engine.explain(&newcomer, &handles).unwrap();
            for (handle, why) in handles.iter().zip(&reasons) {
                let (own, other) = if *handle == 0 {
                    ("`alpha`", "beta")
                } else {
                    ("`beta`", "alpha")
                };
                assert!(
                    why.contains(own) && !why.contains(other),
                    "GPU {handle}: {why}"
                );
            }
        }
        let choice = engine.choose_gpu(&newcomer, "n0").unwrap();
        assert_eq!(choice.gpu, None);
        assert!(
            choice.reason.contains("GPU n0/0: `alpha`")
                && choice.reason.contains("GPU n0/1: `beta`"),
            "{}",
            choice.reason
        );
    }

    #[test]
    fn kinds_are_numbered_only_while_a_gpu_holds_one() {
        let mut engine = Recommender::bootstrap(Policy::default(), 1).unwrap();
        let set = ClusterChange::SetGpu(ViewGpu {
            handle: 0,
            gpu: gpu(0, 0, Vec::new()),
        });
        engine.update_cluster(&[set]).unwrap();
        let probe = profiled("probe".into(), 30.0, 2_000);
        for n in 0..50u16 {
            // Each resident its own profile: a kind of its own.
            let resident = profiled(format!("r{n}"), 10.0 + f32::from(n), 1_000);
            let id = resident.id.clone();
            let bind = ClusterChange::Bind(Binding {
                gpu: 0,
                job: resident,
            });
            engine.update_cluster(&[bind]).unwrap();
            assert!(engine.score_all(&probe).unwrap()[0] > 0);
            let unbind = ClusterChange::Unbind(Unbinding { gpu: 0, job: id });
            engine.update_cluster(&[unbind]).unwrap();
        }
        let kinds = &engine.view.derived.as_ref().unwrap().kinds;
        assert!(kinds.by_key.is_empty(), "{kinds:?}");
        assert_eq!(kinds.residents, vec![0], "one number, used again");
    }

    #[test]
    fn a_busy_cluster_collapses_to_its_distinct_states_and_choices_follow_scores() {
        let mut engine = Recommender::bootstrap(Policy::default(), 1).unwrap();
        let mut changes = Vec::new();
        for h in 0..400u32 {
            // Every other GPU holds one of four workloads.
            let residents = if h % 2 == 0 {
                vec![profiled(
                    format!("w{}~{h}", h % 8),
                    20.0 + (h % 8) as f32 * 10.0,
                    2_000,
                )]
            } else {
                Vec::new()
            };
            changes.push(ClusterChange::SetGpu(ViewGpu {
                handle: h,
                gpu: gpu(h, 0, residents),
            }));
        }
        let summary = engine.update_cluster(&changes).unwrap();
        assert_eq!(
            (summary.gpus, summary.nodes, summary.handles),
            (400, 100, 400)
        );
        assert_eq!(summary.states, 5, "idle, and one per workload: {summary:?}");
        let job = profiled("a".into(), 30.0, 4_000);
        let scores = engine.score_all(&job).unwrap();
        let choice = engine.choose_gpu(&job, "n0").unwrap();
        let best = (0..4)
            .max_by_key(|&h| (scores[h], std::cmp::Reverse(h)))
            .unwrap();
        assert_eq!(choice.gpu, Some(best as u32));
        assert_eq!(choice.score, scores[best]);
        // A job too big for any GPU: no choice, and the reason names each GPU.
        let huge = profiled("huge".into(), 30.0, 40_000);
        let choice = engine.choose_gpu(&huge, "n1").unwrap();
        assert_eq!(choice.gpu, None);
        assert!(
            choice.reason.contains("GPU n1/0:") && choice.reason.contains("40000 MiB"),
            "{}",
            choice.reason
        );
        let error = engine.choose_gpu(&job, "nowhere").unwrap_err().to_string();
        assert!(error.contains("`nowhere`"), "{error}");
        // A failed update leaves the view as it was.
        let before = engine.cluster_summary();
        assert!(
            engine
                .update_cluster(&[ClusterChange::RemoveGpu(400)])
                .is_err()
        );
        assert_eq!(engine.cluster_summary(), before);
    }
}
