//! What the cluster teaches the engine beyond profiles and outcomes, and what the operator
//! sees of it.
//!
//! - **Memory.** A node profiler measures a job's peak memory on a GPU model; when the job
//!   declared its model ([`crate::declaration`]), the core reports the peak to the engine
//!   (`observe-memory`): the memory model and its guard margin retrain on it. Retraining takes
//!   a fifth of a second in the component (every forest of the margin's held-out folds is
//!   grown again), so it never runs on the engine thread that answers the scheduler: the core
//!   builds a fresh instance from the stored knowledge base on a thread of its own, applies
//!   the batch there, stores the result, and only then puts the instance in place of the one
//!   deciding ([`crate::Core::observe_off_thread`]). The profile carrying the peak is filed in
//!   the deciding instance first, so the measured job is judged by its measurement meanwhile.
//! - **Speed.** A run that finished alone on its GPU teaches its job's speed on that GPU model
//!   (`observe-speed`): the work it declared over its run time ([`crate::outcomes::Run::work`]).
//! - **The operator's view** ([`Lessons::report`], served in `GET /v1/knowledge` and shown by
//!   `tandem kb show`): per GPU model, how far the memory model's predictions were from the
//!   peaks measured, what the guard reserved, the speed ratios learned between models, and
//!   counts. No job is named: the figures are per GPU model.
//!
//! [`Lessons`] is stored with the knowledge base (bounded, keyed ids only).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use tandem_api::{GpuSpec, Job, KnowledgeSummary, MemorySource, ModelSummary};

/// Jobs whose speeds are remembered for the speed ratios, least recently updated dropped first.
pub const SPEED_JOBS: usize = 2_048;

/// Jobs whose declared model is remembered for their profiles ([`DeclaredModels`]).
pub const DECLARED_JOBS: usize = 4_096;

/// The id the core asks the engine about a declared model with, alone: no profile is ever
/// observed under it, so the answer is the memory model's.
pub const PROBE_JOB: &str = "tandem-memory-probe";

/// What the memory model made of one measured peak, before and after learning it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PeakLesson {
    /// The peak the profiler measured, MiB.
    pub measured_mib: u32,
    /// The memory model's prediction before it learned the peak, MiB.
    pub predicted_before_mib: u32,
    /// What the guard reserved before (prediction plus margin), MiB.
    pub reserved_before_mib: u32,
    /// The prediction once it learned the peak, MiB.
    pub predicted_after_mib: u32,
    /// What the guard reserves once it learned the peak, MiB.
    pub reserved_after_mib: u32,
}

/// Measured peaks of declared jobs on one GPU model, against the memory model's predictions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryLessons {
    /// Peaks learned.
    pub peaks: u32,
    /// Sum of `|measured - predicted| / measured` over them (predictions made before each
    /// peak was learned), for the mean.
    pub abs_error_sum: f64,
    /// Largest `measured / predicted - 1` (how far the model under-predicted), 0 if it never did.
    pub max_under: f64,
    /// Peaks above what the guard reserved for them before it learned them (each a placement
    /// that could have run out of memory beside others).
    pub beyond_reservation: u32,
    /// The last peak learned.
    pub last: Option<PeakLesson>,
}

/// What was learned on one GPU model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelLessons {
    /// Profiles the intake observed on it.
    #[serde(default)]
    pub profiles: u32,
    /// Runs that finished alone on it and taught a speed.
    #[serde(default)]
    pub speeds: u32,
    /// Co-location outcomes learned on it.
    #[serde(default)]
    pub outcomes: u32,
    /// Peaks of declared jobs.
    #[serde(default)]
    pub memory: MemoryLessons,
}

/// What the core learned per GPU model, stored with the knowledge base.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lessons {
    /// Per GPU model.
    #[serde(default)]
    pub by_model: BTreeMap<String, ModelLessons>,
    /// Speeds taught, per keyed job and GPU model (for the ratios between models).
    #[serde(default)]
    speeds: BTreeMap<String, BTreeMap<String, f64>>,
    /// Keys of `speeds`, least recently updated first.
    #[serde(default)]
    speed_order: VecDeque<String>,
}

