//! Predictions from what the knowledge base holds: how the predictor sees a job, and the
//! slowdowns of jobs sharing a GPU.

use smallvec::SmallVec;
use tandem_api::{EngineError, GpuSpec, Job, ModelSummary, Prediction, Profile};

use super::Knowledge;
use super::job::{GroupPrediction, JobView, PartnerTerms};
use crate::Result;
use crate::features::{self, Features};
use crate::identity::workload_of;
use crate::interference;
use crate::learning::{NOISE_STD, PAIR_SPREAD_STD, PairBelief};
use crate::memory;
use crate::utilization::UtilizationModel;
use crate::workloads::{OnModel, Workloads};

/// The GPU model a declared job's predicted profile stands for: the utilization model's
/// training runs were measured on a P100.
const DECLARED_ON: &str = "P100";
/// Held-out error of the utilization model, RMSLE of utilization as a fraction (leave one
/// network out, docs/UTILIZATION.md).
const DECLARED_UTIL_LOG_STD: f64 = 0.113;

impl Knowledge {
    /// How the predictor sees `job` on a GPU of `spec`: [`Knowledge::view_of`], with the memory
    /// the guard reserves on that model (`specs`: the other models of the request).
    pub(crate) fn view_on(&self, job: &Job, spec: &GpuSpec, specs: &[&GpuSpec]) -> JobView {
        let profile = self.profile_of(job);
        self.placed(job, profile, spec, specs, self.view_with(job, profile))
    }

    /// [`Knowledge::view_on`] every model of `specs`, in their order. What does not depend on
    /// the model is worked out once.
    pub(crate) fn views_on(&self, job: &Job, specs: &[&GpuSpec]) -> SmallVec<[JobView; 4]> {
        let profile = self.profile_of(job);
        let view = self.view_with(job, profile);
        specs
            .iter()
            .map(|spec| self.placed(job, profile, spec, specs, view))
            .collect()
    }

    /// `view` (of `job`, with `profile`) on a GPU of `spec`.
    fn placed(
        &self,
        job: &Job,
        profile: Option<&Profile>,
        spec: &GpuSpec,
        specs: &[&GpuSpec],
        view: JobView,
    ) -> JobView {
        let memory = self.memory_on(job, profile, spec, specs);
        JobView {
            memory_mib: memory.reserved_mib,
            memory_extrapolated: memory.extrapolated,
            gpu_model: self.workloads.on_model(&spec.model),
            ..view
        }
    }

