//! What a run measures, and the report it yields.

use serde::Serialize;

use crate::settings::Settings;

/// Mean and percentiles of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Summary {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
}

impl Summary {
    /// The summary of `values` (sorted in place); `None` when empty.
    pub fn of(values: &mut [f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        Some(Self {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            p50: percentile(values, 0.50),
            p95: percentile(values, 0.95),
        })
    }
}

/// The `q` quantile of sorted `values` (nearest rank).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One point of the cluster's state over time (averaged over a bin).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimePoint {
    /// Start of the bin, s.
    pub t_s: f64,
    /// GPUs with at least one job, % of the cluster.
    pub busy_gpus_pct: f64,
    /// Jobs waiting in the queue.
    pub queued: f64,
}

/// One job's final run, for a look at single jobs (`tandem simulate --jobs`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRecord {
    /// The job's row in the trace (0-based).
    pub job: usize,
    /// Its type.
    pub job_type: String,
    /// GPUs it used.
    pub gpus: u32,
    /// Arrival, s from the start of the trace.
    pub arrival_s: f64,
    /// Its first start, s.
    pub first_start_s: f64,
    /// The start of its final run (later than the first after an OOM), s.
    pub final_start_s: f64,
    /// Its finish, s.
    pub finish_s: f64,
    /// The GPU model of its final run.
    pub gpu_model: String,
    /// Its solo time on that model, s.
    pub solo_s: f64,
    /// Whether it shared its GPU during its final run.
    pub shared: bool,
}

/// What one policy achieved on the trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyReport {
    /// The policy.
    pub policy: String,
    /// Why it could not run on these inputs (then every figure is empty).
    pub not_applicable: Option<String>,
    /// Jobs finished.
    pub jobs: usize,
    /// Job completion time (arrival to finish), s.
    pub jct_s: Summary,
    /// Queueing delay (arrival to first start), s.
    pub queueing_s: Summary,
    /// Last finish, s from the start of the trace.
    pub makespan_s: f64,
    /// Time-weighted share of GPUs running at least one job, from 0 to the makespan, %.
    pub gpu_util_pct: f64,
    /// Time-weighted share of the cluster's GPU memory in use, %, when every job type's
    /// memory is known (else `null`).
    pub memory_util_pct: Option<f64>,
    /// Jobs that shared a GPU during their final run.
    pub shared_jobs: usize,
    /// Individual slowdown of those jobs, % (`null` when none shared).
    pub slowdown_pct: Option<Summary>,
    /// Share of them slowed by more than 50%, %.
    pub slowdown_over_50_pct: f64,
    /// Packing saving of each GPU busy period that held two or more jobs, % (`null` when none).
    pub packing_saving_pct: Option<Summary>,
    /// Busy periods with two or more jobs.
    pub groups: usize,
    /// Jobs that failed with an OOM (each was resubmitted to run alone).
    pub ooms: u64,
    /// Of `ooms`, those whose group needed more memory than its GPU has; the others failed
    /// beside a partner the catalogs never measured, which this world cannot run.
    pub memory_ooms: u64,
    /// Co-locations reported back to the policy during the run.
    pub outcomes: u64,
    /// Jobs started by the policy.
    pub decisions: u64,
    /// Starts per second of wall time spent deciding.
    pub decisions_per_s: f64,
    /// Wall time of the whole replay, s.
    pub wall_s: f64,
    /// JCT CDF, for plots: `(JCT s, share of jobs ≤ it)`, at most 200 points.
    pub jct_cdf: Vec<(f64, f64)>,
    /// The cluster over time, for plots (at most 200 bins).
    pub timeline: Vec<TimePoint>,
    /// Every shared job's individual slowdown, %, for the distribution plot.
    pub slowdowns_pct: Vec<f64>,
    /// Every finished job's final run, in order of finish; not in the JSON report (see
    /// `tandem simulate --jobs`).
    #[serde(skip)]
    pub finished: Vec<JobRecord>,
}

impl PolicyReport {
    /// The row of a policy that cannot run on these inputs.
    pub fn not_applicable(policy: &str, why: String) -> Self {
        Self {
            policy: policy.to_owned(),
            not_applicable: Some(why),
            jobs: 0,
            jct_s: Summary::default(),
            queueing_s: Summary::default(),
            makespan_s: 0.0,
            gpu_util_pct: 0.0,
            memory_util_pct: None,
            shared_jobs: 0,
            slowdown_pct: None,
            slowdown_over_50_pct: 0.0,
            packing_saving_pct: None,
            groups: 0,
            ooms: 0,
            memory_ooms: 0,
            outcomes: 0,
            decisions: 0,
            decisions_per_s: 0.0,
            wall_s: 0.0,
            jct_cdf: Vec::new(),
            timeline: Vec::new(),
            slowdowns_pct: Vec::new(),
            finished: Vec::new(),
        }
    }
}