impl Lessons {
    fn model(&mut self, model: &str) -> &mut ModelLessons {
        self.by_model.entry(model.to_owned()).or_default()
    }

    /// Counts a profile observed on `model`.
    pub fn profile(&mut self, model: &str) {
        self.model(model).profiles += 1;
    }

    /// Counts an outcome learned on `model`.
    pub fn outcome(&mut self, model: &str) {
        self.model(model).outcomes += 1;
    }

    /// Records a speed taught: `job` did `work_per_s` alone on `model`.
    pub fn speed(&mut self, job: &str, model: &str, work_per_s: f64) {
        self.model(model).speeds += 1;
        self.speeds
            .entry(job.to_owned())
            .or_default()
            .insert(model.to_owned(), work_per_s);
        self.speed_order.retain(|k| k != job);
        self.speed_order.push_back(job.to_owned());
        while self.speed_order.len() > SPEED_JOBS {
            if let Some(oldest) = self.speed_order.pop_front() {
                self.speeds.remove(&oldest);
            }
        }
    }

    /// Records a peak learned on `model`, with the memory model's figures before and after.
    pub fn peak(&mut self, model: &str, lesson: PeakLesson) {
        let memory = &mut self.model(model).memory;
        let measured = f64::from(lesson.measured_mib.max(1));
        let predicted = f64::from(lesson.predicted_before_mib.max(1));
        memory.peaks += 1;
        memory.abs_error_sum += (measured - predicted).abs() / measured;
        memory.max_under = memory.max_under.max(measured / predicted - 1.0);
        if lesson.measured_mib > lesson.reserved_before_mib {
            memory.beyond_reservation += 1;
        }
        memory.last = Some(lesson);
    }

    /// Geometric mean of `speed on to / speed on from` over the jobs taught on both, and how
    /// many there were.
    fn ratio(&self, from: &str, to: &str) -> Option<(f64, u32)> {
        let (sum, n) = self
            .speeds
            .values()
            .filter_map(|s| Some((s.get(from)?, s.get(to)?)))
            .fold((0.0, 0_u32), |(sum, n), (a, b)| (sum + (b / a).ln(), n + 1));
        (n > 0).then(|| ((sum / f64::from(n)).exp(), n))
    }

    /// The operator's view, per GPU model; `margin_pct` is the guard's margin the engine
    /// reports (`describe`).
    pub fn report(&self, margin_pct: f32) -> Vec<ModelReport> {
        self.by_model
            .iter()
            .map(|(model, lessons)| {
                let memory = &lessons.memory;
                let speed_vs = self
                    .by_model
                    .keys()
                    .filter(|other| *other != model)
                    .filter_map(|other| {
                        let (ratio, jobs) = self.ratio(other, model)?;
                        Some(SpeedRatio {
                            gpu_model: other.clone(),
                            ratio,
                            jobs,
                        })
                    })
                    .collect();
                ModelReport {
                    gpu_model: model.clone(),
                    profiles: lessons.profiles,
                    outcomes: lessons.outcomes,
                    speeds: lessons.speeds,
                    speed_vs,
                    memory: MemoryReport {
                        peaks: memory.peaks,
                        mean_error_pct: (memory.peaks > 0)
                            .then(|| memory.abs_error_sum / f64::from(memory.peaks) * 100.0),
                        max_under_pct: (memory.peaks > 0).then_some(memory.max_under * 100.0),
                        beyond_reservation: memory.beyond_reservation,
                        margin_pct,
                        last: memory.last,
                    },
                }
            })
            .collect()
    }
}

