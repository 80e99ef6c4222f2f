//! Ground truth: what the simulated cluster does, looked up in measured catalogs.
//!
//! One or more catalogs are merged (the Gavel measurements come as one catalog per GPU model):
//! GPU models by name, job types by name (their per-model throughputs joined), pairs by GPU
//! model. A job's solo speed on a model is its type's measured throughput there (steps/s; for
//! catalogs of whole runs, `1 / solo_time_s` runs/s). Jobs sharing a GPU progress at their
//! measured pair speeds; a group of three or more progresses at the product of its pairwise
//! speeds (the catalogs measured pairs only — this compounding is the simulator's assumption).
//! A group with a pair nobody measured on that model (unless its catalog time-slices unmeasured
//! pairs: then each of the two runs at half speed), or whose memory (each type's measured peak
//! on that model, else its profile's) exceeds the GPU, cannot run: it is an OOM — alone too, for
//! a type whose peak exceeds the model's memory (the job then never starts on that model
//! again).

use std::collections::HashMap;

use tandem_api::Profile;
use tandem_catalog::Catalog;

use crate::error::{Error, Result};

/// A GPU model of the merged catalogs.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Its name, such as `V100`.
    pub name: String,
    /// Device memory, MiB.
    pub memory_mib: u32,
}

/// A job type of the merged catalogs.
#[derive(Debug, Clone, PartialEq)]
pub struct JobType {
    /// Its name.
    pub name: String,
    /// Solo throughput per model (indexed like [`Truth::models`]); `None` where unmeasured.
    pub throughput: Vec<Option<f64>>,
    /// The measured profile a profiler would report, if the catalog has one.
    pub profile: Option<Profile>,
    /// Peak GPU utilization, 0..=100: the profile's, else the catalog's approximation.
    pub util_pct: Option<f32>,
    /// Measured peak memory alone per model (indexed like [`Truth::models`]), if measured.
    pub peak_mem_mib: Vec<Option<u32>>,
    /// The model its users declare, if the catalog gives one.
    pub declared: Option<tandem_api::ModelSummary>,
}

/// Measured behaviour of every job type, pair and GPU model a run may meet.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    models: Vec<Model>,
    model_index: HashMap<String, usize>,
    types: Vec<JobType>,
    type_index: HashMap<String, usize>,
    /// (model, lower type, higher type) -> (speed of lower, speed of higher).
    pairs: HashMap<(usize, usize, usize), (f64, f64)>,
    /// Per model: the speed of each job of a pair nobody measured there, if it can share, and
    /// the catalog that says so (the first to list the model).
    unmeasured: Vec<(Option<f64>, String)>,
    names: Vec<String>,
}

/// Speeds of a group that can run, one per member.
pub type Speeds = Vec<f64>;

impl Truth {
    /// Merges `catalogs`. A GPU model measured twice must have one memory size, and a job type
    /// one throughput per model.
    pub fn new(catalogs: &[Catalog]) -> Result<Self> {
        let mut truth = Truth::default();
        let conflict = |what: String| Error::Input {
            origin: "catalogs".into(),
            problem: what,
        };
        for catalog in catalogs {
            truth.names.push(catalog.name().to_owned());
            for gpu in catalog.gpu_models() {
                match truth.model_index.get(&gpu.model) {
                    Some(&m) if truth.models[m].memory_mib != gpu.memory_mib => {
                        return Err(conflict(format!(
                            "GPU model {} has {} MiB in one catalog and {} MiB in {}",
                            gpu.model,
                            truth.models[m].memory_mib,
                            gpu.memory_mib,
                            catalog.name()
                        )));
                    }
                    Some(&m) if truth.unmeasured[m].0 != catalog.unmeasured_pairs().speed() => {
                        let rule = |speed: Option<f64>| match speed {
                            Some(_) => "time-slice",
                            None => "cannot share",
                        };
                        let (first, named) = &truth.unmeasured[m];
                        return Err(conflict(format!(
                            "GPU model {}: unmeasured pairs {} in catalog {named} but {} in {}",
                            gpu.model,
                            rule(*first),
                            rule(catalog.unmeasured_pairs().speed()),
                            catalog.name()
                        )));
                    }
                    Some(_) => {}
                    None => {
                        truth
                            .model_index
                            .insert(gpu.model.clone(), truth.models.len());
                        truth.models.push(Model {
                            name: gpu.model.clone(),
                            memory_mib: gpu.memory_mib,
                        });
                        truth.unmeasured.push((
                            catalog.unmeasured_pairs().speed(),
                            catalog.name().to_owned(),
                        ));
                    }
                }
            }
        }
        let models = truth.models.len();
        for catalog in catalogs {
            for job in catalog.job_types() {
                let t = match truth.type_index.get(&job.name) {
                    Some(&t) => t,
                    None => {
                        truth.type_index.insert(job.name.clone(), truth.types.len());
                        truth.types.push(JobType {
                            name: job.name.clone(),
                            throughput: vec![None; models],
                            profile: None,
                            util_pct: None,
                            peak_mem_mib: vec![None; models],
                            declared: None,
                        });
                        truth.types.len() - 1
                    }
                };
                let entry = &mut truth.types[t];
                let measured = job
                    .solo_throughput
                    .iter()
                    .map(|(m, tput)| (m, *tput))
                    .chain(job.solo_time_s.iter().map(|(m, s)| (m, 1.0 / s)));
                for (model, tput) in measured {
                    let m = truth.model_index[model];
                    match entry.throughput[m] {
                        Some(old) if (old - tput).abs() > 1e-9 * old.abs().max(1.0) => {
                            return Err(conflict(format!(
                                "job type {} has two solo throughputs on {model}: {old} and {tput}",
                                job.name
                            )));
                        }
                        _ => entry.throughput[m] = Some(tput),
                    }
                }
                if entry.profile.is_none() {
                    entry.profile = job.profile.clone();
                }
                if entry.declared.is_none() {
                    entry.declared = job.declared.clone();
                }
                for (model, &peak) in &job.peak_mem_mib {
                    entry.peak_mem_mib[truth.model_index[model]] = Some(peak);
                }
                if entry.util_pct.is_none() {
                    entry.util_pct = job
                        .profile
                        .as_ref()
                        .map(|p| p.gpu_util_pct)
                        .or(job.gpu_util_pct_approx);
                }
            }
            for pair in catalog.pairs() {
                let m = truth.model_index[&pair.gpu_model];
                let (a, b) = (truth.type_index[&pair.a], truth.type_index[&pair.b]);
                let key = (m, a.min(b), a.max(b));
                let speeds = if a <= b {
                    (pair.speed_a, pair.speed_b)
                } else {
                    (pair.speed_b, pair.speed_a)
                };
                truth.pairs.insert(key, speeds);
            }
        }
        Ok(truth)
    }

