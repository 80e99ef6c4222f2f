//! Tandem's decision engine: which queued jobs should share a GPU, and where.
//!
//! This crate is the logic behind the `tandem:engine` WIT contract. It is plain Rust with no
//! I/O, no clock and no randomness of its own (the host passes a seed), so it compiles both
//! natively, for unit tests and benchmarks, and to `wasm32-unknown-unknown`, where
//! `tandem-engine-component` wraps it as the sandboxed component hosts load. Its types are those
//! of [`tandem_api`], the Rust mirror of the WIT.
//!
//! What it does, module by module: [`features`] normalizes a profile; [`clusters`] groups
//! profiles by k-means with k chosen by the elbow and keeps cluster ids stable; [`learning`]
//! turns outcomes into per-cluster-pair statistics and a pair-level residual model;
//! `workloads` learns interference per keyed job id for jobs without telemetry;
//! [`interference`] holds the definitions and the analytic prior; [`grouping`] pairs jobs by
//! maximum-weight matching; the planner places groups under the memory guard — no placement
//! ever puts a GPU over its memory, and a resident whose memory is unknown closes its GPU — and
//! the per-GPU cap; [`mod@synthesize`] interpolates measured profiles across batch sizes.
//!
//! ```
//! use tandem_api::{Gpu, GpuSpec, Job, Policy, Profile};
//! use tandem_engine::Recommender;
//!
//! let engine = Recommender::new(Policy::default(), 7)?;
//! let profile = |mib| Profile { gpu_util_pct: 40.0, mem_access_pct: 20.0, mem_used_mib: mib, gpu_model: "V100".into() };
//! let gpus = [Gpu { id: "node-a/0".into(), node: "node-a".into(), spec: GpuSpec::new("V100", 16384), residents: vec![] }];
//! let queue = [Job::profiled("a", profile(6000)), Job::profiled("b", profile(9000)), Job::profiled("c", profile(4000))];
//! let answer = engine.recommend(&queue, &gpus)?;
//! // One GPU, at most two jobs: two of them share it, within its memory; one waits.
//! assert_eq!(answer.placements[0].jobs.len(), 2);
//! assert!(answer.placements[0].predicted.peak_mem_mib <= 16384);
//! assert_eq!(answer.unplaced.len(), 1);
//! # Ok::<(), tandem_api::EngineError>(())
//! ```

pub mod clusters;
pub mod features;
mod finite;
pub mod forest;
pub mod grouping;
mod identity;
pub mod interference;
mod knowledge;
pub mod learning;
pub mod memory;
mod placement;
mod snapshot;
pub mod synthesize;
pub mod utilization;
mod validate;
mod view;
mod workloads;

use tandem_api::{
    Assignment, Choice, ClusterChange, ClusterSummary, EngineError, Estimate, Fit, Gpu, GpuScore,
    GpuSpec, Job, KnowledgeSummary, ModelSummary, Outcome, Policy, Prediction, Profile,
    Recommendation, Series, Synthesis, bounds,
};

use crate::knowledge::Knowledge;
use crate::validate::Field;
use crate::view::View;

