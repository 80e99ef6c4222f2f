//! Synthetic traces: Poisson arrivals of a weighted mix of job types.
//!
//! For experiments the recorded traces cannot run: a load swept from light to overloaded, a mix
//! of job types chosen on purpose, a seed per repetition. Every draw comes from one
//! Xoshiro256++ generator seeded by the spec, in a fixed order per job (gap, type, GPU count,
//! duration), and is computed from the generator's raw output rather than through `rand`'s
//! distributions (whose algorithms may change between versions): a spec names one trace.

use std::collections::HashSet;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::draw::unit;
use super::edit::round_ms;
use crate::error::{Error, Result};
use crate::trace::{Trace, TraceJob};

/// GPU counts of multi-GPU jobs, drawn uniformly: the sizes Gavel's Philly traces mostly use.
const MULTI_GPU: [u32; 3] = [2, 4, 8];

/// What a synthetic trace looks like.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    /// Jobs in the trace (≥ 1).
    pub jobs: usize,
    /// Mean time between two arrivals, s (> 0): the rate of the Poisson process is its
    /// inverse.
    pub mean_interarrival_s: f64,
    /// Job types (catalog names) and their weights (> 0; they need not sum to 1): a job's type
    /// is drawn with probability weight / sum of weights.
    pub job_types: Vec<(String, f64)>,
    /// Probability that a job needs several GPUs (0..=1); such a job needs 2, 4 or 8, each
    /// equally likely.
    pub multi_gpu_share: f64,
    /// Range of a job's solo duration on the reference GPU model, s: drawn log-uniformly
    /// (uniform in log time, as job durations spread over orders of magnitude), `0 < lo ≤ hi`.
    pub duration_s: (f64, f64),
    /// Seed of every draw.
    pub seed: u64,
}

impl SyntheticSpec {
    /// Checks the spec; errors name the field at fault.
    pub fn check(&self) -> Result<()> {
        let bad = |field: &str, problem: String| Error::Input {
            origin: format!("synthetic trace spec `{field}`"),
            problem,
        };
        if self.jobs == 0 {
            return Err(bad("jobs", "must be at least 1".into()));
        }
        let gap = self.mean_interarrival_s;
        if !(gap.is_finite() && gap > 0.0) {
            return Err(bad(
                "mean_interarrival_s",
                format!("must be positive, got {gap}"),
            ));
        }
        if self.job_types.is_empty() {
            return Err(bad("job_types", "names no job type".into()));
        }
        let mut seen = HashSet::new();
        for (name, weight) in &self.job_types {
            if name.is_empty() {
                return Err(bad("job_types", "holds an empty name".into()));
            }
            if !seen.insert(name) {
                // A repeated type would silently add its weights; say what was meant instead.
                return Err(bad("job_types", format!("names `{name}` twice")));
            }
            if !(weight.is_finite() && *weight > 0.0) {
                return Err(bad(
                    "job_types",
                    format!("the weight of `{name}` must be positive, got {weight}"),
                ));
            }
        }
        let share = self.multi_gpu_share;
        if !(0.0..=1.0).contains(&share) {
            return Err(bad(
                "multi_gpu_share",
                format!("must be a probability in 0..=1, got {share}"),
            ));
        }
        let (lo, hi) = self.duration_s;
        if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && lo <= hi) {
            return Err(bad(
                "duration_s",
                format!("must be a range 0 < lo ≤ hi of finite seconds, got ({lo}, {hi})"),
            ));
        }
        Ok(())
    }
}