    /// The profile `job` carries, else one observed under its id.
    fn profile_of<'j>(&'j self, job: &'j Job) -> Option<&'j Profile> {
        job.profile.as_ref().or_else(|| self.profile(&job.id))
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
            memory_extrapolated: false,
            gpu_model: OnModel::Any,
            feature_var: 0.0,
        }
    }

    /// How the predictor sees `job`: from its own profile, else one observed under its id,
    /// else the profile its declared model predicts, else from the outcomes its id was named
    /// in (if any).
    pub(crate) fn view_of(&self, job: &Job) -> JobView {
        self.view_with(job, self.profile_of(job))
    }

    /// [`Knowledge::view_of`], `profile` being what [`Knowledge::profile_of`] found.
    fn view_with(&self, job: &Job, profile: Option<&Profile>) -> JobView {
        let workload = self.workloads.index(workload_of(&job.id));
        match profile {
            Some(profile) => JobView {
                workload,
                ..self.view(profile)
            },
            None => match &job.declared {
                Some(summary) => JobView {
                    workload,
                    ..self.declared_view(summary)
                },
                None => JobView {
                    features: None,
                    cluster: None,
                    assignment_uncertainty: self.workloads.uncertainty(workload),
                    workload,
                    memory_mib: None,
                    memory_extrapolated: false,
                    gpu_model: OnModel::Any,
                    feature_var: 0.0,
                },
            },
        }
    }

    /// How the predictor sees a job that declared its model but was never profiled (Yeung et
    /// al.'s proactive sharing): as the profile its declaration predicts on the P100 the
    /// utilization model was trained on — utilization from [`UtilizationModel`], peak memory
    /// from the memory model, memory-access share at the ratio to utilization the profiles
    /// the knowledge base holds show — with the spread those predictions carry
    /// ([`JobView::feature_var`]), so it may share before it runs, and shares only where
    /// the pessimistic prediction still pays.
    fn declared_view(&self, summary: &ModelSummary) -> JobView {
        let util = UtilizationModel::bundled().predict(summary) / 100.0;
        let peak_mib = memory::known_gpu(DECLARED_ON).map_or(0.0, |p100| {
            self.memory.model().estimate(summary, p100).peak_mib
        });
        // Memory access follows utilization in the profiles known: their ratio, and how far
        // a profile strays from it.
        let points = self.points();
        let ratio = if points.is_empty() {
            1.0
        } else {
            points.iter().map(|p| p[1]).sum::<f64>()
                / points.iter().map(|p| p[0]).sum::<f64>().max(f64::EPSILON)
        };
        let stray_var = if points.len() < 2 {
            ratio * ratio
        } else {
            points
                .iter()
                .map(|p| (p[1] - ratio * p[0]).powi(2))
                .sum::<f64>()
                / (points.len() - 1) as f64
        };
        let profile = Profile {
            gpu_util_pct: (util * 100.0) as f32,
            mem_access_pct: ((ratio * util).min(1.0) * 100.0) as f32,
            mem_used_mib: peak_mib.ceil().clamp(0.0, f64::from(u32::MAX)) as u32,
            gpu_model: DECLARED_ON.into(),
        };
        // The held-out error of the utilization model, in ln(1 + utilization), back to a
        // fraction at this utilization; the access share inherits it through the ratio.
        let util_var = (DECLARED_UTIL_LOG_STD * (1.0 + util)).powi(2);
        let access_var = ratio * ratio * util_var + stray_var;
        JobView {
            memory_mib: None,
            feature_var: interference::prior_variance_of_features(util_var, access_var),
            ..self.view(&profile)
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

    /// What is believed about `a`'s slowdown next to `b`, the most specific evidence last
    /// the analytic prior from the two profiles, the cluster matrix and the
    /// residual model over the profiles' features (the no-evidence prior for a job without a
    /// profile); then what the two recurring workloads taught; then the measurements of this
    /// very pair, on other GPU models as far as they transfer, then on `a`'s
    /// ([`crate::workloads::Workloads::refine`]). A profiled job's recurring id
    /// counts as much as an unprofiled one's: telemetry describes a job, its outcomes measure
    /// it.
    pub(crate) fn predict_pair(&self, a: &JobView, b: &JobView) -> PairBelief {
        let base = match (&a.features, &b.features) {
            (Some(fa), Some(fb)) => self.profile_belief(a, fa, b, fb),
            _ => Workloads::no_evidence(),
        };
        self.workloads
            .refine(a.workload, b.workload, a.gpu_model, base)
    }

    /// The profiles' layers for `a` next to `b`: the analytic prior, refined by the cluster
    /// matrix and the residual model. Its spread is that of a prediction, not of a mean: the
    /// slowdowns measured between the two clusters scatter around the cell's mean however many
    /// there are, and that scatter is how far this pair may be from it.
    fn profile_belief(&self, a: &JobView, fa: &Features, b: &JobView, fb: &Features) -> PairBelief {
        let prior = interference::prior_slowdowns_of(fa, fb);
        let (blend, blend_var) = self.matrix.blend(a.cluster, b.cluster, prior);
        let (residual, residual_var) = self.residual.predict(fa, fb);
        let scatter = a
            .cluster
            .zip(b.cluster)
            .and_then(|(ca, cb)| self.matrix.cell(ca, cb))
            .and_then(|cell| cell.slowdown.variance())
            .unwrap_or(0.0)
            .max(PAIR_SPREAD_STD * PAIR_SPREAD_STD);
        let mean = (blend + residual).max(0.0);
        // From slowdown fractions to log slowdown: d ln(1 + s) = ds / (1 + s).
        let per_unit = (1.0 + mean).powi(-2);
        let learned = self.residual.observations > 0
            || a.cluster
                .zip(b.cluster)
                .is_some_and(|(ca, cb)| self.matrix.cell(ca, cb).is_some());
        PairBelief {
            log_mean: mean.ln_1p(),
            estimate_var: (blend_var + residual_var + scatter + a.feature_var + b.feature_var)
                * per_unit,
            noise_var: NOISE_STD * NOISE_STD * per_unit,
            learned,
        }
    }

    /// Predicted slowdowns of a group sharing one GPU (in its order), how unsure they are and
    /// whether any outcome informed them. Pairwise slowdowns add up for groups of three or
    /// more.
    pub(crate) fn predict(&self, group: &[&JobView]) -> GroupPrediction {
        Self::predict_by(group, |a, b| self.predict_pair(a, b))
    }

    /// [`Knowledge::predict`] with each ordered pair predicted by `pair` (which returns what
    /// [`Knowledge::predict_pair`] does: a memo may stand in for it).
    pub(crate) fn predict_by(
        group: &[&JobView],
        pair: impl FnMut(&JobView, &JobView) -> PairBelief,
    ) -> GroupPrediction {
        if group.len() < 2 {
            return GroupPrediction {
                slowdowns: smallvec::smallvec![0.0; group.len()],
                uncertainty: 0.0,
                learned: false,
            };
        }
        GroupPrediction::of(&Self::partner_terms(group, pair))
    }

    /// Each member's [`PartnerTerms`] in `group`, each ordered pair predicted by `pair`.
    pub(crate) fn partner_terms(
        group: &[&JobView],
        mut pair: impl FnMut(&JobView, &JobView) -> PairBelief,
    ) -> SmallVec<[PartnerTerms; 4]> {
        group
            .iter()
            .enumerate()
            .map(|(i, job)| {
                let mut terms = PartnerTerms::default();
                for (j, partner) in group.iter().enumerate() {
                    if i != j {
                        terms.add(pair(job, partner));
                    }
                }
                terms
            })
            .collect()
    }

    /// Predicted effect of running `group` together (see [`Knowledge::predict`]). A group
    /// with a job of unknown memory is reported at the GPU's whole memory, the engine's
    /// stand-in for "unknown" everywhere; whether it may share is for the planner to decide.
    /// A group whose figures exceed the GPU's memory is infeasible, unless it is a pair observed
    /// sharing that GPU model.
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
        let GroupPrediction {
            slowdowns,
            uncertainty,
            ..
        } = self.predict(&refs);
        // As the guard: two jobs observed sharing this model fit on it, whatever the figures.
        let seen_together = matches!(views.as_slice(), [a, b] if self.shared(a, b, &gpu.model));
        if memory > u64::from(gpu.memory_mib) && !seen_together {
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
