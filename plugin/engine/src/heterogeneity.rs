//! What differs between GPU models: a job's memory on each, its speed on each, and what its
//! run there costs (SchedTune, DOPE-ML).
//!
//! Memory on a model, best evidence first: the job's profile measured on that model; its profile
//! from another model, scaled by the ratio the memory model predicts between the two when the
//! job declared its model (taken as is otherwise: memory mostly follows the job, not the GPU);
//! the declared model's predicted peak plus the guard's margin ([`crate::memory`]); else
//! unknown, and the guard reserves the whole GPU.
//!
//! Speed on a model: the speed reported for the job's workload there, else a speed reported on
//! another model times the ratio between the two models, learned as the geometric mean of that
//! ratio over every workload reported on both (Gavel's throughputs show the ratio depends on
//! the workload, so the estimate is an average, the better the more workloads taught it).
//!
//! Utilization (in `estimate`): the profile's, else predicted from the declared model
//! ([`crate::utilization`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tandem_api::{Estimate, GpuSpec, Job, MemorySource, Priority, Profile};

use crate::knowledge::{Knowledge, workload_of};
use crate::memory::{GpuTraits, MemoryModel, Row};
use crate::utilization::UtilizationModel;

/// Speeds reported per workload and GPU model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Speeds {
    /// Workload -> GPU model -> work per second alone (the latest report).
    by_workload: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Speeds {
    /// Records a speed (replacing an earlier report for the same workload and model).
    pub(crate) fn observe(&mut self, job: &str, gpu_model: &str, work_per_s: f64) {
        self.by_workload
            .entry(workload_of(job).to_owned())
            .or_default()
            .insert(gpu_model.to_owned(), work_per_s);
    }

    /// Workloads with a speed on some model.
    pub(crate) fn workloads(&self) -> usize {
        self.by_workload.len()
    }

    /// Speed of `job`'s workload on `gpu_model`: reported, or scaled from the model with the
    /// best-supported ratio.
    pub(crate) fn speed(&self, job: &str, gpu_model: &str) -> Option<f64> {
        let known = self.by_workload.get(workload_of(job))?;
        if let Some(&speed) = known.get(gpu_model) {
            return Some(speed);
        }
        known
            .iter()
            .filter_map(|(from, &speed)| {
                self.ratio(from, gpu_model)
                    .map(|(ratio, support)| (speed * ratio, support))
            })
            .max_by_key(|&(_, support)| support)
            .map(|(speed, _)| speed)
    }

    /// Geometric mean of `speed on to / speed on from` over the workloads reported on both, and
    /// how many there were.
    fn ratio(&self, from: &str, to: &str) -> Option<(f64, usize)> {
        let (sum, n) = self
            .by_workload
            .values()
            .filter_map(|speeds| Some((speeds.get(from)?, speeds.get(to)?)))
            .fold((0.0, 0), |(sum, n), (a, b)| (sum + (b / a).ln(), n + 1));
        (n > 0).then(|| ((sum / n as f64).exp(), n))
    }
}

/// The memory model a knowledge base predicts with: the bundled one until the host reports a
/// peak, then one retrained on the bundled and the reported peaks. Not saved: it is a function
/// of the reported rows, which are, and is retrained when a snapshot is loaded.
#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryCell(Option<Arc<MemoryModel>>);

impl PartialEq for MemoryCell {
    /// Two cells are equal when trained on the same rows, which their knowledge bases compare.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl MemoryCell {
    /// A model retrained on the bundled rows and `reported`.
    pub(crate) fn retrained(reported: &[Row]) -> Result<Self, crate::memory::MemoryError> {
        if reported.is_empty() {
            return Ok(Self(None));
        }
        let mut rows: Vec<Row> = crate::memory::bundled()
            .into_iter()
            .map(|l| l.row)
            .collect();
        rows.extend_from_slice(reported);
        Ok(Self(Some(Arc::new(MemoryModel::train(&rows)?))))
    }

    pub(crate) fn model(&self) -> Arc<MemoryModel> {
        self.0.clone().unwrap_or_else(MemoryModel::bundled)
    }
}

/// A job's memory on one GPU model, and where the figure comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Memory {
    pub(crate) source: MemorySource,
    /// Peak as measured or predicted, MiB.
    pub(crate) peak_mib: Option<u32>,
    /// What the guard reserves, MiB.
    pub(crate) reserved_mib: Option<u32>,
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
        .or_else(|| crate::memory::known_gpu(name))
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
                        }
                    }
                    None => exact(p.mem_used_mib, MemorySource::Transferred),
                }
            }
            (Some(p), None) => exact(p.mem_used_mib, MemorySource::Transferred),
            (None, Some((summary, here))) => {
                let estimate = self.memory.model().estimate(summary, here);
                Memory {
                    source: MemorySource::Declared,
                    peak_mib: mib(estimate.peak_mib),
                    reserved_mib: mib(estimate.reserved_mib),
                }
            }
            (None, None) => Memory {
                source: MemorySource::Unknown,
                peak_mib: None,
                reserved_mib: None,
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

/// What a job's priority weighs a GPU model by, per unit of run time: its price, its power, or
/// nothing (latency), when every model offered states it; otherwise run time alone.
pub(crate) fn priority_weights(priority: Option<Priority>, specs: &[&GpuSpec]) -> Vec<f64> {
    let weight = |spec: &GpuSpec| match priority.unwrap_or(Priority::Latency) {
        Priority::Latency => Some(1.0),
        Priority::Cost => spec.price_per_hour.map(f64::from),
        Priority::Energy => spec.power_watts.map(f64::from),
    };
    let weights: Option<Vec<f64>> = specs.iter().map(|s| weight(s)).collect();
    weights
        .filter(|w| w.iter().all(|&x| x > 0.0))
        .unwrap_or_else(|| vec![1.0; specs.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_carry_across_models_by_the_learned_ratio() {
        let mut speeds = Speeds::default();
        speeds.observe("a~1", "K80", 1.0);
        speeds.observe("a~2", "V100", 4.0);
        speeds.observe("b", "K80", 2.0);
        speeds.observe("b", "V100", 2.0 * 9.0);
        // Instances share their workload's speeds; b's V100 speed is its own.
        assert_eq!(speeds.speed("a~9", "V100"), Some(4.0));
        speeds.observe("c", "K80", 3.0);
        // c on a V100: the geometric mean of a's (4×) and b's (9×) ratios, 6×.
        let c = speeds.speed("c", "V100").unwrap_or_default();
        assert!((c - 18.0).abs() < 1e-9, "{c}");
        assert_eq!(speeds.speed("c", "P100"), None);
        assert_eq!(speeds.speed("d", "K80"), None);
    }

    #[test]
    fn weights_need_every_model_to_state_them() {
        let mut cheap = GpuSpec::new("K80", 11_441);
        cheap.price_per_hour = Some(0.5);
        let mut dear = GpuSpec::new("V100", 16_384);
        dear.price_per_hour = Some(2.5);
        let specs = [&cheap, &dear];
        assert_eq!(
            priority_weights(Some(Priority::Cost), &specs),
            vec![0.5, 2.5]
        );
        assert_eq!(
            priority_weights(Some(Priority::Energy), &specs),
            vec![1.0, 1.0]
        );
        assert_eq!(priority_weights(None, &specs), vec![1.0, 1.0]);
    }
}