/// Result of an engine call: errors are values the caller can act on, never panics.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Version of this engine implementation (not of the WIT contract).
pub fn engine_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Enlarges measured workload profiles by interpolation across batch sizes (the WIT
/// `synthesize`, a free function: it needs no knowledge base). See [`synthesize::synthesize`]
/// for the method; every rejection is [`EngineError::InvalidInput`] naming the workload and the
/// sample.
pub fn synthesize(
    ground_truth: &[Series],
    points_per_gap: u32,
    bounds: &[Option<(f64, f64)>],
) -> Result<Synthesis> {
    Ok(synthesize::synthesize(
        ground_truth,
        points_per_gap,
        bounds,
    )?)
}

/// One knowledge base plus the policy that uses it, and the cluster view its host keeps it
/// told about (the WIT `recommender` resource).
#[derive(Debug, Clone, PartialEq)]
pub struct Recommender {
    policy: Policy,
    seed: u64,
    knowledge: Knowledge,
    /// Not saved: hosts describe the cluster again after `load`.
    view: View,
}

impl Recommender {
    /// A recommender with an empty knowledge base; `seed` drives exploration.
    pub fn new(policy: Policy, seed: u64) -> Result<Self> {
        validate::policy(&policy)?;
        Ok(Self {
            policy,
            seed,
            knowledge: Knowledge::default(),
            view: View::default(),
        })
    }

    /// A recommender whose knowledge base starts from the bundled Futurewei profiles (the
    /// default knowledge base): its clusters exist before the first job is profiled.
    pub fn bootstrap(policy: Policy, seed: u64) -> Result<Self> {
        validate::policy(&policy)?;
        Ok(Self {
            policy,
            seed,
            knowledge: Knowledge::bootstrapped(seed),
            view: View::default(),
        })
    }

    /// What the knowledge base holds: clusters, learned interference between them, counts.
    pub fn describe(&self) -> KnowledgeSummary {
        self.knowledge.describe()
    }

    /// Predicted effect of running `group` together on one GPU of `gpu`'s kind.
    pub fn predict(&self, group: &[Job], gpu: &GpuSpec) -> Result<Prediction> {
        validate::request(group, &[])?;
        self.knowledge.predict_group(group, gpu)
    }

    /// Replaces the policy; the knowledge base stays.
    pub fn set_policy(&mut self, policy: Policy) -> Result<()> {
        validate::policy(&policy)?;
        self.policy = policy;
        self.view.invalidate();
        Ok(())
    }

    /// The policy this recommender applies.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The seed exploration is drawn from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Records the profile of `job` (replacing an earlier one) and files it in the knowledge base.
    ///
    /// The memory it used may be at most what a GPU of its model has: for a short name the
    /// engine knows, the largest board sold under it ([`tandem_api::bounds::known_memory_of`]);
    /// for another, the largest memory among the view's GPUs of that model, else
    /// [`tandem_api::bounds::LARGEST_GPU_MEMORY_MIB`]. The table comes first so that what is
    /// accepted never depends on the view for a model it knows; for another, an instance whose
    /// view is empty (rebuilt, and not yet told the cluster again) applies the largest bound,
    /// so a host replaying what was accepted is not refused.
    pub fn observe_profile(&mut self, job: &str, profile: Profile) -> Result<Assignment> {
        validate::job_id(job, &Field::param("job"))?;
        let memory_limit_mib = bounds::known_memory_of(&profile.gpu_model)
            .or_else(|| self.view.largest_memory_of(&profile.gpu_model))
            .unwrap_or(bounds::LARGEST_GPU_MEMORY_MIB);
        validate::observed_profile(&profile, memory_limit_mib, &Field::param("profile"))?;
        self.view.invalidate();
        Ok(self.knowledge.observe_profile(job, profile, self.seed))
    }

    /// Learns interference from a finished co-location. On error nothing is learned.
    pub fn observe_outcome(&mut self, outcome: &Outcome) -> Result<()> {
        validate::outcome(outcome)?;
        self.view.invalidate();
        self.knowledge.observe_outcome(outcome)
    }

    /// Learns a measured peak: a job that declared `declared` peaked at `peak_mem_mib` alone on
    /// a GPU of kind `gpu`; the memory model retrains on it. On error nothing is learned.
    pub fn observe_memory(
        &mut self,
        job: &str,
        declared: &ModelSummary,
        gpu: &GpuSpec,
        peak_mem_mib: u32,
    ) -> Result<()> {
        validate::job_id(job, &Field::param("job"))?;
        validate::model_summary(declared, &Field::param("declared"))?;
        validate::gpu_spec(gpu, &Field::param("gpu"))?;
        let traits = memory::GpuTraits::of(gpu).ok_or_else(|| {
            EngineError::InvalidInput(format!(
                "gpu: the characteristics of `{}` are unknown; give cuda-cores, \
                 mem-bandwidth-gbps, mem-clock-mhz, tensor-cores and sm-count",
                gpu.model
            ))
        })?;
        bounds::peak_memory(peak_mem_mib, gpu.memory_mib, "peak-mem-mib")?;
        let row = memory::Row {
            peak_mib: f64::from(peak_mem_mib),
            ..memory::Row::declared(declared, traits)
        };
        self.view.invalidate();
        self.knowledge.observe_memory(row)
    }

    /// Learns that `job`'s workload does `work_per_s` units of work per second alone on a GPU
    /// of model `gpu_model`.
    pub fn observe_speed(&mut self, job: &str, gpu_model: &str, work_per_s: f64) -> Result<()> {
        validate::job_id(job, &Field::param("job"))?;
        validate::job_id(gpu_model, &Field::param("gpu-model"))?;
        validate::speed(work_per_s, &Field::param("work-per-s"))?;
        self.view.invalidate();
        self.knowledge.observe_speed(job, gpu_model, work_per_s);
        Ok(())
    }

    /// What `job` would need and do alone on each GPU model of `gpus`.
    pub fn estimate(&self, job: &Job, gpus: &[GpuSpec]) -> Result<Vec<Estimate>> {
        validate::job(job, &Field::param("job"))?;
        for (i, spec) in gpus.iter().enumerate() {
            validate::gpu_spec(spec, &Field::item("gpus", i))?;
        }
        Ok(self.knowledge.estimate(job, gpus))
    }

    /// Groups queued jobs and places each group on one GPU. Does not change the knowledge base.
    pub fn recommend(&self, queue: &[Job], gpus: &[Gpu]) -> Result<Recommendation> {
        validate::request(queue, gpus)?;
        Ok(
            placement::Planner::new(&self.policy, &self.knowledge, self.seed, gpus)
                .recommend(queue),
        )
    }

    /// Judges, for each GPU, whether `job` may be placed on it now (memory guard and job cap).
    pub fn filter(&self, job: &Job, gpus: &[Gpu]) -> Result<Vec<Fit>> {
        validate::request(std::slice::from_ref(job), gpus)?;
        placement::Planner::new(&self.policy, &self.knowledge, self.seed, gpus).filter(job)
    }

    /// Scores each GPU for `job`, 0..=100, higher is better; GPUs it does not fit score 0.
    pub fn score(&self, job: &Job, gpus: &[Gpu]) -> Result<Vec<GpuScore>> {
        validate::request(std::slice::from_ref(job), gpus)?;
        placement::Planner::new(&self.policy, &self.knowledge, self.seed, gpus).score(job)
    }

    /// Applies changes to the cluster view, in order, all or nothing (the WIT
    /// `update-cluster`).
    pub fn update_cluster(&mut self, changes: &[ClusterChange]) -> Result<ClusterSummary> {
        self.view.update(changes, &self.knowledge, validate::change)
    }

    /// What the cluster view holds.
    pub fn cluster_summary(&mut self) -> ClusterSummary {
        self.view.summary(&self.knowledge)
    }

    /// Scores `job` on every GPU of the view, by handle, 0..=100; 0 where it does not fit and
    /// for handles without a GPU. The same rules as [`Recommender::score`].
    ///
    /// Takes `&mut self` because answers are kept per job class and GPU state;
    /// the knowledge base does not change.
    pub fn score_all(&mut self, job: &Job) -> Result<Vec<u8>> {
        validate::job(job, &Field::param("job"))?;
        Ok(self
            .view
            .score_all(job, &self.policy, &self.knowledge, self.seed))
    }

    /// Why `job` may not be placed on each of `gpus` (handles of the view): one entry per
    /// handle, empty where it fits.
    pub fn explain(&mut self, job: &Job, gpus: &[u32]) -> Result<Vec<String>> {
        validate::job(job, &Field::param("job"))?;
        self.view
            .explain(job, gpus, &self.policy, &self.knowledge, self.seed)
    }

    /// The GPU of `node` that `job` should run on, or why none fits.
    pub fn choose_gpu(&mut self, job: &Job, node: &str) -> Result<Choice> {
        validate::job(job, &Field::param("job"))?;
        self.view
            .choose(job, node, &self.policy, &self.knowledge, self.seed)
    }

    /// Forgets the `count` jobs observed least recently (fewer when the knowledge base holds
    /// fewer), with their profiles, speeds and the measurements of each pair they were in, and
    /// returns their ids, least recently observed first (the WIT `forget-stalest`). Each
    /// observation that names a job (`observe_profile`, `observe_outcome`, `observe_speed`)
    /// numbers it anew; jobs of a state saved before they were numbered are the stalest; ties
    /// go to the smaller id.
    pub fn forget_stalest(&mut self, count: u32) -> Vec<String> {
        let forgotten = self
            .knowledge
            .forget_stalest(usize::try_from(count).unwrap_or(usize::MAX));
        if !forgotten.is_empty() {
            self.view.invalidate();
        }
        forgotten
    }

    /// Serializes the whole state (policy, seed, knowledge base), not the cluster view. Every
    /// number in it is finite, so [`Recommender::load`] reads it back.
    pub fn save(&self) -> Vec<u8> {
        snapshot::save(&self.policy, self.seed, &self.knowledge)
    }

    /// Rebuilds a recommender from bytes produced by [`Recommender::save`], with an empty
    /// cluster view.
    pub fn load(state: &[u8]) -> Result<Self> {
        let saved = snapshot::load(state)?;
        Ok(Self {
            policy: saved.policy,
            seed: saved.seed,
            knowledge: saved.knowledge,
            view: View::default(),
        })
    }
}

#[cfg(test)]
mod extreme_tests;