/// One GPU model's speed relative to another, learned from the same jobs' runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedRatio {
    /// The other model.
    pub gpu_model: String,
    /// This model's speed over the other's (2: twice as fast).
    pub ratio: f64,
    /// Jobs whose runs on both taught it.
    pub jobs: u32,
}

/// The memory model's record on one GPU model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// Peaks of declared jobs learned.
    pub peaks: u32,
    /// Mean `|measured - predicted| / measured`, in percent, of the predictions made before
    /// each peak was learned; absent without peaks.
    pub mean_error_pct: Option<f64>,
    /// Largest under-prediction, `measured / predicted - 1` in percent; absent without peaks.
    pub max_under_pct: Option<f64>,
    /// Peaks above what the guard had reserved for them.
    pub beyond_reservation: u32,
    /// The guard's margin now (the same on every model), in percent of a prediction.
    pub margin_pct: f32,
    /// The last peak learned, with the predictions before and after.
    pub last: Option<PeakLesson>,
}

/// What was learned on one GPU model, for the operator (`GET /v1/knowledge`, `tandem kb show`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelReport {
    /// The GPU model.
    pub gpu_model: String,
    /// Profiles observed on it.
    pub profiles: u32,
    /// Co-location outcomes learned on it.
    pub outcomes: u32,
    /// Solo runs that taught a speed on it.
    pub speeds: u32,
    /// Its speed relative to the other models, where the same jobs ran on both.
    pub speed_vs: Vec<SpeedRatio>,
    /// The memory model's record on it.
    pub memory: MemoryReport,
}

/// The answer of `GET /v1/knowledge`: the engine's summary and, per GPU model, what the
/// cluster taught.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnowledgeReport {
    /// What the engine's knowledge base holds (`describe`).
    #[serde(flatten)]
    pub summary: KnowledgeSummary,
    /// Per GPU model.
    pub gpu_models: Vec<ModelReport>,
}

/// The models jobs declared, by keyed id, so that a profile posted later for the job also
/// teaches the memory model. Front-ends fill it as they meet jobs (a pod's first scheduling
/// call or watch event, a Slurm submission); it is not stored (the pods, or the Slurm
/// service's placements, say it again after a restart). At most [`DECLARED_JOBS`], the least
/// recently declared forgotten first.
#[derive(Debug, Default)]
pub struct DeclaredModels {
    models: BTreeMap<String, ModelSummary>,
    order: VecDeque<String>,
}

impl DeclaredModels {
    /// Remembers that `job` declared `model` (the latest declaration wins).
    pub fn remember(&mut self, job: &str, model: &ModelSummary) {
        if self.models.get(job) == Some(model) {
            return;
        }
        self.models.insert(job.to_owned(), model.clone());
        self.order.retain(|k| k != job);
        self.order.push_back(job.to_owned());
        while self.order.len() > DECLARED_JOBS {
            if let Some(oldest) = self.order.pop_front() {
                self.models.remove(&oldest);
            }
        }
    }

    /// The model `job` declared last, if any.
    pub fn get(&self, job: &str) -> Option<&ModelSummary> {
        self.models.get(job)
    }
}

/// A peak to learn: a declared job's measured peak memory on a GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct PeakReport {
    /// Keyed job id.
    pub job: String,
    /// The model it declared.
    pub declared: ModelSummary,
    /// The GPU it was measured on.
    pub gpu: GpuSpec,
    /// The peak, MiB.
    pub peak_mib: u32,
}

/// The memory model's prediction and reservation for `declared` on `gpu`, asked of the engine
/// with no profile in the way ([`PROBE_JOB`]).
pub fn predicted(
    recommender: &mut tandem_host::Recommender,
    declared: &ModelSummary,
    gpu: &GpuSpec,
) -> Option<(u32, u32)> {
    let probe = Job {
        declared: Some(declared.clone()),
        ..Job::new(PROBE_JOB)
    };
    let estimate = recommender
        .estimate(&probe, std::slice::from_ref(gpu))
        .ok()?
        .into_iter()
        .next()?;
    if estimate.memory_source != MemorySource::Declared {
        return None;
    }
    Some((estimate.peak_mem_mib?, estimate.reserved_mib?))
}

