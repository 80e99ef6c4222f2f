//! What the engine tasks work on: [`EngineState`] — the recommender and the [`Handles`] that
//! name the cluster view's GPUs — and the decisions made on it ([`Placement`], [`NodeScore`]).
//! It is used by one task at a time, so a decision and the view it is made on are always
//! consistent (a `bind` that chooses a GPU and records the job there is one task).

use std::collections::HashSet;

use rustc_hash::FxHashMap;

use tandem_api::{
    Binding, ClusterChange, ClusterSummary, Gpu, GpuSpec, Job, Policy, Unbinding, ViewGpu,
};
use tandem_host::{Recommender, Runtime};

use super::error::{EngineFailure, failed};

/// What a placement on one node came to: the GPUs chosen, or why the node cannot take the job
/// (a decision, not a failure: a failure of the engine is an [`EngineFailure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// The job was recorded on these GPUs.
    Placed {
        /// The GPU ids.
        gpus: Vec<String>,
        /// On a GPU the job may share, the memory the guard reserves for it, MiB (see
        /// [`EngineState::reservation`]); `None` for a job on several GPUs, which it takes
        /// alone.
        reserved_mib: Option<u32>,
    },
    /// The node cannot take the job, in words for a person.
    Refused(String),
}

impl Placement {
    /// The GPUs chosen, or the reason the node cannot take the job.
    pub fn into_result(self) -> Result<Vec<String>, String> {
        match self {
            Self::Placed { gpus, .. } => Ok(gpus),
            Self::Refused(why) => Err(why),
        }
    }
}

/// The best GPU of one node for a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeScore {
    /// The engine's best score on the node's GPUs, 0..=100; 0 when none fits.
    pub score: u8,
    /// The GPU with that score; `None` when none fits (or the node has no GPU in the view).
    pub gpu: Option<u32>,
}

/// Compact handles for the cluster view's GPUs: GPU id to handle, each node's handles, and the
/// freed handles to reuse (lowest first, so the view stays dense).
#[derive(Debug, Clone, Default)]
pub struct Handles {
    ids: FxHashMap<String, u32>,
    nodes: FxHashMap<String, Vec<u32>>,
    free: std::collections::BTreeSet<u32>,
    next: u32,
}

impl Handles {
    /// The handle of GPU `id`, if it is in the view.
    pub fn of(&self, id: &str) -> Option<u32> {
        self.ids.get(id).copied()
    }

    /// The handles of `node`'s GPUs (empty for a node without GPUs in the view).
    pub fn of_node(&self, node: &str) -> &[u32] {
        self.nodes.get(node).map_or(&[], Vec::as_slice)
    }

    fn take(&mut self) -> u32 {
        match self.free.pop_first() {
            Some(handle) => handle,
            None => {
                self.next += 1;
                self.next - 1
            }
        }
    }
}

/// What the engine thread owns.
pub struct EngineState {
    runtime: Runtime,
    recommender: Recommender,
    handles: Handles,
    /// What outcome estimation remembers; stored with the engine's snapshot.
    pub(crate) ledger: crate::outcomes::Ledger,
    /// What was learned per GPU model; stored with the engine's snapshot.
    pub(crate) lessons: crate::learning::Lessons,
    /// Reference speeds jobs declared that this instance was told (see
    /// [`EngineState::tell_speeds`]): job and GPU model.
    told: HashSet<(String, String)>,
    /// The policy this front-end decides under ([`EngineState::keep_policy`]), set again on
    /// every instance swapped in: a stored knowledge base carries the policy of whoever wrote
    /// it, which may be another front-end's.
    policy: Option<Policy>,
}

impl std::fmt::Debug for EngineState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineState").finish_non_exhaustive()
    }
}

impl EngineState {
    /// The engine `runtime` made, with an empty cluster view.
    pub fn new(runtime: Runtime, recommender: Recommender) -> Self {
        Self {
            runtime,
            recommender,
            handles: Handles::default(),
            ledger: crate::outcomes::Ledger::default(),
            lessons: crate::learning::Lessons::default(),
            told: HashSet::new(),
            policy: None,
        }
    }

