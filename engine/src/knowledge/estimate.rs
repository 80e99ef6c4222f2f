//! What differs between GPU models: a job's memory on each, its speed on each, and what its
//! run there costs (SchedTune, DOPE-ML), as the WIT `estimate` reports and the guard reserves.
//!
//! Memory on a model, best evidence first: the job's profile measured on that model; its profile
//! from another model, scaled by the ratio the memory model predicts between the two when the
//! job declared its model (taken as is otherwise: memory mostly follows the job, not the GPU);
//! the declared model's predicted peak plus the guard's margin ([`crate::memory`]); else
//! unknown, and the guard reserves the whole GPU.
//!
//! Speed on a model: see [`super::speeds`].
//!
//! Utilization (in `estimate`): the profile's, else predicted from the declared model
//! ([`crate::utilization`]).

use tandem_api::{Estimate, GpuSpec, Job, MemorySource, Profile};

use super::Knowledge;
use crate::memory::{self, GpuTraits};
use crate::utilization::UtilizationModel;

/// A job's memory on one GPU model, and where the figure comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Memory {
    pub(crate) source: MemorySource,
    /// Peak as measured or predicted, MiB.
    pub(crate) peak_mib: Option<u32>,
    /// What the guard reserves, MiB.
    pub(crate) reserved_mib: Option<u32>,
    /// Whether the figure is a declared model's prediction beyond what the memory model was
    /// trained on ([`crate::memory::MemoryModel::vouches_for`]): enough to tell where the job
    /// cannot fit, not to let it share a GPU.
    pub(crate) extrapolated: bool,
}

fn mib(value: f64) -> Option<u32> {
    (value.is_finite() && value >= 0.0).then(|| value.ceil().min(f64::from(u32::MAX)) as u32)
}

/// Traits of the GPU model called `name`: from a spec of that name among `specs`, else from
/// the engine's table of well-known models.
fn traits_named(name: &str, specs: &[&GpuSpec]) -> Option<GpuTraits> {
    specs
        .iter()
        .find(|s| s.model == name)
        .and_then(|s| GpuTraits::of(s))
        .or_else(|| memory::known_gpu(name))
}

impl Knowledge {
    /// Memory of `job` (whose profile, given or observed, is `profile`) on a GPU of `spec`.
    /// `specs` are the other GPU models in the request, whose characteristics scale a profile
    /// measured on one of them.
    pub(crate) fn memory_on(
        &self,
        job: &Job,
        profile: Option<&Profile>,
        spec: &GpuSpec,
        specs: &[&GpuSpec],
    ) -> Memory {
        let exact = |mib: u32, source| Memory {
            source,
            peak_mib: Some(mib),
            reserved_mib: Some(mib),
            extrapolated: false,
        };
        if let Some(p) = profile.filter(|p| p.gpu_model == spec.model) {
            return exact(p.mem_used_mib, MemorySource::Observed);
        }
        let declared = job
            .declared
            .as_ref()
            .and_then(|summary| Some((summary, GpuTraits::of(spec)?)));
        match (profile, declared) {
            (Some(p), Some((summary, here))) => {
                let model = self.memory.model();
                match traits_named(&p.gpu_model, specs) {
                    Some(there) => {
                        let ratio = model.estimate(summary, here).peak_mib
                            / model.estimate(summary, there).peak_mib;
                        let peak = f64::from(p.mem_used_mib) * ratio;
                        Memory {
                            source: MemorySource::Transferred,
                            peak_mib: mib(peak),
                            reserved_mib: mib(peak * (1.0 + model.margin())),
                            extrapolated: false,
                        }
                    }
                    None => exact(p.mem_used_mib, MemorySource::Transferred),
                }
            }
            (Some(p), None) => exact(p.mem_used_mib, MemorySource::Transferred),
            (None, Some((summary, here))) => {
                let model = self.memory.model();
                let estimate = model.estimate(summary, here);
                Memory {
                    source: MemorySource::Declared,
                    peak_mib: mib(estimate.peak_mib),
                    reserved_mib: mib(estimate.reserved_mib),
                    extrapolated: !model.vouches_for(summary),
                }
            }
            (None, None) => Memory {
                source: MemorySource::Unknown,
                peak_mib: None,
                reserved_mib: None,
                extrapolated: false,
            },
        }
    }

    /// The WIT `estimate`: `job` alone on each GPU model of `specs`.
    pub(crate) fn estimate(&self, job: &Job, specs: &[GpuSpec]) -> Vec<Estimate> {
        let profile = job.profile.as_ref().or_else(|| self.profile(&job.id));
        let all: Vec<&GpuSpec> = specs.iter().collect();
        // Measured beats predicted; the prediction does not depend on the GPU model.
        let utilization_pct = profile.map(|p| p.gpu_util_pct).or_else(|| {
            job.declared
                .as_ref()
                .map(|summary| UtilizationModel::bundled().predict(summary) as f32)
        });
        specs
            .iter()
            .map(|spec| {
                let memory = self.memory_on(job, profile, spec, &all);
                let speed = self.speeds.speed(&job.id, &spec.model);
                let solo_s = job.work.zip(speed).map(|(work, speed)| work / speed);
                Estimate {
                    gpu_model: spec.model.clone(),
                    memory_source: memory.source,
                    peak_mem_mib: memory.peak_mib,
                    reserved_mib: memory.reserved_mib,
                    fits_empty: memory.reserved_mib.is_some_and(|m| m <= spec.memory_mib),
                    speed,
                    solo_s,
                    cost: solo_s
                        .zip(spec.price_per_hour)
                        .map(|(s, price)| s / 3600.0 * f64::from(price)),
                    energy_kj: solo_s
                        .zip(spec.power_watts)
                        .map(|(s, watts)| s * f64::from(watts) / 1000.0),
                    utilization_pct,
                }
            })
            .collect()
    }
}