/// What the engine predicted of a pair's slowdowns before it learned their outcome, and what
/// was observed: how far the interference model is from the truth, per GPU model.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowdownLesson {
    /// The GPU model they shared.
    pub gpu_model: String,
    /// Each job's predicted slowdown, as a fraction (0.25: 25% longer than alone).
    pub predicted: Vec<f64>,
    /// Each job's observed slowdown, `(co-located - solo) / solo`.
    pub observed: Vec<f64>,
}

/// Asks `recommender`, before it learns `outcome`, what it predicted of that group on `gpu`.
/// `None` when the engine cannot predict it (a job it has no profile of) or the outcome has
/// no solo time to compare with.
pub fn slowdown_before(
    recommender: &mut tandem_host::Recommender,
    outcome: &tandem_api::Outcome,
    gpu: &GpuSpec,
) -> Option<SlowdownLesson> {
    let observed: Vec<f64> = outcome
        .solo_s
        .iter()
        .zip(&outcome.colocated_s)
        .map(|(solo, colocated)| (*solo > 0.0).then(|| (colocated - solo) / solo))
        .collect::<Option<_>>()?;
    let group: Vec<Job> = outcome.jobs.iter().map(|id| Job::new(id.clone())).collect();
    let prediction = recommender.predict(&group, gpu).ok()?;
    let predicted: Vec<f64> = prediction
        .slowdown_pct
        .iter()
        .map(|pct| f64::from(*pct) / 100.0)
        .collect();
    (predicted.len() == observed.len()).then(|| SlowdownLesson {
        gpu_model: outcome.gpu_model.clone(),
        predicted,
        observed,
    })
}

/// What [`learn_peaks`] made of a batch of peaks.
#[derive(Debug, Default)]
pub struct PeaksLearned {
    /// Why each peak the engine refused was skipped.
    pub skipped: Vec<String>,
    /// Each peak learned, by GPU model, with the memory model's figures before and after.
    pub lessons: Vec<(String, PeakLesson)>,
}

/// Learns `peaks` on `recommender` (the off-thread instance), recording in `lessons` what the
/// memory model made of each. A peak the engine refuses (a GPU whose characteristics it does
/// not know) is skipped and its reason returned; anything else the host says is a failure (of
/// `observe-memory`, which the caller names).
pub fn learn_peaks(
    recommender: &mut tandem_host::Recommender,
    lessons: &mut Lessons,
    peaks: &[PeakReport],
) -> Result<PeaksLearned, tandem_host::Error> {
    let mut learned = PeaksLearned::default();
    for peak in peaks {
        let before = predicted(recommender, &peak.declared, &peak.gpu);
        match recommender.observe_memory(&peak.job, &peak.declared, &peak.gpu, peak.peak_mib) {
            Ok(()) => {}
            Err(tandem_host::Error::Engine(refused)) => {
                learned.skipped.push(refused.to_string());
                continue;
            }
            Err(error) => return Err(error),
        }
        let after = predicted(recommender, &peak.declared, &peak.gpu);
        if let (
            Some((predicted_before, reserved_before)),
            Some((predicted_after, reserved_after)),
        ) = (before, after)
        {
            let lesson = PeakLesson {
                measured_mib: peak.peak_mib,
                predicted_before_mib: predicted_before,
                reserved_before_mib: reserved_before,
                predicted_after_mib: predicted_after,
                reserved_after_mib: reserved_after,
            };
            lessons.peak(&peak.gpu.model, lesson);
            learned.lessons.push((peak.gpu.model.clone(), lesson));
        }
    }
    Ok(learned)
}