/// The inputs of a run, as the report names them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inputs {
    /// The catalogs merged into the ground truth.
    pub catalogs: Vec<String>,
    /// The trace (file or description).
    pub trace: String,
    /// Jobs in it.
    pub jobs: usize,
    /// The cluster (file or description).
    pub cluster: String,
    /// GPUs per model, `(model, count)`.
    pub gpus: Vec<(String, usize)>,
    /// Where the utilization baselines' utilization comes from, when the engine predicted it
    /// from declared models.
    pub predicted_utilization: Option<PredictedUtilization>,
}

/// Job types whose GPU utilization the engine predicted from their declared models.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictedUtilization {
    /// The declared-models file (or description).
    pub declared_models: String,
    /// Job types given a prediction.
    pub job_types: usize,
}

impl PredictedUtilization {
    /// One sentence for a person: which policies pack by what, from where.
    pub fn note(&self) -> String {
        format!(
            "ffd-util and lucid-style pack by GPU utilization the engine predicts from the declared \
             models of {} job types ({}), where the catalogs measured none",
            self.job_types, self.declared_models
        )
    }
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The command that reproduces every number of this report.
    pub command: String,
    /// What was replayed.
    pub inputs: Inputs,
    /// The settings, identical for every policy.
    pub settings: Settings,
    /// One entry per policy, in the order run.
    pub policies: Vec<PolicyReport>,
}

/// Accumulates a run's measurements.
#[derive(Debug, Clone)]
pub(crate) struct Collector {
    jct: Vec<f64>,
    queueing: Vec<f64>,
    slowdowns: Vec<f64>,
    savings: Vec<f64>,
    makespan: f64,
    busy_gpu_s: f64,
    memory_mib_s: f64,
    total_memory_mib: Option<f64>,
    /// `(start, length, busy GPUs, queued)` of every interval between events.
    intervals: Vec<(f64, f64, usize, usize)>,
    ooms: u64,
    memory_ooms: u64,
    outcomes: u64,
    decisions: u64,
    deciding_s: f64,
    finished: Vec<JobRecord>,
}

impl Collector {
    pub(crate) fn new(jobs: usize, total_memory_mib: Option<f64>) -> Self {
        Self {
            jct: Vec::with_capacity(jobs),
            queueing: Vec::with_capacity(jobs),
            slowdowns: Vec::new(),
            savings: Vec::new(),
            makespan: 0.0,
            busy_gpu_s: 0.0,
            memory_mib_s: 0.0,
            total_memory_mib,
            intervals: Vec::new(),
            ooms: 0,
            memory_ooms: 0,
            outcomes: 0,
            decisions: 0,
            deciding_s: 0.0,
            finished: Vec::new(),
        }
    }

    pub(crate) fn tracks_memory(&self) -> bool {
        self.total_memory_mib.is_some()
    }

    pub(crate) fn interval(
        &mut self,
        start: f64,
        length: f64,
        busy: usize,
        queued: usize,
        memory_mib: Option<f64>,
    ) {
        self.busy_gpu_s += busy as f64 * length;
        self.memory_mib_s += memory_mib.unwrap_or_default() * length;
        self.intervals.push((start, length, busy, queued));
    }

    pub(crate) fn decision(&mut self, seconds: f64, starts: usize) {
        self.deciding_s += seconds;
        self.decisions += starts as u64;
    }

    pub(crate) fn outcome(&mut self) {
        self.outcomes += 1;
    }

    /// A job failed because its group could not run; `over_memory` when the group needed
    /// more memory than its GPU has.
    pub(crate) fn oom(&mut self, over_memory: bool) {
        self.ooms += 1;
        self.memory_ooms += u64::from(over_memory);
    }

    pub(crate) fn packing_saving(&mut self, saving: f64) {
        self.savings.push(100.0 * saving);
    }

    pub(crate) fn finished(
        &mut self,
        arrival: f64,
        first_start: f64,
        finish: f64,
        slowdown: Option<f64>,
    ) {
        self.jct.push(finish - arrival);
        self.queueing.push(first_start - arrival);
        self.makespan = self.makespan.max(finish);
        if let Some(s) = slowdown {
            self.slowdowns.push(100.0 * s);
        }
    }

    /// Keeps a finished job's final run for [`PolicyReport::finished`].
    pub(crate) fn record(&mut self, record: JobRecord) {
        self.finished.push(record);
    }

