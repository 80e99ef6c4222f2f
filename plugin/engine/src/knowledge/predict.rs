//! Predictions from what the knowledge base holds: how the predictor sees a job, and the
//! slowdowns of jobs sharing a GPU.

use tandem_api::{EngineError, GpuSpec, Job, Prediction, Profile};

use super::Knowledge;
use super::job::{JobView, Slowdowns};
use crate::Result;
use crate::features;
use crate::identity::workload_of;
use crate::interference;
use crate::learning::PRIOR_STD;

impl Knowledge {
    /// How the predictor sees `job` on a GPU of `spec`: [`Knowledge::view_of`], with the memory
    /// the guard reserves on that model (`specs`: the other models of the request).
    pub(crate) fn view_on(&self, job: &Job, spec: &GpuSpec, specs: &[&GpuSpec]) -> JobView {
        let profile = job.profile.as_ref().or_else(|| self.profile(&job.id));
        JobView {
            memory_mib: self.memory_on(job, profile, spec, specs).reserved_mib,
            ..self.view_of(job)
        }
    }

    /// How the predictor sees a profile of an anonymous job.
    pub(crate) fn view(&self, profile: &Profile) -> JobView {
        let features = features::of(profile);
        let placed = self.clusters.place(&features);
        JobView {
            features: Some(features),
            cluster: placed.map(|p| p.cluster),
            assignment_uncertainty: placed.map_or(1.0, |p| p.uncertainty),
            workload: None,
            memory_mib: Some(profile.mem_used_mib),
        }
    }

    /// How the predictor sees `job`: from its own profile, else one observed under its id,
    /// else from the outcomes its id was named in (if any).
    pub(crate) fn view_of(&self, job: &Job) -> JobView {
        let workload = self.workloads.index(workload_of(&job.id));
        match job.profile.as_ref().or_else(|| self.profile(&job.id)) {
            Some(profile) => JobView {
                workload,
                ..self.view(profile)
            },
            None => JobView {
                features: None,
                cluster: None,
                assignment_uncertainty: self.workloads.uncertainty(workload),
                workload,
                memory_mib: None,
            },
        }
    }

    /// Whether two jobs were observed sharing a GPU of `gpu_model`, which is what lets a job
    /// of unknown memory share at all.
    pub(crate) fn shared(&self, a: &JobView, b: &JobView, gpu_model: &str) -> bool {
        self.workloads.shared(a.workload, b.workload, gpu_model)
    }

    /// Whether two jobs were observed sharing a GPU of any of `gpu_models`.
    pub(crate) fn shared_on_any<'m>(
        &self,
        a: &JobView,
        b: &JobView,
        gpu_models: impl Iterator<Item = &'m str>,
    ) -> bool {
        self.workloads
            .shared_on_any(a.workload, b.workload, gpu_models)
    }

    /// Predicted slowdown of `a` next to `b`: `(mean, variance, no-evidence variance)`. From
    /// the profiles when both are known, else from the two workloads' outcomes.
    pub(crate) fn predict_pair(&self, a: &JobView, b: &JobView) -> (f64, f64, f64) {
        let (Some(fa), Some(fb)) = (&a.features, &b.features) else {
            return self.workloads.predict(a.workload, b.workload);
        };
        let prior = interference::prior_slowdowns_of(fa, fb);
        let (blend, blend_var) = self.matrix.blend(a.cluster, b.cluster, prior);
        let (residual, residual_var, residual_prior) = self.residual.predict_with_prior(fa, fb);
        let initial = PRIOR_STD * PRIOR_STD + residual_prior;
        (
            (blend + residual).max(0.0),
            blend_var + residual_var,
            initial,
        )
    }

    /// Predicted slowdowns of a group sharing one GPU (in its order) and the group's
    /// uncertainty (0..=1). Pairwise slowdowns add up for groups of three or more.
    pub(crate) fn predict(&self, group: &[&JobView]) -> (Slowdowns, f64) {
        Self::predict_by(group, |a, b| self.predict_pair(a, b))
    }

    /// [`Knowledge::predict`] with each ordered pair predicted by `pair` (which returns what
    /// [`Knowledge::predict_pair`] does: a memo may stand in for it).
    pub(crate) fn predict_by(
        group: &[&JobView],
        mut pair: impl FnMut(&JobView, &JobView) -> (f64, f64, f64),
    ) -> (Slowdowns, f64) {
        if group.len() < 2 {
            return (smallvec::smallvec![0.0; group.len()], 0.0);
        }
        let mut uncertainty: f64 = 0.0;
        let slowdowns = group
            .iter()
            .enumerate()
            .map(|(i, job)| {
                let (mut mean, mut var, mut initial) = (0.0, 0.0, 0.0);
                for (j, partner) in group.iter().enumerate() {
                    if i != j {
                        let (m, v, v0) = pair(job, partner);
                        mean += m;
                        var += v;
                        initial += v0;
                    }
                }
                uncertainty = uncertainty.max((var / initial).sqrt());
                mean
            })
            .collect();
        (slowdowns, uncertainty.min(1.0))
    }
    /// Predicted effect of running `group` together (see [`Knowledge::predict`]). A group
    /// with a job of unknown memory is reported at the GPU's whole memory, the engine's
    /// stand-in for "unknown" everywhere; whether it may share is for the planner to decide.
    pub(crate) fn predict_group(&self, group: &[Job], gpu: &GpuSpec) -> Result<Prediction> {
        let views: Vec<JobView> = group
            .iter()
            .map(|job| self.view_on(job, gpu, &[gpu]))
            .collect();
        let memory: u64 = match views
            .iter()
            .map(|v| v.memory_mib.map(u64::from))
            .sum::<Option<u64>>()
        {
            Some(known) => known,
            None => u64::from(gpu.memory_mib),
        };
        let refs: Vec<&JobView> = views.iter().collect();
        let (slowdowns, uncertainty) = self.predict(&refs);
        if memory > u64::from(gpu.memory_mib) {
            return Err(EngineError::Infeasible(format!(
                "the group needs {memory} MiB, more than the {} MiB of a {}",
                gpu.memory_mib, gpu.model
            )));
        }
        Ok(Prediction {
            slowdown_pct: slowdowns.iter().map(|s| (s * 100.0) as f32).collect(),
            packing_saving_pct: (interference::packing_saving(&slowdowns) * 100.0) as f32,
            uncertainty: uncertainty as f32,
            peak_mem_mib: u32::try_from(memory).unwrap_or(u32::MAX),
        })
    }
}