/// Asks a fresh instance the questions that train its models (the memory model, bundled or
/// retrained, and the utilization model are grown on first use), so the instance that takes
/// over decisions answers its first declared job at once.
pub fn warm_up(recommender: &mut tandem_host::Recommender) -> Result<(), tandem_host::Error> {
    recommender.describe()?;
    let probe = Job {
        declared: Some(ModelSummary {
            params_mib: 100.0,
            activations_mib: 1_000.0,
            input_mib: 10.0,
            batch_size: 32,
            gflops: 10.0,
            conv_layers: 10,
            linear_layers: 1,
            activation_layers: 10,
            other_layers: 5,
        }),
        ..Job::new(PROBE_JOB)
    };
    recommender.estimate(&probe, &[GpuSpec::new("V100", 16_384)])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_ratios_come_from_jobs_run_on_both_models() {
        let mut lessons = Lessons::default();
        lessons.speed("a", "K80", 1.0);
        lessons.speed("a", "V100", 4.0);
        lessons.speed("b", "K80", 2.0);
        lessons.speed("b", "V100", 18.0);
        lessons.speed("c", "T4", 1.0);
        let report = lessons.report(0.0);
        let v100 = report.iter().find(|r| r.gpu_model == "V100").unwrap();
        assert_eq!(v100.speeds, 2);
        let vs_k80 = &v100.speed_vs[0];
        assert_eq!((vs_k80.gpu_model.as_str(), vs_k80.jobs), ("K80", 2));
        assert!((vs_k80.ratio - 6.0).abs() < 1e-9, "{}", vs_k80.ratio);
        let t4 = report.iter().find(|r| r.gpu_model == "T4").unwrap();
        assert!(t4.speed_vs.is_empty());
        assert!(t4.memory.mean_error_pct.is_none());
    }

    #[test]
    fn peaks_record_the_error_and_what_the_guard_would_have_missed() {
        let mut lessons = Lessons::default();
        let lesson = |measured, predicted, reserved| PeakLesson {
            measured_mib: measured,
            predicted_before_mib: predicted,
            reserved_before_mib: reserved,
            predicted_after_mib: measured,
            reserved_after_mib: measured + 100,
        };
        lessons.peak("V100", lesson(11_000, 10_000, 12_000));
        lessons.peak("V100", lesson(9_000, 10_000, 12_000));
        lessons.peak("V100", lesson(14_000, 10_000, 12_000));
        let report = lessons.report(22.3);
        let memory = &report[0].memory;
        assert_eq!(memory.peaks, 3);
        assert_eq!(memory.beyond_reservation, 1);
        assert!((memory.max_under_pct.unwrap() - 40.0).abs() < 1e-9);
        let mean = (1_000.0 / 11_000.0 + 1_000.0 / 9_000.0 + 4_000.0 / 14_000.0) / 3.0 * 100.0;
        assert!((memory.mean_error_pct.unwrap() - mean).abs() < 1e-9);
        assert_eq!(memory.margin_pct, 22.3);
        assert_eq!(memory.last.map(|l| l.measured_mib), Some(14_000));
    }

    #[test]
    fn what_is_remembered_is_bounded_and_names_no_job_in_the_report() {
        let mut lessons = Lessons::default();
        for i in 0..SPEED_JOBS + 5 {
            lessons.speed(&format!("job-{i}"), "V100", 1.0);
        }
        assert_eq!(lessons.speeds.len(), SPEED_JOBS);
        assert!(!lessons.speeds.contains_key("job-0"));
        let report = serde_json::to_string(&lessons.report(0.0)).unwrap();
        assert!(!report.contains("job-"), "{report}");
        let mut declared = DeclaredModels::default();
        let model = ModelSummary {
            batch_size: 1,
            ..ModelSummary::default()
        };
        for i in 0..DECLARED_JOBS + 1 {
            declared.remember(&format!("j{i}"), &model);
        }
        assert!(declared.get("j0").is_none());
        assert_eq!(declared.get(&format!("j{DECLARED_JOBS}")), Some(&model));
    }
}