    /// Names of the merged catalogs.
    pub fn catalogs(&self) -> &[String] {
        &self.names
    }

    /// The GPU models.
    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// The index of a GPU model.
    pub fn model(&self, name: &str) -> Option<usize> {
        self.model_index.get(name).copied()
    }

    /// The job types.
    pub fn types(&self) -> &[JobType] {
        &self.types
    }

    /// The index of a job type.
    pub fn job_type(&self, name: &str) -> Option<usize> {
        self.type_index.get(name).copied()
    }

    /// Solo throughput of a type on a model, if measured.
    pub fn throughput(&self, job_type: usize, model: usize) -> Option<f64> {
        self.types[job_type].throughput[model]
    }

    /// Speeds of types `a` and `b` sharing a GPU of `model`, in that order: measured, else
    /// time-sliced where the model's catalog says unmeasured pairs are; `None` if they cannot
    /// share.
    pub fn pair(&self, model: usize, a: usize, b: usize) -> Option<(f64, f64)> {
        match self.pairs.get(&(model, a.min(b), a.max(b))).copied() {
            Some((lo, hi)) => Some(if a <= b { (lo, hi) } else { (hi, lo) }),
            None => self.unmeasured[model].0.map(|speed| (speed, speed)),
        }
    }

    /// Every measured pair on `model` as `(a, b, speed a, speed b)`, `a <= b`, in a fixed order.
    pub fn pairs_on(&self, model: usize) -> Vec<(usize, usize, f64, f64)> {
        let mut pairs: Vec<_> = self
            .pairs
            .iter()
            .filter(|((m, _, _), _)| *m == model)
            .map(|(&(_, a, b), &(sa, sb))| (a, b, sa, sb))
            .collect();
        pairs.sort_by_key(|&(a, b, _, _)| (a, b));
        pairs
    }

    /// Why a group of types cannot share a GPU of `model`, or `None` if it can.
    pub fn oom(&self, model: usize, group: &[usize]) -> Option<String> {
        for (i, &a) in group.iter().enumerate() {
            for &b in &group[i + 1..] {
                if self.pair(model, a, b).is_none() {
                    return Some(format!(
                        "{} beside {} was never measured on {} (treated as an OOM)",
                        self.types[a].name, self.types[b].name, self.models[model].name
                    ));
                }
            }
        }
        self.over_memory(model, group)
    }

    /// How a group of types overflows the memory of a GPU of `model`, or `None` if it fits
    /// (or a member's memory on that model is unknown): the part of [`oom`](Self::oom) that is a
    /// real out-of-memory error.
    pub fn over_memory(&self, model: usize, group: &[usize]) -> Option<String> {
        // A type's memory on this model: its measured peak there, else its profile's.
        let memory: Option<u64> = group
            .iter()
            .map(|&t| {
                let job = &self.types[t];
                job.peak_mem_mib[model]
                    .map(u64::from)
                    .or_else(|| job.profile.as_ref().map(|p| u64::from(p.mem_used_mib)))
            })
            .sum();
        match memory {
            Some(used) if used > u64::from(self.models[model].memory_mib) => Some(format!(
                "the group needs {used} MiB, the {} has {}",
                self.models[model].name, self.models[model].memory_mib
            )),
            _ => None,
        }
    }

    /// Speeds (co-located / solo throughput) of a group sharing a GPU of `model`, in its
    /// order; `None` if it cannot run ([`oom`](Self::oom)). One job runs at full speed.
    pub fn speeds(&self, model: usize, group: &[usize]) -> Option<Speeds> {
        if self.oom(model, group).is_some() {
            return None;
        }
        Some(
            group
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    group
                        .iter()
                        .enumerate()
                        .filter(|&(j, _)| j != i)
                        .map(|(_, &b)| self.pair(model, a, b).map_or(1.0, |(s, _)| s))
                        .product()
                })
                .collect(),
        )
    }
}
