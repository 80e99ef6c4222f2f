//! What every policy implements and sees: the [`Policy`] trait, the [`View`] of the cluster at
//! a decision, the [`Start`]s it returns, what it may [`Known`] about job types, and the
//! [`Observed`] outcomes it learns from. A leaf of the policy tree: the policies and the event
//! loop import it, it imports none of them.

use crate::error::Result;
use crate::truth::{Model, Truth};

/// Index of a job: its position in the trace.
pub type JobId = usize;

/// Most jobs the simulated cluster lets share one GPU, whatever the policy asks.
pub const MAX_GROUP: usize = 4;

/// A queued job as schedulers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedJob {
    /// The job.
    pub id: JobId,
    /// Its type (index into [`Known::types`]).
    pub job_type: usize,
    /// GPUs it needs; more than one means it runs alone on GPUs of one model.
    pub gpus: u32,
    /// Submission time, s.
    pub arrival_s: f64,
    /// Its work, in its type's throughput unit (schedulers that estimate run times use it).
    pub steps: f64,
    /// Whether it must run alone (it was resubmitted after an OOM).
    pub alone: bool,
    /// Whether its type has been profiled, so it may share a GPU.
    pub profiled: bool,
    /// GPU models it ran out of memory on alone; starting it there again breaks a rule.
    pub failed_models: Vec<usize>,
}

impl QueuedJob {
    /// Whether it may start on a GPU of `model`: its type runs there and it did not run out of
    /// memory there alone.
    pub fn may_run_on(&self, known: &Known, model: usize) -> bool {
        known.types[self.job_type].throughput[model].is_some()
            && !self.failed_models.contains(&model)
    }
}

/// A job running on a GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Resident {
    /// The job.
    pub id: JobId,
    /// Its type.
    pub job_type: usize,
    /// Work left, in its type's throughput unit.
    pub steps_left: f64,
    /// Whether others may join it (profiled, single-GPU, not resubmitted after an OOM, not
    /// failing right now).
    pub shareable: bool,
}

/// One GPU of the cluster as schedulers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuView {
    /// `<node>/<index>`.
    pub id: String,
    /// The node.
    pub node: String,
    /// Its model (index into [`Known::models`]).
    pub model: usize,
    /// The jobs running on it.
    pub residents: Vec<Resident>,
}

impl GpuView {
    /// Whether no job runs on it.
    pub fn is_idle(&self) -> bool {
        self.residents.is_empty()
    }

    /// Whether a shareable job may join: its residents all allow it and there is room.
    pub fn open_to_share(&self, cap: usize) -> bool {
        !self.residents.is_empty()
            && self.residents.len() < cap.min(MAX_GROUP)
            && self.residents.iter().all(|r| r.shareable)
    }
}

/// What a policy sees at a decision.
#[derive(Debug)]
pub struct View<'a> {
    /// Simulated time, s.
    pub now_s: f64,
    /// The head of the queue, in arrival order.
    pub queue: &'a [QueuedJob],
    /// Every GPU, in cluster order.
    pub gpus: &'a [GpuView],
    /// What is known about job types and GPU models.
    pub known: &'a Known,
}

/// A decision: start `job` on `gpus` (GPU indices into [`View::gpus`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The queued job.
    pub job: JobId,
    /// Where; exactly as many as it needs.
    pub gpus: Vec<usize>,
}

/// A job type as schedulers know it.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownType {
    /// Its name (the simulator's own bookkeeping; [`Tandem`](super::Tandem) keys it before the
    /// engine sees it).
    pub name: String,
    /// Solo throughput per GPU model, from its solo runs; `None` where it cannot run.
    pub throughput: Vec<Option<f64>>,
    /// The profile a profiler reports once the type is profiled, if the catalog measured one.
    pub profile: Option<tandem_api::Profile>,
    /// Peak GPU utilization, 0..=100, if measured.
    pub util_pct: Option<f32>,
    /// Peak GPU utilization, 0..=100, as the engine predicts it from a model declared for the
    /// type outside the catalogs (the simulator's declared-models input), if any; the
    /// utilization baselines pack by it where none was measured. Tandem's policies never see
    /// it: they are told the catalogs' declared models alone.
    pub predicted_util_pct: Option<f32>,
    /// The model its users declare, if any (its measured memory stays hidden).
    pub declared: Option<tandem_api::ModelSummary>,
}

/// What every scheduler may know: GPU models and job types, never pair speeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Known {
    /// GPU models.
    pub models: Vec<Model>,
    /// Job types.
    pub types: Vec<KnownType>,
}

impl Known {
    /// The public part of `truth`.
    pub fn of(truth: &Truth) -> Self {
        Self {
            models: truth.models().to_vec(),
            types: truth
                .types()
                .iter()
                .map(|t| KnownType {
                    name: t.name.clone(),
                    throughput: t.throughput.clone(),
                    profile: t.profile.clone(),
                    util_pct: t.util_pct,
                    predicted_util_pct: None,
                    declared: t.declared.clone(),
                })
                .collect(),
        }
    }

    /// Solo run time of `steps` of a type on `gpus` GPUs of a model, s, if it can run there.
    /// Multi-GPU jobs are assumed to scale linearly (the catalogs measured single GPUs).
    pub fn solo_s(&self, job_type: usize, model: usize, steps: f64, gpus: u32) -> Option<f64> {
        let tput = self.types[job_type].throughput[model]?;
        Some(steps / (tput * f64::from(gpus)))
    }
}

/// A measured co-location of two jobs: what a profiler beside them would report when their
/// time together ends (one leaves, or a third joins).
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// GPU model they shared.
    pub model: usize,
    /// Their types.
    pub types: [usize; 2],
    /// Their speeds while sharing (co-located / solo throughput).
    pub speeds: [f64; 2],
    /// How long they shared, s.
    pub seconds: f64,
}

/// A scheduling policy.
pub trait Policy {
    /// Its name in reports, such as `tandem-balanced`.
    fn name(&self) -> &str;

    /// Decides which queued jobs start now, and where. Called whenever the cluster changed
    /// and jobs are queued; jobs not started stay queued.
    fn decide(&mut self, view: &View<'_>) -> Result<Vec<Start>>;

    /// Learns from a measured co-location (the history before the run, then each one that
    /// ends during it). Policies that do not learn ignore it.
    fn learn(&mut self, _observed: &Observed) -> Result<()> {
        Ok(())
    }

    /// Told when a job type's profiling window ends, with the profile a profiler reports (if
    /// the catalog measured one).
    fn profiled(&mut self, _job_type: usize, _profile: Option<&tandem_api::Profile>) -> Result<()> {
        Ok(())
    }
}