    /// Sets `policy` on the engine and keeps it: every instance loaded later (a reload of what
    /// another replica stored, a retrained one, an undo) decides under it too.
    pub fn keep_policy(&mut self, policy: &Policy) -> Result<(), EngineFailure> {
        self.recommender
            .set_policy(policy)
            .map_err(failed("set-policy"))?;
        self.policy = Some(policy.clone());
        Ok(())
    }

    /// The runtime decisions run under (its deadline).
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Puts `fresh` (built off this thread from a snapshot, see
    /// [`crate::Core::observe_off_thread`]) in place of the recommender deciding now: its later
    /// calls run under this state's limits and it is told the cluster view. On error the
    /// current recommender stays.
    pub fn adopt(&mut self, mut fresh: Recommender) -> Result<(), EngineFailure> {
        self.runtime.adopt(&mut fresh).map_err(failed("adopt"))?;
        self.swap_in(fresh)
    }

    /// Tells `fresh` the kept policy and the cluster view and makes it the recommender deciding
    /// now (what it was told of declared speeds is forgotten with the old one).
    fn swap_in(&mut self, mut fresh: Recommender) -> Result<(), EngineFailure> {
        if let Some(policy) = &self.policy {
            fresh.set_policy(policy).map_err(failed("set-policy"))?;
        }
        let replay = self.recommender.cluster().replay();
        if replay.len() > 1 {
            fresh
                .update_cluster(&replay)
                .map_err(failed("update-cluster"))?;
        }
        self.recommender = fresh;
        self.told.clear();
        Ok(())
    }

    /// Tells the engine the reference speeds a job declared (`(GPU model, work per second)`,
    /// see [`crate::declaration::Work`]) that it knows no speed of the job for, so its first
    /// decision already weighs its run time on each model. What the engine learned from the
    /// job's own runs wins: a speed it knows (reported, or scaled from another model) is kept.
    /// What it knows is asked before any is told, so that one reference does not hide the
    /// others behind a speed scaled from it. Each is told once per instance; an instance built
    /// from a snapshot is told again. Not an acknowledged observation: it reaches the stored
    /// knowledge base with the next one.
    pub fn tell_speeds(
        &mut self,
        job: &str,
        speeds: &[(String, f64)],
    ) -> Result<(), EngineFailure> {
        let untold: Vec<&(String, f64)> = speeds
            .iter()
            .filter(|(model, _)| !self.told.contains(&(job.to_owned(), model.clone())))
            .collect();
        if untold.is_empty() {
            return Ok(());
        }
        let specs: Vec<GpuSpec> = untold
            .iter()
            .map(|(model, _)| GpuSpec::new(model.clone(), 1))
            .collect();
        let estimates = self
            .recommender
            .estimate(&Job::new(job), &specs)
            .map_err(failed("estimate"))?;
        for (at, (model, speed)) in untold.into_iter().enumerate() {
            let known = estimates.get(at).and_then(|e| e.speed).is_some();
            if !known {
                self.recommender
                    .observe_speed(job, model, *speed)
                    .map_err(failed("observe-speed"))?;
            }
            self.told.insert((job.to_owned(), model.clone()));
        }
        Ok(())
    }

    /// The recommender, for the calls that do not concern the view.
    pub fn recommender(&mut self) -> &mut Recommender {
        &mut self.recommender
    }

    /// The handles of the view's GPUs.
    pub fn handles(&self) -> &Handles {
        &self.handles
    }

    /// The specs of the view's GPUs (one per GPU: many repeat).
    pub fn gpu_models(&self) -> impl Iterator<Item = &GpuSpec> {
        self.recommender.cluster().iter().map(|(_, gpu)| &gpu.spec)
    }

    /// The GPU of model `model` as the view describes it (its memory), or the model's known
    /// figures when no GPU of the view has it.
    pub fn gpu_spec(&self, model: &str) -> GpuSpec {
        let in_view = self.gpu_models().find(|spec| spec.model == model).cloned();
        in_view.unwrap_or_else(|| {
            let memory = crate::gpu_models::gpu_model(model).1.unwrap_or(1);
            GpuSpec::new(model, memory)
        })
    }

    /// Whether `model` is a GPU model the engine knows or one of the view's.
    pub fn knows_model(&self, model: &str) -> bool {
        crate::gpu_models::is_known(model) || self.gpu_models().any(|spec| spec.model == model)
    }

    /// The GPU under `handle` as the engine holds it.
    pub fn gpu(&self, handle: u32) -> Option<&Gpu> {
        self.recommender.cluster().get(handle)
    }

    /// Replaces the engine's knowledge with a stored snapshot (another replica wrote it),
    /// keeping the cluster view.
    pub fn replace(&mut self, snapshot: &[u8]) -> Result<(), EngineFailure> {
        let fresh = load_for_decisions(&self.runtime, snapshot).map_err(failed("load"))?;
        self.swap_in(fresh)
    }

    /// Puts the engine's knowledge and the ledger back to `snapshot` and `ledger` (what was
    /// stored before a batch that failed, or whose write did), keeping the cluster view.
    pub(crate) fn restore(
        &mut self,
        snapshot: &[u8],
        (ledger, lessons): (crate::outcomes::Ledger, crate::learning::Lessons),
    ) -> Result<(), EngineFailure> {
        self.replace(snapshot)?;
        self.ledger = ledger;
        self.lessons = lessons;
        Ok(())
    }

    /// Brings the engine's view to `gpus`, the cluster as the scheduler sees it now: GPUs that
    /// are new or changed are set, GPUs no longer there removed. Only the difference crosses
    /// into the engine; nothing changes if the engine refuses it.
    pub fn sync(
        &mut self,
        gpus: impl IntoIterator<Item = Gpu>,
    ) -> Result<ClusterSummary, EngineFailure> {
        let gpus: Vec<Gpu> = gpus.into_iter().collect();
        let mut handles = self.handles.clone();
        let seen: HashSet<&str> = gpus.iter().map(|g| g.id.as_str()).collect();
        let mut changes = Vec::new();
        // Free the handles of GPUs that are gone first, so new GPUs reuse them.
        let gone: Vec<(String, u32)> = handles
            .ids
            .iter()
            .filter(|(id, _)| !seen.contains(id.as_str()))
            .map(|(id, &h)| (id.clone(), h))
            .collect();
        for (id, handle) in gone {
            handles.ids.remove(&id);
            handles.free.insert(handle);
            changes.push(ClusterChange::RemoveGpu(handle));
        }
        for gpu in gpus {
            let handle = match handles.ids.get(&gpu.id) {
                Some(&handle) => {
                    if self.recommender.cluster().get(handle) == Some(&gpu) {
                        continue;
                    }
                    handle
                }
                None => {
                    let handle = handles.take();
                    handles.ids.insert(gpu.id.clone(), handle);
                    handle
                }
            };
            changes.push(ClusterChange::SetGpu(ViewGpu { handle, gpu }));
        }
        if changes.is_empty() {
            return self
                .recommender
                .update_cluster(&[])
                .map_err(failed("update-cluster"));
        }
        let summary = self
            .recommender
            .update_cluster(&changes)
            .map_err(failed("update-cluster"))?;
        handles.nodes.clear();
        for (handle, gpu) in self.recommender.cluster().iter() {
            handles
                .nodes
                .entry(gpu.node.clone())
                .or_default()
                .push(handle);
        }
        self.handles = handles;
        Ok(summary)
    }

    /// The job's best GPU on each of `nodes`, from one `score-all` over the view.
    pub fn node_scores(
        &mut self,
        job: &Job,
        nodes: &[String],
    ) -> Result<Vec<NodeScore>, EngineFailure> {
        let scores = self
            .recommender
            .score_all(job)
            .map_err(failed("score-all"))?;
        Ok(nodes
            .iter()
            .map(|node| {
                let best = self
                    .handles
                    .of_node(node)
                    .iter()
                    .map(|&h| (scores.get(h as usize).copied().unwrap_or(0), h))
                    .filter(|&(score, _)| score > 0)
                    // Highest score, lowest handle among equals.
                    .max_by_key(|&(score, h)| (score, std::cmp::Reverse(h)));
                NodeScore {
                    score: best.map_or(0, |(score, _)| score),
                    gpu: best.map(|(_, h)| h),
                }
            })
            .collect())
    }

    /// Why `job` fits no GPU of each of `nodes`, one line per GPU, for a person: one
    /// `explain` call for all of them.
    pub fn why_not(&mut self, job: &Job, nodes: &[&str]) -> Result<Vec<String>, EngineFailure> {
        let handles: Vec<u32> = nodes
            .iter()
            .flat_map(|node| self.handles.of_node(node).iter().copied())
            .collect();
        let mut reasons = self
            .recommender
            .explain(job, &handles)
            .map_err(failed("explain"))?
            .into_iter();
        let cluster = self.recommender.cluster();
        Ok(nodes
            .iter()
            .map(|node| {
                self.handles
                    .of_node(node)
                    .iter()
                    .zip(reasons.by_ref())
                    .map(|(&h, why)| {
                        let id = cluster.get(h).map_or("?", |g| g.id.as_str());
                        format!("GPU {id}: {why}")
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .collect())
    }

    /// Chooses where `job` runs on `node` and records it there at once, so the next decision
    /// sees it: the engine's best GPU for a one-GPU job, with the memory the guard reserves
    /// for it there; for a job of `gpus` GPUs (which never share), the first idle ones.
    pub fn place(&mut self, job: &Job, node: &str, gpus: u32) -> Result<Placement, EngineFailure> {
        self.place_with(job, node, gpus, gpus > 1)
    }

    /// Records `job` on the GPU `gpu` (a handle [`EngineState::node_scores`] gave) at once, so
    /// the next decision sees it; returns the GPU's id, `None` if the handle names none.
    pub fn place_on(&mut self, job: &Job, gpu: u32) -> Result<Option<String>, EngineFailure> {
        let Some(id) = self.recommender.cluster().get(gpu).map(|g| g.id.clone()) else {
            return Ok(None);
        };
        self.recommender
            .update_cluster(&[ClusterChange::Bind(Binding {
                gpu,
                job: job.clone(),
            })])
            .map_err(failed("update-cluster"))?;
        Ok(Some(id))
    }

    /// [`EngineState::place`] on idle GPUs only, whatever the job's size: for jobs that must
    /// not share even with one GPU (the members of a gang, which start together and would
    /// otherwise slow each other down, or leave a gang half-placed behind a co-runner).
    pub fn place_alone(
        &mut self,
        job: &Job,
        node: &str,
        gpus: u32,
    ) -> Result<Placement, EngineFailure> {
        self.place_with(job, node, gpus, true)
    }

    /// What the memory guard reserves for `job` on GPU `gpu_id`, in MiB: the estimate of the
    /// GPU's model (the peak, plus the memory model's margin when predicted), or the GPU's
    /// whole memory when the engine knows nothing of the job's memory. `None` when the GPU is
    /// not in the view. Written on the pod with the GPU, so the node can enforce it.
    pub fn reservation(&mut self, job: &Job, gpu_id: &str) -> Result<Option<u32>, EngineFailure> {
        let Some(spec) = self
            .handles
            .of(gpu_id)
            .and_then(|handle| self.recommender.cluster().get(handle))
            .map(|gpu| gpu.spec.clone())
        else {
            return Ok(None);
        };
        let estimates = self
            .recommender
            .estimate(job, std::slice::from_ref(&spec))
            .map_err(failed("estimate"))?;
        Ok(Some(
            estimates
                .first()
                .and_then(|estimate| estimate.reserved_mib)
                .unwrap_or(spec.memory_mib)
                .min(spec.memory_mib),
        ))
    }

    /// How many of `node`'s GPUs hold nobody, as the engine sees them now (placements made
    /// since the view was last synced included).
    pub fn idle_gpus(&self, node: &str) -> usize {
        let cluster = self.recommender.cluster();
        self.handles
            .of_node(node)
            .iter()
            .filter(|&&h| cluster.get(h).is_some_and(|g| g.residents.is_empty()))
            .count()
    }

    fn place_with(
        &mut self,
        job: &Job,
        node: &str,
        gpus: u32,
        alone: bool,
    ) -> Result<Placement, EngineFailure> {
        let chosen: Vec<u32> = if !alone {
            let choice = self
                .recommender
                .choose_gpu(job, node)
                .map_err(failed("choose-gpu"))?;
            match choice.gpu {
                Some(handle) => vec![handle],
                None => return Ok(Placement::Refused(choice.reason)),
            }
        } else {
            let cluster = self.recommender.cluster();
            let idle: Vec<u32> = self
                .handles
                .of_node(node)
                .iter()
                .copied()
                .filter(|&h| cluster.get(h).is_some_and(|g| g.residents.is_empty()))
                .take(gpus as usize)
                .collect();
            if idle.len() < gpus as usize {
                return Ok(Placement::Refused(format!(
                    "the job needs {gpus} idle GPUs, {} are idle",
                    idle.len()
                )));
            }
            idle
        };
        let binds: Vec<ClusterChange> = chosen
            .iter()
            .map(|&gpu| {
                ClusterChange::Bind(Binding {
                    gpu,
                    job: job.clone(),
                })
            })
            .collect();
        self.recommender
            .update_cluster(&binds)
            .map_err(failed("update-cluster"))?;
        let cluster = self.recommender.cluster();
        let gpus: Vec<String> = chosen
            .iter()
            .filter_map(|&h| cluster.get(h).map(|g| g.id.clone()))
            .collect();
        // A job alone on one GPU still reserves its memory there: later jobs may join that
        // GPU, and a node that enforces memory refuses a one-GPU placement without it.
        let reserved_mib = match gpus.as_slice() {
            [gpu] => self.reservation(job, gpu)?,
            _ => None,
        };
        Ok(Placement::Placed { gpus, reserved_mib })
    }

    /// Takes `job` off the GPUs `gpu_ids` (a placement undone); GPUs it is not on are skipped.
    pub fn unplace(&mut self, job: &str, gpu_ids: &[String]) -> Result<(), EngineFailure> {
        let cluster = self.recommender.cluster();
        let changes: Vec<ClusterChange> = gpu_ids
            .iter()
            .filter_map(|id| self.handles.of(id))
            .filter(|&h| {
                cluster
                    .get(h)
                    .is_some_and(|g| g.residents.iter().any(|r| r.id == job))
            })
            .map(|gpu| {
                ClusterChange::Unbind(Unbinding {
                    gpu,
                    job: job.to_owned(),
                })
            })
            .collect();
        if changes.is_empty() {
            return Ok(());
        }
        self.recommender
            .update_cluster(&changes)
            .map(|_| ())
            .map_err(failed("update-cluster"))
    }
}

/// A recommender loaded from `snapshot` whose later calls run under `runtime`'s (decision)
/// deadline. The load itself runs under [`crate::TRAINING_DEADLINE`]: loading refits the
/// memory model when the snapshot holds reported peaks, which takes longer than a decision may
/// (0.2 s on a quiet node, seconds on a busy one) — a start or a reload must not fail for it.
pub fn load_for_decisions(
    runtime: &Runtime,
    snapshot: &[u8],
) -> Result<Recommender, tandem_host::Error> {
    let mut loaded = runtime
        .with_call_deadline(crate::TRAINING_DEADLINE)
        .load(snapshot)?;
    runtime.adopt(&mut loaded)?;
    Ok(loaded)
}

/// An engine state for tests: the embedded engine, three profiled jobs (`a`, `b`, `p`).
#[cfg(test)]
pub(crate) mod testing {
    use tandem_api::{Policy, Profile};
    use tandem_host::HostConfig;

    use super::*;

    /// The embedded engine, with jobs `a`, `b` and `p` profiled on V100s.
    pub(crate) fn state() -> EngineState {
        let runtime = Runtime::from_bytes(crate::EMBEDDED_ENGINE, HostConfig::default()).unwrap();
        let mut recommender = runtime.bootstrap(&Policy::default(), 1).unwrap();
        for (job, util) in [("a", 30.0), ("b", 95.0), ("p", 40.0)] {
            recommender
                .observe_profile(
                    job,
                    &Profile {
                        gpu_util_pct: util,
                        mem_access_pct: 10.0,
                        mem_used_mib: 3_000,
                        gpu_model: "V100".into(),
                    },
                )
                .unwrap();
        }
        EngineState::new(runtime, recommender)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::state;
    use tandem_api::{GpuSpec, Policy};

    use super::*;

    fn gpu(node: &str, index: u32, residents: &[&str]) -> Gpu {
        Gpu {
            id: format!("{node}/{index}"),
            node: node.into(),
            spec: GpuSpec::new("V100", 16_384),
            residents: residents.iter().map(|r| Job::new(*r)).collect(),
        }
    }

    #[test]
    fn a_kept_policy_outlives_a_reload_of_another_front_ends_knowledge() {
        let alone = Policy {
            max_jobs_per_gpu: 1,
            ..Policy::default()
        };
        let mut ours = state();
        ours.keep_policy(&alone).unwrap();
        let beside_a = |state: &mut EngineState| {
            let fits = state
                .recommender()
                .filter(&Job::new("p"), &[gpu("n1", 0, &["a"])])
                .unwrap();
            fits[0].fits
        };
        assert!(!beside_a(&mut ours), "one job per GPU: p may not join a");
        // What another front-end stored, under its own policy (two per GPU).
        let mut other = state();
        other.recommender().set_policy(&Policy::default()).unwrap();
        assert!(beside_a(&mut other), "two per GPU: p may join a");
        let stored = other.recommender().snapshot().unwrap().to_vec();
        ours.replace(&stored).unwrap();
        assert!(
            !beside_a(&mut ours),
            "the reload kept this front-end's policy"
        );
    }

    #[test]
    fn sync_sends_only_what_changed_and_reuses_freed_handles() {
        let mut state = state();
        let summary = state
            .sync([gpu("n1", 0, &[]), gpu("n1", 1, &["a"]), gpu("n2", 0, &[])])
            .unwrap();
        assert_eq!((summary.gpus, summary.nodes), (3, 2));
        assert_eq!(state.handles().of_node("n1"), [0, 1]);
        // n2 leaves, n3 arrives: it takes n2's handle.
        state
            .sync([
                gpu("n1", 0, &[]),
                gpu("n1", 1, &["a"]),
                gpu("n3", 0, &["b"]),
            ])
            .unwrap();
        assert_eq!(state.handles().of("n3/0"), Some(2));
        assert_eq!(state.handles().of("n2/0"), None);
        assert!(state.handles().of_node("n2").is_empty());
        assert_eq!(state.gpu(2).unwrap().residents[0].id, "b");
    }

    #[test]
    fn a_placement_is_recorded_at_once_and_can_be_undone() {
        let mut state = state();
        state
            .sync([gpu("n1", 0, &["a"]), gpu("n1", 1, &["b"])])
            .unwrap();
        let job = Job::new("p");
        let scores = state
            .node_scores(&job, &["n1".into(), "nowhere".into()])
            .unwrap();
        assert_eq!(
            scores[1],
            NodeScore {
                score: 0,
                gpu: None
            }
        );
        let placed = state.place(&job, "n1", 1).unwrap().into_result().unwrap();
        // Beside the light job rather than the one saturating its GPU.
        assert_eq!(placed, ["n1/0"]);
        assert_eq!(state.gpu(0).unwrap().residents.len(), 2);
        state.unplace("p", &placed).unwrap();
        assert_eq!(state.gpu(0).unwrap().residents.len(), 1);
        // Two GPUs are needed, none is idle.
        let Placement::Refused(why) = state.place(&Job::new("x"), "n1", 2).unwrap() else {
            panic!("two GPUs placed where none is idle");
        };
        assert!(why.contains("2 idle GPUs, 0 are idle"), "{why}");
    }

    #[test]
    fn the_reservation_is_the_jobs_memory_or_the_whole_gpu() {
        let mut state = state();
        state.sync([gpu("n1", 0, &[])]).unwrap();
        // "a" was profiled at 3,000 MiB on a V100.
        assert_eq!(
            state.reservation(&Job::new("a"), "n1/0").unwrap(),
            Some(3_000)
        );
        // Nothing known of "unseen": the guard reserves the whole GPU.
        let whole = state.gpu(0).unwrap().spec.memory_mib;
        assert_eq!(
            state.reservation(&Job::new("unseen"), "n1/0").unwrap(),
            Some(whole)
        );
        assert_eq!(state.reservation(&Job::new("a"), "n9/0").unwrap(), None);
    }
}