    pub(crate) fn report(mut self, policy: &str, gpus: usize, wall_s: f64) -> PolicyReport {
        let span = self.makespan.max(f64::MIN_POSITIVE);
        let jobs = self.jct.len();
        let jct = Summary::of(&mut self.jct).unwrap_or_default();
        let cdf = cdf(&self.jct);
        let slowdowns = self.slowdowns.clone();
        let over = self.slowdowns.iter().filter(|s| **s > 50.0).count();
        PolicyReport {
            policy: policy.to_owned(),
            not_applicable: None,
            jobs,
            jct_s: jct,
            queueing_s: Summary::of(&mut self.queueing).unwrap_or_default(),
            makespan_s: self.makespan,
            gpu_util_pct: 100.0 * self.busy_gpu_s / (gpus as f64 * span),
            memory_util_pct: self
                .total_memory_mib
                .map(|total| 100.0 * self.memory_mib_s / (total * span)),
            shared_jobs: self.slowdowns.len(),
            slowdown_pct: Summary::of(&mut self.slowdowns),
            slowdown_over_50_pct: if slowdowns.is_empty() {
                0.0
            } else {
                100.0 * over as f64 / slowdowns.len() as f64
            },
            groups: self.savings.len(),
            packing_saving_pct: Summary::of(&mut self.savings),
            ooms: self.ooms,
            memory_ooms: self.memory_ooms,
            outcomes: self.outcomes,
            decisions: self.decisions,
            decisions_per_s: if self.deciding_s > 0.0 {
                self.decisions as f64 / self.deciding_s
            } else {
                0.0
            },
            wall_s,
            jct_cdf: cdf,
            timeline: timeline(&self.intervals, gpus, span),
            slowdowns_pct: slowdowns,
            finished: self.finished,
        }
    }
}

/// At most 200 points of the CDF of sorted `values`, as `(value, share of values ≤ it)`.
pub(crate) fn cdf(sorted: &[f64]) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(200);
    let mut points: Vec<(f64, f64)> = (step - 1..n)
        .step_by(step)
        .map(|i| (sorted[i], (i + 1) as f64 / n as f64))
        .collect();
    if points.last().is_none_or(|p| p.1 < 1.0) {
        points.push((sorted[n - 1], 1.0));
    }
    points
}

/// Time-weighted means of busy GPUs and queue length in 200 equal bins over `[0, span]`.
fn timeline(intervals: &[(f64, f64, usize, usize)], gpus: usize, span: f64) -> Vec<TimePoint> {
    const BINS: usize = 200;
    let width = span / BINS as f64;
    let mut busy = vec![0.0; BINS];
    let mut queued = vec![0.0; BINS];
    for &(start, length, b, q) in intervals {
        let (mut t, end) = (start, (start + length).min(span));
        while t < end {
            let bin = ((t / width) as usize).min(BINS - 1);
            let bin_end = ((bin + 1) as f64 * width).min(end);
            let part = (bin_end - t).max(0.0);
            busy[bin] += b as f64 * part;
            queued[bin] += q as f64 * part;
            if part <= 0.0 {
                break;
            }
            t = bin_end;
        }
    }
    (0..BINS)
        .map(|bin| TimePoint {
            t_s: bin as f64 * width,
            busy_gpus_pct: 100.0 * busy[bin] / (width * gpus.max(1) as f64),
            queued: queued[bin] / width,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_and_cdfs_of_small_samples() {
        let mut v = vec![3.0, 1.0, 2.0, 4.0];
        let s = Summary::of(&mut v).unwrap();
        assert_eq!((s.mean, s.p50, s.p95), (2.5, 2.0, 4.0));
        assert!(Summary::of(&mut []).is_none());
        assert_eq!(cdf(&[1.0, 2.0]), vec![(1.0, 0.5), (2.0, 1.0)]);
        let many: Vec<f64> = (0..1000).map(f64::from).collect();
        let points = cdf(&many);
        assert!(points.len() <= 201 && points.last() == Some(&(999.0, 1.0)));
    }

    #[test]
    fn the_timeline_averages_over_time() {
        // 2 of 4 GPUs busy for the first half, 4 for the second.
        let points = timeline(&[(0.0, 50.0, 2, 1), (50.0, 50.0, 4, 0)], 4, 100.0);
        assert_eq!(points.len(), 200);
        assert!((points[0].busy_gpus_pct - 50.0).abs() < 1e-9);
        assert!((points[199].busy_gpus_pct - 100.0).abs() < 1e-9);
        assert!((points[0].queued - 1.0).abs() < 1e-9);
    }
}
