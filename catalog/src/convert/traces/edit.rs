//! Edits of a converted trace: its clock compressed or stretched ([`rescale`]), its first
//! jobs kept ([`take_first`]), its longest jobs dropped ([`keep_shorter_than`]). Each keeps
//! the trace valid (sorted arrivals, one line per job).

use crate::error::{Error, Result};
use crate::trace::Trace;

/// Multiplies every arrival time of `trace` by `factor`, rounded to the millisecond.
///
/// Compresses (`factor` < 1) or stretches (> 1) a trace's clock without touching its jobs'
/// work, which raises or lowers the load it puts on a cluster: recorded traces were made for
/// clusters of another size. Rounding keeps written files short and readable; a millisecond
/// is far below any scheduling granularity, and rounding never reorders arrivals. Errors if
/// `factor` is not a positive finite number.
pub fn rescale(trace: &mut Trace, factor: f64) -> Result<()> {
    if !(factor.is_finite() && factor > 0.0) {
        return Err(Error::Input {
            origin: trace.origin.clone(),
            problem: format!("the time scale must be a positive number, got {factor}"),
        });
    }
    for job in &mut trace.jobs {
        job.arrival_s = round_ms(job.arrival_s * factor);
    }
    Ok(())
}

/// Keeps the first `n` jobs of `trace` (all of them if it has fewer): a shorter trace with the
/// same mix and arrival pattern, for quick runs.
pub fn take_first(trace: &mut Trace, n: usize) {
    trace.jobs.truncate(n);
    trace.lines.truncate(n);
}

/// Keeps the jobs of `trace` whose work takes at most `max_solo_s` alone on one GPU at
/// `throughput_of(job type)` (steps/s on a reference model); jobs of unknown throughput are
/// dropped too. Returns how many were dropped.
pub fn keep_shorter_than(
    trace: &mut Trace,
    max_solo_s: f64,
    throughput_of: impl Fn(&str) -> Option<f64>,
) -> usize {
    let before = trace.jobs.len();
    let (jobs, lines): (Vec<_>, Vec<_>) = std::mem::take(&mut trace.jobs)
        .into_iter()
        .zip(std::mem::take(&mut trace.lines))
        .filter(|(job, _)| {
            throughput_of(&job.job_type)
                .is_some_and(|tput| job.steps / (tput * f64::from(job.gpus)) <= max_solo_s)
        })
        .unzip();
    trace.jobs = jobs;
    trace.lines = lines;
    before - trace.jobs.len()
}

/// `seconds` rounded to the millisecond.
pub(crate) fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::trace::TraceJob;

    fn trace(arrivals: &[f64]) -> Trace {
        Trace {
            origin: "t".into(),
            jobs: arrivals
                .iter()
                .map(|&arrival_s| TraceJob {
                    arrival_s,
                    job_type: "A".into(),
                    gpus: 1,
                    steps: 10.0,
                })
                .collect(),
            lines: (2..).take(arrivals.len()).collect(),
        }
    }

    #[test]
    fn keeps_the_jobs_short_enough() {
        let mut t = trace(&[0.0, 1.0, 2.0]);
        t.jobs[1].steps = 1_000.0;
        t.jobs[2].job_type = "B".into();
        let dropped = keep_shorter_than(&mut t, 100.0, |n| (n == "A").then_some(1.0));
        assert_eq!(
            (dropped, t.jobs.len(), t.lines.as_slice()),
            (2, 1, [2].as_slice())
        );
    }

    #[test]
    fn rescales_arrivals_only() {
        let mut t = trace(&[0.0, 10.0, 33.0]);
        rescale(&mut t, 0.1).unwrap();
        let arrivals: Vec<f64> = t.jobs.iter().map(|j| j.arrival_s).collect();
        // Rounded to the millisecond: 3.3, not 3.3000000000000003.
        assert_eq!(arrivals, [0.0, 1.0, 3.3]);
        assert!(t.jobs.iter().all(|j| j.steps == 10.0));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = rescale(&mut t, bad).unwrap_err().to_string();
            assert!(e.starts_with("t: the time scale"), "{e}");
        }
    }

    #[test]
    fn takes_the_first_jobs() {
        let mut t = trace(&[0.0, 1.0, 2.0]);
        take_first(&mut t, 2);
        assert_eq!((t.jobs.len(), t.lines.as_slice()), (2, [2, 3].as_slice()));
        take_first(&mut t, 10);
        assert_eq!(t.jobs.len(), 2);
    }
}