/// Generates the trace `spec` describes.
///
/// The first job arrives at 0 and each next one an exponential gap later (inverse CDF of a
/// uniform draw: `-mean · ln(1 − u)`); arrivals are rounded to the millisecond so the file
/// reads well, far below any scheduling granularity. A job's type is drawn by weight, its GPU
/// count is 1 or (with probability `multi_gpu_share`) one of 2, 4 and 8, and its solo duration
/// on one GPU of the reference model log-uniformly from `duration_s`; `steps` = duration ×
/// `throughput_of(type)`, the type's solo throughput on that model, so that the job alone
/// on one such GPU takes the duration drawn (on `n` GPUs, which the simulator scales
/// linearly, a job takes `1/n` of it). The trace's `origin` names the seed and its `lines` are
/// the rows of its own CSV form ([`Trace::to_csv`]).
///
/// Errors: the spec's ([`SyntheticSpec::check`]), and a type `throughput_of` has no positive
/// throughput for (checked for every type before any draw).
pub fn synthetic_trace(
    spec: &SyntheticSpec,
    throughput_of: impl Fn(&str) -> Option<f64>,
) -> Result<Trace> {
    spec.check()?;
    let mut types = Vec::with_capacity(spec.job_types.len());
    let mut total_weight = 0.0;
    for (name, weight) in &spec.job_types {
        let throughput = throughput_of(name)
            .filter(|t| t.is_finite() && *t > 0.0)
            .ok_or_else(|| Error::Input {
                origin: "synthetic trace spec `job_types`".into(),
                problem: format!(
                    "job type `{name}` has no positive solo throughput on the reference GPU model"
                ),
            })?;
        total_weight += weight;
        types.push((name.as_str(), total_weight, throughput));
    }
    let (lo, hi) = spec.duration_s;
    let (ln_lo, ln_hi) = (lo.ln(), hi.ln());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut clock = 0.0_f64;
    let mut trace = Trace {
        origin: format!("synthetic trace (seed {})", spec.seed),
        ..Trace::default()
    };
    for n in 0..spec.jobs {
        if n > 0 {
            // 1 − u lies in (0, 1], so the logarithm is finite.
            clock += -spec.mean_interarrival_s * (1.0 - unit(&mut rng)).ln();
        }
        let threshold = unit(&mut rng) * total_weight;
        // The last type takes what rounding leaves above the final cumulative weight.
        let (name, _, throughput) = types
            .iter()
            .find(|(_, cumulative, _)| threshold < *cumulative)
            .or(types.last())
            .copied()
            .unwrap_or(("", 0.0, 0.0));
        let multi = unit(&mut rng) < spec.multi_gpu_share;
        let size = unit(&mut rng);
        let gpus = if multi {
            MULTI_GPU[((size * MULTI_GPU.len() as f64) as usize).min(MULTI_GPU.len() - 1)]
        } else {
            1
        };
        // Clamped: exp(ln) may land a hair outside the range.
        let duration_s = (ln_lo + unit(&mut rng) * (ln_hi - ln_lo))
            .exp()
            .clamp(lo, hi);
        trace.jobs.push(TraceJob {
            arrival_s: round_ms(clock),
            job_type: name.to_owned(),
            gpus,
            steps: duration_s * throughput,
        });
        trace.lines.push(n as u64 + 2);
    }
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SyntheticSpec {
        SyntheticSpec {
            jobs: 2000,
            mean_interarrival_s: 30.0,
            job_types: vec![("A".into(), 3.0), ("B".into(), 1.0)],
            multi_gpu_share: 0.2,
            duration_s: (60.0, 6000.0),
            seed: 42,
        }
    }

    fn throughput(name: &str) -> Option<f64> {
        match name {
            "A" => Some(2.0),
            "B" => Some(0.5),
            _ => None,
        }
    }

    #[test]
    fn same_seed_same_trace() {
        let a = synthetic_trace(&spec(), throughput).unwrap();
        let b = synthetic_trace(&spec(), throughput).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_csv(), b.to_csv());
        let other = synthetic_trace(&SyntheticSpec { seed: 43, ..spec() }, throughput).unwrap();
        assert_ne!(a.jobs, other.jobs);
    }

    #[test]
    fn draws_follow_the_spec() {
        let trace = synthetic_trace(&spec(), throughput).unwrap();
        let jobs = &trace.jobs;
        assert_eq!(jobs.len(), 2000);
        assert_eq!(jobs[0].arrival_s, 0.0);
        assert!(jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
        // Mean gap near 30 s (1,999 gaps: standard error ≈ 0.7 s).
        let mean_gap = jobs[1999].arrival_s / 1999.0;
        assert!((27.0..33.0).contains(&mean_gap), "{mean_gap}");
        // Weights 3:1.
        let a = jobs.iter().filter(|j| j.job_type == "A").count();
        assert!((1400..1600).contains(&a), "{a}");
        // A fifth multi-GPU, all of sizes 2, 4, 8.
        let multi: Vec<u32> = jobs.iter().map(|j| j.gpus).filter(|g| *g > 1).collect();
        assert!((330..470).contains(&multi.len()), "{}", multi.len());
        assert!(multi.iter().all(|g| MULTI_GPU.contains(g)));
        for g in MULTI_GPU {
            assert!(multi.contains(&g));
        }
        // Durations in range; log-uniform, so the median near the geometric mean, 600 s.
        let mut durations: Vec<f64> = jobs
            .iter()
            .map(|j| j.steps / throughput(&j.job_type).unwrap())
            .collect();
        assert!(durations.iter().all(|d| (60.0..=6000.0).contains(d)));
        durations.sort_by(f64::total_cmp);
        let median = durations[1000];
        assert!((450.0..800.0).contains(&median), "{median}");
        let again = Trace::parse(&trace.to_csv(), "s.csv").unwrap();
        assert_eq!(again.jobs, trace.jobs);
        assert_eq!(again.lines, trace.lines);
    }

    #[test]
    fn a_point_range_and_no_multi_gpu_jobs() {
        let spec = SyntheticSpec {
            jobs: 50,
            duration_s: (100.0, 100.0),
            multi_gpu_share: 0.0,
            ..spec()
        };
        let trace = synthetic_trace(&spec, throughput).unwrap();
        assert!(trace.jobs.iter().all(|j| j.gpus == 1));
        assert!(trace.jobs.iter().all(|j| {
            let d = j.steps / throughput(&j.job_type).unwrap();
            (d - 100.0).abs() < 1e-9
        }));
    }

    #[test]
    fn bad_specs_are_named() {
        let e = |spec: SyntheticSpec| synthetic_trace(&spec, throughput).unwrap_err().to_string();
        assert!(e(SyntheticSpec { jobs: 0, ..spec() }).contains("`jobs`"));
        let gap = e(SyntheticSpec {
            mean_interarrival_s: f64::NAN,
            ..spec()
        });
        assert!(
            gap.contains("`mean_interarrival_s`: must be positive"),
            "{gap}"
        );
        assert!(
            e(SyntheticSpec {
                job_types: vec![],
                ..spec()
            })
            .contains("names no job type")
        );
        let weights = |w: f64| SyntheticSpec {
            job_types: vec![("A".into(), w)],
            ..spec()
        };
        assert!(e(weights(0.0)).contains("the weight of `A` must be positive"));
        assert!(e(weights(f64::INFINITY)).contains("the weight of `A`"));
        let twice = SyntheticSpec {
            job_types: vec![("A".into(), 1.0), ("A".into(), 1.0)],
            ..spec()
        };
        assert!(e(twice).contains("names `A` twice"));
        let share = e(SyntheticSpec {
            multi_gpu_share: 1.5,
            ..spec()
        });
        assert!(share.contains("`multi_gpu_share`"));
        for range in [(10.0, 1.0), (0.0, 1.0), (1.0, f64::INFINITY)] {
            let problem = e(SyntheticSpec {
                duration_s: range,
                ..spec()
            });
            assert!(problem.contains("`duration_s`"), "{problem}");
        }
        let unknown = SyntheticSpec {
            job_types: vec![("A".into(), 1.0), ("Z".into(), 1.0)],
            ..spec()
        };
        assert!(e(unknown).contains("job type `Z` has no positive solo throughput"));
    }
}
